//! What flightdeck keeps of the workload cluster itself, apart from the machines under
//! it: the cluster's PKI ([`pki`]), the sealing of its secrets at rest ([`sealed`]), its
//! bootstrap tokens ([`token`]) and each machine's bootstrap data ([`bootstrap`]: kubeadm's
//! init and join documents, [`kubeadm`], in cloud-init user data, [`cloudinit`]). The guest
//! etcd client comes here too (issue 42); it is not built yet.
//!
//! Nothing here knows about clouds, the planner or the store: the engine decides when
//! a cluster's PKI is made and where its sealed form is kept.

pub mod bootstrap;
pub mod cloudinit;
pub mod kubeadm;
pub mod kubeconfig;
pub mod pki;
pub mod sealed;
pub mod token;

pub use bootstrap::{BootstrapError, ClusterBootstrap, File, Role, render};
pub use pki::{CertAndKey, ClusterPki, PkiError, Secret, discovery_hash};
pub use sealed::{KEY_FILE, SealError, Sealed, SecretsKey};
pub use token::{BootstrapToken, TokenError};
pub use zeroize;
