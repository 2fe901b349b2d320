//! Fault injection: when each fault is active and what it does to calls and objects.
//!
//! API faults (`api.errorRate`, `api.latency`) act on each call of their service while
//! active. `nova.bootError`, `net.noRegistration` and `nova.dropSecurityGroup` are
//! decided per server when it is requested. The Octavia faults act on members: see
//! [`crate::members`] for how stuck members complete. `neutron.ruleLost`,
//! `router.staleRoute` and the start of `nova.dropSecurityGroup` change the world once,
//! when the fault starts; `neutron.maxRoutes` lowers the route limit of calls while
//! active; the `observer.*` faults change what the node list answers, not the nodes.
//!
//! The OpenNebula faults: `one.lockTemplate` locks the matching templates at its start
//! (those that exist then; later ones stay unlocked) and unlocks them at its end;
//! `one.vmBootFailure` and `one.imageError` are decided per VM or image when it is
//! requested; `one.rpcError` answers a fraction of XML-RPC calls INTERNAL.
//!
//! Faults are the cloud misbehaving, not callers: what they change is neither counted
//! as a call nor logged as a mutation.

use flightdeck_cloud::{CloudError, ErrorClass, Rng, SeededRng, SimClock, Timestamp};
use flightdeck_spec::scenario::{Fault, LockLevelSpec};
use flightdeck_spec::{Duration, FaultKind, Service};

use crate::{Event as SimEvent, Result, State, k8s, members, neutron, nova, one, routes};

/// The most faults one simulated cloud keeps.
pub const FAULTS_MAX: usize = 4_096;

/// One scheduled fault. Parameters a kind does not use are ignored.
#[derive(Clone, Debug, PartialEq)]
pub struct SimFault {
    pub kind: FaultKind,
    /// Active from this instant ...
    pub start: Timestamp,
    /// ... until (excluding) this one; `None`: forever.
    pub end: Option<Timestamp>,
    /// `api.errorRate`, `api.latency`: the service hit; `None` hits every service.
    pub service: Option<Service>,
    /// `api.errorRate`, `nova.bootError`, `net.noRegistration`: the fraction of calls
    /// or servers hit (default 1.0). `nova.dropSecurityGroup`: the fraction of servers
    /// requested while active that come up without groups (default 1.0 when `count` is
    /// absent too, else 0).
    pub rate: Option<f64>,
    /// `api.latency`: extra virtual time each call takes.
    pub latency: Option<Duration>,
    /// `octavia.memberOffline`: how many ACTIVE members go offline (default 1).
    /// `neutron.ruleLost`: how many rules vanish (default 1). `nova.dropSecurityGroup`:
    /// how many running servers lose their groups at the start (default 0).
    /// `router.staleRoute`: stale routes per cluster (default 1). `neutron.maxRoutes`:
    /// the route limit (absent: no effect).
    pub count: Option<u32>,
    /// Every fault but the API ones hits only objects tagged
    /// `flightdeck-cluster=<cluster>` (`router.staleRoute`: that cluster's pod network;
    /// `neutron.maxRoutes`: route calls for that cluster's pod network; `observer.*`:
    /// that cluster's node list); `None` hits all.
    pub cluster: Option<String>,
    /// `one.lockTemplate`: the lock level (default USE).
    pub level: Option<LockLevelSpec>,
    /// `one.lockTemplate`: templates whose name starts with this are locked (absent:
    /// every template).
    pub template: Option<String>,
    /// `kubevirt.drainInfraNode`: the infra node drained.
    pub node: Option<String>,
}

impl SimFault {
    /// A fault of `kind` from `start` on, with no end and default parameters.
    pub fn new(kind: FaultKind, start: Timestamp) -> Self {
        SimFault {
            kind,
            start,
            end: None,
            service: None,
            rate: None,
            latency: None,
            count: None,
            cluster: None,
            level: None,
            template: None,
            node: None,
        }
    }

    /// The fault a scenario schedules, with its times counted from `origin` (the
    /// scenario's start).
    pub fn from_spec(fault: &Fault, origin: Timestamp) -> Self {
        let start = origin.plus(fault.at);
        SimFault {
            kind: fault.kind,
            start,
            end: fault.duration.map(|d| start.plus(d)),
            service: fault.service,
            rate: fault.rate,
            latency: fault.latency,
            count: fault.count,
            cluster: fault.cluster.as_ref().map(|c| c.to_string()),
            level: fault.level,
            template: fault.template.as_ref().map(|t| t.to_string()),
            node: fault.node.as_ref().map(|n| n.to_string()),
        }
    }

