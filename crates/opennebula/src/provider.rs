//! [`OpenNebulaCloud`]: flightdeck's provider traits over a [`OneClient`].
//!
//! - `Compute`: VMs are servers. `list_servers` is one `one.vmpool.infoextended` keeping
//!   the VMs whose user template says `FLIGHTDECK_UID = <owner uid>`; states map as
//!   [`crate::states`] says. Not `one.vmpool.info`: its short form keeps only LABELS,
//!   ERROR and the SCHED_* attributes of the user template (so the ownership attributes
//!   would be lost) and has no `TEMPLATE_ID`. Servers are not created here but instantiated from
//!   templates (`Templates::instantiate`); `delete_server` is `terminate-hard`.
//! - `Templates`: templates, images and instantiation. The ownership tags travel in the
//!   VM's user template as `FLIGHTDECK_CLUSTER`, `FLIGHTDECK_UID`, `FLIGHTDECK_ROLE` and
//!   `FLIGHTDECK_MACHINE`, because OpenNebula has no tags.
//! - `Network`, `LoadBalancing`: OpenNebula has no Neutron or Octavia; every call is a
//!   Permanent error (the engine never makes them for an OpenNebula cluster).
//! - `GuestCluster`: the workload cluster's nodes, from the source given at construction.

use std::net::IpAddr;

use flightdeck_cloud::ownership::{TAG_CLUSTER, TAG_MACHINE, TAG_ROLE, TAG_TEMPLATE, TAG_UID};
use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{
    CloudError, Compute, ErrorClass, GuestCluster, GuestDrain, HealthMonitor, HealthMonitorCreate,
    Image, ImageCreate, ImageState, Instantiate, Listener, ListenerCreate, LoadBalancer,
    LoadBalancerCreate, LoadBalancing, LockLevel, Member, MemberCreate, Network, Node, Ownership,
    Pool, PoolCreate, Route, Router, SecurityGroup, SecurityGroupRule, SecurityGroupRuleCreate,
    Server, ServerCreate, TemplateCreate, Templates, Timestamp, VmTemplate,
};

use crate::auth::{self, OneCredentials};
use crate::rpc::{OneClient, VM_STATE_ANY_BUT_DONE, VM_STATE_DONE};
use crate::states::vm_status;
use crate::template::{self, Template, quote};
use crate::transport::{HttpOptions, HttpTransport, SERVICE, Transport};
use crate::xml::{Lock, VmDoc};

/// User-template attribute ↔ ownership tag prefix, in the order tags are rebuilt.
pub const TAG_ATTRIBUTES: [(&str, &str); 5] = [
    ("FLIGHTDECK_CLUSTER", TAG_CLUSTER),
    ("FLIGHTDECK_UID", TAG_UID),
    ("FLIGHTDECK_ROLE", TAG_ROLE),
    ("FLIGHTDECK_MACHINE", TAG_MACHINE),
    ("FLIGHTDECK_TEMPLATE", TAG_TEMPLATE),
];

/// Attributes OpenNebula keeps in a template's or image's `TEMPLATE` that are not part
/// of its content as flightdeck compares it.
pub const NOT_CONTENT: [&str; 1] = ["NAME"];

/// The real OpenNebula provider: a [`OneClient`] and the workload cluster's node source.
pub struct OpenNebulaCloud<T, G> {
    client: OneClient<T>,
    guest: G,
}

impl<T, G> std::fmt::Debug for OpenNebulaCloud<T, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenNebulaCloud")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl<T: Transport, G> OpenNebulaCloud<T, G> {
    pub fn new(client: OneClient<T>, guest: G) -> Self {
        OpenNebulaCloud { client, guest }
    }

    pub fn client(&self) -> &OneClient<T> {
        &self.client
    }
}

