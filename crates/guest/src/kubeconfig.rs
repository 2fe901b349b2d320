//! A kubeconfig for a cluster flightdeck holds the CA of: the cluster's API server by
//! its endpoint, verified against the cluster CA (never `insecure-skip-tls-verify`), and
//! a client certificate the CA signed, all inline (`*-data`, base64 of the PEM), in
//! the `clientcmd.k8s.io` v1 `Config` form kubectl reads. Typed, so that no misspelt
//! field is ever written.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::Serialize;

use crate::pki::{CertAndKey, Secret};

/// kubectl's own mix of cases: `apiVersion`, but `current-context`.
#[derive(Serialize)]
struct Config<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    clusters: [Named<'a, ClusterEntry>; 1],
    users: [Named<'a, UserEntry>; 1],
    contexts: [Named<'a, ContextEntry<'a>>; 1],
    #[serde(rename = "current-context")]
    current_context: &'a str,
}

#[derive(Serialize)]
struct Named<'a, T> {
    name: &'a str,
    #[serde(flatten)]
    value: T,
}

#[derive(Serialize)]
struct ClusterEntry {
    cluster: ClusterInfo,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct ClusterInfo {
    server: String,
    certificate_authority_data: String,
}

#[derive(Serialize)]
struct UserEntry {
    user: UserInfo,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct UserInfo {
    client_certificate_data: String,
    client_key_data: String,
}

#[derive(Serialize)]
struct ContextEntry<'a> {
    context: ContextInfo<'a>,
}

#[derive(Serialize)]
struct ContextInfo<'a> {
    cluster: &'a str,
    user: &'a str,
}

/// Why a kubeconfig could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cluster {cluster}: cannot write its kubeconfig: {message}")]
pub struct KubeconfigError {
    pub cluster: String,
    pub message: String,
}

/// The kubeconfig of `cluster` for `user`: API server `server` (an `https://` URL),
/// trusted through `ca_pem`, authenticated by `client`. Its context is `<user>@<cluster>`.
pub fn kubeconfig(
    cluster: &str,
    server: &str,
    ca_pem: &str,
    user: &str,
    client: &CertAndKey,
) -> Result<Secret, KubeconfigError> {
    if !server.starts_with("https://") {
        return Err(KubeconfigError {
            cluster: cluster.to_string(),
            message: format!("server {server:?} is not an https:// URL"),
        });
    }
    let context = format!("{user}@{cluster}");
    let config = Config {
        api_version: "v1",
        kind: "Config",
        clusters: [Named {
            name: cluster,
            value: ClusterEntry {
                cluster: ClusterInfo {
                    server: server.to_string(),
                    certificate_authority_data: B64.encode(ca_pem),
                },
            },
        }],
        users: [Named {
            name: user,
            value: UserEntry {
                user: UserInfo {
                    client_certificate_data: B64.encode(&client.cert_pem),
                    client_key_data: B64.encode(client.key_pem.expose()),
                },
            },
        }],
        contexts: [Named {
            name: &context,
            value: ContextEntry {
                context: ContextInfo { cluster, user },
            },
        }],
        current_context: &context,
    };
    let mut text = yaml_serde::to_string(&config).map_err(|e| KubeconfigError {
        cluster: cluster.to_string(),
        message: e.to_string(),
    })?;
    let secret = Secret::new(std::mem::take(&mut text));
    Ok(secret)
}

/// `unix_secs` as an RFC 3339 time in UTC (`2026-01-01T00:00:00Z`), for messages; the
/// number itself if it is out of range.
pub fn utc(unix_secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix_secs)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{unix_secs} (Unix seconds)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClusterPki;

    #[test]
    fn a_kubeconfig_trusts_the_cluster_ca_and_carries_the_client_certificate() {
        let pki = ClusterPki::generate("demo", 1_767_225_600).expect("pki");
        let client = pki
            .issue_client("alice", &["kubeadm:cluster-admins"], 1_767_225_600, 3600)
            .expect("client");
        let text = kubeconfig(
            "demo",
            "https://10.0.0.10:6443",
            &pki.cluster_ca.cert_pem,
            "alice",
            &client,
        )
        .expect("kubeconfig");
        let v: yaml_serde::Value = yaml_serde::from_str(text.expose()).expect("YAML");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["kind"], "Config");
        assert_eq!(v["current-context"], "alice@demo");
        let cluster = &v["clusters"][0];
        assert_eq!(cluster["name"], "demo");
        assert_eq!(cluster["cluster"]["server"], "https://10.0.0.10:6443");
        let ca = cluster["cluster"]["certificate-authority-data"]
            .as_str()
            .expect("CA data");
        assert_eq!(
            B64.decode(ca).expect("base64"),
            pki.cluster_ca.cert_pem.as_bytes()
        );
        assert!(cluster["cluster"].get("insecure-skip-tls-verify").is_none());
        let user = &v["users"][0]["user"];
        let key = user["client-key-data"].as_str().expect("key data");
        assert_eq!(
            B64.decode(key).expect("base64"),
            client.key_pem.expose().as_bytes()
        );
        assert_eq!(v["contexts"][0]["context"]["cluster"], "demo");
        assert_eq!(v["contexts"][0]["context"]["user"], "alice");
        assert!(!format!("{text:?}").contains("PRIVATE"));
    }

    #[test]
    fn a_server_that_is_not_https_is_refused() {
        let pki = ClusterPki::generate("demo", 1_767_225_600).expect("pki");
        let client = pki
            .issue_client("alice", &[], 1_767_225_600, 3600)
            .expect("client");
        let e = kubeconfig("demo", "http://10.0.0.10:6443", "", "alice", &client)
            .expect_err("refused")
            .to_string();
        assert!(e.contains("cluster demo") && e.contains("https"), "{e}");
    }
}
