use super::*;

/// Events as the timeline shows them, `Reason: message`, with the texts the planner
/// and the engine write (remediation.rs, infra.rs, membership.rs, routes.rs,
/// churn.rs, action.rs, reconcile.rs), and the rule each is about.
/// Events as the timeline shows them, `Reason: message`, with the texts the planner
/// and the engine write (remediation.rs, infra.rs, membership.rs, routes.rs,
/// churn.rs, action.rs, reconcile.rs), each after the rule it is about (`-`: none).
const EVENTS: &[&str] = &[
    "F3 RemediationStarted: replacing demo-workers-8: not registered as a node after 10m (a new machine comes first)",
    "F3 RemediationStarted: replacing demo-workers-2: node NotReady for 10m (a new machine comes first)",
    "F3 RemediationStarted: replacing demo-cp-2: the cluster's API never came up within 10m (a new machine comes first)",
    "F3 RemediationStarted: replacing demo-cp-1: its API has failed the load balancer's health check for 10m (member ERROR) (a new machine comes first)",
    "F3 RemediationCancelled: demo-workers-8 recovered (its node is Ready); no longer replaced (not registered as a node after 10m)",
    "F6 RemediationStarted: replacing demo-workers-3: its server is in ERROR (No valid host was found. There are not enough hosts available.) (a new machine comes first)",
    "F6 RemediationStarted: deleting demo-workers-4: its server is in ERROR (no fault given)",
    "F4 CreateSecurityGroupRule: create ingress rule tcp from 10.244.0.0/16: pod traffic (tcp from 10.244.0.0/16) must be allowed between machines",
    "F4 CreateSecurityGroupRule: create ingress rule icmp from 10.244.0.0/16: already so (neutron POST /v2.0/security-group-rules answered 409)",
    "F5 AddSecurityGroup: put demo-workers-1 back into the security group: demo-workers-1 is not in the cluster's security group demo, so it has no pod network",
    "F7 RemoveRoutes: remove route(s) 10.244.3.0/24 via 10.0.0.17: stale routes hijack pod traffic: 10.244.3.0/24 via 10.0.0.17: no live machine has that address",
    "F7 AddRoutes: add route(s) 10.244.3.0/24 via 10.0.0.21: pod traffic must reach demo-workers-9 (10.244.3.0/24)",
    "F8 RouteLimitReached: router demo-router holds 30 route(s) after removing stale ones and takes at most 30 (Neutron max_routes); 1 pod network route(s) cannot be added: 10.244.9.0/24 via 10.0.0.40",
    "F8 RouteLimitReachedResolved: RouteLimitReached no longer holds",
    "F11 ReconcileLoopDetected: workers machines was re-created 3 times within 30m without a spec change; its reconcile is stopped until the spec changes or `flightdeck resume demo`",
    "F11 ReconcileLoopDetectedResolved: ReconcileLoopDetected no longer holds",
    "- RemediationStarted: replacing demo-workers-5: a reason not written yet",
    "- ActionFailed: put demo-workers-1 back into the security group failed: nova answered 500",
    "- CreateServer: create server demo-workers-9: pool workers wants 3 machines",
    "- CreateSecurityGroupRule: create ingress rule tcp from 0.0.0.0/0: the API port must be open",
    "- MachineRemoved: demo-workers-8 is gone: member and server confirmed deleted",
];

#[test]
fn events_name_their_rule() {
    for line in EVENTS {
        let (want, event) = line.split_once(' ').unwrap_or_default();
        let (reason, message) = event.split_once(": ").unwrap_or_default();
        let want = Some(want).filter(|w| *w != "-");
        assert_eq!(rule_of(reason, message), want, "{event}");
    }
}

/// Asserts that each of `lines` is a line of `text`.
fn has(text: &str, lines: &[&str]) {
    for want in lines {
        assert!(text.lines().any(|l| l == *want), "no {want} in\n{text}");
    }
}

