//! What the backends publish for the API to read: each cluster's view, the event stream
//! and the fleet's gauges. Backends write, handlers read; nobody waits on a backend to
//! answer a read.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, RwLock};

use tokio::sync::broadcast;

use crate::metrics::Metrics;
use crate::types::{ClusterDetail, EventView};

/// Events kept in memory for `GET /api/v1/events` (each cluster's own history is in the
/// store, bounded there).
pub const RECENT_EVENTS_MAX: usize = 10_000;
/// Events a follower may fall behind before it is told it missed some.
const FOLLOW_BUFFER: usize = 4_096;

pub struct Published {
    views: RwLock<BTreeMap<String, ClusterDetail>>,
    recent: Mutex<VecDeque<EventView>>,
    events: broadcast::Sender<EventView>,
    /// Per backend: (due and waiting, in flight).
    queues: Mutex<BTreeMap<String, (usize, usize)>>,
    pub metrics: Metrics,
}

impl Published {
    pub fn new(metrics: Metrics) -> Self {
        let (events, _) = broadcast::channel(FOLLOW_BUFFER);
        Published {
            views: RwLock::new(BTreeMap::new()),
            recent: Mutex::new(VecDeque::new()),
            events,
            queues: Mutex::new(BTreeMap::new()),
            metrics,
        }
    }

    pub fn set_view(&self, name: &str, view: Option<ClusterDetail>) {
        let mut views = self.views.write().unwrap_or_else(|e| e.into_inner());
        match view {
            Some(v) => {
                views.insert(name.to_string(), v);
            }
            None => {
                views.remove(name);
            }
        }
    }

    pub fn view(&self, name: &str) -> Option<ClusterDetail> {
        self.views
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    pub fn views(&self) -> Vec<ClusterDetail> {
        self.views
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Records events (oldest first) and hands them to every follower.
    pub fn publish_events(&self, events: Vec<EventView>) {
        if events.is_empty() {
            return;
        }
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        for e in events {
            self.metrics
                .on_cluster_event(&e.cluster, &e.reason, &e.message);
            recent.push_back(e.clone());
            while recent.len() > RECENT_EVENTS_MAX {
                recent.pop_front();
            }
            // No follower is not an error.
            let _ = self.events.send(e);
        }
    }

    /// The latest `limit` events of every cluster (or of `cluster`), oldest first.
    pub fn recent_events(&self, cluster: Option<&str>, limit: usize) -> Vec<EventView> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<EventView> = recent
            .iter()
            .rev()
            .filter(|e| cluster.is_none_or(|c| e.cluster == c))
            .take(limit)
            .cloned()
            .collect();
        out.reverse();
        out
    }

    pub fn follow(&self) -> broadcast::Receiver<EventView> {
        self.events.subscribe()
    }

    pub fn set_queue(&self, backend: &str, waiting: usize, in_flight: usize) {
        let mut q = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        q.insert(backend.to_string(), (waiting, in_flight));
        let (w, f) = q.values().fold((0, 0), |(w, f), (a, b)| (w + a, f + b));
        self.metrics.set_queue(w, f);
    }

    /// Sets the fleet's gauges (phases, conditions, breakers, repairs) from the views.
    pub fn refresh_fleet_gauges(&self) {
        let mut fleet = crate::metrics::FleetGauges::default();
        for v in self.views() {
            let s = &v.summary;
            fleet.add_cluster(
                &s.phase,
                s.conditions.iter().map(String::as_str),
                s.breakers.len(),
            );
            let status: Option<flightdeck_plan::ClusterStatus> =
                serde_json::from_value(v.status.clone()).ok();
            for b in status.iter().flat_map(|st| st.repair_budgets.iter()) {
                fleet.add_set(&s.name, &b.set, b.in_use, b.budget);
            }
        }
        self.metrics.set_fleet(&fleet);
    }
}
