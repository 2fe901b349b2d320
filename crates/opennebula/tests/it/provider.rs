//! flightdeck's provider traits on OpenNebula, against a fake oned on loopback: which
//! calls go out for each trait method and what flightdeck makes of the answers.

use crate::fake;

use std::net::IpAddr;

use dxr::Value;
use fake::{Fake, fail, ok_id, ok_xml};
use flightdeck_cloud::{
    Compute, ErrorClass, GuestCluster, ImageCreate, ImageState, Instantiate, LoadBalancing,
    LockLevel, Network, Node, Ownership, Role, ServerCreate, ServerStatus, TemplateCreate,
    Templates, Timestamp,
};

fn owner() -> Ownership {
    Ownership {
        cluster: "demo".into(),
        uid: "u1".into(),
    }
}

/// The workload cluster's nodes, as the engine would hand them in.
struct OneNode;

impl GuestCluster for OneNode {
    async fn list_nodes(
        &self,
        owner: &Ownership,
    ) -> flightdeck_cloud::provider::Result<Option<Vec<Node>>> {
        Ok(Some(vec![Node {
            name: format!("{}-cp-1", owner.cluster),
            server_id: Some("42".into()),
            ready: true,
            unschedulable: false,
            created_at: Timestamp(0),
            pod_cidr: None,
            internal_ip: None,
            labels: Default::default(),
            taints: Vec::new(),
            hold_deletion: None,
        }]))
    }

    fn nodes_stale_since(&self, _owner: &Ownership) -> Option<Timestamp> {
        None
    }

    fn forget_node_watches(&self) {}
}

#[tokio::test]
async fn list_servers_keeps_only_the_clusters_vms_and_maps_their_state() {
    let fake = Fake::start(|_| ok_xml(fake::VM_POOL)).await;
    let servers = fake
        .cloud(OneNode)
        .list_servers(&owner())
        .await
        .expect("lists");
    let ids: Vec<&str> = servers.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["42", "44", "45"], "VM 43 belongs to another cluster");

    let running = &servers[0];
    assert_eq!(running.name, "demo-cp-1");
    assert_eq!(running.status, ServerStatus::Active);
    assert_eq!(running.task_state, None);
    assert_eq!(running.address, Some(IpAddr::from([10, 0, 0, 11])));
    assert_eq!(running.image, "7");
    assert_eq!(running.flavor, "");
    assert!(running.security_groups.is_empty());
    assert_eq!(running.created_at, Timestamp(1_767_225_605_000));
    assert_eq!(
        running.tags,
        owner().tags(&Role::Machine("demo-cp-1".into()))
    );

    let failed = &servers[1];
    assert_eq!(failed.status, ServerStatus::Error);
    assert_eq!(
        failed.fault.as_deref(),
        Some("OpenNebula LCM state BOOT_FAILURE")
    );
    assert_eq!(failed.address, None);
    assert_eq!(failed.image, "", "a VM without TEMPLATE_ID");

    let shutting_down = &servers[2];
    assert!(shutting_down.is_deleting());
    assert_eq!(
        shutting_down.address,
        Some("2001:db8::45".parse().expect("ip"))
    );

    let call = &fake.calls()[0];
    assert_eq!(
        call.method, "one.vmpool.infoextended",
        "the short form drops the user template's ownership attributes"
    );
    assert_eq!(
        call.args(),
        [-2, -1, -1, -1].map(Value::Integer).as_slice(),
        "every VM the user sees, in every state but DONE"
    );
}

#[tokio::test]
async fn delete_server_terminates_hard_and_a_gone_vm_is_not_found() {
    let fake = Fake::start(|call| match call.args().get(1) {
        Some(Value::Integer(42)) => ok_id(42),
        _ => fail("[one.vm.action] Error getting virtual machine [99].", 0x400),
    })
    .await;
    let cloud = fake.cloud(OneNode);
    cloud.delete_server("42").await.expect("deleted");
    let e = cloud.delete_server("99").await.expect_err("gone");
    assert_eq!(e.class, ErrorClass::NotFound);
    let e = cloud.delete_server("srv-1").await.expect_err("not a VM id");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(fake.calls().len(), 2, "a non-numeric ID never reaches oned");
    assert_eq!(
        fake.calls()[0].args(),
        [Value::String("terminate-hard".into()), Value::Integer(42)].as_slice()
    );
}

