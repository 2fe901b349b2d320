//! A tiny HTTP/1.1 server on loopback for the provider's tests: one request per
//! connection, answered by a closure, every request recorded.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use flightdeck_openstack::{CloudEntry, Credentials, Domain, Password, Scope};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const PASSWORD: &str = "hunter2-very-secret";

#[derive(Clone, Debug)]
pub struct Req {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: HashMap<String, String>,
    pub body: String,
}

impl Req {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("request body is JSON")
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
    /// `"METHOD /path?query"`, for compact assertions.
    pub fn line(&self) -> String {
        if self.query.is_empty() {
            format!("{} {}", self.method, self.path)
        } else {
            format!("{} {}?{}", self.method, self.path, self.query)
        }
    }
}

#[derive(Clone, Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// How long the server waits before it answers.
    pub delay: Option<std::time::Duration>,
}

impl Resp {
    pub fn json(status: u16, body: Value) -> Resp {
        Resp {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.to_string(),
            delay: None,
        }
    }
    pub fn empty(status: u16) -> Resp {
        Resp {
            status,
            headers: vec![],
            body: String::new(),
            delay: None,
        }
    }
    pub fn delayed(mut self, d: std::time::Duration) -> Resp {
        self.delay = Some(d);
        self
    }
    pub fn header(mut self, k: &str, v: &str) -> Resp {
        self.headers.push((k.into(), v.into()));
        self
    }
}

type Handler = dyn Fn(&Req, &str) -> Resp + Send + Sync;

pub struct Fake {
    pub addr: SocketAddr,
    pub base: String,
    log: Arc<Mutex<Vec<Req>>>,
}

impl Fake {
    /// Starts a server; `handler` gets each request and the server's base URL.
    pub async fn start(handler: impl Fn(&Req, &str) -> Resp + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let base = format!("http://{addr}");
        let log = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let (b, l) = (base.clone(), log.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (h, b, l) = (handler.clone(), b.clone(), l.clone());
                tokio::spawn(async move { serve_one(stream, &*h, &b, &l).await });
            }
        });
        Fake { addr, base, log }
    }

    pub fn requests(&self) -> Vec<Req> {
        self.log.lock().expect("log").clone()
    }

    /// The request lines whose path starts with `prefix`.
    pub fn lines(&self, prefix: &str) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| r.path.starts_with(prefix))
            .map(Req::line)
            .collect()
    }

    pub fn count(&self, prefix: &str) -> usize {
        self.lines(prefix).len()
    }

    /// A clouds.yaml entry that authenticates against this server's `/identity`.
    pub fn entry(&self) -> CloudEntry {
        CloudEntry::new(
            "fake",
            Credentials {
                auth_url: format!("{}/identity", self.base),
                username: "flightdeck".into(),
                password: Password::new(PASSWORD),
                project: Scope::Name {
                    name: "k8s".into(),
                    domain: Domain::default(),
                },
                user_domain: Domain::default(),
            },
        )
    }
}

async fn serve_one(mut stream: TcpStream, handler: &Handler, base: &str, log: &Mutex<Vec<Req>>) {
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
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.clone(), String::new()),
    };
    let req = Req {
        method,
        path,
        query,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    };
    log.lock().expect("log").push(req.clone());
    let resp = handler(&req, base);
    if let Some(d) = resp.delay {
        tokio::time::sleep(d).await;
    }
    let mut out = format!("HTTP/1.1 {} X\r\n", resp.status);
    for (k, v) in &resp.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
        resp.body.len(),
        resp.body
    ));
    let _ = stream.write_all(out.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A catalog with every service at `<base>/<name>` for the public interface in
/// RegionOne, and decoys for other interfaces and regions.
pub fn catalog(base: &str) -> Value {
    let service = |kind: &str, path: &str| {
        json!({"type": kind, "name": path, "endpoints": [
            {"interface": "internal", "region_id": "RegionOne", "region": "RegionOne", "url": format!("{base}/internal-{path}")},
            {"interface": "public", "region_id": "RegionOne", "region": "RegionOne", "url": format!("{base}/{path}")},
            {"interface": "public", "region_id": "RegionTwo", "region": "RegionTwo", "url": format!("{base}/two-{path}")}
        ]})
    };
    json!([
        service("identity", "identity"),
        service("compute", "nova/v2.1"),
        service("network", "neutron"),
        service("load-balancer", "octavia"),
        service("image", "glance"),
    ])
}

/// Keystone's 201 with token `token`, expiring at `expires_at`.
pub fn token_reply(base: &str, token: &str, expires_at: &str) -> Resp {
    Resp::json(
        201,
        json!({"token": {
            "expires_at": expires_at,
            "project": {"id": "p1", "name": "k8s"},
            "catalog": catalog(base)
        }}),
    )
    .header("X-Subject-Token", token)
}

pub const FAR_FUTURE: &str = "2999-01-01T00:00:00.000000Z";
