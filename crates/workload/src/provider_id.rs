//! `spec.providerID`: how each cloud's cloud controller manager names the machine behind
//! a Node, and how flightdeck reads it back to the server ID it knows.
//!
//! | cloud | format | source |
//! |---|---|---|
//! | OpenStack | `openstack:///<server id>`, or `openstack://<region>/<server id>` | cloud-provider-openstack, `pkg/openstack/instances.go` (`instanceIDFromProviderID`) |
//! | OpenNebula | `opennebula://<VM ID>` | cloud-provider-opennebula, `openNebulaInstance.ProviderID` |
//! | KubeVirt | `kubevirt://<VirtualMachine name>` | cloud-provider-kubevirt, `instancesv2.go` |
//!
//! A Node whose providerID is in another cloud's format, or empty, has no server ID:
//! flightdeck then matches it by name, then by its InternalIP.

/// Which cloud's providerID format a workload cluster's nodes carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderIdFormat {
    OpenStack,
    OpenNebula,
    KubeVirt,
}

impl ProviderIdFormat {
    /// The scheme, with its `://`.
    pub fn scheme(self) -> &'static str {
        match self {
            ProviderIdFormat::OpenStack => "openstack://",
            ProviderIdFormat::OpenNebula => "opennebula://",
            ProviderIdFormat::KubeVirt => "kubevirt://",
        }
    }

    /// The providerID a cloud controller manager gives the machine with `server_id`.
    pub fn format(self, server_id: &str) -> String {
        match self {
            ProviderIdFormat::OpenStack => format!("openstack:///{server_id}"),
            other => format!("{}{server_id}", other.scheme()),
        }
    }

    /// The server ID in `provider_id`, if it is in this format. The OpenStack region,
    /// when present, is not part of the ID.
    pub fn server_id(self, provider_id: &str) -> Option<String> {
        let rest = provider_id.trim().strip_prefix(self.scheme())?;
        let id = match self {
            // `/<id>` or `<region>/<id>`: the ID is the last segment.
            ProviderIdFormat::OpenStack => rest.rsplit('/').next().unwrap_or_default(),
            ProviderIdFormat::OpenNebula => rest.trim_matches('/'),
            ProviderIdFormat::KubeVirt => rest.trim_matches('/'),
        };
        let valid = match self {
            ProviderIdFormat::OpenNebula => {
                !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())
            }
            _ => !id.is_empty() && !id.contains('/'),
        };
        valid.then(|| id.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::ProviderIdFormat::{KubeVirt, OpenNebula, OpenStack};

    #[test]
    fn openstack_ids_are_read_with_and_without_a_region() {
        let id = "8f1c2a3e-1111-4a5b-9c3d-0123456789ab";
        assert_eq!(
            OpenStack
                .server_id(&format!("openstack:///{id}"))
                .as_deref(),
            Some(id)
        );
        assert_eq!(
            OpenStack
                .server_id(&format!("openstack://RegionOne/{id}"))
                .as_deref(),
            Some(id)
        );
        assert_eq!(OpenStack.format(id), format!("openstack:///{id}"));
        assert_eq!(OpenStack.server_id("openstack:///"), None);
    }

    #[test]
    fn opennebula_ids_are_vm_numbers() {
        assert_eq!(
            OpenNebula.server_id("opennebula://42").as_deref(),
            Some("42")
        );
        assert_eq!(OpenNebula.server_id("opennebula://web-1"), None);
        assert_eq!(OpenNebula.format("7"), "opennebula://7");
    }

    #[test]
    fn kubevirt_ids_are_vm_names() {
        assert_eq!(
            KubeVirt.server_id("kubevirt://demo-cp-1").as_deref(),
            Some("demo-cp-1")
        );
        assert_eq!(
            KubeVirt.server_id("kubevirt:///demo-cp-1").as_deref(),
            Some("demo-cp-1")
        );
        assert_eq!(KubeVirt.server_id(""), None);
    }

    #[test]
    fn another_clouds_format_names_no_server() {
        assert_eq!(OpenStack.server_id("kubevirt://demo-cp-1"), None);
        assert_eq!(KubeVirt.server_id("openstack:///abc"), None);
        assert_eq!(OpenNebula.server_id("aws:///eu-west-1a/i-0123"), None);
    }
}