impl<G> OpenNebulaCloud<HttpTransport, G> {
    /// A provider over HTTP. The endpoint is `endpoint`, else `$ONE_XMLRPC`, else
    /// `http://localhost:2633/RPC2`; the credentials are `credentials`, else those in
    /// `$ONE_AUTH` (or `~/.one/one_auth`). A bad endpoint or credentials file is a
    /// Permanent error naming it. Nothing is sent yet: call
    /// [`OneClient::system_version`] to check the connection.
    pub fn over_http(
        endpoint: Option<&str>,
        credentials: Option<OneCredentials>,
        options: &HttpOptions,
        guest: G,
    ) -> Result<Self> {
        let credentials = match credentials {
            Some(c) => c,
            None => OneCredentials::from_env().map_err(auth::auth_error)?,
        };
        let transport = HttpTransport::new(&auth::endpoint(endpoint), options)?;
        Ok(OpenNebulaCloud::new(
            OneClient::new(transport, &credentials),
            guest,
        ))
    }
}

fn permanent(operation: &str, message: impl Into<String>) -> CloudError {
    CloudError::new(ErrorClass::Permanent, SERVICE, operation, None, message)
}

/// An ID flightdeck recorded, as OpenNebula's number.
fn parse_id(operation: &str, what: &str, id: &str) -> Result<u32> {
    id.trim()
        .parse()
        .map_err(|_| permanent(operation, format!("{id:?} is not an OpenNebula {what} ID")))
}

/// The ownership tags as user-template lines (`FLIGHTDECK_UID = "…"`). A tag flightdeck
/// does not know is refused rather than dropped.
pub fn tags_to_user_template(tags: &[String]) -> std::result::Result<String, String> {
    let mut t = Template::default();
    for tag in tags {
        let Some((attr, value)) = TAG_ATTRIBUTES
            .iter()
            .find_map(|(attr, prefix)| tag.strip_prefix(prefix).map(|v| (*attr, v)))
        else {
            return Err(format!(
                "tag {tag:?} has no OpenNebula user-template attribute"
            ));
        };
        t.push_single(attr, value);
    }
    Ok(t.render())
}

/// The ownership tags a VM's user template carries, in [`TAG_ATTRIBUTES`] order.
pub fn tags_from_user_template(user_template: &Template) -> Vec<String> {
    TAG_ATTRIBUTES
        .iter()
        .filter_map(|(attr, prefix)| user_template.single(attr).map(|v| format!("{prefix}{v}")))
        .collect()
}

/// The first NIC address: `IP`, else an IPv6 one.
fn first_address(t: &Template) -> Option<IpAddr> {
    t.vectors("NIC").find_map(|nic| {
        ["IP", "IP6", "IP6_GLOBAL", "IP6_ULA"].iter().find_map(|k| {
            nic.iter()
                .find(|(name, _)| name == k)
                .and_then(|(_, v)| v.trim().parse().ok())
        })
    })
}

/// A VM as a [`Server`].
pub fn server_of(vm: &VmDoc) -> Server {
    let s = vm_status(vm.state, vm.lcm_state);
    Server {
        id: vm.common.id.to_string(),
        name: vm.common.name.clone(),
        status: s.status,
        task_state: s.task_state,
        tags: tags_from_user_template(&vm.user_template),
        security_groups: vec![],
        address: first_address(&vm.template),
        // OpenNebula sets TEMPLATE_ID on instantiate; a VM made otherwise has none: "".
        image: vm
            .template
            .single("TEMPLATE_ID")
            .unwrap_or_default()
            .to_string(),
        flavor: String::new(),
        fault: s.fault,
        created_at: Timestamp(u64::try_from(vm.stime).unwrap_or(0).saturating_mul(1000)),
    }
}

fn lock_of(lock: Option<&Lock>) -> Option<LockLevel> {
    lock.and_then(|l| LockLevel::from_number(l.locked))
}

