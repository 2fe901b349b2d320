//! Keystone authentication, catalog selection, re-authentication, pagination, the rate
//! limit and error classes, against a fake OpenStack on loopback.

use crate::fake;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fake::{FAR_FUTURE, Fake, PASSWORD, Resp, token_reply};
use flightdeck_cloud::{Compute, ErrorClass, Ownership};
use flightdeck_openstack::{Interface, OpenStackCloud, RateLimit, SessionOptions};
use serde_json::json;

fn owner() -> Ownership {
    Ownership {
        cluster: "demo".into(),
        uid: "u1".into(),
    }
}

fn server(id: &str, uid: &str) -> serde_json::Value {
    json!({"id": id, "name": id, "status": "ACTIVE", "tags": [format!("flightdeck-uid={uid}")],
           "image": "", "flavor": {"original_name": "m1.small"}, "created": "2026-01-01T00:00:00Z"})
}

fn no_limit() -> SessionOptions {
    SessionOptions {
        rate_limit: None,
        ..SessionOptions::default()
    }
}

#[tokio::test]
async fn keystone_password_auth_is_project_scoped_and_the_catalog_picks_interface_and_region() {
    let fake = Fake::start(|req, base| match req.path.as_str() {
        "/identity/v3/auth/tokens" => token_reply(base, "tok-1", FAR_FUTURE),
        p if p.ends_with("/servers/detail") => Resp::json(200, json!({"servers": []})),
        _ => Resp::empty(404),
    })
    .await;
    let mut entry = fake.entry();
    entry.region_name = Some("RegionTwo".into());
    let cloud = OpenStackCloud::connect(&entry, no_limit())
        .await
        .expect("connect");
    cloud.list_servers(&owner()).await.expect("list");
    let reqs = fake.requests();
    let auth = &reqs[0];
    assert_eq!(auth.line(), "POST /identity/v3/auth/tokens");
    let body = auth.json();
    let user = &body["auth"]["identity"]["password"]["user"];
    assert_eq!(body["auth"]["identity"]["methods"], json!(["password"]));
    assert_eq!(user["name"], "flightdeck");
    assert_eq!(user["domain"], json!({"name": "Default"}));
    assert_eq!(user["password"], PASSWORD);
    assert_eq!(
        body["auth"]["scope"]["project"],
        json!({"name": "k8s", "domain": {"name": "Default"}})
    );
    let list = &reqs[1];
    assert_eq!(
        list.line(),
        "GET /two-nova/v2.1/servers/detail?tags=flightdeck-uid%3Du1",
        "public endpoint of RegionTwo"
    );
    assert_eq!(list.header("x-auth-token"), Some("tok-1"));
    assert_eq!(list.header("x-openstack-nova-api-version"), Some("2.52"));

    let mut internal = fake.entry();
    internal.interface = Interface::Internal;
    let cloud = OpenStackCloud::connect(&internal, no_limit())
        .await
        .expect("connect");
    cloud.list_servers(&owner()).await.expect("list");
    assert_eq!(
        fake.lines("/internal-nova"),
        ["GET /internal-nova/v2.1/servers/detail?tags=flightdeck-uid%3Du1"]
    );
}

#[tokio::test]
async fn wrong_credentials_name_the_cloud_and_keystones_message_but_not_the_password() {
    let fake = Fake::start(|_, _| {
        Resp::json(
            401,
            json!({"error": {"code": 401, "title": "Unauthorized",
                   "message": "The request you have made requires authentication."}}),
        )
    })
    .await;
    let err = OpenStackCloud::connect(&fake.entry(), no_limit())
        .await
        .expect_err("refused");
    assert_eq!(err.class, ErrorClass::Permanent);
    assert_eq!(err.service, "keystone");
    assert_eq!(err.status, Some(401));
    let shown = format!("{err} {err:?}");
    assert!(shown.contains("\"fake\""), "names the cloud entry: {shown}");
    assert!(
        shown.contains("The request you have made requires authentication."),
        "{shown}"
    );
    assert!(!shown.contains(PASSWORD), "{shown}");
}

