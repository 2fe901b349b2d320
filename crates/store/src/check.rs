//! `flightdeck store check`: every record and every event read back, so damage that redb's
//! own integrity check cannot see (a record that is no longer JSON) is found before the
//! engine trips over it.

use redb::{ReadableDatabase, ReadableTable};

use crate::redb_store::{EVENTS, RECORDS};
use crate::{RedbStore, Store, StoreError};

/// What [`Store::check`] read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub records: usize,
    pub events: usize,
    /// `table/key: why` for each record or event that is not a JSON document.
    pub unreadable: Vec<String>,
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.unreadable.is_empty()
    }
}

impl Store {
    /// Reads every record and event. The file's own damage is an error; undecodable
    /// documents are listed in the report.
    pub fn check(&self) -> Result<CheckReport, StoreError> {
        let r = self.redb()?;
        r.guarded(|| check_unguarded(r))
    }
}

fn check_unguarded(r: &RedbStore) -> Result<CheckReport, StoreError> {
    let txn = r.db.begin_read().map_err(|e| r.backend(e))?;
    let mut report = CheckReport::default();
    let records = txn.open_table(RECORDS).map_err(|e| r.backend(e))?;
    for item in records.iter().map_err(|e| r.backend(e))? {
        let (k, v) = item.map_err(|e| r.backend(e))?;
        let (table, key) = k.value();
        report.records += 1;
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(v.value()) {
            report.unreadable.push(format!("{table}/{key}: {e}"));
        }
    }
    let events = txn.open_table(EVENTS).map_err(|e| r.backend(e))?;
    for item in events.iter().map_err(|e| r.backend(e))? {
        let (k, v) = item.map_err(|e| r.backend(e))?;
        let (key, n) = k.value();
        report.events += 1;
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(v.value()) {
            report.unreadable.push(format!("events/{key}#{n}: {e}"));
        }
    }
    Ok(report)
}
