//! Nodes watched where time is virtual: the simulator's runs, in process.
//!
//! [`crate::watch`] keeps a kube-runtime watcher running as a task of its own, fed as the
//! API server writes events. A simulated run has no such "as it happens": its clock
//! moves only between steps, and a task that waited for events would either never be
//! fed or spin. So here the watch is read when its nodes are read: one list and one
//! watch request (with `BOOKMARK`s asked for) start it; each read then takes the events
//! the open watch carries up to its bookmark (the transport ends each part of a watch
//! with one), which costs no request; the request's `timeoutSeconds` running out costs a
//! new watch request from the last `resourceVersion`, and a `410 Expired` a new list.
//!
//! What the planner sees is what [`crate::watch`] gives it, kept by the same code
//! ([`crate::watch::apply`]): nothing until the first full list is in; a node's older
//! state never replaces its newer one; a watch that breaks (the API stops answering,
//! or the list or watch request fails) keeps its nodes, stale from the last read that
//! found them current, and a new one starts no sooner than
//! [`RESTART_AFTER`](crate::watch::RESTART_AFTER) after; every watch starts afresh after
//! [`LIFETIME_MAX`](crate::watch::LIFETIME_MAX), and one nobody read for
//! [`IDLE_MAX`](crate::watch::IDLE_MAX) is dropped.
//!
//! One difference, on purpose: the real-time watch notices a break as the connection
//! drops, this one at its next read, so it stamps the break with the last read that
//! found the watch current (never later than the truth).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use flightdeck_cloud::{Clock, Ownership, Timestamp};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use k8s_openapi::api::core::v1 as core;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::runtime::watcher::Event;
use kube::{Api, Client};

use crate::provider_id::ProviderIdFormat;
use crate::watch::{
    IDLE_MAX, RESTART_AFTER, Seen, WATCH_TIMEOUT_SECS, WatchedNodes, apply, lock, should_end,
    sweep_due,
};

/// The most times one read starts a watch or asks again: a watch that reached its
/// lifetime starts again at once, as does one told its version expired.
const STARTS_PER_READ_MAX: usize = 3;

type NodeEvents = BoxStream<'static, kube::Result<WatchEvent<core::Node>>>;

/// One cluster's watch.
#[derive(Default)]
struct Pumped {
    seen: Seen,
    /// The open watch request, while one is.
    stream: Option<NodeEvents>,
    /// The newest `resourceVersion` received: where a new watch request starts.
    version: String,
    /// When the watch was last read up to a bookmark: its nodes are current as of then.
    current_at: Timestamp,
}

/// How one read of an open watch ended.
enum Read {
    /// Up to a bookmark: everything until now is in.
    CaughtUp,
    /// The server no longer keeps the events after our version: list again.
    Expired,
    /// The watch broke, for this reason.
    Broke(String),
}

impl Pumped {
    /// The watch broke at `now`: its nodes are kept, stale from when they were last
    /// current, and a new one may start after [`RESTART_AFTER`].
    fn break_at(&mut self, now: Timestamp, why: String) {
        tracing::info!(why = %why, "node watch broke; its nodes are stale");
        self.stream = None;
        self.seen.running = false;
        self.seen.restart_at = now.plus(RESTART_AFTER);
        if self.seen.broken.is_none() {
            self.seen.broken = Some((self.current_at, why));
        }
    }

    /// Lists, then opens a watch from the list's version.
    async fn start(&mut self, api: &Api<core::Node>, format: ProviderIdFormat, now: Timestamp) {
        self.stream = None;
        let list = match api.list(&ListParams::default()).await {
            Ok(list) => list,
            Err(e) => return self.break_at(now, format!("the node list failed: {e}")),
        };
        let mut buffer = std::collections::BTreeMap::new();
        let events = std::iter::once(Event::Init)
            .chain(list.items.into_iter().map(Event::InitApply))
            .chain(std::iter::once(Event::InitDone));
        for event in events {
            if let Err(e) = apply(&mut self.seen, &mut buffer, event, format) {
                return self.break_at(now, e);
            }
        }
        self.version = list.metadata.resource_version.unwrap_or_default();
        self.current_at = now;
        match api.watch(&watch_params(), &self.version).await {
            Ok(stream) => {
                self.stream = Some(stream.boxed());
                self.seen.running = true;
                self.seen.started_at = now;
            }
            Err(e) => self.break_at(now, format!("the node watch failed: {e}")),
        }
    }

