//! A machine's cloud-init user data on KubeVirt: inline in the VirtualMachine's
//! `cloudInitNoCloud` volume (`userDataBase64`) up to KubeVirt's 2,048 bytes, and in a
//! Secret of its own beyond that (`cloudInitNoCloud.secretRef`, key `userdata`).
//!
//! The Secret is made right after its VirtualMachine and is owned by it (an
//! `ownerReference` with the VM's uid), so the infra cluster's garbage collector deletes
//! it with the VM: nothing is left behind whatever happens to flightdeck. Until the
//! Secret exists the VM's launcher pod cannot mount it and the guest does not boot. If
//! the Secret cannot be made, the VM just created is deleted again, so the next attempt
//! starts clean; should even that fail, the machine never registers and F3 replaces it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::objects::{CloudInitNoCloud, SecretRef, VirtualMachine};

/// KubeVirt refuses inline `cloudInitNoCloud` user data over 2,048 bytes.
pub const INLINE_USER_DATA_MAX: usize = 2048;
/// The key KubeVirt reads user data from in the Secret.
pub const SECRET_KEY: &str = "userdata";

/// The name of the Secret holding VM `vm`'s user data.
pub fn secret_name(vm: &str) -> String {
    format!("{vm}-userdata")
}

/// Whether `data` goes into a Secret rather than inline.
pub fn needs_secret(data: &str) -> bool {
    data.len() > INLINE_USER_DATA_MAX
}

/// The `cloudInitNoCloud` source for VM `vm`'s user data `data`.
pub fn cloud_init(vm: &str, data: &str) -> CloudInitNoCloud {
    use base64::Engine;
    if needs_secret(data) {
        CloudInitNoCloud {
            user_data_base64: None,
            secret_ref: Some(SecretRef {
                name: secret_name(vm),
            }),
        }
    } else {
        CloudInitNoCloud {
            user_data_base64: Some(base64::engine::general_purpose::STANDARD.encode(data)),
            secret_ref: None,
        }
    }
}

/// The Secret for the user data of `vm` (as created, with its uid), labelled like it and
/// owned by it. Fails when the VM has no uid yet (an answer the API server never gives).
pub fn secret_for(vm: &VirtualMachine, data: &str) -> Result<Secret, String> {
    let name = vm.metadata.name.clone().unwrap_or_default();
    let uid = vm
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| format!("VirtualMachine {name}: the API server gave it no uid"))?;
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(&name)),
            namespace: vm.metadata.namespace.clone(),
            labels: vm.metadata.labels.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: "kubevirt.io/v1".into(),
                kind: "VirtualMachine".into(),
                name,
                uid,
                controller: Some(false),
                block_owner_deletion: Some(false),
            }]),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            SECRET_KEY.to_string(),
            ByteString(data.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_user_data_is_inline_and_large_goes_to_a_secret() {
        let small = cloud_init("demo-cp-1", "#cloud-config\n");
        assert!(small.user_data_base64.is_some() && small.secret_ref.is_none());
        let large = cloud_init("demo-cp-1", &"x".repeat(INLINE_USER_DATA_MAX + 1));
        assert_eq!(large.user_data_base64, None);
        assert_eq!(
            large.secret_ref.map(|r| r.name).as_deref(),
            Some("demo-cp-1-userdata")
        );
    }

    #[test]
    fn the_secret_is_owned_by_its_vm_and_carries_the_content() {
        let mut vm = VirtualMachine::default();
        vm.metadata.name = Some("demo-cp-1".into());
        vm.metadata.namespace = Some("clusters".into());
        let e = secret_for(&vm, "x").expect_err("no uid");
        assert!(e.contains("demo-cp-1"), "{e}");
        vm.metadata.uid = Some("u-1".into());
        let s = secret_for(&vm, "#cloud-config\nhostname: a\n").expect("secret");
        assert_eq!(s.metadata.name.as_deref(), Some("demo-cp-1-userdata"));
        let owner = &s.metadata.owner_references.expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("VirtualMachine", "u-1")
        );
        let data = s.data.expect("data");
        assert_eq!(data[SECRET_KEY].0, b"#cloud-config\nhostname: a\n");
    }
}