/// Checks spec content and adds `NAME`: the text `*.allocate` takes.
fn allocate_text(operation: &str, name: &str, content: &str) -> Result<String> {
    let body = template::parse(content).map_err(|e| {
        permanent(
            operation,
            format!("the content of {name:?} is not an OpenNebula template: {e}"),
        )
    })?;
    if body.single("NAME").is_some() || body.vectors("NAME").next().is_some() {
        return Err(permanent(
            operation,
            format!("the content of {name:?} sets NAME; the name is given apart"),
        ));
    }
    let mut text = format!("NAME = {}\n", quote(name));
    text.push_str(&body.render());
    Ok(text)
}

impl<T: Transport, G> OpenNebulaCloud<T, G> {
    /// Every VM in the pool that is not DONE, with its user template.
    async fn live_vms(&self) -> Result<Vec<VmDoc>> {
        self.client
            .vmpool_info_extended(VM_STATE_ANY_BUT_DONE)
            .await
    }
}

impl<T: Transport, G: Send + Sync> Compute for OpenNebulaCloud<T, G> {
    async fn list_servers(&self, owner: &Ownership) -> Result<Vec<Server>> {
        let vms = self.live_vms().await?;
        Ok(vms
            .iter()
            .filter(|vm| vm.user_template.single("FLIGHTDECK_UID") == Some(owner.uid.as_str()))
            .map(server_of)
            .collect())
    }

    async fn create_server(&self, _req: &ServerCreate) -> Result<Server> {
        Err(permanent(
            "create_server",
            "OpenNebula machines are instantiated from templates (Templates::instantiate)",
        ))
    }

    async fn delete_server(&self, id: &str) -> Result<()> {
        let vm_id = parse_id("one.vm.action", "VM", id)?;
        self.client.vm_action("terminate-hard", vm_id).await
    }

    /// OpenNebula keeps a terminated VM as DONE; one never made (or purged from the
    /// database) answers NO_EXISTS.
    async fn server_gone(&self, id: &str) -> Result<bool> {
        let vm_id = parse_id("one.vm.info", "VM", id)?;
        match self.client.vm_info(vm_id).await {
            Ok(vm) => Ok(vm.state == VM_STATE_DONE),
            Err(e) if e.class == ErrorClass::NotFound => Ok(true),
            Err(e) => Err(e),
        }
    }

    async fn add_security_group(&self, _server_id: &str, _group: &str) -> Result<()> {
        Err(permanent(
            "add_security_group",
            "OpenNebula VMs take their security groups from the template's NIC \
             (SECURITY_GROUPS); flightdeck does not add them to a running VM",
        ))
    }
}

const NO_NEUTRON: &str = "OpenNebula clusters have no Neutron; the control-plane endpoint \
                          is spec.provider.opennebula.endpoint";
const NO_OCTAVIA: &str = "OpenNebula clusters have no Octavia; the control-plane endpoint \
                          is spec.provider.opennebula.endpoint";

/// VMs that carry the cluster's name (`FLIGHTDECK_CLUSTER`), whatever their UID: the
/// cluster's own and what an earlier cluster of that name left (see
/// [`flightdeck_cloud::identity`]). Templates and
/// images are shared by content and held by record, never by tag, so they are not
/// looked at.
impl<T: Transport, G: Send + Sync> flightdeck_cloud::Identity for OpenNebulaCloud<T, G> {
    async fn list_named(&self, owner: &Ownership) -> Result<Vec<flightdeck_cloud::NamedObject>> {
        let vms = self.live_vms().await?;
        Ok(vms
            .iter()
            .filter_map(|vm| {
                let tags = tags_from_user_template(&vm.user_template);
                let id = vm.common.id.to_string();
                flightdeck_cloud::identity::named_of(owner, "VM", &id, &vm.common.name, &tags)
            })
            .collect())
    }
}

