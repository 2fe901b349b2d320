//! `remediationWithinBudget` and `noRemediationOnBlindObserver` (F3, F6, F10), from the
//! simulator's state alone: what flightdeck believes about its repairs is not looked at.
//!
//! A repair replaces first: the condemned machine stays until its replacement serves.
//! So a set under repair holds more live machines than its replicas. Of that excess, a
//! rollout explains `maxSurge` (while a machine made before the set's last template
//! change lives), and a scale-down explains what was above the new count until it is
//! gone. The rest is machines under repair:
//! - `remediationWithinBudget`: never more of them than `maxUnhealthy` of the replicas;
//! - `noRemediationOnBlindObserver`: their number never grows while a fault blinds the
//!   cluster's observer (its API down, its node list stale or all NotReady), unless a
//!   machine of the set shows a failure the cloud itself reports (a server in ERROR, a
//!   VM in a failure state, a control-plane member failing its health check), which is
//!   evidence no node list is needed for.
//!
//! A machine is live from its create until its removal was asked for (a deleting
//! server, a terminating VM, a VirtualMachine with a deletion timestamp). For the
//! repair count, a machine whose guest node is cordoned is leaving too: flightdeck
//! drains a machine before it asks the cloud to delete it, and a set scaled down and
//! then up again makes a new machine while the old one's drain runs on.

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::ownership::{TAG_CLUSTER, TAG_MACHINE, TAG_ROLE, uid_of};
use flightdeck_cloud::{OperatingStatus, ProvisioningStatus, ServerStatus};
use flightdeck_opennebula::states::vm_status;
use flightdeck_sim::World;

use crate::churn_check::set_of;
use crate::track::ClusterTrack;

/// OpenNebula's `STATE` for a VM that is gone (it stays listed).
const ONE_DONE: u32 = 6;

/// One live machine of some cluster, as the cloud shows it.
pub(crate) struct Live<'a> {
    /// Unique across clouds: the server id, `vm/<id>`, `kubevirt/<uid>`.
    pub(crate) id: String,
    /// The name it has in its cloud.
    pub(crate) name: &'a str,
    pub(crate) uid: &'a str,
    pub(crate) set: &'a str,
    /// The cloud itself reports it failed.
    pub(crate) failed: bool,
    /// It runs (ACTIVE, RUNNING, a Running VMI) and its node is registered and Ready.
    pub(crate) serving: bool,
    /// Its guest node is cordoned: its drain has begun, so its removal was asked for
    /// even if the cloud has not been told yet (the machine goes once drained).
    pub(crate) cordoned: bool,
    /// OpenStack: the image and flavor it was made from.
    pub(crate) image_flavor: Option<(&'a str, &'a str)>,
    /// OpenNebula: the template it was instantiated from.
    pub(crate) template: Option<u32>,
}

fn machine_tags(tags: &[String]) -> Option<(&str, &str)> {
    if !tags
        .iter()
        .any(|t| t.strip_prefix(TAG_ROLE) == Some("machine"))
    {
        return None;
    }
    let key = tags.iter().find_map(|t| t.strip_prefix(TAG_MACHINE))?;
    Some((uid_of(tags)?, set_of(key)))
}

/// The servers (and OpenNebula VMs) of `world` whose node passes `keep`, by id.
fn nodes_where(world: &World, keep: impl Fn(&flightdeck_cloud::Node) -> bool) -> BTreeSet<&str> {
    world
        .nodes
        .iter()
        .filter(|(_, n)| keep(n))
        .filter_map(|(_, n)| n.server_id.as_deref())
        .collect()
}

