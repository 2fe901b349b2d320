//! Built without the `sim` feature: there is no embedded simulator. A [`SimHost`] cannot
//! be made, so the fleet's is always `None`, and `serve` needs `--no-sim`.

use std::sync::Arc;

use flightdeck_cloud::{Clock, Timestamp};

use crate::error::Failure;
use crate::types::{FaultRequest, FaultView, SimObjects};
use crate::wallclock::ClusterLatency;

/// No simulator: a type with no values.
pub enum SimHost {}

impl SimHost {
    pub fn start(_seed: u64, _speed: f64) -> Result<Arc<SimHost>, Failure> {
        Err(Failure::unprocessable(
            "this flightdeck was built without the embedded simulator (cargo feature `sim`); start serve with --no-sim",
        ))
    }

    pub fn kinds() -> Vec<String> {
        Vec::new()
    }

    pub fn now(&self) -> Timestamp {
        match *self {}
    }

    pub fn clock(&self) -> Arc<dyn Clock> {
        match *self {}
    }

    pub fn speed(&self) -> f64 {
        match *self {}
    }

    pub fn latency(&self) -> Arc<ClusterLatency> {
        match *self {}
    }

    pub fn objects(&self, _cluster: &str) -> SimObjects {
        match *self {}
    }

    pub fn faults(&self) -> Vec<FaultView> {
        match *self {}
    }

    pub fn inject(&self, _req: &FaultRequest, _cloud_label: &str) -> Result<FaultView, Failure> {
        match *self {}
    }

    pub fn stop(&self, _id: &str) -> Result<FaultView, Failure> {
        match *self {}
    }

    pub fn provide_router(&self, _spec: &flightdeck_spec::Cluster) {
        match *self {}
    }
}
