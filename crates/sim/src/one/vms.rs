//! VMs: `one.template.instantiate`, `one.vm.info`, `one.vm.action` and
//! `one.vmpool.info[extended]` (`RequestManagerVMTemplate.cc`, `VirtualMachine::insert`,
//! `VirtualMachineAction`, `DispatchManagerActions.cc`), in virtual time:
//! `PENDING → ACTIVE/PROLOG → BOOT → RUNNING` (or `BOOT_FAILURE` under
//! `one.vmBootFailure`), `terminate`: `SHUTDOWN → EPILOG → DONE`. DONE VMs stay in the
//! pool (listed with state filter -2 only).

use dxr::Value;
use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::{TAG_CLUSTER, TAG_MACHINE, TAG_ROLE, TAG_TEMPLATE, TAG_UID};
use flightdeck_spec::FaultKind;

use super::errors::{self, Code, Failure, Kind, OneResult};
use super::images::{self, LOCKED, LOCKED_USED};
use super::leases::{LOCKED_USED_PERS, acquire_disks, lease_nics, release_images};
use super::rpc::{Ctx, Params};
use super::syntax::{self, Attr, Body};
use super::templates::{self, OP_MANAGE, OP_USE, Range, denied, name_valid};
use super::{Event, ONE_DONE_VMS_KEPT, ONE_VMS_MAX, VmRec, secs, xml};
use crate::{Event as SimEvent, MutationKind, State, kube};

// `VirtualMachine::VmState`.
pub(crate) const PENDING: u32 = 1;
pub(crate) const HOLD: u32 = 2;
pub(crate) const ACTIVE: u32 = 3;
pub(crate) const DONE: u32 = 6;
pub(crate) const POWEROFF: u32 = 8;
// `VirtualMachine::LcmState`.
pub(crate) const LCM_INIT: u32 = 0;
pub(crate) const PROLOG: u32 = 1;
pub(crate) const BOOT: u32 = 2;
pub(crate) const RUNNING: u32 = 3;
pub(crate) const EPILOG: u32 = 11;
pub(crate) const SHUTDOWN: u32 = 12;
pub(crate) const SHUTDOWN_POWEROFF: u32 = 18;
pub(crate) const BOOT_POWEROFF: u32 = 20;
pub(crate) const CLEANUP_DELETE: u32 = 23;
pub(crate) const BOOT_FAILURE: u32 = 36;
pub(crate) const PROLOG_FAILURE: u32 = 39;

/// Attributes `VirtualMachine::insert` moves from the user template into `TEMPLATE`.
const KNOWN: &[&str] = &[
    "CONTEXT",
    "CPU",
    "CLONING_TEMPLATE_ID",
    "DISK",
    "EMULATOR",
    "FEATURES",
    "GRAPHICS",
    "HYPERV_OPTIONS",
    "INPUT",
    "MEMORY",
    "MEMORY_MAX",
    "MEMORY_RESIZE_MODE",
    "MEMORY_SLOTS",
    "NIC",
    "NUMA_NODE",
    "OS",
    "RAW",
    "SPICE_OPTIONS",
    "TM_MAD_SYSTEM",
    "TOPOLOGY",
    "VCPU",
    "VIDEO",
];

/// The user-template attributes flightdeck keeps its ownership tags in, and the tag
/// each becomes.
const TAG_ATTRS: &[(&str, &str)] = &[
    ("FLIGHTDECK_CLUSTER", TAG_CLUSTER),
    ("FLIGHTDECK_UID", TAG_UID),
    ("FLIGHTDECK_ROLE", TAG_ROLE),
    ("FLIGHTDECK_MACHINE", TAG_MACHINE),
    ("FLIGHTDECK_TEMPLATE", TAG_TEMPLATE),
];

fn tags_of(user: &Body) -> Vec<String> {
    TAG_ATTRS
        .iter()
        .filter_map(|(attr, tag)| user.get(attr).map(|v| format!("{tag}{v}")))
        .collect()
}

/// `VirtualMachine::vm_state_to_str`.
fn vm_state_str(state: u32) -> &'static str {
    match state {
        0 => "INIT",
        1 => "PENDING",
        2 => "HOLD",
        3 => "ACTIVE",
        4 => "STOPPED",
        5 => "SUSPENDED",
        6 => "DONE",
        8 => "POWEROFF",
        9 => "UNDEPLOYED",
        10 => "CLONING",
        11 => "CLONING_FAILURE",
        _ => "-",
    }
}

