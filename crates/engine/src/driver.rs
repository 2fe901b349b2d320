//! Reconciles that run on their own: the daemon's way of driving the engine.
//!
//! [`Engine::run_due`] runs a batch of reconciles together and applies their outcomes in
//! key order, which keeps simulated runs deterministic. A long-running controller cannot
//! wait for a batch: one cluster's hanging cloud call would hold every other cluster
//! back. [`Engine::start_due`] instead hands out each due reconcile as a future of its
//! own (owning everything it needs), and [`Engine::complete`] applies each outcome as it
//! arrives. A cluster has at most one reconcile in flight; what is asked of it meanwhile
//! (a new spec, a deletion, a resume) is applied when that reconcile is done.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use flightdeck_cloud::{Clock, Ownership, Provider, Timestamp};
use flightdeck_plan::{Memory, Plan};
use flightdeck_store::Store;

use crate::config::{EngineConfig, EngineError, InFlight};
use crate::engine::Engine;
use crate::faults::EngineFaults;
use crate::observe::{Reuse, observe_cluster};
use crate::reconcile::{Ctx, Job, Ledger, Outcome, plan_now, reconcile};

/// A reconcile that finished, to be handed back to [`Engine::complete`].
pub struct Finished {
    cluster: String,
    result: Result<Outcome, EngineError>,
}

impl Finished {
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// How the reconcile ended: `success`, `conflict` (the cloud was busy), `failure`
    /// (a cloud call failed) or `error` (the engine itself failed, e.g. its store).
    pub fn result_class(&self) -> &'static str {
        match &self.result {
            Err(_) => "error",
            Ok(o) => match o.failure {
                None => "success",
                Some(flightdeck_cloud::ErrorClass::Conflict) => "conflict",
                Some(_) => "failure",
            },
        }
    }
}

/// A reconcile as a future that owns what it needs: it may run on any task, for as long
/// as its cloud calls take, while the engine goes on with other clusters.
pub type Reconcile = Pin<Box<dyn Future<Output = Finished> + Send>>;

/// Everything a reconcile reads, owned.
pub(crate) struct OwnedCtx<P> {
    provider: Arc<P>,
    ledger: Arc<Ledger>,
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
    config: Arc<EngineConfig>,
    faults: Option<Arc<Mutex<Box<dyn EngineFaults>>>>,
    secrets: crate::secrets::SecretsAtRest,
    access: Option<Arc<flightdeck_cloud::AccessBook>>,
}

impl<P: Provider> OwnedCtx<P> {
    pub(crate) fn borrow(&self) -> Ctx<'_, P> {
        Ctx {
            provider: &*self.provider,
            ledger: &self.ledger,
            store: &self.store,
            clock: &*self.clock,
            config: &self.config,
            faults: self.faults.as_deref(),
            claim: None,
            secrets: &self.secrets,
            access: self.access.as_deref(),
        }
    }
}

/// A dry run: what a reconcile would do now, from what the cloud shows now and the
/// cluster's memory, without writing or acting.
pub struct Preview {
    pub plan: Plan,
    /// When the cloud was observed.
    pub observed_at: Timestamp,
}

