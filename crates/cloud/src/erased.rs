//! One provider type for every cloud: [`DynProvider`] holds any [`Provider`] behind a
//! trait object, so the engine, the daemon's backends and the scenario runner are compiled
//! once for it rather than once for each cloud and wrapper. The engine's reconcile is
//! large; instantiated for every provider type the binary uses (fourteen of them), it was a
//! quarter of the binary's code and most of its build time.
//!
//! The provider traits return `impl Future`, which a trait object cannot; the object-safe
//! [`ErasedProvider`] returns the same futures boxed, one allocation per cloud call.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use crate::identity::{Identity, NamedObject};
use crate::kubevirt::{
    BootstrapTokenSecret, EndpointService, GuestDrain, Pod, VirtualMachines, Vmi,
};
use crate::model::*;
use crate::opennebula::{Image, ImageCreate, Instantiate, TemplateCreate, Templates, VmTemplate};
use crate::ownership::Ownership;
use crate::provider::{Compute, GuestCluster, LoadBalancing, Network, Provider, Result};
use crate::time::Timestamp;

/// A boxed future of a provider call.
pub type CallFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// Any [`Provider`], of any cloud, as one type.
#[derive(Clone)]
pub struct DynProvider(Arc<dyn ErasedProvider>);

impl DynProvider {
    pub fn new<P: Provider + 'static>(provider: Arc<P>) -> DynProvider {
        DynProvider(provider)
    }
}

impl std::fmt::Debug for DynProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DynProvider")
    }
}

