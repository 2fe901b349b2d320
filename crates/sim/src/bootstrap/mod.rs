//! The machines' bootstrap as the simulated kubelets run it: on every cloud, a machine
//! whose user data is kubeadm's (a `#cloud-config` that writes
//! [`KUBEADM_CONFIG`] and runs `kubeadm init|join`) registers its node only if that data
//! would work on a real machine. Data that is not kubeadm's (a user's own cloud-init, or
//! none) boots as before: its kubelet registers.
//!
//! The simulator reads the data on its own (YAML, X.509): it shares no code with the
//! flightdeck that wrote it, so a mistake there cannot pass for correct here.
//!
//! - `kubeadm init` makes the workload cluster: its CA is the `ca.crt` the data writes
//!   (with its `ca.key`), its endpoint the `controlPlaneEndpoint`. A second init while
//!   the cluster an earlier one made still has a live machine makes a second, split
//!   cluster: recorded ([`BootEvent::SplitInit`]), and its node never joins the first.
//!   An init after every machine of the earlier one is gone starts the cluster again
//!   (its single etcd member died with it): recorded as an init, not a split.
//! - `kubeadm join` succeeds only against a cluster that was made, at its endpoint, with
//!   a token whose `bootstrap-token-<id>` Secret is in its `kube-system`, has that
//!   secret and has not expired, and with a discovery hash that matches the cluster's
//!   CA; a control-plane join must also bring that CA. While the API does not answer,
//!   the join retries, as kubeadm's discovery does, for [`DISCOVERY_TIMEOUT`].
//!
//! Every outcome is recorded ([`SimCloud::boot_events`]), with why a machine failed.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use flightdeck_cloud::ownership::{TAG_CLUSTER, uid_of};
use flightdeck_cloud::{Clock as _, Ownership, Timestamp};
use serde::Serialize;
use serde_json::Value;

use crate::{SimCloud, State};

mod read;
mod tokens;

use read::{Role, read};
pub(crate) use tokens::{delete_out_of_band, expiration_patch, token_object};

/// Where kubeadm's configuration is written and read from.
pub const KUBEADM_CONFIG: &str = "/run/kubeadm/kubeadm.yaml";
/// How long `kubeadm join` keeps trying to reach the API (kubeadm's discovery timeout).
pub const DISCOVERY_TIMEOUT_MS: u64 = 5 * 60 * 1000;
/// How often a join that found no API tries again.
const DISCOVERY_RETRY_MS: u64 = 10_000;
/// The most boot events kept.
pub const BOOT_EVENTS_MAX: usize = 20_000;

/// What became of one machine's bootstrap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum BootEvent {
    /// `kubeadm init` made the workload cluster (again, after a cluster whose
    /// machines are all gone, when `again`).
    Init {
        at: Timestamp,
        cluster: String,
        uid: String,
        machine: String,
        again: bool,
    },
    /// A second `kubeadm init` while the first cluster lives: a split cluster.
    SplitInit {
        at: Timestamp,
        cluster: String,
        uid: String,
        machine: String,
        /// The machine whose init made the cluster that still lives.
        first: String,
    },
    Joined {
        at: Timestamp,
        cluster: String,
        uid: String,
        machine: String,
        control_plane: bool,
    },
    /// The machine's data did not work: its node never registers.
    Failed {
        at: Timestamp,
        cluster: String,
        uid: String,
        machine: String,
        /// When its server or VM was made.
        made_at: Timestamp,
        cause: BootFailure,
        reason: String,
    },
}

/// Why a join failed, as the simulator knows it: what a check may blame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum BootFailure {
    /// The data itself is wrong (or names another cluster, endpoint or CA): only what
    /// wrote it is to blame.
    Data,
    /// The token is not in the cluster, and no operator deleted it.
    TokenMissing,
    /// An operator deleted the token (`operator.deleteBootstrapToken`).
    TokenDeletedByOperator,
    /// The token ran out before the machine joined: nobody moved it on.
    TokenExpired,
    /// The API did not answer within kubeadm's discovery timeout.
    ApiUnreachable,
}

