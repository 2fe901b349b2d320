//! `flightdeck`: the command line. Every command that needs a cloud runs against the
//! built-in simulated OpenStack in accelerated virtual time.

#[cfg(feature = "sim")]
mod bench;
#[cfg(feature = "sim")]
mod bench_goals;
#[cfg(feature = "sim")]
mod bench_report;
#[cfg(feature = "sim")]
mod bench_scale;
mod client;
mod output;
mod plan_cmd;
#[cfg(feature = "sim")]
mod plan_offline;
mod real;
#[cfg(feature = "sim")]
mod serve_cmd;
#[cfg(feature = "sim")]
mod sim_cmd;
#[cfg(feature = "sim")]
mod sim_kubelets;
#[cfg(feature = "sim")]
mod split_brain_cmd;
mod store_cmd;
#[cfg(feature = "sim")]
mod swarm_cmd;
mod up;
#[cfg(feature = "sim")]
mod up_sim;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "flightdeck",
    version,
    about = "Builds and keeps healthy the infrastructure under Kubernetes clusters on private clouds."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controller: reconcile every cluster in the store, for good, and serve the
    /// HTTP API. With no flags it hosts the embedded simulator (all three clouds).
    Serve(Box<DaemonArgs>),
    /// Build the clusters in FILE on the simulated cloud and reconcile until they are Ready.
    Up(UpArgs),
    /// Dry run: the actions flightdeck would take now, each with its reason. `plan NAME`
    /// asks the daemon about a cluster it runs; `plan -f FILE` plans a spec file against
    /// the empty built-in simulated cloud.
    Plan(PlanArgs),
    /// Check a spec file and report every problem with its field path and line.
    Validate(ValidateArgs),
    /// Delete a cluster: `delete cluster NAME` through the daemon; `delete CLUSTER
    /// --state-dir DIR --cloud X` on a real cloud without a daemon, waiting until nothing
    /// it owned is left.
    Delete(DeleteArgs),
    /// Close a cluster's churn breakers (ReconcileLoopDetected), so the stopped objects
    /// are reconciled again: through the daemon, or offline in a state directory no
    /// daemon serves (see --state-dir).
    Resume(ResumeArgs),
    /// Create or update the clusters of a spec file in the daemon.
    Apply(client::ApplyArgs),
    /// List clusters, or show one, as a table (`get clusters`, `get cluster NAME`).
    Get(client::GetArgs),
    /// Show a cluster as a tree: control plane, pools, machines with their servers,
    /// nodes and load balancer members; then conditions, repairs and breakers.
    Describe(client::DescribeArgs),
    /// Print what happened to the clusters (times UTC, on the cluster's clock; `!` marks
    /// a warning).
    Events(client::EventsArgs),
    /// The state store: check it, back it up, restore a backup (with no daemon running).
    #[command(subcommand)]
    Store(store_cmd::StoreCommand),
    /// The built-in cloud simulator: scenarios, faults and invariants.
    #[command(subcommand)]
    Sim(SimCommand),
    /// Measure flightdeck on this machine: `up` of 10, 100 and 1,000 clusters, the cloud
    /// calls of one build and of a quiet hour, the swarm's speed and the wire's cost;
    /// writes bench.json and bench.md (see --out), then exits 1 if a goal it judged was
    /// missed or a run failed.
    #[cfg(feature = "sim")]
    Bench(bench::BenchArgs),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    #[default]
    Text,
    Json,
}

