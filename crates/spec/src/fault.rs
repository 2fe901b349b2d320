//! Faults a scenario schedules: what each kind does to the simulated cloud, the
//! parameters it takes, and which machines it aims at.

use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::names::{Name, Text};

/// The most an `api.staleRead` may lag a list: the simulator keeps its answers that long.
pub const STALE_READ_LAG_MAX: Duration = Duration::from_mins(10);
/// The longest a fault may last (`duration`).
pub const FAULT_DURATION_MAX: Duration = Duration::from_mins(24 * 60);
/// The most extra time an `api.latency` puts on each call: longer is an outage.
pub const API_LATENCY_MAX: Duration = Duration::from_mins(60);
/// The longest wait an `api.rateLimit` answer may ask for (`retryAfter`).
pub const RETRY_AFTER_MAX: Duration = Duration::from_mins(60);
/// The most objects a fault's `count` may name (and the highest route limit).
pub const FAULT_COUNT_MAX: u32 = 1_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FaultKind {
    /// New members stay PENDING_CREATE while their load balancer reports ACTIVE.
    #[serde(rename = "octavia.memberStuckPending")]
    MemberStuckPending,
    /// Members report operating status OFFLINE.
    #[serde(rename = "octavia.memberOffline")]
    MemberOffline,
    /// Servers requested in the window go BUILD → ERROR.
    #[serde(rename = "nova.bootError")]
    BootError,
    /// A fraction of one service's calls answer 503.
    #[serde(rename = "api.errorRate")]
    ApiErrorRate,
    /// One service's calls take longer.
    #[serde(rename = "api.latency")]
    ApiLatency,
    /// Servers booted in the window never register a node (`rate` of them).
    #[serde(rename = "net.noRegistration")]
    NoRegistration,
    /// At the start, `count` pod-network ingress rules disappear from a cluster's group.
    #[serde(rename = "neutron.ruleLost")]
    RuleLost,
    /// Servers created in the window come up without their security group (`rate`), and
    /// at the start `count` running servers lose it.
    #[serde(rename = "nova.dropSecurityGroup")]
    DropSecurityGroup,
    /// At the start, `count` stale routes (a live pod network's destination, a dead next
    /// hop) appear on the cluster's router.
    #[serde(rename = "router.staleRoute")]
    StaleRoute,
    /// While active, routers hold at most `count` extra routes.
    #[serde(rename = "neutron.maxRoutes")]
    MaxRoutes,
    /// While active, the workload cluster's node list comes back empty.
    #[serde(rename = "observer.emptyNodeList")]
    EmptyNodeList,
    /// While active, every node reports NotReady.
    #[serde(rename = "observer.allNotReady")]
    AllNotReady,
    /// At the start, an operator locks every OpenNebula template whose name starts with
    /// `template`, at `level`; at the end (if the fault has a duration) unlocks them.
    #[serde(rename = "one.lockTemplate")]
    OneLockTemplate,
    /// OpenNebula VMs instantiated in the window end in BOOT_FAILURE (`rate` of them).
    #[serde(rename = "one.vmBootFailure")]
    OneVmBootFailure,
    /// OpenNebula images allocated in the window end in ERROR (`rate` of them).
    #[serde(rename = "one.imageError")]
    OneImageError,
    /// A fraction (`rate`) of OpenNebula XML-RPC calls answer INTERNAL.
    #[serde(rename = "one.rpcError")]
    OneRpcError,
    /// At the start, the infra node `node` is drained: KubeVirt sets
    /// `status.evacuationNodeName` on every VMI there whose eviction strategy is
    /// External (as its eviction webhook does), and schedules nothing new on it until the
    /// fault ends.
    #[serde(rename = "kubevirt.drainInfraNode")]
    KubevirtDrainInfraNode,
    /// While active, every PodDisruptionBudget of the workload cluster (of `cluster`, or
    /// of all) keeps `disruptionsAllowed` at 0.
    #[serde(rename = "k8s.pdbBlocks")]
    K8sPdbBlocks,
    /// At the start, an operator deletes `count` (default 1) of the targeted machines out
    /// of band: their servers, OpenNebula VMs or KubeVirt VMs.
    #[serde(rename = "operator.deleteMachine")]
    OperatorDeleteMachine,
    /// At the start, `count` (default 1) running servers go ERROR (their host failed) and
    /// their kubelets stop.
    #[serde(rename = "nova.serverError")]
    ServerError,
    /// While active, the targeted load balancers stay PENDING_UPDATE: Octavia answers
    /// 409 to every change of them or of their children.
    #[serde(rename = "octavia.pendingUpdate")]
    LbPendingUpdate,
    /// Members whose deletion is asked for while active stay PENDING_DELETE until the
    /// fault ends; creates complete as usual.
    #[serde(rename = "octavia.memberStuckDeleting")]
    MemberStuckDeleting,
    /// A fraction (`rate`) of one service's calls answer 429 with a `Retry-After` of
    /// `retryAfter` (default 2s).
    #[serde(rename = "api.rateLimit")]
    ApiRateLimit,
    /// At the start, Keystone revokes every token issued so far: the next call made with
    /// one answers 401, and the client must authenticate again.
    #[serde(rename = "keystone.revokeTokens")]
    KeystoneRevokeTokens,
    /// While active, one service's lists (Nova's servers, Octavia's members, the
    /// workload cluster's nodes) answer with what that same list answered `latency`
    /// before: a read from a lagging cache or replica (the Sieve class's stale read).
    /// Before the service has answered that long ago, the list is fresh.
    #[serde(rename = "api.staleRead")]
    ApiStaleRead,
    /// While active, Nova's server list ignores its `tags` filter, as a Nova asked below
    /// microversion 2.26 (or one that drops unknown query parameters) does, and answers
    /// every server in the project: other clusters' and servers nobody tagged.
    #[serde(rename = "nova.tagFilterIgnored")]
    TagFilterIgnored,
    /// While active, each answer of a watch of the workload cluster's nodes (of
    /// `cluster`, or of all) that carries two or more events carries them in reverse
    /// order, so a node's older state arrives after its newer one (the Acto class's
    /// reordered events; a real API server keeps one object's events in order, a proxy or
    /// an informer behind one need not). Only a watch sees it: a list is as ever.
    #[serde(rename = "k8s.watchReorder")]
    K8sWatchReorder,
    /// While active, an operator's `flightdeck.dev/hold-deletion` annotation is on the
    /// targeted Nodes of OpenStack and OpenNebula clusters (put on at the start, taken
    /// off at the end): the pre-drain hook, holding their machines' deletion.
    #[serde(rename = "operator.holdNodeDeletion")]
    OperatorHoldNodeDeletion,
    /// At the start, an operator removes every label (but the kubelet's own) and every
    /// taint from the targeted Nodes of OpenStack and OpenNebula clusters.
    #[serde(rename = "operator.stripNodeLabels")]
    OperatorStripNodeLabels,
    /// Machines whose server or VM comes up in the window boot `latency` slower: their
    /// cloud-init, and so kubeadm and the kubelet, run that much later (a slow image
    /// pull, a package mirror that crawls). A kubeadm join then needs a token that was
    /// kept alive meanwhile.
    #[serde(rename = "kubeadm.slowBoot")]
    KubeadmSlowBoot,
    /// At the start, an operator deletes `count` (default: every one) of the targeted
    /// workload clusters' bootstrap tokens (`kubeadm token delete`): their
    /// `bootstrap-token-<id>` Secrets in `kube-system`.
    #[serde(rename = "operator.deleteBootstrapToken")]
    OperatorDeleteBootstrapToken,
}

