//! The kubeadm bootstrap's invariants, read from the simulator's record of every
//! machine's bootstrap ([`flightdeck_sim::BootEvent`]), never from flightdeck:
//!
//! - `bootstrapValid`: no machine failed to join because of the data flightdeck gave it,
//!   unless a fault was active within [`FAULT_REACH`] before the failure (a fault that
//!   blinds the API, deletes a token or slows a boot breaks a join on its own);
//! - `singleInit`: no second `kubeadm init` while the cluster the first made still has a
//!   live machine.

use flightdeck_cloud::Timestamp;
use flightdeck_sim::{BootEvent, SimCloud};
use flightdeck_spec::Duration;
use flightdeck_spec::scenario::Invariant;

use crate::invariants::Invariants;

/// How long before a failed join a fault still excuses it: kubeadm's discovery timeout
/// (5 minutes) plus a token's whole life (15 minutes), plus the minute a list may take
/// to tell flightdeck.
pub const FAULT_REACH: Duration = Duration::from_mins(21);

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
                    reason,
                    ..
                } => {
                    let from = Timestamp(at.millis().saturating_sub(FAULT_REACH.as_millis()));
                    if !inv.fault_within(from, at) {
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
