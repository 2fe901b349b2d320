//! Starting and stopping the daemon.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail};
use flightdeck_store::Store;
use tokio::sync::watch;

use crate::api::{APPLY_BODY_MAX, ApiState, router};
use crate::auth::{Tokens, authorize};
use crate::claims::ReplicaOptions;
use crate::fleet::{Fleet, FleetOptions};
use crate::metrics::Metrics;
use crate::published::Published;
use crate::sim_host::SimHost;

/// The file `serve` writes its API's base URL to, for the CLI on the same machine.
pub const URL_FILE: &str = "api.url";
/// The address `serve` listens on by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7443";

pub struct ServeOptions {
    pub state_dir: PathBuf,
    pub listen: SocketAddr,
    /// Run without the embedded simulator.
    pub no_sim: bool,
    /// Virtual seconds per wall-clock second of the embedded simulator.
    pub sim_speed: f64,
    pub sim_seed: u64,
    /// Allow a non-loopback listen address without TLS.
    pub insecure: bool,
    pub concurrency: usize,
    /// Serve the API over TLS with this PEM certificate chain and key.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Keep state in etcd as one replica among several, instead of in the embedded
    /// store under `state_dir` (which then holds only the tokens and the API address).
    pub replicas: Option<ReplicaOptions>,
    /// The bounds on the API's connections, streams and applies.
    pub limits: crate::listen::Limits,
    /// The key the clusters' secrets are sealed with at rest (default:
    /// `secrets.key` in `state_dir`, made there when missing and the store holds no
    /// sealed secret). Replicas sharing an etcd store must share one key file.
    pub secrets_key_file: Option<PathBuf>,
    /// The HTTP proxy the kubeadm clusters' API servers are reached through, if any.
    pub workload_proxy: Option<String>,
}

/// `$FLIGHTDECK_STATE_DIR`, else `$XDG_STATE_HOME/flightdeck`, else
/// `$HOME/.local/state/flightdeck`.
pub fn default_state_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("FLIGHTDECK_STATE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("flightdeck"));
    }
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|h| PathBuf::from(h).join(".local/state/flightdeck"))
}

fn check_options(o: &ServeOptions) -> anyhow::Result<()> {
    if !(o.sim_speed.is_finite() && o.sim_speed > 0.0 && o.sim_speed <= 1000.0) {
        bail!(
            "--sim-speed must be above 0 and at most 1000, got {}",
            o.sim_speed
        );
    }
    o.limits.check()?;
    if o.concurrency == 0 || o.concurrency > 1024 {
        bail!("--concurrency must be 1 to 1024, got {}", o.concurrency);
    }
    if let Some(r) = &o.replicas {
        if !o.no_sim {
            bail!(
                "--store {}: replicas share their clusters, and the embedded simulator lives in one process. \
                 Give --no-sim, and serve one simulated cloud for all of them with `flightdeck sim serve`",
                r.etcd.describe()
            );
        }
        r.etcd.validate()?;
        if o.secrets_key_file.is_none() {
            bail!(
                "--store {}: replicas share their clusters' sealed secrets, so they must share one key: give each the same --secrets-key-file (its own state directory's would be a key of its own)",
                r.etcd.describe()
            );
        }
        if r.name.is_empty() || r.name.contains('/') || r.name.len() > 63 {
            bail!(
                "--replica-name {:?}: a replica's name is 1 to 63 characters, without '/'",
                r.name
            );
        }
    }
    if !o.listen.ip().is_loopback() && !o.insecure && o.tls.is_none() {
        bail!(
            "refusing to listen on {} without TLS: bearer tokens would cross the network in clear text. \
             Give --tls-cert and --tls-key, listen on a loopback address (127.0.0.1), or pass --insecure \
             if a TLS proxy in front of flightdeck terminates TLS",
            o.listen
        );
    }
    Ok(())
}

