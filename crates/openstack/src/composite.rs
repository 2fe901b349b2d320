//! [`OpenStackProvider`]: the whole provider the engine drives on an OpenStack cloud. Nova,
//! Neutron and Octavia are reached over their REST APIs ([`OpenStackCloud`]); the
//! workload cluster's nodes come from `G`, a separate source: its own Kubernetes API
//! (`flightdeck_workload::KubeGuest`, nodes matched by `openstack:///<server id>`) in
//! production, the in-process simulator in the test bed.
//!
//! Draining is KubeVirt's business (F9): on OpenStack the drain calls answer with the
//! trait's default, a Permanent error the engine never provokes.

use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{
    Compute, GuestCluster, GuestDrain, HealthMonitor, HealthMonitorCreate, Identity, Listener,
    ListenerCreate, LoadBalancer, LoadBalancerCreate, LoadBalancing, Member, MemberCreate,
    NamedObject, Network, Node, Ownership, Pool, PoolCreate, Route, Router, SecurityGroup,
    SecurityGroupRule, SecurityGroupRuleCreate, Server, ServerCreate,
};

use std::sync::Arc;

use crate::OpenStackCloud;

/// The OpenStack provider for the cloud (`C`: [`OpenStackCloud`] over the wire, or the
/// in-process simulator), and the source of the workload cluster's nodes (`G`).
pub struct OpenStackProvider<G, C = OpenStackCloud> {
    openstack: Arc<C>,
    guest: G,
}

impl<G, C> OpenStackProvider<G, C> {
    pub fn new(openstack: C, guest: G) -> Self {
        OpenStackProvider {
            openstack: Arc::new(openstack),
            guest,
        }
    }

    /// Over a cloud that is shared with others (the simulator its test bed also reads).
    pub fn shared(openstack: Arc<C>, guest: G) -> Self {
        OpenStackProvider { openstack, guest }
    }
}

/// What the cloud side of [`OpenStackProvider`] must do.
pub trait OpenStackApis: Compute + Network + LoadBalancing + Identity + Send + Sync {}
impl<T: Compute + Network + LoadBalancing + Identity + Send + Sync> OpenStackApis for T {}

impl<G: Send + Sync, C: OpenStackApis> Identity for OpenStackProvider<G, C> {
    async fn list_named(&self, owner: &Ownership) -> Result<Vec<NamedObject>> {
        self.openstack.list_named(owner).await
    }
}

impl<G: GuestCluster + Send + Sync, C: OpenStackApis> Compute for OpenStackProvider<G, C> {
    async fn list_servers(&self, owner: &Ownership) -> Result<Vec<Server>> {
        self.openstack.list_servers(owner).await
    }
    async fn create_server(&self, req: &ServerCreate) -> Result<Server> {
        self.openstack.create_server(req).await
    }
    async fn delete_server(&self, id: &str) -> Result<()> {
        self.openstack.delete_server(id).await
    }
    async fn server_gone(&self, id: &str) -> Result<bool> {
        self.openstack.server_gone(id).await
    }
    async fn add_security_group(&self, server_id: &str, group: &str) -> Result<()> {
        self.openstack.add_security_group(server_id, group).await
    }
}

impl<G: GuestCluster + Send + Sync, C: OpenStackApis> Network for OpenStackProvider<G, C> {
    async fn list_security_groups(&self, owner: &Ownership) -> Result<Vec<SecurityGroup>> {
        self.openstack.list_security_groups(owner).await
    }
    async fn create_security_group(&self, name: &str, tags: &[String]) -> Result<SecurityGroup> {
        self.openstack.create_security_group(name, tags).await
    }
    async fn create_security_group_rule(
        &self,
        req: &SecurityGroupRuleCreate,
    ) -> Result<SecurityGroupRule> {
        self.openstack.create_security_group_rule(req).await
    }
    async fn delete_security_group(&self, id: &str) -> Result<()> {
        self.openstack.delete_security_group(id).await
    }
    async fn find_router(&self, name_or_id: &str) -> Result<Router> {
        self.openstack.find_router(name_or_id).await
    }
    async fn addresses_in_use(
        &self,
        addresses: &[std::net::IpAddr],
    ) -> Result<Vec<std::net::IpAddr>> {
        self.openstack.addresses_in_use(addresses).await
    }
    async fn add_extra_routes(&self, router_id: &str, routes: &[Route]) -> Result<Router> {
        self.openstack.add_extra_routes(router_id, routes).await
    }
    async fn remove_extra_routes(&self, router_id: &str, routes: &[Route]) -> Result<Router> {
        self.openstack.remove_extra_routes(router_id, routes).await
    }
}