#[derive(Args)]
pub struct UpArgs {
    /// Cluster spec file (one or more `kind: Cluster` documents).
    #[arg(short = 'f', long = "file")]
    file: PathBuf,
    /// Keep flightdeck's state (memory, status, events) in this directory. Without it the
    /// state lives in memory for the length of the run.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Text shows progress and a status table; json prints the final status as JSON on
    /// stdout (progress still goes to stderr).
    #[arg(long, value_enum, default_value_t)]
    output: Output,
    /// Seed for the simulated cloud's latencies and flightdeck's jitter.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Give up when the clusters are not Ready after this much virtual time.
    #[arg(long, default_value = "2h", value_parser = parse_duration)]
    timeout: flightdeck_spec::Duration,
    /// Print no progress, only the result.
    #[arg(short, long)]
    quiet: bool,
    /// Reconciles run together at most, 1 to 1024 (default 4), on the built-in
    /// simulator: a large fleet builds in fewer steps with more at once.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024),
          conflicts_with_all = ["openstack", "opennebula", "kubevirt"])]
    concurrency: Option<u16>,
    /// On the built-in simulator, the workload clusters of OpenStack and OpenNebula
    /// clusters run no apps (no pods, no disruption budgets): `flightdeck bench`
    /// measures what modelling the workload costs against this.
    #[arg(long, conflicts_with_all = ["openstack", "opennebula", "kubevirt"])]
    no_workload: bool,
    /// Reconcile against the real OpenStack named by each cluster's
    /// `spec.provider.openstack.cloud` (clouds.yaml), in real time, instead of the
    /// built-in simulator. Needs --state-dir; nodes come from each spec's workload.kubeconfig.
    #[arg(long, conflicts_with = "opennebula")]
    openstack: bool,
    /// Reconcile against the real OpenNebula at each cluster's
    /// `spec.provider.opennebula.xmlrpc` (else $ONE_XMLRPC), with the credentials in the
    /// file $ONE_AUTH names (else ~/.one/one_auth), in real time. Needs --state-dir.
    #[arg(long)]
    opennebula: bool,
    /// Reconcile against the real KubeVirt infra cluster and workload cluster named by
    /// each cluster's `spec.provider.kubevirt` kubeconfigs, in real time. Needs
    /// --state-dir; nothing is simulated.
    #[arg(long, conflicts_with_all = ["openstack", "opennebula"])]
    kubevirt: bool,
    /// A real cloud that holds objects named for a new cluster under another UID (left
    /// by a lost store or another state directory): take them over instead of stopping.
    #[arg(long)]
    adopt: bool,
    /// With --openstack, --opennebula or --kubevirt: reach the API servers of the
    /// clusters built with kubeadm through this HTTP proxy (`http://HOST:PORT`,
    /// CONNECT), as `serve --workload-proxy` does (on KubeVirt, a cluster IP is reached
    /// only from inside the infra cluster's network).
    #[arg(long, value_name = "URL", value_parser = flightdeck_workload::proxy_url)]
    workload_proxy: Option<String>,
}

