//! [`OpenStackCloud`]: the real provider. It implements `Compute` (Nova, in
//! [`crate::nova`]), `Network` (Neutron, in [`crate::neutron`]) and `LoadBalancing`
//! (Octavia, in [`crate::octavia`]) over one [`Session`]. It does not implement
//! `GuestCluster`: the workload cluster is reached through its own interface.
//!
//! The names a spec uses (flavor, image, network, subnet) are resolved to ids here and
//! cached for the life of the provider. A create that fails because of what a cached
//! id points at drops that cache entry, so a re-uploaded image is found again.

use std::collections::HashMap;
use std::sync::Mutex;

use flightdeck_cloud::{CloudError, ErrorClass};
use serde::Deserialize;

use crate::client::{Call, Session, SessionOptions, is_uuid, seg};
use crate::clouds::{CloudEntry, ConfigError};
use crate::errors::Service;

/// A kind of object a spec names and the API wants by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Named {
    Flavor,
    Image,
    Network,
    Subnet,
}

impl Named {
    fn noun(self) -> &'static str {
        match self {
            Named::Flavor => "flavor",
            Named::Image => "image",
            Named::Network => "network",
            Named::Subnet => "subnet",
        }
    }
}

/// Name → id lookups done so far, and id → name for images and flavors (so a server's
/// image reads as the name the spec used).
#[derive(Debug, Default)]
struct Lookups {
    ids: HashMap<(Named, String), String>,
    names: HashMap<(Named, String), String>,
}

/// The real OpenStack provider for one `clouds.yaml` entry.
#[derive(Debug)]
pub struct OpenStackCloud {
    pub(crate) session: Session,
    lookups: Mutex<Lookups>,
    /// Whether Neutron takes `tags` in a create body (the `tag-creation` extension),
    /// asked once.
    pub(crate) tag_creation: tokio::sync::OnceCell<bool>,
}

#[derive(Deserialize)]
pub(crate) struct IdName {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
}

impl OpenStackCloud {
    /// Authenticates as `entry` and checks that the catalog has the compute, network
    /// and load-balancer endpoints flightdeck needs (image is only needed to resolve
    /// image names, and is checked when used). Wrong credentials: a Permanent
    /// `keystone` error naming the entry and carrying Keystone's message.
    pub async fn connect(entry: &CloudEntry, options: SessionOptions) -> Result<Self, CloudError> {
        let required = [Service::Nova, Service::Neutron, Service::Octavia];
        let session = Session::connect(entry, &options, &required).await?;
        Ok(OpenStackCloud {
            session,
            lookups: Mutex::new(Lookups::default()),
            tag_creation: tokio::sync::OnceCell::new(),
        })
    }

    /// Loads the entry `name` (or `$OS_CLOUD`) from the first `clouds.yaml` on the
    /// standard search path and connects to it. A configuration problem is a
    /// Permanent error whose message is the [`ConfigError`]'s.
    pub async fn connect_named(
        name: Option<&str>,
        options: SessionOptions,
    ) -> Result<Self, CloudError> {
        let entry = CloudEntry::load(name).map_err(config_error)?;
        OpenStackCloud::connect(&entry, options).await
    }

    /// The session, for calls the traits do not cover.
    pub fn session(&self) -> &Session {
        &self.session
    }

    fn lookups(&self) -> std::sync::MutexGuard<'_, Lookups> {
        self.lookups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn remember(&self, kind: Named, name: &str, id: &str) {
        let mut l = self.lookups();
        l.ids.insert((kind, name.to_string()), id.to_string());
        l.names.insert((kind, id.to_string()), name.to_string());
    }

    /// Drops what is cached for `name` of `kind`.
    pub(crate) fn forget(&self, kind: Named, name: &str) {
        let mut l = self.lookups();
        if let Some(id) = l.ids.remove(&(kind, name.to_string())) {
            l.names.remove(&(kind, id));
        }
    }

    /// The name a cached id was resolved from.
    pub(crate) fn cached_name(&self, kind: Named, id: &str) -> Option<String> {
        self.lookups().names.get(&(kind, id.to_string())).cloned()
    }

