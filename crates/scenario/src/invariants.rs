//! Invariants, checked against the simulator's ground truth after every step.

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::ownership::{TAG_MACHINE, TAG_ROLE, uid_of};
use flightdeck_cloud::{OperatingStatus, ProvisioningStatus, ServerStatus, Timestamp};
use flightdeck_sim::{CallTally, Mutation, MutationKind, ServingSpell, World};
use flightdeck_spec::Invariant;
use serde::Serialize;

use crate::budget::BudgetCheck;
pub use crate::budget::CallBudget;
pub use crate::track::ClusterTrack;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Violation {
    pub at_seconds: f64,
    /// The runner's step at which it was seen; a replay sees it at the same step.
    pub step: u64,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub name: &'static str,
    pub held: bool,
    pub checks: u64,
    pub violations: u64,
    pub first_violation: Option<Violation>,
    /// Why it was never checked in this run, when it does not apply to it (no cluster
    /// deleted, no repair begun, a fault that never ends, ...). An invariant that
    /// applies and was never checked does not hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
}

/// How long past its drain deadline and one resync period (a lost requeue) an evacuated
/// VMI may still run. flightdeck counts the deadline from when it first sees the
/// evacuation (KubeVirt stamps no time on `evacuationNodeName`), which an outage of the
/// infra cluster's API delays, and a failed delete is retried with backoff.
pub const EVACUATION_SLACK: flightdeck_spec::Duration = flightdeck_spec::Duration::from_mins(8);
/// How much earlier than the simulator's stamp flightdeck may start a drain's clock.
/// It counts from the start of the pass that first lists the evacuation; with slow
/// calls (`api.latency` up to 5 s a call) the list comes back seconds later, after the
/// simulator stamped it (swarm seed 20261: 7 s).
pub const DEADLINE_TOLERANCE: flightdeck_spec::Duration = flightdeck_spec::Duration::from_secs(30);
/// How much longer a control-plane VMI may wait for another control-plane machine to
/// come back before it leaves (a new VM boots and joins in about five minutes).
pub const EVACUATION_QUORUM_WAIT: flightdeck_spec::Duration =
    flightdeck_spec::Duration::from_mins(15);

/// The cause the simulator gives a VMI deletion a client asked for.
pub(crate) const VMI_DELETE: &str = "DELETE virtualmachineinstances";

/// The logical identity of an owned object: cluster UID, role and machine key.
type Identity = (String, String, String);

pub struct Invariants {
    enabled: BTreeSet<Invariant>,
    verdicts: BTreeMap<Invariant, Verdict>,
    mutations_seen: u64,
    deleted: BTreeMap<Identity, (u64, u64)>,
    start: Timestamp,
    step: u64,
    budget: CallBudget,
    budget_check: BudgetCheck,
    /// OpenNebula templates and images (`template/<id>`) flightdeck registered.
    one_registered: BTreeSet<String>,
    /// Templates and images seen locked (flightdeck never locks: an operator did) once
    /// some cluster's deletion was under way: flightdeck leaves such an object to the
    /// operator when it lets it go, and it stays theirs after they unlock it.
    one_left_to_operator: BTreeSet<String>,
    /// OpenNebula template and image names deleted, with the fleet's generation then.
    one_deleted: BTreeMap<String, u64>,
    /// Images seen in ERROR (`image/<id>`): their copy failed, so deleting one and
    /// registering it again is a repair, not churn.
    one_failed: BTreeSet<String>,
    /// How many of the simulator's VMI deletions were already judged.
    vmi_deletions_seen: usize,
    /// VMIs (by uid) whose overdue evacuation was reported.
    evacuations_overdue: BTreeSet<String>,
    /// When the Kubernetes APIs (the infra cluster's and the workload clusters') refused
    /// calls (`api.rateLimit`, `api.errorRate`): from, and until (`None`: the end).
    kube_outages: Vec<(Timestamp, Option<Timestamp>)>,
    /// Every fault of the scenario: from, and until (none: open-ended).
    fault_windows: Vec<(Timestamp, Option<Timestamp>)>,
    /// The kind of each of [`Invariants::fault_windows`], in the same order.
    fault_kinds: Vec<flightdeck_spec::FaultKind>,
    /// When the store came back behind the cloud (restored from a backup), and how far
    /// behind: what it forgot, flightdeck no longer knows.
    lagging_restores: Vec<(Timestamp, flightdeck_spec::Duration)>,
    /// When the engine crashed between two writes of a plan (an engine fault).
    crashes: Vec<Timestamp>,
    set_churn: crate::churn_check::SetChurn,
    serving: crate::serving::ServingCheck,
    /// Which cluster made each object, by the simulator's record of the calls.
    made_by: MadeBy,
    /// Deletions the scenario asked for, by cluster: the last look and how much
    /// fault-free time they have had.
    deletions: BTreeMap<String, Deletion>,
}

