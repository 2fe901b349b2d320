//! kubeadm's configuration documents (`InitConfiguration`, `ClusterConfiguration`,
//! `JoinConfiguration`), typed, so that no misspelt field can be written: each field
//! is a struct field renamed to kubeadm's exact JSON name, and empty ones are left out.
//!
//! Two API versions are written, chosen by the Kubernetes version as Cluster API's
//! kubeadm bootstrap provider chooses (`KubeVersionToKubeadmAPIGroupVersion`):
//! `kubeadm.k8s.io/v1beta3` for 1.22 to 1.30, `kubeadm.k8s.io/v1beta4` for 1.31 and
//! later; older is refused. Each document is generic over its API version
//! ([`KubeadmApi`]: [`V1beta3`] or [`V1beta4`]), and the differences this module relies
//! on live in that trait, not in string edits:
//!
//! - `extraArgs` (apiServer, controllerManager, scheduler) and
//!   `nodeRegistration.kubeletExtraArgs`: a map of flag to value in v1beta3, a list of
//!   `{name, value}` in v1beta4 ([`KubeadmApi::ExtraArgs`]);
//! - `ClusterConfiguration.encryptionAlgorithm` exists in v1beta4 only: it is written
//!   there as `ECDSA-P256`, the algorithm of the CAs flightdeck makes (see [`crate::pki`]),
//!   so that kubeadm's leaf keys match them.
//!
//! Fields whose place changed between the versions are not written at all: the timeouts
//! (v1beta3's `apiServer.timeoutForControlPlane` and `discovery.timeout`, v1beta4's
//! `timeouts`), `dryRun`, `etcd`. A file of several documents ([`to_yaml`]) holds one
//! API version only: the type says so.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::{Serialize, Serializer};
use zeroize::{Zeroize, Zeroizing};

use crate::pki::Secret;

#[derive(Debug, thiserror::Error)]
pub enum KubeadmError {
    #[error(
        "kubernetes_version {value:?} is not v<major>.<minor>.<patch> (digits only, e.g. v1.31.0)"
    )]
    BadVersion { value: String },
    #[error(
        "kubernetes_version {version} is older than v1.22.0: the oldest kubeadm configuration API written here, v1beta3, came with kubeadm 1.22"
    )]
    UnsupportedVersion { version: KubernetesVersion },
    #[error("cannot write the kubeadm configuration as YAML: {message}")]
    Yaml { message: String },
}

