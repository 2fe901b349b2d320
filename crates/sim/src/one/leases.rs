//! What a VM holds while it exists: the images its disks use
//! (`ImageManager::acquire_image`, `release_image`) and an address lease for each NIC
//! (`VirtualMachine::get_network_leases`), both filled into its `TEMPLATE` the way
//! OpenNebula fills `DISK` and `NIC`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::images::{self, LOCKED, LOCKED_USED, READY, USED};
use super::syntax::{Attr, Body};
use crate::State;

pub(crate) const PERSISTENT_USED: u32 = 8;
pub(crate) const LOCKED_USED_PERS: u32 = 10;

/// Takes the images a VM's disks name (`ImageManager::acquire_image`), filling each
/// DISK as OpenNebula does; on failure gives back what it took.
pub(crate) fn acquire_disks(
    st: &mut State,
    vm_id: u32,
    uid: u32,
    template: &mut Body,
) -> Result<Vec<u32>, String> {
    let mut taken: Vec<u32> = Vec::new();
    let mut result = Ok(());
    let mut disks: Vec<BTreeMap<String, String>> = template
        .erase("DISK")
        .into_iter()
        .filter_map(|a| match a {
            Attr::Vector(_, v) => Some(v),
            Attr::Single(..) => None,
        })
        .collect();
    for (disk_id, disk) in disks.iter_mut().enumerate() {
        let found = if let Some(id) = disk.get("IMAGE_ID") {
            match id.trim().parse::<u32>() {
                Ok(i) if st.one.images.contains_key(&i) => Ok(i),
                _ => Err(format!("Image with ID: {} does not exist", id.trim())),
            }
        } else if let Some(name) = disk.get("IMAGE") {
            st.one
                .images
                .values()
                .find(|i| &i.name == name && i.uid == uid)
                .map(|i| i.id)
                .ok_or_else(|| {
                    format!(
                        "User {uid} does not own an image with name: {name} . Set IMAGE_UNAME or IMAGE_UID of owner in DISK."
                    )
                })
        } else {
            // A volatile disk: no image.
            disk.insert("DISK_ID".into(), disk_id.to_string());
            continue;
        };
        let iid = match found {
            Ok(i) => i,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        let Some(img) = st.one.images.get_mut(&iid) else {
            continue;
        };
        let next = match img.state {
            _ if img.kind > 2 => Err(format!(
                "Image {} ({}) of type {} cannot be used as DISK.",
                img.id,
                img.name,
                images::type_str(img.kind)
            )),
            READY if img.persistent => Ok(PERSISTENT_USED),
            READY | USED => Ok(USED),
            LOCKED if img.persistent => Ok(LOCKED_USED_PERS),
            LOCKED | LOCKED_USED => Ok(LOCKED_USED),
            PERSISTENT_USED | LOCKED_USED_PERS => Err(format!(
                "Cannot acquire image {}, it is persistent and already in use",
                img.id
            )),
            s => Err(format!(
                "Cannot acquire image {}, it is in state: {}",
                img.id,
                images::state_str(s)
            )),
        };
        match next {
            Ok(state) => {
                if state != img.state {
                    img.prev_state = img.state;
                    img.state = state;
                }
                img.vms.insert(vm_id);
                taken.push(iid);
                let fill = [
                    (
                        "CLONE",
                        if img.persistent { "NO" } else { "YES" }.to_string(),
                    ),
                    ("CLONE_TARGET", "SYSTEM".to_string()),
                    ("DATASTORE", img.ds_name.to_string()),
                    ("DATASTORE_ID", img.ds_id.to_string()),
                    (
                        "DEV_PREFIX",
                        img.body.get("DEV_PREFIX").unwrap_or("sd").to_string(),
                    ),
                    ("DISK_ID", disk_id.to_string()),
                    ("DISK_SNAPSHOT_TOTAL_SIZE", "0".to_string()),
                    ("DISK_TYPE", "FILE".to_string()),
                    ("DRIVER", "qcow2".to_string()),
                    (
                        "FORMAT",
                        if img.format.is_empty() {
                            "qcow2".into()
                        } else {
                            img.format.clone()
                        },
                    ),
                    ("IMAGE", img.name.clone()),
                    ("IMAGE_ID", img.id.to_string()),
                    ("IMAGE_STATE", img.state.to_string()),
                    ("IMAGE_UID", img.uid.to_string()),
                    ("IMAGE_UNAME", super::rpc::ONEADMIN.to_string()),
                    ("LN_TARGET", "NONE".to_string()),
                    ("ORIGINAL_SIZE", img.size_mb.to_string()),
                    (
                        "PERSISTENT",
                        if img.persistent { "YES" } else { "NO" }.to_string(),
                    ),
                    ("READONLY", "NO".to_string()),
                    (
                        "SAVE",
                        if img.persistent { "YES" } else { "NO" }.to_string(),
                    ),
                    ("SIZE", img.size_mb.to_string()),
                    ("SOURCE", img.source.clone()),
                    (
                        "TARGET",
                        format!("sd{}", char::from(b'a' + (disk_id % 26) as u8)),
                    ),
                    ("TM_MAD", "ssh".to_string()),
                    ("TYPE", "FILE".to_string()),
                ];
                for (k, v) in fill {
                    disk.entry(k.to_string()).or_insert(v);
                }
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if let Err(e) = result {
        release_images(st, vm_id, &taken);
        return Err(e);
    }
    for d in disks {
        template.set(Attr::Vector("DISK".into(), d));
    }
    Ok(taken)
}

/// A VM no longer uses `ids`: each image goes back to READY (or LOCKED) once unused.
pub(crate) fn release_images(st: &mut State, vm_id: u32, ids: &[u32]) {
    for iid in ids {
        let Some(img) = st.one.images.get_mut(iid) else {
            continue;
        };
        img.vms.remove(&vm_id);
        if img.vms.is_empty() {
            let next = match img.state {
                USED | PERSISTENT_USED => READY,
                LOCKED_USED | LOCKED_USED_PERS => LOCKED,
                s => s,
            };
            if next != img.state {
                img.prev_state = img.state;
                img.state = next;
            }
        }
    }
}

/// Leases an address for every NIC from the subnet (`VirtualMachine::get_network_leases`).
pub(crate) fn lease_nics(
    st: &mut State,
    vm_id: u32,
    template: &mut Body,
) -> Result<Vec<IpAddr>, String> {
    let mut leased = Vec::new();
    let mut nics: Vec<BTreeMap<String, String>> = template
        .erase("NIC")
        .into_iter()
        .filter_map(|a| match a {
            Attr::Vector(_, v) => Some(v),
            Attr::Single(..) => None,
        })
        .collect();
    for (nic_id, nic) in nics.iter_mut().enumerate() {
        let network_id = nic.get("NETWORK_ID").cloned().unwrap_or_else(|| "0".into());
        let Some(ip) = st.addresses.allocate() else {
            for ip in leased {
                st.addresses.release(ip);
            }
            return Err(format!(
                "Cannot get IP/MAC lease from virtual network {network_id}."
            ));
        };
        leased.push(ip);
        let mac = match ip {
            IpAddr::V4(a) => {
                let o = a.octets();
                format!("02:00:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3])
            }
            IpAddr::V6(a) => {
                let o = a.octets();
                format!(
                    "02:00:{:02x}:{:02x}:{:02x}:{:02x}",
                    o[12], o[13], o[14], o[15]
                )
            }
        };
        let key = if ip.is_ipv4() { "IP" } else { "IP6" };
        let fill = [
            ("AR_ID", "0".to_string()),
            ("BRIDGE", "br0".to_string()),
            ("BRIDGE_TYPE", "linux".to_string()),
            (key, ip.to_string()),
            ("MAC", mac),
            ("NAME", format!("NIC{nic_id}")),
            ("NETWORK", "flightdeck-sim".to_string()),
            ("NETWORK_ID", network_id),
            ("NIC_ID", nic_id.to_string()),
            ("SECURITY_GROUPS", "0".to_string()),
            ("TARGET", format!("one-{vm_id}-{nic_id}")),
            ("VN_MAD", "bridge".to_string()),
        ];
        for (k, v) in fill {
            nic.insert(k.to_string(), v);
        }
    }
    for n in nics {
        template.set(Attr::Vector("NIC".into(), n));
    }
    Ok(leased)
}
