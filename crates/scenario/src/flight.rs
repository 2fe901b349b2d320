//! The invariants of flight control (F3–F8, F10), checked against the simulator's
//! ground truth and against what the engine decided.

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::Provider;
use flightdeck_cloud::ownership::{TAG_ROLE, uid_of};
use flightdeck_cloud::{ServerStatus, Timestamp};
use flightdeck_engine::Engine;
use flightdeck_plan::MachineRole;
use flightdeck_sim::World;
use flightdeck_spec::{Cidr, Duration, Invariant};

use crate::invariants::{ClusterTrack, Invariants};

/// A window in which a fault blinds the observer of a cluster (`None`: every cluster).
#[derive(Clone, Debug)]
pub struct BlindWindow {
    pub start: Timestamp,
    pub end: Timestamp,
    pub cluster: Option<String>,
    pub what: &'static str,
}

#[derive(Default)]
pub struct FlightChecks {
    blind: Vec<BlindWindow>,
    /// When the cloud's APIs answered some calls with errors or rate limits (`api.*`
    /// faults): a repair is judged from when they answer again, not through them.
    outages: Vec<(Timestamp, Timestamp)>,
    seen: BTreeSet<(String, String, u64)>,
    rule_missing_since: BTreeMap<String, Timestamp>,
    route_stale_since: BTreeMap<String, Timestamp>,
    reported: BTreeSet<(Invariant, String)>,
}

impl FlightChecks {
    pub fn new(blind: Vec<BlindWindow>, outages: Vec<(Timestamp, Timestamp)>) -> Self {
        FlightChecks {
            blind,
            outages,
            ..FlightChecks::default()
        }
    }

    fn outage_at(&self, t: Timestamp) -> bool {
        self.outages.iter().any(|(s, e)| *s <= t && t < *e)
    }

    fn blind_at(&self, cluster: &str, t: Timestamp) -> Option<&BlindWindow> {
        self.blind.iter().find(|w| {
            w.start <= t && t < w.end && w.cluster.as_deref().is_none_or(|c| c == cluster)
        })
    }

