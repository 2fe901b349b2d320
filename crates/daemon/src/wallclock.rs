//! The daemon's wall clock, and the real waits an `api.latency` fault aimed at one
//! cluster puts before its calls.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration as StdDuration, SystemTime, UNIX_EPOCH};

use flightdeck_cloud::{Clock, SimClock, Timestamp};
use flightdeck_spec::Duration;

/// The wall clock, read at the daemon's edge only.
pub fn wall() -> Timestamp {
    Timestamp(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    )
}

/// Simulated latency on one cluster's cloud calls, as a real wait (scaled by the
/// simulator's speed) before each call.
pub struct ClusterLatency {
    clock: SimClock,
    speed: f64,
    active: Mutex<BTreeMap<String, (Duration, Option<Timestamp>)>>,
}

impl ClusterLatency {
    #[cfg_attr(not(feature = "sim"), allow(dead_code))]
    pub(crate) fn new(clock: SimClock, speed: f64) -> Self {
        ClusterLatency {
            clock,
            speed,
            active: Mutex::new(BTreeMap::new()),
        }
    }

    #[cfg_attr(not(feature = "sim"), allow(dead_code))]
    pub(crate) fn set(&self, cluster: &str, latency: Duration, end: Option<Timestamp>) {
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(cluster.to_string(), (latency, end));
    }

    /// The wall-clock wait before a call for `cluster` now.
    pub fn wait_for(&self, cluster: &str) -> Option<StdDuration> {
        let now = self.clock.now();
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let (latency, end) = active.get(cluster)?;
        if end.is_some_and(|e| e <= now) {
            return None;
        }
        Some(StdDuration::from_secs_f64(
            latency.as_secs_f64() / self.speed,
        ))
    }
}
