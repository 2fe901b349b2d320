//! Workload steps: what a scenario does to its clusters over time.

use std::collections::BTreeMap;

use flightdeck_cloud::Provider;
use flightdeck_engine::Engine;
use flightdeck_spec::scenario::WorkloadAction;
use flightdeck_spec::{Cluster, KubernetesVersion, MachineTemplate};

use crate::load::LoadedScenario;

/// Carries out one workload step against the engine; returns what it did.
pub(crate) fn apply_step<P: Provider>(
    engine: &mut Engine<P>,
    specs: &mut BTreeMap<String, Cluster>,
    loaded: &LoadedScenario,
    index: usize,
    step: &flightdeck_spec::scenario::WorkloadStep,
) -> Result<String, String> {
    let name = step.cluster.to_string();
    if step.action == WorkloadAction::Resume {
        engine.resume(&name).map_err(|e| e.to_string())?;
        return Ok(format!("resume cluster {name}"));
    }
    if step.action == WorkloadAction::Delete {
        engine.delete(&name).map_err(|e| e.to_string())?;
        return Ok(format!("delete cluster {name}"));
    }
    let mut spec = match step.action {
        WorkloadAction::Apply => loaded
            .applies
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, c)| c.clone())
            .ok_or_else(|| "no cluster file for this step".to_string())?,
        _ => specs
            .get(&name)
            .cloned()
            .ok_or_else(|| format!("cluster {name} was never applied"))?,
    };
    let what = match step.action {
        WorkloadAction::Scale => {
            let n = step.replicas.unwrap_or_default();
            match &step.pool {
                Some(pool) => {
                    let p = spec
                        .spec
                        .node_pools
                        .iter_mut()
                        .find(|p| p.name == *pool)
                        .ok_or_else(|| format!("cluster {name} has no node pool {pool}"))?;
                    p.replicas = flightdeck_spec::cluster::PoolReplicas::new(n)?;
                    format!("scale {name}/{pool} to {n}")
                }
                None => {
                    spec.spec.control_plane.replicas =
                        flightdeck_spec::cluster::ControlPlaneReplicas::new(n)?;
                    format!("scale {name} control plane to {n}")
                }
            }
        }
        WorkloadAction::Upgrade => match &step.pool {
            Some(pool) => {
                let machine = step
                    .machine
                    .clone()
                    .ok_or_else(|| "upgrading a node pool needs its new machine".to_string())?;
                let p = spec
                    .spec
                    .node_pools
                    .iter_mut()
                    .find(|p| p.name == *pool)
                    .ok_or_else(|| format!("cluster {name} has no node pool {pool}"))?;
                p.machine = machine;
                format!("roll {name}/{pool} to {}", describe(&p.machine))
            }
            None => {
                let cp = &mut spec.spec.control_plane;
                if let Some(v) = &step.version {
                    cp.version = KubernetesVersion::clone(v);
                }
                if let Some(m) = &step.machine {
                    cp.machine = MachineTemplate::clone(m);
                }
                format!(
                    "upgrade {name} control plane to {} ({})",
                    cp.version,
                    describe(&cp.machine)
                )
            }
        },
        WorkloadAction::Apply => format!("apply a new spec for {name}"),
        WorkloadAction::Delete | WorkloadAction::Resume => {
            return Err("a delete step has no spec to apply".into());
        }
    };
    spec.validate()
        .map_err(|(path, msg)| format!("{path}: {msg}"))?;
    engine.apply(spec.clone()).map_err(|e| e.to_string())?;
    specs.insert(name, spec);
    Ok(what)
}

/// A machine template in a few words: `image (flavor)` or `template T`.
fn describe(m: &MachineTemplate) -> String {
    match (&m.template, &m.image, &m.flavor) {
        (Some(t), _, _) => format!("template {t}"),
        (None, Some(i), Some(f)) => format!("{i} ({f})"),
        (None, Some(i), None) => i.to_string(),
        (None, None, _) => "the same machines".to_string(),
    }
}
