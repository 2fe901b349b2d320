//! The simulated clouds ([`flightdeck_sim::SimCloud`]) served over HTTP, so that real
//! clients (flightdeck's REST provider, OpenStack's own `openstacksdk`, OpenNebula's
//! `pyone`) can talk to them.
//!
//! All services share one listener, under path prefixes:
//!
//! | service  | catalog URL                   | API under                 |
//! |----------|-------------------------------|---------------------------|
//! | Keystone | `{base}/identity`             | `{base}/identity/v3`      |
//! | Nova     | `{base}/compute/v2.1`         | `{base}/compute/v2.1`     |
//! | Neutron  | `{base}/network`              | `{base}/network/v2.0`     |
//! | Octavia  | `{base}/load-balancer`        | `{base}/load-balancer/v2` |
//! | Glance   | `{base}/image`                | `{base}/image/v2`         |
//!
//! so a client's `auth_url` is `{base}/identity/v3`. Every service request needs an
//! `X-Auth-Token` that Keystone issued; version documents do not.
//!
//! The simulated OpenNebula is served on a listener of its own, as oned serves it:
//! XML-RPC at `POST /RPC2` ([`serve_opennebula`], [`opennebula_router`]), one
//! [`SimCloud::one_call`] per request.
//!
//! The simulated Kubernetes clusters (KubeVirt's infra cluster and each flightdeck
//! cluster's workload cluster) are served on a third listener, one path prefix per
//! cluster (`/clusters/{cluster}`, what a kubeconfig's `server:` names):
//! [`serve_kubernetes`], [`kubernetes_router`], one [`SimCloud::kube_request`] per
//! request (a watch repeats it every [`WATCH_POLL_INTERVAL`] while it streams). A
//! workload cluster that `kubeadm init` made is also served over TLS on a loopback
//! listener of its own, as a kubeadm cluster's API server is ([`WorkloadListeners`]):
//! its certificate signed by the cluster CA, its clients authenticated by certificates
//! the same CA signed. Clients outside the simulator reach those listeners by each
//! cluster's own endpoint through an HTTP proxy ([`serve_workload_proxy`], `CONNECT`
//! to the load balancer's `host:port`), so they verify the API server under its real
//! name, as through a bastion.
//!
//! Every Nova, Neutron and Octavia request goes through the simulator's provider
//! traits ([`flightdeck_cloud::Compute`], [`flightdeck_cloud::Network`],
//! [`flightdeck_cloud::LoadBalancing`]), so its call counts, mutation log, faults and
//! latencies apply exactly as in process: one HTTP request is one simulator call. Those
//! traits list by owner only, so a read is counted and fault-checked through the trait
//! (as the owner its `flightdeck-uid=` tag filter names, or as nobody) and its answer
//! rendered from [`flightdeck_sim::SimCloud::snapshot`] taken right after.
//!
//! The server never moves the simulator's clock: whoever owns the [`SimClock`]
//! decides between virtual and real time. Token lifetimes and timestamps are read from
//! that clock.
//!
//! [`SimClock`]: flightdeck_cloud::SimClock

// Handlers answer a refused request with its HTTP response as the `Err`: built once
// per failed request, so its size does not matter.
#![allow(
    clippy::result_large_err,
    reason = "the Err of request parsing is the HTTP response itself"
)]

mod errors;
mod glance;
mod keystone;
mod kubernetes;
mod neutron;
mod nova;
mod octavia;
mod opennebula;
mod wire;
mod workload_proxy;
mod workload_tls;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use flightdeck_cloud::{Clock, Timestamp};
use flightdeck_sim::{SimCloud, World};
use serde_json::{Map, Value};

pub use kubernetes::{
    KUBE_BODY_MAX_BYTES, WATCH_EVENTS_PER_POLL_MAX, WATCH_POLL_INTERVAL, WATCH_TIMEOUT_DEFAULT,
    WATCH_TIMEOUT_MAX, kubernetes_router, serve_kubernetes,
};
pub use opennebula::{BODY_MAX_BYTES, opennebula_router, serve_opennebula};
pub use workload_proxy::serve_workload_proxy;
pub use workload_tls::{ADMIN_GROUPS, WorkloadListeners, WorkloadServer};

/// The password [`ServeOptions::default`] accepts. A test fixture, not a secret: the
/// server listens on loopback for tests.
pub const DEFAULT_PASSWORD: &str = "flightdeck-sim-secret";

