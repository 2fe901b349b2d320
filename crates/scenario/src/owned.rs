//! The world's objects by the cluster UID they carry, from one walk of each list. Every
//! check that judges each cluster of a fleet at every step reads through it: a walk of
//! the world per cluster made those checks grow with the square of the fleet (`up` of
//! 1,000 kubeadm clusters, whose builds take longer, spent most of its time there).

use std::collections::BTreeMap;

use flightdeck_cloud::ownership::uid_of;
use flightdeck_cloud::{Member, Node, SecurityGroup, Server, ServerStatus};
use flightdeck_sim::World;

#[derive(Default)]
pub struct Owned<'w> {
    servers: BTreeMap<&'w str, Vec<&'w Server>>,
    nodes: BTreeMap<&'w str, Vec<&'w Node>>,
    groups: BTreeMap<&'w str, Vec<&'w SecurityGroup>>,
    members: BTreeMap<&'w str, Vec<&'w Member>>,
}

impl<'w> Owned<'w> {
    pub fn of(world: &'w World) -> Self {
        let mut o = Owned::default();
        for s in &world.servers {
            if let Some(uid) = uid_of(&s.tags) {
                o.servers.entry(uid).or_default().push(s);
            }
        }
        for (uid, n) in &world.nodes {
            o.nodes.entry(uid.as_str()).or_default().push(n);
        }
        for g in &world.security_groups {
            if let Some(uid) = uid_of(&g.tags) {
                o.groups.entry(uid).or_default().push(g);
            }
        }
        for m in &world.members {
            if let Some(uid) = uid_of(&m.tags) {
                o.members.entry(uid).or_default().push(m);
            }
        }
        o
    }

    /// The cluster's servers that are ACTIVE and not being deleted.
    pub fn live_servers(&self, uid: &str) -> impl Iterator<Item = &'w Server> + '_ {
        self.servers
            .get(uid)
            .into_iter()
            .flatten()
            .copied()
            .filter(|s| s.status == ServerStatus::Active && !s.is_deleting())
    }

    /// The cluster's workload nodes, in registration order.
    pub fn nodes(&self, uid: &str) -> impl Iterator<Item = &'w Node> + '_ {
        self.nodes.get(uid).into_iter().flatten().copied()
    }

    pub fn security_groups(&self, uid: &str) -> impl Iterator<Item = &'w SecurityGroup> + '_ {
        self.groups.get(uid).into_iter().flatten().copied()
    }

    pub fn members(&self, uid: &str) -> &[&'w Member] {
        self.members.get(uid).map_or(&[], Vec::as_slice)
    }
}