#[derive(Args)]
pub struct DaemonArgs {
    /// Where flightdeck keeps its store, tokens and API address (default:
    /// $FLIGHTDECK_STATE_DIR, else $XDG_STATE_HOME/flightdeck, else
    /// ~/.local/state/flightdeck).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Address of the HTTP API. A non-loopback address needs --insecure (no TLS).
    #[arg(long, default_value = "127.0.0.1:7443")]
    listen: std::net::SocketAddr,
    /// Virtual seconds per wall-clock second of the embedded simulator.
    #[arg(long, default_value_t = 1.0)]
    sim_speed: f64,
    /// Seed of the embedded simulator's latencies.
    #[arg(long, default_value_t = 1)]
    sim_seed: u64,
    /// Run without the embedded simulator: every cluster names a real cloud.
    #[arg(long)]
    no_sim: bool,
    /// Listen on a non-loopback address without TLS (only behind a TLS proxy).
    #[arg(long, conflicts_with = "tls_cert")]
    insecure: bool,
    /// Serve the API over TLS with this PEM certificate chain (needs --tls-key).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Reconciles in flight at most, per cloud.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// A client gets this long to finish its TLS handshake; it holds up no other.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    handshake_timeout: flightdeck_spec::Duration,
    /// A request's headers must arrive within this, counted from when the connection is
    /// ready for one: also how long a kept-alive connection may sit idle.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    header_timeout: flightdeck_spec::Duration,
    /// A request body that sends nothing, or a client that takes nothing of an answer
    /// (an event stream's reader included), for this long is cut.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    idle_timeout: flightdeck_spec::Duration,
    /// Connections open at once, from every address; more are closed at once.
    #[arg(long, default_value_t = 1024, value_name = "N")]
    max_connections: usize,
    /// Connections open at once from one client address.
    #[arg(long, default_value_t = 256, value_name = "N")]
    max_connections_per_address: usize,
    /// Event streams (`events --follow`) open at once per token; more are answered 429.
    #[arg(long, default_value_t = 32, value_name = "N")]
    max_streams_per_token: usize,
    /// Applies parsed at once; more wait their turn.
    #[arg(long, default_value_t = 2, value_name = "N")]
    max_applies: usize,
    /// Where the state lives: `embedded` (the default: a file under --state-dir), or
    /// `etcd://HOST:PORT[,HOST:PORT…]` to run as one replica among several that share
    /// the clusters (needs a flightdeck built with `--features etcd`, and --no-sim).
    #[arg(long, default_value = "embedded", value_name = "STORE")]
    store: String,
    /// With etcd: this replica's name among the live ones (default: the host's name).
    #[arg(long, value_name = "NAME")]
    replica_name: Option<String>,
    /// With etcd: the replica's lease, in seconds. A replica that dies has its clusters
    /// taken over after this long; one cut off from etcd stops acting 2 s before it.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    lease_ttl: u64,
    /// With etcd: the CA of the members' certificates (TLS).
    #[arg(long, value_name = "PEM")]
    etcd_cacert: Option<PathBuf>,
    /// With etcd: a client certificate, for members that ask for one (needs --etcd-key).
    #[arg(long, value_name = "PEM")]
    etcd_cert: Option<PathBuf>,
    #[arg(long, value_name = "PEM")]
    etcd_key: Option<PathBuf>,
    /// With etcd: the user of etcd's authentication; the password is read from
    /// $FLIGHTDECK_ETCD_PASSWORD, never from the command line.
    #[arg(long, value_name = "USER")]
    etcd_user: Option<String>,
    /// With etcd: the most operations one transaction may hold (the members'
    /// --max-txn-ops).
    #[arg(long, default_value_t = 128, value_name = "N")]
    etcd_max_txn_ops: usize,
    /// The key file the clusters' secrets (their PKI) are sealed with at rest (default:
    /// secrets.key in the state directory, made with mode 0600 when missing). Keep it
    /// apart from the store's backups; replicas sharing etcd must share one key file.
    #[arg(long, value_name = "FILE")]
    secrets_key_file: Option<PathBuf>,
    /// Reach the API servers of the clusters flightdeck bootstraps with kubeadm through
    /// this HTTP proxy (`http://HOST:PORT`, tunnelling with CONNECT): a bastion in front
    /// of the clusters' network, or `flightdeck sim serve --workload-proxy`. TLS still
    /// runs end to end, verified against each cluster's CA.
    #[arg(long, value_name = "URL", value_parser = flightdeck_workload::proxy_url)]
    workload_proxy: Option<String>,
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["name", "file"])))]
pub struct PlanArgs {
    /// A cluster the daemon runs: plan against what its cloud shows now.
    name: Option<String>,
    /// Spec file to plan offline, against the empty built-in simulated cloud.
    #[arg(short = 'f', long = "file", conflicts_with_all = ["server", "token_file", "state_dir"])]
    file: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    output: Output,
    #[command(flatten)]
    connect: client::ConnectArgs,
}

#[derive(Args)]
pub struct DeleteArgs {
    /// `cluster`, followed by NAME: delete through the daemon. Alone: the name of a
    /// cluster to delete offline on a real cloud (needs --state-dir and --cloud or
    /// --opennebula).
    #[arg(value_name = "CLUSTER")]
    cluster: String,
    /// With `cluster`: the cluster the daemon deletes.
    #[arg(value_name = "NAME")]
    name: Option<String>,
    /// Offline: the state directory that holds the cluster. With `cluster NAME`: talk to
    /// the daemon that keeps its state in DIR.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// The clouds.yaml entry of the cloud (OpenStack; offline form).
    #[arg(long, conflicts_with = "opennebula")]
    cloud: Option<String>,
    /// The cluster lives on OpenNebula: reach it at this XML-RPC endpoint (else
    /// $ONE_XMLRPC) with the credentials $ONE_AUTH names.
    #[arg(long)]
    opennebula: bool,
    /// With --opennebula: the XML-RPC endpoint, e.g. http://one.example:2633/RPC2.
    #[arg(long, requires = "opennebula")]
    xmlrpc: Option<String>,
    /// How long to wait for the cluster to be gone (offline form, or with --wait).
    #[arg(long, default_value = "20m", value_parser = parse_duration)]
    timeout: flightdeck_spec::Duration,
    /// With `cluster NAME`: wait until the daemon reports the cluster gone, printing
    /// progress; exit 1 at --timeout.
    #[arg(long)]
    wait: bool,
    /// Let the deletion end although the cloud shows none of the objects the cluster
    /// recorded (check first that they are gone: another cloud entry, project or
    /// namespace would show none either).
    #[arg(long)]
    forget: bool,
    #[command(flatten)]
    server: client::ServerArgs,
}

