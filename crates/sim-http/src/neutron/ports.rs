//! Ports, as far as the addresses they hold go: every server's and load-balancer VIP's
//! fixed IP on the one subnet, and the router's interface there (the gateway). Read
//! only: flightdeck asks which of its routes' next hops a port still holds.

use std::net::IpAddr;

use axum::extract::{RawQuery, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::networks::gateway_ip;
use super::{bad, list_body, network_id, subnet_id};
use crate::App;
use crate::errors::{self, Service};
use crate::wire::{self, Query};

/// The addresses `fixed_ips=ip_address=<address>` asks for (Neutron ORs repeated
/// ones), or `None` without such a filter; a filter that is not understood is refused
/// naming it, never ignored.
fn wanted_addresses(q: &Query) -> Result<Option<Vec<IpAddr>>, String> {
    let mut wanted: Option<Vec<IpAddr>> = None;
    for (k, v) in q.pairs() {
        if k != "fixed_ips" {
            continue;
        }
        match v.split_once('=') {
            Some(("ip_address", ip)) => match ip.parse::<IpAddr>() {
                Ok(ip) => wanted.get_or_insert_with(Vec::new).push(ip),
                Err(_) => {
                    return Err(format!(
                        "Invalid input for ip_address. Reason: '{ip}' is not a valid IP address."
                    ));
                }
            },
            Some(("subnet_id", id)) if id == subnet_id() => {}
            Some(("subnet_id", _)) => {
                // No port is on another subnet.
                wanted = Some(Vec::new());
            }
            _ => {
                return Err(format!(
                    "Invalid input for fixed_ips. Reason: '{v}' is not ip_address=<address> or subnet_id=<id>."
                ));
            }
        }
    }
    Ok(wanted)
}

fn render_port(ip: IpAddr, gateway: bool) -> Value {
    json!({
        "id": wire::stable_id(&format!("port/{ip}")),
        "name": "",
        "network_id": network_id(),
        "admin_state_up": true,
        "status": "ACTIVE",
        "device_owner": if gateway { "network:router_interface" } else { "" },
        "fixed_ips": [{"subnet_id": subnet_id(), "ip_address": ip.to_string()}],
        "tags": [],
    })
}

pub(super) async fn list_ports(State(app): State<App>, RawQuery(raw): RawQuery) -> Response {
    let q = Query::parse(raw.as_deref());
    let wanted = match wanted_addresses(&q) {
        Ok(w) => w,
        Err(m) => return bad(&m),
    };
    let held = match app.cloud.port_addresses(wanted.as_deref()) {
        Ok(h) => h,
        Err(e) => return errors::from_cloud(Service::Neutron, &e),
    };
    let gateway = gateway_ip(&app);
    let items: Vec<Value> = held
        .into_iter()
        .map(|ip| render_port(ip, Some(ip) == gateway))
        .collect();
    let fields = q.list("fields");
    let items = if fields.is_empty() {
        items
    } else {
        items
            .into_iter()
            .map(|mut p| {
                if let Some(m) = p.as_object_mut() {
                    m.retain(|k, _| k == "id" || fields.iter().any(|f| f == k));
                }
                p
            })
            .collect()
    };
    list_body(&app, "ports", items, &q)
}
