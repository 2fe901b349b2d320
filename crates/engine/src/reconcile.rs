//! One reconcile: observe → plan → write-ahead → act → record.

use flightdeck_cloud::{Clock, ErrorClass, Observed, Ownership, Provider, Timestamp};
use flightdeck_plan::condition::kind;
use flightdeck_plan::{
    Action, ClusterStatus, Condition, Event, Memory, OneHoldings, PlanEvent, PlanInput, Severity,
    Shared,
};
use flightdeck_spec::{Cluster, Duration};
use std::collections::BTreeMap;
use std::sync::Mutex;

use flightdeck_store::{Store, StoreError, Write};

use crate::act::{ActOutcome, act};
use crate::config::{EngineConfig, EngineError, T_MEMORY, T_STATUS};
use crate::events::{condition_events, progress_events};
use crate::faults::EngineFaults;
use crate::identity::{self, Gate};
use crate::observe::Look;
use crate::reuse::{Kinds, Seen, relist, reusable, stale_for_ready, touched_by};

/// The result of one reconcile, applied to the engine afterwards.
pub(crate) struct Outcome {
    pub name: String,
    pub memory: Memory,
    pub status: Option<ClusterStatus>,
    pub events: Vec<Event>,
    pub requeue_after: Option<Duration>,
    pub failure: Option<ErrorClass>,
    pub deleted: bool,
    pub actions: u64,
    pub action_failures: u64,
    pub observe_failed: bool,
    /// The observation planned from, kept by the engine: the next reconcile may take
    /// some of its lists again (`reuse.rs`), and faults replay it stale.
    pub observed: Option<Seen>,
}

/// Everything one reconcile starts from.
pub(crate) struct Job {
    pub name: String,
    pub spec: Cluster,
    pub memory: Memory,
    pub status: ClusterStatus,
    pub previous: Option<Seen>,
    /// The claim this reconcile runs under, when this process is one replica of
    /// several: the store refuses its actions and commits once that claim is gone.
    pub claim: Option<i64>,
    /// When this engine took the cluster up from the store (see `ClusterRecord`).
    pub taken_up: Option<Timestamp>,
}

/// What every cluster holds of the shared OpenNebula objects (F1), as last committed.
pub(crate) type Ledger = Mutex<BTreeMap<String, OneHoldings>>;

pub(crate) struct Ctx<'a, P> {
    pub provider: &'a P,
    pub ledger: &'a Ledger,
    pub store: &'a Store,
    pub clock: &'a dyn Clock,
    pub config: &'a EngineConfig,
    pub faults: Option<&'a Mutex<Box<dyn EngineFaults>>>,
    /// The claim the reconcile runs under (see [`Job::claim`]).
    pub claim: Option<i64>,
    /// How the clusters' secrets (their PKI) are kept at rest.
    pub secrets: &'a crate::secrets::SecretsAtRest,
    /// Where flightdeck's own access to its kubeadm clusters is kept, if anywhere.
    pub access: Option<&'a flightdeck_cloud::AccessBook>,
}

impl<P> Ctx<'_, P> {
    /// Commits a write of cluster `name`'s reconcile, if its claim still holds.
    fn commit(&self, name: &str, writes: Vec<Write>) -> Result<(), EngineError> {
        self.store.may_act(name, self.claim)?;
        self.store.commit(writes)?;
        Ok(())
    }
}

