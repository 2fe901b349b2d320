//! `flightdeck get kubeconfig`: a kubeconfig for a cluster whose PKI flightdeck holds
//! (`spec.bootstrap.provider: kubeadm`), with a client certificate the cluster CA signs
//! for a short time, and the API server verified against that CA. Issuing one is an
//! event (for whom, and until when), never its content; nothing of it is kept.

use flightdeck_cloud::Provider;
use flightdeck_guest::Secret;
use flightdeck_plan::{Event, Severity};
use flightdeck_spec::Duration;
use flightdeck_store::Write;

use crate::config::EngineError;
use crate::engine::Engine;

/// The shortest and longest life of a kubeconfig's client certificate.
pub const KUBECONFIG_TTL_MIN: Duration = Duration::from_secs(60);
pub const KUBECONFIG_TTL_MAX: Duration = Duration::from_secs(7 * 24 * 3600);

impl<P: Provider> Engine<P> {
    /// A kubeconfig of cluster `name` for `user`, its client certificate valid for
    /// `ttl` from now, in the cluster administrators' group.
    pub fn issue_kubeconfig(
        &mut self,
        name: &str,
        ttl: Duration,
        user: &str,
    ) -> Result<Secret, EngineError> {
        self.known(name)?;
        if ttl < KUBECONFIG_TTL_MIN || ttl > KUBECONFIG_TTL_MAX {
            return Err(EngineError::Invalid(format!(
                "ttl {ttl}: a kubeconfig lives from {KUBECONFIG_TTL_MIN} to {KUBECONFIG_TTL_MAX}"
            )));
        }
        let pki = self
            .pki(name)?
            .ok_or_else(|| EngineError::NoPki(name.to_string()))?;
        let c = self
            .clusters
            .get(name)
            .ok_or_else(|| EngineError::UnknownCluster(name.to_string()))?;
        let server = crate::access::api_server(&c.spec.spec, &c.status)
            .ok_or_else(|| EngineError::EndpointUnknown(name.to_string()))?;
        // kubeadm binds `kubeadm:cluster-admins` to cluster-admin from 1.29 on; before,
        // its admin kubeconfig is in `system:masters`.
        let group = crate::access::admin_group(c.spec.spec.control_plane.version.as_str())
            .map_err(|e| EngineError::Kubeconfig(format!("cluster {name}: {e}")))?;
        let now = self.clock.now();
        let now_secs = i64::try_from(now.millis() / 1000).unwrap_or(i64::MAX);
        let ttl_secs = i64::try_from(ttl.as_millis() / 1000).unwrap_or(i64::MAX);
        let client = pki
            .issue_client(user, &[group], now_secs, ttl_secs)
            .map_err(|e| EngineError::Kubeconfig(e.to_string()))?;
        let text = flightdeck_guest::kubeconfig::kubeconfig(
            name,
            &server,
            &pki.cluster_ca.cert_pem,
            user,
            &client,
        )
        .map_err(|e| EngineError::Kubeconfig(e.to_string()))?;
        let until = now.plus(ttl);
        let event = Event {
            at: now,
            cluster: name.to_string(),
            severity: Severity::Normal,
            reason: "KubeconfigIssued".into(),
            message: format!(
                "a kubeconfig for {user} (group {group}) was issued, its client certificate valid until {} ({ttl})",
                flightdeck_guest::kubeconfig::utc(
                    i64::try_from(until.millis() / 1000).unwrap_or(i64::MAX)
                )
            ),
        };
        self.store.commit(vec![Write::event(name, &event)])?;
        self.events.push(event);
        Ok(text)
    }
}
