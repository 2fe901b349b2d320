//! The kubeadm bootstrap's invariants, read from the simulator's record of every
//! machine's bootstrap ([`flightdeck_sim::BootEvent`]), never from flightdeck:
//!
//! - `bootstrapValid`: no machine failed to join because of what flightdeck did, by the
//!   simulator's own judgement of why it failed ([`BootFailure`]):
//!   - wrong data (another CA, endpoint or cluster, a malformed token) is never excused;
//!   - a token an operator deleted always is;
//!   - a token that ran out, or is missing with no operator to blame, is excused only
//!     by a fault within [`FAULT_REACH`] before it that could keep flightdeck from the
//!     workload API, where tokens are moved on ([`BLINDING`]): a slow boot is no
//!     excuse, nor is any other fault, since a token is kept alive for as long as its
//!     machine has not joined. A store restored from a backup older than the machine, or
//!     an engine that crashed between two writes of the plan that made the machine, does
//!     excuse it: flightdeck lost the token's id it kept (the machine is adopted from its
//!     tags, its token is not: left for later);
//!   - an API that never answered is excused by any fault within that reach;
//! - `singleInit`: no second `kubeadm init` while the cluster the first made still has a
//!   live machine.

use flightdeck_cloud::Timestamp;
use flightdeck_sim::{BootEvent, BootFailure, SimCloud};
use flightdeck_spec::Duration;
use flightdeck_spec::FaultKind;
use flightdeck_spec::scenario::Invariant;

use crate::invariants::Invariants;

/// How long before a failed join a fault still excuses it: kubeadm's discovery timeout
/// (5 minutes) plus a token's whole life (15 minutes), plus the minute a list may take
/// to tell flightdeck.
pub const FAULT_REACH: Duration = Duration::from_mins(21);

/// The faults that can keep flightdeck from the workload cluster's API, where tokens are
/// moved on: its calls refused, slowed or stale, its node list blind, or the way to it
/// (the load balancer's members, the control-plane machines behind them) down.
const BLINDING: [FaultKind; 11] = [
    FaultKind::ApiErrorRate,
    FaultKind::ApiLatency,
    FaultKind::ApiRateLimit,
    FaultKind::ApiStaleRead,
    FaultKind::EmptyNodeList,
    FaultKind::AllNotReady,
    FaultKind::MemberOffline,
    FaultKind::MemberStuckPending,
    FaultKind::LbPendingUpdate,
    FaultKind::ServerError,
    FaultKind::OperatorDeleteMachine,
];

/// What the bootstrap checks have read so far.
#[derive(Debug, Default)]
pub struct BootChecks {
    seen: u64,
}

impl BootChecks {
    /// Reads the bootstraps recorded since the last call, and checks them. `kubeadm`:
    /// whether some cluster of the run boots with kubeadm (else nothing applies).
    pub fn check(&mut self, inv: &mut Invariants, cloud: &SimCloud, now: Timestamp, kubeadm: bool) {
        let (events, next) = cloud.boot_events_since(self.seen);
        self.seen = next;
        if !kubeadm {
            return;
        }
        inv.record(Invariant::BootstrapValid, now, None);
        inv.record(Invariant::SingleInit, now, None);
        for e in events {
            match e {
                BootEvent::Failed {
                    at,
                    cluster,
                    machine,
                    made_at,
                    cause,
                    reason,
                    ..
                } => {
                    let from = Timestamp(at.millis().saturating_sub(FAULT_REACH.as_millis()));
                    let excused = match cause {
                        BootFailure::Data => false,
                        BootFailure::TokenDeletedByOperator => true,
                        BootFailure::TokenExpired | BootFailure::TokenMissing => {
                            inv.fault_of_within(from, at, &BLINDING)
                                || inv.may_have_forgotten(made_at, at)
                        }
                        BootFailure::ApiUnreachable => inv.fault_within(from, at),
                    };
                    if !excused {
                        inv.record(
                            Invariant::BootstrapValid,
                            at,
                            Some(format!(
                                "machine {machine} of cluster {cluster} could not join, with no fault to blame: {reason}"
                            )),
                        );
                    }
                }
                BootEvent::SplitInit {
                    at,
                    cluster,
                    machine,
                    first,
                    ..
                } => inv.record(
                    Invariant::SingleInit,
                    at,
                    Some(format!(
                        "machine {machine} ran kubeadm init in cluster {cluster}, while the cluster {first} made by its init still lives: a split cluster"
                    )),
                ),
                BootEvent::Init { .. } | BootEvent::Joined { .. } => {}
            }
        }
    }
}
