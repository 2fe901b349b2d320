//! Octavia (load-balancer API v2): load balancers, listeners, pools, health monitors
//! and members.
//!
//! - Lists: `GET /v2/lbaas/{loadbalancers,listeners,pools,healthmonitors}?tags=<uid tag>`,
//!   every page, re-checked against the owner here; members per pool
//!   (`GET /v2/lbaas/pools/{pool_id}/members`), all of them.
//! - Creates carry the tags in the body. A listener is `TCP` on the requested port, a
//!   pool `TCP` with `ROUND_ROBIN` (the API server terminates TLS itself); an `HTTP` or
//!   `HTTPS` health monitor checks `GET /healthz` for a 200.
//! - Octavia's 409 "is immutable" (a change while the load balancer is PENDING_*) is
//!   `Conflict`; its other 409s (duplicates) are `AlreadyExists` ([`crate::errors`]).
//! - `delete_load_balancer_cascade`: `DELETE /v2/lbaas/loadbalancers/{id}?cascade=true`.
//! - A status Octavia adds later and flightdeck does not know reads as `ERROR`
//!   (provisioning) or `OFFLINE` (operating), which makes the engine wait, not act.

use std::net::IpAddr;

use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{
    HealthMonitor, HealthMonitorCreate, Listener, ListenerCreate, LoadBalancer, LoadBalancerCreate,
    LoadBalancing, Member, MemberCreate, OperatingStatus, Ownership, Pool, PoolCreate,
    ProvisioningStatus,
};
use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::client::{Call, seg};
use crate::errors::{Service, decode_error, not_sent};
use crate::provider::{Named, OpenStackCloud};

const OP_LIST_LBS: &str = "GET /v2/lbaas/loadbalancers";
const OP_LIST_LISTENERS: &str = "GET /v2/lbaas/listeners";
const OP_LIST_POOLS: &str = "GET /v2/lbaas/pools";
const OP_LIST_HMS: &str = "GET /v2/lbaas/healthmonitors";
const OP_LIST_MEMBERS: &str = "GET /v2/lbaas/pools/{pool_id}/members";
const OP_CREATE_LB: &str = "POST /v2/lbaas/loadbalancers";
const OP_CREATE_LISTENER: &str = "POST /v2/lbaas/listeners";
const OP_CREATE_POOL: &str = "POST /v2/lbaas/pools";
const OP_CREATE_HM: &str = "POST /v2/lbaas/healthmonitors";
const OP_CREATE_MEMBER: &str = "POST /v2/lbaas/pools/{pool_id}/members";
const OP_ADD_MEMBERS: &str = "PUT /v2/lbaas/pools/{pool_id}/members";
const OP_DELETE_MEMBER: &str = "DELETE /v2/lbaas/pools/{pool_id}/members/{member_id}";
const OP_DELETE_LB: &str = "DELETE /v2/lbaas/loadbalancers/{loadbalancer_id}";

/// Where an HTTP(S) health monitor looks: kube-apiserver's anonymous health check.
const HEALTH_PATH: &str = "/healthz";

/// Octavia's `provisioning_status`; unknown values read as `ERROR`.
pub fn provisioning_of(s: &str) -> ProvisioningStatus {
    match s {
        "ACTIVE" => ProvisioningStatus::Active,
        "PENDING_CREATE" => ProvisioningStatus::PendingCreate,
        "PENDING_UPDATE" => ProvisioningStatus::PendingUpdate,
        "PENDING_DELETE" => ProvisioningStatus::PendingDelete,
        "DELETED" => ProvisioningStatus::Deleted,
        "ERROR" => ProvisioningStatus::Error,
        other => {
            tracing::warn!(
                status = other,
                "unknown Octavia provisioning_status; reading it as ERROR"
            );
            ProvisioningStatus::Error
        }
    }
}

/// Octavia's `operating_status`; unknown values read as `OFFLINE`.
pub fn operating_of(s: &str) -> OperatingStatus {
    match s {
        "ONLINE" => OperatingStatus::Online,
        "OFFLINE" => OperatingStatus::Offline,
        "DEGRADED" => OperatingStatus::Degraded,
        "ERROR" => OperatingStatus::Error,
        "NO_MONITOR" => OperatingStatus::NoMonitor,
        "DRAINING" => OperatingStatus::Draining,
        other => {
            tracing::warn!(
                status = other,
                "unknown Octavia operating_status; reading it as OFFLINE"
            );
            OperatingStatus::Offline
        }
    }
}

#[derive(Debug, Deserialize)]
struct Ref {
    id: String,
}

fn first(refs: &Option<Vec<Ref>>) -> Option<String> {
    refs.as_ref().and_then(|r| r.first()).map(|r| r.id.clone())
}

