//! A simulated OpenNebula 6.10, reached through its XML-RPC call model
//! ([`SimCloud::one_call`]): VM templates, images in datastores, and VMs that go
//! `PENDING → PROLOG → BOOT → RUNNING` and `SHUTDOWN → EPILOG → DONE` in virtual time.
//!
//! Answers follow the OpenNebula 6.10 sources (`src/rm/Request*.cc`): success
//! `[true, value, 0]`, failure `[false, message, code, object_id, 0]` with the messages
//! `Request::failure_message` builds. A parameter of the wrong type or a missing one is
//! what xmlrpc-c rejects before OpenNebula runs: such calls answer a fault struct
//! `{faultCode, faultString}` (see [`SimCloud::one_call`]).
//!
//! One user exists: `oneadmin` (UID 0, GID 0). Locks bind oneadmin too, as in
//! `AclManager::oneadmin_authorize`. A VM that reaches RUNNING with a `FLIGHTDECK_UID`
//! in its user template runs a kubelet exactly like a Nova server (see [`crate::kube`]);
//! its address counts as a backend for load-balancer members.

mod errors;
mod images;
mod leases;
mod rpc;
mod syntax;
mod templates;
mod vms;
mod xml;

pub(crate) use vms::terminate_out_of_band;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use flightdeck_cloud::Timestamp;
use serde::Serialize;

use crate::{State, faults};

pub(crate) use syntax::Body;

/// The most VM templates the simulated OpenNebula holds.
pub const ONE_TEMPLATES_MAX: usize = 10_000;
/// The most images the simulated OpenNebula holds.
pub const ONE_IMAGES_MAX: usize = 10_000;
/// The most VMs that are not DONE (oneadmin's VMS quota, as the simulator sets it).
pub const ONE_VMS_MAX: usize = 10_000;
/// The most DONE VMs kept in the pool; the oldest are forgotten beyond it.
pub const ONE_DONE_VMS_KEPT: usize = 10_000;

/// The service name calls and mutations are counted under.
pub(crate) const SERVICE: &str = "opennebula";
/// The OpenNebula version `one.system.version` answers.
pub(crate) const VERSION: &str = "6.10.0";

/// `PoolObjectSQL` lock: `<LOCK><LOCKED/><OWNER/><TIME/><REQ_ID/></LOCK>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OneLock {
    /// 1 USE, 2 MANAGE, 3 ADMIN (4, ALL, is stored as USE).
    pub level: u8,
    pub owner: i32,
    /// Seconds of virtual time.
    pub time: u64,
    pub req_id: i32,
}

/// A VM template as the simulator holds it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OneTemplate {
    pub id: u32,
    pub name: String,
    pub uid: u32,
    pub lock: Option<OneLock>,
    /// The template body in template syntax (without `NAME`).
    pub body: String,
    pub regtime: u64,
}

/// An image as the simulator holds it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OneImage {
    pub id: u32,
    pub name: String,
    pub uid: u32,
    /// `IMAGE/STATE`: 1 READY, 2 USED, 4 LOCKED, 5 ERROR, 7 DELETE, 9 LOCKED_USED, ...
    pub state: u32,
    pub lock: Option<OneLock>,
    pub body: String,
    pub running_vms: u32,
    pub datastore_id: u32,
    pub persistent: bool,
    pub size_mb: u64,
}

/// A VM as the simulator holds it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OneVm {
    pub id: u32,
    pub name: String,
    pub uid: u32,
    /// `VM/STATE`: 1 PENDING, 3 ACTIVE, 6 DONE, 8 POWEROFF, ...
    pub state: u32,
    /// `VM/LCM_STATE`: 1 PROLOG, 2 BOOT, 3 RUNNING, 11 EPILOG, 12 SHUTDOWN, 36
    /// BOOT_FAILURE, ...
    pub lcm_state: u32,
    pub lock: Option<OneLock>,
    /// The ownership tags from the `FLIGHTDECK_*` user-template attributes, as
    /// flightdeck's tag strings (`flightdeck-cluster=...`).
    pub tags: Vec<String>,
    pub template_id: Option<u32>,
    pub address: Option<IpAddr>,
    pub image_ids: Vec<u32>,
    /// `TEMPLATE` and `USER_TEMPLATE` in template syntax.
    pub template: String,
    pub user_template: String,
}

