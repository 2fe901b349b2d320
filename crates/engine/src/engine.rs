use std::collections::BTreeMap;
use std::sync::Arc;

use flightdeck_cloud::{Clock, ErrorClass, Observed, Ownership, Provider, Rng, Timestamp};
use flightdeck_plan::condition::kind;
use flightdeck_plan::{
    ClusterStatus, Condition, Event, Memory, PlanEvent, PlanInput, PlanOptions, Severity,
};
use flightdeck_spec::{Cluster, Duration};
use flightdeck_store::{Store, StoreError, Write};
use serde::{Deserialize, Serialize};

use crate::act::{ActOutcome, act};
use crate::backoff::{BackoffPolicy, jitter};
use crate::observe::observe;
use crate::queue::WorkQueue;

const T_SPEC: &str = "spec";
const T_MEMORY: &str = "memory";
const T_STATUS: &str = "status";

/// The most clusters one engine manages; a bound on every per-cluster structure.
pub const CLUSTERS_MAX: usize = 1000;

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Reconciles run together at most.
    pub concurrency_max: usize,
    pub backoff: BackoffPolicy,
    /// How soon to look again after Octavia answered 409 (busy).
    pub conflict_retry: Duration,
    /// Refuse deletions of objects without the cluster's UID tag. Always on in the
    /// product; a test switches it off to prove the `onlyOwned` invariant notices.
    pub ownership_check: bool,
    pub plan: PlanOptions,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            concurrency_max: 4,
            backoff: BackoffPolicy::default(),
            conflict_retry: Duration::from_secs(2),
            ownership_check: true,
            plan: PlanOptions::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cluster {0} is being deleted; wait until it is gone before applying it again")]
    Deleting(String),
    #[error("cluster {0} is not known to this flightdeck")]
    UnknownCluster(String),
    #[error("this flightdeck already manages {CLUSTERS_MAX} clusters")]
    TooManyClusters,
}

/// What the engine keeps per cluster; its persisted parts live in the store.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterRecord {
    pub spec: Cluster,
    pub memory: Memory,
    pub status: ClusterStatus,
    #[serde(skip)]
    failures: u32,
}

/// Counters over the engine's life, for reports and budgets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReconcileStats {
    pub reconciles: u64,
    pub actions: u64,
    pub action_failures: u64,
    pub observe_failures: u64,
}

pub struct Engine<P: Provider> {
    provider: Arc<P>,
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
    rng: Box<dyn Rng>,
    config: EngineConfig,
    clusters: BTreeMap<String, ClusterRecord>,
    queue: WorkQueue,
    events: Vec<Event>,
    stats: ReconcileStats,
}

/// The result of one reconcile, applied to the engine afterwards.
struct Outcome {
    name: String,
    memory: Memory,
    status: Option<ClusterStatus>,
    events: Vec<Event>,
    requeue_after: Option<Duration>,
    failure: Option<ErrorClass>,
    deleted: bool,
    actions: u64,
    action_failures: u64,
    observe_failed: bool,
}

impl<P: Provider> Engine<P> {
    /// Builds an engine over `store`, picking up every cluster it holds where it stopped.
    pub fn new(
        provider: Arc<P>,
        store: Arc<Store>,
        clock: Arc<dyn Clock>,
        rng: Box<dyn Rng>,
        config: EngineConfig,
    ) -> Result<Self, EngineError> {
        let mut engine = Engine {
            provider,
            store,
            clock,
            rng,
            config,
            clusters: BTreeMap::new(),
            queue: WorkQueue::default(),
            events: Vec::new(),
            stats: ReconcileStats::default(),
        };
        let now = engine.clock.now();
        for name in engine.store.keys(T_SPEC)? {
            let Some(spec) = engine.store.get::<Cluster>(T_SPEC, &name)? else {
                continue;
            };
            let Some(memory) = engine.store.get::<Memory>(T_MEMORY, &name)? else {
                continue;
            };
            let status = engine
                .store
                .get::<ClusterStatus>(T_STATUS, &name)?
                .unwrap_or_default();
            engine.clusters.insert(
                name.clone(),
                ClusterRecord {
                    spec,
                    memory,
                    status,
                    failures: 0,
                },
            );
            engine.queue.schedule(&name, now);
        }
        Ok(engine)
    }

