//! Faults the engine itself can suffer, for the swarm to inject: crashes between two
//! writes of one plan, stale observations, and lost or late requeues (the Sieve and Acto
//! bug classes). The product never installs any; it must survive all of them.

use flightdeck_spec::Duration;

/// What becomes of one requeue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequeueFate {
    Keep,
    /// Arrives this much later than asked.
    Delay(Duration),
    /// Is lost; the cluster waits for its periodic resync.
    Drop,
}

/// Decides, reconcile by reconcile, which engine faults strike.
pub trait EngineFaults: Send {
    /// Whether the engine crashes just before carrying out action `index` of a plan
    /// of `len` actions (after the plan's memory was written, before the rest).
    fn crash_before_action(&mut self, cluster: &str, index: usize, len: usize) -> bool;
    /// Whether the reconcile is handed the previous observation instead of a fresh one.
    fn stale_observation(&mut self, cluster: &str) -> bool;
    /// What becomes of a requeue after `after`.
    fn requeue(&mut self, cluster: &str, after: Duration) -> RequeueFate;
}
