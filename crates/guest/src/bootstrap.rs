//! A machine's bootstrap data: the cloud-init user data that makes it a node of its
//! workload cluster, as Cluster API's kubeadm bootstrap provider writes it.
//!
//! - The machine that runs `kubeadm init`, and control-plane machines that join, get
//!   the cluster's CAs and service-account key pair under `/etc/kubernetes/pki` (keys
//!   `0600`, certificates `0644`): kubeadm makes every other certificate from them.
//!   Workers get no CA material: `kubeadm join` fetches the CA certificate itself and
//!   checks it against the discovery hash.
//! - The kubeadm configuration goes to [`KUBEADM_CONFIG_PATH`] (`0600`: a join's holds
//!   the token), in the kubeadm API version the Kubernetes version reads
//!   ([`crate::kubeadm`]); then the user's files.
//! - `runcmd`: the user's commands before, `kubeadm init|join --config`, the user's
//!   commands after.
//!
//! Every input is checked before anything is written, and a refusal names the field
//! and the value (never a secret: extra arguments are named by flag, tokens not at all).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv6Addr};

use crate::cloudinit::{CloudConfig, CloudInitError, Command, Permissions, ROOT_OWNER, WriteFile};
use crate::kubeadm::{
    self, ApiVersion, BootstrapTokenDiscovery, ClusterConfiguration, Discovery, Document,
    InitConfiguration, JoinConfiguration, JoinControlPlane, KubeadmApi, KubeadmError,
    KubernetesVersion, Networking, NodeRegistration, V1beta3, V1beta4,
};
use crate::pki::{ClusterPki, PkiError, Secret};
use crate::token::BootstrapToken;

/// Where the kubeadm configuration is written, and what `kubeadm --config` reads.
pub const KUBEADM_CONFIG_PATH: &str = "/run/kubeadm/kubeadm.yaml";

/// Where kubeadm looks for the cluster's PKI.
const PKI_DIR: &str = "/etc/kubernetes/pki";

/// The PKI's files under [`PKI_DIR`], in the order they are written.
const PKI_FILES: [&str; 8] = [
    "ca.crt",
    "ca.key",
    "etcd/ca.crt",
    "etcd/ca.key",
    "front-proxy-ca.crt",
    "front-proxy-ca.key",
    "sa.pub",
    "sa.key",
];

/// What every machine of a cluster is bootstrapped with.
#[derive(Clone, Debug)]
pub struct ClusterBootstrap {
    /// The cluster's name (kubeadm's `clusterName`), a DNS-1123 subdomain.
    pub cluster: String,
    /// `v<major>.<minor>.<patch>`, 1.22 or later, e.g. `v1.31.0`.
    pub kubernetes_version: String,
    /// The control-plane endpoint every machine reaches the API through: an IP address
    /// or a DNS-1123 subdomain (an IPv6 address without brackets).
    pub endpoint_host: String,
    pub endpoint_port: u16,
    /// A CIDR, or an IPv4 and an IPv6 one separated by a comma (dual stack).
    pub pod_subnet: Option<String>,
    pub service_subnet: Option<String>,
    /// Flags (without leading dashes) and values for each component.
    pub api_server_extra_args: BTreeMap<String, String>,
    pub controller_manager_extra_args: BTreeMap<String, String>,
    pub scheduler_extra_args: BTreeMap<String, String>,
    pub kubelet_extra_args: BTreeMap<String, String>,
    /// Shell lines run before kubeadm, then after it.
    pub pre_kubeadm_commands: Vec<String>,
    pub post_kubeadm_commands: Vec<String>,
    /// The user's own files, written after the bootstrap's.
    pub files: Vec<File>,
    /// Extra names for the API server's certificate (IP addresses or DNS names, a
    /// leading `*.` allowed); the endpoint host is always in it (kubeadm adds it).
    pub cert_sans: Vec<String>,
}