/// `VirtualMachine::lcm_state_to_str` for the states the simulator uses.
fn lcm_state_str(lcm: u32) -> &'static str {
    match lcm {
        0 => "LCM_INIT",
        1 => "PROLOG",
        2 => "BOOT",
        3 => "RUNNING",
        11 => "EPILOG",
        12 => "SHUTDOWN",
        18 => "SHUTDOWN_POWEROFF",
        20 => "BOOT_POWEROFF",
        23 => "CLEANUP_DELETE",
        36 => "BOOT_FAILURE",
        39 => "PROLOG_FAILURE",
        _ => "-",
    }
}

/// `VirtualMachine::state_str`: the LCM state while ACTIVE, else the VM state.
pub(crate) fn state_str(vm: &VmRec) -> &'static str {
    if vm.state == ACTIVE {
        lcm_state_str(vm.lcm)
    } else {
        vm_state_str(vm.state)
    }
}

fn set_state(vm: &mut VmRec, state: u32, lcm: u32) {
    vm.prev_state = vm.state;
    vm.prev_lcm = vm.lcm;
    vm.state = state;
    vm.lcm = lcm;
    vm.change += 1;
}

fn schedule(st: &mut State, now: Timestamp, id: u32, range: (u64, u64)) {
    let Some(change) = st.one.vms.get(&id).map(|v| v.change) else {
        return;
    };
    st.schedule_after(now, range, SimEvent::One(Event::Vm(id, change)));
}

pub(crate) fn instantiate(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let tid = p.int(1)?;
    let name = p.string(2)?.to_string();
    let (hold, extra) = if p.len() > 3 {
        (p.boolean(3)?, p.string(4)?.to_string())
    } else {
        (false, String::new())
    };
    let persistent = if p.len() > 5 { p.boolean(5)? } else { false };
    let m = ctx.method;
    ctx.target.name = name.clone();
    let t = templates::get(st, m, tid)?;
    let (t_id, t_name, t_lock) = (t.id, t.name.clone(), t.lock);
    let mut body = templates::body_of(t);
    if persistent {
        return Err(Failure::new(
            m,
            Code::Action,
            "Persistent instantiation is not simulated",
        ));
    }
    let extra = if extra.trim().is_empty() {
        Body::default()
    } else {
        syntax::parse(&extra).map_err(|e| Failure::new(m, Code::Internal, e))?
    };
    ctx.target.tags = tags_of(&extra);
    body.merge(&extra);
    body.erase("NAME");
    body.erase("TEMPLATE_NAME");
    body.erase("TEMPLATE_ID");
    if denied(t_lock, OP_USE) {
        return Err(Failure::locked(m, ctx.uid, Kind::Template, t_id));
    }
    let live = st.one.vms.values().filter(|v| v.state != DONE).count();
    if live >= ONE_VMS_MAX {
        return Err(Failure::new(
            m,
            Code::Authorization,
            format!(
                "User [{}] : limit of {ONE_VMS_MAX} reached for VMS quota in VM.",
                ctx.uid
            ),
        ));
    }
    let id = st.one.next_vm;
    let alloc = |e: String| Failure::allocate(m, Kind::Template, &e);
    let vm_name = if name.is_empty() {
        format!("{t_name}-{id}")
    } else {
        name.clone()
    };
    name_valid(&vm_name).map_err(alloc)?;
    // Split what OpenNebula keeps in TEMPLATE from the user template.
    let mut user = body;
    let mut template = Body::default();
    template.set(Attr::Single("VMID".into(), id.to_string()));
    template.set(Attr::Single("TEMPLATE_ID".into(), t_id.to_string()));
    for known in KNOWN {
        for a in user.erase(known) {
            template.set(a);
        }
    }
    let memory_ok = template
        .get("MEMORY")
        .and_then(|v| v.trim().parse::<i64>().ok())
        .is_some_and(|n| n > 0);
    if !memory_ok {
        return Err(alloc(
            "MEMORY attribute must be a positive integer value.".into(),
        ));
    }
    let cpu_ok = template
        .get("CPU")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .is_some_and(|n| n > 0.0);
    if !cpu_ok {
        return Err(alloc(
            "CPU attribute must be a positive float or integer value.".into(),
        ));
    }
    template.set(Attr::Single(
        "AUTOMATIC_REQUIREMENTS".into(),
        "!(PUBLIC_CLOUD = YES) & !(PIN_POLICY = PINNED)".into(),
    ));
    let addresses = lease_nics(st, id, &mut template).map_err(alloc)?;
    let image_ids = match acquire_disks(st, id, ctx.uid, &mut template) {
        Ok(ids) => ids,
        Err(e) => {
            for ip in addresses {
                st.addresses.release(ip);
            }
            return Err(alloc(e));
        }
    };
    let tags = tags_of(&user);
    let boot_fails = super::hit(st, FaultKind::OneVmBootFailure, ctx.now, &tags);
    st.one.next_vm += 1;
    let state = if hold { HOLD } else { PENDING };
    st.one.vms.insert(
        id,
        VmRec {
            id,
            name: vm_name,
            uid: ctx.uid,
            state,
            lcm: LCM_INIT,
            prev_state: state,
            prev_lcm: LCM_INIT,
            stime: secs(ctx.now),
            etime: 0,
            deploy_id: String::new(),
            lock: None,
            template,
            user_template: user,
            tags: tags.clone(),
            template_id: Some(t_id),
            addresses,
            image_ids,
            boot_fails,
            change: 0,
            deployed_at: None,
        },
    );
    prune_done(st);
    ctx.target.id = format!("vm/{id}");
    ctx.target.name = st
        .one
        .vms
        .get(&id)
        .map(|v| v.name.clone())
        .unwrap_or_default();
    ctx.target.tags = tags;
    if !hold {
        let latency = st.config.latencies.one_vm_pending;
        schedule(st, ctx.now, id, latency);
    }
    Ok(errors::ok_int(i32::try_from(id).unwrap_or(i32::MAX)))
}

