//! Kubeconfigs: errors name the file or Secret and never quote it; a kubeconfig not
//! written yet means "not reachable yet".

use crate::support;

use std::io::Write;

use flightdeck_cloud::ErrorClass;
use flightdeck_kubevirt::{
    KubeVirtCloud, KubeconfigFile, KubeconfigSecret, WorkloadClients, WorkloadFn,
};
use serde_json::json;
use support::{Answer, owner, seen, status};

const TOKEN: &str = "s3cr3t-t0ken-value";

fn kubeconfig() -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
users:
- name: u
  user:
    token: {TOKEN}
"
    )
}

fn file(content: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(content.as_bytes()).expect("write");
    f
}

#[tokio::test]
async fn a_missing_infra_kubeconfig_is_a_permanent_error_naming_the_file() {
    let e = KubeVirtCloud::from_kubeconfig(
        "/nonexistent/infra.kubeconfig",
        "infra",
        WorkloadFn::new(|_| Ok(None)),
    )
    .await
    .expect_err("no file");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(e.message.contains("/nonexistent/infra.kubeconfig"), "{e}");
}

#[tokio::test]
async fn a_malformed_kubeconfig_names_the_file_and_never_quotes_it() {
    let f = file(&format!(
        "apiVersion: v1\nusers:\n- name: u\n  user: {{token: {TOKEN}\n  :: [\n"
    ));
    let e = KubeVirtCloud::from_kubeconfig(f.path(), "infra", WorkloadFn::new(|_| Ok(None)))
        .await
        .expect_err("malformed");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(e.message.contains(&f.path().display().to_string()), "{e}");
    assert!(!e.to_string().contains(TOKEN), "{e}");
}

#[tokio::test]
async fn a_kubeconfig_without_a_server_names_the_file() {
    let f = file(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {}}]\nusers: [{name: u, user: {}}]\n",
    );
    let e = KubeVirtCloud::from_kubeconfig(f.path(), "infra", WorkloadFn::new(|_| Ok(None)))
        .await
        .expect_err("no server");
    assert!(e.message.contains(&f.path().display().to_string()), "{e}");
}

#[tokio::test]
async fn a_good_infra_kubeconfig_gives_a_provider_in_its_namespace() {
    let f = file(&kubeconfig());
    let c = KubeVirtCloud::from_kubeconfig(f.path(), "clusters", WorkloadFn::new(|_| Ok(None)))
        .await
        .expect("provider");
    assert_eq!(c.namespace(), "clusters");
    assert_eq!(c.infra().default_namespace(), "clusters");
    assert!(!format!("{c:?}").contains(TOKEN));
}

#[tokio::test]
async fn a_workload_kubeconfig_file_not_written_yet_is_not_reachable_yet() {
    let w = KubeconfigFile::new("/nonexistent/workload.kubeconfig");
    assert!(w.client(&owner()).await.expect("no error").is_none());
    let f = file(&kubeconfig());
    let w = KubeconfigFile::new(f.path());
    assert!(w.client(&owner()).await.expect("client").is_some());
    let f = file("::: not yaml [");
    let e = KubeconfigFile::new(f.path())
        .client(&owner())
        .await
        .err()
        .expect("malformed");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(e.message.contains(&f.path().display().to_string()), "{e}");
}

fn secret(data: serde_json::Value) -> Answer {
    Answer::Json(
        200,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "demo-kubeconfig", "namespace": "infra", "resourceVersion": "7"},
               "data": data}),
    )
}

fn b64(s: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = s.as_bytes();
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test]
async fn a_kubeconfig_secret_is_read_from_its_value_key() {
    let (infra, log) = support::client(|_| secret(json!({"value": b64(&kubeconfig())})));
    let w = KubeconfigSecret::new(infra, "infra", "demo-kubeconfig");
    assert!(w.client(&owner()).await.expect("client").is_some());
    assert!(w.client(&owner()).await.expect("client").is_some());
    let sent = seen(&log);
    assert_eq!(
        sent[0].path,
        "/api/v1/namespaces/infra/secrets/demo-kubeconfig"
    );
    assert_eq!(
        sent.len(),
        2,
        "read each time, the client is built once per resourceVersion"
    );
}

#[tokio::test]
async fn a_kubeconfig_secret_not_written_yet_is_not_reachable_yet() {
    let (infra, _) =
        support::client(|_| status(404, "NotFound", "secrets \"demo-kubeconfig\" not found"));
    let w = KubeconfigSecret::new(infra, "infra", "demo-kubeconfig");
    assert!(w.client(&owner()).await.expect("no error").is_none());
}

#[tokio::test]
async fn a_kubeconfig_secret_without_value_or_with_garbage_is_permanent_and_not_quoted() {
    let (infra, _) = support::client(|_| secret(json!({"other": b64("x")})));
    let e = KubeconfigSecret::new(infra, "infra", "demo-kubeconfig")
        .client(&owner())
        .await
        .err()
        .expect("no value");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(e.message.contains("Secret infra/demo-kubeconfig"), "{e}");
    assert!(e.message.contains("\"value\""), "{e}");

    let garbage = format!("users:\n- name: u\n  user: {{token: {TOKEN}\n  :: [\n");
    let (infra, _) = support::client(move |_| secret(json!({"value": b64(&garbage)})));
    let e = KubeconfigSecret::new(infra, "infra", "demo-kubeconfig")
        .client(&owner())
        .await
        .err()
        .expect("garbage");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(e.message.contains("YAML error at line"), "{e}");
    assert!(!e.to_string().contains(TOKEN), "{e}");
}
