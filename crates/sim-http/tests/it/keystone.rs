//! Keystone: tokens, the catalog, and the token check in front of every service.

use crate::common;

use serde_json::{Value, json};

#[tokio::test]
async fn password_auth_issues_a_token_that_expires_in_an_hour_of_sim_time() {
    let sim = common::start().await;
    let reply = sim.auth(flightdeck_sim_http::DEFAULT_PASSWORD).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert!(
        reply
            .header("x-subject-token")
            .is_some_and(|t| t.len() > 20)
    );
    let token = &reply.body["token"];
    assert_eq!(token["issued_at"], "2026-01-01T00:00:00.000000Z");
    assert_eq!(token["expires_at"], "2026-01-01T01:00:00.000000Z");
    assert_eq!(token["project"]["name"], "demo");
    assert_eq!(token["project"]["domain"]["id"], "default");
    assert_eq!(token["user"]["name"], "admin");
    assert_eq!(token["methods"], json!(["password"]));
}

#[tokio::test]
async fn wrong_password_is_refused_with_keystones_401() {
    let sim = common::start().await;
    let reply = sim.auth("not-the-password").await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.body,
        json!({"error": {"code": 401, "message": "The request you have made requires authentication.", "title": "Unauthorized"}})
    );
    assert!(reply.header("x-subject-token").is_none());
}

#[tokio::test]
async fn catalog_lists_every_service_in_the_region_with_three_interfaces() {
    let sim = common::start().await;
    let reply = sim.auth(flightdeck_sim_http::DEFAULT_PASSWORD).await;
    let catalog = reply.body["token"]["catalog"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let want = [
        ("compute", "/compute/v2.1"),
        ("network", "/network"),
        ("load-balancer", "/load-balancer"),
        ("image", "/image"),
        ("identity", "/identity"),
    ];
    for (kind, path) in want {
        let entry = catalog
            .iter()
            .find(|e| e["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in the catalog"));
        let endpoints = entry["endpoints"].as_array().cloned().unwrap_or_default();
        let mut interfaces: Vec<&str> = endpoints
            .iter()
            .filter_map(|e| e["interface"].as_str())
            .collect();
        interfaces.sort_unstable();
        assert_eq!(interfaces, vec!["admin", "internal", "public"], "{kind}");
        for e in &endpoints {
            assert_eq!(e["region"], "RegionOne");
            assert_eq!(e["region_id"], "RegionOne");
            assert_eq!(e["url"], Value::from(format!("{}{path}", sim.base)));
        }
    }
}

#[tokio::test]
async fn version_documents_need_no_token_and_point_at_the_apis() {
    let sim = common::start().await;
    let v3 = sim.call("GET", "/identity/v3", None, None, &[]).await;
    assert_eq!(v3.status, 200);
    assert_eq!(v3.body["version"]["status"], "stable");
    let nova = sim.call("GET", "/compute/v2.1/", None, None, &[]).await;
    assert_eq!(nova.body["version"]["min_version"], "2.1");
    assert_eq!(nova.body["version"]["version"], "2.93");
    let neutron = sim.call("GET", "/network/", None, None, &[]).await;
    assert_eq!(
        neutron.body["versions"][0]["links"][0]["href"],
        Value::from(format!("{}/network/v2.0/", sim.base))
    );
    let octavia = sim.call("GET", "/load-balancer/", None, None, &[]).await;
    assert_eq!(octavia.status, 200);
    let glance = sim.call("GET", "/image/", None, None, &[]).await;
    assert_eq!(glance.status, 300);
}

#[tokio::test]
async fn services_answer_401_without_a_valid_token() {
    let sim = common::start().await;
    let paths = [
        "/compute/v2.1/servers/detail",
        "/network/v2.0/security-groups",
        "/load-balancer/v2/lbaas/loadbalancers",
        "/image/v2/images",
    ];
    for path in paths {
        for token in [None, Some("forged")] {
            let reply = sim.call("GET", path, token, None, &[]).await;
            assert_eq!(reply.status, 401, "{path}");
            assert_eq!(reply.body["error"]["title"], "Unauthorized", "{path}");
            assert_eq!(
                reply.header("www-authenticate"),
                Some(format!("Keystone uri=\"{}/identity\"", sim.base).as_str())
            );
        }
    }
    assert_eq!(
        sim.calls("nova", "GET /servers/detail"),
        0,
        "a refused call never reaches the sim"
    );
}

#[tokio::test]
async fn tokens_expire_by_the_sim_clock() {
    let sim = common::start().await;
    let token = sim.token().await;
    assert_eq!(sim.get(&token, "/compute/v2.1/servers").await.status, 200);
    sim.advance_ms(3_600_000);
    let reply = sim.get(&token, "/compute/v2.1/servers").await;
    assert_eq!(reply.status, 401, "an hour later the token is gone");
    let fresh = sim.token().await;
    assert_eq!(sim.get(&fresh, "/compute/v2.1/servers").await.status, 200);
}