/// A VM read by its ID (`one.vm.info`): DONE or NO_EXISTS says it is gone, any other
/// state that it is not, and any other failure is an error.
#[tokio::test]
async fn a_vm_read_directly_is_gone_when_done_or_unknown() {
    let vm = |id: i32, state: i32| {
        ok_xml(&format!(
            "<VM><ID>{id}</ID><UNAME>u</UNAME><NAME>demo-cp-1</NAME><STATE>{state}</STATE><LCM_STATE>0</LCM_STATE><STIME>1</STIME><ETIME>2</ETIME><TEMPLATE/><USER_TEMPLATE/></VM>"
        ))
    };
    let fake = Fake::start(move |call| match call.args().first() {
        Some(Value::Integer(42)) => vm(42, 3),
        Some(Value::Integer(43)) => vm(43, 6),
        Some(Value::Integer(44)) => fail(
            "[one.vm.info] User [3] : Not authorized to perform USE VM [44].",
            0x200,
        ),
        _ => fail("[one.vm.info] Error getting virtual machine [99].", 0x400),
    })
    .await;
    let cloud = fake.cloud(OneNode);
    assert!(!cloud.server_gone("42").await.expect("running"));
    assert!(cloud.server_gone("43").await.expect("DONE"));
    assert!(cloud.server_gone("99").await.expect("NO_EXISTS"));
    let e = cloud.server_gone("44").await.expect_err("not authorized");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(e.to_string().contains("Not authorized"), "{e}");
    let methods: Vec<String> = fake.calls().iter().map(|c| c.method.clone()).collect();
    assert_eq!(methods, ["one.vm.info"; 4]);
}