impl FaultKind {
    /// The kinds that hit an OpenStack fleet (and its workload clusters).
    pub const OPENSTACK: [FaultKind; 20] = [
        FaultKind::MemberStuckPending,
        FaultKind::MemberOffline,
        FaultKind::BootError,
        FaultKind::ApiErrorRate,
        FaultKind::ApiLatency,
        FaultKind::NoRegistration,
        FaultKind::RuleLost,
        FaultKind::DropSecurityGroup,
        FaultKind::StaleRoute,
        FaultKind::MaxRoutes,
        FaultKind::EmptyNodeList,
        FaultKind::AllNotReady,
        FaultKind::OperatorDeleteMachine,
        FaultKind::ServerError,
        FaultKind::LbPendingUpdate,
        FaultKind::MemberStuckDeleting,
        FaultKind::ApiRateLimit,
        FaultKind::KeystoneRevokeTokens,
        FaultKind::ApiStaleRead,
        FaultKind::TagFilterIgnored,
    ];

    /// The kinds that hit only OpenNebula or KubeVirt fleets.
    pub const OTHER_CLOUDS: [FaultKind; 6] = [
        FaultKind::OneLockTemplate,
        FaultKind::OneVmBootFailure,
        FaultKind::OneImageError,
        FaultKind::OneRpcError,
        FaultKind::KubevirtDrainInfraNode,
        FaultKind::K8sPdbBlocks,
    ];

