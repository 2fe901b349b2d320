//! F11: the churn breaker. An object that flightdeck re-creates over and over without
//! a spec change is a loop, whatever the cause: after `churnLimit` re-creations within
//! `churnWindow` its reconcile stops with `ReconcileLoopDetected`, until the spec changes
//! or an operator resumes the cluster.
//!
//! Objects are named for what they are to a person: `security group`, `load balancer`,
//! and a machine *slot*: a machine and the replacements that took its place (a set
//! repaired machine by machine is no loop; one slot re-created again and again is).
//! Before a slot is re-created again, it waits a capped exponential backoff (F6): a
//! cloud that fails every boot for a while is not fed replacements at full speed.
//!
//! Every other object flightdeck makes is watched the same way ([`may_make`],
//! [`making`], [`seen`]): a pod-network rule, a listener, pool or health monitor, a
//! machine's member or security-group membership, a route, a template. Making one again
//! after it was in the cloud is a re-creation; making it again before it ever showed up
//! is a retry of the same creation, which backoff handles, not the breaker.

use crate::Planner;
use flightdeck_cloud::Timestamp;
use flightdeck_spec::Duration;

use crate::condition::{Condition, PlanEvent, kind};
use crate::memory::ObjectHistory;

/// Whether the breaker for `object` is open (its reconcile stopped).
pub(crate) fn tripped(p: &Planner<'_>, object: &str) -> bool {
    p.memory.churn.tripped.contains_key(object)
}

/// Whether the breaker may trip at all (always, in the product).
fn armed(p: &Planner<'_>) -> bool {
    p.options.on(crate::safety::Mechanism::ChurnBreaker)
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
    let armed = armed(p);
    let times = p
        .memory
        .churn
        .recreated
        .entry(object.to_string())
        .or_default();
    times.retain(|t| now.since(*t) < window);
    if times.len() >= limit && armed {
        let why = format!(
            "{object} was re-created {} times within {window} without a spec change; its reconcile is stopped \
             until the spec changes or `flightdeck resume {}`",
            times.len(),
            p.spec.name()
        );
        // The ReconcileLoopDetected condition says so (and its event, once).
        p.memory.churn.tripped.insert(object.to_string(), why);
        return false;
    }
    times.push(now);
    true
}

/// `object` is in the cloud now.
pub(crate) fn seen(p: &mut Planner<'_>, object: &str) {
    let now = p.now;
    p.seen_now.insert(object.to_string());
    if let Some(h) = p.memory.churn.objects.get_mut(object)
        && (!h.seen || h.missing)
    {
        h.seen = true;
        h.missing = false;
        h.last = now;
    }
}

/// Whether `object`, missing from the cloud, may be made now. When making it would be
/// its `churnLimit`+1-th re-creation within `churnWindow`, its breaker trips instead
/// and it is left alone until the spec changes or the cluster is resumed.
pub(crate) fn may_make(p: &mut Planner<'_>, object: &str) -> bool {
    if tripped(p, object) {
        return false;
    }
    let window = p.spec.spec.flight.churn_window;
    let limit = p.spec.spec.flight.churn_limit as usize;
    let now = p.now;
    let armed = armed(p);
    let Some(h) = p.memory.churn.objects.get_mut(object) else {
        return true;
    };
    h.recreated.retain(|t| now.since(*t) < window);
    if !h.seen || h.recreated.len() < limit || !armed {
        return true;
    }
    let why = format!(
        "{object} was re-created {} times within {window} without a spec change (something removes it each time); \
         it is not made again until the spec changes or `flightdeck resume {}`",
        h.recreated.len(),
        p.spec.name()
    );
    p.memory.churn.tripped.insert(object.to_string(), why);
    false
}

/// Records that `object` is being made now.
pub(crate) fn making(p: &mut Planner<'_>, object: &str) {
    let now = p.now;
    let h = p
        .memory
        .churn
        .objects
        .entry(object.to_string())
        .or_insert_with(|| ObjectHistory {
            last: now,
            ..ObjectHistory::default()
        });
    if h.seen {
        h.recreated.push(now);
        h.seen = false;
    }
    h.missing = false;
    h.last = now;
}

