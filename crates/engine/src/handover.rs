//! Handing clusters between replicas. A replica that claims a cluster takes it up from
//! the store where its last holder left it; one whose claim is gone lets go of it and
//! writes nothing more of it (the store's fence would refuse it anyway).

use crate::config::EngineError;
use crate::engine::Engine;
use flightdeck_cloud::Provider;
use flightdeck_plan::{Event, Severity};
use flightdeck_store::Write;

impl<P: Provider> Engine<P> {
    /// Drives cluster `name` from here on, as the store has it: a cluster another
    /// replica drove resumes where it stopped; a spec no engine has applied yet (it came
    /// in through another replica's API) is applied now. A cluster already driven here
    /// picks up a spec that changed in the store. A cluster resumed here gets an event
    /// naming `by` (who drives it now). Whether the store has the cluster.
    pub fn take_up(&mut self, name: &str, by: &str) -> Result<bool, EngineError> {
        let Some(spec) = crate::config::stored_spec(&self.store, name)? else {
            return Ok(false);
        };
        self.refuse_while_handing_over(name)?;
        match self.clusters.get(name) {
            Some(c) if c.spec == spec => return Ok(true),
            Some(_) => {}
            None => {
                if self.load(name, spec.clone())? {
                    self.note_taken_up(name, by)?;
                    return Ok(true);
                }
            }
        }
        self.apply_with(spec, false)?;
        Ok(true)
    }

    /// Says, in the cluster's events, who drives it from here on.
    pub(crate) fn note_taken_up(&mut self, name: &str, by: &str) -> Result<(), EngineError> {
        let event = Event {
            at: self.clock.now(),
            cluster: name.to_string(),
            severity: Severity::Normal,
            reason: "ClusterTakenUp".into(),
            message: format!(
                "{by} drives cluster {name} from here on, from where the store left it"
            ),
        };
        self.store.commit(vec![Write::event(name, &event)])?;
        self.events.push(event);
        Ok(())
    }

    /// Stops driving cluster `name`, writing nothing: its claim has moved to another
    /// replica, which takes it up from the store. A reconcile of it in flight runs into
    /// the fence at its next action or commit, and its outcome is dropped.
    pub fn let_go(&mut self, name: &str) -> bool {
        if let Some(f) = self.in_flight.get_mut(name) {
            f.let_go = true;
        }
        self.queue.remove(name);
        self.last_observed.remove(name);
        self.ledger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.clusters.remove(name).is_some()
    }

    /// Refuses to decide anything of cluster `name` while a reconcile started under a
    /// claim this replica lost is still out. Taking it up then would be answered "taken
    /// up" with nothing to drive it once the dropped reconcile is back (a replica holding
    /// a claim it never acts on); applying a spec would make a new UID over the stored
    /// memory. The caller asks again: the fleet at its next turn, the API's client on a
    /// 503.
    pub(crate) fn refuse_while_handing_over(&self, name: &str) -> Result<(), EngineError> {
        if self.in_flight.get(name).is_some_and(|f| f.let_go) && !self.clusters.contains_key(name) {
            return Err(EngineError::HandingOver(name.to_string()));
        }
        Ok(())
    }

    /// The clusters this engine drives.
    pub fn driven(&self) -> impl Iterator<Item = &str> {
        self.clusters.keys().map(String::as_str)
    }
}
