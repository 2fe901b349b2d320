//! The offline forms that share a verb with the client: `delete CLUSTER --state-dir DIR
//! --cloud X` (a real cloud, no daemon) and `resume NAME --state-dir DIR` (a state
//! directory no daemon serves).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::anyhow;

use super::connect::URL_FILE;
use crate::{DeleteArgs, ResumeArgs, real};

pub enum Mode {
    /// `delete cluster NAME`.
    Daemon(String),
    /// `delete CLUSTER --state-dir DIR --cloud X`.
    Offline,
    /// Neither: what to write instead.
    Wrong(anyhow::Error),
}

fn is_cluster_keyword(s: &str) -> bool {
    matches!(s, "cluster" | "clusters")
}

/// Which form of `delete` the arguments are.
pub fn delete_mode(args: &DeleteArgs) -> Mode {
    let Some(name) = &args.name else {
        return offline_check(args).map_or_else(Mode::Wrong, |()| Mode::Offline);
    };
    if !is_cluster_keyword(&args.cluster) {
        return Mode::Wrong(anyhow!(
            "`delete {} {name}`: the only kind is `cluster`; write `delete cluster {name}`",
            args.cluster
        ));
    }
    let offline_flags = [
        ("--cloud", args.cloud.is_some()),
        ("--opennebula", args.opennebula),
        ("--xmlrpc", args.xmlrpc.is_some()),
    ];
    if let Some((flag, _)) = offline_flags.iter().find(|(_, set)| *set) {
        return Mode::Wrong(anyhow!(
            "{flag} belongs to the offline form `delete CLUSTER --state-dir DIR --cloud X`; `delete cluster {name}` asks the daemon, which knows the cluster's cloud"
        ));
    }
    Mode::Daemon(name.clone())
}

fn offline_check(args: &DeleteArgs) -> anyhow::Result<()> {
    let name = &args.cluster;
    let daemon_flags = [
        ("--wait", args.wait),
        ("--server", args.server.server.is_some()),
        ("--token-file", args.server.token_file.is_some()),
        ("--ca-file", args.server.ca_file.is_some()),
    ];
    if let Some((flag, _)) = daemon_flags.iter().find(|(_, set)| *set) {
        return Err(anyhow!(
            "{flag} belongs to `delete cluster {name}` (through the daemon); write `flightdeck delete cluster {name}`"
        ));
    }
    if args.state_dir.is_none() || (args.cloud.is_none() && !args.opennebula) {
        return Err(anyhow!(
            "to delete through the daemon, write `flightdeck delete cluster {name}`; the offline form `delete {name}` needs --state-dir DIR and --cloud NAME (or --opennebula)"
        ));
    }
    Ok(())
}

/// `delete CLUSTER --state-dir DIR --cloud X`: deletes on a real cloud and waits until
/// nothing the cluster owned is left.
pub async fn delete_offline(args: &DeleteArgs) -> anyhow::Result<ExitCode> {
    let Some(state_dir) = &args.state_dir else {
        return Err(anyhow!("the offline `delete` needs --state-dir"));
    };
    let goal = real::Goal::Deleted {
        name: args.cluster.clone(),
        forget: args.forget,
    };
    match &args.cloud {
        Some(cloud) => real::run(cloud, state_dir, goal, args.timeout, None).await,
        None => {
            real::run_opennebula(args.xmlrpc.as_deref(), state_dir, goal, args.timeout, None).await
        }
    }
}

/// The directory to resume in offline: `--state-dir DIR` without `DIR/api.url` (no
/// daemon ever served it) and no flag that names a daemon.
pub fn offline_resume_dir(args: &ResumeArgs) -> Option<PathBuf> {
    let dir = args.state_dir.as_ref()?;
    if args.server.server.is_some() || args.server.token_file.is_some() {
        return None;
    }
    (!dir.join(URL_FILE).exists()).then(|| dir.clone())
}
