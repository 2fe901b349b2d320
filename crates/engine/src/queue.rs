//! The work queue: keyed, de-duplicated, ordered by due time.

use std::collections::BTreeMap;

use flightdeck_cloud::Timestamp;

/// Keys due at a time. A key is in the queue at most once: scheduling it again keeps
/// the earlier of the two times, so bursts of triggers collapse into one reconcile.
#[derive(Debug, Default)]
pub struct WorkQueue {
    due: BTreeMap<String, Timestamp>,
}

impl WorkQueue {
    /// Schedules `key` at `at`, or earlier if it is already scheduled earlier.
    pub fn schedule(&mut self, key: &str, at: Timestamp) {
        self.due
            .entry(key.to_string())
            .and_modify(|t| *t = (*t).min(at))
            .or_insert(at);
    }

    /// Schedules `key` at exactly `at`, replacing an earlier or later time.
    pub fn reschedule(&mut self, key: &str, at: Timestamp) {
        self.due.insert(key.to_string(), at);
    }

    pub fn remove(&mut self, key: &str) {
        self.due.remove(key);
    }

    /// Takes up to `max` keys due at or before `now`, earliest first (ties by key).
    pub fn pop_due(&mut self, now: Timestamp, max: usize) -> Vec<String> {
        self.pop_due_except(now, max, |_| false)
    }

    /// Like [`WorkQueue::pop_due`], skipping (and keeping) the keys `busy` names.
    pub fn pop_due_except(
        &mut self,
        now: Timestamp,
        max: usize,
        busy: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let mut due: Vec<(Timestamp, String)> = self
            .due
            .iter()
            .filter(|(k, t)| **t <= now && !busy(k))
            .map(|(k, t)| (*t, k.clone()))
            .collect();
        due.sort();
        due.truncate(max);
        for (_, k) in &due {
            self.due.remove(k);
        }
        due.into_iter().map(|(_, k)| k).collect()
    }

    /// The earliest due time of any key `busy` does not name.
    pub fn next_due_except(&self, busy: impl Fn(&str) -> bool) -> Option<Timestamp> {
        self.due
            .iter()
            .filter(|(k, _)| !busy(k))
            .map(|(_, t)| *t)
            .min()
    }

    /// Keys due at or before `now`.
    pub fn due_count(&self, now: Timestamp) -> usize {
        self.due.values().filter(|t| **t <= now).count()
    }

    /// The earliest due time of any key.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.due.values().min().copied()
    }

    pub fn len(&self) -> usize {
        self.due.len()
    }

    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_queued_once_at_its_earliest_time() {
        let mut q = WorkQueue::default();
        q.schedule("a", Timestamp(50));
        q.schedule("a", Timestamp(10));
        q.schedule("a", Timestamp(30));
        q.schedule("b", Timestamp(20));
        assert_eq!(q.len(), 2);
        assert_eq!(q.next_due(), Some(Timestamp(10)));
        assert_eq!(q.pop_due(Timestamp(15), 10), vec!["a"]);
        assert_eq!(q.pop_due(Timestamp(15), 10), Vec::<String>::new());
        assert_eq!(q.pop_due(Timestamp(100), 10), vec!["b"]);
        assert!(q.is_empty());
    }

    #[test]
    fn popping_is_bounded_and_earliest_first() {
        let mut q = WorkQueue::default();
        for (k, t) in [("c", 3), ("a", 1), ("b", 2)] {
            q.schedule(k, Timestamp(t));
        }
        assert_eq!(q.pop_due(Timestamp(10), 2), vec!["a", "b"]);
        assert_eq!(q.pop_due(Timestamp(10), 2), vec!["c"]);
    }
}
