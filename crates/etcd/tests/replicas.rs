//! Replicas on a real etcd cluster: claims spread and fence every commit.
//! `scripts/test-etcd.sh` starts three members and runs this with `--features client`.

#![cfg(feature = "client")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flightdeck_etcd::{EtcdOptions, Replica};
use flightdeck_store::{Store, StoreError, Write};

fn options() -> EtcdOptions {
    let url = std::env::var("FLIGHTDECK_TEST_ETCD").expect(
        "FLIGHTDECK_TEST_ETCD names the etcd cluster to test against (scripts/test-etcd.sh starts one and sets it)",
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    EtcdOptions {
        prefix: format!("/flightdeck-replicas-{nanos}/"),
        max_txn_ops: 1024,
        ..EtcdOptions::from_url(&url).expect("FLIGHTDECK_TEST_ETCD is an etcd:// address")
    }
}

fn clusters(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("c{i:02}")).collect()
}

fn join(o: &EtcdOptions, id: &str) -> (Store, Replica) {
    Replica::join(
        o,
        id,
        "http://127.0.0.1:1",
        Duration::from_secs(10),
        Arc::new(Instant::now),
    )
    .expect("joins")
}

#[test]
fn thirty_clusters_over_three_replicas_each_held_by_exactly_one_and_none_above_forty_percent() {
    let o = options();
    let all = clusters(30);
    let replicas: Vec<(Store, Replica)> =
        ["r1", "r2", "r3"].iter().map(|id| join(&o, id)).collect();
    // Two rounds: the first replica to balance may claim before the others joined.
    for _ in 0..2 {
        for (_, r) in &replicas {
            r.balance(&all).expect("balances");
        }
    }
    let mut owner: BTreeMap<String, &str> = BTreeMap::new();
    for (_, r) in &replicas {
        let held = r.held();
        assert!(
            held.len() * 10 <= 30 * 4,
            "{} holds {} of 30",
            r.id(),
            held.len()
        );
        for c in held {
            if let Some(other) = owner.insert(c.clone(), r.id()) {
                panic!("{c} is held by {other} and {}", r.id());
            }
        }
    }
    assert_eq!(owner.len(), 30, "every cluster is held: {owner:?}");
    for (_, r) in replicas {
        r.leave().expect("leaves");
    }
}

#[test]
fn a_replica_writes_a_cluster_only_while_it_holds_its_claim() {
    let o = options();
    let (store1, r1) = join(&o, "r1");
    r1.balance(&clusters(2)).expect("balances");
    assert_eq!(r1.held().len(), 2);
    store1
        .commit(vec![Write::put("memory", "c00", &1u32)])
        .expect("held: written");
    // Another replica joins and takes its share: r1 lets go on its next balance.
    let (store2, r2) = join(&o, "r2");
    r1.balance(&clusters(2)).expect("r1 balances");
    r2.balance(&clusters(2)).expect("r2 balances");
    let lost = clusters(2)
        .into_iter()
        .find(|c| !r1.held().contains(c))
        .expect("r1 let one go");
    assert!(r2.held().contains(&lost));
    let err = store1
        .commit(vec![Write::put("memory", &lost, &2u32)])
        .expect_err("r1 no longer holds it");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
    store2
        .commit(vec![Write::put("memory", &lost, &3u32)])
        .expect("r2 holds it");
    assert_eq!(store2.get::<u32>("memory", &lost).expect("get"), Some(3));
    // Specs are written by whoever serves the API: not fenced.
    store1
        .commit(vec![Write::put("spec", &lost, &"spec")])
        .expect("a spec is not fenced");
    r1.leave().expect("leaves");
    r2.leave().expect("leaves");
}

/// etcd's `del`, as an operator (or an expired lease) would remove a key.
fn etcdctl_del(o: &EtcdOptions, key: &str) {
    let status = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &o.endpoints.join(","), "del", key])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("etcdctl runs (scripts/etcd-cluster.sh installs it)");
    assert!(status.success(), "etcdctl del {key}");
}

