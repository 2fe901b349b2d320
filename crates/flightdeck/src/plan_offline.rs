//! `flightdeck plan -f FILE` (the `sim` feature): a dry run of a file's clusters against
//! the built-in simulated cloud as it is at start (empty), with fresh memory.

use std::process::ExitCode;

use anyhow::bail;
use flightdeck_cloud::{Clock, Ownership, SimClock, Timestamp};
use flightdeck_engine::observe::observe;
use flightdeck_plan::{Memory, PlanInput, PlanOptions};
use flightdeck_sim::{SimCloud, SimConfig};
use flightdeck_spec::{Document, load_file};
use serde::Serialize;

use crate::{Output, PlanArgs};

#[derive(Serialize)]
struct ClusterPlan {
    cluster: String,
    actions: Vec<flightdeck_plan::PlannedAction>,
    /// Machines recorded by this pass whose servers wait for something (the security
    /// group) before they can be requested.
    machines_recorded: Vec<String>,
    /// Repairs flight control would start or has under way, with their reasons.
    repairs: Vec<flightdeck_plan::status::RepairStatus>,
    /// Each set's maxUnhealthy budget and how much is in use.
    repair_budgets: Vec<flightdeck_plan::status::RepairBudget>,
    requeue_after: Option<String>,
}

/// Plans every cluster of the file against the built-in simulated cloud as it is now
/// (empty), without acting.
pub async fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let Some(file) = &args.file else {
        bail!("`plan` needs a cluster NAME (asks the daemon) or -f FILE (offline)");
    };
    let docs = load_file(file)?;
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let cloud = SimCloud::new(SimConfig::default(), 1, clock.clone());
    let mut plans = Vec::new();
    for d in docs {
        let Document::Cluster(spec) = d else {
            bail!(
                "{}: holds a Scenario; `plan` takes clusters",
                file.display()
            );
        };
        let memory = Memory::new("dry-run".into());
        let owner = Ownership {
            cluster: spec.name().to_string(),
            uid: memory.uid.clone(),
        };
        let observed = observe(&cloud, &owner, clock.now(), None).await?;
        let plan = flightdeck_plan::plan(PlanInput {
            spec: &spec,
            observed: &observed,
            memory: &memory,
            now: clock.now(),
            options: &PlanOptions::default(),
            shared: &flightdeck_plan::Shared::default(),
            taken_up: None,
        });
        let requested: Vec<&str> = plan
            .actions
            .iter()
            .filter_map(|a| match &a.action {
                flightdeck_plan::Action::CreateServer { machine, .. } => Some(machine.as_str()),
                _ => None,
            })
            .collect();
        let machines_recorded = plan
            .memory
            .machines
            .values()
            .filter(|m| !requested.contains(&m.name.as_str()))
            .map(|m| format!("{} ({}): {}", m.name, m.role.label(), m.reason))
            .collect();
        plans.push(ClusterPlan {
            cluster: spec.name().to_string(),
            machines_recorded,
            repairs: plan.status.repairs.clone(),
            repair_budgets: plan.status.repair_budgets.clone(),
            actions: plan.actions,
            requeue_after: plan.requeue_after.map(|d| d.to_string()),
        });
    }
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&plans)?),
        Output::Text => {
            println!("Dry run against the built-in simulated OpenStack (nothing is changed):");
            for p in &plans {
                println!();
                println!("cluster {}: {} action(s)", p.cluster, p.actions.len());
                for (i, a) in p.actions.iter().enumerate() {
                    println!("  {:>2}. {}", i + 1, a.action.summary());
                    println!("      because {}", a.reason);
                }
                if !p.machines_recorded.is_empty() {
                    println!(
                        "  machines recorded now, their servers requested once the security group exists:"
                    );
                    for m in &p.machines_recorded {
                        println!("    - {m}");
                    }
                }
                println!("  repairs (flight control):");
                if p.repairs.is_empty() {
                    println!("    none pending");
                }
                for r in &p.repairs {
                    println!("    - {}: {} ({})", r.machine, r.reason, r.state);
                }
                for b in &p.repair_budgets {
                    println!(
                        "    budget {}: {} of {} in use, {} left (maxUnhealthy)",
                        b.set,
                        b.in_use,
                        b.budget,
                        b.budget.saturating_sub(b.in_use)
                    );
                }
                if let Some(r) = &p.requeue_after {
                    println!("  then look again in {r}");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
