//! OpenNebula's XML-RPC API over HTTP: calls round trip through `POST /RPC2`, errors
//! keep OpenNebula's classes, and what is not an XML-RPC call is refused as xmlrpc-c
//! refuses it.

use std::sync::Arc;

use dxr::{FaultResponse, MethodCall, MethodResponse, Value};
use flightdeck_cloud::{SimClock, Timestamp};
use flightdeck_sim::{SimCloud, SimConfig};
use flightdeck_sim_http::{BODY_MAX_BYTES, serve_opennebula};
use tokio::net::TcpListener;

/// OpenNebula's error codes, as `[false, message, code, …]` carries them.
const AUTHENTICATION: i32 = 0x0100;
const AUTHORIZATION: i32 = 0x0200;
const NO_EXISTS: i32 = 0x0400;
const INTERNAL: i32 = 0x2000;

struct One {
    endpoint: String,
    session: String,
    http: reqwest::Client,
    cloud: Arc<SimCloud>,
}

async fn start() -> One {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = SimConfig::default();
    let session = format!("oneadmin:{}", config.one_password);
    let cloud = Arc::new(SimCloud::new(
        config,
        7,
        SimClock::new(Timestamp::SIM_EPOCH),
    ));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(serve_opennebula(cloud.clone(), listener));
    One {
        endpoint: format!("http://{addr}/RPC2"),
        session,
        http: reqwest::Client::new(),
        cloud,
    }
}

/// A success (`Ok(value)`) or OpenNebula's error (`Err((message, code))`).
type Answer = Result<Value, (String, i32)>;

impl One {
    async fn post(&self, body: String) -> (u16, Option<String>, String) {
        let resp = self
            .http
            .post(&self.endpoint)
            .header("Content-Type", "text/xml")
            .body(body)
            .send()
            .await
            .expect("send");
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        (status, content_type, resp.text().await.expect("body"))
    }

    /// One call as pyone makes it: the session first, then `params`.
    async fn call_as(&self, session: &str, method: &str, params: Vec<Value>) -> Answer {
        let mut all = vec![Value::String(session.to_string())];
        all.extend(params);
        let call = MethodCall {
            name: method.into(),
            params: all,
        };
        let (status, content_type, body) = self.post(call.to_xml().expect("xml")).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(content_type.as_deref(), Some("text/xml"));
        let xml = strip_prologue(&body);
        let response = MethodResponse::from_xml(xml)
            .unwrap_or_else(|e| panic!("not a methodResponse ({e}): {body}"));
        let Value::Array(items) = response.value else {
            panic!("not an array: {body}");
        };
        match items.as_slice() {
            [Value::Boolean(true), value, Value::Integer(0)] => Ok(value.clone()),
            [
                Value::Boolean(false),
                Value::String(message),
                Value::Integer(code),
                Value::Integer(_object_id),
                Value::Integer(0),
            ] => Err((message.clone(), *code)),
            other => panic!("not OpenNebula's answer shape: {other:?}"),
        }
    }

    async fn call(&self, method: &str, params: Vec<Value>) -> Answer {
        let session = self.session.clone();
        self.call_as(&session, method, params).await
    }
}

fn strip_prologue(body: &str) -> &str {
    let body = body.trim();
    match body.strip_prefix("<?xml") {
        Some(rest) => rest.split_once("?>").map_or(body, |(_, r)| r.trim()),
        None => body,
    }
}

fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

fn id_of(answer: Answer) -> i32 {
    match answer {
        Ok(Value::Integer(id)) => id,
        other => panic!("not an ID: {other:?}"),
    }
}

fn text_of(answer: Answer) -> String {
    match answer {
        Ok(Value::String(text)) => text,
        other => panic!("not a string: {other:?}"),
    }
}

#[tokio::test]
async fn template_allocate_then_info_round_trips_over_http() {
    let one = start().await;
    let id = id_of(
        one.call(
            "one.template.allocate",
            vec![s("NAME=\"wire-t\"\nCPU=\"1\"\nMEMORY=\"512\"\n")],
        )
        .await,
    );
    let xml = text_of(
        one.call(
            "one.template.info",
            vec![
                Value::Integer(id),
                Value::Boolean(false),
                Value::Boolean(false),
            ],
        )
        .await,
    );
    assert!(xml.starts_with("<VMTEMPLATE>"), "{xml}");
    assert!(xml.contains(&format!("<ID>{id}</ID>")), "{xml}");
    assert!(xml.contains("<NAME>wire-t</NAME>"), "{xml}");
    assert!(xml.contains("<CPU><![CDATA[1]]></CPU>"), "{xml}");
    assert!(xml.contains("<MEMORY><![CDATA[512]]></MEMORY>"), "{xml}");
}

