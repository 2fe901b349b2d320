//! The XML documents OpenNebula 6.10 answers: `VMTemplate::to_xml`, `Image::to_xml`,
//! `VirtualMachine::to_xml_extended` (`one.vm.info`, `one.vmpool.infoextended`) and
//! `VirtualMachine::to_xml_short` (`one.vmpool.info`), element for element in their
//! order. Template attributes are elements in `Template`'s order (by name), values in
//! CDATA (`one_util::escape_xml`).

use std::fmt::Write;

use super::rpc::ONEADMIN;
use super::syntax::{Attr, Body};
use super::{ImageRec, OneLock, TemplateRec, VmRec};

/// `one_util::escape_xml`: a CDATA section (a `]]>` inside is split so the document
/// stays well-formed).
fn cdata(v: &str) -> String {
    format!("<![CDATA[{}]]>", v.replace("]]>", "]]]]><![CDATA[>"))
}

fn attrs(out: &mut String, body: &Body) {
    for a in body.attrs() {
        match a {
            Attr::Single(n, v) => {
                let _ = write!(out, "<{n}>{}</{n}>", cdata(v));
            }
            Attr::Vector(n, v) => {
                let _ = write!(out, "<{n}>");
                for (k, v) in v {
                    if !k.is_empty() {
                        let _ = write!(out, "<{k}>{}</{k}>", cdata(v));
                    }
                }
                let _ = write!(out, "</{n}>");
            }
        }
    }
}

/// `Template::to_xml` under `root`.
fn body_xml(out: &mut String, root: &str, body: &Body) {
    let _ = write!(out, "<{root}>");
    attrs(out, body);
    let _ = write!(out, "</{root}>");
}

/// `PoolObjectSQL::lock_db_to_xml`: nothing when unlocked.
fn lock(out: &mut String, lock: Option<OneLock>) {
    if let Some(l) = lock {
        let _ = write!(
            out,
            "<LOCK><LOCKED>{}</LOCKED><OWNER>{}</OWNER><TIME>{}</TIME><REQ_ID>{}</REQ_ID></LOCK>",
            l.level, l.owner, l.time, l.req_id
        );
    }
}

/// `PoolObjectSQL::perms_to_xml` for oneadmin's objects (umask 177: owner use+manage).
fn permissions(out: &mut String) {
    out.push_str(
        "<PERMISSIONS><OWNER_U>1</OWNER_U><OWNER_M>1</OWNER_M><OWNER_A>0</OWNER_A>\
<GROUP_U>0</GROUP_U><GROUP_M>0</GROUP_M><GROUP_A>0</GROUP_A>\
<OTHER_U>0</OTHER_U><OTHER_M>0</OTHER_M><OTHER_A>0</OTHER_A></PERMISSIONS>",
    );
}

fn head(out: &mut String, id: u32, uid: u32, name: &str) {
    let _ = write!(
        out,
        "<ID>{id}</ID><UID>{uid}</UID><GID>0</GID><UNAME>{ONEADMIN}</UNAME><GNAME>{ONEADMIN}</GNAME><NAME>{name}</NAME>"
    );
}

pub(crate) fn template(t: &TemplateRec) -> String {
    let mut out = String::from("<VMTEMPLATE>");
    head(&mut out, t.id, t.uid, &t.name);
    lock(&mut out, t.lock);
    permissions(&mut out);
    let _ = write!(out, "<REGTIME>{}</REGTIME>", t.regtime);
    body_xml(&mut out, "TEMPLATE", &t.body);
    out.push_str("</VMTEMPLATE>");
    out
}