#[derive(Args)]
pub struct ResumeArgs {
    /// The cluster to resume.
    cluster: String,
    /// The state directory of the daemon to ask. If DIR holds no api.url (no daemon has
    /// served it) and neither --server nor --token-file is given, the cluster is
    /// resumed offline, directly in DIR's store.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    #[command(flatten)]
    server: client::ServerArgs,
}

#[derive(Args)]
pub struct ValidateArgs {
    #[arg(short = 'f', long = "file")]
    file: PathBuf,
}

#[derive(Subcommand)]
enum SimCommand {
    /// List the built-in scenarios.
    Scenarios,
    /// Run one scenario in virtual time and print its timeline; exits 0 only if every
    /// invariant and expectation held.
    Run(SimRunArgs),
    /// Serve the simulated OpenStack over HTTP (Keystone, Nova, Neutron, Octavia, Glance)
    /// in real time, for OpenStack's own clients and for flightdeck's REST provider; with
    /// --opennebula, the simulated OpenNebula's XML-RPC API too; with --kubernetes, the
    /// simulated Kubernetes clusters (KubeVirt's infra cluster and the workload clusters).
    Serve(Box<ServeArgs>),
    /// Randomized fault simulation: every seed becomes a fleet, faults, a workload and
    /// engine perturbations; invariants are checked at every step, then the fleet must
    /// converge. Exits 0 only if no seed failed.
    Swarm(SwarmArgs),
    /// Start a fault in the daemon's embedded simulator, e.g. `sim fault nova.bootError
    /// --cluster demo --for 2m`, or stop one before its end (`sim fault --stop ID`).
    Fault(Box<client::FaultArgs>),
    /// List the fault kinds of the daemon's embedded simulator and the active faults,
    /// with their ids.
    Faults(client::FaultsArgs),
}

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Inject this scenario's faults (times counted from the start) and create the
    /// routers its clusters name.
    #[arg(long)]
    scenario: Option<String>,
    /// Virtual seconds per wall-clock second.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where to write the clouds.yaml entry that reaches the server (it holds the
    /// simulator's password, so it is written to a file, not printed).
    #[arg(long, default_value = "flightdeck-sim-clouds.yaml")]
    clouds_file: PathBuf,
    /// Append every mutating call the simulator receives to this file as it comes, one
    /// JSON object a line: the call, its target, whether it was accepted, the caller it
    /// named (a flightdeck replica and its claim revision) and the wall-clock time it
    /// was logged (`logged_ms`).
    #[arg(long, value_name = "PATH")]
    mutation_log: Option<PathBuf>,
    /// Also serve the simulated OpenNebula's XML-RPC API (`http://ADDR/RPC2`) on this
    /// address, from the same simulator and clock; port 0 picks a free one.
    #[arg(long, value_name = "ADDR")]
    opennebula: Option<std::net::SocketAddr>,
    /// With --opennebula: write the credentials here as a ONE_AUTH file
    /// (`oneadmin:PASSWORD`, mode 0600), so that clients read them from a file, not
    /// from the command line.
    #[arg(long, value_name = "PATH", requires = "opennebula")]
    one_auth_file: Option<PathBuf>,
    /// With --opennebula: write the XML-RPC endpoint (the ONE_XMLRPC value) here. It is
    /// the last file written, once every listener is bound.
    #[arg(long, value_name = "PATH", requires = "opennebula")]
    one_xmlrpc_file: Option<PathBuf>,
    /// Also serve the simulated Kubernetes clusters on this address, from the same
    /// simulator and clock: KubeVirt's infra cluster at `http://ADDR/clusters/infra`,
    /// each flightdeck cluster's workload cluster at `http://ADDR/clusters/NAME`; port 0
    /// picks a free one. Any bearer token is accepted.
    #[arg(long, value_name = "ADDR")]
    kubernetes: Option<std::net::SocketAddr>,
    /// With --kubernetes: write `DIR/infra.kubeconfig` at once and `DIR/NAME.kubeconfig`
    /// as each workload cluster appears (mode 0600, a token user: the server accepts any
    /// token).
    #[arg(long, value_name = "DIR", requires = "kubernetes")]
    kubeconfig_dir: Option<PathBuf>,
    /// With --kubernetes: write the server's base URL (`http://ADDR`) here. It is the
    /// last file written at start, once every listener is bound and the infra
    /// kubeconfig is written.
    #[arg(long, value_name = "PATH", requires = "kubernetes")]
    kubernetes_url_file: Option<PathBuf>,
    /// With --kubernetes: create a fixed KubeVirt fleet in the infra cluster at start
    /// (VirtualMachines demo-cp-1, demo-workers-2 and demo-workers-3 of cluster `demo`),
    /// so that the workload cluster `demo` comes up, for client conformance tests.
    #[arg(long, requires = "kubernetes")]
    kubevirt_fixture: bool,
    /// Also serve, on this address, an HTTP proxy into the simulated clusters' network:
    /// `CONNECT` to a kubeadm cluster's API endpoint (its load balancer's `host:port`)
    /// reaches that cluster's API server, over TLS with a certificate its CA signed.
    /// Use it as kubectl's `HTTPS_PROXY` and `flightdeck serve --workload-proxy`; port 0
    /// picks a free one.
    #[arg(long, value_name = "ADDR")]
    workload_proxy: Option<std::net::SocketAddr>,
    /// With --workload-proxy: write the proxy's URL (`http://ADDR`) here, once every
    /// listener is bound.
    #[arg(long, value_name = "PATH", requires = "workload_proxy")]
    workload_proxy_file: Option<PathBuf>,
    /// With --kubernetes (test bed): play the workload cluster of --kubelets-cluster on
    /// the real OpenStack of this clouds.yaml entry. Its servers (Nova's fake driver
    /// boots nothing) get simulated kubelets that register by their real IDs
    /// (`openstack:///<id>`); flightdeck reaches them through the cluster's kubeconfig.
    #[arg(long, value_name = "ENTRY", requires_all = ["kubernetes", "kubelets_cluster"])]
    kubelets_for: Option<String>,
    /// With --kubelets-for: the cluster whose servers get kubelets.
    #[arg(long, value_name = "NAME", requires = "kubelets_for")]
    kubelets_cluster: Option<String>,
    /// With --kubelets-for: the cluster's pod network; each node gets a /24 of it.
    #[arg(long, value_name = "CIDR", requires = "kubelets_for")]
    kubelets_pod_cidr: Option<flightdeck_spec::Cidr>,
    /// With --kubelets-for: a server (by name) whose kubelet never starts (F3). Repeat
    /// for more.
    #[arg(long, value_name = "NAME", requires = "kubelets_for")]
    never_register: Vec<String>,
    /// Keep every PodDisruptionBudget's disruptionsAllowed at 0 (the k8s.pdbBlocks
    /// fault) for this many virtual seconds, from --pdb-blocks-from on.
    #[arg(long, value_name = "SECONDS")]
    pdb_blocks_for: Option<u64>,
    /// With --pdb-blocks-for: when the PDBs start blocking, in virtual seconds from the
    /// start.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0,
        requires = "pdb_blocks_for"
    )]
    pdb_blocks_from: u64,
}

