//! A hostile or broken OpenStack: a redirect is never followed (a login carries the
//! password, every other call the token), and an answer larger than the limit is
//! refused, not read.

use crate::fake;

use fake::{FAR_FUTURE, Fake, PASSWORD, Resp, token_reply};
use flightdeck_cloud::{Compute, ErrorClass, Ownership};
use flightdeck_openstack::{OpenStackCloud, SessionOptions};
use serde_json::json;

fn owner() -> Ownership {
    Ownership {
        cluster: "demo".into(),
        uid: "u1".into(),
    }
}

#[tokio::test]
async fn keystone_redirecting_the_login_elsewhere_gets_no_password() {
    let elsewhere = Fake::start(|_, base| token_reply(base, "stolen", FAR_FUTURE)).await;
    let to = format!("{}/identity/v3/auth/tokens", elsewhere.base);
    for status in [301, 302, 307, 308] {
        let target = to.clone();
        let fake = Fake::start(move |_, _| Resp::empty(status).header("Location", &target)).await;
        let e = OpenStackCloud::connect(&fake.entry(), SessionOptions::default())
            .await
            .expect_err("refused");
        assert_eq!(e.class, ErrorClass::Permanent, "{e}");
        assert!(e.message.contains(&format!("HTTP {status}")), "{e}");
        assert!(e.message.contains(&to), "names where it pointed: {e}");
        assert!(!e.to_string().contains(PASSWORD), "{e}");
    }
    assert!(
        elsewhere.requests().is_empty(),
        "nothing reached the other host"
    );
}

#[tokio::test]
async fn a_service_redirecting_a_call_elsewhere_gets_no_token() {
    let elsewhere = Fake::start(|_, _| Resp::json(200, json!({"servers": []}))).await;
    let to = format!("{}/servers/detail", elsewhere.base);
    let fake = Fake::start(move |req, base| match req.path.as_str() {
        "/identity/v3/auth/tokens" => token_reply(base, "tok-1", FAR_FUTURE),
        _ => Resp::empty(302).header("Location", &to),
    })
    .await;
    let cloud = OpenStackCloud::connect(&fake.entry(), SessionOptions::default())
        .await
        .expect("connect");
    let e = cloud.list_servers(&owner()).await.expect_err("refused");
    assert_eq!(e.class, ErrorClass::Permanent, "{e}");
    assert!(e.message.contains("redirecting to"), "{e}");
    assert!(
        elsewhere.requests().is_empty(),
        "the token went nowhere else"
    );
}

#[tokio::test]
async fn an_oversized_answer_is_refused_with_the_limit() {
    let big = "x".repeat(flightdeck_openstack::errors::RESPONSE_MAX_BYTES + 1);
    let fake = Fake::start(move |req, base| match req.path.as_str() {
        "/identity/v3/auth/tokens" => token_reply(base, "tok-1", FAR_FUTURE),
        _ => Resp {
            status: 200,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: big.clone(),
            delay: None,
        },
    })
    .await;
    let cloud = OpenStackCloud::connect(&fake.entry(), SessionOptions::default())
        .await
        .expect("connect");
    let e = cloud.list_servers(&owner()).await.expect_err("too large");
    assert_eq!(e.class, ErrorClass::Permanent, "{e}");
    assert!(e.message.contains("larger than"), "{e}");
}

#[tokio::test]
async fn a_list_whose_pages_come_slowly_ends_at_its_deadline() {
    let fake = Fake::start(|req, base| match req.path.as_str() {
        "/identity/v3/auth/tokens" => token_reply(base, "tok-1", FAR_FUTURE),
        _ => {
            // Every page links to one more: an endless list, served slowly.
            let n: u32 = req
                .query
                .split('&')
                .find_map(|kv| kv.strip_prefix("marker=s"))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let next = format!("{base}/nova/v2.1/servers/detail?marker=s{}", n + 1);
            Resp::json(
                200,
                json!({"servers": [{"id": format!("s{n}"), "name": "x", "status": "ACTIVE", "tags": ["flightdeck-uid=u1"],
                    "image": "", "flavor": {"original_name": "m1"}, "created": "2026-01-01T00:00:00Z"}],
                    "servers_links": [{"rel": "next", "href": next}]}),
            )
            .delayed(std::time::Duration::from_millis(200))
        }
    })
    .await;
    let options = SessionOptions {
        list_deadline: std::time::Duration::from_millis(500),
        rate_limit: None,
        ..SessionOptions::default()
    };
    let cloud = OpenStackCloud::connect(&fake.entry(), options)
        .await
        .expect("connect");
    let e = cloud.list_servers(&owner()).await.expect_err("deadline");
    assert_eq!(e.class, ErrorClass::Transient, "{e}");
    assert!(e.message.contains("took longer than"), "{e}");
    let pages = fake.count("/");
    assert!(pages < 10, "stopped after a few pages, not 1,000: {pages}");
}
