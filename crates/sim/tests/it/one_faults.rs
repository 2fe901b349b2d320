//! The OpenNebula faults: `one.rpcError` and `one.lockTemplate` (`one.imageError` and
//! `one.vmBootFailure` are in `one_images.rs` and `one_vms.rs`).

use crate::common;
use crate::one_support;

use common::{now, sim, wait_ms};
use flightdeck_cloud::Timestamp;
use flightdeck_sim::SimFault;
use flightdeck_spec::scenario::LockLevelSpec;
use flightdeck_spec::{Duration, FaultKind};
use one_support::*;

#[test]
fn rpc_error_answers_about_its_rate_of_calls_internal_and_replays() {
    let run = |seed| {
        let sim = sim(seed);
        sim.inject(SimFault {
            rate: Some(0.3),
            ..SimFault::new(FaultKind::OneRpcError, now(&sim))
        });
        (0..1_000)
            .map(|_| call(&sim, "one.system.version", vec![]))
            .collect::<Vec<_>>()
    };
    let answers = run(41);
    let failed: Vec<_> = answers
        .iter()
        .filter(|v| matches!(v, dxr::Value::Array(a) if a[0] == b(false)))
        .cloned()
        .collect();
    assert!(
        (230..=370).contains(&failed.len()),
        "{} of 1000 failed",
        failed.len()
    );
    let (msg, code, id) = fail(failed[0].clone());
    assert_eq!(
        msg,
        "[one.system.version] Internal error (simulated one.rpcError)"
    );
    assert_eq!((code, id), (INTERNAL, -1));
    let ok = answers
        .iter()
        .find(|v| matches!(v, dxr::Value::Array(a) if a[0] == b(true)));
    assert_eq!(ok.cloned().map(ok_str).as_deref(), Some("6.10.0"));
    assert_eq!(run(41), answers, "the same seed gives the same answers");
}

#[test]
fn lock_template_locks_matching_templates_at_its_start_and_unlocks_at_its_end() {
    let sim = sim(42);
    let kept = allocate_template(&sim, "flightdeck-web", VM_BODY);
    let other = allocate_template(&sim, "ops-tools", VM_BODY);
    let start = now(&sim).plus(Duration::from_millis(1_000));
    sim.inject(SimFault {
        end: Some(start.plus(Duration::from_millis(10_000))),
        level: Some(LockLevelSpec::Manage),
        template: Some("flightdeck-".into()),
        ..SimFault::new(FaultKind::OneLockTemplate, start)
    });
    wait_ms(&sim, 1_000);
    let lock = template(&sim, kept)
        .and_then(|t| t.lock)
        .expect("locked at the start");
    assert_eq!((lock.level, lock.owner), (2, 0));
    assert!(template(&sim, other).and_then(|t| t.lock).is_none());
    let later = allocate_template(&sim, "flightdeck-db", VM_BODY);
    assert!(
        template(&sim, later).and_then(|t| t.lock).is_none(),
        "created later: unlocked"
    );
    let (msg, code, _) = fail(call(&sim, "one.template.delete", vec![i(kept)]));
    assert_eq!(code, AUTHORIZATION);
    assert_eq!(
        msg,
        format!("[one.template.delete] User [0] : TEMPLATE is locked. [{kept}].")
    );
    assert!(
        ok_int(instantiate(&sim, kept, "vm-1", "")) >= 0,
        "MANAGE lets USE through"
    );
    wait_ms(&sim, 10_000);
    assert!(
        template(&sim, kept).and_then(|t| t.lock).is_none(),
        "unlocked at the end"
    );
    ok_int(call(&sim, "one.template.delete", vec![i(kept)]));
}

#[test]
fn lock_template_fault_comes_from_the_scenario_spec() {
    let spec: flightdeck_spec::scenario::Fault = lock_web_templates();
    let f = SimFault::from_spec(&spec, Timestamp::SIM_EPOCH);
    assert_eq!(f.level, Some(LockLevelSpec::Use));
    assert_eq!(f.template.as_deref(), Some("web"));
}

fn lock_web_templates() -> flightdeck_spec::scenario::Fault {
    flightdeck_spec::scenario::Fault {
        level: Some(LockLevelSpec::Use),
        template: Some(flightdeck_spec::Text::new("web").expect("a text")),
        ..flightdeck_spec::scenario::Fault::new(
            FaultKind::OneLockTemplate,
            Duration::from_millis(0),
        )
    }
}
