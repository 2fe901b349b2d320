//! The etcd backend: etcd-client over gRPC, on a runtime of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, Identity,
    SortOrder, SortTarget, TlsOptions, Txn, TxnOp,
};
use flightdeck_store::{Backend, EVENTS_PER_KEY_MAX, StoreError, Write};

use crate::EtcdOptions;
use crate::fence::{FENCED_TABLES, Fence, Now};

/// How often a commit is tried again when another writer appended events to the same
/// key between its read of the sequence and its transaction.
const COMMIT_ATTEMPTS: usize = 3;

/// The connection: etcd's client on a runtime of its own, shared by the store and the
/// replica's lease and claims.
pub(crate) struct Conn {
    /// Taken on drop and shut down in the background: a runtime must not be dropped
    /// where blocking is not allowed (inside the daemon's own runtime).
    runtime: Option<tokio::runtime::Runtime>,
    client: Client,
    pub(crate) prefix: String,
    shown: String,
    timeout: Duration,
}

pub(crate) struct EtcdStore {
    pub(crate) conn: Arc<Conn>,
    pub(crate) fence: Arc<Fence>,
    now: Now,
    max_txn_ops: usize,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Runs `fut` on `handle` and waits for it, at most `timeout`.
fn wait<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    timeout: Duration,
    fut: impl Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::sync_channel(1);
    handle.spawn(async move {
        let r = tokio::time::timeout(timeout, fut).await;
        let _ = tx.send(r);
    });
    match rx.recv_timeout(timeout + Duration::from_secs(1)) {
        Ok(Ok(Ok(v))) => Ok(v),
        Ok(Ok(Err(e))) => Err(e.to_string()),
        Ok(Err(_)) | Err(_) => Err(format!(
            "no answer within {}s (are the members up, and is a quorum of them reachable?)",
            timeout.as_secs()
        )),
    }
}