/// How often the daemon adds a backup of its store to the rotation (one is taken at
/// start too).
pub const BACKUP_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// Backs the store up at start and every [`BACKUP_EVERY`], off the async threads. A
/// failed backup is logged and tried again at the next turn; it never stops the daemon.
async fn rolling_backups(store: Arc<Store>, dir: std::path::PathBuf) {
    let mut every = tokio::time::interval(BACKUP_EVERY);
    loop {
        every.tick().await;
        let (store, dir) = (store.clone(), dir.clone());
        match tokio::task::spawn_blocking(move || store.rolling_backup(&dir)).await {
            Ok(Ok(path)) => tracing::info!(path = %path.display(), "store backed up"),
            Ok(Err(e)) => tracing::warn!(error = %e, "store backup failed"),
            Err(e) => tracing::warn!(error = %e, "store backup task failed"),
        }
    }
}

fn open_store(dir: &Path) -> anyhow::Result<Store> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Store::open(dir).map_err(|e| {
        let text = e.to_string();
        if text.contains("already open") || text.contains("lock") {
            anyhow::anyhow!(
                "state directory {} is in use by another flightdeck process ({text}); stop it first, or give this one another --state-dir",
                dir.display()
            )
        } else {
            anyhow::anyhow!(e)
        }
    })
}

/// The key the clusters' secrets are sealed with: `--secrets-key-file`, else
/// `secrets.key` in the state directory; made when missing, unless the store already
/// holds sealed secrets (then a missing key is an error naming the file).
fn secrets_key(
    options: &ServeOptions,
    store: &flightdeck_store::Store,
) -> anyhow::Result<flightdeck_engine::secrets::SecretsAtRest> {
    let path = options
        .secrets_key_file
        .clone()
        .unwrap_or_else(|| options.state_dir.join(flightdeck_guest::KEY_FILE));
    let sealed = !store
        .keys(flightdeck_engine::secrets::T_PKI)
        .context("cannot read the store")?
        .is_empty();
    let key = flightdeck_guest::SecretsKey::load_or_create(&path, sealed)?;
    Ok(flightdeck_engine::secrets::SecretsAtRest::Sealed(Arc::new(
        key,
    )))
}

/// Runs the daemon until SIGTERM or SIGINT; then stops taking work, lets reconciles in
/// flight finish and commit, and returns.
pub async fn serve(options: ServeOptions) -> anyhow::Result<()> {
    serve_until(options, wait_for_signal()).await
}

