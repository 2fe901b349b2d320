//! VM templates: `one.template.allocate/info/update/delete` and `one.templatepool.info`
//! (`RequestManagerAllocate.cc`, `RequestManagerInfo.cc`, `RequestManagerUpdateTemplate.cc`,
//! `RequestManagerDelete.cc`, `VMTemplatePool.cc`). Deleting a template never looks at
//! the VMs made from it.

use dxr::Value;

use super::errors::{self, Code, Failure, Kind, OneResult};
use super::rpc::{Ctx, Params};
use super::syntax::{self, Body};
use super::{ONE_TEMPLATES_MAX, OneLock, TemplateRec, secs, xml};
use crate::State;

/// The authorization levels operations need (`AuthRequest::Operation`).
pub(crate) const OP_USE: u8 = 1;
pub(crate) const OP_MANAGE: u8 = 2;

/// `AclManager::oneadmin_authorize`: a lock denies an operation when
/// `0 < lock ≤ operation level` (ADMIN operations are level 4).
pub(crate) fn denied(lock: Option<OneLock>, op: u8) -> bool {
    lock.is_some_and(|l| l.level > 0 && l.level <= op)
}

/// `PoolObjectSQL::name_is_valid`.
pub(crate) fn name_valid(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Invalid NAME, it cannot be empty".into());
    }
    if let Some(c) = name.chars().find(|c| "&|:\\\";/'#{}$<>".contains(*c)) {
        return Err(format!("Invalid NAME, char '{c}' is not allowed"));
    }
    if name.len() > 128 {
        return Err("Invalid NAME, max length is 128 chars".into());
    }
    Ok(())
}

pub(crate) fn allocate(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let text = p.string(1)?;
    let m = ctx.method;
    let mut body = syntax::parse(text).map_err(|e| Failure::new(m, Code::Internal, e))?;
    let name = body
        .erase("NAME")
        .into_iter()
        .find_map(|a| match a {
            syntax::Attr::Single(_, v) => Some(v),
            syntax::Attr::Vector(..) => None,
        })
        .unwrap_or_default();
    ctx.target.name = name.clone();
    name_valid(&name).map_err(|e| Failure::new(m, Code::Internal, e))?;
    if let Some(other) = st
        .one
        .templates
        .values()
        .find(|t| t.name == name && t.uid == ctx.uid)
    {
        return Err(Failure::new(
            m,
            Code::Internal,
            format!("NAME is already taken by TEMPLATE {}.", other.id),
        ));
    }
    if st.one.templates.len() >= ONE_TEMPLATES_MAX {
        return Err(Failure::new(
            m,
            Code::Internal,
            format!("Cannot allocate: the pool holds {ONE_TEMPLATES_MAX} templates"),
        ));
    }
    let id = st.one.next_template;
    st.one.next_template += 1;
    st.one.templates.insert(
        id,
        TemplateRec {
            id,
            name,
            uid: ctx.uid,
            body,
            lock: None,
            regtime: secs(ctx.now),
        },
    );
    ctx.target.id = format!("template/{id}");
    Ok(errors::ok_int(i32::try_from(id).unwrap_or(i32::MAX)))
}

pub(crate) fn get<'a>(st: &'a State, m: &str, id: i32) -> OneResult<&'a TemplateRec> {
    u32::try_from(id)
        .ok()
        .and_then(|i| st.one.templates.get(&i))
        .ok_or_else(|| Failure::no_exists(m, Kind::Template, id))
}

pub(crate) fn info(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let id = p.int(1)?;
    let _extended = p.opt_bool(2)?;
    let _decrypt = p.opt_bool(3)?;
    let t = get(st, ctx.method, id)?;
    Ok(errors::ok_string(xml::template(t)))
}

