//! Octavia pool members: their create and delete, how `octavia.memberStuckPending`
//! holds their changes, and their `operating_status`.
//!
//! A member's `operating_status` is derived from the world on every catch-up: without
//! a health monitor `NO_MONITOR`; with one `OFFLINE` until it is configured and its
//! first check is due, then `ONLINE` once its backend (the server with its address) has
//! been running with a registered node for the rise time, `ERROR` otherwise.
//! `octavia.memberOffline` holds a member `OFFLINE`; afterwards it rises again.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use flightdeck_cloud::{Member, MemberCreate, OperatingStatus, ProvisioningStatus, Timestamp};
use flightdeck_spec::FaultKind;

use crate::ids::Touched;
use crate::octavia::{
    CHILDREN_MAX, Child, Event, begin_change, check_mutable, duplicate, not_found, pool_lb, quota,
};
use crate::world::ServingSpell;
use crate::{Event as SimEvent, Result, State, faults};

pub(crate) struct MemberRec {
    pub(crate) member: Member,
    pub(crate) change: u64,
    /// Held pending by `octavia.memberStuckPending`.
    stuck: bool,
    rise_ms: u64,
    /// Since when the member has been configured (ACTIVE) in a monitored pool.
    monitored_since: Option<Timestamp>,
    /// Since when its health checks have passed without interruption.
    healthy_since: Option<Timestamp>,
    /// The `octavia.memberOffline` faults holding it offline.
    pub(crate) offline_faults: BTreeSet<usize>,
    /// Since when Octavia has sent traffic to a live backend through it without
    /// interruption: ACTIVE and ONLINE, or ACTIVE and NO_MONITOR with its server
    /// running and registered as a node. Ground truth for the checks, which look at
    /// the world only now and then and must know what served in between.
    pub(crate) serving_since: Option<Timestamp>,
}

pub(crate) fn create_member(st: &mut State, now: Timestamp, req: &MemberCreate) -> Result<Member> {
    const OP: &str = "POST /v2/lbaas/pools/{pool_id}/members";
    let lb_id = pool_lb(st, OP, &req.pool_id)?;
    check_mutable(st, OP, &lb_id)?;
    if st.members.in_group(&req.pool_id).any(|m| {
        m.member.pool_id == req.pool_id
            && m.member.address == req.address
            && m.member.protocol_port == req.protocol_port
    }) {
        return Err(duplicate(
            OP,
            format!(
                "Another member on this pool is already using ip {} on protocol_port {}",
                req.address, req.protocol_port
            ),
        ));
    }
    if st.members.len() >= CHILDREN_MAX {
        return Err(quota(OP, "Member"));
    }
    let member = insert_member(st, req);
    let latency = st.config.latencies.member_create;
    begin_change(st, now, &lb_id, Child::Member(member.id.clone()), latency);
    Ok(member)
}

/// A new member as `req` asks, PENDING_CREATE; the caller begins the change that
/// configures it.
pub(crate) fn insert_member(st: &mut State, req: &MemberCreate) -> Member {
    let monitored = st
        .health_monitors
        .values()
        .any(|h| h.pool_id == req.pool_id);
    let member = Member {
        id: st.new_id(),
        name: req.name.clone(),
        pool_id: req.pool_id.clone(),
        address: req.address,
        protocol_port: req.protocol_port,
        provisioning_status: ProvisioningStatus::PendingCreate,
        operating_status: if monitored {
            OperatingStatus::Offline
        } else {
            OperatingStatus::NoMonitor
        },
        tags: req.tags.clone(),
    };
    let rise_ms = st.draw(st.config.latencies.health_check_rise);
    let seq = st.next_seq();
    index_member(st, seq, member.address);
    st.members.insert(
        seq,
        member.id.clone(),
        MemberRec {
            member: member.clone(),
            change: 0,
            stuck: false,
            rise_ms,
            monitored_since: None,
            healthy_since: None,
            offline_faults: BTreeSet::new(),
            serving_since: None,
        },
    );
    member
}

