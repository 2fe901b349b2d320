//! The XML-RPC entry point: parameter decoding as xmlrpc-c's `paramList` does it,
//! authentication, the `one.rpcError` fault, dispatch, call counting and the mutation
//! log.

use dxr::Value;
use flightdeck_cloud::{Clock, Timestamp};
use flightdeck_spec::FaultKind;

use super::errors::{self, Code, FAULT_NO_SUCH_METHOD, Failure, OneResult};
use super::{SERVICE, VERSION, images, templates, vms};
use crate::{Mutation, MutationKind, SimCloud, State};

/// The user the simulated OpenNebula knows.
pub(crate) const ONEADMIN: &str = "oneadmin";
pub(crate) const ONEADMIN_UID: u32 = 0;

/// Every method the simulator answers, with what a successful call does.
const METHODS: &[(&str, Option<MutationKind>)] = &[
    ("one.system.version", None),
    ("one.template.allocate", Some(MutationKind::Create)),
    ("one.template.info", None),
    ("one.template.update", Some(MutationKind::Update)),
    ("one.template.delete", Some(MutationKind::Delete)),
    ("one.template.instantiate", Some(MutationKind::Create)),
    ("one.template.lock", Some(MutationKind::Update)),
    ("one.template.unlock", Some(MutationKind::Update)),
    ("one.templatepool.info", None),
    ("one.image.allocate", Some(MutationKind::Create)),
    ("one.image.info", None),
    ("one.image.delete", Some(MutationKind::Delete)),
    ("one.image.lock", Some(MutationKind::Update)),
    ("one.image.unlock", Some(MutationKind::Update)),
    ("one.imagepool.info", None),
    ("one.vm.info", None),
    ("one.vm.action", Some(MutationKind::Update)),
    ("one.vm.lock", Some(MutationKind::Update)),
    ("one.vm.unlock", Some(MutationKind::Update)),
    ("one.vmpool.info", None),
    ("one.vmpool.infoextended", None),
];

/// The name unknown methods are counted under (the call count stays bounded).
const UNKNOWN_METHOD: &str = "(unknown method)";

/// A call's parameters, read the way xmlrpc-c's `paramList::get*` reads them.
pub(crate) struct Params<'a>(pub(crate) &'a [Value]);

impl Params<'_> {
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    fn get(&self, i: usize) -> OneResult<&Value> {
        self.0
            .get(i)
            .ok_or_else(|| Failure::type_fault("Not enough parameters"))
    }

    pub(crate) fn int(&self, i: usize) -> OneResult<i32> {
        match self.get(i)? {
            Value::Integer(n) => Ok(*n),
            _ => Err(Failure::type_fault(
                "Parameter that is supposed to be integer is not",
            )),
        }
    }

    pub(crate) fn string(&self, i: usize) -> OneResult<&str> {
        match self.get(i)? {
            Value::String(s) => Ok(s),
            _ => Err(Failure::type_fault(
                "Parameter that is supposed to be a string is not",
            )),
        }
    }

    pub(crate) fn boolean(&self, i: usize) -> OneResult<bool> {
        match self.get(i)? {
            Value::Boolean(b) => Ok(*b),
            _ => Err(Failure::type_fault(
                "Parameter that is supposed to be boolean is not",
            )),
        }
    }

    /// An optional trailing boolean: read only when the call has more than `i` params.
    pub(crate) fn opt_bool(&self, i: usize) -> OneResult<bool> {
        if self.len() > i {
            self.boolean(i)
        } else {
            Ok(false)
        }
    }
}

/// What a mutating call targets, for the mutation log.
#[derive(Default)]
pub(crate) struct Target {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) tags: Vec<String>,
}

/// One call in progress.
pub(crate) struct Ctx {
    pub(crate) method: &'static str,
    pub(crate) now: Timestamp,
    pub(crate) uid: u32,
    pub(crate) req_id: i32,
    pub(crate) target: Target,
    /// The mutation kind, when the method's kind depends on its params (`vm.action`).
    pub(crate) kind: Option<MutationKind>,
}

