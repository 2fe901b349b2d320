//! The etcd backend: etcd-client over gRPC, on a runtime of its own.

use std::collections::BTreeMap;
use std::sync::Arc;

use etcd_client::{
    Compare, CompareOp, DeleteOptions, GetOptions, SortOrder, SortTarget, Txn, TxnOp,
};
use flightdeck_store::{Backend, EVENTS_PER_KEY_MAX, StoreError, Write};

use crate::conn::Conn;
use crate::fence::{Fence, Now};

/// How often a commit is tried again when another writer appended events to the same
/// key between its read of the sequence and its transaction.
const COMMIT_ATTEMPTS: usize = 3;

pub(crate) struct EtcdStore {
    pub(crate) conn: Arc<Conn>,
    pub(crate) fence: Arc<Fence>,
    now: Now,
    max_txn_ops: usize,
}
impl EtcdStore {
    pub(crate) fn new(conn: Arc<Conn>, fence: Arc<Fence>, now: Now, max_txn_ops: usize) -> Self {
        EtcdStore {
            conn,
            fence,
            now,
            max_txn_ops,
        }
    }

    fn error(&self, what: &str, message: String) -> StoreError {
        self.conn.error(what, message)
    }

    fn record_key(&self, table: &str, key: &str) -> String {
        format!("{}r/{table}/{key}", self.conn.prefix)
    }

    fn events_prefix(&self, key: &str) -> String {
        format!("{}e/{key}/", self.conn.prefix)
    }

    fn event_key(&self, key: &str, seq: u64) -> String {
        format!("{}{seq:020}", self.events_prefix(key))
    }

    /// The first and the next sequence number of `key`'s events.
    fn event_bounds(&self, key: &str) -> Result<(u64, u64), StoreError> {
        let prefix = self.events_prefix(key);
        let seq = |k: &str| k.strip_prefix(&prefix).and_then(|s| s.parse::<u64>().ok());
        let first = self.conn.get_range(&prefix, true, Some(1))?;
        let p = prefix.clone();
        let last = self.conn.call(&format!("reading {prefix}"), move |mut c| {
            let p = p.clone();
            async move {
                let opts = GetOptions::new()
                    .with_prefix()
                    .with_keys_only()
                    .with_limit(1)
                    .with_sort(SortTarget::Key, SortOrder::Descend);
                c.get(p, Some(opts)).await
            }
        })?;
        let last = last
            .kvs()
            .first()
            .and_then(|kv| seq(&String::from_utf8_lossy(kv.key())));
        let first = first.first().and_then(|(k, _)| seq(k));
        Ok(match (first, last) {
            (Some(f), Some(l)) => (f, l + 1),
            _ => (0, 0),
        })
    }

    /// The transaction for `writes`: its guard (no events appended meanwhile) and its
    /// operations.
    fn plan_txn(&self, writes: &[Write]) -> Result<(Vec<Compare>, Vec<TxnOp>), StoreError> {
        // The last write of a record wins: etcd refuses two operations on one key.
        let mut records: BTreeMap<String, Option<&[u8]>> = BTreeMap::new();
        let mut logs: BTreeMap<&str, EventLog<'_>> = BTreeMap::new();
        let mut expects = Vec::new();
        for w in writes {
            match w {
                Write::Expect { table, key, json } => {
                    let k = self.record_key(table, key);
                    expects.push(match json {
                        Some(json) => Compare::value(k, CompareOp::Equal, json.clone()),
                        None => Compare::create_revision(k, CompareOp::Equal, 0),
                    });
                }
                Write::Put { table, key, json } => {
                    records.insert(self.record_key(table, key), Some(json));
                }
                Write::Remove { table, key } => {
                    records.insert(self.record_key(table, key), None);
                }
                Write::Event { key, json } => self.log(&mut logs, key)?.new.push(json),
                Write::ClearEvents { key } => self.log(&mut logs, key)?.clear(),
            }
        }
        let mut guard = Vec::new();
        let mut ops: Vec<TxnOp> = records
            .into_iter()
            .map(|(k, v)| match v {
                Some(json) => TxnOp::put(k, json.to_vec(), None),
                None => TxnOp::delete(k, None),
            })
            .collect();
        guard.extend(self.fence_compares(writes)?);
        guard.extend(expects);
        for (key, log) in logs {
            // Nobody appended since the bounds were read: the next key is still free.
            guard.push(Compare::create_revision(
                self.event_key(key, log.next),
                CompareOp::Equal,
                0,
            ));
            ops.extend(self.log_ops(key, &log));
        }
        if ops.len() > self.max_txn_ops {
            return Err(self.error(
                "commit",
                format!(
                    "{} operations in one commit, more than the {} etcd allows in one transaction; start the members with a larger --max-txn-ops and give flightdeck the same figure",
                    ops.len(),
                    self.max_txn_ops
                ),
            ));
        }
        Ok((guard, ops))
    }