/// Forgets the oldest DONE VMs beyond [`ONE_DONE_VMS_KEPT`].
fn prune_done(st: &mut State) {
    let done: Vec<u32> = st
        .one
        .vms
        .values()
        .filter(|v| v.state == DONE)
        .map(|v| v.id)
        .collect();
    let excess = done.len().saturating_sub(ONE_DONE_VMS_KEPT);
    for id in done.into_iter().take(excess) {
        st.one.vms.remove(&id);
    }
}

fn waits_for_images(st: &State, vm: &VmRec) -> bool {
    vm.image_ids.iter().any(|i| {
        st.one
            .images
            .get(i)
            .is_some_and(|img| matches!(img.state, LOCKED | LOCKED_USED | LOCKED_USED_PERS))
    })
}

fn images_failed(st: &State, vm: &VmRec) -> bool {
    vm.image_ids.iter().any(|i| {
        st.one
            .images
            .get(i)
            .is_none_or(|img| img.state == images::ERROR)
    })
}

/// An image VM `id` uses finished copying: a PENDING VM waiting for it may go on.
pub(crate) fn image_settled(st: &mut State, t: Timestamp, id: u32) {
    let pending = st.one.vms.get(&id).is_some_and(|v| v.state == PENDING);
    if pending {
        let latency = st.config.latencies.one_vm_pending;
        schedule(st, t, id, latency);
    }
}

/// VM `id` takes the next step of whatever it is doing.
pub(crate) fn step(st: &mut State, t: Timestamp, id: u32, change: u64) {
    let Some(vm) = st.one.vms.get(&id) else {
        return;
    };
    if vm.change != change {
        return;
    }
    let lat = st.config.latencies.clone();
    let key = id.to_string();
    match (vm.state, vm.lcm) {
        (PENDING, _) => {
            if waits_for_images(st, vm) {
                return;
            }
            if let Some(vm) = st.one.vms.get_mut(&id) {
                set_state(vm, ACTIVE, PROLOG);
                vm.deployed_at = Some(secs(t));
            }
            schedule(st, t, id, lat.one_vm_prolog);
        }
        (ACTIVE, PROLOG) => {
            let failed = images_failed(st, vm);
            if let Some(vm) = st.one.vms.get_mut(&id) {
                if failed {
                    set_state(vm, ACTIVE, PROLOG_FAILURE);
                    return;
                }
                set_state(vm, ACTIVE, BOOT);
                vm.deploy_id = format!("one-{id}");
            }
            schedule(st, t, id, lat.one_vm_boot);
        }
        (ACTIVE, BOOT) | (ACTIVE, BOOT_POWEROFF) => {
            let fails = vm.boot_fails && vm.lcm == BOOT;
            let addresses = vm.addresses.clone();
            if let Some(vm) = st.one.vms.get_mut(&id) {
                set_state(vm, ACTIVE, if fails { BOOT_FAILURE } else { RUNNING });
            }
            if fails {
                return;
            }
            for ip in addresses {
                st.server_by_address.insert(ip, key.clone());
            }
            if st.nodes.contains(&key) {
                let latency = st.config.latencies.node_ready;
                st.schedule_after(t, latency, SimEvent::Kube(kube::Event::Ready(key)));
            } else {
                kube::server_active(st, t, &key);
            }
        }
        (ACTIVE, SHUTDOWN) => {
            if let Some(vm) = st.one.vms.get_mut(&id) {
                set_state(vm, ACTIVE, EPILOG);
            }
            schedule(st, t, id, lat.one_vm_epilog);
        }
        (ACTIVE, SHUTDOWN_POWEROFF) => {
            if let Some(vm) = st.one.vms.get_mut(&id) {
                set_state(vm, POWEROFF, LCM_INIT);
            }
            if let Some(n) = st.nodes.get_mut(&key) {
                n.node.ready = false;
            }
            crate::k8s::node_changed(st, t, &key);
        }
        (ACTIVE, EPILOG) | (ACTIVE, CLEANUP_DELETE) => done(st, t, id),
        _ => {}
    }
}

