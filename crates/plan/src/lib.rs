//! Pure planning: `plan(spec, observed, memory, now) -> Plan`.
//!
//! A plan is a list of actions, each with the reason that produced it, plus the memory to
//! persist before acting, the conditions that describe the cluster, and when to look
//! again. Planning does no I/O and reads no clock, so every decision can be tested from
//! tables and replayed from a seed.
//!
//! One concern per file: `infra` (security group, load balancer chain), `member_gate`
//! (F2: when a control-plane member counts as serving), `rollout` (surge-first
//! replacement and scaling of a machine set), `removal` (taking one machine out,
//! member first), `deletion` (F12), `status` (what a person sees).

pub mod action;
mod adoption;
pub mod bootstrap;
mod churn;
pub mod condition;
mod creates;
mod deletion;
pub mod drain;
mod guest_holders;
mod infra;
pub mod machines;
pub mod member_gate;
mod members;
mod membership;
pub mod memory;
pub mod node_drain;
mod node_meta;
pub mod opennebula;
mod remediation;
mod removal;
mod rollout;
mod routes;
pub mod safety;
pub mod status;
mod userdata;
pub mod verify;

use flightdeck_cloud::{Observed, Timestamp};
use flightdeck_spec::{Cluster, Duration};

pub use action::{Action, NewMember, PlannedAction};
pub use condition::{Condition, Event, PlanEvent, Severity};
pub use drain::DrainPolicy;
pub use member_gate::MemberGate;
pub use memory::{
    DeletionProof, Held, IdentityCheck, MachineRecord, MachineRole, MachineTemplate, Memory,
    OneHoldings,
};
pub use opennebula::{Shared, TemplatePolicy};
pub use remediation::RemediationPolicy;
pub use routes::LEARNED_LIMIT_TTL;
pub use safety::{Disabled, Mechanism};
pub use status::ClusterStatus;

/// How often to look again while something is in flight at Octavia (its transitions take
/// about a second).
pub const POLL_OCTAVIA: Duration = Duration::from_secs(2);
/// How long the API load balancer may stay PENDING_* before it counts as held up (a
/// change takes about a second); from then on it is polled every [`POLL_STUCK`].
pub const LB_HELD_UP_AFTER: Duration = Duration::from_secs(60);
/// How often to look again at a member stuck past `memberTimeout` (or a load balancer
/// held up).
pub const POLL_STUCK: Duration = Duration::from_secs(30);
/// How long a recorded object must be missing from the cloud's lists before it is taken
/// for gone: one empty page is not proof.
pub const GONE_AFTER: Duration = Duration::from_secs(60);
/// How far behind the cloud a list may lag (a cache or a read replica, the Sieve class's
/// stale read) with every guarantee kept. A list served at `t` shows the cloud as it was
/// after `t - LIST_LAG_MAX`, so:
/// - a server made less than this long ago may be missing from it although it exists,
///   and is not taken for gone yet;
/// - a server confirmed deleted less than this long ago may still be in it, and is not
///   taken for one that exists (nor adopted as an orphan).
pub const LIST_LAG_MAX: Duration = Duration::from_mins(5);
/// How often to look again while servers boot or nodes join.
pub const POLL_MACHINES: Duration = Duration::from_secs(10);

/// Switches for the safety mechanisms. Every one is on by default; tests turn one off to
/// prove that the invariants catch its absence.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    pub member_gate: MemberGate,
    pub remediation: RemediationPolicy,
    pub templates: opennebula::TemplatePolicy,
    pub drain: drain::DrainPolicy,
    /// Mechanisms switched off (none in the product).
    pub disabled: Disabled,
}

impl PlanOptions {
    /// Whether safety mechanism `m` is on.
    pub fn on(&self, m: Mechanism) -> bool {
        self.disabled.on(m)
    }
}

