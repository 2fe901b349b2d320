//! What the controller must remember across restarts: recorded object IDs, machine
//! records (written before a machine is created, so a crash cannot create it twice),
//! and deadlines. Persisted by the engine after every plan.

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::Timestamp;
use serde::{Deserialize, Serialize};

/// Which part of the cluster a machine belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum MachineRole {
    ControlPlane,
    Pool(String),
}

impl MachineRole {
    pub fn label(&self) -> &str {
        match self {
            MachineRole::ControlPlane => "control-plane",
            MachineRole::Pool(p) => p,
        }
    }
}

/// What a machine is built from; two machines with the same template are
/// interchangeable. A control-plane template includes the Kubernetes version.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineTemplate {
    pub flavor: String,
    pub image: String,
    pub version: String,
    /// The digest of the set's userData (0: none): new content is a rollout.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub user_data: u64,
}

impl MachineTemplate {
    /// A stable digest of the template (16 hex digits), carried in each machine's tags.
    pub fn digest(&self) -> String {
        let text = format!(
            "{}|{}|{}|{}",
            self.flavor, self.image, self.version, self.user_data
        );
        format!("{:016x}", flightdeck_spec::fnv1a(text.as_bytes()))
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why and since when a machine is being removed. Once set, removal always finishes:
/// it was decided when every gate held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removal {
    pub since: Timestamp,
    pub reason: String,
    /// When the drain of the machine's node started: `nodeDrainTimeout` counts from
    /// here, and survives restarts. `None` until it starts (a hold annotation keeps it
    /// from starting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_since: Option<Timestamp>,
    /// The machine's node, once seen: it is deleted from the workload cluster once the
    /// machine is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The set was scaled down: the machine is as good as any other, and is kept if
    /// the set asks for it again before its removal touched anything (see
    /// `rollout::reclaim_untouched`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scale_down: bool,
}

// An absent field stays out of the stored record (a fleet's store holds ten machines
// a cluster): every `Option` reads back as `None` when it is missing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineRecord {
    /// The server's name: `<cluster>-<key>`.
    pub name: String,
    /// Unique within the cluster, `<pool>-<n>` (`cp-<n>` for the control plane); carried
    /// by the machine's objects as the `flightdeck-machine` tag.
    pub key: String,
    pub role: MachineRole,
    pub template: MachineTemplate,
    /// Why the machine was created, repeated when its create must be issued again.
    pub reason: String,
    pub created_at: Timestamp,
    /// Set once the create call returned, or once the server was seen by its tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_id: Option<String>,
    /// Set once the member create returned, or once the member was seen by its tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_id: Option<String>,
    /// When the machine's member was first seen not serving; the `memberTimeout`
    /// deadline counts from here and survives restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_unready_since: Option<Timestamp>,
    /// When Nova first failed to list the recorded server. A server is only taken for
    /// gone once it has been missing for [`crate::GONE_AFTER`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_missing_since: Option<Timestamp>,
    /// When the machine's node was first seen NotReady (F3 counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_unready_since: Option<Timestamp>,
    /// When the machine's server was first seen running: `nodeStartupTimeout` counts
    /// from here, not from the record (a server made late, after an outage, gets its
    /// full time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_since: Option<Timestamp>,
    /// Set when flight control decided to replace the machine (F3, F6); counts against
    /// the pool's `maxUnhealthy` budget until the machine is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<Remediation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removal: Option<Removal>,
    /// When each machine before this one in its slot was condemned and replaced (F6,
    /// F11): a slot re-created again and again is a loop, a set repaired machine by
    /// machine is not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lineage: Vec<Timestamp>,
    /// When a create of this machine's server or VM was last sent, while its ID is not
    /// recorded and no refusal came back: the server may exist although no list shows it
    /// yet (a crash came before its ID was recorded, or the answer was a 5xx that may
    /// have followed the create). Nova and OpenNebula names are not unique, so the create
    /// is not sent again until the lists have had [`crate::LIST_LAG_MAX`] to show it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_sent_at: Option<Timestamp>,
    /// kubeadm: the bootstrap token the machine joins with, while it has not joined
    /// (its id only: the secret part goes into the machine's data and nowhere else).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<TokenRecord>,
}