/// Runs the daemon until `stop` completes (see [`serve`]).
pub async fn serve_until(
    options: ServeOptions,
    until: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    check_options(&options)?;
    let dir = &options.state_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    // Replicas advertise the address they are bound to (other machines send requests
    // there); the CLI on this machine reads api.url, which names one it can reach.
    let bound = listener.local_addr()?;
    let advertised = format!("{scheme}://{bound}");
    let url = format!("{scheme}://{}", reachable(bound));
    let (store, member) = match &options.replicas {
        None => (Arc::new(open_store(dir)?), None),
        Some(r) => {
            let (store, member) = crate::claims::join(r, &advertised)?;
            (Arc::new(store), Some(member))
        }
    };
    // The embedded store is backed up here; etcd has its own (`etcdctl snapshot save`).
    let backups = member
        .is_none()
        .then(|| tokio::spawn(rolling_backups(store.clone(), dir.clone())));
    let tokens = Arc::new(Tokens::load_or_create(dir)?);
    let secrets = secrets_key(&options, &store)?;
    let sim = if options.no_sim {
        None
    } else {
        Some(
            SimHost::start(options.sim_seed, options.sim_speed)
                .map_err(|f| anyhow::anyhow!(f.message))?,
        )
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let published = Arc::new(Published::new(Metrics::new()));
    let fleet = Fleet::start(
        store.clone(),
        sim.clone(),
        published,
        FleetOptions {
            concurrency: options.concurrency,
            claims: member.clone().map(|m| m as Arc<dyn crate::claims::Claims>),
            secrets,
            workload_proxy: options.workload_proxy.clone(),
        },
        stop_rx.clone(),
    )
    .await?;
    let turns = member
        .clone()
        .map(|m| m.start(store.clone(), fleet.clone(), stop_rx.clone()));
    let state = Arc::new(ApiState {
        fleet: fleet.clone(),
        ready: AtomicBool::new(true),
        stop: stop_rx.clone(),
        applies: Arc::new(tokio::sync::Semaphore::new(options.limits.applies)),
        streams: crate::streams::Streams::new(options.limits.streams_per_token),
    });
    let (api, doc) = router(state.clone());
    let _ = crate::OPENAPI.set(
        doc.to_pretty_json()
            .context("cannot render the OpenAPI document")?,
    );
    let app = api
        .merge(crate::web::router())
        .layer(axum::middleware::from_fn_with_state(
            tokens.clone(),
            authorize,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(APPLY_BODY_MAX))
        .layer(axum::middleware::from_fn_with_state(
            crate::contract::Tls(options.tls.is_some()),
            crate::contract::answer_contract,
        ));
    let tls = match &options.tls {
        Some((cert, key)) => Some(crate::tls::config(cert, key)?),
        None => None,
    };
    std::fs::write(dir.join(URL_FILE), format!("{url}\n"))
        .with_context(|| format!("cannot write {}", dir.join(URL_FILE).display()))?;
    let sim_note = match (&sim, &options.replicas) {
        (Some(s), _) => format!("embedded simulator at {}x real time", s.speed()),
        (None, Some(r)) => format!(
            "replica {} on {} (lease {}s)",
            r.name,
            r.etcd.describe(),
            r.ttl.as_secs()
        ),
        (None, None) => "no simulator".into(),
    };
    eprintln!(
        "flightdeck serve: API at {url}/api/v1 · admin token in {} · {sim_note}",
        tokens.admin_file.display()
    );
    if options.listen.ip().is_unspecified() {
        eprintln!(
            "flightdeck serve: listening on every address ({}); {} names the loopback one for the CLI on this machine",
            options.listen, URL_FILE
        );
    }
    let mut stop = stop_rx.clone();
    let shutdown_state = state.clone();
    let stopped = async move {
        let _ = stop.changed().await;
        shutdown_state.ready.store(false, Ordering::Relaxed);
    };
    let (limits, lowered) = options.limits.clone().fitted_to_open_files();
    if let Some(why) = lowered {
        eprintln!("flightdeck serve: {why}");
    }
    let server = crate::listen::serve(listener, tls, app, limits, stopped);
    let signals = tokio::spawn(async move {
        until.await;
        eprintln!(
            "flightdeck serve: stopping: no new work; reconciles in flight finish and commit"
        );
        let _ = stop_tx.send(true);
    });
    server.await;
    fleet.stopped().await;
    if let Some(t) = turns {
        let _ = t.await;
    }
    if let Some(m) = member {
        // After the drain: the reconciles in flight committed under the claims.
        let _ = tokio::task::spawn_blocking(move || m.leave()).await;
    }
    signals.abort();
    if let Some(b) = backups {
        // Waited for, so that its hold on the store is gone when serve returns.
        b.abort();
        let _ = b.await;
    }
    // No daemon answers there any more: the CLI must not try it.
    let _ = std::fs::remove_file(dir.join(URL_FILE));
    eprintln!("flightdeck serve: stopped");
    Ok(())
}

/// The address a client on this machine reaches the API at: the loopback address of
/// the same family when the daemon listens on every address (0.0.0.0 or ::), which no
/// client can connect to.
fn reachable(bound: SocketAddr) -> SocketAddr {
    match bound.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, bound.port()))
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, bound.port()))
        }
        _ => bound,
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_written_for_the_cli_names_an_address_it_can_reach() {
        let any4: SocketAddr = "0.0.0.0:7443".parse().expect("addr");
        assert_eq!(reachable(any4).to_string(), "127.0.0.1:7443");
        let any6: SocketAddr = "[::]:7443".parse().expect("addr");
        assert_eq!(reachable(any6).to_string(), "[::1]:7443");
        let one: SocketAddr = "192.0.2.7:7443".parse().expect("addr");
        assert_eq!(reachable(one), one);
    }
}