/// What the cluster should be, what the cloud shows, what we remember, and when.
pub struct PlanInput<'a> {
    pub spec: &'a Cluster,
    pub observed: &'a Observed,
    pub memory: &'a Memory,
    pub now: Timestamp,
    pub options: &'a PlanOptions,
    /// What other clusters hold of the shared OpenNebula objects (F1); empty elsewhere.
    pub shared: &'a Shared,
    /// When this engine took the cluster up from the store (at its start, or from another
    /// replica); `None` when it has driven the cluster since it was applied. A store may
    /// have come back from a backup, behind the cloud: for [`LIST_LAG_MAX`] after this,
    /// no machine is made under a new name (see `creates::new_names_held`).
    pub taken_up: Option<Timestamp>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub actions: Vec<PlannedAction>,
    /// Memory to persist before any action is carried out.
    pub memory: Memory,
    pub conditions: Vec<Condition>,
    pub events: Vec<PlanEvent>,
    pub status: ClusterStatus,
    /// Look again after this long; `None` means only at the next resync.
    pub requeue_after: Option<Duration>,
    /// Deletion was requested and nothing the cluster owned is left.
    pub deleted: bool,
}

/// Plans one reconcile of one cluster.
pub fn plan(input: PlanInput<'_>) -> Plan {
    // A lagging list may still show servers confirmed deleted: they are not there.
    let filtered;
    let input = match without_gone_servers(input.observed, input.memory, input.now) {
        Some(observed) => {
            filtered = observed;
            PlanInput {
                observed: &filtered,
                ..input
            }
        }
        None => input,
    };
    let mut p = Planner::new(&input);
    p.memory
        .gone_servers
        .retain(|_, at| input.now.since(*at) < LIST_LAG_MAX);
    machines::forgive_unobserved_time(&mut p);
    if p.memory.deletion_requested.is_some() {
        deletion::plan_deletion(&mut p);
    } else {
        p.note_spec_change();
        let infra = infra::plan_infra(&mut p);
        bootstrap::observe(&mut p);
        rollout::plan_machines(&mut p, &infra);
        bootstrap::plan_tokens(&mut p);
        drain::plan_drains(&mut p);
        removal::plan_node_deletions(&mut p);
        node_meta::plan_node_meta(&mut p);
        churn::forget_idle(&mut p);
    }
    let (draining, held) = (
        std::mem::take(&mut p.drain_notes),
        std::mem::take(&mut p.held_notes),
    );
    node_drain::publish(&mut p, &draining, &held);
    let plan = p.finish();
    match verify::verify_actions(&plan.actions, input.shared, input.options) {
        Ok(()) => plan,
        Err(why) => rejected(plan, &input, why),
    }
}

/// `observed` without the servers confirmed deleted within [`LIST_LAG_MAX`], if it
/// lists any.
fn without_gone_servers(observed: &Observed, memory: &Memory, now: Timestamp) -> Option<Observed> {
    let gone = |s: &flightdeck_cloud::Server| {
        memory
            .gone_servers
            .get(&s.id)
            .is_some_and(|at| now.since(*at) < LIST_LAG_MAX)
    };
    if !observed.servers.iter().any(gone) {
        return None;
    }
    let mut o = observed.clone();
    o.servers.retain(|s| !gone(s));
    Some(o)
}

/// A plan that broke a guarantee: nothing of it is carried out and none of its memory is
/// kept (that memory assumes its actions happen); the cluster says why and is looked at
/// again soon.
fn rejected(mut plan: Plan, input: &PlanInput<'_>, why: String) -> Plan {
    let message = format!(
        "a plan of {} actions was refused, none carried out: {why}. This is a flightdeck bug; please report it with `flightdeck plan` output",
        plan.actions.len()
    );
    plan.actions.clear();
    plan.memory = input.memory.clone();
    plan.deleted = false;
    let c = Condition::new(
        condition::kind::PLAN_REJECTED,
        true,
        "GuaranteeBroken",
        &message,
    );
    plan.conditions.push(c);
    plan.conditions.sort_by(|a, b| a.kind.cmp(&b.kind));
    plan.status.conditions = plan.conditions.clone();
    plan.events
        .push(PlanEvent::warning("PlanRejected", message));
    plan.requeue_after = Some(POLL_STUCK);
    plan
}

