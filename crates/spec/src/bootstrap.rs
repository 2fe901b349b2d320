//! `spec.bootstrap`: how a cluster's machines become its Kubernetes nodes.
//!
//! - `provider: kubeadm` (the default): flightdeck makes the cluster's PKI (three CAs
//!   and the service-account key pair), keeps it sealed at rest, and writes each
//!   machine's kubeadm init or join data itself; a set's `machine.userData` is then
//!   refused, since flightdeck's own data replaces it.
//! - `provider: none`: each machine boots its set's `machine.userData` as written; the
//!   user's cloud-init makes the cluster, and flightdeck reads its nodes through
//!   `spec.workload.kubeconfig`.
//!
//! The provider is fixed when the cluster is created: a cluster's CAs cannot change
//! under it. `none` was the default before kubeadm became it: a spec stored then has no
//! `bootstrap` at all, and is read as `none` ([`Bootstrap::stored_before_kubeadm`]),
//! so that a cluster made then keeps booting its own data.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `spec.bootstrap`. With `provider: kubeadm`, the rest says what a user of Cluster
/// API's kubeadm bootstrap provider adds to every machine's data, named as there
/// (`KubeadmConfigSpec`): commands before and after kubeadm, files, and extra
/// arguments for each component. Pod and service subnets come from
/// `spec.network.podCIDR` and `serviceSubnet` here (kubeadm's default, 10.96.0.0/12,
/// when unset).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Bootstrap {
    #[serde(default)]
    pub provider: BootstrapProvider,
    /// Shell lines run before `kubeadm init|join`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_kubeadm_commands: Vec<String>,
    /// Shell lines run after it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post_kubeadm_commands: Vec<String>,
    /// Files written on every machine, after kubeadm's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<BootstrapFile>,
    /// kubeadm's `networking.serviceSubnet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_subnet: Option<crate::Cidr>,
    /// kubeadm's `apiServer`: `extraArgs` and `certSANs`.
    #[serde(default, skip_serializing_if = "ApiServerArgs::is_empty")]
    pub api_server: ApiServerArgs,
    /// kubeadm's `controllerManager.extraArgs`.
    #[serde(default, skip_serializing_if = "ComponentArgs::is_empty")]
    pub controller_manager: ComponentArgs,
    /// kubeadm's `scheduler.extraArgs`.
    #[serde(default, skip_serializing_if = "ComponentArgs::is_empty")]
    pub scheduler: ComponentArgs,
    /// kubeadm's `nodeRegistration.kubeletExtraArgs`, on every machine.
    #[serde(default, skip_serializing_if = "ComponentArgs::is_empty")]
    pub kubelet: ComponentArgs,
}

/// A component's extra flags, without their leading dashes: `{v: "2"}` is `--v=2`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ComponentArgs {
    #[serde(default)]
    pub extra_args: BTreeMap<String, String>,
}

impl ComponentArgs {
    pub fn is_empty(&self) -> bool {
        self.extra_args.is_empty()
    }
}

/// kubeadm's `apiServer`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiServerArgs {
    #[serde(default)]
    pub extra_args: BTreeMap<String, String>,
    /// Extra names in the API server's certificate (the endpoint is always in it).
    #[serde(default, rename = "certSANs")]
    pub cert_sans: Vec<String>,
}

impl ApiServerArgs {
    pub fn is_empty(&self) -> bool {
        self.extra_args.is_empty() && self.cert_sans.is_empty()
    }
}

/// A file of `spec.bootstrap.files` (cloud-init's `write_files`).
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BootstrapFile {
    /// Absolute.
    pub path: String,
    /// Written as is; may be secret, so never printed.
    pub content: String,
    /// Octal, as cloud-init takes it: `"0644"` (the default).
    #[serde(default = "default_permissions")]
    pub permissions: String,
    /// `user:group` (`root:root`, the default).
    #[serde(default = "default_owner")]
    pub owner: String,
}

impl std::fmt::Debug for BootstrapFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapFile")
            .field("path", &self.path)
            .field("content", &format_args!("({} bytes)", self.content.len()))
            .field("permissions", &self.permissions)
            .field("owner", &self.owner)
            .finish()
    }
}

impl BootstrapFile {
    /// The mode `permissions` names.
    pub fn mode(&self) -> Option<u16> {
        let digits = self
            .permissions
            .strip_prefix('0')
            .unwrap_or(&self.permissions);
        (!digits.is_empty() && digits.len() <= 4)
            .then(|| u16::from_str_radix(digits, 8).ok())
            .flatten()
            .filter(|m| *m <= 0o7777)
    }
}

fn default_permissions() -> String {
    "0644".into()
}

fn default_owner() -> String {
    "root:root".into()
}

impl Bootstrap {
    pub fn is_default(&self) -> bool {
        *self == Bootstrap::default()
    }