    pub fn check<P: Provider>(
        &mut self,
        inv: &mut Invariants,
        now: Timestamp,
        world: &World,
        engine: &Engine<P>,
        tracks: &BTreeMap<String, ClusterTrack>,
    ) {
        for (name, c) in engine.clusters() {
            let spec = &c.spec.spec;
            // remediationWithinBudget: judged when a remediation starts, against the
            // budget of that moment (a later scale-down shrinks the budget of repairs
            // already under way; that is no breach).
            if inv.enabled(Invariant::RemediationWithinBudget) {
                for r in c.memory.machines.values() {
                    let Some(rem) = &r.remediation else { continue };
                    let key = (format!("budget/{name}"), r.name.clone(), rem.since.millis());
                    if !self.seen.insert(key) {
                        continue;
                    }
                    let in_set = c
                        .memory
                        .machines
                        .values()
                        .filter(|x| x.role == r.role && x.remediation.is_some())
                        .count() as u32;
                    let replicas = match &r.role {
                        MachineRole::ControlPlane => spec.control_plane.replicas.get(),
                        MachineRole::Pool(p) => spec
                            .node_pools
                            .iter()
                            .find(|x| x.name.as_str() == p)
                            .map_or(0, |x| x.replicas.get()),
                    };
                    let budget = spec.flight.max_unhealthy.of(replicas);
                    let v = (in_set > budget).then(|| {
                        format!(
                            "cluster {name}: remediation of {} started with {in_set} {} machine(s) under remediation, budget {budget} (maxUnhealthy {})",
                            r.name,
                            r.role.label(),
                            spec.flight.max_unhealthy
                        )
                    });
                    inv.record(Invariant::RemediationWithinBudget, now, v);
                }
            }
            // noRemediationOnBlindObserver
            if inv.enabled(Invariant::NoRemediationOnBlindObserver) {
                for r in c.memory.machines.values() {
                    let Some(rem) = &r.remediation else { continue };
                    let key = (name.clone(), r.name.clone(), rem.since.millis());
                    if !rem.node_based || !self.seen.insert(key) {
                        continue;
                    }
                    let v = self.blind_at(name, rem.since).map(|w| {
                        format!(
                            "cluster {name}: {} was condemned ({}) while {}",
                            r.name, rem.reason, w.what
                        )
                    });
                    inv.record(Invariant::NoRemediationOnBlindObserver, now, v);
                }
            }
            let Some(track) = tracks.get(name) else {
                continue;
            };
            if track.ready_since.is_none() || track.deletion_requested || self.outage_at(now) {
                self.rule_missing_since.remove(name);
                self.route_stale_since.remove(name);
                continue;
            }
            let bound =
                Duration::from_millis(spec.flight.resync_period.as_millis() * 11 / 10 + 180_000);
            let pod = spec.network.pod_cidr;
            // rulesRestored
            if inv.enabled(Invariant::RulesRestored) && spec.flight.repairs.security_group_rules {
                let missing = rules_missing(world, &track.uid, pod);
                let v = self.episode(Invariant::RulesRestored, name, now, missing, bound, |m| {
                    format!(
                        "cluster {name}: pod-network rule(s) {m} missing for longer than {bound}"
                    )
                });
                inv.record(Invariant::RulesRestored, now, v);
            }
            // routesConsistent
            let router = spec
                .provider
                .openstack
                .as_ref()
                .and_then(|o| o.router.as_ref());
            if let Some(router) = router
                && inv.enabled(Invariant::RoutesConsistent)
                && spec.flight.repairs.routes
            {
                // The addresses the cluster's servers ever had: kept by its track.
                let problem = if self.blind_at(name, now).is_some() {
                    None
                } else {
                    let stale =
                        stale_routes(world, &track.uid, pod, router.as_str(), &track.addresses)
                            .map(|s| format!("stale route(s) {s}"));
                    let missing = missing_routes(world, &track.uid, router.as_str())
                        .map(|m| format!("no route for live node(s): {m}"));
                    match (stale, missing) {
                        (Some(s), Some(m)) => Some(format!("{s}; {m}")),
                        (s, m) => s.or(m),
                    }
                };
                let v = self.episode(
                    Invariant::RoutesConsistent,
                    name,
                    now,
                    problem,
                    bound,
                    |s| format!("cluster {name}: {s} on router {router} for longer than {bound}"),
                );
                inv.record(Invariant::RoutesConsistent, now, v);
            }
        }
    }

    /// Tracks how long a problem has lasted; a violation once it outlasts `bound`,
    /// reported once per episode.
    fn episode(
        &mut self,
        inv: Invariant,
        cluster: &str,
        now: Timestamp,
        problem: Option<String>,
        bound: Duration,
        message: impl Fn(&str) -> String,
    ) -> Option<String> {
        let clocks = match inv {
            Invariant::RulesRestored => &mut self.rule_missing_since,
            _ => &mut self.route_stale_since,
        };
        let key = (inv, cluster.to_string());
        let Some(problem) = problem else {
            clocks.remove(cluster);
            self.reported.remove(&key);
            return None;
        };
        let since = *clocks.entry(cluster.to_string()).or_insert(now);
        if now.since(since) > bound && self.reported.insert(key) {
            return Some(message(&problem));
        }
        None
    }
}

fn owned(tags: &[String], uid: &str) -> bool {
    uid_of(tags) == Some(uid)
}

