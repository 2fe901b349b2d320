//! Images: `one.image.allocate/info/delete` and `one.imagepool.info`
//! (`ImageAllocate::request_execute`, `Image::insert`, `ImageDelete`,
//! `ImageManager::delete_image`). An image is `LOCKED` while its datastore copies it in
//! and `READY` after (`ERROR` under `one.imageError`); VMs using it make it `USED`.

use std::collections::BTreeSet;

use dxr::Value;
use flightdeck_cloud::{Rng, Timestamp};
use flightdeck_spec::FaultKind;

use super::errors::{self, Code, Failure, Kind, OneResult};
use super::rpc::{Ctx, Params};
use super::syntax::{self, Attr, Body};
use super::templates::{Range, denied, name_valid};
use super::{Event, ImageRec, ONE_IMAGES_MAX, secs, xml};
use crate::{Event as SimEvent, State};

pub(crate) const INIT: u32 = 0;
pub(crate) const READY: u32 = 1;
pub(crate) const USED: u32 = 2;
pub(crate) const LOCKED: u32 = 4;
pub(crate) const ERROR: u32 = 5;
pub(crate) const DELETE: u32 = 7;
pub(crate) const LOCKED_USED: u32 = 9;

const OP_MANAGE: u8 = super::templates::OP_MANAGE;
const OP_ADMIN: u8 = 4;

/// The datastores of a fresh OpenNebula: 0 system, 1 default (images), 2 files.
fn datastore(id: i32) -> Option<(&'static str, bool)> {
    match id {
        0 => Some(("system", true)),
        1 => Some(("default", false)),
        2 => Some(("files", false)),
        _ => None,
    }
}

/// `Image::state_to_str`.
pub(crate) fn state_str(state: u32) -> &'static str {
    match state {
        0 => "INIT",
        1 => "READY",
        2 => "USED",
        3 => "DISABLED",
        4 => "LOCKED",
        5 => "ERROR",
        6 => "CLONE",
        7 => "DELETE",
        8 => "USED_PERS",
        9 => "LOCKED_USED",
        10 => "LOCKED_USED_PERS",
        _ => "-",
    }
}

fn image_type(s: &str) -> Option<u32> {
    match s.to_ascii_uppercase().as_str() {
        "OS" => Some(0),
        "CDROM" => Some(1),
        "DATABLOCK" => Some(2),
        "KERNEL" => Some(3),
        "RAMDISK" => Some(4),
        "CONTEXT" => Some(5),
        _ => None,
    }
}

pub(crate) fn type_str(kind: u32) -> &'static str {
    match kind {
        0 => "OS",
        1 => "CDROM",
        2 => "DATABLOCK",
        3 => "KERNEL",
        4 => "RAMDISK",
        5 => "CONTEXT",
        _ => "BACKUP",
    }
}

fn take(body: &mut Body, name: &str) -> String {
    body.erase(name)
        .into_iter()
        .find_map(|a| match a {
            Attr::Single(_, v) => Some(v),
            Attr::Vector(..) => None,
        })
        .unwrap_or_default()
}

