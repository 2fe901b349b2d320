//! flightdeck's node watch against the simulated workload cluster of an OpenStack
//! cluster, over HTTP as a real one: the kube-runtime watcher lists once and then sees
//! nodes register and change without listing again; a broken watch keeps its nodes but
//! says since when they are stale, and a new watch lists again once the API answers;
//! events that come out of order never put a node's older state over its newer one.

use std::sync::Arc;
use std::time::Duration;

use flightdeck_cloud::{
    Clock, GuestCluster, Node, Ownership, Role, Server, ServerStatus, SimClock, Timestamp,
};
use flightdeck_sim::{SimCloud, SimConfig, SimFault};
use flightdeck_sim_http::serve_kubernetes;
use flightdeck_spec::scenario::{FaultKind, Service};
use flightdeck_workload::{KubeGuest, KubeconfigFile, ProviderIdFormat};
use tokio::net::TcpListener;

const CLUSTER: &str = "demo";

fn owner() -> Ownership {
    Ownership {
        cluster: CLUSTER.into(),
        uid: "uid-1".into(),
    }
}

fn server(n: u32, machine: &str) -> Server {
    Server {
        id: format!("srv-{n}"),
        name: format!("{CLUSTER}-{machine}"),
        status: ServerStatus::Active,
        task_state: None,
        tags: owner().tags(&Role::Machine(machine.into())),
        security_groups: Vec::new(),
        address: Some(format!("10.0.0.{n}").parse().expect("ip")),
        image: "img".into(),
        flavor: "m1".into(),
        fault: None,
        created_at: Timestamp::SIM_EPOCH,
    }
}

/// Moves virtual time on by `ms`, letting the simulated kubelets act.
fn wait_ms(sim: &SimCloud, ms: u64) {
    sim.clock()
        .advance(flightdeck_spec::Duration::from_millis(ms));
    sim.advance();
}

