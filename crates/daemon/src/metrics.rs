//! The daemon's Prometheus metrics, all named `flightdeck_*`.
//!
//! - Reconciles: `flightdeck_reconciles_total{result}` and
//!   `flightdeck_reconcile_duration_seconds`; the queue: `flightdeck_queue_depth`,
//!   `flightdeck_reconciles_in_flight`.
//! - Cloud calls (recorded by [`crate::instrument::Instrumented`]):
//!   `flightdeck_cloud_calls_total{cloud, service, verb, status_class}` and
//!   `flightdeck_cloud_call_duration_seconds{cloud, service, verb}`.
//! - Flight control: `flightdeck_repairs_started_total{rule}` and
//!   `flightdeck_repairs_finished_total{rule}` from the event stream
//!   ([`Metrics::on_cluster_event`] documents which events count), and the fleet's gauges,
//!   set from a snapshot ([`FleetGauges`]): repairs in progress and budgets by cluster and
//!   set, clusters by active condition and by phase, open churn breakers.
//!
//! [`Metrics::encode`] answers in the Prometheus text format 0.0.4 (what `/metrics` serves
//! as `text/plain; version=0.0.4`): prometheus-client writes OpenMetrics, whose counter
//! families are named without `_total`; those names are put back, so that `promtool check
//! metrics` finds a HELP and TYPE for every sample.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Flight-control rules, as the `rule` label spells them.
pub mod rule {
    pub const F3: &str = "F3";
    pub const F4: &str = "F4";
    pub const F5: &str = "F5";
    pub const F6: &str = "F6";
    pub const F7: &str = "F7";
    pub const F8: &str = "F8";
    pub const F11: &str = "F11";
}

/// Duration buckets, 1 ms to 120 s: 1 ms doubling up to 65.536 s, then 120 s.
fn duration_buckets() -> impl Iterator<Item = f64> {
    (0..17)
        .map(|i| 0.001 * f64::from(1u32 << i))
        .chain(std::iter::once(120.0))
}

fn duration_histogram() -> Histogram {
    Histogram::new(duration_buckets())
}

/// Label sets: `Name { label, ... }`, every value a string, built by `Name::of(...)`.
macro_rules! label_sets {
    ($($name:ident { $($label:ident),* })*) => {$(
        #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct $name { $($label: String),* }
        impl $name {
            fn of($($label: &str),*) -> Self {
                $name { $($label: $label.to_string()),* }
            }
        }
    )*};
}

label_sets! {
    ResultLabels { result }
    CallLabels { cloud, service, verb, status_class }
    CallDurationLabels { cloud, service, verb }
    RuleLabels { rule }
    SetLabels { cluster, set }
    ConditionLabels { r#type }
    PhaseLabels { phase }
}

/// The fleet as it is now, for the gauges that describe it. Label sets missing from a
/// snapshot disappear from the metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetGauges {
    /// Clusters by phase (`Provisioning`, `Ready`, `RollingOut`, `Scaling`, `Deleting`).
    pub phases: BTreeMap<String, i64>,
    /// Clusters with the condition active, by condition type.
    pub conditions: BTreeMap<String, i64>,
    /// Churn breakers open (F11), over every cluster.
    pub churn_breakers_open: i64,
    /// Machines under repair, by (cluster, set).
    pub repairs_in_progress: BTreeMap<(String, String), i64>,
    /// How many machines may be under repair at once (`maxUnhealthy`), by (cluster, set).
    pub repair_budgets: BTreeMap<(String, String), i64>,
    /// Clusters waiting to be reconciled; `None` leaves what [`Metrics::set_queue`] set.
    pub queue_depth: Option<i64>,
}