    /// Applies a cluster spec: a new cluster gets a UID; a known one picks up the change
    /// at its next reconcile, which is scheduled now.
    pub fn apply(&mut self, spec: Cluster) -> Result<(), EngineError> {
        let name = spec.name().to_string();
        let now = self.clock.now();
        let memory = match self.clusters.get(&name) {
            Some(c) if c.memory.deletion_requested.is_some() => {
                return Err(EngineError::Deleting(name));
            }
            Some(c) => c.memory.clone(),
            None => {
                if self.clusters.len() >= CLUSTERS_MAX {
                    return Err(EngineError::TooManyClusters);
                }
                let uid = format!("{:016x}", self.rng.next_u64());
                Memory::new(uid)
            }
        };
        let is_new = !self.clusters.contains_key(&name);
        let event = Event {
            at: now,
            cluster: name.clone(),
            severity: Severity::Normal,
            reason: if is_new {
                "ClusterApplied"
            } else {
                "SpecApplied"
            }
            .into(),
            message: if is_new {
                format!("cluster {name} applied with UID {}", memory.uid)
            } else {
                format!("new spec for cluster {name} applied")
            },
        };
        self.store.commit(vec![
            Write::put(T_SPEC, &name, &spec),
            Write::put(T_MEMORY, &name, &memory),
            Write::event(&name, &event),
        ])?;
        self.events.push(event);
        let status = self
            .clusters
            .get(&name)
            .map(|c| c.status.clone())
            .unwrap_or_default();
        self.clusters.insert(
            name.clone(),
            ClusterRecord {
                spec,
                memory,
                status,
                failures: 0,
            },
        );
        self.queue.schedule(&name, now);
        Ok(())
    }

    /// Starts deleting a cluster. Deletion cannot be undone; it ends when the cloud no
    /// longer lists anything the cluster owned.
    pub fn delete(&mut self, name: &str) -> Result<(), EngineError> {
        let now = self.clock.now();
        let c = self
            .clusters
            .get_mut(name)
            .ok_or_else(|| EngineError::UnknownCluster(name.to_string()))?;
        if c.memory.deletion_requested.is_none() {
            c.memory.deletion_requested = Some(now);
            let event = Event {
                at: now,
                cluster: name.to_string(),
                severity: Severity::Normal,
                reason: "DeletionRequested".into(),
                message: format!("deleting cluster {name} and everything it owns"),
            };
            self.store.commit(vec![
                Write::put(T_MEMORY, name, &c.memory),
                Write::event(name, &event),
            ])?;
            self.events.push(event);
        }
        self.queue.schedule(name, now);
        Ok(())
    }

    pub fn cluster(&self, name: &str) -> Option<&ClusterRecord> {
        self.clusters.get(name)
    }

    pub fn clusters(&self) -> impl Iterator<Item = (&String, &ClusterRecord)> {
        self.clusters.iter()
    }

    pub fn stats(&self) -> &ReconcileStats {
        &self.stats
    }