/// Reads the nodes until `done` holds for them (real time: the watch is a task; at most
/// 60 s, a bound for a hang, not a performance figure).
async fn read_until(
    guest: &KubeGuest<KubeconfigFile>,
    what: &str,
    done: impl Fn(&Option<Vec<Node>>) -> bool,
) -> Option<Vec<Node>> {
    for _ in 0..2400 {
        let nodes = guest.list_nodes(&owner()).await.expect("read");
        if done(&nodes) {
            return nodes;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("never seen: {what}");
}

/// How many times the nodes were listed (not watched).
fn lists_of(sim: &SimCloud) -> u64 {
    sim.api_calls()
        .get("kubernetes")
        .and_then(|m| m.get("GET nodes"))
        .copied()
        .unwrap_or(0)
}

fn names(nodes: &Option<Vec<Node>>) -> Vec<String> {
    let mut v: Vec<String> = nodes.iter().flatten().map(|n| n.name.clone()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn nodes_are_watched_and_a_broken_watch_reads_as_stale() {
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let sim = Arc::new(SimCloud::new(SimConfig::default(), 3, clock.clone()));
    let mut servers = vec![server(1, "cp-1")];
    sim.mirror_servers(
        CLUSTER,
        &servers,
        &[],
        Some("10.244.0.0/16".parse().expect("cidr")),
    );
    wait_ms(&sim, 120_000);
    let (_dir, guest) = watching(&sim, clock.clone()).await;

    // Nothing is judged before the first full list is in.
    let first = guest.list_nodes(&owner()).await.expect("read");
    assert_eq!(first, None, "the watch has not listed yet");
    let nodes = read_until(&guest, "the control-plane node", |n| n.is_some()).await;
    let cp = &nodes.expect("nodes")[0];
    assert_eq!(
        cp.server_id.as_deref(),
        Some("srv-1"),
        "matched by openstack:///<id>"
    );
    assert!(cp.ready && cp.pod_cidr.is_some(), "{cp:?}");
    assert_eq!(guest.nodes_stale_since(&owner()), None);
    let lists = lists_of(&sim);

    // A node that registers is seen without another list.
    servers.push(server(2, "workers-1"));
    sim.mirror_servers(CLUSTER, &servers, &[], None);
    wait_ms(&sim, 120_000);
    let nodes = read_until(&guest, "the worker's node", |n| names(n).len() == 2).await;
    assert_eq!(names(&nodes), ["demo-cp-1", "demo-workers-1"]);
    assert_eq!(lists_of(&sim), lists, "no list in steady state");

    // The API fails: the watch breaks, its nodes are kept and stamped stale.
    let broke_at = clock.now();
    let mut fault = SimFault::new(FaultKind::ApiErrorRate, broke_at);
    fault.service = Some(Service::Kubernetes);
    fault.end = Some(broke_at.plus(flightdeck_spec::Duration::from_secs(5)));
    sim.inject(fault);
    for _ in 0..2400 {
        if guest.nodes_stale_since(&owner()).is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        guest.nodes_stale_since(&owner()),
        Some(broke_at),
        "stale since the break"
    );
    let kept = guest.list_nodes(&owner()).await.expect("read");
    assert_eq!(
        names(&kept),
        ["demo-cp-1", "demo-workers-1"],
        "kept, not forgotten"
    );

    // The API answers again: after the restart delay a new watch lists and is current.
    wait_ms(&sim, 6_000);
    read_until(&guest, "a healed watch", |_| {
        guest.nodes_stale_since(&owner()).is_none()
    })
    .await;
    assert!(lists_of(&sim) > lists, "the new watch listed again");
}

/// `k8s.watchReorder` (the Acto class's reordered events): a node goes NotReady and back
/// between two polls of the watch, and the two events come newest first. The watch
/// drops the older one by its resourceVersion, and ends with the node as it is.
#[tokio::test]
async fn events_that_come_out_of_order_never_put_a_nodes_older_state_over_its_newer_one() {
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let sim = Arc::new(SimCloud::new(SimConfig::default(), 3, clock.clone()));
    sim.mirror_servers(
        CLUSTER,
        &[server(1, "cp-1")],
        &[],
        Some("10.244.0.0/16".parse().expect("cidr")),
    );
    wait_ms(&sim, 120_000);
    let (_dir, guest) = watching(&sim, clock.clone()).await;
    read_until(&guest, "the ready node", |n| {
        n.as_ref().is_some_and(|n| n.len() == 1 && n[0].ready)
    })
    .await;

    let mut reorder = SimFault::new(FaultKind::K8sWatchReorder, clock.now());
    reorder.cluster = Some(CLUSTER.into());
    sim.inject(reorder);
    for _ in 0..5 {
        // NotReady for a second, seen by a read of the API, then Ready again: two events
        // between two polls of the watch (200 ms apart in wall time).
        let mut blip = SimFault::new(FaultKind::AllNotReady, clock.now());
        blip.end = Some(clock.now().plus(flightdeck_spec::Duration::from_secs(1)));
        sim.inject(blip);
        read_nodes(&sim);
        wait_ms(&sim, 2_000);
        read_nodes(&sim);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The watch ends with the node as it is (Ready), though the last event of some
    // answers was its NotReady.
    read_until(&guest, "the node Ready after the reordered events", |n| {
        n.as_ref().is_some_and(|n| n.len() == 1 && n[0].ready)
    })
    .await;
    assert!(
        guest.nodes_out_of_order(&owner()) > 0,
        "older events were dropped"
    );
    let struck = sim.fault_effects();
    assert!(
        struck
            .get(&FaultKind::K8sWatchReorder)
            .copied()
            .unwrap_or(0)
            > 0,
        "the fault reordered answers: {struck:?}"
    );
}

/// One read of the workload cluster's nodes through its API (as `kubectl get nodes`):
/// the simulated API server records their state as it is now.
fn read_nodes(sim: &SimCloud) {
    let answer = sim.kube_request(
        CLUSTER,
        flightdeck_sim::KubeRequest {
            method: "GET".into(),
            path: "/api/v1/nodes".into(),
            query: String::new(),
            body: Vec::new(),
            content_type: None,
        },
    );
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
}

/// A node watch of the cluster over HTTP, as for a real workload cluster.
async fn watching(
    sim: &Arc<SimCloud>,
    clock: SimClock,
) -> (tempfile::TempDir, KubeGuest<KubeconfigFile>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(serve_kubernetes(sim.clone(), listener));
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("demo.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {{server: 'http://{addr}/clusters/{CLUSTER}'}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user: {{token: t}}\n"
        ),
    )
    .expect("kubeconfig");
    let clock: Arc<dyn Clock> = Arc::new(clock);
    let guest = KubeGuest::watching(
        KubeconfigFile::new(&path),
        ProviderIdFormat::OpenStack,
        clock,
    );
    (dir, guest)
}
