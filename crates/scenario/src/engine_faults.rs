//! Engine faults injected by a run: crashes between two writes of one plan, and lost or
//! late requeues, drawn from a seeded stream while the fault
//! window is open.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use flightdeck_cloud::{Clock, Rng, SeededRng, SimClock, Timestamp};
use flightdeck_engine::{EngineFaults, RequeueFate};
use flightdeck_spec::Duration;

/// How often each engine fault strikes while the window is open.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineFaultProfile {
    /// The window closes this long after the start of the run.
    pub until: Duration,
    /// Chance, per action about to be carried out, that the engine crashes first.
    pub crash_rate: f64,
    /// Chance, per requeue, that it is lost.
    pub requeue_drop_rate: f64,
    /// Chance, per requeue, that it arrives late, by up to `requeue_delay_max`.
    pub requeue_delay_rate: f64,
    pub requeue_delay_max: Duration,
}

/// The names under which engine faults are reported, like cloud fault kinds.
pub const ENGINE_CRASH: &str = "engine.crashBetweenWrites";
pub const ENGINE_REQUEUE_DROPPED: &str = "engine.requeueDropped";
pub const ENGINE_REQUEUE_DELAYED: &str = "engine.requeueDelayed";
pub const STORE_RESTART: &str = "store.restart";
pub const STORE_RESTORED_LAGGING: &str = "store.restoredLagging";

/// Counts of the engine faults that struck, by name. Shared between the runner and
/// every engine it builds.
pub type Fired = Arc<Mutex<BTreeMap<&'static str, u64>>>;

pub struct InjectedEngineFaults {
    profile: EngineFaultProfile,
    rng: SeededRng,
    clock: SimClock,
    start: Timestamp,
    fired: Fired,
}

impl InjectedEngineFaults {
    pub fn new(
        profile: EngineFaultProfile,
        seed: u64,
        clock: SimClock,
        start: Timestamp,
        fired: Fired,
    ) -> Self {
        InjectedEngineFaults {
            profile,
            rng: SeededRng::new(seed),
            clock,
            start,
            fired,
        }
    }

    fn open(&self) -> bool {
        self.clock.now() < self.start.plus(self.profile.until)
    }

    fn strike(&mut self, rate: f64, name: &'static str) -> bool {
        if rate <= 0.0 || !self.open() || !self.rng.chance(rate) {
            return false;
        }
        *self
            .fired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name)
            .or_default() += 1;
        true
    }
}

impl EngineFaults for InjectedEngineFaults {
    fn crash_before_action(&mut self, _cluster: &str, _index: usize, _len: usize) -> bool {
        self.strike(self.profile.crash_rate, ENGINE_CRASH)
    }

    /// Never: a stale read comes from the cloud (`api.staleRead` answers a list with
    /// what it answered a while ago), where the engine cannot tell it from a fresh one.
    /// Handing the engine its own previous observation exercised nothing: it stamps
    /// its observations itself and always threw that one away.
    fn stale_observation(&mut self, _cluster: &str) -> bool {
        false
    }

    fn requeue(&mut self, _cluster: &str, _after: Duration) -> RequeueFate {
        if self.strike(self.profile.requeue_drop_rate, ENGINE_REQUEUE_DROPPED) {
            return RequeueFate::Drop;
        }
        if self.strike(self.profile.requeue_delay_rate, ENGINE_REQUEUE_DELAYED) {
            let max = self.profile.requeue_delay_max.as_millis().max(1);
            return RequeueFate::Delay(Duration::from_millis(self.rng.between(1, max)));
        }
        RequeueFate::Keep
    }
}