fn read_pem(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn connect_options(o: &EtcdOptions) -> Result<ConnectOptions, String> {
    let mut opts = ConnectOptions::new()
        .with_timeout(o.timeout)
        .with_connect_timeout(o.timeout);
    if let (Some(user), Some(password)) = (&o.user, &o.password) {
        opts = opts.with_user(user.clone(), password.expose());
    }
    if let Some(ca) = &o.ca_file {
        let mut tls = TlsOptions::new().ca_certificate(Certificate::from_pem(read_pem(ca)?));
        if let (Some(cert), Some(key)) = (&o.cert_file, &o.key_file) {
            tls = tls.identity(Identity::from_pem(read_pem(cert)?, read_pem(key)?));
        }
        opts = opts.with_tls(tls);
    }
    Ok(opts)
}

impl Conn {
    pub(crate) fn connect(o: &EtcdOptions) -> Result<Conn, StoreError> {
        let shown = o.describe();
        let fail = |message: String| StoreError::Backend {
            path: shown.clone(),
            message,
        };
        o.validate().map_err(|e| fail(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("etcd-client")
            .enable_all()
            .build()
            .map_err(|e| fail(format!("cannot start the etcd client's runtime: {e}")))?;
        let scheme = if o.ca_file.is_some() { "https" } else { "http" };
        let endpoints: Vec<String> = o
            .endpoints
            .iter()
            .map(|e| format!("{scheme}://{e}"))
            .collect();
        let opts = connect_options(o).map_err(fail)?;
        let client = wait(runtime.handle(), o.timeout, async move {
            Client::connect(endpoints, Some(opts)).await
        })
        .map_err(|e| fail(format!("cannot connect: {e}")))?;
        let conn = Conn {
            runtime: Some(runtime),
            client,
            prefix: o.prefix.clone(),
            shown,
            timeout: o.timeout,
        };
        // Connecting is lazy for some failures (a member that refuses): one read proves
        // a quorum answers before the daemon starts on it.
        conn.get_range(&conn.prefix.clone(), true, Some(1))?;
        Ok(conn)
    }

    pub(crate) fn call<T: Send + 'static, F>(
        &self,
        what: &str,
        f: impl FnOnce(Client) -> F,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    {
        let Some(rt) = &self.runtime else {
            return Err(self.error(what, "the store is closed".into()));
        };
        wait(rt.handle(), self.timeout, f(self.client.clone())).map_err(|e| self.error(what, e))
    }

    pub(crate) fn error(&self, what: &str, message: String) -> StoreError {
        StoreError::Backend {
            path: self.shown.clone(),
            message: format!("{what}: {message}"),
        }
    }

    /// The keys (and values, unless `keys_only`) under `prefix`, in key order.
    pub(crate) fn get_range(
        &self,
        prefix: &str,
        keys_only: bool,
        limit: Option<i64>,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut opts = GetOptions::new().with_prefix();
        if keys_only {
            opts = opts.with_keys_only();
        }
        if let Some(n) = limit {
            opts = opts.with_limit(n);
        }
        let key = prefix.to_string();
        let resp = self.call(&format!("reading {prefix}"), move |mut c| async move {
            c.get(key, Some(opts)).await
        })?;
        Ok(resp
            .kvs()
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(kv.key()).into_owned(),
                    kv.value().to_vec(),
                )
            })
            .collect())
    }

    pub(crate) fn describe(&self) -> String {
        self.shown.clone()
    }

    /// The names under `prefix` (the keys, without it).
    pub(crate) fn names_under(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        Ok(self
            .get_range(prefix, true, None)?
            .into_iter()
            .filter_map(|(k, _)| k.strip_prefix(prefix).map(str::to_string))
            .collect())
    }

    /// Puts `key` = `value` under `lease` if the key does not exist; whether it did, and
    /// the transaction's revision (the key's create revision when it did).
    pub(crate) fn create_leased(
        &self,
        what: &str,
        key: String,
        value: String,
        lease: i64,
    ) -> Result<(bool, i64), StoreError> {
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then(vec![TxnOp::put(
                key,
                value,
                Some(etcd_client::PutOptions::new().with_lease(lease)),
            )]);
        let resp = self.call(what, move |mut c| async move { c.txn(txn).await })?;
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        Ok((resp.succeeded(), revision))
    }

    /// The claim key of `cluster`.
    pub(crate) fn claim_key(&self, cluster: &str) -> String {
        format!("{}claims/{cluster}", self.prefix)
    }
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
        let last = self
            .conn
            .call(&format!("reading {prefix}"), move |mut c| async move {
                let opts = GetOptions::new()
                    .with_prefix()
                    .with_keys_only()
                    .with_limit(1)
                    .with_sort(SortTarget::Key, SortOrder::Descend);
                c.get(p, Some(opts)).await
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
        for w in writes {
            match w {
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

    /// The clusters whose own state `writes` touches.
    fn clusters_written(writes: &[Write]) -> BTreeSet<String> {
        writes
            .iter()
            .filter_map(|w| match w {
                Write::Put { table, key, .. } | Write::Remove { table, key }
                    if FENCED_TABLES.contains(table) =>
                {
                    Some(key.clone())
                }
                Write::Event { key, .. } | Write::ClearEvents { key } => Some(key.clone()),
                _ => None,
            })
            .collect()
    }

    /// The fence of a commit: each cluster it writes is still claimed by this replica,
    /// under the claim it holds (the same create revision). Refused at once, without
    /// asking etcd, when the replica's lease has run out on its own clock.
    fn fence_compares(&self, writes: &[Write]) -> Result<Vec<Compare>, StoreError> {
        let clusters = Self::clusters_written(writes);
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

    /// After a transaction whose guard failed: the first cluster whose claim is no
    /// longer the one this replica holds, forgotten by the fence.
    fn lost_claim(&self, writes: &[Write]) -> Result<Option<String>, StoreError> {
        let held = self.fence.held();
        for c in Self::clusters_written(writes) {
            let Some(rev) = held.get(&c).copied() else {
                continue;
            };
            let key = self.conn.claim_key(&c);
            let resp = self
                .conn
                .call(&format!("reading {key}"), move |mut cl| async move {
                    cl.get(key, None).await
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
            .call(&format!("reading {table}/{key}"), move |mut c| async move {
                c.get(k, None).await
            })?;
        Ok(resp.kvs().first().map(|kv| kv.value().to_vec()))
    }

    fn keys(&self, table: &str) -> Result<Vec<String>, StoreError> {
        self.conn.names_under(&self.record_key(table, ""))
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
            let resp = self
                .conn
                .call("commit", move |mut c| async move { c.txn(txn).await })?;
            if resp.succeeded() {
                return Ok(());
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
}