    /// The id of the `kind` called `name_or_id`: by name first, then as an id.
    /// Not found, or several by that name: Permanent.
    pub(crate) async fn resolve(
        &self,
        kind: Named,
        name_or_id: &str,
    ) -> Result<String, CloudError> {
        if let Some(id) = self.lookups().ids.get(&(kind, name_or_id.to_string())) {
            return Ok(id.clone());
        }
        let (service, op, found) = match kind {
            Named::Flavor => (
                Service::Nova,
                "GET /flavors",
                self.find_flavor(name_or_id).await?,
            ),
            Named::Image => (
                Service::Glance,
                "GET /v2/images",
                self.find_image(name_or_id).await?,
            ),
            Named::Network => (
                Service::Neutron,
                "GET /v2.0/networks",
                self.find_neutron("/networks", "GET /v2.0/networks", "networks", name_or_id)
                    .await?,
            ),
            Named::Subnet => (
                Service::Neutron,
                "GET /v2.0/subnets",
                self.find_neutron("/subnets", "GET /v2.0/subnets", "subnets", name_or_id)
                    .await?,
            ),
        };
        match found.as_slice() {
            [one] => {
                self.remember(kind, name_or_id, one);
                Ok(one.clone())
            }
            [] => Err(CloudError::new(
                ErrorClass::Permanent,
                service.name(),
                op,
                None,
                format!("{} {name_or_id:?} not found", kind.noun()),
            )),
            many => Err(CloudError::new(
                ErrorClass::Permanent,
                service.name(),
                op,
                None,
                format!(
                    "{} {}s are named {name_or_id:?}; use an id",
                    many.len(),
                    kind.noun()
                ),
            )),
        }
    }

    /// Nova cannot filter flavors by name: the whole list is read (and cached).
    async fn find_flavor(&self, name_or_id: &str) -> Result<Vec<String>, CloudError> {
        let call = Call::get(Service::Nova, "GET /flavors", "/flavors");
        let all: Vec<IdName> = self.session.list(&call, "flavors").await?;
        let mut by_name = Vec::new();
        let mut by_id = Vec::new();
        for f in &all {
            if let Some(n) = &f.name {
                self.lookups()
                    .names
                    .insert((Named::Flavor, f.id.clone()), n.clone());
                if n == name_or_id {
                    by_name.push(f.id.clone());
                }
            }
            if f.id == name_or_id {
                by_id.push(f.id.clone());
            }
        }
        Ok(if by_name.is_empty() { by_id } else { by_name })
    }

    async fn find_image(&self, name_or_id: &str) -> Result<Vec<String>, CloudError> {
        let call =
            Call::get(Service::Glance, "GET /v2/images", "/images").query("name", name_or_id);
        let named: Vec<IdName> = self.session.list(&call, "images").await?;
        if !named.is_empty() {
            // Several images of one name: only active ones can boot.
            let active: Vec<String> = named
                .iter()
                .filter(|i| i.status.as_deref() == Some("active"))
                .map(|i| i.id.clone())
                .collect();
            return Ok(if active.is_empty() {
                named.into_iter().map(|i| i.id).collect()
            } else {
                active
            });
        }
        if !is_uuid(name_or_id) {
            return Ok(Vec::new());
        }
        let call = Call::get(
            Service::Glance,
            "GET /v2/images/{image_id}",
            format!("/images/{}", seg(name_or_id)),
        );
        match self.session.send(&call).await {
            Ok(reply) => Ok(serde_json::from_value::<IdName>(reply.body)
                .map(|i| vec![i.id])
                .unwrap_or_default()),
            Err(e) if e.class == ErrorClass::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    async fn find_neutron(
        &self,
        path: &str,
        op: &'static str,
        key: &str,
        name_or_id: &str,
    ) -> Result<Vec<String>, CloudError> {
        for field in ["name", "id"] {
            if field == "id" && !is_uuid(name_or_id) {
                break;
            }
            let call = Call::get(Service::Neutron, op, path).query(field, name_or_id);
            let found: Vec<IdName> = self.session.list(&call, key).await?;
            if !found.is_empty() {
                return Ok(found.into_iter().map(|x| x.id).collect());
            }
        }
        Ok(Vec::new())
    }

    /// The name of image `id`, as the spec would name it: from the cache, else from
    /// Glance (and cached). Falls back to the id when Glance cannot say.
    pub(crate) async fn image_name(&self, id: &str) -> String {
        if id.is_empty() {
            return String::new();
        }
        if let Some(n) = self.cached_name(Named::Image, id) {
            return n;
        }
        let call = Call::get(
            Service::Glance,
            "GET /v2/images/{image_id}",
            format!("/images/{}", seg(id)),
        );
        match self.session.send(&call).await {
            Ok(reply) => match serde_json::from_value::<IdName>(reply.body) {
                Ok(IdName { name: Some(n), .. }) => {
                    self.lookups()
                        .names
                        .insert((Named::Image, id.to_string()), n.clone());
                    n
                }
                _ => id.to_string(),
            },
            Err(e) => {
                tracing::debug!(image = id, error = %e, "image name not known; keeping its id");
                id.to_string()
            }
        }
    }
}

/// A [`ConfigError`] as the engine's error type: Permanent, message verbatim.
pub fn config_error(e: ConfigError) -> CloudError {
    CloudError::new(
        ErrorClass::Permanent,
        Service::Keystone.name(),
        "load clouds.yaml",
        None,
        e.to_string(),
    )
}
