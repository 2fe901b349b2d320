//! Real-cloud mode: the engine against a real OpenStack named in `clouds.yaml`, in real
//! time. The system clock and the OS-seeded randomness are read here, at the binary's
//! edge; the engine itself only sees the injected `Clock` and `Rng`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use anyhow::bail;
use flightdeck_cloud::AccessBook;
use flightdeck_cloud::{Clock, DynProvider, Provider, SeededRng};
use flightdeck_engine::{Engine, EngineConfig, TimelineEntry};
use flightdeck_kubevirt::{KubeVirtCloud, KubeconfigFile, KubeconfigSecret, WorkloadClients};
use flightdeck_spec::{Cluster, Duration};
use flightdeck_store::Store;
use flightdeck_workload::KubeconfigFiles;

use crate::output::progress_line;

use flightdeck_daemon::{SystemClock, connect};

pub enum Goal {
    /// Apply the specs and wait until every cluster is Ready; `adopt`: new clusters take
    /// over what earlier clusters of their names left in the cloud.
    Ready { specs: Vec<Cluster>, adopt: bool },
    /// Delete the named cluster and wait until nothing it owned is left; `forget`: the
    /// deletion may end without seeing the cluster's recorded objects.
    Deleted { name: String, forget: bool },
}

/// Each cluster's workload kubeconfig, from the specs of `goal` (a deletion needs no
/// nodes: nothing it does is judged by them).
fn kubeconfigs(goal: &Goal) -> Arc<KubeconfigFiles> {
    let files = Arc::new(KubeconfigFiles::new());
    if let Goal::Ready { specs, .. } = goal {
        for c in specs {
            files.set_from(c);
        }
    }
    files
}

/// How `up` reaches the kubeadm clusters' API servers: directly, or through the HTTP
/// proxy `--workload-proxy` names.
fn reach<'a>(access: &'a Arc<AccessBook>, proxy: Option<&'a str>) -> connect::Reach<'a> {
    connect::Reach { access, proxy }
}

/// Connects to the OpenStack cloud entry `name` and drives the engine to `goal` (see
/// [`drive`]). Nodes come from each cluster's `spec.workload.kubeconfig`.
pub async fn run(
    cloud: &str,
    state_dir: &Path,
    goal: Goal,
    timeout: Duration,
    workload_proxy: Option<&str>,
) -> anyhow::Result<ExitCode> {
    if let Goal::Deleted { name, .. } = &goal {
        check_built_on(state_dir, name, cloud)?;
    }
    let access = Arc::new(AccessBook::new());
    let provider = connect::openstack(cloud, &kubeconfigs(&goal), reach(&access, workload_proxy))
        .await
        .map_err(|f| anyhow::anyhow!(f.message))?;
    let clock = Arc::new(SystemClock);
    drive(provider, clock, Some(access), state_dir, goal, timeout).await
}

/// A cluster is deleted only through the cloud entry it was built on (its stored spec
/// names it): another entry would see none of its objects, and "nothing left" there is
/// no proof of anything, while the cluster would be forgotten with all it owns standing.
fn check_built_on(state_dir: &Path, name: &str, cloud: &str) -> anyhow::Result<()> {
    let store = Store::open(state_dir)?;
    let Some(spec) = flightdeck_engine::stored_spec(&store, name)? else {
        bail!(
            "cluster {name} is not in the store at {}: nothing is known of it to delete",
            state_dir.display()
        );
    };
    match &spec.spec.provider.openstack {
        Some(o) if o.cloud.as_str() == cloud => Ok(()),
        Some(o) => bail!(
            "cluster {name} was built on cloud entry {:?}, not {cloud:?}: flightdeck deletes a cluster only through the cloud it was built on (give --cloud {})",
            o.cloud.as_str(),
            o.cloud.as_str()
        ),
        None => bail!(
            "cluster {name} is not an OpenStack cluster: delete it through its own cloud (--opennebula, or the daemon)"
        ),
    }
}

/// Connects to the OpenNebula at `xmlrpc` (else `$ONE_XMLRPC`) with the credentials in
/// `$ONE_AUTH` (else `~/.one/one_auth`) and drives the engine to `goal`. Nodes come as
/// on OpenStack (see [`run`]).
pub async fn run_opennebula(
    xmlrpc: Option<&str>,
    state_dir: &Path,
    goal: Goal,
    timeout: Duration,
    workload_proxy: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let access = Arc::new(AccessBook::new());
    let provider = connect::opennebula(xmlrpc, &kubeconfigs(&goal), reach(&access, workload_proxy))
        .await
        .map_err(|f| anyhow::anyhow!(f.message))?;
    let version = provider
        .client()
        .system_version()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach OpenNebula: {e}"))?;
    eprintln!("flightdeck: OpenNebula {version}");
    let clock = Arc::new(SystemClock);
    drive(provider, clock, Some(access), state_dir, goal, timeout).await
}

