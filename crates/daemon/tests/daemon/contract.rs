//! The API's contract with its clients, as issue 38 found it broken: one error shape
//! for every failure, nothing cached, no path in a 401, a deleting cluster takes no
//! spec, generations start again with a new cluster, a viewer does not read user data,
//! and event streams are bounded.

use std::time::Duration;

use flightdeck_daemon::types::{ApplyResult, ClusterSummary};

use super::{Daemon, example, start, start_with};

impl Daemon {
    async fn send(&self, rq: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, String) {
        let r = rq.send().await.expect("request");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        (status, headers, r.text().await.expect("body"))
    }

    async fn summary(&self, name: &str) -> Option<ClusterSummary> {
        let r = self
            .http
            .get(format!("{}/api/v1/clusters/{name}", self.url))
            .bearer_auth(&self.admin)
            .send()
            .await
            .expect("GET");
        if r.status() == 404 {
            return None;
        }
        r.json().await.ok()
    }
}

fn api_error(status: u16, body: &str, what: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("{what}: {status} is not JSON ({e}): {body:?}"));
    let error = v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no `error`: {body}"));
    assert!(!error.is_empty(), "{what}: an empty error");
    assert!(
        v.get("problems").is_none_or(|p| p.is_array()),
        "{what}: `problems` is not a list: {body}"
    );
    error.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failure_is_the_api_error_json_and_data_is_never_cached() {
    let d = start(10.0).await;
    let url = |p: &str| format!("{}{p}", d.url);
    let admin = |rq: reqwest::RequestBuilder| rq.bearer_auth(&d.admin);
    let cases: Vec<(&str, reqwest::RequestBuilder, u16, &str)> = vec![
        (
            "an unknown route",
            admin(d.http.get(url("/api/v1/nothing"))),
            404,
            "no such route",
        ),
        (
            "a method not allowed",
            admin(d.http.put(url("/api/v1/clusters"))),
            405,
            "not allowed",
        ),
        (
            "a bad query string",
            admin(d.http.get(url("/api/v1/events?limit=abc"))),
            400,
            "limit",
        ),
        (
            "bad UTF-8",
            admin(d.http.post(url("/api/v1/clusters")))
                .header("content-type", "application/yaml")
                .body(vec![0xffu8, 0xfe, 0xfd]),
            400,
            "UTF-8",
        ),
        (
            "a form instead of a spec",
            admin(d.http.post(url("/api/v1/clusters")))
                .header("content-type", "application/x-www-form-urlencoded")
                .body("a=b"),
            415,
            "application/yaml",
        ),
        (
            "a history above the cap",
            admin(d.http.get(url("/api/v1/events?limit=20000"))),
            422,
            "limit: 20000",
        ),
        (
            "a follow history above the cap",
            admin(d.http.get(url("/api/v1/events?follow=true&limit=5000"))),
            422,
            "limit: 5000",
        ),
    ];
    for (what, rq, want, says) in cases {
        let (status, headers, body) = d.send(rq).await;
        assert_eq!(status, want, "{what}: {body}");
        let error = api_error(status, &body, what);
        assert!(
            error.contains(says),
            "{what}: {error:?} does not say {says:?}"
        );
        assert_eq!(headers["cache-control"], "no-store", "{what}");
    }
    // A 401 challenges as RFC 6750 asks and names no path of the daemon's host.
    let (status, headers, body) = d.send(d.http.get(url("/api/v1/clusters"))).await;
    assert_eq!(status, 401);
    assert!(
        headers["www-authenticate"]
            .to_str()
            .expect("text")
            .starts_with("Bearer")
    );
    let error = api_error(status, &body, "401");
    assert!(
        !error.contains(d._dir.path().to_str().expect("path")),
        "{error}"
    );
    assert!(!error.contains('/'), "a 401 names a path: {error}");
    // Data is never cached; without TLS there is no HSTS.
    let (status, headers, _) = d.send(admin(d.http.get(url("/api/v1/clusters")))).await;
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "no-store");
    assert!(!headers.contains_key("strict-transport-security"));
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_the_size_and_hash_of_user_data_but_not_its_content() {
    let d = start(10.0).await;
    let secret = "#cloud-config\\nwrite_files: [{path: /etc/x, content: hunter2}]\\n";
    // Its own data: `bootstrap: none` (kubeadm, the default, refuses a set's userData).
    let spec = example("openstack.yaml").replace(
        "      image: ubuntu-2204-kube-v1.30.2\n  nodePools:",
        &format!(
            "      image: ubuntu-2204-kube-v1.30.2\n      userData:\n        content: \"{secret}\"\n  bootstrap: {{provider: none}}\n  nodePools:"
        ),
    );
    assert!(spec.contains("hunter2"), "the example changed: {spec}");
    d.apply(&spec).await;
    let get = |token: &str| {
        d.http
            .get(format!("{}/api/v1/clusters/demo", d.url))
            .bearer_auth(token.to_string())
            .send()
    };
    let admin: serde_json::Value = get(&d.admin)
        .await
        .expect("GET")
        .json()
        .await
        .expect("json");
    let u = &admin["spec"]["spec"]["controlPlane"]["machine"]["userData"];
    assert!(
        u["content"].as_str().is_some_and(|c| c.contains("hunter2")),
        "{u}"
    );
    let viewer = get(&d.viewer)
        .await
        .expect("GET")
        .text()
        .await
        .expect("body");
    assert!(!viewer.contains("hunter2"), "a viewer read the user data");
    let viewer: serde_json::Value = serde_json::from_str(&viewer).expect("json");
    let u = &viewer["spec"]["spec"]["controlPlane"]["machine"]["userData"];
    assert!(u["size"].as_u64().is_some_and(|n| n > 20), "{u}");
    assert!(u["sha256"].as_str().is_some_and(|h| h.len() == 64), "{u}");
    assert!(
        u.get("digest").is_none(),
        "an unkeyed digest lets a viewer confirm guesses: {u}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleting_cluster_takes_no_spec_and_its_successor_starts_at_generation_one() {
    let d = start(50.0).await;
    let spec = example("openstack.yaml");
    d.apply(&spec).await;
    let changed = spec.replace("maxSurge: 1", "maxSurge: 2");
    let r: ApplyResult = d.apply(&changed).await;
    assert_eq!(r.items[0].result, "configured");
    assert_eq!(d.summary("demo").await.expect("demo").generation, 2);
    let (status, _, body) = d
        .send(
            d.http
                .delete(format!("{}/api/v1/clusters/demo", d.url))
                .bearer_auth(&d.admin),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    for text in [&changed, &spec] {
        let (status, _, body) = d
            .send(
                d.http
                    .post(format!("{}/api/v1/clusters", d.url))
                    .bearer_auth(&d.admin)
                    .body(text.clone()),
            )
            .await;
        assert_eq!(status, 409, "an apply to a deleting cluster: {body}");
        assert!(api_error(status, &body, "409").contains("being deleted"));
    }
    // Gone within a bound (virtual minutes at 50x), then made anew.
    let mut gone = false;
    for _ in 0..1200 {
        if d.summary("demo").await.is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "demo was not deleted within two minutes");
    let r: ApplyResult = d.apply(&changed).await;
    assert_eq!(r.items[0].result, "created");
    let s = d.summary("demo").await.expect("demo again");
    assert_eq!(s.generation, 1, "a new cluster under an old name");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_holds_a_bounded_number_of_event_streams() {
    let d = start_with(10.0, |o| o.limits.streams_per_token = 2).await;
    let follow = || {
        d.http
            .get(format!("{}/api/v1/events?follow=true&limit=10", d.url))
            .bearer_auth(&d.viewer)
            .send()
    };
    let first = follow().await.expect("first");
    let second = follow().await.expect("second");
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = follow().await.expect("third");
    assert_eq!(third.status(), 429);
    let body = third.text().await.expect("body");
    assert!(api_error(429, &body, "429").contains("--max-streams-per-token"));
    // The admin's token has its own streams.
    let admin = d
        .http
        .get(format!("{}/api/v1/events?follow=true", d.url))
        .bearer_auth(&d.admin)
        .send()
        .await
        .expect("admin");
    assert_eq!(admin.status(), 200);
    drop(first);
    // The closed stream's place comes back once the server sees it go.
    let mut again = 0;
    for _ in 0..400 {
        let r = follow().await.expect("again");
        again = r.status().as_u16();
        if again == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(again, 200, "a closed stream's place was not given back");
    drop((second, admin));
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_whose_body_stops_arriving_is_answered_408_after_the_idle_timeout() {
    use std::io::{Read, Write};
    let d = start_with(10.0, |o| o.limits.idle = Duration::from_secs(1)).await;
    let addr = d.url.trim_start_matches("http://").to_string();
    let token = d.admin.clone();
    let answer = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        write!(
            s,
            "POST /api/v1/clusters HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/yaml\r\nContent-Length: 1000\r\n\r\nkind: Clu"
        )
        .expect("write");
        // Nothing more: the rest of the body never comes.
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
    })
    .await
    .expect("join");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("--idle-timeout"), "{answer}");
    d.stop().await;
}