/// A user's file: written as is, with its mode and owner.
#[derive(Clone, Debug)]
pub struct File {
    /// Absolute.
    pub path: String,
    /// May be secret: never printed.
    pub content: Secret,
    pub permissions: Permissions,
    /// `user:group`, e.g. `root:root`.
    pub owner: String,
}

/// What the machine is to its cluster.
#[derive(Clone, Copy, Debug)]
pub enum Role<'a> {
    /// The first control-plane machine: `kubeadm init` with the cluster's PKI.
    Init { pki: &'a ClusterPki },
    /// Another control-plane machine: `kubeadm join` with the cluster's PKI.
    JoinControlPlane {
        pki: &'a ClusterPki,
        token: &'a BootstrapToken,
        /// `sha256:<hex>` of the cluster CA's public key ([`ClusterPki::discovery_hash`]).
        ca_cert_hash: &'a str,
    },
    /// A worker: `kubeadm join`, no PKI.
    JoinWorker {
        token: &'a BootstrapToken,
        ca_cert_hash: &'a str,
    },
}

impl<'a> Role<'a> {
    fn pki(self) -> Option<&'a ClusterPki> {
        match self {
            Role::Init { pki } | Role::JoinControlPlane { pki, .. } => Some(pki),
            Role::JoinWorker { .. } => None,
        }
    }

    fn kubeadm_command(self) -> String {
        let verb = match self {
            Role::Init { .. } => "init",
            Role::JoinControlPlane { .. } | Role::JoinWorker { .. } => "join",
        };
        format!("kubeadm {verb} --config {KUBEADM_CONFIG_PATH}")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("{field} {value:?} is refused: {reason}")]
    Invalid {
        field: String,
        value: String,
        reason: &'static str,
    },
    #[error(transparent)]
    Kubeadm(#[from] KubeadmError),
    #[error(transparent)]
    CloudInit(#[from] CloudInitError),
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error(
        "the PKI given is cluster {pki_cluster:?}'s, not cluster {cluster:?}'s: a machine gets its own cluster's CAs only"
    )]
    ForeignPki {
        cluster: String,
        pki_cluster: String,
    },
    #[error(
        "ca_cert_hash {value:?} is not the hash of cluster {cluster:?}'s CA: the joining machine would refuse its API server"
    )]
    HashMismatch { cluster: String, value: String },
}

fn invalid(field: impl Into<String>, value: &str, reason: &'static str) -> BootstrapError {
    BootstrapError::Invalid {
        field: field.into(),
        value: value.to_string(),
        reason,
    }
}

/// The user data of `machine_name` in `cluster`, as `role`: a `#cloud-config`
/// document. It holds keys (control-plane roles) and tokens (joins), hence a [`Secret`].
pub fn render(
    cluster: &ClusterBootstrap,
    machine_name: &str,
    role: Role<'_>,
) -> Result<Secret, BootstrapError> {
    let version = validate(cluster, machine_name, role)?;
    let mut kubeadm_yaml = match version.api_version()? {
        ApiVersion::V1beta3 => kubeadm_file::<V1beta3>(cluster, version, machine_name, role)?,
        ApiVersion::V1beta4 => kubeadm_file::<V1beta4>(cluster, version, machine_name, role)?,
    };
    let mut write_files = role.pki().map(pki_files).unwrap_or_default();
    write_files.push(WriteFile {
        path: KUBEADM_CONFIG_PATH.to_string(),
        content: Secret::new(std::mem::take(&mut *kubeadm_yaml)),
        permissions: Permissions::PRIVATE,
        owner: ROOT_OWNER.to_string(),
        encoding: None,
    });
    write_files.extend(cluster.files.iter().map(|file| WriteFile {
        path: file.path.clone(),
        content: file.content.clone(),
        permissions: file.permissions,
        owner: file.owner.clone(),
        encoding: None,
    }));
    let shell = |line: &String| Command::Shell(line.clone());
    let runcmd = (cluster.pre_kubeadm_commands.iter().map(shell))
        .chain([Command::Shell(role.kubeadm_command())])
        .chain(cluster.post_kubeadm_commands.iter().map(shell))
        .collect();
    Ok(CloudConfig {
        write_files,
        runcmd,
    }
    .render()?)
}

