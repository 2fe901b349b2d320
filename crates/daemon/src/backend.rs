//! One backend per cloud: a task that owns the engine of that cloud, starts each due
//! reconcile as a future of its own, applies outcomes as they arrive, and takes
//! commands from the API. A slow cloud call holds up only the cluster it is for.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flightdeck_cloud::Provider;
use flightdeck_engine::{Engine, EngineError, Finished, Reconcile};
use flightdeck_spec::Cluster;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot, watch};

use crate::claims::Claims;
use crate::error::Failure;
use crate::plan_view::plan_view;
use crate::published::Published;
use crate::types::{Applied, PlanView};
use crate::views;

/// How long a dry run may take before it is answered with an error.
const PLAN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long in-flight reconciles get to finish at shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(25);
/// Commands waiting for a backend at most; more get 503.
pub const COMMANDS_MAX: usize = 256;

type Reply<T> = oneshot::Sender<Result<T, Failure>>;

pub enum Command {
    /// A spec, and whether a new cluster adopts what an earlier one of its name left.
    Apply(Box<Cluster>, bool, Reply<Applied>),
    /// A cluster to delete, and whether its deletion may end without seeing its
    /// recorded objects (`--forget`).
    Delete(String, bool, Reply<()>),
    Resume(String, Reply<()>),
    /// A kubeconfig of the cluster, its client certificate valid this long, for this
    /// user (the requester, as the event names it).
    Kubeconfig(
        String,
        flightdeck_spec::Duration,
        String,
        Reply<flightdeck_guest::Secret>,
    ),
    Plan(String, Reply<PlanView>),
    /// This replica claimed the cluster (or holds it still): drive it from the store,
    /// picking up a spec applied through another replica. The answer says whether it
    /// was (it is not while the lease has run out: asked again at the next turn).
    TakeUp(String, Reply<()>),
    /// Another replica holds the cluster now: stop driving it, writing nothing.
    LetGo(String),
}

/// How the API reaches a backend.
#[derive(Clone)]
pub struct BackendHandle {
    pub label: String,
    pub commands: mpsc::Sender<Command>,
}

pub struct BackendConfig {
    /// `sim/openstack`, `openstack:prod`, ...
    pub label: String,
    /// Virtual seconds per wall-clock second of the engine's clock (1 for real clouds).
    pub speed: f64,
    /// Reconciles in flight at most.
    pub concurrency: usize,
    /// This replica's claims, when it is one of several: each reconcile's cloud calls
    /// name the replica and the claim they act under.
    pub claims: Option<Arc<dyn Claims>>,
    /// On the embedded simulator: each reconcile's and dry run's calls say which
    /// cluster they are for, so that a fault aimed at one cluster strikes only its calls.
    pub simulated: bool,
}

/// Spawns the backend task over `engine`.
pub fn spawn<P: Provider + 'static>(
    engine: Engine<P>,
    config: BackendConfig,
    published: Arc<Published>,
    shutdown: watch::Receiver<bool>,
    created: BTreeMap<String, u64>,
) -> (BackendHandle, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(COMMANDS_MAX);
    let handle = BackendHandle {
        label: config.label.clone(),
        commands: tx,
    };
    let mut backend = Backend {
        engine,
        config,
        published,
        created,
        last_error: BTreeMap::new(),
        generations: BTreeMap::new(),
    };
    let task = tokio::spawn(async move { backend.run(rx, shutdown).await });
    (handle, task)
}

struct Backend<P: Provider> {
    engine: Engine<P>,
    config: BackendConfig,
    published: Arc<Published>,
    /// When each cluster was first applied (its clock).
    created: BTreeMap<String, u64>,
    last_error: BTreeMap<String, String>,
    /// Per cluster: (spec generation, generation the running or latest reconcile
    /// started from, generation the latest finished reconcile started from).
    generations: BTreeMap<String, Generations>,
}

#[derive(Clone, Debug)]
struct Generations {
    spec: u64,
    started: u64,
    observed: u64,
    /// The cluster they count for: a new cluster under an old name (a new UID) starts
    /// at 1 again, the same cluster taken up again goes on counting.
    uid: String,
}

