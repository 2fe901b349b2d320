//! Nova: servers through their life, tag filters, pagination and errors.

use crate::common;

use common::{Sim, id_of};
use flightdeck_sim::SimFault;
use flightdeck_spec::{FaultKind, Service};
use serde_json::{Value, json};

const MV: (&str, &str) = ("OpenStack-API-Version", "compute 2.52");

/// Image and network ids as a client finds them (Glance by name, Neutron by name).
async fn refs(sim: &Sim, token: &str) -> (String, String) {
    let images = sim.get(token, "/image/v2/images?name=ubuntu-22.04").await;
    let image = images.body["images"][0]["id"]
        .as_str()
        .expect("image id")
        .to_string();
    let nets = sim.get(token, "/network/v2.0/networks?name=private").await;
    let net = nets.body["networks"][0]["id"]
        .as_str()
        .expect("network id")
        .to_string();
    (image, net)
}

async fn create(sim: &Sim, token: &str, name: &str, tags: &[&str]) -> common::Reply {
    let (image, net) = refs(sim, token).await;
    let body = json!({"server": {
        "name": name, "flavorRef": "4", "imageRef": image,
        "networks": [{"uuid": net}], "tags": tags,
    }});
    sim.call(
        "POST",
        "/compute/v2.1/servers",
        Some(token),
        Some(&body),
        &[MV],
    )
    .await
}

async fn show(sim: &Sim, token: &str, id: &str) -> common::Reply {
    sim.call(
        "GET",
        &format!("/compute/v2.1/servers/{id}"),
        Some(token),
        None,
        &[MV],
    )
    .await
}

#[tokio::test]
async fn server_goes_from_build_to_active_as_the_caller_advances_the_clock() {
    let sim = common::start().await;
    let token = sim.token().await;
    let group = sim
        .post(
            &token,
            "/network/v2.0/security-groups",
            json!({"security_group": {"name": "web"}}),
        )
        .await;
    assert_eq!(group.status, 201);
    let (image, net) = refs(&sim, &token).await;
    let body = json!({"server": {
        "name": "demo-cp-1", "flavorRef": "4", "imageRef": image,
        "networks": [{"uuid": net}], "security_groups": [{"name": "web"}],
        "tags": ["flightdeck-uid=u1"],
    }});
    let created = sim
        .call(
            "POST",
            "/compute/v2.1/servers",
            Some(&token),
            Some(&body),
            &[MV],
        )
        .await;
    assert_eq!(created.status, 202, "{}", created.body);
    assert_eq!(
        created.header("openstack-api-version"),
        Some("compute 2.52")
    );
    let id = id_of(&created, "server");
    assert!(created.body["server"]["adminPass"].is_string());
    assert_eq!(sim.calls("nova", "POST /servers"), 1);

    let building = show(&sim, &token, &id).await;
    let s = &building.body["server"];
    assert_eq!(s["status"], "BUILD");
    assert_eq!(s["OS-EXT-STS:vm_state"], "building");
    assert_eq!(s["OS-EXT-STS:task_state"], "scheduling");
    assert_eq!(s["addresses"], json!({}));

    sim.advance_ms(4_000);
    let active = show(&sim, &token, &id).await;
    let s = &active.body["server"];
    assert_eq!(s["status"], "ACTIVE", "{s}");
    assert_eq!(s["OS-EXT-STS:task_state"], Value::Null);
    assert_eq!(s["addresses"]["private"][0]["OS-EXT-IPS:type"], "fixed");
    assert_eq!(s["addresses"]["private"][0]["version"], 4);
    assert_eq!(
        s["flavor"]["original_name"], "m1.large",
        "embedded flavor at 2.47+"
    );
    assert_eq!(s["image"]["id"], Value::from(image));
    assert_eq!(s["tags"], json!(["flightdeck-uid=u1"]));
    assert_eq!(s["security_groups"], json!([{"name": "web"}]));
    assert_eq!(s["created"], "2026-01-01T00:00:00Z");

    let gone = sim
        .delete(&token, &format!("/compute/v2.1/servers/{id}"))
        .await;
    assert_eq!(gone.status, 204);
    assert_eq!(
        show(&sim, &token, &id).await.body["server"]["OS-EXT-STS:task_state"],
        "deleting"
    );
    sim.advance_ms(1_000);
    let missing = show(&sim, &token, &id).await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.body,
        json!({"itemNotFound": {"code": 404, "message": format!("Instance {id} could not be found.")}})
    );
}

