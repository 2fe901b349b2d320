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
const WATCH_TIMEOUT_SECS: u32 = 290;
/// The most nodes one watch keeps: a cluster claiming more is refused as broken.
pub const NODES_MAX: usize = 50_000;

/// What one cluster's watch knows.
#[derive(Debug, Default)]
struct Seen {
    /// The nodes, by name, from the last full list and the events since.
    nodes: BTreeMap<String, Node>,
    /// Whether a full list has been received: before it, nothing is known.
    synced: bool,
    /// When the watch broke (or ended) and why, until a new one has listed again.
    broken: Option<(Timestamp, String)>,
    /// The last read by the engine.
    read_at: Timestamp,
    /// When the running watch started.
    started_at: Timestamp,
    /// Whether a task is running for this cluster now.
    running: bool,
    /// The earliest time a new watch may start when none runs.
    restart_at: Timestamp,
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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

    /// Drops what is kept for clusters nobody read for [`IDLE_MAX`] and whose watch has
    /// ended, so a deleted cluster leaves nothing behind. Sweeps at most once per
    /// [`SWEEP_EVERY`].
    pub fn forget_idle(&self) {
        let now = self.clock.now();
        {
            let mut swept = lock(&self.swept_at);
            if now.since(*swept) < SWEEP_EVERY {
                return;
            }
            *swept = now;
        }
        lock(&self.seen).retain(|_, seen| {
            let s = lock(seen);
            s.running || now.since(s.read_at) < IDLE_MAX
        });
    }
}

/// Why a running watch should end now, if it should.
fn should_end(s: &Seen, now: Timestamp) -> Option<&'static str> {
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
    let mut buffer: BTreeMap<String, Node> = BTreeMap::new();
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

/// One watcher event into what the watch knows.
fn apply(
    s: &mut Seen,
    buffer: &mut BTreeMap<String, Node>,
    event: Event<core::Node>,
    format: ProviderIdFormat,
) -> Result<(), String> {
    match event {
        Event::Init => buffer.clear(),
        Event::InitApply(n) => {
            let n = node_of(&n, format);
            buffer.insert(n.name.clone(), n);
        }
        Event::InitDone => {
            s.nodes = std::mem::take(buffer);
            s.synced = true;
            s.broken = None;
        }
        Event::Apply(n) => {
            let n = node_of(&n, format);
            s.nodes.insert(n.name.clone(), n);
        }
        Event::Delete(n) => {
            s.nodes.remove(&node_of(&n, format).name);
        }
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
