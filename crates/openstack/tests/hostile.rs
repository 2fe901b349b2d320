//! A hostile or broken OpenStack: a redirect is never followed (a login carries the
//! password, every other call the token), and an answer larger than the limit is
//! refused, not read.

mod fake;

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
