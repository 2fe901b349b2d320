//! Nodes watched, not listed: one kube-runtime [`watcher`] per workload cluster keeps
//! that cluster's nodes, so a node that registers or goes NotReady is seen as soon as
//! the API server says so, and reading them on a reconcile costs no call.
//!
//! A watch's life:
//! - it starts on the first read of its cluster that has a client (the cluster's
//!   kubeconfig exists), and answers "unknown" (`None`) until its first full list is in:
//!   nothing is judged from a list that is not complete;
//! - while it is healthy its nodes are current: they are as fresh as the read;
//! - when it breaks (an error from the API server or the connection, or the stream
//!   ends), its nodes are kept but stamped with the time it broke, so the planner sees
//!   an observation that grows stale and, past its freshness limit, is blind (F10). The
//!   task ends, and a later read starts a new watch, with the client the cluster has
//!   then (a kubeconfig that changed is picked up there), no sooner than
//!   [`RESTART_AFTER`] after the break;
//! - it also ends, and is started again on the next read, after [`LIFETIME_MAX`], so a
//!   kubeconfig that changed while the watch stayed healthy is used within that time;
//! - it ends for good when nobody read it for [`IDLE_MAX`] (the cluster was deleted, or
//!   moved to another replica): a watch never outlives its use.
//!
//! Times come from the injected [`Clock`], never from the system clock.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use flightdeck_cloud::{Clock, Node, Ownership, Timestamp};
use flightdeck_spec::Duration;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1 as core;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};

use crate::node::node_of;
use crate::provider_id::ProviderIdFormat;

/// How soon after a break a new watch may start.
pub const RESTART_AFTER: Duration = Duration::from_secs(5);
/// The longest a watch runs before it is started afresh (with a full list).
pub const LIFETIME_MAX: Duration = Duration::from_mins(15);
/// How long a watch nobody reads is kept.
pub const IDLE_MAX: Duration = Duration::from_mins(10);
/// How often a running watch checks its idle time and lifetime (wall time: it only
/// bounds how late a watch that should end notices it).
const HOUSEKEEPING_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// The server-side timeout of each watch request: the watcher asks again after it,
/// from the resourceVersion it has (no list).
pub(crate) const WATCH_TIMEOUT_SECS: u32 = 290;
/// The most nodes one watch keeps: a cluster claiming more is refused as broken.
pub const NODES_MAX: usize = 50_000;

/// What one cluster's watch knows.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// The nodes, by name, from the last full list and the events since.
    pub(crate) nodes: BTreeMap<String, Node>,
    /// The resourceVersion of each node held (when it is a number, as an etcd-backed API
    /// server's are), and of each node deleted since the last full list: an event older
    /// than what is held for its node arrived out of order and is dropped, so a node's
    /// older state never replaces its newer one, nor brings a deleted node back.
    pub(crate) versions: BTreeMap<String, u64>,
    pub(crate) deleted: BTreeMap<String, u64>,
    /// Events dropped as older than what was held, since the watch began.
    pub(crate) out_of_order: u64,
    /// Whether a full list has been received: before it, nothing is known.
    pub(crate) synced: bool,
    /// When the watch broke (or ended) and why, until a new one has listed again.
    pub(crate) broken: Option<(Timestamp, String)>,
    /// The last read by the engine.
    pub(crate) read_at: Timestamp,
    /// When the running watch started.
    pub(crate) started_at: Timestamp,
    /// Whether a task is running for this cluster now.
    pub(crate) running: bool,
    /// The earliest time a new watch may start when none runs.
    pub(crate) restart_at: Timestamp,
}

/// What a read of one cluster's watched nodes answers.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchedNodes {
    /// `None` until the first full list is in.
    pub nodes: Option<Vec<Node>>,
    /// When the watch broke, if it is broken: the nodes are as of then.
    pub stale_since: Option<Timestamp>,
}

/// The node watches of one cloud's workload clusters.
pub struct NodeWatches {
    clock: Arc<dyn Clock>,
    format: ProviderIdFormat,
    seen: Mutex<HashMap<Ownership, Arc<Mutex<Seen>>>>,
    /// When [`NodeWatches::forget_idle`] last swept: it walks every cluster, so it runs
    /// at most once per [`SWEEP_EVERY`], not on every read.
    swept_at: Mutex<Timestamp>,
}

/// How often idle clusters are swept out.
const SWEEP_EVERY: Duration = Duration::from_mins(1);