impl FleetGauges {
    /// Counts one cluster: its phase, its active conditions and its open breakers.
    pub fn add_cluster<'a>(
        &mut self,
        phase: &str,
        conditions: impl IntoIterator<Item = &'a str>,
        breakers_open: usize,
    ) {
        *self.phases.entry(phase.to_string()).or_default() += 1;
        for c in conditions.into_iter().collect::<BTreeSet<_>>() {
            *self.conditions.entry(c.to_string()).or_default() += 1;
        }
        self.churn_breakers_open += i64::try_from(breakers_open).unwrap_or(i64::MAX);
    }

    /// Records one machine set's repair budget and the machines under repair in it.
    pub fn add_set(&mut self, cluster: &str, set: &str, in_progress: u32, budget: u32) {
        let key = (cluster.to_string(), set.to_string());
        self.repairs_in_progress
            .insert(key.clone(), i64::from(in_progress));
        self.repair_budgets.insert(key, i64::from(budget));
    }
}

/// Every metric of the daemon. Cloning is cheap and shares the metrics (hand a clone to
/// each [`crate::instrument::Instrumented`] provider).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_duration: Histogram,
    queue_depth: Gauge,
    in_flight: Gauge,
    cloud_calls: Family<CallLabels, Counter>,
    cloud_call_duration: Family<CallDurationLabels, Histogram>,
    repairs_started: Family<RuleLabels, Counter>,
    repairs_finished: Family<RuleLabels, Counter>,
    repairs_in_progress: Family<SetLabels, Gauge>,
    repair_budget: Family<SetLabels, Gauge>,
    conditions_active: Family<ConditionLabels, Gauge>,
    churn_breakers_open: Gauge,
    clusters: Family<PhaseLabels, Gauge>,
    /// Held while the fleet's gauges are replaced and while encoding, so that a scrape
    /// never sees them half set.
    fleet: Mutex<()>,
    open: Mutex<OpenRepairs>,
}

/// Repairs the event stream has seen start and not yet end, so that a repeated report of
/// the same start is counted once and an end can be given its rule.
#[derive(Default)]
struct OpenRepairs {
    /// Machine name → rule (F3, F6).
    machines: BTreeMap<String, &'static str>,
    /// Cluster → messages of its open churn breakers (F11).
    loops: BTreeMap<String, BTreeSet<String>>,
    /// Clusters with `RouteLimitReached` active (F8).
    route_limits: BTreeSet<String>,
    /// Cluster → pod rules of its new security group not yet created.
    new_groups: BTreeMap<String, u32>,
}

/// The pod-traffic rules of a security group (tcp, udp and icmp: `infra::pod_cidr_rules`).
const POD_RULES: u32 = 3;

