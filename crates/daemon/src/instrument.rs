//! A provider wrapper that measures every cloud call and lets the daemon hold calls up.
//!
//! [`Instrumented<P, H>`] implements every capability trait of `flightdeck_cloud` by
//! forwarding to the inner provider, so it is a [`flightdeck_cloud::Provider`] whenever
//! `P` is. Around each call it
//! 1. awaits the hook's [`CallHook::before`] (the daemon injects latency on one
//!    cluster's calls this way), then makes the call;
//! 2. records it in [`Metrics`]: `flightdeck_cloud_calls_total{cloud, service, verb,
//!    status_class}` and `flightdeck_cloud_call_duration_seconds{cloud, service, verb}`.
//!    The duration includes the hook's wait: injected latency looks like a slow cloud.
//!
//! `verb` is the provider method (`list_servers`); `service` is the API it speaks
//! ([`Services`]); `status_class` is `2xx` for `Ok`, else `4xx`/`5xx` from the error's
//! HTTP status, or `error` when the cloud gave none (connection errors, XML-RPC faults,
//! capabilities a cloud does not have).

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use flightdeck_cloud::ownership::TAG_CLUSTER;
use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{
    CloudError, Compute, EndpointService, GuestCluster, GuestDrain, HealthMonitor,
    HealthMonitorCreate, Image, ImageCreate, Instantiate, Listener, ListenerCreate, LoadBalancer,
    LoadBalancerCreate, LoadBalancing, Member, MemberCreate, Network, Node, Ownership, Pod, Pool,
    PoolCreate, Route, Router, SecurityGroup, SecurityGroupRuleCreate, Server, ServerCreate,
    TemplateCreate, Templates, VirtualMachines, VmTemplate, Vmi,
};

use crate::metrics::Metrics;

/// One cloud call, as a hook sees it before it is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallInfo {
    /// The API the call speaks: `nova`, `neutron`, `octavia`, `kubernetes`, ...
    pub service: &'static str,
    /// The provider method: `list_servers`, `create_member`, ...
    pub verb: &'static str,
    /// The cluster the call is for, when the call says: the `Ownership` of lists and
    /// guest-cluster calls, the `flightdeck-cluster=` tag of creates. `None` for calls
    /// by ID (deletes, routes, members of a pool, templates and images).
    pub cluster: Option<String>,
}

/// Runs before every call; the call waits for its future.
pub trait CallHook: Send + Sync {
    fn before(&self, call: &CallInfo) -> impl Future<Output = ()> + Send;
}

/// No hook: calls go out at once.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHook;

impl CallHook for NoHook {
    fn before(&self, _call: &CallInfo) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

impl<H: CallHook> CallHook for Arc<H> {
    fn before(&self, call: &CallInfo) -> impl Future<Output = ()> + Send {
        (**self).before(call)
    }
}

/// The `service` label of each capability's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Services {
    pub compute: &'static str,
    pub network: &'static str,
    pub load_balancing: &'static str,
    pub guest: &'static str,
    pub templates: &'static str,
    pub vms: &'static str,
    pub drain: &'static str,
}

impl Services {
    /// The APIs a cloud's calls speak. Servers are Nova's on OpenStack, VMs of
    /// OpenNebula's XML-RPC API, or KubeVirt VirtualMachines; every other capability
    /// names one API whatever the cloud (a cloud without it answers with an error).
    /// `cloud` is matched loosely: `sim/opennebula` and `opennebula:host` are OpenNebula.
    pub fn for_cloud(cloud: &str) -> Services {
        let compute = if cloud.contains("opennebula") {
            "opennebula"
        } else if cloud.contains("kubevirt") {
            "kubevirt"
        } else {
            "nova"
        };
        Services {
            compute,
            network: "neutron",
            load_balancing: "octavia",
            guest: "kubernetes",
            templates: "opennebula",
            vms: "kubevirt",
            drain: "kubernetes",
        }
    }
}