#[test]
fn a_claim_that_moved_behind_a_replica_s_back_fences_its_commit_off() {
    let o = options();
    let (store1, r1) = join(&o, "r1");
    r1.balance(&clusters(1)).expect("balances");
    assert_eq!(r1.held().len(), 1);
    // r1 is paused: its claim disappears (as when its lease expires) and r2, alone in
    // the assignment once r1 is gone from it too, claims the cluster. r1's fence still
    // lists its old claim; etcd's compare of the claim's revision refuses the commit.
    etcdctl_del(&o, &format!("{}claims/c00", o.prefix));
    etcdctl_del(&o, &format!("{}replicas/r1", o.prefix));
    let (_store2, r2) = join(&o, "r2");
    r2.balance(&clusters(1)).expect("balances");
    assert_eq!(r2.held().len(), 1);
    assert_eq!(r1.held().len(), 1, "r1 has not noticed");
    let err = store1
        .commit(vec![Write::put("memory", "c00", &9u32)])
        .expect_err("fenced by etcd");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
    assert!(
        err.to_string().contains("claimed by another replica"),
        "{err}"
    );
    assert_eq!(
        store1.get::<u32>("memory", "c00").expect("get"),
        None,
        "nothing written"
    );
    assert!(r1.held().is_empty(), "r1 forgot the claim it lost");
    r2.leave().expect("leaves");
}

#[test]
fn a_replica_whose_lease_ran_out_on_its_own_clock_writes_nothing() {
    let o = options();
    // A clock that jumps 11 s ahead after the replica joined.
    let start = Instant::now();
    let skew = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = skew.clone();
    let now = Arc::new(move || {
        if s.load(std::sync::atomic::Ordering::SeqCst) {
            start + Duration::from_secs(11)
        } else {
            start
        }
    });
    let (store, r) =
        Replica::join(&o, "r1", "http://127.0.0.1:1", Duration::from_secs(10), now).expect("joins");
    r.balance(&clusters(1)).expect("balances");
    store
        .commit(vec![Write::put("memory", "c00", &1u32)])
        .expect("in time");
    skew.store(true, std::sync::atomic::Ordering::SeqCst);
    let err = store
        .commit(vec![Write::put("memory", "c00", &2u32)])
        .expect_err("past its deadline");
    assert!(err.to_string().contains("lease has run out"), "{err}");
    r.leave().expect("leaves");
}

#[test]
fn two_live_replicas_cannot_share_a_name() {
    let o = options();
    let (_s, r1) = join(&o, "same");
    let err = Replica::join(
        &o,
        "same",
        "http://127.0.0.1:1",
        Duration::from_secs(10),
        Arc::new(Instant::now),
    )
    .err()
    .expect("refused");
    assert!(err.to_string().contains("already named same"), "{err}");
    r1.leave().expect("leaves");
}

#[test]
fn a_reconcile_started_under_a_claim_stops_once_that_claim_is_gone_even_if_claimed_again() {
    let o = options();
    let (store, mut r) = join(&o, "r1");
    r.balance(&clusters(1)).expect("balances");
    let first = store.act_token("c00").expect("held");
    store.may_act("c00", Some(first)).expect("its own claim");
    // The replica joins again (as after a pause past its lease's TTL): it claims the
    // same cluster under a new revision.
    r.rejoin().expect("joins again");
    r.balance(&clusters(1)).expect("balances");
    let second = store.act_token("c00").expect("held again");
    assert_ne!(first, second, "a new claim has a new revision");
    let err = store
        .may_act("c00", Some(first))
        .expect_err("the old claim's reconcile stops");
    assert!(err.to_string().contains("claimed again"), "{err}");
    store
        .may_act("c00", Some(second))
        .expect("the new claim's reconcile acts");
    r.leave().expect("leaves");
}