    /// The fence of a commit: each cluster it writes is still claimed by this replica,
    /// under the claim it holds (the same create revision). Refused at once, without
    /// asking etcd, when the replica's lease has run out on its own clock.
    fn fence_compares(&self, writes: &[Write]) -> Result<Vec<Compare>, StoreError> {
        let clusters = crate::clusters_written(writes);
        let tokens = self
            .fence
            .tokens(&clusters, (self.now)())
            .map_err(|message| StoreError::Fenced {
                path: self.conn.describe(),
                message,
            })?;
        Ok(tokens
            .unwrap_or_default()
            .into_iter()
            .map(|(c, rev)| {
                Compare::create_revision(self.conn.claim_key(&c), CompareOp::Equal, rev)
            })
            .collect())
    }

    /// After a transaction whose guard failed: the first [`Write::Expect`] that no
    /// longer holds, said.
    fn expect_failed(&self, writes: &[Write]) -> Result<Option<String>, StoreError> {
        for w in writes {
            if let Write::Expect { table, key, json } = w
                && self.get(table, key)? != *json
            {
                return Ok(Some(format!(
                    "record {table}/{key} changed since it was read"
                )));
            }
        }
        Ok(None)
    }

    /// After a transaction whose guard failed: the first cluster whose claim is no
    /// longer the one this replica holds, forgotten by the fence.
    fn lost_claim(&self, writes: &[Write]) -> Result<Option<String>, StoreError> {
        let held = self.fence.held();
        for c in crate::clusters_written(writes) {
            let Some(rev) = held.get(&c).copied() else {
                continue;
            };
            let key = self.conn.claim_key(&c);
            let resp = self.conn.call(&format!("reading {key}"), move |mut cl| {
                let key = key.clone();
                async move { cl.get(key, None).await }
            })?;
            let now = resp.kvs().first().map(|kv| kv.create_revision());
            if now != Some(rev) {
                self.fence.drop_claim(&c);
                return Ok(Some(c));
            }
        }
        Ok(None)
    }

    /// The event log of `key` in this commit, its bounds read on first use.
    fn log<'a, 'w>(
        &self,
        logs: &'a mut BTreeMap<&'w str, EventLog<'w>>,
        key: &'w str,
    ) -> Result<&'a mut EventLog<'w>, StoreError> {
        if !logs.contains_key(key) {
            let (first, next) = self.event_bounds(key)?;
            logs.insert(
                key,
                EventLog {
                    first,
                    next,
                    cleared: first,
                    new: Vec::new(),
                },
            );
        }
        Ok(logs.entry(key).or_default())
    }