pub(crate) fn delete_member(
    st: &mut State,
    now: Timestamp,
    pool_id: &str,
    member_id: &str,
) -> Result<()> {
    const OP: &str = "DELETE /v2/lbaas/pools/{pool_id}/members/{member_id}";
    let lb_id = pool_lb(st, OP, pool_id)?;
    if st
        .members
        .get(member_id)
        .is_none_or(|m| m.member.pool_id != pool_id)
    {
        return Err(not_found(OP, "Member", member_id));
    }
    check_mutable(st, OP, &lb_id)?;
    mark_deleted(st, member_id);
    let latency = st.config.latencies.member_delete;
    begin_change(st, now, &lb_id, Child::Member(member_id.into()), latency);
    Ok(())
}

/// Marks member `id` PENDING_DELETE; the caller begins the change that removes it.
pub(crate) fn mark_deleted(st: &mut State, id: &str) -> Option<Member> {
    let m = st.members.get_mut(id)?;
    m.member.provisioning_status = ProvisioningStatus::PendingDelete;
    m.change += 1;
    m.stuck = false;
    Some(m.member.clone())
}

/// Whether an active fault holds member `m` in its pending state at `t`:
/// `octavia.memberStuckPending` any change, `octavia.memberStuckDeleting` a deletion.
fn held(st: &State, m: &MemberRec, t: Timestamp) -> Option<FaultKind> {
    let tags = &m.member.tags;
    if faults::any_active_for(st, FaultKind::MemberStuckPending, t, tags) {
        return Some(FaultKind::MemberStuckPending);
    }
    let deleting = m.member.provisioning_status == ProvisioningStatus::PendingDelete;
    (deleting && faults::any_active_for(st, FaultKind::MemberStuckDeleting, t, tags))
        .then_some(FaultKind::MemberStuckDeleting)
}

/// Completes a member's pending change, unless a stuck-pending fault holds it.
pub(crate) fn complete(st: &mut State, t: Timestamp, id: &str) {
    let holding = st
        .members
        .get(id)
        .and_then(|m| held(st, m, t).map(|kind| (kind, m.member.tags.clone())));
    if let Some((kind, tags)) = holding {
        faults::strike(st, kind, t, &tags);
        if let Some(m) = st.members.get_mut(id) {
            m.stuck = true;
        }
        return;
    }
    let Some(m) = st.members.get_mut(id) else {
        return;
    };
    match m.member.provisioning_status {
        ProvisioningStatus::PendingCreate | ProvisioningStatus::PendingUpdate => {
            m.member.provisioning_status = ProvisioningStatus::Active;
        }
        ProvisioningStatus::PendingDelete => {
            let address = m.member.address;
            if let Some(seq) = st.members.seq(id) {
                unindex_member(st, seq, address);
            }
            st.members.remove(id);
        }
        _ => {}
    }
}

/// A stuck-pending fault ended at `t`: every member no other such fault still holds
/// completes after its usual latency, counted from now.
pub(crate) fn release_stuck(st: &mut State, t: Timestamp) {
    let lat = st.config.latencies.clone();
    let mut releases = Vec::new();
    // Members another stuck-pending fault still holds stay held.
    let still_held: Vec<String> = st
        .members
        .values()
        .filter(|m| m.stuck && held(st, m, t).is_some())
        .map(|m| m.member.id.clone())
        .collect();
    for m in st
        .members
        .values_mut()
        .filter(|m| m.stuck && !still_held.contains(&m.member.id))
    {
        m.stuck = false;
        m.change += 1;
        let range = match m.member.provisioning_status {
            ProvisioningStatus::PendingDelete => lat.member_delete,
            _ => lat.member_create,
        };
        releases.push((m.member.id.clone(), m.change, range));
    }
    for (member, change, range) in releases {
        st.schedule_after(
            t,
            range,
            SimEvent::Octavia(Event::MemberRelease { member, change }),
        );
    }
}

/// Whether the backend at a member's address is healthy: a running server (or VM)
/// whose kubelet has registered.
fn backend_healthy(st: &State, member: &Member) -> bool {
    st.server_by_address
        .get(&member.address)
        .is_some_and(|sid| st.host_running(sid) && st.nodes.contains(sid))
}

