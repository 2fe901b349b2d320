//! VirtualMachines as flightdeck's servers, and the VirtualMachine flightdeck creates.
//!
//! A server is a VM joined with its VMI (same name). Its status:
//!
//! | VM / VMI                                                      | status   | task_state |
//! |---------------------------------------------------------------|----------|------------|
//! | VMI `Running`                                                 | ACTIVE   |            |
//! | VMI `Pending`, `Scheduling`, `Scheduled` (or no phase yet)    | BUILD    |            |
//! | no VMI, or one ended or deleting, while runStrategy restarts it | BUILD  |            |
//! | VMI `Failed`                                                  | ERROR (fault: the condition's message) | |
//! | no VMI and runStrategy does not start one                     | the VM's printableStatus, verbatim (`Stopped`) | |
//! | VM deleting, or VMI deleting with no replacement coming       | as above | `deleting` |
//!
//! A VMI that is deleted while its VM still wants it running (F9 deletes the VMI of an
//! evacuated VM) is not a server going away: KubeVirt starts a new VMI for the same VM,
//! so the server is BUILD meanwhile.

pub use flightdeck_workload::timestamp_of;
use std::collections::BTreeMap;
use std::net::IpAddr;

use flightdeck_cloud::{
    EvictionStrategy, Server, ServerCreate, ServerStatus, VirtualMachineCreate, Vmi,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::labels::{LABEL_CONTROL_PLANE, is_control_plane, labels_of, tags_of};
use crate::objects::{
    Condition, ContainerDisk, Devices, Disk, DiskTarget, DomainSpec, InstancetypeMatcher,
    ROOT_DISK, TemplateMeta, VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceSpec,
    VirtualMachineInstanceTemplate, VirtualMachineSpec, Volume,
};

/// flightdeck's machines always run (KubeVirt restarts their VMI when it goes).
pub const RUN_STRATEGY: &str = "Always";

/// What flightdeck asks KubeVirt for, from a server request: the flavor is the
/// instancetype, the image the container disk, the tags the labels, and the machine
/// serves the control plane when its key starts with `cp-`. Nova's `network` and
/// `security_groups` have no KubeVirt counterpart (VMs join the pod network) and are
/// not used.
/// How long a guest gets to shut down (the kubelet to stop) when its VMI is deleted:
/// after a drain there is nothing left to lose, but a hard stop would still cut the node
/// off its cluster without a word.
pub const GUEST_SHUTDOWN_GRACE_SECONDS: i64 = 60;

pub fn vm_create_of(req: &ServerCreate) -> VirtualMachineCreate {
    VirtualMachineCreate {
        name: req.name.clone(),
        instancetype: req.flavor.clone(),
        image: req.image.clone(),
        eviction_strategy: req
            .eviction_strategy
            .as_deref()
            .map(EvictionStrategy::parse)
            .unwrap_or(EvictionStrategy::External),
        run_strategy: RUN_STRATEGY.to_string(),
        tags: req.tags.clone(),
        control_plane: is_control_plane(&req.tags),
        user_data: req.user_data.clone(),
    }
}

/// The volume and disk KubeVirt's cloud-init NoCloud datasource reads.
pub const CLOUD_INIT_DISK: &str = "cloudinitdisk";
pub use crate::userdata::INLINE_USER_DATA_MAX;

/// The VirtualMachine object for `req` in `namespace`. Fails (with the reason) on a tag
/// that has no label.
pub fn virtual_machine(
    req: &VirtualMachineCreate,
    namespace: &str,
) -> Result<VirtualMachine, String> {
    let labels = labels_of(&req.tags)?;
    let (disks, volumes) = disks_and_volumes(req)?;
    let mut template_labels = labels.clone();
    if req.control_plane {
        template_labels.insert(LABEL_CONTROL_PLANE.to_string(), "true".to_string());
    }
    Ok(VirtualMachine {
        metadata: ObjectMeta {
            name: Some(req.name.clone()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: VirtualMachineSpec {
            run_strategy: Some(req.run_strategy.clone()),
            running: None,
            instancetype: Some(InstancetypeMatcher {
                name: req.instancetype.clone(),
                kind: None,
            }),
            template: VirtualMachineInstanceTemplate {
                metadata: TemplateMeta {
                    labels: template_labels,
                },
                spec: VirtualMachineInstanceSpec {
                    eviction_strategy: Some(req.eviction_strategy.as_str().to_string()),
                    termination_grace_period_seconds: Some(GUEST_SHUTDOWN_GRACE_SECONDS),
                    domain: DomainSpec {
                        devices: Devices { disks },
                    },
                    volumes,
                },
            },
        },
        status: None,
    })
}

/// The root container disk, and the cloud-init disk when the machine has user data.
fn disks_and_volumes(req: &VirtualMachineCreate) -> Result<(Vec<Disk>, Vec<Volume>), String> {
    let virtio = || {
        Some(DiskTarget {
            bus: Some("virtio".to_string()),
        })
    };
    let mut disks = vec![Disk {
        name: ROOT_DISK.to_string(),
        disk: virtio(),
    }];
    let mut volumes = vec![Volume {
        name: ROOT_DISK.to_string(),
        container_disk: Some(ContainerDisk {
            image: req.image.clone(),
        }),
        cloud_init_no_cloud: None,
    }];
    if let Some(data) = &req.user_data {
        disks.push(Disk {
            name: CLOUD_INIT_DISK.to_string(),
            disk: virtio(),
        });
        volumes.push(Volume {
            name: CLOUD_INIT_DISK.to_string(),
            container_disk: None,
            cloud_init_no_cloud: Some(crate::userdata::cloud_init(&req.name, data)),
        });
    }
    Ok((disks, volumes))
}

fn labels(meta: &ObjectMeta) -> BTreeMap<String, String> {
    meta.labels.clone().unwrap_or_default()
}

/// The first interface's address, if KubeVirt reports one that parses.
fn address_of(vmi: &VirtualMachineInstance) -> Option<IpAddr> {
    let ip = vmi
        .status
        .as_ref()?
        .interfaces
        .first()?
        .ip_address
        .as_deref()?;
    // Some network bindings report a CIDR.
    ip.split('/').next()?.trim().parse().ok()
}

fn message_of(conditions: &[Condition]) -> Option<String> {
    conditions
        .iter()
        .filter(|c| c.type_ == "Failure" || c.status == "False")
        .find_map(|c| c.message.clone().filter(|m| !m.is_empty()))
}

/// Why a VMI failed: its conditions' message, else the VM's, else its printable status.
fn fault_of(vm: &VirtualMachine, vmi: &VirtualMachineInstance) -> String {
    let vmi_status = vmi.status.as_ref();
    vmi_status
        .and_then(|s| message_of(&s.conditions))
        .or_else(|| vm.status.as_ref().and_then(|s| message_of(&s.conditions)))
        .or_else(|| vm.status.as_ref().and_then(|s| s.printable_status.clone()))
        .unwrap_or_else(|| "the VirtualMachineInstance failed".to_string())
}

/// A VM and its VMI (if any) as a [`Server`], as the module's table says.
pub fn server_of(vm: &VirtualMachine, vmi: Option<&VirtualMachineInstance>) -> Server {
    let name = vm.metadata.name.clone().unwrap_or_default();
    let restarts = vm.wants_running();
    let vmi_deleting = vmi.is_some_and(|v| v.metadata.deletion_timestamp.is_some());
    let phase = vmi
        .and_then(|v| v.status.as_ref())
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    let mut fault = None;
    let status = match vmi {
        Some(vmi) if !vmi_deleting => match phase {
            "Running" => ServerStatus::Active,
            "" | "Pending" | "Scheduling" | "Scheduled" => ServerStatus::Build,
            "Failed" => {
                fault = Some(fault_of(vm, vmi));
                ServerStatus::Error
            }
            "Succeeded" if restarts => ServerStatus::Build,
            other => ServerStatus::Other(other.to_string()),
        },
        // No VMI, or one going away: a new one comes if the VM restarts it.
        _ if restarts => ServerStatus::Build,
        _ => ServerStatus::Other(
            vm.status
                .as_ref()
                .and_then(|s| s.printable_status.clone())
                .unwrap_or_else(|| "Stopped".to_string()),
        ),
    };
    let deleting = vm.metadata.deletion_timestamp.is_some() || (vmi_deleting && !restarts);
    Server {
        id: name.clone(),
        name,
        status,
        task_state: deleting.then(|| "deleting".to_string()),
        tags: tags_of(&labels(&vm.metadata)),
        security_groups: Vec::new(),
        address: vmi.and_then(address_of),
        image: vm.image().unwrap_or_default().to_string(),
        flavor: vm.instancetype().unwrap_or_default().to_string(),
        fault,
        created_at: timestamp_of(vm.metadata.creation_timestamp.as_ref()),
    }
}

/// A VMI as flightdeck's [`Vmi`].
pub fn vmi_of(vmi: &VirtualMachineInstance) -> Vmi {
    let status = vmi.status.clone().unwrap_or_default();
    let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
    Vmi {
        name: vmi.metadata.name.clone().unwrap_or_default(),
        uid: vmi.metadata.uid.clone().unwrap_or_default(),
        phase: status.phase.unwrap_or_default(),
        node: non_empty(status.node_name),
        eviction_strategy: vmi
            .spec
            .eviction_strategy
            .as_deref()
            .map(EvictionStrategy::parse),
        evacuation_node: non_empty(status.evacuation_node_name),
        deleting: vmi.metadata.deletion_timestamp.is_some(),
        tags: tags_of(&labels(&vmi.metadata)),
    }
}

#[cfg(test)]
mod tests {
    use flightdeck_cloud::{Ownership, Role};
    use serde_json::json;

    use super::*;

    fn req(machine: &str) -> ServerCreate {
        let owner = Ownership {
            cluster: "demo".into(),
            uid: "u1".into(),
        };
        ServerCreate {
            name: format!("demo-{machine}"),
            flavor: "u1.medium".into(),
            image: "quay.io/containerdisks/ubuntu:24.04".into(),
            network: "ignored".into(),
            security_groups: vec!["ignored".into()],
            tags: owner.tags(&Role::Machine(machine.into())),
            eviction_strategy: None,
            user_data: None,
        }
    }

    #[test]
    fn a_control_plane_vm_carries_labels_strategy_instancetype_and_disk() {
        let vm = virtual_machine(&vm_create_of(&req("cp-1")), "infra").expect("vm");
        let v = serde_json::to_value(&vm).expect("json");
        assert_eq!(
            v,
            json!({
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachine",
                "metadata": {
                    "name": "demo-cp-1",
                    "namespace": "infra",
                    "labels": {
                        "flightdeck.dev/cluster": "demo",
                        "flightdeck.dev/uid": "u1",
                        "flightdeck.dev/role": "machine",
                        "flightdeck.dev/machine": "cp-1",
                    },
                },
                "spec": {
                    "runStrategy": "Always",
                    "instancetype": {"name": "u1.medium"},
                    "template": {
                        "metadata": {"labels": {
                            "flightdeck.dev/cluster": "demo",
                            "flightdeck.dev/uid": "u1",
                            "flightdeck.dev/role": "machine",
                            "flightdeck.dev/machine": "cp-1",
                            "flightdeck.dev/control-plane": "true",
                        }},
                        "spec": {
                            "evictionStrategy": "External",
                            "terminationGracePeriodSeconds": 60,
                            "domain": {"devices": {"disks": [
                                {"name": "rootdisk", "disk": {"bus": "virtio"}}
                            ]}},
                            "volumes": [{
                                "name": "rootdisk",
                                "containerDisk": {"image": "quay.io/containerdisks/ubuntu:24.04"},
                            }],
                        },
                    },
                },
            })
        );
    }

    #[test]
    fn user_data_boots_the_vm_through_a_cloud_init_disk() {
        use base64::Engine;
        let mut r = req("cp-1");
        r.user_data = Some("#cloud-config\nhostname: demo-cp-1\n".into());
        let vm = virtual_machine(&vm_create_of(&r), "infra").expect("vm");
        let v = serde_json::to_value(&vm).expect("json");
        let spec = &v["spec"]["template"]["spec"];
        assert_eq!(
            spec["domain"]["devices"]["disks"][1]["name"],
            CLOUD_INIT_DISK
        );
        let volume = &spec["volumes"][1];
        assert_eq!(volume["name"], CLOUD_INIT_DISK);
        let encoded = volume["cloudInitNoCloud"]["userDataBase64"]
            .as_str()
            .expect("userDataBase64");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64");
        assert_eq!(decoded, b"#cloud-config\nhostname: demo-cp-1\n");
    }

    #[test]
    fn user_data_over_kubevirts_inline_limit_is_referenced_from_its_secret() {
        let mut r = req("cp-1");
        r.user_data = Some("x".repeat(INLINE_USER_DATA_MAX + 1));
        let vm = virtual_machine(&vm_create_of(&r), "infra").expect("vm");
        let v = serde_json::to_value(&vm).expect("json");
        let volume = &v["spec"]["template"]["spec"]["volumes"][1]["cloudInitNoCloud"];
        assert_eq!(
            volume["secretRef"]["name"], "demo-cp-1-userdata",
            "{volume}"
        );
        assert!(volume.get("userDataBase64").is_none(), "{volume}");
    }

    #[test]
    fn a_worker_vm_is_not_selected_by_the_endpoint() {
        let vm = virtual_machine(&vm_create_of(&req("md-0-1")), "infra").expect("vm");
        assert!(
            !vm.spec
                .template
                .metadata
                .labels
                .contains_key(LABEL_CONTROL_PLANE)
        );
    }

    #[test]
    fn a_tag_without_a_label_refuses_the_vm() {
        let mut r = vm_create_of(&req("cp-1"));
        r.tags.push("env=prod".into());
        assert!(virtual_machine(&r, "infra").is_err());
    }

    fn vm(run_strategy: &str, deleting: bool) -> VirtualMachine {
        serde_json::from_value(json!({
            "metadata": {
                "name": "demo-cp-1",
                "creationTimestamp": "2026-01-01T00:00:01Z",
                "labels": {"flightdeck.dev/uid": "u1", "flightdeck.dev/machine": "cp-1", "app": "x"},
                "deletionTimestamp": if deleting { json!("2026-01-01T00:01:00Z") } else { json!(null) },
            },
            "spec": {
                "runStrategy": run_strategy,
                "instancetype": {"name": "u1.medium", "kind": "VirtualMachineClusterInstancetype"},
                "template": {"spec": {"volumes": [
                    {"name": "cloudinit", "cloudInitNoCloud": {}},
                    {"name": "rootdisk", "containerDisk": {"image": "img:1"}},
                ]}},
            },
            "status": {"printableStatus": "Stopped", "conditions": [
                {"type": "Failure", "status": "True", "message": "vm says no"}
            ]},
        }))
        .expect("vm")
    }

    fn vmi(phase: Option<&str>, deleting: bool) -> VirtualMachineInstance {
        serde_json::from_value(json!({
            "metadata": {
                "name": "demo-cp-1",
                "uid": "vmi-uid",
                "labels": {"flightdeck.dev/uid": "u1", "kubevirt.io/nodeName": "infra-3"},
                "deletionTimestamp": if deleting { json!("2026-01-01T00:01:00Z") } else { json!(null) },
            },
            "spec": {"evictionStrategy": "External"},
            "status": {
                "phase": phase,
                "nodeName": "infra-3",
                "interfaces": [{"name": "default", "ipAddress": "10.244.1.7"}],
                "conditions": [{"type": "Ready", "status": "False", "message": "vmi says no"}],
            },
        }))
        .expect("vmi")
    }

    #[test]
    fn server_status_follows_the_vmi_phase() {
        let cases: [(Option<&str>, ServerStatus); 8] = [
            (Some("Running"), ServerStatus::Active),
            (Some("Pending"), ServerStatus::Build),
            (Some("Scheduling"), ServerStatus::Build),
            (Some("Scheduled"), ServerStatus::Build),
            (None, ServerStatus::Build),
            (Some("Failed"), ServerStatus::Error),
            (Some("Succeeded"), ServerStatus::Build),
            (Some("Unknown"), ServerStatus::Other("Unknown".into())),
        ];
        let vm = vm("Always", false);
        for (phase, want) in cases {
            let s = server_of(&vm, Some(&vmi(phase, false)));
            assert_eq!(s.status, want, "{phase:?}");
            assert_eq!(s.task_state, None, "{phase:?}");
            assert_eq!(s.fault.is_some(), want == ServerStatus::Error, "{phase:?}");
        }
    }

    #[test]
    fn a_failed_vmi_is_an_error_with_the_vmi_message() {
        let s = server_of(&vm("Always", false), Some(&vmi(Some("Failed"), false)));
        assert_eq!(s.fault.as_deref(), Some("vmi says no"));
    }

    #[test]
    fn no_vmi_yet_is_build_while_the_vm_wants_it_running() {
        let s = server_of(&vm("Always", false), None);
        assert_eq!(s.status, ServerStatus::Build);
        let s = server_of(&vm("Halted", false), None);
        assert_eq!(s.status, ServerStatus::Other("Stopped".into()));
        assert_eq!(s.task_state, None);
    }

    #[test]
    fn a_deleting_vm_is_a_deleting_server() {
        let s = server_of(&vm("Always", true), Some(&vmi(Some("Running"), false)));
        assert_eq!(s.status, ServerStatus::Active);
        assert!(s.is_deleting());
    }

    #[test]
    fn an_evacuated_vmi_being_replaced_is_not_a_deleting_server() {
        let s = server_of(&vm("Always", false), Some(&vmi(Some("Running"), true)));
        assert_eq!(s.status, ServerStatus::Build);
        assert!(!s.is_deleting());
        let s = server_of(&vm("Manual", false), Some(&vmi(Some("Running"), true)));
        assert!(s.is_deleting(), "no replacement comes");
    }

    #[test]
    fn a_server_carries_tags_image_flavor_address_and_creation_time() {
        let s = server_of(&vm("Always", false), Some(&vmi(Some("Running"), false)));
        assert_eq!(s.id, "demo-cp-1");
        assert_eq!(s.name, "demo-cp-1");
        assert_eq!(s.tags, vec!["flightdeck-uid=u1", "flightdeck-machine=cp-1"]);
        assert_eq!(s.image, "img:1");
        assert_eq!(s.flavor, "u1.medium");
        assert_eq!(s.address, Some("10.244.1.7".parse().expect("ip")));
        assert_eq!(s.created_at, flightdeck_cloud::Timestamp(1_767_225_601_000));
    }

    #[test]
    fn a_vmi_maps_with_its_evacuation_node() {
        let mut v = vmi(Some("Running"), false);
        let st = v.status.as_mut().expect("status");
        st.evacuation_node_name = Some("infra-3".into());
        let got = vmi_of(&v);
        assert_eq!(got.name, "demo-cp-1");
        assert_eq!(got.uid, "vmi-uid");
        assert_eq!(got.phase, "Running");
        assert_eq!(got.node.as_deref(), Some("infra-3"));
        assert_eq!(got.eviction_strategy, Some(EvictionStrategy::External));
        assert_eq!(got.evacuation_node.as_deref(), Some("infra-3"));
        assert!(!got.deleting);
        assert_eq!(got.tags, vec!["flightdeck-uid=u1"]);
    }

    #[test]
    fn evacuation_node_name_is_parsed_from_the_wire() {
        let v: VirtualMachineInstance = serde_json::from_value(json!({
            "metadata": {"name": "a", "uid": "x", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"evictionStrategy": "LiveMigrate"},
            "status": {"phase": "Running", "evacuationNodeName": "infra-9", "nodeName": ""},
        }))
        .expect("vmi");
        let got = vmi_of(&v);
        assert_eq!(got.evacuation_node.as_deref(), Some("infra-9"));
        assert_eq!(got.node, None, "an empty nodeName is no node");
        assert_eq!(got.eviction_strategy, Some(EvictionStrategy::LiveMigrate));
        assert!(got.deleting);
    }
}
