//! The simulated OpenNebula's VMs: the lifecycle in virtual time, actions, the pool's
//! state filter, workload-cluster nodes and the mutation log.

use crate::common;
use crate::one_support;

use common::{api_lb, member_req, now, owner, ready, sim, wait_for, wait_lb_active, wait_ms};
use flightdeck_cloud::{GuestCluster, LoadBalancing};
use flightdeck_sim::{MutationKind, SimFault};
use flightdeck_spec::FaultKind;
use one_support::*;

const PENDING: u32 = 1;
const ACTIVE: u32 = 3;
const DONE: u32 = 6;
const PROLOG: u32 = 1;
const BOOT: u32 = 2;
const RUNNING: u32 = 3;
const EPILOG: u32 = 11;
const SHUTDOWN: u32 = 12;
const BOOT_FAILURE: u32 = 36;

fn states(sim: &flightdeck_sim::SimCloud, id: i32) -> (u32, u32) {
    let v = vm(sim, id);
    (v.state, v.lcm_state)
}

/// Every distinct (state, lcm) the VM goes through until `until` holds.
fn walk(sim: &flightdeck_sim::SimCloud, id: i32, until: (u32, u32)) -> Vec<(u32, u32)> {
    let mut seen = vec![states(sim, id)];
    wait_for(sim, |s| {
        let now = states(s, id);
        if seen.last() != Some(&now) {
            seen.push(now);
        }
        now == until
    });
    seen
}

#[test]
fn vm_goes_pending_prolog_boot_running_within_five_to_twenty_seconds() {
    let sim = sim(31);
    let t = allocate_template(&sim, "web", VM_BODY);
    let start = now(&sim);
    let v = ok_int(instantiate(&sim, t, "web-0", &tags_tmpl("u1", "web-0")));
    let path = walk(&sim, v, (ACTIVE, RUNNING));
    assert_eq!(
        path,
        [
            (PENDING, 0),
            (ACTIVE, PROLOG),
            (ACTIVE, BOOT),
            (ACTIVE, RUNNING)
        ]
    );
    let took = now(&sim).since(start).as_millis();
    assert!((5_000..=20_000).contains(&took), "took {took} ms");
    let doc = parse(&ok_str(call(&sim, "one.vm.info", vec![i(v), b(false)])));
    assert_eq!(
        doc.names(),
        [
            "ID",
            "UID",
            "GID",
            "UNAME",
            "GNAME",
            "NAME",
            "PERMISSIONS",
            "LAST_POLL",
            "STATE",
            "LCM_STATE",
            "PREV_STATE",
            "PREV_LCM_STATE",
            "RESCHED",
            "STIME",
            "ETIME",
            "DEPLOY_ID",
            "MONITORING",
            "SCHED_ACTIONS",
            "TEMPLATE",
            "USER_TEMPLATE",
            "HISTORY_RECORDS",
            "BACKUPS"
        ]
    );
    assert_eq!(
        (doc.text_at("STATE"), doc.text_at("LCM_STATE")),
        ("3".into(), "3".into())
    );
    assert_eq!(doc.text_at("NAME"), "web-0");
    assert_eq!(doc.text_at("TEMPLATE/TEMPLATE_ID"), t.to_string());
    assert_eq!(doc.text_at("TEMPLATE/VMID"), v.to_string());
    assert_eq!(doc.text_at("TEMPLATE/MEMORY"), "2048");
    let ip = doc.text_at("TEMPLATE/NIC/IP");
    assert_eq!(Some(ip.parse().expect("an address")), vm(&sim, v).address);
    assert_eq!(doc.text_at("USER_TEMPLATE/FLIGHTDECK_UID"), "u1");
    assert!(
        doc.at("TEMPLATE/FLIGHTDECK_UID").is_none(),
        "tags stay in the user template"
    );
    assert_eq!(doc.text_at("HISTORY_RECORDS/HISTORY/SEQ"), "0");
    assert_eq!(
        vm(&sim, v).tags,
        [
            "flightdeck-cluster=demo",
            "flightdeck-uid=u1",
            "flightdeck-role=machine",
            "flightdeck-machine=web-0"
        ]
    );
}