/// How a KubeVirt cluster's workload cluster is reached: a kubeconfig file, a Secret in
/// the infra namespace, or (a cluster flightdeck bootstraps with kubeadm, none given)
/// only with flightdeck's own certificate, from the access book.
pub enum Workload {
    File(KubeconfigFile),
    Secret(KubeconfigSecret),
    OwnCertificate,
}

impl WorkloadClients for Workload {
    async fn client(
        &self,
        owner: &flightdeck_cloud::Ownership,
    ) -> Result<Option<kube::Client>, flightdeck_cloud::CloudError> {
        match self {
            Workload::File(f) => f.client(owner).await,
            Workload::Secret(s) => s.client(owner).await,
            // Until the engine issued its certificate there is nothing to reach it with.
            Workload::OwnCertificate => Ok(None),
        }
    }
}

/// Connects to the KubeVirt infra cluster through `spec.provider.kubevirt.infraKubeconfig`
/// and to the workload cluster through `workloadKubeconfig` (or, for a cluster
/// flightdeck bootstraps with kubeadm and none given, with its own certificate, at the
/// endpoint Service's address, through `workload_proxy` if given), and drives the engine
/// to `goal`. Nothing is simulated: the workload cluster's nodes and pods are real.
pub async fn run_kubevirt(
    spec: &flightdeck_spec::KubeVirtProvider,
    kubeadm: bool,
    state_dir: &Path,
    goal: Goal,
    timeout: Duration,
    workload_proxy: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let Some(infra) = &spec.infra_kubeconfig else {
        bail!("spec.provider.kubevirt.infraKubeconfig names no file: a real KubeVirt needs it");
    };
    let namespace = spec.namespace.as_str();
    let workload = match (&spec.workload_kubeconfig, kubeadm) {
        (None, true) => Workload::OwnCertificate,
        (None, false) => bail!(
            "spec.provider.kubevirt.workloadKubeconfig is absent: a real workload cluster is reached through its kubeconfig (or bootstrapped by flightdeck: spec.bootstrap.provider: kubeadm)"
        ),
        (Some(w), _) => match (&w.file, &w.secret) {
            (Some(file), _) => Workload::File(KubeconfigFile::new(file.as_str())),
            (None, Some(secret)) => {
                let probe = KubeVirtCloud::from_kubeconfig(infra.as_str(), namespace, ())
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                Workload::Secret(KubeconfigSecret::new(
                    probe.infra().clone(),
                    namespace,
                    secret.as_str(),
                ))
            }
            (None, None) => {
                bail!("spec.provider.kubevirt.workloadKubeconfig needs file or secret")
            }
        },
    };
    let access = Arc::new(AccessBook::new());
    let clients = flightdeck_workload::IssuedFirst::new(access.clone(), workload)
        .through_proxy(workload_proxy.map(str::to_string));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let provider = KubeVirtCloud::from_kubeconfig(infra.as_str(), namespace, clients)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .watch_nodes(clock.clone());
    drive(
        Arc::new(provider),
        clock,
        Some(access),
        state_dir,
        goal,
        timeout,
    )
    .await
}

/// Builds the engine on `state_dir` over `provider` and drives it to `goal` in real time,
/// printing progress. With `access`, the engine issues its own certificates for its
/// kubeadm clusters there, which `provider`'s workload clients read.
async fn drive<P: Provider + 'static>(
    provider: Arc<P>,
    clock: Arc<dyn Clock>,
    access: Option<Arc<AccessBook>>,
    state_dir: &Path,
    goal: Goal,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    drive_any(
        DynProvider::new(provider),
        clock,
        access,
        state_dir,
        goal,
        timeout,
    )
    .await
}