impl<G: GuestCluster + Send + Sync, C: OpenStackApis> LoadBalancing for OpenStackProvider<G, C> {
    async fn list_load_balancers(&self, owner: &Ownership) -> Result<Vec<LoadBalancer>> {
        self.openstack.list_load_balancers(owner).await
    }
    async fn list_listeners(&self, owner: &Ownership) -> Result<Vec<Listener>> {
        self.openstack.list_listeners(owner).await
    }
    async fn list_pools(&self, owner: &Ownership) -> Result<Vec<Pool>> {
        self.openstack.list_pools(owner).await
    }
    async fn list_health_monitors(&self, owner: &Ownership) -> Result<Vec<HealthMonitor>> {
        self.openstack.list_health_monitors(owner).await
    }
    async fn list_members(&self, pool_id: &str) -> Result<Vec<Member>> {
        self.openstack.list_members(pool_id).await
    }
    async fn create_load_balancer(&self, req: &LoadBalancerCreate) -> Result<LoadBalancer> {
        self.openstack.create_load_balancer(req).await
    }
    async fn create_listener(&self, req: &ListenerCreate) -> Result<Listener> {
        self.openstack.create_listener(req).await
    }
    async fn create_pool(&self, req: &PoolCreate) -> Result<Pool> {
        self.openstack.create_pool(req).await
    }
    async fn create_health_monitor(&self, req: &HealthMonitorCreate) -> Result<HealthMonitor> {
        self.openstack.create_health_monitor(req).await
    }
    async fn create_member(&self, req: &MemberCreate) -> Result<Member> {
        self.openstack.create_member(req).await
    }
    async fn add_members(&self, pool_id: &str, members: &[MemberCreate]) -> Result<()> {
        self.openstack.add_members(pool_id, members).await
    }
    async fn delete_member(&self, pool_id: &str, member_id: &str) -> Result<()> {
        self.openstack.delete_member(pool_id, member_id).await
    }
    async fn delete_load_balancer_cascade(&self, id: &str) -> Result<()> {
        self.openstack.delete_load_balancer_cascade(id).await
    }
}

/// OpenStack has no VM templates: the default methods answer so.
impl<G: GuestCluster + Send + Sync, C: OpenStackApis> flightdeck_cloud::Templates
    for OpenStackProvider<G, C>
{
}
/// OpenStack has no KubeVirt: the default methods answer so.
impl<G: GuestCluster + Send + Sync, C: OpenStackApis> flightdeck_cloud::VirtualMachines
    for OpenStackProvider<G, C>
{
}
/// The workload cluster's nodes are drained, and their Nodes deleted, through the guest.
impl<G: GuestCluster + GuestDrain + Send + Sync, C: OpenStackApis> GuestDrain
    for OpenStackProvider<G, C>
{
    flightdeck_cloud::forward_guest_drain!(guest);
}

impl<G: GuestCluster + Send + Sync, C: OpenStackApis> GuestCluster for OpenStackProvider<G, C> {
    async fn list_nodes(&self, owner: &Ownership) -> Result<Option<Vec<Node>>> {
        self.guest.list_nodes(owner).await
    }

    fn nodes_stale_since(&self, owner: &Ownership) -> Option<flightdeck_cloud::Timestamp> {
        self.guest.nodes_stale_since(owner)
    }
    fn forget_node_watches(&self) {
        self.guest.forget_node_watches()
    }
}
