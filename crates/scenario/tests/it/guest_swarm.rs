//! G1 findings of the swarm once the workload clusters ran pods (10,000 seeds from
//! 42000000 and CI's run from 103142435, on 625d423; 10,000 from 43000000 on d04df84):
//! each seed replays as it failed and passes now.

use flightdeck_scenario::swarm::{SwarmOptions, run_seed};

/// Runs one swarm seed as `sim swarm` does (lagging restores drawn) and asserts that it
/// passes.
fn passes(seed: u64) {
    let options = SwarmOptions {
        seeds: 1,
        from: seed,
        jobs: 1,
        disabled: Vec::new(),
        check_determinism: false,
        lagging_store: true,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let outcome = runtime.block_on(run_seed(seed, &options));
    assert!(
        outcome.failure.is_none(),
        "seed {seed}: {:#?}",
        outcome.failure
    );
}

/// G1 and F9, seeds 42005826 and 42000075 (11 seeds in all): a control-plane machine
/// being rolled out whose VMI KubeVirt evacuated at the same time was drained twice in
/// one pass, by its removal and by F9. Both cordoned the node, the plan was refused as
/// two actions on one node, and so was every pass after: the VMI blocked its infra node
/// for 35 minutes. One cordon and one eviction per pod now serve both drains.
#[test]
fn g1_a_machine_removed_while_kubevirt_evacuates_it_is_drained_once_per_pass() {
    passes(42_005_826);
    passes(42_000_075);
}

/// G1, seed 103142837: a scale-down's drain began while the node list was empty, so the
/// node was cordoned only when the list came back, 4m22s into its 10m deadline, and a
/// pod under its budget was lost at the deadline. The drain now starts again when the
/// node is first seen: its pods get the whole `nodeDrainTimeout` from the cordon.
///
/// Seeds 43004743 and 43009015: the list stayed blind past the deadline (a dropped
/// requeue hid the minute it came back), and the machine went with its pods, never
/// cordoned. A node never seen through a blind list is now waited for without deadline.
#[test]
fn g1_a_drain_begun_while_the_node_list_was_blind_gives_its_pods_the_whole_timeout() {
    passes(103_142_837);
    passes(42_000_829);
    passes(43_004_743);
    passes(43_009_015);
}

/// Seed 43006849: a KubeVirt cluster ready only while the API rate-limited every call,
/// then deleted; `rulesRestored` had never been judged, and the run called it failed
/// (a bug in the check: it did not apply).
#[test]
fn a_cluster_ready_only_during_an_outage_leaves_the_flight_checks_not_applicable() {
    passes(43_006_849);
}

/// F3 and G1, seed 103142548: a pool scaled to 0 and back to 1 while its machine was
/// being drained makes a new machine beside the one leaving. The check counted that as
/// a repair begun while the node list was empty; a machine whose guest node is cordoned
/// is leaving, as a deleting server is (a bug in the check).
#[test]
fn f3_a_new_machine_beside_one_being_drained_is_no_repair() {
    passes(103_142_548);
}

/// F11 and G1, seed 42001508: an operator deleted a control-plane machine; flightdeck
/// deleted its stale Node and made the machine again. The Node carries its machine's
/// tags, and the check took the Node's deletion for the machine's (a bug in the check).
#[test]
fn f11_deleting_a_gone_machines_node_is_not_deleting_the_machine() {
    passes(42_001_508);
    passes(42_000_692);
}

/// F3, seed 44014283 (20,000 from 44000000): during a build the workload API answered
/// 429 while every control-plane member was ONLINE, and a machine was replaced because
/// "the cluster's API never came up". A member the health monitor finds ONLINE serves
/// the API: no repair for an API that serves but cannot be read.
#[test]
fn f3_an_api_whose_members_are_online_is_not_taken_for_one_that_never_came_up() {
    passes(44_014_283);
}

/// G1, seed 44019776: a KubeVirt drain held by a disruption budget under `api.errorRate`
/// polled every 5 s for ten minutes, and the cloud refused 241 of its calls in ten
/// minutes (`callBudget`, at most 240). A drain now polls every 5 s for its first
/// minute, then every 20 s, as Cluster API requeues a drain.
#[test]
fn g1_a_drain_held_by_a_budget_polls_slower_after_its_first_minute() {
    passes(44_019_776);
}

/// F9 and G1, seed 45005134 (20,000 from 45000000): a KubeVirt control-plane VMI waiting
/// for another to come back polled every 5 s under `api.errorRate` and the cloud
/// refused 241 calls in ten minutes; such waits now poll as drains do (slower after a
/// minute).
#[test]
fn f9_a_control_plane_evacuation_waiting_its_turn_polls_slower_after_a_minute() {
    passes(45_005_134);
}

/// F2, seed 45003950: an operator deleted cp-4, a lagging restore forgot it, and cp-4 was
/// made again under the same name. Its record took the old machine's member (found by
/// the machine tag before the new server was listed) for its own: the pool kept a
/// member on a dead address and the new machine never got one. By tag, a member is a
/// machine's only on its listed server's address; one on another address is an
/// earlier machine's, an orphan.
#[test]
fn f2_a_machine_made_again_under_its_name_does_not_take_the_old_member() {
    passes(45_003_950);
}

/// F3 and F9, seed 149 (`sim swarm --seeds 200 --from 1`, CI's CLI test): a KubeVirt pool
/// scaled to 0 while F9 had two of its nodes cordoned; the repair check left cordoned
/// machines out of what the scale-down left, then counted them as repairs once they
/// were uncordoned (a bug in the check). A scale-down now counts every live machine.
#[test]
fn f3_machines_cordoned_by_an_evacuation_count_in_a_scale_down() {
    passes(149);
}

/// G1 (`nodesCleaned`), seed 47005197 (10,000 from 47000000): an operator deleted an
/// OpenNebula worker VM and flightdeck made it again under the same name. The new
/// kubelet registered a second Node of that name beside the old one (the simulator
/// keyed Nodes by machine only), and the old one stayed listed. A real kubelet takes
/// over the Node of its name; the simulator now does too.
#[test]
fn g1_a_machine_made_again_under_its_name_takes_over_its_node() {
    passes(47_005_197);
}
