//! [`DynProvider`] forwards every call. The calls of the traits with default methods
//! (templates, virtual machines, drain) are the ones a missing forward would not fail to
//! compile: it would answer with the default's "unsupported" error instead.

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use super::DynProvider;
use crate::error::{CloudError, ErrorClass};
use crate::identity::{Identity, NamedObject};
use crate::kubevirt::{EndpointService, GuestDrain, Pod, VirtualMachines, Vmi};
use crate::model::*;
use crate::opennebula::{Image, ImageCreate, Instantiate, TemplateCreate, Templates, VmTemplate};
use crate::ownership::Ownership;
use crate::provider::{Compute, GuestCluster, LoadBalancing, Network, Result};
use crate::time::Timestamp;

/// A cloud whose defaulted calls succeed and are counted; its other calls are never made.
#[derive(Default)]
struct Counting(AtomicUsize);

impl Counting {
    fn ok<T>(&self, value: T) -> impl Future<Output = Result<T>> + Send + use<T>
    where
        T: Send,
    {
        self.0.fetch_add(1, Ordering::SeqCst);
        async move { Ok(value) }
    }
}

fn not_called(operation: &str) -> CloudError {
    CloudError::new(ErrorClass::Permanent, "test", operation, None, "not called")
}

macro_rules! not_called {
    ($( fn $name:ident( $( $arg:ident : $t:ty ),* ) -> $out:ty; )*) => {
        $(
            fn $name(&self $(, $arg: $t)*) -> impl Future<Output = Result<$out>> + Send {
                let _ = ($($arg,)*);
                async { Err(not_called(stringify!($name))) }
            }
        )*
    };
}

impl Compute for Counting {
    not_called! {
        fn list_servers(owner: &Ownership) -> Vec<Server>;
        fn create_server(req: &ServerCreate) -> Server;
        fn delete_server(id: &str) -> ();
        fn server_gone(id: &str) -> bool;
        fn add_security_group(server_id: &str, group: &str) -> ();
    }
}

impl Network for Counting {
    not_called! {
        fn list_security_groups(owner: &Ownership) -> Vec<SecurityGroup>;
        fn create_security_group(name: &str, tags: &[String]) -> SecurityGroup;
        fn create_security_group_rule(req: &SecurityGroupRuleCreate) -> SecurityGroupRule;
        fn delete_security_group(id: &str) -> ();
        fn find_router(name_or_id: &str) -> Router;
        fn addresses_in_use(addresses: &[IpAddr]) -> Vec<IpAddr>;
        fn add_extra_routes(router_id: &str, routes: &[Route]) -> Router;
        fn remove_extra_routes(router_id: &str, routes: &[Route]) -> Router;
    }
}