/// The VM is DONE: its addresses and images are given back, its node will go.
fn done(st: &mut State, t: Timestamp, id: u32) {
    let Some(vm) = st.one.vms.get_mut(&id) else {
        return;
    };
    set_state(vm, DONE, LCM_INIT);
    vm.etime = secs(t);
    let addresses = std::mem::take(&mut vm.addresses);
    let image_ids = vm.image_ids.clone();
    let key = id.to_string();
    for ip in addresses {
        if st.server_by_address.get(&ip) == Some(&key) {
            st.server_by_address.remove(&ip);
        }
        st.addresses.release(ip);
    }
    release_images(st, id, &image_ids);
    kube::server_gone(st, t, &key);
    prune_done(st);
}

/// Takes a RUNNING VM's addresses out of the backends (it stops serving).
fn stop_serving(st: &mut State, id: u32) {
    let key = id.to_string();
    let addresses = st
        .one
        .vms
        .get(&id)
        .map(|v| v.addresses.clone())
        .unwrap_or_default();
    for ip in addresses {
        if st.server_by_address.get(&ip) == Some(&key) {
            st.server_by_address.remove(&ip);
        }
    }
}

pub(crate) fn get<'a>(st: &'a State, m: &str, id: i32) -> OneResult<&'a VmRec> {
    u32::try_from(id)
        .ok()
        .and_then(|i| st.one.vms.get(&i))
        .ok_or_else(|| Failure::no_exists(m, Kind::Vm, id))
}

pub(crate) fn info(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let id = p.int(1)?;
    let _decrypt = p.opt_bool(2)?;
    let vm = get(st, ctx.method, id)?;
    Ok(errors::ok_string(xml::vm(vm)))
}

/// `one.vm.action(action, id)`: the action name comes before the id.
pub(crate) fn action(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let name = p.string(1)?.to_string();
    let id = p.int(2)?;
    let m = ctx.method;
    ctx.kind = Some(if name.starts_with("terminate") {
        MutationKind::Delete
    } else {
        MutationKind::Update
    });
    ctx.target_existing(st, "vm", id);
    let vm = get(st, m, id)?;
    let vid = vm.id;
    if denied(vm.lock, OP_MANAGE) {
        return Err(Failure::locked(m, ctx.uid, Kind::Vm, vid));
    }
    let now = ctx.now;
    let lat = st.config.latencies.clone();
    let (state, lcm) = (vm.state, vm.lcm);
    let state_name = state_str(vm);
    let not_available = || {
        Failure::new(
            m,
            Code::Action,
            format!(
                "Error performing action \"{name}\": This action is not available for state {state_name}"
            ),
        )
    };
    let failure_lcm =
        matches!(lcm, BOOT_FAILURE | PROLOG_FAILURE | 37 | 38 | 40..=42 | 44 | 46..=50 | 61);
    let set = |st: &mut State, s: u32, l: u32| {
        if let Some(vm) = st.one.vms.get_mut(&vid) {
            set_state(vm, s, l);
        }
    };
    match name.as_str() {
        "terminate" | "terminate-hard" => {
            let hard = name == "terminate-hard";
            if state != DONE {
                crate::k8s::machine_deleting(st, now, &vid.to_string(), true);
            }
            match state {
                POWEROFF | 4 | 5 | 9 => {
                    set(st, ACTIVE, EPILOG);
                    schedule(st, now, vid, lat.one_vm_epilog);
                }
                0 | PENDING | HOLD | 10 | 11 => done(st, now, vid),
                DONE => {}
                _ if lcm == RUNNING || lcm == 16 || (lcm == SHUTDOWN && hard) => {
                    stop_serving(st, vid);
                    set(st, ACTIVE, SHUTDOWN);
                    schedule(st, now, vid, lat.one_vm_shutdown);
                }
                _ if failure_lcm => {
                    set(st, ACTIVE, CLEANUP_DELETE);
                    schedule(st, now, vid, lat.one_vm_epilog);
                }
                _ => {
                    return Err(Failure::new(
                        m,
                        Code::Action,
                        format!(
                            "Error performing action \"{name}\": Could not terminate VM {vid}, wrong state {state_name}."
                        ),
                    ));
                }
            }
        }
        "poweroff" | "poweroff-hard" => {
            let hard = name == "poweroff-hard";
            let ok = state == ACTIVE
                && (lcm == RUNNING || lcm == 16 || (hard && lcm == SHUTDOWN_POWEROFF));
            if !ok {
                return Err(not_available());
            }
            stop_serving(st, vid);
            set(st, ACTIVE, SHUTDOWN_POWEROFF);
            schedule(st, now, vid, lat.one_vm_shutdown);
        }
        "resume" => {
            if state != POWEROFF {
                return Err(not_available());
            }
            set(st, ACTIVE, BOOT_POWEROFF);
            schedule(st, now, vid, lat.one_vm_boot);
        }
        "reboot" | "reboot-hard" => {
            if !(state == ACTIVE && lcm == RUNNING) {
                return Err(not_available());
            }
        }
        "hold" => {
            if state != PENDING {
                return Err(not_available());
            }
            set(st, HOLD, LCM_INIT);
        }
        "release" => {
            if state != HOLD {
                return Err(not_available());
            }
            set(st, PENDING, LCM_INIT);
            schedule(st, now, vid, lat.one_vm_pending);
        }
        _ => {
            return Err(Failure::new(
                m,
                Code::Action,
                format!("Action \"{name}\" is not supported"),
            ));
        }
    }
    Ok(errors::ok_int(id))
}