/// How much time outside fault windows a deletion the scenario asked for may take
/// before nothing the cluster owned may remain (`noLeaks`), whether or not flightdeck
/// still keeps a record of the cluster.
pub const DELETION_DEADLINE: flightdeck_spec::Duration = flightdeck_spec::Duration::from_mins(20);

struct Deletion {
    last: Timestamp,
    fault_free_ms: u64,
    reported: bool,
}

impl Invariants {
    pub fn new(enabled: &[Invariant], start: Timestamp, budget: CallBudget) -> Self {
        let enabled: BTreeSet<Invariant> = enabled.iter().copied().collect();
        let verdicts = enabled
            .iter()
            .map(|i| {
                (
                    *i,
                    Verdict {
                        name: i.as_str(),
                        held: true,
                        checks: 0,
                        violations: 0,
                        first_violation: None,
                        not_applicable: None,
                    },
                )
            })
            .collect();
        Invariants {
            enabled,
            verdicts,
            mutations_seen: 0,
            deleted: BTreeMap::new(),
            start,
            step: 0,
            budget,
            budget_check: BudgetCheck::default(),
            one_registered: BTreeSet::new(),
            one_left_to_operator: BTreeSet::new(),
            one_deleted: BTreeMap::new(),
            one_failed: BTreeSet::new(),
            vmi_deletions_seen: 0,
            evacuations_overdue: BTreeSet::new(),
            kube_outages: Vec::new(),
            fault_windows: Vec::new(),
            fault_kinds: Vec::new(),
            lagging_restores: Vec::new(),
            crashes: Vec::new(),
            set_churn: Default::default(),
            serving: Default::default(),
            deletions: BTreeMap::new(),
            made_by: MadeBy::default(),
        }
    }

    /// The scenario's faults that make the Kubernetes APIs refuse calls, for the checks
    /// whose bound flightdeck can only meet by observing (an evacuation's deadline).
    pub fn note_faults(&mut self, start: Timestamp, faults: &[flightdeck_spec::fault::Fault]) {
        use flightdeck_spec::{FaultKind, Service};
        self.fault_windows = faults
            .iter()
            .map(|f| {
                let from = start.plus(f.at);
                (from, f.duration.map(|d| from.plus(d)))
            })
            .collect();
        self.fault_kinds = faults.iter().map(|f| f.kind).collect();
        self.kube_outages = faults
            .iter()
            .filter(|f| matches!(f.kind, FaultKind::ApiRateLimit | FaultKind::ApiErrorRate))
            .filter(|f| f.service.is_none_or(|s| s == Service::Kubernetes))
            .map(|f| {
                let from = start.plus(f.at);
                (from, f.duration.map(|d| from.plus(d)))
            })
            .collect();
    }

    /// Whether some fault of the scenario was active at some time within `from..=to`.
    pub(crate) fn fault_within(&self, from: Timestamp, to: Timestamp) -> bool {
        self.fault_windows
            .iter()
            .any(|(a, b)| *a <= to && b.is_none_or(|b| b >= from))
    }

    /// Notes when the store comes back behind the cloud in this run, and how far behind.
    pub fn note_lagging_restores(&mut self, restores: Vec<(Timestamp, flightdeck_spec::Duration)>) {
        self.lagging_restores = restores;
    }

    /// Notes that the engine crashed between two writes of a plan at `at`.
    pub fn note_crash(&mut self, at: Timestamp) {
        if self.crashes.len() < 10_000 {
            self.crashes.push(at);
        }
    }

    /// Whether flightdeck may have lost, by `to`, what it wrote down when something was
    /// made at `made`: a store that came back behind the cloud from a backup older than
    /// `made`, or an engine that crashed between two writes of the plan that made it
    /// (within a minute after: the plan's calls move the clock).
    pub(crate) fn may_have_forgotten(&self, made: Timestamp, to: Timestamp) -> bool {
        let restored = self.lagging_restores.iter().any(|(at, lag)| {
            *at <= to && made <= *at && made.millis() + lag.as_millis() >= at.millis()
        });
        let crashed = self
            .crashes
            .iter()
            .any(|c| made <= *c && c.millis() <= made.millis() + 60_000);
        restored || crashed
    }

    /// Whether some fault of the scenario of one of the kinds in `kinds` was active at
    /// some time within `from..=to`.
    pub(crate) fn fault_of_within(
        &self,
        from: Timestamp,
        to: Timestamp,
        kinds: &[flightdeck_spec::FaultKind],
    ) -> bool {
        self.fault_windows
            .iter()
            .zip(&self.fault_kinds)
            .filter(|(_, k)| kinds.contains(k))
            .any(|((a, b), _)| *a <= to && b.is_none_or(|b| b >= from))
    }

