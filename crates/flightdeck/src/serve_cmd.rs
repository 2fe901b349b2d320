//! `flightdeck sim serve`: the simulated OpenStack over HTTP, in real time, with
//! `--opennebula` the simulated OpenNebula's XML-RPC API, and with `--kubernetes` the
//! simulated Kubernetes clusters (KubeVirt's infra cluster and the workload clusters),
//! all from the same simulator.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use flightdeck_cloud::{SimClock, Timestamp};
use flightdeck_scenario::load_scenario;
use flightdeck_sim::{INFRA_CLUSTER, KubeRequest, SimCloud, SimConfig, SimFault};
use flightdeck_sim_http::{
    ServeOptions, WorkloadListeners, serve, serve_kubernetes, serve_opennebula,
    serve_workload_proxy,
};
use flightdeck_spec::FaultKind;
use serde_json::{Value, json};

use crate::ServeArgs;

/// The one OpenNebula user the simulator knows.
const ONE_USER: &str = "oneadmin";

/// The wall clock, read here at the binary's edge only.
fn wall() -> Timestamp {
    Timestamp(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    )
}

pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if !(args.speed.is_finite() && args.speed > 0.0 && args.speed <= 1000.0) {
        bail!(
            "--speed must be a number above 0 and at most 1000, got {}",
            args.speed
        );
    }
    let start = wall();
    let clock = SimClock::new(start);
    let config = SimConfig::default();
    let one_password = config.one_password.clone();
    let cloud = Arc::new(SimCloud::new(config, args.seed, clock.clone()));
    schedule_faults(&args, &cloud, start)?;
    if args.kubevirt_fixture {
        seed_kubevirt_fixture(&cloud)?;
    }
    if let (Some(entry), Some(cluster)) = (&args.kubelets_for, &args.kubelets_cluster) {
        let follow = crate::sim_kubelets::Follow {
            entry: entry.clone(),
            cluster: cluster.clone(),
            pod_cidr: args.kubelets_pod_cidr,
            never_register: args.never_register.clone(),
        };
        let source = crate::sim_kubelets::connect(&follow).await?;
        tokio::spawn(crate::sim_kubelets::run(cloud.clone(), source, follow));
    }
    // Virtual time follows the wall clock, scaled by --speed.
    let speed = args.speed;
    let ticker = clock.clone();
    let began = Instant::now();
    let tick_cloud = cloud.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let elapsed = began.elapsed().as_secs_f64() * speed * 1000.0;
            ticker.advance_to(start.plus_millis(elapsed as u64));
            tick_cloud.advance();
        }
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    // Every listener is bound before any file is written: a client that finds the
    // files finds every server.
    let one_listener = bind_if(args.opennebula, "--opennebula").await?;
    let kube_listener = bind_if(args.kubernetes, "--kubernetes").await?;
    let proxy_listener = bind_if(args.workload_proxy, "--workload-proxy").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let options = ServeOptions::default();
    // It holds the simulator's password: readable by its owner only, like the kubeconfigs.
    write_private(
        &args.clouds_file,
        &options.clouds_yaml("flightdeck-sim", &base),
    )
    .with_context(|| format!("cannot write {}", args.clouds_file.display()))?;
    println!("simulated OpenStack at {base} (Keystone: {base}/identity/v3)");
    println!(
        "clouds.yaml entry \"flightdeck-sim\" written to {}; use it with:",
        args.clouds_file.display()
    );
    println!(
        "  export OS_CLIENT_CONFIG_FILE={} OS_CLOUD=flightdeck-sim",
        args.clouds_file.display()
    );
    if let Some(l) = &one_listener {
        announce_opennebula(&args, l, &one_password)?;
    }
    if let Some(l) = &kube_listener {
        announce_kubernetes(&args, l, &cloud)?;
    }
    if let Some(l) = &proxy_listener {
        announce_workload_proxy(&args, l)?;
    }
    if let Some(path) = &args.mutation_log {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open the mutation log {}", path.display()))?;
        tokio::spawn(write_mutation_log(cloud.clone(), file, path.clone()));
    }
    let one = async {
        match one_listener {
            Some(l) => serve_opennebula(cloud.clone(), l).await,
            None => Ok(()),
        }
    };
    let kube = async {
        match kube_listener {
            Some(l) => serve_kubernetes(cloud.clone(), l).await,
            None => Ok(()),
        }
    };
    let proxy = async {
        match proxy_listener {
            Some(l) => serve_workload_proxy(WorkloadListeners::new(cloud.clone()), l).await,
            None => Ok(()),
        }
    };
    tokio::try_join!(serve(cloud.clone(), listener, options), one, kube, proxy)?;
    Ok(ExitCode::SUCCESS)
}