    /// The kinds that strike only two or more events of one node in one answer of a
    /// watch: over the wire, where the simulated API records its nodes as often as it is
    /// polled. In the simulator's own time it records them only when asked, so an answer
    /// of a watch carries at most one event per node, and the swarm draws none of them.
    pub const WATCH_ONLY: [FaultKind; 1] = [FaultKind::K8sWatchReorder];

    /// What an operator does to the Nodes of a workload cluster: a scenario's to draw, not
    /// the swarm's (a hold holds a machine's deletion as long as the operator wants).
    pub const OPERATOR_NODES: [FaultKind; 2] = [
        FaultKind::OperatorHoldNodeDeletion,
        FaultKind::OperatorStripNodeLabels,
    ];
    /// What strikes a cluster that boots with kubeadm (`spec.bootstrap.provider`), on
    /// any cloud whose machines boot flightdeck's data.
    pub const KUBEADM: [FaultKind; 2] = [
        FaultKind::KubeadmSlowBoot,
        FaultKind::OperatorDeleteBootstrapToken,
    ];
    /// Every kind: [`FaultKind::OPENSTACK`], then [`FaultKind::OTHER_CLOUDS`], then
    /// [`FaultKind::WATCH_ONLY`], then [`FaultKind::OPERATOR_NODES`], then
    /// [`FaultKind::KUBEADM`].
    pub const ALL: [FaultKind; 31] = {
        let mut all = [FaultKind::MemberStuckPending; 31];
        let mut i = 0;
        while i < Self::OPENSTACK.len() {
            all[i] = Self::OPENSTACK[i];
            i += 1;
        }
        while i < Self::OPENSTACK.len() + Self::OTHER_CLOUDS.len() {
            all[i] = Self::OTHER_CLOUDS[i - Self::OPENSTACK.len()];
            i += 1;
        }
        let before_watch = Self::OPENSTACK.len() + Self::OTHER_CLOUDS.len();
        while i < before_watch + Self::WATCH_ONLY.len() {
            all[i] = Self::WATCH_ONLY[i - before_watch];
            i += 1;
        }
        let before_nodes = before_watch + Self::WATCH_ONLY.len();
        while i < before_nodes + Self::OPERATOR_NODES.len() {
            all[i] = Self::OPERATOR_NODES[i - before_nodes];
            i += 1;
        }
        while i < all.len() {
            all[i] = Self::KUBEADM[i - before_nodes - Self::OPERATOR_NODES.len()];
            i += 1;
        }
        all
    };

    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::MemberStuckPending => "octavia.memberStuckPending",
            FaultKind::MemberOffline => "octavia.memberOffline",
            FaultKind::BootError => "nova.bootError",
            FaultKind::ApiErrorRate => "api.errorRate",
            FaultKind::ApiLatency => "api.latency",
            FaultKind::NoRegistration => "net.noRegistration",
            FaultKind::RuleLost => "neutron.ruleLost",
            FaultKind::DropSecurityGroup => "nova.dropSecurityGroup",
            FaultKind::StaleRoute => "router.staleRoute",
            FaultKind::MaxRoutes => "neutron.maxRoutes",
            FaultKind::EmptyNodeList => "observer.emptyNodeList",
            FaultKind::AllNotReady => "observer.allNotReady",
            FaultKind::OneLockTemplate => "one.lockTemplate",
            FaultKind::OneVmBootFailure => "one.vmBootFailure",
            FaultKind::OneImageError => "one.imageError",
            FaultKind::OneRpcError => "one.rpcError",
            FaultKind::KubevirtDrainInfraNode => "kubevirt.drainInfraNode",
            FaultKind::K8sPdbBlocks => "k8s.pdbBlocks",
            FaultKind::OperatorDeleteMachine => "operator.deleteMachine",
            FaultKind::ServerError => "nova.serverError",
            FaultKind::LbPendingUpdate => "octavia.pendingUpdate",
            FaultKind::MemberStuckDeleting => "octavia.memberStuckDeleting",
            FaultKind::ApiRateLimit => "api.rateLimit",
            FaultKind::KeystoneRevokeTokens => "keystone.revokeTokens",
            FaultKind::ApiStaleRead => "api.staleRead",
            FaultKind::TagFilterIgnored => "nova.tagFilterIgnored",
            FaultKind::K8sWatchReorder => "k8s.watchReorder",
            FaultKind::OperatorHoldNodeDeletion => "operator.holdNodeDeletion",
            FaultKind::OperatorStripNodeLabels => "operator.stripNodeLabels",
            FaultKind::KubeadmSlowBoot => "kubeadm.slowBoot",
            FaultKind::OperatorDeleteBootstrapToken => "operator.deleteBootstrapToken",
        }
    }
}