/// Writes, for every provider call whose arguments are all references: the method of
/// [`ErasedProvider`], its blanket implementation for every [`Provider`], and the
/// [`DynProvider`] method that forwards to it. An `async move` block around the forwarded
/// call gives the returned future the separate lifetimes the traits' signatures have.
macro_rules! erased_calls {
    ($( $cap:ident { $( fn $name:ident( $( $arg:ident : & $t:ty ),* ) -> $out:ty; )* } )*) => {
        /// The provider traits, object-safe: every call's future boxed.
        pub(crate) trait ErasedProvider: Send + Sync {
            $($(
                fn $name<'a>(&'a self $(, $arg: &'a $t)*) -> CallFuture<'a, $out>;
            )*)*
            fn list_pods_on<'a>(
                &'a self,
                owner: &'a Ownership,
                node: &'a str,
            ) -> CallFuture<'a, Option<Vec<Pod>>>;
            fn set_unschedulable<'a>(
                &'a self,
                owner: &'a Ownership,
                node: &'a str,
                unschedulable: bool,
            ) -> CallFuture<'a, ()>;
            fn evict_pod<'a>(
                &'a self,
                owner: &'a Ownership,
                namespace: &'a str,
                name: &'a str,
            ) -> CallFuture<'a, ()>;
            fn delete_pod<'a>(
                &'a self,
                owner: &'a Ownership,
                namespace: &'a str,
                name: &'a str,
            ) -> CallFuture<'a, ()>;
            fn delete_node<'a>(&'a self, owner: &'a Ownership, node: &'a str) -> CallFuture<'a, ()>;
            fn create_bootstrap_token<'a>(
                &'a self,
                owner: &'a Ownership,
                token: &'a BootstrapTokenSecret,
            ) -> CallFuture<'a, ()>;
            fn set_bootstrap_token_expiration<'a>(
                &'a self,
                owner: &'a Ownership,
                id: &'a str,
                expiration: &'a str,
            ) -> CallFuture<'a, ()>;
            fn delete_bootstrap_token<'a>(&'a self, owner: &'a Ownership, id: &'a str) -> CallFuture<'a, ()>;
            fn patch_node_metadata<'a>(
                &'a self,
                owner: &'a Ownership,
                node: &'a str,
                labels: &'a BTreeMap<String, Option<String>>,
                taints: Option<&'a [Taint]>,
            ) -> CallFuture<'a, ()>;
            fn list_nodes<'a>(&'a self, owner: &'a Ownership) -> CallFuture<'a, Option<Vec<Node>>>;
            fn nodes_stale_since(&self, owner: &Ownership) -> Option<Timestamp>;
            fn forget_node_watches(&self);
        }

        impl<P: Provider> ErasedProvider for P {
            $($(
                fn $name<'a>(&'a self $(, $arg: &'a $t)*) -> CallFuture<'a, $out> {
                    Box::pin(<P as $cap>::$name(self $(, $arg)*))
                }
            )*)*
            fn list_pods_on<'a>(
                &'a self,
                owner: &'a Ownership,
                node: &'a str,
            ) -> CallFuture<'a, Option<Vec<Pod>>> {
                Box::pin(<P as GuestDrain>::list_pods_on(self, owner, node))
            }
            fn set_unschedulable<'a>(
                &'a self,
                owner: &'a Ownership,
                node: &'a str,
                unschedulable: bool,
            ) -> CallFuture<'a, ()> {
                Box::pin(<P as GuestDrain>::set_unschedulable(self, owner, node, unschedulable))
            }
            fn evict_pod<'a>(
                &'a self,
                owner: &'a Ownership,
                namespace: &'a str,
                name: &'a str,
            ) -> CallFuture<'a, ()> {
                Box::pin(<P as GuestDrain>::evict_pod(self, owner, namespace, name))
            }
            fn delete_pod<'a>(
                &'a self,
                owner: &'a Ownership,
                namespace: &'a str,
                name: &'a str,
            ) -> CallFuture<'a, ()> {
                Box::pin(<P as GuestDrain>::delete_pod(self, owner, namespace, name))
            }
            fn delete_node<'a>(&'a self, owner: &'a Ownership, node: &'a str) -> CallFuture<'a, ()> {
                Box::pin(<P as GuestDrain>::delete_node(self, owner, node))
            }
            fn create_bootstrap_token<'a>(
                &'a self,
                owner: &'a Ownership,
                token: &'a BootstrapTokenSecret,
            ) -> CallFuture<'a, ()> {
                Box::pin(<P as GuestDrain>::create_bootstrap_token(self, owner, token))
            }
            fn set_bootstrap_token_expiration<'a>(
                &'a self,
                owner: &'a Ownership,
                id: &'a str,
                expiration: &'a str,
            ) -> CallFuture<'a, ()> {
                Box::pin(<P as GuestDrain>::set_bootstrap_token_expiration(self, owner, id, expiration))
            }
            fn delete_bootstrap_token<'a>(&'a self, owner: &'a Ownership, id: &'a str) -> CallFuture<'a, ()> {
                Box::pin(<P as GuestDrain>::delete_bootstrap_token(self, owner, id))
            }
            fn patch_node_metadata<'a>(
                &'a self,
                owner: &'a Ownership,
                node: &'a str,
                labels: &'a BTreeMap<String, Option<String>>,
                taints: Option<&'a [Taint]>,
            ) -> CallFuture<'a, ()> {
                Box::pin(<P as GuestDrain>::patch_node_metadata(self, owner, node, labels, taints))
            }
            fn list_nodes<'a>(&'a self, owner: &'a Ownership) -> CallFuture<'a, Option<Vec<Node>>> {
                Box::pin(<P as GuestCluster>::list_nodes(self, owner))
            }
            fn nodes_stale_since(&self, owner: &Ownership) -> Option<Timestamp> {
                <P as GuestCluster>::nodes_stale_since(self, owner)
            }
            fn forget_node_watches(&self) {
                <P as GuestCluster>::forget_node_watches(self)
            }
        }

        $(
            impl $cap for DynProvider {
                $(
                    fn $name(&self $(, $arg: &$t)*) -> impl Future<Output = Result<$out>> + Send {
                        async move { self.0.$name($($arg),*).await }
                    }
                )*
            }
        )*
    };
}