impl std::fmt::Debug for NodeWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeWatches")
            .field("format", &self.format)
            .field("clusters", &lock(&self.seen).len())
            .finish()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl NodeWatches {
    pub fn new(clock: Arc<dyn Clock>, format: ProviderIdFormat) -> Self {
        NodeWatches {
            clock,
            format,
            seen: Mutex::new(HashMap::new()),
            swept_at: Mutex::new(Timestamp(0)),
        }
    }

    /// The nodes of `owner`'s workload cluster as its watch has them, starting the watch
    /// (with `client`) when none runs and a start is due. Must be called within a tokio
    /// runtime: the watch is a task of its own.
    pub fn read(&self, owner: &Ownership, client: Client) -> WatchedNodes {
        let now = self.clock.now();
        let seen = lock(&self.seen)
            .entry(owner.clone())
            .or_insert_with(|| {
                Arc::new(Mutex::new(Seen {
                    read_at: now,
                    ..Seen::default()
                }))
            })
            .clone();
        let mut s = lock(&seen);
        s.read_at = now;
        if !s.running && now >= s.restart_at {
            s.running = true;
            s.started_at = now;
            tracing::debug!(cluster = %owner.cluster, "starting the node watch");
            tokio::spawn(run(
                client,
                self.format,
                seen.clone(),
                self.clock.clone(),
                owner.cluster.clone(),
            ));
        }
        WatchedNodes {
            nodes: s.synced.then(|| s.nodes.values().cloned().collect()),
            stale_since: s.broken.as_ref().map(|(at, _)| *at),
        }
    }

    /// When `owner`'s watch broke, and why, if it is broken now.
    pub fn broken(&self, owner: &Ownership) -> Option<(Timestamp, String)> {
        let seen = lock(&self.seen).get(owner).cloned()?;
        let s = lock(&seen);
        s.broken.clone()
    }

    /// How many events `owner`'s watch dropped as older than the node's state it held
    /// (reordered events), since the cluster was first read.
    pub fn out_of_order(&self, owner: &Ownership) -> u64 {
        lock(&self.seen)
            .get(owner)
            .map_or(0, |seen| lock(seen).out_of_order)
    }

    /// Drops every cluster's watch, as a restarted controller has none: each running
    /// task takes itself for unread and ends at its next housekeeping; the next read
    /// starts a new watch, which lists the nodes first.
    pub fn forget_all(&self) {
        for (_, seen) in lock(&self.seen).drain() {
            lock(&seen).read_at = Timestamp(0);
        }
    }

    /// Drops what is kept for clusters nobody read for [`IDLE_MAX`] and whose watch has
    /// ended, so a deleted cluster leaves nothing behind. Sweeps at most once per
    /// [`SWEEP_EVERY`].
    pub fn forget_idle(&self) {
        let now = self.clock.now();
        if !sweep_due(&self.swept_at, now) {
            return;
        }
        lock(&self.seen).retain(|_, seen| {
            let s = lock(seen);
            s.running || now.since(s.read_at) < IDLE_MAX
        });
    }
}

/// Whether a sweep of idle watches is due at `now` (at most one per [`SWEEP_EVERY`]),
/// marking it done when it is.
pub(crate) fn sweep_due(swept_at: &Mutex<Timestamp>, now: Timestamp) -> bool {
    let mut swept = lock(swept_at);
    if now.since(*swept) < SWEEP_EVERY {
        return false;
    }
    *swept = now;
    true
}

/// Why a running watch should end now, if it should.
pub(crate) fn should_end(s: &Seen, now: Timestamp) -> Option<&'static str> {
    if now.since(s.read_at) >= IDLE_MAX {
        Some("nobody read it")
    } else if now.since(s.started_at) >= LIFETIME_MAX {
        Some("it reached its lifetime")
    } else {
        None
    }
}

/// One watch, until it breaks or should end.
async fn run(
    client: Client,
    format: ProviderIdFormat,
    seen: Arc<Mutex<Seen>>,
    clock: Arc<dyn Clock>,
    cluster: String,
) {
    let api: Api<core::Node> = Api::all(client);
    let config = watcher::Config::default().timeout(WATCH_TIMEOUT_SECS);
    let mut stream = std::pin::pin!(watcher::watcher(api, config));
    let mut housekeeping = tokio::time::interval(HOUSEKEEPING_EVERY);
    let mut buffer: BTreeMap<String, (Node, Option<u64>)> = BTreeMap::new();
    let why = loop {
        tokio::select! {
            event = stream.next() => match event {
                None => break "the watch stream ended".to_string(),
                Some(Err(e)) => break format!("the watch failed: {e}"),
                Some(Ok(event)) => {
                    let mut s = lock(&seen);
                    if let Err(e) = apply(&mut s, &mut buffer, event, format) {
                        break e;
                    }
                }
            },
            _ = housekeeping.tick() => {
                let now = clock.now();
                let mut s = lock(&seen);
                if let Some(why) = should_end(&s, now) {
                    tracing::debug!(%cluster, why, "node watch ends");
                    // What it has is current up to now; the next read starts a new one.
                    s.running = false;
                    s.restart_at = now;
                    s.broken = Some((now, format!("the watch ended: {why}")));
                    return;
                }
            }
        }
    };
    let now = clock.now();
    tracing::info!(%cluster, why = %why, "node watch broke; its nodes are stale from now");
    let mut s = lock(&seen);
    s.running = false;
    s.restart_at = now.plus(RESTART_AFTER);
    if s.broken.is_none() {
        s.broken = Some((now, why));
    }
}