impl<T: Transport, G: Send + Sync> Network for OpenNebulaCloud<T, G> {
    async fn list_security_groups(&self, _owner: &Ownership) -> Result<Vec<SecurityGroup>> {
        Err(permanent("list_security_groups", NO_NEUTRON))
    }
    async fn create_security_group(&self, _name: &str, _tags: &[String]) -> Result<SecurityGroup> {
        Err(permanent("create_security_group", NO_NEUTRON))
    }
    async fn create_security_group_rule(
        &self,
        _req: &SecurityGroupRuleCreate,
    ) -> Result<SecurityGroupRule> {
        Err(permanent("create_security_group_rule", NO_NEUTRON))
    }
    async fn delete_security_group(&self, _id: &str) -> Result<()> {
        Err(permanent("delete_security_group", NO_NEUTRON))
    }
    async fn find_router(&self, _name_or_id: &str) -> Result<Router> {
        Err(permanent("find_router", NO_NEUTRON))
    }
    async fn addresses_in_use(
        &self,
        _addresses: &[std::net::IpAddr],
    ) -> Result<Vec<std::net::IpAddr>> {
        Err(permanent("addresses_in_use", NO_NEUTRON))
    }
    async fn add_extra_routes(&self, _router_id: &str, _routes: &[Route]) -> Result<Router> {
        Err(permanent("add_extra_routes", NO_NEUTRON))
    }
    async fn remove_extra_routes(&self, _router_id: &str, _routes: &[Route]) -> Result<Router> {
        Err(permanent("remove_extra_routes", NO_NEUTRON))
    }
}

impl<T: Transport, G: Send + Sync> LoadBalancing for OpenNebulaCloud<T, G> {
    async fn list_load_balancers(&self, _owner: &Ownership) -> Result<Vec<LoadBalancer>> {
        Err(permanent("list_load_balancers", NO_OCTAVIA))
    }
    async fn list_listeners(&self, _owner: &Ownership) -> Result<Vec<Listener>> {
        Err(permanent("list_listeners", NO_OCTAVIA))
    }
    async fn list_pools(&self, _owner: &Ownership) -> Result<Vec<Pool>> {
        Err(permanent("list_pools", NO_OCTAVIA))
    }
    async fn list_health_monitors(&self, _owner: &Ownership) -> Result<Vec<HealthMonitor>> {
        Err(permanent("list_health_monitors", NO_OCTAVIA))
    }
    async fn list_members(&self, _pool_id: &str) -> Result<Vec<Member>> {
        Err(permanent("list_members", NO_OCTAVIA))
    }
    async fn create_load_balancer(&self, _req: &LoadBalancerCreate) -> Result<LoadBalancer> {
        Err(permanent("create_load_balancer", NO_OCTAVIA))
    }
    async fn create_listener(&self, _req: &ListenerCreate) -> Result<Listener> {
        Err(permanent("create_listener", NO_OCTAVIA))
    }
    async fn create_pool(&self, _req: &PoolCreate) -> Result<Pool> {
        Err(permanent("create_pool", NO_OCTAVIA))
    }
    async fn create_health_monitor(&self, _req: &HealthMonitorCreate) -> Result<HealthMonitor> {
        Err(permanent("create_health_monitor", NO_OCTAVIA))
    }
    async fn create_member(&self, _req: &MemberCreate) -> Result<Member> {
        Err(permanent("create_member", NO_OCTAVIA))
    }
    async fn add_members(&self, _pool_id: &str, _members: &[MemberCreate]) -> Result<()> {
        Err(permanent("add_members", NO_OCTAVIA))
    }
    async fn delete_member(&self, _pool_id: &str, _member_id: &str) -> Result<()> {
        Err(permanent("delete_member", NO_OCTAVIA))
    }
    async fn delete_load_balancer_cascade(&self, _id: &str) -> Result<()> {
        Err(permanent("delete_load_balancer_cascade", NO_OCTAVIA))
    }
}

impl<T: Transport, G: GuestCluster + Send + Sync> GuestCluster for OpenNebulaCloud<T, G> {
    fn list_nodes(
        &self,
        owner: &Ownership,
    ) -> impl std::future::Future<Output = Result<Option<Vec<Node>>>> + Send {
        self.guest.list_nodes(owner)
    }

