//! One line of a run's timeline: an event as progress output shows it (`flightdeck up`,
//! `sim run`, the real-cloud commands), its time counted from the start of the run.

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TimelineEntry {
    pub at_ms: u64,
    /// The cluster, or `sim` / `workload` for what the scenario itself does.
    pub source: String,
    pub severity: String,
    pub reason: String,
    pub message: String,
}

impl TimelineEntry {
    pub fn at_label(&self) -> String {
        let s = self.at_ms / 1000;
        format!(
            "{:>3}:{:02}.{:01}",
            s / 60,
            s % 60,
            (self.at_ms % 1000) / 100
        )
    }
}