    /// A stored cluster (the JSON of a [`crate::Cluster`]) as it is to be read: one
    /// stored before kubeadm became the default has no `spec.bootstrap`, and was made
    /// with `provider: none`, which is written into it. Since then every stored spec
    /// names its provider, so this changes nothing else. JSON that is not a cluster
    /// is left as it is (reading it fails as it would have).
    pub fn stored_before_kubeadm(mut cluster: serde_json::Value) -> serde_json::Value {
        if let Some(spec) = cluster.get_mut("spec").and_then(|s| s.as_object_mut())
            && !spec.contains_key("bootstrap")
        {
            spec.insert(
                "bootstrap".into(),
                serde_json::json!({"provider": BootstrapProvider::None}),
            );
        }
        cluster
    }

    /// flightdeck makes and keeps the cluster's PKI.
    pub fn kubeadm(&self) -> bool {
        self.provider == BootstrapProvider::Kubeadm
    }
}

/// `spec.bootstrap.provider`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BootstrapProvider {
    /// The user's `machine.userData`, as written.
    None,
    /// flightdeck's kubeadm bootstrap, with the cluster's PKI made and kept by it.
    #[default]
    Kubeadm,
}

impl std::fmt::Display for BootstrapProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BootstrapProvider::None => "none",
            BootstrapProvider::Kubeadm => "kubeadm",
        })
    }
}

/// Why a kubeadm cluster refuses a workload kubeconfig (both fields that give one).
const NO_KUBECONFIG: &str = "spec.bootstrap.provider is kubeadm (the default): flightdeck reaches the cluster with a certificate of its own from the cluster CA it makes, so a kubeconfig is not used (it is for a cluster that boots its own data: write `bootstrap: {provider: none}` in the spec)";

/// What a cluster with `provider: kubeadm` may not also have: each set's own
/// `machine.userData` (flightdeck's data replaces it). As (field path, problem).
pub(crate) fn problems(cluster: &crate::Cluster) -> Vec<(String, String)> {
    let spec = &cluster.spec;
    if !spec.bootstrap.kubeadm() {
        return Vec::new();
    }
    let refused = |field: String| {
        (
            field,
            "spec.bootstrap.provider is kubeadm (the default): flightdeck writes each machine's bootstrap data, so a set's own user data is refused (write `bootstrap: {provider: none}` in the spec to boot your own)".to_string(),
        )
    };
    let mut out = Vec::new();
    out.extend(field_problems(&spec.bootstrap));
    if spec.workload.is_some() {
        out.push(("spec.workload.kubeconfig".into(), NO_KUBECONFIG.to_string()));
    }
    if spec
        .provider
        .kubevirt
        .as_ref()
        .is_some_and(|k| k.workload_kubeconfig.is_some())
    {
        out.push((
            "spec.provider.kubevirt.workloadKubeconfig".into(),
            NO_KUBECONFIG.to_string(),
        ));
    }
    if spec.control_plane.machine.user_data.is_some() {
        out.push(refused("spec.controlPlane.machine.userData".into()));
    }
    for (i, pool) in spec.node_pools.iter().enumerate() {
        if pool.machine.user_data.is_some() {
            out.push(refused(format!("spec.nodePools[{i}].machine.userData")));
        }
    }
    out
}