impl<P: Provider + 'static> Engine<P> {
    /// Starts the reconciles due now, as many as keep at most `max_in_flight` running;
    /// a cluster whose reconcile is still in flight is never started twice.
    pub fn start_due(&mut self, max_in_flight: usize) -> Vec<(String, Reconcile)> {
        let room = max_in_flight.saturating_sub(self.in_flight.len());
        if room == 0 {
            return Vec::new();
        }
        let now = self.clock.now();
        let busy = &self.in_flight;
        let keys = self
            .queue
            .pop_due_except(now, room, |k| busy.contains_key(k));
        let mut started = Vec::with_capacity(keys.len());
        for key in keys {
            let previous = self.previous_observation(&key);
            let Some(c) = self.clusters.get(&key) else {
                continue;
            };
            let job = Job {
                name: key.clone(),
                spec: c.spec.clone(),
                memory: c.memory.clone(),
                status: c.status.clone(),
                previous,
                claim: self.store.act_token(&key),
                taken_up: c.taken_up,
            };
            let owned = self.owned_ctx();
            self.in_flight.insert(key.clone(), InFlight::default());
            let name = key.clone();
            let future = Box::pin(async move {
                let ctx = owned.borrow();
                let result = reconcile(&ctx, job).await;
                Finished {
                    cluster: key,
                    result,
                }
            }) as Reconcile;
            started.push((name, future));
        }
        assert!(self.in_flight.len() <= max_in_flight.max(1) + self.clusters.len());
        started
    }

    /// Applies a finished reconcile, then what was asked of the cluster while it ran.
    pub fn complete(&mut self, finished: Finished) -> Result<(), EngineError> {
        let Finished { cluster, result } = finished;
        let asked = self.in_flight.remove(&cluster).unwrap_or_default();
        if asked.let_go {
            // Decided under a claim this replica no longer has: nothing of it is kept.
            return result.map(|_| ());
        }
        if let Err(e) = result.and_then(|o| self.finish(o)) {
            self.failed(&cluster, &e);
            self.apply_asked(&cluster, asked)?;
            return Err(e);
        }
        self.apply_asked(&cluster, asked)
    }

    fn apply_asked(&mut self, cluster: &str, asked: InFlight) -> Result<(), EngineError> {
        if !self.clusters.contains_key(cluster) {
            return Ok(());
        }
        if asked.resume {
            self.resume(cluster)?;
        }
        if asked.adopt {
            self.adopt(cluster)?;
        }
        if asked.delete.is_some() {
            self.delete(cluster)?;
        }
        if asked.forget {
            self.forget(cluster)?;
        }
        if asked.again {
            self.schedule_now(cluster);
        }
        Ok(())
    }

    /// When the next reconcile that could start is due (clusters in flight are skipped).
    pub fn next_startable(&self) -> Option<Timestamp> {
        self.queue
            .next_due_except(|k| self.in_flight.contains_key(k))
    }

    /// Reconciles in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Clusters waiting in the queue (due now or later).
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Clusters whose reconcile is due now and not yet started.
    pub fn due_now(&self) -> usize {
        let now = self.clock.now();
        self.queue.due_count(now)
    }

    /// The dry run of one cluster (see [`Preview`]); `None` for an unknown cluster.
    pub fn preview(
        &self,
        name: &str,
    ) -> Option<impl Future<Output = Result<Preview, flightdeck_cloud::CloudError>> + Send + 'static>
    {
        let c = self.clusters.get(name)?;
        let spec = c.spec.clone();
        let memory: Memory = c.memory.clone();
        let taken_up = c.taken_up;
        let owned = self.owned_ctx();
        let name = name.to_string();
        Some(async move {
            let now = owned.clock.now();
            let owner = Ownership {
                cluster: name.clone(),
                uid: memory.uid.clone(),
            };
            let recorded = memory.recorded_servers();
            let observed = observe_cluster(
                &*owned.provider,
                &owner,
                now,
                &spec,
                crate::config::OwnershipScope::Cluster,
                &recorded,
                Reuse::NONE,
            )
            .await?;
            let plan = plan_now(
                &owned.borrow(),
                &name,
                taken_up,
                &spec,
                &observed,
                &memory,
                now,
            );
            Ok(Preview {
                plan,
                observed_at: now,
            })
        })
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
}

impl<P: Provider> Engine<P> {
    /// Everything a reconcile reads, as owned handles (cheap: each is an `Arc`).
    pub(crate) fn owned_ctx(&self) -> OwnedCtx<P> {
        OwnedCtx {
            provider: self.provider.clone(),
            ledger: self.ledger.clone(),
            store: self.store.clone(),
            clock: self.clock.clone(),
            config: self.config.clone(),
            faults: self.faults.clone(),
            secrets: self.secrets.clone(),
            access: self.access.clone(),
        }
    }

    /// Schedules a reconcile now; one in flight is followed by another at once.
    pub(crate) fn schedule_now(&mut self, name: &str) {
        let now = self.clock.now();
        self.queue.schedule(name, now);
        if let Some(f) = self.in_flight.get_mut(name) {
            f.again = true;
        }
    }
}
