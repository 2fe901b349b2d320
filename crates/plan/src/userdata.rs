//! A machine's cloud-init user data (`machine.userData`), with its variables filled in
//! when the machine is created.

use crate::Planner;
use crate::memory::{MachineRecord, MachineRole};

/// The set's user data for `record`, rendered for it; `None` when the set has none.
pub(crate) fn render_for(p: &Planner<'_>, record: &MachineRecord) -> Option<String> {
    let spec = &p.spec.spec;
    let user_data = match &record.role {
        MachineRole::ControlPlane => spec.control_plane.machine.user_data.as_ref(),
        MachineRole::Pool(name) => spec
            .node_pools
            .iter()
            .find(|pool| pool.name.as_str() == name)
            .and_then(|pool| pool.machine.user_data.as_ref()),
    }?;
    let (address, port) = endpoint(p);
    let role = match &record.role {
        MachineRole::ControlPlane => "control-plane",
        MachineRole::Pool(_) => "worker",
    };
    user_data.render(&[
        ("cluster", p.spec.name().as_str()),
        ("machine", &record.name),
        ("role", role),
        ("endpoint.address", &address),
        ("endpoint.port", &port),
    ])
}

/// The cluster's API endpoint as far as it is known: the load balancer's VIP
/// (OpenStack), the spec's endpoint (OpenNebula), the endpoint Service's address
/// (KubeVirt: its load balancer's, else its cluster IP, which the VMIs on the infra
/// cluster's pod network reach); empty while unknown.
pub(crate) fn endpoint(p: &Planner<'_>) -> (String, String) {
    let spec = &p.spec.spec;
    let port = spec.api_load_balancer.port.get().to_string();
    if let Some(one) = &spec.provider.opennebula {
        return (one.endpoint.to_string(), port);
    }
    if spec.provider.is_kubevirt() {
        let name = format!("{}-api", p.spec.name());
        let address = p
            .observed
            .services
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.address.clone())
            .unwrap_or_default();
        return (address, port);
    }
    let vip = p
        .memory
        .ids
        .load_balancer
        .as_ref()
        .and_then(|id| p.observed.load_balancers.iter().find(|lb| &lb.id == id))
        .and_then(|lb| lb.vip_address)
        .map(|ip| ip.to_string())
        .unwrap_or_default();
    (vip, port)
}

/// `host:port`, an IPv6 host in brackets.
pub(crate) fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}