/// The kubeadm configuration file of `role`, in API version `A`: `InitConfiguration`
/// and `ClusterConfiguration` for `kubeadm init`, `JoinConfiguration` for a join (the
/// cluster's configuration then comes from the cluster).
fn kubeadm_file<A: KubeadmApi>(
    cluster: &ClusterBootstrap,
    version: KubernetesVersion,
    machine_name: &str,
    role: Role<'_>,
) -> Result<zeroize::Zeroizing<String>, KubeadmError> {
    let node_registration = NodeRegistration::<A> {
        name: machine_name.to_string(),
        kubelet_extra_args: A::extra_args(&cluster.kubelet_extra_args),
        taints: None,
    };
    let endpoint = endpoint(&cluster.endpoint_host, cluster.endpoint_port);
    let discovery = |token: &BootstrapToken, ca_cert_hash: &str| Discovery {
        bootstrap_token: BootstrapTokenDiscovery {
            token: token.token(),
            api_server_endpoint: endpoint.clone(),
            ca_cert_hashes: vec![ca_cert_hash.to_string()],
        },
    };
    let documents = match role {
        Role::Init { .. } => {
            let mut config =
                ClusterConfiguration::<A>::new(version, cluster.cluster.clone(), endpoint.clone());
            config.networking = Networking {
                pod_subnet: cluster.pod_subnet.clone(),
                service_subnet: cluster.service_subnet.clone(),
                dns_domain: None,
            };
            config.api_server.component.extra_args = A::extra_args(&cluster.api_server_extra_args);
            config.api_server.cert_sans = cluster.cert_sans.clone();
            config.controller_manager.extra_args =
                A::extra_args(&cluster.controller_manager_extra_args);
            config.scheduler.extra_args = A::extra_args(&cluster.scheduler_extra_args);
            vec![
                Document::Init(InitConfiguration::new(node_registration)),
                Document::Cluster(config),
            ]
        }
        Role::JoinControlPlane {
            token,
            ca_cert_hash,
            ..
        } => vec![Document::Join(JoinConfiguration::new(
            node_registration,
            discovery(token, ca_cert_hash),
            Some(JoinControlPlane::default()),
        ))],
        Role::JoinWorker {
            token,
            ca_cert_hash,
        } => vec![Document::Join(JoinConfiguration::new(
            node_registration,
            discovery(token, ca_cert_hash),
            None,
        ))],
    };
    kubeadm::to_yaml(&documents)
}

/// The PKI as files under [`PKI_DIR`], in [`PKI_FILES`]' order.
fn pki_files(pki: &ClusterPki) -> Vec<WriteFile> {
    let contents = [
        (
            Secret::new(pki.cluster_ca.cert_pem.clone()),
            Permissions::PUBLIC,
        ),
        (pki.cluster_ca.key_pem.clone(), Permissions::PRIVATE),
        (
            Secret::new(pki.etcd_ca.cert_pem.clone()),
            Permissions::PUBLIC,
        ),
        (pki.etcd_ca.key_pem.clone(), Permissions::PRIVATE),
        (
            Secret::new(pki.front_proxy_ca.cert_pem.clone()),
            Permissions::PUBLIC,
        ),
        (pki.front_proxy_ca.key_pem.clone(), Permissions::PRIVATE),
        (
            Secret::new(pki.service_account_pub.clone()),
            Permissions::PUBLIC,
        ),
        (pki.service_account_key.clone(), Permissions::PRIVATE),
    ];
    PKI_FILES
        .iter()
        .zip(contents)
        .map(|(name, (content, permissions))| WriteFile {
            path: format!("{PKI_DIR}/{name}"),
            content,
            permissions,
            owner: ROOT_OWNER.to_string(),
            encoding: None,
        })
        .collect()
}