pub(crate) fn allocate(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let text = p.string(1)?;
    let ds_id = p.int(2)?;
    let _no_capacity_check = p.opt_bool(3)?;
    let m = ctx.method;
    let mut body = syntax::parse(text).map_err(|e| Failure::new(m, Code::Internal, e))?;
    ctx.target.name = body.get("NAME").unwrap_or_default().to_string();
    let Some((ds_name, system)) = datastore(ds_id) else {
        return Err(Failure::no_exists(m, Kind::Datastore, ds_id));
    };
    if system {
        return Err(Failure::new(
            m,
            Code::Allocate,
            "New images can only be allocated in a files or image datastore.",
        ));
    }
    let path = body.get("PATH").unwrap_or_default().to_string();
    let size_attr = body.get("SIZE").unwrap_or_default().to_string();
    let size_mb = match size_attr.trim().parse::<u64>() {
        Ok(n) => n,
        // The downloader stats a PATH; the simulator makes every such image 2252 MB.
        Err(_) if !path.is_empty() => 2252,
        Err(_) => {
            return Err(Failure::new(
                m,
                Code::Internal,
                format!("Cannot parse image SIZE: {size_attr}"),
            ));
        }
    };
    let name = take(&mut body, "NAME");
    let fail = |e: String| Failure::allocate(m, Kind::Image, &e);
    name_valid(&name).map_err(fail)?;
    if let Some(other) = st
        .one
        .images
        .values()
        .find(|i| i.name == name && i.uid == ctx.uid)
    {
        return Err(fail(format!(
            "NAME is already taken by IMAGE {}.",
            other.id
        )));
    }
    if st.one.images.len() >= ONE_IMAGES_MAX {
        return Err(Failure::new(
            m,
            Code::Authorization,
            format!(
                "User [{}] : limit of {ONE_IMAGES_MAX} reached for IMAGES quota in datastore [{ds_id}].",
                ctx.uid
            ),
        ));
    }
    let type_attr = take(&mut body, "TYPE");
    let kind = if type_attr.is_empty() {
        Some(0)
    } else {
        image_type(&type_attr)
    };
    let Some(kind) = kind else {
        return Err(fail(format!("Unknown type {type_attr}")));
    };
    let persistent = take(&mut body, "PERSISTENT").eq_ignore_ascii_case("yes");
    if kind <= 2 && body.get("DEV_PREFIX").is_none() {
        body.set(Attr::Single("DEV_PREFIX".into(), "sd".into()));
    }
    take(&mut body, "SIZE");
    let fs = take(&mut body, "FS");
    let _ = fs;
    body.erase("DRIVER");
    let path = take(&mut body, "PATH");
    let source = take(&mut body, "SOURCE");
    let mut format = take(&mut body, "FORMAT");
    if !source.is_empty() && !path.is_empty() {
        return Err(fail("PATH and SOURCE cannot be both set.".into()));
    }
    if !source.is_empty() && format.is_empty() {
        return Err(fail("SOURCE needs FORMAT to be set.".into()));
    }
    if source.is_empty() && !path.is_empty() {
        format.clear();
    } else if source.is_empty() && format.is_empty() {
        format = "raw".into();
    }
    let fails = super::hit(st, FaultKind::OneImageError, ctx.now, &[]);
    let id = st.one.next_image;
    st.one.next_image += 1;
    let ds_id = u32::try_from(ds_id).unwrap_or(1);
    st.one.images.insert(
        id,
        ImageRec {
            id,
            name,
            uid: ctx.uid,
            body,
            lock: None,
            regtime: secs(ctx.now),
            state: LOCKED,
            prev_state: INIT,
            kind,
            persistent,
            size_mb,
            source,
            path,
            format,
            ds_id,
            ds_name,
            vms: BTreeSet::new(),
            fails,
        },
    );
    ctx.target.id = format!("image/{id}");
    ctx.target.name = st
        .one
        .images
        .get(&id)
        .map(|i| i.name.clone())
        .unwrap_or_default();
    let latency = st.config.latencies.one_image_ready;
    st.schedule_after(ctx.now, latency, SimEvent::One(Event::ImageReady(id)));
    Ok(errors::ok_int(i32::try_from(id).unwrap_or(i32::MAX)))
}

/// The datastore finished copying: READY (USED if VMs took it meanwhile), or ERROR.
pub(crate) fn ready(st: &mut State, t: Timestamp, id: u32) {
    let hex = format!(
        "{:016x}{:016x}",
        st.rng_ids.next_u64(),
        st.rng_ids.next_u64()
    );
    let Some(img) = st.one.images.get_mut(&id) else {
        return;
    };
    if !matches!(img.state, LOCKED | LOCKED_USED) {
        return;
    }
    img.prev_state = img.state;
    if img.fails {
        img.state = ERROR;
        img.body.replace(
            "ERROR",
            "Error copying image in the datastore: simulated one.imageError",
        );
    } else {
        img.state = if img.vms.is_empty() { READY } else { USED };
        if img.source.is_empty() {
            img.source = format!("/var/lib/one//datastores/{}/{hex}", img.ds_id);
        }
        if img.format.is_empty() {
            img.format = "qcow2".into();
        }
    }
    let waiting: Vec<u32> = img.vms.iter().copied().collect();
    for vm in waiting {
        super::vms::image_settled(st, t, vm);
    }
}

