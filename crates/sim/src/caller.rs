//! Who sent the call being served: the HTTP front end sets it from the call's
//! `X-Flightdeck-Caller` header for as long as the call is served, and the mutation log
//! records it with every mutation the call makes. A replica of flightdeck names itself
//! and the claim revision it acted under there, so a check can tell, from the cloud's
//! own log, which replica mutated what under which claim.
//!
//! A label is words `key=value` apart by spaces. Its `cluster=` word says which cluster
//! the call is for: a fault aimed at one cluster strikes only calls that say it is
//! theirs (`api.errorRate`, `api.latency`, ... with `cluster`).

use std::future::Future;

tokio::task_local! {
    static CALLER: String;
}

/// The word of a caller label that names the cluster a call is for.
const CLUSTER_WORD: &str = "cluster=";

/// Serves `call` as sent by `caller`.
pub async fn serve_as<F: Future>(caller: String, call: F) -> F::Output {
    CALLER.scope(caller, call).await
}

/// Makes `calls` for `cluster`: the label they are served under says `cluster=<cluster>`
/// after what a label already set says (a replica and its claim).
pub async fn for_cluster<F: Future>(cluster: &str, calls: F) -> F::Output {
    let label = match current() {
        Some(outer) => format!("{outer} {CLUSTER_WORD}{cluster}"),
        None => format!("{CLUSTER_WORD}{cluster}"),
    };
    serve_as(label, calls).await
}

/// Who sent the call being served, if it said.
pub(crate) fn current() -> Option<String> {
    CALLER.try_with(Clone::clone).ok()
}

/// The cluster the call being served is for, if its label says (the last `cluster=`).
pub fn cluster() -> Option<String> {
    CALLER
        .try_with(|label| cluster_of(label).map(str::to_string))
        .ok()
        .flatten()
}

/// The cluster a caller label names.
fn cluster_of(label: &str) -> Option<&str> {
    label
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(CLUSTER_WORD))
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_names_its_cluster_by_its_last_cluster_word() {
        assert_eq!(cluster_of("replica=r1 cluster=demo"), Some("demo"));
        assert_eq!(cluster_of("cluster=a cluster=b"), Some("b"));
        assert_eq!(cluster_of("replica=r1 claim=7"), None);
    }

    #[tokio::test]
    async fn for_cluster_keeps_the_outer_label_and_adds_the_cluster() {
        assert_eq!(cluster(), None);
        let seen = serve_as("replica=r1 claim=3".into(), async {
            for_cluster("demo", async { (current(), cluster()) }).await
        })
        .await;
        assert_eq!(
            seen,
            (
                Some("replica=r1 claim=3 cluster=demo".into()),
                Some("demo".into())
            )
        );
    }
}