/// How a fault kind can be aimed at one cluster (its `cluster`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterAim {
    /// By what it acts on: objects tagged with the cluster's name, the cluster's own
    /// lists, its pod network or its workload cluster.
    Objects,
    /// By the calls it strikes: only a call that says which cluster it is for (its
    /// caller label's `cluster=`, or the workload cluster whose API it calls) is struck.
    /// The daemon labels each reconcile's calls; a scenario's calls carry no label.
    Calls,
    /// Not at all: what it strikes is shared by every cluster of the cloud (the reason).
    Shared(&'static str),
}

/// Where a fault is started: what `cluster` and `service` may be differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultSite {
    /// In a scenario of this duration: its calls carry no cluster, and an API fault
    /// names the service it hits.
    Scenario(Duration),
    /// In a running simulator, by a user (`POST /api/v1/sim/faults`): the daemon's calls
    /// say their cluster, and an API fault without `service` hits every service, one
    /// without `rate` every call.
    Live,
}

impl FaultKind {
    /// How the kind can be aimed at one cluster.
    pub fn cluster_aim(self) -> ClusterAim {
        match self {
            FaultKind::ApiErrorRate
            | FaultKind::ApiLatency
            | FaultKind::ApiRateLimit
            | FaultKind::ApiStaleRead
            | FaultKind::OneRpcError => ClusterAim::Calls,
            FaultKind::KeystoneRevokeTokens => ClusterAim::Shared(
                "Keystone's tokens are the project's, and every cluster of the cloud calls with them",
            ),
            FaultKind::OneLockTemplate => ClusterAim::Shared(
                "an OpenNebula template is shared by every cluster that registers the same content (F1), so its lock holds them all",
            ),
            FaultKind::OneImageError => ClusterAim::Shared(
                "an OpenNebula image is shared by every cluster that names the same content (F1), so an image in ERROR fails them all",
            ),
            FaultKind::KubevirtDrainInfraNode => ClusterAim::Shared(
                "an infra node runs every cluster's VMs, and its drain evicts them all",
            ),
            FaultKind::MemberStuckPending
            | FaultKind::MemberOffline
            | FaultKind::BootError
            | FaultKind::NoRegistration
            | FaultKind::RuleLost
            | FaultKind::DropSecurityGroup
            | FaultKind::StaleRoute
            | FaultKind::MaxRoutes
            | FaultKind::EmptyNodeList
            | FaultKind::AllNotReady
            | FaultKind::OperatorHoldNodeDeletion
            | FaultKind::OperatorStripNodeLabels
            | FaultKind::OneVmBootFailure
            | FaultKind::K8sPdbBlocks
            | FaultKind::OperatorDeleteMachine
            | FaultKind::ServerError
            | FaultKind::LbPendingUpdate
            | FaultKind::MemberStuckDeleting
            | FaultKind::TagFilterIgnored
            | FaultKind::K8sWatchReorder
            | FaultKind::KubeadmSlowBoot
            | FaultKind::OperatorDeleteBootstrapToken => ClusterAim::Objects,
        }
    }
}

/// A cloud service that faults can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Service {
    Keystone,
    Nova,
    Neutron,
    Octavia,
    Kubernetes,
}

impl Service {
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Keystone => "keystone",
            Service::Nova => "nova",
            Service::Neutron => "neutron",
            Service::Octavia => "octavia",
            Service::Kubernetes => "kubernetes",
        }
    }
}