#[derive(Debug, Deserialize)]
struct WireLb {
    id: String,
    #[serde(default)]
    name: Option<String>,
    provisioning_status: String,
    #[serde(default)]
    operating_status: Option<String>,
    #[serde(default)]
    vip_address: Option<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct WireListener {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    loadbalancers: Option<Vec<Ref>>,
    protocol_port: u16,
    provisioning_status: String,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct WirePool {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    loadbalancers: Option<Vec<Ref>>,
    #[serde(default)]
    listeners: Option<Vec<Ref>>,
    provisioning_status: String,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct WireMonitor {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    pools: Option<Vec<Ref>>,
    #[serde(rename = "type")]
    kind: String,
    provisioning_status: String,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct WireMember {
    id: String,
    #[serde(default)]
    name: Option<String>,
    address: String,
    protocol_port: u16,
    provisioning_status: String,
    #[serde(default)]
    operating_status: Option<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

fn lb_of(w: WireLb) -> LoadBalancer {
    LoadBalancer {
        id: w.id,
        name: w.name.unwrap_or_default(),
        provisioning_status: provisioning_of(&w.provisioning_status),
        operating_status: operating_of(w.operating_status.as_deref().unwrap_or("OFFLINE")),
        vip_address: w.vip_address.and_then(|a| a.parse().ok()),
        tags: w.tags.unwrap_or_default(),
    }
}

fn listener_of(w: WireListener) -> Listener {
    Listener {
        loadbalancer_id: first(&w.loadbalancers).unwrap_or_default(),
        id: w.id,
        name: w.name.unwrap_or_default(),
        protocol_port: w.protocol_port,
        provisioning_status: provisioning_of(&w.provisioning_status),
        tags: w.tags.unwrap_or_default(),
    }
}

fn pool_of(w: WirePool) -> Pool {
    Pool {
        loadbalancer_id: first(&w.loadbalancers).unwrap_or_default(),
        listener_id: first(&w.listeners),
        id: w.id,
        name: w.name.unwrap_or_default(),
        provisioning_status: provisioning_of(&w.provisioning_status),
        tags: w.tags.unwrap_or_default(),
    }
}

fn monitor_of(w: WireMonitor) -> HealthMonitor {
    HealthMonitor {
        pool_id: first(&w.pools).unwrap_or_default(),
        id: w.id,
        name: w.name.unwrap_or_default(),
        kind: w.kind,
        provisioning_status: provisioning_of(&w.provisioning_status),
        tags: w.tags.unwrap_or_default(),
    }
}

/// Octavia's member as flightdeck's; `None` if its address is not an IP address.
fn member_of(w: WireMember, pool_id: &str) -> Option<Member> {
    let address: IpAddr = w.address.parse().ok()?;
    Some(Member {
        id: w.id,
        name: w.name.unwrap_or_default(),
        pool_id: pool_id.to_string(),
        address,
        protocol_port: w.protocol_port,
        provisioning_status: provisioning_of(&w.provisioning_status),
        operating_status: operating_of(w.operating_status.as_deref().unwrap_or("OFFLINE")),
        tags: w.tags.unwrap_or_default(),
    })
}

/// The body of a health monitor create.
fn monitor_body(req: &HealthMonitorCreate) -> Value {
    let mut hm = json!({
        "name": req.name,
        "pool_id": req.pool_id,
        "type": req.kind,
        "delay": req.delay_s,
        "timeout": req.timeout_s,
        "max_retries": req.max_retries,
        "tags": req.tags,
    });
    if matches!(req.kind.as_str(), "HTTP" | "HTTPS")
        && let Some(o) = hm.as_object_mut()
    {
        o.insert("http_method".into(), json!("GET"));
        o.insert("url_path".into(), json!(HEALTH_PATH));
        o.insert("expected_codes".into(), json!("200"));
    }
    json!({ "healthmonitor": hm })
}

impl OpenStackCloud {
    async fn list_tagged<W: DeserializeOwned, T>(
        &self,
        op: &'static str,
        path: &str,
        key: &str,
        owner: &Ownership,
        map: impl Fn(W) -> T,
        tags: impl Fn(&T) -> &[String],
    ) -> Result<Vec<T>> {
        let call = Call::get(Service::Octavia, op, path).query("tags", owner.uid_tag());
        let wire: Vec<W> = self.session.list(&call, key).await?;
        Ok(wire
            .into_iter()
            .map(map)
            .filter(|x| owner.owns(tags(x)))
            .collect())
    }

    async fn create<W: DeserializeOwned>(
        &self,
        op: &'static str,
        path: String,
        key: &str,
        body: Value,
    ) -> Result<W> {
        let call = Call::new(Service::Octavia, op, Method::POST, path).json(body);
        self.session.object(&call, key).await
    }
}

impl LoadBalancing for OpenStackCloud {
    async fn list_load_balancers(&self, owner: &Ownership) -> Result<Vec<LoadBalancer>> {
        self.list_tagged(
            OP_LIST_LBS,
            "/lbaas/loadbalancers",
            "loadbalancers",
            owner,
            lb_of,
            |x| &x.tags,
        )
        .await
    }

    async fn list_listeners(&self, owner: &Ownership) -> Result<Vec<Listener>> {
        self.list_tagged(
            OP_LIST_LISTENERS,
            "/lbaas/listeners",
            "listeners",
            owner,
            listener_of,
            |x| &x.tags,
        )
        .await
    }

    async fn list_pools(&self, owner: &Ownership) -> Result<Vec<Pool>> {
        self.list_tagged(
            OP_LIST_POOLS,
            "/lbaas/pools",
            "pools",
            owner,
            pool_of,
            |x| &x.tags,
        )
        .await
    }

    async fn list_health_monitors(&self, owner: &Ownership) -> Result<Vec<HealthMonitor>> {
        self.list_tagged(
            OP_LIST_HMS,
            "/lbaas/healthmonitors",
            "healthmonitors",
            owner,
            monitor_of,
            |x| &x.tags,
        )
        .await
    }

    async fn list_members(&self, pool_id: &str) -> Result<Vec<Member>> {
        let path = format!("/lbaas/pools/{}/members", seg(pool_id));
        let call = Call::get(Service::Octavia, OP_LIST_MEMBERS, path);
        let wire: Vec<WireMember> = self.session.list(&call, "members").await?;
        Ok(wire
            .into_iter()
            .filter_map(|w| {
                let id = w.id.clone();
                let m = member_of(w, pool_id);
                if m.is_none() {
                    tracing::warn!(member = %id, "member with an unreadable address; left out");
                }
                m
            })
            .collect())
    }

    async fn create_load_balancer(&self, req: &LoadBalancerCreate) -> Result<LoadBalancer> {
        let subnet = self.resolve(Named::Subnet, &req.vip_subnet).await?;
        let body = json!({ "loadbalancer": {
            "name": req.name, "vip_subnet_id": subnet, "tags": req.tags,
        }});
        let created = self
            .create(
                OP_CREATE_LB,
                "/lbaas/loadbalancers".into(),
                "loadbalancer",
                body,
            )
            .await;
        if created.is_err() {
            self.forget(Named::Subnet, &req.vip_subnet);
        }
        created.map(lb_of)
    }

    async fn create_listener(&self, req: &ListenerCreate) -> Result<Listener> {
        let body = json!({ "listener": {
            "name": req.name, "loadbalancer_id": req.loadbalancer_id,
            "protocol": "TCP", "protocol_port": req.protocol_port, "tags": req.tags,
        }});
        self.create(
            OP_CREATE_LISTENER,
            "/lbaas/listeners".into(),
            "listener",
            body,
        )
        .await
        .map(listener_of)
    }

    async fn create_pool(&self, req: &PoolCreate) -> Result<Pool> {
        let body = json!({ "pool": {
            "name": req.name, "listener_id": req.listener_id,
            "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN", "tags": req.tags,
        }});
        self.create(OP_CREATE_POOL, "/lbaas/pools".into(), "pool", body)
            .await
            .map(pool_of)
    }

    async fn create_health_monitor(&self, req: &HealthMonitorCreate) -> Result<HealthMonitor> {
        self.create(
            OP_CREATE_HM,
            "/lbaas/healthmonitors".into(),
            "healthmonitor",
            monitor_body(req),
        )
        .await
        .map(monitor_of)
    }

    async fn create_member(&self, req: &MemberCreate) -> Result<Member> {
        let body = json!({ "member": {
            "name": req.name, "address": req.address.to_string(),
            "protocol_port": req.protocol_port, "tags": req.tags,
        }});
        let path = format!("/lbaas/pools/{}/members", seg(&req.pool_id));
        let w: WireMember = self.create(OP_CREATE_MEMBER, path, "member", body).await?;
        let address = w.address.clone();
        member_of(w, &req.pool_id).ok_or_else(|| {
            decode_error(
                Service::Octavia,
                OP_CREATE_MEMBER,
                201,
                &format!("member address {address:?} is not an IP address"),
            )
        })
    }

    async fn add_members(&self, pool_id: &str, members: &[MemberCreate]) -> Result<()> {
        if let Some(other) = members.iter().find(|m| m.pool_id != pool_id) {
            return Err(not_sent(
                Service::Octavia,
                OP_ADD_MEMBERS,
                format!(
                    "member {} is of pool {}, not of pool {pool_id}: one batch adds to one pool",
                    other.name, other.pool_id
                ),
            ));
        }
        let body = json!({ "members": members.iter().map(|m| json!({
            "name": m.name, "address": m.address.to_string(),
            "protocol_port": m.protocol_port, "tags": m.tags,
        })).collect::<Vec<_>>() });
        let path = format!("/lbaas/pools/{}/members", seg(pool_id));
        // Members left out of the batch stay: the batch only adds (Octavia API 2.11).
        let call = Call::new(Service::Octavia, OP_ADD_MEMBERS, Method::PUT, path)
            .query("additive_only", "true")
            .json(body);
        self.session.send(&call).await.map(drop)
    }

    async fn delete_member(&self, pool_id: &str, member_id: &str) -> Result<()> {
        let path = format!("/lbaas/pools/{}/members/{}", seg(pool_id), seg(member_id));
        let call = Call::new(Service::Octavia, OP_DELETE_MEMBER, Method::DELETE, path);
        self.session.send(&call).await.map(drop)
    }

    async fn delete_load_balancer_cascade(&self, id: &str) -> Result<()> {
        let path = format!("/lbaas/loadbalancers/{}", seg(id));
        let call = Call::new(Service::Octavia, OP_DELETE_LB, Method::DELETE, path)
            .query("cascade", "true");
        self.session.send(&call).await.map(drop)
    }
}

/// OpenStack has no VM templates: the default methods answer so.
impl flightdeck_cloud::Templates for OpenStackCloud {}
/// OpenStack has no KubeVirt: the default methods answer so.
impl flightdeck_cloud::VirtualMachines for OpenStackCloud {}
/// Draining goes through a workload cluster's API, which this provider does not reach.
impl flightdeck_cloud::GuestDrain for OpenStackCloud {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_and_unknown_ones_are_cautious() {
        assert_eq!(
            provisioning_of("PENDING_UPDATE"),
            ProvisioningStatus::PendingUpdate
        );
        assert_eq!(provisioning_of("SOMETHING_NEW"), ProvisioningStatus::Error);
        assert_eq!(operating_of("NO_MONITOR"), OperatingStatus::NoMonitor);
        assert_eq!(operating_of("SOMETHING_NEW"), OperatingStatus::Offline);
    }

    #[test]
    fn octavia_bodies_read_into_the_model() {
        let pool: WirePool = serde_json::from_value(json!({
            "id": "p1", "name": "api", "provisioning_status": "ACTIVE", "operating_status": "ONLINE",
            "loadbalancers": [{"id": "lb1"}], "listeners": [{"id": "l1"}], "tags": ["t"]
        }))
        .expect("pool");
        let pool = pool_of(pool);
        assert_eq!(
            (pool.loadbalancer_id.as_str(), pool.listener_id.as_deref()),
            ("lb1", Some("l1"))
        );
        let m: WireMember = serde_json::from_value(json!({
            "id": "m1", "name": "cp-1", "address": "10.0.0.7", "protocol_port": 6443,
            "provisioning_status": "PENDING_CREATE", "operating_status": "NO_MONITOR", "tags": []
        }))
        .expect("member");
        let m = member_of(m, "p1").expect("member");
        assert_eq!(m.pool_id, "p1");
        assert_eq!(m.operating_status, OperatingStatus::NoMonitor);
        let lb: WireLb = serde_json::from_value(json!({
            "id": "lb1", "name": "api", "provisioning_status": "ACTIVE",
            "operating_status": "OFFLINE", "vip_address": "198.51.100.1", "tags": null
        }))
        .expect("lb");
        let lb = lb_of(lb);
        assert_eq!(lb.vip_address, Some("198.51.100.1".parse().expect("ip")));
        assert!(lb.tags.is_empty());
    }

    #[test]
    fn http_monitors_check_healthz() {
        let req = HealthMonitorCreate {
            name: "hm".into(),
            pool_id: "p1".into(),
            kind: "HTTPS".into(),
            delay_s: 5,
            timeout_s: 3,
            max_retries: 3,
            tags: vec![],
        };
        let b = monitor_body(&req);
        assert_eq!(b["healthmonitor"]["url_path"], "/healthz");
        assert_eq!(b["healthmonitor"]["type"], "HTTPS");
        let tcp = monitor_body(&HealthMonitorCreate {
            kind: "TCP".into(),
            ..req
        });
        assert!(tcp["healthmonitor"].get("url_path").is_none());
    }
}