    /// Takes what the open watch carries, up to its bookmark.
    async fn read(
        &mut self,
        api: &Api<core::Node>,
        format: ProviderIdFormat,
        now: Timestamp,
    ) -> Read {
        let mut buffer = std::collections::BTreeMap::new();
        let mut asked_again = false;
        loop {
            let Some(stream) = self.stream.as_mut() else {
                return Read::Broke("no watch is open".into());
            };
            let event = match stream.next().await {
                Some(Ok(WatchEvent::Added(n) | WatchEvent::Modified(n))) => Event::Apply(n),
                Some(Ok(WatchEvent::Deleted(n))) => Event::Delete(n),
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    self.version = b.metadata.resource_version;
                    self.current_at = now;
                    return Read::CaughtUp;
                }
                Some(Ok(WatchEvent::Error(status))) if status.code == 410 => {
                    return Read::Expired;
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    return Read::Broke(format!("the node watch failed: {}", status.message));
                }
                Some(Err(e)) => return Read::Broke(format!("the node watch failed: {e}")),
                None if asked_again => {
                    return Read::Broke("the node watch ended as soon as it was asked".into());
                }
                None => {
                    // The request's time ran out: ask again from where it got.
                    asked_again = true;
                    match api.watch(&watch_params(), &self.version).await {
                        Ok(s) => self.stream = Some(s.boxed()),
                        Err(e) => return Read::Broke(format!("the node watch failed: {e}")),
                    }
                    continue;
                }
            };
            if let Err(e) = apply(&mut self.seen, &mut buffer, event, format) {
                return Read::Broke(e);
            }
        }
    }
}

/// A watch request with bookmarks (kube asks for them by default: said here, since
/// the read relies on them).
fn watch_params() -> WatchParams {
    let params = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
    debug_assert!(params.bookmarks, "a pumped watch reads up to a bookmark");
    params
}

/// The node watches of one cloud's workload clusters, read on demand.
pub struct PumpedWatches {
    clock: Arc<dyn Clock>,
    format: ProviderIdFormat,
    watches: Mutex<HashMap<Ownership, Arc<tokio::sync::Mutex<Pumped>>>>,
    swept_at: Mutex<Timestamp>,
}

impl std::fmt::Debug for PumpedWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PumpedWatches")
            .field("format", &self.format)
            .field("clusters", &lock(&self.watches).len())
            .finish()
    }
}

impl PumpedWatches {
    pub fn new(clock: Arc<dyn Clock>, format: ProviderIdFormat) -> Self {
        PumpedWatches {
            clock,
            format,
            watches: Mutex::new(HashMap::new()),
            swept_at: Mutex::new(Timestamp(0)),
        }
    }

    /// The nodes of `owner`'s workload cluster as its watch has them now, starting the
    /// watch (with `client`) when none is open and a start is due.
    pub async fn read(&self, owner: &Ownership, client: Client) -> WatchedNodes {
        self.forget_idle();
        let now = self.clock.now();
        let cell = lock(&self.watches)
            .entry(owner.clone())
            .or_default()
            .clone();
        let mut w = cell.lock().await;
        w.seen.read_at = now;
        if w.seen.running
            && let Some(why) = should_end(&w.seen, now)
        {
            tracing::debug!(cluster = %owner.cluster, why, "node watch ends; a new one starts");
            w.stream = None;
            w.seen.running = false;
            w.seen.restart_at = now;
        }
        let api: Api<core::Node> = Api::all(client);
        for _ in 0..STARTS_PER_READ_MAX {
            if !w.seen.running {
                if now < w.seen.restart_at {
                    break;
                }
                tracing::debug!(cluster = %owner.cluster, "starting the node watch");
                w.start(&api, self.format, now).await;
                if !w.seen.running {
                    break;
                }
            }
            match w.read(&api, self.format, now).await {
                Read::CaughtUp => break,
                Read::Expired => {
                    w.stream = None;
                    w.seen.running = false;
                    w.seen.restart_at = now;
                }
                Read::Broke(why) => {
                    w.break_at(now, why);
                    break;
                }
            }
        }
        WatchedNodes {
            nodes: w
                .seen
                .synced
                .then(|| w.seen.nodes.values().cloned().collect()),
            stale_since: w.seen.broken.as_ref().map(|(at, _)| *at),
        }
    }

    /// When `owner`'s watch broke, and why, if it is broken now.
    pub fn broken(&self, owner: &Ownership) -> Option<(Timestamp, String)> {
        let cell = lock(&self.watches).get(owner).cloned()?;
        let w = cell.try_lock().ok()?;
        w.seen.broken.clone()
    }

    /// How many events `owner`'s watch dropped as older than the node's state it held.
    pub fn out_of_order(&self, owner: &Ownership) -> u64 {
        let Some(cell) = lock(&self.watches).get(owner).cloned() else {
            return 0;
        };
        cell.try_lock().map_or(0, |w| w.seen.out_of_order)
    }

    /// Drops every cluster's watch, as a restarted controller has none: the next read
    /// of a cluster's nodes starts a new watch, which lists them first.
    pub fn forget_all(&self) {
        lock(&self.watches).clear();
    }

    /// Drops the watches nobody read for [`IDLE_MAX`], at most once per
    /// minute: a deleted cluster leaves nothing behind.
    fn forget_idle(&self) {
        let now = self.clock.now();
        if !sweep_due(&self.swept_at, now) {
            return;
        }
        lock(&self.watches).retain(|_, cell| {
            cell.try_lock()
                .map_or(true, |w| now.since(w.seen.read_at) < IDLE_MAX)
        });
    }
}
