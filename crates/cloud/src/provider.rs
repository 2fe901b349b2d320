//! Provider traits, one per capability. A real provider speaks a cloud's wire protocol;
//! the simulator implements the same traits in-process.
//!
//! Every list takes the cluster's [`Ownership`] and returns only objects tagged with its
//! UID, in one call per resource kind where the API allows it.

use std::future::Future;
use std::net::IpAddr;

use crate::error::CloudError;
use crate::model::*;
use crate::ownership::Ownership;

pub type Result<T> = std::result::Result<T, CloudError>;

/// Servers (Nova).
pub trait Compute {
    fn list_servers(&self, owner: &Ownership) -> impl Future<Output = Result<Vec<Server>>> + Send;
    fn create_server(&self, req: &ServerCreate) -> impl Future<Output = Result<Server>> + Send;
    fn delete_server(&self, id: &str) -> impl Future<Output = Result<()>> + Send;
    /// Whether the cloud says, when asked for server `id` itself rather than listing, that
    /// no live server of that ID exists (Nova's `GET /servers/{id}` answers 404,
    /// OpenNebula's `one.vm.info` NO_EXISTS or DONE, KubeVirt's VirtualMachine 404). A list
    /// may lose objects; a direct read of one is what confirms it gone.
    fn server_gone(&self, id: &str) -> impl Future<Output = Result<bool>> + Send;
    fn add_security_group(
        &self,
        server_id: &str,
        group: &str,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// Security groups and rules (Neutron).
pub trait Network {
    fn list_security_groups(
        &self,
        owner: &Ownership,
    ) -> impl Future<Output = Result<Vec<SecurityGroup>>> + Send;
    fn create_security_group(
        &self,
        name: &str,
        tags: &[String],
    ) -> impl Future<Output = Result<SecurityGroup>> + Send;
    fn create_security_group_rule(
        &self,
        req: &SecurityGroupRuleCreate,
    ) -> impl Future<Output = Result<SecurityGroupRule>> + Send;
    fn delete_security_group(&self, id: &str) -> impl Future<Output = Result<()>> + Send;
    /// The router named `name_or_id` (flightdeck does not own routers; it manages the
    /// routes to its clusters' pod networks on them). 404 if there is none.
    fn find_router(&self, name_or_id: &str) -> impl Future<Output = Result<Router>> + Send;
    /// Which of `addresses` some Neutron port holds (`GET /v2.0/ports?fixed_ips=`). A
    /// route's next hop that no port holds is dead: its server is gone, whoever added
    /// the route.
    fn addresses_in_use(
        &self,
        addresses: &[IpAddr],
    ) -> impl Future<Output = Result<Vec<IpAddr>>> + Send;
    /// Neutron's `add_extraroutes`: adding a route that exists is a no-op.
    fn add_extra_routes(
        &self,
        router_id: &str,
        routes: &[Route],
    ) -> impl Future<Output = Result<Router>> + Send;
    /// Neutron's `remove_extraroutes`: removing a route that is not there is a no-op.
    fn remove_extra_routes(
        &self,
        router_id: &str,
        routes: &[Route],
    ) -> impl Future<Output = Result<Router>> + Send;
}

/// Load balancers and their children (Octavia).
pub trait LoadBalancing {
    fn list_load_balancers(
        &self,
        owner: &Ownership,
    ) -> impl Future<Output = Result<Vec<LoadBalancer>>> + Send;
    fn list_listeners(
        &self,
        owner: &Ownership,
    ) -> impl Future<Output = Result<Vec<Listener>>> + Send;
    fn list_pools(&self, owner: &Ownership) -> impl Future<Output = Result<Vec<Pool>>> + Send;
    fn list_health_monitors(
        &self,
        owner: &Ownership,
    ) -> impl Future<Output = Result<Vec<HealthMonitor>>> + Send;
    /// Members of one pool (Octavia lists members per pool).
    fn list_members(&self, pool_id: &str) -> impl Future<Output = Result<Vec<Member>>> + Send;
    fn create_load_balancer(
        &self,
        req: &LoadBalancerCreate,
    ) -> impl Future<Output = Result<LoadBalancer>> + Send;
    fn create_listener(
        &self,
        req: &ListenerCreate,
    ) -> impl Future<Output = Result<Listener>> + Send;
    fn create_pool(&self, req: &PoolCreate) -> impl Future<Output = Result<Pool>> + Send;
    fn create_health_monitor(
        &self,
        req: &HealthMonitorCreate,
    ) -> impl Future<Output = Result<HealthMonitor>> + Send;
    fn create_member(&self, req: &MemberCreate) -> impl Future<Output = Result<Member>> + Send;
    /// Adds `members` (all of pool `pool_id`) in one call: Octavia's batch member update
    /// with `additive_only`, which deletes nothing. Octavia answers 202 with no body, so
    /// the new members' IDs come with the next list.
    fn add_members(
        &self,
        pool_id: &str,
        members: &[MemberCreate],
    ) -> impl Future<Output = Result<()>> + Send;
    fn delete_member(
        &self,
        pool_id: &str,
        member_id: &str,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Deletes the load balancer and everything under it (`cascade=true`).
    fn delete_load_balancer_cascade(&self, id: &str) -> impl Future<Output = Result<()>> + Send;
}

/// The workload cluster's own API, reached through the cluster's API endpoint.
pub trait GuestCluster {
    /// The workload cluster's nodes; `Ok(None)` when its API cannot be reached.
    fn list_nodes(
        &self,
        owner: &Ownership,
    ) -> impl Future<Output = Result<Option<Vec<Node>>>> + Send;

    /// How old the last [`GuestCluster::list_nodes`] answer for `owner` may be: `None`
    /// when it was read from the workload cluster just now (a list, or a watch that is
    /// healthy), `Some(t)` when it comes from a watch that has been broken since `t`.
    /// The planner treats a list older than its freshness limit as blind (F10).
    fn nodes_stale_since(&self, owner: &Ownership) -> Option<crate::Timestamp>;

    /// Drops whatever is kept of the workload clusters' nodes between reads (their node
    /// watches), as a controller that restarts starts without any: the next read of each
    /// cluster's nodes lists them again. A provider that reads nodes afresh each time
    /// keeps nothing to drop.
    fn forget_node_watches(&self);
}

/// Everything the engine needs. A cloud without some capability answers its calls with a
/// permanent error (see [`crate::Templates`]); the planner asks each cloud only for what
/// the cluster's `spec.provider` names.
pub trait Provider:
    Compute
    + Network
    + LoadBalancing
    + GuestCluster
    + crate::Identity
    + crate::Templates
    + crate::VirtualMachines
    + crate::GuestDrain
    + Send
    + Sync
{
}

impl<T> Provider for T where
    T: Compute
        + Network
        + LoadBalancing
        + GuestCluster
        + crate::Identity
        + crate::Templates
        + crate::VirtualMachines
        + crate::GuestDrain
        + Send
        + Sync
{
}
