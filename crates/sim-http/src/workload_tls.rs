//! The simulated workload clusters' API servers over TLS, as a kubeadm cluster's are:
//! one loopback listener per workload cluster that `kubeadm init` made, serving that
//! cluster's API (the same [`crate::kubernetes_router`] answers, rooted at `/`).
//!
//! - **Serving certificate**: signed by the CA the init data brought, for the names
//!   kubeadm puts on its API server's: the endpoint's host (the load balancer's address
//!   or the spec's endpoint), `kubernetes`, `kubernetes.default`,
//!   `kubernetes.default.svc` and `kubernetes.default.svc.cluster.local`. A client that
//!   connects to the loopback address verifies it under the endpoint's name (kube's
//!   `tls_server_name`, kubectl's `--tls-server-name`). It is valid as long as the CA
//!   is: the simulated API server and its clients live in different times (the
//!   simulator's, and the machine's clock a client checks with).
//! - **Clients**: authenticated by a certificate the same CA signed, checked at the
//!   simulator's time (the time the engine issued it in); its organizations are its
//!   groups. kubeadm's authorization: `system:masters` and `kubeadm:cluster-admins` may
//!   do anything; any other client is answered 403 on every request, and a client
//!   without a certificate the CA signed is refused at the handshake.
//!
//! A cluster initialized again with another CA gets a new listener.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use flightdeck_cloud::{Clock as _, SimClock};
use flightdeck_sim::{SimCloud, WorkloadCa};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

/// The groups kubeadm makes cluster administrators.
pub const ADMIN_GROUPS: [&str; 2] = ["system:masters", "kubeadm:cluster-admins"];

/// The names kubeadm puts on every API server's certificate, besides the endpoint.
const SERVICE_NAMES: [&str; 4] = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

struct Served {
    /// The CA (its discovery hash) the listener's certificates come from.
    ca_hash: String,
    addr: SocketAddr,
    task: JoinHandle<()>,
}

/// Each workload cluster's TLS listener, made when first asked for.
pub struct WorkloadListeners {
    cloud: Arc<SimCloud>,
    served: Mutex<BTreeMap<String, Served>>,
}

impl Drop for WorkloadListeners {
    fn drop(&mut self) {
        let served = self.served.get_mut().unwrap_or_else(|e| e.into_inner());
        for s in served.values() {
            s.task.abort();
        }
    }
}

/// The listener of one cluster: its loopback address, and the name its certificate
/// carries (the endpoint's host).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadServer {
    pub addr: SocketAddr,
    pub server_name: String,
}

impl WorkloadListeners {
    pub fn new(cloud: Arc<SimCloud>) -> Arc<Self> {
        Arc::new(WorkloadListeners {
            cloud,
            served: Mutex::new(BTreeMap::new()),
        })
    }

    /// The listener of the workload cluster whose API `kubeadm init` put at `endpoint`
    /// (`host:port`): `Ok(None)` when none is there.
    pub fn at(&self, endpoint: &str) -> Result<Option<WorkloadServer>, String> {
        match self.cloud.workload_at(endpoint) {
            Some(cluster) => self.server(&cluster),
            None => Ok(None),
        }
    }

    /// Where `cluster`'s API is served over TLS, serving it from now on if it was not:
    /// `Ok(None)` while no `kubeadm init` has made it. Must be called inside a Tokio
    /// runtime (the listener's task is spawned on it).
    pub fn server(&self, cluster: &str) -> Result<Option<WorkloadServer>, String> {
        let Some(ca) = self.cloud.workload_ca(cluster) else {
            return Ok(None);
        };
        let server_name = endpoint_host(&ca.endpoint).to_string();
        let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = served.get(cluster)
            && s.ca_hash == ca.hash
            && !s.task.is_finished()
        {
            return Ok(Some(WorkloadServer {
                addr: s.addr,
                server_name,
            }));
        }
        let config = server_config(self.cloud.clock().clone(), &ca)
            .map_err(|e| format!("cluster {cluster}: cannot serve its API over TLS: {e}"))?;
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| format!("cluster {cluster}: cannot listen on loopback: {e}"))?;
        let addr = std_listener
            .local_addr()
            .map_err(|e| format!("cluster {cluster}: {e}"))?;
        let listener = tokio::net::TcpListener::from_std(std_listener)
            .map_err(|e| format!("cluster {cluster}: {e}"))?;
        let task = tokio::spawn(serve(
            self.cloud.clone(),
            cluster.to_string(),
            listener,
            TlsAcceptor::from(config),
        ));
        if let Some(old) = served.insert(
            cluster.to_string(),
            Served {
                ca_hash: ca.hash.clone(),
                addr,
                task,
            },
        ) {
            old.task.abort();
        }
        tracing::info!(cluster, %addr, name = %server_name, "simulated workload API served over TLS");
        Ok(Some(WorkloadServer { addr, server_name }))
    }
}