/// One fault in the schedule. Parameters that a kind does not use are rejected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Fault {
    pub at: Duration,
    /// How long the fault lasts; absent means until the end of the scenario.
    #[serde(default)]
    pub duration: Option<Duration>,
    pub kind: FaultKind,
    /// `api.errorRate`, `api.latency`: the service hit.
    #[serde(default)]
    pub service: Option<Service>,
    /// `api.errorRate`, `nova.bootError`: fraction of calls or servers hit, 0 < rate ≤ 1.
    #[serde(default)]
    pub rate: Option<f64>,
    /// `api.latency`: extra time per call (at most [`API_LATENCY_MAX`]); `kubeadm.slowBoot`:
    /// extra time per boot (the same bound); `api.staleRead`:
    /// how far behind the lists are (at most [`STALE_READ_LAG_MAX`]).
    #[serde(default)]
    pub latency: Option<Duration>,
    /// `octavia.memberOffline`: how many existing members go offline (default 1);
    /// 1 ≤ count ≤ [`FAULT_COUNT_MAX`].
    #[serde(default)]
    pub count: Option<u32>,
    /// Only this cluster's objects (or calls, see [`ClusterAim`]) are hit; absent hits
    /// every cluster's.
    #[serde(default)]
    pub cluster: Option<Name>,
    /// `one.lockTemplate`: the lock level.
    #[serde(default)]
    pub level: Option<LockLevelSpec>,
    /// `one.lockTemplate`: templates whose name starts with this are locked.
    #[serde(default)]
    pub template: Option<Text>,
    /// `kubevirt.drainInfraNode`: the infra node drained.
    #[serde(default)]
    pub node: Option<Text>,
    /// Faults on machines and members: only the machines of this node pool of `cluster`
    /// (`cp`: its control plane) are hit.
    #[serde(default)]
    pub pool: Option<Name>,
    /// Faults on machines and members: only this machine of `cluster` (as `describe`
    /// names it, e.g. `workers-3` or `cp-1`) is hit.
    #[serde(default)]
    pub machine: Option<Text>,
    /// `api.rateLimit`: the wait its answers ask for in `Retry-After` (default 2s).
    #[serde(default)]
    pub retry_after: Option<Duration>,
}

/// An OpenNebula lock level, as `one.lockTemplate` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockLevelSpec {
    Use,
    Manage,
    Admin,
}

impl FaultKind {
    /// Whether the kind acts on machines or their members, and so can aim at one node
    /// pool or one machine.
    pub fn aims_at_machines(self) -> bool {
        matches!(
            self,
            FaultKind::MemberStuckPending
                | FaultKind::MemberOffline
                | FaultKind::BootError
                | FaultKind::NoRegistration
                | FaultKind::DropSecurityGroup
                | FaultKind::OneVmBootFailure
                | FaultKind::OperatorDeleteMachine
                | FaultKind::ServerError
                | FaultKind::MemberStuckDeleting
                | FaultKind::OperatorHoldNodeDeletion
                | FaultKind::OperatorStripNodeLabels
                | FaultKind::KubeadmSlowBoot
        )
    }
}

impl Fault {
    /// A fault of `kind` at `at`, for the whole scenario, with no parameters.
    pub fn new(kind: FaultKind, at: Duration) -> Self {
        Fault {
            at,
            duration: None,
            kind,
            service: None,
            rate: None,
            latency: None,
            count: None,
            cluster: None,
            level: None,
            template: None,
            node: None,
            pool: None,
            machine: None,
            retry_after: None,
        }
    }

    /// Checks the fault's parameters against its kind; `duration` is the scenario's.
    /// Returns the field (relative to the fault) and the problem.
    pub fn validate(&self, duration: Duration) -> Result<(), (String, String)> {
        self.validate_at(FaultSite::Scenario(duration))
    }

