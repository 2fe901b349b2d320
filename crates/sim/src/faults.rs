//! Fault injection: when each fault is active and what it does to calls and objects.
//!
//! API faults (`api.errorRate`, `api.latency`) act on each call of their service while
//! active; aimed at one cluster, only on the calls that say they are for it
//! ([`crate::caller`]), and an unaimed one draws as it did before calls said anything. `nova.bootError`, `net.noRegistration` and `nova.dropSecurityGroup` are
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

use crate::{Event as SimEvent, Result, State};

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
    /// The faults on objects hit only objects tagged `flightdeck-cluster=<cluster>`
    /// (`router.staleRoute`: that cluster's pod network; `neutron.maxRoutes`: route
    /// calls for that cluster's pod network; `observer.*`: that cluster's node list).
    /// The faults on calls (`api.*`, `one.rpcError`) hit only calls that say they are
    /// for it ([`crate::caller`]'s `cluster=`, or the workload cluster whose API is
    /// called); a call that does not say is left alone. `None` hits all.
    pub cluster: Option<String>,
    /// `one.lockTemplate`: the lock level (default USE).
    pub level: Option<LockLevelSpec>,
    /// `one.lockTemplate`: templates whose name starts with this are locked (absent:
    /// every template).
    pub template: Option<String>,
    /// `kubevirt.drainInfraNode`: the infra node drained.
    pub node: Option<String>,
    /// Faults on machines and members: only the machines of this pool of `cluster`
    /// (`cp`: the control plane) are hit.
    pub pool: Option<String>,
    /// Faults on machines and members: only this machine of `cluster` is hit.
    pub machine: Option<String>,
    /// `api.rateLimit`: the wait its 429 answers ask for (default 2 s).
    pub retry_after: Option<Duration>,
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
            pool: None,
            machine: None,
            retry_after: None,
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
            pool: fault.pool.as_ref().map(|p| p.to_string()),
            machine: fault.machine.as_ref().map(|m| m.to_string()),
            retry_after: fault.retry_after,
        }
    }

    /// Whether an object with `tags` is within the fault's target: its cluster, and
    /// within it its pool or machine (machines are named `<pool>-<n>`, `cp-<n>` for
    /// the control plane).
    pub(crate) fn targets(&self, tags: &[String]) -> bool {
        let in_cluster = self.cluster.as_deref().is_none_or(|c| {
            tags.iter()
                .any(|t| t.strip_prefix(flightdeck_cloud::ownership::TAG_CLUSTER) == Some(c))
        });
        if !in_cluster {
            return false;
        }
        let machine = flightdeck_cloud::ownership::machine_of(tags);
        let in_pool = self.pool.as_deref().is_none_or(|p| {
            machine
                .and_then(|m| m.rsplit_once('-'))
                .is_some_and(|(pool, n)| pool == p && n.bytes().all(|b| b.is_ascii_digit()))
        });
        in_pool && self.machine.as_deref().is_none_or(|m| machine == Some(m))
    }

    /// Whether the fault is in force at `t`.
    pub fn is_active_at(&self, t: Timestamp) -> bool {
        self.start <= t && self.end.is_none_or(|end| t < end)
    }

    fn hits(&self, service: &str) -> bool {
        self.service.is_none_or(|s| s.as_str() == service)
    }

    /// Whether the fault strikes a call for `call`'s cluster: any call when it is aimed
    /// at none, else only a call that says it is for that cluster. Asks `call` only when
    /// aimed, so an unaimed fault's draws are what they were before calls said anything.
    fn strikes_call(&self, call: &mut CallFor<'_>) -> bool {
        self.cluster
            .as_deref()
            .is_none_or(|c| call.cluster() == Some(c))
    }

    /// The fraction of servers (or calls) a per-request fault hits.
    fn effective_rate(&self) -> f64 {
        match self.kind {
            FaultKind::DropSecurityGroup if self.count.is_some() => self.rate.unwrap_or(0.0),
            _ => self.rate.unwrap_or(1.0),
        }
    }
}

/// The cluster a call is for, looked up only when a fault aimed at one asks: what the
/// call names itself (the workload cluster whose API it calls), else its caller label.
pub(crate) struct CallFor<'a> {
    named: Option<&'a str>,
    label: Option<Option<String>>,
}

impl<'a> CallFor<'a> {
    /// A call that names no cluster itself: its caller label may.
    pub(crate) fn labelled() -> Self {
        CallFor {
            named: None,
            label: None,
        }
    }

    /// A call to `cluster`'s own API (`None`: a shared one, such as KubeVirt's infra
    /// cluster): that is whose it is, else its caller label says.
    pub(crate) fn to(cluster: Option<&'a str>) -> Self {
        CallFor {
            named: cluster,
            label: None,
        }
    }

