//! How an XML-RPC call reaches oned: the [`Transport`] trait, and [`HttpTransport`], which
//! POSTs the call to OpenNebula's endpoint.
//!
//! [`HttpTransport`] guarantees:
//! - one HTTP request per call, never retried (retrying is the engine's decision);
//! - a connection error or a timeout (default 30 s per request) is
//!   [`ErrorClass::Transient`]; an HTTP 5xx is Transient, 429 is RateLimited, any other
//!   status but 200 is Permanent, and the message names the status;
//! - an XML-RPC `<fault>` is Permanent, with the fault's code and string;
//! - an answer that is no XML-RPC response is Permanent, never a panic;
//! - the parameters (the first is the session string with the password) appear in no
//!   log line and no error; only the method name does. `status` stays `None` on these
//!   errors: for OpenNebula it carries only OpenNebula's own error code (see
//!   [`crate::rpc`]).

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use dxr::{FaultResponse, MethodCall, MethodResponse, Value};
use flightdeck_cloud::{CloudError, ErrorClass};

/// The service name every OpenNebula error carries.
pub const SERVICE: &str = "opennebula";
/// The most characters of an unreadable answer quoted in an error.
const EXCERPT_MAX: usize = 200;

/// One XML-RPC call and its raw answer. OpenNebula answers every call with one array:
/// `[true, value, 0]` or `[false, message, code, object_id, replication_index]`.
pub trait Transport: Send + Sync {
    fn call(
        &self,
        method: &str,
        params: Vec<dxr::Value>,
    ) -> impl Future<Output = Result<dxr::Value, CloudError>> + Send;
}

/// A shared transport is a transport (one simulator behind several clients).
impl<T: Transport> Transport for std::sync::Arc<T> {
    fn call(
        &self,
        method: &str,
        params: Vec<dxr::Value>,
    ) -> impl Future<Output = Result<dxr::Value, CloudError>> + Send {
        (**self).call(method, params)
    }
}

/// How an [`HttpTransport`] behaves. `Default`: 30 s per request, 10 s to connect.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// XML-RPC over HTTP(S) to one oned endpoint, e.g. `http://127.0.0.1:2633/RPC2`.
#[derive(Clone)]
pub struct HttpTransport {
    http: reqwest::Client,
    endpoint: reqwest::Url,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTransport")
            .field("endpoint", &redacted(&self.endpoint))
            .finish_non_exhaustive()
    }
}

/// The endpoint without any `user:password@` part, for messages.
fn redacted(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.to_string()
}

fn permanent(operation: &str, message: String) -> CloudError {
    CloudError::new(ErrorClass::Permanent, SERVICE, operation, None, message)
}

/// The most bytes read from one XML-RPC answer (a VM pool of thousands of VMs fits).
pub const RESPONSE_MAX_BYTES: usize = 64 * 1024 * 1024;

