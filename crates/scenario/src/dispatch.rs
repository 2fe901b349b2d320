//! Which runner a scenario takes: the cloud its clusters live on (OpenNebula, KubeVirt
//! or OpenStack), in process or on the wire. Only this file knows every cloud's runner.

use std::sync::Arc;

use flightdeck_sim::SimCloud;

use crate::load::LoadedScenario;
use crate::report::TimelineEntry;
use crate::runner::{Run, RunError, RunOptions, run_on};

/// Runs a scenario to its end (or until the stop condition of `options` holds) and
/// reports. `on_event` sees every timeline entry as it happens.
pub async fn run(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> Result<Run, RunError> {
    if crate::one::is_opennebula(loaded)? {
        return crate::one::run_in_process(loaded, options, on_event).await;
    }
    if crate::kubevirt::is_kubevirt(loaded)? {
        return crate::kubevirt::run_in_process(loaded, options, on_event).await;
    }
    run_on(
        loaded,
        options,
        |cloud: Arc<SimCloud>| async move { Ok(flightdeck_embedded::in_process_openstack(cloud)) },
        on_event,
    )
    .await
}

/// The swarm's runs: as [`run`]'s, so every cloud's nodes come through kube-rs and the
/// product's node watch (read on demand in virtual time, `flightdeck_workload::pumped`).
/// The swarm used to read an OpenStack fleet's nodes from the simulator directly, a
/// third faster when nodes were listed at every pass; with the watch the difference is
/// 1.5% (150 seeds on one core), no longer worth a path the product never takes.
pub async fn run_swarm_case(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> Result<Run, RunError> {
    run(loaded, options, on_event).await
}

/// Runs a scenario in wire mode: the simulator is served on a loopback port for the
/// length of the run and the engine reaches it only over its APIs.
pub async fn run_wire(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> Result<Run, RunError> {
    if crate::one::is_opennebula(loaded)? {
        return crate::one::run_wire(loaded, options, on_event).await;
    }
    if crate::kubevirt::is_kubevirt(loaded)? {
        return crate::kubevirt::run_wire(loaded, options, on_event).await;
    }
    crate::wire::run_openstack_wire(loaded, options, on_event).await
}
