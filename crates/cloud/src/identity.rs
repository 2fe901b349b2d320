//! Cluster identity in the cloud. A cluster's UID lives in flightdeck's store, and every
//! object it makes carries it; the cluster's name is on every object too. Objects that
//! carry the cluster's name under another UID are what an earlier cluster of that name
//! left behind: a lost or truncated store, another `--state-dir`, another replica. A new
//! cluster looks for them before it creates anything, so a lost store never means a
//! second copy of a cluster standing next to the first.

use std::future::Future;

use serde::{Deserialize, Serialize};

use crate::ownership::{Ownership, TAG_CLUSTER, TAG_UID};
use crate::provider::Result;

/// An object tagged with a cluster's name, and the UID it carries.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NamedObject {
    /// `server`, `security group`, `load balancer`, `VM`, ...
    pub kind: String,
    pub id: String,
    pub name: String,
    /// The UID it carries; empty when it carries the name and no UID at all.
    pub uid: String,
}

impl NamedObject {
    /// Whether it was left by another cluster of the name: it does not carry `owner`'s
    /// UID.
    pub fn is_foreign(&self, owner: &Ownership) -> bool {
        self.uid != owner.uid
    }
}

impl std::fmt::Display for NamedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let uid = if self.uid.is_empty() {
            "no UID"
        } else {
            &self.uid
        };
        write!(f, "{} {} ({}, UID {uid})", self.kind, self.name, self.id)
    }
}

/// Finding what other clusters of the same name left in the cloud.
pub trait Identity {
    /// Every object tagged with `owner.cluster`'s name, of every kind the cloud makes
    /// for a cluster (servers or VMs first): those under another UID (foreign, see
    /// [`NamedObject::is_foreign`]) and the cluster's own. A new cluster that finds none
    /// at all knows that its first lists of those kinds are empty.
    fn list_named(
        &self,
        owner: &Ownership,
    ) -> impl Future<Output = Result<Vec<NamedObject>>> + Send;
}

/// The tag every object of the cluster named `cluster` carries.
pub fn cluster_tag(cluster: &str) -> String {
    format!("{TAG_CLUSTER}{cluster}")
}

/// `Some(object)` when `tags` name `owner.cluster`.
pub fn named_of(
    owner: &Ownership,
    kind: &str,
    id: &str,
    name: &str,
    tags: &[String],
) -> Option<NamedObject> {
    if !tags.contains(&cluster_tag(&owner.cluster)) {
        return None;
    }
    let uid = tags
        .iter()
        .find_map(|t| t.strip_prefix(TAG_UID))
        .unwrap_or_default();
    Some(NamedObject {
        kind: kind.to_string(),
        id: id.to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    #[test]
    fn an_object_of_the_same_name_under_another_uid_is_foreign_and_one_of_its_own_is_not() {
        let mine = Ownership {
            cluster: "demo".into(),
            uid: "new".into(),
        };
        let earlier = Ownership {
            cluster: "demo".into(),
            uid: "old".into(),
        };
        let other_name = Ownership {
            cluster: "prod".into(),
            uid: "old".into(),
        };
        let role = Role::Machine("demo-cp-1".into());
        let f =
            named_of(&mine, "server", "s1", "demo-cp-1", &earlier.tags(&role)).expect("foreign");
        assert_eq!(f.uid, "old");
        assert!(f.is_foreign(&mine));
        assert_eq!(f.to_string(), "server demo-cp-1 (s1, UID old)");
        let own = named_of(&mine, "server", "s1", "x", &mine.tags(&role)).expect("named");
        assert!(!own.is_foreign(&mine));
        assert_eq!(
            named_of(&mine, "server", "s1", "x", &other_name.tags(&role)),
            None
        );
    }
}
