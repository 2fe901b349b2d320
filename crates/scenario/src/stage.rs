//! What a run sets up in the simulated cloud before the engine starts: the objects
//! flightdeck did not create (it must never touch them), the scenario's fault schedule,
//! and what the checks need to know of that schedule (when the observer was blind, when
//! the APIs answered errors) and the timeline's marks for each fault.

use flightdeck_cloud::Timestamp;
use flightdeck_plan::Severity;
use flightdeck_sim::{SimCloud, SimFault};
use flightdeck_spec::{Duration, FaultKind, Service};

use crate::flight::BlindWindow;
use crate::load::LoadedScenario;

/// A call slowed this much makes a fleet fall behind its resync pace in virtual time,
/// where calls do not overlap; `reconcilePace` excuses such windows.
pub(crate) const SLOW_CALL: Duration = Duration::from_millis(500);

/// A timeline mark: when, how severe, its reason and message.
pub(crate) type Mark = (Timestamp, Severity, &'static str, String);

pub(crate) struct Stage {
    pub(crate) blind: Vec<BlindWindow>,
    /// When `api.errorRate` or `api.rateLimit` faults were active.
    pub(crate) outages: Vec<(Timestamp, Timestamp)>,
    /// When `api.latency` faults of at least [`SLOW_CALL`] were active, or Keystone
    /// refused tokens (`api.errorRate` or `api.rateLimit` on it).
    pub(crate) slow: Vec<(Timestamp, Timestamp)>,
    /// When `api.staleRead` faults on nova or kubernetes were active: the servers and
    /// nodes flightdeck lists may be minutes old, so a machine born in the window may not
    /// be seen, nor its route added, before the window ends.
    pub(crate) stale_lists: Vec<(Timestamp, Timestamp)>,
    /// The start and end of every fault, in time order.
    pub(crate) marks: Vec<Mark>,
}

/// Sets the stage for `loaded` in `cloud`, whose run starts at `start`.
pub(crate) fn set(cloud: &SimCloud, loaded: &LoadedScenario, start: Timestamp) -> Stage {
    let spec = &loaded.scenario.spec;
    // Objects flightdeck did not create: it must never touch them, even when they
    // share a name with the cluster's own.
    cloud.add_foreign_server("bastion", vec!["team=platform".into()]);
    cloud.add_foreign_load_balancer("legacy-ingress");
    for c in &loaded.clusters {
        if let Some(group) = &c.spec.network.security_group {
            cloud.add_foreign_security_group(group.as_str());
        }
    }
    for router in loaded.operator_routers() {
        cloud.add_foreign_router(&router);
    }
    let blind: Vec<BlindWindow> = spec
        .faults
        .iter()
        .filter(|f| matches!(f.kind, FaultKind::EmptyNodeList | FaultKind::AllNotReady))
        .map(|f| BlindWindow {
            start: start.plus(f.at),
            end: f
                .duration
                .map_or(start.plus(spec.duration), |d| start.plus(f.at).plus(d)),
            cluster: f.cluster.as_ref().map(|c| c.to_string()),
            what: if f.kind == FaultKind::EmptyNodeList {
                "the node list was empty (observer.emptyNodeList)"
            } else {
                "every node reported NotReady (observer.allNotReady)"
            },
        })
        .collect();
    let window =
        |active: &dyn Fn(&flightdeck_spec::fault::Fault) -> bool| -> Vec<(Timestamp, Timestamp)> {
            spec.faults
                .iter()
                .filter(|f| active(f))
                .map(|f| {
                    let from = start.plus(f.at);
                    let to = f
                        .duration
                        .map_or(start.plus(spec.duration), |d| from.plus(d));
                    (from, to)
                })
                .collect()
        };
    let outages = window(&|f| matches!(f.kind, FaultKind::ApiErrorRate | FaultKind::ApiRateLimit));
    // Also excused: Keystone refusing every token. The provider's session then waits
    // out its own backoff before it asks again, and no call of a reconcile reaches the
    // cloud meanwhile (the wire run of keystone-revoked-then-down: 10 minutes).
    let slow = window(&|f| {
        (f.kind == FaultKind::ApiLatency && f.latency.is_none_or(|l| l >= SLOW_CALL))
            || (matches!(f.kind, FaultKind::ApiErrorRate | FaultKind::ApiRateLimit)
                && f.service == Some(Service::Keystone))
    });
    let stale_lists = window(&|f| {
        f.kind == FaultKind::ApiStaleRead
            && matches!(f.service, Some(Service::Nova | Service::Kubernetes))
    });
    let mut marks: Vec<Mark> = Vec::new();
    for f in &spec.faults {
        let at = start.plus(f.at);
        cloud.inject(SimFault::from_spec(f, start));
        let what = match (f.service, &f.cluster) {
            (Some(s), _) => format!("{} on {}", f.kind.as_str(), s.as_str()),
            (None, Some(c)) => format!("{} on cluster {c}", f.kind.as_str()),
            (None, None) => f.kind.as_str().to_string(),
        };
        marks.push((
            at,
            Severity::Warning,
            "Fault",
            format!("fault {what} starts"),
        ));
        if let Some(d) = f.duration {
            marks.push((
                at.plus(d),
                Severity::Normal,
                "Fault",
                format!("fault {what} ends"),
            ));
        }
    }
    marks.sort_by(|a, b| (a.0, &a.3).cmp(&(b.0, &b.3)));
    Stage {
        blind,
        outages,
        slow,
        stale_lists,
        marks,
    }
}
