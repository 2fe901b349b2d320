//! The simulated OpenNebula's VM templates: locks, names, errors and documents, as
//! OpenNebula 6.10 answers them.

use crate::common;
use crate::one_support;

use common::sim;
use flightdeck_sim::SimConfig;
use one_support::*;

#[test]
fn manage_lock_allows_instantiate_but_denies_delete_with_authorization() {
    let sim = sim(1);
    let t = allocate_template(&sim, "web", VM_BODY);
    assert_eq!(
        ok_int(call(&sim, "one.template.lock", vec![i(t), i(2), b(false)])),
        t
    );
    let vm = ok_int(instantiate(&sim, t, "web-0", ""));
    assert!(vm >= 0);
    let (msg, code, _) = fail(call(&sim, "one.template.delete", vec![i(t), b(false)]));
    assert_eq!(code, AUTHORIZATION);
    assert_eq!(
        msg,
        format!("[one.template.delete] User [0] : TEMPLATE is locked. [{t}].")
    );
    let (msg, code, _) = fail(call(
        &sim,
        "one.template.update",
        vec![i(t), s("CPU = 2"), i(1)],
    ));
    assert_eq!(code, AUTHORIZATION);
    assert_eq!(
        msg,
        format!("[one.template.update] User [0] : TEMPLATE is locked. [{t}].")
    );
    assert!(
        template(&sim, t).is_some(),
        "the locked template is still there"
    );
}

#[test]
fn use_lock_denies_instantiate_and_info_and_unlock_are_never_blocked() {
    let sim = sim(2);
    let t = allocate_template(&sim, "web", VM_BODY);
    ok_int(call(&sim, "one.template.lock", vec![i(t), i(1), b(false)]));
    let (msg, code, _) = fail(instantiate(&sim, t, "web-0", ""));
    assert_eq!(code, AUTHORIZATION);
    assert_eq!(
        msg,
        format!("[one.template.instantiate] User [0] : TEMPLATE is locked. [{t}].")
    );
    let doc = parse(&ok_str(call(
        &sim,
        "one.template.info",
        vec![i(t), b(false), b(false)],
    )));
    assert_eq!(doc.text_at("LOCK/LOCKED"), "1");
    assert_eq!(doc.text_at("LOCK/OWNER"), "0");
    assert_eq!(ok_int(call(&sim, "one.template.unlock", vec![i(t)])), t);
    let doc = parse(&ok_str(call(&sim, "one.template.info", vec![i(t)])));
    assert!(
        doc.child("LOCK").is_none(),
        "an unlocked template has no LOCK element"
    );
    assert!(ok_int(instantiate(&sim, t, "web-0", "")) >= 0);
}

#[test]
fn lock_level_four_is_stored_as_use_and_admin_lock_allows_manage_operations() {
    let sim = sim(3);
    let t = allocate_template(&sim, "web", VM_BODY);
    ok_int(call(&sim, "one.template.lock", vec![i(t), i(4)]));
    assert_eq!(
        template(&sim, t).and_then(|t| t.lock).map(|l| l.level),
        Some(1)
    );
    let (msg, code, _) = fail(call(&sim, "one.template.lock", vec![i(t), i(1), b(true)]));
    assert_eq!(
        code, ACTION,
        "test=true on a locked object answers its lock time: {msg}"
    );
    ok_int(call(&sim, "one.template.lock", vec![i(t), i(3)]));
    ok_int(call(
        &sim,
        "one.template.update",
        vec![i(t), s("CPU = \"2\""), i(1)],
    ));
    assert_eq!(ok_int(call(&sim, "one.template.delete", vec![i(t)])), t);
    let (msg, code, _) = fail(call(&sim, "one.template.lock", vec![i(99), i(7)]));
    assert_eq!(
        (msg.as_str(), code),
        (
            "[one.template.lock] Error getting virtual machine template [99].",
            NO_EXISTS
        )
    );
}

#[test]
fn duplicate_template_name_is_rejected_with_internal_and_the_owner_of_the_name() {
    let sim = sim(4);
    let t = allocate_template(&sim, "web", VM_BODY);
    let (msg, code, id) = fail(call(
        &sim,
        "one.template.allocate",
        vec![s("NAME = web\nCPU = 1")],
    ));
    assert_eq!(
        msg,
        format!("[one.template.allocate] NAME is already taken by TEMPLATE {t}.")
    );
    assert_eq!((code, id), (INTERNAL, -1));
    let (msg, code, _) = fail(call(&sim, "one.template.allocate", vec![s("CPU = 1")]));
    assert_eq!(
        (msg.as_str(), code),
        (
            "[one.template.allocate] Invalid NAME, it cannot be empty",
            INTERNAL
        )
    );
}