/// Schedules the faults of `--scenario` (and adds its clusters' routers, which an
/// operator provides) and of `--pdb-blocks-for`, from `start` on.
fn schedule_faults(args: &ServeArgs, cloud: &SimCloud, start: Timestamp) -> anyhow::Result<()> {
    if let Some(name) = &args.scenario {
        let loaded = load_scenario(name)?;
        for f in &loaded.scenario.spec.faults {
            cloud.inject(SimFault::from_spec(f, start));
        }
        for router in loaded.operator_routers() {
            cloud.add_foreign_router(&router);
        }
        eprintln!(
            "scenario {}: {} fault(s) scheduled from now on",
            loaded.scenario.metadata.name,
            loaded.scenario.spec.faults.len()
        );
    }
    if let Some(secs) = args.pdb_blocks_for {
        let from = start.plus_millis(args.pdb_blocks_from.saturating_mul(1000));
        let mut fault = SimFault::new(FaultKind::K8sPdbBlocks, from);
        fault.end = Some(from.plus_millis(secs.saturating_mul(1000)));
        cloud.inject(fault);
        eprintln!(
            "k8s.pdbBlocks: every PodDisruptionBudget blocks from {}s to {}s (virtual, from now)",
            args.pdb_blocks_from,
            args.pdb_blocks_from.saturating_add(secs)
        );
    }
    Ok(())
}

/// Says where the simulated OpenNebula is, and writes its credential and endpoint files.
fn announce_opennebula(
    args: &ServeArgs,
    one_listener: &tokio::net::TcpListener,
    one_password: &str,
) -> anyhow::Result<()> {
    let endpoint = format!("http://{}/RPC2", one_listener.local_addr()?);
    println!("simulated OpenNebula at {endpoint} (XML-RPC, user {ONE_USER})");
    if let Some(path) = &args.one_auth_file {
        write_private(path, &format!("{ONE_USER}:{one_password}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("ONE_AUTH file written to {}; use it with:", path.display());
        println!("  export ONE_XMLRPC={endpoint} ONE_AUTH={}", path.display());
    }
    if let Some(path) = &args.one_xmlrpc_file {
        write_line(path, &endpoint)?;
    }
    Ok(())
}

/// Says where the simulated Kubernetes clusters are, writes the infra kubeconfig and the
/// URL file, and starts writing each workload cluster's kubeconfig as it appears.
fn announce_kubernetes(
    args: &ServeArgs,
    kube_listener: &tokio::net::TcpListener,
    cloud: &Arc<SimCloud>,
) -> anyhow::Result<()> {
    let kube_base = format!("http://{}", kube_listener.local_addr()?);
    println!(
        "simulated Kubernetes at {kube_base}/clusters/CLUSTER (infra: {kube_base}/clusters/{INFRA_CLUSTER}; any bearer token is accepted)"
    );
    if let Some(dir) = &args.kubeconfig_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let infra = write_kubeconfig(dir, &kube_base, INFRA_CLUSTER)?;
        println!(
            "infra cluster kubeconfig written to {}; use it with:",
            infra.display()
        );
        println!("  export KUBECONFIG={}", infra.display());
        println!(
            "workload clusters' kubeconfigs appear as {}/CLUSTER.kubeconfig",
            dir.display()
        );
        tokio::spawn(write_workload_kubeconfigs(
            cloud.clone(),
            dir.clone(),
            kube_base.clone(),
        ));
    }
    if let Some(path) = &args.kubernetes_url_file {
        write_line(path, &kube_base)?;
    }
    Ok(())
}

/// Says where the proxy into the clusters' network is, and writes its URL file.
fn announce_workload_proxy(
    args: &ServeArgs,
    proxy_listener: &tokio::net::TcpListener,
) -> anyhow::Result<()> {
    let url = format!("http://{}", proxy_listener.local_addr()?);
    println!(
        "kubeadm clusters' API servers (TLS, their CA's certificates) through the proxy {url}; use it with:"
    );
    println!("  export HTTPS_PROXY={url}");
    if let Some(path) = &args.workload_proxy_file {
        write_line(path, &url)?;
    }
    Ok(())
}

/// Writes `text` and a newline to `path` (a URL or endpoint file a client waits for).
fn write_line(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, format!("{text}\n"))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A listener on `addr`, when the flag named `flag` gave one.
async fn bind_if(
    addr: Option<std::net::SocketAddr>,
    flag: &str,
) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} ({flag})"))?;
    Ok(Some(listener))
}

