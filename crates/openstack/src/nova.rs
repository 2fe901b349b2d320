//! Nova (compute API v2.1, microversion [`crate::client::NOVA_MICROVERSION`]): servers.
//!
//! - `list_servers`: `GET /servers/detail?tags=<uid tag>`, every page, and only servers
//!   whose tags carry the owner's UID tag (checked again here, so a Nova that ignored
//!   the filter could not hand flightdeck someone else's servers).
//! - `create_server`: flavor, image and network names resolved to ids (cached), then
//!   `POST /servers` with the tags in the body (2.52), then `GET /servers/{id}`.
//! - `delete_server`: `DELETE /servers/{id}`.
//! - `add_security_group`: `POST /servers/{id}/action {"addSecurityGroup": ...}`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{
    CloudError, Compute, ErrorClass, Ownership, Server, ServerCreate, ServerStatus, Timestamp,
};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::client::{Call, seg};
use crate::errors::Service;
use crate::provider::{Named, OpenStackCloud};
use crate::timefmt::parse_timestamp;

const OP_LIST: &str = "GET /servers/detail";
const OP_CREATE: &str = "POST /servers";
const OP_SHOW: &str = "GET /servers/{server_id}";
const OP_DELETE: &str = "DELETE /servers/{server_id}";
const OP_ACTION: &str = "POST /servers/{server_id}/action";
/// Nova's limit on `user_data`, base64 included.
const NOVA_USER_DATA_MAX: usize = 65_535;

/// A server as Nova's API shows it (the fields flightdeck reads).
#[derive(Debug, Deserialize)]
pub(crate) struct WireServer {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    status: String,
    #[serde(rename = "OS-EXT-STS:task_state", default)]
    task_state: Option<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
    #[serde(default)]
    security_groups: Option<Vec<NameOnly>>,
    #[serde(default)]
    addresses: Option<BTreeMap<String, Vec<WireAddress>>>,
    /// `{"id": ..}`, or `""` for a server booted from a volume.
    #[serde(default)]
    image: Value,
    /// `{"original_name": ..}` from 2.47 on, `{"id": ..}` before.
    #[serde(default)]
    flavor: Value,
    #[serde(default)]
    fault: Option<WireFault>,
    #[serde(default)]
    created: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NameOnly {
    name: String,
}

#[derive(Debug, Deserialize)]
struct WireAddress {
    addr: String,
    #[serde(default)]
    version: Option<u8>,
    #[serde(rename = "OS-EXT-IPS:type", default)]
    kind: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireFault {
    #[serde(default)]
    message: Option<String>,
}

fn status_of(s: &str) -> ServerStatus {
    match s {
        "BUILD" => ServerStatus::Build,
        "ACTIVE" => ServerStatus::Active,
        "ERROR" => ServerStatus::Error,
        other => ServerStatus::Other(other.to_string()),
    }
}

/// The first fixed IPv4 address of any network (networks in name order); failing
/// that, the first IPv4 address at all.
fn first_fixed_v4(addresses: &BTreeMap<String, Vec<WireAddress>>) -> Option<IpAddr> {
    let v4 = |a: &&WireAddress| {
        a.version.is_none_or(|v| v == 4) && a.addr.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv4())
    };
    let all = || addresses.values().flatten();
    all()
        .filter(v4)
        .find(|a| a.kind.as_deref().is_none_or(|k| k == "fixed"))
        .or_else(|| all().find(v4))
        .and_then(|a| a.addr.parse().ok())
}

fn id_of(v: &Value) -> Option<&str> {
    v.get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Now, as flightdeck's timestamps count (read at this I/O edge only).
pub(crate) fn now() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    Timestamp(u64::try_from(ms).unwrap_or(u64::MAX))
}

impl OpenStackCloud {
    /// Maps Nova's server into flightdeck's, with image and flavor as names where
    /// they are known.
    /// Every server tagged `tag` (`flightdeck-cluster=NAME`, say), whatever its owner:
    /// the test bed's kubelets follow a cluster by name.
    pub async fn list_servers_tagged(&self, tag: &str) -> Result<Vec<Server>> {
        let call = Call::get(Service::Nova, OP_LIST, "/servers/detail").query("tags", tag);
        let wire: Vec<WireServer> = self.session.list(&call, "servers").await?;
        let mut servers = Vec::with_capacity(wire.len());
        for w in wire {
            servers.push(self.to_server(w).await);
        }
        Ok(servers)
    }

