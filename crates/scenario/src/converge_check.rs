//! `convergence`, from the simulator's state and the spec the test bed gave: once the
//! faults have stopped, the world must come to match the spec. What flightdeck says of
//! itself (its phase, its conditions, the actions it still plans) is not looked at.
//!
//! A cluster that is not being deleted matches when:
//! - each machine set has as many live machines as its replicas, each running with a
//!   Ready node, none failed, none made while the set had a template other than its
//!   current one, and on OpenStack each from the spec's image and flavor;
//! - on OpenStack, its API pool has one member per control-plane machine, each serving
//!   (`World::member_serving_since`), and its pod-network rules are in place;
//! - on a router, each of its live nodes has its route and no route of the cluster is
//!   stale;
//! - on OpenNebula, the template each VM was instantiated from is still there (F1).
//!
//! A deleted cluster matches when nothing it owned is left (`noLeaks`' reading).
//!
//! Not compared, and said so: the userData a machine booted with (the simulator keeps
//! it but the world does not show it; a change to it is still a template change, so a
//! machine made under the earlier one counts as outdated).

use flightdeck_sim::World;
use flightdeck_spec::{Cluster, ClusterSpec, MachineTemplate};

use crate::owned::Owned;
use crate::repair_check::{Live, RepairCheck, live_machines};
use crate::track::ClusterTrack;

/// How much of the spec a judgement asks the world to match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Judge {
    /// Ready: every set at its replicas, each machine running with a Ready node and
    /// none failed; on OpenStack each control-plane machine's member serving and the
    /// pod-network rules in place. What a cluster must show before it may be called
    /// Ready (the test bed's own judge of readiness, read from the simulator alone).
    Ready,
    /// Converged: Ready, and every machine made with its set's current template (image,
    /// flavor, template still there), and the routes on a router right.
    Converged,
}

/// What keeps the cluster of `track` from matching `spec` in `world`, if anything.
pub fn cluster_problem(
    world: &World,
    track: &ClusterTrack,
    spec: &Cluster,
    repairs: &RepairCheck,
) -> Option<String> {
    let live = live_machines(world);
    let mine: Vec<&Live<'_>> = live.iter().filter(|m| m.uid == track.uid).collect();
    problem_of((world, &Owned::of(world)), &mine, track, spec, repairs)
}

/// [`cluster_problem`], with the cluster's live machines and the world's objects by
/// cluster picked once for the whole fleet.
pub(crate) fn problem_of(
    (world, owned): (&World, &Owned<'_>),
    mine: &[&Live<'_>],
    track: &ClusterTrack,
    spec: &Cluster,
    repairs: &RepairCheck,
) -> Option<String> {
    if track.deletion_requested {
        return crate::invariants::leaks(world, track);
    }
    judge((world, owned), mine, track, spec, repairs, Judge::Converged)
}

/// What keeps the cluster of `track` from being what `judge` asks of `spec` in
/// `world`, whose live machines of the track's UID are `live` (picked once per look:
/// a fleet of N clusters would otherwise scan every machine N times).
pub(crate) fn judge(
    (world, owned): (&World, &Owned<'_>),
    live: &[&Live<'_>],
    track: &ClusterTrack,
    spec: &Cluster,
    repairs: &RepairCheck,
    judge: Judge,
) -> Option<String> {
    let s = &spec.spec;
    let sets = std::iter::once((
        "cp",
        s.control_plane.replicas.get(),
        &s.control_plane.machine,
    ))
    .chain(
        s.node_pools
            .iter()
            .map(|p| (p.name.as_str(), p.replicas.get(), &p.machine)),
    );
    for (set, replicas, template) in sets {
        let machines: Vec<&Live<'_>> = live.iter().copied().filter(|m| m.set == set).collect();
        if let Some(p) = set_problem(track, set, replicas, template, &machines, repairs, judge) {
            return Some(format!("{}: {p}", track.name));
        }
        if judge == Judge::Ready {
            continue;
        }
        // F1: the template a VM was made from must still be there, or the set can make
        // no machine again (another cluster deleted a template this one holds).
        for m in &machines {
            if let Some(t) = m.template
                && !world.one_templates.iter().any(|x| x.id == t)
            {
                return Some(format!(
                    "{}: {} of set {set} was instantiated from template {t}, which is gone",
                    track.name, m.name
                ));
            }
        }
    }
    if s.provider.openstack.is_some() {
        openstack_problem((world, owned), track, s, judge).map(|p| format!("{}: {p}", track.name))
    } else {
        None
    }
}

fn set_problem(
    track: &ClusterTrack,
    set: &str,
    replicas: u32,
    template: &MachineTemplate,
    machines: &[&Live<'_>],
    repairs: &RepairCheck,
    judge: Judge,
) -> Option<String> {
    if machines.len() as u32 != replicas {
        return Some(format!(
            "set {set} has {} live machine(s), the spec asks for {replicas}",
            machines.len()
        ));
    }
    for m in machines {
        if m.failed {
            return Some(format!("{} of set {set} has failed", m.name));
        }
        if !m.serving {
            return Some(format!(
                "{} of set {set} is not running with a Ready node",
                m.name
            ));
        }
        if judge == Judge::Ready {
            continue;
        }
        if repairs.outdated(&m.id, set, &track.sets) {
            return Some(format!(
                "{} of set {set} was made with a template the set no longer has",
                m.name
            ));
        }
        if let Some((image, flavor)) = m.image_flavor {
            let wrong = |want: Option<&str>, have: &str| want.is_some_and(|w| w != have);
            if wrong(template.image.as_ref().map(|t| t.as_str()), image)
                || wrong(template.flavor.as_ref().map(|t| t.as_str()), flavor)
            {
                return Some(format!(
                    "{} of set {set} runs image {image} on flavor {flavor}, not the spec's",
                    m.name
                ));
            }
        }
    }
    None
}

fn openstack_problem(
    (world, owned): (&World, &Owned<'_>),
    track: &ClusterTrack,
    s: &ClusterSpec,
    judge: Judge,
) -> Option<String> {
    let cp = s.control_plane.replicas.get();
    if !track.external_endpoint {
        let members = owned.members(&track.uid);
        let serving = members
            .iter()
            .filter(|m| world.member_serving_since.contains_key(&m.id))
            .count() as u32;
        if members.len() as u32 != cp || serving != cp {
            return Some(format!(
                "its API pool has {} member(s), {serving} serving, for {cp} control-plane machine(s)",
                members.len()
            ));
        }
    }
    match judge {
        Judge::Converged => crate::flight::network_problem(world, owned, track, s),
        Judge::Ready => crate::flight::rules_problem(owned, track, s),
    }
}
