//! The embedded state store: one redb file under `--state-dir`. Each commit is an ACID
//! transaction, so a crash leaves the store as of the last commit and never half of one.
//!
//! The store knows nothing about what it keeps: records are JSON documents under a table
//! and a key, and events are append-only per key with a bounded history.
//!
//! A damaged file is an error that names it, never a panic: redb's integrity check runs
//! on open, and a panic inside redb (its answer to some damage it cannot report) is
//! caught and turned into [`StoreError::Damaged`]. [`Store::check`] reads every record
//! and event; [`Store::backup_to`] writes a consistent copy (see `backup.rs`).

mod backup;
mod check;

pub use backup::{BACKUPS_KEPT, backup_path};
pub use check::CheckReport;

use std::path::{Path, PathBuf};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The file inside the state directory.
pub const STORE_FILE: &str = "flightdeck.redb";
/// How many events are kept per key; older ones are dropped first.
pub const EVENTS_PER_KEY_MAX: u64 = 1000;

const RECORDS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("records");
const EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("events");

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state store {path}: {message}")]
    Backend { path: String, message: String },
    #[error(
        "state store {path} is damaged ({message}); `flightdeck store check` reads all of it, and README \"Recovering the store\" says how to restore a backup"
    )]
    Damaged { path: String, message: String },
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

thread_local! {
    /// Set while this thread runs redb under [`guarded`].
    static IN_GUARD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs a panic hook that keeps quiet about panics [`guarded`] turns into
/// [`StoreError::Damaged`] (redb's "entered unreachable code" on some damaged files), so
/// a damaged store is reported once, as the clear error, and not also as a panic
/// message; every other panic goes to the hook that was there before. Binaries call it
/// once at start.
pub fn quiet_guarded_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !IN_GUARD.with(|g| g.get()) {
            previous(info);
        }
    }));
}

/// Runs `f`, turning a panic inside redb (how it answers some damage) into
/// [`StoreError::Damaged`] naming the file.
fn guarded<T>(path: &str, f: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
    let was = IN_GUARD.with(|g| g.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    IN_GUARD.with(|g| g.set(was));
    match result {
        Ok(r) => r,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "redb failed reading it".to_string());
            Err(StoreError::Damaged {
                path: path.to_string(),
                message,
            })
        }
    }
}

/// An in-memory disk image for [`Store::on_memory_disk`]. Clones share the image.
#[derive(Clone, Debug, Default)]
pub struct MemoryDisk(std::sync::Arc<redb::backends::InMemoryBackend>);

impl MemoryDisk {
    pub fn new() -> Self {
        MemoryDisk::default()
    }

    /// A separate image with the bytes this one holds now: what a backup or a snapshot
    /// of the disk taken at this instant would restore.
    pub fn image(&self) -> Result<MemoryDisk, std::io::Error> {
        use redb::StorageBackend;
        let len = self.0.len()?;
        let mut bytes = vec![0u8; usize::try_from(len).map_err(std::io::Error::other)?];
        self.0.read(0, &mut bytes)?;
        let copy = MemoryDisk::new();
        copy.0.set_len(len)?;
        copy.0.write(0, &bytes)?;
        Ok(copy)
    }
}

impl redb::StorageBackend for MemoryDisk {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.0.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.0.write(offset, data)
    }
}

