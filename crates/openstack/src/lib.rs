//! The real OpenStack provider: flightdeck's [`Compute`](flightdeck_cloud::Compute),
//! [`Network`](flightdeck_cloud::Network) and
//! [`LoadBalancing`](flightdeck_cloud::LoadBalancing) traits spoken over HTTP to
//! Keystone v3, Nova, Neutron, Octavia and Glance.
//!
//! ```no_run
//! # async fn demo() -> Result<(), flightdeck_cloud::CloudError> {
//! use flightdeck_openstack::{CloudEntry, OpenStackCloud, SessionOptions, config_error};
//! let entry = CloudEntry::load(Some("mycloud")).map_err(config_error)?;
//! let cloud = OpenStackCloud::connect(&entry, SessionOptions::default()).await?;
//! # let _ = cloud; Ok(()) }
//! ```
//!
//! One concern per module: [`clouds`] (credentials), [`auth`] (Keystone and the
//! catalog), [`client`] (requests, pagination, rate limit via [`ratelimit`]),
//! [`errors`] (answers into error classes), and one module per service.

pub mod auth;
pub mod client;
pub mod clouds;
pub mod composite;
pub mod errors;
pub mod identity;
mod keyed;
pub mod neutron;
pub mod nova;
pub mod octavia;
pub mod provider;
pub mod ratelimit;
pub mod timefmt;

pub use client::{Session, SessionOptions};
pub use clouds::{CloudEntry, ConfigError, Credentials, Domain, Interface, Password, Scope};
pub use composite::OpenStackProvider;
pub use errors::Service;
pub use provider::{OpenStackCloud, config_error};
pub use ratelimit::RateLimit;