    /// Checks the fault's parameters against its kind and their ranges, for a fault
    /// started at `site`. Returns the field (relative to the fault) and the problem,
    /// which names the value refused.
    pub fn validate_at(&self, site: FaultSite) -> Result<(), (String, String)> {
        let f = self;
        if let FaultSite::Scenario(duration) = site
            && f.at > duration
        {
            return Err((
                "at".into(),
                format!("{} is after the scenario ends ({})", f.at, duration),
            ));
        }
        let (needs_service, needs_rate, needs_latency, takes_count, takes_rate) = match f.kind {
            FaultKind::MemberStuckPending => (false, false, false, false, false),
            FaultKind::MemberOffline => (false, false, false, true, false),
            FaultKind::BootError => (false, false, false, false, true),
            FaultKind::ApiErrorRate => (true, true, false, false, true),
            FaultKind::ApiLatency => (true, false, true, false, false),
            FaultKind::NoRegistration => (false, false, false, false, true),
            FaultKind::RuleLost => (false, false, false, true, false),
            FaultKind::DropSecurityGroup => (false, false, false, true, true),
            FaultKind::StaleRoute => (false, false, false, true, false),
            FaultKind::MaxRoutes => (false, false, false, true, false),
            FaultKind::EmptyNodeList => (false, false, false, false, false),
            FaultKind::AllNotReady => (false, false, false, false, false),
            FaultKind::OneLockTemplate => (false, false, false, false, false),
            FaultKind::OneVmBootFailure => (false, false, false, false, true),
            FaultKind::OneImageError => (false, false, false, false, true),
            FaultKind::OneRpcError => (false, true, false, false, true),
            FaultKind::KubevirtDrainInfraNode => (false, false, false, false, false),
            FaultKind::K8sPdbBlocks => (false, false, false, false, false),
            FaultKind::OperatorDeleteMachine => (false, false, false, true, false),
            FaultKind::ServerError => (false, false, false, true, false),
            FaultKind::LbPendingUpdate => (false, false, false, false, false),
            FaultKind::MemberStuckDeleting => (false, false, false, false, false),
            FaultKind::ApiRateLimit => (true, true, false, false, true),
            FaultKind::KeystoneRevokeTokens => (false, false, false, false, false),
            FaultKind::ApiStaleRead => (true, false, true, false, false),
            FaultKind::TagFilterIgnored => (false, false, false, false, false),
            FaultKind::K8sWatchReorder => (false, false, false, false, false),
            FaultKind::OperatorHoldNodeDeletion => (false, false, false, false, false),
            FaultKind::OperatorStripNodeLabels => (false, false, false, false, false),
            FaultKind::KubeadmSlowBoot => (false, false, true, false, true),
            FaultKind::OperatorDeleteBootstrapToken => (false, false, false, true, false),
        };
        if FaultKind::WATCH_ONLY.contains(&f.kind) {
            return Err((
                "kind".into(),
                format!(
                    "{} strikes only a watch answer with two events of one node, and in a scenario's time the workload cluster's API records a node only when it is read, one event per node per answer: it would change nothing",
                    f.kind.as_str()
                ),
            ));
        }
        let drains = f.kind == FaultKind::KubevirtDrainInfraNode;
        if drains != f.node.is_some() {
            return Err(("node".into(), presence(f.kind.as_str(), drains)));
        }
        let locks = f.kind == FaultKind::OneLockTemplate;
        if locks != f.level.is_some() {
            return Err(("level".into(), presence(f.kind.as_str(), locks)));
        }
        if locks != f.template.is_some() {
            return Err(("template".into(), presence(f.kind.as_str(), locks)));
        }
        if f.kind == FaultKind::MaxRoutes && f.count.is_none() {
            return Err((
                "count".into(),
                "neutron.maxRoutes needs the limit as `count`".into(),
            ));
        }
        let kind = f.kind.as_str();
        // Live, an API fault without a service hits every service of its cluster, and
        // one without a rate every call.
        let scenario = matches!(site, FaultSite::Scenario(_));
        let (takes_service, needs_rate) = (needs_service, needs_rate && scenario);
        let needs_service = takes_service && scenario;
        if needs_service && f.service.is_none() {
            return Err(("service".into(), presence(kind, true)));
        }
        if !takes_service && f.service.is_some() {
            return Err(("service".into(), presence(kind, false)));
        }
        if needs_rate && f.rate.is_none() {
            return Err(("rate".into(), presence(kind, true)));
        }
        if !takes_rate && f.rate.is_some() {
            return Err(("rate".into(), presence(kind, false)));
        }
        if needs_latency != f.latency.is_some() {
            return Err(("latency".into(), presence(kind, needs_latency)));
        }
        if !takes_count && f.count.is_some() {
            return Err(("count".into(), presence(kind, false)));
        }
        if f.retry_after.is_some() && f.kind != FaultKind::ApiRateLimit {
            return Err(("retryAfter".into(), presence(kind, false)));
        }
        self.validate_ranges()?;
        self.validate_cluster(site)?;
        self.validate_aim()
    }

