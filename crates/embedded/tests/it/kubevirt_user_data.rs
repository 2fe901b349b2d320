//! machine.userData on KubeVirt beyond the 2,048 bytes KubeVirt takes inline: through the
//! real provider against the simulated infra cluster, the user data goes into a Secret
//! the VirtualMachine owns, the guest boots only once it exists, and the Secret goes with
//! the VM. A Secret that cannot be made takes its VM back with it.

use std::sync::Arc;

use flightdeck_cloud::{
    Compute, ErrorClass, Ownership, Role, ServerCreate, ServerStatus, SimClock, Timestamp,
};
use flightdeck_kubevirt::userdata::{SECRET_KEY, secret_name};
use flightdeck_sim::{SimCloud, SimConfig};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::PostParams;

const NS: &str = "clusters";

fn owner() -> Ownership {
    Ownership {
        cluster: "demo".into(),
        uid: "u1".into(),
    }
}

fn req(machine: &str, user_data: &str) -> ServerCreate {
    ServerCreate {
        name: format!("demo-{machine}"),
        flavor: "u1.medium".into(),
        image: "quay.io/containerdisks/ubuntu:24.04".into(),
        network: String::new(),
        security_groups: Vec::new(),
        tags: owner().tags(&Role::Machine(machine.into())),
        eviction_strategy: None,
        user_data: Some(user_data.into()),
    }
}

fn big_user_data() -> String {
    let mut s = String::from("#cloud-config\nwrite_files:\n");
    while s.len() <= 3_000 {
        s.push_str("- {path: /etc/flightdeck/padding, content: 'abcdefghijklmnopqrstuvwxyz'}\n");
    }
    s
}

/// The simulator with the namespace the machines go in.
async fn start(seed: u64) -> (Arc<SimCloud>, Arc<flightdeck_embedded::InProcessKubeVirt>) {
    let clock = SimClock::new(Timestamp(1_767_225_600_000));
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), seed, clock));
    let provider = flightdeck_embedded::in_process_kubevirt(cloud.clone(), NS);
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NS}})).expect("ns");
    Api::<Namespace>::all(provider.infra().clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    (cloud, provider)
}

/// Steps virtual time until `done` holds for the cluster's servers.
async fn wait_for(
    cloud: &SimCloud,
    provider: &flightdeck_embedded::InProcessKubeVirt,
    done: impl Fn(&[flightdeck_cloud::Server]) -> bool,
) {
    for _ in 0..1_000 {
        let servers = provider.list_servers(&owner()).await.expect("list");
        if done(&servers) {
            return;
        }
        let Some(t) = cloud.next_transition_at() else {
            break;
        };
        cloud.clock().advance_to(t);
        cloud.advance();
    }
    panic!("never happened");
}

#[tokio::test]
async fn large_user_data_boots_the_vm_from_a_secret_it_owns() {
    let (cloud, provider) = start(5).await;
    let secrets: Api<Secret> = Api::namespaced(provider.infra().clone(), NS);
    let data = big_user_data();

    let server = provider
        .create_server(&req("cp-1", &data))
        .await
        .expect("created");
    let secret = secrets
        .get(&secret_name(&server.name))
        .await
        .expect("the Secret exists");
    assert_eq!(secret.data.expect("data")[SECRET_KEY].0, data.as_bytes());
    let owner = &secret.metadata.owner_references.expect("owned")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("VirtualMachine", "demo-cp-1")
    );
    wait_for(&cloud, &provider, |s| {
        s.iter().any(|s| s.status == ServerStatus::Active)
    })
    .await;

    provider.delete_server(&server.id).await.expect("deleted");
    wait_for(&cloud, &provider, <[_]>::is_empty).await;
    let gone = secrets
        .get_opt(&secret_name(&server.name))
        .await
        .expect("get");
    assert!(gone.is_none(), "the Secret goes with its VM");
}