    /// The operations that append `log.new` to `key`'s events and drop what falls out:
    /// what was cleared, and the oldest past [`EVENTS_PER_KEY_MAX`].
    fn log_ops(&self, key: &str, log: &EventLog<'_>) -> Vec<TxnOp> {
        let mut ops = Vec::new();
        let end = log.next + log.new.len() as u64;
        let keep_from = end.saturating_sub(EVENTS_PER_KEY_MAX).max(log.cleared);
        let until = keep_from.min(log.next);
        if until > log.first {
            ops.push(TxnOp::delete(
                self.event_key(key, log.first),
                Some(DeleteOptions::new().with_range(self.event_key(key, until))),
            ));
        }
        for (i, json) in log.new.iter().enumerate() {
            let seq = log.next + i as u64;
            if seq >= keep_from {
                ops.push(TxnOp::put(self.event_key(key, seq), json.to_vec(), None));
            }
        }
        ops
    }
}

/// One key's events as a commit changes them.
#[derive(Default)]
struct EventLog<'w> {
    /// The first stored sequence number.
    first: u64,
    /// The next sequence number: the first new event's.
    next: u64,
    /// Everything below is cleared.
    cleared: u64,
    /// The events this commit appends.
    new: Vec<&'w [u8]>,
}

impl EventLog<'_> {
    /// Clears everything stored, and every event of this commit so far.
    fn clear(&mut self) {
        self.next += self.new.len() as u64;
        self.cleared = self.next;
        self.new.clear();
    }
}

impl Backend for EtcdStore {
    fn describe(&self) -> String {
        self.conn.describe()
    }

    fn get(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let k = self.record_key(table, key);
        let resp = self
            .conn
            .call(&format!("reading {table}/{key}"), move |mut c| {
                let k = k.clone();
                async move { c.get(k, None).await }
            })?;
        Ok(resp.kvs().first().map(|kv| kv.value().to_vec()))
    }

    fn keys(&self, table: &str) -> Result<Vec<String>, StoreError> {
        self.conn.names_under(&self.record_key(table, ""))
    }

    fn scan(&self, table: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let prefix = self.record_key(table, "");
        Ok(self
            .conn
            .get_range(&prefix, false, None)?
            .into_iter()
            .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|k| (k.to_string(), v)))
            .collect())
    }

    fn shared(&self) -> bool {
        true
    }

    fn events(&self, key: &str) -> Result<Vec<Vec<u8>>, StoreError> {
        Ok(self
            .conn
            .get_range(&self.events_prefix(key), false, None)?
            .into_iter()
            .map(|(_, v)| v)
            .collect())
    }

    fn commit(&self, writes: &[Write]) -> Result<(), StoreError> {
        for _ in 0..COMMIT_ATTEMPTS {
            let (guard, ops) = self.plan_txn(writes)?;
            let txn = Txn::new().when(guard).and_then(ops);
            let resp = self.conn.call("commit", move |mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })?;
            if resp.succeeded() {
                return Ok(());
            }
            if let Some(message) = self.expect_failed(writes)? {
                return Err(StoreError::Conflict {
                    path: self.conn.describe(),
                    message,
                });
            }
            if let Some(c) = self.lost_claim(writes)? {
                return Err(StoreError::Fenced {
                    path: self.conn.describe(),
                    message: format!(
                        "cluster {c} was claimed by another replica; nothing of this commit was written"
                    ),
                });
            }
            tracing::debug!(store = %self.conn.describe(), "events were appended meanwhile; committing again");
        }
        Err(self.error(
            "commit",
            format!("another writer kept appending events to the same keys; gave up after {COMMIT_ATTEMPTS} attempts"),
        ))
    }

    fn act_token(&self, cluster: &str) -> Option<i64> {
        self.fence.token(cluster)
    }

    /// From the fence alone, without asking etcd: called before every cloud mutation,
    /// it must cost nothing. A claim lost without this replica knowing yet is caught by
    /// its lease deadline (the claim cannot move before the lease expires) or by the
    /// next commit's guard.
    fn may_act(&self, cluster: &str, claim: Option<i64>) -> Result<(), StoreError> {
        self.fence
            .may_act(cluster, claim, (self.now)())
            .map_err(|message| StoreError::Fenced {
                path: self.conn.describe(),
                message,
            })
    }
}
