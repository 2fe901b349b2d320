//! When a run has converged: the world matches the specs the test bed gave
//! (`converge_check`), and then flightdeck's status says so.

use super::*;
use crate::owned::Owned;
use crate::repair_check::Live;

/// The world, its objects by cluster UID, and its live machines by cluster UID.
pub(super) type FleetLook<'a, 'w> = (
    &'w World,
    &'a Owned<'w>,
    &'a std::collections::BTreeMap<&'w str, Vec<&'a Live<'w>>>,
);

impl<P: Provider + 'static> Driver<'_, P> {
    /// Whether the fleet has converged after the faults stopped: every cluster that
    /// should exist is Ready with nothing left to do, every deleted one is gone.
    /// `look`: the world, and its objects and live machines by cluster UID as the step
    /// picked them.
    pub(super) fn check_convergence(&mut self, now: Timestamp, look: FleetLook<'_, '_>) -> bool {
        let Some(after) = self.converge_after.map(|d| self.start.plus(d)) else {
            return false;
        };
        // Found, not asked for: the run still goes to the scenario's own end.
        let may_end = !self.converge_implicit || now >= self.spec_end;
        if self.converged_at.is_some() {
            return may_end;
        }
        if now < after || self.next_step < self.workload.len() {
            return false;
        }
        let problem = self.fleet_problem(look);
        if problem.is_none() {
            self.converged_at = Some(now);
            self.invariants.check_convergence(now, None);
            return may_end;
        }
        if now >= self.end {
            let bound = self.end.since(after);
            let why = problem.unwrap_or_default();
            self.invariants.check_convergence(
                now,
                Some(format!(
                    "not converged {bound} after the faults stopped: {why}"
                )),
            );
        }
        false
    }

    /// What keeps the fleet from having converged. The verdict is the world's: it must
    /// match the specs the test bed gave, read from the simulator alone
    /// (`converge_check`). Then flightdeck's status must say so too (Ready, nothing left
    /// to do): a status that lags a converged world for good is a defect of its own, and
    /// the runner stops only once both hold.
    fn fleet_problem(&self, (world, owned, live): FleetLook<'_, '_>) -> Option<String> {
        for (name, spec) in &self.specs {
            let Some(t) = self.tracks.get(name) else {
                return Some(format!("{name} was never taken up"));
            };
            let mine = live.get(t.uid.as_str()).map_or(&[][..], Vec::as_slice);
            let problem = crate::converge_check::problem_of(
                (world, owned),
                mine,
                t,
                spec,
                self.flight.repairs(),
            );
            if problem.is_some() {
                return problem;
            }
        }
        self.status_lags()
            .map(|s| format!("the world matches every spec, but {s}"))
    }

    /// A cluster whose status does not yet say it converged.
    fn status_lags(&self) -> Option<String> {
        for t in self.tracks.values() {
            let c = self.engine.cluster(&t.name);
            match (t.deletion_requested, c) {
                (true, Some(c)) => {
                    return Some(format!("{} is still {}", t.name, c.status.phase.as_str()));
                }
                (true, None) => {}
                (false, None) => return Some(format!("{} is missing", t.name)),
                (false, Some(c)) if !c.status.ready => {
                    return Some(format!("{} is {}", t.name, c.status.phase.as_str()));
                }
                (false, Some(c)) if c.last_actions != Some(0) => {
                    return Some(format!("{} still has actions to take", t.name));
                }
                (false, Some(_)) => {}
            }
        }
        None
    }
}
