//! The infra side against a fake API: what is sent (bodies, selectors) and how answers
//! map onto servers, VMIs, endpoints and error classes.

use crate::support;

use flightdeck_cloud::{
    Compute, EndpointService, ErrorClass, EvictionStrategy, LoadBalancing, Network, Role,
    ServerCreate, ServerStatus, Templates, VirtualMachines,
};
use flightdeck_kubevirt::{KubeVirtCloud, WorkloadFn};
use serde_json::{Value, json};
use support::{Answer, list, owner, seen, status};

fn cloud(client: kube::Client) -> KubeVirtCloud<WorkloadFn<support::WorkloadOf>> {
    KubeVirtCloud::new(
        client,
        "infra",
        WorkloadFn(support::no_workload as support::WorkloadOf),
    )
}

const VMS: &str = "/apis/kubevirt.io/v1/namespaces/infra/virtualmachines";
const VMIS: &str = "/apis/kubevirt.io/v1/namespaces/infra/virtualmachineinstances";
const SERVICES: &str = "/api/v1/namespaces/infra/services";

fn create_req(machine: &str) -> ServerCreate {
    ServerCreate {
        name: format!("demo-{machine}"),
        flavor: "u1.large".into(),
        image: "registry.example/flightdeck/node:1.33".into(),
        network: String::new(),
        security_groups: vec![],
        tags: owner().tags(&Role::Machine(machine.into())),
        eviction_strategy: None,
        user_data: None,
    }
}

#[tokio::test]
async fn create_server_posts_a_virtual_machine_with_labels_strategies_and_disk() {
    let (client, log) = support::client(|s| {
        let mut echo = s.body.clone();
        echo["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:05Z");
        echo["metadata"]["uid"] = json!("vm-uid");
        Answer::Json(201, echo)
    });
    let server = cloud(client)
        .create_server(&create_req("cp-1"))
        .await
        .expect("created");
    let sent = seen(&log);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].method.as_str(), sent[0].path.as_str()),
        ("POST", VMS)
    );
    let body = &sent[0].body;
    assert_eq!(body["apiVersion"], "kubevirt.io/v1");
    assert_eq!(body["kind"], "VirtualMachine");
    assert_eq!(body["metadata"]["name"], "demo-cp-1");
    assert_eq!(
        body["metadata"]["labels"],
        json!({"flightdeck.dev/cluster": "demo", "flightdeck.dev/uid": "u1",
               "flightdeck.dev/role": "machine", "flightdeck.dev/machine": "cp-1"})
    );
    assert_eq!(body["spec"]["runStrategy"], "Always");
    assert_eq!(body["spec"]["instancetype"]["name"], "u1.large");
    let template = &body["spec"]["template"];
    assert_eq!(
        template["metadata"]["labels"]["flightdeck.dev/control-plane"],
        "true"
    );
    assert_eq!(template["spec"]["evictionStrategy"], "External");
    assert_eq!(template["spec"]["volumes"][0]["name"], "rootdisk");
    assert_eq!(
        template["spec"]["volumes"][0]["containerDisk"]["image"],
        "registry.example/flightdeck/node:1.33"
    );
    assert_eq!(
        template["spec"]["domain"]["devices"]["disks"][0]["name"],
        "rootdisk"
    );

    assert_eq!(server.id, "demo-cp-1");
    assert_eq!(
        server.status,
        ServerStatus::Build,
        "no VMI yet, runStrategy Always"
    );
    assert_eq!(server.flavor, "u1.large");
    assert!(owner().owns(&server.tags));
}

#[tokio::test]
async fn a_worker_vm_is_not_labelled_control_plane() {
    let (client, log) = support::client(|s| Answer::Json(201, s.body.clone()));
    cloud(client)
        .create_server(&create_req("md-0-1"))
        .await
        .expect("created");
    let body = &seen(&log)[0].body;
    assert!(
        body["spec"]["template"]["metadata"]["labels"]
            .get("flightdeck.dev/control-plane")
            .is_none()
    );
}