    /// How much of `from..to` the Kubernetes APIs spent refusing calls (overlapping
    /// outages counted once).
    pub(crate) fn kube_outage_within(&self, from: Timestamp, to: Timestamp) -> u64 {
        let mut spans: Vec<(u64, u64)> = self
            .kube_outages
            .iter()
            .map(|(a, b)| {
                let a = a.millis().max(from.millis());
                let b = b.map_or(to.millis(), |b| b.millis()).min(to.millis());
                (a, b)
            })
            .filter(|(a, b)| a < b)
            .collect();
        spans.sort_unstable();
        let (mut total, mut reached) = (0, from.millis());
        for (a, b) in spans {
            let a = a.max(reached);
            if b > a {
                total += b - a;
                reached = b;
            }
        }
        total
    }

    /// The step the following checks belong to.
    pub fn at_step(&mut self, step: u64) {
        self.step = step;
    }

    /// `callBudget`: the calls the cloud answered for each cluster (by name) at one
    /// instant.
    pub fn check_call_tallies(&mut self, now: Timestamp, tallies: &BTreeMap<String, CallTally>) {
        if !self.enabled.contains(&Invariant::CallBudget) || tallies.is_empty() {
            return;
        }
        for v in self.budget_check.instant(&self.budget, now, tallies) {
            self.record(Invariant::CallBudget, now, v);
        }
    }

    /// `callBudget` over the whole run: calls per cluster-hour.
    pub fn check_calls_per_cluster_hour(&mut self, now: Timestamp, per_cluster_hour: f64) {
        if !self.enabled.contains(&Invariant::CallBudget) {
            return;
        }
        let max = self.budget.per_cluster_hour_max;
        let v = (per_cluster_hour > max).then(|| {
            format!("{per_cluster_hour:.0} cloud calls per cluster-hour, more than {max:.0}")
        });
        self.record(Invariant::CallBudget, now, v);
        for v in self.budget_check.lives(&self.budget, now) {
            self.record(Invariant::CallBudget, now, v);
        }
    }

    /// `convergence`: `problem` is why the fleet has not converged in time, if it has not.
    pub fn check_convergence(&mut self, now: Timestamp, problem: Option<String>) {
        if self.enabled.contains(&Invariant::Convergence) {
            self.record(Invariant::Convergence, now, problem);
        }
    }

    /// Whether `inv` is checked in this run.
    pub fn enabled(&self, inv: Invariant) -> bool {
        self.enabled.contains(&inv)
    }

    pub fn verdicts(&self) -> Vec<Verdict> {
        self.verdicts.values().cloned().collect()
    }

    /// Ends the run's verdicts: an invariant never checked is not applicable when
    /// `why_not` says why; otherwise it applied and was never checked, and does not hold.
    pub fn conclude(&mut self, now: Timestamp, why_not: impl Fn(Invariant) -> Option<String>) {
        let start = self.start;
        let step = self.step;
        for (inv, v) in self.verdicts.iter_mut().filter(|(_, v)| v.checks == 0) {
            match why_not(*inv) {
                Some(why) => v.not_applicable = Some(why),
                None => {
                    v.held = false;
                    v.first_violation = Some(Violation {
                        at_seconds: now.since(start).as_secs_f64(),
                        step,
                        message: "never checked in this run, although it applies to it".into(),
                    });
                }
            }
        }
    }

    pub fn all_held(&self) -> bool {
        self.verdicts.values().all(|v| v.held)
    }

    pub(crate) fn record(&mut self, inv: Invariant, now: Timestamp, violation: Option<String>) {
        let start = self.start;
        let step = self.step;
        let Some(v) = self.verdicts.get_mut(&inv) else {
            return;
        };
        v.checks += 1;
        if let Some(message) = violation {
            v.violations += 1;
            if v.held {
                v.held = false;
                v.first_violation = Some(Violation {
                    at_seconds: now.since(start).as_secs_f64(),
                    step,
                    message,
                });
            }
        }
    }

    /// Where the next [`Invariants::check`] wants the mutation log to start.
    pub fn mutations_seen(&self) -> u64 {
        self.mutations_seen
    }

    /// The cursor for [`flightdeck_sim::SimCloud::serving_spells_since`].
    pub fn spells_seen(&self) -> u64 {
        self.serving.spells_seen()
    }

