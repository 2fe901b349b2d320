//! The cloud faults a swarm seed draws: every OpenStack fault kind, aimed so that
//! the fleet can survive them (a control plane keeps a serving member).

use flightdeck_cloud::{Rng, SeededRng};
use flightdeck_spec::scenario::Fault;
use flightdeck_spec::scenario::LockLevelSpec;
use flightdeck_spec::{Cluster, Duration, FaultKind, Name, Service, Text};

use crate::swarm_fleet::{SwarmCloud, pick};

/// The services the API faults hit.
const SERVICES: [Service; 5] = [
    Service::Nova,
    Service::Neutron,
    Service::Octavia,
    Service::Kubernetes,
    Service::Keystone,
];

/// The kinds that hit an OpenNebula fleet.
const OPENNEBULA: [FaultKind; 7] = [
    FaultKind::OneLockTemplate,
    FaultKind::OneVmBootFailure,
    FaultKind::OneImageError,
    FaultKind::OneRpcError,
    FaultKind::OperatorDeleteMachine,
    FaultKind::EmptyNodeList,
    FaultKind::AllNotReady,
];

/// The kinds that hit a KubeVirt fleet (the API faults on the Kubernetes API).
///
/// Not `observer.emptyNodeList` nor `observer.allNotReady`: the simulator strikes them
/// on the node lists of OpenStack and OpenNebula workload clusters (their kubelets,
/// `sim::k8s::kubelets`), while a KubeVirt workload cluster answers its nodes from its
/// own store, which no observer fault reaches. Drawn here they never struck (no seed
/// counted an effect), yet the checks took their windows for blind ones: swarm seed
/// 71014891 (a KubeVirt kubeadm fleet) repaired a machine that had truly not joined in
/// such a window, from a node list that was whole, and `noRemediationOnBlindObserver`
/// called it a repair begun blind. Making them strike on KubeVirt guests (lists and
/// watches alike) is left to do.
const KUBEVIRT: [FaultKind; 6] = [
    FaultKind::KubevirtDrainInfraNode,
    FaultKind::K8sPdbBlocks,
    FaultKind::OperatorDeleteMachine,
    FaultKind::ApiErrorRate,
    FaultKind::ApiLatency,
    FaultKind::ApiRateLimit,
];