/// The working state of one planning pass.
pub(crate) struct Planner<'a> {
    pub spec: &'a Cluster,
    pub observed: &'a Observed,
    pub now: Timestamp,
    pub options: &'a PlanOptions,
    pub shared: &'a Shared,
    pub memory: Memory,
    pub actions: Vec<PlannedAction>,
    pub conditions: Vec<Condition>,
    pub events: Vec<PlanEvent>,
    /// Whether a change to the load balancer may still be planned in this pass: Octavia
    /// answers 409 to a second change while the first is pending.
    pub lb_slot_free: bool,
    /// The API load balancer is in ERROR.
    pub lb_failed: bool,
    /// The load balancer has been PENDING_* for longer than [`LB_HELD_UP_AFTER`].
    pub lb_held_up: bool,
    /// Some recorded cluster-wide object was missing from the lists in this pass.
    pub missing_checked: bool,
    /// Nova listed none of the recorded servers: no server is taken for gone.
    pub servers_suspect: bool,
    pub requeue_after: Option<Duration>,
    pub deleted: bool,
    pub status: ClusterStatus,
    /// The churn-tracked objects seen in the cloud in this pass.
    pub seen_now: std::collections::BTreeSet<String>,
    /// See [`PlanInput::taken_up`].
    pub taken_up: Option<Timestamp>,
    /// What each drain under way says, for the `Draining` condition.
    pub drain_notes: Vec<String>,
    /// What each deletion held by its node's annotation says, for `DeletionHeld`.
    pub held_notes: Vec<String>,
}

impl<'a> Planner<'a> {
    fn new(input: &PlanInput<'a>) -> Self {
        Planner {
            spec: input.spec,
            observed: input.observed,
            now: input.now,
            options: input.options,
            shared: input.shared,
            memory: input.memory.clone(),
            actions: Vec::new(),
            conditions: Vec::new(),
            events: Vec::new(),
            lb_slot_free: false,
            lb_failed: false,
            lb_held_up: false,
            missing_checked: false,
            servers_suspect: false,
            requeue_after: None,
            deleted: false,
            status: ClusterStatus::default(),
            seen_now: Default::default(),
            taken_up: input.taken_up,
            drain_notes: Vec::new(),
            held_notes: Vec::new(),
        }
    }

    pub fn act(&mut self, action: action::Action, reason: impl Into<String>) {
        self.actions.push(PlannedAction {
            action,
            reason: reason.into(),
        });
    }

    /// Plans a load-balancer change if Octavia can take one now; returns whether it did.
    pub fn act_on_load_balancer(
        &mut self,
        action: action::Action,
        reason: impl Into<String>,
    ) -> bool {
        if !self.lb_slot_free {
            // A load balancer in ERROR, or held up PENDING, will not take changes soon:
            // no point polling fast.
            self.wait(if self.lb_failed || self.lb_held_up {
                POLL_STUCK
            } else {
                POLL_OCTAVIA
            });
            return false;
        }
        self.lb_slot_free = false;
        self.act(action, reason);
        self.wait(POLL_OCTAVIA);
        true
    }

    /// Notes that the cluster's load balancer is held PENDING_* in this pass. Returns how
    /// long it has been held and how soon to look again: soon at first, and every
    /// `POLL_STUCK` once it has been held longer than `LB_HELD_UP_AFTER` (Octavia takes no
    /// change until it is ACTIVE again), so that a load balancer held for minutes does not
    /// cost every list every two seconds.
    pub(crate) fn lb_pending(&mut self) -> (Duration, Duration) {
        let since = *self.memory.lb_pending_since.get_or_insert(self.now);
        let held = self.now.since(since);
        let poll = if held > LB_HELD_UP_AFTER {
            POLL_STUCK
        } else {
            POLL_OCTAVIA
        };
        (held, poll)
    }

    /// Asks to be reconciled again within `d`.
    pub fn wait(&mut self, d: Duration) {
        self.requeue_after = Some(self.requeue_after.map_or(d, |r| r.min(d)));
    }

    pub fn condition(&mut self, c: Condition) {
        self.conditions.retain(|x| x.kind != c.kind);
        self.conditions.push(c);
    }

    fn note_spec_change(&mut self) {
        let hash = self.spec.spec_hash();
        if self.memory.spec_hash != hash {
            churn::reset(self);
            if self.memory.spec_hash != 0 {
                self.events.push(PlanEvent::normal(
                    "SpecChanged",
                    "the cluster's spec changed",
                ));
            }
            self.memory.spec_hash = hash;
        }
    }

    fn finish(mut self) -> Plan {
        self.conditions.sort_by(|a, b| a.kind.cmp(&b.kind));
        self.status.conditions = self.conditions.clone();
        Plan {
            actions: self.actions,
            memory: self.memory,
            conditions: self.conditions,
            events: self.events,
            status: self.status,
            requeue_after: self.requeue_after,
            deleted: self.deleted,
        }
    }
}

#[cfg(test)]
mod tests;