#[test]
fn bad_syntax_answers_a_parse_error_with_its_line() {
    let sim = sim(5);
    let (msg, code, _) = fail(call(
        &sim,
        "one.template.allocate",
        vec![s("NAME = x\nDISK = [ IMAGE = \"a\"\n")],
    ));
    assert_eq!(code, INTERNAL);
    assert!(
        msg.starts_with("[one.template.allocate] Parse error: syntax error at line"),
        "{msg}"
    );
}

#[test]
fn wrong_session_is_an_authentication_failure() {
    let sim = sim_with_password("s3cret");
    let v = sim.one_call(
        "one.templatepool.info",
        vec![s("oneadmin:opennebula"), i(-2), i(-1), i(-1)],
    );
    let (msg, code, _) = fail(v);
    assert_eq!(
        msg,
        "[one.templatepool.info] User couldn't be authenticated, aborting call."
    );
    assert_eq!(code, AUTHENTICATION);
    let v = sim.one_call(
        "one.templatepool.info",
        vec![s("oneadmin:s3cret"), i(-2), i(-1), i(-1)],
    );
    assert_eq!(parse(&ok_str(v)).name, "VMTEMPLATE_POOL");
}

fn sim_with_password(p: &str) -> flightdeck_sim::SimCloud {
    common::sim_with(
        SimConfig {
            one_password: p.into(),
            ..SimConfig::default()
        },
        6,
    )
}

#[test]
fn wrong_param_types_answer_an_xmlrpc_fault_never_a_panic() {
    let sim = sim(7);
    let fault = |v: dxr::Value| match v {
        dxr::Value::Struct(m) => (m.get("faultCode").cloned(), m.get("faultString").cloned()),
        other => panic!("expected a fault struct, got {other:?}"),
    };
    let (code, msg) = fault(call(&sim, "one.template.info", vec![s("7")]));
    assert_eq!(code, Some(i(-501)));
    assert_eq!(
        msg,
        Some(s("Parameter that is supposed to be integer is not"))
    );
    let (code, msg) = fault(call(&sim, "one.template.delete", vec![]));
    assert_eq!(
        (code, msg),
        (Some(i(-501)), Some(s("Not enough parameters")))
    );
    let (code, _) = fault(sim.one_call("one.template.info", vec![]));
    assert_eq!(code, Some(i(-501)));
    let (code, _) = fault(call(&sim, "one.nothing.here", vec![]));
    assert_eq!(code, Some(i(-506)));
    assert_eq!(sim.api_calls()["opennebula"]["one.template.info"], 2);
}

#[test]
fn template_info_is_the_document_pyone_reads() {
    let sim = sim(8);
    let t = allocate_template(
        &sim,
        "web",
        "memory = 2048\nCPU = \"0.5\"\nDISK = [ IMAGE = \"ubuntu\", SIZE = \"10\" ]\n# comment\nLABEL = \"a <b> & c\"\n",
    );
    let xml = ok_str(call(
        &sim,
        "one.template.info",
        vec![i(t), b(false), b(false)],
    ));
    assert!(
        xml.contains("<CPU><![CDATA[0.5]]></CPU>"),
        "values are CDATA: {xml}"
    );
    let doc = parse(&xml);
    assert_eq!(doc.name, "VMTEMPLATE");
    assert_eq!(
        doc.names(),
        [
            "ID",
            "UID",
            "GID",
            "UNAME",
            "GNAME",
            "NAME",
            "PERMISSIONS",
            "REGTIME",
            "TEMPLATE"
        ]
    );
    assert_eq!(doc.text_at("ID"), t.to_string());
    assert_eq!(doc.text_at("UNAME"), "oneadmin");
    assert_eq!(doc.text_at("NAME"), "web");
    assert_eq!(doc.text_at("PERMISSIONS/OWNER_U"), "1");
    assert_eq!(
        doc.at("TEMPLATE").map(|n| n.names()),
        Some(vec!["CPU", "DISK", "LABEL", "MEMORY"])
    );
    assert_eq!(doc.text_at("TEMPLATE/DISK/IMAGE"), "ubuntu");
    assert_eq!(doc.text_at("TEMPLATE/LABEL"), "a <b> & c");
    let pool = parse(&ok_str(call(
        &sim,
        "one.templatepool.info",
        vec![i(-2), i(-1), i(-1)],
    )));
    assert_eq!(pool.name, "VMTEMPLATE_POOL");
    assert_eq!(pool.names(), ["VMTEMPLATE"]);
    let (msg, code, id) = fail(call(&sim, "one.template.info", vec![i(42)]));
    assert_eq!(
        msg,
        "[one.template.info] Error getting virtual machine template [42]."
    );
    assert_eq!((code, id), (NO_EXISTS, 42));
}