#[tokio::test]
async fn servers_are_instantiated_from_templates_not_created() {
    let fake = Fake::start(|_| ok_id(0)).await;
    let cloud = fake.cloud(OneNode);
    let req = ServerCreate {
        name: "x".into(),
        flavor: "f".into(),
        image: "i".into(),
        network: "n".into(),
        security_groups: vec![],
        tags: vec![],
        eviction_strategy: None,
        user_data: None,
    };
    let e = cloud.create_server(&req).await.expect_err("no create");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(e.message.contains("Templates::instantiate"), "{e}");
    let e = cloud
        .add_security_group("42", "sg")
        .await
        .expect_err("no add");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn instantiate_puts_the_ownership_tags_into_the_user_template() {
    let fake = Fake::start(|_| ok_id(46)).await;
    let req = Instantiate {
        template_id: "7".into(),
        name: "demo-cp-3".into(),
        tags: owner().tags(&Role::Machine("demo-cp-3".into())),
        user_data: None,
    };
    let id = fake
        .cloud(OneNode)
        .instantiate(&req)
        .await
        .expect("instantiates");
    assert_eq!(id, "46");
    let call = &fake.calls()[0];
    assert_eq!(call.method, "one.template.instantiate");
    assert_eq!(
        call.args(),
        [
            Value::Integer(7),
            Value::String("demo-cp-3".into()),
            Value::Boolean(false),
            Value::String(
                "FLIGHTDECK_CLUSTER = \"demo\"\nFLIGHTDECK_UID = \"u1\"\nFLIGHTDECK_ROLE = \"machine\"\nFLIGHTDECK_MACHINE = \"demo-cp-3\"\n".into()
            ),
            Value::Boolean(false),
        ]
        .as_slice()
    );
}

#[tokio::test]
async fn a_template_is_allocated_with_its_name_and_checked_content() {
    let fake = Fake::start(|_| ok_id(9)).await;
    let cloud = fake.cloud(OneNode);
    let id = cloud
        .create_template(&TemplateCreate {
            name: "k8s-node-v2".into(),
            content: "CPU = 2\nMEMORY = \"4096\"\nDISK = [ IMAGE = \"ubuntu-24.04\" ]\n".into(),
        })
        .await
        .expect("allocates");
    assert_eq!(id, "9");
    assert_eq!(
        fake.calls()[0].args(),
        [Value::String(
            "NAME = \"k8s-node-v2\"\nCPU = \"2\"\nMEMORY = \"4096\"\nDISK = [ IMAGE = \"ubuntu-24.04\" ]\n".into()
        )]
        .as_slice()
    );
    let e = cloud
        .create_template(&TemplateCreate {
            name: "bad".into(),
            content: "DISK = [ IMAGE = \"x\"".into(),
        })
        .await
        .expect_err("unclosed vector");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(fake.calls().len(), 1, "bad content never reaches oned");
}

#[tokio::test]
async fn templates_list_with_content_lock_and_owner() {
    let fake = Fake::start(|_| ok_xml(fake::TEMPLATE_POOL)).await;
    let templates = fake.cloud(OneNode).list_templates().await.expect("lists");
    assert_eq!(templates.len(), 2);
    let t = &templates[0];
    assert_eq!(
        (t.id.as_str(), t.name.as_str(), t.owner.as_str()),
        ("7", "k8s-node-v1", "flightdeck")
    );
    assert_eq!(t.lock, Some(LockLevel::Manage));
    assert!(
        t.content.starts_with("CPU = \"2\"\nDESCRIPTION = "),
        "{}",
        t.content
    );
    assert!(
        !t.content.lines().any(|l| l.starts_with("NAME ")),
        "{}",
        t.content
    );
    assert_eq!(templates[1].lock, None);
    assert_eq!(
        templates[1].content, "CPU = \"1\"\nMEMORY = \"1024\"\n",
        "NAME is not content"
    );
}

#[tokio::test]
async fn deleting_a_locked_template_is_refused_permanently() {
    let fake = Fake::start(|_| {
        fail(
            "[one.template.delete] User [0] : TEMPLATE is locked.",
            0x200,
        )
    })
    .await;
    let e = fake
        .cloud(OneNode)
        .delete_template("7")
        .await
        .expect_err("locked");
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(e.status, Some(512));
    assert_eq!(
        fake.calls()[0].args(),
        [Value::Integer(7), Value::Boolean(false)].as_slice(),
        "the template's images are kept"
    );
}

#[tokio::test]
async fn images_list_and_are_allocated_into_their_datastore() {
    let fake = Fake::start(|call| match call.method.as_str() {
        "one.imagepool.info" => ok_xml(fake::IMAGE_POOL),
        _ => ok_id(5),
    })
    .await;
    let cloud = fake.cloud(OneNode);
    let images = cloud.list_images().await.expect("lists");
    assert_eq!(images.len(), 2);
    assert_eq!(images[0].state, ImageState::Used);
    assert_eq!(images[0].running_vms, 2);
    assert_eq!(
        images[0].content,
        "DEV_PREFIX = \"vd\"\nFORMAT = \"qcow2\"\n"
    );
    assert_eq!(images[1].state, ImageState::Locked);
    assert_eq!(images[1].lock, Some(LockLevel::Use));
    let id = cloud
        .create_image(&ImageCreate {
            name: "ubuntu-25.04".into(),
            content: "PATH = \"https://cloud-images.example/plucky.img\"".into(),
            datastore_id: 1,
        })
        .await
        .expect("allocates");
    assert_eq!(id, "5");
    cloud.delete_image("5").await.expect("deletes");
    let calls = fake.calls();
    assert_eq!(
        calls[1].args(),
        [
            Value::String(
                "NAME = \"ubuntu-25.04\"\nPATH = \"https://cloud-images.example/plucky.img\"\n"
                    .into()
            ),
            Value::Integer(1)
        ]
        .as_slice()
    );
    assert_eq!(calls[2].method, "one.image.delete");
    assert_eq!(
        calls[2].args(),
        [Value::Integer(5), Value::Boolean(false)].as_slice(),
        "not forced"
    );
}

#[tokio::test]
async fn neutron_and_octavia_calls_are_permanent_errors_that_name_the_endpoint_field() {
    let fake = Fake::start(|_| ok_id(0)).await;
    let cloud = fake.cloud(OneNode);
    let errors = [
        cloud.list_security_groups(&owner()).await.map(drop),
        cloud.find_router("r").await.map(drop),
        cloud.list_load_balancers(&owner()).await.map(drop),
        cloud.delete_load_balancer_cascade("lb").await,
    ];
    for r in errors {
        let e = r.expect_err("unsupported");
        assert_eq!(e.class, ErrorClass::Permanent);
        assert!(
            e.message.contains("spec.provider.opennebula.endpoint"),
            "{e}"
        );
    }
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn the_workload_clusters_nodes_come_from_the_guest_source() {
    let fake = Fake::start(|_| ok_id(0)).await;
    let nodes = fake
        .cloud(OneNode)
        .list_nodes(&owner())
        .await
        .expect("lists")
        .expect("reachable");
    assert_eq!(nodes[0].name, "demo-cp-1");
    assert!(fake.calls().is_empty(), "nodes are not asked of oned");
}
