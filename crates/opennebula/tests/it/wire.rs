//! OpenNebula's XML-RPC API as flightdeck speaks it, against a fake oned on loopback:
//! what goes on the wire, what comes back, and how every failure is classified.

use crate::fake;

use std::time::Duration;

use dxr::Value;
use fake::{Fake, PASSWORD, USER, fail, fault, ok, ok_id, ok_xml};
use flightdeck_cloud::ErrorClass;
use flightdeck_opennebula::{HttpOptions, OneCode, one_code};

fn s(v: &str) -> Value {
    Value::String(v.into())
}
fn i(v: i32) -> Value {
    Value::Integer(v)
}
fn b(v: bool) -> Value {
    Value::Boolean(v)
}

#[tokio::test]
async fn every_method_sends_the_session_first_then_opennebulas_parameters_in_order() {
    let fake = Fake::start(|call| match call.method.as_str() {
        "one.templatepool.info" => ok_xml(fake::TEMPLATE_POOL),
        "one.imagepool.info" => ok_xml(fake::IMAGE_POOL),
        "one.vmpool.info" | "one.vmpool.infoextended" => ok_xml(fake::VM_POOL),
        "one.template.info" => ok_xml(
            "<VMTEMPLATE><ID>7</ID><UNAME>u</UNAME><NAME>t</NAME><TEMPLATE/></VMTEMPLATE>",
        ),
        "one.image.info" => ok_xml(
            "<IMAGE><ID>3</ID><UNAME>u</UNAME><NAME>i</NAME><STATE>1</STATE><RUNNING_VMS>0</RUNNING_VMS><TEMPLATE/></IMAGE>",
        ),
        "one.vm.info" => ok_xml(
            "<VM><ID>42</ID><UNAME>u</UNAME><NAME>v</NAME><STATE>3</STATE><LCM_STATE>3</LCM_STATE><STIME>1</STIME><TEMPLATE/><USER_TEMPLATE/></VM>",
        ),
        "one.system.version" => ok(s("6.10.0")),
        _ => ok_id(7),
    })
    .await;
    let c = fake.client();
    assert_eq!(c.template_allocate("NAME = \"t\"\n").await, Ok(7));
    assert_eq!(c.template_info(7).await.map(|d| d.common.id), Ok(7));
    assert_eq!(c.template_delete(7).await, Ok(()));
    assert_eq!(
        c.template_instantiate(7, "demo-cp-1", false, "FLIGHTDECK_UID = \"u1\"\n", false)
            .await,
        Ok(7)
    );
    assert_eq!(c.template_lock(7, 2).await, Ok(()));
    assert_eq!(c.template_unlock(7).await, Ok(()));
    assert_eq!(c.templatepool_info().await.map(|v| v.len()), Ok(2));
    assert_eq!(c.image_allocate("NAME = \"i\"\n", 1).await, Ok(7));
    assert_eq!(c.image_info(3).await.map(|d| d.state), Ok(1));
    assert_eq!(c.image_delete(3).await, Ok(()));
    assert_eq!(c.imagepool_info().await.map(|v| v.len()), Ok(2));
    assert_eq!(c.vm_info(42).await.map(|d| d.lcm_state), Ok(3));
    assert_eq!(c.vm_action("terminate-hard", 42).await, Ok(()));
    assert_eq!(c.vmpool_info(-1).await.map(|v| v.len()), Ok(4));
    assert_eq!(c.vmpool_info_extended(-1).await.map(|v| v.len()), Ok(4));
    assert_eq!(c.system_version().await.as_deref(), Ok("6.10.0"));

    let session = s(&format!("{USER}:{PASSWORD}"));
    let want: Vec<(&str, Vec<Value>)> = vec![
        ("one.template.allocate", vec![s("NAME = \"t\"\n")]),
        ("one.template.info", vec![i(7), b(false), b(false)]),
        ("one.template.delete", vec![i(7), b(false)]),
        (
            "one.template.instantiate",
            vec![
                i(7),
                s("demo-cp-1"),
                b(false),
                s("FLIGHTDECK_UID = \"u1\"\n"),
                b(false),
            ],
        ),
        ("one.template.lock", vec![i(7), i(2), b(false)]),
        ("one.template.unlock", vec![i(7)]),
        ("one.templatepool.info", vec![i(-2), i(-1), i(-1)]),
        ("one.image.allocate", vec![s("NAME = \"i\"\n"), i(1)]),
        ("one.image.info", vec![i(3), b(false)]),
        ("one.image.delete", vec![i(3), b(false)]),
        ("one.imagepool.info", vec![i(-2), i(-1), i(-1)]),
        ("one.vm.info", vec![i(42), b(false)]),
        ("one.vm.action", vec![s("terminate-hard"), i(42)]),
        ("one.vmpool.info", vec![i(-2), i(-1), i(-1), i(-1)]),
        ("one.vmpool.infoextended", vec![i(-2), i(-1), i(-1), i(-1)]),
        ("one.system.version", vec![]),
    ];
    let calls = fake.calls();
    assert_eq!(calls.len(), want.len());
    for (call, (method, args)) in calls.iter().zip(want) {
        assert_eq!(call.method, method);
        assert_eq!(
            call.params.first(),
            Some(&session),
            "{method}: session first"
        );
        assert_eq!(call.args(), args.as_slice(), "{method}: parameters");
        assert_eq!(call.content_type.as_deref(), Some("text/xml"), "{method}");
        assert!(call.body.starts_with("<?xml version=\"1.0\"?>"), "{method}");
    }
}