/// `2xx` for `Ok`; for an error, `4xx` or `5xx` from its HTTP status, else `error`.
pub fn status_class<T>(result: &std::result::Result<T, CloudError>) -> &'static str {
    match result {
        Ok(_) => "2xx",
        Err(e) => match e.status {
            Some(400..=499) => "4xx",
            Some(500..=599) => "5xx",
            _ => "error",
        },
    }
}

/// The cluster a create request's ownership tags name.
pub fn cluster_of(tags: &[String]) -> Option<String> {
    tags.iter()
        .find_map(|t| t.strip_prefix(TAG_CLUSTER))
        .map(str::to_string)
}

/// A provider whose calls are measured and may be held up by a hook.
pub struct Instrumented<P, H = NoHook> {
    inner: Arc<P>,
    cloud: String,
    services: Services,
    metrics: Metrics,
    hook: H,
}

impl<P, H: Clone> Clone for Instrumented<P, H> {
    fn clone(&self) -> Self {
        Instrumented {
            inner: self.inner.clone(),
            cloud: self.cloud.clone(),
            services: self.services,
            metrics: self.metrics.clone(),
            hook: self.hook.clone(),
        }
    }
}

impl<P> Instrumented<P, NoHook> {
    /// Wraps `inner`; `cloud` is the `cloud` label (`openstack`, `opennebula`,
    /// `kubevirt`), which also picks the [`Services`].
    pub fn new(inner: Arc<P>, cloud: impl Into<String>, metrics: Metrics) -> Self {
        let cloud = cloud.into();
        Instrumented {
            inner,
            services: Services::for_cloud(&cloud),
            cloud,
            metrics,
            hook: NoHook,
        }
    }
}

impl<P, H> Instrumented<P, H> {
    /// The same provider with `hook` run before every call.
    pub fn with_hook<H2: CallHook>(self, hook: H2) -> Instrumented<P, H2> {
        Instrumented {
            inner: self.inner,
            cloud: self.cloud,
            services: self.services,
            metrics: self.metrics,
            hook,
        }
    }

    /// The same provider with other `service` labels.
    pub fn with_services(mut self, services: Services) -> Self {
        self.services = services;
        self
    }

    pub fn inner(&self) -> &Arc<P> {
        &self.inner
    }

    pub fn hook(&self) -> &H {
        &self.hook
    }

    pub fn cloud(&self) -> &str {
        &self.cloud
    }
}

impl<P, H: CallHook> Instrumented<P, H> {
    /// Runs the hook, then the call `make` starts (it is not even built before the hook
    /// is done), and records it.
    async fn call<T, F, Fut>(
        &self,
        service: &'static str,
        verb: &'static str,
        cluster: Option<String>,
        make: F,
    ) -> Result<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let start = Instant::now();
        let info = CallInfo {
            service,
            verb,
            cluster,
        };
        self.hook.before(&info).await;
        let result = make().await;
        self.metrics.cloud_call(
            &self.cloud,
            service,
            verb,
            status_class(&result),
            start.elapsed().as_secs_f64(),
        );
        result
    }
}

/// One forwarding method: `forward!(service_field, method(arg: Type, ...) -> Output, cluster)`.
macro_rules! forward {
    ($service:ident, $verb:ident($($arg:ident: $ty:ty),*) -> $out:ty, $cluster:expr) => {
        fn $verb(&self, $($arg: $ty),*) -> impl Future<Output = Result<$out>> + Send {
            self.call(self.services.$service, stringify!($verb), $cluster, move || {
                self.inner.$verb($($arg),*)
            })
        }
    };
}

impl<P: Compute + Send + Sync, H: CallHook> Compute for Instrumented<P, H> {
    forward!(compute, list_servers(owner: &Ownership) -> Vec<Server>, Some(owner.cluster.clone()));
    forward!(compute, create_server(req: &ServerCreate) -> Server, cluster_of(&req.tags));
    forward!(compute, delete_server(id: &str) -> (), None);
    forward!(compute, server_gone(id: &str) -> bool, None);
    forward!(compute, add_security_group(server_id: &str, group: &str) -> (), None);
}