/// [`drive`] on any cloud's provider: the engine is compiled once, not once per cloud.
async fn drive_any(
    provider: DynProvider,
    clock: Arc<dyn Clock>,
    access: Option<Arc<AccessBook>>,
    state_dir: &Path,
    goal: Goal,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    let store = Arc::new(Store::open(state_dir)?);
    let seed = SystemClock.now().millis() ^ u64::from(std::process::id());
    // The clusters' secrets are sealed under the state directory's key file, made there
    // on first use, as `serve` does.
    let sealed = !store.keys(flightdeck_engine::secrets::T_PKI)?.is_empty();
    let key = flightdeck_guest::SecretsKey::load_or_create(
        &state_dir.join(flightdeck_guest::KEY_FILE),
        sealed,
    )?;
    let mut engine: Engine<DynProvider> = Engine::new(
        Arc::new(provider),
        store,
        clock.clone(),
        Box::new(SeededRng::new(seed)),
        EngineConfig {
            secrets: Some(flightdeck_engine::secrets::SecretsAtRest::Sealed(Arc::new(
                key,
            ))),
            ..EngineConfig::default()
        },
    )?;
    if let Some(book) = access {
        engine = engine.with_workload_access(book);
    }
    match &goal {
        Goal::Ready { specs, adopt } => {
            for spec in specs {
                engine.apply_with(spec.clone(), *adopt)?;
            }
        }
        Goal::Deleted { name, forget } => {
            engine.delete(name)?;
            if *forget {
                engine.forget(name)?;
            }
        }
    }
    let started = Instant::now();
    let origin = clock.now();
    loop {
        engine.run_due().await?;
        for e in engine.drain_events() {
            let entry = TimelineEntry {
                at_ms: e.at.since(origin).as_millis(),
                source: e.cluster,
                severity: format!("{:?}", e.severity),
                reason: e.reason,
                message: e.message,
            };
            eprintln!("{}", progress_line(&entry));
        }
        let done = match &goal {
            Goal::Ready { specs, .. } => specs.iter().all(|s| {
                engine
                    .cluster(s.name().as_str())
                    .is_some_and(|c| c.status.ready)
            }),
            Goal::Deleted { name, .. } => engine.cluster(name).is_none(),
        };
        if let Some(why) = needs_operator(&engine) {
            bail!("{why}");
        }
        if done {
            let phases: BTreeMap<String, String> = engine
                .clusters()
                .map(|(n, c)| (n.clone(), c.status.phase.as_str().to_string()))
                .collect();
            println!(
                "done after {:.0}s: {phases:?}",
                started.elapsed().as_secs_f64()
            );
            return Ok(ExitCode::SUCCESS);
        }
        if started.elapsed() >= timeout.to_std() {
            bail!("not done after {timeout}");
        }
        let wait = engine
            .next_due()
            .map_or(1000, |t| t.millis().saturating_sub(clock.now().millis()))
            .clamp(100, 2000);
        tokio::time::sleep(StdDuration::from_millis(wait)).await;
    }
}

/// A condition no waiting can clear: objects of an earlier cluster of the same name
/// (adopt them, or remove them), or a deletion that sees none of its recorded objects
/// (check, then `--forget`). The state is kept: the same command with the flag goes on.
fn needs_operator(engine: &Engine<DynProvider>) -> Option<String> {
    use flightdeck_plan::condition::kind;
    engine.clusters().find_map(|(name, c)| {
        c.status
            .conditions
            .iter()
            .find(|x| {
                x.status
                    && (x.kind == kind::FOREIGN_OBJECTS || x.kind == kind::DELETION_UNCONFIRMED)
            })
            .map(|x| format!("cluster {name}: {}: {}", x.kind, x.message))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(dir: &Path, cloud: &str) {
        let text = format!(
            "apiVersion: flightdeck.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: demo}}\nspec:\n  controlPlane: {{replicas: 1, version: v1.30.2, machine: {{flavor: m1, image: img}}}}\n  network: {{podCIDR: 10.244.0.0/16, securityGroup: demo}}\n  provider:\n    openstack: {{cloud: {cloud}, network: n, subnet: s}}\n"
        );
        let docs = flightdeck_spec::load_documents(&text, "t.yaml").expect("spec");
        let [flightdeck_spec::Document::Cluster(c)] = docs.as_slice() else {
            panic!("one cluster")
        };
        let store = Store::open(dir).expect("store");
        store
            .commit(vec![flightdeck_store::Write::put(
                flightdeck_engine::SPEC_TABLE,
                "demo",
                c.as_ref(),
            )])
            .expect("commit");
    }

    #[test]
    fn a_cluster_is_deleted_only_through_the_cloud_it_was_built_on() {
        let dir = tempfile::tempdir().expect("dir");
        stored(dir.path(), "fdstack");
        check_built_on(dir.path(), "demo", "fdstack").expect("its own cloud");
        let e = check_built_on(dir.path(), "demo", "elsewhere").expect_err("another cloud");
        let text = e.to_string();
        assert!(
            text.contains("built on cloud entry \"fdstack\", not \"elsewhere\""),
            "{text}"
        );
        let e = check_built_on(dir.path(), "ghost", "fdstack").expect_err("unknown");
        assert!(e.to_string().contains("not in the store"), "{e}");
    }
}