    fn nodes_stale_since(&self, owner: &Ownership) -> Option<flightdeck_cloud::Timestamp> {
        self.guest.nodes_stale_since(owner)
    }
    fn forget_node_watches(&self) {
        self.guest.forget_node_watches()
    }
}

/// OpenNebula has no KubeVirt: the default methods answer so.
impl<T: Transport, G: Send + Sync> flightdeck_cloud::VirtualMachines for OpenNebulaCloud<T, G> {}
/// The workload cluster's nodes are drained, and their Nodes deleted, through the guest.
impl<T: Transport, G: GuestDrain + Send + Sync> GuestDrain for OpenNebulaCloud<T, G> {
    flightdeck_cloud::forward_guest_drain!(guest);
}

impl<T: Transport, G: Send + Sync> Templates for OpenNebulaCloud<T, G> {
    async fn list_templates(&self) -> Result<Vec<VmTemplate>> {
        let docs = self.client.templatepool_info().await?;
        Ok(docs
            .into_iter()
            .map(|d| VmTemplate {
                id: d.common.id.to_string(),
                content: d.template.without(&NOT_CONTENT).render(),
                lock: lock_of(d.common.lock.as_ref()),
                owner: d.common.uname,
                name: d.common.name,
            })
            .collect())
    }

    async fn create_template(&self, req: &TemplateCreate) -> Result<String> {
        let text = allocate_text("one.template.allocate", &req.name, &req.content)?;
        Ok(self.client.template_allocate(&text).await?.to_string())
    }

    async fn delete_template(&self, id: &str) -> Result<()> {
        let template_id = parse_id("one.template.delete", "template", id)?;
        self.client.template_delete(template_id).await
    }

    async fn list_images(&self) -> Result<Vec<Image>> {
        const M: &str = "one.imagepool.info";
        let docs = self.client.imagepool_info().await?;
        docs.into_iter()
            .map(|d| {
                let state = ImageState::from_number(d.state).ok_or_else(|| {
                    permanent(
                        M,
                        format!(
                            "malformed answer: IMAGE {}: unknown STATE {}",
                            d.common.id, d.state
                        ),
                    )
                })?;
                Ok(Image {
                    id: d.common.id.to_string(),
                    state,
                    content: d.template.without(&NOT_CONTENT).render(),
                    lock: lock_of(d.common.lock.as_ref()),
                    running_vms: d.running_vms,
                    owner: d.common.uname,
                    name: d.common.name,
                })
            })
            .collect()
    }

    async fn create_image(&self, req: &ImageCreate) -> Result<String> {
        let text = allocate_text("one.image.allocate", &req.name, &req.content)?;
        Ok(self
            .client
            .image_allocate(&text, req.datastore_id)
            .await?
            .to_string())
    }

    async fn delete_image(&self, id: &str) -> Result<()> {
        let image_id = parse_id("one.image.delete", "image", id)?;
        self.client.image_delete(image_id).await
    }

    async fn instantiate(&self, req: &Instantiate) -> Result<String> {
        const M: &str = "one.template.instantiate";
        let template_id = parse_id(M, "template", &req.template_id)?;
        let mut extra = tags_to_user_template(&req.tags).map_err(|e| permanent(M, e))?;
        if let Some(data) = &req.user_data {
            // An attribute of the extra template replaces the template's attribute of
            // that name as a whole (OpenNebula's `Template::merge`): the template's own
            // CONTEXT travels along, with the user data added.
            let template = self.client.template_info(template_id).await?;
            extra.push_str(&context_with_user_data(&template.template, data).render());
        }
        Ok(self
            .client
            .template_instantiate(template_id, &req.name, false, &extra, false)
            .await?
            .to_string())
    }
}