pub(crate) fn image(i: &ImageRec) -> String {
    let mut out = String::from("<IMAGE>");
    head(&mut out, i.id, i.uid, &i.name);
    lock(&mut out, i.lock);
    permissions(&mut out);
    let _ = write!(
        out,
        "<TYPE>{}</TYPE><DISK_TYPE>0</DISK_TYPE><PERSISTENT>{}</PERSISTENT><REGTIME>{}</REGTIME>\
<SOURCE>{}</SOURCE><PATH>{}</PATH><FORMAT>{}</FORMAT><FS>{}</FS><SIZE>{}</SIZE>\
<STATE>{}</STATE><PREV_STATE>{}</PREV_STATE><RUNNING_VMS>{}</RUNNING_VMS>\
<CLONING_OPS>0</CLONING_OPS><CLONING_ID>-1</CLONING_ID><TARGET_SNAPSHOT>-1</TARGET_SNAPSHOT>\
<DATASTORE_ID>{}</DATASTORE_ID><DATASTORE>{}</DATASTORE>",
        i.kind,
        u8::from(i.persistent),
        i.regtime,
        cdata(&i.source),
        cdata(&i.path),
        cdata(&i.format),
        cdata(""),
        i.size_mb,
        i.state,
        i.prev_state,
        i.vms.len(),
        i.ds_id,
        i.ds_name,
    );
    out.push_str("<VMS>");
    for vm in &i.vms {
        let _ = write!(out, "<ID>{vm}</ID>");
    }
    out.push_str("</VMS><CLONES></CLONES><APP_CLONES></APP_CLONES>");
    body_xml(&mut out, "TEMPLATE", &i.body);
    out.push_str(
        "<SNAPSHOTS><ALLOW_ORPHANS><![CDATA[NO]]></ALLOW_ORPHANS><CURRENT_BASE><![CDATA[-1]]></CURRENT_BASE>\
<NEXT_SNAPSHOT><![CDATA[0]]></NEXT_SNAPSHOT></SNAPSHOTS>\
<BACKUP_INCREMENTS></BACKUP_INCREMENTS><BACKUP_DISK_IDS></BACKUP_DISK_IDS></IMAGE>",
    );
    out
}

/// The one history record of a deployed VM (the simulator has one host).
fn history(out: &mut String, vm: &VmRec) {
    let Some(stime) = vm.deployed_at else {
        out.push_str("<HISTORY_RECORDS/>");
        return;
    };
    let etime = if vm.state == super::vms::DONE {
        vm.etime
    } else {
        0
    };
    let _ = write!(
        out,
        "<HISTORY_RECORDS><HISTORY><OID>{id}</OID><SEQ>0</SEQ><HOSTNAME>sim-host-0</HOSTNAME>\
<HID>0</HID><CID>0</CID><STIME>{stime}</STIME><ETIME>{etime}</ETIME>\
<VM_MAD><![CDATA[kvm]]></VM_MAD><TM_MAD><![CDATA[ssh]]></TM_MAD><DS_ID>0</DS_ID>\
<PLAN_ID>-1</PLAN_ID><ACTION_ID>-1</ACTION_ID>\
<PSTIME>{stime}</PSTIME><PETIME>0</PETIME><RSTIME>0</RSTIME><RETIME>0</RETIME>\
<ESTIME>0</ESTIME><EETIME>0</EETIME><ACTION>0</ACTION><UID>-1</UID><GID>-1</GID>\
<REQUEST_ID>-1</REQUEST_ID></HISTORY></HISTORY_RECORDS>",
        id = vm.id
    );
}

fn vm_head(out: &mut String, vm: &VmRec, short: bool) {
    head(out, vm.id, vm.uid, &vm.name);
    if !short {
        permissions(out);
    }
    let _ = write!(
        out,
        "<LAST_POLL>0</LAST_POLL><STATE>{}</STATE><LCM_STATE>{}</LCM_STATE>",
        vm.state, vm.lcm
    );
    if !short {
        let _ = write!(
            out,
            "<PREV_STATE>{}</PREV_STATE><PREV_LCM_STATE>{}</PREV_LCM_STATE>",
            vm.prev_state, vm.prev_lcm
        );
    }
    let _ = write!(
        out,
        "<RESCHED>0</RESCHED><STIME>{}</STIME><ETIME>{}</ETIME><DEPLOY_ID>{}</DEPLOY_ID>",
        vm.stime, vm.etime, vm.deploy_id
    );
}