/// The name of the one network every server is attached to.
pub const NETWORK_NAME: &str = "private";
/// The name of that network's one subnet (load-balancer VIPs live on it too).
pub const SUBNET_NAME: &str = "private-subnet";

/// Who may log in, and how the cloud describes itself.
#[derive(Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// The one user Keystone knows (in domain `Default`).
    pub user: String,
    pub password: String,
    /// The one project the user may scope to (in domain `Default`).
    pub project: String,
    /// The region of every catalog endpoint.
    pub region: String,
    /// The CIDR Neutron shows for [`SUBNET_NAME`]. Keep it equal to the simulator's
    /// `SimConfig::subnet_cidr`, which the server cannot read.
    pub subnet_cidr: String,
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field("project", &self.project)
            .field("region", &self.region)
            .field("subnet_cidr", &self.subnet_cidr)
            .finish()
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            user: "admin".into(),
            password: DEFAULT_PASSWORD.into(),
            project: "demo".into(),
            region: "RegionOne".into(),
            subnet_cidr: flightdeck_sim::SimConfig::default().subnet_cidr,
        }
    }
}

impl ServeOptions {
    /// The `clouds.yaml` document with one entry, `name`, that reaches the server at
    /// `base_url`. It holds the password, as every `clouds.yaml` does.
    pub fn clouds_yaml(&self, name: &str, base_url: &str) -> String {
        format!(
            "clouds:\n  {name}:\n    auth:\n      auth_url: {base}/identity/v3\n      username: {user}\n      password: {password}\n      project_name: {project}\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: {region}\n    interface: public\n    identity_api_version: 3\n",
            base = base_url.trim_end_matches('/'),
            user = self.user,
            password = self.password,
            project = self.project,
            region = self.region,
        )
    }
}

/// Serves the cloud on `listener` until the listener fails. The base URL of every
/// catalog endpoint is `http://<listener's local address>`.
pub async fn serve(
    cloud: Arc<SimCloud>,
    listener: tokio::net::TcpListener,
    options: ServeOptions,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let base = format!("http://{addr}");
    tracing::info!(%base, "simulated OpenStack listening; auth_url {base}/identity/v3");
    axum::serve(listener, router(cloud, options, &base)).await
}

/// The whole cloud as one [`Router`], for callers that serve it themselves.
/// `base_url` (e.g. `http://127.0.0.1:8080`) is where clients reach it: the catalog
/// and every link point there.
pub fn router(cloud: Arc<SimCloud>, options: ServeOptions, base_url: &str) -> Router {
    cloud.serve_keystone_externally();
    let project_id = wire::stable_hex(&format!("project/{}", options.project));
    let app = Arc::new(Inner {
        cloud,
        project_id,
        options,
        base: base_url.trim_end_matches('/').to_string(),
        tokens: Mutex::new(keystone::Tokens::default()),
        images: Mutex::new(glance::Images::default()),
        extras: Mutex::new(Extras::default()),
        world: Mutex::new(None),
    });
    Router::new()
        .merge(keystone::routes(app.clone()))
        .merge(nova::routes(app.clone()))
        .merge(neutron::routes(app.clone()))
        .merge(octavia::routes(app.clone()))
        .merge(glance::routes(app.clone()))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(with_caller))
        .with_state(app)
}

/// The header a flightdeck replica names itself and its claim in (see
/// `flightdeck_http::CALLER_HEADER`); the mutation log records it.
pub const CALLER_HEADER: &str = "x-flightdeck-caller";
/// The longest caller the mutation log keeps; a longer header is cut there.
const CALLER_MAX: usize = 200;

/// Serves the request as sent by the caller its header names, if any.
pub(crate) async fn with_caller(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let caller = req.headers().get(CALLER_HEADER).map(|v| {
        String::from_utf8_lossy(v.as_bytes())
            .chars()
            .take(CALLER_MAX)
            .collect::<String>()
    });
    match caller {
        Some(c) => flightdeck_sim::caller::serve_as(c, next.run(req)).await,
        None => next.run(req).await,
    }
}

/// Any path no service serves.
async fn not_found() -> axum::response::Response {
    errors::keystone(
        axum::http::StatusCode::NOT_FOUND,
        "The resource could not be found.",
    )
}

pub(crate) type App = Arc<Inner>;