impl Ctx {
    /// Records the existing object `kind/id` (e.g. `template/3`) as the call's target,
    /// with its name and tags as they are before the call.
    pub(crate) fn target_existing(&mut self, st: &State, kind: &str, id: i32) {
        let key = format!("{kind}/{id}");
        let name = super::name_of(st, &key).unwrap_or_default();
        let tags = if kind == "vm" {
            u32::try_from(id)
                .ok()
                .and_then(|i| st.one.vms.get(&i))
                .map(|v| v.tags.clone())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        self.target = Target {
            id: key,
            name,
            tags,
        };
    }
}

fn authenticate(st: &State, session: &str) -> Option<u32> {
    let (user, password) = session.split_once(':')?;
    (user == ONEADMIN && password == st.config.one_password).then_some(ONEADMIN_UID)
}

/// Whether an active `one.rpcError` answers this call INTERNAL. Every active fault
/// draws, so the stream does not depend on earlier outcomes.
fn rpc_error(st: &mut State, now: Timestamp) -> bool {
    let mut call = crate::faults::CallFor::labelled();
    crate::faults::call_hit(st, FaultKind::OneRpcError, now, &mut call)
}

fn dispatch(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    match ctx.method {
        "one.system.version" => Ok(errors::ok_string(VERSION.into())),
        "one.template.allocate" => templates::allocate(st, ctx, p),
        "one.template.info" => templates::info(st, ctx, p),
        "one.template.update" => templates::update(st, ctx, p),
        "one.template.delete" => templates::delete(st, ctx, p),
        "one.template.instantiate" => vms::instantiate(st, ctx, p),
        "one.template.lock" => lock(st, ctx, p, super::errors::Kind::Template),
        "one.template.unlock" => unlock(st, ctx, p, super::errors::Kind::Template),
        "one.templatepool.info" => templates::pool_info(st, ctx, p),
        "one.image.allocate" => images::allocate(st, ctx, p),
        "one.image.info" => images::info(st, ctx, p),
        "one.image.delete" => images::delete(st, ctx, p),
        "one.image.lock" => lock(st, ctx, p, super::errors::Kind::Image),
        "one.image.unlock" => unlock(st, ctx, p, super::errors::Kind::Image),
        "one.imagepool.info" => images::pool_info(st, ctx, p),
        "one.vm.info" => vms::info(st, ctx, p),
        "one.vm.action" => vms::action(st, ctx, p),
        "one.vm.lock" => lock(st, ctx, p, super::errors::Kind::Vm),
        "one.vm.unlock" => unlock(st, ctx, p, super::errors::Kind::Vm),
        "one.vmpool.info" => vms::pool_info(st, ctx, p, false),
        "one.vmpool.infoextended" => vms::pool_info(st, ctx, p, true),
        _ => Err(Failure::Fault {
            code: FAULT_NO_SUCH_METHOD,
            message: format!("Method '{}' not defined", ctx.method),
        }),
    }
}

fn lock_slot(st: &mut State, kind: errors::Kind, id: i32) -> Option<&mut Option<super::OneLock>> {
    let id = u32::try_from(id).ok()?;
    match kind {
        errors::Kind::Template => st.one.templates.get_mut(&id).map(|t| &mut t.lock),
        errors::Kind::Image => st.one.images.get_mut(&id).map(|i| &mut i.lock),
        errors::Kind::Vm => st.one.vms.get_mut(&id).map(|v| &mut v.lock),
        errors::Kind::Datastore => None,
    }
}

fn target_kind(kind: errors::Kind) -> &'static str {
    match kind {
        errors::Kind::Template => "template",
        errors::Kind::Image => "image",
        errors::Kind::Vm => "vm",
        errors::Kind::Datastore => "datastore",
    }
}

