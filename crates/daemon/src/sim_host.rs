//! The embedded simulator: all three clouds (OpenStack, OpenNebula, KubeVirt) in one
//! `SimCloud`, running in real time (or `speed` times faster), which a newcomer's
//! `flightdeck serve` uses when no real cloud is named. It can be broken on purpose
//! while the daemon runs (`POST /api/v1/sim/faults`).

use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant};

use axum::http::StatusCode;
use flightdeck_cloud::{Clock, SimClock, Timestamp};
use flightdeck_sim::{FaultId, SimCloud, SimConfig, SimFault};
use flightdeck_spec::fault::{ClusterAim, FaultSite};
use flightdeck_spec::{Duration, FaultKind, Service};

use crate::error::Failure;
use crate::types::{FaultRequest, FaultView};
use crate::wallclock::{ClusterLatency, wall};

/// How often virtual time is moved on.
const TICK: StdDuration = StdDuration::from_millis(20);
/// The most faults a user may hold at once (ended and stopped ones are forgotten).
const FAULTS_MAX: usize = 1_000;

pub struct SimHost {
    pub cloud: Arc<SimCloud>,
    pub clock: SimClock,
    /// Virtual seconds per wall-clock second.
    pub speed: f64,
    /// `api.latency` faults aimed at one cluster: real waits before its calls.
    pub latency: Arc<ClusterLatency>,
    faults: Mutex<Faults>,
    /// Routers the simulator holds for clusters that name one.
    routers: Mutex<std::collections::BTreeSet<String>>,
}

/// The faults a user started, and the next id.
#[derive(Default)]
struct Faults {
    held: Vec<Held>,
    /// The id of the next fault started: ids start at 1 and are never given twice.
    next_id: u64,
}

/// A fault a user started, and what to stop.
struct Held {
    view: FaultView,
    stop: Stop,
}

enum Stop {
    /// A fault of the simulator.
    Sim(FaultId),
    /// An `api.latency`: real waits before the cluster's calls (by the fault's id).
    Latency,
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
            faults: Mutex::new(Faults::default()),
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

    /// The fault kinds a user may start. Not those that strike only a watch answer with
    /// two events of one node (`k8s.watchReorder`): the embedded simulator's workload API
    /// records a node only when it is read, one event per node per answer, so such a
    /// fault would change nothing. Nor those that cannot be aimed at one cluster
    /// ([`ClusterAim::Shared`]): a user's fault is aimed at one.
    pub fn kinds() -> Vec<String> {
        FaultKind::ALL
            .iter()
            .filter(|k| !FaultKind::WATCH_ONLY.contains(k))
            .filter(|k| !matches!(k.cluster_aim(), ClusterAim::Shared(_)))
            .map(|k| k.as_str().to_string())
            .collect()
    }

    pub fn faults(&self) -> Vec<FaultView> {
        self.lock_faults()
            .held
            .iter()
            .map(|h| h.view.clone())
            .collect()
    }