#[test]
fn a_replica_whose_lease_expired_is_told_so_and_joins_again_without_its_claims() {
    let o = options();
    let ttl = Duration::from_secs(5);
    let (_store, mut r) =
        Replica::join(&o, "r1", "http://127.0.0.1:1", ttl, Arc::new(Instant::now)).expect("joins");
    r.balance(&clusters(2)).expect("balances");
    assert_eq!(r.held().len(), 2);
    // Paused past the TTL: no renewal reaches etcd, which drops the lease.
    std::thread::sleep(ttl + Duration::from_secs(2));
    let err = r.keep_alive().expect_err("the lease is gone");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
    r.rejoin().expect("joins again");
    assert!(
        r.held().is_empty(),
        "the old claims went with the old lease"
    );
    r.balance(&clusters(2)).expect("balances");
    assert_eq!(r.held().len(), 2, "claimed again under the new lease");
    r.keep_alive().expect("the new lease renews");
    r.leave().expect("leaves");
}

/// A TCP relay to one etcd member that can be made to stop answering, as a member cut
/// off from the others or a stopped process does: connections stay open, nothing
/// comes back.
struct StallingRelay {
    address: String,
    stalled: Arc<std::sync::atomic::AtomicBool>,
}

impl StallingRelay {
    fn to(member: &str) -> StallingRelay {
        use std::io::{Read, Write as _};
        use std::net::{TcpListener, TcpStream};
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let address = listener.local_addr().expect("an address").to_string();
        let stalled = Arc::new(AtomicBool::new(false));
        let member = member.to_string();
        let stall = stalled.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(upstream) = TcpStream::connect(&member) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (
                        client.try_clone().expect("clones"),
                        upstream.try_clone().expect("clones"),
                    ),
                    (upstream, client),
                ] {
                    let stall = stall.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        while let Ok(n) = from.read(&mut buf) {
                            // Stalled: what arrives is held back, never passed on.
                            if n == 0 || stall.load(Ordering::SeqCst) {
                                if n == 0 {
                                    return;
                                }
                                continue;
                            }
                            if to.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    });
                }
            }
        });
        StallingRelay { address, stalled }
    }

    fn stall(&self) {
        self.stalled
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_renewal_that_moves_past_a_member_that_does_not_answer_keeps_the_replica_acting() {
    let mut o = options();
    let relay = StallingRelay::to(&o.endpoints[0]);
    o.endpoints[0] = relay.address.clone();
    // The call timeout is longer than the TTL less the margin: a deadline counted from
    // the first attempt would be past before the renewal on the next member is sent.
    o.timeout = Duration::from_secs(4);
    let ttl = Duration::from_secs(6);
    let (store, r) =
        Replica::join(&o, "r1", "http://127.0.0.1:1", ttl, Arc::new(Instant::now)).expect("joins");
    r.balance(&clusters(1)).expect("balances");
    let token = store.act_token("c00").expect("held");
    relay.stall();
    let started = Instant::now();
    r.keep_alive()
        .expect("renewed through the next member once the first did not answer");
    assert!(
        started.elapsed() >= o.timeout,
        "the first member was tried and did not answer"
    );
    store
        .may_act("c00", Some(token))
        .expect("the lease was renewed just now: the replica acts");
    r.leave().expect("leaves");
}

#[test]
fn old_revisions_are_compacted_and_the_newest_values_stay() {
    let o = options();
    let (store, r) = join(&o, "r1");
    r.balance(&clusters(1)).expect("balances");
    for i in 0..20u32 {
        store
            .commit(vec![Write::put("memory", "c00", &i)])
            .expect("commits");
    }
    let to = r
        .compact(5)
        .expect("compacts")
        .expect("twenty writes are more than five revisions");
    let old = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &o.endpoints.join(",")])
        .args(["get", "--rev", &(to - 1).to_string(), &o.prefix, "--prefix"])
        .output()
        .expect("etcdctl runs (scripts/etcd-cluster.sh installs it)");
    let said = String::from_utf8_lossy(&old.stderr);
    assert!(
        !old.status.success() && said.contains("compacted"),
        "a revision before {to} is gone: {said}"
    );
    assert_eq!(
        store.get::<u32>("memory", "c00").expect("reads"),
        Some(19),
        "the newest value stays"
    );
    r.leave().expect("leaves");
}
