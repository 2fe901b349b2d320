//! The embedded simulator: all three clouds (OpenStack, OpenNebula, KubeVirt) in one
//! `SimCloud`, running in real time (or `speed` times faster), which a newcomer's
//! `flightdeck serve` uses when no real cloud is named. It can be broken on purpose
//! while the daemon runs (`POST /api/v1/sim/faults`).

use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant};

use flightdeck_cloud::{Clock, SimClock, Timestamp};
use flightdeck_sim::{SimCloud, SimConfig, SimFault};
use flightdeck_spec::{Duration, FaultKind};

use crate::error::Failure;
use crate::types::{FaultRequest, FaultView};
use crate::wallclock::{ClusterLatency, wall};

/// How often virtual time is moved on.
const TICK: StdDuration = StdDuration::from_millis(20);
/// The most faults one daemon's simulator keeps (ended ones are forgotten first).
const FAULTS_MAX: usize = 1_000;

pub struct SimHost {
    pub cloud: Arc<SimCloud>,
    pub clock: SimClock,
    /// Virtual seconds per wall-clock second.
    pub speed: f64,
    /// `api.latency` faults aimed at one cluster: real waits before its calls.
    pub latency: Arc<ClusterLatency>,
    faults: Mutex<Vec<FaultView>>,
    /// Routers the simulator holds for clusters that name one.
    routers: Mutex<std::collections::BTreeSet<String>>,
}