fn with_faults<T>(
    ctx: &Ctx<'_, impl Sized>,
    f: impl FnOnce(&mut dyn EngineFaults) -> T,
) -> Option<T> {
    ctx.faults
        .map(|m| f(&mut **m.lock().unwrap_or_else(|e| e.into_inner())))
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
pub(crate) async fn reconcile<P: Provider>(
    ctx: &Ctx<'_, P>,
    job: Job,
) -> Result<Outcome, EngineError> {
    let Job {
        name,
        spec,
        mut memory,
        status: prev,
        previous,
        claim,
        taken_up,
    } = job;
    let ctx = &Ctx { claim, ..*ctx };
    let now = ctx.clock.now();
    let mut events = Vec::new();
    // The memory the store holds: every path below that ends with other memory commits
    // it, and a reconcile that changes nothing commits nothing.
    let stored = memory.clone();
    // A new cluster creates nothing before the cloud shows no object of its name under
    // another UID (or it adopts them): see `identity.rs`.
    let owner = owner_of(&name, &memory);
    let mut from_nothing = false;
    match identity::gate(ctx.provider, &owner, &mut memory, &prev).await {
        Ok(Gate::Go(told)) => events.extend(told.into_iter().map(|e| stamp(now, &name, e))),
        Ok(Gate::GoFromNothing) => from_nothing = true,
        Ok(Gate::Hold(status)) => {
            return hold(ctx, name, (&stored, memory), prev, *status, now);
        }
        Err(e) => return observe_failed(ctx, name, (&stored, memory), events, e),
    }
    let job_memory = memory.clone();
    let owner = owner_of(&name, &memory);
    // flightdeck's own access to the workload API, before anything reads it. A failure
    // leaves what the book holds: the workload clients go on with it, or find none.
    let open_pki = || -> Result<_, EngineError> {
        let stored = ctx
            .store
            .get::<crate::secrets::StoredPki>(crate::secrets::T_PKI, &name)?;
        match stored {
            Some(stored) => Ok(Some(ctx.secrets.open_pki(&name, &memory.uid, &stored)?)),
            None => Ok(None),
        }
    };
    if let Some(book) = ctx.access
        && let Err(e) = crate::access::keep(book, &name, &spec, &prev, &memory, now, open_pki)
    {
        tracing::warn!(cluster = %name, error = %e, "cannot issue flightdeck's own client certificate");
    }
    // The injected fault is the Sieve class: a list older than this cluster's last write.
    let stale = previous
        .as_ref()
        .map(|seen| &seen.observed)
        .filter(|prev| prev.after_write < memory.write_seq)
        .filter(|_| with_faults(ctx, |f| f.stale_observation(&name)).unwrap_or(false));
    // Never plan from a list older than our own last write: it would show objects we
    // just created as missing and objects we just deleted as present. Such a list is
    // thrown away and a fresh one taken at once.
    if let Some(old) = &stale {
        let event = Event {
            at: now,
            cluster: name.clone(),
            severity: Severity::Warning,
            reason: "StaleObservationIgnored".into(),
            message: format!(
                "an observation predating write {} of this cluster was discarded (it was taken after write {}); looking again",
                memory.write_seq, old.after_write
            ),
        };
        events.push(event);
    }
    let recorded = memory.recorded_servers();
    let blank = from_nothing.then(|| Observed::blank(now));
    let reuse = reusable(
        previous.as_ref(),
        blank.as_ref(),
        now,
        &spec,
        &memory,
        &owner,
    );
    let look = Look {
        owner: &owner,
        now,
        spec: &spec,
        recorded: &recorded,
        memory: &memory,
    };
    let mut observed = match look
        .observe(ctx.provider, ctx.config.ownership(), reuse)
        .await
    {
        Ok(o) => o,
        Err(e) => return observe_failed(ctx, name, (&stored, memory), events, e),
    };
    // On a store shared with other replicas, the ledger is what the store says now.
    let snapshot = crate::shared_ledger::refresh(
        ctx.store,
        &mut lock(ctx.ledger),
        &name,
        &memory.one,
        spec.spec.provider.is_opennebula(),
    )?;
    let mut plan = plan_now(ctx, &name, taken_up, &spec, &observed, &memory, now);
    let mut reuse = reuse;
    let again = stale_for_ready(&plan, &prev, &reuse, previous.as_ref(), now);
    if again != Kinds::NONE {
        let first = std::mem::take(&mut observed);
        let second = relist(&first, again, reuse.building);
        observed = match look
            .observe(ctx.provider, ctx.config.ownership(), second)
            .await
        {
            Ok(o) => o,
            Err(e) => return observe_failed(ctx, name, (&stored, memory), events, e),
        };
        // What was listed again is of this pass now.
        reuse.kinds = reuse.kinds.without(again);
        plan = plan_now(ctx, &name, taken_up, &spec, &observed, &memory, now);
    }
    events.extend(plan.events.iter().cloned().map(|e| stamp(now, &name, e)));
    memory = plan.memory;
    let mut status = plan.status;
    if !plan.actions.is_empty() {
        memory.write_seq += 1;
    }

    // Write-ahead: the plan's memory (new machine records, deadlines, the write counter)
    // is durable before any of its actions reaches the cloud. What it holds of shared
    // objects is checked against the ledger in the same critical section, so two
    // clusters never both conclude they are the last holder, and no cluster takes up an
    // object another is deleting.
    {
        let mut ledger = lock(ctx.ledger);
        // The ledger check is part of the ownership check (turned off only to prove the
        // invariants catch its absence).
        let race = ctx
            .config
            .ownership_check
            .then(|| shared_race(&name, &ledger, &plan.actions, &memory))
            .flatten();
        // On a shared store the records this plan decided on are guarded in the same
        // commit: another replica that changed one since wins, and this plans again.
        let mut race = race;
        if race.is_none() {
            let mut writes = snapshot
                .as_ref()
                .map(|s| s.writes(&name, &memory.one))
                .unwrap_or_default();
            if memory != stored || !writes.is_empty() {
                writes.insert(0, Write::put(T_MEMORY, &name, &memory));
                match ctx.commit(&name, writes) {
                    Err(EngineError::Store(StoreError::Conflict { message, .. })) => {
                        race = Some(message);
                    }
                    other => other?,
                }
            }
        }
        if let Some(race) = race {
            drop(ledger);
            tracing::debug!(cluster = %name, race, "shared object changed hands; planning again");
            if job_memory != stored {
                ctx.commit(&name, vec![Write::put(T_MEMORY, &name, &job_memory)])?;
            }
            return Ok(Outcome {
                name,
                memory: job_memory,
                status: None,
                events,
                requeue_after: Some(Duration::from_secs(1)),
                // A race is a conflict: looked at again soon, and with growing backoff
                // if it does not clear (a plan that keeps reaching for an object
                // another cluster holds once looped every second for an hour).
                failure: Some(flightdeck_cloud::ErrorClass::Conflict),
                deleted: false,
                actions: 0,
                action_failures: 0,
                observe_failed: false,
                observed: Some(Seen::new(observed, reuse.kinds, previous.as_ref())),
            });
        }
        ledger.insert(name.clone(), memory.one.clone());
    }
    let ahead = memory.clone();

    let (failure, actions, action_failures, act_events, failure_conditions) =
        carry_out(ctx, &owner, &spec, &observed, &mut memory, &plan.actions).await?;
    let mut seen = Seen::new(observed, reuse.kinds, previous.as_ref());
    seen.touched = touched_by(&plan.actions);
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

    // Only what changed is written: a quiet reconcile commits nothing.
    let mut writes = Vec::new();
    if memory != ahead {
        writes.push(Write::put(T_MEMORY, &name, &memory));
    }
    if status != prev {
        writes.push(Write::put(T_STATUS, &name, &status));
    }
    writes.extend(events.iter().map(|e| Write::event(&name, e)));
    if snapshot.is_some() {
        ctx.store.may_act(&name, ctx.claim)?;
        crate::shared_ledger::commit_facts(ctx.store, &name, &memory.one, writes)?;
        lock(ctx.ledger).insert(name.clone(), memory.one.clone());
    } else if !writes.is_empty() {
        let mut ledger = lock(ctx.ledger);
        ctx.commit(&name, writes)?;
        ledger.insert(name.clone(), memory.one.clone());
    }
    tracing::debug!(
        cluster = %name,
        actions,
        action_failures,
        requeue_after = ?plan.requeue_after,
        phase = status.phase.as_str(),
        "reconciled"
    );

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
        observed: Some(seen),
    })
}

