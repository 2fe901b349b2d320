//! A fake Kubernetes API server with no sockets: a `tower::service_fn` behind
//! `kube::Client::new`, answering what the test's handler says and recording every
//! request.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use flightdeck_cloud::Ownership;
use kube::client::Body;
use serde_json::{Value, json};

/// One request as the fake API saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Decoded query parameters.
    pub query: BTreeMap<String, String>,
    pub content_type: Option<String>,
    /// The JSON body, `Value::Null` if none.
    pub body: Value,
}

/// What the fake API answers.
pub enum Answer {
    Json(u16, Value),
    /// The connection is refused (no API server listening).
    Refused,
}

/// A Kubernetes `Status` failure body.
pub fn status(code: u16, reason: &str, message: &str) -> Answer {
    Answer::Json(
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

pub fn list(items: Vec<Value>) -> Answer {
    Answer::Json(
        200,
        json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}),
    )
}

pub type Log = Arc<Mutex<Vec<Seen>>>;

pub fn seen(log: &Log) -> Vec<Seen> {
    log.lock().expect("log").clone()
}

/// A client whose every request is answered by `handler`.
pub fn client<F>(handler: F) -> (kube::Client, Log)
where
    F: Fn(&Seen) -> Answer + Send + Sync + 'static,
{
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let handler = Arc::new(handler);
    let service_log = log.clone();
    let service = tower::service_fn(move |req: http::Request<Body>| {
        let handler = handler.clone();
        let log = service_log.clone();
        async move {
            let (parts, body) = req.into_parts();
            let bytes = body.collect_bytes().await.map_err(Box::new)?;
            let seen = Seen {
                method: parts.method.to_string(),
                path: parts.uri.path().to_string(),
                query: parts.uri.query().map(decode_query).unwrap_or_default(),
                content_type: parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            log.lock().expect("log").push(seen.clone());
            match handler(&seen) {
                Answer::Json(code, v) => {
                    let mut res = http::Response::new(Body::from(v.to_string().into_bytes()));
                    *res.status_mut() = http::StatusCode::from_u16(code).expect("status code");
                    Ok(res)
                }
                Answer::Refused => {
                    Err::<http::Response<Body>, Box<dyn std::error::Error + Send + Sync>>(Box::new(
                        std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
                    ))
                }
            }
        }
    });
    (kube::Client::new(service, "default"), log)
}

fn decode_query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("utf8");
                out.push(u8::from_str_radix(hex, 16).expect("hex"));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).expect("utf8")
}

pub fn owner() -> Ownership {
    Ownership {
        cluster: "demo".into(),
        uid: "u1".into(),
    }
}

/// A workload-client function.
pub type WorkloadOf = fn(&Ownership) -> Result<Option<kube::Client>, flightdeck_cloud::CloudError>;

/// No workload cluster reachable.
pub fn no_workload(_: &Ownership) -> Result<Option<kube::Client>, flightdeck_cloud::CloudError> {
    Ok(None)
}