/// Entries kept at most in each map of [`OpenRepairs`]; past that they are forgotten
/// (a cluster deleted mid-repair never ends its repairs).
const OPEN_MAX: usize = 10_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut inner = Inner {
            registry: Registry::with_prefix("flightdeck"),
            reconciles: Family::default(),
            reconcile_duration: duration_histogram(),
            queue_depth: Gauge::default(),
            in_flight: Gauge::default(),
            cloud_calls: Family::default(),
            cloud_call_duration: Family::new_with_constructor(duration_histogram),
            repairs_started: Family::default(),
            repairs_finished: Family::default(),
            repairs_in_progress: Family::default(),
            repair_budget: Family::default(),
            conditions_active: Family::default(),
            churn_breakers_open: Gauge::default(),
            clusters: Family::default(),
            fleet: Mutex::new(()),
            open: Mutex::new(OpenRepairs::default()),
        };
        // Counters are registered without `_total`: the encoder appends it.
        macro_rules! register {
            ($($name:literal: $metric:ident, $help:literal;)*) => {
                $(inner.registry.register($name, $help, inner.$metric.clone());)*
            };
        }
        register! {
            "reconciles": reconciles,
                "Reconciles finished, by result: success, failure (a cloud call failed), conflict (the cloud was busy) or error (the engine failed)";
            "reconcile_duration_seconds": reconcile_duration,
                "Wall-clock time of one reconcile (observe, plan, act)";
            "queue_depth": queue_depth,
                "Clusters due and waiting to be reconciled";
            "reconciles_in_flight": in_flight,
                "Reconciles started and not yet finished";
            "cloud_calls": cloud_calls,
                "Cloud API calls, by cloud, service, verb (the provider method) and status class (2xx, 4xx, 5xx, or error when the cloud gave no HTTP status)";
            "cloud_call_duration_seconds": cloud_call_duration,
                "Wall-clock time of one cloud API call, including any latency the daemon injects";
            "repairs_started": repairs_started,
                "Flight-control repairs started, by rule (F3 F4 F5 F6 F7 F8 F11)";
            "repairs_finished": repairs_finished,
                "Flight-control repairs finished or called off, by rule";
            "repairs_in_progress": repairs_in_progress,
                "Machines under repair, by cluster and machine set";
            "repair_budget": repair_budget,
                "Machines of a set that may be under repair at once (maxUnhealthy), by cluster and set";
            "conditions_active": conditions_active,
                "Clusters with the condition active, by condition type";
            "churn_breakers_open": churn_breakers_open,
                "Churn breakers open (F11): objects whose reconcile is stopped until the spec changes or an operator resumes the cluster";
            "clusters": clusters,
                "Clusters by phase";
        }
        Metrics {
            inner: Arc::new(inner),
        }
    }

    /// One reconcile finished: `result` is `success`, `failure`, `conflict` or `error`.
    pub fn reconciled(&self, result: &str, seconds: f64) {
        let i = &self.inner;
        i.reconciles.get_or_create(&ResultLabels::of(result)).inc();
        i.reconcile_duration.observe(seconds);
    }

    /// Clusters due and waiting, and reconciles in flight, over every backend.
    pub fn set_queue(&self, waiting: usize, in_flight: usize) {
        let i = &self.inner;
        i.queue_depth
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));
        i.in_flight
            .set(i64::try_from(in_flight).unwrap_or(i64::MAX));
    }

    /// One cloud call: `status_class` is `2xx`, `4xx`, `5xx` or `error`.
    pub fn cloud_call(
        &self,
        cloud: &str,
        service: &str,
        verb: &str,
        status_class: &str,
        seconds: f64,
    ) {
        let i = &self.inner;
        i.cloud_calls
            .get_or_create(&CallLabels::of(cloud, service, verb, status_class))
            .inc();
        i.cloud_call_duration
            .get_or_create(&CallDurationLabels::of(cloud, service, verb))
            .observe(seconds);
    }

    pub fn repair_started(&self, rule: &str) {
        self.inner
            .repairs_started
            .get_or_create(&RuleLabels::of(rule))
            .inc();
    }

    pub fn repair_finished(&self, rule: &str) {
        self.inner
            .repairs_finished
            .get_or_create(&RuleLabels::of(rule))
            .inc();
    }

    /// Replaces the fleet's gauges with `fleet`: label sets it does not name are removed.
    pub fn set_fleet(&self, fleet: &FleetGauges) {
        let i = &self.inner;
        let _whole = lock(&i.fleet);
        i.clusters.clear();
        for (phase, n) in &fleet.phases {
            i.clusters.get_or_create(&PhaseLabels::of(phase)).set(*n);
        }
        i.conditions_active.clear();
        for (kind, n) in &fleet.conditions {
            i.conditions_active
                .get_or_create(&ConditionLabels::of(kind))
                .set(*n);
        }
        i.churn_breakers_open.set(fleet.churn_breakers_open);
        for (family, values) in [
            (&i.repairs_in_progress, &fleet.repairs_in_progress),
            (&i.repair_budget, &fleet.repair_budgets),
        ] {
            family.clear();
            for ((cluster, set), n) in values {
                family.get_or_create(&SetLabels::of(cluster, set)).set(*n);
            }
        }
        if let Some(depth) = fleet.queue_depth {
            i.queue_depth.set(depth);
        }
    }

    /// Counts the repairs an event tells of, without knowing its cluster; see
    /// [`Metrics::on_cluster_event`], which callers that know the cluster should prefer
    /// (the end of a churn breaker, `ReconcileLoopDetectedResolved`, names no cluster in
    /// its message).
    pub fn on_event(&self, reason: &str, message: &str) {
        self.on_cluster_event("", reason, message);
    }

    /// Counts the repairs an event of `cluster` tells of. Which events count, by rule:
    ///
    /// | event reason | rule | counts |
    /// |---|---|---|
    /// | `RemediationStarted` | F3 (message: `not registered`, `NotReady`, `never came up`, `health check`) or F6 (`its server is in ERROR`) | started, once per machine |
    /// | `RemediationCancelled` (the machine recovered) | F3/F6 as above | finished |
    /// | `MachineRemoved` of a machine under repair | the rule it started with | finished |
    /// | `CreateSecurityGroupRule` (pod traffic rules), but not the first three after `CreateSecurityGroup` | F4 | started and finished |
    /// | `AddSecurityGroup` | F5 | started and finished |
    /// | `RemoveRoutes`, `AddRoutes` | F7 | started and finished |
    /// | `RouteLimitReached` / `RouteLimitReachedResolved` | F8 | started / finished |
    /// | `ReconcileLoopDetected` / `ReconcileLoopDetectedResolved` | F11 | started, once per breaker / finished, per breaker open |
    ///
    /// An action's event is written once the action is carried out, so it starts and
    /// finishes its repair at once; a failed action's event (`ActionFailed`,
    /// `CloudBusy`) counts nothing. The planner words a first creation and a
    /// restoration alike: a new group's pod rules are told apart by the group's
    /// `CreateSecurityGroup` just before, but F7 counts new nodes' routes too.
    /// The engine reports a tripped breaker twice (the planner's event, then the
    /// condition's, with the same text); it is counted once.
    pub fn on_cluster_event(&self, cluster: &str, reason: &str, message: &str) {
        let mut open = lock(&self.inner.open);
        match reason {
            "MachineRemoved" => {
                if let Some(rule) = first_word(message).and_then(|m| open.machines.remove(m)) {
                    self.repair_finished(rule);
                }
                return;
            }
            "CreateSecurityGroup" => {
                // The new group's pod rules come next: provisioning, not F4.
                if open.new_groups.len() >= OPEN_MAX {
                    open.new_groups.clear();
                }
                let n = open.new_groups.entry(cluster.to_string()).or_default();
                *n = if cluster.is_empty() {
                    *n + POD_RULES
                } else {
                    POD_RULES
                };
                return;
            }
            "CreateSecurityGroupRule" => {
                if let Some(n) = open.new_groups.get_mut(cluster).filter(|n| **n > 0) {
                    *n -= 1;
                    return;
                }
            }
            _ => {}
        }
        let Some(rule) = rule_of(reason, message) else {
            return;
        };
        match reason {
            "RemediationStarted" => {
                let machine = message
                    .strip_prefix("replacing ")
                    .or_else(|| message.strip_prefix("deleting "))
                    .and_then(|m| m.split_once(':'))
                    .map(|(m, _)| m.to_string());
                let new = match machine {
                    Some(m) => {
                        if open.machines.len() >= OPEN_MAX {
                            open.machines.clear();
                        }
                        open.machines.insert(m, rule).is_none()
                    }
                    None => true,
                };
                if new {
                    self.repair_started(rule);
                }
            }
            "RemediationCancelled" => {
                if let Some(m) = first_word(message) {
                    open.machines.remove(m);
                }
                self.repair_finished(rule);
            }
            "RouteLimitReached" => {
                if open.route_limits.len() >= OPEN_MAX {
                    open.route_limits.clear();
                }
                if open.route_limits.insert(cluster.to_string()) || cluster.is_empty() {
                    self.repair_started(rule);
                }
            }
            "RouteLimitReachedResolved" => {
                open.route_limits.remove(cluster);
                self.repair_finished(rule);
            }
            "ReconcileLoopDetected" => {
                if open.loops.len() >= OPEN_MAX {
                    open.loops.clear();
                }
                let loops = open.loops.entry(cluster.to_string()).or_default();
                if loops.insert(message.to_string()) {
                    self.repair_started(rule);
                }
            }
            "ReconcileLoopDetectedResolved" => {
                // Without the cluster, every breaker seen is forgotten and one end counted.
                let open_here = open.loops.remove(cluster).map_or(0, |l| l.len());
                let n = if cluster.is_empty() {
                    1
                } else {
                    open_here.max(1)
                };
                for _ in 0..n {
                    self.repair_finished(rule);
                }
            }
            _ => {
                self.repair_started(rule);
                self.repair_finished(rule);
            }
        }
    }

    /// The metrics in the Prometheus text format (0.0.4).
    pub fn encode(&self) -> String {
        let _whole = lock(&self.inner.fleet);
        let mut open_metrics = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_registry(
            &mut open_metrics,
            &self.inner.registry,
        );
        to_prometheus_text(&open_metrics)
    }
}

