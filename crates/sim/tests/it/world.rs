//! Replay, bookkeeping and the shape of the simulator's public surface.

use crate::common;

use common::*;
use flightdeck_cloud::{Compute, LoadBalancing, Network, Provider, Role};
use flightdeck_sim::{MutationKind, SimCloud, SimFault, World};
use flightdeck_spec::{FaultKind, Service};

/// A short, busy script: servers, a load balancer with a member, faults, deletes.
fn script(seed: u64) -> (World, Vec<flightdeck_sim::Mutation>, String) {
    let sim = sim(seed);
    let o = owner("u1");
    sim.inject(SimFault {
        service: Some(Service::Nova),
        rate: Some(0.2),
        ..SimFault::new(FaultKind::ApiErrorRate, now(&sim))
    });
    let (lb, pool) = api_lb(&sim, &o, true);
    let mut made = Vec::new();
    for i in 0..5 {
        if let Ok(s) = ready(sim.create_server(&server_req(&format!("m{i}"), &o, &[]))) {
            made.push(s.id);
        }
    }
    wait_ms(&sim, 4_000);
    for (i, id) in made.iter().enumerate() {
        if let Some(addr) = server(&sim, id).and_then(|s| s.address) {
            let _ = ready(sim.create_member(&member_req(&pool, &format!("m{i}"), addr, &o)));
            wait_lb_active(&sim, &lb);
        }
    }
    wait_ms(&sim, 90_000);
    if let Some(id) = made.first() {
        let _ = ready(sim.delete_server(id));
    }
    wait_ms(&sim, 10_000);
    let calls = format!("{:?}", sim.api_calls());
    (sim.snapshot(), sim.mutations(), calls)
}

#[test]
fn same_seed_same_world() {
    let (a, ma, ca) = script(42);
    let (b, mb, cb) = script(42);
    assert_eq!(a, b);
    assert_eq!(ma, mb);
    assert_eq!(ca, cb);
    assert!(
        !a.members.is_empty() && !a.nodes.is_empty(),
        "the script did something"
    );
    let (c, _, _) = script(43);
    assert_ne!(a.servers[0].id, c.servers[0].id, "another seed, other ids");
}

#[test]
fn api_calls_count_each_operation_template() {
    let sim = sim(1);
    let o = owner("u1");
    let s = ready(sim.create_server(&server_req("a", &o, &[]))).expect("create");
    ready(sim.list_servers(&o)).expect("list");
    ready(sim.list_servers(&o)).expect("list");
    let _ = ready(sim.delete_server(&s.id));
    let _ = ready(sim.delete_server("missing"));
    ready(sim.list_load_balancers(&o)).expect("list");
    let calls = sim.api_calls();
    let nova = &calls["nova"];
    assert_eq!(nova["POST /servers"], 1);
    assert_eq!(nova["GET /servers/detail"], 2);
    assert_eq!(nova["DELETE /servers/{server_id}"], 2);
    assert_eq!(calls["octavia"]["GET /v2/lbaas/loadbalancers"], 1);
    assert!(!calls.contains_key("neutron"));
}

#[test]
fn mutations_record_what_was_touched_and_whose_it_was() {
    let sim = sim(2);
    let o = owner("u1");
    let foreign = sim.add_foreign_server("theirs", vec!["owner=someone".into()]);
    let foreign_sg = sim.add_foreign_security_group("theirs");
    let sg = ready(sim.create_security_group("sg", &o.tags(&Role::SecurityGroup))).expect("sg");
    ready(sim.delete_server(&foreign)).expect("the cloud lets anyone delete");
    let _ = ready(sim.delete_security_group(&foreign_sg));
    let _ = ready(sim.delete_security_group("missing"));

    let m = sim.mutations();
    assert_eq!(m.len(), 4, "adding foreign objects is not a call");
    assert_eq!(m[0].kind, MutationKind::Create);
    assert_eq!(
        (m[0].target_id.as_str(), m[0].target_tags.clone()),
        (sg.id.as_str(), sg.tags.clone())
    );
    assert_eq!(m[1].operation, "DELETE /servers/{server_id}");
    assert_eq!(m[1].target_id, foreign);
    assert_eq!(m[1].target_tags, vec!["owner=someone".to_string()]);
    assert!(m[1].ok);
    assert_eq!(
        (m[2].service, m[2].kind, m[2].ok),
        ("neutron", MutationKind::Delete, true)
    );
    assert!(m[2].target_tags.is_empty(), "the foreign group had no tags");
    assert!(!m[3].ok && m[3].target_tags.is_empty());
    assert!(m.windows(2).all(|w| w[0].at <= w[1].at));
}