impl<P: flightdeck_cloud::Identity + Send + Sync, H: CallHook> flightdeck_cloud::Identity
    for Instrumented<P, H>
{
    forward!(compute, list_named(owner: &Ownership) -> Vec<flightdeck_cloud::NamedObject>,
        Some(owner.cluster.clone()));
}

impl<P: Network + Send + Sync, H: CallHook> Network for Instrumented<P, H> {
    forward!(network, list_security_groups(owner: &Ownership) -> Vec<SecurityGroup>,
        Some(owner.cluster.clone()));
    forward!(network, create_security_group(name: &str, tags: &[String]) -> SecurityGroup,
        cluster_of(tags));
    forward!(network, create_security_group_rule(req: &SecurityGroupRuleCreate)
        -> flightdeck_cloud::SecurityGroupRule, None);
    forward!(network, delete_security_group(id: &str) -> (), None);
    forward!(network, find_router(name_or_id: &str) -> Router, None);
    forward!(network, addresses_in_use(addresses: &[IpAddr]) -> Vec<IpAddr>, None);
    forward!(network, add_extra_routes(router_id: &str, routes: &[Route]) -> Router, None);
    forward!(network, remove_extra_routes(router_id: &str, routes: &[Route]) -> Router, None);
}

impl<P: LoadBalancing + Send + Sync, H: CallHook> LoadBalancing for Instrumented<P, H> {
    forward!(load_balancing, list_load_balancers(owner: &Ownership) -> Vec<LoadBalancer>,
        Some(owner.cluster.clone()));
    forward!(load_balancing, list_listeners(owner: &Ownership) -> Vec<Listener>,
        Some(owner.cluster.clone()));
    forward!(load_balancing, list_pools(owner: &Ownership) -> Vec<Pool>,
        Some(owner.cluster.clone()));
    forward!(load_balancing, list_health_monitors(owner: &Ownership) -> Vec<HealthMonitor>,
        Some(owner.cluster.clone()));
    forward!(load_balancing, list_members(pool_id: &str) -> Vec<Member>, None);
    forward!(load_balancing, create_load_balancer(req: &LoadBalancerCreate) -> LoadBalancer,
        cluster_of(&req.tags));
    forward!(load_balancing, create_listener(req: &ListenerCreate) -> Listener,
        cluster_of(&req.tags));
    forward!(load_balancing, create_pool(req: &PoolCreate) -> Pool, cluster_of(&req.tags));
    forward!(load_balancing, create_health_monitor(req: &HealthMonitorCreate) -> HealthMonitor,
        cluster_of(&req.tags));
    forward!(load_balancing, create_member(req: &MemberCreate) -> Member, cluster_of(&req.tags));
    forward!(load_balancing, add_members(pool_id: &str, members: &[MemberCreate]) -> (),
        members.first().and_then(|m| cluster_of(&m.tags)));
    forward!(load_balancing, delete_member(pool_id: &str, member_id: &str) -> (), None);
    forward!(load_balancing, delete_load_balancer_cascade(id: &str) -> (), None);
}

impl<P: GuestCluster + Send + Sync, H: CallHook> GuestCluster for Instrumented<P, H> {
    forward!(guest, list_nodes(owner: &Ownership) -> Option<Vec<Node>>,
        Some(owner.cluster.clone()));

    fn nodes_stale_since(&self, owner: &Ownership) -> Option<flightdeck_cloud::Timestamp> {
        self.inner.nodes_stale_since(owner)
    }
    fn forget_node_watches(&self) {
        self.inner.forget_node_watches()
    }
}

impl<P: Templates + Send + Sync, H: CallHook> Templates for Instrumented<P, H> {
    forward!(templates, list_templates() -> Vec<VmTemplate>, None);
    forward!(templates, create_template(req: &TemplateCreate) -> String, None);
    forward!(templates, delete_template(id: &str) -> (), None);
    forward!(templates, list_images() -> Vec<Image>, None);
    forward!(templates, create_image(req: &ImageCreate) -> String, None);
    forward!(templates, delete_image(id: &str) -> (), None);
    forward!(templates, instantiate(req: &Instantiate) -> String, cluster_of(&req.tags));
}

