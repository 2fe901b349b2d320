//! A hostile or broken oned: a redirect is never followed (the session string carries
//! the password), and an answer larger than the limit is refused, not read.

use crate::fake;

use fake::{Answer, Fake, PASSWORD};
use flightdeck_cloud::ErrorClass;

#[tokio::test]
async fn a_redirect_to_another_host_is_refused_and_the_password_never_leaves() {
    let elsewhere = Fake::start(|_| fake::ok(dxr::Value::Integer(0))).await;
    let to = elsewhere.endpoint.clone();
    for status in [301, 302, 307, 308] {
        let target = to.clone();
        let fake = Fake::start(move |_| Answer::Redirect(status, target.clone())).await;
        let e = fake.client().system_version().await.expect_err("refused");
        assert_eq!(e.class, ErrorClass::Permanent, "{e}");
        assert!(e.message.contains(&format!("HTTP {status}")), "{e}");
        assert!(e.message.contains(&to), "names where it pointed: {e}");
        assert!(!e.to_string().contains(PASSWORD), "{e}");
    }
    assert!(
        elsewhere.calls().is_empty(),
        "nothing reached the other host"
    );
}

#[tokio::test]
async fn an_oversized_answer_is_refused_with_the_limit() {
    let big = "x".repeat(flightdeck_opennebula::transport::RESPONSE_MAX_BYTES + 1);
    let fake = Fake::start(move |_| Answer::Raw(200, big.clone())).await;
    let e = fake.client().system_version().await.expect_err("too large");
    assert_eq!(e.class, ErrorClass::Permanent, "{e}");
    assert!(e.message.contains("larger than"), "{e}");
}