fn rules_missing(world: &World, uid: &str, pod: Cidr) -> Option<String> {
    let group = world.security_groups.iter().find(|g| {
        owned(&g.tags, uid)
            && g.tags
                .iter()
                .any(|t| t.strip_prefix(TAG_ROLE) == Some("security-group"))
    })?;
    let prefix = pod.to_string();
    let missing: Vec<&str> = ["tcp", "udp", "icmp"]
        .into_iter()
        .filter(|proto| {
            !group.rules.iter().any(|r| {
                r.direction == "ingress"
                    && r.protocol.as_deref() == Some(*proto)
                    && r.remote_ip_prefix.as_deref() == Some(prefix.as_str())
            })
        })
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// The routes the cluster's live nodes lack on `router`: a Ready node of a running
/// server, with a pod network, and no route to it via its server's address (F7: the
/// route stays while the node lives). Excused while the router is at its limit, and
/// for as long as flightdeck trusts a limit it learned after the limit last changed
/// (F8: a router that refused is not asked again at once).
fn missing_routes(world: &World, uid: &str, router: &str) -> Option<String> {
    let trusted = flightdeck_plan::LEARNED_LIMIT_TTL;
    if world
        .route_limit_changed
        .is_some_and(|t| world.now.since(t) < trusted)
    {
        return None;
    }
    let router = world
        .routers
        .iter()
        .find(|r| r.name == router || r.id == router)?;
    let address: BTreeMap<&str, std::net::IpAddr> = world
        .servers
        .iter()
        .filter(|s| owned(&s.tags, uid) && s.status == ServerStatus::Active && !s.is_deleting())
        .filter_map(|s| Some((s.id.as_str(), s.address?)))
        .collect();
    let missing: Vec<String> = world
        .nodes
        .iter()
        .filter(|(u, n)| u == uid && n.ready)
        .filter_map(|(_, n)| {
            let ip = *address.get(n.server_id.as_deref()?)?;
            let dest = n.pod_cidr.as_deref()?;
            let routed = router
                .routes
                .iter()
                .any(|r| r.destination == dest && r.nexthop == ip);
            (!routed).then(|| format!("{dest} via {ip} (node {})", n.name))
        })
        .collect();
    let at_limit = router.routes.len() + missing.len() > world.route_limit;
    (!missing.is_empty() && !at_limit).then(|| missing.join(", "))
}

/// The cluster's stale routes on `router`: a route to a pod network a node of a live
/// server of the cluster holds, via anything but that node's server; or a route in the cluster's pod
/// network via an address one of its servers had, which no live server of it has now.
/// (A route in the pod network via an address the cluster never had is not its own:
/// another cluster's, or an operator's, and harmless until it hijacks a held network.)
fn stale_routes(
    world: &World,
    uid: &str,
    pod: Cidr,
    router: &str,
    had: &BTreeSet<std::net::IpAddr>,
) -> Option<String> {
    let router = world
        .routers
        .iter()
        .find(|r| r.name == router || r.id == router)?;
    let live: BTreeMap<std::net::IpAddr, &str> = world
        .servers
        .iter()
        .filter(|s| owned(&s.tags, uid) && s.status == ServerStatus::Active && !s.is_deleting())
        .filter_map(|s| Some((s.address?, s.id.as_str())))
        .collect();
    // A pod network is held by a node of a live server: the node an ERROR server leaves
    // behind carries no traffic to hijack, and it goes with its server.
    let owners: BTreeMap<&str, &str> = world
        .nodes
        .iter()
        .filter(|(u, _)| u == uid)
        .filter_map(|(_, n)| Some((n.pod_cidr.as_deref()?, n.server_id.as_deref()?)))
        .filter(|(_, server)| live.values().any(|s| s == server))
        .collect();
    let stale: Vec<String> = router
        .routes
        .iter()
        .filter(|r| r.destination.parse::<Cidr>().is_ok_and(|d| pod.covers(&d)))
        .filter(|r| {
            let holder = owners.get(r.destination.as_str());
            match (live.get(&r.nexthop), holder) {
                (Some(server), Some(owner)) => owner != server,
                (None, Some(_)) => true,
                (None, None) => had.contains(&r.nexthop),
                (Some(_), None) => false,
            }
        })
        .map(|r| format!("{} via {}", r.destination, r.nexthop))
        .collect();
    (!stale.is_empty()).then(|| stale.join(", "))
}
