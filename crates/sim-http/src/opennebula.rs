//! The simulated OpenNebula served as oned serves its XML-RPC API: `POST /RPC2`.
//!
//! Each call is one [`SimCloud::one_call`], so the simulator's counting, faults and
//! latencies apply exactly as in process. The answer is OpenNebula's own: a
//! `methodResponse` whose one param is the array `[true, value, 0]` or
//! `[false, message, code, object_id, 0]`. Errors OpenNebula reports are inside that
//! array; only what xmlrpc-c refuses before oned runs the call (an unknown method, a
//! missing or mistyped param) is an XML-RPC `<fault>`, which `one_call` answers as the
//! `{faultCode, faultString}` struct.
//!
//! Everything around the call follows xmlrpc-c's Abyss server, which oned serves with:
//! a body that is not an XML-RPC `methodCall` answers HTTP 200 with a `<fault>` (code
//! -503, "Call XML not a proper XML-RPC call."), an empty body 400, `OPTIONS` 200 with
//! `Allow: POST`, any other method on `/RPC2` 405, and any other path 404. One
//! difference: a body over [`BODY_MAX_BYTES`] answers 413 (xmlrpc-c answers 500 past
//! oned's `MESSAGE_SIZE`, 1 GiB by default), so that the bound is visible as such.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use dxr::{Fault, FaultResponse, MethodCall, MethodResponse};
use flightdeck_sim::SimCloud;

/// The largest request body read; a larger one is refused with 413 before it is read
/// whole. Far above any call OpenNebula's clients make (a template is a few KiB).
pub const BODY_MAX_BYTES: usize = 8 * 1024 * 1024;

/// xmlrpc-c's `XMLRPC_PARSE_ERROR`: the body is not an XML-RPC call.
pub const FAULT_PARSE: i32 = -503;
/// xmlrpc-c's `XMLRPC_INTERNAL_ERROR`: the answer could not be written as XML.
pub const FAULT_INTERNAL: i32 = -500;

/// The XML declaration xmlrpc-c puts before every answer.
const PROLOGUE: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\r\n";

/// Serves the simulated OpenNebula on `listener` until the listener fails. Clients
/// reach it at `http://<listener's local address>/RPC2` (the `ONE_XMLRPC` value).
pub async fn serve_opennebula(
    cloud: Arc<SimCloud>,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    tracing::info!(endpoint = %format!("http://{addr}/RPC2"), "simulated OpenNebula listening");
    axum::serve(listener, opennebula_router(cloud)).await
}

/// OpenNebula's XML-RPC endpoint as one [`Router`], for callers that serve it
/// themselves: `POST /RPC2` and nothing else.
pub fn opennebula_router(cloud: Arc<SimCloud>) -> Router {
    Router::new()
        .route(
            "/RPC2",
            post(rpc2).options(options).fallback(method_not_allowed),
        )
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_MAX_BYTES))
        .layer(axum::middleware::from_fn(crate::with_caller))
        .with_state(cloud)
}

async fn rpc2(State(cloud): State<Arc<SimCloud>>, body: Bytes) -> Response {
    if body.is_empty() {
        return plain(
            StatusCode::BAD_REQUEST,
            "According to your content-length HTTP header, your request is empty (zero length)",
        );
    }
    let xml = match parse_call(&body) {
        Ok((method, params)) => answer_xml(cloud.one_call(&method, params)),
        Err(reason) => fault_xml(
            FAULT_PARSE,
            &format!("Call XML not a proper XML-RPC call.  {reason}"),
        ),
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/xml")], xml).into_response()
}

async fn options() -> Response {
    (StatusCode::OK, [(header::ALLOW, "POST")]).into_response()
}

async fn method_not_allowed() -> Response {
    let mut resp = plain(
        StatusCode::METHOD_NOT_ALLOWED,
        "POST is the only HTTP method this server understands",
    );
    resp.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    resp
}

async fn not_found() -> Response {
    plain(
        StatusCode::NOT_FOUND,
        "This XML-RPC server responds to only one URI path: /RPC2",
    )
}

/// An HTTP error outside XML-RPC, as a plain-text explanation.
fn plain(status: StatusCode, explanation: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        explanation,
    )
        .into_response()
}

