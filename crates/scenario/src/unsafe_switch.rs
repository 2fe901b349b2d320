//! The safety mechanisms `sim swarm --unsafe-disable` switches off, to prove the swarm
//! notices each one missing (testing the tests).

use flightdeck_plan::Mechanism;
use serde::Serialize;

/// A safety mechanism a test may switch off to prove the swarm notices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unsafe {
    /// Roll the control plane on the load balancer's word alone (seed 001).
    MemberGate,
    /// Let deletions through without checking the target's ownership tag.
    OwnershipCheck,
    /// Check only that an object is some flightdeck cluster's, not this cluster's: a
    /// lie that lets a cluster act on another's objects.
    ClusterOwnership,
    /// One of the planner's own mechanisms.
    Plan(Mechanism),
    /// A replica's own-clock lease deadline (split-brain seeds only).
    LeaseDeadline,
    /// The store's compare of a commit's claim revision (split-brain seeds only).
    ClaimRevision,
}

/// The fences of replicas on a shared store: only split-brain seeds have replicas.
pub const FENCES: [Unsafe; 2] = [Unsafe::LeaseDeadline, Unsafe::ClaimRevision];

impl Unsafe {
    /// Every mechanism `--unsafe-disable` can switch off.
    pub fn all() -> Vec<Unsafe> {
        let mut all = vec![
            Unsafe::MemberGate,
            Unsafe::OwnershipCheck,
            Unsafe::ClusterOwnership,
        ];
        all.extend(Mechanism::ALL.map(Unsafe::Plan));
        all
    }

    pub fn flag(self) -> &'static str {
        match self {
            Unsafe::MemberGate => "member-gate",
            Unsafe::OwnershipCheck => "ownership-check",
            Unsafe::ClusterOwnership => "cluster-ownership",
            Unsafe::Plan(m) => m.as_str(),
            Unsafe::LeaseDeadline => "lease-deadline",
            Unsafe::ClaimRevision => "claim-revision",
        }
    }

    /// The mechanism `--unsafe-disable <flag>` names.
    pub fn from_flag(flag: &str) -> Result<Unsafe, String> {
        // The switch's name before every machine deletion drained (F9's alone).
        let flag = if flag == "drain-before-delete" {
            "drain-on-delete"
        } else {
            flag
        };
        Unsafe::all()
            .into_iter()
            .chain(FENCES)
            .find(|u| u.flag() == flag)
            .ok_or_else(|| {
                let known: Vec<&str> = Unsafe::all()
                    .into_iter()
                    .chain(FENCES)
                    .map(Unsafe::flag)
                    .collect();
                format!(
                    "no safety mechanism is called {flag:?}; the ones that can be switched off are: {}",
                    known.join(", ")
                )
            })
    }
}

impl Serialize for Unsafe {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.flag())
    }
}