    /// Checks every enabled invariant. `fresh` are the mutations since
    /// [`Invariants::mutations_seen`], and `next` the number of the next one; `spells`
    /// the serving spells ended since [`Invariants::spells_seen`], with the next number.
    pub fn check(
        &mut self,
        world: &World,
        (fresh, next): (Vec<Mutation>, u64),
        spells: (Vec<ServingSpell>, u64),
        clusters: &BTreeMap<String, ClusterTrack>,
    ) {
        let now = world.now;
        if self.enabled.contains(&Invariant::ApiEndpointServing) {
            for c in clusters.values() {
                if c.ready_since.is_none() || c.deletion_requested || c.deleted_at.is_some() {
                    continue;
                }
                let v = api_endpoint_serving(world, c);
                self.record(Invariant::ApiEndpointServing, now, v);
            }
        }
        self.check_drains(world, clusters);
        let removed_serving = self
            .serving
            .check(world, &fresh, (&spells.0, spells.1), clusters);
        if self.enabled.contains(&Invariant::ApiEndpointServing) {
            for (at, v) in removed_serving {
                self.record(Invariant::ApiEndpointServing, at, Some(v));
            }
        }
        let known: BTreeSet<&str> = clusters.values().map(|c| c.uid.as_str()).collect();
        self.mutations_seen = next;
        // Any spec change, new cluster or deletion anywhere in the fleet.
        let fleet_generation: u64 = clusters
            .values()
            .map(|c| 1 + c.generation + u64::from(c.deletion_requested))
            .sum();
        self.one_failed.extend(
            world
                .one_images
                .iter()
                .filter(|i| i.state == ONE_IMAGE_ERROR)
                .map(|i| format!("image/{}", i.id)),
        );
        for m in fresh.iter().filter(|m| m.ok) {
            if let Some(kind) = shared_kind(m) {
                self.check_shared(m, kind, fleet_generation);
                continue;
            }
            let owner = uid_of(&m.target_tags);
            let foreign = self.made_by.note(m, owner);
            if self.enabled.contains(&Invariant::OnlyOwned) {
                let v = match owner {
                    _ if foreign.is_some() => foreign,
                    Some(uid) if known.contains(uid) => None,
                    _ => Some(format!(
                        "{} {} touched {} ({}), which carries no managed cluster's ownership tag",
                        m.service,
                        m.operation,
                        m.target_id,
                        if m.target_tags.is_empty() {
                            "no tags".to_string()
                        } else {
                            m.target_tags.join(",")
                        }
                    )),
                };
                self.record(Invariant::OnlyOwned, m.at, v);
            }
            if self.enabled.contains(&Invariant::NoChurn)
                && let Some(v) = self.set_churn.note(m, clusters)
            {
                self.record(Invariant::NoChurn, m.at, Some(v));
            }
            if self.enabled.contains(&Invariant::NoChurn)
                && !crate::churn_check::guest_object(m)
                && let Some(identity) = identity(&m.target_tags)
                && let Some(cluster) = clusters.values().find(|c| c.uid == identity.0)
            {
                match m.kind {
                    MutationKind::Delete => {
                        self.deleted.insert(identity, cluster.churn_epoch());
                    }
                    MutationKind::Create => {
                        let v = match self.deleted.get(&identity) {
                            Some(epoch) if *epoch == cluster.churn_epoch() => Some(format!(
                                "cluster {}: {} {} re-created after it was deleted, with no spec change between",
                                cluster.name,
                                identity.1,
                                if identity.2.is_empty() {
                                    "object"
                                } else {
                                    identity.2.as_str()
                                }
                            )),
                            _ => None,
                        };
                        self.record(Invariant::NoChurn, m.at, v);
                    }
                    MutationKind::Update => {}
                }
            }
        }
        if self.enabled.contains(&Invariant::NoLeaks) {
            for c in clusters.values().filter(|c| c.deleted_at.is_some()) {
                let v = leaks(world, c)
                    .map(|left| format!("cluster {} was deleted but {left} remain", c.name));
                self.record(Invariant::NoLeaks, now, v);
            }
            // Shared objects outlive each cluster, but not the last one: once every
            // cluster is deleted, nothing flightdeck registered may remain unless an
            // operator locked it (which flightdeck leaves alone, saying so).
            if clusters.values().any(|c| c.deletion_requested) {
                self.one_left_to_operator.extend(one_objects(world, true));
            }
            if !clusters.is_empty() && clusters.values().all(|c| c.deleted_at.is_some()) {
                let left: Vec<String> = one_objects(world, false)
                    .filter(|k| self.one_registered.contains(k))
                    .filter(|k| !self.one_left_to_operator.contains(k))
                    .collect();
                let v = (!left.is_empty()).then(|| {
                    format!(
                        "every cluster was deleted but {} flightdeck registered remain",
                        left.join(", ")
                    )
                });
                self.record(Invariant::NoLeaks, now, v);
            }
        }
    }