/// `host:port`, an IPv6 host in brackets.
fn endpoint(host: &str, port: u16) -> String {
    if host.parse::<Ipv6Addr>().is_ok() {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Checks every input; answers the Kubernetes version read.
fn validate(
    cluster: &ClusterBootstrap,
    machine_name: &str,
    role: Role<'_>,
) -> Result<KubernetesVersion, BootstrapError> {
    if !is_dns_subdomain(machine_name) {
        return Err(invalid("machine_name", machine_name, SUBDOMAIN));
    }
    if !is_dns_subdomain(&cluster.cluster) {
        return Err(invalid("cluster", &cluster.cluster, SUBDOMAIN));
    }
    let version = KubernetesVersion::parse(&cluster.kubernetes_version)?;
    if !is_host(&cluster.endpoint_host) {
        return Err(invalid(
            "endpoint_host",
            &cluster.endpoint_host,
            "an endpoint is an IP address (IPv6 without brackets) or a DNS-1123 subdomain",
        ));
    }
    if cluster.endpoint_port == 0 {
        return Err(invalid("endpoint_port", "0", "a port is 1 to 65535"));
    }
    for (field, subnet) in [
        ("pod_subnet", &cluster.pod_subnet),
        ("service_subnet", &cluster.service_subnet),
    ] {
        if let Some(subnet) = subnet.as_deref().filter(|s| !is_cidrs(s)) {
            return Err(invalid(
                field,
                subnet,
                "a subnet is a CIDR, or an IPv4 and an IPv6 CIDR separated by a comma",
            ));
        }
    }
    for (field, args) in [
        ("api_server_extra_args", &cluster.api_server_extra_args),
        (
            "controller_manager_extra_args",
            &cluster.controller_manager_extra_args,
        ),
        ("scheduler_extra_args", &cluster.scheduler_extra_args),
        ("kubelet_extra_args", &cluster.kubelet_extra_args),
    ] {
        if let Some(name) = args.keys().find(|name| !is_flag_name(name)) {
            return Err(invalid(
                field,
                name,
                "an extra argument is named by its flag without leading dashes, with no '=' or space",
            ));
        }
    }
    if let Some(san) = cluster.cert_sans.iter().find(|san| !is_cert_san(san)) {
        return Err(invalid(
            "cert_sans",
            san,
            "a certificate name is an IP address or a DNS-1123 subdomain (a leading '*.' allowed)",
        ));
    }
    validate_files(&cluster.files)?;
    validate_role(cluster, role)?;
    Ok(version)
}

const SUBDOMAIN: &str = "a name is a DNS-1123 subdomain: at most 253 characters of lowercase letters, digits, '-' and '.', each dot-separated label starting and ending with a letter or digit";

fn validate_files(files: &[File]) -> Result<(), BootstrapError> {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (i, file) in files.iter().enumerate() {
        let path = file.path.as_str();
        let field = || format!("files[{i}].path");
        if !path.starts_with('/') || path.contains(['\0', '\n', '\r']) {
            return Err(invalid(
                field(),
                path,
                "a file's path is absolute, on one line",
            ));
        }
        let pki_path = path
            .strip_prefix(PKI_DIR)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|name| PKI_FILES.contains(&name));
        if path == KUBEADM_CONFIG_PATH || pki_path {
            return Err(invalid(
                field(),
                path,
                "the bootstrap writes this file itself",
            ));
        }
        if !seen.insert(path) {
            return Err(invalid(field(), path, "another file has this path"));
        }
        if file.owner.is_empty() || file.owner.contains(char::is_whitespace) {
            return Err(invalid(
                format!("files[{i}].owner"),
                &file.owner,
                "an owner is user:group, without spaces",
            ));
        }
    }
    Ok(())
}

/// The PKI is the cluster's own, and the discovery hash is well formed (and, where
/// the PKI is at hand, its CA's).
fn validate_role(cluster: &ClusterBootstrap, role: Role<'_>) -> Result<(), BootstrapError> {
    if let Some(pki) = role.pki().filter(|pki| pki.cluster != cluster.cluster) {
        return Err(BootstrapError::ForeignPki {
            cluster: cluster.cluster.clone(),
            pki_cluster: pki.cluster.clone(),
        });
    }
    let ca_cert_hash = match role {
        Role::Init { .. } => return Ok(()),
        Role::JoinControlPlane { ca_cert_hash, .. } | Role::JoinWorker { ca_cert_hash, .. } => {
            ca_cert_hash
        }
    };
    let hex = ca_cert_hash.strip_prefix("sha256:").unwrap_or_default();
    let well_formed = hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !well_formed {
        return Err(invalid(
            "ca_cert_hash",
            ca_cert_hash,
            "a discovery hash is sha256: and 64 lowercase hex digits",
        ));
    }
    if let Some(pki) = role.pki()
        && pki.discovery_hash()? != ca_cert_hash
    {
        return Err(BootstrapError::HashMismatch {
            cluster: cluster.cluster.clone(),
            value: ca_cert_hash.to_string(),
        });
    }
    Ok(())
}

/// Kubernetes' `IsDNS1123Subdomain`.
fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

fn is_host(host: &str) -> bool {
    host.parse::<IpAddr>().is_ok() || is_dns_subdomain(host)
}

fn is_cert_san(san: &str) -> bool {
    is_host(san) || san.strip_prefix("*.").is_some_and(is_dns_subdomain)
}

fn is_flag_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && !name.contains(|c: char| c == '=' || c.is_whitespace() || c.is_control())
}