impl<P: VirtualMachines + Send + Sync, H: CallHook> VirtualMachines for Instrumented<P, H> {
    forward!(vms, list_vmis(owner: &Ownership) -> Vec<Vmi>, Some(owner.cluster.clone()));
    forward!(vms, delete_vmi(name: &str) -> (), None);
    forward!(vms, list_endpoint_services(owner: &Ownership) -> Vec<EndpointService>,
        Some(owner.cluster.clone()));
    forward!(vms, create_endpoint_service(req: &EndpointService) -> EndpointService,
        cluster_of(&req.tags));
    forward!(vms, delete_endpoint_service(name: &str) -> (), None);
}

impl<P: GuestDrain + Send + Sync, H: CallHook> GuestDrain for Instrumented<P, H> {
    forward!(drain, list_pods_on(owner: &Ownership, node: &str) -> Option<Vec<Pod>>,
        Some(owner.cluster.clone()));
    forward!(drain, set_unschedulable(owner: &Ownership, node: &str, unschedulable: bool) -> (),
        Some(owner.cluster.clone()));
    forward!(drain, evict_pod(owner: &Ownership, namespace: &str, name: &str) -> (),
        Some(owner.cluster.clone()));
    forward!(drain, delete_pod(owner: &Ownership, namespace: &str, name: &str) -> (),
        Some(owner.cluster.clone()));
    forward!(drain, delete_node(owner: &Ownership, node: &str) -> (),
        Some(owner.cluster.clone()));
    forward!(drain, create_bootstrap_token(owner: &Ownership,
        token: &flightdeck_cloud::BootstrapTokenSecret) -> (), Some(owner.cluster.clone()));
    forward!(drain, set_bootstrap_token_expiration(owner: &Ownership, id: &str,
        expiration: &str) -> (), Some(owner.cluster.clone()));
    forward!(drain, delete_bootstrap_token(owner: &Ownership, id: &str) -> (),
        Some(owner.cluster.clone()));
    forward!(drain, patch_node_metadata(owner: &Ownership, node: &str,
        labels: &std::collections::BTreeMap<String, Option<String>>,
        taints: Option<&[flightdeck_cloud::Taint]>) -> (),
        Some(owner.cluster.clone()));
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use flightdeck_cloud::{Provider, Role, SimClock, Timestamp};
    use flightdeck_sim::{SimCloud, SimConfig};

    use super::*;

    /// Remembers every call it sees.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<CallInfo>>);

    impl CallHook for Recorder {
        fn before(&self, call: &CallInfo) -> impl Future<Output = ()> + Send {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(call.clone());
            std::future::ready(())
        }
    }

    fn is_provider<T: Provider>(_: &T) {}

    fn owner() -> Ownership {
        Ownership {
            cluster: "demo".into(),
            uid: "u1".into(),
        }
    }

