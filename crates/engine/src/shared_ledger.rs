//! The F1 ledger in a store that replicas share (etcd): what each cluster holds of the
//! shared OpenNebula templates and images, one record per object (`ledger` table, keys
//! `template/<id>` and `image/<id>`, each cluster → [`Held`]).
//!
//! An engine whose store is shared reads every record before it plans an OpenNebula
//! cluster, and commits its cluster's holdings into the records in the same
//! transaction as the cluster's memory, each guarded by the record's bytes as it read
//! them ([`Write::Expect`]). So two replicas never both conclude they are the last
//! holder of an object, and none takes up an object another is deleting: of two
//! commits that decided on the same record, the second finds its guard broken, writes
//! nothing, and its reconcile reads again and plans again.
//!
//! An engine alone on its store needs none of this: it keeps the ledger in memory and
//! decides under one lock (`reconcile.rs`).

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_plan::{Held, OneHoldings};
use flightdeck_store::{Store, StoreError, Write};

/// The ledger's table.
pub(crate) const T_LEDGER: &str = "ledger";

/// How often a commit of facts already true in the cloud (ids learned, deletions
/// confirmed) is tried again when another replica wrote the same records meanwhile.
const FACT_ATTEMPTS: usize = 5;

/// One object's holders: cluster → what it holds.
type Holders = BTreeMap<String, Held>;

/// Every ledger record as read: object key → (its bytes, its holders).
pub(crate) struct Snapshot {
    records: BTreeMap<String, (Vec<u8>, Holders)>,
}

impl Snapshot {
    pub(crate) fn read(store: &Store) -> Result<Snapshot, StoreError> {
        let mut records = BTreeMap::new();
        for (key, raw) in store.scan_raw(T_LEDGER)? {
            let holders: Holders =
                serde_json::from_slice(&raw).map_err(|e| StoreError::Corrupt {
                    path: store.describe(),
                    table: T_LEDGER.into(),
                    key: key.clone(),
                    message: e.to_string(),
                })?;
            records.insert(key, (raw, holders));
        }
        Ok(Snapshot { records })
    }

    /// What each cluster holds, as the records say: the ledger the planner and the
    /// race check read.
    pub(crate) fn holdings(&self) -> BTreeMap<String, OneHoldings> {
        let mut out: BTreeMap<String, OneHoldings> = BTreeMap::new();
        for (key, (_, holders)) in &self.records {
            for (cluster, held) in holders {
                let h = out.entry(cluster.clone()).or_default();
                let objects = if key.starts_with("image/") {
                    &mut h.images
                } else {
                    &mut h.templates
                };
                objects.insert(key.clone(), held.clone());
            }
        }
        out
    }

    /// The writes that make the records say what cluster `me` holds now, each guarded
    /// by the record as this snapshot read it. None when they say so already.
    pub(crate) fn writes(&self, me: &str, holdings: &OneHoldings) -> Vec<Write> {
        let mine: BTreeMap<String, &Held> = holdings.keys().collect();
        let keys: BTreeSet<&String> = self.records.keys().chain(mine.keys()).collect();
        let mut out = Vec::new();
        for key in keys {
            let (raw, before) = match self.records.get(key) {
                Some((raw, holders)) => (Some(raw.clone()), holders.clone()),
                None => (None, Holders::new()),
            };
            let mut after = before.clone();
            match mine.get(key) {
                Some(held) => after.insert(me.to_string(), (*held).clone()),
                None => after.remove(me),
            };
            if after == before {
                continue;
            }
            out.push(Write::Expect {
                table: T_LEDGER,
                key: key.clone(),
                json: raw,
            });
            out.push(if after.is_empty() {
                Write::Remove {
                    table: T_LEDGER,
                    key: key.clone(),
                }
            } else {
                Write::put(T_LEDGER, key, &after)
            });
        }
        out
    }
}

