//! How flightdeck reaches a workload cluster's API: [`WorkloadClients`], with a
//! kubeconfig file ([`KubeconfigFile`]), a kubeconfig Secret in the infra cluster as
//! Cluster API writes it ([`KubeconfigSecret`]), or any closure ([`WorkloadFn`], e.g. an
//! in-process client per cluster).
//!
//! A kubeconfig that is not there yet (no file, no Secret) means the workload cluster is
//! not reachable yet: `Ok(None)`, never an error, because the engine must go on building
//! the cluster that will write it. A kubeconfig that is there but unusable is a Permanent
//! error naming the file or Secret, and never quoting its contents.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use flightdeck_cloud::{CloudError, ErrorClass, Ownership};
use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Api, Client, Config};

use crate::errors::{self, CallKind};

/// The key of a kubeconfig Secret that holds the kubeconfig (Cluster API's
/// `<cluster>-kubeconfig`).
pub const SECRET_KEY: &str = "value";

/// How long one API request may take before it fails as Transient. A reconcile never
/// waits longer than this on one call.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long connecting to a workload API may take before the call fails as Transient.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A client for the workload cluster of `owner`.
pub trait WorkloadClients: Send + Sync {
    /// `Ok(None)`: the workload cluster's API is not reachable yet (its kubeconfig is
    /// not written yet, say).
    fn client(
        &self,
        owner: &Ownership,
    ) -> impl Future<Output = Result<Option<Client>, CloudError>> + Send;
}

impl<T: WorkloadClients> WorkloadClients for std::sync::Arc<T> {
    fn client(
        &self,
        owner: &Ownership,
    ) -> impl Future<Output = Result<Option<Client>, CloudError>> + Send {
        (**self).client(owner)
    }
}

/// Any function from the owner to a client, e.g. an in-process client per cluster built
/// with `kube::Client::new(tower::service_fn(…), "default")`.
pub struct WorkloadFn<F>(pub F);

impl<F> WorkloadFn<F>
where
    F: Fn(&Ownership) -> Result<Option<Client>, CloudError> + Send + Sync,
{
    /// Lets a closure's argument and result types be inferred.
    pub fn new(f: F) -> Self {
        WorkloadFn(f)
    }
}

impl<F> WorkloadClients for WorkloadFn<F>
where
    F: Fn(&Ownership) -> Result<Option<Client>, CloudError> + Send + Sync,
{
    async fn client(&self, owner: &Ownership) -> Result<Option<Client>, CloudError> {
        (self.0)(owner)
    }
}

/// One kubeconfig file for the workload cluster. The client is built once and again only
/// when the file changes (its modification time or size).
pub struct KubeconfigFile {
    path: PathBuf,
    cached: Mutex<Option<(FileStamp, Client)>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
}

impl KubeconfigFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        KubeconfigFile {
            path: path.into(),
            cached: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::fmt::Debug for KubeconfigFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeconfigFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl WorkloadClients for KubeconfigFile {
    async fn client(&self, _owner: &Ownership) -> Result<Option<Client>, CloudError> {
        let stamp = match std::fs::metadata(&self.path) {
            Ok(m) => FileStamp {
                modified: m.modified().ok(),
                len: m.len(),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::debug!(path = %self.path.display(), "workload kubeconfig not written yet");
                return Ok(None);
            }
            Err(e) => {
                return Err(kubeconfig_problem(
                    errors::WORKLOAD,
                    &file_label(&self.path),
                    &format!("cannot be read: {e}"),
                ));
            }
        };
        if let Some((s, c)) = lock(&self.cached).as_ref()
            && *s == stamp
        {
            return Ok(Some(c.clone()));
        }
        let client = client_from_file(errors::WORKLOAD, &self.path, "default").await?;
        *lock(&self.cached) = Some((stamp, client.clone()));
        Ok(Some(client))
    }
}

/// A Secret in the infra cluster whose key `value` holds the workload cluster's
/// kubeconfig (as Cluster API writes `<cluster>-kubeconfig`). The client is rebuilt only
/// when the Secret's resourceVersion changes.
pub struct KubeconfigSecret {
    infra: Client,
    namespace: String,
    name: String,
    cached: Mutex<Option<(String, Client)>>,
}

impl KubeconfigSecret {
    pub fn new(infra: Client, namespace: &str, name: &str) -> Self {
        KubeconfigSecret {
            infra,
            namespace: namespace.to_string(),
            name: name.to_string(),
            cached: Mutex::new(None),
        }
    }
}

impl std::fmt::Debug for KubeconfigSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeconfigSecret")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl WorkloadClients for KubeconfigSecret {
    async fn client(&self, _owner: &Ownership) -> Result<Option<Client>, CloudError> {
        let label = format!("Secret {}/{}", self.namespace, self.name);
        let api: Api<Secret> = Api::namespaced(self.infra.clone(), &self.namespace);
        let secret = match api.get_opt(&self.name).await {
            Ok(Some(s)) => s,
            Ok(None) => {
                tracing::debug!(secret = %label, "workload kubeconfig not written yet");
                return Ok(None);
            }
            Err(e) => {
                return Err(errors::cloud_error(
                    errors::INFRA,
                    "get secret",
                    CallKind::Plain,
                    e,
                ));
            }
        };
        let version = secret.metadata.resource_version.clone().unwrap_or_default();
        if !version.is_empty()
            && let Some((v, c)) = lock(&self.cached).as_ref()
            && *v == version
        {
            return Ok(Some(c.clone()));
        }
        let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(SECRET_KEY)) else {
            return Err(kubeconfig_problem(
                errors::WORKLOAD,
                &label,
                &format!("has no key {SECRET_KEY:?}"),
            ));
        };
        let text = std::str::from_utf8(&bytes.0)
            .map_err(|_| kubeconfig_problem(errors::WORKLOAD, &label, "is not UTF-8 text"))?;
        let kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| {
            kubeconfig_problem(errors::WORKLOAD, &label, &kubeconfig_error_text(&e))
        })?;
        let client = client_from(errors::WORKLOAD, &label, kubeconfig, "default").await?;
        *lock(&self.cached) = Some((version, client.clone()));
        Ok(Some(client))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere while holding the cache leaves a usable value: a client or none.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn file_label(path: &Path) -> String {
    format!("kubeconfig {}", path.display())
}

