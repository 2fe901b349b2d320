//! The client verbs: `apply`, `get`, `describe`, `delete cluster`, `events`, `plan NAME`,
//! `resume NAME`, `sim fault` and `sim faults` drive a running `flightdeck serve` over
//! its HTTP API (crates/daemon/API.md), kubectl style.
//!
//! Errors of these verbs print as `flightdeck: ...` and exit 1; the daemon's own message
//! comes first, then each spec problem as `SOURCE:LINE: PATH: MESSAGE`.

/// `println!` for results: a closed stdout ends the verb quietly (see `out.rs`).
macro_rules! outln {
    () => {
        $crate::client::out::text("\n")?
    };
    ($($arg:tt)*) => {
        $crate::client::out::text(&format!("{}\n", format_args!($($arg)*)))?
    };
}

/// `print!` for results.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::client::out::text(&format!($($arg)*))?
    };
}

mod connect;
mod describe;
mod follow;
mod http;
mod legacy;
mod out;
mod render;
mod sse;
mod trust;
mod types;
mod verbs;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

pub use connect::{ConnectArgs, ServerArgs};

/// The local daemon's state directory, where `flightdeck serve` writes `api.url` and
/// `admin.token`: `$FLIGHTDECK_STATE_DIR`, else `$XDG_STATE_HOME/flightdeck`, else
/// `$HOME/.local/state/flightdeck`.
pub fn default_state_dir() -> Option<PathBuf> {
    connect::state_dir_from(&|k| std::env::var(k).ok())
}

/// What `get` and `describe` show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Resource {
    #[value(alias = "clusters")]
    Cluster,
    /// A kubeconfig of cluster NAME (`spec.bootstrap.provider: kubeadm`), printed on
    /// stdout: its client certificate is signed by the cluster CA for --ttl (admin token).
    Kubeconfig,
}

/// `-o` of `get`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// More columns: ENDPOINT, BREAKERS, REPAIRS, UID.
    Wide,
    /// The daemon's JSON document as it answered.
    Json,
    /// The daemon's document as YAML.
    Yaml,
}

/// `-o` of the verbs that print one document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DocFormat {
    Json,
    Yaml,
}

impl From<DocFormat> for Format {
    fn from(d: DocFormat) -> Self {
        match d {
            DocFormat::Json => Format::Json,
            DocFormat::Yaml => Format::Yaml,
        }
    }
}

#[derive(Args)]
pub struct ApplyArgs {
    /// Cluster spec file (one or more `kind: Cluster` documents, YAML or JSON); `-` reads
    /// stdin.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Print the daemon's answer as JSON or YAML instead of one line per cluster.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<DocFormat>,
    /// A new cluster takes over what one earlier cluster of its name left in the cloud
    /// (objects tagged with its name under another UID) instead of holding.
    #[arg(long)]
    pub adopt: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Args)]
pub struct GetArgs {
    /// `clusters` (or `cluster`).
    #[arg(value_enum)]
    pub resource: Resource,
    /// One cluster; all of them without it.
    pub name: Option<String>,
    /// wide: more columns; json, yaml: the daemon's document.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Format>,
    /// After the list, look every 2 s and print a cluster again whenever it changes,
    /// until Ctrl-C.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// `get kubeconfig`: how long its client certificate is valid (1m to 168h).
    #[arg(long, default_value = "24h", value_parser = crate::parse_duration)]
    pub ttl: flightdeck_spec::Duration,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Args)]
pub struct DescribeArgs {
    /// `cluster` (or `clusters`).
    #[arg(value_enum)]
    pub resource: Resource,
    /// One cluster; all of them without it.
    pub name: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Args)]
