//! A machine's cloud-init user data on KubeVirt: inline in the VirtualMachine's
//! `cloudInitNoCloud` volume (`userDataBase64`) up to KubeVirt's 2,048 bytes, and in a
//! Secret of its own beyond that (`cloudInitNoCloud.secretRef`, key `userdata`).
//!
//! The Secret is made **before** its VirtualMachine, as Cluster API's KubeVirt provider
//! makes its bootstrap Secret: labelled like the VM (so it is the cluster's own), and
//! then owned by the VM (an `ownerReference` with the uid the VM was given), so the
//! infra cluster's garbage collector deletes it with the VM. A Secret that cannot be
//! made leaves nothing behind, and the machine is simply made again at the next
//! reconcile; the VM never stands without its data, and is never deleted again for a
//! Secret's error (the swarm's seed 70000017 saw a VM made, undone on a 503 and made
//! again, which is churn). If the VM cannot be made, the Secret is deleted again; a
//! Secret left by an attempt whose undo failed is taken over by the next attempt (same
//! name, same cluster's label), and deleting a server deletes its Secret by name too, so
//! one whose ownership never got written does not outlive it. Whatever is still left
//! (those deletes are best effort) goes at the cluster's deletion: every Secret with
//! the cluster's label is deleted before its endpoint Service, the last object, so the
//! deletion is confirmed only once they are gone (the seed's noLeaks).

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

/// The Secret for the user data of `vm` (as built, before it is created): named after
/// it, labelled like it, in its namespace, not owned yet ([`owned_by`]).
pub fn secret_for(vm: &VirtualMachine, data: &str) -> Secret {
    let name = vm.metadata.name.clone().unwrap_or_default();
    Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(&name)),
            namespace: vm.metadata.namespace.clone(),
            labels: vm.metadata.labels.clone(),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            SECRET_KEY.to_string(),
            ByteString(data.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

/// The merge patch that makes the user-data Secret owned by `vm` (as created, with its
/// uid). Fails when the VM has no uid (an answer the API server never gives).
pub fn owned_by(vm: &VirtualMachine) -> Result<serde_json::Value, String> {
    let name = vm.metadata.name.clone().unwrap_or_default();
    let uid = vm
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| format!("VirtualMachine {name}: the API server gave it no uid"))?;
    let owner = OwnerReference {
        api_version: "kubevirt.io/v1".into(),
        kind: "VirtualMachine".into(),
        name,
        uid,
        controller: Some(false),
        block_owner_deletion: Some(false),
    };
    Ok(serde_json::json!({"metadata": {"ownerReferences": [owner]}}))
}

/// Whether an existing Secret of that name is one `wanted` may take over: it carries
/// the same cluster label (a Secret left by an earlier attempt for the same machine).
pub fn ours(existing: &Secret, wanted: &Secret) -> bool {
    let label = |s: &Secret| {
        s.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(crate::labels::LABEL_UID).cloned())
    };
    label(wanted).is_some() && label(existing) == label(wanted)
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
    fn the_secret_carries_the_content_and_the_vms_labels_and_is_then_owned_by_it() {
        let mut vm = VirtualMachine::default();
        vm.metadata.name = Some("demo-cp-1".into());
        vm.metadata.namespace = Some("clusters".into());
        vm.metadata.labels = Some(BTreeMap::from([(
            crate::labels::LABEL_UID.to_string(),
            "u-cluster".to_string(),
        )]));
        let s = secret_for(&vm, "#cloud-config\nhostname: a\n");
        assert_eq!(s.metadata.name.as_deref(), Some("demo-cp-1-userdata"));
        assert_eq!(s.metadata.owner_references, None);
        assert!(ours(&s, &s));
        let mut foreign = s.clone();
        foreign.metadata.labels = None;
        assert!(!ours(&foreign, &s));
        let data = s.data.expect("data");
        assert_eq!(data[SECRET_KEY].0, b"#cloud-config\nhostname: a\n");
        let e = owned_by(&vm).expect_err("no uid");
        assert!(e.contains("demo-cp-1"), "{e}");
        vm.metadata.uid = Some("u-1".into());
        let patch = owned_by(&vm).expect("a patch");
        let owner = &patch["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&owner["kind"], &owner["uid"]),
            (&"VirtualMachine".into(), &"u-1".into())
        );
    }
}