#[tokio::test]
async fn a_401_from_a_service_re_authenticates_once_and_repeats_the_request() {
    let issued = Arc::new(AtomicUsize::new(0));
    let n = issued.clone();
    let fake = Fake::start(move |req, base| {
        if req.path == "/identity/v3/auth/tokens" {
            let i = n.fetch_add(1, Ordering::SeqCst) + 1;
            return token_reply(base, &format!("tok-{i}"), FAR_FUTURE);
        }
        match req.header("x-auth-token") {
            Some("tok-1") => Resp::json(401, json!({"error": {"message": "token expired"}})),
            _ => Resp::json(200, json!({"servers": [server("s1", "u1")]})),
        }
    })
    .await;
    let cloud = OpenStackCloud::connect(&fake.entry(), no_limit())
        .await
        .expect("connect");
    let servers = cloud
        .list_servers(&owner())
        .await
        .expect("list after re-auth");
    assert_eq!(servers.len(), 1);
    assert_eq!(issued.load(Ordering::SeqCst), 2);
    let tokens: Vec<_> = fake
        .requests()
        .iter()
        .filter_map(|r| r.header("x-auth-token").map(str::to_string))
        .collect();
    assert_eq!(tokens, ["tok-1", "tok-2"]);
}

#[tokio::test]
async fn a_401_after_re_authenticating_is_permanent() {
    let fake = Fake::start(|req, base| {
        if req.path == "/identity/v3/auth/tokens" {
            return token_reply(base, "tok", FAR_FUTURE);
        }
        Resp::json(401, json!({"error": {"message": "nope"}}))
    })
    .await;
    let cloud = OpenStackCloud::connect(&fake.entry(), no_limit())
        .await
        .expect("connect");
    let err = cloud.list_servers(&owner()).await.expect_err("401");
    assert_eq!(err.class, ErrorClass::Permanent);
    assert_eq!(err.status, Some(401));
    assert_eq!(fake.count("/identity"), 2, "one re-authentication, no loop");
}

#[tokio::test]
async fn a_token_near_its_expiry_is_replaced_before_use() {
    let fake = Fake::start(|req, base| {
        if req.path == "/identity/v3/auth/tokens" {
            // Already within the refresh margin.
            return token_reply(base, "short", "2000-01-01T00:00:00Z");
        }
        Resp::json(200, json!({"servers": []}))
    })
    .await;
    let cloud = OpenStackCloud::connect(&fake.entry(), no_limit())
        .await
        .expect("connect");
    cloud.list_servers(&owner()).await.expect("list");
    cloud.list_servers(&owner()).await.expect("list");
    assert_eq!(fake.count("/identity"), 3, "connect + one per call");

    let long = Fake::start(|req, base| {
        if req.path == "/identity/v3/auth/tokens" {
            return token_reply(base, "long", FAR_FUTURE);
        }
        Resp::json(200, json!({"servers": []}))
    })
    .await;
    let cloud = OpenStackCloud::connect(&long.entry(), no_limit())
        .await
        .expect("connect");
    cloud.list_servers(&owner()).await.expect("list");
    cloud.list_servers(&owner()).await.expect("list");
    assert_eq!(long.count("/identity"), 1, "a long-lived token is reused");
}

#[tokio::test]
async fn lists_follow_next_links_and_keep_only_owned_objects() {
    let fake = Fake::start(|req, base| {
        if req.path == "/identity/v3/auth/tokens" {
            return token_reply(base, "tok", FAR_FUTURE);
        }
        if req.query.contains("marker=s2") {
            return Resp::json(200, json!({"servers": [server("s3", "u1")], "servers_links": []}));
        }
        Resp::json(
            200,
            json!({
                "servers": [server("s1", "u1"), server("s2", "someone-else")],
                // Nova's link may name a host the client cannot reach: only its query counts.
                "servers_links": [{"rel": "next",
                    "href": "http://nova.internal:8774/v2.1/servers/detail?limit=2&marker=s2&tags=flightdeck-uid%3Du1"}]
            }),
        )
    })
    .await;
    let cloud = OpenStackCloud::connect(&fake.entry(), no_limit())
        .await
        .expect("connect");
    let servers = cloud.list_servers(&owner()).await.expect("list");
    let ids: Vec<_> = servers.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["s1", "s3"], "s2 carries another UID and is dropped");
    assert_eq!(
        fake.lines("/nova"),
        [
            "GET /nova/v2.1/servers/detail?tags=flightdeck-uid%3Du1",
            "GET /nova/v2.1/servers/detail?limit=2&marker=s2&tags=flightdeck-uid%3Du1",
        ]
    );
}