/// A joining machine's bootstrap token, as flightdeck keeps it: the public id, and when
/// the workload cluster takes it for expired.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRecord {
    pub id: String,
    pub expires_at: Timestamp,
    /// The workload cluster answered that the token is not there (an operator deleted
    /// it, or it was cleaned after it ran out): the machine's data names it, so the
    /// machine can never join, and flight control replaces it at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gone: bool,
}

/// kubeadm: who made the workload cluster, and whether it is made.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapMemory {
    /// The control-plane machine that runs `kubeadm init`. Another takes the role only
    /// once this one's record is gone, and only while the API has never served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_machine: Option<String>,
    /// When the workload cluster's API first answered: from then on every new machine
    /// joins, and `kubeadm init` never runs again in this cluster's life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialized_at: Option<Timestamp>,
}

impl BootstrapMemory {
    pub fn is_empty(&self) -> bool {
        *self == BootstrapMemory::default()
    }
}

/// Why and since when flight control replaces a machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remediation {
    pub since: Timestamp,
    pub reason: String,
    /// Decided from the node list (F3), not from the cloud's own word (F6).
    #[serde(default)]
    pub node_based: bool,
}

/// The churn breaker's ledger (F11): when each object was re-created, and which objects
/// tripped the breaker.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChurnLedger {
    /// Object (`pool workers`, `security group`, ...) → times it was re-created.
    pub recreated: BTreeMap<String, Vec<Timestamp>>,
    /// Objects whose reconcile is stopped, with the reason.
    pub tripped: BTreeMap<String, String>,
    /// Per set: the lineages of condemned machines, handed to the next machines the set
    /// creates (their replacements), oldest first.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub heirs: BTreeMap<String, Vec<Vec<Timestamp>>>,
    /// The other objects flightdeck makes (rules, load-balancer children, members,
    /// security-group memberships, routes, templates), by what they are to a person.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub objects: BTreeMap<String, ObjectHistory>,
}

/// What the churn breaker knows of one object flightdeck makes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectHistory {
    /// When it was made again after it had been in the cloud.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recreated: Vec<Timestamp>,
    /// Whether it has been in the cloud since it was last made: making it again before
    /// then is a retry of the same creation, not a re-creation.
    pub seen: bool,
    /// When it was made, first seen, or first found missing after it had been seen; a
    /// history whose object is not in the cloud and that is idle for a churn window is
    /// forgotten. Not moved while the object stays in the cloud, so a quiet reconcile
    /// leaves memory as it was (and commits nothing).
    pub last: Timestamp,
    /// A pass found it missing since it was last seen (`last` says when).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
}

/// IDs of the cluster-wide objects flightdeck created.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedIds {
    /// When Octavia or Neutron first failed to list a recorded load balancer or
    /// security group; it is only recreated once missing for [`crate::GONE_AFTER`].
    #[serde(default)]
    pub missing_since: Option<Timestamp>,
    pub security_group: Option<String>,
    pub load_balancer: Option<String>,
    pub listener: Option<String>,
    pub pool: Option<String>,
    pub health_monitor: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    /// The cluster's UID, drawn once when the cluster is first applied.
    pub uid: String,
    /// Fingerprint of the last spec planned against.
    pub spec_hash: u64,
    /// Next machine number; machine names are never reused within a cluster.
    pub machine_seq: u64,
    pub machines: BTreeMap<String, MachineRecord>,
    pub ids: RecordedIds,
    /// Set when the cluster first became Ready: from then on its API must keep serving.
    pub ready_since: Option<Timestamp>,
    /// The control-plane template a rollout is moving to, while one is under way.
    pub rollout_target: Option<MachineTemplate>,
    /// When deletion was requested; deletion is never undone by a later apply.
    pub deletion_requested: Option<Timestamp>,
    /// Counts the reconciles that changed the cloud. An observation taken before the
    /// latest of them is stale and is not planned from.
    #[serde(default)]
    pub write_seq: u64,
    #[serde(default)]
    pub churn: ChurnLedger,
    /// The smallest route limit a router answered with (F8), and when.
    #[serde(default)]
    pub route_limit: Option<(usize, Timestamp)>,
    /// The routes flightdeck added to the cluster's router and has not removed (F7):
    /// with the cluster's live machines, they say which routes are the cluster's.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub routes: BTreeSet<flightdeck_cloud::Route>,
    /// OpenNebula: the templates and images this cluster holds (F1).
    #[serde(default, skip_serializing_if = "OneHoldings::is_empty")]
    pub one: OneHoldings,
    /// KubeVirt: guest drains under way, by machine name (F9).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub drains: BTreeMap<String, DrainRecord>,
    /// The labels and taints flightdeck has put on each set's Nodes (by set label), while
    /// some may still be on a Node although the spec no longer asks for them: what it
    /// takes off again, and never more.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_meta: BTreeMap<String, NodeMeta>,
    /// Nodes of machines that are gone, by name, with when the machine was confirmed
    /// gone: each is deleted from the workload cluster, until `nodeDeletionTimeout`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_deletions: BTreeMap<String, Timestamp>,
    /// Servers (by id) whose removal was confirmed, and when: for
    /// [`crate::LIST_LAG_MAX`] a lagging list may still show them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gone_servers: BTreeMap<String, Timestamp>,
    /// Whether the cloud was searched for objects an earlier cluster of this name left.
    #[serde(default, skip_serializing_if = "IdentityCheck::is_confirmed")]
    pub identity: IdentityCheck,
    /// Since when flightdeck has failed to observe the cluster, while it has: that time
    /// is no machine's, and every machine deadline moves on by it (F3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unobserved_since: Option<Timestamp>,
    /// While deleting: what deletion has seen of the recorded objects (F12).
    #[serde(default, skip_serializing_if = "DeletionProof::is_empty")]
    pub deletion_proof: DeletionProof,
    /// Since when the API load balancer has been PENDING_* without a break: past a
    /// minute it is held up (a hanging failover), not changing, and is looked at less
    /// often.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lb_pending_since: Option<Timestamp>,
    /// kubeadm: the init machine and when the cluster was initialized.
    #[serde(default, skip_serializing_if = "BootstrapMemory::is_empty")]
    pub bootstrap: BootstrapMemory,
}