pub struct Store {
    db: Database,
    path: PathBuf,
    durable: bool,
    /// Transactions committed through this handle (a figure for benchmarks and tests).
    commits: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Opens (or creates) the store in `dir`, creating the directory if needed.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        Store::open_file(&dir.join(STORE_FILE))
    }

    /// Opens (or creates) the store file at `path`, checking its integrity first.
    pub fn open_file(path: &Path) -> Result<Store, StoreError> {
        let shown = path.display().to_string();
        let err = |message: String| StoreError::Backend {
            path: shown.clone(),
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| err(format!("cannot create directory: {e}")))?;
        }
        guarded(&shown, || {
            let mut db = Database::create(path).map_err(|e| match e {
                redb::DatabaseError::Storage(redb::StorageError::Corrupted(m)) => {
                    StoreError::Damaged {
                        path: shown.clone(),
                        message: m,
                    }
                }
                e => err(e.to_string()),
            })?;
            match db.check_integrity() {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(path = %shown, "the state store failed its integrity check and was repaired by redb");
                }
                Err(e) => {
                    return Err(StoreError::Damaged {
                        path: shown.clone(),
                        message: format!("integrity check: {e}"),
                    });
                }
            }
            let store = Store {
                db,
                path: path.to_path_buf(),
                durable: true,
                commits: Default::default(),
            };
            store.init_tables()?;
            Ok(store)
        })
    }

    /// A store in memory, for tests and throw-away runs.
    pub fn in_memory() -> Result<Store, StoreError> {
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(|e| StoreError::Backend {
                path: "<memory>".into(),
                message: e.to_string(),
            })?;
        let store = Store {
            db,
            path: PathBuf::from("<memory>"),
            durable: false,
            commits: Default::default(),
        };
        store.init_tables()?;
        Ok(store)
    }

    /// A store on `disk`, an in-memory image that outlives the store: dropping this store
    /// and opening another on the same disk is a store restart, through redb's own
    /// recovery path, without touching the file system.
    pub fn on_memory_disk(disk: &MemoryDisk) -> Result<Store, StoreError> {
        let db = Database::builder()
            .create_with_backend(disk.clone())
            .map_err(|e| StoreError::Backend {
                path: "<memory disk>".into(),
                message: e.to_string(),
            })?;
        let store = Store {
            db,
            path: PathBuf::from("<memory disk>"),
            // Only durable commits survive a reopen; syncing memory costs nothing.
            durable: true,
            commits: Default::default(),
        };
        store.init_tables()?;
        Ok(store)
    }

    /// Whether each commit waits for the disk (fsync). On by default for files; a
    /// simulated run whose cloud lives only in memory may turn it off.
    pub fn set_durable(&mut self, durable: bool) {
        self.durable = durable;
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn guarded<T>(&self, f: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        guarded(&self.path.display().to_string(), f)
    }

    fn backend<E: std::fmt::Display>(&self, e: E) -> StoreError {
        StoreError::Backend {
            path: self.path.display().to_string(),
            message: e.to_string(),
        }
    }

    fn init_tables(&self) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(|e| self.backend(e))?;
        txn.open_table(RECORDS).map_err(|e| self.backend(e))?;
        txn.open_table(EVENTS).map_err(|e| self.backend(e))?;
        txn.commit().map_err(|e| self.backend(e))
    }

    /// Reads one record.
    pub fn get<T: DeserializeOwned>(
        &self,
        table: &str,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        self.guarded(|| self.get_unguarded(table, key))
    }

    fn get_unguarded<T: DeserializeOwned>(
        &self,
        table: &str,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        let txn = self.db.begin_read().map_err(|e| self.backend(e))?;
        let t = txn.open_table(RECORDS).map_err(|e| self.backend(e))?;
        let Some(v) = t.get((table, key)).map_err(|e| self.backend(e))? else {
            return Ok(None);
        };
        serde_json::from_slice(v.value())
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                path: self.path.display().to_string(),
                table: table.into(),
                key: key.into(),
                message: e.to_string(),
            })
    }

    /// The keys of a table, in order.
    pub fn keys(&self, table: &str) -> Result<Vec<String>, StoreError> {
        self.guarded(|| self.keys_unguarded(table))
    }

    fn keys_unguarded(&self, table: &str) -> Result<Vec<String>, StoreError> {
        let txn = self.db.begin_read().map_err(|e| self.backend(e))?;
        let t = txn.open_table(RECORDS).map_err(|e| self.backend(e))?;
        let mut keys = Vec::new();
        for item in t.range((table, "")..).map_err(|e| self.backend(e))? {
            let (k, _) = item.map_err(|e| self.backend(e))?;
            let (tbl, key) = k.value();
            if tbl != table {
                break;
            }
            keys.push(key.to_string());
        }
        Ok(keys)
    }

    /// The events kept under `key`, oldest first.
    pub fn events<T: DeserializeOwned>(&self, key: &str) -> Result<Vec<T>, StoreError> {
        self.guarded(|| self.events_unguarded(key))
    }

    fn events_unguarded<T: DeserializeOwned>(&self, key: &str) -> Result<Vec<T>, StoreError> {
        let txn = self.db.begin_read().map_err(|e| self.backend(e))?;
        let t = txn.open_table(EVENTS).map_err(|e| self.backend(e))?;
        let mut out = Vec::new();
        for item in t
            .range((key, 0)..=(key, u64::MAX))
            .map_err(|e| self.backend(e))?
        {
            let (_, v) = item.map_err(|e| self.backend(e))?;
            out.push(
                serde_json::from_slice(v.value()).map_err(|e| StoreError::Corrupt {
                    path: self.path.display().to_string(),
                    table: "events".into(),
                    key: key.into(),
                    message: e.to_string(),
                })?,
            );
        }
        Ok(out)
    }

    /// Applies every write in one transaction: all of them or none.
    pub fn commit(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        self.guarded(|| self.commit_unguarded(&writes))?;
        self.commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// How many transactions this handle has committed.
    pub fn commits(&self) -> u64 {
        self.commits.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn commit_unguarded(&self, writes: &[Write]) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write().map_err(|e| self.backend(e))?;
        if !self.durable {
            txn.set_durability(Durability::None)
                .map_err(|e| self.backend(e))?;
        }
        {
            let mut records = txn.open_table(RECORDS).map_err(|e| self.backend(e))?;
            let mut events = txn.open_table(EVENTS).map_err(|e| self.backend(e))?;
            for w in writes {
                match w {
                    Write::Put { table, key, json } => {
                        records
                            .insert((*table, key.as_str()), json.as_slice())
                            .map_err(|e| self.backend(e))?;
                    }
                    Write::Remove { table, key } => {
                        records
                            .remove((*table, key.as_str()))
                            .map_err(|e| self.backend(e))?;
                    }
                    Write::Event { key, json } => {
                        let range = (key.as_str(), 0)..=(key.as_str(), u64::MAX);
                        let (first, last) = {
                            let mut it = events.range(range).map_err(|e| self.backend(e))?;
                            let first = it
                                .next()
                                .transpose()
                                .map_err(|e| self.backend(e))?
                                .map(|(k, _)| k.value().1);
                            let last = it
                                .next_back()
                                .transpose()
                                .map_err(|e| self.backend(e))?
                                .map(|(k, _)| k.value().1);
                            (first, last.or(first))
                        };
                        let next = last.map_or(0, |l| l + 1);
                        events
                            .insert((key.as_str(), next), json.as_slice())
                            .map_err(|e| self.backend(e))?;
                        if let Some(first) = first
                            && next - first >= EVENTS_PER_KEY_MAX
                        {
                            events
                                .remove((key.as_str(), first))
                                .map_err(|e| self.backend(e))?;
                        }
                    }
                    Write::ClearEvents { key } => {
                        let range = (key.as_str(), 0)..=(key.as_str(), u64::MAX);
                        events
                            .retain_in(range, |_, _| false)
                            .map_err(|e| self.backend(e))?;
                    }
                }
            }
        }
        txn.commit().map_err(|e| self.backend(e))
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
    fn events_are_kept_in_order_and_bounded() {
        let store = Store::in_memory().expect("store");
        for i in 0..(EVENTS_PER_KEY_MAX + 5) {
            store
                .commit(vec![Write::event("demo", &i)])
                .expect("commit");
        }
        store
            .commit(vec![Write::event("other", &99u64)])
            .expect("commit");
        let events: Vec<u64> = store.events("demo").expect("events");
        assert_eq!(events.len() as u64, EVENTS_PER_KEY_MAX);
        assert_eq!(events.first(), Some(&5));
        assert_eq!(events.last(), Some(&(EVENTS_PER_KEY_MAX + 4)));
        store
            .commit(vec![Write::ClearEvents { key: "demo".into() }])
            .expect("clear");
        assert!(store.events::<u64>("demo").expect("events").is_empty());
        assert_eq!(store.events::<u64>("other").expect("events"), vec![99]);
    }

    #[test]
    fn an_unreadable_record_is_reported_with_its_key() {
        let store = Store::in_memory().expect("store");
        store
            .commit(vec![Write::put("memory", "demo", &"text")])
            .expect("commit");
        let err = store
            .get::<Vec<u8>>("memory", "demo")
            .expect_err("wrong type");
        assert!(err.to_string().contains("memory/demo"), "{err}");
    }
}