/// The ids of the images a template's disks name (`IMAGE_ID`, or `IMAGE` by name).
pub(crate) fn ids_in_disks(st: &State, body: &Body) -> Vec<u32> {
    body.vectors("DISK")
        .filter_map(|d| {
            if let Some(id) = d.get("IMAGE_ID") {
                id.trim().parse().ok()
            } else {
                let name = d.get("IMAGE")?;
                st.one
                    .images
                    .values()
                    .find(|i| &i.name == name)
                    .map(|i| i.id)
            }
        })
        .collect()
}

pub(crate) fn get<'a>(st: &'a State, m: &str, id: i32) -> OneResult<&'a ImageRec> {
    u32::try_from(id)
        .ok()
        .and_then(|i| st.one.images.get(&i))
        .ok_or_else(|| Failure::no_exists(m, Kind::Image, id))
}

pub(crate) fn info(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let id = p.int(1)?;
    let _decrypt = p.opt_bool(2)?;
    let img = get(st, ctx.method, id)?;
    Ok(errors::ok_string(xml::image(img)))
}

pub(crate) fn delete(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let id = p.int(1)?;
    let force = p.opt_bool(2)?;
    ctx.target_existing(st, "image", id);
    delete_image(st, ctx, id, force)?;
    Ok(errors::ok_int(id))
}

/// `ImageDelete::request_execute` for image `id`.
pub(crate) fn delete_image(
    st: &mut State,
    ctx: &Ctx,
    id: impl TryInto<i32>,
    force: bool,
) -> OneResult<()> {
    let m = ctx.method;
    let id: i32 = id.try_into().unwrap_or(-1);
    let img = get(st, m, id)?;
    let locked_state = matches!(img.state, LOCKED | LOCKED_USED | 10);
    if locked_state && !force {
        return Err(Failure::new(
            m,
            Code::Internal,
            "Image locked, use --force flag to remove the image. Force delete may leave some files on Datastore",
        )
        .with_id(id));
    }
    let op = if locked_state { OP_ADMIN } else { OP_MANAGE };
    if denied(img.lock, op) {
        return Err(Failure::locked(m, ctx.uid, Kind::Image, img.id));
    }
    let cannot = |why: String| Failure::new(m, Code::Action, format!("Cannot delete image. {why}"));
    match img.state {
        READY | USED | 8 | LOCKED_USED | 10 if !img.vms.is_empty() => {
            return Err(cannot(format!("There are {} VMs using it.", img.vms.len())));
        }
        6 => return Err(cannot("There are 0 active clone operations.".into())),
        _ => {}
    }
    let iid = img.id;
    let has_source = !img.source.is_empty();
    if has_source {
        if let Some(img) = st.one.images.get_mut(&iid) {
            img.prev_state = img.state;
            img.state = DELETE;
        }
        let latency = st.config.latencies.one_image_delete;
        st.schedule_after(ctx.now, latency, SimEvent::One(Event::ImageGone(iid)));
    } else {
        st.one.images.remove(&iid);
    }
    Ok(())
}

pub(crate) fn pool_info(st: &mut State, ctx: &mut Ctx, p: &Params) -> OneResult<Value> {
    let range = Range::parse(ctx.method, p)?;
    let items = st
        .one
        .images
        .values()
        .map(|i| (i.id, i.uid, xml::image(i)))
        .collect();
    let docs: Vec<String> = range.select(items);
    Ok(errors::ok_string(xml::pool("IMAGE_POOL", &docs)))
}