fn owner_of(name: &str, memory: &Memory) -> Ownership {
    Ownership {
        cluster: name.to_string(),
        uid: memory.uid.clone(),
    }
}

/// A reconcile that could not look at the cloud: its events are kept, and when the
/// blindness began.
fn observe_failed<P>(
    ctx: &Ctx<'_, P>,
    name: String,
    (stored, mut memory): (&Memory, Memory),
    mut events: Vec<Event>,
    e: flightdeck_cloud::CloudError,
) -> Result<Outcome, EngineError> {
    // The time until a list succeeds again is no machine's (see the planner's
    // `forgive_unobserved_time`); it is kept with the memory of the next write-ahead.
    memory.unobserved_since.get_or_insert(ctx.clock.now());
    events.push(Event {
        at: ctx.clock.now(),
        cluster: name.clone(),
        severity: Severity::Warning,
        reason: "ObserveFailed".into(),
        message: e.to_string(),
    });
    let mut writes: Vec<Write> = events.iter().map(|e| Write::event(&name, e)).collect();
    if memory != *stored {
        writes.push(Write::put(T_MEMORY, &name, &memory));
    }
    ctx.commit(&name, writes)?;
    Ok(Outcome {
        name,
        memory,
        status: None,
        events,
        requeue_after: None,
        failure: Some(e.class),
        deleted: false,
        actions: 0,
        action_failures: 0,
        observe_failed: true,
        observed: None,
    })
}

