//! Names of clusters, pools and versions, validated on parse.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, de};

/// The longest cluster or pool name. OpenStack tags are limited to 60 characters and
/// flightdeck's longest tag is `flightdeck-machine=<cluster>-<pool>-<n>`.
pub const NAME_MAX_LEN: usize = 24;

/// A DNS label (RFC 1123): lowercase letters, digits and `-`, starting with a letter and
/// not ending with `-`, at most [`NAME_MAX_LEN`] characters.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Name(String);

impl Name {
    /// A name known at compile time to be valid (a default).
    pub(crate) fn known(s: &'static str) -> Self {
        debug_assert!(Name::new(s).is_ok(), "{s:?} is not a valid name");
        Name(s.to_string())
    }

    pub fn new(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Err("a name must not be empty".into());
        }
        if s.len() > NAME_MAX_LEN {
            return Err(format!(
                "name {s:?} is {} characters long; at most {NAME_MAX_LEN} are allowed so that \
                 flightdeck's ownership tags fit OpenStack's 60-character tag limit",
                s.len()
            ));
        }
        let ok_chars = s
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        let first_ok = s.bytes().next().is_some_and(|b| b.is_ascii_lowercase());
        let last_ok = !s.ends_with('-');
        if !(ok_chars && first_ok && last_ok) {
            return Err(format!(
                "name {s:?} is not a DNS label: use lowercase letters, digits and '-', \
                 start with a letter and do not end with '-'"
            ));
        }
        Ok(Name(s.to_string()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Name::new(&s).map_err(de::Error::custom)
    }
}

/// A non-empty string without control characters (flavor, image, network names).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Text(String);

impl Text {
    pub fn new(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Err("must not be empty".into());
        }
        if s.len() > 255 {
            return Err(format!(
                "is {} characters long; at most 255 are allowed",
                s.len()
            ));
        }
        if s.chars().any(char::is_control) {
            return Err(format!("{s:?} contains control characters"));
        }
        Ok(Text(s.to_string()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Text::new(&s).map_err(de::Error::custom)
    }
}

/// A Kubernetes version: `v` followed by `MAJOR.MINOR.PATCH`, e.g. `v1.30.2`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct KubernetesVersion(String);

impl KubernetesVersion {
    pub fn new(s: &str) -> Result<Self, String> {
        let parts: Option<Vec<u32>> = s
            .strip_prefix('v')
            .map(|rest| {
                rest.split('.')
                    .map(|p| p.parse().ok())
                    .collect::<Option<_>>()
            })
            .unwrap_or(None);
        match parts {
            Some(p) if p.len() == 3 => Ok(KubernetesVersion(s.to_string())),
            _ => Err(format!(
                "version {s:?} is not a Kubernetes version like v1.30.2"
            )),
        }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for KubernetesVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        KubernetesVersion::new(&s).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_short_dns_labels() {
        assert!(Name::new("demo-1").is_ok());
        assert!(Name::new("Demo").is_err());
        assert!(Name::new("1demo").is_err());
        assert!(Name::new("demo-").is_err());
        assert!(Name::new(&"a".repeat(NAME_MAX_LEN + 1)).is_err());
    }

    #[test]
    fn versions_look_like_kubernetes_versions() {
        assert!(KubernetesVersion::new("v1.30.2").is_ok());
        assert!(KubernetesVersion::new("1.30.2").is_err());
        assert!(KubernetesVersion::new("v1.30").is_err());
    }
}
