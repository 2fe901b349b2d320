//! flightdeck's state store: records (JSON documents under a table and a key) and
//! bounded, append-only events per key, committed in all-or-nothing transactions.
//!
//! The store knows nothing about what it keeps. It has two backends behind one
//! [`Backend`] trait: the embedded default, one redb file under `--state-dir`
//! (`redb_store.rs`), and any other a crate supplies (`flightdeck-etcd` puts it in etcd,
//! for replicas that share the work). Both pass the same suite ([`conformance`]).
//! [`Store::check`] reads every record and event of the embedded store;
//! [`Store::backup_to`] writes a consistent copy of it (see `backup.rs`).

mod backup;
mod check;
pub mod conformance;
mod memory_disk;
mod redb_store;

pub use backup::{BACKUPS_KEPT, backup_path};
pub use check::CheckReport;
pub use redb_store::{MemoryDisk, RedbStore, quiet_guarded_panics};

use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The file inside the state directory.
pub const STORE_FILE: &str = "flightdeck.redb";
/// How many events are kept per key; older ones are dropped first.
pub const EVENTS_PER_KEY_MAX: u64 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state store {path}: {message}")]
    Backend { path: String, message: String },
    #[error(
        "state store {path} is damaged ({message}); `flightdeck store check` reads all of it, and README \"Recovering the store\" says how to restore a backup"
    )]
    Damaged { path: String, message: String },
    /// A write of a cluster this replica no longer holds (its claim moved, or its lease
    /// ran out): nothing of the commit was written, and the replica must not act.
    #[error("state store {path}: fenced off: {message}")]
    Fenced { path: String, message: String },
    /// A commit's [`Write::Expect`] did not hold: a record it read changed since (another
    /// replica wrote it). Nothing of the commit was written; read again and decide again.
    #[error("state store {path}: {message}; nothing of this commit was written")]
    Conflict { path: String, message: String },
    #[error("state store {path}: record {table}/{key} is not readable: {message}")]
    Corrupt {
        path: String,
        table: String,
        key: String,
        message: String,
    },
}

/// One write of a [`Store::commit`].
#[derive(Debug, Clone)]
pub enum Write {
    Put {
        table: &'static str,
        key: String,
        json: Vec<u8>,
    },
    Remove {
        table: &'static str,
        key: String,
    },
    /// Appends one event under `key`, trimming the oldest past [`EVENTS_PER_KEY_MAX`].
    Event {
        key: String,
        json: Vec<u8>,
    },
    /// Removes every event under `key`.
    ClearEvents {
        key: String,
    },
    /// Writes nothing, and guards the whole commit: it applies only if record
    /// `table`/`key` is, before the commit, exactly `json` (`None`: absent). Otherwise
    /// nothing is written and the commit fails with [`StoreError::Conflict`].
    Expect {
        table: &'static str,
        key: String,
        json: Option<Vec<u8>>,
    },
}

impl Write {
    pub fn put<T: Serialize>(table: &'static str, key: &str, value: &T) -> Write {
        Write::Put {
            table,
            key: key.to_string(),
            // Serializing plain data structs to JSON cannot fail.
            json: serde_json::to_vec(value).unwrap_or_default(),
        }
    }
    pub fn event<T: Serialize>(key: &str, value: &T) -> Write {
        Write::Event {
            key: key.to_string(),
            json: serde_json::to_vec(value).unwrap_or_default(),
        }
    }
}