    /// Whether an object with `tags` is within the fault's target.
    pub(crate) fn targets(&self, tags: &[String]) -> bool {
        self.cluster.as_deref().is_none_or(|c| {
            tags.iter()
                .any(|t| t.strip_prefix(flightdeck_cloud::ownership::TAG_CLUSTER) == Some(c))
        })
    }

    /// Whether the fault is in force at `t`.
    pub fn is_active_at(&self, t: Timestamp) -> bool {
        self.start <= t && self.end.is_none_or(|end| t < end)
    }

    fn hits(&self, service: &str) -> bool {
        self.service.is_none_or(|s| s.as_str() == service)
    }

    /// The fraction of servers (or calls) a per-request fault hits.
    fn effective_rate(&self) -> f64 {
        match self.kind {
            FaultKind::DropSecurityGroup if self.count.is_some() => self.rate.unwrap_or(0.0),
            _ => self.rate.unwrap_or(1.0),
        }
    }
}

/// A fault as the cloud keeps it: with the members an `octavia.memberOffline` took,
/// or the templates a `one.lockTemplate` locked.
#[derive(Debug)]
pub(crate) struct FaultRec {
    pub(crate) fault: SimFault,
    chosen: Vec<String>,
}

/// The OpenNebula lock number of a `one.lockTemplate` level.
fn lock_number(level: Option<LockLevelSpec>) -> u8 {
    match level {
        None | Some(LockLevelSpec::Use) => 1,
        Some(LockLevelSpec::Manage) => 2,
        Some(LockLevelSpec::Admin) => 3,
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Event {
    Start(usize),
    End(usize),
}

pub(crate) fn inject(st: &mut State, fault: SimFault) {
    if st.faults.len() >= FAULTS_MAX {
        st.log.faults_ignored += 1;
        return;
    }
    let index = st.faults.len();
    st.schedule(fault.start, SimEvent::Fault(Event::Start(index)));
    if let Some(end) = fault.end {
        st.schedule(end, SimEvent::Fault(Event::End(index)));
    }
    st.faults.push(FaultRec {
        fault,
        chosen: Vec::new(),
    });
}

pub(crate) fn apply(st: &mut State, t: Timestamp, event: Event) {
    match event {
        Event::Start(i) => {
            let Some(fault) = st.faults.get(i).map(|r| r.fault.clone()) else {
                return;
            };
            if !fault.is_active_at(t) {
                return;
            }
            match fault.kind {
                FaultKind::MemberOffline => {
                    take_members_offline(st, i, fault.count.unwrap_or(1) as usize);
                }
                FaultKind::RuleLost => neutron::lose_rules(st, &fault),
                FaultKind::DropSecurityGroup => {
                    nova::strip_groups(st, &fault, fault.count.unwrap_or(0) as usize);
                }
                FaultKind::StaleRoute => routes::add_stale_routes(st, &fault),
                FaultKind::OneLockTemplate => {
                    let prefix = fault.template.clone().unwrap_or_default();
                    let locked = one::lock_templates(st, t, &prefix, lock_number(fault.level));
                    if let Some(rec) = st.faults.get_mut(i) {
                        rec.chosen = locked;
                    }
                }
                FaultKind::KubevirtDrainInfraNode => {
                    if let Some(node) = &fault.node {
                        k8s::drain_start(st, t, node);
                    }
                }
                FaultKind::K8sPdbBlocks => k8s::fault_changed(st),
                _ => {}
            }
        }
        Event::End(i) => {
            let Some(kind) = st.faults.get(i).map(|r| r.fault.kind) else {
                return;
            };
            match kind {
                FaultKind::MemberOffline => {
                    let chosen = st
                        .faults
                        .get_mut(i)
                        .map(|r| std::mem::take(&mut r.chosen))
                        .unwrap_or_default();
                    for id in chosen {
                        if let Some(m) = st.members.get_mut(&id) {
                            m.offline_faults.remove(&i);
                        }
                    }
                }
                FaultKind::MemberStuckPending => members::release_stuck(st, t),
                FaultKind::OneLockTemplate => {
                    let locked = st
                        .faults
                        .get_mut(i)
                        .map(|r| std::mem::take(&mut r.chosen))
                        .unwrap_or_default();
                    one::unlock_templates(st, &locked);
                }
                FaultKind::KubevirtDrainInfraNode => {
                    if let Some(node) = st.faults.get(i).and_then(|r| r.fault.node.clone()) {
                        k8s::drain_end(st, t, &node);
                    }
                }
                FaultKind::K8sPdbBlocks => k8s::fault_changed(st),
                _ => {}
            }
        }
    }
}

/// `count` distinct candidates picked with the fault stream, in pick order. Callers
/// list candidates in creation order, so the pick replays.
pub(crate) fn pick<T>(rng: &mut SeededRng, mut candidates: Vec<T>, count: usize) -> Vec<T> {
    let mut chosen = Vec::new();
    while chosen.len() < count && !candidates.is_empty() {
        let i = rng.below(candidates.len() as u64) as usize;
        chosen.push(candidates.remove(i));
    }
    chosen
}

/// Picks `count` distinct ACTIVE members with the fault stream and marks them offline
/// for fault `index`. Candidates are taken in creation order, so the pick replays.
fn take_members_offline(st: &mut State, index: usize, count: usize) {
    let candidates: Vec<String> = st
        .members
        .values()
        .filter(|m| m.member.provisioning_status == flightdeck_cloud::ProvisioningStatus::Active)
        .filter(|m| {
            st.faults
                .get(index)
                .is_some_and(|r| r.fault.targets(&m.member.tags))
        })
        .map(|m| m.member.id.clone())
        .collect();
    let chosen = pick(&mut st.rng_faults, candidates, count);
    for id in &chosen {
        if let Some(m) = st.members.get_mut(id) {
            m.offline_faults.insert(index);
        }
    }
    if let Some(rec) = st.faults.get_mut(index) {
        rec.chosen = chosen;
    }
}

/// Whether an object with `tags` is held by an active fault of `kind` at `t`.
pub(crate) fn any_active_for(st: &State, kind: FaultKind, t: Timestamp, tags: &[String]) -> bool {
    st.faults
        .iter()
        .any(|r| r.fault.kind == kind && r.fault.is_active_at(t) && r.fault.targets(tags))
}

/// Whether a server with `tags` requested at `t` is hit by the active faults of `kind`
/// (`nova.bootError`, `net.noRegistration`, `nova.dropSecurityGroup`): each such fault
/// draws with its rate.
pub(crate) fn server_hit(st: &mut State, kind: FaultKind, t: Timestamp, tags: &[String]) -> bool {
    let rates: Vec<f64> = st
        .faults
        .iter()
        .filter(|r| r.fault.kind == kind && r.fault.is_active_at(t) && r.fault.targets(tags))
        .map(|r| r.fault.effective_rate())
        .collect();
    // Every active fault draws, so the stream does not depend on earlier outcomes.
    let mut hit = false;
    for rate in rates {
        hit |= st.rng_faults.chance(rate);
    }
    hit
}

/// The route limit an active `neutron.maxRoutes` sets at `t` for a route call logged
/// with `tags` (the lowest if several); `None` when none is active.
pub(crate) fn route_limit(st: &State, t: Timestamp, tags: &[String]) -> Option<usize> {
    st.faults
        .iter()
        .filter(|r| {
            r.fault.kind == FaultKind::MaxRoutes && r.fault.is_active_at(t) && r.fault.targets(tags)
        })
        .filter_map(|r| r.fault.count)
        .map(|c| c as usize)
        .min()
}

/// Applies the API faults of `service` to one call, before it has any effect:
/// `api.errorRate` may answer 503; `api.latency` moves the shared clock on (and the
/// cloud with it) before the call is performed.
pub(crate) fn before_call(
    st: &mut State,
    clock: &SimClock,
    service: &'static str,
    operation: &'static str,
) -> Result<()> {
    let now = flightdeck_cloud::Clock::now(clock);
    let active = |kind: FaultKind| {
        st.faults
            .iter()
            .filter(move |r| {
                r.fault.kind == kind && r.fault.hits(service) && r.fault.is_active_at(now)
            })
            .map(|r| r.fault.clone())
            .collect::<Vec<_>>()
    };
    let errors = active(FaultKind::ApiErrorRate);
    let delays = active(FaultKind::ApiLatency);
    for fault in errors {
        if st.rng_faults.chance(fault.rate.unwrap_or(1.0)) {
            return Err(CloudError::new(
                ErrorClass::Transient,
                service,
                operation,
                Some(503),
                "Service Unavailable",
            ));
        }
    }
    let extra_ms = delays
        .iter()
        .filter_map(|f| f.latency)
        .fold(0u64, |sum, d| sum.saturating_add(d.as_millis()));
    if extra_ms > 0 {
        clock.advance(Duration::from_millis(extra_ms));
        st.run_due(flightdeck_cloud::Clock::now(clock));
    }
    Ok(())
}