/// A Kubernetes release, `v<major>.<minor>.<patch>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubernetesVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl KubernetesVersion {
    /// Reads `v1.31.0`: a `v`, then three dot-separated numbers without leading zeros;
    /// nothing else (no pre-release or build suffix).
    pub fn parse(text: &str) -> Result<KubernetesVersion, KubeadmError> {
        let bad = || KubeadmError::BadVersion {
            value: text.to_string(),
        };
        let numbers = text.strip_prefix('v').ok_or_else(bad)?;
        let mut parts = numbers.split('.').map(|part| {
            let digits = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            let leading_zero = part.len() > 1 && part.starts_with('0');
            if digits && !leading_zero {
                part.parse::<u32>().ok()
            } else {
                None
            }
        });
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(Some(major)), Some(Some(minor)), Some(Some(patch)), None) => {
                Ok(KubernetesVersion {
                    major,
                    minor,
                    patch,
                })
            }
            _ => Err(bad()),
        }
    }

    /// The kubeadm configuration API this release reads: v1beta3 from 1.22, v1beta4
    /// from 1.31 (and, as Cluster API assumes, every later release).
    pub fn api_version(self) -> Result<ApiVersion, KubeadmError> {
        let at = |major, minor| KubernetesVersion {
            major,
            minor,
            patch: 0,
        };
        if self < at(1, 22) {
            Err(KubeadmError::UnsupportedVersion { version: self })
        } else if self < at(1, 31) {
            Ok(ApiVersion::V1beta3)
        } else {
            Ok(ApiVersion::V1beta4)
        }
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Serialize for KubernetesVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A kubeadm configuration API version, as a value (the choice made at run time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiVersion {
    V1beta3,
    V1beta4,
}

impl ApiVersion {
    pub const fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1beta3 => "kubeadm.k8s.io/v1beta3",
            ApiVersion::V1beta4 => "kubeadm.k8s.io/v1beta4",
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::V1beta3 {}
    impl Sealed for super::V1beta4 {}
}

/// A kubeadm configuration API version, as a type: what its documents write
/// differently.
pub trait KubeadmApi: sealed::Sealed + Copy + fmt::Debug + 'static {
    const VERSION: ApiVersion;
    /// `ClusterConfiguration.encryptionAlgorithm`, where the version has the field.
    const ENCRYPTION_ALGORITHM: Option<EncryptionAlgorithm>;
    /// How `extraArgs` and `kubeletExtraArgs` are written.
    type ExtraArgs: Serialize + Clone + fmt::Debug + PartialEq;

    /// Flags (names without leading dashes) and their values, in this version's form.
    fn extra_args(args: &BTreeMap<String, String>) -> Self::ExtraArgs;
    fn extra_args_empty(args: &Self::ExtraArgs) -> bool;
}

/// `kubeadm.k8s.io/v1beta3` (kubeadm 1.22 to 1.30).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct V1beta3;

/// `kubeadm.k8s.io/v1beta4` (kubeadm 1.31 and later).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct V1beta4;

impl KubeadmApi for V1beta3 {
    const VERSION: ApiVersion = ApiVersion::V1beta3;
    const ENCRYPTION_ALGORITHM: Option<EncryptionAlgorithm> = None;
    /// `extraArgs: {flag: value}`.
    type ExtraArgs = BTreeMap<String, String>;

    fn extra_args(args: &BTreeMap<String, String>) -> Self::ExtraArgs {
        args.clone()
    }

    fn extra_args_empty(args: &Self::ExtraArgs) -> bool {
        args.is_empty()
    }
}

impl KubeadmApi for V1beta4 {
    const VERSION: ApiVersion = ApiVersion::V1beta4;
    const ENCRYPTION_ALGORITHM: Option<EncryptionAlgorithm> = Some(EncryptionAlgorithm::EcdsaP256);
    /// `extraArgs: [{name: flag, value: value}]`.
    type ExtraArgs = Vec<Arg>;

    fn extra_args(args: &BTreeMap<String, String>) -> Self::ExtraArgs {
        args.iter()
            .map(|(name, value)| Arg {
                name: name.clone(),
                value: value.clone(),
            })
            .collect()
    }

    fn extra_args_empty(args: &Self::ExtraArgs) -> bool {
        args.is_empty()
    }
}

/// One of v1beta4's extra arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Arg {
    pub name: String,
    pub value: String,
}

/// v1beta4's `encryptionAlgorithm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum EncryptionAlgorithm {
    #[serde(rename = "ECDSA-P256")]
    EcdsaP256,
    #[serde(rename = "RSA-2048")]
    Rsa2048,
}

/// `apiVersion`, written from the document's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ApiVersionField<A>(PhantomData<A>);

impl<A: KubeadmApi> Serialize for ApiVersionField<A> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(A::VERSION.as_str())
    }
}

/// `kind`, set by each document's constructor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
enum Kind {
    #[serde(rename = "InitConfiguration")]
    Init,
    #[serde(rename = "ClusterConfiguration")]
    Cluster,
    #[serde(rename = "JoinConfiguration")]
    Join,
}

/// What `kubeadm init` alone reads: this node's registration.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase", bound(serialize = ""))]
pub struct InitConfiguration<A: KubeadmApi> {
    api_version: ApiVersionField<A>,
    kind: Kind,
    /// Tokens `kubeadm init` makes; left out when empty (kubeadm then makes one of a
    /// day, unused by flightdeck, which makes its own).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bootstrap_tokens: Vec<BootstrapTokenEntry>,
    pub node_registration: NodeRegistration<A>,
    #[serde(rename = "localAPIEndpoint", skip_serializing_if = "Option::is_none")]
    pub local_api_endpoint: Option<ApiEndpoint>,
}