    /// `noLeaks` by the scenario's clock: a cluster the scenario deleted has nothing left
    /// once its deletion has had [`DELETION_DEADLINE`] outside fault windows (`fault`:
    /// one is active now), whatever flightdeck says or remembers of it.
    pub fn check_deletions(
        &mut self,
        world: &World,
        clusters: &BTreeMap<String, ClusterTrack>,
        now: Timestamp,
        fault: bool,
    ) {
        if !self.enabled.contains(&Invariant::NoLeaks) {
            return;
        }
        for c in clusters.values() {
            let Some(asked) = c.deletion_asked_at else {
                continue;
            };
            let d = self.deletions.entry(c.name.clone()).or_insert(Deletion {
                last: asked,
                fault_free_ms: 0,
                reported: false,
            });
            if !fault {
                d.fault_free_ms += now.since(d.last).as_millis();
            }
            d.last = now;
            if d.fault_free_ms < DELETION_DEADLINE.as_millis() || d.reported {
                continue;
            }
            let v = leaks(world, c).map(|left| {
                format!(
                    "cluster {}: {left} remain {} after the scenario deleted it (at {:.0}s)",
                    c.name,
                    now.since(asked),
                    asked.since(self.start).as_secs_f64()
                )
            });
            if let Some(d) = self.deletions.get_mut(&c.name) {
                d.reported |= v.is_some();
            }
            self.record(Invariant::NoLeaks, now, v);
        }
    }

    /// `drainBeforeDelete` (F9): every VMI deleted by a client since the last check was
    /// deleted with its guest node drained, or after its drain deadline.
    fn check_drains(&mut self, world: &World, clusters: &BTreeMap<String, ClusterTrack>) {
        let deletions = &world.kube.vmi_deletions;
        let fresh = deletions.get(self.vmi_deletions_seen..).unwrap_or_default();
        self.vmi_deletions_seen = deletions.len();
        if !self.enabled.contains(&Invariant::DrainBeforeDelete) {
            return;
        }
        self.check_evacuations(world, clusters);
        for d in fresh.iter().filter(|d| d.cause == VMI_DELETE) {
            let timeout = clusters
                .get(&d.cluster)
                .and_then(|c| c.drain_timeout)
                .unwrap_or(flightdeck_spec::Duration::from_mins(10));
            let deadline_passed = d
                .evacuation_since
                .is_some_and(|since| d.at.plus(DEADLINE_TOLERANCE) >= since.plus(timeout));
            let v = (!d.pods_left.is_empty() && !deadline_passed).then(|| {
                format!(
                    "cluster {}: VMI {} was deleted while {} still had to leave guest node {}, before its drain deadline",
                    d.cluster,
                    d.vmi,
                    d.pods_left.join(", "),
                    d.guest_node.as_deref().unwrap_or("(none registered)")
                )
            });
            self.record(Invariant::DrainBeforeDelete, d.at, v);
        }
    }

    /// `drainBeforeDelete`, its other half (F9): a VMI KubeVirt asked to evacuate is
    /// gone by its drain deadline, plus [`EVACUATION_SLACK`] (a few polls), so that a
    /// stuck drain never blocks the infra node for ever. A control-plane VMI may wait
    /// longer for another control-plane machine to come back (the quorum rule), at most
    /// [`EVACUATION_QUORUM_WAIT`].
    fn check_evacuations(&mut self, world: &World, clusters: &BTreeMap<String, ClusterTrack>) {
        let now = world.now;
        for vmi in &world.kube.vmis {
            let Some(since) = vmi.evacuation_since else {
                continue;
            };
            let Some(c) = clusters.values().find(|c| owned_by(&vmi.tags, &c.uid)) else {
                continue;
            };
            let Some(timeout) = c.drain_timeout else {
                continue;
            };
            // Control-plane machines are named `<cluster>-cp-<n>`.
            let control_plane = vmi.name.starts_with(&format!("{}-cp-", c.name));
            // flightdeck starts the drain's clock when it first lists the evacuation; an
            // API that refuses its lists delays that (swarm seed 11037243: rate-limited
            // for most of 13 minutes), so the time refused is not counted against it.
            let bound = timeout.as_millis()
                + c.resync_period.as_millis() * 11 / 10
                + EVACUATION_SLACK.as_millis()
                + self.kube_outage_within(since, now)
                + if control_plane {
                    EVACUATION_QUORUM_WAIT.as_millis()
                } else {
                    0
                };
            let waited = now.since(since);
            if vmi.deleting || waited.as_millis() <= bound {
                self.record(Invariant::DrainBeforeDelete, now, None);
                continue;
            }
            if !self.evacuations_overdue.insert(vmi.uid.clone()) {
                continue;
            }
            let v = Some(format!(
                "cluster {}: VMI {} has been evacuated from infra node {} for {waited}, past its drain deadline of {timeout}; the drain blocks the infra node",
                c.name,
                vmi.name,
                vmi.evacuation_node.as_deref().unwrap_or("?")
            ));
            self.record(Invariant::DrainBeforeDelete, now, v);
        }
    }

