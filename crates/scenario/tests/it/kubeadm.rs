//! Issue 41: flightdeck makes the Kubernetes cluster, and the simulator judges every
//! machine's bootstrap on its own (bootstrapValid, singleInit). Each check is shown to
//! go red with the mechanism it guards switched off.

use flightdeck_plan::{Disabled, Mechanism};
use flightdeck_scenario::RunOptions;

use crate::common::{report, verdict};

/// Scenario `name` passes, and each of `checks` held and was checked.
async fn passes_with(name: &str, checks: &[&str]) {
    let r = report(name, &RunOptions::default()).await;
    assert!(r.passed, "{:#?}", r.invariants);
    for check in checks {
        let v = verdict(&r, check);
        assert!(v.held && v.checks > 0, "{v:?}");
    }
}

#[tokio::test]
async fn a_machine_that_boots_past_its_tokens_life_still_joins_because_its_token_is_moved_on() {
    passes_with("kubeadm-slow-boot", &["bootstrapValid"]).await;
}

#[tokio::test]
async fn without_token_refresh_a_slow_machines_token_runs_out_and_bootstrap_valid_goes_red() {
    let mut options = RunOptions::default();
    options.engine.plan.disabled = Disabled::of([Mechanism::TokenRefresh]);
    let r = report("kubeadm-slow-boot", &options).await;
    let valid = verdict(&r, "bootstrapValid");
    assert!(!valid.held, "{valid:?}");
    let message = &valid.first_violation.as_ref().expect("a violation").message;
    assert!(
        message.contains("expired before the machine joined"),
        "{message}"
    );
}

#[tokio::test]
async fn a_token_an_operator_deletes_costs_its_machine_a_repair_and_no_false_alarm() {
    passes_with("kubeadm-token-deleted", &["bootstrapValid"]).await;
}

#[tokio::test]
async fn a_control_plane_upgrade_joins_machines_rendered_for_the_new_version() {
    passes_with("kubeadm-upgrade", &["bootstrapValid", "singleInit"]).await;
}
