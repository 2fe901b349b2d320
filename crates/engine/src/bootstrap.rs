//! kubeadm bootstrap at act time: a machine the planner gave a [`BootstrapPlan`] gets its
//! user data here, rendered by `flightdeck-guest` from the cluster's PKI (opened from the
//! store for this one create, never logged) and, for a join, a bootstrap token made just
//! before through the workload cluster's API. The token's id is kept in the machine's
//! record, so the planner moves its expiration on and deletes it once the machine joined;
//! its secret goes into the machine's data and nowhere else.
//!
//! A token made whose server create then fails (or whose engine crashes before the
//! record is committed) is left to expire: it lives [`TOKEN_TTL`] and the workload
//! cluster's token cleaner deletes it then.

use flightdeck_cloud::{BootstrapTokenSecret, CloudError, ErrorClass, Ownership, Provider};
use flightdeck_guest::{BootstrapToken, ClusterBootstrap, ClusterPki, Role};
use flightdeck_plan::Action;
use flightdeck_plan::bootstrap::{BootstrapPlan, BootstrapRole, TOKEN_TTL};
use flightdeck_plan::memory::TokenRecord;
use flightdeck_spec::Cluster;

/// Where bootstrap tokens come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TokenSource {
    /// The operating system's secure generator: the product.
    #[default]
    Secure,
    /// Drawn from this seed, the machine's name and the time: a simulated run that must
    /// replay (its timeline names each token's id). Never the product's.
    Seeded(u64),
}

impl TokenSource {
    fn token(self, machine: &str, now_ms: u64) -> Result<BootstrapToken, CloudError> {
        match self {
            TokenSource::Secure => BootstrapToken::generate_secure().map_err(|e| {
                CloudError::new(
                    ErrorClass::Transient,
                    "flightdeck",
                    "bootstrap token",
                    None,
                    e.to_string(),
                )
            }),
            TokenSource::Seeded(seed) => {
                let mut rng = flightdeck_cloud::SeededRng::new(
                    seed ^ flightdeck_spec::fnv1a(machine.as_bytes()) ^ now_ms,
                );
                let mut draw = || flightdeck_cloud::Rng::next_u64(&mut rng);
                Ok(BootstrapToken::generate(&mut draw))
            }
        }
    }
}

/// What the cluster's spec says of every machine's kubeadm data, at `plan`'s endpoint.
pub(crate) fn cluster_bootstrap(
    spec: &Cluster,
    plan: &BootstrapPlan,
) -> Result<ClusterBootstrap, String> {
    let s = &spec.spec;
    let b = &s.bootstrap;
    let mut files = Vec::new();
    for (i, f) in b.files.iter().enumerate() {
        let permissions = f
            .mode()
            .and_then(|m| flightdeck_guest::cloudinit::Permissions::new(m).ok())
            .ok_or_else(|| {
                format!(
                    "spec.bootstrap.files[{i}].permissions {:?} is not a mode",
                    f.permissions
                )
            })?;
        files.push(flightdeck_guest::File {
            path: f.path.clone(),
            content: flightdeck_guest::Secret::new(f.content.clone()),
            permissions,
            owner: f.owner.clone(),
        });
    }
    Ok(ClusterBootstrap {
        cluster: spec.name().to_string(),
        kubernetes_version: s.control_plane.version.to_string(),
        endpoint_host: plan.endpoint_host.clone(),
        endpoint_port: plan.endpoint_port,
        pod_subnet: Some(s.network.pod_cidr.to_string()),
        service_subnet: b.service_subnet.as_ref().map(ToString::to_string),
        api_server_extra_args: b.api_server.extra_args.clone(),
        controller_manager_extra_args: b.controller_manager.extra_args.clone(),
        scheduler_extra_args: b.scheduler.extra_args.clone(),
        kubelet_extra_args: b.kubelet.extra_args.clone(),
        pre_kubeadm_commands: b.pre_kubeadm_commands.clone(),
        post_kubeadm_commands: b.post_kubeadm_commands.clone(),
        files,
        cert_sans: b.api_server.cert_sans.clone(),
    })
}

/// The machine of an action that needs its kubeadm data rendered first.
pub(crate) fn machine_to_prepare(action: &Action) -> Option<&str> {
    match action {
        Action::CreateServer {
            machine,
            bootstrap: Some(_),
            ..
        }
        | Action::Instantiate {
            machine,
            bootstrap: Some(_),
            ..
        } => Some(machine),
        _ => None,
    }
}

/// `unix_ms` as kubeadm's token expiration (RFC 3339, UTC).
fn expiration(unix_ms: u64) -> String {
    flightdeck_guest::kubeconfig::utc(i64::try_from(unix_ms / 1000).unwrap_or(i64::MAX))
}

