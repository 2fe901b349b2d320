//! What a fault does when it starts and when it ends: the one place that reaches into
//! every service for it. [`crate::faults`] decides (which fault is active, which object
//! it targets, whether a call is hit) and reaches into none, so no service depends on
//! this file and this file depends on no circle.

use flightdeck_cloud::Timestamp;
use flightdeck_spec::FaultKind;
use flightdeck_spec::scenario::LockLevelSpec;

use crate::faults::{self, Event};
use crate::{State, k8s, members, neutron, nova, octavia, one, routes};

/// The OpenNebula lock number of a `one.lockTemplate` level.
fn lock_number(level: Option<LockLevelSpec>) -> u8 {
    match level {
        None | Some(LockLevelSpec::Use) => 1,
        Some(LockLevelSpec::Manage) => 2,
        Some(LockLevelSpec::Admin) => 3,
    }
}

/// Applies a fault's start or end at `t`.
pub(crate) fn apply(st: &mut State, t: Timestamp, event: Event) {
    match event {
        Event::Start(i) => start(st, t, i),
        Event::End(i) => end(st, t, i),
    }
}

/// Fault `i` starts: the world changes once; how much is counted as its effects.
fn start(st: &mut State, t: Timestamp, i: usize) {
    let Some(fault) = st.faults.get(i).map(|r| r.fault.clone()) else {
        return;
    };
    if !fault.is_active_at(t) {
        return;
    }
    let count = |default: u32| fault.count.unwrap_or(default) as usize;
    let changed = match fault.kind {
        FaultKind::MemberOffline => members::take_offline(st, i, count(1)),
        FaultKind::RuleLost => neutron::lose_rules(st, &fault),
        FaultKind::DropSecurityGroup => nova::strip_groups(st, &fault, count(0)),
        FaultKind::StaleRoute => routes::add_stale_routes(st, &fault),
        FaultKind::OneLockTemplate => {
            let prefix = fault.template.clone().unwrap_or_default();
            let locked = one::lock_templates(st, t, &prefix, lock_number(fault.level));
            let n = locked.len() as u64;
            if let Some(rec) = st.faults.get_mut(i) {
                rec.chosen = locked;
            }
            n
        }
        FaultKind::KubevirtDrainInfraNode => match &fault.node {
            Some(node) => k8s::drain_start(st, t, node),
            None => 0,
        },
        FaultKind::K8sPdbBlocks => {
            k8s::fault_changed(st);
            0
        }
        FaultKind::OperatorDeleteMachine => {
            let n = count(1);
            let mut done = nova::delete_out_of_band(st, t, &fault, n);
            done += one::terminate_out_of_band(st, t, &fault, n.saturating_sub(done as usize));
            done + k8s::delete_out_of_band(st, t, &fault, n.saturating_sub(done as usize))
        }
        FaultKind::ServerError => nova::fail_running(st, t, &fault, count(1)),
        FaultKind::OperatorHoldNodeDeletion => {
            let held = k8s::hold_nodes(st, t, &fault);
            let n = held.len() as u64;
            if let Some(rec) = st.faults.get_mut(i) {
                rec.chosen = held;
            }
            n
        }
        FaultKind::OperatorStripNodeLabels => k8s::strip_node_labels(st, t, &fault),
        FaultKind::OperatorDeleteBootstrapToken => {
            let gone = crate::bootstrap::delete_out_of_band(st, &fault, fault.count);
            let n = gone.len() as u64;
            if let Some(rec) = st.faults.get_mut(i) {
                rec.chosen = gone;
            }
            n
        }
        FaultKind::LbPendingUpdate => {
            let held = octavia::hold(st, &fault);
            let n = held.len() as u64;
            if let Some(rec) = st.faults.get_mut(i) {
                rec.chosen = held;
            }
            n
        }
        FaultKind::KeystoneRevokeTokens => {
            st.session.revoke(t, i);
            0
        }
        _ => 0,
    };
    faults::note(st, i, changed);
}

/// Fault `i` is stopped at `t`, before its end: it is active no more from `t` on (one
/// not started yet never starts), its scheduled start and end are dropped, and its end
/// is applied now. False when it had already ended.
pub(crate) fn stop(st: &mut State, t: Timestamp, i: usize) -> bool {
    let Some(rec) = st.faults.get_mut(i) else {
        return false;
    };
    if rec.fault.end.is_some_and(|end| end <= t) {
        return false;
    }
    let started = rec.fault.start <= t;
    rec.fault.end = Some(if started { t } else { rec.fault.start });
    st.timers.retain(
        |_, e| !matches!(e, crate::Event::Fault(Event::Start(j) | Event::End(j)) if *j == i),
    );
    if started {
        end(st, t, i);
    }
    true
}

/// Fault `i` ends at `t`: what its start took is given back.
fn end(st: &mut State, t: Timestamp, i: usize) {
    let Some(kind) = st.faults.get(i).map(|r| r.fault.kind) else {
        return;
    };
    let take_chosen = |st: &mut State| {
        st.faults
            .get_mut(i)
            .map(|r| std::mem::take(&mut r.chosen))
            .unwrap_or_default()
    };
    match kind {
        FaultKind::MemberOffline => {
            for id in take_chosen(st) {
                if let Some(m) = st.members.get_mut(&id) {
                    m.offline_faults.remove(&i);
                }
            }
        }
        FaultKind::MemberStuckPending | FaultKind::MemberStuckDeleting => {
            members::release_stuck(st, t);
        }
        FaultKind::OneLockTemplate => {
            let locked = take_chosen(st);
            one::unlock_templates(st, &locked);
        }
        FaultKind::KubevirtDrainInfraNode => {
            if let Some(node) = st.faults.get(i).and_then(|r| r.fault.node.clone()) {
                k8s::drain_end(st, t, &node);
            }
        }
        FaultKind::K8sPdbBlocks => k8s::fault_changed(st),
        FaultKind::OperatorHoldNodeDeletion => {
            let held = take_chosen(st);
            k8s::release_nodes(st, t, &held);
        }
        FaultKind::LbPendingUpdate => {
            let held = take_chosen(st);
            octavia::release(st, &held);
        }
        _ => {}
    }
}
