//! The provider traits mapped onto the real API, against a fake OpenStack on loopback:
//! which requests go out, with which bodies, and what comes back.

use crate::fake;

use fake::{FAR_FUTURE, Fake, Req, Resp, token_reply};
use flightdeck_cloud::{
    Compute, ErrorClass, HealthMonitorCreate, LoadBalancerCreate, LoadBalancing, MemberCreate,
    Network, OperatingStatus, Ownership, ProvisioningStatus, Role, Route, SecurityGroupRuleCreate,
    ServerCreate, ServerStatus,
};
use flightdeck_openstack::{OpenStackCloud, SessionOptions};
use serde_json::{Value, json};

const IMAGE_ID: &str = "11111111-2222-4333-8444-555555555555";

fn owner() -> Ownership {
    Ownership {
        cluster: "demo".into(),
        uid: "u1".into(),
    }
}

/// A fake cloud that knows one flavor, image, network and subnet, and answers the
/// calls each test makes.
fn cloud_api(req: &Req, base: &str) -> Resp {
    let p = req.path.as_str();
    let m = req.method.as_str();
    match (m, p) {
        (_, "/identity/v3/auth/tokens") => token_reply(base, "tok", FAR_FUTURE),
        ("GET", "/nova/v2.1/flavors") => Resp::json(
            200,
            json!({"flavors": [{"id": "f-small", "name": "m1.small"}, {"id": "f-big", "name": "m1.big"}]}),
        ),
        ("GET", "/glance/v2/images") if req.query == "name=ubuntu-24.04" => Resp::json(
            200,
            json!({"images": [{"id": IMAGE_ID, "name": "ubuntu-24.04", "status": "active"}]}),
        ),
        ("GET", "/neutron/v2.0/networks") if req.query == "name=nodes" => {
            Resp::json(200, json!({"networks": [{"id": "net-1", "name": "nodes"}]}))
        }
        ("GET", "/neutron/v2.0/subnets") if req.query == "name=nodes-v4" => Resp::json(
            200,
            json!({"subnets": [{"id": "sub-1", "name": "nodes-v4"}]}),
        ),
        ("POST", "/nova/v2.1/servers") => {
            Resp::json(202, json!({"server": {"id": "srv-1", "adminPass": "x"}}))
        }
        ("GET", "/nova/v2.1/servers/srv-1") => Resp::json(
            200,
            json!({"server": {
                "id": "srv-1", "name": "demo-cp-1", "status": "BUILD",
                "OS-EXT-STS:task_state": "scheduling",
                "tags": req_tags(), "security_groups": [],
                "addresses": {}, "image": {"id": IMAGE_ID}, "flavor": {"original_name": "m1.small"},
                "created": "2026-01-01T00:00:05Z"
            }}),
        ),
        ("POST", "/neutron/v2.0/security-groups") => Resp::json(
            201,
            json!({"security_group": {"id": "sg-1", "name": "demo-sg", "tags": [],
            "security_group_rules": [
                {"id": "r-e4", "direction": "egress", "ethertype": "IPv4", "protocol": null, "remote_ip_prefix": null}
            ]}}),
        ),
        ("PUT", "/neutron/v2.0/security-groups/sg-1/tags") => {
            let tags = req.json()["tags"].clone();
            if tags
                .as_array()
                .is_some_and(|t| t.iter().any(|x| x == "bad"))
            {
                return Resp::json(
                    400,
                    json!({"NeutronError": {"type": "InvalidInput", "message": "Invalid tag", "detail": ""}}),
                );
            }
            Resp::json(200, json!({ "tags": tags }))
        }
        ("DELETE", "/neutron/v2.0/security-groups/sg-1") => Resp::empty(204),
        ("POST", "/neutron/v2.0/security-group-rules") => Resp::json(
            409,
            json!({"NeutronError": {"type": "SecurityGroupRuleExists",
                   "message": "Security group rule already exists. Rule id is r-1.", "detail": ""}}),
        ),
        ("GET", "/neutron/v2.0/routers") if req.query == "name=edge" => Resp::json(
            200,
            json!({"routers": [{"id": "rt-1", "name": "edge", "tags": [], "routes": []}]}),
        ),
        ("GET", "/neutron/v2.0/routers") => Resp::json(200, json!({"routers": []})),
        ("PUT", "/neutron/v2.0/routers/rt-1/add_extraroutes") => {
            let routes = req.json()["router"]["routes"].clone();
            Resp::json(
                200,
                json!({"router": {"id": "rt-1", "name": "edge", "tags": [], "routes": routes}}),
            )
        }
        ("POST", "/octavia/v2/lbaas/loadbalancers") => Resp::json(
            201,
            json!({"loadbalancer": {"id": "lb-1", "name": "demo-api", "provisioning_status": "PENDING_CREATE",
                   "operating_status": "OFFLINE", "vip_address": "198.51.100.1", "tags": req.json()["loadbalancer"]["tags"]}}),
        ),
        ("POST", "/octavia/v2/lbaas/healthmonitors") => Resp::json(
            409,
            json!({"faultcode": "Client", "faultstring": "Load Balancer lb-1 is immutable and cannot be updated.", "debuginfo": null}),
        ),
        ("POST", "/octavia/v2/lbaas/pools/pool-1/members") => Resp::json(
            201,
            json!({"member": {"id": "m-1", "name": "demo-cp-1", "address": "10.0.0.7", "protocol_port": 6443,
                   "provisioning_status": "PENDING_CREATE", "operating_status": "NO_MONITOR", "tags": []}}),
        ),
        ("DELETE", "/octavia/v2/lbaas/loadbalancers/lb-1") => Resp::empty(204),
        ("GET", "/nova/v2.1/servers/srv-gone") => Resp::json(
            404,
            json!({"itemNotFound": {"code": 404, "message": "Instance srv-gone could not be found."}}),
        ),
        ("GET", "/nova/v2.1/servers/srv-forbidden") => Resp::json(
            403,
            json!({"forbidden": {"code": 403, "message": "Policy doesn't allow os_compute_api:servers:show to be performed."}}),
        ),
        _ => Resp::json(404, json!({"message": format!("no route for {} {}", m, p)})),
    }
}