/// A permanent error of rendering: flightdeck's own inputs are wrong, which retrying
/// does not mend.
fn render_error(machine: &str, e: impl std::fmt::Display) -> CloudError {
    CloudError::new(
        ErrorClass::Permanent,
        "flightdeck",
        "bootstrap data",
        None,
        format!("machine {machine}: its kubeadm data cannot be made: {e}"),
    )
}

/// The machine's own action with its user data rendered: for a join, after its token
/// was made in the workload cluster and recorded in `memory`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn prepare<P: Provider>(
    provider: &P,
    owner: &Ownership,
    spec: &Cluster,
    pki: &ClusterPki,
    tokens: TokenSource,
    memory: &mut flightdeck_plan::Memory,
    action: &Action,
    now: flightdeck_cloud::Timestamp,
) -> Result<Action, CloudError> {
    let (machine, key, plan) = match action {
        Action::CreateServer {
            machine,
            key,
            bootstrap: Some(plan),
            ..
        }
        | Action::Instantiate {
            machine,
            key,
            bootstrap: Some(plan),
            ..
        } => (machine.clone(), key.clone(), plan.clone()),
        other => return Ok(other.clone()),
    };
    let cluster = cluster_bootstrap(spec, &plan).map_err(|e| render_error(&machine, e))?;
    let hash = pki
        .discovery_hash()
        .map_err(|e| render_error(&machine, e))?;
    let token = if plan.role.joins() {
        let token = tokens.token(&machine, now.millis())?;
        let expires_at = now.plus(TOKEN_TTL);
        let data = token
            .secret_data(
                &expiration(expires_at.millis()),
                &format!("flightdeck: the join of machine {machine}"),
            )
            .map_err(|e| render_error(&machine, e))?;
        provider
            .create_bootstrap_token(
                owner,
                &BootstrapTokenSecret {
                    id: token.id().to_string(),
                    data,
                    tags: owner.tags(&flightdeck_cloud::Role::Machine(key)),
                },
            )
            .await?;
        if let Some(r) = memory.machines.get_mut(&machine) {
            r.token = Some(TokenRecord {
                id: token.id().to_string(),
                expires_at,
                gone: false,
            });
        }
        Some(token)
    } else {
        None
    };
    let role = match (plan.role, token.as_ref()) {
        (BootstrapRole::Init, _) => Role::Init { pki },
        (BootstrapRole::JoinControlPlane, Some(token)) => Role::JoinControlPlane {
            pki,
            token,
            ca_cert_hash: &hash,
        },
        (BootstrapRole::JoinWorker, Some(token)) => Role::JoinWorker {
            token,
            ca_cert_hash: &hash,
        },
        (_, None) => return Err(render_error(&machine, "a join without a token")),
    };
    let data = flightdeck_guest::render(&cluster, &machine, role)
        .map_err(|e| render_error(&machine, e))?;
    let mut out = action.clone();
    match &mut out {
        Action::CreateServer { user_data, .. } | Action::Instantiate { user_data, .. } => {
            *user_data = Some(data.expose().to_string());
        }
        _ => {}
    }
    Ok(out)
}

/// Moves the token of `machine` on to `expires_at`; a token gone (an operator deleted
/// it, or it ran out) is marked so: the machine cannot join with it, and flight control
/// replaces it without waiting for `nodeStartupTimeout`.
pub(crate) async fn refresh<P: Provider>(
    provider: &P,
    owner: &Ownership,
    memory: &mut flightdeck_plan::Memory,
    machine: &str,
    token_id: &str,
    expires_at: flightdeck_cloud::Timestamp,
) -> Result<(), CloudError> {
    let answer = provider
        .set_bootstrap_token_expiration(owner, token_id, &expiration(expires_at.millis()))
        .await;
    let record = memory.machines.get_mut(machine);
    match answer {
        Ok(()) => {
            if let Some(t) = record.and_then(|r| r.token.as_mut()) {
                t.expires_at = expires_at;
            }
            Ok(())
        }
        Err(e) if e.class == ErrorClass::NotFound => {
            if let Some(t) = record.and_then(|r| r.token.as_mut()) {
                t.gone = true;
            }
            Err(CloudError {
                message: flightdeck_cloud::error::bounded_message(format!(
                    "bootstrap token {token_id} of {machine} is gone from the workload cluster (deleted by someone, or expired): {}; \
                     the machine cannot join with it, and is replaced",
                    e.message
                )),
                class: ErrorClass::Permanent,
                ..e
            })
        }
        Err(e) => Err(e),
    }
}