/// `VirtualMachine::to_xml_extended`: `one.vm.info` and `one.vmpool.infoextended`.
pub(crate) fn vm(vm: &VmRec) -> String {
    let mut out = String::from("<VM>");
    vm_head(&mut out, vm, false);
    lock(&mut out, vm.lock);
    out.push_str("<MONITORING></MONITORING><SCHED_ACTIONS></SCHED_ACTIONS>");
    body_xml(&mut out, "TEMPLATE", &vm.template);
    body_xml(&mut out, "USER_TEMPLATE", &vm.user_template);
    history(&mut out, vm);
    out.push_str("<BACKUPS><BACKUP_CONFIG/><BACKUP_IDS></BACKUP_IDS></BACKUPS></VM>");
    out
}

/// `VirtualMachine::to_xml_short`: `one.vmpool.info`.
pub(crate) fn vm_short(vm: &VmRec) -> String {
    let mut out = String::from("<VM>");
    vm_head(&mut out, vm, true);
    if let Some(l) = vm.lock {
        let _ = write!(out, "<LOCK><LOCKED>{}</LOCKED></LOCK>", l.level);
    }
    let get = |k: &str| vm.template.get(k).unwrap_or_default().to_string();
    let _ = write!(
        out,
        "<TEMPLATE><CPU>{}</CPU><MEMORY>{}</MEMORY><VCPU>{}</VCPU>",
        get("CPU"),
        get("MEMORY"),
        get("VCPU")
    );
    for d in vm.template.vectors("DISK") {
        out.push_str("<DISK>");
        for k in [
            "DISK_ID",
            "DATASTORE",
            "DATASTORE_ID",
            "IMAGE",
            "IMAGE_ID",
            "SIZE",
            "TYPE",
            "CLONE",
            "CLONE_TARGET",
            "LN_TARGET",
            "DISK_SNAPSHOT_TOTAL_SIZE",
        ] {
            let _ = write!(
                out,
                "<{k}>{}</{k}>",
                cdata(d.get(k).map_or("", |v| v.as_str()))
            );
        }
        out.push_str("</DISK>");
    }
    for n in vm.template.vectors("NIC") {
        out.push_str("<NIC>");
        for k in ["IP", "IP6"] {
            if let Some(v) = n.get(k).filter(|v| !v.is_empty()) {
                let _ = write!(out, "<{k}>{}</{k}>", cdata(v));
            }
        }
        for k in ["MAC", "NETWORK", "NETWORK_ID", "NIC_ID", "SECURITY_GROUPS"] {
            let _ = write!(
                out,
                "<{k}>{}</{k}>",
                cdata(n.get(k).map_or("", |v| v.as_str()))
            );
        }
        out.push_str("</NIC>");
    }
    for g in vm.template.vectors("GRAPHICS") {
        out.push_str("<GRAPHICS>");
        for (k, v) in g {
            let _ = write!(out, "<{k}>{}</{k}>", cdata(v));
        }
        out.push_str("</GRAPHICS>");
    }
    out.push_str("</TEMPLATE><MONITORING/>");
    // `VirtualMachineTemplate::to_xml_short`: only what Sunstone and the scheduler need.
    if vm.user_template.is_empty() {
        out.push_str("<USER_TEMPLATE/>");
    } else {
        out.push_str("<USER_TEMPLATE>");
        for k in ["LABELS", "ERROR", "SCHED_MESSAGE"] {
            if let Some(v) = vm.user_template.get(k).filter(|v| !v.is_empty()) {
                let _ = write!(out, "<{k}>{}</{k}>", cdata(v));
            }
        }
        for k in [
            "SCHED_RANK",
            "SCHED_DS_RANK",
            "SCHED_REQUIREMENTS",
            "SCHED_DS_REQUIREMENTS",
            "USER_PRIORITY",
        ] {
            if let Some(v) = vm.user_template.get(k) {
                let _ = write!(out, "<{k}>{}</{k}>", cdata(v));
            }
        }
        out.push_str("</USER_TEMPLATE>");
    }
    history(&mut out, vm);
    out.push_str("</VM>");
    out
}

/// `PoolSQL::dump`: the documents wrapped in the pool element.
pub(crate) fn pool(root: &str, docs: &[String]) -> String {
    let mut out = format!("<{root}>");
    for d in docs {
        out.push_str(d);
    }
    let _ = write!(out, "</{root}>");
    out
}
