//! The daemon in process: `serve_until` on a free port, driven over HTTP. These tests
//! speak of what a user sees: clusters become Ready, a slow cloud holds up only its own
//! cluster, tokens guard the API.

use std::path::{Path, PathBuf};
use std::time::Duration;

use flightdeck_daemon::types::{ApplyResult, ClusterList, EventList};
use flightdeck_daemon::{ServeOptions, serve_until};
use tokio::sync::oneshot;

#[path = "daemon/contract.rs"]
mod contract;

struct Daemon {
    url: String,
    admin: String,
    viewer: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
    http: reqwest::Client,
}

fn options(dir: &Path, speed: f64) -> ServeOptions {
    ServeOptions {
        state_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().expect("address"),
        no_sim: false,
        sim_speed: speed,
        sim_seed: 7,
        insecure: false,
        concurrency: 16,
        tls: None,
        replicas: None,
        limits: Default::default(),
        secrets_key_file: None,
        workload_proxy: None,
    }
}

async fn start(speed: f64) -> Daemon {
    start_with(speed, |_| {}).await
}

async fn start_with(speed: f64, tweak: impl FnOnce(&mut ServeOptions)) -> Daemon {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let (tx, rx) = oneshot::channel::<()>();
    let mut o = options(dir.path(), speed);
    tweak(&mut o);
    let task = tokio::spawn(serve_until(o, async move {
        let _ = rx.await;
    }));
    let url_file = dir.path().join("api.url");
    let mut url = String::new();
    // A bound for a serve that never starts (60 s), not a performance figure.
    for _ in 0..2400 {
        if let Ok(u) = std::fs::read_to_string(&url_file) {
            url = u.trim().to_string();
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(!url.is_empty(), "serve never wrote {}", url_file.display());
    let read = |f: &str| {
        std::fs::read_to_string(dir.path().join(f))
            .expect("token file")
            .trim()
            .to_string()
    };
    Daemon {
        url,
        admin: read("admin.token"),
        viewer: read("viewer.token"),
        stop: Some(tx),
        task,
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client"),
        _dir: dir,
    }
}

impl Daemon {
    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let r = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.admin)
            .send()
            .await
            .expect("GET");
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.expect("JSON")
    }

    async fn apply(&self, text: &str) -> ApplyResult {
        let r = self
            .http
            .post(format!("{}/api/v1/clusters", self.url))
            .bearer_auth(&self.admin)
            .body(text.to_string())
            .send()
            .await
            .expect("POST");
        assert!(r.status().is_success(), "apply: {}", r.status());
        r.json().await.expect("JSON")
    }

    async fn fault(&self, body: serde_json::Value) {
        let r = self
            .http
            .post(format!("{}/api/v1/sim/faults", self.url))
            .bearer_auth(&self.admin)
            .json(&body)
            .send()
            .await
            .expect("POST fault");
        assert_eq!(
            r.status(),
            201,
            "fault: {}",
            r.text().await.unwrap_or_default()
        );
    }

    /// Stops the daemon and hands back its state directory.
    async fn stop_keeping_state(mut self) -> tempfile::TempDir {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let done = tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("serve stops within 30 s of being told to");
        done.expect("join").expect("serve returns Ok");
        self._dir
    }

    async fn stop(self) {
        drop(self.stop_keeping_state().await);
    }
}

fn example(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    std::fs::read_to_string(path).expect("example")
}