/// Every live machine in `world`, on every cloud. Each list is walked once (a fleet
/// of N clusters costs O(N log N), not O(N²)).
pub(crate) fn live_machines(world: &World) -> Vec<Live<'_>> {
    let ready = nodes_where(world, |n| n.ready);
    let node_ready = |id: &str| ready.contains(id);
    let cordoned = nodes_where(world, |n| n.unschedulable);
    let vmi_phase: BTreeMap<&str, &str> = world
        .kube
        .vmis
        .iter()
        .map(|i| (i.name.as_str(), i.phase.as_str()))
        .rev()
        .collect();
    let workload_nodes = |keep: fn(&flightdeck_sim::KubeNodeView) -> bool| {
        world
            .kube
            .workloads
            .iter()
            .flat_map(move |w| {
                w.nodes
                    .iter()
                    .filter(move |n| keep(n))
                    .map(move |n| (w.name.as_str(), n.name.as_str()))
            })
            .collect::<BTreeSet<(&str, &str)>>()
    };
    let workload_ready = workload_nodes(|n| n.ready);
    let workload_cordoned = workload_nodes(|n| n.unschedulable);
    let servers = world
        .servers
        .iter()
        .filter(|s| !s.is_deleting())
        .filter_map(|s| {
            let (uid, set) = machine_tags(&s.tags)?;
            Some(Live {
                id: s.id.clone(),
                name: &s.name,
                uid,
                set,
                failed: s.status == ServerStatus::Error,
                serving: s.status == ServerStatus::Active && node_ready(&s.id),
                cordoned: cordoned.contains(s.id.as_str()),
                image_flavor: Some((&s.image, &s.flavor)),
                template: None,
            })
        });
    // OpenNebula's states read as the provider reads them (`states.rs`): a VM being
    // terminated shows as deleting, one in a failure state as ERROR.
    let vms = world
        .one_vms
        .iter()
        .filter(|v| v.state != ONE_DONE)
        .filter_map(|v| {
            let (uid, set) = machine_tags(&v.tags)?;
            let status = vm_status(i64::from(v.state), i64::from(v.lcm_state));
            if status.task_state.as_deref() == Some("deleting") {
                return None;
            }
            Some(Live {
                id: format!("vm/{}", v.id),
                name: &v.name,
                uid,
                set,
                failed: status.status == ServerStatus::Error,
                serving: status.status == ServerStatus::Active && node_ready(&v.id.to_string()),
                cordoned: cordoned.contains(v.id.to_string().as_str()),
                image_flavor: None,
                template: v.template_id,
            })
        });
    let kube = world
        .kube
        .vms
        .iter()
        .filter(|v| !v.deleting)
        .filter_map(|v| {
            let (uid, set) = machine_tags(&v.tags)?;
            let phase = vmi_phase.get(v.name.as_str()).copied();
            let cluster = v
                .tags
                .iter()
                .find_map(|t| t.strip_prefix(TAG_CLUSTER))
                .unwrap_or_default();
            let node_ready = workload_ready.contains(&(cluster, v.name.as_str()));
            Some(Live {
                id: format!("kubevirt/{}", v.uid),
                name: &v.name,
                uid,
                set,
                failed: phase == Some("Failed"),
                serving: phase == Some("Running") && node_ready,
                cordoned: workload_cordoned.contains(&(cluster, v.name.as_str())),
                image_flavor: None,
                template: None,
            })
        });
    servers.chain(vms).chain(kube).collect()
}

/// Control-plane members failing their health check, by cluster UID: evidence from
/// Octavia, not from a node list.
fn failing_members(world: &World) -> BTreeSet<&str> {
    world
        .members
        .iter()
        .filter(|m| {
            m.provisioning_status == ProvisioningStatus::Active
                && matches!(
                    m.operating_status,
                    OperatingStatus::Error | OperatingStatus::Offline
                )
        })
        .filter_map(|m| uid_of(&m.tags))
        .collect()
}

#[derive(Default)]
struct SetState {
    /// What a scale-down left above the replicas, until it is gone.
    scale_down: u32,
    /// The replicas at the last look, to see a scale-down.
    replicas: Option<u32>,
    /// Machines under repair at the last look.
    repairs: u32,
    /// A failure the cloud reports was seen in the set at the last look.
    failed: bool,
    reported_budget: bool,
}

#[derive(Default)]
pub struct RepairCheck {
    /// Machine id → the cluster generation at which it was first seen.
    first_seen: BTreeMap<String, u64>,
    sets: BTreeMap<(String, String), SetState>,
}

/// What the check found at one look.
#[derive(Default)]
pub struct Findings {
    /// Sets in which more machines were under repair than at the last look: each is a
    /// repair judged against the budget and the observer.
    pub started: usize,
    pub over_budget: Vec<String>,
    /// Repairs that began while the observer of their cluster was blind: (cluster name,
    /// set, a description).
    pub grew: Vec<(String, String)>,
}

