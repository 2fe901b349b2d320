//! What an engine is configured with, how it fails, and the store tables it keeps: the
//! leaves the engine, its driver and a reconcile share.

use flightdeck_cloud::Timestamp;
use flightdeck_plan::PlanOptions;
use flightdeck_spec::Duration;
use flightdeck_store::StoreError;

use crate::backoff::BackoffPolicy;

/// The store table that holds each cluster's spec, by name.
pub const T_SPEC: &str = "spec";
pub(crate) const T_MEMORY: &str = "memory";

/// Cluster `name`'s spec as the store keeps it in [`T_SPEC`]. Every read of a stored
/// spec goes through here: one stored before kubeadm became the default bootstrap has
/// no `spec.bootstrap` and is read as `provider: none`, as it was made
/// ([`flightdeck_spec::bootstrap::Bootstrap::stored_before_kubeadm`]).
pub fn stored_spec(
    store: &flightdeck_store::Store,
    name: &str,
) -> Result<Option<flightdeck_spec::Cluster>, StoreError> {
    let Some(bytes) = store.get_raw(T_SPEC, name)? else {
        return Ok(None);
    };
    let corrupt = |message: String| StoreError::Corrupt {
        path: store.describe(),
        table: T_SPEC.into(),
        key: name.into(),
        message,
    };
    let value =
        serde_json::from_slice::<serde_json::Value>(&bytes).map_err(|e| corrupt(e.to_string()))?;
    let value = flightdeck_spec::bootstrap::Bootstrap::stored_before_kubeadm(value);
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| corrupt(e.to_string()))
}
pub(crate) const T_STATUS: &str = "status";

/// Conflicts (409 busy) in a row that are retried quickly before backoff grows.
pub const CONFLICTS_BEFORE_BACKOFF: u32 = 10;

/// The most clusters one engine manages; a bound on every per-cluster structure.
pub const CLUSTERS_MAX: usize = 4_096;

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Reconciles run together at most.
    pub concurrency_max: usize,
    pub backoff: BackoffPolicy,
    /// How soon to look again after Octavia answered 409 (busy).
    pub conflict_retry: Duration,
    /// Refuse deletions of objects without the cluster's UID tag. Always on in the
    /// product; a test switches it off to prove the `onlyOwned` invariant notices.
    pub ownership_check: bool,
    /// Owned means carrying this cluster's UID tag. Always on in the product; off, the
    /// check lies: any flightdeck cluster's tag passes (a test switches it off to prove
    /// that `onlyOwned` notices a cluster acting on another's objects).
    pub cluster_ownership: bool,
    pub plan: PlanOptions,
    /// How cluster secrets are kept at rest. `None`: sealed under a key made for this
    /// engine and kept nowhere (a store that lives no longer than the engine); such an
    /// engine refuses a store that already holds sealed secrets.
    pub secrets: Option<crate::secrets::SecretsAtRest>,
    /// Where joining machines' bootstrap tokens come from: the operating system's
    /// secure generator in the product; a seed in a simulated run that must replay.
    pub tokens: crate::bootstrap::TokenSource,
}

/// What the ownership check keeps a cluster's lists and deletions to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnershipScope {
    /// No check (a test's switch).
    Off,
    /// Anything some flightdeck cluster owns (a test's lie).
    AnyCluster,
    /// What this cluster owns: the product.
    Cluster,
}

impl OwnershipScope {
    /// Whether an object with `tags` passes for `owner`'s.
    pub fn keeps(self, owner: &flightdeck_cloud::Ownership, tags: &[String]) -> bool {
        match self {
            OwnershipScope::Off => true,
            OwnershipScope::AnyCluster => flightdeck_cloud::ownership::uid_of(tags).is_some(),
            OwnershipScope::Cluster => owner.owns(tags),
        }
    }
}

impl EngineConfig {
    /// The ownership check this engine applies.
    pub fn ownership(&self) -> OwnershipScope {
        match (self.ownership_check, self.cluster_ownership) {
            (false, _) => OwnershipScope::Off,
            (true, false) => OwnershipScope::AnyCluster,
            (true, true) => OwnershipScope::Cluster,
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            concurrency_max: 4,
            backoff: BackoffPolicy::default(),
            conflict_retry: Duration::from_secs(2),
            ownership_check: true,
            cluster_ownership: true,
            plan: PlanOptions::default(),
            secrets: None,
            tokens: crate::bootstrap::TokenSource::Secure,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cluster {0} is being deleted; wait until it is gone before applying it again")]
    Deleting(String),
    #[error("cluster {0} is not known to this flightdeck")]
    UnknownCluster(String),
    /// The cluster was let go of while a reconcile of it ran, and that reconcile is still
    /// out: nothing of the cluster can be decided here until it is back.
    #[error(
        "cluster {0} is being handed over: a reconcile started under the claim this replica lost is still out; try again in a moment"
    )]
    HandingOver(String),
    #[error(
        "cluster {cluster}: {field} cannot change once the cluster exists ({from} → {to}); \
         create a new cluster instead"
    )]
    Immutable {
        cluster: String,
        field: &'static str,
        from: String,
        to: String,
    },
    #[error(
        "cluster {0} is not being deleted: --forget only lets a deletion end that sees none of the cluster's recorded objects"
    )]
    NotDeleting(String),
    /// Two clusters whose pod CIDRs overlap route pods on one router: each would take
    /// the other's routes for its own (F7).
    #[error("{0}; give one of them a pod CIDR of its own")]
    RoutesCollide(String),
    #[error("this flightdeck already manages {CLUSTERS_MAX} clusters")]
    TooManyClusters,
    /// An injected crash (see [`crate::EngineFaults`]); the engine must be dropped and
    /// rebuilt from the store.
    #[error("the engine crashed (injected) while reconciling {0}")]
    Crashed(String),
    #[error(transparent)]
    Secrets(#[from] crate::secrets::SecretsError),
    #[error(
        "cluster {0} boots with spec.bootstrap.provider none: flightdeck holds no CA of it (use the kubeconfig your own bootstrap made)"
    )]
    NoPki(String),
    #[error(
        "cluster {0}: its API endpoint is not known yet (its load balancer has no address yet, or the cloud gives none flightdeck knows); try again once it is built"
    )]
    EndpointUnknown(String),
    #[error("{0}")]
    Kubeconfig(String),
    #[error("{0}")]
    Invalid(String),
}

/// What was asked of a cluster while its reconcile ran.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// A deletion requested at this time.
    pub delete: Option<Timestamp>,
    /// Its churn breakers are to be closed.
    pub resume: bool,
    /// It is to adopt what an earlier cluster of its name left.
    pub adopt: bool,
    /// Its deletion may end without seeing its recorded objects.
    pub forget: bool,
    /// Something asked for a reconcile now (a new spec).
    pub again: bool,
    /// The cluster was let go of (another replica claimed it) while this reconcile ran:
    /// its outcome is dropped, whatever happens to the cluster here since.
    pub let_go: bool,
}