#[tokio::test]
async fn a_vm_that_exists_is_already_exists_with_the_api_message() {
    let msg = "virtualmachines.kubevirt.io \"demo-cp-1\" already exists";
    let (client, _) = support::client(move |_| status(409, "AlreadyExists", msg));
    let e = cloud(client)
        .create_server(&create_req("cp-1"))
        .await
        .expect_err("409");
    assert_eq!(e.class, ErrorClass::AlreadyExists);
    assert_eq!(e.status, Some(409));
    assert_eq!(e.message, msg);
    assert_eq!(e.service, "kubevirt");
    assert_eq!(e.operation, "create virtualmachine");
}

#[tokio::test]
async fn a_write_conflict_is_conflict() {
    let (client, _) = support::client(|_| status(409, "Conflict", "the object has been modified"));
    let e = cloud(client)
        .create_server(&create_req("cp-1"))
        .await
        .expect_err("409");
    assert_eq!(e.class, ErrorClass::Conflict);
}

#[tokio::test]
async fn a_tag_without_a_label_is_refused_before_anything_is_sent() {
    let (client, log) = support::client(|_| status(500, "InternalError", "unexpected"));
    let mut req = create_req("cp-1");
    req.tags.push("team=infra".into());
    let e = cloud(client)
        .create_server(&req)
        .await
        .expect_err("refused");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(e.message.contains("team=infra"), "{e}");
    assert!(seen(&log).is_empty());
}

fn vm(name: &str, machine: &str) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": "infra", "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"flightdeck.dev/cluster": "demo", "flightdeck.dev/uid": "u1",
                       "flightdeck.dev/role": "machine", "flightdeck.dev/machine": machine}},
        "spec": {"runStrategy": "Always", "instancetype": {"name": "u1.large"},
            "template": {"spec": {"volumes": [{"name": "rootdisk", "containerDisk": {"image": "img:1"}}]}}},
        "status": {"printableStatus": "Running"},
    })
}

fn vmi(name: &str, phase: &str, extra_status: Value) -> Value {
    let mut status = json!({"phase": phase, "nodeName": "infra-1",
        "interfaces": [{"name": "default", "ipAddress": "10.244.0.9"}]});
    if let (Some(s), Some(extra)) = (status.as_object_mut(), extra_status.as_object()) {
        s.extend(extra.clone());
    }
    json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "uid": format!("{name}-vmi"), "labels": {"flightdeck.dev/uid": "u1"}},
        "spec": {"evictionStrategy": "External"},
        "status": status,
    })
}

#[tokio::test]
async fn list_servers_selects_by_uid_label_and_joins_vms_with_vmis() {
    let (client, log) = support::client(|s| match s.path.as_str() {
        VMS => list(vec![
            vm("demo-cp-1", "cp-1"),
            vm("demo-cp-2", "cp-2"),
            vm("demo-md-1", "md-1"),
        ]),
        VMIS => list(vec![
            vmi("demo-cp-1", "Running", json!({})),
            vmi(
                "demo-cp-2",
                "Failed",
                json!({"conditions": [
                {"type": "Ready", "status": "False", "message": "guest crashed"}]}),
            ),
        ]),
        _ => status(404, "NotFound", "no such path"),
    });
    let servers = cloud(client).list_servers(&owner()).await.expect("listed");
    let sent = seen(&log);
    assert_eq!(sent.len(), 2);
    for s in &sent {
        assert_eq!(s.method, "GET");
        assert_eq!(
            s.query.get("labelSelector").map(String::as_str),
            Some("flightdeck.dev/uid=u1")
        );
    }
    let by_name = |n: &str| servers.iter().find(|s| s.name == n).expect(n);
    assert_eq!(by_name("demo-cp-1").status, ServerStatus::Active);
    assert_eq!(
        by_name("demo-cp-1").address,
        Some("10.244.0.9".parse().expect("ip"))
    );
    assert_eq!(by_name("demo-cp-2").status, ServerStatus::Error);
    assert_eq!(by_name("demo-cp-2").fault.as_deref(), Some("guest crashed"));
    assert_eq!(
        by_name("demo-md-1").status,
        ServerStatus::Build,
        "no VMI yet"
    );
    assert_eq!(by_name("demo-md-1").address, None);
    assert_eq!(by_name("demo-md-1").image, "img:1");
}