    /// Events since the last call, oldest first.
    pub fn drain_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// When the next reconcile is due.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.queue.next_due()
    }

    /// Runs the reconciles due now, at most `concurrency_max` at once. Returns how many ran.
    pub async fn run_due(&mut self) -> Result<usize, EngineError> {
        let now = self.clock.now();
        let keys = self.queue.pop_due(now, self.config.concurrency_max);
        if keys.is_empty() {
            return Ok(0);
        }
        let jobs: Vec<_> = keys
            .iter()
            .filter_map(|k| {
                self.clusters.get(k).map(|c| {
                    (
                        k.clone(),
                        c.spec.clone(),
                        c.memory.clone(),
                        c.status.clone(),
                    )
                })
            })
            .collect();
        let ctx = Ctx {
            provider: &*self.provider,
            store: &self.store,
            clock: &*self.clock,
            config: &self.config,
        };
        let outcomes = futures_util::future::join_all(
            jobs.into_iter()
                .map(|(name, spec, memory, status)| reconcile(&ctx, name, spec, memory, status)),
        )
        .await;
        let n = outcomes.len();
        for outcome in outcomes {
            self.finish(outcome?)?;
        }
        Ok(n)
    }

    fn finish(&mut self, o: Outcome) -> Result<(), EngineError> {
        self.stats.reconciles += 1;
        self.stats.actions += o.actions;
        self.stats.action_failures += o.action_failures;
        self.stats.observe_failures += u64::from(o.observe_failed);
        self.events.extend(o.events);
        let now = self.clock.now();
        if o.deleted {
            self.store.commit(vec![
                Write::Remove {
                    table: T_SPEC,
                    key: o.name.clone(),
                },
                Write::Remove {
                    table: T_MEMORY,
                    key: o.name.clone(),
                },
                Write::Remove {
                    table: T_STATUS,
                    key: o.name.clone(),
                },
            ])?;
            self.clusters.remove(&o.name);
            self.queue.remove(&o.name);
            return Ok(());
        }
        let Some(c) = self.clusters.get_mut(&o.name) else {
            return Ok(());
        };
        c.memory = o.memory;
        if let Some(status) = o.status {
            c.status = status;
        }
        let delay = match o.failure {
            Some(ErrorClass::Conflict) => {
                // Busy, not broken: look again soon without growing the backoff.
                o.requeue_after
                    .unwrap_or(self.config.conflict_retry)
                    .min(self.config.conflict_retry)
            }
            Some(ErrorClass::RateLimited(Some(after))) => {
                c.failures += 1;
                after.max(self.config.backoff.delay(c.failures, &mut *self.rng))
            }
            Some(_) => {
                c.failures += 1;
                self.config.backoff.delay(c.failures, &mut *self.rng)
            }
            None => {
                c.failures = 0;
                match o.requeue_after {
                    Some(d) => d,
                    None => {
                        let period = c.spec.spec.flight.resync_period.as_millis();
                        Duration::from_millis(jitter(period, 0.1, &mut *self.rng))
                    }
                }
            }
        };
        self.queue.reschedule(&o.name, now.plus(delay));
        Ok(())
    }
}

struct Ctx<'a, P> {
    provider: &'a P,
    store: &'a Store,
    clock: &'a dyn Clock,
    config: &'a EngineConfig,
}

fn stamp(now: Timestamp, cluster: &str, e: PlanEvent) -> Event {
    Event {
        at: now,
        cluster: cluster.to_string(),
        severity: e.severity,
        reason: e.reason,
        message: e.message,
    }
}

