//! `flightdeck serve`: the long-running controller.
//!
//! - `fleet.rs` keeps every cluster of the store, each driven by the backend of its
//!   cloud (`backend.rs`): one engine per cloud, reconciles started one by one and
//!   applied as they finish, so a slow cloud call holds up only its own cluster.
//! - `route.rs` decides a cluster's cloud; `connect.rs` builds its provider;
//!   `sim_host.rs` is the embedded simulator (all three clouds, real time).
//! - `api.rs` is the HTTP API (axum, OpenAPI from the code), `auth.rs` its bearer
//!   tokens, `metrics.rs` the Prometheus metrics, `published.rs` what the backends
//!   publish for the API to read.

pub mod api;
pub mod auth;
mod backend;
pub mod claims;
pub mod connect;
mod contract;
pub mod error;
mod fleet;
#[cfg(test)]
mod fleet_tests;
pub mod instrument;
pub mod listen;
pub mod metrics;
mod plan_view;
mod published;
#[cfg(feature = "etcd")]
pub mod replicas;
mod route;
mod serve;
#[cfg(feature = "sim")]
mod sim_host;
#[cfg(not(feature = "sim"))]
#[path = "sim_off.rs"]
mod sim_host;
#[cfg(feature = "sim")]
mod sim_objects;
mod streams;
mod tls;
pub mod types;
mod views;
mod wallclock;
mod web;

pub use connect::SystemClock;
pub use route::SIM_CLOUD;
pub use serve::{DEFAULT_LISTEN, ServeOptions, URL_FILE, default_state_dir, serve, serve_until};

/// The OpenAPI document, rendered once at start.
pub(crate) static OPENAPI: std::sync::OnceLock<String> = std::sync::OnceLock::new();
