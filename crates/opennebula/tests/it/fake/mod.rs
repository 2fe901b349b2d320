//! A tiny XML-RPC server on loopback standing in for oned: one request per connection,
//! each call decoded and recorded, answered by a closure with OpenNebula's answer shapes.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dxr::{MethodCall, MethodResponse, Value};
use flightdeck_opennebula::{
    HttpOptions, HttpTransport, OneClient, OneCredentials, OpenNebulaCloud, Secret,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const USER: &str = "flightdeck";
pub const PASSWORD: &str = "hunter2-very-secret";

/// One call as oned received it.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub params: Vec<Value>,
    pub content_type: Option<String>,
    /// The `X-Flightdeck-Caller` header: the replica and claim the call was sent under.
    pub caller: Option<String>,
    pub body: String,
}

impl Call {
    /// The parameters after the session string.
    pub fn args(&self) -> &[Value] {
        self.params.get(1..).unwrap_or_default()
    }
}

/// How the fake answers one call.
#[derive(Clone, Debug)]
pub enum Answer {
    /// A `methodResponse` holding this value, HTTP 200.
    Value(Value),
    /// This body with this HTTP status.
    Raw(u16, String),
    /// Nothing for this long, then a success.
    Stall(Duration),
    /// A redirect with this status to this Location.
    Redirect(u16, String),
}

/// OpenNebula's success: `[true, value, 0]`.
pub fn ok(v: Value) -> Answer {
    Answer::Value(Value::Array(vec![
        Value::Boolean(true),
        v,
        Value::Integer(0),
    ]))
}

pub fn ok_id(id: i32) -> Answer {
    ok(Value::Integer(id))
}

pub fn ok_xml(doc: &str) -> Answer {
    ok(Value::String(doc.to_string()))
}

/// OpenNebula's failure: `[false, message, code, object_id, replication_index]`.
pub fn fail(message: &str, code: i32) -> Answer {
    Answer::Value(Value::Array(vec![
        Value::Boolean(false),
        Value::String(message.to_string()),
        Value::Integer(code),
        Value::Integer(-1),
        Value::Integer(0),
    ]))
}

/// An XML-RPC `<fault>`, as xmlrpc-c sends for a call it cannot dispatch.
pub fn fault(code: i32, message: &str) -> Answer {
    Answer::Raw(
        200,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\r\n<methodResponse>\r\n<fault>\r\n<value><struct>\r\n<member><name>faultCode</name>\r\n<value><i4>{code}</i4></value></member>\r\n<member><name>faultString</name>\r\n<value><string>{message}</string></value></member>\r\n</struct></value>\r\n</fault>\r\n</methodResponse>\r\n"
        ),
    )
}

type Handler = dyn Fn(&Call) -> Answer + Send + Sync;

pub struct Fake {
    pub addr: SocketAddr,
    pub endpoint: String,
    log: Arc<Mutex<Vec<Call>>>,
}

impl Fake {
    pub async fn start(handler: impl Fn(&Call) -> Answer + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let l = log.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (h, l) = (handler.clone(), l.clone());
                tokio::spawn(async move { serve_one(stream, &*h, &l).await });
            }
        });
        Fake {
            addr,
            endpoint: format!("http://{addr}/RPC2"),
            log,
        }
    }

    pub fn calls(&self) -> Vec<Call> {
        self.log.lock().expect("log").clone()
    }

    pub fn methods(&self) -> Vec<String> {
        self.calls().into_iter().map(|c| c.method).collect()
    }

    pub fn credentials() -> OneCredentials {
        OneCredentials::new(USER, Secret::new(PASSWORD))
    }

    pub fn client(&self) -> OneClient<HttpTransport> {
        self.client_with(&HttpOptions::default())
    }

    pub fn client_with(&self, options: &HttpOptions) -> OneClient<HttpTransport> {
        let t = HttpTransport::new(&self.endpoint, options).expect("transport");
        OneClient::new(t, &Self::credentials())
    }

    pub fn cloud<G>(&self, guest: G) -> OpenNebulaCloud<HttpTransport, G> {
        OpenNebulaCloud::new(self.client(), guest)
    }
}

async fn serve_one(mut stream: TcpStream, handler: &Handler, log: &Mutex<Vec<Call>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let len: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let body = String::from_utf8_lossy(&body).to_string();
    let parsed = MethodCall::from_xml(&body).expect("the request is an XML-RPC methodCall");
    let call = Call {
        method: parsed.name.to_string(),
        params: parsed.params,
        content_type: header("content-type"),
        caller: header("x-flightdeck-caller"),
        body,
    };
    log.lock().expect("log").push(call.clone());
    let mut location = String::new();
    let (status, text) = match handler(&call) {
        Answer::Value(v) => (200, response_xml(v)),
        Answer::Raw(status, text) => (status, text),
        Answer::Stall(d) => {
            tokio::time::sleep(d).await;
            (200, response_xml(Value::Integer(0)))
        }
        Answer::Redirect(status, to) => {
            location = format!("Location: {to}\r\n");
            (status, String::new())
        }
    };
    let out = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: text/xml\r\n{location}Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.write_all(out.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// A `methodResponse` the way xmlrpc-c writes one: declaration, CRLF.
fn response_xml(value: Value) -> String {
    let xml = MethodResponse { value }.to_xml().expect("encodes");
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\r\n{xml}\r\n")
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

pub const VM_POOL: &str = include_str!("../../data/vm_pool.xml");
pub const TEMPLATE_POOL: &str = include_str!("../../data/template_pool.xml");
pub const IMAGE_POOL: &str = include_str!("../../data/image_pool.xml");