/// One observe → plan → act pass over one cluster.
async fn reconcile<P: Provider>(
    ctx: &Ctx<'_, P>,
    name: String,
    spec: Cluster,
    memory: Memory,
    prev: ClusterStatus,
) -> Result<Outcome, EngineError> {
    let now = ctx.clock.now();
    let owner = Ownership {
        cluster: name.clone(),
        uid: memory.uid.clone(),
    };
    let observed = match observe(ctx.provider, &owner, now).await {
        Ok(o) => o,
        Err(e) => {
            let event = Event {
                at: ctx.clock.now(),
                cluster: name.clone(),
                severity: Severity::Warning,
                reason: "ObserveFailed".into(),
                message: e.to_string(),
            };
            ctx.store.commit(vec![Write::event(&name, &event)])?;
            return Ok(Outcome {
                name,
                memory,
                status: None,
                events: vec![event],
                requeue_after: None,
                failure: Some(e.class),
                deleted: false,
                actions: 0,
                action_failures: 0,
                observe_failed: true,
            });
        }
    };
    let plan = flightdeck_plan::plan(PlanInput {
        spec: &spec,
        observed: &observed,
        memory: &memory,
        now,
        options: &ctx.config.plan,
    });
    let mut events: Vec<Event> = plan
        .events
        .iter()
        .cloned()
        .map(|e| stamp(now, &name, e))
        .collect();
    let mut memory = plan.memory;
    let mut status = plan.status;

    // Write-ahead: the plan's memory (new machine records, deadlines) is durable before
    // any of its actions reaches the cloud.
    ctx.store
        .commit(vec![Write::put(T_MEMORY, &name, &memory)])?;

    let (failure, actions, action_failures, act_events, failure_conditions) =
        carry_out(ctx, &owner, &observed, &mut memory, &plan.actions, &name).await;
    events.extend(act_events);

    let mut conditions = plan.conditions;
    for c in failure_conditions {
        conditions.retain(|x| x.kind != c.kind);
        conditions.push(c);
    }
    conditions.sort_by(|a, b| a.kind.cmp(&b.kind));
    let now_after = ctx.clock.now();
    events.extend(progress_events(&prev, &status, now_after, &name));
    events.extend(condition_events(
        &prev.conditions,
        &mut conditions,
        now_after,
        &name,
    ));
    status.conditions = conditions;

    let mut writes = vec![
        Write::put(T_MEMORY, &name, &memory),
        Write::put(T_STATUS, &name, &status),
    ];
    writes.extend(events.iter().map(|e| Write::event(&name, e)));
    ctx.store.commit(writes)?;

    Ok(Outcome {
        name,
        memory,
        status: Some(status),
        events,
        requeue_after: plan.requeue_after,
        failure,
        deleted: plan.deleted && actions == 0,
        actions,
        action_failures,
        observe_failed: false,
    })
}

type ActResults = (Option<ErrorClass>, u64, u64, Vec<Event>, Vec<Condition>);

async fn carry_out<P: Provider>(
    ctx: &Ctx<'_, P>,
    owner: &Ownership,
    observed: &Observed,
    memory: &mut Memory,
    actions: &[flightdeck_plan::PlannedAction],
    name: &str,
) -> ActResults {
    let mut failure: Option<ErrorClass> = None;
    let mut failures = 0;
    let mut events = Vec::new();
    let mut conditions = Vec::new();
    let mut lb_blocked = false;
    let mut count = 0;
    for planned in actions {
        if lb_blocked && planned.action.mutates_load_balancer() {
            continue;
        }
        count += 1;
        let outcome = act(
            ctx.provider,
            owner,
            observed,
            memory,
            &planned.action,
            ctx.config.ownership_check,
        )
        .await;
        let at = ctx.clock.now();
        let verb = planned.action.kind().to_string();
        match outcome {
            ActOutcome::Done => events.push(Event {
                at,
                cluster: name.to_string(),
                severity: Severity::Normal,
                reason: verb,
                message: planned.to_string(),
            }),
            ActOutcome::AlreadyDone(msg) => events.push(Event {
                at,
                cluster: name.to_string(),
                severity: Severity::Normal,
                reason: verb,
                message: format!("{}: already so ({msg})", planned.action.summary()),
            }),
            ActOutcome::Refused(why) => {
                failures += 1;
                failure = Some(ErrorClass::Permanent);
                events.push(Event {
                    at,
                    cluster: name.to_string(),
                    severity: Severity::Warning,
                    reason: "OwnershipRefused".into(),
                    message: why,
                });
            }
            ActOutcome::Failed(e) => {
                failures += 1;
                if planned.action.mutates_load_balancer() {
                    lb_blocked = true;
                }
                // The gentlest class wins: a conflict only means "look again soon".
                failure = Some(match (failure, e.class) {
                    (None, c) => c,
                    (Some(ErrorClass::Conflict), _) | (_, ErrorClass::Conflict) => {
                        ErrorClass::Conflict
                    }
                    (Some(prev), _) => prev,
                });
                let severity = if e.class == ErrorClass::Conflict {
                    Severity::Normal
                } else {
                    Severity::Warning
                };
                events.push(Event {
                    at,
                    cluster: name.to_string(),
                    severity,
                    reason: if e.class == ErrorClass::Conflict {
                        "CloudBusy".into()
                    } else {
                        "ActionFailed".into()
                    },
                    message: format!("{} failed: {e}", planned.action.summary()),
                });
                if e.class == ErrorClass::Permanent {
                    conditions.push(Condition::new(
                        kind::CLOUD_ERROR,
                        true,
                        "PermanentCloudError",
                        format!("{}: {e}", planned.action.summary()),
                    ));
                }
            }
        }
    }
    (failure, count, failures, events, conditions)
}

