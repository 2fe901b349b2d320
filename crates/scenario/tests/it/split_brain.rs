//! Split brain (issue 17): replicas share a fleet on a store with etcd's lease
//! semantics; one is paused past its lease in the middle of a rollout, with reconciles
//! it had started, and resumed. Every check reads the simulator's mutation log and
//! servers and the lease hub's record of who held each claim when.

use flightdeck_scenario::leases::Unfenced;
use flightdeck_scenario::split_brain::{SplitBrainOutcome, run_split_brain};

const SEEDS: u64 = 12;

async fn seeds(unfenced: Unfenced) -> Vec<SplitBrainOutcome> {
    let mut out = Vec::new();
    for seed in 1..=SEEDS {
        out.push(
            run_split_brain(seed, unfenced)
                .await
                .expect("the seed runs"),
        );
    }
    out
}

/// No seed failed, and the fence did refuse stale reconciles of resumed replicas.
fn all_safe(outcomes: &[SplitBrainOutcome], what: &str) {
    for o in outcomes {
        assert!(
            o.violation.is_none(),
            "{what}, seed {}: {:?}\n{:?}",
            o.case.seed,
            o.violation,
            o.case
        );
    }
    let fenced: usize = outcomes.iter().map(|o| o.fenced).sum();
    assert!(
        fenced > 0,
        "{what}: the fence refused nothing: {outcomes:#?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_replica_paused_past_its_lease_never_mutates_what_it_lost() {
    let outcomes = seeds(Unfenced::default()).await;
    all_safe(&outcomes, "every fence on");
    for o in &outcomes {
        if !o.held_at_pause.is_empty() {
            let t = o.takeover_s.expect("taken over");
            assert!(
                t <= o.case.ttl_s as f64 + 2.0,
                "seed {}: taken over after {t}s",
                o.case.seed
            );
        }
    }
    assert!(
        outcomes
            .iter()
            .any(|o| o.mutations_after_resume_by_paused > 0),
        "a resumed replica goes back to work once it holds claims again: {outcomes:#?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn either_fence_alone_stops_a_resumed_replica() {
    let no_deadline = Unfenced {
        own_deadline: true,
        claim_revision: false,
    };
    all_safe(&seeds(no_deadline).await, "own-clock deadline off");
    let no_compare = Unfenced {
        own_deadline: false,
        claim_revision: true,
    };
    all_safe(&seeds(no_compare).await, "claim revision compare off");
}

#[tokio::test(flavor = "current_thread")]
async fn without_both_fences_a_resumed_replica_acts_on_clusters_it_lost() {
    let off = Unfenced {
        own_deadline: true,
        claim_revision: true,
    };
    let outcomes = seeds(off).await;
    let caught = outcomes.iter().find_map(|o| {
        o.violation
            .as_ref()
            .filter(|(check, _)| check == "fencedMutations")
    });
    let (_, message) = caught.expect("some seed catches the unfenced replica");
    assert!(message.contains("without holding its claim"), "{message}");
}
