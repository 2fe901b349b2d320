//! How Octavia shows each object, and the operating statuses the simulator does not
//! track (listeners, pools, health monitors).

use flightdeck_cloud::{
    HealthMonitor, Listener, LoadBalancer, Member, OperatingStatus, Pool, ProvisioningStatus,
    Timestamp,
};
use flightdeck_sim::World;
use serde_json::{Map, Value, json};

use super::ids;
use crate::wire::{self, TimeStyle, iso};
use crate::{App, Extras, neutron};

/// Fields every Octavia object shows: project, timestamps, tags, description,
/// `admin_state_up`, and the statuses.
pub(super) fn common(
    app: &App,
    m: &mut Map<String, Value>,
    id: &str,
    ex: &mut Extras,
    now: Timestamp,
    status: (ProvisioningStatus, &str),
    tags: &[String],
) {
    let fields = ex.fields(id);
    m.insert("project_id".into(), json!(app.project_id));
    m.insert(
        "created_at".into(),
        json!(iso(ex.created(id, now), TimeStyle::Naive)),
    );
    m.insert("updated_at".into(), Value::Null);
    m.insert("provisioning_status".into(), json!(status.0.as_str()));
    m.insert("operating_status".into(), json!(status.1));
    m.insert("tags".into(), json!(tags));
    m.insert("admin_state_up".into(), json!(true));
    m.insert("description".into(), json!(""));
    for (k, v) in fields {
        m.insert(k, v);
    }
}

pub(super) fn render_lb(
    app: &App,
    lb: &LoadBalancer,
    w: &World,
    ex: &mut Extras,
    now: Timestamp,
) -> Value {
    let mut v = json!({
        "id": lb.id,
        "name": lb.name,
        "vip_address": lb.vip_address.map(|a| a.to_string()),
        "vip_port_id": wire::stable_id(&format!("vip-port/{}", lb.id)),
        "vip_subnet_id": neutron::subnet_id(),
        "vip_network_id": neutron::network_id(),
        "vip_qos_policy_id": null,
        "additional_vips": [],
        "listeners": ids(w.listeners.iter().filter(|l| l.loadbalancer_id == lb.id).map(|l| l.id.clone())),
        "pools": ids(w.pools.iter().filter(|p| p.loadbalancer_id == lb.id).map(|p| p.id.clone())),
        "provider": "amphora",
        "flavor_id": null,
        "availability_zone": null,
    });
    if let Some(m) = v.as_object_mut() {
        let status = (lb.provisioning_status, lb.operating_status.as_str());
        common(app, m, &lb.id, ex, now, status, &lb.tags);
    }
    v
}

pub(super) fn listener_status(l: &Listener, w: &World) -> &'static str {
    let lb_online = w
        .load_balancers
        .iter()
        .any(|lb| lb.id == l.loadbalancer_id && lb.operating_status == OperatingStatus::Online);
    if l.provisioning_status == ProvisioningStatus::Active && lb_online {
        "ONLINE"
    } else {
        "OFFLINE"
    }
}

pub(super) fn render_listener(
    app: &App,
    l: &Listener,
    w: &World,
    ex: &mut Extras,
    now: Timestamp,
) -> Value {
    let default_pool = w
        .pools
        .iter()
        .find(|p| p.listener_id.as_deref() == Some(l.id.as_str()))
        .map(|p| p.id.clone());
    let mut v = json!({
        "id": l.id,
        "name": l.name,
        "protocol": "TCP",
        "protocol_port": l.protocol_port,
        "connection_limit": -1,
        "default_tls_container_ref": null,
        "sni_container_refs": [],
        "default_pool_id": default_pool,
        "l7policies": [],
        "insert_headers": {},
        "loadbalancers": [{"id": l.loadbalancer_id}],
        "timeout_client_data": 50000,
        "timeout_member_connect": 5000,
        "timeout_member_data": 50000,
        "timeout_tcp_inspect": 0,
        "client_ca_tls_container_ref": null,
        "client_authentication": "NONE",
        "client_crl_container_ref": null,
        "allowed_cidrs": null,
        "tls_ciphers": null,
        "tls_versions": null,
        "alpn_protocols": null,
        "hsts_max_age": null,
        "hsts_include_subdomains": false,
        "hsts_preload": false,
    });
    if let Some(m) = v.as_object_mut() {
        let status = (l.provisioning_status, listener_status(l, w));
        common(app, m, &l.id, ex, now, status, &l.tags);
    }
    v
}