#[tokio::test]
async fn a_locked_template_refuses_delete_with_authorization() {
    let one = start().await;
    let id = id_of(
        one.call(
            "one.template.allocate",
            vec![s("NAME=\"locked\"\nCPU=\"1\"\n")],
        )
        .await,
    );
    let locked = one
        .call(
            "one.template.lock",
            vec![Value::Integer(id), Value::Integer(1), Value::Boolean(false)],
        )
        .await;
    assert_eq!(id_of(locked), id);
    let refused = one
        .call(
            "one.template.delete",
            vec![Value::Integer(id), Value::Boolean(false)],
        )
        .await;
    let (message, code) = refused.expect_err("a locked template was deleted");
    assert_eq!(code, AUTHORIZATION, "{message}");
    assert!(message.contains("TEMPLATE is locked"), "{message}");
    // Unlocked, it goes, and is then gone.
    id_of(
        one.call("one.template.unlock", vec![Value::Integer(id)])
            .await,
    );
    id_of(
        one.call(
            "one.template.delete",
            vec![Value::Integer(id), Value::Boolean(false)],
        )
        .await,
    );
    let gone = one
        .call(
            "one.template.info",
            vec![
                Value::Integer(id),
                Value::Boolean(false),
                Value::Boolean(false),
            ],
        )
        .await;
    assert_eq!(gone.expect_err("still there").1, NO_EXISTS);
}

#[tokio::test]
async fn a_duplicate_name_answers_internal() {
    let one = start().await;
    id_of(
        one.call("one.template.allocate", vec![s("NAME=\"dup\"\n")])
            .await,
    );
    let (message, code) = one
        .call("one.template.allocate", vec![s("NAME=\"dup\"\n")])
        .await
        .expect_err("a duplicate name was accepted");
    assert_eq!(code, INTERNAL, "{message}");
    assert!(message.contains("already taken"), "{message}");
}

#[tokio::test]
async fn a_wrong_session_answers_authentication() {
    let one = start().await;
    let (message, code) = one
        .call_as(
            "oneadmin:not-the-password",
            "one.templatepool.info",
            vec![Value::Integer(-2), Value::Integer(-1), Value::Integer(-1)],
        )
        .await
        .expect_err("a wrong password was accepted");
    assert_eq!(code, AUTHENTICATION, "{message}");
}

#[tokio::test]
async fn a_body_that_is_not_a_call_answers_an_xmlrpc_fault_with_http_200() {
    let one = start().await;
    for body in [
        "not xml",
        "<methodCall><methodName>one.template.info</methodName>",
        "<?xml version=\"1.0\"?><methodResponse><params/></methodResponse>",
    ] {
        let (status, content_type, text) = one.post(body.to_string()).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(content_type.as_deref(), Some("text/xml"));
        let fault = FaultResponse::from_xml(strip_prologue(&text))
            .unwrap_or_else(|e| panic!("not a fault ({e}): {text}"))
            .fault;
        assert_eq!(fault.code(), -503, "{text}");
        assert!(
            fault
                .string()
                .starts_with("Call XML not a proper XML-RPC call."),
            "{text}"
        );
    }
}

#[tokio::test]
async fn only_post_on_rpc2_is_served() {
    let one = start().await;
    let get = one.http.get(&one.endpoint).send().await.expect("get");
    assert_eq!(get.status().as_u16(), 405);
    assert_eq!(
        get.headers().get("allow").and_then(|v| v.to_str().ok()),
        Some("POST")
    );
    let elsewhere = one.endpoint.replace("/RPC2", "/RPC3");
    let other = one
        .http
        .post(&elsewhere)
        .body("<methodCall/>")
        .send()
        .await
        .expect("post");
    assert_eq!(other.status().as_u16(), 404);
}

#[tokio::test]
async fn a_body_over_the_bound_answers_413() {
    let one = start().await;
    let (status, _, _) = one.post("x".repeat(BODY_MAX_BYTES + 1)).await;
    assert_eq!(status, 413);
}

#[tokio::test]
async fn an_unknown_method_answers_xmlrpc_c_s_fault() {
    let one = start().await;
    let call = MethodCall {
        name: "one.nothing.here".into(),
        params: vec![s(&one.session)],
    };
    let (status, _, text) = one.post(call.to_xml().expect("xml")).await;
    assert_eq!(status, 200, "{text}");
    let fault = FaultResponse::from_xml(strip_prologue(&text))
        .unwrap_or_else(|e| panic!("not a fault ({e}): {text}"))
        .fault;
    assert_eq!(fault.code(), -506, "{text}");
    assert_eq!(fault.string(), "Method 'one.nothing.here' not defined");
}

#[tokio::test]
async fn the_mutation_log_records_the_replica_a_call_names() {
    let one = start().await;
    let call = MethodCall {
        name: "one.template.allocate".into(),
        params: vec![s(&one.session), s("NAME=\"by-r2\"\nCPU=\"1\"\n")],
    };
    let resp = one
        .http
        .post(&one.endpoint)
        .header("Content-Type", "text/xml")
        .header("X-Flightdeck-Caller", "replica=r2 claim=41")
        .body(call.to_xml().expect("xml"))
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status().as_u16(), 200);
    let log = one.cloud.mutations();
    let m = log.last().expect("the allocate is logged");
    assert_eq!(m.operation, "one.template.allocate");
    assert_eq!(m.caller.as_deref(), Some("replica=r2 claim=41"));
}