fn req_tags() -> Value {
    json!(owner().tags(&Role::Machine("demo-cp-1".into())))
}

async fn connect(fake: &Fake) -> OpenStackCloud {
    let options = SessionOptions {
        rate_limit: None,
        ..SessionOptions::default()
    };
    OpenStackCloud::connect(&fake.entry(), options)
        .await
        .expect("connect")
}

fn server_request() -> ServerCreate {
    ServerCreate {
        name: "demo-cp-1".into(),
        flavor: "m1.small".into(),
        image: "ubuntu-24.04".into(),
        network: "nodes".into(),
        security_groups: vec!["sg-1".into()],
        tags: owner().tags(&Role::Machine("demo-cp-1".into())),
        eviction_strategy: None,
        user_data: None,
    }
}

/// A server read by its ID: Nova's 404 says it is gone, a server shown says it is not,
/// and any other answer is an error that names the call and keeps Nova's message.
#[tokio::test]
async fn a_server_read_directly_is_gone_on_404_only() {
    let fake = Fake::start(cloud_api).await;
    let cloud = connect(&fake).await;
    assert!(!cloud.server_gone("srv-1").await.expect("shown"));
    assert!(cloud.server_gone("srv-gone").await.expect("404"));
    let err = cloud
        .server_gone("srv-forbidden")
        .await
        .expect_err("403 is no answer");
    assert_ne!(err.class, ErrorClass::NotFound);
    assert!(
        err.to_string().contains("os_compute_api:servers:show"),
        "{err}"
    );
    let asked: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.starts_with("/nova/v2.1/servers/"))
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(
        asked,
        [
            "/nova/v2.1/servers/srv-1",
            "/nova/v2.1/servers/srv-gone",
            "/nova/v2.1/servers/srv-forbidden"
        ]
    );
}

