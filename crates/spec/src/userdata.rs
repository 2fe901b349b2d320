//! `machine.userData`: the cloud-init file every machine of a set boots with.
//!
//! A spec names the file (`userData: cloud-init.yaml`, relative to the spec file); the
//! loader reads it, so a spec that travels (to the daemon, to the store) carries the
//! content. The content is part of a machine's identity, like its image: a change rolls
//! the set surge-first. Machine records keep only its digest.
//!
//! Variables, written `{{ name }}`, are filled in for each machine when it is created:
//! `cluster`, `machine`, `role` (`control-plane` or `worker`), `endpoint.address` and
//! `endpoint.port` (the cluster's API endpoint; empty until it is known).

use serde::{Deserialize, Serialize};

/// Nova takes at most 65,535 bytes of user data after base64: 49,149 bytes before.
pub const NOVA_USER_DATA_MAX: usize = 65_535;
/// The most bytes a userData file may hold. What Nova takes, less room for the
/// variables (five of them, each at most 255 bytes once filled in).
pub const USER_DATA_MAX_BYTES: usize = 49_149 - 5 * 255;
/// The variables a userData file may use.
pub const VARIABLES: [&str; 5] = [
    "cluster",
    "machine",
    "role",
    "endpoint.address",
    "endpoint.port",
];

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "Repr", into = "Repr")]
pub struct UserData {
    /// The file it came from, as the spec names it.
    pub file: Option<String>,
    /// The content; `None` until the file is read, and in machine records.
    pub content: Option<String>,
    /// FNV-1a of the content: what identifies it.
    pub digest: u64,
}

impl PartialEq for UserData {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}
impl Eq for UserData {}
impl std::hash::Hash for UserData {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.digest.hash(state);
    }
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Repr {
    File(String),
    #[serde(rename_all = "camelCase")]
    Full {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(default)]
        digest: u64,
    },
}

impl TryFrom<Repr> for UserData {
    type Error = String;
    fn try_from(r: Repr) -> Result<Self, String> {
        match r {
            Repr::File(file) => UserData::file(file),
            Repr::Full {
                file,
                content: Some(content),
                ..
            } => {
                let mut u = UserData::inline(content)?;
                u.file = file;
                Ok(u)
            }
            Repr::Full {
                file: Some(file),
                content: None,
                digest: 0,
            } => UserData::file(file),
            Repr::Full {
                file,
                content: None,
                digest,
            } => Ok(UserData {
                file,
                content: None,
                digest,
            }),
        }
    }
}

impl From<UserData> for Repr {
    fn from(u: UserData) -> Repr {
        Repr::Full {
            file: u.file,
            content: u.content,
            digest: u.digest,
        }
    }
}

impl UserData {
    fn file(file: String) -> Result<Self, String> {
        if file.trim().is_empty() {
            return Err("userData names no file".into());
        }
        Ok(UserData {
            file: Some(file),
            content: None,
            digest: 0,
        })
    }

    /// User data given as its content.
    pub fn inline(content: String) -> Result<Self, String> {
        check(&content)?;
        Ok(UserData {
            digest: crate::fnv1a(content.as_bytes()),
            file: None,
            content: Some(content),
        })
    }