#[test]
fn events_count_repairs_once_and_end_them() {
    let m = Metrics::new();
    let events = [
        "RemediationStarted: replacing demo-workers-8: not registered as a node after 10m (a new machine comes first)",
        "RemediationStarted: replacing demo-workers-8: not registered as a node after 10m (a new machine comes first)",
        "MachineRemoved: demo-workers-8 is gone: member and server confirmed deleted",
        // The planner's event, then the condition's, for the same breaker.
        "ReconcileLoopDetected: control plane was re-created 3 times within 30m without a spec change; its reconcile is stopped until the spec changes or `flightdeck resume demo`",
        "ReconcileLoopDetected: control plane was re-created 3 times within 30m without a spec change; its reconcile is stopped until the spec changes or `flightdeck resume demo`",
        "ReconcileLoopDetectedResolved: ReconcileLoopDetected no longer holds",
        "AddSecurityGroup: put demo-workers-1 back into the security group: demo-workers-1 is not in the cluster's security group demo, so it has no pod network",
        // A new group's rules, then one restored.
        "CreateSecurityGroup: create security group demo-nodes: the cluster has no security group",
        "CreateSecurityGroupRule: create ingress rule tcp from 10.244.0.0/16: pod traffic (tcp from 10.244.0.0/16) must be allowed between machines",
        "CreateSecurityGroupRule: create ingress rule udp from 10.244.0.0/16: pod traffic (udp from 10.244.0.0/16) must be allowed between machines",
        "CreateSecurityGroupRule: create ingress rule icmp from 10.244.0.0/16: pod traffic (icmp from 10.244.0.0/16) must be allowed between machines",
        "CreateSecurityGroupRule: create ingress rule udp from 10.244.0.0/16: pod traffic (udp from 10.244.0.0/16) must be allowed between machines",
    ];
    for e in events {
        let (reason, message) = e.split_once(": ").unwrap_or_default();
        m.on_cluster_event("demo", reason, message);
    }
    let text = m.encode();
    has(
        &text,
        &[
            r#"flightdeck_repairs_started_total{rule="F3"} 1"#,
            r#"flightdeck_repairs_finished_total{rule="F3"} 1"#,
            r#"flightdeck_repairs_started_total{rule="F11"} 1"#,
            r#"flightdeck_repairs_finished_total{rule="F11"} 1"#,
            r#"flightdeck_repairs_started_total{rule="F5"} 1"#,
            r#"flightdeck_repairs_finished_total{rule="F5"} 1"#,
            r#"flightdeck_repairs_started_total{rule="F4"} 1"#,
        ],
    );
}

#[test]
fn fleet_snapshots_replace_label_sets() {
    let m = Metrics::new();
    let mut fleet = FleetGauges::default();
    fleet.add_cluster("Ready", ["RouteLimitReached"], 0);
    fleet.add_cluster("Provisioning", ["RouteLimitReached", "Remediating"], 2);
    fleet.add_set("demo", "workers", 1, 2);
    m.set_fleet(&fleet);
    has(
        &m.encode(),
        &[
            r#"flightdeck_conditions_active{type="RouteLimitReached"} 2"#,
            "flightdeck_churn_breakers_open 2",
            r#"flightdeck_repair_budget{cluster="demo",set="workers"} 2"#,
            r#"flightdeck_repairs_in_progress{cluster="demo",set="workers"} 1"#,
        ],
    );
    let mut later = FleetGauges::default();
    later.add_cluster("Ready", [], 0);
    m.set_fleet(&later);
    let text = m.encode();
    has(&text, &[r#"flightdeck_clusters{phase="Ready"} 1"#]);
    for gone in ["Provisioning", "RouteLimitReached", r#"set="workers""#] {
        assert!(!text.contains(gone), "{gone} in\n{text}");
    }
}

#[test]
fn the_text_format_names_counters_with_total_and_has_help_for_every_family() {
    let m = Metrics::new();
    m.reconciled("success", 0.2);
    m.set_queue(3, 1);
    m.cloud_call("openstack", "nova", "list_servers", "2xx", 0.01);
    m.repair_started(rule::F4);
    let text = m.encode();
    has(
        &text,
        &[
            "# TYPE flightdeck_reconciles_total counter",
            r#"flightdeck_reconciles_total{result="success"} 1"#,
            "flightdeck_queue_depth 3",
            r#"flightdeck_reconcile_duration_seconds_bucket{le="120.0"} 1"#,
        ],
    );
    assert!(!text.contains("_total_total") && !text.contains("# EOF"));
    let helped: HashSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# HELP ")?.split(' ').next())
        .collect();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let name = l.split(['{', ' ']).next().unwrap_or_default();
        let family = ["_bucket", "_sum", "_count"]
            .into_iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| helped.contains(f)))
            .unwrap_or(name);
        assert!(helped.contains(family), "no HELP for {name}");
    }
}