#[derive(Args)]
pub struct SwarmArgs {
    /// How many seeds to run.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    from: u64,
    /// Seeds run in parallel (default: the machine's cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Stop starting new seeds after this much wall-clock time (e.g. 5m).
    #[arg(long, value_parser = parse_duration)]
    budget: Option<flightdeck_spec::Duration>,
    #[arg(long, value_enum, default_value_t)]
    output: Output,
    /// Print each seed's whole timeline (for replaying one seed).
    #[arg(long)]
    trace: bool,
    /// Skip the second run of each seed that checks determinism.
    #[arg(long)]
    no_determinism_check: bool,
    /// Switch off a safety mechanism, to prove the swarm notices (testing the tests):
    /// member-gate, ownership-check, remediation-budget, blind-observer-guard,
    /// churn-breaker, drain-on-delete, drain-deadline, template-last-holder,
    /// surge-first; with --split-brain, lease-deadline and claim-revision.
    #[arg(long = "unsafe-disable", value_parser = parse_unsafe)]
    unsafe_disable: Vec<UnsafeSwitch>,
    /// Never restore the store behind the cloud. By default some seeds restore it 20 s to
    /// 10 minutes behind, as from a backup (the fleet's specs are applied again after).
    #[arg(long)]
    no_lagging_store: bool,
    /// Split-brain seeds instead: two or three replicas share an OpenStack fleet on a
    /// simulated etcd (leases, claims, fenced commits); one is paused past its lease in
    /// the middle of a rollout, then resumed. `--unsafe-disable lease-deadline` or
    /// `claim-revision` switches a fence off.
    #[arg(long)]
    split_brain: bool,
}

