//! The real KubeVirt provider: flightdeck's machines are `kubevirt.io/v1`
//! VirtualMachines in an infra Kubernetes cluster, and the workload cluster's nodes are
//! read and drained through its own API, both over kube-rs.
//!
//! ```no_run
//! # async fn demo() -> Result<(), flightdeck_cloud::CloudError> {
//! use flightdeck_kubevirt::{KubeVirtCloud, KubeconfigFile};
//! let cloud = KubeVirtCloud::from_kubeconfig(
//!     "/etc/flightdeck/infra.kubeconfig",
//!     "clusters",
//!     KubeconfigFile::new("/etc/flightdeck/demo.kubeconfig"),
//! )
//! .await?;
//! # let _ = cloud; Ok(()) }
//! ```
//!
//! The provider takes any `kube::Client`, so it runs over an in-process tower service as
//! well as over HTTPS. Nothing in this crate assumes a URL:
//!
//! ```
//! # async fn demo() {
//! use flightdeck_cloud::{Compute, Ownership};
//! use flightdeck_kubevirt::{KubeVirtCloud, WorkloadFn};
//!
//! let service = tower::service_fn(|req: http::Request<kube::client::Body>| async move {
//!     // VMs, then VMIs, of the namespace the provider was given.
//!     assert!(req.uri().path().starts_with("/apis/kubevirt.io/v1/namespaces/clusters/"));
//!     let body = r#"{"apiVersion":"v1","kind":"List","metadata":{},"items":[]}"#;
//!     Ok::<_, std::convert::Infallible>(http::Response::new(kube::client::Body::from(
//!         body.as_bytes().to_vec(),
//!     )))
//! });
//! let infra = kube::Client::new(service, "default");
//! let cloud = KubeVirtCloud::new(infra, "clusters", WorkloadFn::new(|_| Ok(None)));
//! let owner = Ownership { cluster: "demo".into(), uid: "u1".into() };
//! assert!(cloud.list_servers(&owner).await.expect("listed").is_empty());
//! # }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(demo());
//! ```
//!
//! One concern per module: [`objects`] (the KubeVirt types), [`labels`] (ownership tags
//! as labels), [`servers`] (VMs as servers, and the VM flightdeck creates), [`provider`]
//! (the infra side of the traits, and the workload cluster's nodes and drains through
//! [`flightdeck_workload::KubeGuest`], which every cloud shares). How a workload cluster
//! is reached, bounded lists and kube errors live in `flightdeck-workload` as well.

pub mod identity;
pub mod labels;
pub mod objects;
pub mod provider;
pub mod servers;
pub mod userdata;

pub use flightdeck_workload::{
    KubeconfigFile, KubeconfigSecret, WorkloadClients, WorkloadFn, errors, list,
};
pub use objects::{VirtualMachine, VirtualMachineInstance};
pub use provider::KubeVirtCloud;