    /// Every number a fault takes within its range; the problem names the field's value.
    fn validate_ranges(&self) -> Result<(), (String, String)> {
        let kind = self.kind.as_str();
        if let Some(d) = self.duration
            && (d == Duration::ZERO || d > FAULT_DURATION_MAX)
        {
            return Err((
                "duration".into(),
                format!("a fault lasts more than 0 and at most {FAULT_DURATION_MAX}, got {d}"),
            ));
        }
        // NaN fails both comparisons, and infinities the second.
        if let Some(rate) = self.rate
            && !(rate > 0.0 && rate <= 1.0)
        {
            return Err((
                "rate".into(),
                format!(
                    "rate is a fraction of calls or objects, in (0, 1]: more than 0 and at most 1, got {rate}"
                ),
            ));
        }
        let latency_max = match self.kind {
            FaultKind::ApiStaleRead => STALE_READ_LAG_MAX,
            _ => API_LATENCY_MAX,
        };
        if let Some(lag) = self.latency
            && (lag == Duration::ZERO || lag > latency_max)
        {
            let what = match self.kind {
                FaultKind::ApiStaleRead => "lags lists by",
                FaultKind::KubeadmSlowBoot => "adds to each boot",
                _ => "adds to each call",
            };
            return Err((
                "latency".into(),
                format!("{kind} {what} more than 0 and at most {latency_max}, got {lag}"),
            ));
        }
        if let Some(count) = self.count
            && !(1..=FAULT_COUNT_MAX).contains(&count)
        {
            return Err((
                "count".into(),
                format!("count must be from 1 to {FAULT_COUNT_MAX}, got {count}"),
            ));
        }
        if let Some(after) = self.retry_after
            && (after < Duration::from_secs(1) || after > RETRY_AFTER_MAX)
        {
            return Err((
                "retryAfter".into(),
                format!(
                    "Retry-After counts whole seconds: at least 1s and at most {RETRY_AFTER_MAX}, got {after}"
                ),
            ));
        }
        Ok(())
    }

    /// `cluster` only where the kind can be aimed at one cluster at `site` (see
    /// [`FaultKind::cluster_aim`]).
    fn validate_cluster(&self, site: FaultSite) -> Result<(), (String, String)> {
        let kind = self.kind.as_str();
        if self.cluster.is_none() {
            return Ok(());
        }
        match (self.kind.cluster_aim(), site) {
            (ClusterAim::Objects, _) | (ClusterAim::Calls, FaultSite::Live) => Ok(()),
            (ClusterAim::Calls, FaultSite::Scenario(_)) => Err((
                "cluster".into(),
                format!(
                    "{kind} strikes calls, and a scenario's calls do not say which cluster they are for: it hits the whole service and takes no cluster"
                ),
            )),
            (ClusterAim::Shared(why), _) => Err((
                "cluster".into(),
                format!("{kind} cannot be aimed at one cluster: {why}"),
            )),
        }
    }

    /// `pool` and `machine` aim within one cluster, at one of the two, and only for the
    /// kinds that act on machines.
    fn validate_aim(&self) -> Result<(), (String, String)> {
        let kind = self.kind.as_str();
        for (field, present) in [
            ("pool", self.pool.is_some()),
            ("machine", self.machine.is_some()),
        ] {
            if !present {
                continue;
            }
            if !self.kind.aims_at_machines() {
                return Err((
                    field.into(),
                    format!("{kind} does not act on machines; it takes no {field}"),
                ));
            }
            if self.cluster.is_none() {
                return Err((
                    field.into(),
                    format!("a {field} is named within a cluster: give `cluster` too"),
                ));
            }
        }
        if self.pool.is_some() && self.machine.is_some() {
            return Err((
                "machine".into(),
                "give `pool` or `machine`, not both".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;

pub(crate) fn presence(kind: &str, needed: bool) -> String {
    if needed {
        format!("{kind} needs this field")
    } else {
        format!("{kind} does not take this field")
    }
}
