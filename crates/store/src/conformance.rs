//! The suite every [`Backend`](crate::Backend) passes: the embedded store runs it in its
//! unit tests, and `flightdeck-etcd` runs it against a real etcd cluster. Each check
//! panics with what it saw; `prefix` keeps the keys of one run apart from another's
//! (an etcd cluster outlives the runs of a test script).

use crate::{EVENTS_PER_KEY_MAX, Store, Write};

/// Runs every check on `store`.
pub fn run(store: &Store, prefix: &str) {
    records_are_put_read_listed_and_removed(store, prefix);
    a_commit_of_many_writes_is_applied_whole(store, prefix);
    events_are_kept_in_order_and_bounded(store, prefix);
    an_unreadable_record_is_reported_with_its_key(store, prefix);
    a_commit_whose_expectation_fails_writes_nothing(store, prefix);
}

/// The keys of `table` that begin with `prefix`.
fn keys_of(store: &Store, table: &str, prefix: &str) -> Vec<String> {
    store
        .keys(table)
        .expect("keys")
        .into_iter()
        .filter(|k| k.starts_with(prefix))
        .collect()
}

fn records_are_put_read_listed_and_removed(store: &Store, prefix: &str) {
    let (a, b) = (format!("{prefix}demo"), format!("{prefix}other"));
    store
        .commit(vec![
            Write::put("memory", &a, &vec![1, 2, 3]),
            Write::put("memory", &b, &vec![4]),
            Write::put("status", &a, &"Ready"),
        ])
        .expect("commit");
    assert_eq!(
        store.get::<Vec<i32>>("memory", &a).expect("get"),
        Some(vec![1, 2, 3])
    );
    assert_eq!(keys_of(store, "memory", prefix), vec![a.clone(), b.clone()]);
    let scanned: Vec<(String, Vec<u8>)> = store
        .scan_raw("memory")
        .expect("scan")
        .into_iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .collect();
    assert_eq!(
        scanned,
        vec![
            (a.clone(), b"[1,2,3]".to_vec()),
            (b.clone(), b"[4]".to_vec())
        ],
        "a scan gives every record with its bytes, in key order"
    );
    assert_eq!(keys_of(store, "status", prefix), vec![a.clone()]);
    store
        .commit(vec![Write::Remove {
            table: "memory",
            key: a.clone(),
        }])
        .expect("remove");
    assert_eq!(store.get::<Vec<i32>>("memory", &a).expect("get"), None);
    assert_eq!(keys_of(store, "memory", prefix), vec![b]);
    assert!(
        keys_of(store, "memor", prefix).is_empty(),
        "a table's name is not a prefix of another's"
    );
}

fn a_commit_of_many_writes_is_applied_whole(store: &Store, prefix: &str) {
    let key = format!("{prefix}atomic");
    let writes: Vec<Write> = (0..20)
        .map(|i| Write::put("memory", &format!("{key}-{i:02}"), &i))
        .chain((0..20).map(|i| Write::event(&key, &i)))
        .collect();
    store.commit(writes).expect("a commit of 40 writes");
    assert_eq!(keys_of(store, "memory", &key).len(), 20);
    assert_eq!(
        store.events::<u32>(&key).expect("events"),
        (0..20).collect::<Vec<u32>>()
    );
}

fn events_are_kept_in_order_and_bounded(store: &Store, prefix: &str) {
    let (demo, other) = (format!("{prefix}ev-demo"), format!("{prefix}ev-other"));
    let all: Vec<u64> = (0..(EVENTS_PER_KEY_MAX + 5)).collect();
    for chunk in all.chunks(50) {
        store
            .commit(chunk.iter().map(|i| Write::event(&demo, i)).collect())
            .expect("commit");
    }
    store
        .commit(vec![Write::event(&other, &99u64)])
        .expect("commit");
    let events: Vec<u64> = store.events(&demo).expect("events");
    assert_eq!(events.len() as u64, EVENTS_PER_KEY_MAX);
    assert_eq!(events.first(), Some(&5));
    assert_eq!(events.last(), Some(&(EVENTS_PER_KEY_MAX + 4)));
    store
        .commit(vec![Write::ClearEvents { key: demo.clone() }])
        .expect("clear");
    assert!(store.events::<u64>(&demo).expect("events").is_empty());
    assert_eq!(store.events::<u64>(&other).expect("events"), vec![99]);
}

fn an_unreadable_record_is_reported_with_its_key(store: &Store, prefix: &str) {
    let key = format!("{prefix}typed");
    store
        .commit(vec![Write::put("memory", &key, &"text")])
        .expect("commit");
    let err = store
        .get::<Vec<u8>>("memory", &key)
        .expect_err("wrong type");
    assert!(err.to_string().contains(&format!("memory/{key}")), "{err}");
}

fn a_commit_whose_expectation_fails_writes_nothing(store: &Store, prefix: &str) {
    let (held, mine) = (format!("{prefix}ledger-b"), format!("{prefix}ledger-a"));
    let expect = |json: Option<Vec<u8>>| Write::Expect {
        table: "memory",
        key: held.clone(),
        json,
    };
    store
        .commit(vec![expect(None), Write::put("memory", &mine, &1)])
        .expect("absent, as expected");
    store
        .commit(vec![Write::put("memory", &held, &"b holds it")])
        .expect("another writer");
    let read = store.get_raw("memory", &held).expect("reads");
    let err = store
        .commit(vec![
            expect(None),
            Write::put("memory", &mine, &2),
            Write::event(&mine, &2),
        ])
        .expect_err("the record exists now");
    assert!(
        matches!(err, crate::StoreError::Conflict { .. }) && err.to_string().contains(&held),
        "{err}"
    );
    assert_eq!(
        store.get::<u32>("memory", &mine).expect("get"),
        Some(1),
        "nothing written"
    );
    assert!(
        store.events::<u32>(&mine).expect("events").is_empty(),
        "no event appended"
    );
    store
        .commit(vec![expect(read.clone()), Write::put("memory", &mine, &3)])
        .expect("unchanged since it was read");
    assert_eq!(store.get::<u32>("memory", &mine).expect("get"), Some(3));
    let err = store
        .commit(vec![
            expect(Some(b"\"another value\"".to_vec())),
            Write::put("memory", &mine, &4),
        ])
        .expect_err("changed since");
    assert!(matches!(err, crate::StoreError::Conflict { .. }), "{err}");
    assert_eq!(store.get::<u32>("memory", &mine).expect("get"), Some(3));
}
