//! The fleet: every cluster in the store, each driven by the backend of its cloud.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use flightdeck_cloud::{Clock, DynProvider, Provider, SeededRng};
use flightdeck_engine::{Engine, EngineConfig};
use flightdeck_plan::{ClusterStatus, Event, Memory, Severity};
use flightdeck_spec::Cluster;
use flightdeck_store::{Store, Write};
use flightdeck_workload::KubeconfigFiles;
use tokio::sync::{Mutex, oneshot, watch};

use crate::backend::{self, BackendConfig, BackendHandle, Command};
use crate::claims::Claims;
use crate::connect;
use crate::error::Failure;
use crate::instrument::{CallHook, CallInfo, Instrumented};
use crate::published::Published;
use crate::route::{Route, route};
use crate::sim_host::SimHost;
use crate::types::Applied;
use crate::wallclock::wall;

pub struct FleetOptions {
    /// Reconciles in flight at most, per cloud.
    pub concurrency: usize,
    /// This replica's claims, when it is one of several sharing the store: it drives
    /// only the clusters it holds (see [`Fleet::sync_claims`]).
    pub claims: Option<Arc<dyn Claims>>,
    /// How every engine of the fleet keeps the clusters' secrets at rest (one key for
    /// all of them: they share the store).
    pub secrets: flightdeck_engine::secrets::SecretsAtRest,
    /// The HTTP proxy (`CONNECT`) the real clouds' kubeadm clusters' API servers are
    /// reached through, if any.
    pub workload_proxy: Option<String>,
}

pub struct Fleet {
    pub published: Arc<Published>,
    pub store: Arc<Store>,
    pub sim: Option<Arc<SimHost>>,
    options: FleetOptions,
    /// Each real cluster's workload kubeconfig, as its spec names it.
    kubeconfigs: Arc<KubeconfigFiles>,
    /// flightdeck's own access to the real clouds' kubeadm clusters, which their
    /// engines issue and their workload clients read.
    access: Arc<flightdeck_cloud::AccessBook>,
    backends: Mutex<BTreeMap<Route, BackendHandle>>,
    /// Which route each known cluster is on.
    owners: RwLock<BTreeMap<String, Route>>,
    shutdown: watch::Receiver<bool>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// With claims: the clusters the backends were last told to drive, with the claim
    /// revision they were held under and their stored spec's bytes then.
    driven: Mutex<BTreeMap<String, (i64, Vec<u8>)>>,
}