    pub(crate) fn cluster(&mut self) -> Option<&str> {
        if let Some(named) = self.named {
            return Some(named);
        }
        self.label
            .get_or_insert_with(crate::caller::cluster)
            .as_deref()
    }
}

/// A fault as the cloud keeps it: with the members an `octavia.memberOffline` took,
/// or the templates a `one.lockTemplate` locked.
#[derive(Debug)]
pub(crate) struct FaultRec {
    pub(crate) fault: SimFault,
    /// What its start took: members taken offline, templates locked, load balancers
    /// held; released at its end.
    pub(crate) chosen: Vec<String>,
    /// How often it struck: calls it answered, objects it changed or held.
    pub(crate) effects: u64,
}

#[derive(Clone, Debug)]
pub(crate) enum Event {
    Start(usize),
    End(usize),
}

/// Which fault a cloud holds: what [`crate::SimCloud::inject`] answers and
/// [`crate::SimCloud::stop_fault`] takes. Only good for the cloud that answered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FaultId(pub(crate) usize);

pub(crate) fn inject(st: &mut State, fault: SimFault) -> Option<FaultId> {
    if st.faults.len() >= FAULTS_MAX {
        st.log.faults_ignored += 1;
        return None;
    }
    let index = st.faults.len();
    st.schedule(fault.start, SimEvent::Fault(Event::Start(index)));
    if let Some(end) = fault.end {
        st.schedule(end, SimEvent::Fault(Event::End(index)));
    }
    st.faults.push(FaultRec {
        fault,
        chosen: Vec::new(),
        effects: 0,
    });
    Some(FaultId(index))
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

/// How often the faults of each kind struck, in kind order (kinds that never did
/// included, with 0, when scheduled).
pub(crate) fn effects(st: &State) -> std::collections::BTreeMap<FaultKind, u64> {
    let mut out = std::collections::BTreeMap::new();
    for r in &st.faults {
        *out.entry(r.fault.kind).or_insert(0) += r.effects;
    }
    out
}

/// Counts `n` effects of fault `index`.
pub(crate) fn note(st: &mut State, index: usize, n: u64) {
    if let Some(r) = st.faults.get_mut(index) {
        r.effects = r.effects.saturating_add(n);
    }
}

/// Whether an active fault of `kind` holds an object with `tags` at `t`, counting one
/// effect for each that does. Use for decisions the fault changes; use
/// [`any_active_for`] for mere queries.
pub(crate) fn strike(st: &mut State, kind: FaultKind, t: Timestamp, tags: &[String]) -> bool {
    let mut hit = false;
    for r in st.faults.iter_mut() {
        if r.fault.kind == kind && r.fault.is_active_at(t) && r.fault.targets(tags) {
            r.effects = r.effects.saturating_add(1);
            hit = true;
        }
    }
    hit
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
    let drawn: Vec<(usize, f64)> = st
        .faults
        .iter()
        .enumerate()
        .filter(|(_, r)| r.fault.kind == kind && r.fault.is_active_at(t) && r.fault.targets(tags))
        .map(|(i, r)| (i, r.fault.effective_rate()))
        .collect();
    draw(st, drawn)
}

/// The extra boot time of a machine with `tags` that comes up at `t`: the longest
/// `latency` of the active `kubeadm.slowBoot` faults that target it and draw it with
/// their rate (each such fault draws, so the stream does not depend on the outcome).
pub(crate) fn slow_boot_ms(st: &mut State, t: Timestamp, tags: &[String]) -> u64 {
    let drawn: Vec<(usize, f64, u64)> = st
        .faults
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.fault.kind == FaultKind::KubeadmSlowBoot
                && r.fault.is_active_at(t)
                && r.fault.targets(tags)
        })
        .map(|(i, r)| {
            let extra = r.fault.latency.map_or(0, |l| l.as_millis());
            (i, r.fault.effective_rate(), extra)
        })
        .collect();
    let mut slowest = 0;
    for (i, rate, extra) in drawn {
        if st.rng_faults.chance(rate) {
            note(st, i, 1);
            slowest = slowest.max(extra);
        }
    }
    slowest
}

/// Whether a call at `t` is hit by the active faults of `kind` that hit a whole
/// service (`one.rpcError`) and strike `call`, each drawing with its rate.
pub(crate) fn call_hit(
    st: &mut State,
    kind: FaultKind,
    t: Timestamp,
    call: &mut CallFor<'_>,
) -> bool {
    let drawn: Vec<(usize, f64)> = st
        .faults
        .iter()
        .enumerate()
        .filter(|(_, r)| r.fault.kind == kind && r.fault.is_active_at(t))
        .filter(|(_, r)| r.fault.strikes_call(call))
        .map(|(i, r)| (i, r.fault.rate.unwrap_or(1.0)))
        .collect();
    draw(st, drawn)
}

