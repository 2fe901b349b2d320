//! `api.staleRead`: a list answered from a lagging cache or replica. While the fault is
//! active on a service, its lists answer with the oldest answer the same list (same
//! operation, same owner) gave within the last `latency`: an answer the simulator really
//! gave, never one made up, and never older than `latency`.
//!
//! Answers are kept only in runs that schedule such a fault, for [`KEPT`] at most.

use std::any::Any;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use flightdeck_cloud::Timestamp;
use flightdeck_spec::{Duration, FaultKind};

use crate::{State, faults};

/// How long answers are kept: the most an `api.staleRead` may lag.
pub const KEPT: Duration = flightdeck_spec::fault::STALE_READ_LAG_MAX;
/// The most answers kept per list.
const ANSWERS_MAX: usize = 256;

type Answer = Arc<dyn Any + Send + Sync>;

#[derive(Default)]
pub(crate) struct ListHistory {
    /// (operation, owner) → the answers given, oldest first.
    answers: BTreeMap<(&'static str, String), VecDeque<(Timestamp, Answer)>>,
}

/// The answer to list `operation` of `service` for `key` at `now`, given the `fresh`
/// one: an earlier answer while an `api.staleRead` lags the service.
pub(crate) fn answer<T: Clone + Send + Sync + 'static>(
    st: &mut State,
    service: &str,
    operation: &'static str,
    key: &str,
    now: Timestamp,
    fresh: T,
) -> T {
    if !st
        .faults
        .iter()
        .any(|r| r.fault.kind == FaultKind::ApiStaleRead)
    {
        return fresh;
    }
    let kept = st
        .lists
        .answers
        .entry((operation, key.to_string()))
        .or_default();
    while kept
        .front()
        .is_some_and(|(t, _)| now.since(*t) > KEPT || kept.len() >= ANSWERS_MAX)
    {
        kept.pop_front();
    }
    kept.push_back((now, Arc::new(fresh.clone())));
    let mut call = faults::CallFor::labelled();
    let lagging = faults::active_on(st, FaultKind::ApiStaleRead, service, now, &mut call);
    let Some((index, lag)) = lagging
        .iter()
        .filter_map(|i| Some((*i, st.faults[*i].fault.latency?)))
        .max_by_key(|(_, lag)| *lag)
    else {
        return fresh;
    };
    let kept = &st.lists.answers[&(operation, key.to_string())];
    // The oldest answer given within the lag: never older than `lag`, so the list shows
    // the cloud as it was after `now - lag`, as a replica that lags by `lag` would. (The
    // newest answer older than `lag` could be far older when nobody listed for a while:
    // seed 123427144 was served a list 6 minutes old under a lag of at most 2.)
    let old = kept
        .iter()
        .find(|(t, _)| now.since(*t) <= lag && *t < now)
        .and_then(|(_, a)| a.downcast_ref::<T>().cloned());
    match old {
        Some(old) => {
            faults::note(st, index, 1);
            old
        }
        None => fresh,
    }
}
