//! Octavia: the load-balancer chain, immutability while pending, members, the status
//! tree and cascade delete.

use crate::common;

use common::{Sim, id_of};
use serde_json::{Value, json};

const LB: &str = "/load-balancer/v2/lbaas";

/// An ACTIVE load balancer with a TCP listener on 6443 and a pool; answers
/// (lb, listener, pool).
async fn chain(sim: &Sim, token: &str) -> (String, String, String) {
    let subnet = sim
        .get(token, "/network/v2.0/subnets?name=private-subnet")
        .await
        .body["subnets"][0]["id"]
        .clone();
    let lb = sim
        .post(token, &format!("{LB}/loadbalancers"), json!({"loadbalancer": {"name": "api", "vip_subnet_id": subnet, "tags": ["flightdeck-uid=u1"]}}))
        .await;
    assert_eq!(lb.status, 201, "{}", lb.body);
    assert_eq!(
        lb.body["loadbalancer"]["provisioning_status"],
        "PENDING_CREATE"
    );
    let lb = id_of(&lb, "loadbalancer");
    sim.advance_ms(1_500);
    let listener = sim
        .post(
            token,
            &format!("{LB}/listeners"),
            json!({"listener": {"loadbalancer_id": lb, "protocol": "TCP", "protocol_port": 6443}}),
        )
        .await;
    assert_eq!(listener.status, 201, "{}", listener.body);
    let listener = id_of(&listener, "listener");
    sim.advance_ms(1_000);
    let pool = sim
        .post(token, &format!("{LB}/pools"), json!({"pool": {"listener_id": listener, "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}}))
        .await;
    assert_eq!(pool.status, 201, "{}", pool.body);
    assert_eq!(pool.body["pool"]["lb_algorithm"], "ROUND_ROBIN");
    let pool = id_of(&pool, "pool");
    sim.advance_ms(1_000);
    (lb, listener, pool)
}

/// Asks for a load balancer named `api` with `tags` on the one subnet; answers the
/// reply (201, the load balancer PENDING_CREATE).
async fn create_lb(sim: &Sim, token: &str, tags: &[&str]) -> common::Reply {
    let subnet = sim.get(token, "/network/v2.0/subnets").await.body["subnets"][0]["id"].clone();
    sim.post(
        token,
        &format!("{LB}/loadbalancers"),
        json!({"loadbalancer": {"name": "api", "vip_subnet_id": subnet, "tags": tags}}),
    )
    .await
}

#[tokio::test]
async fn change_while_pending_is_409_immutable() {
    let sim = common::start().await;
    let token = sim.token().await;
    let created = create_lb(&sim, &token, &[]).await;
    let lb = id_of(&created, "loadbalancer");
    let refused = sim
        .post(
            &token,
            &format!("{LB}/listeners"),
            json!({"listener": {"loadbalancer_id": lb, "protocol": "TCP", "protocol_port": 6443}}),
        )
        .await;
    assert_eq!(refused.status, 409);
    assert_eq!(
        refused.body,
        json!({"faultcode": "Client", "faultstring": format!("Load Balancer {lb} is immutable and cannot be updated."), "debuginfo": null})
    );
    let missing = sim.get(&token, &format!("{LB}/loadbalancers/nope")).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body["faultstring"], "Load Balancer nope not found.");
}

#[tokio::test]
async fn lists_filter_by_tag_and_show_the_object_graph() {
    let sim = common::start().await;
    let token = sim.token().await;
    let (lb, listener, pool) = chain(&sim, &token).await;
    let listed = sim
        .get(
            &token,
            &format!("{LB}/loadbalancers?tags=flightdeck-uid%3Du1"),
        )
        .await;
    let got = &listed.body["loadbalancers"][0];
    assert_eq!(got["id"], Value::from(lb.clone()));
    assert_eq!(got["provisioning_status"], "ACTIVE");
    assert_eq!(got["listeners"], json!([{"id": listener}]));
    assert_eq!(got["pools"], json!([{"id": pool}]));
    assert!(got["vip_address"].is_string());
    assert_eq!(listed.body["loadbalancers_links"], json!([]));
    let none = sim
        .get(
            &token,
            &format!("{LB}/loadbalancers?tags=flightdeck-uid%3Dzz"),
        )
        .await;
    assert_eq!(none.body["loadbalancers"], json!([]));
    let l = sim.get(&token, &format!("{LB}/listeners/{listener}")).await;
    assert_eq!(l.body["listener"]["default_pool_id"], Value::from(pool));
    assert_eq!(l.body["listener"]["loadbalancers"], json!([{"id": lb}]));
    let legacy = sim
        .get(&token, "/load-balancer/v2.0/lbaas/loadbalancers")
        .await;
    assert_eq!(
        legacy.body["loadbalancers"][0]["id"],
        Value::from(lb.clone()),
        "v2.0 is served too"
    );
    assert_eq!(sim.calls("octavia", "GET /v2/lbaas/loadbalancers"), 3);
}

#[tokio::test]
async fn member_goes_active_and_shows_in_the_status_tree() {
    let sim = common::start().await;
    let token = sim.token().await;
    let (lb, _, pool) = chain(&sim, &token).await;
    let members = format!("{LB}/pools/{pool}/members");
    let created = sim
        .post(
            &token,
            &members,
            json!({"member": {"address": "10.0.0.50", "protocol_port": 6443, "name": "cp-1"}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(
        created.body["member"]["provisioning_status"],
        "PENDING_CREATE"
    );
    assert_eq!(created.body["member"]["operating_status"], "NO_MONITOR");
    let member = id_of(&created, "member");
    let lb_now = sim.get(&token, &format!("{LB}/loadbalancers/{lb}")).await;
    assert_eq!(
        lb_now.body["loadbalancer"]["provisioning_status"],
        "PENDING_UPDATE"
    );
    sim.advance_ms(1_000);
    let shown = sim.get(&token, &format!("{members}/{member}")).await;
    assert_eq!(shown.body["member"]["provisioning_status"], "ACTIVE");
    let tree = sim
        .get(&token, &format!("{LB}/loadbalancers/{lb}/status"))
        .await;
    let t = &tree.body["statuses"]["loadbalancer"];
    assert_eq!(t["provisioning_status"], "ACTIVE");
    let m = &t["listeners"][0]["pools"][0]["members"][0];
    assert_eq!(m["id"], Value::from(member.clone()));
    assert_eq!(m["address"], "10.0.0.50");
    assert_eq!(m["operating_status"], "NO_MONITOR");
    assert_eq!(
        sim.delete(&token, &format!("{members}/{member}"))
            .await
            .status,
        204
    );
    sim.advance_ms(1_000);
    assert_eq!(sim.get(&token, &members).await.body["members"], json!([]));
}

#[tokio::test]
async fn health_monitor_keeps_its_timings() {
    let sim = common::start().await;
    let token = sim.token().await;
    let (_, _, pool) = chain(&sim, &token).await;
    let hm = sim
        .post(&token, &format!("{LB}/healthmonitors"), json!({"healthmonitor": {"pool_id": pool, "type": "TCP", "delay": 7, "timeout": 3, "max_retries": 2}}))
        .await;
    assert_eq!(hm.status, 201, "{}", hm.body);
    let h = &hm.body["healthmonitor"];
    assert_eq!(
        (
            h["delay"].clone(),
            h["timeout"].clone(),
            h["max_retries"].clone()
        ),
        (json!(7), json!(3), json!(2))
    );
    assert_eq!(h["pools"], json!([{"id": pool}]));
}

#[tokio::test]
async fn cascade_delete_takes_the_load_balancer_and_its_children() {
    let sim = common::start().await;
    let token = sim.token().await;
    let (lb, listener, _) = chain(&sim, &token).await;
    let plain = sim
        .delete(&token, &format!("{LB}/loadbalancers/{lb}"))
        .await;
    assert_eq!(
        plain.status, 400,
        "a load balancer with children needs cascade"
    );
    let deleted = sim
        .delete(&token, &format!("{LB}/loadbalancers/{lb}?cascade=true"))
        .await;
    assert_eq!(deleted.status, 204);
    let pending = sim.get(&token, &format!("{LB}/loadbalancers/{lb}")).await;
    assert_eq!(
        pending.body["loadbalancer"]["provisioning_status"],
        "PENDING_DELETE"
    );
    sim.advance_ms(1_000);
    assert_eq!(
        sim.get(&token, &format!("{LB}/loadbalancers/{lb}"))
            .await
            .status,
        404
    );
    assert_eq!(
        sim.get(&token, &format!("{LB}/listeners/{listener}"))
            .await
            .status,
        404
    );
    assert_eq!(
        sim.get(&token, &format!("{LB}/pools")).await.body["pools"],
        json!([])
    );
}

/// The server renders lists from the world as it last took it, and takes it again
/// only when something changed: a transition that only time brings, and an object
/// added behind the API's back, are both in the next list.
#[tokio::test]
async fn a_list_shows_what_changed_since_the_one_before_though_no_call_changed_it() {
    let sim = common::start().await;
    let token = sim.token().await;
    let created = create_lb(&sim, &token, &["t"]).await;
    let lb = id_of(&created, "loadbalancer");
    let status = |reply: &common::Reply| -> Vec<(String, String)> {
        reply.body["loadbalancers"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|l| {
                let s = l["provisioning_status"].as_str().unwrap_or("?");
                (l["name"].as_str().unwrap_or("?").to_string(), s.to_string())
            })
            .collect()
    };
    let before = sim.get(&token, &format!("{LB}/loadbalancers?tags=t")).await;
    assert_eq!(
        status(&before),
        vec![("api".into(), "PENDING_CREATE".into())]
    );
    sim.advance_ms(1_500);
    let after = sim.get(&token, &format!("{LB}/loadbalancers?tags=t")).await;
    assert_eq!(
        status(&after),
        vec![("api".into(), "ACTIVE".into())],
        "{lb} became ACTIVE with time alone"
    );
    let everything = sim.get(&token, &format!("{LB}/loadbalancers")).await;
    let foreign = sim.cloud.add_foreign_load_balancer("behind-the-api");
    let again = sim.get(&token, &format!("{LB}/loadbalancers")).await;
    assert_eq!(status(&again).len(), status(&everything).len() + 1);
    assert!(
        again.body["loadbalancers"]
            .as_array()
            .expect("a list")
            .iter()
            .any(|l| l["id"] == foreign.as_str()),
        "the load balancer added out of band is listed: {}",
        again.body
    );
}