/// Every fault in `drawn` draws with its rate, so the stream does not depend on
/// earlier outcomes; each that hits counts an effect.
fn draw(st: &mut State, drawn: Vec<(usize, f64)>) -> bool {
    let mut hit = false;
    for (i, rate) in drawn {
        if st.rng_faults.chance(rate) {
            note(st, i, 1);
            hit = true;
        }
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

/// The lowest route limit any active `neutron.maxRoutes` sets at `t`, whatever its
/// target.
pub(crate) fn lowest_route_limit(st: &State, t: Timestamp) -> Option<usize> {
    st.faults
        .iter()
        .filter(|r| r.fault.kind == FaultKind::MaxRoutes && r.fault.is_active_at(t))
        .filter_map(|r| r.fault.count)
        .map(|c| c as usize)
        .min()
}

/// When a `neutron.maxRoutes` last started or ended, up to `t`: the last time the
/// routers' limit changed.
pub(crate) fn route_limit_changed(st: &State, t: Timestamp) -> Option<Timestamp> {
    st.faults
        .iter()
        .filter(|r| r.fault.kind == FaultKind::MaxRoutes)
        .flat_map(|r| [Some(r.fault.start), r.fault.end])
        .flatten()
        .filter(|at| *at <= t)
        .max()
}

/// Whether the route limit an active `neutron.maxRoutes` sets refused a call: counts an
/// effect for every such fault in force.
pub(crate) fn note_route_limit(st: &mut State, t: Timestamp, tags: &[String]) {
    strike(st, FaultKind::MaxRoutes, t, tags);
}

/// The default wait an `api.rateLimit` answer asks for.
const RETRY_AFTER_DEFAULT: Duration = Duration::from_secs(2);

/// The indices of the active faults of `kind` that hit `service` at `now` and strike
/// `call`.
pub(crate) fn active_on(
    st: &State,
    kind: FaultKind,
    service: &str,
    now: Timestamp,
    call: &mut CallFor<'_>,
) -> Vec<usize> {
    st.faults
        .iter()
        .enumerate()
        .filter(|(_, r)| r.fault.kind == kind && r.fault.hits(service) && r.fault.is_active_at(now))
        .filter(|(_, r)| r.fault.strikes_call(call))
        .map(|(i, _)| i)
        .collect()
}

/// Whether an `api.errorRate` on `service` drops an open stream (a watch going on of
/// `call`) at `now`: each part read of it fails with the fault's rate, as a call would.
pub(crate) fn drops_stream(
    st: &mut State,
    service: &'static str,
    now: Timestamp,
    call: &mut CallFor<'_>,
) -> bool {
    for i in active_on(st, FaultKind::ApiErrorRate, service, now, call) {
        let rate = st.faults[i].fault.rate.unwrap_or(1.0);
        if st.rng_faults.chance(rate) {
            note(st, i, 1);
            return true;
        }
    }
    false
}

/// Applies the API faults of `service` that strike `call` to it, before it has any
/// effect: `api.errorRate` may answer 503; `api.rateLimit` may answer 429 with a
/// `Retry-After`; `api.latency` moves the shared clock on (and the cloud with it)
/// before the call is performed.
pub(crate) fn before_call(
    st: &mut State,
    clock: &SimClock,
    service: &'static str,
    operation: &'static str,
    call: &mut CallFor<'_>,
) -> Result<()> {
    let now = flightdeck_cloud::Clock::now(clock);
    for i in active_on(st, FaultKind::ApiErrorRate, service, now, call) {
        let rate = st.faults[i].fault.rate.unwrap_or(1.0);
        if st.rng_faults.chance(rate) {
            note(st, i, 1);
            return Err(CloudError::new(
                ErrorClass::Transient,
                service,
                operation,
                Some(503),
                "Service Unavailable",
            ));
        }
    }
    for i in active_on(st, FaultKind::ApiRateLimit, service, now, call) {
        let fault = &st.faults[i].fault;
        let (rate, after) = (fault.rate.unwrap_or(1.0), fault.retry_after);
        if st.rng_faults.chance(rate) {
            note(st, i, 1);
            let after = after.unwrap_or(RETRY_AFTER_DEFAULT);
            let message = if service == "kubernetes" {
                "Too many requests, please try again later."
            } else {
                "This request was rate-limited."
            };
            return Err(CloudError::new(
                ErrorClass::RateLimited(Some(after)),
                service,
                operation,
                Some(429),
                message,
            ));
        }
    }
    let delays = active_on(st, FaultKind::ApiLatency, service, now, call);
    let mut extra_ms = 0u64;
    for i in delays {
        if let Some(d) = st.faults[i].fault.latency {
            extra_ms = extra_ms.saturating_add(d.as_millis());
            note(st, i, 1);
        }
    }
    if extra_ms > 0 {
        clock.advance(Duration::from_millis(extra_ms));
        st.run_due(flightdeck_cloud::Clock::now(clock));
    }
    Ok(())
}