    fn sim() -> SimCloud {
        SimCloud::new(SimConfig::default(), 7, SimClock::new(Timestamp::SIM_EPOCH))
    }

    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
    }

    #[tokio::test]
    async fn calls_are_counted_by_label_and_the_hook_sees_their_cluster() {
        let metrics = Metrics::new();
        let hook = Arc::new(Recorder::default());
        let cloud = Instrumented::new(Arc::new(sim()), "openstack", metrics.clone())
            .with_hook(hook.clone());
        is_provider(&cloud);

        let servers = cloud.list_servers(&owner()).await;
        assert_eq!(servers.map(|s| s.len()), Ok(0));
        let gone = cloud.delete_server("no-such-server").await;
        assert_eq!(gone.as_ref().map_err(|e| e.status), Err(Some(404)));
        let group = cloud
            .create_security_group("demo", &owner().tags(&Role::SecurityGroup))
            .await;
        assert!(group.is_ok(), "{group:?}");

        let text = metrics.encode();
        for series in [
            r#"flightdeck_cloud_calls_total{cloud="openstack",service="nova",verb="list_servers",status_class="2xx"}"#,
            r#"flightdeck_cloud_calls_total{cloud="openstack",service="nova",verb="delete_server",status_class="4xx"}"#,
            r#"flightdeck_cloud_calls_total{cloud="openstack",service="neutron",verb="create_security_group",status_class="2xx"}"#,
            r#"flightdeck_cloud_call_duration_seconds_count{cloud="openstack",service="nova",verb="list_servers"}"#,
        ] {
            assert_eq!(value(&text, series), Some(1.0), "{series} in\n{text}");
        }

        let seen = hook.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let clusters: Vec<(&str, Option<&str>)> = seen
            .iter()
            .map(|c| (c.verb, c.cluster.as_deref()))
            .collect();
        assert_eq!(
            clusters,
            [
                ("list_servers", Some("demo")),
                ("delete_server", None),
                ("create_security_group", Some("demo")),
            ]
        );
    }

    #[tokio::test]
    async fn a_missing_capability_is_an_error_without_status() {
        let metrics = Metrics::new();
        let cloud = Instrumented::new(Arc::new(sim()), "sim/kubevirt/default", metrics.clone());
        // The simulator's OpenStack has no KubeVirt: a permanent error with no HTTP status.
        let vmis = cloud.list_vmis(&owner()).await;
        assert!(vmis.is_err());
        let text = metrics.encode();
        let series = r#"flightdeck_cloud_calls_total{cloud="sim/kubevirt/default",service="kubevirt",verb="list_vmis",status_class="error"}"#;
        assert_eq!(value(&text, series), Some(1.0), "{text}");
    }

    /// `promtool`, Debian's `prometheus` package: installed by scripts/need-package.sh
    /// when missing (waiting for CI's background apt run); the test fails, saying so,
    /// where it cannot be.
    fn need_promtool() {
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/need-package.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .args(["promtool", "prometheus"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "promtool is missing and was not installed (Debian's `prometheus` package; \
             {} installs it): {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Every kind of metric, filled, passes `promtool check metrics`.
    #[tokio::test]
    async fn promtool_accepts_the_exposition() {
        use std::io::Write;
        use std::process::{Command, Stdio};

        let metrics = Metrics::new();
        let cloud = Instrumented::new(Arc::new(sim()), "openstack", metrics.clone());
        let _ = cloud.list_servers(&owner()).await;
        let _ = cloud.delete_server("no-such-server").await;
        let _ = cloud.list_templates().await;
        metrics.reconciled("success", 0.3);
        metrics.reconciled("conflict", 2.0);
        metrics.set_queue(2, 1);
        metrics.on_cluster_event("demo", "AddRoutes", "add route(s) 10.244.3.0/24 via 10.0.0.21: pod traffic must reach demo-workers-9 (10.244.3.0/24)");
        let mut fleet = crate::metrics::FleetGauges::default();
        fleet.add_cluster("Ready", ["RouteLimitReached"], 1);
        fleet.add_set("demo", "control-plane", 0, 1);
        metrics.set_fleet(&fleet);
        let text = metrics.encode();

        need_promtool();
        let mut child = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("promtool runs");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(text.as_bytes()).expect("write to promtool");
        }
        let out = child.wait_with_output().expect("promtool runs");
        let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && said.trim().is_empty(),
            "promtool: {said}\n{text}"
        );
    }

    #[test]
    fn status_classes() {
        let err = |status| {
            Err::<(), _>(CloudError::new(
                flightdeck_cloud::ErrorClass::Transient,
                "nova",
                "GET /servers",
                status,
                "x",
            ))
        };
        assert_eq!(status_class(&Ok::<(), CloudError>(())), "2xx");
        assert_eq!(status_class(&err(Some(409))), "4xx");
        assert_eq!(status_class(&err(Some(503))), "5xx");
        assert_eq!(status_class(&err(None)), "error");
        assert_eq!(status_class(&err(Some(302))), "error");
    }
}
