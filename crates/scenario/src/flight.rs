//! The invariants of flight control (F3–F8, F10), checked against the simulator's
//! ground truth and against what the engine decided.

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::Provider;
use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::TAG_ROLE;
use flightdeck_engine::Engine;
use flightdeck_sim::World;
use flightdeck_spec::{Cidr, Duration, Invariant};

use crate::invariants::Invariants;
use crate::owned::Owned;
use crate::track::ClusterTrack;

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
    /// When the server or node lists lagged (`api.staleRead` on nova or kubernetes): a
    /// machine born in such a window may be invisible to flightdeck until it ends, so a
    /// missing or stale route is judged from the window's end (old swarm seed 187264497:
    /// a dropped requeue, then a stale list, then another dropped requeue).
    stale_lists: Vec<(Timestamp, Timestamp)>,
    /// When each problem (a missing rule, a stale or missing route) of a cluster was
    /// first seen, by invariant, cluster and problem: each has its own clock, so two
    /// short problems one after the other are not one long one (old swarm seed 7028827).
    since: BTreeMap<Episode, Timestamp>,
    reported: BTreeSet<Episode>,
    repairs: crate::repair_check::RepairCheck,
    /// Some cluster was looked at while the world showed it ready, it was not being
    /// deleted and no API outage was on: the repairs' checks applied at least once.
    looked_at_ready: bool,
}

type Episode = (Invariant, String, String);