    /// `onlyOwned` and `noChurn` for OpenNebula templates and images, which carry no
    /// tags: flightdeck may delete or change only what it registered, and a name it
    /// deleted must not come back without a change somewhere in the fleet's specs.
    fn check_shared(&mut self, m: &Mutation, kind: &str, fleet_generation: u64) {
        let key = m.target_id.clone();
        match m.kind {
            MutationKind::Create => {
                self.one_registered.insert(key);
                if self.enabled.contains(&Invariant::NoChurn) {
                    let name = format!("{kind} {}", m.target_name);
                    let v = match self.one_deleted.get(&name) {
                        Some(g) if *g == fleet_generation => Some(format!(
                            "{name} re-created after it was deleted, with no spec change in the fleet between"
                        )),
                        _ => None,
                    };
                    self.record(Invariant::NoChurn, m.at, v);
                }
            }
            MutationKind::Update | MutationKind::Delete => {
                if self.enabled.contains(&Invariant::OnlyOwned) {
                    let v = (!self.one_registered.contains(&key)).then(|| {
                        format!(
                            "{} {} touched {key} ({}), which flightdeck did not register",
                            m.service, m.operation, m.target_name
                        )
                    });
                    self.record(Invariant::OnlyOwned, m.at, v);
                }
                if m.kind == MutationKind::Delete && !self.one_failed.contains(&key) {
                    self.one_deleted
                        .insert(format!("{kind} {}", m.target_name), fleet_generation);
                }
            }
        }
    }
}

/// `onlyOwned` by the call: which cluster made each object, from the simulator's own
/// record of the calls (the cluster each call was made for, its caller label), not
/// from its tags or from what flightdeck remembers.
#[derive(Default)]
struct MadeBy {
    /// Object ID → the cluster whose call created it.
    objects: BTreeMap<String, String>,
    /// Cluster UID (in the tags of what a cluster's calls created) → that cluster.
    uids: BTreeMap<String, String>,
}

impl MadeBy {
    /// Notes mutation `m` (done; `owner`: the UID its target's tags carry); for a change
    /// made for one cluster to an object another cluster made, says so.
    fn note(&mut self, m: &Mutation, owner: Option<&str>) -> Option<String> {
        let caller = m.caller.as_deref().and_then(cluster_of_label)?;
        if m.kind == MutationKind::Create {
            self.objects.insert(m.target_id.clone(), caller.to_string());
            if let Some(uid) = owner {
                self.uids
                    .entry(uid.to_string())
                    .or_insert_with(|| caller.to_string());
            }
            return None;
        }
        let made = self
            .objects
            .get(&m.target_id)
            .or_else(|| owner.and_then(|u| self.uids.get(u)))?;
        (made != caller).then(|| {
            format!(
                "{} {} made for cluster {caller} touched {} ({}), which cluster {made} created",
                m.service, m.operation, m.target_id, m.target_name
            )
        })
    }
}

/// The cluster a caller label names: its last `cluster=` word.
fn cluster_of_label(label: &str) -> Option<&str> {
    label
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("cluster="))
        .next_back()
}

/// `template` or `image` for a mutation of an OpenNebula template or image.
fn shared_kind(m: &Mutation) -> Option<&'static str> {
    if m.service != "opennebula" {
        return None;
    }
    if m.target_id.starts_with("template/") {
        Some("template")
    } else if m.target_id.starts_with("image/") {
        Some("image")
    } else {
        None
    }
}

/// Whether `m` is of a workload cluster's Node or Pod: such objects carry their
/// machine's tags (so that `onlyOwned` knows whose they are), but deleting a gone
/// machine's Node, or evicting a pod, is not deleting the machine.
fn identity(tags: &[String]) -> Option<Identity> {
    let uid = uid_of(tags)?;
    let role = tags.iter().find_map(|t| t.strip_prefix(TAG_ROLE))?;
    let machine = tags
        .iter()
        .find_map(|t| t.strip_prefix(TAG_MACHINE))
        .unwrap_or("");
    Some((uid.to_string(), role.to_string(), machine.to_string()))
}

fn owned_by(tags: &[String], uid: &str) -> bool {
    uid_of(tags) == Some(uid)
}