/// How often new mutations are appended to `--mutation-log`.
const MUTATION_LOG_INTERVAL: Duration = Duration::from_millis(200);

/// Appends each mutation, as it comes, to `file` (JSON lines), forever. A failed write
/// stops the log with an error on stderr; the simulator goes on.
async fn write_mutation_log(cloud: Arc<SimCloud>, file: std::fs::File, path: PathBuf) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(file);
    let mut next = 0;
    loop {
        tokio::time::sleep(MUTATION_LOG_INTERVAL).await;
        let (new, upto) = cloud.mutations_since(next);
        if upto > next.saturating_add(new.len() as u64) {
            eprintln!(
                "mutation log {}: {} mutations were dropped from the simulator's bounded log before they could be written",
                path.display(),
                upto - next - new.len() as u64
            );
        }
        next = upto;
        let logged = wall().millis();
        let written = new.iter().try_for_each(|m| {
            let mut line = serde_json::to_value(m).unwrap_or(Value::Null);
            if let Some(o) = line.as_object_mut() {
                o.insert("logged_ms".into(), json!(logged));
            }
            writeln!(out, "{line}")
        });
        if let Err(e) = written.and_then(|()| out.flush()) {
            eprintln!(
                "mutation log {}: cannot write: {e}; no longer logging",
                path.display()
            );
            return;
        }
    }
}

/// The most workload-cluster kubeconfigs written; later clusters get none (and a
/// warning), so a runaway fleet cannot fill the directory.
const KUBECONFIGS_MAX: usize = 1_000;

/// How often the workload clusters are looked for.
const KUBECONFIG_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Writes `DIR/NAME.kubeconfig` for every workload cluster as it appears, forever.
async fn write_workload_kubeconfigs(cloud: Arc<SimCloud>, dir: PathBuf, base: String) {
    let mut written: BTreeSet<String> = BTreeSet::new();
    let mut warned = false;
    loop {
        for name in cloud.kube_clusters() {
            if written.contains(&name) || name == INFRA_CLUSTER {
                continue;
            }
            if !is_file_safe(&name) {
                if written.len() < KUBECONFIGS_MAX {
                    tracing::warn!(cluster = %name, "no kubeconfig: the name is not a file name");
                }
                written.insert(name);
                continue;
            }
            if written.len() >= KUBECONFIGS_MAX {
                if !warned {
                    tracing::warn!("{KUBECONFIGS_MAX} kubeconfigs written; no more");
                    warned = true;
                }
                continue;
            }
            match write_kubeconfig(&dir, &base, &name) {
                Ok(path) => {
                    println!(
                        "workload cluster {name}: kubeconfig written to {}",
                        path.display()
                    );
                    written.insert(name);
                }
                Err(e) => tracing::warn!(cluster = %name, error = %e, "cannot write kubeconfig"),
            }
        }
        tokio::time::sleep(KUBECONFIG_POLL_INTERVAL).await;
    }
}

/// Whether a cluster's name can be a file name as it is (a DNS-1123 name).
fn is_file_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// A kubeconfig that reaches `cluster` at `{base}/clusters/{cluster}` as a token user.
fn kubeconfig(base: &str, cluster: &str) -> String {
    format!(
        r#"# The simulated cluster {cluster}, served by `flightdeck sim serve`. The server accepts
# any bearer token: this one is a placeholder, not a secret.
apiVersion: v1
kind: Config
clusters:
- name: {cluster}
  cluster:
    server: {base}/clusters/{cluster}
users:
- name: flightdeck-sim
  user:
    token: flightdeck-sim-any-token
contexts:
- name: {cluster}
  context:
    cluster: {cluster}
    user: flightdeck-sim
    namespace: default
current-context: {cluster}
"#
    )
}

/// Writes `DIR/CLUSTER.kubeconfig` (mode 0600) through a temporary file renamed into
/// place, so a reader never sees half of it.
fn write_kubeconfig(dir: &Path, base: &str, cluster: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(format!("{cluster}.kubeconfig"));
    let tmp = dir.join(format!(".{cluster}.kubeconfig.tmp"));
    write_private(&tmp, &kubeconfig(base, cluster))
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
    Ok(path)
}

/// The namespace the fixture's VirtualMachines live in.
const FIXTURE_NAMESPACE: &str = "default";

/// The fixture's machines: (VM name, flightdeck machine name, control plane).
const FIXTURE_MACHINES: [(&str, &str, bool); 3] = [
    ("demo-cp-1", "cp-1", true),
    ("demo-workers-2", "workers-2", false),
    ("demo-workers-3", "workers-3", false),
];