fn cluster_named(text: &str, name: &str) -> String {
    text.replace("name: demo", &format!("name: {name}"))
        .replace(
            "securityGroup: demo-nodes",
            &format!("securityGroup: {name}-nodes"),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_guard_the_api_and_probes_need_none() {
    let d = start(10.0).await;
    let get = |token: Option<&str>, path: &str| {
        let mut rq = d.http.get(format!("{}{path}", d.url));
        if let Some(t) = token {
            rq = rq.bearer_auth(t);
        }
        rq.send()
    };
    assert_eq!(get(None, "/healthz").await.expect("healthz").status(), 200);
    assert_eq!(get(None, "/readyz").await.expect("readyz").status(), 200);
    let r = get(None, "/api/v1/clusters").await.expect("GET");
    assert_eq!(r.status(), 401);
    assert!(r.text().await.expect("body").contains("admin.token"));
    assert_eq!(
        get(Some("not-a-token"), "/api/v1/clusters")
            .await
            .expect("GET")
            .status(),
        401
    );
    assert_eq!(
        get(Some(&d.viewer), "/api/v1/clusters")
            .await
            .expect("GET")
            .status(),
        200
    );
    assert_eq!(
        get(Some(&d.viewer), "/metrics")
            .await
            .expect("GET")
            .status(),
        200
    );
    let post = d
        .http
        .post(format!("{}/api/v1/clusters", d.url))
        .bearer_auth(&d.viewer)
        .body(example("openstack.yaml"))
        .send()
        .await
        .expect("POST");
    assert_eq!(post.status(), 403);
    assert!(post.text().await.expect("body").contains("viewer role"));
    let del = d
        .http
        .delete(format!("{}/api/v1/clusters/demo", d.url))
        .bearer_auth(&d.viewer)
        .send()
        .await
        .expect("DELETE");
    assert_eq!(del.status(), 403);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_spec_is_refused_with_its_field_and_line() {
    let d = start(10.0).await;
    let bad = example("openstack.yaml").replace("replicas: 3", "replicas: 4");
    let r = d
        .http
        .post(format!("{}/api/v1/clusters?source=bad.yaml", d.url))
        .bearer_auth(&d.admin)
        .body(bad)
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 422);
    let e: flightdeck_daemon::types::ApiError = r.json().await.expect("JSON");
    let p = e.problems.first().expect("a problem");
    assert_eq!(p.source, "bad.yaml");
    assert!(p.line.is_some(), "{e:?}");
    assert!(p.path.contains("controlPlane.replicas"), "{e:?}");
    let list: ClusterList = d.get("/api/v1/clusters").await;
    assert!(list.items.is_empty(), "nothing is applied from a bad spec");
    d.stop().await;
}

/// A cluster whose cloud calls each take 60 s must not hold up another: its reconciles
/// run on their own while the other cluster is built at its normal pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_cloud_for_one_cluster_does_not_hold_up_another() {
    let d = start(20.0).await;
    let text = example("openstack.yaml");
    d.apply(&cluster_named(&text, "slow")).await;
    d.fault(serde_json::json!({"kind": "api.latency", "cluster": "slow", "latency": "60s"}))
        .await;
    // Its own pod network: two overlapping ones on one router are refused (F7).
    d.apply(&cluster_named(&text, "quick").replace("10.244.0.0/16", "10.245.0.0/16"))
        .await;
    let mut ready_after = None;
    for _ in 0..1200 {
        let list: ClusterList = d.get("/api/v1/clusters").await;
        let quick = list
            .items
            .iter()
            .find(|c| c.name == "quick")
            .expect("quick");
        if quick.ready {
            ready_after = quick.created_at.map(|c| quick.now.saturating_sub(c) / 1000);
            let slow = list.items.iter().find(|c| c.name == "slow").expect("slow");
            assert!(!slow.ready, "the slow cluster cannot be Ready yet");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let secs = ready_after.expect("the quick cluster became Ready");
    // Built alone it takes about 80 virtual seconds; waiting behind the slow cluster's
    // calls (60 s each, dozens of them) it would take most of an hour.
    assert!(secs < 600, "quick took {secs} virtual seconds");
    let events: EventList = d.get("/api/v1/clusters/quick/events?limit=1000").await;
    assert!(events.items.iter().any(|e| e.reason == "Ready"));
    d.stop().await;
}

/// Every route the OpenAPI document names is served (the document is generated from
/// the routes themselves, so the converse holds by construction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_route_is_served() {
    let d = start(10.0).await;
    let doc: serde_json::Value = d.get("/api/v1/openapi.json").await;
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.len() >= 12, "{} paths", paths.len());
    for (path, item) in paths {
        let concrete = path.replace("{name}", "demo");
        for method in item.as_object().expect("path item").keys() {
            let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            let mut rq = d
                .http
                .request(m.clone(), format!("{}{concrete}", d.url))
                .bearer_auth(&d.admin);
            if m == reqwest::Method::POST {
                rq = rq.header("content-type", "application/json").body("{}");
            }
            let r = rq.send().await.expect("request");
            let status = r.status();
            let body = r.text().await.unwrap_or_default();
            // An unrouted path answers 404 "no such route", a wrong method 405; our
            // own "not found" says which cluster was not found.
            assert!(
                status != 405 && !(status == 404 && body.contains("no such route")),
                "{method} {path}: {status} {body:?}"
            );
        }
    }
    d.stop().await;
}

/// The web view's page and assets need no token and carry no data: the page asks for a
/// token and reads the API with it. They come with a strict content security policy,
/// and `whoami` tells the page which controls to offer; the API still refuses a viewer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_is_served_without_a_token_and_holds_no_data() {
    let d = start(10.0).await;
    let public = |path: &str| d.http.get(format!("{}{path}", d.url)).send();
    let page = public("/").await.expect("GET /");
    assert_eq!(page.status(), 200);
    let csp = page
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    let html = page.text().await.expect("body");
    assert!(html.contains("/ui/app.js") && !html.contains(&d.admin));
    for (path, kind) in [
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
        ("/ui/icon.svg", "image/svg+xml"),
    ] {
        let r = public(path).await.expect("GET");
        assert_eq!(r.status(), 200, "{path}");
        let got = r.headers()[reqwest::header::CONTENT_TYPE]
            .to_str()
            .expect("content type")
            .to_string();
        assert!(got.starts_with(kind), "{path}: {got}");
    }
    // Only those paths are public: anything else under /ui still needs a token.
    assert_eq!(public("/ui/other").await.expect("GET").status(), 401);
    let whoami = |token: &str| {
        d.http
            .get(format!("{}/api/v1/whoami", d.url))
            .bearer_auth(token)
            .send()
    };
    for (token, role) in [(&d.admin, "admin"), (&d.viewer, "viewer")] {
        let who: serde_json::Value = whoami(token)
            .await
            .expect("GET")
            .json()
            .await
            .expect("json");
        assert_eq!(who["role"].as_str(), Some(role));
    }
    assert_eq!(whoami("not-a-token").await.expect("GET").status(), 401);
    d.stop().await;
}

