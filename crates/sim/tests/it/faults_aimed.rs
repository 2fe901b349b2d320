//! Faults on calls aimed at one cluster (`cluster`): they strike only the calls that say
//! they are for it (the caller label's `cluster=`, or the workload cluster whose API is
//! called), and an unaimed fault draws as it always did. And a fault stopped before its
//! end strikes no more.

use crate::common;
use crate::one_support;

use common::*;
use flightdeck_cloud::{Compute, ErrorClass, Ownership, Timestamp};
use flightdeck_sim::caller::{for_cluster, serve_as};
use flightdeck_sim::{KubeRequest, SimCloud, SimFault};
use flightdeck_spec::scenario::LockLevelSpec;
use flightdeck_spec::{Duration, FaultKind, Service};

/// A server list, as made for `cluster` (`None`: a call that does not say).
fn list_for(sim: &SimCloud, o: &Ownership, cluster: Option<&str>) -> Result<usize, u16> {
    let answer = match cluster {
        Some(c) => ready(for_cluster(c, sim.list_servers(o))),
        None => ready(sim.list_servers(o)),
    };
    answer
        .map(|servers| servers.len())
        .map_err(|e| e.status.unwrap_or(0))
}

fn aimed(kind: FaultKind, at: &str, start: Timestamp) -> SimFault {
    SimFault {
        service: Some(Service::Nova),
        rate: Some(1.0),
        cluster: Some(at.into()),
        ..SimFault::new(kind, start)
    }
}

#[test]
fn an_error_rate_aimed_at_one_cluster_leaves_other_clusters_calls_alone() {
    let sim = sim(61);
    let o = owner("u1");
    sim.inject(aimed(FaultKind::ApiErrorRate, "a", now(&sim)));
    assert_eq!(list_for(&sim, &o, Some("b")), Ok(0), "cluster b");
    assert_eq!(list_for(&sim, &o, None), Ok(0), "a call that does not say");
    assert_eq!(list_for(&sim, &o, Some("a")), Err(503), "cluster a");
    let replica = ready(serve_as(
        "replica=r1 claim=4".into(),
        for_cluster("a", sim.list_servers(&o)),
    ));
    assert_eq!(
        replica.map_err(|e| e.status),
        Err(Some(503)),
        "a replica's call for a"
    );
    assert_eq!(sim.fault_effects()[&FaultKind::ApiErrorRate], 2);
}

#[test]
fn a_rate_limit_aimed_at_one_cluster_leaves_other_clusters_calls_alone() {
    let sim = sim(62);
    let o = owner("u1");
    sim.inject(aimed(FaultKind::ApiRateLimit, "a", now(&sim)));
    assert_eq!(list_for(&sim, &o, Some("b")), Ok(0));
    let err = ready(for_cluster("a", sim.list_servers(&o))).expect_err("429");
    assert_eq!(err.status, Some(429));
    assert!(matches!(err.class, ErrorClass::RateLimited(Some(_))));
}

#[test]
fn a_latency_aimed_at_one_cluster_holds_up_only_its_calls() {
    let sim = sim(63);
    let o = owner("u1");
    let start = now(&sim);
    sim.inject(SimFault {
        rate: None,
        latency: Some(Duration::from_secs(5)),
        ..aimed(FaultKind::ApiLatency, "a", start)
    });
    list_for(&sim, &o, Some("b")).expect("b");
    list_for(&sim, &o, None).expect("unsaid");
    assert_eq!(now(&sim), start, "b's calls and unsaid ones are not slowed");
    list_for(&sim, &o, Some("a")).expect("a");
    assert_eq!(now(&sim), start.plus_millis(5_000), "a's call took 5s more");
}

#[test]
fn a_stale_read_aimed_at_one_cluster_lags_only_its_lists() {
    let sim = sim(64);
    let o = owner("u1");
    sim.inject(SimFault {
        rate: None,
        latency: Some(Duration::from_secs(60)),
        ..aimed(FaultKind::ApiStaleRead, "a", now(&sim))
    });
    assert_eq!(list_for(&sim, &o, Some("a")), Ok(0));
    ready(sim.create_server(&server_req("w-1", &o, &[]))).expect("create");
    wait_ms(&sim, 1_000);
    assert_eq!(list_for(&sim, &o, Some("b")), Ok(1), "b's list is fresh");
    assert_eq!(
        list_for(&sim, &o, Some("a")),
        Ok(0),
        "a's lags by up to a minute"
    );
}

#[test]
fn an_rpc_error_aimed_at_one_cluster_leaves_other_clusters_calls_alone() {
    let sim = sim(65);
    sim.inject(SimFault {
        rate: Some(1.0),
        cluster: Some("a".into()),
        ..SimFault::new(FaultKind::OneRpcError, now(&sim))
    });
    let version = |cluster: &str| {
        ready(for_cluster(cluster, async {
            one_support::call(&sim, "one.system.version", vec![])
        }))
    };
    assert_eq!(one_support::ok_str(version("b")), "6.10.0");
    let (msg, code, _) = one_support::fail(version("a"));
    assert_eq!(code, one_support::INTERNAL, "{msg}");
}

