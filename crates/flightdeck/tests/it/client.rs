//! The client verbs against a stand-in for the daemon: a few canned HTTP answers on a
//! loopback port, so that what goes over the wire (token, content type, query) and what
//! the user sees (problems, tables, followed events, exit codes) are checked without
//! running `flightdeck serve`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::mpsc;

/// One request as the stand-in saw it.
#[derive(Debug)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Serves `answers` in order, one per connection, and reports each request.
fn stand_in(answers: Vec<String>) -> (String, mpsc::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for answer in answers {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            if let Some(seen) = serve_one(stream, &answer) {
                let _ = tx.send(seen);
            }
        }
    });
    (url, rx)
}

fn serve_one(mut stream: TcpStream, answer: &str) -> Option<Seen> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    stream.write_all(answer.as_bytes()).ok()?;
    Some(Seen {
        line: line.trim_end().to_string(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn answer(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Runs the binary with an empty environment: HOME in `home`, nothing else.
fn flightdeck(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .output()
        .expect("flightdeck runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn apply_sends_the_spec_with_the_token_and_prints_each_problem() {
    let home = tempfile::tempdir().expect("tempdir");
    let token = home.path().join("token");
    std::fs::write(&token, "s3cr3t-token\n").expect("write");
    let spec = home.path().join("demo.yaml");
    std::fs::write(&spec, "kind: Cluster\n").expect("write");
    let problems = r#"{"error":"demo.yaml: 1 problem","problems":[{"source":"demo.yaml","document":1,"path":"spec.network.podCIDR","line":12,"column":5,"message":"not a CIDR"}]}"#;
    let (url, seen) = stand_in(vec![answer(
        "422 Unprocessable Entity",
        "application/json",
        problems,
    )]);
    let spec_arg = spec.to_str().expect("utf-8");
    let token_arg = token.to_str().expect("utf-8");
    let out = flightdeck(
        home.path(),
        &[
            "apply",
            "-f",
            spec_arg,
            "--server",
            &url,
            "--token-file",
            token_arg,
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("flightdeck: demo.yaml: 1 problem\n"), "{err}");
    assert!(
        err.contains("demo.yaml:12: spec.network.podCIDR: not a CIDR"),
        "{err}"
    );
    assert!(!err.contains("s3cr3t") && !text(&out.stdout).contains("s3cr3t"));
    let req = seen.recv().expect("a request");
    assert!(
        req.line.starts_with("POST /api/v1/clusters?source="),
        "{}",
        req.line
    );
    assert!(req.line.contains("demo.yaml"), "{}", req.line);
    assert_eq!(req.header("authorization"), Some("Bearer s3cr3t-token"));
    assert_eq!(req.header("content-type"), Some("application/yaml"));
    assert_eq!(req.body, "kind: Cluster\n");
}

/// `apply -f` against a daemon that refuses the spec with `answer_body`: its stderr.
fn apply_refused(answer_body: &str) -> String {
    let home = tempfile::tempdir().expect("tempdir");
    let spec = home.path().join("bad.yaml");
    std::fs::write(&spec, "kind: Cluster\n").expect("write");
    let (url, _seen) = stand_in(vec![answer(
        "422 Unprocessable Entity",
        "application/json",
        answer_body,
    )]);
    let spec_arg = spec.to_str().expect("utf-8");
    let out = flightdeck(home.path(), &["apply", "-f", spec_arg, "--server", &url]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    err
}

#[test]
fn apply_prints_each_problem_of_a_bad_spec_once() {
    let problem = |document: usize, path: &str, line: usize, message: &str| {
        serde_json::json!({"source": "bad.yaml", "document": document, "path": path,
            "line": line, "column": 5, "message": message})
    };
    // Every problem of the file, under a one-line summary.
    let every = serde_json::json!({
        "error": "bad.yaml: the spec has 3 problems",
        "problems": [
            problem(1, "spec.flight.churnLimit", 16, "must be between 1 and 100, got 0"),
            problem(1, "spec.flight.resyncPeriod", 17, "1s is shorter than the minimum of 10s"),
            problem(2, "spec.controlPlane.replicas", 25, "control-plane replicas must be 1, 3 or 5"),
        ],
    });
    let err = apply_refused(&every.to_string());
    assert_eq!(
        err,
        "flightdeck: bad.yaml: the spec has 3 problems\n\
         bad.yaml:16: spec.flight.churnLimit: must be between 1 and 100, got 0\n\
         bad.yaml:17: spec.flight.resyncPeriod: 1s is shorter than the minimum of 10s\n\
         bad.yaml:25: spec.controlPlane.replicas: control-plane replicas must be 1, 3 or 5\n"
    );
    // A daemon whose message is the problem itself: shown once, not again below it.
    let itself = serde_json::json!({
        "error": "bad.yaml:7:15: document 1: spec.controlPlane.replicas: control-plane replicas must be 1, 3 or 5, got 2",
        "problems": [problem(1, "spec.controlPlane.replicas", 7,
            "control-plane replicas must be 1, 3 or 5, got 2")],
    });
    let err = apply_refused(&itself.to_string());
    assert_eq!(err.matches("control-plane replicas").count(), 1, "{err}");
    assert!(
        err.starts_with("flightdeck: bad.yaml:7:15: document 1:"),
        "{err}"
    );
}

#[test]
fn get_clusters_prints_a_table_from_the_local_daemon_s_files() {
    let home = tempfile::tempdir().expect("tempdir");
    let list = r#"{"items":[{"name":"demo","uid":"u1","cloud":"sim/openstack","phase":"Ready","ready":true,
        "controlPlane":{"name":"cp","ready":3,"desired":3,"upToDate":3},
        "pools":[{"name":"workers","ready":2,"desired":2,"upToDate":2}],"endpoint":"10.0.0.5",
        "conditions":[],"breakers":[],"repairs":0,"createdAt":1000,"lastError":null,"now":46000}]}"#;
    let (url, seen) = stand_in(vec![answer("200 OK", "application/json", list)]);
    let state = home.path().join(".local/state/flightdeck");
    std::fs::create_dir_all(&state).expect("mkdir");
    std::fs::write(state.join("api.url"), format!("{url}\n")).expect("write");
    std::fs::write(state.join("admin.token"), "local-admin\n").expect("write");
    let out = flightdeck(home.path(), &["get", "clusters"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "NAME   CLOUD           PHASE   CONTROL-PLANE   WORKERS   CONDITIONS   AGE\n\
         demo   sim/openstack   Ready   3/3             2/2       -            45s\n"
    );
    let req = seen.recv().expect("a request");
    assert_eq!(req.line, "GET /api/v1/clusters HTTP/1.1");
    assert_eq!(req.header("authorization"), Some("Bearer local-admin"));
}

#[test]
fn events_follow_prints_each_event_as_it_comes() {
    let home = tempfile::tempdir().expect("tempdir");
    let stream = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
        :\n\n\
        event: event\ndata: {\"at\":3661000,\"cluster\":\"demo\",\"severity\":\"Normal\",\"reason\":\"Ready\",\"message\":\"every machine serves\"}\n\n\
        : 2 events were missed: this follower fell behind\n\n\
        event: event\r\ndata: {\"at\":3662000,\"cluster\":\"demo\",\"severity\":\"Warning\",\r\ndata: \"reason\":\"NodeNotReady\",\"message\":\"demo-workers-2\"}\r\n\r\n";
    let (url, seen) = stand_in(vec![stream.to_string()]);
    let out = flightdeck(
        home.path(),
        &[
            "events", "demo", "--follow", "--limit", "5", "--server", &url,
        ],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        text(&out.stdout),
        "[01:01:01]  demo       Ready                    every machine serves\n\
         [01:01:02] !demo       NodeNotReady             demo-workers-2\n"
    );
    assert!(err.contains("2 events were missed"), "{err}");
    assert!(err.contains("the daemon closed the event stream"), "{err}");
    let req = seen.recv().expect("a request");
    assert_eq!(
        req.line,
        "GET /api/v1/clusters/demo/events?limit=5&follow=true HTTP/1.1"
    );
    assert_eq!(
        req.header("authorization"),
        None,
        "no token anywhere: none sent"
    );
}

#[test]
fn redirects_are_not_followed() {
    let home = tempfile::tempdir().expect("tempdir");
    let (url, _seen) = stand_in(vec![
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://elsewhere/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string(),
    ]);
    let out = flightdeck(home.path(), &["get", "cluster", "demo", "--server", &url]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("307") && err.contains("follows none"), "{err}");
}

#[test]
fn without_a_daemon_the_client_says_where_it_looked() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = flightdeck(home.path(), &["get", "clusters"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "flightdeck: no flightdeck daemon found: start `flightdeck serve`, or set --server / FLIGHTDECK_SERVER\n"
    );
    // A port nobody listens on: the message names the URL.
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let out = flightdeck(
        home.path(),
        &["describe", "cluster", "demo", "--server", &url],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot reach the flightdeck daemon at {url} (from --server)"
        )),
        "{err}"
    );
}

#[test]
fn the_offline_forms_keep_working_without_a_daemon() {
    let home = tempfile::tempdir().expect("tempdir");
    let dir = home.path().join("state");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let dir_arg = dir.to_str().expect("utf-8");
    // No api.url in DIR: resume works on DIR's store (empty here), as before.
    let out = flightdeck(home.path(), &["resume", "demo", "--state-dir", dir_arg]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("holds no flightdeck state"),
        "{}",
        text(&out.stderr)
    );
    // A lone cluster name is the offline delete, which needs its flags.
    let out = flightdeck(home.path(), &["delete", "demo"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("write `flightdeck delete cluster demo`"),
        "{}",
        text(&out.stderr)
    );
}