/// Events for what changed in the cloud since the last reconcile: a server going
/// ACTIVE, a node becoming Ready, a member turning ONLINE. This is the progress a person
/// watches during a long operation.
fn progress_events(
    prev: &ClusterStatus,
    new: &ClusterStatus,
    at: Timestamp,
    cluster: &str,
) -> Vec<Event> {
    let mut out = Vec::new();
    let mut push = |reason: &str, message: String| {
        out.push(Event {
            at,
            cluster: cluster.to_string(),
            severity: Severity::Normal,
            reason: reason.to_string(),
            message,
        })
    };
    if let Some(lb) = &new.load_balancer {
        let before = prev.load_balancer.as_ref().filter(|p| p.id == lb.id);
        if before.map(|p| (&p.provisioning_status, &p.operating_status))
            != Some((&lb.provisioning_status, &lb.operating_status))
        {
            push(
                "LoadBalancerChanged",
                format!(
                    "load balancer {} is {}/{}",
                    lb.id, lb.provisioning_status, lb.operating_status
                ),
            );
        }
    }
    let machines = |s: &ClusterStatus| -> Vec<flightdeck_plan::status::MachineStatus> {
        std::iter::once(&s.control_plane)
            .chain(s.node_pools.iter())
            .flat_map(|set| set.machines.iter().cloned())
            .collect()
    };
    let before = machines(prev);
    for m in machines(new) {
        let old = before.iter().find(|b| b.name == m.name);
        if old.map(|o| &o.server_status) != Some(&m.server_status) && m.server_status != "REQUESTED"
        {
            let address = m.address.map(|a| format!(" at {a}")).unwrap_or_default();
            push(
                "ServerChanged",
                format!("{}: server {}{address}", m.name, m.server_status),
            );
        }
        if let Some(node) = &m.node
            && old.and_then(|o| o.node.as_ref()) != Some(node)
        {
            push("NodeChanged", format!("{}: node {node}", m.name));
        }
        if let Some(member) = &m.member
            && old.and_then(|o| o.member.as_ref()) != Some(member)
        {
            push(
                "MemberChanged",
                format!(
                    "{}: member {}/{}",
                    m.name, member.provisioning_status, member.operating_status
                ),
            );
        }
    }
    out
}

/// Events for conditions that appeared, changed status or went away; keeps `since`.
fn condition_events(
    prev: &[Condition],
    now_set: &mut [Condition],
    at: Timestamp,
    cluster: &str,
) -> Vec<Event> {
    let mut out = Vec::new();
    for c in now_set.iter_mut() {
        match prev.iter().find(|p| p.kind == c.kind) {
            Some(p) if p.status == c.status => c.since = p.since,
            _ => {
                c.since = at;
                let interesting = c.kind != kind::READY || c.status;
                if interesting {
                    out.push(Event {
                        at,
                        cluster: cluster.to_string(),
                        severity: if c.kind == kind::READY {
                            Severity::Normal
                        } else {
                            Severity::Warning
                        },
                        reason: if c.kind == kind::READY {
                            "Ready".into()
                        } else {
                            c.kind.clone()
                        },
                        message: c.message.clone(),
                    });
                }
            }
        }
    }
    for p in prev {
        if p.status && p.kind != kind::READY && !now_set.iter().any(|c| c.kind == p.kind) {
            out.push(Event {
                at,
                cluster: cluster.to_string(),
                severity: Severity::Normal,
                reason: format!("{}Resolved", p.kind),
                message: format!("{} no longer holds", p.kind),
            });
        }
    }
    out
}