    pub(crate) async fn to_server(&self, w: WireServer) -> Server {
        let image = match id_of(&w.image) {
            Some(id) => self.image_name(id).await,
            None => String::new(),
        };
        let flavor = match w.flavor.get("original_name").and_then(Value::as_str) {
            Some(n) => n.to_string(),
            None => id_of(&w.flavor)
                .map(|id| {
                    self.cached_name(Named::Flavor, id)
                        .unwrap_or_else(|| id.to_string())
                })
                .unwrap_or_default(),
        };
        let mut security_groups: Vec<String> = Vec::new();
        for g in w.security_groups.unwrap_or_default() {
            // Nova lists a group once per port.
            if !security_groups.contains(&g.name) {
                security_groups.push(g.name);
            }
        }
        let created_at = w
            .created
            .as_deref()
            .and_then(parse_timestamp)
            .unwrap_or_else(|| {
                tracing::warn!(server = %w.id, created = ?w.created, "unreadable created time");
                Timestamp::default()
            });
        Server {
            address: w.addresses.as_ref().and_then(first_fixed_v4),
            id: w.id,
            name: w.name,
            status: status_of(&w.status),
            task_state: w.task_state.filter(|s| !s.is_empty()),
            tags: w.tags.unwrap_or_default(),
            security_groups,
            image,
            flavor,
            fault: w.fault.and_then(|f| f.message).filter(|m| !m.is_empty()),
            created_at,
        }
    }

    async fn create_server_request(&self, req: &ServerCreate) -> Result<String> {
        let flavor = self.resolve(Named::Flavor, &req.flavor).await?;
        let image = self.resolve(Named::Image, &req.image).await?;
        let network = self.resolve(Named::Network, &req.network).await?;
        let groups: Vec<Value> = req
            .security_groups
            .iter()
            .map(|g| json!({ "name": g }))
            .collect();
        let mut body = json!({
            "server": {
                "name": req.name,
                "flavorRef": flavor,
                "imageRef": image,
                "networks": [{ "uuid": network }],
                "security_groups": groups,
                "tags": req.tags,
            }
        });
        if let Some(data) = &req.user_data {
            use base64::Engine;
            let encoded = base64::engine::general_purpose::STANDARD.encode(data);
            if encoded.len() > NOVA_USER_DATA_MAX {
                return Err(CloudError::new(
                    ErrorClass::Permanent,
                    Service::Nova.name(),
                    OP_CREATE,
                    None,
                    format!(
                        "server {}: user data is {} bytes after base64; Nova takes at most {NOVA_USER_DATA_MAX}",
                        req.name,
                        encoded.len()
                    ),
                ));
            }
            body["server"]["user_data"] = json!(encoded);
        }
        let call = Call::new(Service::Nova, OP_CREATE, Method::POST, "/servers").json(body);
        #[derive(Deserialize)]
        struct Created {
            id: String,
        }
        match self.session.object::<Created>(&call, "server").await {
            Ok(c) => Ok(c.id),
            Err(e) => {
                if matches!(e.class, ErrorClass::Permanent | ErrorClass::NotFound) {
                    // A cached id may be what Nova refused (an image re-uploaded).
                    self.forget(Named::Flavor, &req.flavor);
                    self.forget(Named::Image, &req.image);
                    self.forget(Named::Network, &req.network);
                }
                Err(e)
            }
        }
    }
}

impl Compute for OpenStackCloud {
    async fn list_servers(&self, owner: &Ownership) -> Result<Vec<Server>> {
        let call =
            Call::get(Service::Nova, OP_LIST, "/servers/detail").query("tags", owner.uid_tag());
        let wire: Vec<WireServer> = self.session.list(&call, "servers").await?;
        let mut servers = Vec::with_capacity(wire.len());
        for w in wire {
            if owner.owns(w.tags.as_deref().unwrap_or_default()) {
                servers.push(self.to_server(w).await);
            }
        }
        Ok(servers)
    }