/// `kubeadm`: the fleet boots with kubeadm, whose control plane is the workload
/// cluster's etcd: no fault takes its control-plane machines away (see
/// [`aim_at_machines`]).
pub(crate) fn cloud_faults(
    rng: &mut SeededRng,
    cloud: SwarmCloud,
    safety: Duration,
    clusters: &[(Cluster, u64)],
    kubeadm: bool,
) -> Vec<Fault> {
    // `nova.tagFilterIgnored` is drawn on its own (see `foreign_lists`), so that the
    // draws of every other kind stay what they were before it existed.
    let openstack: Vec<FaultKind> = FaultKind::OPENSTACK
        .into_iter()
        .filter(|k| *k != FaultKind::TagFilterIgnored)
        .collect();
    let kinds: &[FaultKind] = match cloud {
        SwarmCloud::OpenStack => &openstack,
        SwarmCloud::OpenNebula => &OPENNEBULA,
        SwarmCloud::KubeVirt => &KUBEVIRT,
    };
    let end_s = safety.as_millis() / 1000;
    // `octavia.memberOffline` may only target clusters with spare members.
    let mut spare: Vec<&Cluster> = clusters
        .iter()
        .map(|(c, _)| c)
        .filter(|c| c.spec.control_plane.replicas.get() >= 3)
        .collect();
    (0..rng.between(1, 4))
        .map(|_| {
            let mut kind = *pick(rng, kinds);
            if kind == FaultKind::MemberOffline && spare.is_empty() {
                // No cluster left with members to spare.
                kind = FaultKind::MemberStuckPending;
            }
            let at_s = rng.between(0, end_s - 120);
            let len_s = rng.between(60, 720).min(end_s - at_s);
            let mut f = Fault {
                duration: Some(Duration::from_secs(len_s)),
                ..Fault::new(kind, Duration::from_secs(at_s))
            };
            // A KubeVirt fleet's clusters live behind the Kubernetes API only.
            let services: &[Service] = if cloud == SwarmCloud::KubeVirt {
                &[Service::Kubernetes]
            } else {
                &SERVICES
            };
            let any_cluster = |rng: &mut SeededRng| {
                rng.chance(0.5)
                    .then(|| pick(rng, clusters).0.metadata.name.clone())
            };
            match kind {
                FaultKind::ApiErrorRate => {
                    f.service = Some(*pick(rng, services));
                    f.rate = Some(0.05 + 0.35 * rng.unit());
                }
                FaultKind::ApiLatency => {
                    f.service = Some(*pick(rng, services));
                    f.latency = Some(Duration::from_millis(rng.between(200, 5000)));
                }
                FaultKind::ApiStaleRead => {
                    // The lists that lag: servers, and nodes (a Kubernetes watch cache).
                    // Not Octavia's members: the member gate (F2) judges health from
                    // them, and no gate can see through a health list minutes old
                    // (seed 756 of 3e62c2c+: a rollout removed a member while a lagging
                    // list still showed two members ONLINE that had gone OFFLINE).
                    let listed = [Service::Nova, Service::Kubernetes];
                    f.service = Some(*pick(rng, &listed));
                    f.latency = Some(Duration::from_secs(rng.between(5, 120)));
                }
                FaultKind::BootError => {
                    f.rate = Some(0.1 + 0.5 * rng.unit());
                    f.cluster = any_cluster(rng);
                    endless_from_birth(rng, &mut f, end_s);
                }
                FaultKind::MemberOffline => {
                    // One such fault per cluster: two at once could take every member.
                    let target = spare.remove(rng.below(spare.len() as u64) as usize);
                    f.count = Some(
                        rng.between(1, u64::from(target.spec.control_plane.replicas.get()) - 1)
                            .min(2) as u32,
                    );
                    f.cluster = Some(target.metadata.name.clone());
                }
                FaultKind::MemberStuckPending => f.cluster = any_cluster(rng),
                FaultKind::NoRegistration => {
                    f.rate = Some(0.1 + 0.3 * rng.unit());
                    f.cluster = any_cluster(rng);
                }
                FaultKind::RuleLost | FaultKind::StaleRoute => {
                    f.count = Some(rng.between(1, 2) as u32);
                    f.cluster = any_cluster(rng);
                }
                FaultKind::DropSecurityGroup => {
                    f.rate = Some(0.1 + 0.4 * rng.unit());
                    f.count = Some(rng.between(1, 2) as u32);
                    f.cluster = any_cluster(rng);
                }
                FaultKind::MaxRoutes => f.count = Some(rng.between(5, 30) as u32),
                FaultKind::EmptyNodeList | FaultKind::AllNotReady => f.cluster = any_cluster(rng),
                FaultKind::OperatorDeleteMachine | FaultKind::ServerError => {
                    if !aim_at_machines(rng, &mut f, clusters, &mut spare, kubeadm) {
                        // No machine to spare anywhere: blind the observer instead.
                        f.kind = FaultKind::AllNotReady;
                        f.cluster = any_cluster(rng);
                    }
                }
                FaultKind::LbPendingUpdate | FaultKind::MemberStuckDeleting => {
                    f.cluster = any_cluster(rng);
                }
                FaultKind::ApiRateLimit => {
                    f.service = Some(*pick(rng, services));
                    f.rate = Some(0.05 + 0.35 * rng.unit());
                    f.retry_after = Some(Duration::from_secs(rng.between(1, 30)));
                }
                FaultKind::KeystoneRevokeTokens => f.duration = None,
                FaultKind::TagFilterIgnored => {}
                // Never drawn: in process a watch answer carries at most one event per
                // node (the simulated API records nodes only when read), nothing to reorder.
                // Never drawn: an operator's hold lasts as long as the operator wants.
                // Drawn on their own, for kubeadm fleets ([`kubeadm_faults`]).
                FaultKind::K8sWatchReorder
                | FaultKind::OperatorHoldNodeDeletion
                | FaultKind::OperatorStripNodeLabels
                | FaultKind::KubeadmSlowBoot
                | FaultKind::OperatorDeleteBootstrapToken => {}
                FaultKind::OneLockTemplate => {
                    f.level = Some(*pick(
                        rng,
                        &[
                            LockLevelSpec::Use,
                            LockLevelSpec::Manage,
                            LockLevelSpec::Admin,
                        ],
                    ));
                    f.template = Text::new(pick::<&str>(rng, &["master", "worker"])).ok();
                }
                FaultKind::OneVmBootFailure => {
                    f.rate = Some(0.1 + 0.4 * rng.unit());
                    f.cluster = any_cluster(rng);
                    endless_from_birth(rng, &mut f, end_s);
                }
                FaultKind::OneImageError => f.rate = Some(0.1 + 0.4 * rng.unit()),
                FaultKind::OneRpcError => f.rate = Some(0.05 + 0.25 * rng.unit()),
                FaultKind::KubevirtDrainInfraNode => {
                    f.node = Text::new(pick::<&str>(rng, &["infra-1", "infra-2", "infra-3"])).ok();
                }
                FaultKind::K8sPdbBlocks => {
                    f.cluster = any_cluster(rng);
                    // Half the time a budget that allows no disruption stays so until
                    // the faults stop, as one written as minAvailable = replicas does:
                    // only the drain deadline frees the infra node.
                    if rng.chance(0.5) {
                        f.duration = Some(Duration::from_secs(end_s - at_s));
                    }
                }
            }
            f
        })
        .collect()
}

