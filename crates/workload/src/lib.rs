//! The workload cluster's own Kubernetes API, for every cloud: flightdeck reads its nodes
//! and drains them through kube-rs, whatever cloud the machines run on.
//!
//! - [`clients`]: how a workload cluster is reached ([`WorkloadClients`]): a kubeconfig
//!   file, a kubeconfig Secret, or any closure (an in-process client, say);
//!   [`issued`]: flightdeck's own certificate first, for the clusters it bootstraps.
//! - [`guest`]: [`KubeGuest`], the nodes and drains of one cloud's workload clusters.
//! - [`watch`]: nodes watched by kube-runtime, with a broken watch seen as stale;
//!   [`pumped`]: the same watch read on demand, where time is the simulator's.
//! - [`provider_id`]: each cloud's `spec.providerID` format ([`ProviderIdFormat`]).
//! - [`list`]: bounded, paged lists; [`errors`]: kube errors as flightdeck's classes.

pub mod clients;
pub mod errors;
pub mod guest;
pub mod issued;
pub mod list;
pub mod node;
pub mod provider_id;
pub mod pumped;
pub mod watch;

use flightdeck_cloud::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub use clients::{KubeconfigFile, KubeconfigFiles, KubeconfigSecret, WorkloadClients, WorkloadFn};
pub use guest::KubeGuest;
pub use issued::{IssuedFirst, Route, proxy_url};
pub use provider_id::ProviderIdFormat;

/// A Kubernetes timestamp as flightdeck's; absent is the epoch.
pub fn timestamp_of(t: Option<&Time>) -> Timestamp {
    Timestamp(t.map_or(0, |t| u64::try_from(t.0.as_millisecond()).unwrap_or(0)))
}
