//! The fence: which clusters this replica holds, with each claim's revision (the fencing
//! token), and until when its lease holds on its own monotonic clock. The store reads it
//! in every commit; the replica writes it as it claims, releases and keeps its lease.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The monotonic clock the fence reads: `Instant::now` in the daemon, a test's in tests.
pub type Now = Arc<dyn Fn() -> Instant + Send + Sync>;

/// Which store tables hold a cluster's own state, written only by the replica that holds
/// the cluster. Specs are written by whoever serves the API, and are not fenced.
pub const FENCED_TABLES: &[&str] = &["memory", "status"];

/// The clusters whose own state `writes` touch: records of [`FENCED_TABLES`] and
/// events, each keyed by the cluster's name. A commit of them is fenced.
pub fn clusters_written(writes: &[flightdeck_store::Write]) -> BTreeSet<String> {
    use flightdeck_store::Write;
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Put { table, key, .. } | Write::Remove { table, key }
                if FENCED_TABLES.contains(table) =>
            {
                Some(key.clone())
            }
            Write::Event { key, .. } | Write::ClearEvents { key } => Some(key.clone()),
            _ => None,
        })
        .collect()
}

#[derive(Default)]
struct State {
    /// Off until a replica starts: a store without replicas is fenced by nothing.
    on: bool,
    held: BTreeMap<String, i64>,
    /// The lease holds until then, as this replica last knew it, less a safety margin.
    deadline: Option<Instant>,
}

#[derive(Default)]
pub(crate) struct Fence {
    state: Mutex<State>,
}

impl Fence {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind: keep going with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn turn_on(&self) {
        self.lock().on = true;
    }

    pub(crate) fn set_deadline(&self, deadline: Instant) {
        let mut s = self.lock();
        s.deadline = Some(s.deadline.map_or(deadline, |d| d.max(deadline)));
    }

    pub(crate) fn hold(&self, cluster: &str, revision: i64) {
        self.lock().held.insert(cluster.to_string(), revision);
    }

    pub(crate) fn drop_claim(&self, cluster: &str) {
        self.lock().held.remove(cluster);
    }

    /// The claim revision `cluster` is held under, if it is (without copying the rest).
    pub(crate) fn token(&self, cluster: &str) -> Option<i64> {
        self.lock().held.get(cluster).copied()
    }

    pub(crate) fn held(&self) -> BTreeMap<String, i64> {
        self.lock().held.clone()
    }

    /// Whether a reconcile of `cluster` that started under `claim` may still act at
    /// `now`: not once the claim is gone or held anew, nor past the lease deadline.
    /// Read without asking etcd: cheap enough for every cloud call.
    pub(crate) fn may_act(
        &self,
        cluster: &str,
        claim: Option<i64>,
        now: Instant,
    ) -> Result<(), String> {
        let one = BTreeSet::from([cluster.to_string()]);
        match self.tokens(&one, now)? {
            None => Ok(()),
            Some(t) if t.first().map(|(_, rev)| *rev) == claim => Ok(()),
            Some(_) => Err(format!(
                "cluster {cluster} was claimed again since this reconcile started; it stops here and the claim's own reconcile takes over"
            )),
        }
    }

    /// The claim revision to compare for each of `clusters`, or why this replica must
    /// not write them: its lease ran out on its own clock, or it does not hold one.
    /// `None` while the fence is off.
    pub(crate) fn tokens(
        &self,
        clusters: &BTreeSet<String>,
        now: Instant,
    ) -> Result<Option<Vec<(String, i64)>>, String> {
        let s = self.lock();
        if !s.on {
            return Ok(None);
        }
        match s.deadline {
            Some(d) if now < d => {}
            _ => {
                return Err(
                    "this replica's lease has run out on its own clock; it writes nothing until it is renewed"
                        .into(),
                );
            }
        }
        let mut out = Vec::new();
        for c in clusters {
            match s.held.get(c) {
                Some(rev) => out.push((c.clone(), *rev)),
                None => return Err(format!("cluster {c} is not held by this replica")),
            }
        }
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_store_without_replicas_is_fenced_by_nothing() {
        let f = Fence::default();
        assert_eq!(f.tokens(&set(&["c1"]), Instant::now()), Ok(None));
    }

    #[test]
    fn a_replica_writes_only_the_clusters_it_holds_with_their_claim_revisions() {
        let f = Fence::default();
        let t0 = Instant::now();
        f.turn_on();
        f.set_deadline(t0 + Duration::from_secs(8));
        f.hold("c1", 41);
        assert_eq!(
            f.tokens(&set(&["c1"]), t0),
            Ok(Some(vec![("c1".to_string(), 41)]))
        );
        let err = f.tokens(&set(&["c1", "c2"]), t0).expect_err("c2 not held");
        assert!(err.contains("cluster c2 is not held"), "{err}");
        f.drop_claim("c1");
        assert!(f.tokens(&set(&["c1"]), t0).is_err(), "released");
    }

    #[test]
    fn past_its_lease_deadline_on_its_own_clock_a_replica_writes_nothing() {
        let f = Fence::default();
        let t0 = Instant::now();
        f.turn_on();
        f.hold("c1", 7);
        assert!(f.tokens(&set(&["c1"]), t0).is_err(), "no lease yet");
        f.set_deadline(t0 + Duration::from_secs(8));
        assert!(f.tokens(&set(&["c1"]), t0 + Duration::from_secs(7)).is_ok());
        let err = f
            .tokens(&set(&["c1"]), t0 + Duration::from_secs(8))
            .expect_err("deadline passed");
        assert!(err.contains("lease has run out"), "{err}");
        // A renewal answered late never moves the deadline back.
        f.set_deadline(t0 + Duration::from_secs(3));
        assert!(f.tokens(&set(&["c1"]), t0 + Duration::from_secs(7)).is_ok());
    }
}
