//! `kubevirt.io/v1` VirtualMachine and VirtualMachineInstance, typed by hand with only the
//! fields flightdeck reads or writes (no maintained typed crate matches kube 5).
//!
//! Reading is lenient: every field may be missing and unknown fields are ignored, so an
//! odd answer becomes an odd [`flightdeck_cloud::Server`], never a panic. Objects read
//! here are never written back (a VM is only ever created whole or deleted), so the
//! fields this crate does not model are never lost.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

/// `kubevirt.io`.
pub const GROUP: &str = "kubevirt.io";
/// `v1`.
pub const VERSION: &str = "v1";
/// `kubevirt.io/v1`.
pub const API_VERSION: &str = "kubevirt.io/v1";
/// The name of the one disk (and its volume) of flightdeck's VMs.
pub const ROOT_DISK: &str = "rootdisk";

/// A `kubevirt.io/v1` VirtualMachine. Serializes with its `apiVersion` and `kind`, which
/// the API server needs on a create.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct VirtualMachine {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: VirtualMachineSpec,
    #[serde(default)]
    pub status: Option<VirtualMachineStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualMachineSpec {
    /// `Always`, `RerunOnFailure`, `Manual`, `Halted`, `Once`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_strategy: Option<String>,
    /// Only for reading old VMs: `running: true` is `runStrategy: Always`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instancetype: Option<InstancetypeMatcher>,
    pub template: VirtualMachineInstanceTemplate,
}

/// `spec.instancetype`. `kind` is left out when creating: KubeVirt then takes a
/// `VirtualMachineClusterInstancetype`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstancetypeMatcher {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualMachineInstanceTemplate {
    pub metadata: TemplateMeta,
    pub spec: VirtualMachineInstanceSpec,
}