/// OpenNebula (an external endpoint): `None` when some control-plane VM of the cluster
/// is RUNNING, not being terminated, and its node is Ready.
fn external_endpoint_serving(world: &World, c: &ClusterTrack) -> Option<String> {
    let cp: Vec<_> = world
        .one_vms
        .iter()
        .filter(|v| owned_by(&v.tags, &c.uid))
        .filter(|v| {
            v.tags.iter().any(|t| {
                t.strip_prefix(TAG_MACHINE)
                    .is_some_and(|k| k.starts_with("cp-"))
            })
        })
        .collect();
    let serving = cp.iter().any(|v| {
        v.state == ONE_VM_ACTIVE
            && v.lcm_state == ONE_LCM_RUNNING
            && world.nodes.iter().any(|(uid, n)| {
                *uid == c.uid
                    && n.server_id.as_deref() == Some(v.id.to_string().as_str())
                    && n.ready
            })
    });
    // KubeVirt: a control-plane VMI Running, not being deleted, with a Ready guest node
    // (the endpoint Service selects control-plane VMIs).
    let cp_vmis: Vec<_> = world
        .kube
        .vmis
        .iter()
        .filter(|v| owned_by(&v.tags, &c.uid))
        .filter(|v| {
            v.tags.iter().any(|t| {
                t.strip_prefix(TAG_MACHINE)
                    .is_some_and(|k| k.starts_with("cp-"))
            })
        })
        .collect();
    let guest_ready = |vm: &str| {
        world
            .kube
            .workloads
            .iter()
            .filter(|w| w.name == c.name && w.api_up)
            .flat_map(|w| &w.nodes)
            .any(|n| n.name == vm && n.ready)
    };
    let serving = serving
        || cp_vmis
            .iter()
            .any(|v| v.phase == "Running" && !v.deleting && guest_ready(&v.name));
    if serving {
        return None;
    }
    let states: Vec<String> = cp
        .iter()
        .map(|v| format!("{} {}/{}", v.name, v.state, v.lcm_state))
        .chain(
            cp_vmis
                .iter()
                .map(|v| format!("VMI {} {}", v.name, v.phase)),
        )
        .collect();
    Some(format!(
        "cluster {}: no control-plane VM runs with a Ready node (VMs state/lcm_state: {})",
        c.name,
        if states.is_empty() {
            "none".to_string()
        } else {
            states.join(", ")
        }
    ))
}

/// OpenNebula's VM state ACTIVE, LCM state RUNNING and VM state DONE.
const ONE_VM_ACTIVE: u32 = 3;
const ONE_LCM_RUNNING: u32 = 3;
const ONE_VM_DONE: u32 = 6;
/// OpenNebula's image state ERROR.
const ONE_IMAGE_ERROR: u32 = 5;

/// The OpenNebula templates and images (`template/ID`, `image/ID`) that are locked, or
/// (with `locked` false) unlocked.
fn one_objects(world: &World, locked: bool) -> impl Iterator<Item = String> + '_ {
    let templates = world
        .one_templates
        .iter()
        .filter(move |t| t.lock.is_some() == locked)
        .map(|t| format!("template/{}", t.id));
    let images = world
        .one_images
        .iter()
        .filter(move |i| i.lock.is_some() == locked)
        .map(|i| format!("image/{}", i.id));
    templates.chain(images)
}

/// `None` when some member of the cluster's API pool is ACTIVE, ONLINE or NO_MONITOR,
/// and points at an ACTIVE control-plane server whose node is Ready.
fn api_endpoint_serving(world: &World, c: &ClusterTrack) -> Option<String> {
    if c.external_endpoint {
        return external_endpoint_serving(world, c);
    }
    let lbs: Vec<&str> = world
        .load_balancers
        .iter()
        .filter(|l| owned_by(&l.tags, &c.uid))
        .map(|l| l.id.as_str())
        .collect();
    let pools: Vec<&str> = world
        .pools
        .iter()
        .filter(|p| lbs.contains(&p.loadbalancer_id.as_str()))
        .map(|p| p.id.as_str())
        .collect();
    let members: Vec<_> = world
        .members
        .iter()
        .filter(|m| pools.contains(&m.pool_id.as_str()))
        .collect();
    let serving = members.iter().any(|m| {
        m.provisioning_status == ProvisioningStatus::Active
            && matches!(
                m.operating_status,
                OperatingStatus::Online | OperatingStatus::NoMonitor
            )
            && world.servers.iter().any(|s| {
                s.address == Some(m.address)
                    && owned_by(&s.tags, &c.uid)
                    && s.status == ServerStatus::Active
                    && !s.is_deleting()
                    && world.nodes.iter().any(|(uid, n)| {
                        *uid == c.uid && n.server_id.as_deref() == Some(s.id.as_str()) && n.ready
                    })
            })
    });
    if serving {
        return None;
    }
    let states: Vec<String> = members
        .iter()
        .map(|m| {
            format!(
                "{} {}/{}",
                m.address,
                m.provisioning_status.as_str(),
                m.operating_status.as_str()
            )
        })
        .collect();
    Some(format!(
        "cluster {}: no load-balancer member serves the API (members: {})",
        c.name,
        if states.is_empty() {
            "none".to_string()
        } else {
            states.join(", ")
        }
    ))
}

