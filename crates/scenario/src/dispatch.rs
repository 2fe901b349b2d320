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

/// The swarm's runs. An OpenStack fleet reads the simulator's nodes directly rather than
/// through kube-rs: the same ground truth, and about a third less time per seed (200
/// seeds: 8.0 s against 10.9 s on two cores); every scenario, in process and on the wire,
/// keeps proving the kube-rs path. Other clouds run as [`run`] does.
pub async fn run_swarm_case(
    loaded: &LoadedScenario,
    options: &RunOptions,
    on_event: &mut dyn FnMut(&TimelineEntry),
) -> Result<Run, RunError> {
    if crate::one::is_opennebula(loaded)? || crate::kubevirt::is_kubevirt(loaded)? {
        return run(loaded, options, on_event).await;
    }
    run_on(
        loaded,
        options,
        |cloud: Arc<SimCloud>| async move { Ok(cloud) },
        on_event,
    )
    .await
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