/// Issue 41: a cluster bootstrapped by kubeadm gets its PKI from the daemon, sealed under
/// `secrets.key` in the state directory (mode 0600): no CA private key is in the store
/// file or in the API's answers; a daemon started again without that key stops and
/// names the file, never making a new CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeadm_clusters_pki_is_sealed_under_the_state_directorys_key() {
    use std::os::unix::fs::PermissionsExt as _;
    let d = start(10.0).await;
    let kubeadm = example("openstack.yaml").replace(
        "  provider:\n",
        "  bootstrap:\n    provider: kubeadm\n  provider:\n",
    );
    d.apply(&kubeadm).await;
    let mut answers = String::new();
    for path in [
        "/api/v1/clusters",
        "/api/v1/clusters/demo",
        "/api/v1/clusters/demo/events",
        "/api/v1/clusters/demo/plan",
        "/api/v1/events",
    ] {
        let v: serde_json::Value = d.get(path).await;
        answers.push_str(&v.to_string());
    }
    assert!(answers.contains("demo"), "{answers}");
    assert!(!answers.contains("PRIVATE KEY"), "{answers}");
    let dir = d.stop_keeping_state().await;
    let key = dir.path().join("secrets.key");
    let mode = std::fs::metadata(&key)
        .expect("key file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{}", key.display());
    let mut files = 0;
    for f in std::fs::read_dir(dir.path()).expect("state dir") {
        let f = f.expect("entry").path();
        if f.is_file() && f != key {
            files += 1;
            let bytes = std::fs::read(&f).expect("read");
            assert!(
                !bytes.windows(11).any(|w| w == b"PRIVATE KEY"),
                "{} holds a private key",
                f.display()
            );
        }
    }
    assert!(files > 0, "the store file is there");

    // Started again with its key: the embedded simulator kept nothing, so the cluster is
    // built again under a new UID, with a new PKI bound to it (the old one would not
    // open: test-hostile.sh's restart once stopped on it).
    let _ = std::fs::remove_file(dir.path().join("api.url"));
    for _ in 0..200 {
        if flightdeck_store::Store::open(dir.path()).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let again = tokio::spawn(serve_until(options(dir.path(), 10.0), async move {
        let _ = stopped.await;
    }));
    let mut url = String::new();
    // A bound for a serve that never starts (60 s), not a performance figure.
    for _ in 0..2400 {
        if let Ok(u) = std::fs::read_to_string(dir.path().join("api.url")) {
            url = u.trim().to_string();
            break;
        }
        if again.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        !url.is_empty(),
        "serve did not start again: {:?}",
        again.await
    );
    let admin = std::fs::read_to_string(dir.path().join("admin.token")).expect("admin token");
    let events: serde_json::Value = reqwest::Client::new()
        .get(format!("{url}/api/v1/clusters/demo/events"))
        .bearer_auth(admin.trim())
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("JSON");
    assert!(
        events.to_string().contains("SimulatorRestarted"),
        "{events}"
    );
    let _ = stop.send(());
    again
        .await
        .expect("the serve task")
        .expect("serve started again with its key and stopped cleanly");

    // The key is lost: the daemon does not start, and says which file it needs.
    std::fs::remove_file(&key).expect("remove the key");
    // The stopped daemon's last tasks let go of the store file (a bound, not a figure).
    for _ in 0..200 {
        if flightdeck_store::Store::open(dir.path()).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_tx, rx) = oneshot::channel::<()>();
    let served = tokio::time::timeout(
        Duration::from_secs(30),
        serve_until(options(dir.path(), 10.0), async move {
            let _ = rx.await;
        }),
    )
    .await
    .expect("serve stops at once");
    let err = format!("{:#}", served.expect_err("no key, no start"));
    assert!(
        err.contains("secrets.key") && err.contains("--secrets-key-file"),
        "{err}"
    );
    assert!(!key.exists(), "no new key is made over sealed secrets");
}

