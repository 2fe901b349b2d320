//! The test bed's own judge of a cluster's readiness, and `statusTruthful`: what
//! flightdeck says of a cluster against what the simulator shows.
//!
//! A cluster is ready when the world shows it so ([`Judge::Ready`]: every set at the
//! replicas the scenario wrote, each machine running with a Ready node, none failed; on
//! OpenStack each control-plane machine's member serving and the pod-network rules in
//! place). The checks that guard a built cluster (`apiEndpointServing`, the repair and
//! network checks) start from the first time the world shows it ready, not from when
//! flightdeck says so: a flightdeck that never says Ready, or says it too early, does
//! not switch them off.
//!
//! `statusTruthful` fails, both ways, when flightdeck's status disagrees with the world
//! for longer than a bound:
//! - Ready claimed too early: flightdeck says Ready while the world has never shown the
//!   cluster ready, for longer than [`EARLY_BOUND`] outside fault windows (its
//!   observation and the world agree within a reconcile);
//! - Ready withheld: the world matches the spec in full ([`Judge::Converged`]) for
//!   longer than [`late_bound`] while flightdeck says the cluster is not Ready and
//!   names no reason (no condition but Ready is True). Time in a fault window (the
//!   scenario's faults, the engine's injected faults) does not count: the cloud or the
//!   engine may keep flightdeck from seeing what the world shows.

use std::collections::BTreeMap;

use flightdeck_cloud::{Provider, Timestamp};
use flightdeck_engine::Engine;
use flightdeck_plan::ClusterStatus;
use flightdeck_sim::World;
use flightdeck_spec::{Cluster, Duration, Invariant};

use crate::converge_check::{Judge, judge};
use crate::invariants::Invariants;
use crate::repair_check::{Live, RepairCheck};
use crate::track::ClusterTrack;

/// How long flightdeck may say Ready before the world first shows the cluster ready.
/// The world is judged at every step, after the step's reconciles: a claim made from
/// an honest observation finds the world ready at that same step, unless a transition
/// struck within the reconcile itself; a bound of a few polls leaves room for that.
/// (Two minutes let a lie pass: the simulator builds a cluster in about that.)
pub const EARLY_BOUND: Duration = Duration::from_secs(30);
/// How often the world is judged in full for a cluster flightdeck says is not Ready.
const LATE_LOOK_EVERY: Duration = Duration::from_secs(30);

/// How long the world may match the spec in full while flightdeck says the cluster is
/// not Ready without a reason: a resync period with its jitter, and five minutes.
pub fn late_bound(resync_period: Duration) -> Duration {
    Duration::from_millis(resync_period.as_millis() * 11 / 10 + Duration::from_mins(5).as_millis())
}

#[derive(Default)]
struct Claim {
    /// Since when flightdeck has said Ready while the world never showed it ready.
    early_since: Option<Timestamp>,
    early_reported: bool,
    /// Since when the world has matched the spec while flightdeck withheld Ready.
    late_since: Option<Timestamp>,
    late_looked: Option<Timestamp>,
    late_reported: bool,
    /// A look was excused: a fault window, or a reason flightdeck named.
    excused: bool,
}

/// `statusTruthful`, and the readiness judge.
#[derive(Default)]
pub(crate) struct Truth {
    claims: BTreeMap<String, Claim>,
    /// When flightdeck may be kept from seeing the world: from, until (`None`: the end).
    faults: Vec<(Timestamp, Option<Timestamp>)>,
}

/// What one look at the world needs: the world, its live machines, the specs the
/// scenario wrote and what the repair check knows.
pub(crate) struct Look<'a, 'w> {
    pub world: &'w World,
    /// The live machines by cluster UID.
    pub live: &'a BTreeMap<&'w str, Vec<&'a Live<'w>>>,
    /// The world's objects by cluster UID.
    pub owned: &'a crate::owned::Owned<'w>,
    pub specs: &'a BTreeMap<String, Cluster>,
    pub repairs: &'a RepairCheck,
}

impl Look<'_, '_> {
    fn problem(&self, track: &ClusterTrack, how: Judge) -> Option<String> {
        match self.specs.get(&track.name) {
            Some(spec) => {
                let mine = self
                    .live
                    .get(track.uid.as_str())
                    .map_or(&[][..], Vec::as_slice);
                judge(
                    (self.world, self.owned),
                    mine,
                    track,
                    spec,
                    self.repairs,
                    how,
                )
            }
            None => Some(format!("{}: the scenario has no spec for it", track.name)),
        }
    }
}

impl Truth {
    pub(crate) fn new(faults: Vec<(Timestamp, Option<Timestamp>)>) -> Self {
        Truth {
            faults,
            ..Truth::default()
        }
    }

