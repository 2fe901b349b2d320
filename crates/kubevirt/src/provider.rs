//! [`KubeVirtCloud`]: flightdeck's provider traits over the infra cluster's API (KubeVirt
//! VirtualMachines, VMIs and the endpoint Service) and the workload cluster's API (nodes,
//! pods, evictions; through [`KubeGuest`], as on every cloud).
//!
//! - `Compute`: VMs are servers ([`crate::servers`]). `list_servers` is one list of VMs
//!   and one of VMIs, both by the label `flightdeck.dev/uid=<uid>`. `create_server` POSTs
//!   a VirtualMachine; `delete_server` deletes it with foreground propagation, so the VM
//!   is listed (as deleting) until its VMI is gone.
//! - `VirtualMachines`: VMIs and the control-plane endpoint Service `<cluster>-api`,
//!   which selects the cluster's control-plane VMIs.
//! - `Network`, `LoadBalancing`: KubeVirt clusters have neither Neutron nor Octavia; every
//!   call is a Permanent error (the engine never makes them for a KubeVirt cluster).
//! - `Templates`: the default answers (no OpenNebula templates).

use std::path::Path;

use flightdeck_cloud::ownership::uid_of;
use flightdeck_cloud::provider::Result;
use flightdeck_cloud::{
    CloudError, Compute, EndpointService, ErrorClass, GuestCluster, GuestDrain, HealthMonitor,
    HealthMonitorCreate, Listener, ListenerCreate, LoadBalancer, LoadBalancerCreate, LoadBalancing,
    Member, MemberCreate, Network, Node, Ownership, Pool, PoolCreate, Route, Router, SecurityGroup,
    SecurityGroupRule, SecurityGroupRuleCreate, Server, ServerCreate, Templates, VirtualMachines,
    Vmi,
};
use k8s_openapi::api::core::v1::{Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

use crate::labels::{control_plane_selector, labels_of, tags_of, uid_selector};
use crate::objects::{VirtualMachine, VirtualMachineInstance};
use crate::servers::{server_of, virtual_machine, vm_create_of, vmi_of};
use crate::userdata;
use flightdeck_workload::clients::{WorkloadClients, client_from_file};
use flightdeck_workload::errors::{self, CallKind, INFRA};
use flightdeck_workload::list::{ListError, list_all};
use flightdeck_workload::{KubeGuest, ProviderIdFormat};

/// The real KubeVirt provider: the infra cluster's client and namespace, and how to
/// reach each workload cluster.
pub struct KubeVirtCloud<W> {
    infra: Client,
    namespace: String,
    guest: KubeGuest<W>,
}

impl<W> std::fmt::Debug for KubeVirtCloud<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeVirtCloud")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl<W> KubeVirtCloud<W> {
    /// A provider over `infra`, any client: one from a kubeconfig, or an in-process one
    /// (`kube::Client::new(service, "default")`). Nothing here assumes a URL.
    pub fn new(infra: Client, namespace: &str, workload: W) -> Self {
        KubeVirtCloud {
            infra,
            namespace: namespace.to_string(),
            guest: KubeGuest::new(workload, ProviderIdFormat::KubeVirt),
        }
    }

    /// A provider over the infra cluster of the kubeconfig at `path` (its current
    /// context), with kube's own retry off and each request bounded (see
    /// [`flightdeck_workload::clients::client_from`]). A missing or malformed file is a Permanent error
    /// naming it. Nothing is sent yet.
    pub async fn from_kubeconfig(
        path: impl AsRef<Path>,
        namespace: &str,
        workload: W,
    ) -> Result<Self> {
        let infra = client_from_file(INFRA, path.as_ref(), namespace).await?;
        Ok(KubeVirtCloud::new(infra, namespace, workload))
    }

    /// The same provider, with the workload clusters' nodes watched rather than listed
    /// on every pass (see [`flightdeck_workload::watch`]); `clock` stamps a broken watch.
    pub fn watch_nodes(self, clock: std::sync::Arc<dyn flightdeck_cloud::Clock>) -> Self {
        KubeVirtCloud {
            guest: self.guest.with_watch(clock),
            ..self
        }
    }

    /// The same provider, with the workload clusters' nodes watched and read on demand
    /// (see [`flightdeck_workload::pumped`]): for a transport whose time is virtual.
    pub fn pump_node_watches(self, clock: std::sync::Arc<dyn flightdeck_cloud::Clock>) -> Self {
        KubeVirtCloud {
            guest: self.guest.with_pumped_watch(clock),
            ..self
        }
    }

    pub fn infra(&self) -> &Client {
        &self.infra
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn workload(&self) -> &W {
        self.guest.clients()
    }

    pub(crate) fn vms(&self) -> Api<VirtualMachine> {
        Api::namespaced(self.infra.clone(), &self.namespace)
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.infra.clone(), &self.namespace)
    }

    /// Makes the Secret holding `vm`'s user data, before the VM (see
    /// [`crate::userdata`]). One of that name left by an earlier attempt for the same
    /// cluster is taken over (its data replaced); one of anyone else's is refused.
    async fn put_user_data_secret(&self, vm: &VirtualMachine, data: &str) -> Result<()> {
        const OP: &str = "create secret";
        let secret = userdata::secret_for(vm, data);
        let name = secret.metadata.name.clone().unwrap_or_default();
        match self.secrets().create(&PostParams::default(), &secret).await {
            Ok(_) => {
                tracing::debug!(secret = %name, "created the user-data Secret");
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                const TAKE: &str = "replace secret";
                let existing = self.secrets().get(&name).await.map_err(infra_error(TAKE))?;
                if !userdata::ours(&existing, &secret) {
                    return Err(permanent(
                        OP,
                        format!(
                            "Secret {}/{name} exists and is not this cluster's (no matching {} label); flightdeck does not overwrite it",
                            self.namespace,
                            crate::labels::LABEL_UID
                        ),
                    ));
                }
                let patch = serde_json::json!({"data": secret.data});
                self.secrets()
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(drop)
                    .map_err(infra_error(TAKE))?;
                tracing::debug!(secret = %name, "took over the user-data Secret an earlier attempt left");
                Ok(())
            }
            Err(e) => Err(infra_error(OP)(e)),
        }
    }

    /// Makes the user-data Secret owned by the VM just created, so the infra cluster
    /// deletes it with the VM. Not fatal when it fails: deleting the server deletes
    /// the Secret by name too.
    async fn own_user_data_secret(&self, created: &VirtualMachine) {
        let name = created.metadata.name.clone().unwrap_or_default();
        let secret = userdata::secret_name(&name);
        let owned = match userdata::owned_by(created) {
            Ok(patch) => self
                .secrets()
                .patch(&secret, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Err(e) => Err(e),
        };
        if let Err(e) = owned {
            tracing::warn!(vm = %name, error = %e, "could not make the user-data Secret owned by its VirtualMachine; it is deleted with the server by name");
        }
    }

    /// Deletes every Secret carrying cluster `uid`'s label.
    async fn delete_cluster_secrets(&self, uid: &str) -> Result<()> {
        let lp = ListParams::default().labels(&format!("{}={uid}", crate::labels::LABEL_UID));
        let secrets = list_all(&self.secrets(), &lp)
            .await
            .map_err(infra_list_error("list secrets"))?;
        for secret in secrets {
            let name = secret.metadata.name.unwrap_or_default();
            match self.secrets().delete(&name, &DeleteParams::default()).await {
                Ok(_) => tracing::debug!(secret = %name, "deleted a Secret the cluster left"),
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(infra_error("delete secret")(e)),
            }
        }
        Ok(())
    }

    /// Deletes a user-data Secret by name; one that is not there is fine.
    async fn delete_user_data_secret(&self, vm: &str) -> Result<()> {
        match self
            .secrets()
            .delete(&userdata::secret_name(vm), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(infra_error("delete secret")(e)),
        }
    }

    fn vmis(&self) -> Api<VirtualMachineInstance> {
        Api::namespaced(self.infra.clone(), &self.namespace)
    }

    pub(crate) fn services(&self) -> Api<Service> {
        Api::namespaced(self.infra.clone(), &self.namespace)
    }
}

fn permanent(operation: &str, message: impl Into<String>) -> CloudError {
    CloudError::new(ErrorClass::Permanent, INFRA, operation, None, message)
}

fn infra_error(operation: &str) -> impl FnOnce(kube::Error) -> CloudError + '_ {
    move |e| errors::cloud_error(INFRA, operation, CallKind::Plain, e)
}

