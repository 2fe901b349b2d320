//! flightdeck's own access to a workload cluster whose PKI it holds: at each reconcile
//! of a kubeadm cluster, the engine makes sure the [`AccessBook`] it shares with the
//! provider's workload clients holds a client certificate of its own, signed by the
//! cluster CA and valid for a while yet, for the cluster's endpoint as known now. It
//! issues a new one when there is none, when the endpoint moved, or once less than
//! [`ACCESS_RENEW_BEFORE`] of its life is left: well before it ends, so that a
//! reconcile never finds itself locked out.
//!
//! The certificate is in the `kubeadm:cluster-admins` group (Kubernetes 1.29 and later;
//! `system:masters` before), as kubeadm's own admin.conf is. It lives in memory only: a
//! restarted engine issues another.

use flightdeck_cloud::{Access, AccessBook, WorkloadAccess};
use flightdeck_plan::memory::Memory;
use flightdeck_plan::status::ClusterStatus;
use flightdeck_spec::{Cluster, Duration};

use flightdeck_cloud::Timestamp;
use flightdeck_guest::ClusterPki;

use crate::config::EngineError;

/// The user flightdeck's own certificate names.
pub const ACCESS_USER: &str = "flightdeck";
/// How long flightdeck's own certificate lives.
pub const ACCESS_TTL: Duration = Duration::from_secs(24 * 3600);
/// How much of its life must be left: less, and a new one is issued.
pub const ACCESS_RENEW_BEFORE: Duration = Duration::from_secs(8 * 3600);

/// The group that makes a kubeadm cluster's client its administrator, by version.
pub(crate) fn admin_group(version: &str) -> Result<&'static str, String> {
    let v = flightdeck_guest::kubeadm::KubernetesVersion::parse(version)
        .map_err(|e| format!("spec.controlPlane.version: {e}"))?;
    Ok(if (v.major, v.minor) >= (1, 29) {
        "kubeadm:cluster-admins"
    } else {
        "system:masters"
    })
}

/// Keeps `name`'s entry in `book` current (see the module's comment). A cluster whose
/// workload API is not reached with flightdeck's own certificate (`bootstrap: none`) is
/// not in the book.
/// `now` is the engine's time; `open_pki` opens the cluster's PKI from the store (`None`
/// before its first bootstrap made it).
pub(crate) fn keep(
    book: &AccessBook,
    name: &str,
    spec: &Cluster,
    status: &ClusterStatus,
    memory: &Memory,
    now: Timestamp,
    open_pki: impl FnOnce() -> Result<Option<ClusterPki>, EngineError>,
) -> Result<(), EngineError> {
    let s = &spec.spec;
    // A cluster being deleted is not drained: flightdeck has no more business with its
    // workload API.
    if !s.bootstrap.kubeadm() || memory.deletion_requested.is_some() {
        book.remove(name);
        return Ok(());
    }
    let Some(server) = api_server(s, status) else {
        book.set(name, Access::Pending);
        return Ok(());
    };
    if let Some(Access::Issued(held)) = book.get(name)
        && held.server == server
        && now.plus(ACCESS_RENEW_BEFORE) < held.not_after
    {
        return Ok(());
    }
    let Some(pki) = open_pki()? else {
        // The PKI is made with the cluster's first bootstrap; until then there is no
        // workload cluster to reach.
        book.set(name, Access::Pending);
        return Ok(());
    };
    let group = admin_group(s.control_plane.version.as_str())
        .map_err(|e| EngineError::Kubeconfig(format!("cluster {name}: {e}")))?;
    let now_secs = i64::try_from(now.millis() / 1000).unwrap_or(i64::MAX);
    let ttl_secs = i64::try_from(ACCESS_TTL.as_millis() / 1000).unwrap_or(i64::MAX);
    let client = pki
        .issue_client(ACCESS_USER, &[group], now_secs, ttl_secs)
        .map_err(|e| EngineError::Kubeconfig(e.to_string()))?;
    let serial = format!(
        "{:016x}",
        flightdeck_spec::fnv1a(client.cert_pem.as_bytes())
    );
    let not_after = now.plus(ACCESS_TTL);
    tracing::info!(cluster = name, %server, serial, until = %not_after,
        "flightdeck issued itself a client certificate for the workload cluster");
    book.set(
        name,
        Access::Issued(WorkloadAccess {
            server,
            ca_pem: pki.cluster_ca.cert_pem.clone(),
            cert_pem: client.cert_pem,
            key_pem: client.key_pem.expose().to_string(),
            serial,
            not_after,
        }),
    );
    Ok(())
}

/// The `https://` URL of the cluster's API server, if known: the load balancer's VIP
/// on OpenStack, the spec's endpoint on OpenNebula, the endpoint Service's address on
/// KubeVirt.
pub(crate) fn api_server(
    spec: &flightdeck_spec::ClusterSpec,
    status: &ClusterStatus,
) -> Option<String> {
    let port = spec.api_load_balancer.port.get();
    if spec.provider.is_kubevirt() {
        return status
            .api_endpoint
            .as_ref()
            .map(|endpoint| format!("https://{endpoint}"));
    }
    let lb = status.load_balancer.as_ref();
    let host = match (&spec.provider.opennebula, lb.and_then(|l| l.vip_address)) {
        (Some(one), _) => one.endpoint.as_str().to_string(),
        (None, Some(std::net::IpAddr::V6(ip))) => format!("[{ip}]"),
        (None, Some(ip)) => ip.to_string(),
        (None, None) => return None,
    };
    Some(format!("https://{host}:{port}"))
}
