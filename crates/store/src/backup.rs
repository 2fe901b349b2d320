//! Backups: a consistent copy of the store (one read transaction, written into a fresh
//! file that is renamed into place only when complete), kept as a short rotation next to
//! the store: `flightdeck.redb.backup-1` the newest, up to [`BACKUPS_KEPT`].

use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable};

use crate::redb_store::{EVENTS, RECORDS};
use crate::{RedbStore, STORE_FILE, Store, StoreError};

/// How many backups the rotation keeps.
pub const BACKUPS_KEPT: usize = 3;

/// Backup number `n` (1 is the newest) of the store in `dir`.
pub fn backup_path(dir: &Path, n: usize) -> PathBuf {
    dir.join(format!("{STORE_FILE}.backup-{n}"))
}

impl Store {
    /// Writes a consistent copy of the store to `path` (replacing what is there only
    /// once the copy is complete and synced).
    pub fn backup_to(&self, path: &Path) -> Result<(), StoreError> {
        let r = self.redb()?;
        r.guarded(|| backup_unguarded(r, path))
    }
}

fn backup_unguarded(r: &RedbStore, path: &Path) -> Result<(), StoreError> {
    let fail = |e: &dyn std::fmt::Display| StoreError::Backend {
        path: path.display().to_string(),
        message: format!("backup: {e}"),
    };
    // A file of its own beside the backup, removed if the copy fails half way: nothing
    // half-written is left behind, and two backups at once do not share one.
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new()
        .prefix(".flightdeck-backup-")
        .tempfile_in(dir)
        .map_err(|e| fail(&e))?;
    let txn = r.db.begin_read().map_err(|e| r.backend(e))?;
    let records = txn.open_table(RECORDS).map_err(|e| r.backend(e))?;
    let events = txn.open_table(EVENTS).map_err(|e| r.backend(e))?;
    let copy = Database::create(tmp.path()).map_err(|e| fail(&e))?;
    let w = copy.begin_write().map_err(|e| fail(&e))?;
    {
        let mut to = w.open_table(RECORDS).map_err(|e| fail(&e))?;
        for item in records.iter().map_err(|e| r.backend(e))? {
            let (k, v) = item.map_err(|e| r.backend(e))?;
            to.insert(k.value(), v.value()).map_err(|e| fail(&e))?;
        }
        let mut to = w.open_table(EVENTS).map_err(|e| fail(&e))?;
        for item in events.iter().map_err(|e| r.backend(e))? {
            let (k, v) = item.map_err(|e| r.backend(e))?;
            to.insert(k.value(), v.value()).map_err(|e| fail(&e))?;
        }
    }
    w.commit().map_err(|e| fail(&e))?;
    drop(copy);
    tmp.persist(path).map(|_| ()).map_err(|e| fail(&e.error))
}

impl Store {
    /// Shifts the rotation in `dir` by one and writes a new newest backup.
    pub fn rolling_backup(&self, dir: &Path) -> Result<PathBuf, StoreError> {
        let fail = |e: std::io::Error| StoreError::Backend {
            path: dir.display().to_string(),
            message: format!("backup rotation: {e}"),
        };
        for n in (1..BACKUPS_KEPT).rev() {
            let from = backup_path(dir, n);
            if from.exists() {
                std::fs::rename(&from, backup_path(dir, n + 1)).map_err(fail)?;
            }
        }
        let newest = backup_path(dir, 1);
        self.backup_to(&newest)?;
        Ok(newest)
    }
}
