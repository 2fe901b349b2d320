//! A simulated cloud served on a loopback port, and a minimal HTTP/1.1 client for it
//! (plain requests over a `TcpStream`, `Connection: close`).

#![allow(dead_code)]

use std::sync::Arc;

use flightdeck_cloud::{SimClock, Timestamp};
use flightdeck_sim::{SimCloud, SimConfig};
use flightdeck_sim_http::{DEFAULT_PASSWORD, ServeOptions, serve};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Sim {
    pub addr: std::net::SocketAddr,
    pub base: String,
    pub cloud: Arc<SimCloud>,
    pub clock: SimClock,
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub async fn start() -> Sim {
    start_with(SimConfig::default()).await
}

pub async fn start_with(config: SimConfig) -> Sim {
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let cloud = Arc::new(SimCloud::new(config, 7, clock.clone()));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(serve(cloud.clone(), listener, ServeOptions::default()));
    Sim {
        addr,
        base: format!("http://{addr}"),
        cloud,
        clock,
    }
}

fn parse(raw: &[u8]) -> Reply {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    if chunked {
        let mut out = Vec::new();
        let mut rest = body.as_slice();
        while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..end]).trim(), 16)
                .expect("chunk size");
            if size == 0 {
                break;
            }
            out.extend_from_slice(&rest[end + 2..end + 2 + size]);
            rest = &rest[end + 2 + size + 2..];
        }
        body = out;
    }
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).unwrap_or_else(|_| json!(String::from_utf8_lossy(&body)))
    };
    Reply {
        status,
        headers,
        body,
    }
}

impl Sim {
    /// Sends one request; `path` is absolute or relative to the base URL.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
        extra: &[(&str, &str)],
    ) -> Reply {
        let path = path.strip_prefix(&self.base).unwrap_or(path);
        let payload = body.map(Value::to_string).unwrap_or_default();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json\r\nContent-Length: {}\r\n",
            self.addr,
            payload.len()
        );
        if body.is_some() {
            req.push_str("Content-Type: application/json\r\n");
        }
        if let Some(t) = token {
            req.push_str(&format!("X-Auth-Token: {t}\r\n"));
        }
        for (k, v) in extra {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&payload);
        let mut stream = TcpStream::connect(self.addr).await.expect("connect");
        stream.write_all(req.as_bytes()).await.expect("write");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.expect("read");
        parse(&raw)
    }

    pub async fn get(&self, token: &str, path: &str) -> Reply {
        self.call("GET", path, Some(token), None, &[]).await
    }

    pub async fn post(&self, token: &str, path: &str, body: Value) -> Reply {
        self.call("POST", path, Some(token), Some(&body), &[]).await
    }

    pub async fn put(&self, token: &str, path: &str, body: Value) -> Reply {
        self.call("PUT", path, Some(token), Some(&body), &[]).await
    }

    pub async fn delete(&self, token: &str, path: &str) -> Reply {
        self.call("DELETE", path, Some(token), None, &[]).await
    }

    /// Password auth as keystoneauth sends it.
    pub async fn auth(&self, password: &str) -> Reply {
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "admin", "domain": {"name": "Default"}, "password": password,
            }}},
            "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}},
        }});
        self.call("POST", "/identity/v3/auth/tokens", None, Some(&body), &[])
            .await
    }

    /// A valid project-scoped token.
    pub async fn token(&self) -> String {
        let reply = self.auth(DEFAULT_PASSWORD).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        reply
            .header("x-subject-token")
            .expect("X-Subject-Token")
            .to_string()
    }

    /// Moves the shared clock on by `ms` (the caller owns time, not the server).
    pub fn advance_ms(&self, ms: u64) {
        self.clock
            .advance(flightdeck_spec::Duration::from_millis(ms));
    }

    /// The API calls the simulator counted for `service` and `operation`.
    pub fn calls(&self, service: &str, operation: &str) -> u64 {
        self.cloud
            .api_calls()
            .get(service)
            .and_then(|ops| ops.get(operation))
            .copied()
            .unwrap_or(0)
    }
}

/// The id in `reply.body[key]["id"]`.
pub fn id_of(reply: &Reply, key: &str) -> String {
    reply.body[key]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no {key}.id in {}", reply.body))
        .to_string()
}