/// One CIDR, or two (dual stack) separated by a comma.
fn is_cidrs(text: &str) -> bool {
    let parts: Vec<&str> = text.split(',').collect();
    parts.len() <= 2
        && parts.iter().all(|part| {
            let Some((address, prefix)) = part.split_once('/') else {
                return false;
            };
            let bits = match address.parse::<IpAddr>() {
                Ok(IpAddr::V4(_)) => 32,
                Ok(IpAddr::V6(_)) => 128,
                Err(_) => return false,
            };
            prefix.bytes().all(|b| b.is_ascii_digit())
                && prefix.parse::<u8>().is_ok_and(|p| p <= bits)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_subdomains() {
        for good in ["cp-0", "demo.workers.0", "a", "0a"] {
            assert!(is_dns_subdomain(good), "{good}");
        }
        let long = "a".repeat(254);
        for bad in [
            "",
            "CP-0",
            "-cp",
            "cp-",
            "cp..0",
            "cp_0",
            "cp 0",
            ".cp",
            long.as_str(),
        ] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn subnets_are_one_cidr_or_a_dual_stack_pair() {
        for good in ["10.244.0.0/16", "fd00::/48", "10.244.0.0/16,fd00::/48"] {
            assert!(is_cidrs(good), "{good}");
        }
        for bad in [
            "10.244.0.0",
            "10.244.0.0/33",
            "fd00::/129",
            "a/8",
            "10.0.0.0/8,10.1.0.0/16,fd00::/8",
            "10.0.0.0/+8",
            "",
        ] {
            assert!(!is_cidrs(bad), "{bad}");
        }
    }

    #[test]
    fn an_ipv6_endpoint_is_written_in_brackets() {
        assert_eq!(endpoint("fd00::1", 6443), "[fd00::1]:6443");
        assert_eq!(endpoint("10.0.0.1", 6443), "10.0.0.1:6443");
        assert_eq!(endpoint("api.demo.example", 443), "api.demo.example:443");
    }

    #[test]
    fn flag_names_have_no_dashes_in_front_nor_a_value() {
        assert!(is_flag_name("audit-log-path"));
        for bad in ["", "--v", "-v", "v=2", "audit log"] {
            assert!(!is_flag_name(bad), "{bad}");
        }
    }
}
