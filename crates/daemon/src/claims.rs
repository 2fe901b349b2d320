//! Which clusters this process drives when it is one replica among several (`serve
//! --store etcd://…`). Without replicas there is no [`Claims`]: the process drives
//! every cluster in its store.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flightdeck_store::Store;
use tokio::sync::watch;

use crate::fleet::Fleet;

/// How a replica joins the others on etcd.
#[derive(Clone, Debug)]
pub struct ReplicaOptions {
    pub etcd: flightdeck_etcd::EtcdOptions,
    /// This replica's name among the live ones (unique while it lives).
    pub name: String,
    /// The lease's TTL: how long a dead replica's clusters wait for another.
    pub ttl: Duration,
}

/// A replica's membership: its claims, the loop that keeps them, and its leaving.
pub trait Member: Claims {
    /// Starts the loop that renews the lease and shares the clusters, until `stop`.
    fn start(
        self: Arc<Self>,
        store: Arc<Store>,
        fleet: Arc<Fleet>,
        stop: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()>;
    /// Leaves at once (the lease is revoked), so others take over without waiting.
    fn leave(&self);
}

/// Joins the replicas on etcd as `options.name`, whose API answers at `address`.
#[cfg(feature = "etcd")]
pub fn join(options: &ReplicaOptions, address: &str) -> anyhow::Result<(Store, Arc<dyn Member>)> {
    let (store, m) = crate::replicas::Membership::join(options, address).map_err(|e| {
        anyhow::anyhow!(
            "cannot join the replicas on {}: {e}",
            options.etcd.describe()
        )
    })?;
    Ok((store, m))
}

/// Without the etcd client there are no replicas.
#[cfg(not(feature = "etcd"))]
pub fn join(options: &ReplicaOptions, _address: &str) -> anyhow::Result<(Store, Arc<dyn Member>)> {
    anyhow::bail!(
        "--store {}: this flightdeck was built without the etcd client; build it with `cargo build --release -p flightdeck --features etcd` (it needs protoc, Debian's protobuf-compiler)",
        options.etcd.describe()
    )
}

/// What the fleet asks of this replica's claims; the etcd replica loop answers it.
pub trait Claims: Send + Sync {
    /// Whether this replica holds `cluster` now.
    fn holds(&self, cluster: &str) -> bool;
    /// Every cluster this replica holds now, with the claim revision it holds it under:
    /// a cluster claimed again under a new revision is taken up afresh from the store.
    fn held(&self) -> BTreeMap<String, i64>;
    /// What this replica names itself with on the cloud calls it makes for `cluster`
    /// (`X-Flightdeck-Caller`): `replica=NAME claim=REVISION`.
    fn caller(&self, cluster: &str) -> Option<String>;
    /// Asked right before each cloud request of a reconcile of `cluster` that starts
    /// now: whether the claim it starts under still holds (see
    /// `flightdeck_http::with_send_guard`).
    fn send_guard(&self, cluster: &str) -> Option<flightdeck_http::SendGuard>;
    /// Who holds `cluster`, for a request this replica cannot serve, e.g. `replica r2
    /// (https://10.0.0.2:7443)`.
    fn holder(&self, cluster: &str) -> String;
}