#[test]
fn next_transition_at_points_at_the_next_change() {
    let sim = sim(3);
    let o = owner("u1");
    assert_eq!(sim.next_transition_at(), None, "an empty cloud is still");
    let start = now(&sim);
    let s = ready(sim.create_server(&server_req("a", &o, &[]))).expect("create");
    let t = sim.next_transition_at().expect("boot pending");
    assert!(t > start && t <= start.plus_millis(3_600));
    wait_until(&sim, flightdeck_cloud::Timestamp(t.millis() - 1));
    assert_eq!(
        server(&sim, &s.id).map(|s| s.status),
        Some(flightdeck_cloud::ServerStatus::Build)
    );
    wait_until(&sim, t);
    assert_eq!(
        server(&sim, &s.id).map(|s| s.status),
        Some(flightdeck_cloud::ServerStatus::Active)
    );
    let next = sim.next_transition_at().expect("node registration pending");
    assert!(next >= t.plus_millis(40_000));
}

#[test]
fn deleted_server_makes_its_pending_boot_moot() {
    let sim = sim(4);
    let o = owner("u1");
    let s = ready(sim.create_server(&server_req("a", &o, &[]))).expect("create");
    ready(sim.delete_server(&s.id)).expect("delete while BUILD");
    wait_for(&sim, |sim| server(sim, &s.id).is_none());
    assert_eq!(sim.next_transition_at(), None, "nothing left to happen");
    assert!(sim.snapshot().nodes.is_empty());
}

fn assert_provider<P: Provider + Clone + 'static>(_: &P) {}

#[test]
fn sim_is_a_shareable_provider() {
    let sim = sim(5);
    assert_provider(&sim);
    let other = sim.clone();
    let o = owner("u1");
    ready(other.create_server(&server_req("a", &o, &[]))).expect("create");
    assert_eq!(sim.snapshot().servers.len(), 1, "clones share one cloud");
    let handle: std::sync::Arc<SimCloud> = std::sync::Arc::new(sim);
    assert_eq!(
        ready(handle.list_servers(&o)).expect("list").len(),
        1,
        "Arc derefs"
    );
}

#[test]
fn mutations_since_returns_only_what_is_new_and_the_next_number() {
    let sim = sim(5);
    let o = owner("u1");
    let (all, next) = sim.mutations_since(0);
    assert!(all.is_empty());
    assert_eq!(next, 0);
    for i in 0..3 {
        ready(sim.create_server(&server_req(&format!("m{i}"), &o, &[]))).expect("created");
    }
    let (first, next) = sim.mutations_since(0);
    assert_eq!(first.len(), 3);
    assert_eq!(next, 3);
    ready(sim.create_server(&server_req("m3", &o, &[]))).expect("created");
    let (fresh, next) = sim.mutations_since(3);
    assert_eq!(fresh.len(), 1, "only the mutation after number 2");
    assert_eq!(fresh[0].kind, MutationKind::Create);
    assert_eq!(next, 4);
    assert!(sim.mutations_since(next).0.is_empty());
}

#[test]
fn taking_mutations_leaves_the_log_empty_and_keeps_their_numbers() {
    let sim = sim(5);
    let o = owner("u1");
    for i in 0..3 {
        ready(sim.create_server(&server_req(&format!("m{i}"), &o, &[]))).expect("created");
    }
    let (taken, next) = sim.take_mutations_since(1);
    assert_eq!(taken.len(), 2, "numbers 1 and 2; number 0 goes unread");
    assert_eq!(taken[0].target_name, "m1");
    assert_eq!(next, 3);
    assert!(sim.mutations().is_empty(), "the log keeps none of them");
    assert_eq!(sim.mutations_dropped(), 3);
    ready(sim.create_server(&server_req("m3", &o, &[]))).expect("created");
    let (fresh, next) = sim.mutations_since(next);
    assert_eq!(fresh.len(), 1);
    assert_eq!(fresh[0].target_name, "m3");
    assert_eq!(next, 4, "numbering goes on after a take");
    let (again, next) = sim.take_mutations_since(4);
    assert!(again.is_empty(), "nothing after number 3");
    assert_eq!((next, sim.mutations().len()), (4, 0));
}