/// `POST /api/v1/clusters/{name}/kubeconfig`: the admin gets a kubeconfig (YAML, not to
/// be cached) of a kubeadm cluster once its endpoint is known; the viewer may not ask;
/// a cluster without flightdeck's PKI is refused by name; the issue is an event that
/// holds none of the kubeconfig.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_gets_a_kubeconfig_and_its_issue_is_an_event() {
    let d = start(50.0).await;
    let kubeadm = example("openstack.yaml").replace(
        "  provider:\n",
        "  bootstrap:\n    provider: kubeadm\n  provider:\n",
    );
    d.apply(&kubeadm).await;
    d.apply(
        &cluster_named(&example("openstack.yaml"), "plain")
            .replace("10.244.0.0/16", "10.245.0.0/16")
            .replace(
                "  provider:\n",
                "  bootstrap:\n    provider: none\n  provider:\n",
            ),
    )
    .await;
    let url = format!("{}/api/v1/clusters/demo/kubeconfig?ttl=1h", d.url);
    let viewer = d
        .http
        .post(&url)
        .bearer_auth(&d.viewer)
        .send()
        .await
        .expect("POST");
    assert_eq!(viewer.status(), 403);
    // The endpoint is known once the load balancer has its address (a bound for a
    // build that never gets one, not a performance figure).
    let mut answer = None;
    for _ in 0..600 {
        let r = d
            .http
            .post(&url)
            .bearer_auth(&d.admin)
            .send()
            .await
            .expect("POST");
        if r.status() == 200 {
            answer = Some(r);
            break;
        }
        assert_eq!(r.status(), 409, "only an unknown endpoint waits");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = answer.expect("a kubeconfig once the VIP is known");
    assert_eq!(r.headers()["content-type"], "application/yaml");
    assert_eq!(r.headers()["cache-control"], "no-store");
    let text = r.text().await.expect("body");
    let v: serde_json::Value = yaml_serde::from_str(&text).expect("YAML");
    assert!(
        v["clusters"][0]["cluster"]["server"]
            .as_str()
            .is_some_and(|s| s.starts_with("https://") && s.ends_with(":6443")),
        "{v}"
    );
    let key = v["users"][0]["user"]["client-key-data"]
        .as_str()
        .expect("key");
    let plain = d
        .http
        .post(format!("{}/api/v1/clusters/plain/kubeconfig", d.url))
        .bearer_auth(&d.admin)
        .send()
        .await
        .expect("POST");
    assert_eq!(plain.status(), 409);
    let e: flightdeck_daemon::types::ApiError = plain.json().await.expect("JSON");
    assert!(
        e.error.contains("plain") && e.error.contains("none"),
        "{e:?}"
    );
    let bad = d
        .http
        .post(format!(
            "{}/api/v1/clusters/demo/kubeconfig?ttl=forever",
            d.url
        ))
        .bearer_auth(&d.admin)
        .send()
        .await
        .expect("POST");
    assert_eq!(bad.status(), 422);
    let events: EventList = d.get("/api/v1/clusters/demo/events").await;
    let all = serde_json::to_string(&events).expect("JSON");
    assert!(all.contains("KubeconfigIssued"), "{all}");
    assert!(!all.contains(key) && !all.contains("PRIVATE"), "{all}");
    d.stop().await;
}