pub(crate) fn update(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let id = p.int(1)?;
    let text = p.string(2)?;
    let update_type = if p.len() > 3 { p.int(3)? } else { 0 };
    ctx.target_existing(st, "template", id);
    let m = ctx.method;
    let t = get(st, m, id)?;
    if denied(t.lock, OP_MANAGE) {
        return Err(Failure::locked(m, ctx.uid, Kind::Template, t.id));
    }
    if !(0..=1).contains(&update_type) {
        return Err(Failure::new(m, Code::XmlRpcApi, "Wrong update type"));
    }
    let new = syntax::parse(text)
        .map_err(|e| Failure::new(m, Code::Internal, format!("Cannot update template. {e}")))?;
    let Some(t) = u32::try_from(id)
        .ok()
        .and_then(|i| st.one.templates.get_mut(&i))
    else {
        return Err(Failure::no_exists(m, Kind::Template, id));
    };
    let mut body = if update_type == 0 {
        new
    } else {
        let mut merged = t.body.clone();
        merged.merge(&new);
        merged
    };
    // The name lives outside the template (`VMTemplate::insert` erases it).
    body.erase("NAME");
    t.body = body;
    Ok(errors::ok_int(id))
}

/// `one.template.delete(id, delete_images)`: MANAGE; with `delete_images`, the images its
/// disks name are deleted too and failures there do not fail the call.
pub(crate) fn delete(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let id = p.int(1)?;
    let recursive = p.opt_bool(2)?;
    ctx.target_existing(st, "template", id);
    let m = ctx.method;
    let t = get(st, m, id)?;
    if denied(t.lock, OP_MANAGE) {
        return Err(Failure::locked(m, ctx.uid, Kind::Template, t.id));
    }
    let image_ids = if recursive {
        super::images::ids_in_disks(st, &t.body)
    } else {
        Vec::new()
    };
    st.one.templates.remove(&t.id.clone());
    for iid in image_ids {
        // `TemplateDelete::drop` only logs images it could not delete.
        let _ = super::images::delete_image(st, ctx, iid, false);
    }
    Ok(errors::ok_int(id))
}

/// The filter flags `RequestManagerPoolInfoFilter` takes: -4 group, -3 mine, -2 all,
/// -1 mine and my groups, ≥ 0 a user id. With a single user they select the same
/// objects, except a user id other than oneadmin's.
pub(crate) struct Range {
    pub(crate) owner: Option<u32>,
    pub(crate) start: i32,
    pub(crate) end: i32,
}

impl Range {
    pub(crate) fn parse(m: &str, p: &Params) -> OneResult<Range> {
        let filter = p.int(1)?;
        let start = p.int(2)?;
        let end = p.int(3)?;
        if filter < -4 {
            return Err(Failure::new(m, Code::XmlRpcApi, "Incorrect filter_flag"));
        }
        Ok(Range {
            owner: u32::try_from(filter).ok(),
            start,
            end,
        })
    }

    /// `PoolSQL::oid_filter` and the `end_id < -1` page form (`LIMIT start, -end`).
    pub(crate) fn select<T>(&self, items: Vec<(u32, u32, T)>) -> Vec<T> {
        let owned = items
            .into_iter()
            .filter(|(_, uid, _)| self.owner.is_none_or(|o| o == *uid));
        if self.end < -1 {
            let skip = usize::try_from(self.start.max(0)).unwrap_or(0);
            let take = usize::try_from(-(i64::from(self.end))).unwrap_or(0);
            return owned.skip(skip).take(take).map(|(_, _, t)| t).collect();
        }
        owned
            .filter(|(id, _, _)| {
                let id = i64::from(*id);
                self.start == -1
                    || (id >= i64::from(self.start)
                        && (self.end == -1 || id <= i64::from(self.end)))
            })
            .map(|(_, _, t)| t)
            .collect()
    }
}

pub(crate) fn pool_info(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let range = Range::parse(ctx.method, p)?;
    let items = st
        .one
        .templates
        .values()
        .map(|t| (t.id, t.uid, xml::template(t)))
        .collect();
    let docs: Vec<String> = range.select(items);
    Ok(errors::ok_string(xml::pool("VMTEMPLATE_POOL", &docs)))
}

/// The body of a template for instantiation.
pub(crate) fn body_of(t: &TemplateRec) -> Body {
    t.body.clone()
}