/// Where a cluster stands on its identity in the cloud (see `flightdeck_cloud::identity`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum IdentityCheck {
    /// Checked; or stored before the check existed, when the cluster made its objects.
    #[default]
    Confirmed,
    /// New: nothing is created until the cloud shows no object of the cluster's name
    /// under another UID.
    Pending,
    /// New, and asked (`--adopt`) to take over what one earlier cluster of its name left.
    Adopt,
}

impl IdentityCheck {
    pub fn is_confirmed(&self) -> bool {
        *self == IdentityCheck::Confirmed
    }
}

/// What a deletion has seen of the objects the cluster recorded. A cloud that shows none
/// of them, when flightdeck deleted none of them, is no proof that they are gone: it may
/// be another cloud, project or namespace. Deletion then stops and asks (F12).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionProof {
    /// Recorded objects this deletion saw in the cloud or asked the cloud to delete.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub seen: BTreeSet<String>,
    /// An operator said the recorded objects are gone (`delete --forget`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forget: bool,
    /// When a list first showed nothing left: one empty answer is not enough, a later
    /// list must confirm it, as every deleted object is confirmed by the cloud.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_since: Option<Timestamp>,
}

impl DeletionProof {
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty() && !self.forget && self.empty_since.is_none()
    }
}

/// Labels and taints of a set's Nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMeta {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<flightdeck_cloud::Taint>,
}

impl NodeMeta {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.taints.is_empty()
    }
}

/// A guest drain (F9): KubeVirt asked to evacuate a machine's VMI. The start is kept, so
/// the `drainTimeout` deadline survives restarts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainRecord {
    /// The VMI being evacuated (a replacement VMI has another UID).
    pub vmi_uid: String,
    /// The infra node KubeVirt evacuates (`status.evacuationNodeName`).
    pub infra_node: String,
    /// When flightdeck first saw the evacuation request: the deadline counts from here.
    pub since: Timestamp,
    /// The guest node, once found by the machine's identity.
    #[serde(default)]
    pub guest_node: Option<String>,
    /// Set once the VMI's deletion was asked for; the record stays until the
    /// replacement's node is uncordoned.
    #[serde(default)]
    pub vmi_deleted: Option<Timestamp>,
}

/// The OpenNebula templates and images a cluster holds, by the content-addressed name
/// they are registered under. Holding is what makes an object flightdeck's: never its
/// name, never its attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OneHoldings {
    pub templates: BTreeMap<String, Held>,
    pub images: BTreeMap<String, Held>,
    /// Templates (by ID) that OpenNebula refused to instantiate with a permanent error
    /// (a USE lock: AUTHORIZATION), with when and its message. Instantiating from one is
    /// tried again only after [`crate::opennebula::BLOCKED_RETRY`]; everything else goes
    /// on meanwhile.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub blocked: BTreeMap<String, Blocked>,
}

