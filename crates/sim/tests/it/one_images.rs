//! The simulated OpenNebula's images: the datastore copy in virtual time, use by VMs,
//! and deletion, as OpenNebula 6.10 answers them.

use crate::common;
use crate::one_support;

use common::{now, sim, wait_for, wait_ms};
use flightdeck_sim::{SimFault, World};
use flightdeck_spec::FaultKind;
use one_support::*;

const LOCKED: u32 = 4;
const READY: u32 = 1;
const USED: u32 = 2;
const ERROR: u32 = 5;
const LOCKED_USED: u32 = 9;

#[test]
fn image_is_locked_while_copied_and_ready_three_to_eight_seconds_later() {
    let sim = sim(21);
    let id = allocate_image(&sim, "ubuntu");
    assert_eq!(image(&sim, id).state, LOCKED);
    wait_ms(&sim, 2_999);
    assert_eq!(image(&sim, id).state, LOCKED, "not before 3 s");
    wait_ms(&sim, 5_001);
    assert_eq!(image(&sim, id).state, READY, "by 8 s");
    let doc = parse(&ok_str(call(&sim, "one.image.info", vec![i(id), b(false)])));
    assert_eq!(doc.name, "IMAGE");
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
            "TYPE",
            "DISK_TYPE",
            "PERSISTENT",
            "REGTIME",
            "SOURCE",
            "PATH",
            "FORMAT",
            "FS",
            "SIZE",
            "STATE",
            "PREV_STATE",
            "RUNNING_VMS",
            "CLONING_OPS",
            "CLONING_ID",
            "TARGET_SNAPSHOT",
            "DATASTORE_ID",
            "DATASTORE",
            "VMS",
            "CLONES",
            "APP_CLONES",
            "TEMPLATE",
            "SNAPSHOTS",
            "BACKUP_INCREMENTS",
            "BACKUP_DISK_IDS"
        ]
    );
    assert_eq!(doc.text_at("STATE"), "1");
    assert_eq!(doc.text_at("PREV_STATE"), "4");
    assert_eq!(doc.text_at("DATASTORE_ID"), "1");
    assert_eq!(doc.text_at("PATH"), "https://images.example/ubuntu.qcow2");
    assert!(
        doc.text_at("SOURCE")
            .starts_with("/var/lib/one//datastores/1/")
    );
    assert_eq!(doc.text_at("TEMPLATE/DEV_PREFIX"), "sd");
    let pool = parse(&ok_str(call(
        &sim,
        "one.imagepool.info",
        vec![i(-1), i(-1), i(-1)],
    )));
    assert_eq!(
        (pool.name.as_str(), pool.names()),
        ("IMAGE_POOL", vec!["IMAGE"])
    );
}

#[test]
fn image_error_fault_ends_the_copy_in_error_and_a_vm_cannot_take_it() {
    let sim = sim(22);
    sim.inject(SimFault::new(FaultKind::OneImageError, now(&sim)));
    let id = allocate_image(&sim, "broken");
    wait_for(&sim, |s| image(s, id).state != LOCKED);
    assert_eq!(image(&sim, id).state, ERROR);
    let t = allocate_template(
        &sim,
        "web",
        &format!("{VM_BODY}DISK = [ IMAGE_ID = \"{id}\" ]\n"),
    );
    let (msg, code, _) = fail(instantiate(&sim, t, "web-0", ""));
    assert_eq!(code, ALLOCATE);
    assert_eq!(
        msg,
        format!(
            "[one.template.instantiate] Error allocating a new virtual machine template. Cannot acquire image {id}, it is in state: ERROR"
        )
    );
}

#[test]
fn a_vm_takes_a_locked_image_and_waits_for_it_and_used_images_cannot_be_deleted() {
    let sim = sim(23);
    let img = allocate_image(&sim, "ubuntu");
    let t = allocate_template(
        &sim,
        "web",
        &format!("{VM_BODY}DISK = [ IMAGE = \"ubuntu\" ]\n"),
    );
    let v = ok_int(instantiate(&sim, t, "web-0", ""));
    assert_eq!(image(&sim, img).state, LOCKED_USED);
    assert_eq!(image(&sim, img).running_vms, 1);
    let (msg, code, id) = fail(call(&sim, "one.image.delete", vec![i(img), b(false)]));
    assert_eq!(code, INTERNAL);
    assert_eq!(id, img);
    assert_eq!(
        msg,
        "[one.image.delete] Image locked, use --force flag to remove the image. Force delete may leave some files on Datastore"
    );
    wait_for(&sim, |s| vm(s, v).state == 3 && vm(s, v).lcm_state == 3);
    assert_eq!(image(&sim, img).state, USED);
    let (msg, code, _) = fail(call(&sim, "one.image.delete", vec![i(img)]));
    assert_eq!(code, ACTION);
    assert_eq!(
        msg,
        "[one.image.delete] Cannot delete image. There are 1 VMs using it."
    );
    ok_int(call(&sim, "one.vm.action", vec![s("terminate"), i(v)]));
    wait_for(&sim, |s| vm(s, v).state == 6);
    assert_eq!(
        image(&sim, img).state,
        READY,
        "unused again once its VM is DONE"
    );
    assert_eq!(ok_int(call(&sim, "one.image.delete", vec![i(img)])), img);
    wait_for(&sim, |s: &flightdeck_sim::SimCloud| {
        let w: World = s.snapshot();
        w.one_images.is_empty()
    });
}

#[test]
fn duplicate_image_name_is_an_allocate_error_and_locks_guard_delete() {
    let sim = sim(24);
    let id = allocate_image(&sim, "ubuntu");
    let (msg, code, _) = fail(call(
        &sim,
        "one.image.allocate",
        vec![s("NAME = ubuntu\nPATH = /tmp/x"), i(1)],
    ));
    assert_eq!(code, ALLOCATE);
    assert_eq!(
        msg,
        format!(
            "[one.image.allocate] Error allocating a new image. NAME is already taken by IMAGE {id}."
        )
    );
    let (msg, code, _) = fail(call(
        &sim,
        "one.image.allocate",
        vec![s("NAME = x\nPATH = /tmp/x"), i(0)],
    ));
    assert_eq!(code, ALLOCATE);
    assert_eq!(
        msg,
        "[one.image.allocate] New images can only be allocated in a files or image datastore."
    );
    let (msg, code, _) = fail(call(
        &sim,
        "one.image.allocate",
        vec![s("NAME = x\nPATH = /tmp/x"), i(9)],
    ));
    assert_eq!(
        (msg.as_str(), code),
        (
            "[one.image.allocate] Error getting datastore [9].",
            NO_EXISTS
        )
    );
    wait_for(&sim, |s| image(s, id).state == READY);
    ok_int(call(&sim, "one.image.lock", vec![i(id), i(2)]));
    let (msg, code, _) = fail(call(&sim, "one.image.delete", vec![i(id)]));
    assert_eq!(
        (msg, code),
        (
            format!("[one.image.delete] User [0] : IMAGE is locked. [{id}]."),
            AUTHORIZATION
        )
    );
    ok_int(call(&sim, "one.image.unlock", vec![i(id)]));
    ok_int(call(&sim, "one.image.delete", vec![i(id)]));
}