#[tokio::test]
async fn tag_filter_returns_only_servers_with_every_tag() {
    let sim = common::start().await;
    let token = sim.token().await;
    for (name, uid) in [("a-1", "a"), ("b-1", "b"), ("a-2", "a")] {
        let tag = format!("flightdeck-uid={uid}");
        assert_eq!(
            create(&sim, &token, name, &[&tag, "role=x"]).await.status,
            202
        );
    }
    let path = "/compute/v2.1/servers/detail?tags=flightdeck-uid%3Da,role%3Dx";
    let reply = sim.call("GET", path, Some(&token), None, &[MV]).await;
    let names: Vec<&str> = reply.body["servers"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, vec!["a-2", "a-1"], "newest first, only uid a");
    let none = sim
        .call(
            "GET",
            "/compute/v2.1/servers?tags=flightdeck-uid%3Dc",
            Some(&token),
            None,
            &[MV],
        )
        .await;
    assert_eq!(none.body["servers"], json!([]));
    assert_eq!(
        sim.calls("nova", "GET /servers/detail"),
        2,
        "each list is one sim call"
    );
}

#[tokio::test]
async fn pagination_follows_servers_links_without_repeats() {
    let sim = common::start().await;
    let token = sim.token().await;
    for i in 0..5 {
        assert_eq!(
            create(&sim, &token, &format!("s-{i}"), &[]).await.status,
            202
        );
    }
    let mut seen = Vec::new();
    let mut next = Some("/compute/v2.1/servers/detail?limit=2".to_string());
    let mut pages = 0;
    while let Some(path) = next {
        let reply = sim.call("GET", &path, Some(&token), None, &[MV]).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        for s in reply.body["servers"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            seen.push(s["name"].as_str().unwrap_or_default().to_string());
        }
        next = reply.body["servers_links"][0]["href"]
            .as_str()
            .map(str::to_string);
        pages += 1;
        assert!(pages <= 4, "pagination must end");
    }
    assert_eq!(seen, vec!["s-4", "s-3", "s-2", "s-1", "s-0"]);
    let bad = sim
        .get(&token, "/compute/v2.1/servers/detail?marker=nope")
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body["badRequest"]["message"], "marker [nope] not found");
}

#[tokio::test]
async fn bad_references_and_unknown_groups_answer_nova_errors() {
    let sim = common::start().await;
    let token = sim.token().await;
    let (image, net) = refs(&sim, &token).await;
    let mut body = json!({"server": {"name": "x", "flavorRef": "99", "imageRef": image, "networks": [{"uuid": net}]}});
    let reply = sim
        .call(
            "POST",
            "/compute/v2.1/servers",
            Some(&token),
            Some(&body),
            &[MV],
        )
        .await;
    assert_eq!(
        reply.body,
        json!({"badRequest": {"code": 400, "message": "Flavor 99 could not be found."}})
    );
    body["server"]["flavorRef"] = json!("1");
    body["server"]["security_groups"] = json!([{"name": "nope"}]);
    let reply = sim
        .call(
            "POST",
            "/compute/v2.1/servers",
            Some(&token),
            Some(&body),
            &[MV],
        )
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body["badRequest"]["message"],
        "Security group nope not found."
    );
    let action = sim
        .post(
            &token,
            "/compute/v2.1/servers/nope/action",
            json!({"addSecurityGroup": {"name": "web"}}),
        )
        .await;
    assert_eq!(action.status, 404);
    assert!(action.body["itemNotFound"]["message"].is_string());
    let flavors = sim.get(&token, "/compute/v2.1/flavors/detail").await;
    let names: Vec<&str> = flavors.body["flavors"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        ["m1.tiny", "m1.small", "m1.large", "m1.xlarge"]
            .iter()
            .all(|n| names.contains(n))
    );
}

