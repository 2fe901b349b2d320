//! flightdeck's reconcile engine.
//!
//! Each reconcile of a cluster runs observe → plan → act:
//! - observe lists what the cloud has for the cluster (`observe.rs`);
//! - plan is the pure function in `flightdeck-plan`;
//! - the plan's memory is persisted *before* acting, so a crash between two writes can
//!   neither lose a machine nor create it twice; then each action is carried out
//!   (`act.rs`) and the IDs it returns are persisted.
//!
//! Reconciles never wait: anything in flight is looked at again by requeueing. The work
//! queue (`queue.rs`) is keyed by cluster and de-duplicated; failures back off per key
//! with jitter and reset on success (`backoff.rs`); quiet clusters are resynced on a
//! jittered period. Time and randomness come from the injected `Clock` and `Rng`.

pub mod access;
pub mod act;
pub mod backoff;
mod bootstrap;
mod config;
mod driver;
mod engine;
mod events;
pub mod faults;
mod handover;
mod identity;
pub mod kubeconfig;
pub mod observe;
mod operator;
pub mod queue;
mod reconcile;
mod reuse;
pub mod secrets;
mod shared_ledger;
pub mod timeline;

pub use bootstrap::TokenSource;
pub use config::{
    CLUSTERS_MAX, CONFLICTS_BEFORE_BACKOFF, EngineConfig, EngineError, OwnershipScope,
    T_SPEC as SPEC_TABLE, stored_spec,
};
pub use driver::{Finished, Preview, Reconcile};
pub use engine::{CallScope, ClusterRecord, Engine, ReconcileStats, immutable_fields_unchanged};
pub use faults::{EngineFaults, RequeueFate};
pub use timeline::TimelineEntry;