/// What a store keeps its records and events in. Values are JSON bytes; [`Store`] turns
/// them into types. A backend applies a commit's writes all or none.
pub trait Backend: Send + Sync {
    /// Where the store is, for messages: a path, or etcd's endpoints.
    fn describe(&self) -> String;
    /// One record's bytes.
    fn get(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// The keys of a table, in order.
    fn keys(&self, table: &str) -> Result<Vec<String>, StoreError>;
    /// Every record of a table with its bytes, in key order.
    fn scan(&self, table: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut out = Vec::new();
        for key in self.keys(table)? {
            if let Some(bytes) = self.get(table, &key)? {
                out.push((key, bytes));
            }
        }
        Ok(out)
    }
    /// Whether other processes write this store too (replicas on etcd): then what is
    /// shared between clusters is read from it and guarded at every commit, not kept
    /// in one process's memory.
    fn shared(&self) -> bool {
        false
    }
    /// The events kept under `key`, oldest first.
    fn events(&self, key: &str) -> Result<Vec<Vec<u8>>, StoreError>;
    /// Applies every write in one transaction: all of them or none.
    fn commit(&self, writes: &[Write]) -> Result<(), StoreError>;
    /// The claim this process holds `cluster` under now (a fencing token), read when a
    /// reconcile starts; `None` for a store without replicas.
    fn act_token(&self, _cluster: &str) -> Option<i64> {
        None
    }
    /// Whether a reconcile that started under `claim` may still act on `cluster`'s
    /// cloud objects or write its state: not once that claim is gone (even if the
    /// cluster was claimed again since, under another), nor once the lease has run out
    /// on this process's own clock ([`StoreError::Fenced`]). A store without replicas
    /// fences nothing.
    fn may_act(&self, _cluster: &str, _claim: Option<i64>) -> Result<(), StoreError> {
        Ok(())
    }
}

enum Inner {
    Redb(RedbStore),
    Other(Box<dyn Backend>),
}

/// The state store, on one of its backends.
pub struct Store {
    inner: Inner,
    /// Shared with other engines although its backend does not say so: two engines
    /// of one test on one embedded store, standing for two replicas.
    shared: bool,
    /// Transactions committed through this handle (a figure for benchmarks and tests).
    commits: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("at", &self.backend().describe())
            .finish()
    }
}

impl Store {
    fn embedded(redb: RedbStore) -> Store {
        Store {
            inner: Inner::Redb(redb),
            shared: false,
            commits: Default::default(),
        }
    }

    /// A store on another backend.
    pub fn with_backend(backend: Box<dyn Backend>) -> Store {
        Store {
            inner: Inner::Other(backend),
            shared: false,
            commits: Default::default(),
        }
    }