#[test]
fn update_replaces_or_merges_the_body() {
    let sim = sim(9);
    let t = allocate_template(&sim, "web", "CPU = 1\nMEMORY = 512\n");
    ok_int(call(
        &sim,
        "one.template.update",
        vec![i(t), s("MEMORY = 1024\nVCPU = 2"), i(1)],
    ));
    let body = template(&sim, t).map(|t| t.body).unwrap_or_default();
    assert_eq!(body, "CPU = \"1\"\nMEMORY = \"1024\"\nVCPU = \"2\"\n");
    ok_int(call(
        &sim,
        "one.template.update",
        vec![i(t), s("CPU = 4"), i(0)],
    ));
    assert_eq!(
        template(&sim, t).map(|t| t.body).unwrap_or_default(),
        "CPU = \"4\"\n"
    );
    let (msg, code, _) = fail(call(
        &sim,
        "one.template.update",
        vec![i(t), s("CPU = 4"), i(2)],
    ));
    assert_eq!(
        (msg.as_str(), code),
        ("[one.template.update] Wrong update type", XML_RPC_API)
    );
}

#[test]
fn template_delete_never_looks_at_the_vms_made_from_it() {
    let sim = sim(10);
    let t = allocate_template(&sim, "web", VM_BODY);
    let v = ok_int(instantiate(&sim, t, "web-0", ""));
    assert_eq!(
        ok_int(call(&sim, "one.template.delete", vec![i(t), b(false)])),
        t
    );
    assert!(template(&sim, t).is_none());
    assert_eq!(vm(&sim, v).template_id, Some(t as u32));
    let again = allocate_template(&sim, "web", VM_BODY);
    assert_ne!(again, t, "ids are never reused");
}

#[test]
fn no_params_make_any_method_panic() {
    let sim = sim(11);
    let t = allocate_template(&sim, "web", VM_BODY);
    let methods = [
        "one.system.version",
        "one.template.allocate",
        "one.template.info",
        "one.template.update",
        "one.template.delete",
        "one.template.instantiate",
        "one.template.lock",
        "one.template.unlock",
        "one.templatepool.info",
        "one.image.allocate",
        "one.image.info",
        "one.image.delete",
        "one.image.lock",
        "one.image.unlock",
        "one.imagepool.info",
        "one.vm.info",
        "one.vm.action",
        "one.vm.lock",
        "one.vm.unlock",
        "one.vmpool.info",
        "one.vmpool.infoextended",
    ];
    let values = [
        i(t),
        i(-1),
        i(i32::MIN),
        i(i32::MAX),
        s(""),
        s("terminate"),
        s("A = [ B"),
        b(true),
        b(false),
    ];
    for m in methods {
        for x in &values {
            for y in &values {
                for z in &values {
                    let v = call(&sim, m, vec![x.clone(), y.clone(), z.clone(), i(-2), s("")]);
                    assert!(
                        matches!(v, dxr::Value::Array(_) | dxr::Value::Struct(_)),
                        "{m}: {v:?}"
                    );
                }
            }
        }
    }
}

/// What pyone sends for `one.template.allocate({"TEMPLATE": {...}})` with a nested dict.
const XML_BODY: &str = "<TEMPLATE><CPU><![CDATA[1]]></CPU><DISK><IMAGE_ID><![CDATA[0]]></IMAGE_ID></DISK><MEMORY><![CDATA[256]]></MEMORY><NAME><![CDATA[xml-web]]></NAME></TEMPLATE>";

#[test]
fn xml_form_allocate_reads_back_through_template_info() {
    let sim = sim(12);
    let t = ok_int(call(&sim, "one.template.allocate", vec![s(XML_BODY)]));
    let doc = parse(&ok_str(call(
        &sim,
        "one.template.info",
        vec![i(t), b(false), b(false)],
    )));
    assert_eq!(doc.text_at("NAME"), "xml-web");
    assert_eq!(
        doc.at("TEMPLATE").map(|n| n.names()),
        Some(vec!["CPU", "DISK", "MEMORY"])
    );
    assert_eq!(doc.text_at("TEMPLATE/CPU"), "1");
    assert_eq!(doc.text_at("TEMPLATE/DISK/IMAGE_ID"), "0");
    assert_eq!(
        template(&sim, t).map(|t| t.body).unwrap_or_default(),
        "CPU = \"1\"\nDISK = [ IMAGE_ID = \"0\" ]\nMEMORY = \"256\"\n",
        "the XML form and template syntax make the same template"
    );
    // Indentation, a declaration, any root name, entities: as libxml2 reads them.
    let t2 = ok_int(call(
        &sim,
        "one.template.allocate",
        vec![s(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<VMTEMPLATE>\n  <NAME>xml-two</NAME>\n  \
             <LABEL>a &lt;b&gt; &amp; c</LABEL>\n  <NIC>\n    <NETWORK_ID>0</NETWORK_ID>\n  </NIC>\n\
             </VMTEMPLATE>\n",
        )],
    ));
    let doc = parse(&ok_str(call(&sim, "one.template.info", vec![i(t2)])));
    assert_eq!(doc.text_at("NAME"), "xml-two");
    assert_eq!(doc.text_at("TEMPLATE/LABEL"), "a <b> & c");
    assert_eq!(doc.text_at("TEMPLATE/NIC/NETWORK_ID"), "0");
}