impl SimHost {
    /// The simulator's virtual time now.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The simulator's clock, for the engines of its clouds.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::new(self.clock.clone())
    }

    /// Virtual seconds per wall-clock second.
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// `api.latency` faults aimed at one cluster.
    pub fn latency(&self) -> Arc<ClusterLatency> {
        self.latency.clone()
    }

    /// The simulator's own records of `cluster`.
    pub fn objects(&self, cluster: &str) -> crate::types::SimObjects {
        crate::sim_objects::sim_objects(&self.cloud, cluster)
    }

    /// Plays the operator who provides the router a cluster's spec names
    /// (`spec.provider.openstack.router`): the simulator gets it once.
    pub fn provide_router(&self, spec: &flightdeck_spec::Cluster) {
        let Some(router) = spec
            .spec
            .provider
            .openstack
            .as_ref()
            .and_then(|o| o.router.as_ref())
        else {
            return;
        };
        let mut routers = self.routers.lock().unwrap_or_else(|e| e.into_inner());
        if routers.insert(router.to_string()) {
            self.cloud.add_foreign_router(router.as_str());
        }
    }

    /// Starts the simulator and the task that moves its clock with the wall clock.
    pub fn start(seed: u64, speed: f64) -> Result<Arc<SimHost>, Failure> {
        let start = wall();
        let clock = SimClock::new(start);
        let cloud = Arc::new(SimCloud::new(SimConfig::default(), seed, clock.clone()));
        let host = Arc::new(SimHost {
            cloud: cloud.clone(),
            clock: clock.clone(),
            speed,
            latency: Arc::new(ClusterLatency::new(clock.clone(), speed)),
            faults: Mutex::new(Vec::new()),
            routers: Mutex::new(Default::default()),
        });
        let began = Instant::now();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(TICK).await;
                let elapsed = began.elapsed().as_secs_f64() * speed * 1000.0;
                clock.advance_to(start.plus_millis(elapsed as u64));
                cloud.advance();
            }
        });
        Ok(host)
    }

    /// The fault kinds a user may start: every kind but those that strike only a watch
    /// answer with two events of one node (`k8s.watchReorder`): the embedded simulator's
    /// workload API records a node only when it is read, one event per node per answer,
    /// so such a fault would change nothing.
    pub fn kinds() -> Vec<String> {
        FaultKind::ALL
            .iter()
            .filter(|k| !FaultKind::WATCH_ONLY.contains(k))
            .map(|k| k.as_str().to_string())
            .collect()
    }

    pub fn faults(&self) -> Vec<FaultView> {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Starts a fault against `cloud_label`'s cluster `req.cluster`, from now on.
    pub fn inject(&self, req: &FaultRequest, cloud_label: &str) -> Result<FaultView, Failure> {
        let kind: FaultKind = serde_json::from_value(serde_json::Value::String(req.kind.clone()))
            .map_err(|_| {
            Failure::unprocessable(format!(
                "kind: {:?} is not a fault kind of the simulator; it knows {}",
                req.kind,
                Self::kinds().join(", ")
            ))
        })?;
        if FaultKind::WATCH_ONLY.contains(&kind) {
            return Err(Failure::unprocessable(format!(
                "kind: {} strikes only a watch answer with two events of one node, and the embedded simulator's workload API records a node only when it is read, one event per node per answer: it would change nothing here",
                req.kind
            )));
        }
        let duration = parse_opt("duration", req.duration.as_deref())?;
        let latency = parse_opt("latency", req.latency.as_deref())?;
        let spec = serde_json::json!({
            "at": "0s",
            "kind": req.kind,
            "cluster": req.cluster,
            "service": req.service,
            "rate": req.rate,
            "count": req.count,
            "level": req.level,
            "template": req.template,
            "node": req.node,
        });
        let mut fault: flightdeck_spec::scenario::Fault = serde_json::from_value(spec)
            .map_err(|e| Failure::unprocessable(format!("fault {}: {e}", req.kind)))?;
        fault.duration = duration;
        fault.latency = latency;
        let now = self.clock.now();
        let view = FaultView {
            kind: req.kind.clone(),
            cluster: req.cluster.clone(),
            cloud: cloud_label.to_string(),
            start: now.millis(),
            end: duration.map(|d| now.plus(d).millis()),
        };
        if kind == FaultKind::ApiLatency && fault.service.is_none() {
            // Aimed at one cluster's calls, whatever the service: a real wait before
            // each of them, so that only this cluster's reconciles are slowed.
            let Some(latency) = latency else {
                return Err(Failure::unprocessable(
                    "latency: api.latency needs the extra time per call, e.g. 60s",
                ));
            };
            self.latency
                .set(&req.cluster, latency, duration.map(|d| now.plus(d)));
        } else {
            self.cloud.inject(SimFault::from_spec(&fault, now));
        }
        let mut faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        faults.retain(|f| f.end.is_none_or(|end| end > now.millis()));
        if faults.len() >= FAULTS_MAX {
            return Err(Failure::unprocessable(format!(
                "the simulator already holds {FAULTS_MAX} faults"
            )));
        }
        faults.push(view.clone());
        Ok(view)
    }
}

fn parse_opt(field: &str, text: Option<&str>) -> Result<Option<Duration>, Failure> {
    text.map(|t| {
        t.parse::<Duration>()
            .map_err(|e| Failure::unprocessable(format!("{field}: {t:?}: {e}")))
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded simulator's workload API carries at most one event per node in an
    /// answer of a watch: a fault that reorders them is neither offered nor started, so
    /// nothing shows as broken that is not.
    #[tokio::test]
    async fn a_fault_that_strikes_only_a_watch_is_neither_offered_nor_started() {
        let kinds = SimHost::kinds();
        assert!(kinds.iter().any(|k| k == "nova.bootError"), "{kinds:?}");
        assert!(!kinds.iter().any(|k| k == "k8s.watchReorder"), "{kinds:?}");
        let host = SimHost::start(7, 50.0)
            .map_err(|f| f.message)
            .expect("simulator");
        let req: FaultRequest = serde_json::from_value(
            serde_json::json!({"kind": "k8s.watchReorder", "cluster": "demo"}),
        )
        .expect("request");
        let refused = host.inject(&req, "openstack").expect_err("refused");
        assert!(
            refused.message.contains("only a watch"),
            "{}",
            refused.message
        );
        assert!(host.faults().is_empty());
    }
}