/// A node object's resourceVersion, when it is a number.
fn version_of(n: &core::Node) -> Option<u64> {
    n.metadata.resource_version.as_deref()?.parse().ok()
}

/// Whether an event at `version` is older than what is held for its node.
fn out_of_order(s: &Seen, name: &str, version: Option<u64>) -> bool {
    let held = s.versions.get(name).or_else(|| s.deleted.get(name));
    matches!((held, version), (Some(held), Some(v)) if v < *held)
}

/// One watcher event into what the watch knows.
pub(crate) fn apply(
    s: &mut Seen,
    buffer: &mut BTreeMap<String, (Node, Option<u64>)>,
    event: Event<core::Node>,
    format: ProviderIdFormat,
) -> Result<(), String> {
    match event {
        Event::Init => buffer.clear(),
        Event::InitApply(n) => {
            let version = version_of(&n);
            let n = node_of(&n, format);
            buffer.insert(n.name.clone(), (n, version));
        }
        Event::InitDone => {
            let listed = std::mem::take(buffer);
            s.versions = listed
                .iter()
                .filter_map(|(name, (_, v))| Some((name.clone(), (*v)?)))
                .collect();
            s.nodes = listed.into_iter().map(|(name, (n, _))| (name, n)).collect();
            s.deleted.clear();
            s.synced = true;
            s.broken = None;
        }
        Event::Apply(n) => {
            let version = version_of(&n);
            let n = node_of(&n, format);
            if out_of_order(s, &n.name, version) {
                s.out_of_order += 1;
                tracing::debug!(node = %n.name, ?version, "node event older than what is held: dropped");
                return Ok(());
            }
            s.deleted.remove(&n.name);
            match version {
                Some(v) => s.versions.insert(n.name.clone(), v),
                None => s.versions.remove(&n.name),
            };
            s.nodes.insert(n.name.clone(), n);
        }
        Event::Delete(n) => {
            let version = version_of(&n);
            let name = node_of(&n, format).name;
            if out_of_order(s, &name, version) {
                s.out_of_order += 1;
                tracing::debug!(node = %name, ?version, "node deletion older than what is held: dropped");
                return Ok(());
            }
            s.nodes.remove(&name);
            s.versions.remove(&name);
            if let Some(v) = version {
                s.deleted.insert(name, v);
            }
        }
    }
    // Deletions are remembered until the next full list; a cluster that churns through
    // more nodes than that between two lists forgets the oldest protection first.
    while s.deleted.len() > NODES_MAX {
        let Some(oldest) = s
            .deleted
            .iter()
            .min_by_key(|(_, v)| **v)
            .map(|(name, _)| name.clone())
        else {
            break;
        };
        s.deleted.remove(&oldest);
    }
    if s.nodes.len().max(buffer.len()) > NODES_MAX {
        return Err(format!(
            "the workload cluster reports more than {NODES_MAX} nodes"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(name: &str, ready: bool) -> core::Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"providerID": format!("openstack:///{name}-id")},
            "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]},
        }))
        .expect("node")
    }

    #[test]
    fn nothing_is_known_until_the_first_full_list_is_in() {
        let mut s = Seen::default();
        let mut buffer = BTreeMap::new();
        let f = ProviderIdFormat::OpenStack;
        apply(&mut s, &mut buffer, Event::Init, f).expect("ok");
        apply(&mut s, &mut buffer, Event::InitApply(node("a", true)), f).expect("ok");
        assert!(
            !s.synced && s.nodes.is_empty(),
            "a partial list is not known"
        );
        apply(&mut s, &mut buffer, Event::InitDone, f).expect("ok");
        assert!(s.synced);
        assert_eq!(s.nodes["a"].server_id.as_deref(), Some("a-id"));
    }

    #[test]
    fn events_after_the_list_change_what_is_known_at_once() {
        let mut s = Seen {
            broken: Some((Timestamp(5), "x".into())),
            ..Seen::default()
        };
        let mut buffer = BTreeMap::new();
        let f = ProviderIdFormat::OpenStack;
        for e in [
            Event::Init,
            Event::InitApply(node("a", true)),
            Event::InitDone,
        ] {
            apply(&mut s, &mut buffer, e, f).expect("ok");
        }
        assert_eq!(s.broken, None, "a new full list heals a broken watch");
        apply(&mut s, &mut buffer, Event::Apply(node("a", false)), f).expect("ok");
        apply(&mut s, &mut buffer, Event::Apply(node("b", true)), f).expect("ok");
        assert!(!s.nodes["a"].ready, "a node that goes NotReady is seen");
        assert!(s.nodes["b"].ready, "a node that registers is seen");
        apply(&mut s, &mut buffer, Event::Delete(node("a", false)), f).expect("ok");
        assert_eq!(s.nodes.keys().collect::<Vec<_>>(), ["b"]);
    }

    fn at(mut n: core::Node, version: u64) -> core::Node {
        n.metadata.resource_version = Some(version.to_string());
        n
    }

    /// `k8s.watchReorder`: a node's older state arrives after its newer one.
    #[test]
    fn an_event_older_than_what_is_held_for_its_node_is_dropped() {
        let mut s = Seen::default();
        let mut buffer = BTreeMap::new();
        let f = ProviderIdFormat::OpenStack;
        for e in [
            Event::Init,
            Event::InitApply(at(node("a", true), 5)),
            Event::InitApply(at(node("b", true), 6)),
            Event::InitDone,
        ] {
            apply(&mut s, &mut buffer, e, f).expect("ok");
        }
        // a: NotReady at 7, Ready again at 8, delivered 8 then 7.
        apply(&mut s, &mut buffer, Event::Apply(at(node("a", true), 8)), f).expect("ok");
        apply(
            &mut s,
            &mut buffer,
            Event::Apply(at(node("a", false), 7)),
            f,
        )
        .expect("ok");
        assert!(s.nodes["a"].ready, "the newer state stays");
        // b: deleted at 10, its NotReady of 9 delivered after.
        apply(
            &mut s,
            &mut buffer,
            Event::Delete(at(node("b", false), 10)),
            f,
        )
        .expect("ok");
        apply(
            &mut s,
            &mut buffer,
            Event::Apply(at(node("b", false), 9)),
            f,
        )
        .expect("ok");
        assert!(
            !s.nodes.contains_key("b"),
            "a deleted node does not come back"
        );
        assert_eq!(s.out_of_order, 2);
        // A node of that name registering again is newer: it is taken.
        apply(
            &mut s,
            &mut buffer,
            Event::Apply(at(node("b", true), 11)),
            f,
        )
        .expect("ok");
        assert!(s.nodes["b"].ready);
        // Without versions, events are taken in the order they come.
        apply(&mut s, &mut buffer, Event::Apply(node("c", false)), f).expect("ok");
        apply(&mut s, &mut buffer, Event::Apply(node("c", true)), f).expect("ok");
        assert!(s.nodes["c"].ready);
    }

    #[test]
    fn a_relist_replaces_what_was_known() {
        let mut s = Seen::default();
        let mut buffer = BTreeMap::new();
        let f = ProviderIdFormat::OpenStack;
        for e in [
            Event::Init,
            Event::InitApply(node("a", true)),
            Event::InitDone,
        ] {
            apply(&mut s, &mut buffer, e, f).expect("ok");
        }
        for e in [Event::Init, Event::InitApply(node("b", true))] {
            apply(&mut s, &mut buffer, e, f).expect("ok");
        }
        assert_eq!(
            s.nodes.keys().collect::<Vec<_>>(),
            ["a"],
            "old view until done"
        );
        apply(&mut s, &mut buffer, Event::InitDone, f).expect("ok");
        assert_eq!(s.nodes.keys().collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn a_watch_ends_when_idle_or_old() {
        let s = Seen {
            read_at: Timestamp(0),
            started_at: Timestamp(0),
            ..Seen::default()
        };
        assert_eq!(should_end(&s, Timestamp(1_000)), None);
        assert!(should_end(&s, Timestamp(IDLE_MAX.as_millis())).is_some());
        let s = Seen {
            read_at: Timestamp(LIFETIME_MAX.as_millis()),
            started_at: Timestamp(0),
            ..Seen::default()
        };
        assert!(should_end(&s, Timestamp(LIFETIME_MAX.as_millis())).is_some());
    }
}
