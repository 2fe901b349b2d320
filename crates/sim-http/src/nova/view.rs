//! How Nova shows a server (the detail view and the brief one), written straight from
//! the simulator's `Server` by a serializer: a list of servers is the largest answer a
//! reconcile reads, and building a JSON tree per server first cost a tenth of a run on
//! the wire.
//!
//! A field that appears only from some microversion on is an `Option` left out when
//! `None`; `Some(Null)` writes `null`.

use std::borrow::Cow;

use flightdeck_cloud::{Server, ServerStatus};
use serde::Serialize;

use super::flavors::flavor_by_name;
use super::microversion::Mv;
use super::status_str;
use crate::App;
use crate::glance::image_id;
use crate::wire::{TimeStyle, iso, stable_hex};

// `addresses` names the simulator's one network.
const _: () = assert!(matches!(crate::NETWORK_NAME.as_bytes(), b"private"));

/// What every server of one answer shares: the user's id, the host id, and the app
/// (the project's id, the base URL of links).
pub(super) struct Shared<'a> {
    app: &'a App,
    mv: Mv,
    user_id: String,
    host_id: String,
}

impl<'a> Shared<'a> {
    pub(super) fn new(app: &'a App, mv: Mv) -> Self {
        let o = &app.options;
        Shared {
            app,
            mv,
            user_id: stable_hex(&format!("user/{}", o.user)),
            host_id: stable_hex(&format!("host/{}", o.project)),
        }
    }

    /// The server as Nova's detail view shows it.
    pub(super) fn detail(&'a self, s: &'a Server) -> Detail<'a> {
        detail(self, s)
    }

    /// The server as Nova's brief list shows it: id, name, links.
    pub(super) fn brief(&self, s: &'a Server) -> Brief<'a> {
        Brief {
            id: &s.id,
            name: &s.name,
            links: links(self.app, "servers", &s.id),
        }
    }
}

/// JSON `null`.
#[derive(Serialize)]
pub(super) struct Null;

/// JSON `{}`.
#[derive(Serialize)]
pub(super) struct Empty {}

/// One of a resource's `links`, or a list's next page.
#[derive(Serialize)]
pub(super) struct Link {
    pub(super) rel: &'static str,
    pub(super) href: String,
}

/// A resource's `self` and `bookmark` links.
pub(super) fn links(app: &App, kind: &str, id: &str) -> [Link; 2] {
    [
        Link {
            rel: "self",
            href: format!("{}/compute/v2.1/{kind}/{id}", app.base),
        },
        Link {
            rel: "bookmark",
            href: format!("{}/compute/{kind}/{id}", app.base),
        },
    ]
}

#[derive(Serialize)]
pub(super) struct Brief<'a> {
    id: &'a str,
    name: &'a str,
    links: [Link; 2],
}

#[derive(Serialize)]
pub(super) struct Image {
    id: String,
    links: [Link; 1],
}

/// The server's flavor: embedded from 2.47, a reference before.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum Flavor<'a> {
    Embedded {
        vcpus: u32,
        ram: u32,
        disk: u32,
        ephemeral: u8,
        swap: u8,
        original_name: &'a str,
        extra_specs: Empty,
    },
    Reference {
        id: &'a str,
        links: [Link; 1],
    },
}

#[derive(Serialize)]
pub(super) struct Address {
    version: u8,
    addr: String,
    #[serde(rename = "OS-EXT-IPS:type")]
    kind: &'static str,
    #[serde(rename = "OS-EXT-IPS-MAC:mac_addr")]
    mac: String,
}

/// `addresses`: the one network's fixed address, or nothing while none is assigned.
#[derive(Serialize)]
pub(super) struct Addresses {
    #[serde(rename = "private", skip_serializing_if = "Option::is_none")]
    private: Option<[Address; 1]>,
}

#[derive(Serialize)]
pub(super) struct Named<'a> {
    name: &'a str,
}

#[derive(Serialize)]
pub(super) struct Fault<'a> {
    code: u16,
    created: String,
    message: &'a str,
}