#[test]
fn terminate_goes_shutdown_epilog_done_and_done_vms_show_only_with_state_minus_two() {
    let sim = sim(32);
    let t = allocate_template(&sim, "web", VM_BODY);
    let v = ok_int(instantiate(&sim, t, "", ""));
    assert_eq!(
        vm(&sim, v).name,
        format!("web-{v}"),
        "an unnamed VM is <template>-<id>"
    );
    wait_for(&sim, |s| states(s, v) == (ACTIVE, RUNNING));
    let address = vm(&sim, v).address;
    assert_eq!(
        ok_int(call(&sim, "one.vm.action", vec![s("terminate"), i(v)])),
        v
    );
    let start = now(&sim);
    let path = walk(&sim, v, (DONE, 0));
    assert_eq!(path, [(ACTIVE, SHUTDOWN), (ACTIVE, EPILOG), (DONE, 0)]);
    let took = now(&sim).since(start).as_millis();
    assert!((2_000..=6_000).contains(&took), "took {took} ms");
    assert_eq!(vm(&sim, v).address, None, "the lease is released at DONE");
    assert!(address.is_some());
    let pool = |state: i32| {
        let doc = parse(&ok_str(call(
            &sim,
            "one.vmpool.info",
            vec![i(-2), i(-1), i(-1), i(state)],
        )));
        assert_eq!(doc.name, "VM_POOL");
        doc.children
            .iter()
            .map(|c| c.text_at("ID"))
            .collect::<Vec<_>>()
    };
    assert!(pool(-1).is_empty(), "DONE is hidden from -1");
    assert_eq!(pool(-2), [v.to_string()]);
    assert_eq!(pool(6), [v.to_string()]);
    let (msg, code, _) = fail(call(
        &sim,
        "one.vmpool.info",
        vec![i(-2), i(-1), i(-1), i(-3)],
    ));
    assert_eq!(
        (msg.as_str(), code),
        (
            "[one.vmpool.info] Incorrect filter_flag, state",
            XML_RPC_API
        )
    );
    assert_eq!(
        ok_int(call(&sim, "one.vm.action", vec![s("terminate"), i(v)])),
        v,
        "a DONE VM terminates as a no-op"
    );
}

#[test]
fn vm_action_takes_the_action_before_the_id_and_answers_wrong_states() {
    let sim = sim(33);
    let t = allocate_template(&sim, "web", VM_BODY);
    let v = ok_int(instantiate(&sim, t, "web-0", ""));
    match call(&sim, "one.vm.action", vec![i(v), s("terminate")]) {
        dxr::Value::Struct(f) => assert_eq!(f.get("faultCode"), Some(&i(-501))),
        other => panic!("id before action is a type fault, got {other:?}"),
    }
    wait_for(&sim, |s| states(s, v).1 == PROLOG);
    let (msg, code, _) = fail(call(&sim, "one.vm.action", vec![s("terminate"), i(v)]));
    assert_eq!(code, ACTION);
    assert_eq!(
        msg,
        format!(
            "[one.vm.action] Error performing action \"terminate\": Could not terminate VM {v}, wrong state PROLOG."
        )
    );
    let (msg, _, _) = fail(call(&sim, "one.vm.action", vec![s("poweroff"), i(v)]));
    assert_eq!(
        msg,
        "[one.vm.action] Error performing action \"poweroff\": This action is not available for state PROLOG"
    );
    let (msg, code, _) = fail(call(&sim, "one.vm.action", vec![s("explode"), i(v)]));
    assert_eq!(
        (msg.as_str(), code),
        (
            "[one.vm.action] Action \"explode\" is not supported",
            ACTION
        )
    );
    let (msg, code, id) = fail(call(&sim, "one.vm.action", vec![s("terminate"), i(77)]));
    assert_eq!(
        (msg.as_str(), code, id),
        (
            "[one.vm.action] Error getting virtual machine [77].",
            NO_EXISTS,
            77
        )
    );
    wait_for(&sim, |s| states(s, v) == (ACTIVE, RUNNING));
    ok_int(call(&sim, "one.vm.action", vec![s("poweroff"), i(v)]));
    wait_for(&sim, |s| states(s, v) == (8, 0));
    ok_int(call(&sim, "one.vm.action", vec![s("resume"), i(v)]));
    wait_for(&sim, |s| states(s, v) == (ACTIVE, RUNNING));
}

#[test]
fn boot_failure_fault_ends_the_boot_in_boot_failure_and_terminate_cleans_up() {
    let sim = sim(34);
    sim.inject(SimFault::new(FaultKind::OneVmBootFailure, now(&sim)));
    let t = allocate_template(&sim, "web", VM_BODY);
    let v = ok_int(instantiate(&sim, t, "web-0", &tags_tmpl("u1", "web-0")));
    wait_for(&sim, |s| states(s, v) == (ACTIVE, BOOT_FAILURE));
    wait_ms(&sim, 120_000);
    assert!(
        sim.snapshot().nodes.is_empty(),
        "a VM that never ran registers no node"
    );
    ok_int(call(&sim, "one.vm.action", vec![s("terminate-hard"), i(v)]));
    wait_for(&sim, |s| states(s, v) == (DONE, 0));
}