impl<A: KubeadmApi> InitConfiguration<A> {
    pub fn new(node_registration: NodeRegistration<A>) -> InitConfiguration<A> {
        InitConfiguration {
            api_version: ApiVersionField(PhantomData),
            kind: Kind::Init,
            bootstrap_tokens: Vec::new(),
            node_registration,
            local_api_endpoint: None,
        }
    }
}

/// One entry of `InitConfiguration.bootstrapTokens` (the same in both versions).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapTokenEntry {
    pub token: Secret,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A duration, e.g. `24h`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub usages: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// How a node registers (`nodeRegistration`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase", bound(serialize = ""))]
pub struct NodeRegistration<A: KubeadmApi> {
    /// The Node's name (and its kubelet certificate's common name).
    pub name: String,
    #[serde(skip_serializing_if = "A::extra_args_empty")]
    pub kubelet_extra_args: A::ExtraArgs,
    /// `None` leaves kubeadm's default (a control-plane taint on control-plane nodes);
    /// `Some(vec![])` writes `taints: []`, no taint at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<Taint>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Taint {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: TaintEffect,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

/// Where an API server instance on this node advertises itself and listens.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiEndpoint {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertise_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind_port: Option<u16>,
}

/// The cluster-wide settings `kubeadm init` stores in the `kubeadm-config` ConfigMap.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase", bound(serialize = ""))]
pub struct ClusterConfiguration<A: KubeadmApi> {
    api_version: ApiVersionField<A>,
    kind: Kind,
    pub kubernetes_version: KubernetesVersion,
    pub cluster_name: String,
    /// `host:port` (an IPv6 host in brackets).
    pub control_plane_endpoint: String,
    #[serde(skip_serializing_if = "Networking::is_empty")]
    pub networking: Networking,
    #[serde(skip_serializing_if = "ApiServer::is_empty")]
    pub api_server: ApiServer<A>,
    #[serde(skip_serializing_if = "ControlPlaneComponent::is_empty")]
    pub controller_manager: ControlPlaneComponent<A>,
    #[serde(skip_serializing_if = "ControlPlaneComponent::is_empty")]
    pub scheduler: ControlPlaneComponent<A>,
    /// From the API version: only v1beta4 has the field.
    #[serde(skip_serializing_if = "Option::is_none")]
    encryption_algorithm: Option<EncryptionAlgorithm>,
}