pub(crate) fn secs(t: Timestamp) -> u64 {
    t.millis() / 1000
}

pub(crate) struct TemplateRec {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) body: Body,
    pub(crate) lock: Option<OneLock>,
    pub(crate) regtime: u64,
}

pub(crate) struct ImageRec {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) body: Body,
    pub(crate) lock: Option<OneLock>,
    pub(crate) regtime: u64,
    pub(crate) state: u32,
    pub(crate) prev_state: u32,
    pub(crate) kind: u32,
    pub(crate) persistent: bool,
    pub(crate) size_mb: u64,
    pub(crate) source: String,
    pub(crate) path: String,
    pub(crate) format: String,
    pub(crate) ds_id: u32,
    pub(crate) ds_name: &'static str,
    pub(crate) vms: BTreeSet<u32>,
    /// Decided at allocation (`one.imageError`): the copy ends in ERROR.
    pub(crate) fails: bool,
}

pub(crate) struct VmRec {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) state: u32,
    pub(crate) lcm: u32,
    pub(crate) prev_state: u32,
    pub(crate) prev_lcm: u32,
    pub(crate) stime: u64,
    pub(crate) etime: u64,
    pub(crate) deploy_id: String,
    pub(crate) lock: Option<OneLock>,
    pub(crate) template: Body,
    pub(crate) user_template: Body,
    pub(crate) tags: Vec<String>,
    pub(crate) template_id: Option<u32>,
    pub(crate) addresses: Vec<IpAddr>,
    pub(crate) image_ids: Vec<u32>,
    /// Decided at instantiation (`one.vmBootFailure`): the boot ends in BOOT_FAILURE.
    pub(crate) boot_fails: bool,
    /// Bumped on every state change, so that a transition scheduled before is moot.
    pub(crate) change: u64,
    /// When the VM was deployed on the (one) simulated host, in seconds.
    pub(crate) deployed_at: Option<u64>,
}

impl VmRec {
    /// ACTIVE/RUNNING: the guest runs (a kubelet may serve).
    pub(crate) fn is_running(&self) -> bool {
        self.state == vms::ACTIVE && self.lcm == vms::RUNNING
    }
}

/// Everything the simulated OpenNebula holds.
#[derive(Default)]
pub(crate) struct OneState {
    pub(crate) templates: BTreeMap<u32, TemplateRec>,
    pub(crate) images: BTreeMap<u32, ImageRec>,
    pub(crate) vms: BTreeMap<u32, VmRec>,
    next_template: u32,
    next_image: u32,
    next_vm: u32,
    /// Request ids (`att.req_id`), for lock records.
    next_req: i32,
}

impl OneState {
    pub(crate) fn vm_by_key(&self, key: &str) -> Option<&VmRec> {
        key.parse::<u32>().ok().and_then(|id| self.vms.get(&id))
    }

    /// The cloud-init user data VM `key` boots with: its CONTEXT's `USER_DATA`, decoded
    /// when `USERDATA_ENCODING` is base64.
    pub(crate) fn user_data(&self, key: &str) -> Option<String> {
        use base64::Engine as _;
        let vm = self.vm_by_key(key)?;
        let context = vm
            .template
            .vectors("CONTEXT")
            .chain(vm.user_template.vectors("CONTEXT"))
            .find(|c| c.contains_key("USER_DATA"))?;
        let data = context.get("USER_DATA")?;
        match context.get("USERDATA_ENCODING").map(String::as_str) {
            Some("base64") => base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .ok()
                .and_then(|b| String::from_utf8(b).ok()),
            _ => Some(data.clone()),
        }
    }

    fn req_id(&mut self) -> i32 {
        self.next_req = (self.next_req + 1) % 10_000;
        self.next_req
    }
}

/// Pending OpenNebula transitions.
#[derive(Clone, Debug)]
pub(crate) enum Event {
    /// The datastore finished copying image `id` in.
    ImageReady(u32),
    /// The datastore removed image `id` (it was in DELETE).
    ImageGone(u32),
    /// VM `id` takes its next step, if nothing changed it since (`change`).
    Vm(u32, u64),
}