#[tokio::test]
async fn create_server_resolves_names_sends_tags_and_reads_the_server_back() {
    let fake = Fake::start(cloud_api).await;
    let cloud = connect(&fake).await;
    let s = cloud
        .create_server(&server_request())
        .await
        .expect("create");
    assert_eq!(s.id, "srv-1");
    assert_eq!(s.status, ServerStatus::Build);
    assert_eq!(s.task_state.as_deref(), Some("scheduling"));
    assert_eq!(
        s.image, "ubuntu-24.04",
        "the image reads as the name the spec used"
    );
    assert_eq!(s.flavor, "m1.small");
    assert!(owner().owns(&s.tags));
    let post = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == "/nova/v2.1/servers")
        .expect("POST /servers");
    assert_eq!(post.header("x-openstack-nova-api-version"), Some("2.52"));
    assert_eq!(
        post.json(),
        json!({"server": {
            "name": "demo-cp-1", "flavorRef": "f-small", "imageRef": IMAGE_ID,
            "networks": [{"uuid": "net-1"}], "security_groups": [{"name": "sg-1"}],
            "tags": req_tags(),
        }})
    );
    // A second create resolves nothing again.
    cloud
        .create_server(&server_request())
        .await
        .expect("create");
    assert_eq!(fake.count("/nova/v2.1/flavors"), 1);
    assert_eq!(fake.count("/glance"), 1);
    assert_eq!(fake.count("/neutron/v2.0/networks"), 1);
}

#[tokio::test]
async fn an_unknown_image_is_a_permanent_error_naming_it() {
    let fake = Fake::start(|req, base| {
        if req.path == "/glance/v2/images" {
            return Resp::json(200, json!({"images": []}));
        }
        cloud_api(req, base)
    })
    .await;
    let cloud = connect(&fake).await;
    let mut req = server_request();
    req.image = "no-such-image".into();
    let e = cloud.create_server(&req).await.expect_err("unknown image");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(e.service, "glance");
    assert!(e.message.contains("no-such-image"), "{e}");
    assert_eq!(fake.count("/nova/v2.1/servers"), 0, "nothing was created");
}

#[tokio::test]
async fn security_groups_are_created_then_tagged() {
    let fake = Fake::start(cloud_api).await;
    let cloud = connect(&fake).await;
    let tags = owner().tags(&Role::SecurityGroup);
    let g = cloud
        .create_security_group("demo-sg", &tags)
        .await
        .expect("create");
    assert_eq!(g.id, "sg-1");
    assert_eq!(g.tags, tags);
    assert_eq!(g.rules.len(), 1);
    assert_eq!(
        fake.lines("/neutron"),
        [
            // Zed's Neutron has no `tag-creation`: create, then tag.
            "GET /neutron/v2.0/extensions/tag-creation",
            "POST /neutron/v2.0/security-groups",
            "PUT /neutron/v2.0/security-groups/sg-1/tags",
        ]
    );
}

#[tokio::test]
async fn a_group_that_cannot_be_tagged_is_deleted_again() {
    let fake = Fake::start(cloud_api).await;
    let cloud = connect(&fake).await;
    let e = cloud
        .create_security_group("demo-sg", &["bad".into()])
        .await
        .expect_err("tagging fails");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(
        e.operation,
        "PUT /v2.0/security-groups/{security_group_id}/tags"
    );
    assert_eq!(
        fake.lines("/neutron").last().map(String::as_str),
        Some("DELETE /neutron/v2.0/security-groups/sg-1")
    );
}

#[tokio::test]
async fn an_existing_rule_is_already_exists() {
    let fake = Fake::start(cloud_api).await;
    let cloud = connect(&fake).await;
    let req = SecurityGroupRuleCreate {
        security_group_id: "sg-1".into(),
        direction: "ingress".into(),
        ethertype: "IPv4".into(),
        protocol: Some("tcp".into()),
        remote_ip_prefix: None,
    };
    let e = cloud
        .create_security_group_rule(&req)
        .await
        .expect_err("exists");
    assert_eq!(e.class, ErrorClass::AlreadyExists);
    let body = fake
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/security-group-rules"))
        .expect("rule request")
        .json();
    assert_eq!(
        body,
        json!({"security_group_rule": {"security_group_id": "sg-1", "direction": "ingress",
               "ethertype": "IPv4", "protocol": "tcp"}}),
        "an absent prefix is left out, not sent as null"
    );
}

