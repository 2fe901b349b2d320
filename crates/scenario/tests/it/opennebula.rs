//! F1 on OpenNebula: templates and images that never fight, proved against the simulated
//! OpenNebula through the real XML-RPC provider, in process and over loopback HTTP.

use flightdeck_engine::EngineConfig;
use flightdeck_plan::{PlanOptions, TemplatePolicy};
use flightdeck_scenario::report::Report;
use flightdeck_scenario::{Run, RunOptions, load_scenario, run, run_wire};
use flightdeck_sim::Mutation;

async fn run_named(name: &str, options: RunOptions, wire: bool) -> Run {
    let loaded = load_scenario(name).expect("built-in scenario loads");
    let run = if wire {
        run_wire(&loaded, &options, &mut |_| {}).await
    } else {
        run(&loaded, &options, &mut |_| {}).await
    };
    run.unwrap_or_else(|e| panic!("{name} (wire: {wire}): {e}"))
}

fn verdict<'a>(report: &'a Report, name: &str) -> &'a flightdeck_scenario::invariants::Verdict {
    report
        .invariants
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("{name} was not checked"))
}

fn calls<'a>(run: &'a Run, method: &'a str) -> impl Iterator<Item = Mutation> + 'a {
    run.cloud
        .mutations()
        .into_iter()
        .filter(move |m| m.operation == method)
}

fn assert_passed(report: &Report) {
    assert!(
        report.passed,
        "{:#?} {:#?}",
        report.invariants, report.expectations
    );
}

#[tokio::test]
async fn f1_two_clusters_with_the_same_templates_share_them_and_delete_none() {
    for wire in [false, true] {
        let run = run_named("f1-shared-templates", RunOptions::default(), wire).await;
        assert_passed(&run.report);
        assert_eq!(
            calls(&run, "one.template.delete").count(),
            0,
            "seed 000: zero template deletes (wire: {wire})"
        );
        let world = run.cloud.snapshot();
        // master and worker, registered once for both clusters; one image.
        assert_eq!(world.one_templates.len(), 2, "{:#?}", world.one_templates);
        assert_eq!(world.one_images.len(), 1);
        assert_eq!(calls(&run, "one.template.allocate").count(), 2);
        // Both clusters' VMs come from the shared templates.
        let ids: Vec<u32> = world.one_templates.iter().map(|t| t.id).collect();
        let vms: Vec<_> = world.one_vms.iter().filter(|v| v.state == 3).collect();
        assert_eq!(vms.len(), 6, "2 + 2 workers and 2 control planes");
        assert!(
            vms.iter()
                .all(|v| v.template_id.is_some_and(|t| ids.contains(&t)))
        );
    }
}

#[tokio::test]
async fn f1_the_upstream_stamp_and_delete_policy_fights_forever_and_is_caught() {
    let options = RunOptions {
        engine: EngineConfig {
            plan: PlanOptions {
                templates: TemplatePolicy::UpstreamStampByName,
                ..PlanOptions::default()
            },
            // Upstream decided by name and stamp, not by record.
            ownership_check: false,
            ..EngineConfig::default()
        },
        ..RunOptions::default()
    };
    let run = run_named("f1-shared-templates", options, false).await;
    assert!(
        !verdict(&run.report, "noChurn").held,
        "the upstream policy must violate noChurn"
    );
    let deletes = calls(&run, "one.template.delete").count();
    assert!(
        deletes >= 20,
        "the two clusters delete each other's template over and over: {deletes}"
    );
    // The IDs climb, as in the field (2,989 → 33,613).
    let last = run
        .cloud
        .snapshot()
        .one_templates
        .iter()
        .map(|t| t.id)
        .max();
    assert!(last.is_some_and(|id| id >= 20), "{last:?}");
}