/// What of the cluster `uid` still exists, if anything.
pub fn leaks(world: &World, track: &ClusterTrack) -> Option<String> {
    let uid = track.uid.as_str();
    let mut left = Vec::new();
    let mut count = |what: &str, n: usize| {
        if n > 0 {
            left.push(format!("{n} {what}"));
        }
    };
    count(
        "route(s) to its pod network via its servers",
        world
            .routers
            .iter()
            .flat_map(|r| &r.routes)
            .filter(|r| {
                track.addresses.contains(&r.nexthop)
                    && r.destination
                        .parse::<flightdeck_spec::Cidr>()
                        .is_ok_and(|d| track.pod_cidr.covers(&d))
            })
            .count(),
    );
    count(
        "server(s)",
        world
            .servers
            .iter()
            .filter(|x| owned_by(&x.tags, uid))
            .count(),
    );
    count(
        "security group(s)",
        world
            .security_groups
            .iter()
            .filter(|x| owned_by(&x.tags, uid))
            .count(),
    );
    count(
        "load balancer(s)",
        world
            .load_balancers
            .iter()
            .filter(|x| owned_by(&x.tags, uid))
            .count(),
    );
    count(
        "listener(s)",
        world
            .listeners
            .iter()
            .filter(|x| owned_by(&x.tags, uid))
            .count(),
    );
    count(
        "pool(s)",
        world
            .pools
            .iter()
            .filter(|x| owned_by(&x.tags, uid))
            .count(),
    );
    count(
        "health monitor(s)",
        world
            .health_monitors
            .iter()
            .filter(|x| owned_by(&x.tags, uid))
            .count(),
    );
    count(
        "member(s)",
        world
            .members
            .iter()
            .filter(|x| owned_by(&x.tags, uid))
            .count(),
    );
    count(
        "KubeVirt VM(s)",
        world
            .kube
            .vms
            .iter()
            .filter(|x| owned_by(&x.tags, uid))
            .count(),
    );
    count(
        "KubeVirt VMI(s)",
        world
            .kube
            .vmis
            .iter()
            .filter(|x| owned_by(&x.tags, uid))
            .count(),
    );
    count(
        "Kubernetes Service(s)",
        world
            .kube
            .services
            .iter()
            .filter(|x| owned_by(&x.tags, uid))
            .count(),
    );
    count(
        "Kubernetes Secret(s)",
        world
            .kube
            .secrets
            .iter()
            .filter(|x| owned_by(&x.tags, uid))
            .count(),
    );
    count(
        "OpenNebula VM(s) not DONE",
        world
            .one_vms
            .iter()
            .filter(|x| owned_by(&x.tags, uid) && x.state != ONE_VM_DONE)
            .count(),
    );
    if left.is_empty() {
        None
    } else {
        Some(left.join(", "))
    }
}

#[cfg(test)]
mod outage_tests {
    use super::*;
    use flightdeck_spec::fault::Fault;

    fn fault(kind: &str, service: Option<&str>, at_s: u64, for_s: Option<u64>) -> Fault {
        let mut f = serde_json::json!({"at": format!("{at_s}s"), "kind": kind, "rate": 0.5});
        if let Some(s) = service {
            f["service"] = s.into();
        }
        if let Some(d) = for_s {
            f["duration"] = format!("{d}s").into();
        }
        serde_json::from_value(f).expect("a fault")
    }

    #[test]
    fn the_time_the_kubernetes_apis_refused_calls_is_counted_once_and_only_within_the_span() {
        let start = Timestamp::SIM_EPOCH;
        let at = |s: u64| start.plus_millis(s * 1000);
        let mut inv = Invariants::new(
            &[Invariant::DrainBeforeDelete],
            start,
            CallBudget::default(),
        );
        inv.note_faults(
            start,
            &[
                fault("api.rateLimit", Some("kubernetes"), 100, Some(300)),
                // Overlaps the first: 300–500 adds 100 s more.
                fault("api.errorRate", None, 300, Some(200)),
                // Another service's outage does not blind the drain.
                fault("api.errorRate", Some("nova"), 0, None),
                // Not an outage.
                fault("api.latency", Some("kubernetes"), 0, None),
            ],
        );
        assert_eq!(inv.kube_outage_within(at(0), at(1000)), 400_000);
        assert_eq!(inv.kube_outage_within(at(200), at(350)), 150_000);
        assert_eq!(inv.kube_outage_within(at(600), at(1000)), 0);
    }
}