/// The Secret is made before its VM: a name someone else holds makes no VM at all
/// (nothing to take back, nothing deleted).
#[tokio::test]
async fn a_secret_name_held_by_someone_else_makes_no_vm_and_is_left_alone() {
    let (cloud, provider) = start(6).await;
    let secrets: Api<Secret> = Api::namespaced(provider.infra().clone(), NS);
    // Someone else's Secret holds the name.
    let squatter: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": secret_name("demo-cp-1"), "namespace": NS},
        "data": {"other": "eA=="},
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &squatter)
        .await
        .expect("squatter");

    let e = provider
        .create_server(&req("cp-1", &big_user_data()))
        .await
        .expect_err("the Secret's name is taken");
    assert_ne!(e.class, ErrorClass::Transient, "{e}");
    assert!(e.to_string().contains("secret"), "{e}");
    wait_for(&cloud, &provider, <[_]>::is_empty).await;
    let kept = secrets.get(&secret_name("demo-cp-1")).await.expect("get");
    assert!(
        kept.data.expect("data").contains_key("other"),
        "someone else's Secret is left alone"
    );
    let deletes = cloud
        .mutations()
        .iter()
        .filter(|m| m.operation.contains("DELETE"))
        .count();
    assert_eq!(deletes, 0, "nothing was made, so nothing is deleted");
}

/// A Secret an earlier attempt of the same cluster left (its VM was never made) is
/// taken over: its data is replaced, and the VM boots from it and owns it.
#[tokio::test]
async fn a_secret_left_by_an_earlier_attempt_is_taken_over() {
    let (cloud, provider) = start(8).await;
    let secrets: Api<Secret> = Api::namespaced(provider.infra().clone(), NS);
    let req = req("cp-1", &big_user_data());
    let vm = flightdeck_kubevirt::servers::virtual_machine(
        &flightdeck_kubevirt::servers::vm_create_of(&req),
        NS,
    )
    .expect("vm");
    let left = flightdeck_kubevirt::userdata::secret_for(&vm, "#cloud-config\n# stale\n");
    secrets
        .create(&PostParams::default(), &left)
        .await
        .expect("left behind");

    let server = provider.create_server(&req).await.expect("created");
    let secret = secrets.get(&secret_name(&server.name)).await.expect("get");
    assert_eq!(
        secret.data.expect("data")[SECRET_KEY].0,
        big_user_data().as_bytes(),
        "the data is this attempt's"
    );
    let owner = &secret.metadata.owner_references.expect("owned")[0];
    assert_eq!(owner.name, "demo-cp-1");
    wait_for(&cloud, &provider, |s| {
        s.iter().any(|s| s.status == ServerStatus::Active)
    })
    .await;
}

#[tokio::test]
async fn a_vm_whose_user_data_secret_is_missing_waits_for_it_to_boot() {
    let (cloud, provider) = start(7).await;
    let req = req("cp-1", &big_user_data());
    let vm = flightdeck_kubevirt::servers::virtual_machine(
        &flightdeck_kubevirt::servers::vm_create_of(&req),
        NS,
    )
    .expect("vm");
    let vms: Api<flightdeck_kubevirt::objects::VirtualMachine> =
        Api::namespaced(provider.infra().clone(), NS);
    let created = vms.create(&PostParams::default(), &vm).await.expect("vm");
    for _ in 0..50 {
        if let Some(t) = cloud.next_transition_at() {
            cloud.clock().advance_to(t);
            cloud.advance();
        }
    }
    let servers = provider.list_servers(&owner()).await.expect("list");
    assert_eq!(
        servers.len(),
        1,
        "the VM is listed as the cluster's: {servers:?}"
    );
    assert!(
        servers.iter().all(|s| s.status != ServerStatus::Active),
        "no Secret, no boot: {servers:?}"
    );
    let secret = flightdeck_kubevirt::userdata::secret_for(&created, &big_user_data());
    Api::<Secret>::namespaced(provider.infra().clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    wait_for(&cloud, &provider, |s| {
        s.iter().any(|s| s.status == ServerStatus::Active)
    })
    .await;
}
