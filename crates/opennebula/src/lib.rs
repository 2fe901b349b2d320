//! The real OpenNebula 6.10 provider: flightdeck's [`Compute`](flightdeck_cloud::Compute)
//! and [`Templates`](flightdeck_cloud::Templates) traits spoken over OpenNebula's XML-RPC
//! API.
//!
//! ```no_run
//! # async fn demo() -> Result<(), flightdeck_cloud::CloudError> {
//! # struct NoNodes;
//! # impl flightdeck_cloud::GuestCluster for NoNodes {
//! #     async fn list_nodes(&self, _: &flightdeck_cloud::Ownership)
//! #         -> flightdeck_cloud::provider::Result<Option<Vec<flightdeck_cloud::Node>>> { Ok(None) }
//! #     fn nodes_stale_since(&self, _: &flightdeck_cloud::Ownership)
//! #         -> Option<flightdeck_cloud::Timestamp> { None }
//! #     fn forget_node_watches(&self) {}
//! # }
//! use flightdeck_opennebula::{HttpOptions, OpenNebulaCloud};
//! // $ONE_XMLRPC and $ONE_AUTH (or ~/.one/one_auth), as OpenNebula's CLI reads them.
//! let cloud = OpenNebulaCloud::over_http(None, None, &HttpOptions::default(), NoNodes)?;
//! let version = cloud.client().system_version().await?;
//! # let _ = version; Ok(()) }
//! ```
//!
//! One concern per module: [`transport`] (one XML-RPC call over HTTP, or in-process),
//! [`rpc`] (typed methods and OpenNebula's error codes), [`xml`] (the answer documents),
//! [`template`] (OpenNebula's template syntax), [`states`] (VM states as server status),
//! [`auth`] (credentials and endpoint) and [`provider`] (the flightdeck traits).

pub mod auth;
pub mod provider;
pub mod rpc;
pub mod states;
pub mod template;
pub mod transport;
pub mod xml;

pub use auth::{AuthError, OneCredentials, Secret, auth_error};
pub use provider::OpenNebulaCloud;
pub use rpc::{OneClient, OneCode, one_code};
pub use template::{Attribute, Template, TemplateError};
pub use transport::{HttpOptions, HttpTransport, Transport};
pub use xml::{ImageDoc, TemplateDoc, VmDoc, XmlError};
