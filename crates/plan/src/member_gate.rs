//! F2: when a control-plane machine counts as serving the API, and how long its member
//! may take to get there.
//!
//! Upstream waited for the load balancer to be ACTIVE and never looked at the member;
//! with amphorav2 a member can be PENDING_* while the load balancer is ACTIVE, and a
//! rollout that trusts the load balancer removes every old member before any new one
//! serves. Here a member counts only when Octavia says it is ACTIVE and ONLINE (or
//! NO_MONITOR when there is no health monitor) and its node is Ready.

use flightdeck_cloud::Timestamp;
use flightdeck_spec::Duration;

use crate::machines::{MachineView, ServerPhase};

/// Which evidence makes a control-plane machine count as serving.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemberGate {
    /// The member is ACTIVE and ONLINE (or NO_MONITOR), and the node is Ready.
    #[default]
    MemberServing,
    /// **Unsafe**, kept only to prove the invariants catch it: the member exists, the
    /// load balancer is ACTIVE and the node is Ready (the seed 001 behaviour).
    LoadBalancerOnly,
}

/// Whether `m` serves the API under `gate`.
pub fn serving(m: &MachineView<'_>, gate: MemberGate, monitored: bool, lb_active: bool) -> bool {
    // Nova's ERROR may be a failed compute host (nothing answers, and the node list may
    // not say so yet: a stale read kept such a node Ready in swarm seed 400095041) or a
    // failed migration (the guest still runs). flightdeck cannot tell them apart, and
    // this count is what a removal leans on, so a server in ERROR does not count. Whether
    // it may still carry traffic is the planner's other question (`cp_traffic`).
    if m.server_phase() != ServerPhase::Running || !m.node_ready() {
        return false;
    }
    match gate {
        MemberGate::MemberServing => m.member_serving(monitored),
        MemberGate::LoadBalancerOnly => m.member.is_some() && lb_active,
    }
}

/// The verdict on one member's wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberWait {
    /// Serving, or not created yet: no clock runs.
    NotWaiting,
    /// Waiting since the given time, still within `memberTimeout`.
    Waiting { since: Timestamp },
    /// Waiting for longer than `memberTimeout`.
    Stuck { since: Timestamp, waited: Duration },
}

/// Judges a member's wait. `since` is the persisted start of the wait, so a restart
/// neither resets nor loses the deadline.
pub fn member_wait(
    member_exists: bool,
    member_serving: bool,
    since: Option<Timestamp>,
    now: Timestamp,
    timeout: Duration,
) -> MemberWait {
    if !member_exists || member_serving {
        return MemberWait::NotWaiting;
    }
    let since = since.unwrap_or(now);
    let waited = now.since(since);
    if waited >= timeout {
        MemberWait::Stuck { since, waited }
    } else {
        MemberWait::Waiting { since }
    }
}