/// The rules of the kubeadm fields one by one, as (field path, problem).
fn field_problems(b: &Bootstrap) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let field = |f: &str| format!("spec.bootstrap.{f}");
    for (i, file) in b.files.iter().enumerate() {
        let at = |f: &str| field(&format!("files[{i}].{f}"));
        if !file.path.starts_with('/') || file.path.contains('\0') {
            out.push((
                at("path"),
                format!("{:?} is not an absolute path", file.path),
            ));
        }
        if file.mode().is_none() {
            out.push((
                at("permissions"),
                format!(
                    "{:?} is not an octal mode such as \"0644\"",
                    file.permissions
                ),
            ));
        }
        let owner_ok = file.owner.split_once(':').is_some_and(|(u, g)| {
            !u.is_empty() && !g.is_empty() && !file.owner.contains(char::is_whitespace)
        });
        if !owner_ok {
            out.push((at("owner"), format!("{:?} is not user:group", file.owner)));
        }
    }
    let args = [
        ("apiServer.extraArgs", &b.api_server.extra_args),
        (
            "controllerManager.extraArgs",
            &b.controller_manager.extra_args,
        ),
        ("scheduler.extraArgs", &b.scheduler.extra_args),
        ("kubelet.extraArgs", &b.kubelet.extra_args),
    ];
    for (name, map) in args {
        for flag in map.keys() {
            let ok = !flag.is_empty()
                && !flag.starts_with('-')
                && flag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_');
            if !ok {
                out.push((
                    field(&format!("{name}.{flag}")),
                    "a flag is written without its leading dashes, in letters, digits, '-', '.' and '_'".to_string(),
                ));
            }
        }
    }
    for (i, line) in b
        .pre_kubeadm_commands
        .iter()
        .chain(&b.post_kubeadm_commands)
        .enumerate()
    {
        if line.trim().is_empty() {
            out.push((
                field(&format!("commands[{i}]")),
                "an empty command".to_string(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::{Document, load_documents};

    const EXAMPLE: &str = include_str!("../../../examples/openstack.yaml");

    fn with(extra: &str) -> String {
        EXAMPLE.replace("  provider:\n", &format!("{extra}  provider:\n"))
    }

    #[test]
    fn the_bootstrap_is_kubeadm_unless_none_is_asked_for_and_anything_else_is_refused() {
        let cluster = |text: &str| {
            let docs = load_documents(text, "example").expect("parses");
            let Some(Document::Cluster(c)) = docs.into_iter().next() else {
                panic!("a cluster");
            };
            c
        };
        assert!(cluster(EXAMPLE).spec.bootstrap.kubeadm());
        let none = cluster(&with("  bootstrap:\n    provider: none\n"));
        assert_eq!(none.spec.bootstrap.provider, super::BootstrapProvider::None);
        let e = load_documents(&with("  bootstrap:\n    provider: kubeadmm\n"), "bad")
            .expect_err("a misspelt provider")
            .to_string();
        assert!(
            e.contains("spec.bootstrap.provider") && e.contains("kubeadm"),
            "{e}"
        );
    }

    /// A spec stored before kubeadm became the default has no `bootstrap`, and was made
    /// with `none`: read back, it still is. Every spec stored since names its provider,
    /// so reading it back changes nothing.
    #[test]
    fn a_spec_stored_before_kubeadm_became_the_default_is_read_as_none_and_a_new_one_as_written() {
        let docs = load_documents(EXAMPLE, "example").expect("parses");
        let Some(Document::Cluster(c)) = docs.into_iter().next() else {
            panic!("a cluster");
        };
        let stored = serde_json::to_value(&c).expect("serializes");
        assert_eq!(
            stored["spec"]["bootstrap"]["provider"], "kubeadm",
            "{stored}"
        );
        let read: crate::Cluster =
            serde_json::from_value(super::Bootstrap::stored_before_kubeadm(stored.clone()))
                .expect("reads");
        assert_eq!(read, *c);
        let mut old = stored;
        old["spec"]
            .as_object_mut()
            .expect("a spec")
            .remove("bootstrap");
        let read: crate::Cluster =
            serde_json::from_value(super::Bootstrap::stored_before_kubeadm(old)).expect("reads");
        assert_eq!(read.spec.bootstrap.provider, super::BootstrapProvider::None);
        assert_eq!(
            super::Bootstrap::stored_before_kubeadm(serde_json::json!([1])),
            serde_json::json!([1])
        );
    }

    #[test]
    fn kubeadm_fields_refuse_a_bad_mode_owner_path_or_flag_naming_each() {
        let text = with(
            "  bootstrap:\n    provider: kubeadm\n    files:\n      - {path: etc/motd, content: hi, permissions: \"0899\", owner: root}\n    apiServer:\n      extraArgs: {\"--v\": \"2\"}\n",
        );
        let e = load_documents(&text, "k").expect_err("refused").to_string();
        for field in [
            "spec.bootstrap.files[0].path",
            "spec.bootstrap.files[0].permissions",
            "spec.bootstrap.files[0].owner",
            "spec.bootstrap.apiServer.extraArgs.--v",
        ] {
            assert!(e.contains(field), "{field}: {e}");
        }
        let good = with(
            "  bootstrap:\n    provider: kubeadm\n    preKubeadmCommands: [\"swapoff -a\"]\n    files:\n      - {path: /etc/motd, content: hi}\n    kubelet:\n      extraArgs: {max-pods: \"110\"}\n",
        );
        let docs = load_documents(&good, "k").expect("parses");
        let Some(Document::Cluster(c)) = docs.first() else {
            panic!("a cluster");
        };
        assert_eq!(c.spec.bootstrap.files[0].mode(), Some(0o644));
        assert_eq!(c.spec.bootstrap.kubelet.extra_args["max-pods"], "110");
    }

    /// A spec written for `none` (a kubeconfig to reach the cluster) and applied
    /// without naming its bootstrap now asks for kubeadm: refused, saying how to keep it.
    #[test]
    fn kubeadm_refuses_a_workload_kubeconfig_and_says_how_to_keep_ones_own_bootstrap() {
        let text = with("  workload: {kubeconfig: demo.kubeconfig}\n");
        let e = load_documents(&text, "k").expect_err("refused").to_string();
        assert!(
            e.contains("spec.workload.kubeconfig") && e.contains("bootstrap: {provider: none}"),
            "{e}"
        );
        let kept =
            with("  workload: {kubeconfig: demo.kubeconfig}\n  bootstrap: {provider: none}\n");
        load_documents(&kept, "k").expect("none with a kubeconfig");
    }

    #[test]
    fn kubeadm_refuses_a_sets_own_user_data_naming_the_field() {
        let text = with("  bootstrap:\n    provider: kubeadm\n").replace(
            "        flavor: m1.xlarge\n",
            "        flavor: m1.xlarge\n        userData: boot.yaml\n",
        );
        let e = load_documents(&text, "k").expect_err("refused").to_string();
        assert!(
            e.contains("spec.nodePools[0].machine.userData") && e.contains("provider: none"),
            "{e}"
        );
    }
}
