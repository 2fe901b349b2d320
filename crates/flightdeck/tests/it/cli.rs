//! The command line as a user drives it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn flightdeck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("flightdeck runs")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn up_builds_the_example_cluster_to_ready_and_prints_its_status_as_json() {
    let out = flightdeck(&["up", "-f", "examples/openstack.yaml", "--output", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["ready"], true);
    let cluster = &v["clusters"][0];
    assert_eq!(cluster["name"], "demo");
    assert_eq!(cluster["phase"], "Ready");
    let cp = cluster["status"]["controlPlane"]["machines"]
        .as_array()
        .expect("machines");
    assert_eq!(cp.len(), 3);
    for m in cp {
        assert_eq!(m["member"]["provisioningStatus"], "ACTIVE", "{m}");
        assert_eq!(m["node"], "Ready");
    }
    let workers = cluster["status"]["nodePools"][0]["ready"]
        .as_u64()
        .expect("ready count");
    assert!(workers >= 2);
    // Progress went to stderr while stdout stayed pure JSON.
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(progress.contains("CreateServer"), "{progress}");
    assert!(progress.contains("MemberChanged"), "{progress}");
}

#[test]
fn up_shows_progress_and_a_status_table_in_text_mode_and_keeps_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let state_arg = state.to_str().expect("utf-8 path");
    let out = flightdeck(&[
        "up",
        "-f",
        "examples/two-clusters.yaml",
        "--state-dir",
        state_arg,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("alpha") && table.contains("beta"), "{table}");
    assert!(table.contains("Ready after"), "{table}");
    assert!(
        state.join("flightdeck.redb").is_file(),
        "the state store was written"
    );
    // That store describes a simulated cloud that is gone: a second `up` on it refuses.
    let again = flightdeck(&[
        "up",
        "-f",
        "examples/two-clusters.yaml",
        "--state-dir",
        state_arg,
    ]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already holds cluster(s) alpha, beta")
    );
}

#[test]
fn an_invalid_spec_is_rejected_naming_the_field_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(repo().join("examples/openstack.yaml")).expect("example");
    for (from, to, field) in [
        ("10.244.0.0/16", "10.0.0.0/33", "spec.network.podCIDR"),
        ("replicas: 3", "replicas: 2", "spec.controlPlane.replicas"),
        (
            "    maxSurge: 1",
            "    maxSurge: 1\n    maxSurgery: 2",
            "spec.flight.maxSurgery",
        ),
    ] {
        let path = dir.path().join("bad.yaml");
        std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
        for cmd in ["up", "plan", "validate"] {
            let out = flightdeck(&[cmd, "-f", path.to_str().expect("utf-8")]);
            assert_eq!(out.status.code(), Some(2), "{cmd} must fail on {field}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(field), "{cmd}: {err}");
            assert!(err.contains("bad.yaml:"), "the line is named: {err}");
        }
    }
}