impl HttpTransport {
    /// A transport to `endpoint` (an `http` or `https` URL). An endpoint that is no
    /// such URL is a Permanent `connect` error naming it.
    pub fn new(endpoint: &str, options: &HttpOptions) -> Result<Self, CloudError> {
        let url = reqwest::Url::parse(endpoint).map_err(|e| {
            permanent(
                "connect",
                format!("endpoint {endpoint:?} is not a URL: {e}"),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(permanent(
                "connect",
                format!("endpoint {} is not http or https", redacted(&url)),
            ));
        }
        flightdeck_http::ensure_crypto_provider();
        let tls = flightdeck_http::platform_tls().map_err(|e| permanent("connect", e))?;
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .redirect(flightdeck_http::no_redirects())
            .user_agent(concat!("flightdeck/", env!("CARGO_PKG_VERSION")))
            .timeout(options.request_timeout)
            .connect_timeout(options.connect_timeout)
            .build()
            .map_err(|e| {
                permanent(
                    "connect",
                    format!("cannot build the HTTP client: {}", error_chain(&e)),
                )
            })?;
        Ok(HttpTransport {
            http,
            endpoint: url,
        })
    }

    /// The endpoint calls go to.
    pub fn endpoint(&self) -> &reqwest::Url {
        &self.endpoint
    }
}

impl Transport for HttpTransport {
    async fn call(&self, method: &str, params: Vec<Value>) -> Result<Value, CloudError> {
        let call = MethodCall {
            name: Cow::Borrowed(method),
            params,
        };
        let xml = call
            .to_xml()
            .map_err(|e| permanent(method, format!("cannot encode the call: {e}")))?;
        let body = format!("<?xml version=\"1.0\"?>\n{xml}\n");
        tracing::debug!(method, endpoint = %redacted(&self.endpoint), "XML-RPC call");
        let mut request = self
            .http
            .post(self.endpoint.clone())
            .header(reqwest::header::CONTENT_TYPE, "text/xml");
        // The replica and claim this call is sent under, for the cloud's own log (the
        // simulator's mutation log records it; OpenNebula ignores it).
        if let Some(caller) = flightdeck_http::caller() {
            request = request.header(flightdeck_http::CALLER_HEADER, caller);
        }
        flightdeck_http::may_send().map_err(|why| permanent(method, format!("not sent: {why}")))?;
        let resp = request
            .body(body)
            .send()
            .await
            .map_err(|e| transport_error(method, &self.endpoint, e))?;
        let status = resp.status().as_u16();
        if let Some(why) = flightdeck_http::redirect_refused(&resp) {
            return Err(permanent(method, why));
        }
        let text = flightdeck_http::read_text(resp, RESPONSE_MAX_BYTES)
            .await
            .map_err(|e| match e {
                flightdeck_http::BodyError::Transport(e) => {
                    transport_error(method, &self.endpoint, e)
                }
                too_large => permanent(method, too_large.to_string()),
            })?;
        if status != 200 {
            let class = match status {
                500..=599 => ErrorClass::Transient,
                429 => ErrorClass::RateLimited(None),
                _ => ErrorClass::Permanent,
            };
            let e = CloudError::new(
                class,
                SERVICE,
                method,
                None,
                format!(
                    "HTTP {status} from {}: {}",
                    redacted(&self.endpoint),
                    excerpt(&text)
                ),
            );
            tracing::debug!(error = %e, "XML-RPC call failed");
            return Err(e);
        }
        decode_response(method, &text)
    }
}

/// The value of an XML-RPC `methodResponse`, or the error its `<fault>` or its
/// malformation makes.
pub fn decode_response(method: &str, text: &str) -> Result<Value, CloudError> {
    // A fault first: a missing <params> is ambiguous, a <fault> is not.
    if let Ok(f) = FaultResponse::from_xml(text) {
        return Err(permanent(
            method,
            format!("XML-RPC fault {}: {}", f.fault.code(), f.fault.string()),
        ));
    }
    match MethodResponse::from_xml(text) {
        Ok(r) => Ok(r.value),
        Err(_) => Err(permanent(
            method,
            format!(
                "the answer is not an XML-RPC methodResponse: {}",
                excerpt(text)
            ),
        )),
    }
}

/// The first [`EXCERPT_MAX`] characters of `text`, whitespace collapsed.
fn excerpt(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        return "(empty body)".into();
    }
    match flat.char_indices().nth(EXCERPT_MAX) {
        Some((i, _)) => format!("{}…", flat.get(..i).unwrap_or_default()),
        None => flat,
    }
}

/// A call that got no answer: refused, reset, timed out. Always Transient.
fn transport_error(method: &str, endpoint: &reqwest::Url, err: reqwest::Error) -> CloudError {
    let what = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let err = err.without_url();
    CloudError::new(
        ErrorClass::Transient,
        SERVICE,
        method,
        None,
        format!("{what} to {}: {}", redacted(endpoint), error_chain(&err)),
    )
}

/// An error and its sources, joined: reqwest's own Display hides the cause.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut s = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let m = e.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = e.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_xmlrpc_c_answer_with_declaration_and_newlines_decodes() {
        let text = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\r\n<methodResponse>\r\n<params>\r\n<param><value><array><data>\r\n<value><boolean>1</boolean></value>\r\n<value><string>&lt;VM_POOL&gt;&lt;/VM_POOL&gt;</string></value>\r\n<value><i4>0</i4></value>\r\n</data></array></value></param>\r\n</params>\r\n</methodResponse>\r\n";
        let v = decode_response("one.vmpool.info", text).expect("decodes");
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Boolean(true),
                Value::String("<VM_POOL></VM_POOL>".into()),
                Value::Integer(0)
            ])
        );
    }

    #[test]
    fn a_fault_is_permanent_with_its_code_and_string() {
        let text = "<?xml version=\"1.0\"?><methodResponse><fault><value><struct><member><name>faultCode</name><value><i4>-501</i4></value></member><member><name>faultString</name><value><string>Type mismatch</string></value></member></struct></value></fault></methodResponse>";
        let e = decode_response("one.vm.action", text).expect_err("fault");
        assert_eq!(e.class, ErrorClass::Permanent);
        assert_eq!(e.operation, "one.vm.action");
        assert_eq!(e.status, None);
        assert_eq!(e.message, "XML-RPC fault -501: Type mismatch");
    }

    #[test]
    fn an_answer_that_is_not_xmlrpc_is_permanent_and_quoted_short() {
        let body = format!("<html>{}</html>", "x".repeat(1000));
        let e = decode_response("one.vm.info", &body).expect_err("not XML-RPC");
        assert_eq!(e.class, ErrorClass::Permanent);
        assert!(
            e.message
                .starts_with("the answer is not an XML-RPC methodResponse: <html>")
        );
        assert!(e.message.chars().count() < 300, "{}", e.message);
    }

    #[test]
    fn credentials_in_the_endpoint_are_not_shown() {
        let t = HttpTransport::new("http://u:pw@127.0.0.1:2633/RPC2", &HttpOptions::default())
            .expect("valid");
        let shown = format!("{t:?}");
        assert!(!shown.contains("pw"), "{shown}");
        let e = HttpTransport::new("ftp://127.0.0.1/", &HttpOptions::default()).expect_err("ftp");
        assert_eq!(e.class, ErrorClass::Permanent);
        assert!(e.message.contains("not http or https"), "{e}");
    }
}
