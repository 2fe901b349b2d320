//! flightdeck's own access to the workload clusters whose PKI it holds
//! (`spec.bootstrap.provider: kubeadm`): the engine issues itself a client certificate
//! from each cluster's CA and writes it here; the provider's workload clients read it
//! and reach the API server with it, verifying the server against the same CA.
//!
//! The book is shared by the one that writes (the engine) and the ones that read (the
//! providers' workload clients), in memory only: a restarted engine issues again.
//! A cluster absent from the book is reached the way its spec says
//! (`spec.workload.kubeconfig`, or the simulator's own client); a cluster present but
//! without access yet (no endpoint known) is not reachable yet.

use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::time::Timestamp;

/// How flightdeck reaches one workload cluster's API with its own certificate. It holds
/// a private key: its `Debug` shows neither the key nor the certificate.
#[derive(Clone, PartialEq, Eq)]
pub struct WorkloadAccess {
    /// `https://host:port` of the API server (the cluster's endpoint).
    pub server: String,
    /// The cluster CA's certificate (PEM): the only root the server is verified against.
    pub ca_pem: String,
    /// flightdeck's client certificate (PEM), signed by the cluster CA.
    pub cert_pem: String,
    /// Its private key (PKCS#8 PEM).
    pub key_pem: String,
    /// The certificate's serial number (hex), so that a client built from one
    /// certificate is built again when another replaces it.
    pub serial: String,
    /// When the certificate ends, in the engine's time.
    pub not_after: Timestamp,
}

impl std::fmt::Debug for WorkloadAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadAccess")
            .field("server", &self.server)
            .field("serial", &self.serial)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// What the book says of one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// flightdeck reaches this cluster with its own certificate, but has none yet (its
    /// endpoint is not known yet): not reachable yet.
    Pending,
    /// flightdeck reaches this cluster with this access.
    Issued(WorkloadAccess),
}

/// Every workload cluster's access, by cluster name.
#[derive(Debug, Default)]
pub struct AccessBook {
    clusters: RwLock<BTreeMap<String, Access>>,
}

impl AccessBook {
    pub fn new() -> Self {
        Self::default()
    }

    /// What the book holds for `cluster`: `None` when flightdeck does not reach it with
    /// its own certificate.
    pub fn get(&self, cluster: &str) -> Option<Access> {
        self.read().get(cluster).cloned()
    }

    /// Sets what the book holds for `cluster`.
    pub fn set(&self, cluster: &str, access: Access) {
        let mut book = self.clusters.write().unwrap_or_else(|e| e.into_inner());
        book.insert(cluster.to_string(), access);
    }

    /// Forgets `cluster` (deleted, or no longer bootstrapped by flightdeck).
    pub fn remove(&self, cluster: &str) {
        let mut book = self.clusters.write().unwrap_or_else(|e| e.into_inner());
        book.remove(cluster);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Access>> {
        self.clusters.read().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(serial: &str) -> WorkloadAccess {
        WorkloadAccess {
            server: "https://10.0.0.5:6443".into(),
            ca_pem: "CA".into(),
            cert_pem: "CERT".into(),
            key_pem: "-----BEGIN PRIVATE KEY-----secret".into(),
            serial: serial.into(),
            not_after: Timestamp::SIM_EPOCH,
        }
    }

    #[test]
    fn a_cluster_is_absent_pending_or_issued() {
        let book = AccessBook::new();
        assert_eq!(book.get("demo"), None);
        book.set("demo", Access::Pending);
        assert_eq!(book.get("demo"), Some(Access::Pending));
        book.set("demo", Access::Issued(access("01")));
        assert_eq!(book.get("demo"), Some(Access::Issued(access("01"))));
        book.remove("demo");
        assert_eq!(book.get("demo"), None);
    }

    #[test]
    fn debug_never_shows_the_key() {
        let shown = format!("{:?}", access("01"));
        assert!(shown.contains("10.0.0.5"), "{shown}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(!shown.contains("CERT"), "{shown}");
    }
}
