//! The planner's safety mechanisms, by name. Every one is on in the product. The test
//! bed switches one off (`flightdeck sim swarm --unsafe-disable`) to prove that its
//! invariants notice when it is missing: a check that cannot fail proves nothing.

use std::collections::BTreeSet;

/// A safety mechanism of the planner that a test may switch off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    /// F10: at most `maxUnhealthy` of a set under remediation at once.
    RemediationBudget,
    /// F10: no node-based remediation on a node list that is missing, empty, stale or
    /// all NotReady.
    BlindObserverGuard,
    /// F11: a slot or object re-created `churnLimit` times in `churnWindow` stops.
    ChurnBreaker,
    /// A machine whose node is live is deleted only once its node is drained (cordoned,
    /// its pods evicted), whatever the cloud and the cause: a rollout, a scale-down, a
    /// repair, KubeVirt's evacuation (F9). Off, machines go with their pods.
    DrainBeforeDelete,
    /// A drain that does not finish within its deadline (`nodeDrainTimeout`, KubeVirt's
    /// `drainTimeout` for F9) ends, so no machine (and no infra node) is held for ever.
    DrainDeadline,
    /// F1: a shared template or image is deleted only by the last cluster holding it.
    TemplateLastHolder,
    /// F2: a rollout brings the replacement up before it removes an outdated machine,
    /// and removes one only while enough others are healthy.
    SurgeFirst,
    /// The cluster is reported Ready only once its machines serve (every set up to
    /// date and serving, its infrastructure complete). Off, it lies: Ready as soon as
    /// every machine has been asked for.
    HonestReady,
    /// F12: a deleted cluster's record goes only once the cloud confirms that nothing
    /// it owned is left. Off, it lies: the record is dropped at once and the objects
    /// are left behind.
    DeleteBeforeForget,
    /// kubeadm: a joining machine's bootstrap token is moved on while the machine has
    /// not joined. Off, a machine that boots slower than the token's lifetime cannot
    /// join.
    TokenRefresh,
}

impl Mechanism {
    pub const ALL: [Mechanism; 10] = [
        Mechanism::RemediationBudget,
        Mechanism::BlindObserverGuard,
        Mechanism::ChurnBreaker,
        Mechanism::DrainBeforeDelete,
        Mechanism::DrainDeadline,
        Mechanism::TemplateLastHolder,
        Mechanism::SurgeFirst,
        Mechanism::HonestReady,
        Mechanism::DeleteBeforeForget,
        Mechanism::TokenRefresh,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::RemediationBudget => "remediation-budget",
            Mechanism::BlindObserverGuard => "blind-observer-guard",
            Mechanism::ChurnBreaker => "churn-breaker",
            Mechanism::DrainBeforeDelete => "drain-on-delete",
            Mechanism::DrainDeadline => "drain-deadline",
            Mechanism::TemplateLastHolder => "template-last-holder",
            Mechanism::SurgeFirst => "surge-first",
            Mechanism::HonestReady => "honest-ready",
            Mechanism::DeleteBeforeForget => "delete-before-forget",
            Mechanism::TokenRefresh => "token-refresh",
        }
    }
}

/// The mechanisms switched off; empty (all on) by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disabled(BTreeSet<Mechanism>);

impl Disabled {
    pub fn of(mechanisms: impl IntoIterator<Item = Mechanism>) -> Self {
        Disabled(mechanisms.into_iter().collect())
    }

    /// Whether `m` is on (the product's only state).
    pub fn on(&self, m: Mechanism) -> bool {
        !self.0.contains(&m)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