pub(crate) fn infra_list_error(operation: &str) -> impl FnOnce(ListError) -> CloudError + '_ {
    move |e| e.into_cloud(INFRA, operation)
}

/// The API port of the endpoint Service.
const API_PORT_NAME: &str = "api";

/// A Service as flightdeck's endpoint. Its address is the load balancer's, if the
/// Service has one (that is the address reachable from outside the infra cluster), else
/// its cluster IP.
pub fn endpoint_of(svc: &Service) -> EndpointService {
    let spec = svc.spec.clone().unwrap_or_default();
    let port = spec
        .ports
        .as_ref()
        .and_then(|p| p.first())
        .and_then(|p| u16::try_from(p.port).ok())
        .unwrap_or(0);
    let ingress_ip = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .and_then(|i| i.first())
        .and_then(|i| i.ip.clone());
    let cluster_ip = spec.cluster_ip.filter(|ip| !ip.is_empty() && ip != "None");
    EndpointService {
        name: svc.metadata.name.clone().unwrap_or_default(),
        port,
        address: ingress_ip.filter(|ip| !ip.is_empty()).or(cluster_ip),
        tags: tags_of(&svc.metadata.labels.clone().unwrap_or_default()),
    }
}

/// The Service for `req`: `req.port` to the same port of the cluster's control-plane
/// VMIs (`flightdeck.dev/uid=<uid>,flightdeck.dev/control-plane=true`).
pub fn endpoint_service(
    req: &EndpointService,
    namespace: &str,
) -> std::result::Result<Service, String> {
    let uid = uid_of(&req.tags).ok_or_else(|| {
        format!(
            "the Service {:?} has no flightdeck-uid tag to select by",
            req.name
        )
    })?;
    Ok(Service {
        metadata: ObjectMeta {
            name: Some(req.name.clone()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels_of(&req.tags)?),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(control_plane_selector(uid)),
            ports: Some(vec![ServicePort {
                name: Some(API_PORT_NAME.to_string()),
                protocol: Some("TCP".to_string()),
                port: i32::from(req.port),
                target_port: Some(IntOrString::Int(i32::from(req.port))),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    })
}

impl<W: Send + Sync> Compute for KubeVirtCloud<W> {
    async fn list_servers(&self, owner: &Ownership) -> Result<Vec<Server>> {
        let lp = ListParams::default().labels(&uid_selector(owner));
        let vms = list_all(&self.vms(), &lp)
            .await
            .map_err(infra_list_error("list virtualmachines"))?;
        let vmis = list_all(&self.vmis(), &lp)
            .await
            .map_err(infra_list_error("list virtualmachineinstances"))?;
        Ok(vms
            .iter()
            .map(|vm| {
                let vmi = vmis.iter().find(|i| i.metadata.name == vm.metadata.name);
                server_of(vm, vmi)
            })
            .collect())
    }

    async fn create_server(&self, req: &ServerCreate) -> Result<Server> {
        const OP: &str = "create virtualmachine";
        let vm =
            virtual_machine(&vm_create_of(req), &self.namespace).map_err(|e| permanent(OP, e))?;
        let secret = req
            .user_data
            .as_deref()
            .filter(|d| userdata::needs_secret(d));
        if let Some(data) = secret {
            self.put_user_data_secret(&vm, data).await?;
        }
        let created = match self.vms().create(&PostParams::default(), &vm).await {
            Ok(created) => created,
            Err(e) => {
                if secret.is_some()
                    && let Err(undo) = self.delete_user_data_secret(&req.name).await
                {
                    tracing::warn!(vm = %req.name, error = %undo, "could not delete the user-data Secret of a VirtualMachine that was not made; the next attempt takes it over");
                }
                return Err(infra_error(OP)(e));
            }
        };
        tracing::debug!(vm = %req.name, namespace = %self.namespace, "created VirtualMachine");
        if secret.is_some() {
            self.own_user_data_secret(&created).await;
        }
        Ok(server_of(&created, None))
    }

    async fn delete_server(&self, id: &str) -> Result<()> {
        self.vms()
            .delete(id, &DeleteParams::foreground())
            .await
            .map_err(infra_error("delete virtualmachine"))?;
        tracing::debug!(vm = %id, namespace = %self.namespace, "deleting VirtualMachine");
        // Its user-data Secret goes with it by its ownerReference; by name too, for one
        // whose ownership was never written (a failed patch after the VM was made).
        if let Err(e) = self.delete_user_data_secret(id).await {
            tracing::warn!(vm = %id, error = %e, "could not delete the VirtualMachine's user-data Secret by name; the infra cluster deletes it with the VM if it is owned");
        }
        Ok(())
    }

    /// A server's ID is its VirtualMachine's name.
    async fn server_gone(&self, id: &str) -> Result<bool> {
        match self.vms().get_opt(id).await {
            Ok(vm) => Ok(vm.is_none()),
            Err(e) => Err(infra_error("get virtualmachine")(e)),
        }
    }

    async fn add_security_group(&self, _server_id: &str, _group: &str) -> Result<()> {
        Err(permanent(
            "add security group",
            "KubeVirt VMs have no security groups; their traffic is governed by the infra \
             cluster's NetworkPolicies",
        ))
    }
}

impl<W: Send + Sync> VirtualMachines for KubeVirtCloud<W> {
    async fn list_vmis(&self, owner: &Ownership) -> Result<Vec<Vmi>> {
        let lp = ListParams::default().labels(&uid_selector(owner));
        let vmis = list_all(&self.vmis(), &lp)
            .await
            .map_err(infra_list_error("list virtualmachineinstances"))?;
        Ok(vmis.iter().map(vmi_of).collect())
    }

    async fn delete_vmi(&self, name: &str) -> Result<()> {
        self.vmis()
            .delete(name, &DeleteParams::default())
            .await
            .map_err(infra_error("delete virtualmachineinstance"))?;
        tracing::debug!(vmi = %name, namespace = %self.namespace, "deleting VirtualMachineInstance");
        Ok(())
    }

    async fn list_endpoint_services(&self, owner: &Ownership) -> Result<Vec<EndpointService>> {
        let lp = ListParams::default().labels(&uid_selector(owner));
        let services = list_all(&self.services(), &lp)
            .await
            .map_err(infra_list_error("list services"))?;
        Ok(services.iter().map(endpoint_of).collect())
    }

    async fn create_endpoint_service(&self, req: &EndpointService) -> Result<EndpointService> {
        const OP: &str = "create service";
        let svc = endpoint_service(req, &self.namespace).map_err(|e| permanent(OP, e))?;
        let created = self
            .services()
            .create(&PostParams::default(), &svc)
            .await
            .map_err(infra_error(OP))?;
        Ok(endpoint_of(&created))
    }

    /// The last step of a cluster's deletion (no VM is left behind the endpoint). First
    /// every Secret of the cluster (by its uid label) goes: user data whose ownership
    /// was never written, or an attempt's whose VM was never made and whose undo
    /// failed. A Secret that cannot be deleted keeps the Service, so the deletion is
    /// not confirmed and this runs again.
    async fn delete_endpoint_service(&self, name: &str) -> Result<()> {
        let service = self
            .services()
            .get_opt(name)
            .await
            .map_err(infra_error("get service"))?;
        if let Some(uid) = service
            .as_ref()
            .and_then(|s| s.metadata.labels.as_ref())
            .and_then(|l| l.get(crate::labels::LABEL_UID))
        {
            self.delete_cluster_secrets(uid).await?;
        }
        self.services()
            .delete(name, &DeleteParams::default())
            .await
            .map_err(infra_error("delete service"))?;
        Ok(())
    }
}

const NO_NEUTRON: &str = "KubeVirt clusters have no Neutron: VMs join the infra cluster's pod \
                          network, and the control-plane endpoint is a Service";
const NO_OCTAVIA: &str = "KubeVirt clusters have no Octavia: the control-plane endpoint is the \
                          Service <cluster>-api in the infra cluster";

impl<W: Send + Sync> Network for KubeVirtCloud<W> {
    async fn list_security_groups(&self, _owner: &Ownership) -> Result<Vec<SecurityGroup>> {
        Err(permanent("list security groups", NO_NEUTRON))
    }
    async fn create_security_group(&self, _name: &str, _tags: &[String]) -> Result<SecurityGroup> {
        Err(permanent("create security group", NO_NEUTRON))
    }
    async fn create_security_group_rule(
        &self,
        _req: &SecurityGroupRuleCreate,
    ) -> Result<SecurityGroupRule> {
        Err(permanent("create security group rule", NO_NEUTRON))
    }
    async fn delete_security_group(&self, _id: &str) -> Result<()> {
        Err(permanent("delete security group", NO_NEUTRON))
    }
    async fn find_router(&self, _name_or_id: &str) -> Result<Router> {
        Err(permanent("find router", NO_NEUTRON))
    }
    async fn addresses_in_use(
        &self,
        _addresses: &[std::net::IpAddr],
    ) -> Result<Vec<std::net::IpAddr>> {
        Err(permanent("addresses in use", NO_NEUTRON))
    }
    async fn add_extra_routes(&self, _router_id: &str, _routes: &[Route]) -> Result<Router> {
        Err(permanent("add extra routes", NO_NEUTRON))
    }
    async fn remove_extra_routes(&self, _router_id: &str, _routes: &[Route]) -> Result<Router> {
        Err(permanent("remove extra routes", NO_NEUTRON))
    }
}

impl<W: Send + Sync> LoadBalancing for KubeVirtCloud<W> {
    async fn list_load_balancers(&self, _owner: &Ownership) -> Result<Vec<LoadBalancer>> {
        Err(permanent("list load balancers", NO_OCTAVIA))
    }
    async fn list_listeners(&self, _owner: &Ownership) -> Result<Vec<Listener>> {
        Err(permanent("list listeners", NO_OCTAVIA))
    }
    async fn list_pools(&self, _owner: &Ownership) -> Result<Vec<Pool>> {
        Err(permanent("list pools", NO_OCTAVIA))
    }
    async fn list_health_monitors(&self, _owner: &Ownership) -> Result<Vec<HealthMonitor>> {
        Err(permanent("list health monitors", NO_OCTAVIA))
    }
    async fn list_members(&self, _pool_id: &str) -> Result<Vec<Member>> {
        Err(permanent("list members", NO_OCTAVIA))
    }
    async fn create_load_balancer(&self, _req: &LoadBalancerCreate) -> Result<LoadBalancer> {
        Err(permanent("create load balancer", NO_OCTAVIA))
    }
    async fn create_listener(&self, _req: &ListenerCreate) -> Result<Listener> {
        Err(permanent("create listener", NO_OCTAVIA))
    }
    async fn create_pool(&self, _req: &PoolCreate) -> Result<Pool> {
        Err(permanent("create pool", NO_OCTAVIA))
    }
    async fn create_health_monitor(&self, _req: &HealthMonitorCreate) -> Result<HealthMonitor> {
        Err(permanent("create health monitor", NO_OCTAVIA))
    }
    async fn create_member(&self, _req: &MemberCreate) -> Result<Member> {
        Err(permanent("create member", NO_OCTAVIA))
    }
    async fn add_members(&self, _pool_id: &str, _members: &[MemberCreate]) -> Result<()> {
        Err(permanent("add members", NO_OCTAVIA))
    }
    async fn delete_member(&self, _pool_id: &str, _member_id: &str) -> Result<()> {
        Err(permanent("delete member", NO_OCTAVIA))
    }
    async fn delete_load_balancer_cascade(&self, _id: &str) -> Result<()> {
        Err(permanent("delete load balancer", NO_OCTAVIA))
    }
}

/// KubeVirt has no OpenNebula templates: the default answers.
impl<W: Send + Sync> Templates for KubeVirtCloud<W> {}

impl<W: WorkloadClients> GuestCluster for KubeVirtCloud<W> {
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

impl<W: WorkloadClients> GuestDrain for KubeVirtCloud<W> {
    flightdeck_cloud::forward_guest_drain!(guest);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_endpoint_service_selects_the_clusters_control_plane_vmis() {
        let owner = Ownership {
            cluster: "demo".into(),
            uid: "u1".into(),
        };
        let req = EndpointService {
            name: "demo-api".into(),
            port: 6443,
            address: None,
            tags: owner.tags(&flightdeck_cloud::Role::ApiLoadBalancer),
        };
        let svc = endpoint_service(&req, "infra").expect("service");
        let v = serde_json::to_value(&svc).expect("json");
        assert_eq!(
            v["spec"],
            json!({
                "selector": {"flightdeck.dev/uid": "u1", "flightdeck.dev/control-plane": "true"},
                "ports": [{"name": "api", "protocol": "TCP", "port": 6443, "targetPort": 6443}],
            })
        );
        assert_eq!(v["metadata"]["labels"]["flightdeck.dev/role"], "api-lb");
        let no_uid = EndpointService {
            tags: vec![],
            ..req
        };
        assert!(endpoint_service(&no_uid, "infra").is_err());
    }

    #[test]
    fn an_endpoint_address_is_the_load_balancers_else_the_cluster_ip() {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "demo-api", "labels": {"flightdeck.dev/uid": "u1"}},
            "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 6443}]},
        }))
        .expect("svc");
        let e = endpoint_of(&svc);
        assert_eq!(e.address.as_deref(), Some("10.96.0.10"));
        assert_eq!(e.port, 6443);
        assert_eq!(e.tags, vec!["flightdeck-uid=u1"]);
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "demo-api"},
            "spec": {"clusterIP": "10.96.0.10", "type": "LoadBalancer", "ports": [{"port": 6443}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}},
        }))
        .expect("svc");
        assert_eq!(endpoint_of(&svc).address.as_deref(), Some("192.0.2.10"));
        let svc: Service = serde_json::from_value(
            json!({"metadata": {"name": "x"}, "spec": {"clusterIP": "None"}}),
        )
        .expect("svc");
        assert_eq!(endpoint_of(&svc).address, None);
    }
}