impl BootEvent {
    pub fn cluster(&self) -> &str {
        match self {
            BootEvent::Init { cluster, .. }
            | BootEvent::SplitInit { cluster, .. }
            | BootEvent::Joined { cluster, .. }
            | BootEvent::Failed { cluster, .. } => cluster,
        }
    }
}

/// A workload cluster a `kubeadm init` made.
#[derive(Clone, Debug)]
pub(crate) struct Made {
    uid: String,
    init_machine: String,
    /// `sha256:<hex>` of its CA's SubjectPublicKeyInfo.
    ca_hash: String,
    /// The CA the init data brought (certificate and key, PEM): the simulated API
    /// server's serving certificate is signed with it, and its clients verified
    /// against it.
    ca_cert_pem: String,
    ca_key_pem: String,
    /// `host:port`.
    endpoint: String,
}

/// The CA and endpoint of a workload cluster `kubeadm init` made, as its API server
/// holds them.
#[derive(Clone, PartialEq, Eq)]
pub struct WorkloadCa {
    /// `sha256:<hex>` of the CA's SubjectPublicKeyInfo.
    pub hash: String,
    pub cert_pem: String,
    pub key_pem: String,
    /// `host:port` (the init's `controlPlaneEndpoint`).
    pub endpoint: String,
}

impl std::fmt::Debug for WorkloadCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadCa")
            .field("hash", &self.hash)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
pub(crate) struct BootState {
    /// By cluster name.
    made: BTreeMap<String, Made>,
    /// Joins still trying to reach the API: machine id → when they began.
    discovering: BTreeMap<String, Timestamp>,
    events: std::collections::VecDeque<BootEvent>,
    /// `<cluster>/bootstrap-token-<id>` of each token an operator deleted.
    deleted_by_operator: std::collections::BTreeSet<String>,
    /// Events dropped from the front of `events` ([`BOOT_EVENTS_MAX`]).
    dropped: u64,
    /// Whether each KubeVirt VMI (by uid) boots kubeadm's data.
    kubeadm_vmis: BTreeMap<String, bool>,
}

/// What kubeadm would do with the data of machine `sid`.
enum Verdict {
    /// Not kubeadm's data: the kubelet registers as it always has.
    NotKubeadm,
    Register,
    /// The API does not answer yet: look again later.
    Retry,
    Never,
}

/// A machine whose kubelet is about to register: what kubeadm on it knows of itself.
pub(crate) struct Booting {
    /// Its key among the joins still trying: a Nova server's id, an OpenNebula VM's id,
    /// or a KubeVirt VMI's uid.
    pub(crate) key: String,
    pub(crate) name: String,
    pub(crate) tags: Vec<String>,
    /// When its machine was made: its server, its OpenNebula VM, or its KubeVirt VM (not
    /// the VMI, which KubeVirt makes again for the same VM).
    pub(crate) made_at: Timestamp,
    pub(crate) user_data: Option<String>,
    /// A KubeVirt VMI: its cluster's API is the guest's, not behind a load balancer or a
    /// VIP.
    pub(crate) kubevirt: bool,
}

/// Whether the kubelet of machine `sid` (a Nova server or an OpenNebula VM) registers
/// now, at `t`; `Err(retry_at)` when the join must try again later.
pub(crate) fn admit(st: &mut State, t: Timestamp, sid: &str) -> Result<bool, Timestamp> {
    let Some(host) = st.host(sid) else {
        return Ok(false);
    };
    let booting = Booting {
        key: sid.to_string(),
        name: host.name,
        tags: host.tags,
        made_at: made_at(st, sid).unwrap_or(t),
        user_data: user_data(st, sid),
        kubevirt: false,
    };
    admit_machine(st, t, &booting)
}