pub(crate) fn apply(st: &mut State, t: Timestamp, event: Event) {
    match event {
        Event::ImageReady(id) => images::ready(st, t, id),
        Event::ImageGone(id) => {
            st.one.images.remove(&id);
        }
        Event::Vm(id, change) => vms::step(st, t, id, change),
    }
}

pub(crate) fn is_live(st: &State, event: &Event) -> bool {
    match event {
        Event::ImageReady(id) => st
            .one
            .images
            .get(id)
            .is_some_and(|i| matches!(i.state, images::LOCKED | images::LOCKED_USED)),
        Event::ImageGone(id) => st.one.images.contains_key(id),
        Event::Vm(id, change) => st.one.vms.get(id).is_some_and(|v| v.change == *change),
    }
}

/// `one.lockTemplate` starts: every template whose name starts with `prefix` is locked
/// at `level` by an operator (lock owner 0). Answers the ids it locked.
pub(crate) fn lock_templates(st: &mut State, t: Timestamp, prefix: &str, level: u8) -> Vec<String> {
    let req_id = st.one.req_id();
    let mut locked = Vec::new();
    for tpl in st.one.templates.values_mut() {
        if tpl.name.starts_with(prefix) {
            tpl.lock = Some(OneLock {
                level,
                owner: 0,
                time: secs(t),
                req_id,
            });
            locked.push(tpl.id.to_string());
        }
    }
    locked
}

/// `one.lockTemplate` ends: the templates it locked are unlocked.
pub(crate) fn unlock_templates(st: &mut State, ids: &[String]) {
    for id in ids {
        if let Some(tpl) = id
            .parse::<u32>()
            .ok()
            .and_then(|i| st.one.templates.get_mut(&i))
        {
            tpl.lock = None;
        }
    }
}

/// Whether an object of fault-kind `kind` with `tags` is hit now (per-object faults).
pub(crate) fn hit(
    st: &mut State,
    kind: flightdeck_spec::FaultKind,
    t: Timestamp,
    tags: &[String],
) -> bool {
    faults::server_hit(st, kind, t, tags)
}

pub(crate) fn snapshot_templates(st: &State) -> Vec<OneTemplate> {
    st.one
        .templates
        .values()
        .map(|t| OneTemplate {
            id: t.id,
            name: t.name.clone(),
            uid: t.uid,
            lock: t.lock,
            body: t.body.to_text(),
            regtime: t.regtime,
        })
        .collect()
}

pub(crate) fn snapshot_images(st: &State) -> Vec<OneImage> {
    st.one
        .images
        .values()
        .map(|i| OneImage {
            id: i.id,
            name: i.name.clone(),
            uid: i.uid,
            state: i.state,
            lock: i.lock,
            body: i.body.to_text(),
            running_vms: u32::try_from(i.vms.len()).unwrap_or(u32::MAX),
            datastore_id: i.ds_id,
            persistent: i.persistent,
            size_mb: i.size_mb,
        })
        .collect()
}

pub(crate) fn snapshot_vms(st: &State) -> Vec<OneVm> {
    st.one
        .vms
        .values()
        .map(|v| OneVm {
            id: v.id,
            name: v.name.clone(),
            uid: v.uid,
            state: v.state,
            lcm_state: v.lcm,
            lock: v.lock,
            tags: v.tags.clone(),
            template_id: v.template_id,
            address: v.addresses.first().copied(),
            image_ids: v.image_ids.clone(),
            template: v.template.to_text(),
            user_template: v.user_template.to_text(),
        })
        .collect()
}

/// The name of the OpenNebula object a mutation's target id (`template/3`) names.
pub(crate) fn name_of(st: &State, target: &str) -> Option<String> {
    let (kind, id) = target.split_once('/')?;
    let id: u32 = id.parse().ok()?;
    match kind {
        "template" => st.one.templates.get(&id).map(|t| t.name.clone()),
        "image" => st.one.images.get(&id).map(|i| i.name.clone()),
        "vm" => st.one.vms.get(&id).map(|v| v.name.clone()),
        _ => None,
    }
}