#[tokio::test]
async fn ids_travel_as_i4_and_flags_as_booleans_on_the_wire() {
    let fake = Fake::start(|_| ok_id(0)).await;
    fake.client()
        .vm_action("terminate-hard", 42)
        .await
        .expect("ok");
    fake.client().template_delete(7).await.expect("ok");
    let bodies: Vec<String> = fake.calls().into_iter().map(|c| c.body).collect();
    assert!(
        bodies[0].contains("<value><string>terminate-hard</string></value></param><param><value><i4>42</i4></value>"),
        "{}",
        bodies[0]
    );
    assert!(
        bodies[1].contains(
            "<value><i4>7</i4></value></param><param><value><boolean>0</boolean></value>"
        ),
        "{}",
        bodies[1]
    );
}

#[tokio::test]
async fn every_opennebula_error_code_becomes_its_error_class() {
    let cases: Vec<(i32, &str, ErrorClass, OneCode)> = vec![
        (
            0x100,
            "[one.vmpool.info] User couldn't be authenticated, aborting call.",
            ErrorClass::Permanent,
            OneCode::Authentication,
        ),
        (
            0x200,
            "[one.template.delete] User [0] : TEMPLATE is locked.",
            ErrorClass::Permanent,
            OneCode::Authorization,
        ),
        (
            0x400,
            "[one.template.delete] Error getting template [99].",
            ErrorClass::NotFound,
            OneCode::NoExists,
        ),
        (
            0x800,
            "[one.template.delete] Cannot delete template: it is in use",
            ErrorClass::Conflict,
            OneCode::Action,
        ),
        (
            0x1000,
            "[one.template.delete] Wrong number of arguments",
            ErrorClass::Permanent,
            OneCode::XmlRpcApi,
        ),
        (
            0x2000,
            "[one.template.delete] Error deleting template: database locked",
            ErrorClass::Transient,
            OneCode::Internal,
        ),
        (
            0x4000,
            "[one.template.delete] quota exceeded",
            ErrorClass::Permanent,
            OneCode::Allocate,
        ),
    ];
    for (code, message, class, one) in cases {
        let fake = Fake::start(move |_| fail(message, code)).await;
        let e = fake.client().template_delete(99).await.expect_err(message);
        assert_eq!(e.class, class, "{message}");
        assert_eq!(e.service, "opennebula");
        assert_eq!(e.operation, "one.template.delete");
        assert_eq!(e.message, message);
        assert_eq!(one_code(&e), Some(one), "{message}");
        assert!(!e.to_string().contains(PASSWORD));
    }
}

#[tokio::test]
async fn deleting_a_locked_template_is_a_permanent_authorization_error() {
    let fake = Fake::start(|_| {
        fail(
            "[one.template.delete] User [0] : TEMPLATE is locked.",
            0x200,
        )
    })
    .await;
    let e = fake.client().template_delete(7).await.expect_err("locked");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(e.status, Some(512), "status carries OpenNebula's code");
    assert_eq!(one_code(&e), Some(OneCode::Authorization));
}

#[tokio::test]
async fn allocating_a_taken_name_is_already_exists() {
    let fake = Fake::start(|_| {
        fail(
            "[one.template.allocate] NAME is already taken by VMTEMPLATE 7.",
            0x2000,
        )
    })
    .await;
    let e = fake
        .client()
        .template_allocate("NAME = \"k8s-node-v1\"\n")
        .await
        .expect_err("duplicate");
    assert_eq!(e.class, ErrorClass::AlreadyExists);
    assert_eq!(e.operation, "one.template.allocate");
}

#[tokio::test]
async fn a_malformed_answer_is_permanent_and_names_the_method() {
    let fake = Fake::start(|call| match call.method.as_str() {
        "one.vm.info" => ok_xml("<VM><ID>1</ID></VM"),
        "one.templatepool.info" => ok(Value::Integer(3)),
        _ => fake::Answer::Value(Value::String("yes".into())),
    })
    .await;
    let c = fake.client();
    let e = c
        .vm_action("terminate-hard", 1)
        .await
        .expect_err("not an array");
    assert_eq!(
        (e.class, e.operation.as_str()),
        (ErrorClass::Permanent, "one.vm.action")
    );
    assert!(e.message.contains("expected an array, got a string"), "{e}");
    let e = c.vm_info(1).await.expect_err("bad XML");
    assert_eq!(
        (e.class, e.operation.as_str()),
        (ErrorClass::Permanent, "one.vm.info")
    );
    assert!(e.message.contains("the XML document"), "{e}");
    let e = c.templatepool_info().await.expect_err("not a string");
    assert!(e.message.contains("expected a string, got a i4"), "{e}");
}