/// The CONTEXT a machine of `template` boots with: the template's own members, and the
/// cloud-init user data (`USER_DATA`, base64, as cloud-init's OpenNebula datasource and
/// OpenNebula's own contextualization read it).
pub fn context_with_user_data(template: &Template, data: &str) -> Template {
    use base64::Engine as _;
    let mut members: Vec<(String, String)> = template
        .vectors("CONTEXT")
        .next()
        .map(<[_]>::to_vec)
        .unwrap_or_default();
    members.retain(|(k, _)| !matches!(k.as_str(), "USER_DATA" | "USERDATA" | "USERDATA_ENCODING"));
    members.push((
        "USER_DATA".into(),
        base64::engine::general_purpose::STANDARD.encode(data),
    ));
    members.push(("USERDATA_ENCODING".into(), "base64".into()));
    let mut context = Template::default();
    context.push_vector("CONTEXT", members);
    context
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_joins_the_templates_own_context() {
        let t = template::parse(
            "CPU = 1\nCONTEXT = [ NETWORK = \"YES\", SSH_PUBLIC_KEY = \"$USER[SSH_PUBLIC_KEY]\", USER_DATA = \"old\" ]\n",
        )
        .expect("template");
        let c = context_with_user_data(&t, "#cloud-config\nhostname: demo-cp-1\n");
        let members = c.vectors("CONTEXT").next().expect("CONTEXT");
        let get = |k: &str| {
            members
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("NETWORK"), Some("YES"));
        assert_eq!(get("SSH_PUBLIC_KEY"), Some("$USER[SSH_PUBLIC_KEY]"));
        assert_eq!(get("USERDATA_ENCODING"), Some("base64"));
        assert_eq!(
            get("USER_DATA"),
            Some("I2Nsb3VkLWNvbmZpZwpob3N0bmFtZTogZGVtby1jcC0xCg==")
        );
        assert_eq!(members.iter().filter(|(n, _)| n == "USER_DATA").count(), 1);
        // A template without a CONTEXT gets one with the user data alone.
        let bare = context_with_user_data(&Template::default(), "x");
        assert_eq!(bare.vectors("CONTEXT").next().map(<[_]>::len), Some(2));
    }

    #[test]
    fn ownership_tags_travel_as_user_template_attributes_and_back() {
        let owner = Ownership {
            cluster: "demo".into(),
            uid: "u1".into(),
        };
        let tags = owner.tags(&flightdeck_cloud::Role::Machine("demo-cp-1".into()));
        let text = tags_to_user_template(&tags).expect("known tags");
        assert_eq!(
            text,
            "FLIGHTDECK_CLUSTER = \"demo\"\nFLIGHTDECK_UID = \"u1\"\nFLIGHTDECK_ROLE = \"machine\"\nFLIGHTDECK_MACHINE = \"demo-cp-1\"\n"
        );
        let back = tags_from_user_template(&template::parse(&text).expect("parses"));
        assert_eq!(back, tags);
        assert!(owner.owns(&back));
    }

    #[test]
    fn an_unknown_tag_is_refused_not_dropped() {
        let e = tags_to_user_template(&["env=prod".into()]).expect_err("unknown");
        assert!(e.contains("env=prod"), "{e}");
    }

    #[test]
    fn allocate_text_names_the_object_and_refuses_a_name_in_the_content() {
        assert_eq!(
            allocate_text("op", "k8s \"v1\"", "cpu = 1\nDISK = [ IMAGE = x ]").as_deref(),
            Ok("NAME = \"k8s \\\"v1\\\"\"\nCPU = \"1\"\nDISK = [ IMAGE = \"x\" ]\n")
        );
        let e = allocate_text("op", "x", "NAME = \"y\"").expect_err("NAME in content");
        assert!(e.message.contains("sets NAME"), "{e}");
        let e = allocate_text("op", "x", "CPU = ").expect_err("bad content");
        assert_eq!(e.class, ErrorClass::Permanent);
        assert!(e.message.contains("line 1"), "{e}");
    }
}
