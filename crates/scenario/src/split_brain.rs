//! Split-brain seeds (issue 17): two or three replicas of flightdeck share an OpenStack
//! fleet on a store with etcd's lease semantics (`leases.rs`). In the middle of a
//! rollout one replica is paused for longer than its lease, with reconciles it had
//! already started, then resumed; the others take its clusters over meanwhile.
//!
//! On resume the paused replica runs those reconciles, and whatever else was due,
//! before its lease loop says anything: the worst order a `SIGCONT` can give. What it
//! still believes (its claims, its memory of the clusters) is stale; the fence must stop
//! it. Every check reads ground truth: the simulator's mutation log, which records the
//! replica and cluster behind each call, the hub's record of who held each claim when,
//! and the simulator's servers.
//!
//! - `fencedMutations`: every cloud mutation was sent by the replica that held the
//!   cluster's claim at that moment;
//! - `takeover`: the paused replica's clusters are claimed by others within its lease
//!   TTL plus two claim turns;
//! - `noDuplicates` and `converged`: at the end, each cluster has exactly its spec's
//!   machines, on the new image, no two servers with one name;
//! - `balanced`: no live replica holds more than its share.

use std::collections::BTreeMap;
use std::sync::Arc;

use flightdeck_cloud::{Clock, DynProvider, Rng, SeededRng, SimClock, Timestamp};
use flightdeck_engine::{Engine, EngineConfig, SPEC_TABLE};
use flightdeck_sim::{SimCloud, SimConfig};
use flightdeck_spec::{Cluster, Document, Duration, load_documents};
use flightdeck_store::{Store, StoreError, Write};
use serde::Serialize;

use crate::leases::{LeaseHub, LeasedBackend, ReplicaFence, Unfenced};
use crate::swarm_fleet::{FIRST_VERSION, SwarmCloud, cluster_yaml};

/// The version (and image) the rollout goes to.
pub(crate) const NEXT_VERSION: &str = "v1.31.0";
/// How often a replica renews its lease and takes a claim turn.
const TURN: Duration = Duration::from_secs(1);
/// How many reconciles one replica runs at once.
const IN_FLIGHT_MAX: usize = 16;
/// How long after the pause ends every cluster must have converged.
const SETTLE: Duration = Duration::from_mins(45);

/// One seed's draw.
#[derive(Clone, Debug, Serialize)]
pub struct SplitBrainCase {
    pub seed: u64,
    pub replicas: usize,
    pub clusters: usize,
    pub ttl_s: u64,
    pub margin_s: u64,
    /// The replica paused.
    pub paused: String,
    pub rollout_at_s: u64,
    pub pause_at_s: u64,
    pub pause_for_s: u64,
}

/// What one seed showed.
#[derive(Clone, Debug, Serialize)]
pub struct SplitBrainOutcome {
    pub case: SplitBrainCase,
    /// The first check that failed, and how.
    pub violation: Option<(String, String)>,
    /// Cloud mutations in all.
    pub mutations: usize,
    /// Mutations the paused replica sent after it was resumed (each one must still have
    /// been under a claim it held).
    pub mutations_after_resume_by_paused: usize,
    /// Reconciles refused by the fence (on the replica's own clock, or by the hub).
    pub fenced: usize,
    /// Seconds from the pause until the others held every cluster it had held.
    pub takeover_s: Option<f64>,
    /// The clusters the paused replica held when it was paused.
    pub held_at_pause: Vec<String>,
    /// A hash of the mutation log (time, operation, target, caller), to tell whether
    /// two runs of one seed replayed alike.
    pub log_hash: u64,
}

fn draw(seed: u64) -> (SplitBrainCase, SeededRng) {
    let mut rng = SeededRng::fork(seed, "split-brain");
    let replicas = rng.between(2, 3) as usize;
    let clusters = rng.between(2, 6) as usize;
    let ttl_s = rng.between(6, 30);
    let margin_s = (ttl_s / 5).max(1);
    let paused = format!("r{}", rng.between(1, replicas as u64));
    let rollout_at_s = rng.between(120, 900);
    let pause_at_s = rollout_at_s + rng.between(0, 90);
    let pause_for_s = ttl_s + rng.between(1, 300);
    let case = SplitBrainCase {
        seed,
        replicas,
        clusters,
        ttl_s,
        margin_s,
        paused,
        rollout_at_s,
        pause_at_s,
        pause_for_s,
    };
    (case, rng)
}