/// How long a turn waits for a backend to take one cluster up.
const TAKE_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Fleet {
    /// How the real clouds' kubeadm clusters are reached.
    fn reach(&self) -> connect::Reach<'_> {
        connect::Reach {
            access: &self.access,
            proxy: self.options.workload_proxy.as_deref(),
        }
    }

    /// Takes up every cluster in `store`, starting the backend of each one's cloud.
    pub async fn start(
        store: Arc<Store>,
        sim: Option<Arc<SimHost>>,
        published: Arc<Published>,
        options: FleetOptions,
        shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<Arc<Fleet>> {
        let fleet = Arc::new(Fleet {
            published,
            store,
            sim,
            options,
            kubeconfigs: Arc::new(KubeconfigFiles::new()),
            access: Arc::new(flightdeck_cloud::AccessBook::new()),
            backends: Mutex::new(BTreeMap::new()),
            owners: RwLock::new(BTreeMap::new()),
            shutdown,
            tasks: Mutex::new(Vec::new()),
            driven: Mutex::new(BTreeMap::new()),
        });
        let mut routes = BTreeMap::new();
        for name in fleet.store.keys("spec")? {
            let Some(spec) = flightdeck_engine::stored_spec(&fleet.store, &name)? else {
                continue;
            };
            let r = route(&spec, fleet.sim.is_some()).map_err(|f| anyhow::anyhow!(f.message))?;
            if r.is_sim() {
                fleet.forget_simulated(&spec)?;
            }
            if let (Route::SimOpenStack, Some(sim)) = (&r, &fleet.sim) {
                sim.provide_router(&spec);
            }
            fleet.note_kubeconfig(&spec);
            routes.insert(name, r);
        }
        for r in routes.values() {
            fleet
                .backend(r)
                .await
                .map_err(|f| anyhow::anyhow!(f.message))?;
        }
        *fleet.owners.write().unwrap_or_else(|e| e.into_inner()) = routes;
        Ok(fleet)
    }

    /// Where the cluster's workload API is reached, as its spec says now.
    fn note_kubeconfig(&self, spec: &Cluster) {
        self.kubeconfigs.set_from(spec);
    }

    /// The embedded simulator keeps nothing across restarts: a cluster built on it is
    /// built again, under a new UID, from its spec. A kubeadm cluster gets a new PKI with
    /// it, in the same commit: the old one is bound to the old UID (and its cluster is
    /// gone with the simulator), so it would not open.
    fn forget_simulated(&self, spec: &Cluster) -> anyhow::Result<()> {
        let name = spec.name().as_str();
        let uid = format!(
            "{:016x}",
            flightdeck_cloud::Rng::next_u64(&mut SeededRng::new(
                wall().millis() ^ flightdeck_spec::fnv1a(name.as_bytes())
            ))
        );
        let memory = Memory::new(uid.clone());
        let event = Event {
            at: self.sim.as_ref().map_or(wall(), |s| s.now()),
            cluster: name.to_string(),
            severity: Severity::Warning,
            reason: "SimulatorRestarted".into(),
            message: format!(
                "the embedded simulator keeps nothing across restarts: cluster {name} is built again with UID {uid}"
            ),
        };
        let mut writes = vec![
            Write::put("memory", name, &memory),
            Write::put("status", name, &ClusterStatus::default()),
            Write::event(name, &event),
        ];
        if spec.spec.bootstrap.kubeadm() {
            let now_secs = i64::try_from(wall().millis() / 1000).unwrap_or(i64::MAX);
            writes.push(self.options.secrets.make_pki(name, &uid, now_secs)?);
        }
        self.store.commit(writes)?;
        Ok(())
    }

    /// The backend of `r`, started on first use.
    async fn backend(&self, r: &Route) -> Result<BackendHandle, Failure> {
        let mut backends = self.backends.lock().await;
        if let Some(b) = backends.get(r) {
            return Ok(b.clone());
        }
        let label = r.label();
        let handle = match r {
            Route::SimOpenStack | Route::SimOpenNebula | Route::SimKubeVirt { .. } => {
                self.spawn_sim(r).await?
            }
            Route::OpenStack { cloud } => {
                let p = connect::openstack(cloud, &self.kubeconfigs, self.reach()).await?;
                self.spawn(p, Arc::new(connect::SystemClock), 1.0, r)
                    .await?
            }
            Route::OpenNebula { xmlrpc } => {
                let p =
                    connect::opennebula(xmlrpc.as_deref(), &self.kubeconfigs, self.reach()).await?;
                self.spawn(p, Arc::new(connect::SystemClock), 1.0, r)
                    .await?
            }
            Route::KubeVirt { infra, namespace } => {
                let p = connect::kubevirt(infra, namespace).await?;
                self.spawn(p, Arc::new(connect::SystemClock), 1.0, r)
                    .await?
            }
        };
        tracing::info!(backend = %label, "backend started");
        backends.insert(r.clone(), handle.clone());
        Ok(handle)
    }

    /// The backend of one of the embedded simulator's clouds.
    #[cfg(feature = "sim")]
    async fn spawn_sim(&self, r: &Route) -> Result<BackendHandle, Failure> {
        let Some(sim) = self.sim.clone() else {
            return Err(Failure::unprocessable(
                "the embedded simulator is off (--no-sim)",
            ));
        };
        let (clock, speed) = (sim.clock(), sim.speed());
        match r {
            Route::SimOpenNebula => {
                self.spawn(connect::sim_opennebula(&sim), clock, speed, r)
                    .await
            }
            Route::SimKubeVirt { namespace } => {
                self.spawn(connect::sim_kubevirt(&sim, namespace), clock, speed, r)
                    .await
            }
            _ => {
                self.spawn(connect::sim_openstack(&sim), clock, speed, r)
                    .await
            }
        }
    }

    #[cfg(not(feature = "sim"))]
    async fn spawn_sim(&self, _r: &Route) -> Result<BackendHandle, Failure> {
        Err(Failure::unprocessable(
            "this flightdeck was built without the embedded simulator (cargo feature `sim`)",
        ))
    }

    async fn spawn<P: Provider + 'static>(
        &self,
        provider: Arc<P>,
        clock: Arc<dyn Clock>,
        speed: f64,
        r: &Route,
    ) -> Result<BackendHandle, Failure> {
        self.spawn_any(DynProvider::new(provider), clock, speed, r)
            .await
    }

    /// [`Fleet::spawn`] on any cloud's provider. The provider is erased before it is
    /// instrumented, and again after: the instrumentation, the engine and the backend
    /// are compiled once, not once per cloud and hook.
    async fn spawn_any(
        &self,
        provider: DynProvider,
        clock: Arc<dyn Clock>,
        speed: f64,
        r: &Route,
    ) -> Result<BackendHandle, Failure> {
        // Every cloud call is counted and timed; on the embedded simulator a user may
        // slow one cluster's calls down (an `api.latency` fault aimed at it).
        let metrics = self.published.metrics.clone();
        let cloud = r.cloud_kind();
        let provider = Arc::new(provider);
        let provider = match &self.sim {
            Some(sim) if r.is_sim() => DynProvider::new(Arc::new(
                Instrumented::new(provider, cloud, metrics).with_hook(Hook::Latency(sim.latency())),
            )),
            _ => DynProvider::new(Arc::new(
                Instrumented::new(provider, cloud, metrics).with_hook(Hook::None),
            )),
        };
        let provider = Arc::new(provider);
        let sim = self.sim.is_some();
        let claims = self.options.claims.clone();
        let accept = |spec: &Cluster| {
            route(spec, sim).is_ok_and(|x| &x == r)
                && claims
                    .as_ref()
                    .is_none_or(|c| c.holds(spec.name().as_str()))
        };
        let seed = wall().millis() ^ u64::from(std::process::id());
        let engine = Engine::new_for(
            provider,
            self.store.clone(),
            clock,
            Box::new(SeededRng::new(seed)),
            EngineConfig {
                secrets: Some(self.options.secrets.clone()),
                ..EngineConfig::default()
            },
            &accept,
        )
        .map_err(|e| Failure::internal(e.to_string()))?;
        // On a real cloud, flightdeck reaches its kubeadm clusters with a certificate of
        // its own; the embedded simulator's are reached in process.
        let engine = if r.is_sim() {
            engine
        } else {
            engine.with_workload_access(self.access.clone())
        };
        let mut created = BTreeMap::new();
        for (name, _) in engine.clusters() {
            let first = self
                .store
                .events::<Event>(name)
                .ok()
                .and_then(|events| events.first().map(|e| e.at.millis()));
            if let Some(at) = first {
                created.insert(name.clone(), at);
            }
        }
        let (handle, task) = backend::spawn(
            engine,
            BackendConfig {
                label: r.label(),
                speed,
                concurrency: self.options.concurrency,
                claims: self.options.claims.clone(),
                simulated: r.is_sim(),
            },
            self.published.clone(),
            self.shutdown.clone(),
            created,
        );
        self.tasks.lock().await.push(task);
        Ok(handle)
    }

    /// The route a known cluster is on.
    pub fn route_of(&self, name: &str) -> Option<Route> {
        self.owners
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Applies cluster specs: each goes to its cloud's backend. Every route is decided
    /// before anything is applied, so a bad document applies nothing.
    pub async fn apply(&self, specs: Vec<Cluster>, adopt: bool) -> Result<Vec<Applied>, Failure> {
        let mut routed = Vec::new();
        for spec in specs {
            let r = route(&spec, self.sim.is_some())?;
            if let Some(old) = self.route_of(spec.name().as_str())
                && old != r
            {
                return Err(Failure::conflict(format!(
                    "cluster {}: lives on {}; spec.provider cannot move it to {}",
                    spec.name(),
                    old.label(),
                    r.label()
                )));
            }
            routed.push((spec, r));
        }
        let mut applied = Vec::new();
        for (spec, r) in routed {
            let name = spec.name().to_string();
            if let Some(claims) = &self.options.claims
                && !claims.holds(&name)
            {
                applied.push(self.store_for_holder(spec, &r)?);
                self.owners
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name, r);
                continue;
            }
            if let (Route::SimOpenStack, Some(sim)) = (&r, &self.sim) {
                sim.provide_router(&spec);
            }
            self.note_kubeconfig(&spec);
            let b = self.backend(&r).await?;
            let result = ask(&b, |reply| Command::Apply(Box::new(spec), adopt, reply)).await?;
            self.owners
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name, r);
            applied.push(result);
        }
        Ok(applied)
    }

    /// Sends a command to the backend of a known cluster.
    pub async fn command<T>(
        &self,
        name: &str,
        make: impl FnOnce(oneshot::Sender<Result<T, Failure>>) -> Command,
    ) -> Result<T, Failure> {
        let Some(r) = self.route_of(name) else {
            return Err(Failure::not_found(name));
        };
        if let Some(claims) = &self.options.claims
            && !claims.holds(name)
        {
            return Err(Failure::conflict(format!(
                "cluster {name} is driven by {}, not by this replica: send this request there",
                claims.holder(name)
            )));
        }
        let b = self.backend(&r).await?;
        ask(&b, make).await
    }

    /// A spec applied through this replica for a cluster another replica holds (or none
    /// yet): stored for its holder, which takes it up from the store. The immutable
    /// fields are checked here, against the stored spec, so a refused change is refused
    /// to the caller.
    fn store_for_holder(&self, spec: Cluster, r: &Route) -> Result<Applied, Failure> {
        let name = spec.name().to_string();
        let internal = Failure::store;
        let stored = self.store.get::<Cluster>("spec", &name).map_err(internal)?;
        if let Some(old) = &stored {
            flightdeck_engine::immutable_fields_unchanged(old, &spec)
                .map_err(|e| Failure::conflict(e.to_string()))?;
        }
        let memory = self
            .store
            .get::<Memory>("memory", &name)
            .map_err(internal)?;
        // As on the holder itself: a cluster being deleted takes no spec (409).
        if memory
            .as_ref()
            .is_some_and(|m| m.deletion_requested.is_some())
        {
            return Err(Failure::conflict(
                flightdeck_engine::EngineError::Deleting(name).to_string(),
            ));
        }
        let uid = memory.map(|m| m.uid).unwrap_or_default();
        let result = if stored.as_ref() == Some(&spec) {
            "unchanged"
        } else {
            self.store
                .commit(vec![Write::put("spec", &name, &spec)])
                .map_err(internal)?;
            "stored"
        };
        Ok(Applied {
            name,
            uid,
            result: result.into(),
            cloud: r.label(),
        })
    }

    /// Tells the backends which clusters this replica holds now, each with its claim
    /// revision: each held one is taken up (or its spec refreshed from the store); one
    /// no longer held, or held under a new claim since, is let go of (and the latter
    /// taken up afresh from the store: what this process remembers of it may be older
    /// than what the replica that held it meanwhile wrote).
    pub async fn sync_claims(&self, held: &BTreeMap<String, i64>) -> Result<(), Failure> {
        let mut driven = self.driven.lock().await;
        let gone: Vec<String> = driven
            .iter()
            .filter(|(name, (token, _))| held.get(*name) != Some(token))
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            if let Some(r) = self.route_of(&name) {
                let b = self.backend(&r).await?;
                if b.commands.try_send(Command::LetGo(name.clone())).is_err() {
                    continue;
                }
            }
            driven.remove(&name);
        }
        if held.is_empty() {
            return Ok(());
        }
        // Every stored spec in one read, off the async threads; a backend is told only
        // of a cluster newly held, held under a new claim, or whose spec changed (it
        // reads the store to take it up, and must not stall on an etcd in trouble
        // turn after turn).
        let store = self.store.clone();
        let specs: BTreeMap<String, Vec<u8>> =
            tokio::task::spawn_blocking(move || store.scan_raw("spec"))
                .await
                .map_err(|e| Failure::internal(e.to_string()))?
                .map_err(Failure::store)?
                .into_iter()
                .collect();
        for (name, token) in held {
            let Some(raw) = specs.get(name) else {
                continue;
            };
            if driven
                .get(name)
                .is_some_and(|(t, seen)| t == token && seen == raw)
            {
                continue;
            }
            let spec: Cluster = self
                .store
                .decode("spec", name, raw)
                .map_err(|e| Failure::internal(e.to_string()))?;
            let r = self.learn_route(name, &spec)?;
            let b = self.backend(&r).await?;
            // Driven once the backend has taken it up; until then, asked at every turn
            // (it cannot while the lease has run out, or while etcd does not answer).
            match tokio::time::timeout(
                TAKE_UP_WAIT,
                ask(&b, |tx| Command::TakeUp(name.clone(), tx)),
            )
            .await
            {
                Ok(Ok(())) => {
                    driven.insert(name.clone(), (*token, raw.clone()));
                }
                Ok(Err(f)) => {
                    tracing::debug!(cluster = %name, error = %f.message, "not taken up yet");
                }
                Err(_) => {
                    tracing::debug!(cluster = %name, "its backend did not answer in time; asked again at the next turn");
                }
            }
        }
        Ok(())
    }

    /// The route of a held cluster, from its stored spec (which may have come in
    /// through another replica), with where its workload cluster is reached as that spec
    /// says now.
    fn learn_route(&self, name: &str, spec: &Cluster) -> Result<Route, Failure> {
        self.note_kubeconfig(spec);
        if let Some(r) = self.route_of(name) {
            return Ok(r);
        }
        let r = route(spec, self.sim.is_some())?;
        self.owners
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), r.clone());
        Ok(r)
    }

    /// Waits for every backend to stop (after shutdown was signalled).
    pub async fn stopped(&self) {
        let tasks: Vec<_> = std::mem::take(&mut *self.tasks.lock().await);
        for t in tasks {
            let _ = t.await;
        }
    }
}