    pub(crate) fn fault_at(&self, t: Timestamp) -> bool {
        self.faults
            .iter()
            .any(|(from, to)| *from <= t && to.is_none_or(|to| t < to))
    }

    /// Why `statusTruthful` was never checked, when every look at a cluster was
    /// excused (a fault window, or a reason flightdeck named) or none was taken.
    pub(crate) fn not_checked(&self) -> String {
        if self.claims.values().any(|c| c.excused) {
            "every look was excused: a fault window, or a reason flightdeck gave for not being Ready".into()
        } else {
            "no cluster was looked at before its deletion".into()
        }
    }

    /// Sets `ready_since` of each cluster the world shows ready for the first time.
    pub(crate) fn judge_readiness(
        look: &Look<'_, '_>,
        tracks: &mut BTreeMap<String, ClusterTrack>,
        now: Timestamp,
    ) {
        for t in tracks.values_mut() {
            if t.ready_since.is_none()
                && !t.deletion_requested
                && look.problem(t, Judge::Ready).is_none()
            {
                t.ready_since = Some(now);
            }
        }
    }

    /// `statusTruthful` at `now`.
    pub(crate) fn check<P: Provider>(
        &mut self,
        inv: &mut Invariants,
        now: Timestamp,
        look: &Look<'_, '_>,
        engine: &Engine<P>,
        tracks: &BTreeMap<String, ClusterTrack>,
    ) {
        if !inv.enabled(Invariant::StatusTruthful) {
            return;
        }
        let fault = self.fault_at(now);
        for t in tracks.values() {
            let Some(c) = engine.cluster(&t.name) else {
                continue;
            };
            if t.deletion_requested {
                continue;
            }
            let claim = self.claims.entry(t.name.clone()).or_default();
            claim.excused |= fault;
            let v = early(claim, now, look, t, &c.status, fault);
            if c.status.ready {
                claim.late_since = None;
                inv.record(Invariant::StatusTruthful, now, v);
                continue;
            }
            let v = late(
                claim,
                now,
                look,
                t,
                &c.status,
                fault,
                c.spec.spec.flight.resync_period,
            );
            if let Some(v) = v {
                inv.record(Invariant::StatusTruthful, now, Some(v));
            } else if claim.late_looked == Some(now) {
                inv.record(Invariant::StatusTruthful, now, None);
            }
        }
    }
}

/// Ready claimed before the world ever showed the cluster ready, for too long.
fn early(
    claim: &mut Claim,
    now: Timestamp,
    look: &Look<'_, '_>,
    t: &ClusterTrack,
    status: &ClusterStatus,
    fault: bool,
) -> Option<String> {
    // A fault may hide from the cloud's answers what the world shows (a member that
    // stopped serving while Octavia, with no monitor, still says NO_MONITOR).
    if !status.ready || t.ready_since.is_some() || fault {
        claim.early_since = None;
        return None;
    }
    let since = *claim.early_since.get_or_insert(now);
    let claimed = now.since(since);
    if claimed <= EARLY_BOUND || claim.early_reported {
        return None;
    }
    claim.early_reported = true;
    let why = look
        .problem(t, Judge::Ready)
        .unwrap_or_else(|| "it is only now".into());
    Some(format!(
        "cluster {}: flightdeck has said Ready for {claimed}, but the world has never shown it ready: {why}",
        t.name
    ))
}

/// The world matched the spec in full while flightdeck withheld Ready without a
/// reason, for too long.
fn late(
    claim: &mut Claim,
    now: Timestamp,
    look: &Look<'_, '_>,
    t: &ClusterTrack,
    status: &ClusterStatus,
    fault: bool,
    resync_period: Duration,
) -> Option<String> {
    let reason = status
        .conditions
        .iter()
        .any(|c| c.status && c.kind != "Ready");
    if fault || reason {
        claim.late_since = None;
        claim.excused = true;
        return None;
    }
    if claim
        .late_looked
        .is_some_and(|at| now.since(at) < LATE_LOOK_EVERY)
    {
        return None;
    }
    claim.late_looked = Some(now);
    if look.problem(t, Judge::Converged).is_some() {
        claim.late_since = None;
        return None;
    }
    let since = *claim.late_since.get_or_insert(now);
    let withheld = now.since(since);
    let bound = late_bound(resync_period);
    if withheld <= bound || claim.late_reported {
        return None;
    }
    claim.late_reported = true;
    Some(format!(
        "cluster {}: the world has matched its spec for {withheld}, but flightdeck still says {} (not Ready) and names no reason",
        t.name,
        status.phase.as_str()
    ))
}
