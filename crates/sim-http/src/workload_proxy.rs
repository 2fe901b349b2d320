//! The simulated network's door for clients outside the simulator: an HTTP proxy that
//! tunnels (`CONNECT`, RFC 9110 §9.3.6) a connection to a kubeadm cluster's API
//! endpoint, the `host:port` its init data names (the load balancer's address), to that
//! cluster's TLS listener ([`WorkloadListeners`]).
//!
//! Nothing in the tunnel is rewritten: kubectl (`HTTPS_PROXY`, or a kubeconfig's
//! `proxy-url`) and flightdeck (`serve --workload-proxy`) connect to the endpoint by its
//! own name and verify the API server's certificate under it, as on a real cloud where
//! the clusters' network is behind a bastion.
//!
//! Answers:
//! - 200, then the tunnel, when a workload API server listens at the target;
//! - 400 when the target is not `host:port`;
//! - 405 for any method but `CONNECT`;
//! - 502 when no workload cluster's API is at the target, or its listener cannot be
//!   reached.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::workload_tls::WorkloadListeners;

/// Serves the proxy on `listener` until it fails; each connection on a task of its own.
pub async fn serve_workload_proxy(
    listeners: Arc<WorkloadListeners>,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "workload proxy: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let listeners = listeners.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let listeners = listeners.clone();
                async move { Ok::<_, Infallible>(tunnel(&listeners, req).await) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new());
            let conn = builder
                .serve_connection(TokioIo::new(tcp), service)
                .with_upgrades();
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "workload proxy connection ended");
            }
        });
    }
}

/// Answers one request: opens the tunnel it asks for, or says why not.
async fn tunnel<B: Send + 'static>(
    listeners: &WorkloadListeners,
    req: Request<B>,
) -> Response<Body> {
    if req.method() != Method::CONNECT {
        let mut out = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "{} {}: this proxy only tunnels (CONNECT host:port) to the simulated workload clusters' API servers",
                req.method(),
                req.uri()
            ),
        );
        out.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("CONNECT"));
        return out;
    }
    let target = match req.uri().authority() {
        Some(a) if a.port_u16().is_some() && req.uri().path_and_query().is_none() => {
            a.as_str().to_string()
        }
        _ => {
            return plain(
                StatusCode::BAD_REQUEST,
                format!("CONNECT {}: the target must be host:port", req.uri()),
            );
        }
    };
    let server = match listeners.at(&target) {
        Ok(Some(server)) => server,
        Ok(None) => {
            return plain(
                StatusCode::BAD_GATEWAY,
                format!(
                    "CONNECT {target}: no simulated workload cluster's API server is at this address (kubeadm init has not made one here)"
                ),
            );
        }
        Err(e) => return plain(StatusCode::BAD_GATEWAY, format!("CONNECT {target}: {e}")),
    };
    // Connected before the 200, as a proxy does: a client told yes has a peer.
    let mut upstream = match tokio::net::TcpStream::connect(server.addr).await {
        Ok(s) => s,
        Err(e) => {
            return plain(
                StatusCode::BAD_GATEWAY,
                format!("CONNECT {target}: the API server's listener refused: {e}"),
            );
        }
    };
    let _ = upstream.set_nodelay(true);
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => {
                let mut client = TokioIo::new(upgraded);
                if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
                    tracing::debug!(%target, error = %e, "workload proxy tunnel ended");
                }
            }
            Err(e) => tracing::debug!(%target, error = %e, "workload proxy: no upgrade"),
        }
    });
    Response::new(Body::empty())
}

fn plain(status: StatusCode, message: String) -> Response<Body> {
    let mut out = Response::new(Body::from(format!("{message}\n")));
    *out.status_mut() = status;
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    out
}