pub struct EventsArgs {
    /// One cluster's events; every cluster's without it.
    pub name: Option<String>,
    /// Keep printing events as they happen, until Ctrl-C or the daemon stops.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// At most this many past events (the daemon's default: 100).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Print the daemon's documents (with --follow: one JSON object per line, or one
    /// YAML document per event).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<DocFormat>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Args)]
pub struct FaultArgs {
    /// The fault kind, e.g. neutron.ruleLost, nova.bootError, api.latency (`flightdeck
    /// sim faults` lists them).
    #[arg(required_unless_present = "stop")]
    pub kind: Option<String>,
    /// The cluster it hits.
    #[arg(long, required_unless_present = "stop")]
    pub cluster: Option<String>,
    /// Stop the active fault with this id (`flightdeck sim faults` lists them) instead
    /// of starting one.
    #[arg(long, value_name = "ID", conflicts_with_all = [
        "kind", "cluster", "duration", "latency", "rate", "count", "service", "level",
        "template", "node",
    ])]
    pub stop: Option<u64>,
    /// How long it lasts, e.g. 2m (default: until the daemon stops).
    #[arg(long = "for", value_name = "DURATION", value_parser = crate::parse_duration)]
    pub duration: Option<flightdeck_spec::Duration>,
    /// api.latency: the extra time per call, e.g. 60s.
    #[arg(long, value_name = "DURATION", value_parser = crate::parse_duration)]
    pub latency: Option<flightdeck_spec::Duration>,
    /// The share of calls or objects hit: more than 0, at most 1.
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// How many objects it takes (members, rules, machines...): 1 to 1000.
    #[arg(long, value_name = "N")]
    pub count: Option<u32>,
    /// The API service hit, e.g. nova.
    #[arg(long, value_name = "S")]
    pub service: Option<String>,
    #[arg(long)]
    pub level: Option<String>,
    #[arg(long)]
    pub template: Option<String>,
    #[arg(long)]
    pub node: Option<String>,
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<DocFormat>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Args)]
pub struct FaultsArgs {
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<DocFormat>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// Prints a client verb's error and turns it into exit code 1.
fn finish(result: anyhow::Result<ExitCode>) -> anyhow::Result<ExitCode> {
    match result {
        Ok(code) => Ok(code),
        Err(e) if e.is::<out::StdoutClosed>() => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("flightdeck: {e:#}");
            Ok(ExitCode::from(1))
        }
    }
}

pub async fn apply(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    finish(verbs::apply(args).await)
}

pub async fn get(args: GetArgs) -> anyhow::Result<ExitCode> {
    finish(verbs::get(args).await)
}

pub async fn describe(args: DescribeArgs) -> anyhow::Result<ExitCode> {
    finish(verbs::describe(args).await)
}

pub async fn events(args: EventsArgs) -> anyhow::Result<ExitCode> {
    finish(follow::events(args).await)
}

pub async fn fault(args: FaultArgs) -> anyhow::Result<ExitCode> {
    finish(verbs::fault(args).await)
}

pub async fn faults(args: FaultsArgs) -> anyhow::Result<ExitCode> {
    finish(verbs::faults(args).await)
}

/// `plan NAME` asks the daemon; `plan -f FILE` is the offline dry run.
pub async fn plan(args: crate::PlanArgs) -> anyhow::Result<ExitCode> {
    match &args.name {
        Some(name) => finish(verbs::plan(name, args.output, &args.connect).await),
        None => crate::plan_cmd::run(args).await,
    }
}

/// `delete cluster NAME` asks the daemon; `delete CLUSTER --state-dir DIR --cloud X` is
/// the offline form against a real cloud.
pub async fn delete(args: crate::DeleteArgs) -> anyhow::Result<ExitCode> {
    match legacy::delete_mode(&args) {
        legacy::Mode::Daemon(name) => finish(follow::delete(&name, &args).await),
        legacy::Mode::Offline => legacy::delete_offline(&args).await,
        legacy::Mode::Wrong(e) => finish(Err(e)),
    }
}

/// `resume NAME` asks the daemon, unless `--state-dir DIR` names a directory no daemon
/// has written `api.url` to (and no --server or --token-file is given): then it resumes
/// offline in DIR.
pub async fn resume(args: crate::ResumeArgs) -> anyhow::Result<ExitCode> {
    match legacy::offline_resume_dir(&args) {
        Some(dir) => crate::plan_cmd::resume(&args.cluster, &dir),
        None => finish(verbs::resume(&args).await),
    }
}