impl Default for Generations {
    fn default() -> Self {
        Generations {
            spec: 1,
            started: 0,
            observed: 0,
            uid: String::new(),
        }
    }
}

impl Generations {
    /// Those of the cluster with `uid`: kept if they count for it, else from 1.
    fn for_uid(&mut self, uid: &str) {
        if self.uid != uid {
            *self = Generations {
                uid: uid.to_string(),
                ..Generations::default()
            };
        }
    }
}

type Timed = std::pin::Pin<Box<dyn std::future::Future<Output = (Finished, Duration)> + Send>>;

/// `calls`, labelled for the embedded simulator as made for `cluster` (when given).
#[cfg(feature = "sim")]
fn for_cluster<F>(cluster: Option<String>, calls: F) -> BoxFuture<F::Output>
where
    F: std::future::Future + Send + 'static,
{
    match cluster {
        Some(c) => Box::pin(async move { flightdeck_sim::caller::for_cluster(&c, calls).await }),
        None => Box::pin(calls),
    }
}

#[cfg(not(feature = "sim"))]
fn for_cluster<F>(_cluster: Option<String>, calls: F) -> BoxFuture<F::Output>
where
    F: std::future::Future + Send + 'static,
{
    Box::pin(calls)
}

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

fn timed(
    r: Reconcile,
    caller: Option<String>,
    guard: Option<flightdeck_http::SendGuard>,
    cluster: Option<String>,
) -> Timed {
    Box::pin(async move {
        let started = Instant::now();
        let r = for_cluster(cluster, r);
        let f = match (caller, guard) {
            (Some(c), Some(g)) => {
                flightdeck_http::as_caller(c, flightdeck_http::with_send_guard(g, r)).await
            }
            (Some(c), None) => flightdeck_http::as_caller(c, r).await,
            (None, _) => r.await,
        };
        (f, started.elapsed())
    })
}