/// Whether the data of the VMI with uid `key` is kubeadm's, read once (a VMI's data
/// never changes): a kubeadm control-plane VMI serves its cluster's API only once it
/// ran init or joined.
pub(crate) fn boots_kubeadm(
    st: &mut State,
    key: &str,
    data: impl FnOnce(&State) -> Option<String>,
) -> bool {
    if let Some(known) = st.boot.kubeadm_vmis.get(key) {
        return *known;
    }
    let kubeadm = data(st).is_some_and(|d| read(&d).is_some());
    st.boot.kubeadm_vmis.insert(key.to_string(), kubeadm);
    kubeadm
}

/// Forgets what [`boots_kubeadm`] read of VMIs no longer in `live`.
pub(crate) fn forget_vmis(st: &mut State, live: &std::collections::BTreeSet<String>) {
    st.boot.kubeadm_vmis.retain(|uid, _| live.contains(uid));
}

/// [`admit`] for any machine, as its cloud describes it (a KubeVirt VMI's description
/// is the infra cluster's business).
pub(crate) fn admit_machine(
    st: &mut State,
    t: Timestamp,
    booting: &Booting,
) -> Result<bool, Timestamp> {
    match verdict(st, t, booting) {
        Verdict::NotKubeadm | Verdict::Register => Ok(true),
        Verdict::Never => Ok(false),
        Verdict::Retry => Err(t.plus_millis(DISCOVERY_RETRY_MS)),
    }
}

fn verdict(st: &mut State, t: Timestamp, booting: &Booting) -> Verdict {
    let Some(data) = booting.user_data.as_deref() else {
        return Verdict::NotKubeadm;
    };
    let Some(boot) = read(data) else {
        return Verdict::NotKubeadm;
    };
    let cluster = booting
        .tags
        .iter()
        .find_map(|t| t.strip_prefix(TAG_CLUSTER))
        .unwrap_or_default()
        .to_string();
    let uid = uid_of(&booting.tags).unwrap_or_default().to_string();
    let made_at = booting.made_at;
    let sid = booting.key.as_str();
    let fail = |st: &mut State, cause: BootFailure, reason: String| {
        st.boot.discovering.remove(sid);
        record(
            st,
            BootEvent::Failed {
                at: t,
                cluster: cluster.clone(),
                uid: uid.clone(),
                machine: booting.name.clone(),
                made_at,
                cause,
                reason,
            },
        );
        Verdict::Never
    };
    let boot = match boot {
        Ok(b) => b,
        Err(reason) => return fail(st, BootFailure::Data, reason),
    };
    if boot.node_name != booting.name {
        return fail(
            st,
            BootFailure::Data,
            format!(
                "nodeRegistration.name {:?} is not the machine's name",
                boot.node_name
            ),
        );
    }
    match boot.role {
        Role::Init {
            cluster_name,
            endpoint,
            ca,
        } => {
            if cluster_name != cluster {
                return fail(
                    st,
                    BootFailure::Data,
                    format!("clusterName {cluster_name:?} is not the machine's cluster"),
                );
            }
            init(st, t, &cluster, &uid, &booting.name, endpoint, ca)
        }
        Role::Join {
            endpoint,
            token,
            hashes,
            control_plane_ca,
        } => {
            let owner = Ownership {
                cluster: cluster.clone(),
                uid: uid.clone(),
            };
            match join(
                st,
                t,
                booting,
                &owner,
                &endpoint,
                &token,
                &hashes,
                control_plane_ca,
            ) {
                Ok(true) => {
                    st.boot.discovering.remove(sid);
                    record(
                        st,
                        BootEvent::Joined {
                            at: t,
                            cluster: cluster.clone(),
                            uid: uid.clone(),
                            machine: booting.name.clone(),
                            control_plane: boot.control_plane,
                        },
                    );
                    Verdict::Register
                }
                Ok(false) => Verdict::Retry,
                Err((cause, reason)) => fail(st, cause, reason),
            }
        }
    }
}

