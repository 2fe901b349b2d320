//! A machine's user data as kubeadm would read it: the simulator's own reading (YAML,
//! X.509 with `x509-parser`), sharing no code with the flightdeck that wrote it.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;

use super::KUBEADM_CONFIG;

/// A machine's kubeadm data as read.
pub(super) struct Boot {
    pub(super) node_name: String,
    pub(super) control_plane: bool,
    pub(super) role: Role,
}

pub(super) enum Role {
    Init {
        cluster_name: String,
        endpoint: String,
        ca: InitCa,
    },
    Join {
        endpoint: String,
        token: String,
        hashes: Vec<String>,
        /// A control-plane join: the hash of the CA it brings, if any.
        control_plane_ca: Option<Option<String>>,
    },
}

/// The cluster CA an init brings: what the API server's certificates are made from.
pub(super) struct InitCa {
    pub(super) hash: String,
    pub(super) cert_pem: String,
    pub(super) key_pem: String,
}

/// `None`: not kubeadm's data. `Some(Err)`: kubeadm's, but broken (why).
pub(super) fn read(data: &str) -> Option<Result<Boot, String>> {
    if !data.starts_with("#cloud-config") {
        return None;
    }
    let doc: Value = yaml_serde::from_str(data).ok()?;
    let files: BTreeMap<String, String> = doc
        .get("write_files")
        .and_then(Value::as_array)
        .map(|fs| {
            fs.iter()
                .filter_map(|f| {
                    let path = f.get("path")?.as_str()?;
                    let content = f.get("content")?.as_str()?;
                    let content = match f.get("encoding").and_then(Value::as_str) {
                        Some("b64" | "base64") => {
                            String::from_utf8(B64.decode(content).ok()?).ok()?
                        }
                        _ => content.to_string(),
                    };
                    Some((path.to_string(), content))
                })
                .collect()
        })
        .unwrap_or_default();
    let config = files.get(KUBEADM_CONFIG)?;
    Some(read_kubeadm(data, config, &files))
}

fn read_kubeadm(
    cloud_config: &str,
    config: &str,
    files: &BTreeMap<String, String>,
) -> Result<Boot, String> {
    let mut init = None;
    let mut cluster = None;
    let mut join = None;
    for doc in yaml_serde::Deserializer::from_str(config) {
        let v: Value = serde::Deserialize::deserialize(doc)
            .map_err(|e| format!("kubeadm's configuration does not parse: {e}"))?;
        let api = v
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !matches!(api, "kubeadm.k8s.io/v1beta3" | "kubeadm.k8s.io/v1beta4") {
            return Err(format!("apiVersion {api:?} is not one kubeadm reads"));
        }
        match v.get("kind").and_then(Value::as_str) {
            Some("InitConfiguration") => init = Some(v),
            Some("ClusterConfiguration") => cluster = Some(v),
            Some("JoinConfiguration") => join = Some(v),
            other => return Err(format!("kind {other:?} is not a kubeadm configuration")),
        }
    }
    let command = if init.is_some() {
        "kubeadm init"
    } else {
        "kubeadm join"
    };
    if !cloud_config.contains(&format!("{command} --config {KUBEADM_CONFIG}")) {
        return Err(format!(
            "runcmd does not run {command} --config {KUBEADM_CONFIG}"
        ));
    }
    let name_of = |v: &Value| {
        v.pointer("/nodeRegistration/name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| "nodeRegistration.name is missing".to_string())
    };
    let ca = || -> Option<Result<String, String>> {
        let cert = files.get("/etc/kubernetes/pki/ca.crt")?;
        if !files.contains_key("/etc/kubernetes/pki/ca.key") {
            return Some(Err("ca.crt without ca.key".into()));
        }
        Some(ca_hash(cert))
    };
    match (init, cluster, join) {
        (Some(init), Some(cluster), None) => {
            let hash = ca().unwrap_or_else(|| Err("kubeadm init with no CA given".into()))?;
            let file = |path: &str| files.get(path).cloned().unwrap_or_default();
            Ok(Boot {
                node_name: name_of(&init)?,
                control_plane: true,
                role: Role::Init {
                    cluster_name: str_of(&cluster, "/clusterName")?,
                    endpoint: str_of(&cluster, "/controlPlaneEndpoint")?,
                    ca: InitCa {
                        hash,
                        cert_pem: file("/etc/kubernetes/pki/ca.crt"),
                        key_pem: file("/etc/kubernetes/pki/ca.key"),
                    },
                },
            })
        }
        (None, None, Some(join)) => {
            let control_plane = join.get("controlPlane").is_some_and(|c| !c.is_null());
            let hashes = join
                .pointer("/discovery/bootstrapToken/caCertHashes")
                .and_then(Value::as_array)
                .map(|h| h.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default();
            let control_plane_ca = control_plane.then(|| ca().and_then(Result::ok));
            Ok(Boot {
                node_name: name_of(&join)?,
                control_plane,
                role: Role::Join {
                    endpoint: str_of(&join, "/discovery/bootstrapToken/apiServerEndpoint")?,
                    token: str_of(&join, "/discovery/bootstrapToken/token")?,
                    hashes,
                    control_plane_ca,
                },
            })
        }
        _ => Err("kubeadm's configuration is neither an init (Init and Cluster configurations) nor a join".into()),
    }
}

fn str_of(v: &Value, pointer: &str) -> Result<String, String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "{} is missing",
                pointer.trim_start_matches('/').replace('/', ".")
            )
        })
}

/// kubeadm's discovery hash of the CA certificate `pem`.
fn ca_hash(pem: &str) -> Result<String, String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| format!("ca.crt is not PEM: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("ca.crt is not an X.509 certificate: {e}"))?;
    if !cert.is_ca() {
        return Err("ca.crt is not a CA certificate".into());
    }
    let spki = cert.tbs_certificate.subject_pki.raw;
    let digest = ring::digest::digest(&ring::digest::SHA256, spki);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("sha256:{hex}"))
}