/// A quarter of OpenStack seeds have Nova ignore its server list's `tags` filter for a
/// while: every cluster is then shown other clusters' servers and the bastion, which
/// only flightdeck's ownership check keeps out of its plans. Drawn from the seed's own
/// stream, apart from the other faults.
pub(crate) fn foreign_lists(seed: u64, cloud: SwarmCloud, safety: Duration) -> Option<Fault> {
    let mut rng = SeededRng::fork(seed, "swarm-foreign-lists");
    if cloud != SwarmCloud::OpenStack || !rng.chance(0.25) {
        return None;
    }
    let end_s = safety.as_millis() / 1000;
    let at_s = rng.between(0, end_s - 120);
    let len_s = rng.between(60, 720).min(end_s - at_s);
    Some(Fault {
        duration: Some(Duration::from_secs(len_s)),
        ..Fault::new(FaultKind::TagFilterIgnored, Duration::from_secs(at_s))
    })
}

/// Whether seed `seed`'s fleet boots with flightdeck's kubeadm bootstrap: four in ten
/// fleets, on every cloud; if so, the
/// `nodeStartupTimeout` of its clusters, 10 to 40 minutes: past a token's 15 minutes, a
/// slow machine is waited for long enough that its token must be moved on. Drawn from
/// the seed's own stream, apart from the rest, so that the other draws stay what they
/// were before kubeadm fleets existed.
pub(crate) fn kubeadm_fleet(seed: u64) -> Option<Duration> {
    let mut rng = SeededRng::fork(seed, "swarm-kubeadm");
    if !rng.chance(0.4) {
        return None;
    }
    Some(Duration::from_mins(*pick(&mut rng, &[10, 15, 20, 30, 40])))
}

