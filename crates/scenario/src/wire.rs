//! Wire mode: the engine talks to the simulated OpenStack through the real HTTP provider
//! (`flightdeck-openstack`), with the simulator served on loopback by
//! `flightdeck-sim-http`. The workload cluster (nodes) stays simulated and is reached
//! in-process, keyed by the servers' real IDs: Nova's servers boot no kubelet.

use std::sync::Arc;

use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{
    Compute, GuestCluster, HealthMonitor, HealthMonitorCreate, Listener, ListenerCreate,
    LoadBalancer, LoadBalancerCreate, LoadBalancing, Member, MemberCreate, Network, Node,
    Ownership, Pool, PoolCreate, Route, Router, SecurityGroup, SecurityGroupRule,
    SecurityGroupRuleCreate, Server, ServerCreate,
};
use flightdeck_openstack::{
    CloudEntry, Credentials, Domain, OpenStackCloud, Password, Scope, SessionOptions,
};
use flightdeck_sim::SimCloud;
use flightdeck_sim_http::ServeOptions;

use crate::load::LoadedScenario;
use crate::report::TimelineEntry;
use crate::runner::{Run, RunError, RunOptions, run_on};

/// The real OpenStack provider for the cloud, and a separate source of the workload
/// cluster's nodes (`G`): the in-process simulator in wire mode, a simulated kubelet
/// keyed by real servers against a real cloud.
pub struct WireProvider<G> {
    openstack: OpenStackCloud,
    guest: G,
}

impl<G> WireProvider<G> {
    pub fn new(openstack: OpenStackCloud, guest: G) -> Self {
        WireProvider { openstack, guest }
    }
}

impl<G: GuestCluster + Send + Sync> Compute for WireProvider<G> {
    async fn list_servers(&self, owner: &Ownership) -> Result<Vec<Server>> {
        self.openstack.list_servers(owner).await
    }
    async fn create_server(&self, req: &ServerCreate) -> Result<Server> {
        self.openstack.create_server(req).await
    }
    async fn delete_server(&self, id: &str) -> Result<()> {
        self.openstack.delete_server(id).await
    }
    async fn add_security_group(&self, server_id: &str, group: &str) -> Result<()> {
        self.openstack.add_security_group(server_id, group).await
    }
}

impl<G: GuestCluster + Send + Sync> Network for WireProvider<G> {
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
    async fn add_extra_routes(&self, router_id: &str, routes: &[Route]) -> Result<Router> {
        self.openstack.add_extra_routes(router_id, routes).await
    }
    async fn remove_extra_routes(&self, router_id: &str, routes: &[Route]) -> Result<Router> {
        self.openstack.remove_extra_routes(router_id, routes).await
    }
}

impl<G: GuestCluster + Send + Sync> LoadBalancing for WireProvider<G> {
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
    async fn delete_member(&self, pool_id: &str, member_id: &str) -> Result<()> {
        self.openstack.delete_member(pool_id, member_id).await
    }
    async fn delete_load_balancer_cascade(&self, id: &str) -> Result<()> {
        self.openstack.delete_load_balancer_cascade(id).await
    }
}

/// OpenStack has no VM templates: the default methods answer so.
impl<G: GuestCluster + Send + Sync> flightdeck_cloud::Templates for WireProvider<G> {}
/// OpenStack has no KubeVirt: the default methods answer so.
impl<G: GuestCluster + Send + Sync> flightdeck_cloud::VirtualMachines for WireProvider<G> {}
/// OpenStack clusters are not drained through flightdeck (F9 is KubeVirt's).
impl<G: GuestCluster + Send + Sync> flightdeck_cloud::GuestDrain for WireProvider<G> {}

impl<G: GuestCluster + Send + Sync> GuestCluster for WireProvider<G> {
    async fn list_nodes(&self, owner: &Ownership) -> Result<Option<Vec<Node>>> {
        self.guest.list_nodes(owner).await
    }
}

/// The in-process simulator's workload clusters, as the node source of wire mode.
pub struct SimulatedNodes(pub Arc<SimCloud>);

impl GuestCluster for SimulatedNodes {
    async fn list_nodes(&self, owner: &Ownership) -> Result<Option<Vec<Node>>> {
        self.0.list_nodes(owner).await
    }
}

/// The `clouds.yaml` entry that reaches a simulator served at `base` (e.g.
/// `http://127.0.0.1:PORT`) with `options`.
pub fn cloud_entry(base: &str, options: &ServeOptions) -> CloudEntry {
    let mut entry = CloudEntry::new(
        "flightdeck-sim",
        Credentials {
            auth_url: format!("{base}/identity/v3"),
            username: options.user.clone(),
            password: Password::new(options.password.clone()),
            project: Scope::Name {
                name: options.project.clone(),
                domain: Domain::default(),
            },
            user_domain: Domain::default(),
        },
    );
    entry.region_name = Some(options.region.clone());
    entry
}

/// Runs a scenario in wire mode: the simulator is served on a loopback port for the
/// length of the run and the engine reaches it only over HTTP.
pub async fn run_wire(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> std::result::Result<Run, RunError> {
    if crate::one::is_opennebula(loaded)? {
        return crate::one::run_wire(loaded, options, on_event).await;
    }
    if crate::kubevirt::is_kubevirt(loaded)? {
        return crate::kubevirt::run_wire(loaded, options, on_event).await;
    }
    let options = one_at_a_time(options);
    let connect = |cloud: Arc<SimCloud>| async move {
        let (listener, base) = loopback().await?;
        let serve = ServeOptions::default();
        let entry = cloud_entry(&base, &serve);
        tokio::spawn(flightdeck_sim_http::serve(cloud.clone(), listener, serve));
        // Virtual time runs far faster than a rate limit meant for real clouds.
        let session = SessionOptions {
            rate_limit: None,
            ..SessionOptions::default()
        };
        let openstack = OpenStackCloud::connect(&entry, session)
            .await
            .map_err(|e| RunError::Wire(format!("cannot connect to the served simulator: {e}")))?;
        Ok(Arc::new(WireProvider::new(
            openstack,
            SimulatedNodes(cloud),
        )))
    };
    run_on(loaded, &options, connect, on_event).await
}

/// Wire mode runs one reconcile at a time: that keeps the order of requests, and so the
/// run, replayable.
pub(crate) fn one_at_a_time(options: &RunOptions) -> RunOptions {
    let mut options = options.clone();
    options.engine.concurrency_max = 1;
    options
}

/// A listener on a free loopback port, and its `http://ADDR` base URL.
pub(crate) async fn loopback() -> std::result::Result<(tokio::net::TcpListener, String), RunError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| RunError::Wire(format!("cannot listen on loopback: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| RunError::Wire(format!("no local address: {e}")))?;
    Ok((listener, format!("http://{addr}")))
}
