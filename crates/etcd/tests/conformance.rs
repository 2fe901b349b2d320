//! The store suite against a real etcd cluster: `scripts/test-etcd.sh` starts three
//! members on loopback and runs this with `--features client` and
//! FLIGHTDECK_TEST_ETCD set to their address.

#![cfg(feature = "client")]

use flightdeck_etcd::{EtcdOptions, connect};

fn endpoints() -> String {
    std::env::var("FLIGHTDECK_TEST_ETCD").expect(
        "FLIGHTDECK_TEST_ETCD names the etcd cluster to test against (scripts/test-etcd.sh starts one and sets it)",
    )
}

/// A prefix of this run's own, so that runs never see each other's keys.
fn fresh_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("/flightdeck-test-{nanos}/")
}

#[test]
fn the_etcd_store_passes_the_backend_suite() {
    let options = EtcdOptions {
        prefix: fresh_prefix(),
        max_txn_ops: 1024,
        ..EtcdOptions::from_url(&endpoints()).expect("FLIGHTDECK_TEST_ETCD is an etcd:// address")
    };
    let store = connect(&options).expect("connects to the test cluster");
    flightdeck_store::conformance::run(&store, "");
}

#[test]
fn an_unreachable_etcd_is_an_error_that_names_it() {
    let options = EtcdOptions {
        timeout: std::time::Duration::from_secs(1),
        ..EtcdOptions::from_url("etcd://127.0.0.1:1").expect("parses")
    };
    let err = connect(&options)
        .expect_err("nothing listens on port 1")
        .to_string();
    assert!(err.contains("etcd://127.0.0.1:1"), "{err}");
}

#[test]
fn a_commit_larger_than_etcd_allows_is_refused_whole_with_the_setting_to_change() {
    let options = EtcdOptions {
        prefix: fresh_prefix(),
        max_txn_ops: 16,
        ..EtcdOptions::from_url(&endpoints()).expect("parses")
    };
    let store = connect(&options).expect("connects");
    let writes: Vec<flightdeck_store::Write> = (0..20)
        .map(|i| flightdeck_store::Write::put("memory", &format!("k{i}"), &i))
        .collect();
    let err = store
        .commit(writes)
        .expect_err("20 operations > 16")
        .to_string();
    assert!(err.contains("--max-txn-ops"), "{err}");
    assert!(
        store.keys("memory").expect("keys").is_empty(),
        "nothing of it was written"
    );
}
