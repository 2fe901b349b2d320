//! `clouds.yaml`: where OpenStack clients keep credentials, and how flightdeck picks an
//! entry from it.
//!
//! The file is looked for where openstacksdk looks, first found wins:
//! `$OS_CLIENT_CONFIG_FILE`, `./clouds.yaml`, `~/.config/openstack/clouds.yaml`,
//! `/etc/openstack/clouds.yaml`. The entry is the one the caller names, or `$OS_CLOUD`
//! when it names none.
//!
//! The password never leaves this module in readable form except to build the Keystone
//! request: [`Password`]'s `Debug` prints `<redacted>` and it has no `Display`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A password: readable only inside this crate, redacted in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn new(p: impl Into<String>) -> Self {
        Password(p.into())
    }
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// What Keystone v3 password authentication with a project scope needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// Keystone's URL, with or without the trailing `/v3`.
    pub auth_url: String,
    pub username: String,
    pub password: Password,
    /// The project to scope the token to: by name (with its domain) or by id.
    pub project: Scope,
    /// The user's domain; `Default` unless the entry says otherwise.
    pub user_domain: Domain,
}

/// A project named within its domain, or given by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Name { name: String, domain: Domain },
    Id(String),
}

/// A Keystone domain by name or by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Domain {
    Name(String),
    Id(String),
}

impl Default for Domain {
    fn default() -> Self {
        Domain::Name("Default".into())
    }
}

/// Which endpoint of a service to use when the catalog lists several.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Interface {
    #[default]
    Public,
    Internal,
    Admin,
}

impl Interface {
    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Public => "public",
            Interface::Internal => "internal",
            Interface::Admin => "admin",
        }
    }
    /// Reads `public`, `internal`, `admin`, and the old `publicURL` spellings.
    pub fn parse(s: &str) -> Option<Interface> {
        match s.trim_end_matches("URL") {
            "public" => Some(Interface::Public),
            "internal" => Some(Interface::Internal),
            "admin" => Some(Interface::Admin),
            _ => None,
        }
    }
}

/// One entry of `clouds.yaml`, checked: everything authentication needs is there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudEntry {
    /// The entry's name (its key under `clouds:`).
    pub name: String,
    /// The file it came from, for error messages; empty when built in code.
    pub source: PathBuf,
    pub auth: Credentials,
    pub region_name: Option<String>,
    pub interface: Interface,
    /// A PEM bundle of extra CA certificates to trust (`cacert`).
    pub cacert: Option<PathBuf>,
    /// `verify: false` turns TLS certificate checks off (test clouds only).
    pub verify: bool,
}

impl CloudEntry {
    /// An entry built in code (no file), e.g. for a simulator that prints its own.
    pub fn new(name: impl Into<String>, auth: Credentials) -> Self {
        CloudEntry {
            name: name.into(),
            source: PathBuf::new(),
            auth,
            region_name: None,
            interface: Interface::Public,
            cacert: None,
            verify: true,
        }
    }

    /// The entry `name` (or `$OS_CLOUD` when `None`) of the first `clouds.yaml` on the
    /// standard search path.
    pub fn load(name: Option<&str>) -> Result<CloudEntry, ConfigError> {
        let os_cloud = std::env::var("OS_CLOUD").ok().filter(|s| !s.is_empty());
        load_from(&search_path(), name, os_cloud.as_deref())
    }
}

/// Why no usable entry came out of `clouds.yaml`. Every variant names the file, and the
/// entry and field where there is one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("no clouds.yaml found; looked in {}", display_paths(.searched))]
    NoFile { searched: Vec<PathBuf> },
    #[error("cannot read {}: {why}", .path.display())]
    Read { path: PathBuf, why: String },
    #[error("{} is not a valid clouds.yaml: {why}", .path.display())]
    Parse { path: PathBuf, why: String },
    #[error("no cloud named; pass one or set OS_CLOUD (entries in {}: {})", .path.display(), .available.join(", "))]
    NoCloudChosen {
        path: PathBuf,
        available: Vec<String>,
    },
    #[error("{} has no cloud entry {cloud:?} (it has: {})", .path.display(), .available.join(", "))]
    NoSuchCloud {
        path: PathBuf,
        cloud: String,
        available: Vec<String>,
    },
    #[error("{}: cloud {cloud:?} is missing {field}", .path.display())]
    MissingField {
        path: PathBuf,
        cloud: String,
        field: &'static str,
    },
    #[error("{}: cloud {cloud:?} has an invalid {field}: {why}", .path.display())]
    Invalid {
        path: PathBuf,
        cloud: String,
        field: &'static str,
        why: String,
    },
}

fn display_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where `clouds.yaml` is looked for, in order.
pub fn search_path() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if let Some(p) = std::env::var_os("OS_CLIENT_CONFIG_FILE").filter(|p| !p.is_empty()) {
        paths.push(PathBuf::from(p));
    }
    paths.push(PathBuf::from("clouds.yaml"));
    if let Some(home) = std::env::var_os("HOME").filter(|p| !p.is_empty()) {
        paths.push(Path::new(&home).join(".config/openstack/clouds.yaml"));
    }
    paths.push(PathBuf::from("/etc/openstack/clouds.yaml"));
    paths
}

/// The entry `name` (else `os_cloud`) of the first existing file among `paths`.
pub fn load_from(
    paths: &[PathBuf],
    name: Option<&str>,
    os_cloud: Option<&str>,
) -> Result<CloudEntry, ConfigError> {
    let Some(path) = paths.iter().find(|p| p.is_file()) else {
        return Err(ConfigError::NoFile {
            searched: paths.to_vec(),
        });
    };
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.clone(),
        why: e.to_string(),
    })?;
    parse(&text, path, name.or(os_cloud))
}

