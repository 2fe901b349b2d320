//! `flightdeck plan -f` (the dry run, in `plan_offline.rs`), `flightdeck validate` and
//! the offline `resume`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;
use flightdeck_cloud::Timestamp;
use flightdeck_plan::Memory;
use flightdeck_spec::{Document, load_file};

#[cfg(not(feature = "sim"))]
use crate::PlanArgs;
use crate::ValidateArgs;
#[cfg(feature = "sim")]
pub use crate::plan_offline::run;

/// Without the simulator there is nothing to plan a file against offline.
#[cfg(not(feature = "sim"))]
pub async fn run(_args: PlanArgs) -> anyhow::Result<ExitCode> {
    bail!(
        "this flightdeck was built without the built-in simulator (cargo feature `sim`): `plan -f` has no cloud to plan against; ask the daemon with `plan NAME`"
    )
}

pub fn validate(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let docs = load_file(&args.file)?;
    for d in &docs {
        match d {
            Document::Cluster(c) => {
                println!("{}: Cluster {} is valid", args.file.display(), c.name())
            }
            Document::Scenario(s) => println!(
                "{}: Scenario {} is valid",
                args.file.display(),
                s.metadata.name
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Closes the churn breakers of a cluster kept in a state directory.
pub fn resume(cluster: &str, state_dir: &Path) -> anyhow::Result<ExitCode> {
    if !state_dir.join(flightdeck_store::STORE_FILE).is_file() {
        bail!("{} holds no flightdeck state", state_dir.display());
    }
    let store = flightdeck_store::Store::open(state_dir)?;
    let Some(mut memory) = store.get::<Memory>("memory", cluster)? else {
        bail!(
            "{} holds no cluster {} (it has: {})",
            state_dir.display(),
            cluster,
            store.keys("memory")?.join(", ")
        );
    };
    let stopped: Vec<String> = memory.churn.tripped.keys().cloned().collect();
    memory.churn = Default::default();
    let event = flightdeck_plan::Event {
        // The binary's edge may read the system clock; the engine never does.
        at: Timestamp(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        ),
        cluster: cluster.to_string(),
        severity: flightdeck_plan::Severity::Normal,
        reason: "Resumed".into(),
        message: if stopped.is_empty() {
            "resumed; nothing was stopped".into()
        } else {
            format!(
                "resumed by an operator: {} reconciled again",
                stopped.join(", ")
            )
        },
    };
    store.commit(vec![
        flightdeck_store::Write::put("memory", cluster, &memory),
        flightdeck_store::Write::event(cluster, &event),
    ])?;
    println!("{}: {}", cluster, event.message);
    Ok(ExitCode::SUCCESS)
}