impl RepairCheck {
    /// Whether machine `id` of set `set` was made with a template the set no longer has
    /// (judged by the generation at which it was first seen).
    pub(crate) fn outdated(&self, id: &str, set: &str, sets: &crate::track::SetBounds) -> bool {
        self.first_seen
            .get(id)
            .is_some_and(|g| sets.outdated_if_made_at(set, *g))
    }

    /// Looks at `world` now. `blind` answers why cluster `name`'s observer is blind
    /// now, if a fault blinds it.
    pub fn look(
        &mut self,
        world: &World,
        clusters: &BTreeMap<String, ClusterTrack>,
        blind: impl Fn(&str) -> Option<&'static str>,
    ) -> Findings {
        let live = live_machines(world);
        let failing = failing_members(world);
        let mut findings = Findings::default();
        let ids: BTreeSet<&str> = live.iter().map(|m| m.id.as_str()).collect();
        self.first_seen.retain(|id, _| ids.contains(id.as_str()));
        // Grouped once: a fleet of N clusters is looked at in O(N), not O(N²).
        let mut by_set: BTreeMap<(&str, &str), Vec<&Live<'_>>> = BTreeMap::new();
        // A machine whose drain has begun (its guest node cordoned) is leaving: it is not
        // counted as under repair, as a deleting server is not.
        for m in &live {
            by_set.entry((m.uid, m.set)).or_default().push(m);
        }
        for c in clusters.values() {
            if c.deletion_requested {
                self.sets.retain(|(uid, _), _| *uid != c.uid);
                continue;
            }
            for set in c.sets.sets() {
                let members: &[&Live<'_>] = by_set
                    .get(&(c.uid.as_str(), set))
                    .map_or(&[], Vec::as_slice);
                for m in members {
                    self.first_seen.entry(m.id.clone()).or_insert(c.generation);
                }
                let outdated = members.iter().any(|m| self.outdated(&m.id, set, &c.sets));
                let failed = members.iter().any(|m| m.failed)
                    || (set == "cp" && failing.contains(c.uid.as_str()));
                let st = self
                    .sets
                    .entry((c.uid.clone(), set.to_string()))
                    .or_default();
                let replicas = c.sets.replicas(set);
                let excess = (members.len() as u32).saturating_sub(replicas);
                // What a scale-down leaves counts every live machine (seed 149: machines
                // F9 had cordoned were as much the set's as the others); the repairs
                // count only machines not leaving (not cordoned).
                let staying = members.iter().filter(|m| !m.cordoned).count() as u32;
                let excess_staying = staying.saturating_sub(replicas);
                st.scale_down = match st.replicas {
                    // Fewer members than the new replicas (some still coming) leave
                    // nothing to scale down.
                    Some(before) if replicas < before => {
                        (st.scale_down + before.min(members.len() as u32)).saturating_sub(replicas)
                    }
                    _ => st.scale_down,
                }
                .min(excess);
                st.replicas = Some(replicas);
                let surge = if outdated { c.sets.max_surge() } else { 0 };
                let repairs = excess_staying.saturating_sub(surge + st.scale_down);
                let budget = c.sets.budget(set);
                if repairs > budget && c.ready_since.is_some() && !st.reported_budget {
                    st.reported_budget = true;
                    findings.over_budget.push(format!(
                        "cluster {}: set {set} holds {} live machine(s) for {replicas} replica(s): {repairs} under repair, more than its budget of {budget} (maxUnhealthy)",
                        c.name,
                        members.len()
                    ));
                }
                if repairs <= budget {
                    st.reported_budget = false;
                }
                if repairs > st.repairs {
                    findings.started += 1;
                }
                if repairs > st.repairs
                    && c.ready_since.is_some()
                    && !failed
                    && !st.failed
                    && let Some(why) = blind(&c.name)
                {
                    findings.grew.push((
                        c.name.clone(),
                        format!(
                            "cluster {}: set {set} began {} more repair(s) ({} under repair) while {why}, and no machine of the set showed a failure the cloud reports",
                            c.name,
                            repairs - st.repairs,
                            repairs
                        ),
                    ));
                }
                st.repairs = repairs;
                st.failed = failed;
            }
        }
        findings
    }
}