/// A pool is ONLINE when its members serve (or it has none), ERROR when none does,
/// DEGRADED in between, and OFFLINE while it is not ACTIVE.
pub(super) fn pool_status(p: &Pool, w: &World) -> &'static str {
    if p.provisioning_status != ProvisioningStatus::Active {
        return "OFFLINE";
    }
    let states: Vec<OperatingStatus> = w
        .members
        .iter()
        .filter(|m| m.pool_id == p.id)
        .map(|m| m.operating_status)
        .collect();
    let up =
        |s: &OperatingStatus| matches!(s, OperatingStatus::Online | OperatingStatus::NoMonitor);
    if states.iter().all(up) {
        "ONLINE"
    } else if states.iter().any(up) {
        "DEGRADED"
    } else {
        "ERROR"
    }
}

pub(super) fn render_pool(
    app: &App,
    p: &Pool,
    w: &World,
    ex: &mut Extras,
    now: Timestamp,
) -> Value {
    let hm = w
        .health_monitors
        .iter()
        .find(|h| h.pool_id == p.id)
        .map(|h| h.id.clone());
    let mut v = json!({
        "id": p.id,
        "name": p.name,
        "protocol": "TCP",
        "lb_algorithm": "ROUND_ROBIN",
        "session_persistence": null,
        "loadbalancers": [{"id": p.loadbalancer_id}],
        "listeners": ids(p.listener_id.iter().cloned()),
        "healthmonitor_id": hm,
        "members": ids(w.members.iter().filter(|m| m.pool_id == p.id).map(|m| m.id.clone())),
        "tls_container_ref": null,
        "ca_tls_container_ref": null,
        "crl_container_ref": null,
        "tls_enabled": false,
        "tls_ciphers": null,
        "tls_versions": null,
        "alpn_protocols": null,
    });
    if let Some(m) = v.as_object_mut() {
        let status = (p.provisioning_status, pool_status(p, w));
        common(app, m, &p.id, ex, now, status, &p.tags);
    }
    v
}

pub(super) fn hm_status(h: &HealthMonitor) -> &'static str {
    if h.provisioning_status == ProvisioningStatus::Active {
        "ONLINE"
    } else {
        "OFFLINE"
    }
}

pub(super) fn render_hm(app: &App, h: &HealthMonitor, ex: &mut Extras, now: Timestamp) -> Value {
    let http = matches!(h.kind.as_str(), "HTTP" | "HTTPS");
    let mut v = json!({
        "id": h.id,
        "name": h.name,
        "type": h.kind,
        "delay": 5,
        "timeout": 5,
        "max_retries": 3,
        "max_retries_down": 3,
        "http_method": if http { json!("GET") } else { Value::Null },
        "url_path": if http { json!("/") } else { Value::Null },
        "expected_codes": if http { json!("200") } else { Value::Null },
        "pools": [{"id": h.pool_id}],
        "http_version": null,
        "domain_name": null,
    });
    if let Some(m) = v.as_object_mut() {
        let status = (h.provisioning_status, hm_status(h));
        common(app, m, &h.id, ex, now, status, &h.tags);
    }
    v
}

pub(super) fn render_member(app: &App, m: &Member, ex: &mut Extras, now: Timestamp) -> Value {
    let mut v = json!({
        "id": m.id,
        "name": m.name,
        "address": m.address.to_string(),
        "protocol_port": m.protocol_port,
        "weight": 1,
        "backup": false,
        "subnet_id": null,
        "monitor_address": null,
        "monitor_port": null,
    });
    if let Some(o) = v.as_object_mut() {
        let status = (m.provisioning_status, m.operating_status.as_str());
        common(app, o, &m.id, ex, now, status, &m.tags);
    }
    v
}