impl<A: KubeadmApi> ClusterConfiguration<A> {
    /// A cluster's configuration with default networking and no extra arguments.
    pub fn new(
        kubernetes_version: KubernetesVersion,
        cluster_name: String,
        control_plane_endpoint: String,
    ) -> ClusterConfiguration<A> {
        ClusterConfiguration {
            api_version: ApiVersionField(PhantomData),
            kind: Kind::Cluster,
            kubernetes_version,
            cluster_name,
            control_plane_endpoint,
            networking: Networking::default(),
            api_server: ApiServer {
                component: ControlPlaneComponent::default(),
                cert_sans: Vec::new(),
            },
            controller_manager: ControlPlaneComponent::default(),
            scheduler: ControlPlaneComponent::default(),
            encryption_algorithm: A::ENCRYPTION_ALGORITHM,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Networking {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_subnet: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_subnet: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns_domain: Option<String>,
}

impl Networking {
    fn is_empty(&self) -> bool {
        self == &Networking::default()
    }
}

/// `apiServer`: a control-plane component with extra certificate names.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase", bound(serialize = ""))]
pub struct ApiServer<A: KubeadmApi> {
    #[serde(flatten)]
    pub component: ControlPlaneComponent<A>,
    #[serde(rename = "certSANs", skip_serializing_if = "Vec::is_empty")]
    pub cert_sans: Vec<String>,
}

impl<A: KubeadmApi> ApiServer<A> {
    fn is_empty(&self) -> bool {
        self.component.is_empty() && self.cert_sans.is_empty()
    }
}

/// `controllerManager`, `scheduler` (and the base of `apiServer`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase", bound(serialize = ""))]
pub struct ControlPlaneComponent<A: KubeadmApi> {
    #[serde(skip_serializing_if = "A::extra_args_empty")]
    pub extra_args: A::ExtraArgs,
}

impl<A: KubeadmApi> Default for ControlPlaneComponent<A> {
    fn default() -> Self {
        ControlPlaneComponent {
            extra_args: A::extra_args(&BTreeMap::new()),
        }
    }
}

impl<A: KubeadmApi> ControlPlaneComponent<A> {
    fn is_empty(&self) -> bool {
        A::extra_args_empty(&self.extra_args)
    }
}

/// What `kubeadm join` reads: how to find and trust the cluster, and, for a
/// control-plane machine, `controlPlane`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase", bound(serialize = ""))]
pub struct JoinConfiguration<A: KubeadmApi> {
    api_version: ApiVersionField<A>,
    kind: Kind,
    pub node_registration: NodeRegistration<A>,
    pub discovery: Discovery,
    /// Present (even empty, `{}`) for a control-plane join only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<JoinControlPlane>,
}

impl<A: KubeadmApi> JoinConfiguration<A> {
    pub fn new(
        node_registration: NodeRegistration<A>,
        discovery: Discovery,
        control_plane: Option<JoinControlPlane>,
    ) -> JoinConfiguration<A> {
        JoinConfiguration {
            api_version: ApiVersionField(PhantomData),
            kind: Kind::Join,
            node_registration,
            discovery,
            control_plane,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Discovery {
    pub bootstrap_token: BootstrapTokenDiscovery,
}

/// Token discovery: the token, where to fetch the cluster's CA, and the hash that CA
/// must have.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapTokenDiscovery {
    pub token: Secret,
    pub api_server_endpoint: String,
    /// `sha256:<hex>`; kubeadm refuses an empty list unless told to trust any CA.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ca_cert_hashes: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JoinControlPlane {
    #[serde(rename = "localAPIEndpoint", skip_serializing_if = "Option::is_none")]
    pub local_api_endpoint: Option<ApiEndpoint>,
}

/// One document of a kubeadm configuration file.
#[derive(Clone, Debug)]
pub enum Document<A: KubeadmApi> {
    Init(InitConfiguration<A>),
    Cluster(ClusterConfiguration<A>),
    Join(JoinConfiguration<A>),
}

impl<A: KubeadmApi> Serialize for Document<A> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Document::Init(d) => d.serialize(serializer),
            Document::Cluster(d) => d.serialize(serializer),
            Document::Join(d) => d.serialize(serializer),
        }
    }
}

/// `documents` as one YAML file, separated by `---` lines, as `kubeadm --config` reads
/// it. The text may hold a token: it is wiped when dropped.
pub fn to_yaml<A: KubeadmApi>(
    documents: &[Document<A>],
) -> Result<Zeroizing<String>, KubeadmError> {
    let yaml_error = |e: yaml_serde::Error| KubeadmError::Yaml {
        message: e.to_string(),
    };
    let mut buffer = Zeroizing::new(Vec::new());
    let mut serializer = yaml_serde::Serializer::new(&mut *buffer);
    for document in documents {
        document.serialize(&mut serializer).map_err(yaml_error)?;
    }
    serializer.into_inner().map_err(yaml_error)?;
    match String::from_utf8(std::mem::take(&mut *buffer)) {
        Ok(text) => Ok(Zeroizing::new(text)),
        Err(e) => {
            e.into_bytes().zeroize();
            Err(KubeadmError::Yaml {
                message: "the YAML written is not UTF-8".to_string(),
            })
        }
    }
}