    /// Opens (or creates) the embedded store in `dir`, creating the directory if needed.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        RedbStore::open(dir).map(Store::embedded)
    }

    /// Opens (or creates) the embedded store file at `path`, checking its integrity first.
    pub fn open_file(path: &Path) -> Result<Store, StoreError> {
        RedbStore::open_file(path).map(Store::embedded)
    }

    /// An embedded store in memory, for tests and throw-away runs.
    pub fn in_memory() -> Result<Store, StoreError> {
        RedbStore::in_memory().map(Store::embedded)
    }

    /// An embedded store on `disk`, an in-memory image that outlives the store: dropping
    /// this store and opening another on the same disk is a store restart, through
    /// redb's own recovery path, without touching the file system.
    pub fn on_memory_disk(disk: &MemoryDisk) -> Result<Store, StoreError> {
        RedbStore::on_memory_disk(disk).map(Store::embedded)
    }

    /// Whether each commit of the embedded store waits for the disk (fsync). On by
    /// default for files; a simulated run whose cloud lives only in memory may turn it
    /// off. Other backends decide their own durability.
    pub fn set_durable(&mut self, durable: bool) {
        if let Inner::Redb(r) = &mut self.inner {
            r.set_durable(durable);
        }
    }

    /// Marks this store as written by several engines, as replicas on etcd write
    /// theirs: for tests that run two engines on one embedded store.
    pub fn share_between_engines(&mut self) {
        self.shared = true;
    }

    /// Whether other engines write this store too (see [`Backend::shared`]).
    pub fn shared(&self) -> bool {
        self.shared || self.backend().shared()
    }

    /// Every record of `table` with its bytes as stored, in key order (one read on
    /// etcd).
    pub fn scan_raw(&self, table: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.backend().scan(table)
    }

    /// The claim this process holds `cluster` under now (see [`Backend::act_token`]).
    pub fn act_token(&self, cluster: &str) -> Option<i64> {
        self.backend().act_token(cluster)
    }

    /// Whether a reconcile that started under `claim` may still act on `cluster`:
    /// checked right before each cloud mutation and each commit of a reconcile (see
    /// [`Backend::may_act`]).
    pub fn may_act(&self, cluster: &str, claim: Option<i64>) -> Result<(), StoreError> {
        self.backend().may_act(cluster, claim)
    }

    /// Where the store is: a path, or etcd's endpoints.
    pub fn describe(&self) -> String {
        self.backend().describe()
    }

    fn backend(&self) -> &dyn Backend {
        match &self.inner {
            Inner::Redb(r) => r,
            Inner::Other(b) => b.as_ref(),
        }
    }

    /// The embedded store, for what only it does (check, backups).
    fn redb(&self) -> Result<&RedbStore, StoreError> {
        match &self.inner {
            Inner::Redb(r) => Ok(r),
            Inner::Other(b) => Err(StoreError::Backend {
                path: b.describe(),
                message: "checks and backups are for the embedded store; use the backend's own tools (for etcd, `etcdctl snapshot save`)".into(),
            }),
        }
    }

    /// Reads one record's bytes (as [`Store::scan_raw`] gave them) as a `T`.
    pub fn decode<T: DeserializeOwned>(
        &self,
        table: &str,
        key: &str,
        bytes: &[u8],
    ) -> Result<T, StoreError> {
        serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
            path: self.describe(),
            table: table.into(),
            key: key.into(),
            message: e.to_string(),
        })
    }

    /// Reads one record.
    pub fn get<T: DeserializeOwned>(
        &self,
        table: &str,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        match self.backend().get(table, key)? {
            Some(bytes) => self.decode(table, key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// One record's bytes as stored, for a [`Write::Expect`] that guards a later commit
    /// on it being unchanged.
    pub fn get_raw(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.backend().get(table, key)
    }

    /// The keys of a table, in order.
    pub fn keys(&self, table: &str) -> Result<Vec<String>, StoreError> {
        self.backend().keys(table)
    }

    /// The events kept under `key`, oldest first.
    pub fn events<T: DeserializeOwned>(&self, key: &str) -> Result<Vec<T>, StoreError> {
        self.backend()
            .events(key)?
            .iter()
            .map(|bytes| self.decode("events", key, bytes))
            .collect()
    }

    /// Applies every write in one transaction: all of them or none.
    pub fn commit(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        self.backend().commit(&writes)?;
        self.commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// How many transactions this handle has committed.
    pub fn commits(&self) -> u64 {
        self.commits.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopening_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let store = Store::open(dir.path()).expect("open");
            store
                .commit(vec![
                    Write::put("memory", "demo", &vec![1, 2, 3]),
                    Write::put("memory", "other", &vec![4]),
                    Write::put("status", "demo", &"Ready"),
                ])
                .expect("commit");
        }
        let store = Store::open(dir.path()).expect("reopen");
        assert_eq!(
            store.get::<Vec<i32>>("memory", "demo").expect("get"),
            Some(vec![1, 2, 3])
        );
        assert_eq!(store.keys("memory").expect("keys"), vec!["demo", "other"]);
        assert_eq!(store.keys("status").expect("keys"), vec!["demo"]);
        store
            .commit(vec![Write::Remove {
                table: "memory",
                key: "demo".into(),
            }])
            .expect("remove");
        assert_eq!(store.get::<Vec<i32>>("memory", "demo").expect("get"), None);
    }

    #[test]
    fn a_store_restarted_on_the_same_memory_disk_keeps_every_commit() {
        let disk = MemoryDisk::new();
        {
            let store = Store::on_memory_disk(&disk).expect("open");
            store
                .commit(vec![
                    Write::put("memory", "demo", &7u32),
                    Write::event("demo", &"e1"),
                ])
                .expect("commit");
        }
        let store = Store::on_memory_disk(&disk).expect("reopen");
        assert_eq!(store.get::<u32>("memory", "demo").expect("get"), Some(7));
        assert_eq!(
            store.events::<String>("demo").expect("events"),
            vec!["e1".to_string()]
        );
    }

    #[test]
    fn the_embedded_store_passes_the_backend_suite() {
        conformance::run(&Store::in_memory().expect("store"), "");
    }

    #[test]
    fn checks_and_backups_of_another_backend_say_they_are_for_the_embedded_store() {
        struct Nothing;
        impl Backend for Nothing {
            fn describe(&self) -> String {
                "etcd://nowhere".into()
            }
            fn get(&self, _: &str, _: &str) -> Result<Option<Vec<u8>>, StoreError> {
                Ok(None)
            }
            fn keys(&self, _: &str) -> Result<Vec<String>, StoreError> {
                Ok(Vec::new())
            }
            fn events(&self, _: &str) -> Result<Vec<Vec<u8>>, StoreError> {
                Ok(Vec::new())
            }
            fn commit(&self, _: &[Write]) -> Result<(), StoreError> {
                Ok(())
            }
        }
        let store = Store::with_backend(Box::new(Nothing));
        let err = store.check().expect_err("no check of etcd");
        assert!(err.to_string().contains("etcdctl snapshot save"), "{err}");
        assert!(err.to_string().contains("etcd://nowhere"), "{err}");
    }
}