#[tokio::test]
async fn f1_a_manage_lock_blocks_nothing_and_new_content_gets_a_sibling() {
    for wire in [false, true] {
        let run = run_named("f1-manage-lock", RunOptions::default(), wire).await;
        assert_passed(&run.report);
        let world = run.cloud.snapshot();
        let masters: Vec<_> = world
            .one_templates
            .iter()
            .filter(|t| t.name.starts_with("master-"))
            .collect();
        assert_eq!(
            masters.len(),
            2,
            "the original and its sibling: {masters:#?}"
        );
        let locked: Vec<_> = masters.iter().filter(|t| t.lock.is_some()).collect();
        assert_eq!(locked.len(), 1, "the original stays, locked: {masters:#?}");
        assert!(
            calls(&run, "one.template.delete")
                .all(|m| m.target_id != format!("template/{}", locked[0].id)),
            "the locked template is never asked to be deleted"
        );
        assert!(
            calls(&run, "one.template.update").next().is_none(),
            "templates are never updated, only registered anew"
        );
        // Every control-plane VM now comes from the sibling.
        let sibling = masters.iter().find(|t| t.lock.is_none()).map(|t| t.id);
        let cp: Vec<_> = world
            .one_vms
            .iter()
            .filter(|v| v.state == 3 && v.name.contains("-cp-"))
            .collect();
        assert_eq!(cp.len(), 3);
        assert!(cp.iter().all(|v| v.template_id == sibling), "{cp:#?}");
        assert!(
            run.report
                .timeline
                .iter()
                .any(|e| e.reason == "TemplateLeftLocked"),
            "flightdeck says it left the locked template in place"
        );
    }
}

#[tokio::test]
async fn f1_a_use_lock_is_reported_with_opennebula_s_message_and_retried_slowly() {
    for wire in [false, true] {
        let run = run_named("f1-use-lock", RunOptions::default(), wire).await;
        assert_passed(&run.report);
        let refused: Vec<_> = run
            .report
            .timeline
            .iter()
            .filter(|e| e.reason == "CloudError")
            .collect();
        assert!(!refused.is_empty());
        assert!(
            refused.iter().all(|e| e
                .message
                .contains("[one.template.instantiate] User [0] : TEMPLATE is locked.")),
            "{refused:#?}"
        );
        // The lock lasts 24 minutes from the scale-up: one try every 5 minutes, never
        // a hot loop.
        let tries = calls(&run, "one.template.instantiate")
            .filter(|m| !m.ok)
            .count();
        assert!((3..=6).contains(&tries), "{tries} refused instantiations");
        assert!(verdict(&run.report, "callBudget").held);
    }
}

#[tokio::test]
async fn f1_deleting_the_cluster_removes_what_flightdeck_registered_once_the_vms_are_done() {
    let run = run_named("opennebula-lifecycle", RunOptions::default(), false).await;
    assert_passed(&run.report);
    let world = run.cloud.snapshot();
    assert!(world.one_templates.is_empty(), "{:#?}", world.one_templates);
    assert!(world.one_images.is_empty(), "{:#?}", world.one_images);
    assert!(
        world.one_vms.iter().all(|v| v.state == 6),
        "every VM is DONE"
    );
    // Once deletion is asked for (at 50m), templates go only after the last VM is
    // terminated, and the image after the templates.
    let deletion = flightdeck_cloud::Timestamp::SIM_EPOCH.plus_millis(50 * 60 * 1000);
    let log: Vec<Mutation> = run
        .cloud
        .mutations()
        .into_iter()
        .filter(|m| m.at >= deletion)
        .collect();
    let last_terminate = log
        .iter()
        .filter(|m| m.operation == "one.vm.action")
        .map(|m| m.at)
        .max()
        .expect("VMs were terminated");
    let first_template_delete = log
        .iter()
        .filter(|m| m.operation == "one.template.delete")
        .map(|m| m.at)
        .min()
        .expect("templates were deleted");
    let image_delete = log
        .iter()
        .filter(|m| m.operation == "one.image.delete")
        .map(|m| m.at)
        .min()
        .expect("the image was deleted");
    assert!(last_terminate < first_template_delete);
    assert!(first_template_delete < image_delete);
}