    /// The faults held, those that ended on their own let go of first.
    fn lock_faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        let now = self.clock.now().millis();
        let mut faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        faults
            .held
            .retain(|h| h.view.end.is_none_or(|end| end > now));
        faults
    }

    /// Starts a fault against `cloud_label`'s cluster `req.cluster`, from now on. It
    /// strikes that cluster only: its objects, or the calls its reconciles and dry runs
    /// make (the backend labels them). A kind that cannot be aimed at one cluster, and
    /// a parameter out of its range, are refused (422, naming the field).
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
        fault
            .validate_at(FaultSite::Live)
            .map_err(|(field, problem)| Failure::unprocessable(format!("{field}: {problem}")))?;
        if kind == FaultKind::ApiLatency && fault.service == Some(Service::Keystone) {
            return Err(Failure::unprocessable(
                "service: api.latency on one cluster waits before that cluster's calls, and Keystone's are made inside the cloud's client, for every cluster at once: give another service, or none",
            ));
        }
        let now = self.clock.now();
        let mut faults = self.lock_faults();
        if faults.held.len() >= FAULTS_MAX {
            return Err(Failure::unprocessable(format!(
                "the simulator already holds {FAULTS_MAX} faults: stop one first"
            )));
        }
        faults.next_id += 1;
        let id = faults.next_id;
        let end = duration.map(|d| now.plus(d));
        let stop = match (kind, latency) {
            // A real wait before each of the cluster's calls, so that only its
            // reconciles are slowed: the simulator's own api.latency moves the clock
            // every cluster shares.
            (FaultKind::ApiLatency, Some(latency)) => {
                let service = fault.service.map(|s| s.as_str());
                self.latency.set(id, &req.cluster, service, latency, end);
                Stop::Latency
            }
            _ => {
                let injected = self.cloud.inject(SimFault::from_spec(&fault, now));
                Stop::Sim(injected.ok_or_else(|| {
                    Failure::unprocessable(format!(
                        "the embedded simulator has taken {} faults since it started, the most it keeps: restart serve to start more",
                        flightdeck_sim::FAULTS_MAX
                    ))
                })?)
            }
        };
        let view = FaultView {
            id,
            kind: req.kind.clone(),
            cluster: req.cluster.clone(),
            cloud: cloud_label.to_string(),
            start: now.millis(),
            end: end.map(|e| e.millis()),
        };
        faults.held.push(Held {
            view: view.clone(),
            stop,
        });
        Ok(view)
    }

    /// Stops fault `id` (its [`FaultView::id`]) now: from now on the simulator applies
    /// it no more, what its start took (members taken offline, templates locked, load
    /// balancers held) is given back at once, and it is no longer listed. Answers the
    /// fault as it ends; 404 for an id the simulator does not hold.
    pub fn stop(&self, id: &str) -> Result<FaultView, Failure> {
        let unknown = || {
            Failure::new(
                StatusCode::NOT_FOUND,
                format!(
                    "fault {id} is not held by the simulator (`flightdeck sim faults` lists those that are)"
                ),
            )
        };
        let id: u64 = id.trim().parse().map_err(|_| unknown())?;
        let mut faults = self.lock_faults();
        let at = faults
            .held
            .iter()
            .position(|h| h.view.id == id)
            .ok_or_else(unknown)?;
        let held = faults.held.remove(at);
        match held.stop {
            Stop::Sim(fault) => {
                self.cloud.stop_fault(fault);
            }
            Stop::Latency => {
                self.latency.stop(id);
            }
        }
        let now = self.clock.now().millis();
        let mut view = held.view;
        view.end = Some(view.end.map_or(now, |end| end.min(now)));
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
    use flightdeck_cloud::{Compute, Ownership};
    use flightdeck_sim::caller::for_cluster;

    use super::*;

    fn request(fault: serde_json::Value) -> FaultRequest {
        serde_json::from_value(fault).expect("request")
    }

    /// A server list made for `cluster`, as a backend's reconcile of it makes it: the
    /// HTTP status it failed with.
    async fn list_for(host: &SimHost, cluster: &str) -> Result<(), Option<u16>> {
        let o = Ownership {
            cluster: cluster.into(),
            uid: format!("{cluster}-uid"),
        };
        for_cluster(cluster, host.cloud.list_servers(&o))
            .await
            .map(|_| ())
            .map_err(|e| e.status)
    }

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
        let req = request(serde_json::json!({"kind": "k8s.watchReorder", "cluster": "demo"}));
        let refused = host.inject(&req, "openstack").expect_err("refused");
        assert!(
            refused.message.contains("only a watch"),
            "{}",
            refused.message
        );
        assert!(host.faults().is_empty());
    }

    /// Issue 38: `api.errorRate` with `cluster` struck every cluster.
    #[tokio::test]
    async fn an_error_rate_started_for_one_cluster_strikes_only_that_cluster_s_calls() {
        let host = SimHost::start(8, 50.0)
            .map_err(|f| f.message)
            .expect("simulator");
        let req = request(serde_json::json!({
            "kind": "api.errorRate", "cluster": "a", "service": "nova", "rate": 1.0
        }));
        host.inject(&req, "openstack")
            .map_err(|f| f.message)
            .expect("started");
        assert_eq!(list_for(&host, "b").await, Ok(()), "cluster b");
        assert_eq!(list_for(&host, "a").await, Err(Some(503)), "cluster a");
    }

    #[tokio::test]
    async fn a_stopped_fault_is_applied_no_more_and_no_longer_listed() {
        let host = SimHost::start(9, 50.0)
            .map_err(|f| f.message)
            .expect("simulator");
        let req = request(serde_json::json!({
            "kind": "api.errorRate", "cluster": "a", "rate": 1.0, "duration": "1h"
        }));
        let first = host
            .inject(&req, "openstack")
            .map_err(|f| f.message)
            .expect("started");
        let second = host
            .inject(&req, "openstack")
            .map_err(|f| f.message)
            .expect("started");
        assert_ne!(first.id, second.id, "each fault its own id");
        assert_eq!(list_for(&host, "a").await, Err(Some(503)));

        let stopped = host.stop(&first.id.to_string()).expect("stopped");
        assert_eq!(stopped.id, first.id);
        assert!(
            stopped.end < first.end,
            "it ends now, not in an hour: {stopped:?}"
        );
        let ids: Vec<u64> = host.faults().iter().map(|f| f.id).collect();
        assert_eq!(ids, [second.id], "the stopped one is no longer listed");
        assert_eq!(list_for(&host, "a").await, Err(Some(503)), "second");
        host.stop(&second.id.to_string()).expect("stopped");
        assert_eq!(list_for(&host, "a").await, Ok(()), "struck no more");
        assert!(host.faults().is_empty());

        for unknown in [first.id.to_string(), "0".into(), "nope".into()] {
            let f = host.stop(&unknown).expect_err("unknown");
            assert_eq!(f.status, StatusCode::NOT_FOUND, "{unknown}");
            assert!(f.message.contains(&unknown), "{}", f.message);
        }
    }

    /// A latency on one cluster is a real wait before its calls: stopping it ends the
    /// waits at once.
    #[tokio::test]
    async fn a_stopped_latency_holds_the_cluster_s_calls_up_no_more() {
        let host = SimHost::start(10, 50.0)
            .map_err(|f| f.message)
            .expect("simulator");
        let req = request(serde_json::json!({
            "kind": "api.latency", "cluster": "a", "service": "nova", "latency": "60s"
        }));
        let f = host
            .inject(&req, "openstack")
            .map_err(|f| f.message)
            .expect("started");
        let wait = |cluster, service| host.latency.wait_for(cluster, service);
        assert!(wait("a", "nova").is_some());
        assert_eq!(wait("a", "octavia"), None, "another service");
        assert_eq!(wait("b", "nova"), None, "another cluster");
        host.stop(&f.id.to_string()).expect("stopped");
        assert_eq!(wait("a", "nova"), None);
    }

    /// Issue 38: a `rate` of -1 or 1e308 was accepted. Every refusal names its field.
    #[tokio::test]
    async fn out_of_range_parameters_and_kinds_that_strike_every_cluster_are_refused() {
        let host = SimHost::start(11, 50.0)
            .map_err(|f| f.message)
            .expect("simulator");
        let cases = [
            (
                serde_json::json!({"kind": "api.errorRate", "cluster": "a", "rate": -1.0}),
                "rate: ",
            ),
            (
                serde_json::json!({"kind": "api.errorRate", "cluster": "a", "rate": 1e308}),
                "rate: ",
            ),
            (
                serde_json::json!({"kind": "neutron.ruleLost", "cluster": "a", "count": 0}),
                "count: ",
            ),
            (
                serde_json::json!({"kind": "nova.bootError", "cluster": "a", "duration": "2d"}),
                "duration: ",
            ),
            (
                serde_json::json!({"kind": "api.latency", "cluster": "a", "latency": "0s"}),
                "latency: ",
            ),
            (
                serde_json::json!({"kind": "keystone.revokeTokens", "cluster": "a"}),
                "cluster: keystone.revokeTokens cannot be aimed at one cluster",
            ),
            (
                serde_json::json!({"kind": "kubevirt.drainInfraNode", "cluster": "a", "node": "infra-1"}),
                "cluster: kubevirt.drainInfraNode cannot be aimed at one cluster",
            ),
            (
                serde_json::json!({"kind": "api.latency", "cluster": "a", "service": "keystone", "latency": "5s"}),
                "service: ",
            ),
        ];
        for (req, said) in cases {
            let refused = host
                .inject(&request(req.clone()), "openstack")
                .expect_err("refused");
            assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{req}");
            assert!(
                refused.message.starts_with(said),
                "{req}: {}",
                refused.message
            );
        }
        assert!(host.faults().is_empty());
        let kinds = SimHost::kinds();
        assert!(
            !kinds.iter().any(|k| k == "keystone.revokeTokens"),
            "{kinds:?}"
        );
    }
}
