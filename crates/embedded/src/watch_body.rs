//! The in-process transport's bodies: a whole answer, or a watch that goes on.
//!
//! Over HTTP a watch is one long-lived response: the API server writes each event as it
//! happens, until the request's `timeoutSeconds` or a broken connection ends it. In
//! process, time is the simulator's (virtual) clock, so nothing can be written "as it
//! happens". Instead the body of a watch is read on demand: each time the client reads
//! past what it has, the body asks the simulator for the events after the last
//! `resourceVersion` it carried ([`SimCloud::kube_watch_continue`], part of the one
//! request already counted, not a new call) and hands them on, ended by a `BOOKMARK`
//! (the client asked for them) that says how far they go. A client that reads up to a
//! bookmark has everything that happened until now; one that reads on later gets what
//! happened since.
//!
//! The body ends when the request's `timeoutSeconds` of simulated time have passed (the
//! client watches again from its last `resourceVersion`, a new call), after an answer
//! without a bookmark (an `ERROR`, such as `410 Expired`: the client lists again), and
//! with an error when the API stopped answering (the connection broke).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use flightdeck_cloud::{Clock, Timestamp};
use flightdeck_sim::{
    BOOKMARK_START, KubeRequest, SimCloud, query_param, watch_line_version, with_resource_version,
};
use http_body::{Body, Frame, SizeHint};

/// How long a watch runs when its request names no `timeoutSeconds`.
const TIMEOUT_DEFAULT_SECS: u64 = 290;
/// The longest a watch may ask to run.
const TIMEOUT_MAX_SECS: u64 = 3_600;

/// Why a watch's body stopped: its API no longer answers.
#[derive(Debug)]
pub struct WatchBroke(pub String);

impl std::fmt::Display for WatchBroke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WatchBroke {}

/// The body of an in-process answer.
pub enum SimBody {
    /// A whole answer, handed on at once.
    Whole(Option<Bytes>),
    /// A watch, read on demand.
    Watch(Box<WatchBody>),
}

/// A watch read on demand (see the module's documentation).
pub struct WatchBody {
    cloud: Arc<SimCloud>,
    cluster: String,
    request: KubeRequest,
    /// The first answer, not yet handed on.
    first: Option<Bytes>,
    /// Where the next part starts: the last bookmark's `resourceVersion`. `None` once
    /// an answer came without one: the body ends.
    version: Option<String>,
    /// When the request was made, and when it ends.
    ends_at: Timestamp,
}

impl SimBody {
    pub fn whole(body: Vec<u8>) -> Self {
        SimBody::Whole(Some(Bytes::from(body)))
    }

    /// The body of the watch `request` to `cluster`, whose first answer is `first`.
    pub fn watch(
        cloud: Arc<SimCloud>,
        cluster: &str,
        request: KubeRequest,
        first: Vec<u8>,
    ) -> Self {
        let timeout = query_param(&request.query, "timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(TIMEOUT_DEFAULT_SECS)
            .min(TIMEOUT_MAX_SECS);
        let ends_at = cloud
            .clock()
            .now()
            .plus_millis(timeout.saturating_mul(1_000));
        SimBody::Watch(Box::new(WatchBody {
            version: bookmark_version(&first),
            first: Some(Bytes::from(first)),
            cloud,
            cluster: cluster.to_string(),
            request,
            ends_at,
        }))
    }
}

impl WatchBody {
    /// The next part of the watch, if it goes on.
    fn next_part(&mut self) -> Option<Result<Bytes, WatchBroke>> {
        if let Some(first) = self.first.take() {
            return Some(Ok(first));
        }
        let version = self.version.take()?;
        if self.cloud.clock().now() >= self.ends_at {
            return None;
        }
        self.request.query = with_resource_version(&self.request.query, &version);
        let answer = self.cloud.kube_watch_continue(&self.cluster, &self.request);
        if answer.status != 200 {
            return Some(Err(WatchBroke(format!(
                "the watch of {} broke: its API answered {}",
                self.cluster, answer.status
            ))));
        }
        self.version = bookmark_version(&answer.body);
        Some(Ok(Bytes::from(answer.body)))
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = WatchBroke;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, WatchBroke>>> {
        let part = match self.get_mut() {
            SimBody::Whole(bytes) => bytes.take().map(Ok),
            SimBody::Watch(watch) => watch.next_part(),
        };
        Poll::Ready(part.map(|p| p.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, SimBody::Whole(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            SimBody::Whole(Some(b)) => SizeHint::with_exact(b.len() as u64),
            SimBody::Whole(None) => SizeHint::with_exact(0),
            SimBody::Watch(_) => SizeHint::default(),
        }
    }
}

/// The `resourceVersion` of the bookmark that ends `body`, if it ends with one.
fn bookmark_version(body: &[u8]) -> Option<String> {
    let last = body.split(|b| *b == b'\n').rfind(|l| !l.is_empty())?;
    if !last.starts_with(BOOKMARK_START.as_bytes()) {
        return None;
    }
    watch_line_version(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_goes_on_from_the_version_its_last_bookmark_names() {
        let body = b"{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"17\"}}}\n";
        assert_eq!(bookmark_version(body).as_deref(), Some("17"));
        assert_eq!(
            bookmark_version(b"{\"type\":\"ERROR\",\"object\":{}}\n"),
            None
        );
        assert!(
            KubeRequest {
                method: "GET".into(),
                path: "/api/v1/nodes".into(),
                query: "watch=true".into(),
                ..KubeRequest::default()
            }
            .is_watch()
        );
        assert!(
            !KubeRequest {
                method: "GET".into(),
                path: "/api/v1/nodes".into(),
                ..KubeRequest::default()
            }
            .is_watch()
        );
    }
}
