//! The one network and subnet every server and VIP lives on.

use std::net::IpAddr;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use flightdeck_cloud::Timestamp;
use flightdeck_spec::Cidr;
use serde_json::{Map, Value, json};

use super::{list_body, standard};
use crate::wire::{self, Query};
use crate::{App, NETWORK_NAME, SUBNET_NAME, errors};

/// The id of the network every server is attached to.
pub(crate) fn network_id() -> String {
    wire::stable_id(&format!("network/{NETWORK_NAME}"))
}

/// The id of that network's subnet.
pub(crate) fn subnet_id() -> String {
    wire::stable_id(&format!("subnet/{SUBNET_NAME}"))
}

fn render_network(app: &App) -> Value {
    let mut v = json!({
        "id": network_id(),
        "name": NETWORK_NAME,
        "status": "ACTIVE",
        "admin_state_up": true,
        "shared": false,
        "router:external": false,
        "mtu": 1450,
        "subnets": [subnet_id()],
        "tags": [],
        "availability_zones": ["nova"],
        "availability_zone_hints": [],
        "port_security_enabled": true,
        "ipv4_address_scope": null,
        "ipv6_address_scope": null,
        "l2_adjacency": true,
    });
    if let Some(m) = v.as_object_mut() {
        standard(app, m, Timestamp::SIM_EPOCH, &Map::new());
    }
    v
}

/// The subnet's gateway and allocation pool (`.1` is the gateway; the pool runs from
/// `.2` to the last address before the broadcast), as the simulator hands addresses out.
fn subnet_layout(cidr: &str) -> (u8, Value, Value) {
    let Ok(net) = cidr.parse::<Cidr>() else {
        return (4, Value::Null, json!([]));
    };
    match net.addr() {
        IpAddr::V4(a) => {
            let base = u32::from(a);
            let size = 1u64 << (32 - u32::from(net.prefix()));
            let at = |off: u64| std::net::Ipv4Addr::from(base.wrapping_add(off as u32)).to_string();
            let pool = if size >= 4 {
                json!([{"start": at(2), "end": at(size - 2)}])
            } else {
                json!([])
            };
            (4, json!(at(1)), pool)
        }
        IpAddr::V6(a) => {
            let base = u128::from(a);
            let host_bits = 128 - u32::from(net.prefix());
            let size = 1u128 << host_bits.min(64);
            let at = |off: u128| std::net::Ipv6Addr::from(base.wrapping_add(off)).to_string();
            (
                6,
                json!(at(1)),
                json!([{"start": at(2), "end": at(size.saturating_sub(1))}]),
            )
        }
    }
}

/// The subnet's gateway: the router's interface, which a port holds.
pub(crate) fn gateway_ip(app: &App) -> Option<IpAddr> {
    subnet_layout(&app.options.subnet_cidr)
        .1
        .as_str()
        .and_then(|g| g.parse().ok())
}

fn render_subnet(app: &App) -> Value {
    let cidr = &app.options.subnet_cidr;
    let (ip_version, gateway, pools) = subnet_layout(cidr);
    let mut v = json!({
        "id": subnet_id(),
        "name": SUBNET_NAME,
        "network_id": network_id(),
        "cidr": cidr,
        "ip_version": ip_version,
        "gateway_ip": gateway,
        "allocation_pools": pools,
        "enable_dhcp": true,
        "dns_nameservers": [],
        "host_routes": [],
        "ipv6_ra_mode": null,
        "ipv6_address_mode": null,
        "subnetpool_id": null,
        "service_types": [],
        "segment_id": null,
        "dns_publish_fixed_ip": false,
        "tags": [],
    });
    if let Some(m) = v.as_object_mut() {
        standard(app, m, Timestamp::SIM_EPOCH, &Map::new());
    }
    v
}

pub(super) async fn list_networks(State(app): State<App>, RawQuery(raw): RawQuery) -> Response {
    let q = Query::parse(raw.as_deref());
    list_body(&app, "networks", vec![render_network(&app)], &q)
}

pub(super) async fn show_network(State(app): State<App>, Path(id): Path<String>) -> Response {
    if id == network_id() {
        return wire::json(StatusCode::OK, &json!({"network": render_network(&app)}));
    }
    errors::neutron(
        StatusCode::NOT_FOUND,
        "NetworkNotFound",
        &format!("Network {id} could not be found."),
    )
}

pub(super) async fn list_subnets(State(app): State<App>, RawQuery(raw): RawQuery) -> Response {
    let q = Query::parse(raw.as_deref());
    list_body(&app, "subnets", vec![render_subnet(&app)], &q)
}

pub(super) async fn show_subnet(State(app): State<App>, Path(id): Path<String>) -> Response {
    if id == subnet_id() {
        return wire::json(StatusCode::OK, &json!({"subnet": render_subnet(&app)}));
    }
    errors::neutron(
        StatusCode::NOT_FOUND,
        "SubnetNotFound",
        &format!("Subnet {id} could not be found."),
    )
}