#[tokio::test]
async fn an_xmlrpc_fault_is_permanent_with_the_fault_string() {
    let fake = Fake::start(|_| fault(-501, "Requested method not found")).await;
    let e = fake.client().system_version().await.expect_err("fault");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(e.operation, "one.system.version");
    assert!(e.message.contains("Requested method not found"), "{e}");
    assert_eq!(one_code(&e), None);
}

#[tokio::test]
async fn http_5xx_is_transient_and_4xx_permanent_naming_the_status() {
    for (status, class) in [
        (500, ErrorClass::Transient),
        (503, ErrorClass::Transient),
        (404, ErrorClass::Permanent),
        (401, ErrorClass::Permanent),
        (429, ErrorClass::RateLimited(None)),
    ] {
        let fake =
            Fake::start(move |_| fake::Answer::Raw(status, "<html>proxy says no</html>".into()))
                .await;
        let e = fake
            .client()
            .system_version()
            .await
            .expect_err("HTTP error");
        assert_eq!(e.class, class, "HTTP {status}");
        assert!(e.message.contains(&format!("HTTP {status}")), "{e}");
        assert!(e.message.contains("proxy says no"), "{e}");
        assert_eq!(e.status, None, "status is kept for OpenNebula's own codes");
    }
}

#[tokio::test]
async fn a_refused_connection_is_transient() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let t = flightdeck_opennebula::HttpTransport::new(
        &format!("http://{addr}/RPC2"),
        &HttpOptions::default(),
    )
    .expect("transport");
    let c = flightdeck_opennebula::OneClient::new(t, &Fake::credentials());
    let e = c.system_version().await.expect_err("refused");
    assert_eq!(e.class, ErrorClass::Transient);
    assert_eq!(e.operation, "one.system.version");
    assert!(e.message.contains("could not connect"), "{e}");
    assert!(!e.to_string().contains(PASSWORD));
}

#[tokio::test]
async fn a_call_past_the_request_timeout_is_transient() {
    let fake = Fake::start(|_| fake::Answer::Stall(Duration::from_secs(5))).await;
    let options = HttpOptions {
        request_timeout: Duration::from_millis(200),
        ..HttpOptions::default()
    };
    let started = std::time::Instant::now();
    let e = fake
        .client_with(&options)
        .system_version()
        .await
        .expect_err("timeout");
    assert_eq!(e.class, ErrorClass::Transient);
    assert!(e.message.contains("timed out"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn the_password_is_on_the_wire_only_and_never_in_debug_output() {
    let fake = Fake::start(|_| {
        fail(
            "[one.system.version] User couldn't be authenticated, aborting call.",
            0x100,
        )
    })
    .await;
    let c = fake.client();
    let e = c.system_version().await.expect_err("refused");
    assert!(
        fake.calls()[0].body.contains(PASSWORD),
        "the session is sent"
    );
    for shown in [
        format!("{c:?}"),
        format!("{e:?}"),
        e.to_string(),
        format!("{:?}", fake.cloud(())),
    ] {
        assert!(!shown.contains(PASSWORD), "{shown}");
    }
}

#[tokio::test]
async fn a_call_names_the_replica_and_claim_it_is_sent_under_and_no_other_does() {
    let fake = Fake::start(|_| ok_id(7)).await;
    let c = fake.client();
    flightdeck_http::as_caller("replica=r2 claim=41".into(), async {
        assert_eq!(c.template_delete(7).await, Ok(()));
    })
    .await;
    assert_eq!(c.template_delete(7).await, Ok(()));
    let calls = fake.calls();
    assert_eq!(calls[0].caller.as_deref(), Some("replica=r2 claim=41"));
    assert_eq!(calls[1].caller, None);
}

#[tokio::test]
async fn a_call_whose_claim_moved_is_not_sent() {
    let fake = Fake::start(|_| ok_id(7)).await;
    let c = fake.client();
    let moved: flightdeck_http::SendGuard =
        std::sync::Arc::new(|| Err("cluster c1 was claimed again".to_string()));
    let err = flightdeck_http::with_send_guard(moved, c.template_delete(7))
        .await
        .expect_err("not sent");
    assert_eq!(err.class, ErrorClass::Permanent);
    assert!(
        err.message
            .contains("not sent: cluster c1 was claimed again"),
        "{err}"
    );
    assert!(fake.calls().is_empty(), "nothing reached oned");
    let held: flightdeck_http::SendGuard = std::sync::Arc::new(|| Ok(()));
    assert_eq!(
        flightdeck_http::with_send_guard(held, c.template_delete(7)).await,
        Ok(())
    );
    assert_eq!(fake.calls().len(), 1);
}