erased_calls! {
    Compute {
        fn list_servers(owner: &Ownership) -> Vec<Server>;
        fn create_server(req: &ServerCreate) -> Server;
        fn delete_server(id: &str) -> ();
        fn server_gone(id: &str) -> bool;
        fn add_security_group(server_id: &str, group: &str) -> ();
    }
    Network {
        fn list_security_groups(owner: &Ownership) -> Vec<SecurityGroup>;
        fn create_security_group(name: &str, tags: &[String]) -> SecurityGroup;
        fn create_security_group_rule(req: &SecurityGroupRuleCreate) -> SecurityGroupRule;
        fn delete_security_group(id: &str) -> ();
        fn find_router(name_or_id: &str) -> Router;
        fn addresses_in_use(addresses: &[IpAddr]) -> Vec<IpAddr>;
        fn add_extra_routes(router_id: &str, routes: &[Route]) -> Router;
        fn remove_extra_routes(router_id: &str, routes: &[Route]) -> Router;
    }
    LoadBalancing {
        fn list_load_balancers(owner: &Ownership) -> Vec<LoadBalancer>;
        fn list_listeners(owner: &Ownership) -> Vec<Listener>;
        fn list_pools(owner: &Ownership) -> Vec<Pool>;
        fn list_health_monitors(owner: &Ownership) -> Vec<HealthMonitor>;
        fn list_members(pool_id: &str) -> Vec<Member>;
        fn create_load_balancer(req: &LoadBalancerCreate) -> LoadBalancer;
        fn create_listener(req: &ListenerCreate) -> Listener;
        fn create_pool(req: &PoolCreate) -> Pool;
        fn create_health_monitor(req: &HealthMonitorCreate) -> HealthMonitor;
        fn create_member(req: &MemberCreate) -> Member;
        fn add_members(pool_id: &str, members: &[MemberCreate]) -> ();
        fn delete_member(pool_id: &str, member_id: &str) -> ();
        fn delete_load_balancer_cascade(id: &str) -> ();
    }
    Identity {
        fn list_named(owner: &Ownership) -> Vec<NamedObject>;
    }
    Templates {
        fn list_templates() -> Vec<VmTemplate>;
        fn create_template(req: &TemplateCreate) -> String;
        fn delete_template(id: &str) -> ();
        fn list_images() -> Vec<Image>;
        fn create_image(req: &ImageCreate) -> String;
        fn delete_image(id: &str) -> ();
        fn instantiate(req: &Instantiate) -> String;
    }
    VirtualMachines {
        fn list_vmis(owner: &Ownership) -> Vec<Vmi>;
        fn delete_vmi(name: &str) -> ();
        fn list_endpoint_services(owner: &Ownership) -> Vec<EndpointService>;
        fn create_endpoint_service(req: &EndpointService) -> EndpointService;
        fn delete_endpoint_service(name: &str) -> ();
    }
}

impl GuestCluster for DynProvider {
    async fn list_nodes(&self, owner: &Ownership) -> Result<Option<Vec<Node>>> {
        self.0.list_nodes(owner).await
    }
    fn nodes_stale_since(&self, owner: &Ownership) -> Option<Timestamp> {
        self.0.nodes_stale_since(owner)
    }
    fn forget_node_watches(&self) {
        self.0.forget_node_watches()
    }
}

/// The drain calls are written by hand: `set_unschedulable` takes a flag by value, which
/// [`erased_calls`] does not write.
impl GuestDrain for DynProvider {
    async fn list_pods_on(&self, owner: &Ownership, node: &str) -> Result<Option<Vec<Pod>>> {
        self.0.list_pods_on(owner, node).await
    }
    async fn set_unschedulable(
        &self,
        owner: &Ownership,
        node: &str,
        unschedulable: bool,
    ) -> Result<()> {
        self.0.set_unschedulable(owner, node, unschedulable).await
    }
    async fn evict_pod(&self, owner: &Ownership, namespace: &str, name: &str) -> Result<()> {
        self.0.evict_pod(owner, namespace, name).await
    }
    async fn delete_pod(&self, owner: &Ownership, namespace: &str, name: &str) -> Result<()> {
        self.0.delete_pod(owner, namespace, name).await
    }
    async fn delete_node(&self, owner: &Ownership, node: &str) -> Result<()> {
        self.0.delete_node(owner, node).await
    }
    async fn create_bootstrap_token(
        &self,
        owner: &Ownership,
        token: &BootstrapTokenSecret,
    ) -> Result<()> {
        self.0.create_bootstrap_token(owner, token).await
    }
    async fn set_bootstrap_token_expiration(
        &self,
        owner: &Ownership,
        id: &str,
        expiration: &str,
    ) -> Result<()> {
        self.0
            .set_bootstrap_token_expiration(owner, id, expiration)
            .await
    }
    async fn delete_bootstrap_token(&self, owner: &Ownership, id: &str) -> Result<()> {
        self.0.delete_bootstrap_token(owner, id).await
    }
    async fn patch_node_metadata(
        &self,
        owner: &Ownership,
        node: &str,
        labels: &BTreeMap<String, Option<String>>,
        taints: Option<&[Taint]>,
    ) -> Result<()> {
        self.0
            .patch_node_metadata(owner, node, labels, taints)
            .await
    }
}

#[cfg(test)]
#[path = "erased_tests.rs"]
mod tests;