/// The fleet's specs before and after the rollout.
fn fleet(case: &SplitBrainCase, rng: &mut SeededRng) -> Result<Vec<(Cluster, Cluster)>, String> {
    let parse = |yaml: &str, name: &str| -> Result<Cluster, String> {
        match load_documents(yaml, &format!("split-brain seed {} {name}", case.seed))
            .map_err(|e| e.to_string())?
            .pop()
        {
            Some(Document::Cluster(c)) => Ok(*c),
            _ => Err(format!(
                "split-brain seed {}: {name} is not a cluster",
                case.seed
            )),
        }
    };
    (1..=case.clusters as u64)
        .map(|i| {
            let name = format!("c{i}");
            let pools = rng.below(3);
            let yaml = cluster_yaml(rng, SwarmCloud::OpenStack, &name, i, pools);
            let next = yaml
                .replace(FIRST_VERSION, NEXT_VERSION)
                .replace("worker-a", "worker-b");
            Ok((parse(&yaml, &name)?, parse(&next, &name)?))
        })
        .collect()
}

struct Replica {
    fence: Arc<ReplicaFence>,
    engine: Engine<DynProvider>,
    /// Reconciles started just before the pause, run when it ends.
    parked: Vec<(String, flightdeck_engine::Reconcile)>,
    next_turn: Timestamp,
}

impl Replica {
    /// A claim turn: the lease renewed, claims balanced, and the engine told.
    fn turn(&mut self, names: &[String]) -> Result<(), String> {
        let lost = self.fence.renew();
        let turn = self.fence.balance(names);
        for c in lost.iter().chain(&turn.let_go) {
            self.engine.let_go(c);
        }
        // Held clusters whose stored spec changed are taken up again (take_up compares).
        for c in self.fence.held() {
            self.engine
                .take_up(&c, self.fence.name())
                .map_err(|e| format!("{} taking up {c}: {e}", self.fence.name()))?;
        }
        Ok(())
    }

    /// Runs `reconciles` to the end, each under its caller, and applies their outcomes;
    /// how many the fence refused.
    async fn finish(&mut self, reconciles: Vec<(String, flightdeck_engine::Reconcile)>) -> usize {
        let mut fenced = 0;
        for (cluster, r) in reconciles {
            let caller = format!("replica={} cluster={cluster}", self.fence.name());
            let finished = flightdeck_sim::caller::serve_as(caller, r).await;
            if let Err(flightdeck_engine::EngineError::Store(StoreError::Fenced { .. })) =
                self.engine.complete(finished)
            {
                fenced += 1;
            }
        }
        fenced
    }
}

