//! The report of one run: what the JSON output of `sim run` and `up` carries.

use std::collections::BTreeMap;

use flightdeck_engine::ReconcileStats;
use flightdeck_plan::ClusterStatus;
use serde::Serialize;

use crate::invariants::Verdict;

pub use flightdeck_engine::TimelineEntry;

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    pub seed: u64,
    pub passed: bool,
    pub virtual_seconds: f64,
    pub steps: u64,
    pub invariants: Vec<Verdict>,
    pub expectations: Vec<ExpectationResult>,
    /// service → "METHOD /path" → calls.
    pub api_calls: BTreeMap<String, BTreeMap<String, u64>>,
    pub api_calls_total: u64,
    /// Calls divided by the cluster-hours the run simulated (at least a quarter hour per
    /// cluster).
    pub api_calls_per_cluster_hour: f64,
    pub engine: ReconcileStats,
    /// fault kind → how often the scheduled faults of that kind struck (calls answered,
    /// objects changed or held), from the simulator's records.
    pub fault_effects: BTreeMap<String, u64>,
    pub clusters: Vec<ClusterReport>,
    pub timeline: Vec<TimelineEntry>,
    /// How many entries the timeline had (all of them in `timeline` unless the run was
    /// told to forget them: `RunOptions::forget_seen`).
    pub events: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct ExpectationResult {
    pub expectation: String,
    pub met: bool,
    /// When it was met, in virtual seconds since the start.
    pub at_seconds: Option<f64>,
    pub detail: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct ClusterReport {
    pub name: String,
    pub uid: String,
    /// `Deleted` once deletion completed; otherwise the engine's last status.
    pub phase: String,
    pub status: Option<ClusterStatus>,
}

impl Report {
    /// A stable fingerprint of the timeline, for determinism checks.
    pub fn timeline_hash(&self) -> u64 {
        let text = serde_json::to_string(&self.timeline).unwrap_or_default();
        flightdeck_spec::fnv1a(text.as_bytes())
    }
}