/// The method name and params of an XML-RPC call, or why the body is not one. The
/// reason never quotes the body (it may be megabytes).
pub(crate) fn parse_call(body: &[u8]) -> Result<(String, Vec<dxr::Value>), &'static str> {
    let text = std::str::from_utf8(body).map_err(|_| "Call is not valid UTF-8.")?;
    // xmlrpc-c reads the body with expat, which skips a UTF-8 byte order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err("Call is not valid XML.  no element found");
    }
    // dxr's error carries the whole input as its message: only its kind is kept.
    let call = MethodCall::from_xml(text)
        .map_err(|_| "Call is not a well-formed XML-RPC <methodCall> element.")?;
    if call.name.is_empty() {
        return Err("The <methodName> element is empty.");
    }
    Ok((call.name.into_owned(), call.params))
}

/// What [`SimCloud::one_call`] answered, as XML: OpenNebula's response array as the
/// one param, or, for a call xmlrpc-c refuses before oned runs it (an unknown method,
/// a missing or mistyped param), the `{faultCode, faultString}` struct as a `<fault>`.
pub(crate) fn answer_xml(value: dxr::Value) -> String {
    if let dxr::Value::Struct(members) = &value
        && let (Some(dxr::Value::Integer(code)), Some(dxr::Value::String(message))) =
            (members.get("faultCode"), members.get("faultString"))
        && members.len() == 2
    {
        return fault_xml(*code, message);
    }
    response_xml(value)
}

/// The `methodResponse` that carries `value` as its one param.
pub(crate) fn response_xml(value: dxr::Value) -> String {
    match (MethodResponse { value }).to_xml() {
        Ok(xml) => format!("{PROLOGUE}{xml}\r\n"),
        Err(e) => {
            tracing::error!(error = %e, "cannot write an XML-RPC answer");
            fault_xml(FAULT_INTERNAL, "Cannot write the answer as XML-RPC.")
        }
    }
}