/// A mechanism `--unsafe-disable` names (the simulator's; absent without it).
#[cfg(feature = "sim")]
pub type UnsafeSwitch = flightdeck_scenario::swarm::Unsafe;

#[cfg(feature = "sim")]
fn parse_unsafe(flag: &str) -> Result<UnsafeSwitch, String> {
    UnsafeSwitch::from_flag(flag)
}

/// Without the simulator there is no swarm; `sim swarm` says so whatever the flags.
#[cfg(not(feature = "sim"))]
pub type UnsafeSwitch = String;

#[cfg(not(feature = "sim"))]
fn parse_unsafe(flag: &str) -> Result<UnsafeSwitch, String> {
    Ok(flag.to_string())
}

#[derive(Args)]
pub struct SimRunArgs {
    /// A built-in scenario name (see `flightdeck sim scenarios`) or a scenario file.
    scenario: String,
    /// Overrides the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    #[arg(long, value_enum, default_value_t)]
    output: Output,
    /// Print only the summary, not the timeline.
    #[arg(short, long)]
    quiet: bool,
    /// Wire mode: serve the simulator over HTTP on loopback and drive it through the
    /// real OpenStack provider (Keystone, Nova, Neutron, Octavia REST).
    #[arg(long)]
    wire: bool,
}

/// `flightdeck up ... | head` closes stdout early. Rust ignores SIGPIPE, so the next
/// print fails and `println!` panics; a reader that went away is no error of ours: the
/// process ends as a shell would end it for SIGPIPE (141), without a panic message.
fn exit_quietly_when_stdout_closes() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        previous(info);
    }));
}

fn parse_duration(s: &str) -> Result<flightdeck_spec::Duration, String> {
    s.parse()
        .map_err(|e: flightdeck_spec::duration::DurationError| e.to_string())
}

/// Diagnostic logs go to stderr at the level named by `FLIGHTDECK_LOG` (error, warn,
/// info, debug, trace); off unless set. Progress and results are printed separately.
fn init_logs() -> Result<(), String> {
    let Ok(level) = std::env::var("FLIGHTDECK_LOG") else {
        return Ok(());
    };
    let level: tracing::Level = level.parse().map_err(|_| {
        format!("FLIGHTDECK_LOG={level:?} is not one of error, warn, info, debug, trace")
    })?;
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .without_time()
        .init();
    Ok(())
}

/// `--store`: `None` for the embedded store, else how this replica joins etcd.
fn replica_options(
    args: &DaemonArgs,
) -> anyhow::Result<Option<flightdeck_daemon::claims::ReplicaOptions>> {
    if args.store == "embedded" {
        return Ok(None);
    }
    if !args.store.starts_with("etcd://") {
        anyhow::bail!(
            "--store {:?}: give `embedded`, or etcd's members as etcd://HOST:PORT[,HOST:PORT…]",
            args.store
        );
    }
    let mut etcd = flightdeck_etcd::EtcdOptions::from_url(&args.store)?;
    etcd.ca_file = args.etcd_cacert.clone();
    etcd.cert_file = args.etcd_cert.clone();
    etcd.key_file = args.etcd_key.clone();
    etcd.user = args.etcd_user.clone();
    etcd.password = std::env::var("FLIGHTDECK_ETCD_PASSWORD")
        .ok()
        .filter(|p| !p.is_empty())
        .map(flightdeck_etcd::Password::new);
    etcd.max_txn_ops = args.etcd_max_txn_ops;
    let name = match &args.replica_name {
        Some(n) => n.clone(),
        None => std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--store etcd: give --replica-name (the host's name cannot be read)"
                )
            })?,
    };
    if !(5..=3600).contains(&args.lease_ttl) {
        anyhow::bail!(
            "--lease-ttl must be 5 to 3600 seconds (twice the 2 s safety margin, and more), got {}",
            args.lease_ttl
        );
    }
    Ok(Some(flightdeck_daemon::claims::ReplicaOptions {
        etcd,
        name,
        ttl: std::time::Duration::from_secs(args.lease_ttl),
    }))
}