/// The template's metadata: only labels.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TemplateMeta {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// A VMI's spec (also the VM template's).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualMachineInstanceSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<String>,
    /// How long the guest gets to shut down when the VMI is deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    pub domain: DomainSpec,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DomainSpec {
    pub devices: Devices,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Devices {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<Disk>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Disk {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskTarget>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DiskTarget {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Volume {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_disk: Option<ContainerDisk>,
    /// Cloud-init's NoCloud datasource (`userDataBase64`, or a Secret by `secretRef`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_init_no_cloud: Option<CloudInitNoCloud>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CloudInitNoCloud {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_data_base64: Option<String>,
    /// A Secret in the VM's namespace whose `userdata` key holds the user data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SecretRef {
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerDisk {
    pub image: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualMachineStatus {
    /// `Stopped`, `Provisioning`, `Starting`, `Running`, `ErrorUnschedulable`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub printable_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A KubeVirt condition (`Ready`, `Failure`, `Paused`, ...).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A `kubevirt.io/v1` VirtualMachineInstance, read only.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct VirtualMachineInstance {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: VirtualMachineInstanceSpec,
    #[serde(default)]
    pub status: Option<VirtualMachineInstanceStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualMachineInstanceStatus {
    /// `Pending`, `Scheduling`, `Scheduled`, `Running`, `Succeeded`, `Failed`, `Unknown`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Set by KubeVirt when the **infra** node is drained and the strategy is External.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evacuation_node_name: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<VmiInterface>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VmiInterface {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
}

fn serialize_object<S: Serializer, Sp: Serialize, St: Serialize>(
    s: S,
    kind: &'static str,
    metadata: &ObjectMeta,
    spec: &Sp,
    status: Option<&St>,
) -> Result<S::Ok, S::Error> {
    let mut st = s.serialize_struct(kind, 5)?;
    st.serialize_field("apiVersion", API_VERSION)?;
    st.serialize_field("kind", kind)?;
    st.serialize_field("metadata", metadata)?;
    st.serialize_field("spec", spec)?;
    if let Some(status) = status {
        st.serialize_field("status", status)?;
    }
    st.end()
}

impl Serialize for VirtualMachine {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_object(
            s,
            "VirtualMachine",
            &self.metadata,
            &self.spec,
            self.status.as_ref(),
        )
    }
}

impl Serialize for VirtualMachineInstance {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_object(
            s,
            "VirtualMachineInstance",
            &self.metadata,
            &self.spec,
            self.status.as_ref(),
        )
    }
}

macro_rules! kubevirt_resource {
    ($ty:ty, $kind:literal, $plural:literal) => {
        impl Resource for $ty {
            type DynamicType = ();
            type Scope = NamespaceResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(GROUP)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(VERSION)
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(API_VERSION)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

kubevirt_resource!(VirtualMachine, "VirtualMachine", "virtualmachines");
kubevirt_resource!(
    VirtualMachineInstance,
    "VirtualMachineInstance",
    "virtualmachineinstances"
);

impl VirtualMachine {
    /// The run strategy, reading the deprecated `running` flag of old VMs too.
    pub fn run_strategy(&self) -> Option<&str> {
        match (&self.spec.run_strategy, self.spec.running) {
            (Some(s), _) => Some(s.as_str()),
            (None, Some(true)) => Some("Always"),
            (None, Some(false)) => Some("Halted"),
            (None, None) => None,
        }
    }

    /// Whether KubeVirt keeps a VMI of this VM running (and so starts a new one when
    /// the current one goes).
    pub fn wants_running(&self) -> bool {
        matches!(self.run_strategy(), Some("Always" | "RerunOnFailure"))
    }

    /// The image of the `rootdisk` container disk (else of the first container disk).
    pub fn image(&self) -> Option<&str> {
        let volumes = &self.spec.template.spec.volumes;
        volumes
            .iter()
            .find(|v| v.name == ROOT_DISK)
            .and_then(|v| v.container_disk.as_ref())
            .or_else(|| volumes.iter().find_map(|v| v.container_disk.as_ref()))
            .map(|c| c.image.as_str())
    }

    pub fn instancetype(&self) -> Option<&str> {
        self.spec.instancetype.as_ref().map(|i| i.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vm_serializes_with_its_api_version_and_kind() {
        let vm = VirtualMachine::default();
        let v = serde_json::to_value(&vm).expect("serializes");
        assert_eq!(v["apiVersion"], "kubevirt.io/v1");
        assert_eq!(v["kind"], "VirtualMachine");
        assert!(v.get("status").is_none());
    }

    #[test]
    fn resource_paths_are_namespaced_kubevirt_v1() {
        assert_eq!(
            VirtualMachine::url_path(&(), Some("infra")),
            "/apis/kubevirt.io/v1/namespaces/infra/virtualmachines"
        );
        assert_eq!(
            VirtualMachineInstance::url_path(&(), Some("infra")),
            "/apis/kubevirt.io/v1/namespaces/infra/virtualmachineinstances"
        );
    }

    #[test]
    fn odd_vmis_deserialize_without_panicking() {
        for body in [
            r#"{}"#,
            r#"{"metadata":{"name":"a"},"status":{}}"#,
            r#"{"metadata":{"name":"a"},"spec":{"domain":{"devices":{"disks":[{"name":"x","cdrom":{}}]}}},"status":{"phase":"Running","interfaces":[{}],"extra":1}}"#,
        ] {
            let vmi: VirtualMachineInstance = serde_json::from_str(body).expect(body);
            let _ = vmi;
        }
    }

    #[test]
    fn the_deprecated_running_flag_reads_as_a_run_strategy() {
        let mut vm = VirtualMachine::default();
        vm.spec.running = Some(true);
        assert!(vm.wants_running());
        vm.spec.running = Some(false);
        assert_eq!(vm.run_strategy(), Some("Halted"));
        vm.spec.run_strategy = Some("RerunOnFailure".into());
        assert!(vm.wants_running());
    }
}
