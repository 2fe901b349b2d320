//! `spec.provider.opennebula`: the templates and images a cluster's machines are made
//! from, and the control-plane endpoint.
//!
//! Templates and images are **content-addressed** (F1): the object flightdeck registers
//! in OpenNebula is named `<name>-<hash of content>`, so two clusters that declare the
//! same name with the same content share one object, and two that declare different
//! content under one name get two objects and never fight over either.

use std::fmt;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use crate::names::{Name, Text};

/// The most bytes a template or image body may have.
pub const BODY_MAX_LEN: usize = 16 * 1024;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OpenNebulaProvider {
    /// The XML-RPC endpoint (`http://HOST:2633/RPC2`). Absent: `$ONE_XMLRPC`, or the
    /// built-in simulator when flightdeck runs on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xmlrpc: Option<Text>,
    /// The control plane's address (a VIP that the control-plane machines hold, e.g. with
    /// kube-vip). flightdeck does not manage it; kubeconfigs point at it.
    pub endpoint: Text,
    #[serde(default)]
    pub images: Vec<ImageSpec>,
    pub templates: Vec<TemplateSpec>,
}

/// An image flightdeck registers (`one.image.allocate`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageSpec {
    pub name: Name,
    /// The image template, e.g. `PATH = "https://…/ubuntu.qcow2"` and `TYPE = "OS"`.
    pub content: Body,
    /// The image datastore's ID.
    #[serde(default = "default_datastore")]
    pub datastore: u32,
}

fn default_datastore() -> u32 {
    1
}

/// A VM template flightdeck registers (`one.template.allocate`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TemplateSpec {
    pub name: Name,
    /// The template body: `CPU`, `MEMORY`, `NIC`, `CONTEXT`, ... without `NAME`, which
    /// flightdeck sets.
    pub content: Body,
    /// One of `images`: flightdeck adds `DISK = [ IMAGE = "<its registered name>" ]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Name>,
}

/// A template or image body in OpenNebula's template syntax. Its syntax is checked where
/// it is used; here only that it is non-empty, bounded, free of NUL and of `NAME`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Body(String);

impl Body {
    pub fn new(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Err("must not be empty".into());
        }
        if s.len() > BODY_MAX_LEN {
            return Err(format!(
                "is {} bytes long; at most {BODY_MAX_LEN} are allowed",
                s.len()
            ));
        }
        if s.contains('\0') {
            return Err("contains a NUL character".into());
        }
        if let Some(line) = s.lines().map(str::trim_start).find(|l| {
            l.split(['=', ' ', '\t'])
                .next()
                .is_some_and(|k| k.eq_ignore_ascii_case("NAME"))
        }) {
            return Err(format!(
                "sets NAME ({line:?}); flightdeck names the object after its content"
            ));
        }
        Ok(Body(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Body::new(&s).map_err(de::Error::custom)
    }
}

/// The name an object with `content` is registered under: `<name>-<10 hex digits>`.
pub fn content_addressed_name(name: &str, content: &str) -> String {
    let h = crate::fnv1a(content.as_bytes());
    format!("{name}-{:010x}", h >> 24)
}

impl OpenNebulaProvider {
    /// Rules across the block, every one broken: the field path (below
    /// `spec.provider.opennebula`) and the problem.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for (i, image) in self.images.iter().enumerate() {
            if !names.insert(image.name.as_str()) {
                out.push((
                    format!("images[{i}].name"),
                    format!("image name {:?} is used twice", image.name.as_str()),
                ));
            }
        }
        let mut templates = std::collections::BTreeSet::new();
        for (i, t) in self.templates.iter().enumerate() {
            if !templates.insert(t.name.as_str()) {
                out.push((
                    format!("templates[{i}].name"),
                    format!("template name {:?} is used twice", t.name.as_str()),
                ));
            }
            if let Some(image) = &t.image
                && !names.contains(image.as_str())
            {
                out.push((
                    format!("templates[{i}].image"),
                    format!(
                        "names image {:?}, which is not one of spec.provider.opennebula.images",
                        image.as_str()
                    ),
                ));
            }
        }
        if self.templates.is_empty() {
            out.push((
                "templates".into(),
                "at least one template is needed to make machines from".into(),
            ));
        }
        out
    }

    pub fn template(&self, name: &str) -> Option<&TemplateSpec> {
        self.templates.iter().find(|t| t.name.as_str() == name)
    }

    pub fn image(&self, name: &str) -> Option<&ImageSpec> {
        self.images.iter().find(|t| t.name.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_content_gets_the_same_name_and_other_content_another() {
        let a = content_addressed_name("master", "CPU = \"2\"\n");
        assert_eq!(a, content_addressed_name("master", "CPU = \"2\"\n"));
        assert_ne!(a, content_addressed_name("master", "CPU = \"4\"\n"));
        assert!(a.starts_with("master-") && a.len() == "master-".len() + 10);
    }

    #[test]
    fn a_body_may_not_name_itself() {
        assert!(Body::new("CPU = 1\nNAME = \"x\"").is_err());
        assert!(Body::new("  name=\"x\"").is_err());
        assert!(Body::new("CPU = 1\nNAMESPACE = \"x\"").is_ok());
        assert!(Body::new(" \n").is_err());
    }
}
