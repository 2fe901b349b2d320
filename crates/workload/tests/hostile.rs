//! A workload cluster's API that redirects: kube-rs follows no redirect, so the bearer
//! token in the kubeconfig never reaches the host the redirect names.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use flightdeck_cloud::{GuestCluster, Ownership};
use flightdeck_workload::{KubeGuest, KubeconfigFile, ProviderIdFormat};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const TOKEN: &str = "workload-token-never-leaves";

/// A server that answers every request with `head` (and counts connections).
async fn serve(head: String) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let head = head.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (format!("http://{addr}"), seen)
}

#[tokio::test]
async fn a_redirecting_workload_api_gets_no_token_and_no_node_is_concluded() {
    let (elsewhere, reached) = serve(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}".into(),
    )
    .await;
    let (hostile, _) = serve(format!(
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: {elsewhere}/api/v1/nodes\r\nContent-Length: 0\r\n\r\n"
    ))
    .await;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("demo.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {{server: '{hostile}'}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user: {{token: {TOKEN}}}\n"
        ),
    )
    .expect("kubeconfig");
    let guest = KubeGuest::new(KubeconfigFile::new(&path), ProviderIdFormat::OpenStack);
    let owner = Ownership {
        cluster: "demo".into(),
        uid: "u1".into(),
    };
    match guest.list_nodes(&owner).await {
        Ok(nodes) => assert_eq!(nodes, None, "nothing is concluded from a redirect"),
        Err(e) => assert!(!e.to_string().contains(TOKEN), "{e}"),
    }
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "the redirect was not followed"
    );
}