/// The `methodResponse` that carries a `<fault>`.
pub(crate) fn fault_xml(code: i32, message: &str) -> String {
    let fault = FaultResponse {
        fault: Fault::new(code, message.to_string()),
    };
    match fault.to_xml() {
        Ok(xml) => format!("{PROLOGUE}{xml}\r\n"),
        // Only reachable if quick-xml cannot write a plain struct: answer a fixed one.
        Err(_) => format!(
            "{PROLOGUE}<methodResponse><fault><value><struct><member><name>faultCode</name><value><i4>{FAULT_INTERNAL}</i4></value></member><member><name>faultString</name><value><string>internal error</string></value></member></struct></value></fault></methodResponse>\r\n"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dxr::Value;

    /// Exactly what Python's `xmlrpc.client.dumps` (which pyone uses) sends.
    const PYTHON_CALL: &str = "<?xml version='1.0'?>\n<methodCall>\n<methodName>one.template.allocate</methodName>\n<params>\n<param>\n<value><string>oneadmin:opennebula</string></value>\n</param>\n<param>\n<value><string>NAME=\"x\"\nCPU=\"1\"\n</string></value>\n</param>\n<param>\n<value><int>1</int></value>\n</param>\n<param>\n<value><boolean>1</boolean></value>\n</param>\n<param>\n<value><int>-2</int></value>\n</param>\n<param>\n<value><string></string></value>\n</param>\n<param>\n<value><string>a&lt;b&amp;c</string></value>\n</param>\n<param>\n<value><i4>7</i4></value>\n</param>\n<param>\n<value>untyped text</value>\n</param>\n</params>\n</methodCall>\n";

    #[test]
    fn python_xmlrpc_client_calls_parse_with_every_type_it_sends() {
        let (method, params) = parse_call(PYTHON_CALL.as_bytes()).expect("a call");
        assert_eq!(method, "one.template.allocate");
        assert_eq!(
            params,
            vec![
                Value::String("oneadmin:opennebula".into()),
                Value::String("NAME=\"x\"\nCPU=\"1\"\n".into()),
                Value::Integer(1),
                Value::Boolean(true),
                Value::Integer(-2),
                Value::String(String::new()),
                Value::String("a<b&c".into()),
                Value::Integer(7),
                Value::String("untyped text".into()),
            ]
        );
    }

    #[test]
    fn a_template_in_cdata_keeps_its_markup() {
        let body = "<?xml version='1.0'?><methodCall><methodName>one.template.update</methodName><params><param><value><string>&lt;TEMPLATE&gt;&lt;CPU&gt;&lt;![CDATA[2]]&gt;&lt;/CPU&gt;&lt;/TEMPLATE&gt;</string></value></param></params></methodCall>";
        let (_, params) = parse_call(body.as_bytes()).expect("a call");
        assert_eq!(
            params,
            vec![Value::String(
                "<TEMPLATE><CPU><![CDATA[2]]></CPU></TEMPLATE>".into()
            )]
        );
    }

    #[test]
    fn a_call_without_params_parses() {
        let body = "<?xml version=\"1.0\"?><methodCall><methodName>one.system.version</methodName><params></params></methodCall>";
        let (method, params) = parse_call(body.as_bytes()).expect("a call");
        assert_eq!(method, "one.system.version");
        assert!(params.is_empty());
    }

    #[test]
    fn bodies_that_are_not_calls_are_refused_without_quoting_them() {
        for body in [
            &b""[..],
            b"   ",
            b"<methodCall><methodName>x</methodName>",
            b"<foo/>",
            b"not xml at all",
            b"<methodResponse><params/></methodResponse>",
            b"\xff\xfe<methodCall/>",
            b"<methodCall><methodName></methodName><params/></methodCall>",
        ] {
            let reason = parse_call(body).expect_err("not a call");
            assert!(reason.len() < 100, "{reason}");
        }
    }

    #[test]
    fn answers_are_an_xml_declaration_then_one_method_response() {
        let xml = response_xml(Value::Array(vec![
            Value::Boolean(true),
            Value::String("<VM><ID>3</ID></VM>".into()),
            Value::Integer(0),
        ]));
        assert!(xml.starts_with(PROLOGUE), "{xml}");
        assert!(
            xml.contains("<methodResponse><params><param><value><array><data><value><boolean>1</boolean></value><value><string>&lt;VM&gt;&lt;ID&gt;3&lt;/ID&gt;&lt;/VM&gt;</string></value><value><i4>0</i4></value></data></array></value></param></params></methodResponse>"),
            "{xml}"
        );
        let back =
            MethodResponse::from_xml(xml.trim_start_matches(PROLOGUE).trim()).expect("parses back");
        assert!(matches!(back.value, Value::Array(ref a) if a.len() == 3));
    }

    #[test]
    fn a_fault_struct_from_the_simulator_is_served_as_a_fault() {
        let value = Value::Struct(
            [
                ("faultCode".to_string(), Value::Integer(-506)),
                (
                    "faultString".to_string(),
                    Value::String("Method 'one.nope' not defined".into()),
                ),
            ]
            .into(),
        );
        let xml = answer_xml(value);
        let back =
            FaultResponse::from_xml(xml.trim_start_matches(PROLOGUE).trim()).expect("a fault");
        assert_eq!(back.fault.code(), -506);
        assert_eq!(back.fault.string(), "Method 'one.nope' not defined");
        // Any other struct is a value like any other.
        let other = Value::Struct([("faultCode".to_string(), Value::Integer(1))].into());
        assert!(answer_xml(other).contains("<params>"));
    }

    #[test]
    fn faults_carry_xmlrpc_c_code_and_string() {
        let xml = fault_xml(FAULT_PARSE, "Call XML not a proper XML-RPC call.  x");
        let back =
            FaultResponse::from_xml(xml.trim_start_matches(PROLOGUE).trim()).expect("parses back");
        assert_eq!(back.fault.code(), -503);
        assert_eq!(
            back.fault.string(),
            "Call XML not a proper XML-RPC call.  x"
        );
    }
}