    /// Reads the file, relative to `base` (the spec file's directory).
    pub fn resolve(&mut self, base: &std::path::Path) -> Result<(), String> {
        let (Some(file), None) = (&self.file, &self.content) else {
            return Ok(());
        };
        let path = base.join(file);
        let meta =
            std::fs::metadata(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if meta.len() > USER_DATA_MAX_BYTES as u64 {
            return Err(format!(
                "{} is {} bytes; user data is limited to {USER_DATA_MAX_BYTES} (Nova takes {NOVA_USER_DATA_MAX} after base64, and the variables need room)",
                path.display(),
                meta.len()
            ));
        }
        let content = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let resolved = UserData::inline(content).map_err(|e| format!("{}: {e}", path.display()))?;
        self.content = resolved.content;
        self.digest = resolved.digest;
        Ok(())
    }

    /// Identity only, as machine records keep it.
    pub fn digest_only(&self) -> UserData {
        UserData {
            file: None,
            content: None,
            digest: self.digest,
        }
    }

    /// The content with each variable filled in; `None` when the file was never read.
    pub fn render(&self, vars: &[(&str, &str)]) -> Option<String> {
        let content = self.content.as_deref()?;
        let mut out = String::with_capacity(content.len());
        let mut rest = content;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find("}}") else {
                out.push_str(&rest[start..]);
                return Some(out);
            };
            let name = after[..end].trim();
            match vars.iter().find(|(k, _)| *k == name) {
                Some((_, v)) => out.push_str(v),
                None => out.push_str(&rest[start..start + 2 + end + 2]),
            }
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        Some(out)
    }
}

/// Reads every userData file a cluster names, relative to `base`; on failure, the
/// field path and the problem.
pub fn resolve_cluster(
    c: &mut crate::Cluster,
    base: &std::path::Path,
) -> Result<(), (String, String)> {
    let spec = &mut c.spec;
    if let Some(u) = spec.control_plane.machine.user_data.as_mut() {
        u.resolve(base)
            .map_err(|e| ("spec.controlPlane.machine.userData".to_string(), e))?;
    }
    for (i, pool) in spec.node_pools.iter_mut().enumerate() {
        if let Some(u) = pool.machine.user_data.as_mut() {
            u.resolve(base)
                .map_err(|e| (format!("spec.nodePools[{i}].machine.userData"), e))?;
        }
    }
    Ok(())
}

/// Whether every userData file a cluster names has been read (a spec sent to the
/// daemon must carry the content; `flightdeck apply` reads the files).
pub fn unresolved(c: &crate::Cluster) -> Option<String> {
    let spec = &c.spec;
    if let Some(u) = &spec.control_plane.machine.user_data
        && u.content.is_none()
    {
        return Some("spec.controlPlane.machine.userData".into());
    }
    spec.node_pools.iter().enumerate().find_map(|(i, p)| {
        p.machine
            .user_data
            .as_ref()
            .filter(|u| u.content.is_none())
            .map(|_| format!("spec.nodePools[{i}].machine.userData"))
    })
}

/// Size and variables of a userData file's content.
fn check(content: &str) -> Result<(), String> {
    if content.len() > USER_DATA_MAX_BYTES {
        return Err(format!(
            "user data is {} bytes; it is limited to {USER_DATA_MAX_BYTES} (Nova takes {NOVA_USER_DATA_MAX} after base64, and the variables need room)",
            content.len()
        ));
    }
    let mut rest = content;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err("a `{{` is never closed by `}}`".into());
        };
        let name = after[..end].trim();
        if !VARIABLES.contains(&name) {
            return Err(format!(
                "unknown variable {{{{ {name} }}}}; the variables are {}",
                VARIABLES.join(", ")
            ));
        }
        rest = &after[end + 2..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_filled_in_for_each_machine() {
        let u = UserData::inline(
            "#cloud-config\nhostname: {{ machine }}\njoin: {{endpoint.address}}:{{ endpoint.port }} ({{ cluster }}, {{ role }})\n".into(),
        )
        .expect("valid");
        let out = u
            .render(&[
                ("cluster", "demo"),
                ("machine", "demo-cp-1"),
                ("role", "control-plane"),
                ("endpoint.address", "10.0.0.2"),
                ("endpoint.port", "6443"),
            ])
            .expect("content");
        assert_eq!(
            out,
            "#cloud-config\nhostname: demo-cp-1\njoin: 10.0.0.2:6443 (demo, control-plane)\n"
        );
    }

    #[test]
    fn an_unknown_variable_or_an_oversized_file_is_refused() {
        let e = UserData::inline("x: {{ secret }}".into()).expect_err("unknown");
        assert!(e.contains("unknown variable {{ secret }}"), "{e}");
        let e = UserData::inline("a".repeat(USER_DATA_MAX_BYTES + 1)).expect_err("too big");
        assert!(e.contains("limited to"), "{e}");
    }

    #[test]
    fn identity_is_the_content_not_the_file_name() {
        let a = UserData::inline("x".into()).expect("valid");
        let mut b = UserData::inline("x".into()).expect("valid");
        b.file = Some("other.yaml".into());
        assert_eq!(a, b);
        assert_eq!(a.digest_only(), a);
        assert_ne!(a, UserData::inline("y".into()).expect("valid"));
        let json = serde_json::to_string(&a.digest_only()).expect("json");
        let back: UserData = serde_json::from_str(&json).expect("back");
        assert_eq!(back, a);
        let file: UserData = serde_json::from_str("\"cloud-init.yaml\"").expect("a path");
        assert_eq!(file.file.as_deref(), Some("cloud-init.yaml"));
        assert!(file.content.is_none());
    }
}