/// What every handler shares.
pub(crate) struct Inner {
    pub(crate) cloud: Arc<SimCloud>,
    pub(crate) options: ServeOptions,
    /// The id of the one project, as every service shows it.
    pub(crate) project_id: String,
    /// Without a trailing slash.
    pub(crate) base: String,
    pub(crate) tokens: Mutex<keystone::Tokens>,
    pub(crate) images: Mutex<glance::Images>,
    pub(crate) extras: Mutex<Extras>,
    /// The world as last taken, and the simulator's change count then.
    world: Mutex<Option<(u64, Arc<World>)>>,
}

impl Inner {
    pub(crate) fn now(&self) -> Timestamp {
        self.cloud.clock().now()
    }

    pub(crate) fn identity_url(&self) -> String {
        format!("{}/identity", self.base)
    }

    /// The simulator's world now, as an answer is rendered from it: taken again only
    /// when something changed since it last was (a list per kind and reconcile each
    /// copied the whole world). Its `now` and route limit are those of when it was
    /// taken; nothing here reads them.
    pub(crate) fn world(&self) -> Arc<World> {
        let mut cached = self.world.lock().unwrap_or_else(|e| e.into_inner());
        let changes = self.cloud.changes();
        if let Some((at, w)) = cached.as_ref()
            && *at == changes
        {
            return w.clone();
        }
        let (at, w) = self.cloud.refresh(None);
        let w = Arc::new(w);
        *cached = Some((at, w.clone()));
        w
    }

    pub(crate) fn extras(&self) -> MutexGuard<'_, Extras> {
        self.extras.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The most objects [`Extras`] keeps fields for before it forgets those of objects
/// the simulator no longer has.
const EXTRAS_MAX: usize = 50_000;

/// Fields of objects that the simulator does not model but the APIs show (a rule's
/// ports, a pool's algorithm, a health monitor's delay, descriptions, creation times),
/// as the create request gave them, by object id.
#[derive(Default)]
pub(crate) struct Extras {
    by_id: HashMap<String, Map<String, Value>>,
    /// When each object was first seen (created through the server, or first shown).
    seen: HashMap<String, Timestamp>,
}

impl Extras {
    /// Keeps `fields` for the object `id`, created at `at`.
    pub(crate) fn remember(
        &mut self,
        cloud: &SimCloud,
        id: &str,
        at: Timestamp,
        fields: Map<String, Value>,
    ) {
        if self.by_id.len() >= EXTRAS_MAX || self.seen.len() >= EXTRAS_MAX {
            self.forget_gone(cloud);
        }
        self.by_id.insert(id.to_string(), fields);
        self.seen.insert(id.to_string(), at);
    }

    /// The fields kept for `id` (empty if none).
    pub(crate) fn fields(&self, id: &str) -> Map<String, Value> {
        self.by_id.get(id).cloned().unwrap_or_default()
    }

    /// When `id` was created, or first shown if it was not created here.
    pub(crate) fn created(&mut self, id: &str, now: Timestamp) -> Timestamp {
        if self.seen.len() >= EXTRAS_MAX && !self.seen.contains_key(id) {
            // Objects shown but not created here: forgetting their first sighting
            // only moves their `created_at`, which nothing relies on.
            self.seen.retain(|k, _| self.by_id.contains_key(k));
        }
        *self.seen.entry(id.to_string()).or_insert(now)
    }

    fn forget_gone(&mut self, cloud: &SimCloud) {
        let w = cloud.snapshot();
        let mut live: BTreeSet<&str> = BTreeSet::new();
        live.extend(w.servers.iter().map(|s| s.id.as_str()));
        for g in &w.security_groups {
            live.insert(&g.id);
            live.extend(g.rules.iter().map(|r| r.id.as_str()));
        }
        live.extend(w.load_balancers.iter().map(|l| l.id.as_str()));
        live.extend(w.listeners.iter().map(|l| l.id.as_str()));
        live.extend(w.pools.iter().map(|p| p.id.as_str()));
        live.extend(w.health_monitors.iter().map(|h| h.id.as_str()));
        live.extend(w.members.iter().map(|m| m.id.as_str()));
        live.extend(w.routers.iter().map(|r| r.id.as_str()));
        self.by_id.retain(|k, _| live.contains(k.as_str()));
        self.seen.retain(|k, _| live.contains(k.as_str()));
    }
}
