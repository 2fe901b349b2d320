//! Neutron: security groups and rules, routers' extra routes, the fixed network.

use crate::common;

use common::id_of;
use flightdeck_sim::SimConfig;
use serde_json::{Value, json};

const GROUPS: &str = "/network/v2.0/security-groups";
const RULES: &str = "/network/v2.0/security-group-rules";

fn rule(group: &str, port: u16) -> Value {
    json!({"security_group_rule": {
        "security_group_id": group, "direction": "ingress", "ethertype": "IPv4",
        "protocol": "tcp", "port_range_min": port, "port_range_max": port,
        "remote_ip_prefix": "10.0.0.0/16",
    }})
}

#[tokio::test]
async fn group_created_with_tags_is_found_by_its_tags_with_default_rules() {
    let sim = common::start().await;
    let token = sim.token().await;
    let body = json!({"security_group": {"name": "demo-sg", "description": "d", "tags": ["flightdeck-uid=u1"]}});
    let created = sim.post(&token, GROUPS, body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let g = &created.body["security_group"];
    assert_eq!(g["description"], "d");
    assert_eq!(
        g["security_group_rules"].as_array().map(Vec::len),
        Some(2),
        "default egress rules"
    );
    let id = id_of(&created, "security_group");

    let listed = sim
        .get(&token, &format!("{GROUPS}?tags=flightdeck-uid%3Du1"))
        .await;
    assert_eq!(
        listed.body["security_groups"][0]["id"],
        Value::from(id.clone())
    );
    let other = sim
        .get(&token, &format!("{GROUPS}?tags=flightdeck-uid%3Du2"))
        .await;
    assert_eq!(other.body["security_groups"], json!([]));
    let by_name = sim.get(&token, &format!("{GROUPS}?name=demo-sg")).await;
    assert_eq!(
        by_name.body["security_groups"].as_array().map(Vec::len),
        Some(1)
    );

    let same = sim
        .put(
            &token,
            &format!("{GROUPS}/{id}/tags"),
            json!({"tags": ["flightdeck-uid=u1"]}),
        )
        .await;
    assert_eq!(same.status, 200, "re-stating the tags is fine");
    let changed = sim
        .put(
            &token,
            &format!("{GROUPS}/{id}/tags"),
            json!({"tags": ["x"]}),
        )
        .await;
    assert_eq!(
        changed.status, 501,
        "the sim cannot change tags after create"
    );
    assert_eq!(changed.body["NeutronError"]["type"], "NotImplemented");
}

#[tokio::test]
async fn duplicate_rule_is_409_security_group_rule_exists() {
    let sim = common::start().await;
    let token = sim.token().await;
    let created = sim
        .post(&token, GROUPS, json!({"security_group": {"name": "sg"}}))
        .await;
    let group = id_of(&created, "security_group");
    let first = sim.post(&token, RULES, rule(&group, 6443)).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let r = &first.body["security_group_rule"];
    assert_eq!(r["port_range_min"], 6443);
    assert_eq!(r["security_group_id"], Value::from(group.clone()));
    let rule_id = id_of(&first, "security_group_rule");
    let again = sim.post(&token, RULES, rule(&group, 6443)).await;
    assert_eq!(again.status, 409);
    assert_eq!(
        again.body,
        json!({"NeutronError": {
            "type": "SecurityGroupRuleExists",
            "message": format!("Security group rule already exists. Rule id is {rule_id}."),
            "detail": "",
        }})
    );
    let listed = sim
        .get(
            &token,
            &format!("{RULES}?security_group_id={group}&direction=ingress"),
        )
        .await;
    assert_eq!(
        listed.body["security_group_rules"].as_array().map(Vec::len),
        Some(1)
    );
    let missing = sim.post(&token, RULES, rule("nope", 22)).await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.body["NeutronError"]["type"],
        "SecurityGroupNotFound"
    );
}

#[tokio::test]
async fn group_in_use_is_409_and_deletes_once_free() {
    let sim = common::start().await;
    let token = sim.token().await;
    let created = sim
        .post(&token, GROUPS, json!({"security_group": {"name": "sg"}}))
        .await;
    let group = id_of(&created, "security_group");
    let image = sim.get(&token, "/image/v2/images?name=img").await.body["images"][0]["id"].clone();
    let server = sim
        .post(&token, "/compute/v2.1/servers", json!({"server": {"name": "s", "flavorRef": "1", "imageRef": image, "security_groups": [{"name": "sg"}]}}))
        .await;
    assert_eq!(server.status, 202, "{}", server.body);
    let busy = sim.delete(&token, &format!("{GROUPS}/{group}")).await;
    assert_eq!(busy.status, 409);
    assert_eq!(busy.body["NeutronError"]["type"], "SecurityGroupInUse");
    sim.delete(
        &token,
        &format!("/compute/v2.1/servers/{}", id_of(&server, "server")),
    )
    .await;
    sim.advance_ms(1_000);
    assert_eq!(
        sim.delete(&token, &format!("{GROUPS}/{group}"))
            .await
            .status,
        204
    );
    assert_eq!(
        sim.get(&token, &format!("{GROUPS}/{group}")).await.status,
        404
    );
}

#[tokio::test]
async fn extra_routes_are_added_removed_and_exhausted() {
    let sim = common::start_with(SimConfig {
        max_routes: 1,
        ..SimConfig::default()
    })
    .await;
    let token = sim.token().await;
    let router = sim.cloud.add_foreign_router("edge");
    let found = sim.get(&token, "/network/v2.0/routers?name=edge").await;
    assert_eq!(found.body["routers"][0]["id"], Value::from(router.clone()));
    let add =
        |dest: &str| json!({"router": {"routes": [{"destination": dest, "nexthop": "10.0.0.9"}]}});
    let path = format!("/network/v2.0/routers/{router}/add_extraroutes");
    let added = sim.put(&token, &path, add("10.244.1.0/24")).await;
    assert_eq!(added.status, 200, "{}", added.body);
    assert_eq!(
        added.body["router"]["routes"],
        json!([{"destination": "10.244.1.0/24", "nexthop": "10.0.0.9"}])
    );
    let full = sim.put(&token, &path, add("10.244.2.0/24")).await;
    assert_eq!(full.status, 400);
    assert_eq!(full.body["NeutronError"]["type"], "RoutesExhausted");
    let removed = sim
        .put(
            &token,
            &format!("/network/v2.0/routers/{router}/remove_extraroutes"),
            add("10.244.1.0/24"),
        )
        .await;
    assert_eq!(removed.body["router"]["routes"], json!([]));
    let nope = sim.get(&token, "/network/v2.0/routers/nope").await;
    assert_eq!(nope.body["NeutronError"]["type"], "RouterNotFound");
}

#[tokio::test]
async fn fixed_network_and_subnet_are_listed_by_name() {
    let sim = common::start().await;
    let token = sim.token().await;
    let nets = sim.get(&token, "/network/v2.0/networks?name=private").await;
    let net = nets.body["networks"][0].clone();
    assert_eq!(net["status"], "ACTIVE");
    let subnets = sim
        .get(&token, "/network/v2.0/subnets?name=private-subnet")
        .await;
    let subnet = &subnets.body["subnets"][0];
    assert_eq!(subnet["network_id"], net["id"]);
    assert_eq!(subnet["cidr"], "10.0.0.0/16");
    assert_eq!(subnet["gateway_ip"], "10.0.0.1");
    let none = sim.get(&token, "/network/v2.0/networks?name=public").await;
    assert_eq!(none.body["networks"], json!([]));
}
