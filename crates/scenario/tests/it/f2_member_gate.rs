//! F2 (seed 001): a control-plane rollout never takes the API offline, even when Octavia
//! leaves new members PENDING while the load balancer reports ACTIVE.

use flightdeck_engine::EngineConfig;
use flightdeck_plan::{MemberGate, PlanOptions};
use flightdeck_scenario::report::Report;
use flightdeck_scenario::{RunOptions, load_scenario, run};
use flightdeck_spec::Duration;

const SEED_001: &str = "seed-001-member-stuck-pending";

async fn run_named(name: &str, options: RunOptions) -> Report {
    let loaded = load_scenario(name).expect("built-in scenario loads");
    run(&loaded, &options, &mut |_| {})
        .await
        .expect("run completes")
        .report
}

fn invariant_held(report: &Report, name: &str) -> bool {
    report
        .invariants
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("invariant {name} was not checked"))
        .held
}

fn first_event(report: &Report, reason: &str) -> Option<u64> {
    report
        .timeline
        .iter()
        .find(|e| e.reason == reason)
        .map(|e| e.at_ms)
}

#[tokio::test]
async fn f2_seed_001_keeps_serving_halts_on_stuck_member_and_completes_after_the_fault() {
    let report = run_named(SEED_001, RunOptions::default()).await;
    assert!(report.passed, "{:#?}", report.expectations);
    assert!(invariant_held(&report, "apiEndpointServing"));
    let stuck = first_event(&report, "LoadBalancerMemberStuck")
        .expect("the rollout halts with LoadBalancerMemberStuck");
    let fault_end = report
        .timeline
        .iter()
        .find(|e| e.reason == "Fault" && e.message.ends_with("ends"))
        .map(|e| e.at_ms)
        .expect("the fault ends");
    let complete = first_event(&report, "RolloutComplete").expect("the rollout completes");
    assert!(
        stuck < fault_end,
        "stuck at {stuck} ms, fault ends at {fault_end} ms"
    );
    assert!(
        complete > fault_end,
        "the rollout may only complete once members recover"
    );
    // No old machine was removed while the new member was stuck.
    let first_removal =
        first_event(&report, "MachineRemovalStarted").expect("old machines are removed");
    assert!(
        first_removal > fault_end,
        "an old machine was removed at {first_removal} ms, during the fault"
    );
}

#[tokio::test]
async fn f2_a_rollout_that_trusts_only_the_load_balancer_takes_the_api_offline() {
    // The upstream behaviour of seed 001: the member exists and the load balancer is
    // ACTIVE, so the old machine goes. The invariant must catch it.
    let options = RunOptions {
        engine: EngineConfig {
            plan: PlanOptions {
                member_gate: MemberGate::LoadBalancerOnly,
                ..PlanOptions::default()
            },
            ..EngineConfig::default()
        },
        ..RunOptions::default()
    };
    let report = run_named(SEED_001, options).await;
    assert!(
        !invariant_held(&report, "apiEndpointServing"),
        "the naive gate must violate apiEndpointServing"
    );
    assert!(!report.passed);
    let v = report
        .invariants
        .iter()
        .find(|v| v.name == "apiEndpointServing")
        .and_then(|v| v.first_violation.clone());
    let v = v.expect("a first violation is reported");
    // The rollout half sees it first: the first old member goes while its replacement
    // does not serve yet, before the pool is empty.
    assert!(
        v.message
            .contains("was deleted while only 2 other member(s) served"),
        "{}",
        v.message
    );
}

#[tokio::test]
async fn f2_an_offline_member_during_an_upgrade_never_counts_as_serving() {
    let report = run_named("member-offline-during-upgrade", RunOptions::default()).await;
    assert!(
        report.passed,
        "{:#?} {:#?}",
        report.invariants, report.expectations
    );
    assert!(first_event(&report, "RolloutComplete").is_some());
}

#[tokio::test]
async fn an_engine_restarted_mid_rollout_finishes_without_duplicates_and_keeps_the_member_deadline()
{
    let baseline = run_named(SEED_001, RunOptions::default()).await;
    // The new member goes pending at about 5:10; restart twice before its 5-minute
    // deadline runs out, on a store that lives on disk.
    let dir = tempfile::tempdir().expect("tempdir");
    let options = RunOptions {
        state_dir: Some(dir.path().to_path_buf()),
        restarts: vec![
            Duration::from_secs(7 * 60),
            Duration::from_secs(9 * 60 + 30),
        ],
        ..RunOptions::default()
    };
    let loaded = load_scenario(SEED_001).expect("loads");
    let run = run(&loaded, &options, &mut |_| {})
        .await
        .expect("run completes");
    let report = &run.report;
    assert_eq!(
        report
            .timeline
            .iter()
            .filter(|e| e.reason == "EngineRestarted")
            .count(),
        2,
        "the engine was restarted twice"
    );
    assert!(report.passed, "{:#?}", report.expectations);
    // The deadline counted from when the member first went pending, not from a restart.
    let stuck = first_event(report, "LoadBalancerMemberStuck").expect("stuck condition");
    let stuck_baseline = first_event(&baseline, "LoadBalancerMemberStuck").expect("baseline stuck");
    let drift = stuck.abs_diff(stuck_baseline);
    assert!(
        drift <= 2_000,
        "deadline moved by {drift} ms across restarts"
    );
    assert!(
        stuck < 11 * 60 * 1000,
        "a reset deadline would fire after 12:00, it fired at {stuck} ms"
    );
    // No server and no member was created twice for one machine.
    let mut creates = std::collections::BTreeMap::<(String, String), u32>::new();
    for m in run.cloud.mutations() {
        let is_create = m.operation.starts_with("POST /servers") && !m.operation.contains("action")
            || m.operation.starts_with("POST /v2/lbaas/pools/");
        if !is_create || !m.ok {
            continue;
        }
        let machine = m
            .target_tags
            .iter()
            .find_map(|t| t.strip_prefix("flightdeck-machine="))
            .unwrap_or("?")
            .to_string();
        *creates.entry((m.operation.clone(), machine)).or_default() += 1;
    }
    assert!(!creates.is_empty(), "servers and members were created");
    for ((op, machine), n) in &creates {
        assert_eq!(*n, 1, "{op} for machine {machine} happened {n} times");
    }
    let world = run.cloud.snapshot();
    let cp_servers = world
        .servers
        .iter()
        .filter(|s| s.name.starts_with("demo-cp-"))
        .count();
    assert_eq!(cp_servers, 3, "exactly three control-plane servers remain");
    assert_eq!(world.members.len(), 3, "exactly three members remain");
}

#[tokio::test]
async fn the_same_scenario_and_seed_give_the_same_timeline() {
    let a = run_named(SEED_001, RunOptions::default()).await;
    let b = run_named(SEED_001, RunOptions::default()).await;
    assert_eq!(a.timeline, b.timeline);
    assert_eq!(a.timeline_hash(), b.timeline_hash());
    assert_eq!(a.api_calls, b.api_calls);
    let other = run_named(
        SEED_001,
        RunOptions {
            seed: Some(99),
            ..RunOptions::default()
        },
    )
    .await;
    assert_ne!(
        a.timeline_hash(),
        other.timeline_hash(),
        "another seed explores another timeline"
    );
}