#[derive(Serialize)]
pub(super) struct Detail<'a> {
    id: &'a str,
    name: &'a str,
    status: &'a str,
    tenant_id: &'a str,
    user_id: &'a str,
    metadata: Empty,
    #[serde(rename = "hostId")]
    host_id: &'a str,
    image: Image,
    flavor: Flavor<'a>,
    created: String,
    updated: String,
    addresses: Addresses,
    #[serde(rename = "accessIPv4")]
    access_ipv4: &'static str,
    #[serde(rename = "accessIPv6")]
    access_ipv6: &'static str,
    links: [Link; 2],
    #[serde(rename = "OS-DCF:diskConfig")]
    disk_config: &'static str,
    progress: u8,
    #[serde(rename = "OS-EXT-AZ:availability_zone")]
    availability_zone: &'static str,
    config_drive: &'static str,
    key_name: Null,
    #[serde(rename = "OS-SRV-USG:launched_at")]
    launched_at: Option<String>,
    #[serde(rename = "OS-SRV-USG:terminated_at")]
    terminated_at: Null,
    #[serde(rename = "OS-EXT-STS:task_state")]
    task_state: Option<&'a str>,
    #[serde(rename = "OS-EXT-STS:vm_state")]
    vm_state: Cow<'a, str>,
    #[serde(rename = "OS-EXT-STS:power_state")]
    power_state: u8,
    #[serde(rename = "os-extended-volumes:volumes_attached")]
    volumes_attached: [Null; 0],
    #[serde(
        rename = "OS-EXT-SRV-ATTR:user_data",
        skip_serializing_if = "Option::is_none"
    )]
    user_data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    security_groups: Option<Vec<Named<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fault: Option<Fault<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    locked: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<Null>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trusted_image_certificates: Option<Null>,
    #[serde(skip_serializing_if = "Option::is_none")]
    locked_reason: Option<Null>,
}

fn flavor<'a>(app: &App, name: &'a str, mv: Mv) -> Flavor<'a> {
    let f = flavor_by_name(name);
    if mv.at_least(47) {
        Flavor::Embedded {
            vcpus: f.map_or(1, |f| f.vcpus),
            ram: f.map_or(512, |f| f.ram),
            disk: f.map_or(1, |f| f.disk),
            ephemeral: 0,
            swap: 0,
            original_name: name,
            extra_specs: Empty {},
        }
    } else {
        let id = f.map_or(name, |f| f.id);
        Flavor::Reference {
            id,
            links: [Link {
                rel: "bookmark",
                href: format!("{}/compute/flavors/{id}", app.base),
            }],
        }
    }
}

fn addresses(s: &Server) -> Addresses {
    Addresses {
        private: s.address.map(|ip| {
            [Address {
                version: if ip.is_ipv4() { 4 } else { 6 },
                addr: ip.to_string(),
                kind: "fixed",
                mac: super::mac_of(ip),
            }]
        }),
    }
}

fn detail<'a>(sh: &'a Shared<'a>, s: &'a Server) -> Detail<'a> {
    let (app, mv) = (sh.app, sh.mv);
    let created = iso(s.created_at, TimeStyle::Zulu);
    let building = s.status == ServerStatus::Build;
    let vm_state = match &s.status {
        ServerStatus::Build => Cow::Borrowed("building"),
        ServerStatus::Active => Cow::Borrowed("active"),
        ServerStatus::Error => Cow::Borrowed("error"),
        ServerStatus::Other(x) => Cow::Owned(x.to_lowercase()),
    };
    let image = image_id(&s.image);
    let image_href = format!("{}/compute/images/{image}", app.base);
    let user_data = if mv.at_least(3) {
        use base64::Engine;
        app.cloud
            .server_user_data(&s.id)
            .map(|data| base64::engine::general_purpose::STANDARD.encode(data))
    } else {
        None
    };
    let fault = match (&s.status, &s.fault) {
        (ServerStatus::Error, Some(message)) => Some((created.clone(), message.as_str())),
        _ => None,
    };
    Detail {
        id: &s.id,
        name: &s.name,
        status: status_str(s),
        tenant_id: &app.project_id,
        user_id: &sh.user_id,
        metadata: Empty {},
        host_id: if building { "" } else { &sh.host_id },
        image: Image {
            id: image,
            links: [Link {
                rel: "bookmark",
                href: image_href,
            }],
        },
        flavor: flavor(app, &s.flavor, mv),
        launched_at: (!building).then(|| created.trim_end_matches('Z').to_string()),
        updated: created.clone(),
        addresses: addresses(s),
        access_ipv4: "",
        access_ipv6: "",
        links: links(app, "servers", &s.id),
        disk_config: "MANUAL",
        progress: 0,
        availability_zone: if building { "" } else { "nova" },
        config_drive: "",
        key_name: Null,
        terminated_at: Null,
        task_state: s.task_state.as_deref(),
        vm_state,
        power_state: u8::from(s.status == ServerStatus::Active),
        volumes_attached: [],
        user_data,
        security_groups: (!s.security_groups.is_empty()).then(|| {
            s.security_groups
                .iter()
                .map(|g| Named { name: g })
                .collect()
        }),
        fault: fault.map(|(created, message)| Fault {
            code: 500,
            created,
            message,
        }),
        locked: mv.at_least(9).then_some(false),
        description: mv.at_least(19).then_some(Null),
        tags: mv.at_least(26).then_some(s.tags.as_slice()),
        trusted_image_certificates: mv.at_least(63).then_some(Null),
        locked_reason: mv.at_least(73).then_some(Null),
        created,
    }
}
