//! Ownership tags as Kubernetes labels. flightdeck's tags (`flightdeck-uid=<uid>` and
//! friends, see [`flightdeck_cloud::ownership`]) become `flightdeck.dev/…` labels on the
//! VM, its VMI template and the endpoint Service, and lists select by the UID label.

use std::collections::BTreeMap;

use flightdeck_cloud::Ownership;
use flightdeck_cloud::ownership::{
    TAG_CLUSTER, TAG_MACHINE, TAG_ROLE, TAG_TEMPLATE, TAG_UID, machine_of,
};

pub const LABEL_CLUSTER: &str = "flightdeck.dev/cluster";
pub const LABEL_UID: &str = "flightdeck.dev/uid";
pub const LABEL_ROLE: &str = "flightdeck.dev/role";
pub const LABEL_MACHINE: &str = "flightdeck.dev/machine";
pub const LABEL_TEMPLATE: &str = "flightdeck.dev/template";
/// On the VMI template of control-plane VMs only; the endpoint Service selects it.
pub const LABEL_CONTROL_PLANE: &str = "flightdeck.dev/control-plane";

/// Tag prefix ↔ label key, in the order tags are rebuilt.
pub const TAG_LABELS: [(&str, &str); 5] = [
    (TAG_CLUSTER, LABEL_CLUSTER),
    (TAG_UID, LABEL_UID),
    (TAG_ROLE, LABEL_ROLE),
    (TAG_MACHINE, LABEL_MACHINE),
    (TAG_TEMPLATE, LABEL_TEMPLATE),
];

/// Machines whose key starts with this serve the control plane.
pub const CONTROL_PLANE_MACHINE_PREFIX: &str = "cp-";

/// The labels for `tags`. A tag flightdeck does not know is refused rather than dropped,
/// so that ownership never silently goes missing.
pub fn labels_of(tags: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    for tag in tags {
        let Some((label, value)) = TAG_LABELS
            .iter()
            .find_map(|(prefix, label)| tag.strip_prefix(prefix).map(|v| (*label, v)))
        else {
            return Err(format!("tag {tag:?} has no flightdeck.dev label"));
        };
        labels.insert(label.to_string(), value.to_string());
    }
    Ok(labels)
}

/// The ownership tags `labels` carry, in [`TAG_LABELS`] order; other labels are ignored.
pub fn tags_of(labels: &BTreeMap<String, String>) -> Vec<String> {
    TAG_LABELS
        .iter()
        .filter_map(|(prefix, label)| labels.get(*label).map(|v| format!("{prefix}{v}")))
        .collect()
}

/// `flightdeck.dev/uid=<uid>`: the label selector of every list.
pub fn uid_selector(owner: &Ownership) -> String {
    format!("{LABEL_UID}={}", owner.uid)
}

/// The endpoint Service's selector: the cluster's control-plane VMIs.
pub fn control_plane_selector(uid: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_UID.to_string(), uid.to_string()),
        (LABEL_CONTROL_PLANE.to_string(), "true".to_string()),
    ])
}

/// Whether the tags name a control-plane machine (its key starts with `cp-`).
pub fn is_control_plane(tags: &[String]) -> bool {
    machine_of(tags).is_some_and(|k| k.starts_with(CONTROL_PLANE_MACHINE_PREFIX))
}

#[cfg(test)]
mod tests {
    use flightdeck_cloud::Role;

    use super::*;

    fn owner() -> Ownership {
        Ownership {
            cluster: "demo".into(),
            uid: "u1".into(),
        }
    }

    #[test]
    fn ownership_tags_travel_as_labels_and_back() {
        let tags = owner().tags(&Role::Machine("cp-1".into()));
        let labels = labels_of(&tags).expect("known tags");
        assert_eq!(
            labels,
            BTreeMap::from([
                ("flightdeck.dev/cluster".to_string(), "demo".to_string()),
                ("flightdeck.dev/uid".to_string(), "u1".to_string()),
                ("flightdeck.dev/role".to_string(), "machine".to_string()),
                ("flightdeck.dev/machine".to_string(), "cp-1".to_string()),
            ])
        );
        assert_eq!(tags_of(&labels), tags);
        assert!(owner().owns(&tags_of(&labels)));
    }

    #[test]
    fn an_unknown_tag_is_refused_not_dropped() {
        let e = labels_of(&["env=prod".into()]).expect_err("unknown");
        assert!(e.contains("env=prod"), "{e}");
    }

    #[test]
    fn foreign_labels_are_not_tags() {
        let labels = BTreeMap::from([
            ("app".to_string(), "x".to_string()),
            (LABEL_CONTROL_PLANE.to_string(), "true".to_string()),
        ]);
        assert!(tags_of(&labels).is_empty());
    }

    #[test]
    fn control_plane_machines_are_those_keyed_cp() {
        assert!(is_control_plane(
            &owner().tags(&Role::Machine("cp-1".into()))
        ));
        assert!(!is_control_plane(
            &owner().tags(&Role::Machine("md-0-1".into()))
        ));
        assert!(!is_control_plane(&owner().tags(&Role::ApiLoadBalancer)));
        assert_eq!(uid_selector(&owner()), "flightdeck.dev/uid=u1");
    }
}
