//! F11: the churn breaker. An object that flightdeck re-creates over and over without
//! a spec change is a loop, whatever the cause: after `churnLimit` re-creations within
//! `churnWindow` its reconcile stops with `ReconcileLoopDetected`, until the spec changes
//! or an operator resumes the cluster.
//!
//! Objects are named for what they are to a person: `security group`, `load balancer`,
//! `pool workers` (a pool's machines replaced by remediation), `control plane`.

use crate::Planner;
use crate::condition::{Condition, PlanEvent, kind};

/// Whether the breaker for `object` is open (its reconcile stopped).
pub(crate) fn tripped(p: &Planner<'_>, object: &str) -> bool {
    p.memory.churn.tripped.contains_key(object)
}

/// Records that `object` is about to be re-created. Returns `false`, and trips the
/// breaker, when that would be one re-creation too many.
pub(crate) fn note_recreation(p: &mut Planner<'_>, object: &str) -> bool {
    if tripped(p, object) {
        return false;
    }
    let window = p.spec.spec.flight.churn_window;
    let limit = p.spec.spec.flight.churn_limit as usize;
    let now = p.now;
    let times = p
        .memory
        .churn
        .recreated
        .entry(object.to_string())
        .or_default();
    times.retain(|t| now.since(*t) < window);
    if times.len() >= limit {
        let why = format!(
            "{object} was re-created {} times within {window} without a spec change; its reconcile is stopped \
             until the spec changes or `flightdeck resume {}`",
            times.len(),
            p.spec.name()
        );
        p.memory
            .churn
            .tripped
            .insert(object.to_string(), why.clone());
        p.events
            .push(PlanEvent::warning("ReconcileLoopDetected", why));
        return false;
    }
    times.push(now);
    true
}

/// A spec change closes every breaker and forgets the history: the loop's cause may
/// be gone.
pub(crate) fn reset(p: &mut Planner<'_>) {
    if !p.memory.churn.tripped.is_empty() {
        p.events.push(PlanEvent::normal(
            "ReconcileLoopReset",
            "the spec changed; stopped objects are reconciled again",
        ));
    }
    p.memory.churn = Default::default();
}

/// The condition that names every stopped object.
pub(crate) fn report(p: &mut Planner<'_>) {
    if p.memory.churn.tripped.is_empty() {
        return;
    }
    let message = p
        .memory
        .churn
        .tripped
        .values()
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    p.condition(Condition::new(
        kind::RECONCILE_LOOP_DETECTED,
        true,
        "ChurnBreakerOpen",
        message,
    ));
}
