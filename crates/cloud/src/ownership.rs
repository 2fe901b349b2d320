//! Ownership tags. flightdeck finds its objects by these tags and never by name alone,
//! and it never mutates an object that does not carry its cluster's UID tag.

use serde::{Deserialize, Serialize};

pub const TAG_CLUSTER: &str = "flightdeck-cluster=";
pub const TAG_UID: &str = "flightdeck-uid=";
pub const TAG_ROLE: &str = "flightdeck-role=";
pub const TAG_MACHINE: &str = "flightdeck-machine=";
/// A machine's template digest ([`template_of`]): what it was built from, so a machine
/// adopted after memory was lost is known to be current or outdated.
pub const TAG_TEMPLATE: &str = "flightdeck-template=";

/// Which cluster owns an object: its name and the UID flightdeck gave it when it was
/// first applied. The UID separates two clusters that had the same name at different
/// times.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ownership {
    pub cluster: String,
    pub uid: String,
}

/// What an owned object is for. Together with the UID it is the object's logical
/// identity: a role is only ever filled by one object at a time.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Role {
    SecurityGroup,
    ApiLoadBalancer,
    ApiListener,
    ApiPool,
    ApiHealthMonitor,
    /// A machine (server) and, for control-plane machines, its pool member.
    Machine(String),
}

impl Role {
    pub fn tag_value(&self) -> String {
        match self {
            Role::SecurityGroup => "security-group".into(),
            Role::ApiLoadBalancer => "api-lb".into(),
            Role::ApiListener => "api-listener".into(),
            Role::ApiPool => "api-pool".into(),
            Role::ApiHealthMonitor => "api-health-monitor".into(),
            Role::Machine(_) => "machine".into(),
        }
    }
}

impl Ownership {
    pub fn uid_tag(&self) -> String {
        format!("{TAG_UID}{}", self.uid)
    }

    /// The tags every object of this cluster in the given role carries.
    pub fn tags(&self, role: &Role) -> Vec<String> {
        let mut tags = vec![
            format!("{TAG_CLUSTER}{}", self.cluster),
            self.uid_tag(),
            format!("{TAG_ROLE}{}", role.tag_value()),
        ];
        if let Role::Machine(name) = role {
            tags.push(format!("{TAG_MACHINE}{name}"));
        }
        tags
    }

    /// Whether `tags` mark an object as owned by this cluster.
    pub fn owns(&self, tags: &[String]) -> bool {
        tags.iter()
            .any(|t| t.strip_prefix(TAG_UID) == Some(self.uid.as_str()))
    }
}

/// The role an object's tags declare, if they declare one flightdeck knows.
pub fn role_of(tags: &[String]) -> Option<Role> {
    let role = tags.iter().find_map(|t| t.strip_prefix(TAG_ROLE))?;
    Some(match role {
        "security-group" => Role::SecurityGroup,
        "api-lb" => Role::ApiLoadBalancer,
        "api-listener" => Role::ApiListener,
        "api-pool" => Role::ApiPool,
        "api-health-monitor" => Role::ApiHealthMonitor,
        "machine" => Role::Machine(machine_of(tags)?.to_string()),
        _ => return None,
    })
}

/// The machine name an object's tags declare.
pub fn machine_of(tags: &[String]) -> Option<&str> {
    tags.iter().find_map(|t| t.strip_prefix(TAG_MACHINE))
}

/// The template digest a machine's tags declare.
pub fn template_of(tags: &[String]) -> Option<&str> {
    tags.iter().find_map(|t| t.strip_prefix(TAG_TEMPLATE))
}

/// The cluster UID an object's tags declare.
pub fn uid_of(tags: &[String]) -> Option<&str> {
    tags.iter().find_map(|t| t.strip_prefix(TAG_UID))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_role_and_owner() {
        let o = Ownership {
            cluster: "demo".into(),
            uid: "abc".into(),
        };
        let tags = o.tags(&Role::Machine("demo-cp-1".into()));
        assert!(o.owns(&tags));
        assert_eq!(role_of(&tags), Some(Role::Machine("demo-cp-1".into())));
        let other = Ownership {
            cluster: "demo".into(),
            uid: "xyz".into(),
        };
        assert!(!other.owns(&tags), "same name, other UID: not owned");
        assert!(
            tags.iter().all(|t| t.len() <= 60),
            "OpenStack tags are at most 60 chars"
        );
    }
}