/// Runs split-brain seed `seed`; `unfenced` switches fencing checks off.
pub async fn run_split_brain(seed: u64, unfenced: Unfenced) -> Result<SplitBrainOutcome, String> {
    let (case, mut rng) = draw(seed);
    let specs = fleet(&case, &mut rng)?;
    let names: Vec<String> = specs
        .iter()
        .map(|(c, _)| c.metadata.name.to_string())
        .collect();
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let start = clock.now();
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), seed, clock.clone()));
    let hub = LeaseHub::new(clock.clone()).map_err(|e| e.to_string())?;
    let ttl = Duration::from_secs(case.ttl_s);
    let margin = Duration::from_secs(case.margin_s);
    let mut replicas = Vec::new();
    // The replicas share the store, and so one key for its secrets.
    let secrets = flightdeck_engine::secrets::SecretsAtRest::Sealed(Arc::new(
        flightdeck_guest::SecretsKey::generate("the replicas' key, kept nowhere")
            .map_err(|e| e.to_string())?,
    ));
    for i in 1..=case.replicas {
        let fence = ReplicaFence::new(hub.clone(), &format!("r{i}"), ttl, margin, unfenced);
        let store = Arc::new(Store::with_backend(Box::new(LeasedBackend::new(
            fence.clone(),
        ))));
        let engine = Engine::new(
            // As the product reaches a cloud: the workload clusters through kube-rs, so
            // that machines are drained before they go.
            Arc::new(DynProvider::new(flightdeck_embedded::in_process_openstack(
                cloud.clone(),
            ))),
            store,
            Arc::new(clock.clone()),
            Box::new(SeededRng::fork(seed, &format!("engine-r{i}"))),
            EngineConfig {
                secrets: Some(secrets.clone()),
                // A replica's tokens from the seed: the run replays.
                tokens: flightdeck_engine::TokenSource::Seeded(seed ^ i as u64),
                ..EngineConfig::default()
            },
        )
        .map_err(|e| e.to_string())?;
        replicas.push(Replica {
            fence,
            engine,
            parked: Vec::new(),
            next_turn: start,
        });
    }
    // The API writes specs; any replica's store reaches the same records.
    let api = Store::with_backend(Box::new(LeasedBackend::new(replicas[0].fence.clone())));
    let put_specs = |pick: fn(&(Cluster, Cluster)) -> &Cluster| {
        let writes = specs
            .iter()
            .map(|s| Write::put(SPEC_TABLE, pick(s).metadata.name.as_str(), pick(s)))
            .collect();
        api.commit(writes).map_err(|e| e.to_string())
    };
    put_specs(|s| &s.0)?;

    let at = |s: u64| start.plus(Duration::from_secs(s));
    let (rollout_at, pause_at) = (at(case.rollout_at_s), at(case.pause_at_s));
    let resume_at = at(case.pause_at_s + case.pause_for_s);
    let end = resume_at.plus(SETTLE);
    let paused_index = replicas
        .iter()
        .position(|r| r.fence.name() == case.paused)
        .ok_or("the paused replica is one of them")?;
    let mut held_at_pause = Vec::new();
    let mut resumed_mutations_from = None;
    let (mut rolled, mut pausing, mut fenced) = (false, false, 0);
    loop {
        let now = clock.now();
        cloud.advance();
        if !rolled && now >= rollout_at {
            put_specs(|s| &s.1)?;
            rolled = true;
        }
        if !pausing && now >= pause_at && now < resume_at {
            pausing = true;
            let r = &mut replicas[paused_index];
            held_at_pause = r.fence.held().into_iter().collect();
            r.parked = r.engine.start_due(IN_FLIGHT_MAX);
        }
        if pausing && now >= resume_at {
            pausing = false;
            resumed_mutations_from = Some(cloud.mutations().len());
            let r = &mut replicas[paused_index];
            // Resumed: what it had started runs first, then what is due, then its lease
            // loop (the worst order).
            let parked = std::mem::take(&mut r.parked);
            fenced += r.finish(parked).await;
            let due = r.engine.start_due(IN_FLIGHT_MAX);
            fenced += r.finish(due).await;
        }
        for (i, r) in replicas.iter_mut().enumerate() {
            if pausing && i == paused_index {
                continue;
            }
            if now >= r.next_turn {
                r.turn(&names)?;
                r.next_turn = now.plus(TURN);
            }
            let due = r.engine.start_due(IN_FLIGHT_MAX);
            fenced += r.finish(due).await;
        }
        if now >= end {
            break;
        }
        let next = replicas
            .iter()
            .enumerate()
            .filter(|(i, _)| !(pausing && *i == paused_index))
            .flat_map(|(_, r)| [r.engine.next_due(), Some(r.next_turn)])
            .chain([
                cloud.next_transition_at(),
                Some(rollout_at),
                Some(pause_at),
                Some(resume_at),
                Some(end),
            ])
            .flatten()
            .filter(|t| *t > now)
            .min()
            .unwrap_or(end);
        clock.advance_to(next);
    }
    let checks = crate::split_brain_checks::Inputs {
        case: &case,
        start,
        cloud: &cloud,
        history: hub.history(),
        claims: hub.claims(),
        live: hub.live(),
        specs: specs.iter().map(|(_, next)| next).collect(),
        held_at_pause: &held_at_pause,
    };
    let mutations = cloud.mutations();
    let after_resume = resumed_mutations_from.map_or(0, |from| {
        mutations[from.min(mutations.len())..]
            .iter()
            .filter(|m| {
                m.caller
                    .as_deref()
                    .is_some_and(|c| c.starts_with(&format!("replica={} ", case.paused)))
            })
            .count()
    });
    let (violation, takeover_s) = checks.run(&mutations);
    Ok(SplitBrainOutcome {
        case,
        violation,
        mutations: mutations.len(),
        mutations_after_resume_by_paused: after_resume,
        fenced,
        takeover_s,
        held_at_pause,
        log_hash: log_hash(&mutations),
    })
}

/// FNV-1a over each mutation's time, operation, target and caller.
fn log_hash(mutations: &[flightdeck_sim::Mutation]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for m in mutations {
        let line = format!(
            "{} {} {} {:?}\n",
            m.at.millis(),
            m.operation,
            m.target_id,
            m.caller
        );
        for b in line.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The seconds since `start` at `t`.
pub(crate) fn seconds(start: Timestamp, t: Timestamp) -> f64 {
    t.since(start).as_millis() as f64 / 1000.0
}

/// Who held what at the end, by replica (for a report).
pub fn loads(claims: &BTreeMap<String, (String, i64)>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (holder, _) in claims.values() {
        *out.entry(holder.clone()).or_default() += 1;
    }
    out
}