/// A permanent refusal from the cloud, remembered so it is retried slowly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    pub since: Timestamp,
    /// The cloud's own message, verbatim.
    pub message: String,
}

impl OneHoldings {
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty() && self.images.is_empty() && self.blocked.is_empty()
    }

    /// Every held object's key (`template/<id>`, `image/<id>`), with whether flightdeck
    /// created it and whether its deletion has been asked for.
    pub fn keys(&self) -> impl Iterator<Item = (String, &Held)> + '_ {
        let t = self
            .templates
            .values()
            .filter_map(|h| h.id.as_ref().map(|id| (format!("template/{id}"), h)));
        let i = self
            .images
            .values()
            .filter_map(|h| h.id.as_ref().map(|id| (format!("image/{id}"), h)));
        t.chain(i)
    }
}

/// One held template or image.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// `None` while its create is requested but not answered: a crash in between finds
    /// the object by its name and adopts it.
    pub id: Option<String>,
    /// flightdeck registered it (this cluster or another). Only such an object is ever
    /// deleted, by the last cluster that holds it.
    pub created: bool,
    /// Its deletion was asked for; it is held until the cloud no longer lists it.
    #[serde(default)]
    pub deleting: bool,
    /// When the cloud first failed to list it.
    #[serde(default)]
    pub missing_since: Option<Timestamp>,
    /// An image flightdeck registered: when it was first seen in ERROR (its copy failed).
    #[serde(default)]
    pub failed_since: Option<Timestamp>,
    /// An image that stayed in ERROR for [`crate::opennebula::FAILED_IMAGE_RETRY`]: this
    /// cluster gave it up, so it no longer counts as a holder and the last cluster
    /// holding it deletes it; it is registered again once it is gone.
    #[serde(default)]
    pub given_up: bool,
}

impl Held {
    /// Whether this cluster holds the object for use, so that no other cluster may
    /// delete it. An image given up (it stayed in ERROR) is held for nothing.
    pub fn holds(&self) -> bool {
        !self.given_up
    }
}

impl Memory {
    /// The IDs of the servers (VMs) recorded for the cluster's machines.
    pub fn recorded_servers(&self) -> Vec<String> {
        self.machines
            .values()
            .filter_map(|r| r.server_id.clone())
            .collect()
    }

    pub fn new(uid: String) -> Self {
        Memory {
            uid,
            spec_hash: 0,
            machine_seq: 0,
            machines: BTreeMap::new(),
            ids: RecordedIds::default(),
            ready_since: None,
            rollout_target: None,
            deletion_requested: None,
            write_seq: 0,
            churn: ChurnLedger::default(),
            route_limit: None,
            routes: BTreeSet::new(),
            one: OneHoldings::default(),
            drains: BTreeMap::new(),
            node_deletions: BTreeMap::new(),
            node_meta: BTreeMap::new(),
            gone_servers: BTreeMap::new(),
            identity: IdentityCheck::Confirmed,
            unobserved_since: None,
            deletion_proof: DeletionProof::default(),
            lb_pending_since: None,
            bootstrap: BootstrapMemory::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MachineRecord;

    /// A machine as stores written before absent fields were left out hold it.
    const WITH_NULLS: &str = r#"{"name":"c5-workers-4","key":"workers-4","role":{"Pool":"workers"},"template":{"flavor":"m1.xlarge","image":"ubuntu","version":""},"reason":"workers needs 7 machine(s), has 0","created_at":1767225670000,"server_id":"49f351f6","member_id":null,"member_unready_since":null,"server_missing_since":null,"node_unready_since":null,"running_since":1767225680000,"remediation":null,"removal":null}"#;

    #[test]
    fn a_machine_record_leaves_absent_fields_out_and_reads_the_older_form() {
        let old: MachineRecord = serde_json::from_str(WITH_NULLS).expect("the older form reads");
        assert_eq!(old.server_id.as_deref(), Some("49f351f6"));
        assert!(old.member_id.is_none() && old.removal.is_none());
        let written = serde_json::to_string(&old).expect("writes");
        assert!(!written.contains("null"), "{written}");
        assert!(written.len() < WITH_NULLS.len() - 100, "{written}");
        let again: MachineRecord = serde_json::from_str(&written).expect("reads back");
        assert_eq!(again, old);
    }
}