/// A Permanent error about a kubeconfig, naming where it is (`what`).
fn kubeconfig_problem(service: &'static str, what: &str, problem: &str) -> CloudError {
    CloudError::new(
        ErrorClass::Permanent,
        service,
        "load kubeconfig",
        None,
        format!("{what} {problem}"),
    )
}

/// What is wrong with a kubeconfig, without quoting it: a YAML error may show the text
/// around it, which may be a token, so only its position is kept.
pub fn kubeconfig_error_text(e: &KubeconfigError) -> String {
    match e {
        KubeconfigError::Parse(p) => match p.location() {
            Some(l) => format!(
                "is not a kubeconfig: YAML error at line {}, column {} (the text is not shown: it may hold credentials)",
                l.line(),
                l.column()
            ),
            None => {
                "is not a kubeconfig: YAML error (the text is not shown: it may hold credentials)"
                    .into()
            }
        },
        KubeconfigError::ReadConfig(io, _) => format!("cannot be read: {io}"),
        other => format!("is not usable: {other}"),
    }
}

/// A client for the kubeconfig file at `path`, with flightdeck's settings (see
/// [`client_from`]). Errors are Permanent and name the file.
pub async fn client_from_file(
    service: &'static str,
    path: &Path,
    namespace: &str,
) -> Result<Client, CloudError> {
    let label = file_label(path);
    let kubeconfig = Kubeconfig::read_from(path)
        .map_err(|e| kubeconfig_problem(service, &label, &kubeconfig_error_text(&e)))?;
    client_from(service, &label, kubeconfig, namespace).await
}

/// A client for `kubeconfig` (its current context), with flightdeck's settings:
///
/// - kube's built-in retry is off: it would retry a 429 (an eviction blocked by a
///   disruption budget) or a 503 for many minutes inside one reconcile, and the engine
///   retries by itself, by error class;
/// - every request is bounded by [`REQUEST_TIMEOUT`].
pub async fn client_from(
    service: &'static str,
    what: &str,
    kubeconfig: Kubeconfig,
    namespace: &str,
) -> Result<Client, CloudError> {
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| kubeconfig_problem(service, what, &kubeconfig_error_text(&e)))?;
    config.default_retry = false;
    // An endpoint nothing answers at (a VIP not routed yet) fails the call in time,
    // never holding a reconcile for the system's TCP timeout.
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(REQUEST_TIMEOUT);
    config.reset_reader_on_write = true;
    config.default_namespace = namespace.to_string();
    Client::try_from(config).map_err(|e| {
        kubeconfig_problem(
            service,
            what,
            &format!("gives no client: {}", errors::describe(&e)),
        )
    })
}

/// Each cluster's kubeconfig file, as its spec names it (`spec.workload.kubeconfig`),
/// for every cluster on one cloud. A cluster that names none has no reachable workload
/// cluster: its nodes are unknown, and nothing is judged from them.
#[derive(Debug, Default)]
pub struct KubeconfigFiles {
    files: std::sync::RwLock<std::collections::BTreeMap<String, std::sync::Arc<KubeconfigFile>>>,
}

impl KubeconfigFiles {
    pub fn new() -> Self {
        KubeconfigFiles::default()
    }

    /// Records the kubeconfig `path` of `cluster` (`None`: it names none). A file that
    /// stays the same keeps its cached client.
    /// The kubeconfig `spec.workload.kubeconfig` of `spec` names, for its cluster.
    pub fn set_from(&self, spec: &flightdeck_spec::Cluster) {
        let path = spec.spec.workload.as_ref().map(|w| w.kubeconfig.as_str());
        self.set(spec.name().as_str(), path);
    }

    pub fn set(&self, cluster: &str, path: Option<&str>) {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        match path {
            Some(p) if files.get(cluster).is_some_and(|f| f.path() == Path::new(p)) => {}
            Some(p) => {
                files.insert(
                    cluster.to_string(),
                    std::sync::Arc::new(KubeconfigFile::new(p)),
                );
            }
            None => {
                files.remove(cluster);
            }
        }
    }

    fn get(&self, cluster: &str) -> Option<std::sync::Arc<KubeconfigFile>> {
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        files.get(cluster).cloned()
    }
}

impl WorkloadClients for KubeconfigFiles {
    async fn client(&self, owner: &Ownership) -> Result<Option<Client>, CloudError> {
        match self.get(&owner.cluster) {
            Some(file) => file.client(owner).await,
            None => Ok(None),
        }
    }
}