#[test]
fn an_invalid_spec_lists_every_error_once_each_with_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(repo().join("examples/openstack.yaml")).expect("example");
    // Two independent bad fields in document 1 (lines 30 and 39), and a value no field
    // takes in document 2 (line 53: the example is 42 lines, then `---`).
    let first = text.replacen("maxRetries: 3", "maxRetries: 0", 1).replacen(
        "memberTimeout: 5m",
        "memberTimeout: 1s",
        1,
    );
    let second =
        text.replacen("name: demo", "name: other", 1)
            .replacen("replicas: 3", "replicas: 2", 1);
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, format!("{first}---\n{second}")).expect("write");
    for cmd in ["up", "plan", "validate"] {
        let out = flightdeck(&[cmd, "-f", path.to_str().expect("utf-8")]);
        assert_eq!(out.status.code(), Some(2), "{cmd} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        for (at, field) in [
            (
                "bad.yaml:30:",
                "document 1: spec.apiLoadBalancer.healthMonitor.maxRetries:",
            ),
            ("bad.yaml:39:", "document 1: spec.flight.memberTimeout:"),
            ("bad.yaml:53:", "document 2: spec.controlPlane.replicas:"),
        ] {
            assert_eq!(err.matches(field).count(), 1, "{cmd}: {field} once: {err}");
            assert!(
                err.lines().any(|l| l.contains(at) && l.contains(field)),
                "{cmd}: {field} on its line: {err}"
            );
        }
        let errors = err.lines().filter(|l| l.contains("bad.yaml:")).count();
        assert_eq!(errors, 3, "{cmd}: one line per error: {err}");
    }
    // A scenario's errors, as `sim run` reads it.
    let scenario = dir.path().join("bad-scenario.yaml");
    std::fs::write(
        &scenario,
        "apiVersion: flightdeck.dev/v1alpha1
kind: Scenario
metadata: {name: s}
spec:
  duration: 10m
  clusters: [{file: x.yaml}]
  workload:
    - {at: 20m, action: delete, cluster: a}
    - {at: 1m, action: scale, cluster: a}
",
    )
    .expect("write");
    let out = flightdeck(&["sim", "run", scenario.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for (at, field) in [
        ("bad-scenario.yaml:8:", "spec.workload[0].at:"),
        ("bad-scenario.yaml:9:", "spec.workload[1].replicas:"),
    ] {
        assert_eq!(err.matches(field).count(), 1, "{field} once: {err}");
        assert!(
            err.lines().any(|l| l.contains(at) && l.contains(field)),
            "{err}"
        );
    }
}

#[test]
fn sim_run_seed_001_reports_a_passing_run_as_json() {
    let out = flightdeck(&[
        "sim",
        "run",
        "seed-001-member-stuck-pending",
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v = json(&out);
    assert_eq!(v["scenario"], "seed-001-member-stuck-pending");
    assert_eq!(v["passed"], true);
    assert!(v["seed"].is_u64());
    assert!(v["virtual_seconds"].as_f64().expect("seconds") > 0.0);
    let serving = v["invariants"]
        .as_array()
        .expect("invariants")
        .iter()
        .find(|i| i["name"] == "apiEndpointServing")
        .expect("apiEndpointServing checked");
    assert_eq!(serving["held"], true);
    assert!(serving["first_violation"].is_null());
    assert!(
        v["api_calls"]["octavia"]["POST /v2/lbaas/pools/{pool_id}/members"]
            .as_u64()
            .expect("counted")
            >= 3
    );
    let reasons: Vec<&str> = v["timeline"]
        .as_array()
        .expect("timeline")
        .iter()
        .filter_map(|e| e["reason"].as_str())
        .collect();
    assert!(reasons.contains(&"LoadBalancerMemberStuck"));
    assert!(reasons.contains(&"RolloutComplete"));
}

#[test]
fn sim_scenarios_lists_every_built_in_and_unknown_names_fail_clearly() {
    let out = flightdeck(&["sim", "scenarios"]);
    assert!(out.status.success());
    let list = String::from_utf8_lossy(&out.stdout);
    for name in [
        "seed-001-member-stuck-pending",
        "member-offline-during-upgrade",
        "lifecycle",
    ] {
        assert!(list.contains(name), "{list}");
    }
    let out = flightdeck(&["sim", "run", "no-such-scenario"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no scenario \"no-such-scenario\""));
}

#[test]
fn plan_is_a_dry_run_that_gives_a_reason_for_every_action() {
    let out = flightdeck(&["plan", "-f", "examples/openstack.yaml", "--output", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let actions = v[0]["actions"].as_array().expect("actions");
    assert!(actions.iter().any(|a| a["action"] == "createSecurityGroup"));
    assert!(actions.iter().any(|a| a["action"] == "createLoadBalancer"));
    assert!(
        actions
            .iter()
            .all(|a| a["reason"].as_str().is_some_and(|r| !r.is_empty()))
    );
}

#[test]
fn sim_swarm_of_200_seeds_passes_on_every_cloud_and_reports_its_rate_and_fault_kinds() {
    let out = flightdeck(&[
        "sim", "swarm", "--seeds", "200", "--from", "1", "--output", "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["passed"], true);
    assert_eq!(v["seeds_run"], 200);
    assert_eq!(v["failures"].as_array().map(Vec::len), Some(0));
    assert!(v["seeds_per_second"].as_f64().expect("rate") > 0.0);
    assert!(
        v["fault_kinds_exercised"].as_array().expect("kinds").len() >= 8,
        "{}",
        v["fault_kinds_exercised"]
    );
    assert_eq!(v["determinism_checked"], true);
    // Every cloud is drawn within 200 seeds.
    for cloud in ["openstack", "opennebula", "kubevirt"] {
        assert!(
            v["clouds"][cloud].as_u64().is_some_and(|n| n > 0),
            "{cloud}: {}",
            v["clouds"]
        );
    }
}

#[test]
fn sim_swarm_rejects_nonsense_flags() {
    for args in [
        &["sim", "swarm", "--seeds", "0"][..],
        &["sim", "swarm", "--jobs", "0"][..],
        &["sim", "swarm", "--budget", "soon"][..],
        &["sim", "swarm", "--unsafe-disable", "everything"][..],
        // A replica's fence without replicas, and a fleet mechanism on split-brain seeds.
        &["sim", "swarm", "--unsafe-disable", "claim-revision"][..],
        &[
            "sim",
            "swarm",
            "--split-brain",
            "--unsafe-disable",
            "member-gate",
        ][..],
        &["sim", "swarm", "--split-brain", "--trace"][..],
    ] {
        let out = flightdeck(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn split_brain_seeds_report_what_the_fence_refused_and_fail_without_it() {
    let out = flightdeck(&[
        "sim",
        "swarm",
        "--split-brain",
        "--seeds",
        "3",
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["seeds_run"], 3);
    assert_eq!(report["passed"], true);
    assert!(report["mutations_checked"].as_u64() > Some(0), "{report}");
    let out = flightdeck(&[
        "sim",
        "swarm",
        "--split-brain",
        "--seeds",
        "12",
        "--no-determinism-check",
        "--unsafe-disable",
        "lease-deadline",
        "--unsafe-disable",
        "claim-revision",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("fencedMutations violated"), "{text}");
    assert!(
        text.contains("replay: flightdeck sim swarm --split-brain --seeds 1 --from"),
        "{text}"
    );
}

#[test]
fn plan_shows_pending_repairs_and_the_budget_left() {
    let out = flightdeck(&["plan", "-f", "examples/openstack.yaml"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("repairs (flight control)"), "{text}");
    assert!(
        text.contains("budget workers: 0 of 1 in use, 1 left"),
        "{text}"
    );
}

#[test]
fn resume_closes_churn_breakers_in_a_state_directory_and_names_unknown_clusters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let state_arg = state.to_str().expect("utf-8 path");
    let out = flightdeck(&[
        "up",
        "-f",
        "examples/openstack.yaml",
        "--quiet",
        "--state-dir",
        state_arg,
    ]);
    assert!(out.status.success());
    let out = flightdeck(&["resume", "demo", "--state-dir", state_arg]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = flightdeck(&["resume", "nope", "--state-dir", state_arg]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no cluster nope (it has: demo)"));
}

#[test]
fn up_builds_the_opennebula_example_to_ready_from_shared_templates() {
    let out = flightdeck(&["up", "-f", "examples/opennebula.yaml", "--output", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["ready"], true);
    let cluster = &v["clusters"][0];
    assert_eq!(cluster["name"], "nebula");
    let cp = cluster["status"]["controlPlane"]["machines"]
        .as_array()
        .expect("machines");
    assert_eq!(cp.len(), 3);
    for m in cp {
        assert_eq!(m["node"], "Ready", "{m}");
        assert!(
            m["image"]
                .as_str()
                .is_some_and(|i| i.starts_with("master-")),
            "machines name their content-addressed template: {m}"
        );
    }
    // Every call went through OpenNebula's XML-RPC methods.
    let one = v["api_calls"]["opennebula"]
        .as_object()
        .expect("XML-RPC calls");
    assert_eq!(one["one.template.allocate"], 2);
    assert_eq!(one["one.template.instantiate"], 5);
}

/// A child process killed when dropped, so a failing test leaves no server behind.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_file(path: &Path) -> String {
    for _ in 0..300 {
        if let Ok(s) = std::fs::read_to_string(path)
            && !s.trim().is_empty()
        {
            return s.trim().to_string();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{} was never written", path.display());
}

#[test]
fn up_and_delete_reach_a_served_opennebula_over_xml_rpc_with_one_auth_credentials() {
    let dir = tempfile::tempdir().expect("tempdir");
    let auth = dir.path().join("one_auth");
    let endpoint_file = dir.path().join("xmlrpc");
    let state = dir.path().join("state");
    let serve_log = std::fs::File::create(dir.path().join("serve.log")).expect("a log file");
    let _server = Child(
        Command::new(env!("CARGO_BIN_EXE_flightdeck"))
            .args(["sim", "serve", "--listen", "127.0.0.1:0", "--speed", "20"])
            .args(["--opennebula", "127.0.0.1:0"])
            .args(["--kubernetes", "127.0.0.1:0", "--kubeconfig-dir"])
            .arg(dir.path().join("kube"))
            .arg("--one-auth-file")
            .arg(&auth)
            .arg("--one-xmlrpc-file")
            .arg(&endpoint_file)
            .current_dir(repo())
            .stdout(std::process::Stdio::null())
            .stderr(serve_log)
            .spawn()
            .expect("sim serve starts"),
    );
    let endpoint = wait_for_file(&endpoint_file);
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_flightdeck"))
            .args(args)
            .env("ONE_AUTH", &auth)
            .env("ONE_XMLRPC", &endpoint)
            .current_dir(repo())
            .output()
            .expect("flightdeck runs")
    };
    let state_dir = state.to_str().expect("utf-8 path");
    // Each cluster's nodes come through the kubeconfig the simulator writes for its
    // workload cluster, as a real cluster's would.
    let twins = std::fs::read_to_string(repo().join("examples/opennebula-twins.yaml"))
        .expect("the example");
    let spec = dir.path().join("twins.yaml");
    let docs: Vec<String> = twins
        .split("\n---\n")
        .map(|doc| {
            let name = if doc.contains("name: sylva-a") {
                "sylva-a"
            } else {
                "sylva-b"
            };
            let kubeconfig = dir.path().join("kube").join(format!("{name}.kubeconfig"));
            // Their own bootstrap (none): the simulator's kubelets make them.
            format!(
                "{}\n  bootstrap: {{provider: none}}\n  workload:\n    kubeconfig: {}\n",
                doc.trim_end(),
                kubeconfig.display()
            )
        })
        .collect();
    std::fs::write(&spec, docs.join("---\n")).expect("the spec");
    let up = run(&[
        "up",
        "-f",
        spec.to_str().expect("utf-8 path"),
        "--opennebula",
        "--state-dir",
        state_dir,
        "--timeout",
        "5m",
    ]);
    let progress = String::from_utf8_lossy(&up.stderr);
    let served = || std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
    assert!(
        up.status.success(),
        "{progress}\n--- sim serve said:\n{}",
        served()
    );
    assert!(progress.contains("OpenNebula 6.10"), "{progress}");
    // Both clusters' control planes come from the one shared master template.
    for cluster in ["sylva-a", "sylva-b"] {
        assert!(
            progress.contains(&format!("instantiate {cluster}-cp-1 from template 0")),
            "{progress}"
        );
    }
    let secret = std::fs::read_to_string(&auth).expect("the ONE_AUTH file");
    assert!(
        !progress.contains(secret.trim()),
        "the session string never appears: {progress}"
    );
    for cluster in ["sylva-a", "sylva-b"] {
        let out = run(&[
            "delete",
            cluster,
            "--opennebula",
            "--state-dir",
            state_dir,
            "--timeout",
            "5m",
        ]);
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{cluster}: {log}");
        if cluster == "sylva-a" {
            assert!(
                !log.contains("DeleteTemplate"),
                "sylva-b still holds the templates: {log}"
            );
        } else {
            assert!(
                log.contains("DeleteTemplate"),
                "the last holder deletes: {log}"
            );
        }
    }
}

#[test]
fn up_kubevirt_reaches_the_served_infra_and_workload_clusters_through_kubeconfigs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfigs = dir.path().join("kc");
    let serve_log = std::fs::File::create(dir.path().join("serve.log")).expect("a log file");
    let _server = Child(
        Command::new(env!("CARGO_BIN_EXE_flightdeck"))
            .args(["sim", "serve", "--listen", "127.0.0.1:0", "--speed", "20"])
            .args(["--kubernetes", "127.0.0.1:0", "--kubeconfig-dir"])
            .arg(&kubeconfigs)
            .current_dir(repo())
            .stdout(std::process::Stdio::null())
            .stderr(serve_log)
            .spawn()
            .expect("sim serve starts"),
    );
    let infra = kubeconfigs.join("infra.kubeconfig");
    wait_for_file(&infra);
    let example = std::fs::read_to_string(repo().join("examples/kubevirt.yaml")).expect("example");
    let spec = example
        .replace(
            "      # infraKubeconfig: /etc/flightdeck/infra.kubeconfig",
            &format!("      infraKubeconfig: {}", infra.display()),
        )
        .replace(
            "      # workloadKubeconfig: {secret: kv-kubeconfig}",
            &format!(
                "      workloadKubeconfig: {{file: {}}}",
                kubeconfigs.join("kv.kubeconfig").display()
            ),
        );
    assert_ne!(spec, example, "the example names where the kubeconfigs go");
    // Its own bootstrap (none): reached through the workload kubeconfig the simulator
    // writes (a kubeadm cluster on KubeVirt: `up_kubevirt` in conformance-kubeadm.sh).
    let spec = format!("{}\n  bootstrap: {{provider: none}}\n", spec.trim_end());
    let file = dir.path().join("kv.yaml");
    std::fs::write(&file, spec).expect("spec written");
    let state = dir.path().join("state");
    let up = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .arg("up")
        .arg("-f")
        .arg(&file)
        .args(["--kubevirt", "--timeout", "5m", "--state-dir"])
        .arg(&state)
        .current_dir(repo())
        .output()
        .expect("flightdeck runs");
    let progress = String::from_utf8_lossy(&up.stderr);
    assert!(
        up.status.success(),
        "{progress}\n--- sim serve said:\n{}",
        std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default()
    );
    assert!(progress.contains("CreateEndpointService"), "{progress}");
    assert!(String::from_utf8_lossy(&up.stdout).contains("\"kv\": \"Ready\""));
}

#[test]
fn up_of_twenty_clusters_exits_zero_once_every_cluster_is_ready() {
    // Twenty copies of the example, each with its own name, pod network and group. A
    // fleet's build once failed the call budget (a quarter hour for the whole fleet, not
    // per cluster): `up` exited 1 with "ready": false although every cluster was Ready.
    let example = std::fs::read_to_string(repo().join("examples/openstack.yaml")).expect("example");
    let docs: Vec<String> = (1..=20)
        .map(|i| {
            example
                .replace("name: demo\n", &format!("name: c{i}\n"))
                .replace(
                    "podCIDR: 10.244.0.0/16",
                    &format!("podCIDR: 10.{}.0.0/16", 100 + i),
                )
                .replace(
                    "securityGroup: demo-nodes",
                    &format!("securityGroup: c{i}-nodes"),
                )
        })
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("fleet.yaml");
    std::fs::write(&file, docs.join("\n---\n")).expect("write fleet");
    let out = flightdeck(&[
        "up",
        "-f",
        file.to_str().expect("utf-8"),
        "--output",
        "json",
        "--quiet",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["ready"], true);
    let clusters = v["clusters"].as_array().expect("clusters");
    assert_eq!(clusters.len(), 20);
    assert!(clusters.iter().all(|c| c["phase"] == "Ready"));
}

#[test]
fn a_reader_that_goes_away_ends_flightdeck_quietly_not_with_a_panic() {
    // `flightdeck up ... | head -1` whose reader is gone before the report is printed.
    let mut child = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args([
            "up",
            "-f",
            "examples/openstack.yaml",
            "--output",
            "json",
            "--quiet",
        ])
        .current_dir(repo())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("flightdeck runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("flightdeck ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}