/// The host of `host:port` (an IPv6 address without its brackets).
fn endpoint_host(endpoint: &str) -> &str {
    let host = endpoint
        .rsplit_once(':')
        .filter(|(h, p)| !h.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        .map_or(endpoint, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// The simulator's time, for judging client certificates.
#[derive(Debug)]
struct SimTime(SimClock);

impl rustls::time_provider::TimeProvider for SimTime {
    fn current_time(&self) -> Option<UnixTime> {
        Some(UnixTime::since_unix_epoch(
            std::time::Duration::from_millis(self.0.now().millis()),
        ))
    }
}

/// The API server's TLS: its certificate signed by the cluster CA, clients verified
/// against the same CA at the simulator's time.
fn server_config(clock: SimClock, ca: &WorkloadCa) -> Result<Arc<rustls::ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let ca_der = pem_der(&ca.cert_pem)?;
    let (_, ca_cert) = x509_parser::parse_x509_certificate(&ca_der)
        .map_err(|e| format!("the CA is no certificate: {e}"))?;
    let validity = ca_cert.validity();
    let from = time_of(validity.not_before.timestamp())?;
    let until = time_of(validity.not_after.timestamp())?;
    let ca_key = rcgen::KeyPair::from_pem(&ca.key_pem).map_err(|e| format!("the CA's key: {e}"))?;
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key)
        .map_err(|e| format!("the CA: {e}"))?;
    let mut names = vec![endpoint_host(&ca.endpoint).to_string()];
    names.extend(SERVICE_NAMES.iter().map(|n| n.to_string()));
    let mut params =
        rcgen::CertificateParams::new(names).map_err(|e| format!("the serving names: {e}"))?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kube-apiserver");
    params.not_before = from;
    params.not_after = until;
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let key = rcgen::KeyPair::generate().map_err(|e| format!("a serving key: {e}"))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|e| format!("the serving certificate: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca_der.clone()))
        .map_err(|e| format!("the CA as a root: {e}"))?;
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| format!("the client verifier: {e}"))?;
    let mut config = rustls::ServerConfig::builder_with_details(provider, Arc::new(SimTime(clock)))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![cert.der().clone(), CertificateDer::from(ca_der)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(|e| format!("the serving certificate: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn pem_der(pem: &str) -> Result<Vec<u8>, String> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| format!("the CA is not PEM: {e}"))?;
    Ok(p.contents)
}

fn time_of(unix_secs: i64) -> Result<time::OffsetDateTime, String> {
    time::OffsetDateTime::from_unix_timestamp(unix_secs)
        .map_err(|e| format!("the CA's validity: {e}"))
}

/// Accepts TLS connections for `cluster` until the listener fails (or the task is
/// aborted); each is served on a task of its own.
async fn serve(
    cloud: Arc<SimCloud>,
    cluster: String,
    listener: tokio::net::TcpListener,
    acceptor: TlsAcceptor,
) {
    let app = crate::kubernetes::kubernetes_router(cloud);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(%cluster, error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let app = app.clone();
        let cluster = cluster.clone();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%cluster, %peer, error = %e, "TLS handshake refused");
                    return;
                }
                Err(_) => return,
            };
            let client = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first())
                .map(|leaf| identity(leaf.as_ref()))
                .unwrap_or_default();
            let service = tower::service_fn(move |req: Request<hyper::body::Incoming>| {
                let app = app.clone();
                let cluster = cluster.clone();
                let client = client.clone();
                async move {
                    if !client.admin() {
                        return Ok::<_, std::convert::Infallible>(forbidden(&client, &req));
                    }
                    let req = req.map(Body::new);
                    let req = rooted(&cluster, req);
                    app.oneshot(req).await
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new());
            let conn =
                builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(service));
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "workload API connection ended");
            }
        });
    }
}

/// Who a client certificate names: its common name and its organizations (groups).
#[derive(Clone, Debug, Default)]
struct Client {
    user: String,
    groups: Vec<String>,
}

impl Client {
    fn admin(&self) -> bool {
        self.groups
            .iter()
            .any(|g| ADMIN_GROUPS.contains(&g.as_str()))
    }
}

fn identity(der: &[u8]) -> Client {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Client::default();
    };
    let subject = cert.subject();
    let user = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Client { user, groups }
}

/// The request as the cluster's path under the shared router: `/api/v1/nodes` becomes
/// `/clusters/<cluster>/api/v1/nodes`.
fn rooted(cluster: &str, mut req: Request) -> Request {
    let path_and_query = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    if let Ok(uri) = format!("/clusters/{cluster}{path_and_query}").parse::<Uri>() {
        *req.uri_mut() = uri;
    }
    req
}

/// The API server's 403 for a client it knows but does not let in.
fn forbidden<B>(client: &Client, req: &Request<B>) -> Response {
    let message = format!(
        "User \"{}\" (groups {:?}) cannot {} {}: only cluster administrators ({}) may use this simulated API server",
        client.user,
        client.groups,
        req.method(),
        req.uri().path(),
        ADMIN_GROUPS.join(", ")
    );
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "code": 403,
    });
    let mut out = (StatusCode::FORBIDDEN, body.to_string()).into_response();
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    out
}
