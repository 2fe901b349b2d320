//! The checks of a step: every invariant against the world as the simulator shows it,
//! at every step or at most once per `RunOptions::check_every`.

use super::*;

impl<P: Provider + 'static> Driver<'_, P> {
    /// Whether the invariants are to be checked at `now` (see [`RunOptions::check_every`]).
    pub(super) fn check_due(&self, now: Timestamp) -> bool {
        match (self.options.check_every, self.last_check) {
            (Some(every), Some(at)) if self.converge_after.is_none() => {
                now.since(at).as_millis() >= every.as_millis()
            }
            _ => true,
        }
    }

    /// Checks every invariant against the world now; answers whether the fleet has
    /// converged (the run may end).
    pub(super) fn check_step(&mut self, now: Timestamp) -> bool {
        self.last_check = Some(now);
        // The world is taken again only when something in it changed.
        let (changes, world) = self.cloud.refresh(self.world.take());
        crate::track::note_addresses(&mut self.tracks, &world);
        let seen = self.invariants.mutations_seen();
        let fresh = if self.options.forget_seen {
            self.cloud.take_mutations_since(seen)
        } else {
            self.cloud.mutations_since(seen)
        };
        self.mutation_counts.add(&fresh.0);
        let spells = self
            .cloud
            .serving_spells_since(self.invariants.spells_seen());
        let all_live = crate::repair_check::live_machines(&world);
        let mut live: std::collections::BTreeMap<&str, Vec<_>> = Default::default();
        for m in &all_live {
            live.entry(m.uid).or_default().push(m);
        }
        let owned = crate::owned::Owned::of(&world);
        let look = crate::truth::Look {
            world: &world,
            live: &live,
            owned: &owned,
            specs: &self.specs,
            repairs: self.flight.repairs(),
        };
        crate::truth::Truth::judge_readiness(&look, &mut self.tracks, now);
        self.invariants.check(&world, fresh, spells, &self.tracks);
        self.invariants
            .check_deletions(&world, &self.tracks, now, self.truth.fault_at(now));
        self.guest
            .check(&mut self.invariants, &self.cloud, &world, &self.tracks, now);
        let kubeadm = self.specs.values().any(|c| c.spec.bootstrap.kubeadm());
        self.boot
            .check(&mut self.invariants, &self.cloud, now, kubeadm);
        self.flight.check(
            &mut self.invariants,
            now,
            &world,
            &self.engine,
            &self.tracks,
            &owned,
        );
        self.pace.check(
            &mut self.invariants,
            now,
            &self.cloud.last_calls(),
            &self.tracks,
            &self.specs,
        );
        let look = crate::truth::Look {
            world: &world,
            live: &live,
            owned: &owned,
            specs: &self.specs,
            repairs: self.flight.repairs(),
        };
        self.truth
            .check(&mut self.invariants, now, &look, &self.engine, &self.tracks);
        let converged = self.check_convergence(now, (&world, &owned, &live));
        drop(owned);
        drop(live);
        drop(all_live);
        // Kept for the next look only when the checks look at every step, where a step
        // often changes nothing. At a coarser cadence (`up`) something has nearly always
        // changed by the next look, and a fleet's world is large (16 MB of `up` of
        // 1,000 clusters' peak).
        if self.options.check_every.is_none() {
            self.world = Some((changes, world));
        }
        converged
    }
}