async fn serve(args: DaemonArgs) -> anyhow::Result<ExitCode> {
    let replicas = replica_options(&args)?;
    let Some(state_dir) = args.state_dir.or_else(flightdeck_daemon::default_state_dir) else {
        anyhow::bail!("no state directory: pass --state-dir, or set FLIGHTDECK_STATE_DIR or HOME");
    };
    flightdeck_daemon::serve(flightdeck_daemon::ServeOptions {
        state_dir,
        listen: args.listen,
        no_sim: args.no_sim,
        sim_speed: args.sim_speed,
        sim_seed: args.sim_seed,
        insecure: args.insecure,
        concurrency: args.concurrency,
        replicas,
        tls: args.tls_cert.zip(args.tls_key),
        secrets_key_file: args.secrets_key_file,
        workload_proxy: args.workload_proxy,
        limits: flightdeck_daemon::listen::Limits {
            handshake: args.handshake_timeout.to_std(),
            header: args.header_timeout.to_std(),
            idle: args.idle_timeout.to_std(),
            connections: args.max_connections,
            per_address: args.max_connections_per_address,
            streams_per_token: args.max_streams_per_token,
            applies: args.max_applies,
            ..Default::default()
        },
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// The process's allocator: jemalloc (the crate TiKV maintains), not the system's.
/// `flightdeck up` of 1,000 clusters spent a quarter of its time in glibc's malloc and
/// free (its fleet is many small objects made and dropped at every step); with
/// jemalloc it took 42 s instead of 58 s, at the same peak RSS (mimalloc was as fast
/// but held 16 to 40 MB more). README, "Performance".
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    flightdeck_store::quiet_guarded_panics();
    exit_quietly_when_stdout_closes();
    if let Err(e) = init_logs() {
        eprintln!("flightdeck: {e}");
        return ExitCode::from(2);
    }
    // The daemon uses every core; one-shot commands run on one thread.
    let mut builder = if matches!(cli.command, Command::Serve(_)) {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flightdeck: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve(*args).await,
            Command::Up(args) => up::run(args).await,
            Command::Plan(args) => client::plan(args).await,
            Command::Validate(args) => plan_cmd::validate(args),
            Command::Resume(args) => client::resume(args).await,
            Command::Delete(args) => client::delete(args).await,
            Command::Apply(args) => client::apply(args).await,
            Command::Get(args) => client::get(args).await,
            Command::Describe(args) => client::describe(args).await,
            Command::Events(args) => client::events(args).await,
            Command::Store(command) => store_cmd::run(command),
            #[cfg(feature = "sim")]
            Command::Bench(args) => bench::run(args).await,
            #[cfg(feature = "sim")]
            Command::Sim(SimCommand::Scenarios) => sim_cmd::list(),
            #[cfg(feature = "sim")]
            Command::Sim(SimCommand::Run(args)) => sim_cmd::run(args).await,
            #[cfg(feature = "sim")]
            Command::Sim(SimCommand::Swarm(args)) => swarm_cmd::run(args),
            #[cfg(feature = "sim")]
            Command::Sim(SimCommand::Serve(args)) => serve_cmd::run(*args).await,
            #[cfg(not(feature = "sim"))]
            Command::Sim(
                SimCommand::Scenarios
                | SimCommand::Run(_)
                | SimCommand::Swarm(_)
                | SimCommand::Serve(_),
            ) => Err(anyhow::anyhow!(
                "this flightdeck was built without the simulator (cargo feature `sim`)"
            )),
            Command::Sim(SimCommand::Fault(args)) => client::fault(*args).await,
            Command::Sim(SimCommand::Faults(args)) => client::faults(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("flightdeck: {e:#}");
            ExitCode::from(2)
        }
    }
}