fn init(
    st: &mut State,
    t: Timestamp,
    cluster: &str,
    uid: &str,
    machine: &str,
    endpoint: String,
    ca: read::InitCa,
) -> Verdict {
    if let Some(made) = st.boot.made.get(cluster).cloned()
        && made.uid == uid
        && lives(st, cluster, uid)
    {
        record(
            st,
            BootEvent::SplitInit {
                at: t,
                cluster: cluster.to_string(),
                uid: uid.to_string(),
                machine: machine.to_string(),
                first: made.init_machine,
            },
        );
        return Verdict::Never;
    }
    let again = st.boot.made.get(cluster).is_some_and(|m| m.uid == uid);
    if again {
        crate::k8s::restart_guest(st, cluster, uid);
    }
    st.boot.made.insert(
        cluster.to_string(),
        Made {
            uid: uid.to_string(),
            init_machine: machine.to_string(),
            ca_hash: ca.hash,
            ca_cert_pem: ca.cert_pem,
            ca_key_pem: ca.key_pem,
            endpoint,
        },
    );
    record(
        st,
        BootEvent::Init {
            at: t,
            cluster: cluster.to_string(),
            uid: uid.to_string(),
            machine: machine.to_string(),
            again,
        },
    );
    Verdict::Register
}

/// Whether the cluster `cluster` made still has a machine that runs with its node.
fn lives(st: &State, cluster: &str, uid: &str) -> bool {
    crate::k8s::guest_lives(st, cluster, uid)
        || st.nodes.values().any(|n| {
            n.cluster.as_deref() == Some(cluster)
                && n.uid == uid
                && n.machine_gone_at.is_none()
                && n.node
                    .server_id
                    .as_deref()
                    .is_some_and(|sid| st.host_running(sid))
        })
}

/// `Ok(false)`: the API does not answer yet, and the join has time left.
#[allow(clippy::too_many_arguments)]
fn join(
    st: &mut State,
    t: Timestamp,
    booting: &Booting,
    owner: &Ownership,
    endpoint: &str,
    token: &str,
    hashes: &[String],
    control_plane_ca: Option<Option<String>>,
) -> Result<bool, (BootFailure, String)> {
    let data = |reason: String| (BootFailure::Data, reason);
    let since = *st.boot.discovering.entry(booting.key.clone()).or_insert(t);
    let made = st
        .boot
        .made
        .get(&owner.cluster)
        .filter(|m| m.uid == owner.uid)
        .cloned();
    let reachable = made.is_some()
        && if booting.kubevirt {
            crate::k8s::guest_api_up(st, &owner.cluster)
        } else {
            crate::kube::api_reachable(st, owner)
        };
    if !reachable {
        if t.since(since).as_millis() < DISCOVERY_TIMEOUT_MS {
            return Ok(false);
        }
        return Err((
            BootFailure::ApiUnreachable,
            match made {
                None => format!(
                    "no workload cluster answered at {endpoint} within kubeadm's discovery timeout: nothing ran kubeadm init"
                ),
                Some(_) => {
                    format!(
                        "the API at {endpoint} did not answer within kubeadm's discovery timeout"
                    )
                }
            },
        ));
    }
    let Some(made) = made else {
        return Err(data("no workload cluster".into()));
    };
    if endpoint != made.endpoint {
        return Err(data(format!(
            "apiServerEndpoint {endpoint:?} is not the cluster's endpoint {:?}",
            made.endpoint
        )));
    }
    let (id, secret) = token
        .split_once('.')
        .filter(|(id, secret)| id.len() == 6 && secret.len() == 16)
        .ok_or_else(|| data("the bootstrap token is not <id>.<secret>".to_string()))?;
    let found = st
        .kube
        .store(&owner.cluster)
        .and_then(|s| {
            s.get(
                crate::k8s::SECRET_KIND,
                "kube-system",
                &format!("bootstrap-token-{id}"),
            )
        })
        .cloned();
    let Some(found) = found else {
        let key = format!("{}/bootstrap-token-{id}", owner.cluster);
        if st.boot.deleted_by_operator.contains(&key) {
            return Err((
                BootFailure::TokenDeletedByOperator,
                format!(
                    "bootstrap token {id} was deleted by an operator before the machine joined"
                ),
            ));
        }
        return Err((
            BootFailure::TokenMissing,
            format!("bootstrap token {id} is not in the cluster (never made, or deleted)"),
        ));
    };
    let field = |key: &str| {
        found
            .pointer(&format!("/data/{key}"))
            .and_then(Value::as_str)
            .and_then(|b| B64.decode(b).ok())
            .and_then(|b| String::from_utf8(b).ok())
    };
    if field("token-secret").as_deref() != Some(secret) {
        return Err(data(format!(
            "bootstrap token {id}'s secret does not match"
        )));
    }
    if field("usage-bootstrap-authentication").as_deref() != Some("true") {
        return Err(data(format!(
            "bootstrap token {id} is not for authentication"
        )));
    }
    let expires = field("expiration")
        .as_deref()
        .and_then(crate::k8s::parse_rfc3339)
        .ok_or_else(|| {
            data(format!(
                "bootstrap token {id} has no expiration kubeadm reads"
            ))
        })?;
    if expires <= t {
        return Err((
            BootFailure::TokenExpired,
            format!("bootstrap token {id} expired before the machine joined"),
        ));
    }
    if !hashes.contains(&made.ca_hash) {
        return Err(data(format!(
            "no caCertHashes entry matches the cluster CA ({}): kubeadm refuses the API server",
            made.ca_hash
        )));
    }
    if let Some(ca) = control_plane_ca {
        match ca {
            Some(hash) if hash == made.ca_hash => {}
            Some(_) => {
                return Err(data(
                    "a control-plane join brought another cluster's CA".into(),
                ));
            }
            None => {
                return Err(data(
                    "a control-plane join brought no CA (ca.crt and ca.key)".into(),
                ));
            }
        }
    }
    Ok(true)
}