#[test]
fn malformed_xml_answers_onds_parse_error() {
    let sim = sim(13);
    for bad in [
        "<TEMPLATE><NAME>x</NAME>",
        "<TEMPLATE><NAME>x</CPU></TEMPLATE>",
        "<TEMPLATE><NAME>x</NAME></TEMPLATE><MORE/>",
        "<TEMPLATE><NAME>a & b</NAME></TEMPLATE>",
    ] {
        let (msg, code, _) = fail(call(&sim, "one.template.allocate", vec![s(bad)]));
        assert_eq!(
            (msg.as_str(), code),
            (
                "[one.template.allocate] Parse error: XML Template malformed.",
                INTERNAL
            ),
            "{bad}"
        );
    }
    let t = allocate_template(&sim, "web", VM_BODY);
    let (msg, code, _) = fail(call(
        &sim,
        "one.template.update",
        vec![i(t), s("<TEMPLATE><CPU>2</TEMPLATE>"), i(0)],
    ));
    assert_eq!(
        (msg.as_str(), code),
        (
            "[one.template.update] Cannot update template. Parse error: XML Template malformed.",
            INTERNAL
        )
    );
    let (msg, code, _) = fail(instantiate(&sim, t, "web-0", "<TEMPLATE>"));
    assert_eq!(
        (msg.as_str(), code),
        (
            "[one.template.instantiate] Parse error: XML Template malformed.",
            INTERNAL
        )
    );
    let (msg, code, _) = fail(call(
        &sim,
        "one.image.allocate",
        vec![s("<IMAGE><NAME>img</IMAGE>"), i(1)],
    ));
    assert_eq!(
        (msg.as_str(), code),
        (
            "[one.image.allocate] Parse error: XML Template malformed.",
            INTERNAL
        )
    );
}

#[test]
fn update_in_xml_form_replaces_or_merges_the_body() {
    let sim = sim(14);
    let t = allocate_template(&sim, "web", "CPU = 1\nMEMORY = 512\n");
    ok_int(call(
        &sim,
        "one.template.update",
        vec![
            i(t),
            s(
                "<TEMPLATE><MEMORY><![CDATA[1024]]></MEMORY><DISK><IMAGE_ID>3</IMAGE_ID></DISK></TEMPLATE>",
            ),
            i(1),
        ],
    ));
    assert_eq!(
        template(&sim, t).map(|t| t.body).unwrap_or_default(),
        "CPU = \"1\"\nDISK = [ IMAGE_ID = \"3\" ]\nMEMORY = \"1024\"\n"
    );
    ok_int(call(
        &sim,
        "one.template.update",
        vec![i(t), s("<TEMPLATE><VCPU>2</VCPU></TEMPLATE>"), i(0)],
    ));
    assert_eq!(
        template(&sim, t).map(|t| t.body).unwrap_or_default(),
        "VCPU = \"2\"\n"
    );
    let doc = parse(&ok_str(call(&sim, "one.template.info", vec![i(t)])));
    assert_eq!(doc.text_at("NAME"), "web", "the name is not in the body");
}

#[test]
fn instantiate_and_image_allocate_take_the_xml_form() {
    let sim = sim(15);
    let t = allocate_template(&sim, "web", VM_BODY);
    let v = ok_int(instantiate(
        &sim,
        t,
        "web-0",
        "<TEMPLATE><FLIGHTDECK_UID><![CDATA[u-1]]></FLIGHTDECK_UID></TEMPLATE>",
    ));
    assert!(
        vm(&sim, v)
            .user_template
            .contains("FLIGHTDECK_UID = \"u-1\""),
        "{}",
        vm(&sim, v).user_template
    );
    let img = ok_int(call(
        &sim,
        "one.image.allocate",
        vec![
            s("<IMAGE><NAME>xml-img</NAME><PATH>https://images.example/x.qcow2</PATH></IMAGE>"),
            i(1),
        ],
    ));
    assert_eq!(image(&sim, img).name, "xml-img");
}
