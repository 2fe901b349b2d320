//! The simulated Kubernetes API at the request level: discovery, verbs, selectors,
//! watch, errors and accounting.

use crate::common;
use crate::k8s_support;

use common::{sim, wait_ms};
use flightdeck_sim::MutationKind;
use k8s_support::*;
use serde_json::{Value, json};

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| s(i, &["metadata", "name"]).to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn discovery_lists_pods_eviction_and_policy_v1_and_v1beta1() {
    let sim = sim(1);
    let (code, core) = get(&sim, INFRA, "/api/v1");
    assert_eq!(code, 200);
    let eviction = core["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "pods/eviction"))
        .cloned()
        .expect("pods/eviction is listed");
    assert_eq!(eviction["group"], "policy");
    assert_eq!(eviction["kind"], "Eviction");
    for r in ["nodes", "pods", "services", "namespaces", "secrets"] {
        assert!(
            core["resources"]
                .as_array()
                .is_some_and(|l| l.iter().any(|x| x["name"] == r)),
            "{r}"
        );
    }
    let (_, groups) = get(&sim, INFRA, "/apis");
    let policy = groups["groups"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == "policy"))
        .cloned()
        .expect("policy group");
    let versions: Vec<&str> = policy["versions"]
        .as_array()
        .map(|v| v.iter().filter_map(|v| v["version"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(versions, ["v1", "v1beta1"]);
    assert!(
        groups["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g["name"] == "kubevirt.io"))
    );
    for path in ["/apis/policy/v1", "/apis/policy/v1beta1"] {
        let (code, list) = get(&sim, INFRA, path);
        assert_eq!(code, 200, "{path}");
        assert!(
            list["resources"]
                .as_array()
                .is_some_and(|l| l.iter().any(|r| r["name"] == "poddisruptionbudgets"))
        );
    }
    let (_, kv) = get(&sim, INFRA, "/apis/kubevirt.io/v1");
    let kv_names: Vec<&str> = kv["resources"]
        .as_array()
        .map(|l| l.iter().filter_map(|r| r["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(kv_names.contains(&"virtualmachines") && kv_names.contains(&"virtualmachineinstances"));
    let (code, version) = get(&sim, INFRA, "/version");
    assert_eq!((code, version["major"].as_str()), (200, Some("1")));
    assert_eq!(get(&sim, INFRA, "/api").1["versions"], json!(["v1"]));
}

#[test]
fn infra_nodes_exist_from_the_start() {
    let sim = sim(1);
    let (code, nodes) = get(&sim, INFRA, "/api/v1/nodes");
    assert_eq!(code, 200);
    assert_eq!(names(&nodes), ["infra-1", "infra-2", "infra-3"]);
    assert_eq!(nodes["kind"], "NodeList");
    assert!(rv(&nodes) > 0 || nodes["metadata"]["resourceVersion"].as_str().is_some());
}

#[test]
fn create_get_list_patch_replace_delete_round_trip_with_resource_version_bumps() {
    let sim = sim(2);
    let svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "api", "labels": {"app": "api"}}, "spec": {"ports": [{"port": 80}]}});
    let (code, created) = post(
        &sim,
        INFRA,
        "/api/v1/namespaces/default/services",
        svc.clone(),
    );
    assert_eq!(code, 201, "{created}");
    assert!(!s(&created, &["metadata", "uid"]).is_empty());
    assert!(!s(&created, &["metadata", "creationTimestamp"]).is_empty());
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(
        created["spec"]["ports"][0]["port"], 80,
        "what the client sent round-trips"
    );
    let rv1 = rv(&created);

    let (code, again) = post(&sim, INFRA, "/api/v1/namespaces/default/services", svc);
    assert_eq!(
        (code, again["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );
    assert_eq!(again["message"], "services \"api\" already exists");

    let (code, got) = get(&sim, INFRA, "/api/v1/namespaces/default/services/api");
    assert_eq!((code, rv(&got)), (200, rv1));

    let (code, patched) = merge_patch(
        &sim,
        INFRA,
        "/api/v1/namespaces/default/services/api",
        json!({"metadata": {"labels": {"tier": "front"}, "annotations": {"a": "b"}}}),
    );
    assert_eq!(code, 200);
    assert!(rv(&patched) > rv1);
    assert_eq!(
        patched["metadata"]["labels"],
        json!({"app": "api", "tier": "front"})
    );

    let (_, list) = get(
        &sim,
        INFRA,
        "/api/v1/services?labelSelector=app%3Dapi,tier%3Dfront",
    );
    assert_eq!(names(&list), ["api"]);
    let (_, none) = get(&sim, INFRA, "/api/v1/services?labelSelector=app=other");
    assert!(names(&none).is_empty());

    let mut stale = got.clone();
    stale["spec"]["ports"][0]["port"] = json!(81);
    let (code, conflict) = call(
        &sim,
        INFRA,
        "PUT",
        "/api/v1/namespaces/default/services/api",
        Some(stale),
        None,
    );
    assert_eq!((code, conflict["reason"].as_str()), (409, Some("Conflict")));

    let mut fresh = patched.clone();
    fresh["spec"]["ports"][0]["port"] = json!(81);
    let (code, replaced) = call(
        &sim,
        INFRA,
        "PUT",
        "/api/v1/namespaces/default/services/api",
        Some(fresh.clone()),
        None,
    );
    assert_eq!(code, 200, "{replaced}");
    assert!(rv(&replaced) > rv(&patched));
    assert_eq!(
        replaced["metadata"]["generation"], 2,
        "a spec change bumps the generation"
    );

    fresh["metadata"]
        .as_object_mut()
        .map(|m| m.remove("resourceVersion"));
    let (code, _) = call(
        &sim,
        INFRA,
        "PUT",
        "/api/v1/namespaces/default/services/api",
        Some(fresh),
        None,
    );
    assert_eq!(code, 422, "PUT needs a resourceVersion");

    let (code, gone) = delete(&sim, INFRA, "/api/v1/namespaces/default/services/api");
    assert_eq!((code, gone["status"].as_str()), (200, Some("Success")));
    let (code, missing) = get(&sim, INFRA, "/api/v1/namespaces/default/services/api");
    assert_eq!((code, missing["reason"].as_str()), (404, Some("NotFound")));
    assert_eq!(missing["message"], "services \"api\" not found");
}

#[test]
fn bad_requests_answer_status_bodies_with_the_right_codes() {
    let sim = sim(3);
    let secrets = "/api/v1/namespaces/default/secrets";
    let bad_json = call(&sim, INFRA, "POST", secrets, None, None);
    assert_eq!(bad_json.0, 400);
    assert_eq!(bad_json.1["kind"], "Status");
    let resp = sim.kube_request(
        INFRA,
        flightdeck_sim::KubeRequest {
            method: "POST".into(),
            path: secrets.into(),
            body: b"{not json".to_vec(),
            ..Default::default()
        },
    );
    assert_eq!(resp.status, 400);
    let (code, nameless) = post(&sim, INFRA, secrets, json!({"metadata": {}}));
    assert_eq!((code, nameless["reason"].as_str()), (422, Some("Invalid")));
    let (code, _) = post(
        &sim,
        INFRA,
        secrets,
        json!({"metadata": {"name": "Bad_Name"}}),
    );
    assert_eq!(code, 422);
    let (code, _) = post(
        &sim,
        INFRA,
        secrets,
        json!({"metadata": {"name": "x", "labels": {"flightdeck-cluster=a": "b"}}}),
    );
    assert_eq!(code, 422, "label keys must be valid Kubernetes keys");
    let (code, s1) = post(
        &sim,
        INFRA,
        secrets,
        json!({"metadata": {"name": "s1"}, "data": {"k": "dg=="}}),
    );
    assert_eq!(code, 201, "{s1}");
    assert_eq!(s1["data"]["k"], "dg==");
    let (code, unsupported) = call(
        &sim,
        INFRA,
        "PATCH",
        &format!("{secrets}/s1"),
        Some(json!({})),
        Some("text/plain"),
    );
    assert_eq!(
        (code, unsupported["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let (code, not_allowed) = post(&sim, INFRA, &format!("{secrets}/s1"), json!({}));
    assert_eq!(
        (code, not_allowed["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    let (code, _) = post(
        &sim,
        INFRA,
        "/api/v1/namespaces/nope/secrets",
        json!({"metadata": {"name": "x"}}),
    );
    assert_eq!(code, 404, "the namespace must exist");
    for path in [
        "/",
        "/api/v2",
        "/apis/nope/v1",
        "/api/v1/widgets",
        "/api/v1/namespaces/default/pods/a/b/c/d",
        "//..//",
    ] {
        assert_eq!(get(&sim, INFRA, path).0, 404, "{path}");
    }
    let big = sim.kube_request(
        INFRA,
        flightdeck_sim::KubeRequest {
            method: "POST".into(),
            path: secrets.into(),
            body: vec![b' '; flightdeck_sim::KUBE_BODY_MAX + 1],
            ..Default::default()
        },
    );
    assert_eq!(big.status, 413);
    let (code, _) = get(&sim, "no-such-cluster", "/api/v1/nodes");
    assert_eq!(code, 503, "an unknown workload cluster's API is not up");
    let (code, _) = get(&sim, INFRA, "/api/v1/pods?fieldSelector=spec.bogus%3Dx");
    assert_eq!(code, 400, "unsupported field labels are refused");
    let json_patch = call(
        &sim,
        INFRA,
        "PATCH",
        "/api/v1/nodes/infra-1",
        Some(json!([{"op": "add", "path": "/spec/unschedulable", "value": true}])),
        Some("application/json-patch+json"),
    );
    assert_eq!(json_patch.0, 200);
    assert_eq!(json_patch.1["spec"]["unschedulable"], true);
}

#[test]
fn field_selector_spec_node_name_lists_only_that_nodes_pods() {
    let sim = sim(4);
    for (name, node) in [("a", "infra-1"), ("b", "infra-2"), ("c", "infra-1")] {
        let pod = json!({"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}});
        assert_eq!(post(&sim, INFRA, PODS, pod).0, 201);
    }
    let (_, on1) = get(
        &sim,
        INFRA,
        "/api/v1/pods?fieldSelector=spec.nodeName%3Dinfra-1",
    );
    assert_eq!(names(&on1), ["a", "c"]);
    let (_, by_name) = get(
        &sim,
        INFRA,
        "/api/v1/namespaces/default/pods?fieldSelector=metadata.name=b&limit=500&continue=",
    );
    assert_eq!(names(&by_name), ["b"]);
    let (_, not1) = get(
        &sim,
        INFRA,
        "/api/v1/pods?fieldSelector=spec.nodeName!=infra-1",
    );
    assert_eq!(names(&not1), ["b"]);
    wait_ms(&sim, 10_000);
    let (_, running) = get(
        &sim,
        INFRA,
        "/api/v1/pods?fieldSelector=status.phase%3DRunning",
    );
    assert_eq!(
        names(&running),
        ["a", "b", "c"],
        "bound pods start on their Ready node"
    );
}

#[test]
fn watch_returns_events_after_a_resource_version() {
    let sim = sim(5);
    let (_, list) = get(&sim, INFRA, "/api/v1/namespaces/default/secrets");
    let from = rv(&list);
    post(
        &sim,
        INFRA,
        "/api/v1/namespaces/default/secrets",
        json!({"metadata": {"name": "w1"}}),
    );
    merge_patch(
        &sim,
        INFRA,
        "/api/v1/namespaces/default/secrets/w1",
        json!({"metadata": {"labels": {"x": "y"}}}),
    );
    delete(&sim, INFRA, "/api/v1/namespaces/default/secrets/w1");
    let (code, body) = raw(
        &sim,
        INFRA,
        &format!("/api/v1/namespaces/default/secrets?watch=true&resourceVersion={from}"),
    );
    assert_eq!(code, 200);
    let events: Vec<Value> = body
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    assert!(
        events
            .iter()
            .all(|e| e["object"]["metadata"]["name"] == "w1")
    );
    let last = rv(&events[2]["object"]);
    let (_, nothing) = raw(
        &sim,
        INFRA,
        &format!("/api/v1/namespaces/default/secrets?watch=1&resourceVersion={last}"),
    );
    assert!(nothing.is_empty(), "nothing happened since");
    let (_, initial) = raw(&sim, INFRA, "/api/v1/nodes?watch=true");
    assert_eq!(
        initial.lines().count(),
        3,
        "a watch without resourceVersion starts with ADDED for each object"
    );
}

#[test]
fn calls_are_counted_and_mutations_logged_with_flightdeck_tags() {
    let sim = sim(6);
    create_vm(&sim, "c1-w-0", "c1", "w-0", "External");
    get(&sim, INFRA, VMIS);
    get(&sim, INFRA, &format!("{VMIS}/c1-w-0"));
    delete(&sim, INFRA, &format!("{VMS}/nope"));
    let calls = sim.api_calls();
    let k = &calls["kubernetes"];
    assert_eq!(k.get("POST virtualmachines"), Some(&1));
    assert_eq!(k.get("GET virtualmachineinstances"), Some(&2));
    assert_eq!(k.get("DELETE virtualmachines"), Some(&1));
    let muts: Vec<_> = sim
        .mutations()
        .into_iter()
        .filter(|m| m.service == "kubernetes")
        .collect();
    assert_eq!(muts.len(), 2);
    assert_eq!(muts[0].kind, MutationKind::Create);
    assert_eq!(muts[0].target_id, "infra/vm/c1-w-0");
    assert_eq!(muts[0].target_name, "c1-w-0");
    assert!(
        muts[0]
            .target_tags
            .contains(&"flightdeck-cluster=c1".to_string())
    );
    assert!(
        muts[0]
            .target_tags
            .contains(&"flightdeck-machine=w-0".to_string())
    );
    assert!(muts[0].ok);
    assert!(!muts[1].ok, "deleting a VM that does not exist fails");
    // Paths with names never become operations.
    for i in 0..50 {
        get(&sim, INFRA, &format!("/api/v1/weird{i}/x"));
    }
    assert!(sim.api_calls()["kubernetes"].len() < 10);
}

#[test]
fn no_request_makes_the_server_panic() {
    let sim = sim(7);
    create_vm(&sim, "c1-w-0", "c1", "w-0", "External");
    let paths = [
        "/api/v1/namespaces/default/pods/x/eviction",
        "/api/v1/namespaces/default/pods/x/status",
        "/api/v1/namespaces/default",
        "/api/v1/namespaces/default/pods",
        "/api/v1/watch/namespaces/default/pods",
        "/api/v1/nodes/infra-1",
        "/apis/kubevirt.io/v1/namespaces/default/virtualmachines/c1-w-0",
        "/apis/policy/v1beta1/namespaces/default/poddisruptionbudgets",
        "/apis/apps/v1/namespaces/kube-system/daemonsets",
        "/%%%/\u{0}/..",
    ];
    let bodies: [&[u8]; 6] = [
        b"",
        b"null",
        b"[]",
        b"{\"metadata\":5}",
        b"{\"metadata\":{\"name\":\"x\",\"labels\":[1]}}",
        b"[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/b\"}]",
    ];
    let queries = [
        "",
        "watch=true&resourceVersion=abc",
        "labelSelector=((",
        "fieldSelector=%ZZ",
        "gracePeriodSeconds=99999999999999999999",
    ];
    let types = [
        None,
        Some("application/json-patch+json"),
        Some("application/strategic-merge-patch+json"),
        Some("x"),
    ];
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", ""] {
        for path in paths {
            for body in bodies {
                for q in queries {
                    for t in types {
                        let resp = sim.kube_request(
                            INFRA,
                            flightdeck_sim::KubeRequest {
                                method: method.into(),
                                path: path.into(),
                                query: q.into(),
                                body: body.to_vec(),
                                content_type: t.map(str::to_string),
                            },
                        );
                        assert!(resp.status >= 200 && resp.status < 600);
                    }
                }
            }
        }
    }
    assert_eq!(get(&sim, INFRA, "/api/v1/nodes").0, 200, "still answering");
}
