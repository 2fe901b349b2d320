//! The embedded backend: one redb file under `--state-dir`. Each commit is an ACID
//! transaction, so a crash leaves the store as of the last commit and never half of one.
//!
//! A damaged file is an error that names it, never a panic: redb's integrity check runs
//! on open, and a panic inside redb (its answer to some damage it cannot report) is
//! caught and turned into [`StoreError::Damaged`].

use std::path::{Path, PathBuf};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use crate::{Backend, EVENTS_PER_KEY_MAX, STORE_FILE, StoreError, Write};

pub(crate) const RECORDS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("records");
pub(crate) const EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("events");

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

pub use crate::memory_disk::MemoryDisk;

/// redb's page cache for a store whose disk is memory (1 GiB by default): a cache of
/// memory in memory only doubles it. `up` of 1,000 clusters kept about 100 MB of cached
/// pages beside its disk image at its peak.
const MEMORY_CACHE_BYTES: usize = 4 << 20;

/// Makes the store file readable and writable by its owner only, as its backups are: it
/// holds every cluster's spec. A new file is created so (redb starts a database in an
/// empty file), an older one made so.
fn owner_only(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

/// The embedded backend: one redb file (or an in-memory image).
pub struct RedbStore {
    pub(crate) db: Database,
    path: PathBuf,
    durable: bool,
}

impl RedbStore {
    /// Opens (or creates) the store in `dir`, creating the directory if needed.
    pub fn open(dir: &Path) -> Result<RedbStore, StoreError> {
        RedbStore::open_file(&dir.join(STORE_FILE))
    }

    /// Opens (or creates) the store file at `path`, checking its integrity first.
    pub fn open_file(path: &Path) -> Result<RedbStore, StoreError> {
        let shown = path.display().to_string();
        let err = |message: String| StoreError::Backend {
            path: shown.clone(),
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| err(format!("cannot create directory: {e}")))?;
        }
        owner_only(path)
            .map_err(|e| err(format!("cannot make it readable by its owner only: {e}")))?;
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
            let store = RedbStore {
                db,
                path: path.to_path_buf(),
                durable: true,
            };
            store.init_tables()?;
            Ok(store)
        })
    }

    /// A store in memory, for tests and throw-away runs.
    pub fn in_memory() -> Result<RedbStore, StoreError> {
        let db = Database::builder()
            .set_cache_size(MEMORY_CACHE_BYTES)
            .create_with_backend(MemoryDisk::new())
            .map_err(|e| StoreError::Backend {
                path: "<memory>".into(),
                message: e.to_string(),
            })?;
        let store = RedbStore {
            db,
            path: PathBuf::from("<memory>"),
            durable: false,
        };
        store.init_tables()?;
        Ok(store)
    }

    /// A store on `disk`, an in-memory image that outlives the store: dropping this store
    /// and opening another on the same disk is a store restart, through redb's own
    /// recovery path, without touching the file system.
    pub fn on_memory_disk(disk: &MemoryDisk) -> Result<RedbStore, StoreError> {
        let db = Database::builder()
            .set_cache_size(MEMORY_CACHE_BYTES)
            .create_with_backend(disk.clone())
            .map_err(|e| StoreError::Backend {
                path: "<memory disk>".into(),
                message: e.to_string(),
            })?;
        let store = RedbStore {
            db,
            path: PathBuf::from("<memory disk>"),
            // Only durable commits survive a reopen; syncing memory costs nothing.
            durable: true,
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

    pub(crate) fn guarded<T>(
        &self,
        f: impl FnOnce() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        guarded(&self.path.display().to_string(), f)
    }

    pub(crate) fn backend<E: std::fmt::Display>(&self, e: E) -> StoreError {
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

    fn get_unguarded(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let txn = self.db.begin_read().map_err(|e| self.backend(e))?;
        let t = txn.open_table(RECORDS).map_err(|e| self.backend(e))?;
        let v = t.get((table, key)).map_err(|e| self.backend(e))?;
        Ok(v.map(|v| v.value().to_vec()))
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

    fn events_unguarded(&self, key: &str) -> Result<Vec<Vec<u8>>, StoreError> {
        let txn = self.db.begin_read().map_err(|e| self.backend(e))?;
        let t = txn.open_table(EVENTS).map_err(|e| self.backend(e))?;
        let mut out = Vec::new();
        for item in t
            .range((key, 0)..=(key, u64::MAX))
            .map_err(|e| self.backend(e))?
        {
            let (_, v) = item.map_err(|e| self.backend(e))?;
            out.push(v.value().to_vec());
        }
        Ok(out)
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
            // Every guard is read against the state before the commit, as etcd's compares.
            for w in writes {
                if let Write::Expect { table, key, json } = w {
                    let now = records
                        .get((*table, key.as_str()))
                        .map_err(|e| self.backend(e))?
                        .map(|v| v.value().to_vec());
                    if now != *json {
                        return Err(StoreError::Conflict {
                            path: self.path.display().to_string(),
                            message: format!("record {table}/{key} changed since it was read"),
                        });
                    }
                }
            }
            for w in writes {
                match w {
                    Write::Expect { .. } => {}
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

impl Backend for RedbStore {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn get(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.guarded(|| self.get_unguarded(table, key))
    }

    fn keys(&self, table: &str) -> Result<Vec<String>, StoreError> {
        self.guarded(|| self.keys_unguarded(table))
    }

    fn events(&self, key: &str) -> Result<Vec<Vec<u8>>, StoreError> {
        self.guarded(|| self.events_unguarded(key))
    }

    fn commit(&self, writes: &[Write]) -> Result<(), StoreError> {
        self.guarded(|| self.commit_unguarded(writes))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn the_store_file_is_readable_by_its_owner_only_new_or_old() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(STORE_FILE);
        drop(RedbStore::open(dir.path()).expect("open"));
        assert_eq!(mode(&path), 0o600, "a new store");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        drop(RedbStore::open(dir.path()).expect("open again"));
        assert_eq!(
            mode(&path),
            0o600,
            "a store an older flightdeck left readable"
        );
    }
}
