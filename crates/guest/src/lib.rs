//! What flightdeck keeps of the workload cluster itself, apart from the machines under
//! it: the cluster's PKI ([`pki`]) and the sealing of its secrets at rest ([`sealed`]).
//! The bootstrap data (kubeadm's init and join documents) and the guest etcd client
//! come here too (issues 41 and 42); they are not built yet.
//!
//! Nothing here knows about clouds, the planner or the store: the engine decides when
//! a cluster's PKI is made and where its sealed form is kept.

pub mod pki;
pub mod sealed;

pub use pki::{CertAndKey, ClusterPki, PkiError, Secret, discovery_hash};
pub use sealed::{KEY_FILE, SealError, Sealed, SecretsKey};