/// A new cluster held by the identity gate: its status says why; it looks again at the
/// next resync.
fn hold<P>(
    ctx: &Ctx<'_, P>,
    name: String,
    (stored, memory): (&Memory, Memory),
    prev: ClusterStatus,
    mut status: ClusterStatus,
    now: Timestamp,
) -> Result<Outcome, EngineError> {
    let mut conditions = std::mem::take(&mut status.conditions);
    conditions.sort_by(|a, b| a.kind.cmp(&b.kind));
    let events = condition_events(&prev.conditions, &mut conditions, now, &name);
    status.conditions = conditions;
    let mut writes = Vec::new();
    if status != prev {
        writes.push(Write::put(T_STATUS, &name, &status));
    }
    if memory != *stored {
        writes.push(Write::put(T_MEMORY, &name, &memory));
    }
    writes.extend(events.iter().map(|e| Write::event(&name, e)));
    if !writes.is_empty() {
        ctx.commit(&name, writes)?;
    }
    Ok(Outcome {
        name,
        memory,
        status: Some(status),
        events,
        requeue_after: Some(identity::HELD_RECHECK),
        failure: None,
        deleted: false,
        actions: 0,
        action_failures: 0,
        observe_failed: false,
        observed: None,
    })
}

/// Plans one cluster from an observation, with what every cluster holds of shared
/// objects as last committed (the ledger). `taken_up`: when this engine took the
/// cluster up from the store.
pub(crate) fn plan_now<P>(
    ctx: &Ctx<'_, P>,
    name: &str,
    taken_up: Option<Timestamp>,
    spec: &Cluster,
    observed: &Observed,
    memory: &Memory,
    now: Timestamp,
) -> flightdeck_plan::Plan {
    let shared = {
        let ledger = lock(ctx.ledger);
        Shared::from_holdings(name, ledger.iter().map(|(k, v)| (k.as_str(), v)))
    };
    flightdeck_plan::plan(PlanInput {
        spec,
        observed,
        memory,
        now,
        options: &ctx.config.plan,
        shared: &shared,
        taken_up,
    })
}

type ActResults = (Option<ErrorClass>, u64, u64, Vec<Event>, Vec<Condition>);

/// Carries out one planned action: a machine with a kubeadm bootstrap gets its data
/// (and, for a join, its token) first ([`crate::bootstrap::prepare`]).
async fn act_one<P: Provider>(
    ctx: &Ctx<'_, P>,
    owner: &Ownership,
    spec: &Cluster,
    observed: &Observed,
    memory: &mut Memory,
    action: &flightdeck_plan::Action,
) -> ActOutcome {
    let prepared;
    let action = if let Some(machine) = crate::bootstrap::machine_to_prepare(action) {
        let machine = machine.to_string();
        let answer = match ctx.secrets.open_for_machine(ctx.store, owner) {
            Ok(pki) => {
                crate::bootstrap::prepare(
                    ctx.provider,
                    owner,
                    spec,
                    &pki,
                    ctx.config.tokens,
                    memory,
                    action,
                    ctx.clock.now(),
                )
                .await
            }
            Err(e) => Err(e),
        };
        match answer {
            Ok(a) => {
                prepared = a;
                &prepared
            }
            Err(e) => {
                // No create was sent: it may go out again at once.
                if let Some(r) = memory.machines.get_mut(&machine) {
                    r.create_sent_at = None;
                }
                return ActOutcome::Failed(e);
            }
        }
    } else {
        action
    };
    act(
        ctx.provider,
        owner,
        observed,
        memory,
        action,
        ctx.config.ownership(),
        ctx.clock.now(),
    )
    .await
}

