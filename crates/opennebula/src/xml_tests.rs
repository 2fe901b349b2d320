use super::*;

const VM_POOL: &str = include_str!("../tests/data/vm_pool.xml");
const TEMPLATE_POOL: &str = include_str!("../tests/data/template_pool.xml");
const IMAGE_POOL: &str = include_str!("../tests/data/image_pool.xml");

#[test]
fn a_vm_pool_listing_reads_states_templates_and_user_templates() {
    let vms = parse_vm_pool(VM_POOL).expect("parses");
    assert_eq!(vms.len(), 4);
    let vm = &vms[0];
    assert_eq!(vm.common.id, 42);
    assert_eq!(vm.common.name, "demo-cp-1");
    assert_eq!(vm.common.uname, "flightdeck");
    assert_eq!((vm.state, vm.lcm_state), (3, 3));
    assert_eq!(vm.stime, 1_767_225_605);
    assert_eq!(vm.template.single("TEMPLATE_ID"), Some("7"));
    let nic = vm.template.vectors("NIC").next().expect("a NIC");
    assert!(nic.contains(&("IP".to_string(), "10.0.0.11".to_string())));
    assert_eq!(vm.user_template.single("FLIGHTDECK_UID"), Some("u1"));
    assert_eq!(vms[3].common.lock.as_ref().map(|l| l.locked), Some(1));
    assert_eq!(vms[3].common.lock.as_ref().and_then(|l| l.owner), None);
}

#[test]
fn a_template_pool_keeps_document_order_cdata_and_entities() {
    let templates = parse_template_pool(TEMPLATE_POOL).expect("parses");
    assert_eq!(templates.len(), 2);
    let t = &templates[0];
    assert_eq!(t.common.id, 7);
    assert_eq!(
        t.common.lock,
        Some(Lock {
            locked: 2,
            owner: Some(2),
            time: Some(1_767_225_000),
            req_id: Some(-1)
        })
    );
    assert_eq!(t.common.permissions.map(|p| p.owner_m), Some(1));
    assert_eq!(t.regtime, 1_767_224_000);
    assert_eq!(
        t.template.render(),
        concat!(
            "CPU = \"2\"\n",
            "DESCRIPTION = \"a \\\"quoted\\\" \\\\ <b>\"\n",
            "DISK = [ IMAGE = \"ubuntu-24.04\", IMAGE_UNAME = \"flightdeck\" ]\n",
            "MEMORY = \"4096\"\n",
            "NIC = [ NETWORK = \"nodes\" ]\n",
        )
    );
    assert_eq!(templates[1].common.name, "shared & old");
    assert_eq!(templates[1].common.lock, None);
}

#[test]
fn an_image_pool_reads_state_running_vms_and_path() {
    let images = parse_image_pool(IMAGE_POOL).expect("parses");
    assert_eq!(images.len(), 2);
    assert_eq!(images[0].state, 2);
    assert_eq!(images[0].running_vms, 2);
    assert_eq!(images[0].datastore_id, 1);
    assert_eq!(images[0].path, "https://cloud-images.example/noble.img");
    assert_eq!(images[0].template.single("DEV_PREFIX"), Some("vd"));
    assert_eq!(images[1].state, 4);
    assert_eq!(images[1].common.lock.as_ref().map(|l| l.locked), Some(1));
}

#[test]
fn single_objects_read_like_pool_members() {
    let vm = parse_vm(
        "<?xml version=\"1.0\"?>\n<VM><ID>5</ID><UNAME>u</UNAME><NAME>n</NAME><STATE>1</STATE><LCM_STATE>0</LCM_STATE><STIME>9</STIME><TEMPLATE/><USER_TEMPLATE/></VM>",
    )
    .expect("parses");
    assert_eq!((vm.common.id, vm.state, vm.stime), (5, 1, 9));
    assert!(vm.template.attributes.is_empty());
    let t = parse_template(
        "<VMTEMPLATE><ID>1</ID><UNAME>u</UNAME><NAME>t</NAME><TEMPLATE><CPU>1</CPU></TEMPLATE></VMTEMPLATE>",
    )
    .expect("parses");
    assert_eq!(t.template.single("CPU"), Some("1"));
    let i = parse_image(
        "<IMAGE><ID>1</ID><UNAME>u</UNAME><NAME>i</NAME><STATE>1</STATE><RUNNING_VMS>0</RUNNING_VMS><TEMPLATE/></IMAGE>",
    )
    .expect("parses");
    assert_eq!(i.state, 1);
}

#[test]
fn a_missing_or_broken_element_is_named_in_the_error() {
    let cases = [
        ("<VM_POOL><VM><NAME>x</NAME></VM></VM_POOL>", "VM: no ID"),
        (
            "<VM_POOL><VM><ID>12</ID><UNAME>u</UNAME><NAME>x</NAME><LCM_STATE>3</LCM_STATE><STIME>1</STIME><TEMPLATE/></VM></VM_POOL>",
            "VM 12: no STATE",
        ),
        (
            "<VM_POOL><VM><ID>x1</ID></VM></VM_POOL>",
            "VM: ID \"x1\" is not a number",
        ),
        (
            "<VM_POOL><VM><ID>-3</ID></VM></VM_POOL>",
            "ID -3 is out of range",
        ),
        (
            "<IMAGE_POOL/>",
            "expected a <VM_POOL> document, got <IMAGE_POOL>",
        ),
        ("<VM_POOL><VM>", "ends inside <VM>"),
        ("", "empty"),
        ("<VM_POOL><VM></VMX></VM_POOL>", "not well-formed"),
        ("<VM_POOL>&bogus;</VM_POOL>", "unknown entity"),
    ];
    for (xml, want) in cases {
        let e = parse_vm_pool(xml).expect_err(xml);
        assert!(e.0.contains(want), "{xml}: {e}");
    }
}

#[test]
fn an_empty_pool_is_an_empty_list() {
    assert_eq!(parse_vm_pool("<VM_POOL/>"), Ok(vec![]));
    assert_eq!(
        parse_template_pool("<VMTEMPLATE_POOL></VMTEMPLATE_POOL>"),
        Ok(vec![])
    );
}

#[test]
fn nesting_deeper_than_the_bound_is_refused() {
    let deep = format!(
        "{}{}",
        "<A>".repeat(DEPTH_MAX + 1),
        "</A>".repeat(DEPTH_MAX + 1)
    );
    let e = parse_document(&deep).expect_err("too deep");
    assert!(e.0.contains("deeper"), "{e}");
}