/// A call to a workload cluster's own API is that cluster's, label or none; a call to
/// KubeVirt's infra cluster is whoever its label says.
#[test]
fn a_kubernetes_error_rate_aimed_at_one_cluster_strikes_only_its_api_and_its_calls() {
    let sim = sim(66);
    sim.inject(SimFault {
        service: Some(Service::Kubernetes),
        ..aimed(FaultKind::ApiErrorRate, "a", now(&sim))
    });
    let nodes = || KubeRequest {
        method: "GET".into(),
        path: "/api/v1/nodes".into(),
        query: String::new(),
        body: Vec::new(),
        content_type: None,
    };
    let struck = |sim: &SimCloud| sim.fault_effects()[&FaultKind::ApiErrorRate];
    sim.kube_request("b", nodes());
    ready(for_cluster("a", async { sim.kube_request("b", nodes()) }));
    ready(for_cluster("b", async {
        sim.kube_request(flightdeck_sim::INFRA_CLUSTER, nodes())
    }));
    sim.kube_request(flightdeck_sim::INFRA_CLUSTER, nodes());
    assert_eq!(
        struck(&sim),
        0,
        "b's API, and the infra API for b or nobody"
    );
    sim.kube_request("a", nodes());
    ready(for_cluster("a", async {
        sim.kube_request(flightdeck_sim::INFRA_CLUSTER, nodes())
    }));
    assert_eq!(struck(&sim), 2, "a's API, and the infra API for a");
}

/// Aiming changes nothing for a fault aimed at no cluster, nor for the calls of the
/// cluster aimed at: the same seed draws the same answers, so runs replay as before.
#[test]
fn aimed_faults_draw_for_their_cluster_s_calls_as_unaimed_faults_draw_for_all() {
    let run = |cluster: Option<&str>, label: Option<&str>| {
        let sim = sim(67);
        let o = owner("u1");
        sim.inject(SimFault {
            rate: Some(0.3),
            cluster: cluster.map(str::to_string),
            ..aimed(FaultKind::ApiErrorRate, "-", now(&sim))
        });
        (0..200)
            .map(|_| list_for(&sim, &o, label).is_ok())
            .collect::<Vec<_>>()
    };
    let unaimed = run(None, None);
    assert!(unaimed.iter().any(|ok| !ok) && unaimed.iter().any(|ok| *ok));
    assert_eq!(run(None, Some("b")), unaimed, "unaimed, labelled calls");
    assert_eq!(run(Some("a"), Some("a")), unaimed, "aimed, its own calls");
    assert!(
        run(Some("a"), Some("b")).iter().all(|ok| *ok),
        "aimed elsewhere"
    );
}

#[test]
fn a_stopped_fault_strikes_no_more() {
    let sim = sim(68);
    let o = owner("u1");
    let id = sim
        .inject(aimed(FaultKind::ApiErrorRate, "a", now(&sim)))
        .expect("held");
    assert_eq!(list_for(&sim, &o, Some("a")), Err(503));
    assert!(sim.stop_fault(id), "stopped");
    assert_eq!(list_for(&sim, &o, Some("a")), Ok(0), "struck no more");
    wait_ms(&sim, 60_000);
    assert_eq!(list_for(&sim, &o, Some("a")), Ok(0));
    assert!(
        !sim.stop_fault(id),
        "a stopped fault has nothing left to stop"
    );
}

#[test]
fn a_fault_stopped_before_its_start_never_starts() {
    let sim = sim(69);
    let o = owner("u1");
    let id = sim
        .inject(aimed(
            FaultKind::ApiErrorRate,
            "a",
            now(&sim).plus_millis(10_000),
        ))
        .expect("held");
    assert!(sim.stop_fault(id));
    wait_ms(&sim, 20_000);
    assert_eq!(list_for(&sim, &o, Some("a")), Ok(0));
}

/// Stopping gives back what the start took, at once: templates a lock took are
/// unlocked, though the lock had an hour to go.
#[test]
fn a_stopped_template_lock_unlocks_its_templates_at_once() {
    let sim = sim(70);
    let tpl = one_support::allocate_template(&sim, "flightdeck-web", one_support::VM_BODY);
    let start = now(&sim);
    let id = sim
        .inject(SimFault {
            end: Some(start.plus(Duration::from_mins(60))),
            level: Some(LockLevelSpec::Use),
            template: Some("flightdeck-".into()),
            ..SimFault::new(FaultKind::OneLockTemplate, start)
        })
        .expect("held");
    wait_ms(&sim, 1_000);
    assert!(
        one_support::template(&sim, tpl)
            .and_then(|t| t.lock)
            .is_some()
    );
    assert!(sim.stop_fault(id));
    assert!(
        one_support::template(&sim, tpl)
            .and_then(|t| t.lock)
            .is_none(),
        "unlocked when stopped"
    );
}
