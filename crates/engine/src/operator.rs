//! What an operator asks of a cluster beyond its spec that concerns its identity in the
//! cloud: adopting an earlier cluster's objects, and letting a deletion end that can see
//! none of the cluster's recorded objects.

use flightdeck_cloud::Provider;
use flightdeck_plan::IdentityCheck;

use crate::config::EngineError;
use crate::engine::Engine;

impl<P: Provider> Engine<P> {
    /// Lets a cluster held by its identity check take over what one earlier cluster of
    /// its name left (see `identity.rs`). A cluster whose identity is confirmed already
    /// owns what it made: there is nothing to adopt, and nothing changes.
    pub fn adopt(&mut self, name: &str) -> Result<(), EngineError> {
        self.known(name)?;
        if let Some(f) = self.in_flight.get_mut(name) {
            f.adopt = true;
            return Ok(());
        }
        let c = self.cluster_mut(name)?;
        if c.memory.identity != IdentityCheck::Pending {
            return Ok(());
        }
        c.memory.identity = IdentityCheck::Adopt;
        self.commit_memory_change(
            name,
            "AdoptRequested",
            format!(
                "cluster {name} is to take over the objects an earlier cluster of its name left"
            ),
        )
    }

    /// Lets a deletion end although the cloud shows none of the objects the cluster
    /// recorded and flightdeck deleted none of them (an operator checked that they are
    /// gone). Only a cluster being deleted can be forgotten.
    pub fn forget(&mut self, name: &str) -> Result<(), EngineError> {
        self.known(name)?;
        if let Some(f) = self.in_flight.get_mut(name) {
            f.forget = true;
            return Ok(());
        }
        let c = self.cluster_mut(name)?;
        if c.memory.deletion_requested.is_none() {
            return Err(EngineError::NotDeleting(name.to_string()));
        }
        c.memory.deletion_proof.forget = true;
        self.commit_memory_change(
            name,
            "ForgetRequested",
            format!(
                "an operator says the objects recorded for cluster {name} are gone; its deletion ends without seeing them"
            ),
        )
    }
}