/// What member health depends on, kept so that a settle re-derives only the members
/// whose inputs may have changed instead of every member in the cloud.
#[derive(Debug, Default)]
pub(crate) struct HealthIndex {
    /// Addresses whose holder changed (a server took or gave up the address).
    pub(crate) touched_addresses: BTreeSet<IpAddr>,
    /// Members (by creation number) at each backend address.
    by_address: BTreeMap<IpAddr, BTreeSet<u64>>,
    /// Each health monitor's pool, as of the last look at the monitors.
    monitors: BTreeMap<String, String>,
    /// Pools with a health monitor, and how many.
    monitored_pools: BTreeMap<String, usize>,
}

/// Brings the monitored pools up to date with the monitors that changed; answers the
/// pools that gained or lost their monitoring.
fn update_monitors(st: &mut State, touched: Touched) -> BTreeSet<String> {
    let ids: BTreeSet<String> = if touched.all {
        st.health
            .monitors
            .keys()
            .cloned()
            .chain(st.health_monitors.values().map(|h| h.id.clone()))
            .collect()
    } else {
        touched.ids.into_iter().collect()
    };
    let mut changed = BTreeSet::new();
    for id in ids {
        let now = st.health_monitors.get(&id).map(|h| h.pool_id.clone());
        let before = st.health.monitors.get(&id).cloned();
        if now == before {
            continue;
        }
        if let Some(pool) = before {
            st.health.monitors.remove(&id);
            if let Some(n) = st.health.monitored_pools.get_mut(&pool) {
                *n -= 1;
                if *n == 0 {
                    st.health.monitored_pools.remove(&pool);
                }
            }
            changed.insert(pool);
        }
        if let Some(pool) = now {
            st.health.monitors.insert(id, pool.clone());
            *st.health.monitored_pools.entry(pool.clone()).or_default() += 1;
            changed.insert(pool);
        }
    }
    changed
}

/// Notes member `seq` at its backend address.
pub(crate) fn index_member(st: &mut State, seq: u64, address: IpAddr) {
    st.health.by_address.entry(address).or_default().insert(seq);
}

/// Forgets member `seq` (being removed) at its backend address.
fn unindex_member(st: &mut State, seq: u64, address: IpAddr) {
    if let Some(seqs) = st.health.by_address.get_mut(&address) {
        seqs.remove(&seq);
        if seqs.is_empty() {
            st.health.by_address.remove(&address);
        }
    }
}

/// The members (by creation number, in creation order) whose health may have changed
/// since the last evaluation: those changed themselves (a health check that came due
/// touches its member), those whose backend server or node changed, and those whose
/// pool gained or lost a monitor; every one when a change was not noted one by one.
/// Takes the notes.
fn to_evaluate(st: &mut State) -> Vec<u64> {
    let members = st.members.take_touched();
    let servers = st.servers.take_touched();
    let nodes = st.nodes.take_touched();
    let monitors = st.health_monitors.take_touched();
    let mut addresses = std::mem::take(&mut st.health.touched_addresses);
    let pools = update_monitors(st, monitors);
    if members.all || servers.all || nodes.all {
        return st
            .members
            .values()
            .filter_map(|m| st.members.seq(&m.member.id))
            .collect();
    }
    let mut seqs: BTreeSet<u64> = members
        .ids
        .iter()
        .filter_map(|id| st.members.seq(id))
        .collect();
    // A node is keyed by its server's id.
    for id in servers.ids.iter().chain(&nodes.ids) {
        if let Some(rec) = st.servers.get(id) {
            addresses.extend(rec.server.address);
        }
    }
    for a in &addresses {
        if let Some(at) = st.health.by_address.get_mut(a) {
            // Members removed with their load balancer are dropped here.
            at.retain(|seq| st.members.by_seq(*seq).is_some());
            seqs.extend(at.iter());
        }
    }
    for pool in &pools {
        seqs.extend(
            st.members
                .in_group(pool)
                .filter_map(|m| st.members.seq(&m.member.id)),
        );
    }
    seqs.into_iter().collect()
}