/// The faults that strike a kubeadm fleet, from the seed's own stream: none, one or two
/// of a slow boot (machines that come up 5 to 30 minutes late, past a token's 15-minute
/// life unless it is moved on; its window ends that long before the faults stop) and an
/// operator who deletes bootstrap tokens.
pub(crate) fn kubeadm_faults(
    seed: u64,
    kubeadm: bool,
    safety: Duration,
    clusters: &[(Cluster, u64)],
) -> Vec<Fault> {
    let mut rng = SeededRng::fork(seed, "swarm-kubeadm-faults");
    if !kubeadm || clusters.is_empty() {
        return Vec::new();
    }
    let end_s = safety.as_millis() / 1000;
    (0..rng.below(3))
        .map(|_| {
            let kind = *pick(&mut rng, &FaultKind::KUBEADM);
            let at_s = rng.between(0, end_s - 120);
            let mut f = Fault::new(kind, Duration::from_secs(at_s));
            if rng.chance(0.5) {
                f.cluster = Some(pick(&mut rng, clusters).0.metadata.name.clone());
            }
            match kind {
                FaultKind::KubeadmSlowBoot => {
                    // A machine it slows boots up to `latency` after the window: the
                    // window ends that long before the faults stop, so that the fleet
                    // converges by the same bound as after any other fault.
                    // Half of them from birth: the fleet's first machines are the
                    // most that come up at once.
                    let latency_s = rng.between(300, 1800).min(end_s / 2);
                    let at_s = if rng.chance(0.5) {
                        0
                    } else {
                        rng.between(0, end_s - latency_s - 60)
                    };
                    f.at = Duration::from_secs(at_s);
                    f.duration = Some(Duration::from_secs(
                        rng.between(60, 900).min(end_s - latency_s - at_s),
                    ));
                    f.latency = Some(Duration::from_secs(latency_s));
                    f.rate = Some(0.2 + 0.8 * rng.unit());
                }
                _ => {
                    if rng.chance(0.5) {
                        f.count = Some(1);
                    }
                }
            }
            f
        })
        .collect()
}

/// A quarter of boot failures fail every boot from the start until the faults stop (F11):
/// repairs would go on for ever, and only the churn breaker stops them. The swarm then
/// resumes the clusters, as an operator does once the cloud is fixed.
fn endless_from_birth(rng: &mut SeededRng, f: &mut Fault, end_s: u64) {
    if rng.chance(0.25) {
        f.rate = Some(1.0);
        f.at = Duration::ZERO;
        f.duration = Some(Duration::from_secs(end_s));
    }
}

/// Aims a fault that takes machines away (`operator.deleteMachine`,
/// `nova.serverError`): at one machine of a control plane with members to spare (one
/// such fault per cluster, as `octavia.memberOffline`), or at a node pool that has
/// machines. Answers false when there is no such target.
///
/// Never at a kubeadm fleet's control plane: its machines are the workload cluster's
/// etcd, and between `kubeadm init` and the second member's join one machine holds it
/// all. An operator who deletes that machine deletes the cluster, which no controller
/// can bring back (Cluster API cannot either), and flightdeck never runs init again once
/// the API has answered (it would split the cluster whenever the first still lived
/// unseen). Rollouts and repairs of kubeadm control planes still come from the
/// workload's upgrades and from the faults that fail new machines.
fn aim_at_machines(
    rng: &mut SeededRng,
    f: &mut Fault,
    clusters: &[(Cluster, u64)],
    spare: &mut Vec<&Cluster>,
    kubeadm: bool,
) -> bool {
    let pools: Vec<(&Cluster, &flightdeck_spec::NodePool)> = clusters
        .iter()
        .flat_map(|(c, _)| c.spec.node_pools.iter().map(move |p| (c, p)))
        .filter(|(_, p)| p.replicas.get() > 0)
        .collect();
    if !kubeadm && !spare.is_empty() && (pools.is_empty() || rng.chance(0.3)) {
        let target = spare.remove(rng.below(spare.len() as u64) as usize);
        f.cluster = Some(target.metadata.name.clone());
        f.pool = Name::new("cp").ok();
        f.count = Some(1);
        return true;
    }
    if pools.is_empty() {
        return false;
    }
    let (cluster, pool) = *pick(rng, &pools);
    f.cluster = Some(cluster.metadata.name.clone());
    f.pool = Some(pool.name.clone());
    f.count = Some(rng.between(1, u64::from(pool.replicas.get()).min(2)) as u32);
    true
}