#[tokio::test]
async fn a_next_link_that_does_not_move_on_stops_the_list() {
    let fake = Fake::start(|req, base| {
        if req.path == "/identity/v3/auth/tokens" {
            return token_reply(base, "tok", FAR_FUTURE);
        }
        Resp::json(
            200,
            json!({"servers": [server("s1", "u1")],
                   "servers_links": [{"rel": "next", "href": "/v2.1/servers/detail?marker=s1"}]}),
        )
    })
    .await;
    let cloud = OpenStackCloud::connect(&fake.entry(), no_limit())
        .await
        .expect("connect");
    let servers = cloud.list_servers(&owner()).await.expect("list");
    assert_eq!(
        servers.len(),
        2,
        "the repeated page is read once more, then the list ends"
    );
    assert_eq!(fake.count("/nova"), 2);
}

#[tokio::test]
async fn requests_to_one_endpoint_keep_to_the_rate_limit() {
    let fake = Fake::start(|req, base| {
        if req.path == "/identity/v3/auth/tokens" {
            return token_reply(base, "tok", FAR_FUTURE);
        }
        Resp::json(200, json!({"servers": []}))
    })
    .await;
    let options = SessionOptions {
        rate_limit: Some(RateLimit {
            per_second: 20.0,
            burst: 1,
        }),
        ..SessionOptions::default()
    };
    let cloud = OpenStackCloud::connect(&fake.entry(), options)
        .await
        .expect("connect");
    let start = Instant::now();
    for _ in 0..5 {
        cloud.list_servers(&owner()).await.expect("list");
    }
    // Keystone and Nova share the fake's host:port, so the bucket is shared: the
    // token request took the burst, and each of the 5 lists waited ~50 ms.
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(190), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn error_answers_arrive_classified() {
    let fake = Fake::start(|req, base| match req.path.as_str() {
        "/identity/v3/auth/tokens" => token_reply(base, "tok", FAR_FUTURE),
        "/nova/v2.1/servers/gone" => Resp::json(
            404,
            json!({"itemNotFound": {"code": 404, "message": "Instance gone could not be found."}}),
        ),
        "/nova/v2.1/servers/busy/action" => {
            Resp::json(429, json!({"message": "slow down"})).header("Retry-After", "3")
        }
        _ => Resp::json(503, json!({"message": "maintenance"})),
    })
    .await;
    let cloud = OpenStackCloud::connect(&fake.entry(), no_limit())
        .await
        .expect("connect");
    let e = cloud.delete_server("gone").await.expect_err("404");
    assert_eq!(e.class, ErrorClass::NotFound);
    assert_eq!(e.operation, "DELETE /servers/{server_id}");
    assert_eq!(e.message, "Instance gone could not be found.");
    let e = cloud
        .add_security_group("busy", "sg")
        .await
        .expect_err("429");
    assert_eq!(
        e.class,
        ErrorClass::RateLimited(Some(flightdeck_spec::Duration::from_secs(3)))
    );
    let e = cloud.list_servers(&owner()).await.expect_err("503");
    assert_eq!(e.class, ErrorClass::Transient);
}

#[tokio::test]
async fn an_unreachable_keystone_is_transient() {
    // Bind and drop, so the port is (almost certainly) closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let fake = Fake::start(|_, _| Resp::empty(500)).await;
    let mut entry = fake.entry();
    entry.auth.auth_url = format!("http://127.0.0.1:{port}/v3");
    let err = OpenStackCloud::connect(&entry, no_limit())
        .await
        .expect_err("refused");
    assert_eq!(err.class, ErrorClass::Transient);
    assert!(err.message.contains("\"fake\""), "{err}");
}

#[tokio::test]
async fn a_catalog_without_a_needed_service_is_refused_at_connect() {
    let fake = Fake::start(|_, base| {
        let mut reply = token_reply(base, "tok", FAR_FUTURE);
        let mut body: serde_json::Value = serde_json::from_str(&reply.body).expect("json");
        if let Some(services) = body["token"]["catalog"].as_array_mut() {
            services.retain(|s| s["type"] != "load-balancer");
        }
        reply.body = body.to_string();
        reply
    })
    .await;
    let err = OpenStackCloud::connect(&fake.entry(), no_limit())
        .await
        .expect_err("no octavia");
    assert_eq!(err.class, ErrorClass::Permanent);
    assert_eq!(err.service, "octavia");
    assert!(
        err.message.contains("\"fake\"") && err.message.contains("load-balancer"),
        "{err}"
    );
}