/// Re-derives the `operating_status` at `now` of every member whose inputs may have
/// changed (see [`to_evaluate`]; the others' would come out as they are), scheduling a
/// re-evaluation for each health-check threshold that starts counting. Members are
/// visited in creation order, as a walk over all of them would.
pub(crate) fn evaluate(st: &mut State, now: Timestamp) {
    let seqs = to_evaluate(st);
    if seqs.is_empty() {
        return;
    }
    let inputs: Vec<(u64, bool, bool)> = seqs
        .iter()
        .filter_map(|seq| {
            let m = st.members.by_seq(*seq)?;
            Some((
                *seq,
                st.health.monitored_pools.contains_key(&m.member.pool_id),
                backend_healthy(st, &m.member),
            ))
        })
        .collect();
    let mut checks = Vec::new();
    let mut ended = Vec::new();
    for (seq, monitored, backend_ok) in inputs {
        if let Some(m) = st.members.untracked_mut(seq) {
            settle_member(m, now, monitored, backend_ok, &mut checks, &mut ended);
        }
    }
    for spell in ended {
        st.log.spell(spell);
    }
    for (at, id) in checks {
        st.schedule(at, SimEvent::Octavia(Event::HealthCheck(id)));
    }
}

/// Re-derives one member's statuses at `now`. Each threshold that starts counting gets a
/// check at its end, which touches the member so that it is derived again then.
fn settle_member(
    m: &mut MemberRec,
    now: Timestamp,
    monitored: bool,
    backend_ok: bool,
    checks: &mut Vec<(Timestamp, String)>,
    ended: &mut Vec<ServingSpell>,
) {
    let offline = !m.offline_faults.is_empty();
    // A member is in the amphora's configuration once created, until removed.
    let configured = matches!(
        m.member.provisioning_status,
        ProvisioningStatus::Active | ProvisioningStatus::PendingDelete
    );
    if monitored && configured {
        if m.monitored_since.is_none() {
            m.monitored_since = Some(now);
            checks.push((now.plus_millis(m.rise_ms), m.member.id.clone()));
        }
    } else {
        m.monitored_since = None;
    }
    if m.monitored_since.is_some() && backend_ok && !offline {
        if m.healthy_since.is_none() {
            m.healthy_since = Some(now);
            checks.push((now.plus_millis(m.rise_ms), m.member.id.clone()));
        }
    } else {
        m.healthy_since = None;
    }
    let risen = |since: Option<Timestamp>| since.is_some_and(|s| now >= s.plus_millis(m.rise_ms));
    m.member.operating_status = if offline {
        OperatingStatus::Offline
    } else if !monitored {
        OperatingStatus::NoMonitor
    } else if !risen(m.monitored_since) {
        OperatingStatus::Offline
    } else if risen(m.healthy_since) {
        OperatingStatus::Online
    } else {
        OperatingStatus::Error
    };
    let serving = m.member.provisioning_status == ProvisioningStatus::Active
        && match m.member.operating_status {
            OperatingStatus::Online => true,
            OperatingStatus::NoMonitor => backend_ok,
            _ => false,
        };
    m.serving_since = match (serving, m.serving_since) {
        (true, since) => since.or(Some(now)),
        (false, Some(since)) => {
            ended.push(ServingSpell {
                member_id: m.member.id.clone(),
                since,
                until: now,
            });
            None
        }
        (false, None) => None,
    };
}

/// Picks `count` distinct ACTIVE members with the fault stream and marks them offline
/// for fault `index`. Candidates are taken in creation order, so the pick replays.
/// Answers how many.
pub(crate) fn take_offline(st: &mut State, index: usize, count: usize) -> u64 {
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
    let chosen = faults::pick(&mut st.rng_faults, candidates, count);
    for id in &chosen {
        if let Some(m) = st.members.get_mut(id) {
            m.offline_faults.insert(index);
        }
    }
    let n = chosen.len() as u64;
    if let Some(rec) = st.faults.get_mut(index) {
        rec.chosen = chosen;
    }
    n
}