#[test]
fn running_vm_with_flightdeck_tags_registers_a_node_that_goes_after_done() {
    let sim = common::sim_with_node_controller(35);
    let o = owner("u1");
    let (lb, pool) = api_lb(&sim, &o, false);
    let t = allocate_template(&sim, "web", VM_BODY);
    let v = ok_int(instantiate(
        &sim,
        t,
        "demo-cp-1",
        &tags_tmpl("u1", "demo-cp-1"),
    ));
    wait_for(&sim, |s| states(s, v) == (ACTIVE, RUNNING));
    let address = vm(&sim, v).address.expect("a running VM has an address");
    ready(sim.create_member(&member_req(&pool, "cp-1", address, &o))).expect("member");
    wait_lb_active(&sim, &lb);
    let key = v.to_string();
    wait_for(&sim, |s| {
        ready(s.list_nodes(&o)).expect("call").is_some_and(|nodes| {
            nodes
                .iter()
                .any(|n| n.ready && n.server_id.as_deref() == Some(key.as_str()))
        })
    });
    let nodes = ready(sim.list_nodes(&o)).expect("call").unwrap_or_default();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].name, "demo-cp-1");
    let (uid, _) = sim.snapshot().nodes.into_iter().next().expect("node");
    assert_eq!(uid, "u1");
    let other = owner("u2");
    assert_eq!(
        ready(sim.list_nodes(&other)).expect("call"),
        None,
        "another cluster sees none"
    );
    ok_int(call(&sim, "one.vm.action", vec![s("terminate"), i(v)]));
    wait_for(&sim, |s| states(s, v) == (DONE, 0));
    wait_for(&sim, |s| s.snapshot().nodes.is_empty());
}

#[test]
fn mutations_are_logged_with_service_method_name_and_tags() {
    let sim = sim(36);
    let t = allocate_template(&sim, "web", VM_BODY);
    let v = ok_int(instantiate(&sim, t, "web-0", &tags_tmpl("u1", "web-0")));
    ok_str(call(&sim, "one.vm.info", vec![i(v)]));
    fail(call(
        &sim,
        "one.template.allocate",
        vec![s("NAME = web\nCPU = 1")],
    ));
    ok_int(call(&sim, "one.template.lock", vec![i(t), i(1)]));
    ok_int(call(&sim, "one.vm.action", vec![s("terminate"), i(v)]));
    ok_int(call(&sim, "one.template.unlock", vec![i(t)]));
    ok_int(call(&sim, "one.template.delete", vec![i(t)]));
    let log: Vec<_> = sim
        .mutations()
        .into_iter()
        .filter(|m| m.service == "opennebula")
        .collect();
    let seen: Vec<(&str, MutationKind, &str, &str, bool)> = log
        .iter()
        .map(|m| {
            (
                m.operation.as_str(),
                m.kind,
                m.target_id.as_str(),
                m.target_name.as_str(),
                m.ok,
            )
        })
        .collect();
    let tid = format!("template/{t}");
    let vid = format!("vm/{v}");
    assert_eq!(
        seen,
        [
            (
                "one.template.allocate",
                MutationKind::Create,
                tid.as_str(),
                "web",
                true
            ),
            (
                "one.template.instantiate",
                MutationKind::Create,
                vid.as_str(),
                "web-0",
                true
            ),
            (
                "one.template.allocate",
                MutationKind::Create,
                "",
                "web",
                false
            ),
            (
                "one.template.lock",
                MutationKind::Update,
                tid.as_str(),
                "web",
                true
            ),
            (
                "one.vm.action",
                MutationKind::Delete,
                vid.as_str(),
                "web-0",
                true
            ),
            (
                "one.template.unlock",
                MutationKind::Update,
                tid.as_str(),
                "web",
                true
            ),
            (
                "one.template.delete",
                MutationKind::Delete,
                tid.as_str(),
                "web",
                true
            ),
        ]
    );
    let tags = [
        "flightdeck-cluster=demo",
        "flightdeck-uid=u1",
        "flightdeck-role=machine",
        "flightdeck-machine=web-0",
    ];
    assert_eq!(log[1].target_tags, tags);
    assert_eq!(log[4].target_tags, tags);
    assert!(log[0].target_tags.is_empty(), "templates carry no tags");
    let calls = &sim.api_calls()["opennebula"];
    assert_eq!(calls["one.template.allocate"], 2);
    assert_eq!(calls["one.vm.info"], 1);
}

#[test]
fn vmpool_info_short_documents_omit_the_tags_and_infoextended_has_them() {
    let sim = sim(37);
    let t = allocate_template(&sim, "web", VM_BODY);
    let v = ok_int(instantiate(&sim, t, "web-0", &tags_tmpl("u1", "web-0")));
    let short = parse(&ok_str(call(
        &sim,
        "one.vmpool.info",
        vec![i(-1), i(-1), i(-1), i(-1)],
    )));
    let first = &short.children[0];
    assert_eq!(first.text_at("ID"), v.to_string());
    assert!(first.at("USER_TEMPLATE/FLIGHTDECK_UID").is_none());
    assert!(first.at("TEMPLATE/NIC/IP").is_some());
    let full = parse(&ok_str(call(
        &sim,
        "one.vmpool.infoextended",
        vec![i(-2), i(-1), i(-1), i(-1)],
    )));
    assert_eq!(
        full.children[0].text_at("USER_TEMPLATE/FLIGHTDECK_UID"),
        "u1"
    );
    let paged = parse(&ok_str(call(
        &sim,
        "one.vmpool.info",
        vec![i(-2), i(0), i(-5), i(-2)],
    )));
    assert_eq!(paged.children.len(), 1, "end < -1 pages from start");
}