/// `one.vmpool.info(filter, start, end, state[, query])`: state -2 any, -1 any but
/// DONE, ≥ 0 that state. `extended` answers the full VM documents
/// (`one.vmpool.infoextended`); without it the short ones, whose user template keeps
/// only the scheduler's attributes.
pub(crate) fn pool_info(
    st: &mut State,
    ctx: &mut Ctx,
    p: &Params,
    extended: bool,
) -> OneResult<Value> {
    let m = ctx.method;
    let range = Range::parse(m, p)?;
    let state = p.int(4)?;
    if p.len() > 5 && !p.string(5)?.is_empty() {
        return Err(Failure::new(
            m,
            Code::Internal,
            "JSON query search is not supported by the SQL backend",
        ));
    }
    if !(-2..=11).contains(&state) {
        return Err(Failure::new(
            m,
            Code::XmlRpcApi,
            "Incorrect filter_flag, state",
        ));
    }
    let items = st
        .one
        .vms
        .values()
        .filter(|v| match state {
            -2 => true,
            -1 => v.state != DONE,
            s => i64::from(v.state) == i64::from(s),
        })
        .map(|v| {
            let doc = if extended {
                xml::vm(v)
            } else {
                xml::vm_short(v)
            };
            (v.id, v.uid, doc)
        })
        .collect();
    let docs: Vec<String> = range.select(items);
    Ok(errors::ok_string(xml::pool("VM_POOL", &docs)))
}

/// `operator.deleteMachine` on OpenNebula: an operator terminates `count` of the
/// targeted running VMs (`onevm terminate --hard`), picked with the fault stream:
/// `SHUTDOWN → EPILOG → DONE`. Answers how many.
pub(crate) fn terminate_out_of_band(
    st: &mut State,
    now: Timestamp,
    fault: &crate::faults::SimFault,
    count: usize,
) -> u64 {
    let candidates: Vec<u32> = st
        .one
        .vms
        .values()
        .filter(|vm| vm.state == ACTIVE && vm.lcm == RUNNING)
        .filter(|vm| {
            flightdeck_cloud::ownership::uid_of(&vm.tags).is_some() && fault.targets(&vm.tags)
        })
        .map(|vm| vm.id)
        .collect();
    let chosen = crate::faults::pick(&mut st.rng_faults, candidates, count);
    let n = chosen.len() as u64;
    let latency = st.config.latencies.one_vm_shutdown;
    for vid in chosen {
        crate::k8s::machine_deleting(st, now, &vid.to_string(), false);
        stop_serving(st, vid);
        if let Some(vm) = st.one.vms.get_mut(&vid) {
            set_state(vm, ACTIVE, SHUTDOWN);
        }
        schedule(st, now, vid, latency);
    }
    n
}