impl FlightChecks {
    pub fn new(
        blind: Vec<BlindWindow>,
        outages: Vec<(Timestamp, Timestamp)>,
        stale_lists: Vec<(Timestamp, Timestamp)>,
    ) -> Self {
        FlightChecks {
            blind,
            outages,
            stale_lists,
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
        owned: &Owned<'_>,
    ) {
        self.check_repairs(inv, now, world, tracks);
        for (name, c) in engine.clusters() {
            let spec = &c.spec.spec;
            let Some(track) = tracks.get(name) else {
                continue;
            };
            if track.ready_since.is_none() || track.deletion_requested || self.outage_at(now) {
                self.since.retain(|(_, c, _), _| c != name);
                continue;
            }
            self.looked_at_ready = true;
            let bound =
                Duration::from_millis(spec.flight.resync_period.as_millis() * 11 / 10 + 180_000);
            let pod = spec.network.pod_cidr;
            // rulesRestored
            if inv.enabled(Invariant::RulesRestored) && spec.flight.repairs.security_group_rules {
                let missing = rules_missing(owned, &track.uid, pod);
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
                let stale_list = self.stale_lists.iter().any(|(s, e)| *s <= now && now < *e);
                let problem = if self.blind_at(name, now).is_some() || stale_list {
                    Vec::new()
                } else {
                    let stale = stale_routes(
                        world,
                        owned,
                        &track.uid,
                        pod,
                        router.as_str(),
                        &track.addresses,
                    )
                    .into_iter()
                    .map(|s| format!("stale route {s}"));
                    let missing = missing_routes(world, owned, &track.uid, router.as_str())
                        .into_iter()
                        .map(|m| format!("no route for live node: {m}"));
                    stale.chain(missing).collect()
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

    /// Whether `rulesRestored` and `routesConsistent` were judged at least once: some
    /// cluster was looked at while ready, not being deleted, and outside an API outage.
    pub fn looked_at_ready(&self) -> bool {
        self.looked_at_ready
    }

    /// What the repair check knows of the machines it has seen.
    pub fn repairs(&self) -> &crate::repair_check::RepairCheck {
        &self.repairs
    }

    /// `remediationWithinBudget` and `noRemediationOnBlindObserver`, from the world.
    fn check_repairs(
        &mut self,
        inv: &mut Invariants,
        now: Timestamp,
        world: &World,
        tracks: &BTreeMap<String, ClusterTrack>,
    ) {
        let blind = self.blind.clone();
        let found = self.repairs.look(world, tracks, |cluster| {
            blind
                .iter()
                .find(|w| {
                    w.start <= now
                        && now < w.end
                        && w.cluster.as_deref().is_none_or(|c| c == cluster)
                })
                .map(|w| w.what)
        });
        // Each repair that began is one check of each; a violation is one of them.
        let judged = found.started;
        if inv.enabled(Invariant::RemediationWithinBudget) {
            let held = judged.saturating_sub(found.over_budget.len());
            for v in found.over_budget {
                inv.record(Invariant::RemediationWithinBudget, now, Some(v));
            }
            for _ in 0..held {
                inv.record(Invariant::RemediationWithinBudget, now, None);
            }
        }
        if inv.enabled(Invariant::NoRemediationOnBlindObserver) {
            let held = judged.saturating_sub(found.grew.len());
            for (_, v) in found.grew {
                inv.record(Invariant::NoRemediationOnBlindObserver, now, Some(v));
            }
            for _ in 0..held {
                inv.record(Invariant::NoRemediationOnBlindObserver, now, None);
            }
        }
    }

    /// Tracks how long each of a cluster's `problems` has lasted; a violation names
    /// those that outlast `bound`, each reported once per episode.
    fn episode(
        &mut self,
        inv: Invariant,
        cluster: &str,
        now: Timestamp,
        problems: Vec<String>,
        bound: Duration,
        message: impl Fn(&str) -> String,
    ) -> Option<String> {
        let current = |(i, c, p): &Episode| *i == inv && c == cluster && !problems.contains(p);
        self.since.retain(|k, _| !current(k));
        self.reported.retain(|k| !current(k));
        let mut overdue = Vec::new();
        for p in &problems {
            let key = (inv, cluster.to_string(), p.clone());
            let since = *self.since.entry(key.clone()).or_insert(now);
            if now.since(since) > bound && self.reported.insert(key) {
                overdue.push(p.as_str());
            }
        }
        (!overdue.is_empty()).then(|| message(&overdue.join("; ")))
    }
}

/// Pod-network rules missing, or routes missing or stale, in `world` for the cluster of
/// `track`: what `convergence` asks to be in place once the faults stop. A repair the
/// spec switched off is not asked for.
pub(crate) fn network_problem(
    world: &World,
    owned: &Owned<'_>,
    track: &ClusterTrack,
    spec: &flightdeck_spec::ClusterSpec,
) -> Option<String> {
    let pod = track.pod_cidr;
    let rules = rules_missing(owned, &track.uid, pod);
    if spec.flight.repairs.security_group_rules && !rules.is_empty() {
        return Some(format!("pod-network rule(s) {} missing", rules.join(", ")));
    }
    let router = spec
        .provider
        .openstack
        .as_ref()
        .and_then(|o| o.router.as_ref())
        .filter(|_| spec.flight.repairs.routes)?;
    let router = router.as_str();
    let stale = stale_routes(world, owned, &track.uid, pod, router, &track.addresses);
    let missing = missing_routes(world, owned, &track.uid, router);
    (!stale.is_empty() || !missing.is_empty()).then(|| {
        format!(
            "on router {router}: stale route(s) [{}], missing route(s) [{}]",
            stale.join(", "),
            missing.join(", ")
        )
    })
}

/// Pod-network rules missing in `world` for the cluster of `track` (unless the spec
/// switched their repair off): what a Ready cluster must have in place.
pub(crate) fn rules_problem(
    owned: &Owned<'_>,
    track: &ClusterTrack,
    spec: &flightdeck_spec::ClusterSpec,
) -> Option<String> {
    let rules = rules_missing(owned, &track.uid, track.pod_cidr);
    (spec.flight.repairs.security_group_rules && !rules.is_empty())
        .then(|| format!("pod-network rule(s) {} missing", rules.join(", ")))
}

fn rules_missing(owned: &Owned<'_>, uid: &str, pod: Cidr) -> Vec<String> {
    let Some(group) = owned.security_groups(uid).find(|g| {
        g.tags
            .iter()
            .any(|t| t.strip_prefix(TAG_ROLE) == Some("security-group"))
    }) else {
        return Vec::new();
    };
    let prefix = pod.to_string();
    ["tcp", "udp", "icmp"]
        .into_iter()
        .filter(|proto| {
            !group.rules.iter().any(|r| {
                r.direction == "ingress"
                    && r.protocol.as_deref() == Some(*proto)
                    && r.remote_ip_prefix.as_deref() == Some(prefix.as_str())
            })
        })
        .map(str::to_string)
        .collect()
}

/// The routes the cluster's live nodes lack on `router`: a Ready node of a running
/// server, with a pod network, and no route to it via its server's address (F7: the
/// route stays while the node lives). Excused while the router is at its limit, and
/// for as long as flightdeck trusts a limit it learned after the limit last changed
/// (F8: a router that refused is not asked again at once).
fn missing_routes(world: &World, owned: &Owned<'_>, uid: &str, router: &str) -> Vec<String> {
    let trusted = flightdeck_plan::LEARNED_LIMIT_TTL;
    if world
        .route_limit_changed
        .is_some_and(|t| world.now.since(t) < trusted)
    {
        return Vec::new();
    }
    let Some(router) = world
        .routers
        .iter()
        .find(|r| r.name == router || r.id == router)
    else {
        return Vec::new();
    };
    let address: BTreeMap<&str, std::net::IpAddr> = owned
        .live_servers(uid)
        .filter_map(|s| Some((s.id.as_str(), s.address?)))
        .collect();
    let missing: Vec<String> = owned
        .nodes(uid)
        .filter(|n| n.ready)
        .filter_map(|n| {
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
    if at_limit { Vec::new() } else { missing }
}

/// The cluster's stale routes on `router`: a route to a pod network a node of a live
/// server of the cluster holds, via anything but that node's server; or a route in the cluster's pod
/// network via an address one of its servers had, which no live server of it has now.
/// (A route in the pod network via an address the cluster never had is not its own:
/// another cluster's, or an operator's, and harmless until it hijacks a held network.)
fn stale_routes(
    world: &World,
    owned: &Owned<'_>,
    uid: &str,
    pod: Cidr,
    router: &str,
    had: &BTreeSet<std::net::IpAddr>,
) -> Vec<String> {
    let Some(router) = world
        .routers
        .iter()
        .find(|r| r.name == router || r.id == router)
    else {
        return Vec::new();
    };
    let live: BTreeMap<std::net::IpAddr, &str> = owned
        .live_servers(uid)
        .filter_map(|s| Some((s.address?, s.id.as_str())))
        .collect();
    // A pod network is held by a node of a live server: the node an ERROR server leaves
    // behind carries no traffic to hijack, and it goes with its server.
    let owners: BTreeMap<&str, &str> = owned
        .nodes(uid)
        .filter_map(|n| Some((n.pod_cidr.as_deref()?, n.server_id.as_deref()?)))
        .filter(|(_, server)| live.values().any(|s| s == server))
        .collect();
    router
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
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Timestamp {
        Timestamp::SIM_EPOCH.plus_millis(secs * 1000)
    }

    fn routes(checks: &mut FlightChecks, t: u64, problems: &[&str]) -> Option<String> {
        checks.episode(
            Invariant::RoutesConsistent,
            "demo",
            at(t),
            problems.iter().map(|p| p.to_string()).collect(),
            Duration::from_secs(510),
            |s| format!("demo: {s}"),
        )
    }

    #[test]
    fn two_short_stale_routes_one_after_the_other_are_not_one_long_episode() {
        // Old swarm seed 7028827: about 4.5 then 5.3 minutes, with no clean step between.
        let mut checks = FlightChecks::default();
        for t in (0..270).step_by(10) {
            assert_eq!(routes(&mut checks, t, &["route A"]), None);
        }
        for t in (270..590).step_by(10) {
            assert_eq!(routes(&mut checks, t, &["route B"]), None, "at {t}s");
        }
        assert_eq!(routes(&mut checks, 600, &[]), None);
    }

    #[test]
    fn a_problem_that_outlasts_the_bound_is_named_once() {
        let mut checks = FlightChecks::default();
        assert_eq!(routes(&mut checks, 0, &["route A"]), None);
        assert_eq!(routes(&mut checks, 300, &["route A", "route B"]), None);
        let v = routes(&mut checks, 520, &["route A", "route B"]).expect("route A overdue");
        assert_eq!(v, "demo: route A");
        assert_eq!(routes(&mut checks, 530, &["route A", "route B"]), None);
        let v = routes(&mut checks, 820, &["route A", "route B"]).expect("route B overdue");
        assert_eq!(v, "demo: route B");
    }
}