#[tokio::test]
async fn sim_faults_reach_the_wire_as_nova_errors() {
    let sim = common::start().await;
    let token = sim.token().await;
    let mut fault = SimFault::new(
        FaultKind::ApiErrorRate,
        flightdeck_cloud::Timestamp::SIM_EPOCH,
    );
    fault.service = Some(Service::Nova);
    sim.cloud.inject(fault);
    let reply = sim.get(&token, "/compute/v2.1/servers/detail").await;
    assert_eq!(reply.status, 503);
    assert_eq!(
        reply.body["serviceUnavailable"]["message"],
        "Service Unavailable"
    );
}

#[tokio::test]
async fn microversion_shapes_the_server_view() {
    let sim = common::start().await;
    let token = sim.token().await;
    let id = id_of(&create(&sim, &token, "mv", &["t"]).await, "server");
    let old = sim
        .get(&token, &format!("/compute/v2.1/servers/{id}"))
        .await;
    assert_eq!(old.header("openstack-api-version"), Some("compute 2.1"));
    let s = &old.body["server"];
    assert_eq!(s["flavor"]["id"], "4", "a flavor reference before 2.47");
    assert!(s.get("tags").is_none(), "no tags before 2.26");
    let too_new = sim
        .call(
            "GET",
            "/compute/v2.1/servers",
            Some(&token),
            None,
            &[("OpenStack-API-Version", "compute 2.200")],
        )
        .await;
    assert_eq!(too_new.status, 406);
    let (image, _) = refs(&sim, &token).await;
    let body = json!({"server": {"name": "x", "flavorRef": "1", "imageRef": image, "tags": ["t"]}});
    let tags_too_early = sim.post(&token, "/compute/v2.1/servers", body).await;
    assert!(
        tags_too_early.body["badRequest"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("'tags' was unexpected")),
        "{}",
        tags_too_early.body
    );
    assert_eq!(tags_too_early.status, 400);
}

/// Neutron's port list answers which addresses a port holds: a server's from its
/// request until it is gone, and the gateway (the router's interface). flightdeck asks
/// it whether a route's next hop is dead.
#[tokio::test]
async fn a_servers_port_holds_its_address_until_the_server_is_gone() {
    let sim = common::start().await;
    let token = sim.token().await;
    let created = create(&sim, &token, "demo-w-1", &["flightdeck-uid=u1"]).await;
    assert_eq!(created.status, 202, "{}", created.body);
    let id = id_of(&created, "server");
    sim.advance_ms(10_000);
    let shown = show(&sim, &token, &id).await;
    let address = shown.body["server"]["addresses"]["private"][0]["addr"]
        .as_str()
        .expect("an address once ACTIVE")
        .to_string();
    let ports = |ip: &str| format!("/network/v2.0/ports?fixed_ips=ip_address%3D{ip}");
    let held = sim.get(&token, &ports(&address)).await;
    assert_eq!(held.status, 200, "{}", held.body);
    assert_eq!(
        held.body["ports"][0]["fixed_ips"][0]["ip_address"],
        json!(address)
    );
    let gateway = sim.get(&token, &ports("10.0.0.1")).await;
    assert_eq!(
        gateway.body["ports"][0]["device_owner"],
        json!("network:router_interface")
    );
    let nobody = sim.get(&token, &ports("10.0.0.250")).await;
    assert_eq!(nobody.body["ports"], json!([]));
    let bad = sim.get(&token, &ports("not-an-address")).await;
    assert_eq!(bad.status, 400, "{}", bad.body);

    let deleted = sim
        .call(
            "DELETE",
            &format!("/compute/v2.1/servers/{id}"),
            Some(&token),
            None,
            &[MV],
        )
        .await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    sim.advance_ms(60_000);
    let gone = sim.get(&token, &ports(&address)).await;
    assert_eq!(
        gone.body["ports"],
        json!([]),
        "the port went with its server"
    );
}
