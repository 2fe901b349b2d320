use crate::client::describe::describe;
use crate::client::follow::deletion_progress;
use crate::client::http::{ApiFailure, problem_line};
use crate::client::render::{age, clock, cluster_table, event_line, human_duration, plan_text};
use crate::client::types::{
    ApiError, ClusterDetail, ClusterSummary, EventView, FaultKinds, PlanView, Problem,
};
use crate::client::verbs::faults_text;

/// 2026-01-01T00:00:00Z, the simulator's epoch.
const T0: u64 = 1_767_225_600_000;

#[test]
fn ages_read_like_kubectl() {
    let cases = [
        (0, "0s"),
        (45, "45s"),
        (119, "119s"),
        (120, "2m"),
        (192, "3m12s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (2 * 3600 + 5 * 60, "125m"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (3 * 3600, "3h"),
        (9 * 3600, "9h"),
        (3 * 86_400, "3d"),
        (3 * 86_400 + 4 * 3600, "3d4h"),
        (30 * 86_400, "30d"),
        (3 * 365 * 86_400 + 86_400, "3y1d"),
        (9 * 365 * 86_400, "9y"),
    ];
    for (secs, want) in cases {
        assert_eq!(human_duration(secs), want, "{secs}s");
    }
    assert_eq!(age(Some(T0), T0 + 192_999), "3m12s");
    assert_eq!(
        age(Some(T0 + 1500), T0),
        "0s",
        "a second of clock skew is now"
    );
    assert_eq!(age(Some(T0 + 5000), T0), "<invalid>");
    assert_eq!(age(None, T0), "<unknown>");
}

#[test]
fn clock_times_are_utc() {
    assert_eq!(clock(T0), "00:00:00");
    assert_eq!(
        clock(T0 + (13 * 3600 + 4 * 60 + 5) * 1000 + 999),
        "13:04:05"
    );
}

fn summary(json: serde_json::Value) -> ClusterSummary {
    serde_json::from_value(json).expect("a ClusterSummary")
}

fn demo() -> serde_json::Value {
    serde_json::json!({
        "name": "demo", "uid": "c0ffee", "cloud": "sim/openstack", "phase": "Ready",
        "ready": true,
        "controlPlane": {"name": "demo-control-plane", "ready": 3, "desired": 3, "upToDate": 3},
        "pools": [
            {"name": "workers", "ready": 2, "desired": 3, "upToDate": 3},
            {"name": "gpu", "ready": 1, "desired": 1, "upToDate": 1}
        ],
        "endpoint": "10.0.0.5", "conditions": [], "breakers": [], "repairs": 0,
        "createdAt": T0, "lastError": null, "now": T0 + 192_000
    })
}

fn edge() -> serde_json::Value {
    serde_json::json!({
        "name": "edge-one", "uid": "beef", "cloud": "opennebula:http://one:2633/RPC2",
        "phase": "Provisioning", "ready": false,
        "controlPlane": {"name": "cp", "ready": 0, "desired": 1, "upToDate": 0},
        "pools": [], "endpoint": null,
        "conditions": ["RepairBlocked", "ReconcileLoopDetected"],
        "breakers": ["server/edge-one-cp-1"], "repairs": 2,
        "createdAt": T0, "lastError": null, "now": T0 + (3 * 3600 + 5 * 60) * 1000
    })
}

#[test]
fn the_cluster_table_lines_up() {
    let items = [summary(demo()), summary(edge())];
    let want = "\
NAME       CLOUD                             PHASE          CONTROL-PLANE   WORKERS   CONDITIONS                            AGE
demo       sim/openstack                     Ready          3/3             3/4       -                                     3m12s
edge-one   opennebula:http://one:2633/RPC2   Provisioning   0/1             -         RepairBlocked,ReconcileLoopDetected   3h5m
";
    assert_eq!(cluster_table(&items, false), want);
    let wide = cluster_table(&items, true);
    let lines: Vec<&str> = wide.lines().collect();
    assert!(
        lines[0].ends_with("AGE     ENDPOINT   BREAKERS   REPAIRS   UID"),
        "{wide}"
    );
    assert!(
        lines[1].ends_with("3m12s   10.0.0.5   0          0         c0ffee"),
        "{wide}"
    );
    assert!(
        lines[2].ends_with("3h5m    -          1          2         beef"),
        "{wide}"
    );
}

#[test]
fn events_read_like_the_progress_lines() {
    let e = EventView {
        at: T0 + 61_000,
        cluster: "demo".into(),
        severity: "Warning".into(),
        reason: "NodeNotReady".into(),
        message: "node demo-workers-2 is NotReady".into(),
    };
    assert_eq!(
        event_line(&e),
        "[00:01:01] !demo       NodeNotReady             node demo-workers-2 is NotReady"
    );
    let normal = EventView {
        severity: "Normal".into(),
        ..e
    };
    assert!(event_line(&normal).starts_with("[00:01:01]  demo "));
}

#[test]
fn problems_read_source_line_path_message() {
    let failure = ApiFailure {
        status: reqwest::StatusCode::UNPROCESSABLE_ENTITY,
        body: ApiError {
            error: "demo.yaml: the spec has 2 problems".into(),
            problems: vec![
                Problem {
                    source: "demo.yaml".into(),
                    path: "spec.network.podCIDR".into(),
                    line: Some(12),
                    document: 1,
                    column: Some(3),
                    message: "not a CIDR".into(),
                },
                Problem {
                    source: "demo.yaml".into(),
                    path: String::new(),
                    line: None,
                    document: 2,
                    column: None,
                    message: "no kind".into(),
                },
            ],
        },
        hint: None,
    };
    assert_eq!(
        failure.to_string(),
        "demo.yaml: the spec has 2 problems\ndemo.yaml:12: spec.network.podCIDR: not a CIDR\ndemo.yaml: no kind"
    );
    assert_eq!(
        problem_line(&failure.body.problems[0]),
        "demo.yaml:12: spec.network.podCIDR: not a CIDR"
    );
}

#[test]
fn a_daemon_plan_reads_like_the_offline_plan() {
    let p: PlanView = serde_json::from_value(serde_json::json!({
        "cluster": "demo",
        "actions": [{"kind": "CreateServer", "summary": "create server demo-workers-4", "reason": "pool workers has 2 of 3 machines"}],
        "repairs": [{"machine": "demo-workers-2", "reason": "node NotReady for 5m", "state": "replacing"}],
        "repairBudgets": [{"set": "workers", "budget": 2, "inUse": 1}],
        "conditions": ["Repairing"],
        "requeueAfter": "30s",
        "observedAt": T0 + 3_600_000
    }))
    .expect("a PlanView");
    let want = "\
Dry run against what the cloud showed at 01:00:00 (nothing is changed):

cluster demo: 1 action(s)
   1. create server demo-workers-4
      because pool workers has 2 of 3 machines
  repairs (flight control):
    - demo-workers-2: node NotReady for 5m (replacing)
    budget workers: 1 of 2 in use, 1 left (maxUnhealthy)
  conditions: Repairing
  then look again in 30s
";
    assert_eq!(plan_text(&p), want);
}

fn detail() -> ClusterDetail {
    let mut v = demo();
    let m = v.as_object_mut().expect("object");
    m.insert("conditions".into(), serde_json::json!(["Repairing"]));
    m.insert("breakers".into(), serde_json::json!(["member/demo-cp-2"]));
    m.insert("lastError".into(), serde_json::json!("octavia: 503"));
    m.insert("spec".into(), serde_json::json!({}));
    m.insert("memory".into(), serde_json::json!({}));
    let machine = |name: &str, node: Option<&str>, member: bool| {
        serde_json::json!({
            "name": name, "serverId": format!("srv-{name}"), "serverStatus": "ACTIVE",
            "address": "10.0.0.11", "version": "v1.33.1", "image": "ubuntu-24.04",
            "node": node,
            "member": if member { serde_json::json!({"id": "mem-1", "provisioningStatus": "ACTIVE", "operatingStatus": "ONLINE"}) } else { serde_json::Value::Null },
            "upToDate": true, "removing": false
        })
    };
    m.insert("status".into(), serde_json::json!({
        "phase": "Ready", "ready": true,
        "controlPlane": {"name": "demo-control-plane", "replicas": 3, "ready": 3, "upToDate": 3,
            "machines": [machine("demo-cp-1", Some("Ready"), true)]},
        "nodePools": [{"name": "workers", "replicas": 3, "ready": 2, "upToDate": 3,
            "machines": [machine("demo-workers-1", Some("Ready"), false),
                {"name": "demo-workers-2", "serverId": null, "serverStatus": "REQUESTED",
                 "address": null, "version": "v1.33.1", "image": "ubuntu-24.04", "node": null,
                 "member": null, "upToDate": true, "removing": false}]}],
        "loadBalancer": {"id": "lb-1", "provisioningStatus": "ACTIVE", "operatingStatus": "ONLINE", "vipAddress": "10.0.0.5"},
        "repairs": [{"machine": "demo-workers-3", "reason": "node NotReady for 5m", "state": "replacing"}],
        "repairBudgets": [{"set": "workers", "budget": 2, "inUse": 1}],
        "conditions": [
            {"type": "Ready", "status": true, "reason": "AllReady", "message": "every machine serves", "since": T0 + 60_000},
            {"type": "Repairing", "status": true, "reason": "NodeNotReady", "message": "replacing demo-workers-3", "since": T0 + 150_000}
        ]
    }));
    serde_json::from_value(v).expect("a ClusterDetail")
}

#[test]
fn describe_draws_the_cluster_as_a_tree() {
    let text = describe(&detail()).expect("describes");
    assert_eq!(text, DESCRIBE_DEMO, "got:\n{text}");
}

const DESCRIBE_DEMO: &str = "\
NAME                                STATUS          DETAILS
Cluster/demo                        Ready           sim/openstack, endpoint 10.0.0.5, conditions Repairing, age 3m12s
├─LoadBalancer                      ACTIVE/ONLINE   id lb-1, vip 10.0.0.5
├─ControlPlane/demo-control-plane   3/3 ready       3 up to date
│ └─Machine/demo-cp-1               up to date      v1.33.1, image ubuntu-24.04
│   ├─Server                        ACTIVE          id srv-demo-cp-1, address 10.0.0.11
│   ├─Node                          Ready
│   └─Member                        ACTIVE/ONLINE   id mem-1
├─NodePool/workers                  2/3 ready       3 up to date
│ ├─Machine/demo-workers-1          up to date      v1.33.1, image ubuntu-24.04
│ │ ├─Server                        ACTIVE          id srv-demo-workers-1, address 10.0.0.11
│ │ └─Node                          Ready
│ └─Machine/demo-workers-2          up to date      v1.33.1, image ubuntu-24.04
│   ├─Server                        REQUESTED       not created yet
│   └─Node                          -               not joined yet
└─NodePool/gpu                      1/1 ready       1 up to date

Last reconcile failed: octavia: 503

Conditions:
  TYPE        STATUS   REASON         AGE     MESSAGE
  Ready       True     AllReady       2m12s   every machine serves
  Repairing   True     NodeNotReady   42s     replacing demo-workers-3

Repairs (flight control):
  - demo-workers-3: node NotReady for 5m (replacing)
  budget workers: 1 of 2 in use, 1 left (maxUnhealthy)

Breakers (the churn breaker stopped these; `flightdeck resume demo` closes them):
  - member/demo-cp-2
";

#[test]
fn describe_without_status_says_so() {
    let mut d = detail();
    d.status = serde_json::Value::Null;
    let text = describe(&d).expect("describes");
    assert!(text.contains("No status yet"), "{text}");
    assert!(
        text.contains("└─NodePool/gpu"),
        "pools from the summary still show:\n{text}"
    );
    d.status = serde_json::json!({"phase": 7});
    let e = describe(&d).expect_err("bad status").to_string();
    assert!(
        e.contains("the status of cluster demo is not understood"),
        "{e}"
    );
}

#[test]
fn deletion_progress_counts_what_is_left() {
    let mut d = detail();
    d.summary.phase = "Deleting".into();
    assert_eq!(
        deletion_progress(&d),
        "Deleting, 3 machine(s) left, load balancer left, control plane 3/3 ready, workers 3/4 ready"
    );
}

#[test]
fn faults_list_kinds_and_active_ones() {
    let k: FaultKinds = serde_json::from_value(serde_json::json!({
        "kinds": ["api.latency", "nova.bootError"],
        "active": [{"id": 3, "kind": "nova.bootError", "cluster": "demo", "cloud": "openstack", "start": T0, "end": T0 + 120_000}]
    }))
    .expect("FaultKinds");
    assert_eq!(
        faults_text(&k),
        "Fault kinds:\n  api.latency\n  nova.bootError\n\nActive faults (times UTC):\n  ID   KIND             CLUSTER   CLOUD       STARTED    ENDS\n  3    nova.bootError   demo      openstack   00:00:00   00:02:00\n"
    );
}

#[test]
fn describe_names_each_cloud_s_instances() {
    for (cloud, word) in [
        ("sim/kubevirt", "VMI"),
        ("kubevirt:/home/u/infra.kubeconfig", "VMI"),
        ("opennebula:http://one:2633/RPC2", "VM"),
        ("openstack:prod", "Server"),
    ] {
        let mut d = detail();
        d.summary.cloud = cloud.into();
        let text = describe(&d).expect("describes");
        assert!(text.contains(&format!("│   ├─{word} ")), "{cloud}:\n{text}");
    }
}

#[test]
fn describe_speaks_of_load_balancer_members_only_on_a_cloud_that_has_them() {
    for (cloud, members) in [
        ("sim/openstack", true),
        ("openstack:prod", true),
        ("sim/opennebula", false),
        ("opennebula:http://one:2633/RPC2", false),
        ("sim/kubevirt", false),
    ] {
        let mut d = detail();
        d.summary.cloud = cloud.into();
        // A control-plane machine that has no member (yet, or ever).
        for m in d.status["controlPlane"]["machines"]
            .as_array_mut()
            .expect("machines")
        {
            m["member"] = serde_json::Value::Null;
        }
        let text = describe(&d).expect("describes");
        assert_eq!(
            text.contains("not a load balancer member yet"),
            members,
            "{cloud}: a Member line {}:\n{text}",
            if members {
                "is missing"
            } else {
                "where there is no load balancer"
            }
        );
    }
}