fn first_word(message: &str) -> Option<&str> {
    message.split_whitespace().next()
}

/// OpenMetrics text as prometheus-client writes it → the Prometheus text format: counter
/// families get their `_total` back in HELP and TYPE, and `# UNIT` and `# EOF` go.
fn to_prometheus_text(open_metrics: &str) -> String {
    let counters: HashSet<&str> = open_metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open_metrics.len() + 16 * counters.len());
    for line in open_metrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let descriptor = ["# HELP ", "# TYPE "].into_iter().find_map(|prefix| {
            let (name, rest) = line.strip_prefix(prefix)?.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {rest}"))
        });
        out.push_str(descriptor.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// Which flight-control rule an event is about, if any (see [`Metrics::on_cluster_event`]
/// for what each counts):
///
/// - `RemediationStarted`, `RemediationCancelled`: F6 when the machine's server is in
///   ERROR, F3 when its node did not register, stayed NotReady, its API failed the load
///   balancer's health check or the cluster's API never came up. The planner's reason
///   comes before any text of the cloud's, so the first marker in the message decides
///   (`member ERROR` after `health check` is F3).
/// - `CreateSecurityGroupRule` restoring pod traffic: F4 (`…: pod traffic (tcp from
///   10.244.0.0/16) must be allowed between machines`, or `…: already so (…)` when
///   Neutron already had it).
/// - `AddSecurityGroup`: F5. `RemoveRoutes`, `AddRoutes`: F7.
/// - `RouteLimitReached` and `RouteLimitReachedResolved`: F8.
/// - `ReconcileLoopDetected` and `ReconcileLoopDetectedResolved`: F11.
pub fn rule_of(reason: &str, message: &str) -> Option<&'static str> {
    match reason {
        "RemediationStarted" | "RemediationCancelled" => remediation_rule(message),
        "CreateSecurityGroupRule"
            if message.contains("pod traffic") || message.contains("already so") =>
        {
            Some(rule::F4)
        }
        "AddSecurityGroup" => Some(rule::F5),
        "RemoveRoutes" | "AddRoutes" => Some(rule::F7),
        "RouteLimitReached" | "RouteLimitReachedResolved" => Some(rule::F8),
        "ReconcileLoopDetected" | "ReconcileLoopDetectedResolved" => Some(rule::F11),
        _ => None,
    }
}

fn remediation_rule(message: &str) -> Option<&'static str> {
    const MARKERS: [(&str, &str); 6] = [
        ("not registered", rule::F3),
        ("NotReady", rule::F3),
        ("never came up", rule::F3),
        ("health check", rule::F3),
        ("server is in ERROR", rule::F6),
        ("ERROR", rule::F6),
    ];
    MARKERS
        .iter()
        .filter_map(|(marker, rule)| message.find(marker).map(|at| (at, *rule)))
        .min_by_key(|(at, _)| *at)
        .map(|(_, rule)| rule)
}

#[cfg(test)]
mod tests;