/// A `kubevirt.io/v1` VirtualMachine as flightdeck's KubeVirt provider asks for one.
fn fixture_vm(name: &str, machine: &str, control_plane: bool) -> Value {
    let labels = json!({
        "flightdeck.dev/cluster": "demo",
        "flightdeck.dev/uid": "fixture",
        "flightdeck.dev/role": "machine",
        "flightdeck.dev/machine": machine,
    });
    let mut template_labels = labels.clone();
    if control_plane && let Some(m) = template_labels.as_object_mut() {
        m.insert("flightdeck.dev/control-plane".into(), json!("true"));
    }
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": FIXTURE_NAMESPACE, "labels": labels},
        "spec": {
            "runStrategy": "Always",
            "instancetype": {"kind": "VirtualMachineClusterInstancetype", "name": "u1.medium"},
            "template": {
                "metadata": {"labels": template_labels},
                "spec": {
                    "evictionStrategy": "External",
                    "domain": {"devices": {"disks": [
                        {"name": "containerdisk", "disk": {"bus": "virtio"}}
                    ]}},
                    "volumes": [{
                        "name": "containerdisk",
                        "containerDisk": {"image": "quay.io/containerdisks/ubuntu:22.04"}
                    }],
                },
            },
        },
    })
}

/// Creates the fixture's VirtualMachines through the infra cluster's API, as a client
/// would: the simulator then starts their VMIs and brings up the workload cluster.
fn seed_kubevirt_fixture(cloud: &SimCloud) -> anyhow::Result<()> {
    for (name, machine, control_plane) in FIXTURE_MACHINES {
        let resp = cloud.kube_request(
            INFRA_CLUSTER,
            KubeRequest {
                method: "POST".into(),
                path: format!(
                    "/apis/kubevirt.io/v1/namespaces/{FIXTURE_NAMESPACE}/virtualmachines"
                ),
                query: String::new(),
                body: fixture_vm(name, machine, control_plane)
                    .to_string()
                    .into_bytes(),
                content_type: Some("application/json".into()),
            },
        );
        if !(200..300).contains(&resp.status) {
            bail!(
                "--kubevirt-fixture: creating VirtualMachine {name} answered {}: {}",
                resp.status,
                String::from_utf8_lossy(&resp.body)
            );
        }
    }
    eprintln!(
        "kubevirt fixture: VirtualMachines {} created in namespace {FIXTURE_NAMESPACE} (cluster demo)",
        FIXTURE_MACHINES.map(|m| m.0).join(", ")
    );
    Ok(())
}

/// Writes `contents` to `path` readable by its owner only (mode 0600 on Unix), also
/// when the file already exists with a wider mode: it is narrowed before anything is
/// written.
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_kubeconfig_reaches_its_cluster_under_its_prefix_and_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write_kubeconfig(dir.path(), "http://127.0.0.1:6443", "demo").expect("write");
        assert_eq!(path, dir.path().join("demo.kubeconfig"));
        let mode = std::fs::metadata(&path)
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            text.contains("    server: http://127.0.0.1:6443/clusters/demo\n"),
            "{text}"
        );
        assert!(text.contains("current-context: demo\n"), "{text}");
        assert!(!dir.path().join(".demo.kubeconfig.tmp").exists());
    }

    #[test]
    fn only_dns_names_become_kubeconfig_file_names() {
        assert!(is_file_safe("demo"));
        assert!(is_file_safe("prod-eu.1"));
        for bad in ["", "../etc", "a/b", ".hidden", "Demo", "a b"] {
            assert!(!is_file_safe(bad), "{bad}");
        }
    }

    #[test]
    fn the_fixture_marks_only_the_control_plane_template() {
        let cp = fixture_vm("demo-cp-1", "cp-1", true);
        let worker = fixture_vm("demo-workers-2", "workers-2", false);
        let label = "/spec/template/metadata/labels/flightdeck.dev~1control-plane";
        assert_eq!(cp.pointer(label), Some(&json!("true")));
        assert_eq!(worker.pointer(label), None);
        assert_eq!(
            worker.pointer("/metadata/labels/flightdeck.dev~1machine"),
            Some(&json!("workers-2"))
        );
        assert_eq!(
            cp.pointer("/spec/template/spec/evictionStrategy"),
            Some(&json!("External"))
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_one_auth_file_is_private_even_when_it_existed_wider() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("one_auth");
        std::fs::write(&path, "old contents that are longer\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_private(&path, "oneadmin:secret\n").expect("write_private");
        let mode = std::fs::metadata(&path)
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "oneadmin:secret\n"
        );
    }
}