async fn ask<T>(
    b: &BackendHandle,
    make: impl FnOnce(oneshot::Sender<Result<T, Failure>>) -> Command,
) -> Result<T, Failure> {
    let (tx, rx) = oneshot::channel();
    b.commands
        .try_send(make(tx))
        .map_err(|_| Failure::unavailable(format!("backend {} is busy or stopping", b.label)))?;
    rx.await
        .map_err(|_| Failure::unavailable(format!("backend {} stopped", b.label)))?
}

/// The cluster whose reconcile (or dry run) makes the call being made, when the call
/// itself does not say (a call by ID): the backend labels each one.
#[cfg(feature = "sim")]
fn reconcile_cluster() -> Option<String> {
    flightdeck_sim::caller::cluster()
}

#[cfg(not(feature = "sim"))]
fn reconcile_cluster() -> Option<String> {
    None
}

/// What runs before each cloud call of a backend.
enum Hook {
    None,
    Latency(Arc<crate::wallclock::ClusterLatency>),
}

impl CallHook for Hook {
    fn before(&self, call: &CallInfo) -> impl std::future::Future<Output = ()> + Send {
        let wait = match self {
            Hook::None => None,
            Hook::Latency(l) => call
                .cluster
                .clone()
                .or_else(reconcile_cluster)
                .and_then(|c| l.wait_for(&c, call.service)),
        };
        async move {
            if let Some(w) = wait {
                tokio::time::sleep(w).await;
            }
        }
    }
}
