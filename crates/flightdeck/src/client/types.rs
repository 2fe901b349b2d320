//! The API's documents: the daemon crate's own types, so client and server never drift.

pub use flightdeck_daemon::types::*;
