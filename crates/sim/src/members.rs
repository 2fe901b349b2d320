//! Octavia pool members: their create and delete, how `octavia.memberStuckPending`
//! holds their changes, and their `operating_status`.
//!
//! A member's `operating_status` is derived from the world on every catch-up: without
//! a health monitor `NO_MONITOR`; with one `OFFLINE` until it is configured and its
//! first check is due, then `ONLINE` once its backend (the server with its address) has
//! been running with a registered node for the rise time, `ERROR` otherwise.
//! `octavia.memberOffline` holds a member `OFFLINE`; afterwards it rises again.

use std::collections::BTreeSet;

use flightdeck_cloud::{Member, MemberCreate, OperatingStatus, ProvisioningStatus, Timestamp};
use flightdeck_spec::FaultKind;

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
    let latency = st.config.latencies.member_create;
    begin_change(st, now, &lb_id, Child::Member(member.id.clone()), latency);
    Ok(member)
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
    if let Some(m) = st.members.get_mut(member_id) {
        m.member.provisioning_status = ProvisioningStatus::PendingDelete;
        m.change += 1;
        m.stuck = false;
    }
    let latency = st.config.latencies.member_delete;
    begin_change(st, now, &lb_id, Child::Member(member_id.into()), latency);
    Ok(())
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
        ProvisioningStatus::PendingCreate => {
            m.member.provisioning_status = ProvisioningStatus::Active;
        }
        ProvisioningStatus::PendingDelete => {
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

/// Re-derives every member's `operating_status` at `now`, scheduling a re-evaluation
/// for each health-check threshold that starts counting.
pub(crate) fn evaluate(st: &mut State, now: Timestamp) {
    if st.members.is_empty() {
        return;
    }
    let monitored_pools: BTreeSet<&String> =
        st.health_monitors.values().map(|h| &h.pool_id).collect();
    // Same iteration order as the loop below: both walk the table in creation order.
    let inputs: Vec<(bool, bool)> = st
        .members
        .values()
        .map(|m| {
            (
                monitored_pools.contains(&m.member.pool_id),
                backend_healthy(st, &m.member),
            )
        })
        .collect();
    let mut checks = Vec::new();
    let mut ended = Vec::new();
    for (m, (monitored, backend_ok)) in st.members.values_mut().zip(inputs) {
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
        let risen =
            |since: Option<Timestamp>| since.is_some_and(|s| now >= s.plus_millis(m.rise_ms));
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
    for spell in ended {
        st.log.spell(spell);
    }
    for (at, id) in checks {
        st.schedule(at, SimEvent::Octavia(Event::HealthCheck(id)));
    }
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
