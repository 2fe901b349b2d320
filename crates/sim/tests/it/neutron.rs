//! Neutron: security groups and rules (routers: see `routes.rs`).

use crate::common;

use common::*;
use flightdeck_cloud::{Compute, ErrorClass, Network, Role, SecurityGroupRuleCreate};

fn rule(group: &str, protocol: &str) -> SecurityGroupRuleCreate {
    SecurityGroupRuleCreate {
        security_group_id: group.into(),
        direction: "ingress".into(),
        ethertype: "IPv4".into(),
        protocol: Some(protocol.into()),
        remote_ip_prefix: Some("10.244.0.0/16".into()),
    }
}

#[test]
fn new_security_group_comes_with_default_egress_rules() {
    let sim = sim(1);
    let o = owner("u1");
    let sg = ready(sim.create_security_group("sg", &o.tags(&Role::SecurityGroup))).expect("sg");
    let rules: Vec<(&str, &str, Option<&str>)> = sg
        .rules
        .iter()
        .map(|r| {
            (
                r.direction.as_str(),
                r.ethertype.as_str(),
                r.protocol.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        rules,
        vec![("egress", "IPv4", None), ("egress", "IPv6", None)]
    );
    assert!(sg.rules.iter().all(|r| r.remote_ip_prefix.is_none()));
    let listed = ready(sim.list_security_groups(&o)).expect("list");
    assert_eq!(listed, vec![sg], "created synchronously");
}

#[test]
fn duplicate_rule_answers_security_group_rule_exists() {
    let sim = sim(2);
    let o = owner("u1");
    let sg = ready(sim.create_security_group("sg", &o.tags(&Role::SecurityGroup))).expect("sg");
    let first = ready(sim.create_security_group_rule(&rule(&sg.id, "tcp"))).expect("rule");
    ready(sim.create_security_group_rule(&rule(&sg.id, "udp"))).expect("other protocol");
    let err = ready(sim.create_security_group_rule(&rule(&sg.id, "tcp"))).expect_err("dup");
    assert_eq!(err.class, ErrorClass::AlreadyExists);
    assert_eq!(err.status, Some(409));
    assert_eq!(
        err.message,
        format!(
            "Security group rule already exists. Rule id is {}.",
            first.id
        )
    );
    let err = ready(sim.create_security_group_rule(&rule("missing", "tcp"))).expect_err("404");
    assert_eq!(err.class, ErrorClass::NotFound);
    let listed = ready(sim.list_security_groups(&o)).expect("list");
    assert_eq!(listed[0].rules.len(), 4, "two defaults, tcp and udp");
}

#[test]
fn rule_whose_prefix_contradicts_its_ethertype_is_invalid() {
    let sim = sim(2);
    let sg = sim.add_foreign_security_group("x");
    let mut r = rule(&sg, "tcp");
    r.ethertype = "IPv6".into();
    let err = ready(sim.create_security_group_rule(&r)).expect_err("400");
    assert_eq!((err.class, err.status), (ErrorClass::Permanent, Some(400)));
}

#[test]
fn deleting_security_group_in_use_conflicts() {
    let sim = sim(3);
    let o = owner("u1");
    let sg = ready(sim.create_security_group("sg", &o.tags(&Role::SecurityGroup))).expect("sg");
    let s = ready(sim.create_server(&server_req("a", &o, &["sg"]))).expect("server");
    let err = ready(sim.delete_security_group(&sg.id)).expect_err("in use");
    assert_eq!(err.class, ErrorClass::Conflict);
    assert_eq!(err.status, Some(409));
    assert_eq!(err.message, format!("Security Group {} in use.", sg.id));

    ready(sim.delete_server(&s.id)).expect("delete server");
    let err = ready(sim.delete_security_group(&sg.id)).expect_err("server still deleting");
    assert_eq!(err.class, ErrorClass::Conflict);

    wait_for(&sim, |sim| server(sim, &s.id).is_none());
    ready(sim.delete_security_group(&sg.id)).expect("free now");
    assert!(
        ready(sim.list_security_groups(&o))
            .expect("list")
            .is_empty(),
        "gone at once"
    );
    let err = ready(sim.delete_security_group(&sg.id)).expect_err("gone");
    assert_eq!(err.class, ErrorClass::NotFound);
}

#[test]
fn lists_answer_only_objects_tagged_with_the_owner_uid() {
    let sim = sim(4);
    let mine = owner("u1");
    let theirs = owner("u2");
    sim.add_foreign_security_group("sg");
    let sg = ready(sim.create_security_group("sg", &mine.tags(&Role::SecurityGroup))).expect("sg");
    ready(sim.create_security_group("sg", &theirs.tags(&Role::SecurityGroup))).expect("sg");
    let listed = ready(sim.list_security_groups(&mine)).expect("list");
    assert_eq!(
        listed.iter().map(|g| &g.id).collect::<Vec<_>>(),
        vec![&sg.id]
    );
    assert_eq!(
        sim.snapshot().security_groups.len(),
        3,
        "ground truth has all"
    );
}