impl LoadBalancing for Counting {
    not_called! {
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
}

impl Identity for Counting {
    not_called! {
        fn list_named(owner: &Ownership) -> Vec<NamedObject>;
    }
}

impl GuestCluster for Counting {
    not_called! {
        fn list_nodes(owner: &Ownership) -> Option<Vec<Node>>;
    }
    fn nodes_stale_since(&self, _owner: &Ownership) -> Option<Timestamp> {
        None
    }
    fn forget_node_watches(&self) {}
}

impl Templates for Counting {
    fn list_templates(&self) -> impl Future<Output = Result<Vec<VmTemplate>>> + Send {
        self.ok(Vec::new())
    }
    fn create_template(&self, _: &TemplateCreate) -> impl Future<Output = Result<String>> + Send {
        self.ok(String::new())
    }
    fn delete_template(&self, _: &str) -> impl Future<Output = Result<()>> + Send {
        self.ok(())
    }
    fn list_images(&self) -> impl Future<Output = Result<Vec<Image>>> + Send {
        self.ok(Vec::new())
    }
    fn create_image(&self, _: &ImageCreate) -> impl Future<Output = Result<String>> + Send {
        self.ok(String::new())
    }
    fn delete_image(&self, _: &str) -> impl Future<Output = Result<()>> + Send {
        self.ok(())
    }
    fn instantiate(&self, _: &Instantiate) -> impl Future<Output = Result<String>> + Send {
        self.ok(String::new())
    }
}

impl VirtualMachines for Counting {
    fn list_vmis(&self, _: &Ownership) -> impl Future<Output = Result<Vec<Vmi>>> + Send {
        self.ok(Vec::new())
    }
    fn delete_vmi(&self, _: &str) -> impl Future<Output = Result<()>> + Send {
        self.ok(())
    }
    fn list_endpoint_services(
        &self,
        _: &Ownership,
    ) -> impl Future<Output = Result<Vec<EndpointService>>> + Send {
        self.ok(Vec::new())
    }
    fn create_endpoint_service(
        &self,
        req: &EndpointService,
    ) -> impl Future<Output = Result<EndpointService>> + Send {
        self.ok(req.clone())
    }
    fn delete_endpoint_service(&self, _: &str) -> impl Future<Output = Result<()>> + Send {
        self.ok(())
    }
}

impl GuestDrain for Counting {
    fn list_pods_on(
        &self,
        _: &Ownership,
        _: &str,
    ) -> impl Future<Output = Result<Option<Vec<Pod>>>> + Send {
        self.ok(None)
    }
    fn set_unschedulable(
        &self,
        _: &Ownership,
        _: &str,
        _: bool,
    ) -> impl Future<Output = Result<()>> + Send {
        self.ok(())
    }
    fn evict_pod(
        &self,
        _: &Ownership,
        _: &str,
        _: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        self.ok(())
    }
    fn delete_pod(
        &self,
        _: &Ownership,
        _: &str,
        _: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        self.ok(())
    }
    fn delete_node(&self, _: &Ownership, _: &str) -> impl Future<Output = Result<()>> + Send {
        self.ok(())
    }
    fn patch_node_metadata(
        &self,
        _: &Ownership,
        _: &str,
        _: &std::collections::BTreeMap<String, Option<String>>,
        _: Option<&[crate::Taint]>,
    ) -> impl Future<Output = Result<()>> + Send {
        self.ok(())
    }
}

/// The answer of a future that is ready at once (the counting cloud's are).
fn ready<T>(future: impl Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the counting cloud answers at once"),
    }
}

#[test]
fn every_defaulted_call_reaches_the_cloud_behind_the_erased_provider() {
    let cloud = Arc::new(Counting::default());
    let p = DynProvider::new(cloud.clone());
    let owner = Ownership {
        cluster: "demo".into(),
        uid: "u1".into(),
    };
    let template = TemplateCreate {
        name: "t".into(),
        content: String::new(),
    };
    let image = ImageCreate {
        name: "i".into(),
        content: String::new(),
        datastore_id: 1,
    };
    let instantiate = Instantiate {
        template_id: "1".into(),
        name: "vm".into(),
        tags: Vec::new(),
        user_data: None,
    };
    let service = EndpointService {
        name: "s".into(),
        port: 6443,
        address: None,
        tags: Vec::new(),
    };
    let results = [
        ready(Templates::list_templates(&p)).map(drop),
        ready(p.create_template(&template)).map(drop),
        ready(p.delete_template("1")),
        ready(p.list_images()).map(drop),
        ready(p.create_image(&image)).map(drop),
        ready(p.delete_image("1")),
        ready(p.instantiate(&instantiate)).map(drop),
        ready(p.list_vmis(&owner)).map(drop),
        ready(p.delete_vmi("v")),
        ready(p.list_endpoint_services(&owner)).map(drop),
        ready(p.create_endpoint_service(&service)).map(drop),
        ready(p.delete_endpoint_service("s")),
        ready(p.list_pods_on(&owner, "n")).map(drop),
        ready(p.set_unschedulable(&owner, "n", true)),
        ready(p.evict_pod(&owner, "ns", "pod")),
        ready(p.delete_pod(&owner, "ns", "pod")),
        ready(p.delete_node(&owner, "n")),
        ready(p.patch_node_metadata(&owner, "n", &Default::default(), None)),
    ];
    for (i, r) in results.iter().enumerate() {
        assert!(r.is_ok(), "call {i} did not reach the cloud: {r:?}");
    }
    assert_eq!(cloud.0.load(Ordering::SeqCst), results.len());
    // A call the cloud fails comes back as its error, unchanged.
    let e = ready(p.list_servers(&owner)).expect_err("the cloud fails it");
    assert_eq!(e.operation, "list_servers");
}