async fn carry_out<P: Provider>(
    ctx: &Ctx<'_, P>,
    owner: &Ownership,
    spec: &Cluster,
    observed: &Observed,
    memory: &mut Memory,
    actions: &[flightdeck_plan::PlannedAction],
) -> Result<ActResults, EngineError> {
    let name = owner.cluster.as_str();
    let mut failure: Option<ErrorClass> = None;
    let mut failures = 0;
    let mut events = Vec::new();
    let mut conditions = Vec::new();
    let mut lb_blocked = false;
    let mut count = 0;
    for (index, planned) in actions.iter().enumerate() {
        if with_faults(ctx, |f| f.crash_before_action(name, index, actions.len())).unwrap_or(false)
        {
            return Err(EngineError::Crashed(name.to_string()));
        }
        if lb_blocked && planned.action.mutates_load_balancer() {
            continue;
        }
        // The write-ahead commit passed the fence; the claim may have moved since (a
        // cloud call takes time, a process can be paused): checked again right before
        // each mutation, so a replica that lost the cluster stops acting on it.
        ctx.store.may_act(name, ctx.claim)?;
        count += 1;
        let outcome = act_one(ctx, owner, spec, observed, memory, &planned.action).await;
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
            ActOutcome::Blocked(message) => events.push(Event {
                at,
                cluster: name.to_string(),
                severity: Severity::Normal,
                reason: "EvictionBlocked".into(),
                message: format!("{}: {message}", planned.action.summary()),
            }),
            ActOutcome::Deferred(e) => {
                failures += 1;
                events.push(Event {
                    at,
                    cluster: name.to_string(),
                    severity: Severity::Warning,
                    reason: "ActionFailed".into(),
                    message: format!(
                        "{} failed: {e} (retried in {})",
                        planned.action.summary(),
                        flightdeck_plan::opennebula::BLOCKED_RETRY
                    ),
                });
                conditions.push(Condition::new(
                    kind::CLOUD_ERROR,
                    true,
                    "PermanentCloudError",
                    format!("{}: {e}", planned.action.summary()),
                ));
            }
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
                tracing::warn!(cluster = %name, action = planned.action.kind(), error = %e, "action failed");
                failures += 1;
                if planned.action.mutates_load_balancer() {
                    lb_blocked = true;
                }
                // The gravest class decides how to go on: a conflict ("look again soon")
                // must not hide a permanent error in the same pass.
                failure = Some(match failure {
                    Some(prev) if gravity(prev) >= gravity(e.class) => prev,
                    _ => e.class,
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
    Ok((failure, count, failures, events, conditions))
}

/// How grave an error class is for scheduling: the gravest of a pass sets the backoff.
fn gravity(class: ErrorClass) -> u8 {
    match class {
        ErrorClass::AlreadyExists | ErrorClass::NotFound => 0,
        ErrorClass::Conflict => 1,
        ErrorClass::Transient => 2,
        ErrorClass::RateLimited(_) => 3,
        ErrorClass::Permanent => 4,
    }
}

fn lock(ledger: &Ledger) -> std::sync::MutexGuard<'_, BTreeMap<String, OneHoldings>> {
    ledger.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why a plan's hold on shared objects no longer fits the ledger, if it does not: it
/// deletes an object another cluster has taken up since, or takes up one another
/// cluster is deleting.
fn shared_race(
    me: &str,
    ledger: &BTreeMap<String, OneHoldings>,
    actions: &[flightdeck_plan::PlannedAction],
    memory: &Memory,
) -> Option<String> {
    let others = || ledger.iter().filter(|(k, _)| k.as_str() != me);
    for a in actions {
        let key = match &a.action {
            Action::DeleteTemplate { template_id, .. } => format!("template/{template_id}"),
            Action::DeleteImage { image_id, .. } => format!("image/{image_id}"),
            _ => continue,
        };
        // An image another cluster gave up (it stayed in ERROR) is held for nothing.
        if let Some((holder, _)) =
            others().find(|(_, h)| h.keys().any(|(k, held)| k == key && held.holds()))
        {
            return Some(format!("{key} is now held by {holder}"));
        }
    }
    let mine = ledger.get(me);
    for (key, _) in memory.one.keys() {
        let newly = mine.is_none_or(|h| !h.keys().any(|(k, _)| k == key));
        if newly
            && let Some((holder, _)) =
                others().find(|(_, h)| h.keys().any(|(k, held)| k == key && held.deleting))
        {
            return Some(format!("{key} is being deleted by {holder}"));
        }
    }
    None
}