#[tokio::test]
async fn routers_are_found_by_name_and_routes_added_atomically() {
    let fake = Fake::start(cloud_api).await;
    let cloud = connect(&fake).await;
    let r = cloud.find_router("edge").await.expect("router");
    assert_eq!(r.id, "rt-1");
    let e = cloud.find_router("nowhere").await.expect_err("none");
    assert_eq!(e.class, ErrorClass::NotFound);
    let route = Route {
        destination: "10.244.1.0/24".into(),
        nexthop: "10.0.0.7".parse().expect("ip"),
    };
    let r = cloud
        .add_extra_routes("rt-1", std::slice::from_ref(&route))
        .await
        .expect("add");
    assert_eq!(r.routes, [route]);
    let put = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "PUT")
        .expect("PUT");
    assert_eq!(put.path, "/neutron/v2.0/routers/rt-1/add_extraroutes");
    assert_eq!(
        put.json(),
        json!({"router": {"routes": [{"destination": "10.244.1.0/24", "nexthop": "10.0.0.7"}]}})
    );
}

#[tokio::test]
async fn octavia_creates_carry_tags_and_busy_load_balancers_are_conflicts() {
    let fake = Fake::start(cloud_api).await;
    let cloud = connect(&fake).await;
    let lb = cloud
        .create_load_balancer(&LoadBalancerCreate {
            name: "demo-api".into(),
            vip_subnet: "nodes-v4".into(),
            tags: owner().tags(&Role::ApiLoadBalancer),
        })
        .await
        .expect("lb");
    assert_eq!(lb.provisioning_status, ProvisioningStatus::PendingCreate);
    assert!(owner().owns(&lb.tags));
    let post = fake
        .requests()
        .into_iter()
        .find(|r| r.path == "/octavia/v2/lbaas/loadbalancers")
        .expect("POST lb");
    assert_eq!(post.json()["loadbalancer"]["vip_subnet_id"], "sub-1");

    let e = cloud
        .create_health_monitor(&HealthMonitorCreate {
            name: "hm".into(),
            pool_id: "pool-1".into(),
            kind: "TCP".into(),
            delay_s: 5,
            timeout_s: 3,
            max_retries: 3,
            tags: vec![],
        })
        .await
        .expect_err("busy");
    assert_eq!(e.class, ErrorClass::Conflict);

    let m = cloud
        .create_member(&MemberCreate {
            name: "demo-cp-1".into(),
            pool_id: "pool-1".into(),
            address: "10.0.0.7".parse().expect("ip"),
            protocol_port: 6443,
            tags: vec![],
        })
        .await
        .expect("member");
    assert_eq!(
        (m.pool_id.as_str(), m.operating_status),
        ("pool-1", OperatingStatus::NoMonitor)
    );

    cloud
        .delete_load_balancer_cascade("lb-1")
        .await
        .expect("delete");
    assert!(
        fake.lines("/octavia")
            .contains(&"DELETE /octavia/v2/lbaas/loadbalancers/lb-1?cascade=true".to_string())
    );
}

#[tokio::test]
async fn a_call_whose_claim_moved_is_not_sent_but_a_held_one_is() {
    let fake = Fake::start(cloud_api).await;
    let cloud = connect(&fake).await;
    let moved: flightdeck_http::SendGuard =
        std::sync::Arc::new(|| Err("cluster demo was claimed again".to_string()));
    let e = flightdeck_http::with_send_guard(moved, cloud.create_server(&server_request()))
        .await
        .expect_err("not sent");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(
        e.message
            .contains("not sent: cluster demo was claimed again"),
        "{e}"
    );
    assert_eq!(fake.count("/nova/v2.1/servers"), 0, "nothing reached Nova");
    let held: flightdeck_http::SendGuard = std::sync::Arc::new(|| Ok(()));
    flightdeck_http::with_send_guard(held, cloud.create_server(&server_request()))
        .await
        .expect("sent");
    let posts = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/nova/v2.1/servers")
        .count();
    assert_eq!(posts, 1);
}