fn record(st: &mut State, e: BootEvent) {
    if st.boot.events.len() >= BOOT_EVENTS_MAX {
        st.boot.events.pop_front();
        st.boot.dropped += 1;
    }
    st.boot.events.push_back(e);
}

/// When machine `sid`'s server or VM was made.
fn made_at(st: &State, sid: &str) -> Option<Timestamp> {
    if let Some(s) = st.servers.get(sid) {
        return Some(s.server.created_at);
    }
    st.one.vm_by_key(sid).map(|v| Timestamp(v.stime * 1000))
}

/// The user data machine `sid` boots with: a Nova server's, or an OpenNebula VM's
/// CONTEXT `USER_DATA` (base64 when `USERDATA_ENCODING` says so).
fn user_data(st: &State, sid: &str) -> Option<String> {
    if let Some(s) = st.servers.get(sid) {
        return s.user_data.clone();
    }
    st.one.user_data(sid)
}

impl SimCloud {
    /// What became of the kubeadm bootstraps numbered `from` and later (the latest
    /// [`BOOT_EVENTS_MAX`]), in order: inits, split inits, joins and failures with why;
    /// and the number the next one will get. Not an API call.
    pub fn boot_events_since(&self, from: u64) -> (Vec<BootEvent>, u64) {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        crate::world::numbered_since(&st.boot.events, st.boot.dropped, from)
    }

    /// The CA and endpoint of workload cluster `cluster`, once a `kubeadm init` made
    /// it. Not an API call: what a test bed needs to serve its API over TLS.
    pub fn workload_ca(&self, cluster: &str) -> Option<WorkloadCa> {
        let st = self.lock();
        st.boot.made.get(cluster).map(|m| WorkloadCa {
            hash: m.ca_hash.clone(),
            cert_pem: m.ca_cert_pem.clone(),
            key_pem: m.ca_key_pem.clone(),
            endpoint: m.endpoint.clone(),
        })
    }

    /// The workload cluster whose `kubeadm init` put its API at `endpoint`
    /// (`host:port`, as the init's `controlPlaneEndpoint` names it).
    pub fn workload_at(&self, endpoint: &str) -> Option<String> {
        let st = self.lock();
        st.boot
            .made
            .iter()
            .find(|(_, m)| m.endpoint.eq_ignore_ascii_case(endpoint))
            .map(|(cluster, _)| cluster.clone())
    }
}