    async fn create_server(&self, req: &ServerCreate) -> Result<Server> {
        let id = self.create_server_request(req).await?;
        let call = Call::get(Service::Nova, OP_SHOW, format!("/servers/{}", seg(&id)));
        match self.session.object::<WireServer>(&call, "server").await {
            Ok(w) => Ok(self.to_server(w).await),
            Err(e) => {
                // The server exists: report it as Nova accepted it rather than fail a
                // create that succeeded. The next list shows it as it is.
                tracing::warn!(server = %id, error = %e, "created server could not be read back");
                Ok(Server {
                    id,
                    name: req.name.clone(),
                    status: ServerStatus::Build,
                    task_state: Some("scheduling".into()),
                    tags: req.tags.clone(),
                    security_groups: req.security_groups.clone(),
                    address: None,
                    image: req.image.clone(),
                    flavor: req.flavor.clone(),
                    fault: None,
                    created_at: now(),
                })
            }
        }
    }

    async fn delete_server(&self, id: &str) -> Result<()> {
        let call = Call::new(
            Service::Nova,
            OP_DELETE,
            Method::DELETE,
            format!("/servers/{}", seg(id)),
        );
        self.session.send(&call).await.map(drop)
    }

    async fn server_gone(&self, id: &str) -> Result<bool> {
        let call = Call::get(Service::Nova, OP_SHOW, format!("/servers/{}", seg(id)));
        match self.session.object::<WireServer>(&call, "server").await {
            // A server being deleted is shown until it is gone (as DELETED or
            // SOFT_DELETED by some deployments): it is not live.
            Ok(w) => Ok(matches!(w.status.as_str(), "DELETED" | "SOFT_DELETED")),
            Err(e) if e.class == ErrorClass::NotFound => Ok(true),
            Err(e) => Err(e),
        }
    }

    async fn add_security_group(&self, server_id: &str, group: &str) -> Result<()> {
        let call = Call::new(
            Service::Nova,
            OP_ACTION,
            Method::POST,
            format!("/servers/{}/action", seg(server_id)),
        )
        .json(json!({ "addSecurityGroup": { "name": group } }));
        self.session.send(&call).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nova_server_body_reads_into_the_wire_type() {
        let w: WireServer = serde_json::from_value(json!({
            "id": "s1", "name": "demo-cp-1", "status": "ACTIVE",
            "OS-EXT-STS:task_state": null,
            "tags": ["flightdeck-uid=u1"],
            "security_groups": [{"name": "sg"}, {"name": "sg"}],
            "addresses": {
                "b-net": [{"addr": "fd00::5", "version": 6, "OS-EXT-IPS:type": "fixed"}],
                "a-net": [
                    {"addr": "203.0.113.9", "version": 4, "OS-EXT-IPS:type": "floating"},
                    {"addr": "10.0.0.7", "version": 4, "OS-EXT-IPS:type": "fixed"}
                ]
            },
            "image": {"id": "img-1", "links": []},
            "flavor": {"original_name": "m1.small", "vcpus": 1},
            "fault": {"code": 500, "message": "No valid host was found."},
            "created": "2026-01-01T00:00:00Z"
        }))
        .expect("server");
        assert_eq!(
            w.addresses.as_ref().and_then(first_fixed_v4),
            Some("10.0.0.7".parse().expect("ip"))
        );
        assert_eq!(id_of(&w.image), Some("img-1"));
        assert_eq!(status_of(&w.status), ServerStatus::Active);
        assert_eq!(status_of("SHUTOFF"), ServerStatus::Other("SHUTOFF".into()));
        let volume_booted: WireServer =
            serde_json::from_value(json!({"id": "s2", "image": "", "flavor": {"id": "f1"}}))
                .expect("server");
        assert_eq!(id_of(&volume_booted.image), None);
        assert_eq!(id_of(&volume_booted.flavor), Some("f1"));
    }
}