/// The entry `name` of a `clouds.yaml` text; `source` is only used in errors.
pub fn parse(text: &str, source: &Path, name: Option<&str>) -> Result<CloudEntry, ConfigError> {
    let file: RawFile = yaml_serde::from_str(text).map_err(|e| ConfigError::Parse {
        path: source.to_path_buf(),
        why: e.to_string(),
    })?;
    let available = || file.clouds.keys().cloned().collect::<Vec<_>>();
    let Some(name) = name else {
        return Err(ConfigError::NoCloudChosen {
            path: source.to_path_buf(),
            available: available(),
        });
    };
    let Some(raw) = file.clouds.get(name) else {
        return Err(ConfigError::NoSuchCloud {
            path: source.to_path_buf(),
            cloud: name.to_string(),
            available: available(),
        });
    };
    check(raw, source, name)
}

#[derive(Deserialize)]
struct RawFile {
    #[serde(default)]
    clouds: BTreeMap<String, RawCloud>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawCloud {
    auth: Option<RawAuth>,
    auth_type: Option<String>,
    region_name: Option<String>,
    interface: Option<String>,
    identity_api_version: Option<yaml_serde::Value>,
    cacert: Option<PathBuf>,
    verify: Option<bool>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawAuth {
    auth_url: Option<String>,
    username: Option<String>,
    /// Any scalar: a numeric password must neither fail to parse nor be quoted in a
    /// type error.
    password: Option<yaml_serde::Value>,
    project_name: Option<String>,
    project_id: Option<String>,
    user_domain_name: Option<String>,
    user_domain_id: Option<String>,
    project_domain_name: Option<String>,
    project_domain_id: Option<String>,
}

/// A YAML scalar as text (`1234` and `true` as written); `None` for anything else.
fn scalar(v: &yaml_serde::Value) -> Option<String> {
    match v {
        yaml_serde::Value::String(s) => Some(s.clone()),
        yaml_serde::Value::Number(n) => Some(n.to_string()),
        yaml_serde::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn check(raw: &RawCloud, source: &Path, cloud: &str) -> Result<CloudEntry, ConfigError> {
    let missing = |field| ConfigError::MissingField {
        path: source.to_path_buf(),
        cloud: cloud.to_string(),
        field,
    };
    let invalid = |field, why: String| ConfigError::Invalid {
        path: source.to_path_buf(),
        cloud: cloud.to_string(),
        field,
        why,
    };
    if let Some(t) = raw.auth_type.as_deref()
        && !matches!(t, "password" | "v3password")
    {
        return Err(invalid(
            "auth_type",
            format!("{t:?} is not supported (only password)"),
        ));
    }
    if let Some(v) = &raw.identity_api_version {
        let v = match v {
            yaml_serde::Value::Number(n) => n.to_string(),
            yaml_serde::Value::String(s) => s.clone(),
            _ => String::new(),
        };
        if v != "3" && v != "3.0" {
            return Err(invalid(
                "identity_api_version",
                format!("{v:?}: only Keystone v3 is supported"),
            ));
        }
    }
    let auth = raw.auth.as_ref().ok_or_else(|| missing("auth"))?;
    let given = |v: &Option<String>| v.as_ref().filter(|s| !s.is_empty()).cloned();
    let auth_url = given(&auth.auth_url).ok_or_else(|| missing("auth.auth_url"))?;
    if !(auth_url.starts_with("http://") || auth_url.starts_with("https://")) {
        return Err(invalid(
            "auth.auth_url",
            format!("{:?} is not an http(s) URL", without_userinfo(&auth_url)),
        ));
    }
    if without_userinfo(&auth_url) != auth_url {
        // Never echoed: the part before `@` is a user name and, likely, a password.
        return Err(invalid(
            "auth.auth_url",
            format!(
                "{:?} carries credentials before its host (user:password@); give them as auth.username and auth.password",
                without_userinfo(&auth_url)
            ),
        ));
    }
    let username = given(&auth.username).ok_or_else(|| missing("auth.username"))?;
    let password = auth
        .password
        .as_ref()
        .and_then(scalar)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| missing("auth.password"))?;
    let domain = |id: &Option<String>, name: &Option<String>| match (given(id), given(name)) {
        (Some(id), _) => Domain::Id(id),
        (None, Some(name)) => Domain::Name(name),
        (None, None) => Domain::default(),
    };
    let project = match (given(&auth.project_id), given(&auth.project_name)) {
        (Some(id), _) => Scope::Id(id),
        (None, Some(name)) => Scope::Name {
            name,
            domain: domain(&auth.project_domain_id, &auth.project_domain_name),
        },
        (None, None) => return Err(missing("auth.project_name")),
    };
    let interface = match raw.interface.as_deref() {
        None => Interface::Public,
        Some(s) => Interface::parse(s).ok_or_else(|| {
            invalid(
                "interface",
                format!("{s:?} (use public, internal or admin)"),
            )
        })?,
    };
    Ok(CloudEntry {
        name: cloud.to_string(),
        source: source.to_path_buf(),
        auth: Credentials {
            auth_url,
            username,
            password: Password(password),
            project,
            user_domain: domain(&auth.user_domain_id, &auth.user_domain_name),
        },
        region_name: given(&raw.region_name),
        interface,
        cacert: raw.cacert.clone(),
        verify: raw.verify.unwrap_or(true),
    })
}

/// `url` with anything between its scheme and an `@` before its path cut out (a user
/// name and password), so that it can be shown.
pub fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
#[path = "clouds_tests.rs"]
mod tests;
