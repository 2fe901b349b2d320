//! The simulated Kubernetes clusters over HTTP: each cluster under its own
//! `/clusters/{cluster}` prefix answers discovery, lists and errors as the API server
//! does, and a watch streams the events that happen while it is open.

use std::sync::Arc;
use std::time::Duration;

use flightdeck_cloud::{SimClock, Timestamp};
use flightdeck_sim::{INFRA_CLUSTER, SimCloud, SimConfig};
use flightdeck_sim_http::{KUBE_BODY_MAX_BYTES, serve_kubernetes};
use serde_json::{Value, json};
use tokio::net::TcpListener;

struct Kube {
    base: String,
    http: reqwest::Client,
}

async fn start() -> Kube {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cloud = Arc::new(SimCloud::new(
        SimConfig::default(),
        7,
        SimClock::new(Timestamp::SIM_EPOCH),
    ));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(serve_kubernetes(cloud, listener));
    Kube {
        base: format!("http://{addr}"),
        http: reqwest::Client::new(),
    }
}

impl Kube {
    fn url(&self, cluster: &str, path: &str) -> String {
        format!("{}/clusters/{cluster}{path}", self.base)
    }

    /// Status, content type and body as JSON.
    async fn get(&self, cluster: &str, path: &str) -> (u16, String, Value) {
        let resp = self
            .http
            .get(self.url(cluster, path))
            .bearer_auth("any-token")
            .send()
            .await
            .expect("send");
        reply(resp).await
    }

    async fn post(&self, cluster: &str, path: &str, body: &Value) -> (u16, String, Value) {
        let resp = self
            .http
            .post(self.url(cluster, path))
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("send");
        reply(resp).await
    }
}

async fn reply(resp: reqwest::Response) -> (u16, String, Value) {
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, content_type, body)
}

const VMS: &str = "/apis/kubevirt.io/v1/namespaces/default/virtualmachines";

fn vm(name: &str) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {
                "flightdeck.dev/cluster": "demo",
                "flightdeck.dev/uid": "test",
                "flightdeck.dev/role": "machine",
                "flightdeck.dev/machine": "workers-1",
            },
        },
        "spec": {
            "runStrategy": "Always",
            "template": {
                "metadata": {"labels": {
                    "flightdeck.dev/cluster": "demo",
                    "flightdeck.dev/uid": "test",
                    "flightdeck.dev/role": "machine",
                    "flightdeck.dev/machine": "workers-1",
                }},
                "spec": {
                    "evictionStrategy": "External",
                    "domain": {"devices": {}},
                },
            },
        },
    })
}

#[tokio::test]
async fn discovery_is_served_under_the_clusters_prefix() {
    let k = start().await;
    let (status, content_type, body) = k.get(INFRA_CLUSTER, "/api").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    assert_eq!(body["kind"], "APIVersions");
    assert!(
        body["versions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("v1"))),
        "{body}"
    );
    let (status, _, body) = k.get(INFRA_CLUSTER, "/apis").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["kind"], "APIGroupList");
    let groups: Vec<&str> = body["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert!(groups.contains(&"kubevirt.io"), "{groups:?}");
}

#[tokio::test]
async fn a_list_answers_the_clusters_objects() {
    let k = start().await;
    let (status, _, body) = k.get(INFRA_CLUSTER, "/api/v1/nodes").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["kind"], "NodeList");
    assert!(body["items"].is_array(), "{body}");
    assert!(
        body["metadata"]["resourceVersion"].is_string(),
        "a list carries the resourceVersion to watch from: {body}"
    );
}

#[tokio::test]
async fn a_missing_object_answers_404_with_a_status() {
    let k = start().await;
    let (status, content_type, body) = k
        .get(INFRA_CLUSTER, "/api/v1/namespaces/default/pods/nope")
        .await;
    assert_eq!(status, 404, "{body}");
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["status"], "Failure");
    assert_eq!(body["reason"], "NotFound");
    assert_eq!(body["code"], 404);
}

#[tokio::test]
async fn paths_outside_a_cluster_answer_404_with_a_status() {
    let k = start().await;
    let resp = k
        .http
        .get(format!("{}/api/v1/nodes", k.base))
        .send()
        .await
        .expect("send");
    let (status, _, body) = reply(resp).await;
    assert_eq!(status, 404);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["code"], 404);
}

#[tokio::test]
async fn an_unknown_workload_cluster_answers_503() {
    let k = start().await;
    let (status, _, body) = k.get("no-such-cluster", "/api/v1/nodes").await;
    assert_eq!(status, 503, "{body}");
}

#[tokio::test]
async fn a_body_over_the_limit_answers_413_with_a_status() {
    let k = start().await;
    let resp = k
        .http
        .post(k.url(INFRA_CLUSTER, VMS))
        .header("Content-Type", "application/json")
        .body(vec![b' '; KUBE_BODY_MAX_BYTES + 1])
        .send()
        .await
        .expect("send");
    let (status, _, body) = reply(resp).await;
    assert_eq!(status, 413);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "RequestEntityTooLarge");
}

#[tokio::test]
async fn a_watch_streams_an_object_created_while_it_is_open() {
    let k = start().await;
    let (status, _, list) = k.get(INFRA_CLUSTER, VMS).await;
    assert_eq!(status, 200, "{list}");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("a list's resourceVersion")
        .to_string();
    let mut watch = k
        .http
        .get(k.url(
            INFRA_CLUSTER,
            &format!("{VMS}?watch=true&resourceVersion={rv}&timeoutSeconds=10"),
        ))
        .send()
        .await
        .expect("watch");
    assert_eq!(watch.status().as_u16(), 200);
    // Headers arrived before anything happened: the answer streams.
    let (status, _, created) = k.post(INFRA_CLUSTER, VMS, &vm("watched-1")).await;
    assert_eq!(status, 201, "{created}");

    let mut buf = Vec::new();
    let event = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let chunk = watch.chunk().await.expect("chunk").expect("stream open");
            buf.extend_from_slice(&chunk);
            if let Some(end) = buf.iter().position(|b| *b == b'\n') {
                return serde_json::from_slice::<Value>(&buf[..end]).expect("event json");
            }
        }
    })
    .await
    .expect("an event within 5 s");
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(event["object"]["kind"], "VirtualMachine");
    assert_eq!(event["object"]["metadata"]["name"], "watched-1");
}

#[tokio::test]
async fn a_watch_ends_at_its_timeout() {
    let k = start().await;
    let (_, _, list) = k.get(INFRA_CLUSTER, VMS).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let started = std::time::Instant::now();
    let watch = k
        .http
        .get(k.url(
            INFRA_CLUSTER,
            &format!("{VMS}?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
        ))
        .send()
        .await
        .expect("watch");
    assert_eq!(watch.status().as_u16(), 200);
    let body = tokio::time::timeout(Duration::from_secs(5), watch.text())
        .await
        .expect("the watch ends")
        .expect("body");
    assert!(body.trim().is_empty(), "nothing happened: {body}");
    assert!(started.elapsed() >= Duration::from_millis(900));
}
