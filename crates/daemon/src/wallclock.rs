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
    /// By fault id: the latency faults in force or to come.
    active: Mutex<BTreeMap<u64, Slowdown>>,
}

/// One `api.latency` fault aimed at one cluster.
struct Slowdown {
    cluster: String,
    /// The API slowed (`nova`, `kubernetes`, ...); `None`: every one.
    service: Option<String>,
    latency: Duration,
    end: Option<Timestamp>,
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

    /// Fault `id` adds `latency` to each call of `cluster` to `service` (every service
    /// when `None`) until `end`. The faults on one cluster add up, as in the simulator.
    #[cfg_attr(not(feature = "sim"), allow(dead_code))]
    pub(crate) fn set(
        &self,
        id: u64,
        cluster: &str,
        service: Option<&str>,
        latency: Duration,
        end: Option<Timestamp>,
    ) {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.clock.now();
        active.retain(|_, s| s.end.is_none_or(|e| e > now));
        active.insert(
            id,
            Slowdown {
                cluster: cluster.to_string(),
                service: service.map(str::to_string),
                latency,
                end,
            },
        );
    }

    /// Fault `id` slows nothing from now on; whether it was held.
    #[cfg_attr(not(feature = "sim"), allow(dead_code))]
    pub(crate) fn stop(&self, id: u64) -> bool {
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .is_some()
    }

    /// The wall-clock wait before a call of `cluster` to `service` now.
    pub fn wait_for(&self, cluster: &str, service: &str) -> Option<StdDuration> {
        let now = self.clock.now();
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let latency_ms = active
            .values()
            .filter(|s| s.cluster == cluster && s.end.is_none_or(|e| e > now))
            .filter(|s| s.service.as_deref().is_none_or(|x| speaks(service, x)))
            .map(|s| s.latency.as_millis())
            .fold(0u64, u64::saturating_add);
        (latency_ms > 0)
            .then(|| StdDuration::from_secs_f64(latency_ms as f64 / 1000.0 / self.speed))
    }
}

/// Whether a call to `api` (the instrumentation's `service`) speaks the fault's
/// `service`: KubeVirt's VirtualMachines are the Kubernetes API of its infra cluster.
fn speaks(api: &str, service: &str) -> bool {
    api == service || (service == "kubernetes" && api == "kubevirt")
}
