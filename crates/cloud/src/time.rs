//! Points in time as flightdeck stores them: milliseconds since the Unix epoch.

use std::fmt;

use flightdeck_spec::Duration;
use serde::{Deserialize, Serialize};

/// A point in time, in milliseconds since the Unix epoch. Simulated runs start at
/// [`Timestamp::SIM_EPOCH`]; real runs read the system clock at the binary's edge.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// 2026-01-01T00:00:00Z: where every simulated run's clock starts.
    pub const SIM_EPOCH: Timestamp = Timestamp(1_767_225_600_000);

    pub fn millis(self) -> u64 {
        self.0
    }
    pub fn plus(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(d.as_millis()))
    }
    pub fn plus_millis(self, ms: u64) -> Timestamp {
        Timestamp(self.0.saturating_add(ms))
    }
    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// Where flightdeck reads the time. The engine never reads the system clock itself, so
/// the same code runs in real time and in simulated time.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// A clock that moves only when told to: the simulator's virtual time. Clones share
/// the same time.
#[derive(Clone, Debug)]
pub struct SimClock {
    millis: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl SimClock {
    pub fn new(start: Timestamp) -> Self {
        SimClock {
            millis: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(start.0)),
        }
    }
    /// Moves the clock forward to `t`; a `t` in the past leaves it where it is.
    pub fn advance_to(&self, t: Timestamp) {
        self.millis
            .fetch_max(t.0, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn advance(&self, d: Duration) {
        self.millis
            .fetch_add(d.as_millis(), std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.millis.load(std::sync::atomic::Ordering::SeqCst))
    }
}