/// Forgets the histories of objects neither seen nor made for a whole churn window.
pub(crate) fn forget_idle(p: &mut Planner<'_>) {
    let window = p.spec.spec.flight.churn_window;
    let now = p.now;
    let seen_now = std::mem::take(&mut p.seen_now);
    p.memory.churn.objects.retain(|object, h| {
        if seen_now.contains(object) {
            return true;
        }
        if h.seen && !h.missing {
            // The first pass without it: its idle time counts from now.
            h.missing = true;
            h.last = now;
        }
        now.since(h.last) < window
    });
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
    for r in p.memory.machines.values_mut() {
        r.lineage.clear();
    }
}

/// The first wait before a slot is re-created again; it doubles with every re-creation
/// in the window, up to [`SLOT_BACKOFF_MAX`].
pub const SLOT_BACKOFF: Duration = Duration::from_secs(30);
pub const SLOT_BACKOFF_MAX: Duration = Duration::from_mins(10);

/// Whether the slot of condemned machine `name` may be re-created now.
pub(crate) enum Slot {
    Go,
    /// Not before this much time: the slot was re-created lately.
    Wait(Duration, usize),
    /// The breaker is open for this slot.
    Stopped,
}

/// The slot's re-creations within the churn window, oldest first.
fn recent(p: &Planner<'_>, name: &str) -> Vec<Timestamp> {
    let window = p.spec.spec.flight.churn_window;
    let now = p.now;
    p.memory
        .machines
        .get(name)
        .map(|r| {
            r.lineage
                .iter()
                .copied()
                .filter(|t| now.since(*t) < window)
                .collect()
        })
        .unwrap_or_default()
}

fn slot_object(label: &str, name: &str) -> String {
    format!("the slot of {name} in {label}")
}

/// Decides whether condemned machine `name` of set `label` may be replaced now: its
/// slot's breaker, then its backoff.
pub(crate) fn slot(p: &mut Planner<'_>, label: &str, name: &str) -> Slot {
    let object = slot_object(label, name);
    if tripped(p, &object) {
        return Slot::Stopped;
    }
    let times = recent(p, name);
    let limit = p.spec.spec.flight.churn_limit as usize;
    if times.len() >= limit && armed(p) {
        let why = format!(
            "{object} was re-created {} times within {} without a spec change (each replacement failed again); it is not replaced again \
             until the spec changes or `flightdeck resume {}`",
            times.len(),
            p.spec.spec.flight.churn_window,
            p.spec.name()
        );
        p.memory.churn.tripped.insert(object, why);
        return Slot::Stopped;
    }
    if let Some(last) = times.last() {
        let n = u32::try_from(times.len()).unwrap_or(u32::MAX);
        let wait_ms = SLOT_BACKOFF
            .as_millis()
            .saturating_mul(1u64 << (n - 1).min(20))
            .min(SLOT_BACKOFF_MAX.as_millis());
        let since = p.now.since(*last).as_millis();
        if since < wait_ms {
            return Slot::Wait(Duration::from_millis(wait_ms - since), times.len());
        }
    }
    Slot::Go
}

/// Records that condemned machine `name` of set `label` is being replaced: its slot's
/// lineage, with now, goes to the next machine the set creates.
pub(crate) fn hand_down(p: &mut Planner<'_>, label: &str, name: &str) {
    let mut times = recent(p, name);
    times.push(p.now);
    p.memory
        .churn
        .heirs
        .entry(label.to_string())
        .or_default()
        .push(times);
}

/// The lineage a new machine of set `label` takes over, if it replaces one: the one
/// re-created most often (the newest of those), so a slot that keeps failing meets its
/// breaker even when condemned machines that were never replaced (a scale-down took
/// them) left lineages waiting. Taking the oldest rotated replacements through every
/// waiting lineage: seed 187266974 made 11 control-plane machines in 5 minutes before
/// any one lineage reached `churnLimit`.
pub(crate) fn take_heir(p: &mut Planner<'_>, label: String) -> Vec<Timestamp> {
    let Some(queue) = p.memory.churn.heirs.get_mut(&label) else {
        return Vec::new();
    };
    let most = queue
        .iter()
        .enumerate()
        .max_by_key(|(i, l)| (l.len(), *i))
        .map(|(i, _)| i);
    let lineage = most.map(|i| queue.remove(i)).unwrap_or_default();
    if queue.is_empty() {
        p.memory.churn.heirs.remove(&label);
    }
    lineage
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
