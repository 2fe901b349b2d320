//! Every safety mechanism the planner has can be switched off, and the swarm notices
//! when one is: a check that cannot fail proves nothing. Each case scans a bounded run
//! of seeds that begins a little before the first one known to expose it, and stops at
//! the first failure.

use std::sync::atomic::{AtomicBool, Ordering};

use flightdeck_plan::Mechanism;
use flightdeck_scenario::swarm::{SwarmOptions, Unsafe, run_seed, run_swarm};

/// Seeds scanned at most per mechanism.
const SCAN: u64 = 40;

fn options(seeds: u64, from: u64, disabled: Vec<Unsafe>) -> SwarmOptions {
    SwarmOptions {
        seeds,
        from,
        jobs: 2,
        disabled,
        lagging_store: false,
        check_determinism: false,
    }
}

/// Scans `SCAN` seeds from `from` with `off` switched off; the first failure must be a
/// violation of `invariant`, and the same seed must pass with every mechanism on.
fn caught(off: Unsafe, from: u64, invariant: &str) {
    caught_by_any(off, from, &[invariant]);
}

/// [`caught`], where the first failure may be a violation of any of `invariants`.
fn caught_by_any(off: Unsafe, from: u64, invariants: &[&str]) {
    let found = AtomicBool::new(false);
    let report = run_swarm(
        &options(SCAN, from, vec![off]),
        &|| found.load(Ordering::SeqCst),
        &|o| {
            if o.failure.is_some() {
                found.store(true, Ordering::SeqCst);
            }
        },
    );
    let failure = report
        .failures
        .iter()
        .min_by_key(|f| f.seed)
        .unwrap_or_else(|| panic!("{}: no violation in {SCAN} seeds from {from}", off.flag()));
    assert!(
        invariants.contains(&failure.invariant.as_str()),
        "{}: seed {}: {} ({})",
        off.flag(),
        failure.seed,
        failure.invariant,
        failure.message
    );
    assert!(
        failure
            .replay
            .ends_with(&format!("--unsafe-disable {}", off.flag())),
        "{}",
        failure.replay
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let safe = runtime.block_on(run_seed(
        failure.seed,
        &options(1, failure.seed, Vec::new()),
    ));
    assert!(
        safe.failure.is_none(),
        "seed {} fails with every mechanism on: {:?}",
        failure.seed,
        safe.failure
    );
}

#[test]
fn f10_without_the_remediation_budget_more_machines_are_repaired_at_once_than_max_unhealthy() {
    // From 180: the seeds from 70 that exposed it drew kubeadm fleets once those came,
    // and no fault takes a kubeadm control plane's machines.
    caught(
        Unsafe::Plan(Mechanism::RemediationBudget),
        180,
        "remediationWithinBudget",
    );
}

#[test]
fn f10_without_the_blind_observer_guard_machines_are_condemned_on_an_untrusted_node_list() {
    caught(
        Unsafe::Plan(Mechanism::BlindObserverGuard),
        5,
        "noRemediationOnBlindObserver",
    );
}

#[test]
fn f11_without_the_churn_breaker_a_set_keeps_remaking_machines_that_fail() {
    caught(Unsafe::Plan(Mechanism::ChurnBreaker), 30, "noChurn");
}

#[test]
fn seed_003_without_drain_on_delete_machines_go_with_their_pods() {
    // Every cloud's rollouts and scale-downs lose pods (noPodLost); on KubeVirt an
    // evacuated VMI also goes undrained (drainBeforeDelete).
    caught_by_any(
        Unsafe::Plan(Mechanism::DrainBeforeDelete),
        5,
        &["noPodLost", "drainBeforeDelete", "disruptionBudgetsKept"],
    );
}

#[test]
fn f9_without_the_drain_deadline_a_blocked_drain_holds_the_infra_node() {
    // A drain that never ends also holds a scale-down for ever (seed 14, once it drew a
    // kubeadm fleet): the fleet does not converge.
    caught_by_any(
        Unsafe::Plan(Mechanism::DrainDeadline),
        5,
        &["drainBeforeDelete", "convergence"],
    );
}

#[test]
fn f1_without_the_last_holder_rule_a_shared_template_is_deleted_under_another_cluster() {
    caught(
        Unsafe::Plan(Mechanism::TemplateLastHolder),
        3,
        "convergence",
    );
}

#[test]
fn f2_without_surge_first_a_rollout_takes_the_api_down() {
    caught(Unsafe::Plan(Mechanism::SurgeFirst), 1, "apiEndpointServing");
}

#[test]
fn f2_without_the_member_gate_a_rollout_takes_the_api_down() {
    caught(Unsafe::MemberGate, 15, "apiEndpointServing");
}

/// A quarter of OpenStack seeds have Nova answer its server list for the whole project
/// (`nova.tagFilterIgnored`); without the ownership check a cluster takes another's
/// servers for duplicates of its own and deletes them.
#[test]
fn f12_without_the_ownership_check_a_cluster_deletes_another_clusters_servers() {
    caught(Unsafe::OwnershipCheck, 25, "apiEndpointServing");
}

/// Issue 41: kubeadm fleets whose `nodeStartupTimeout` is past a token's 15 minutes,
/// with slow boots; a token nobody moves on runs out before its machine joins.
#[test]
fn issue_41_without_token_refresh_a_slow_machines_token_runs_out_before_it_joins() {
    caught(Unsafe::Plan(Mechanism::TokenRefresh), 260, "bootstrapValid");
}

#[test]
fn every_mechanism_has_a_flag_and_a_bad_one_is_named_in_the_error() {
    for u in Unsafe::all() {
        assert_eq!(Unsafe::from_flag(u.flag()), Ok(u));
    }
    let err = Unsafe::from_flag("everything").expect_err("no such mechanism");
    assert!(
        err.contains("\"everything\"") && err.contains("surge-first"),
        "{err}"
    );
}

/// A flightdeck that says Ready as soon as it has asked for its machines: the swarm
/// judges readiness from the world, so the claim is caught (`statusTruthful`).
#[test]
fn a_flightdeck_that_reports_ready_before_its_machines_serve_is_caught() {
    caught(Unsafe::Plan(Mechanism::HonestReady), 5, "statusTruthful");
}

/// F12: a flightdeck that forgets a deleted cluster with its objects still there.
#[test]
fn f12_a_flightdeck_that_forgets_a_cluster_before_its_objects_are_gone_is_caught() {
    caught(Unsafe::Plan(Mechanism::DeleteBeforeForget), 0, "noLeaks");
}

/// F12: a flightdeck whose ownership check accepts any of its clusters' tags: one
/// cluster deletes another's servers, which the simulator's own record of who made
/// them shows (`onlyOwned`), whatever the tags say. In the swarm the other cluster's
/// API often goes down first (`apiEndpointServing`); `lies.rs` shows `onlyOwned` alone
/// catching it in f12-tag-filter-ignored.
#[test]
fn f12_a_cluster_that_acts_on_another_clusters_objects_is_caught() {
    caught_by_any(
        Unsafe::ClusterOwnership,
        95,
        &["onlyOwned", "apiEndpointServing"],
    );
}