/// `RequestManagerLock`: `lock(id, level, test)` answers the id. Never blocked by a
/// lock; oneadmin may re-lock whatever is locked unless `test` is set, which answers
/// ACTION with the lock's time as the message.
fn lock(st: &mut State, ctx: &mut Ctx, p: &Params, kind: errors::Kind) -> OneResult<Value> {
    let id = p.int(1)?;
    let level = p.int(2)?;
    let test = p.opt_bool(3)?;
    ctx.target_existing(st, target_kind(kind), id);
    let method = ctx.method;
    let (now, uid, req_id) = (super::secs(ctx.now), ctx.uid, ctx.req_id);
    let Some(slot) = lock_slot(st, kind, id) else {
        return Err(Failure::no_exists(method, kind, id));
    };
    let level: u8 = match level {
        1 | 4 => 1,
        2 => 2,
        3 => 3,
        _ => {
            return Err(Failure::new(
                method,
                Code::Action,
                "Wrong lock level specified",
            ));
        }
    };
    if test && let Some(held) = slot {
        return Err(Failure::new(method, Code::Action, held.time.to_string()));
    }
    *slot = Some(super::OneLock {
        level,
        owner: i32::try_from(uid).unwrap_or(-1),
        time: now,
        req_id,
    });
    Ok(errors::ok_int(id))
}

/// `RequestManagerUnlock`: oneadmin unlocks whoever holds the lock; answers the id.
fn unlock(st: &mut State, ctx: &mut Ctx, p: &Params, kind: errors::Kind) -> OneResult<Value> {
    let id = p.int(1)?;
    ctx.target_existing(st, target_kind(kind), id);
    let method = ctx.method;
    let Some(slot) = lock_slot(st, kind, id) else {
        return Err(Failure::no_exists(method, kind, id));
    };
    *slot = None;
    Ok(errors::ok_int(id))
}

impl SimCloud {
    /// One OpenNebula XML-RPC call, as `POST /RPC2` receives it: `method` is e.g.
    /// `"one.template.allocate"`, `params` are the call's params (the first is the
    /// session string `"user:password"`). Returns the response array exactly as
    /// OpenNebula does: success `[true, value, 0]` (value: i4 for IDs, string for
    /// `*.info` XML, ...); failure `[false, message, code, object_id, 0]`.
    ///
    /// A call xmlrpc-c rejects before OpenNebula runs it (a missing parameter, one of
    /// the wrong type, an unknown method) answers the struct
    /// `{faultCode: i4, faultString: string}`: serve it as an XML-RPC `<fault>`.
    ///
    /// Every call is counted in [`SimCloud::api_calls`] under `opennebula` and its
    /// method name; every mutating call (allocate, update, delete, instantiate, lock,
    /// unlock, `vm.action`) is logged in [`SimCloud::mutations`], failed ones too.
    pub fn one_call(&self, method: &str, params: Vec<dxr::Value>) -> dxr::Value {
        let mut st = self.lock();
        let now = self.clock.now();
        st.run_due(now);
        let known = METHODS.iter().find(|(m, _)| *m == method);
        let Some(&(name, mutates)) = known else {
            st.log.count(SERVICE, UNKNOWN_METHOD);
            return errors::fault(
                FAULT_NO_SUCH_METHOD,
                &format!("Method '{method}' not defined"),
            );
        };
        st.log.count(SERVICE, name);
        st.log.current = None;
        if let Some(cluster) = crate::caller::cluster() {
            st.log.called_for(&cluster, now);
            st.log.answering_for(&cluster);
        }
        let req_id = st.one.req_id();
        let mut ctx = Ctx {
            method: name,
            now,
            uid: ONEADMIN_UID,
            req_id,
            target: Target::default(),
            kind: mutates,
        };
        let p = Params(&params);
        let result = match p.string(0) {
            Err(f) => Err(f),
            Ok(_) if rpc_error(&mut st, now) => Err(Failure::new(
                name,
                Code::Internal,
                "Internal error (simulated one.rpcError)",
            )),
            Ok(session) => match authenticate(&st, session) {
                None => Err(Failure::authentication(name)),
                Some(uid) => {
                    ctx.uid = uid;
                    dispatch(&mut st, &mut ctx, &p)
                }
            },
        };
        if let Some(kind) = ctx.kind
            && mutates.is_some()
        {
            st.log.mutation(Mutation {
                at: now,
                service: SERVICE,
                operation: name.into(),
                kind,
                target_id: ctx.target.id,
                target_name: ctx.target.name,
                target_tags: ctx.target.tags,
                ok: result.is_ok(),
                caller: None,
            });
        }
        st.log.answered(result.is_ok());
        st.settle(now);
        match result {
            Ok(v) => v,
            Err(f) => f.to_value(),
        }
    }
}