/// Before planning cluster `me` on a shared store: reads the records and puts what
/// they say in `ledger` (with `me`'s own holdings from its memory, which the records
/// follow). `None` on a store of one engine, or for a cluster that holds nothing
/// shared and is not on OpenNebula.
pub(crate) fn refresh(
    store: &Store,
    ledger: &mut BTreeMap<String, OneHoldings>,
    me: &str,
    mine: &OneHoldings,
    on_opennebula: bool,
) -> Result<Option<Snapshot>, StoreError> {
    if !store.shared() || (!on_opennebula && mine.is_empty()) {
        return Ok(None);
    }
    let snapshot = Snapshot::read(store)?;
    *ledger = snapshot.holdings();
    ledger.insert(me.to_string(), mine.clone());
    Ok(Some(snapshot))
}

/// Commits `writes` with the ledger records made to say what cluster `me` holds now
/// (`holdings`), for facts already true in the cloud: when another replica wrote the
/// same records meanwhile, it reads them again and commits again.
pub(crate) fn commit_facts(
    store: &Store,
    me: &str,
    holdings: &OneHoldings,
    writes: Vec<Write>,
) -> Result<(), StoreError> {
    let mut last = None;
    for _ in 0..FACT_ATTEMPTS {
        let snapshot = Snapshot::read(store)?;
        let mut all = writes.clone();
        all.extend(snapshot.writes(me, holdings));
        if all.is_empty() {
            return Ok(());
        }
        match store.commit(all) {
            Err(e @ StoreError::Conflict { .. }) => last = Some(e),
            other => return other,
        }
    }
    Err(last.unwrap_or_else(|| StoreError::Backend {
        path: store.describe(),
        message: "no attempt was made".into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holding(id: &str, deleting: bool) -> OneHoldings {
        let mut h = OneHoldings::default();
        h.templates.insert(
            "master".into(),
            Held {
                id: Some(id.into()),
                created: true,
                deleting,
                ..Held::default()
            },
        );
        h
    }

    fn shared_store() -> Store {
        let mut s = Store::in_memory().expect("store");
        s.share_between_engines();
        s
    }

    #[test]
    fn two_replicas_deciding_on_one_object_cannot_both_commit() {
        let store = shared_store();
        commit_facts(&store, "a", &holding("7", false), vec![]).expect("a holds");
        // b reads, then a commits its deletion, then b commits taking the object up.
        let seen_by_b = Snapshot::read(&store).expect("reads");
        let seen_by_a = Snapshot::read(&store).expect("reads");
        store
            .commit(seen_by_a.writes("a", &holding("7", true)))
            .expect("a marks it deleting first");
        let err = store
            .commit(seen_by_b.writes("b", &holding("7", false)))
            .expect_err("b decided on a record that changed since");
        assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
        let now = Snapshot::read(&store).expect("reads").holdings();
        assert!(now.contains_key("a") && !now.contains_key("b"), "{now:?}");
        assert!(now["a"].templates["template/7"].deleting);
    }

    #[test]
    fn the_records_follow_what_a_cluster_holds_and_forget_it_once_it_holds_nothing() {
        let store = shared_store();
        commit_facts(&store, "a", &holding("7", false), vec![]).expect("a holds");
        commit_facts(&store, "b", &holding("7", false), vec![]).expect("b holds");
        let snap = Snapshot::read(&store).expect("reads");
        assert!(snap.writes("a", &holding("7", false)).is_empty(), "in step");
        commit_facts(&store, "a", &OneHoldings::default(), vec![]).expect("a lets go");
        commit_facts(&store, "b", &OneHoldings::default(), vec![]).expect("b lets go");
        assert!(store.keys(T_LEDGER).expect("keys").is_empty());
    }

    #[test]
    fn a_store_of_one_engine_is_not_read_for_the_ledger() {
        let store = Store::in_memory().expect("store");
        let mut ledger = BTreeMap::new();
        let got = refresh(&store, &mut ledger, "a", &holding("7", false), true).expect("ok");
        assert!(got.is_none() && ledger.is_empty());
    }
}