impl<P: Provider + 'static> Backend<P> {
    async fn run(&mut self, mut rx: mpsc::Receiver<Command>, mut shutdown: watch::Receiver<bool>) {
        let names: Vec<String> = self.engine.clusters().map(|(n, _)| n.clone()).collect();
        for n in &names {
            self.publish(n);
        }
        let mut in_flight: FuturesUnordered<Timed> = FuturesUnordered::new();
        let mut stopping: Option<Instant> = None;
        loop {
            if stopping.is_none() {
                for (name, r) in self.engine.start_due(self.config.concurrency) {
                    let claims = self.config.claims.as_ref();
                    let caller = claims.and_then(|c| c.caller(&name));
                    let guard = claims.and_then(|c| c.send_guard(&name));
                    let label = self.config.simulated.then(|| name.clone());
                    let g = self.generations.entry(name).or_default();
                    g.started = g.spec;
                    in_flight.push(timed(r, caller, guard, label));
                }
            }
            self.flush_events();
            self.published.set_queue(
                &self.config.label,
                self.engine.due_now(),
                self.engine.in_flight(),
            );
            if let Some(since) = stopping
                && (in_flight.is_empty() || since.elapsed() >= DRAIN_TIMEOUT)
            {
                if !in_flight.is_empty() {
                    tracing::warn!(backend = %self.config.label, left = in_flight.len(), "reconciles still in flight at shutdown");
                }
                return;
            }
            let wait = self.wall_wait();
            tokio::select! {
                cmd = rx.recv(), if stopping.is_none() => match cmd {
                    Some(cmd) => self.handle(cmd),
                    None => stopping = Some(Instant::now()),
                },
                Some((finished, took)) = in_flight.next(), if !in_flight.is_empty() => {
                    self.complete(finished, took);
                }
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed(), if stopping.is_none() => stopping = Some(Instant::now()),
            }
        }
    }

    /// Wall-clock time until the next reconcile could start.
    fn wall_wait(&self) -> Duration {
        let now = self.engine.clock().now();
        let virtual_ms = self
            .engine
            .next_startable()
            .map_or(1000, |t| t.millis().saturating_sub(now.millis()));
        let wall_ms = (virtual_ms as f64 / self.config.speed).ceil();
        Duration::from_millis(wall_ms.clamp(5.0, 1000.0) as u64)
    }

    fn complete(&mut self, finished: Finished, took: Duration) {
        let name = finished.cluster().to_string();
        let class = finished.result_class();
        if let Some(g) = self.generations.get_mut(&name) {
            g.observed = g.started;
        }
        self.published.metrics.reconciled(class, took.as_secs_f64());
        match self.engine.complete(finished) {
            Ok(()) => {
                self.last_error.remove(&name);
            }
            Err(e) => {
                tracing::warn!(cluster = %name, error = %e, "reconcile failed");
                self.last_error.insert(name.clone(), e.to_string());
            }
        }
        self.publish(&name);
    }

    fn flush_events(&mut self) {
        let events: Vec<_> = self
            .engine
            .drain_events()
            .iter()
            .map(views::event)
            .collect();
        self.published.publish_events(events);
    }

    fn publish(&self, name: &str) {
        let view = self.engine.cluster(name).map(|record| {
            let now = self.engine.clock().now().millis();
            let summary = views::summary(
                name,
                record,
                &self.config.label,
                self.created.get(name).copied(),
                self.last_error.get(name).cloned(),
                self.generations
                    .get(name)
                    .map_or((1, 0), |g| (g.spec, g.observed)),
                now,
            );
            views::detail(summary, record)
        });
        self.published.set_view(name, view);
    }

    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Apply(spec, adopt, reply) => {
                let name = spec.name().to_string();
                let result = self.apply(*spec, adopt);
                self.publish(&name);
                let _ = reply.send(result);
            }
            Command::Delete(name, forget, reply) => {
                let result = self
                    .engine
                    .delete(&name)
                    .and_then(|()| match forget {
                        true => self.engine.forget(&name),
                        false => Ok(()),
                    })
                    .map_err(engine_failure);
                self.publish(&name);
                let _ = reply.send(result);
            }
            Command::Kubeconfig(name, ttl, user, reply) => {
                let result = self
                    .engine
                    .issue_kubeconfig(&name, ttl, &user)
                    .map_err(engine_failure);
                self.publish(&name);
                let _ = reply.send(result);
            }
            Command::Resume(name, reply) => {
                let result = self.engine.resume(&name).map_err(engine_failure);
                self.publish(&name);
                let _ = reply.send(result);
            }
            Command::Plan(name, reply) => match self.engine.preview(&name) {
                None => {
                    let _ = reply.send(Err(Failure::not_found(&name)));
                }
                Some(preview) => {
                    let spec_name = name.clone();
                    let preview = for_cluster(self.config.simulated.then_some(name), preview);
                    tokio::spawn(async move {
                        let answer = match tokio::time::timeout(PLAN_TIMEOUT, preview).await {
                            Err(_) => Err(Failure::gateway(format!(
                                "cluster {spec_name}: the cloud did not answer within {}s",
                                PLAN_TIMEOUT.as_secs()
                            ))),
                            Ok(Err(e)) => Err(Failure::gateway(format!(
                                "cluster {spec_name}: cannot observe the cloud: {e}"
                            ))),
                            Ok(Ok(p)) => Ok(plan_view(&spec_name, &p)),
                        };
                        let _ = reply.send(answer);
                    });
                }
            },
            Command::TakeUp(name, reply) => {
                let _ = reply.send(self.take_up(&name));
            }
            Command::LetGo(name) => {
                if self.engine.let_go(&name) {
                    tracing::info!(cluster = %name, backend = %self.config.label, "cluster let go: another replica holds it now");
                }
                self.last_error.remove(&name);
                self.published.set_view(&name, None);
            }
        }
    }

    /// Drives `name` from the store: a newly claimed cluster, or a held one whose spec
    /// another replica's API changed.
    fn take_up(&mut self, name: &str) -> Result<(), Failure> {
        let before = self.engine.cluster(name).map(|c| c.spec.clone());
        let by = match self.config.claims.as_ref().and_then(|c| c.caller(name)) {
            Some(c) => c.replace('=', " "),
            None => "this process".into(),
        };
        match self.engine.take_up(name, &by) {
            Ok(false) => return Ok(()),
            Ok(true) => {}
            Err(e) => {
                tracing::warn!(cluster = %name, error = %e, "cannot take the cluster up; trying again at the next turn");
                self.last_error.insert(name.to_string(), e.to_string());
                return Err(engine_failure(e));
            }
        }
        let after = self.engine.cluster(name).map(|c| &c.spec);
        match before {
            None => {
                tracing::info!(cluster = %name, backend = %self.config.label, "cluster taken up");
                let now = self.engine.clock().now().millis();
                self.created.entry(name.to_string()).or_insert(now);
                let uid = self
                    .engine
                    .cluster(name)
                    .map(|c| c.memory.uid.clone())
                    .unwrap_or_default();
                self.generations
                    .entry(name.to_string())
                    .or_default()
                    .for_uid(&uid);
            }
            Some(old) if after.is_some_and(|s| *s != old) => {
                self.generations.entry(name.to_string()).or_default().spec += 1;
            }
            Some(_) => return Ok(()),
        }
        self.publish(name);
        Ok(())
    }

    fn apply(&mut self, spec: Cluster, adopt: bool) -> Result<Applied, Failure> {
        let name = spec.name().to_string();
        let held = |c: &flightdeck_engine::ClusterRecord| {
            c.memory.identity == flightdeck_plan::IdentityCheck::Pending
        };
        // A cluster being deleted takes no spec, not even the one it has: API.md's 409.
        // That includes a deletion asked for while a reconcile of it is in flight.
        if self.engine.deleting(&name) {
            return Err(engine_failure(EngineError::Deleting(name)));
        }
        let result = match self.engine.cluster(&name) {
            None => "created",
            Some(c) if c.spec == spec && adopt && held(c) => "adopting",
            Some(c) if c.spec == spec => "unchanged",
            Some(_) => "configured",
        };
        if result == "adopting" {
            self.engine.adopt(&name).map_err(engine_failure)?;
        }
        if result == "created" || result == "configured" {
            self.engine
                .apply_with(spec, adopt)
                .map_err(engine_failure)?;
            let uid = self
                .engine
                .cluster(&name)
                .map(|c| c.memory.uid.clone())
                .unwrap_or_default();
            let g = self.generations.entry(name.clone()).or_default();
            // A new cluster (a new UID) starts at generation 1, whatever an earlier
            // cluster of its name reached.
            g.for_uid(&uid);
            if result == "configured" {
                g.spec += 1;
            }
        }
        if result == "created" {
            self.created
                .insert(name.clone(), self.engine.clock().now().millis());
        }
        let uid = self
            .engine
            .cluster(&name)
            .map(|c| c.memory.uid.clone())
            .unwrap_or_default();
        Ok(Applied {
            name,
            uid,
            result: result.into(),
            cloud: self.config.label.clone(),
        })
    }
}

fn engine_failure(e: EngineError) -> Failure {
    match e {
        EngineError::UnknownCluster(name) => Failure::not_found(&name),
        EngineError::Deleting(_) | EngineError::Immutable { .. } => {
            Failure::conflict(e.to_string())
        }
        EngineError::TooManyClusters => Failure::unprocessable(e.to_string()),
        EngineError::NotDeleting(_) | EngineError::RoutesCollide(_) => {
            Failure::conflict(e.to_string())
        }
        EngineError::Store(e) => Failure::store(e),
        EngineError::Crashed(_) | EngineError::Secrets(_) | EngineError::Kubeconfig(_) => {
            Failure::internal(e.to_string())
        }
        EngineError::NoPki(_) | EngineError::EndpointUnknown(_) => Failure::conflict(e.to_string()),
        EngineError::Invalid(_) => Failure::unprocessable(e.to_string()),
        EngineError::HandingOver(_) => Failure::unavailable(e.to_string()),
    }
}