#[tokio::test]
async fn lists_follow_continue_tokens() {
    let (client, log) = support::client(|s| {
        if s.query.contains_key("continue") {
            list(vec![vmi("b", "Running", json!({}))])
        } else {
            Answer::Json(
                200,
                json!({"apiVersion": "v1", "kind": "List",
                "metadata": {"continue": "page-2"}, "items": [vmi("a", "Running", json!({}))]}),
            )
        }
    });
    let vmis = cloud(client).list_vmis(&owner()).await.expect("listed");
    assert_eq!(
        vmis.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    let sent = seen(&log);
    assert_eq!(
        sent[1].query.get("continue").map(String::as_str),
        Some("page-2")
    );
    assert_eq!(sent[0].query.get("limit").map(String::as_str), Some("500"));
}

#[tokio::test]
async fn delete_server_deletes_the_vm_in_the_foreground_and_maps_404() {
    let (client, log) = support::client(|_| {
        status(
            404,
            "NotFound",
            "virtualmachines.kubevirt.io \"x\" not found",
        )
    });
    let e = cloud(client).delete_server("x").await.expect_err("404");
    assert_eq!(e.class, ErrorClass::NotFound);
    assert_eq!(e.message, "virtualmachines.kubevirt.io \"x\" not found");
    let sent = seen(&log);
    assert_eq!(
        (sent[0].method.as_str(), sent[0].path.as_str()),
        ("DELETE", &*format!("{VMS}/x"))
    );
    assert_eq!(sent[0].body["propagationPolicy"], "Foreground");
}

/// A VirtualMachine read by its name: 404 says it is gone, one that is there (even one
/// being deleted, whose guest may still run) says it is not, and any other answer is an
/// error with the API's message.
#[tokio::test]
async fn a_vm_read_directly_is_gone_on_404_only() {
    let (client, log) = support::client(|s| match s.path.rsplit('/').next() {
        Some("demo-cp-1") => Answer::Json(200, vm("demo-cp-1", "cp-1")),
        Some("demo-cp-3") => status(
            403,
            "Forbidden",
            "virtualmachines.kubevirt.io \"demo-cp-3\" is forbidden",
        ),
        _ => status(
            404,
            "NotFound",
            "virtualmachines.kubevirt.io \"demo-cp-2\" not found",
        ),
    });
    let cloud = cloud(client);
    assert!(!cloud.server_gone("demo-cp-1").await.expect("there"));
    assert!(cloud.server_gone("demo-cp-2").await.expect("404"));
    let e = cloud.server_gone("demo-cp-3").await.expect_err("403");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(e.message.contains("forbidden"), "{}", e.message);
    let paths: Vec<String> = seen(&log)
        .iter()
        .map(|s| format!("{} {}", s.method, s.path))
        .collect();
    assert_eq!(
        paths,
        [
            format!("GET {VMS}/demo-cp-1"),
            format!("GET {VMS}/demo-cp-2"),
            format!("GET {VMS}/demo-cp-3")
        ]
    );
}

#[tokio::test]
async fn list_vmis_reads_the_evacuation_node() {
    let (client, log) = support::client(|_| {
        list(vec![vmi(
            "demo-cp-1",
            "Running",
            json!({"evacuationNodeName": "infra-1"}),
        )])
    });
    let vmis = cloud(client).list_vmis(&owner()).await.expect("listed");
    assert_eq!(seen(&log)[0].path, VMIS);
    assert_eq!(
        seen(&log)[0].query.get("labelSelector").map(String::as_str),
        Some("flightdeck.dev/uid=u1")
    );
    assert_eq!(vmis.len(), 1);
    assert_eq!(vmis[0].evacuation_node.as_deref(), Some("infra-1"));
    assert_eq!(vmis[0].node.as_deref(), Some("infra-1"));
    assert_eq!(vmis[0].eviction_strategy, Some(EvictionStrategy::External));
    assert_eq!(vmis[0].uid, "demo-cp-1-vmi");
}

#[tokio::test]
async fn delete_vmi_maps_server_errors_to_transient() {
    let (client, log) =
        support::client(|_| status(500, "InternalError", "etcdserver: request timed out"));
    let e = cloud(client)
        .delete_vmi("demo-cp-1")
        .await
        .expect_err("500");
    assert_eq!(e.class, ErrorClass::Transient);
    assert_eq!(e.operation, "delete virtualmachineinstance");
    assert_eq!(e.message, "etcdserver: request timed out");
    assert_eq!(seen(&log)[0].path, format!("{VMIS}/demo-cp-1"));
}

#[tokio::test]
async fn a_refused_connection_to_the_infra_cluster_is_transient() {
    let (client, _) = support::client(|_| Answer::Refused);
    let e = cloud(client)
        .list_servers(&owner())
        .await
        .expect_err("refused");
    assert_eq!(e.class, ErrorClass::Transient);
    assert_eq!(e.status, None);
}

#[tokio::test]
async fn an_answer_that_is_not_json_is_an_error_not_a_panic() {
    let (client, _) = support::client(|_| Answer::Json(200, json!("not a list")));
    let e = cloud(client)
        .list_vmis(&owner())
        .await
        .expect_err("odd answer");
    assert_eq!(e.class, ErrorClass::Permanent);
    let (client, _) = support::client(|_| Answer::Json(502, json!("<html>bad gateway</html>")));
    let e = cloud(client)
        .list_vmis(&owner())
        .await
        .expect_err("odd answer");
    assert_eq!(e.class, ErrorClass::Transient);
    assert_eq!(e.status, Some(502));
}

#[tokio::test]
async fn the_endpoint_service_is_created_and_listed_by_label() {
    let (client, log) = support::client(|s| match s.method.as_str() {
        "POST" => {
            let mut echo = s.body.clone();
            echo["spec"]["clusterIP"] = json!("10.96.7.7");
            Answer::Json(201, echo)
        }
        _ => list(vec![
            json!({"metadata": {"name": "demo-api", "labels": {"flightdeck.dev/uid": "u1"}},
            "spec": {"clusterIP": "10.96.7.7", "ports": [{"port": 6443}]}}),
        ]),
    });
    let c = cloud(client);
    let req = EndpointService {
        name: "demo-api".into(),
        port: 6443,
        address: None,
        tags: owner().tags(&Role::ApiLoadBalancer),
    };
    let created = c.create_endpoint_service(&req).await.expect("created");
    assert_eq!(created.address.as_deref(), Some("10.96.7.7"));
    assert_eq!(created.port, 6443);
    let listed = c.list_endpoint_services(&owner()).await.expect("listed");
    assert_eq!(listed.len(), 1);
    let sent = seen(&log);
    assert_eq!(
        (sent[0].method.as_str(), sent[0].path.as_str()),
        ("POST", SERVICES)
    );
    assert_eq!(
        sent[0].body["spec"]["selector"],
        json!({"flightdeck.dev/uid": "u1", "flightdeck.dev/control-plane": "true"})
    );
    assert_eq!(sent[0].body["spec"]["ports"][0]["port"], 6443);
    assert_eq!(
        sent[1].query.get("labelSelector").map(String::as_str),
        Some("flightdeck.dev/uid=u1")
    );
}

#[tokio::test]
async fn kubevirt_has_no_neutron_octavia_or_templates() {
    let (client, log) = support::client(|_| status(500, "InternalError", "unexpected"));
    let c = cloud(client);
    let e = c
        .list_security_groups(&owner())
        .await
        .expect_err("no neutron");
    assert_eq!(e.class, ErrorClass::Permanent);
    let e = c
        .list_load_balancers(&owner())
        .await
        .expect_err("no octavia");
    assert_eq!(e.class, ErrorClass::Permanent);
    let e = c.add_security_group("x", "y").await.expect_err("no groups");
    assert_eq!(e.class, ErrorClass::Permanent);
    let e = c.list_templates().await.expect_err("no templates");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(seen(&log).is_empty(), "nothing is sent");
}
