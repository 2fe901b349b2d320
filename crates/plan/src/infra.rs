//! The cluster-wide objects: the security group with its pod-CIDR rules, and the API
//! load balancer with listener, pool and (optionally) health monitor.

use flightdeck_cloud::ownership::role_of;
use flightdeck_cloud::{ProvisioningStatus, Role, SecurityGroupRuleCreate};

use crate::Planner;
use crate::action::Action;
use crate::condition::{Condition, PlanEvent, kind};

/// The pool members go into, once it exists.
#[derive(Clone, Debug)]
pub(crate) struct PoolInfo {
    pub pool_id: String,
    /// A health monitor exists on the pool: members must be ONLINE to serve.
    pub monitored: bool,
    /// The load balancer is ACTIVE (not PENDING_* or ERROR).
    pub lb_active: bool,
}

/// What the machines need from the cluster-wide objects.
#[derive(Clone, Debug, Default)]
pub(crate) struct Infra {
    /// The security group servers join, by ID (names can be ambiguous across owners).
    pub security_group_id: Option<String>,
    pub pool: Option<PoolInfo>,
    /// Every cluster-wide object exists and is ACTIVE, rules included.
    pub complete: bool,
    /// The API endpoint is not flightdeck's (OpenNebula's `endpoint`): a control-plane
    /// machine serves once it runs and its node is Ready; there are no members.
    pub external_endpoint: bool,
    /// OpenNebula: the template IDs machines can be instantiated from.
    pub templates: std::collections::BTreeMap<String, String>,
}

/// Plans the security group and the load balancer chain; returns what machines need.
pub(crate) fn plan_infra(p: &mut Planner<'_>) -> Infra {
    if let Some(one) = p.spec.spec.provider.opennebula.as_ref() {
        let one_infra = crate::opennebula::plan_one_infra(p, one);
        return Infra {
            security_group_id: None,
            pool: None,
            complete: one_infra.complete,
            external_endpoint: true,
            templates: one_infra.instantiable,
        };
    }
    if p.spec.spec.provider.is_kubevirt() {
        return Infra {
            security_group_id: None,
            pool: None,
            complete: plan_endpoint_service(p),
            external_endpoint: true,
            templates: Default::default(),
        };
    }
    let before = p.actions.len();
    let security_group_id = plan_security_group(p);
    let sg_complete = security_group_id.is_some() && p.actions.len() == before;
    let (pool, lb_complete) = plan_load_balancer(p);
    if !p.missing_checked {
        // Everything recorded is listed again: a later absence starts a new clock.
        p.memory.ids.missing_since = None;
    }
    Infra {
        security_group_id,
        pool,
        complete: sg_complete && lb_complete,
        external_endpoint: false,
        templates: Default::default(),
    }
}

/// KubeVirt: the control-plane endpoint, a Service in the infra cluster selecting the
/// cluster's control-plane VMIs. Returns whether it exists.
fn plan_endpoint_service(p: &mut Planner<'_>) -> bool {
    let name = format!("{}-api", p.spec.name());
    let found = p.observed.services.iter().find(|s| s.name == name);
    let exists = found.is_some();
    p.status.api_endpoint = found
        .and_then(|s| s.address.as_deref().map(|a| (a, s.port)))
        .map(|(address, port)| crate::userdata::host_port(address, port));
    let what = format!("the endpoint Service {name}");
    if exists {
        crate::churn::seen(p, &what);
    } else if !crate::churn::may_make(p, &what) {
        crate::churn::report(p);
    } else {
        crate::churn::making(p, &what);
        p.act(
            Action::CreateEndpointService {
                name,
                port: p.spec.spec.api_load_balancer.port.get(),
            },
            "the cluster's API needs its endpoint Service",
        );
        p.wait(crate::POLL_MACHINES);
    }
    exists
}

/// The three ingress rules every cluster needs: tcp, udp and icmp from the pod CIDR.
pub fn pod_cidr_rules(
    p_spec: &flightdeck_spec::Cluster,
    group_id: &str,
) -> Vec<SecurityGroupRuleCreate> {
    let cidr = p_spec.spec.network.pod_cidr;
    ["tcp", "udp", "icmp"]
        .into_iter()
        .map(|proto| SecurityGroupRuleCreate {
            security_group_id: group_id.to_string(),
            direction: "ingress".into(),
            ethertype: cidr.ethertype().into(),
            protocol: Some(proto.into()),
            remote_ip_prefix: Some(cidr.to_string()),
        })
        .collect()
}

fn plan_security_group(p: &mut Planner<'_>) -> Option<String> {
    let groups: Vec<_> = p
        .observed
        .security_groups
        .iter()
        .filter(|g| role_of(&g.tags) == Some(Role::SecurityGroup))
        .collect();
    let recorded = p.memory.ids.security_group.clone();
    let chosen = recorded
        .as_deref()
        .and_then(|id| groups.iter().find(|g| g.id == id))
        .or(groups.first())
        .copied();
    let Some(group) = chosen else {
        if let Some(id) = recorded {
            if !confirm_gone(p, &format!("security group {id}"))
                || !crate::churn::note_recreation(p, "security group")
            {
                crate::churn::report(p);
                return None;
            }
            p.events.push(PlanEvent::warning(
                "SecurityGroupLost",
                format!("security group {id} is gone; creating it again"),
            ));
            p.memory.ids.security_group = None;
        }
        p.act(
            Action::CreateSecurityGroup {
                name: p
                    .spec
                    .spec
                    .network
                    .security_group
                    .as_ref()
                    .map(|g| g.to_string())
                    .unwrap_or_default(),
            },
            "the cluster has no security group",
        );
        return None;
    };
    if p.memory.ids.security_group.as_deref() != Some(group.id.as_str()) {
        p.memory.ids.security_group = Some(group.id.clone());
    }
    for rule in pod_cidr_rules(p.spec, &group.id) {
        let what = format!(
            "pod-network rule {} from {}",
            rule.protocol.as_deref().unwrap_or("any"),
            rule.remote_ip_prefix.as_deref().unwrap_or("anywhere")
        );
        if group.rules.iter().any(|r| r.matches(&rule)) {
            crate::churn::seen(p, &what);
        } else if crate::churn::may_make(p, &what) {
            crate::churn::making(p, &what);
            let reason = format!(
                "pod traffic ({} from {}) must be allowed between machines",
                rule.protocol.as_deref().unwrap_or("any"),
                rule.remote_ip_prefix.as_deref().unwrap_or("anywhere")
            );
            p.act(Action::CreateSecurityGroupRule { rule }, reason);
        } else {
            crate::churn::report(p);
        }
    }
    Some(group.id.clone())
}

/// Makes a child of the API load balancer (`what`), if its breaker lets it be made
/// again and Octavia can take a change now.
fn make_child(p: &mut Planner<'_>, what: &str, action: Action, reason: String) {
    if !crate::churn::may_make(p, what) {
        crate::churn::report(p);
        return;
    }
    if p.act_on_load_balancer(action, reason) {
        crate::churn::making(p, what);
    }
}

fn plan_load_balancer(p: &mut Planner<'_>) -> (Option<PoolInfo>, bool) {
    let o = p.observed;
    let cluster = p.spec.name().to_string();
    let pick =
        |role: Role, recorded: &Option<String>, ids: Vec<(&str, &[String])>| -> Option<String> {
            let owned: Vec<&str> = ids
                .iter()
                .filter(|(_, tags)| role_of(tags) == Some(role.clone()))
                .map(|(id, _)| *id)
                .collect();
            recorded
                .as_deref()
                .filter(|r| owned.contains(r))
                .or(owned.first().copied())
                .map(str::to_string)
        };

    let lb_id = pick(
        Role::ApiLoadBalancer,
        &p.memory.ids.load_balancer,
        o.load_balancers
            .iter()
            .map(|x| (x.id.as_str(), x.tags.as_slice()))
            .collect(),
    );
    let Some(lb_id) = lb_id else {
        let Some(openstack) = p.spec.spec.provider.openstack.as_ref() else {
            return (None, false);
        };
        if let Some(old) = p.memory.ids.load_balancer.clone() {
            // A new load balancer means a new VIP: only once the old one is surely gone.
            if !confirm_gone(p, &format!("load balancer {old}"))
                || !crate::churn::note_recreation(p, "load balancer")
            {
                crate::churn::report(p);
                return (None, false);
            }
            p.memory.ids.load_balancer = None;
            p.events.push(PlanEvent::warning(
                "LoadBalancerLost",
                format!("load balancer {old} is gone; creating it again"),
            ));
            p.memory.ids.listener = None;
            p.memory.ids.pool = None;
            p.memory.ids.health_monitor = None;
        }
        p.act(
            Action::CreateLoadBalancer {
                name: format!("{cluster}-api"),
                subnet: openstack.subnet.to_string(),
            },
            "the cluster's API needs a load balancer",
        );
        p.wait(crate::POLL_OCTAVIA);
        return (None, false);
    };
    p.memory.ids.load_balancer = Some(lb_id.clone());
    let Some(lb) = o.load_balancers.iter().find(|l| l.id == lb_id) else {
        return (None, false);
    };
    p.status.load_balancer = Some(crate::status::LoadBalancerStatus {
        id: lb.id.clone(),
        provisioning_status: lb.provisioning_status.as_str().into(),
        operating_status: lb.operating_status.as_str().into(),
        vip_address: lb.vip_address,
    });
    let lb_active = lb.provisioning_status == ProvisioningStatus::Active;
    match lb.provisioning_status {
        ProvisioningStatus::Error => {
            p.lb_failed = true;
            p.condition(Condition::new(
                kind::LOAD_BALANCER_FAILED,
                true,
                "LoadBalancerError",
                format!(
                    "load balancer {lb_id} is in ERROR; flightdeck does not replace it on its own \
                     because its VIP is the cluster's API address"
                ),
            ));
        }
        s if s.is_pending() => {
            let (held, poll) = p.lb_pending();
            let held_up = poll == crate::POLL_STUCK;
            p.lb_held_up = held_up;
            if held_up {
                p.condition(Condition::new(
                    kind::LOAD_BALANCER_HELD_UP,
                    true,
                    "LoadBalancerPending",
                    format!(
                        "load balancer {lb_id} has been {} for {}; Octavia takes no change \
                         until it is ACTIVE again, so flightdeck looks every {}",
                        lb.provisioning_status.as_str(),
                        held,
                        crate::POLL_STUCK
                    ),
                ));
            }
            p.wait(poll);
        }
        _ => p.lb_slot_free = true,
    }
    if !lb.provisioning_status.is_pending() {
        p.memory.lb_pending_since = None;
    }

    let listener_id = pick(
        Role::ApiListener,
        &p.memory.ids.listener,
        o.listeners
            .iter()
            .filter(|l| l.loadbalancer_id == lb_id)
            .map(|x| (x.id.as_str(), x.tags.as_slice()))
            .collect(),
    );
    p.memory.ids.listener = listener_id.clone();
    let Some(listener_id) = listener_id else {
        let port = p.spec.spec.api_load_balancer.port.get();
        make_child(
            p,
            "the API listener",
            Action::CreateListener {
                name: format!("{cluster}-api-{port}"),
                load_balancer_id: lb_id,
                port,
            },
            format!("the API load balancer needs a listener on port {port}"),
        );
        return (None, false);
    };
    crate::churn::seen(p, "the API listener");
    let pool_id = pick(
        Role::ApiPool,
        &p.memory.ids.pool,
        o.pools
            .iter()
            .filter(|x| x.loadbalancer_id == lb_id)
            .map(|x| (x.id.as_str(), x.tags.as_slice()))
            .collect(),
    );
    p.memory.ids.pool = pool_id.clone();
    let Some(pool_id) = pool_id else {
        make_child(
            p,
            "the API pool",
            Action::CreatePool {
                name: format!("{cluster}-api"),
                listener_id,
            },
            "the API listener needs a pool of control-plane members".into(),
        );
        return (None, false);
    };
    crate::churn::seen(p, "the API pool");
    let hm_id = pick(
        Role::ApiHealthMonitor,
        &p.memory.ids.health_monitor,
        o.health_monitors
            .iter()
            .filter(|x| x.pool_id == pool_id)
            .map(|x| (x.id.as_str(), x.tags.as_slice()))
            .collect(),
    );
    p.memory.ids.health_monitor = hm_id.clone();
    let mut complete = lb_active;
    if hm_id.is_some() {
        crate::churn::seen(p, "the API health monitor");
    }
    if hm_id.is_none()
        && let Some(hm) = &p.spec.spec.api_load_balancer.health_monitor
    {
        complete = false;
        make_child(
            p,
            "the API health monitor",
            Action::CreateHealthMonitor {
                name: format!("{cluster}-api"),
                pool_id: pool_id.clone(),
                kind: hm.kind.as_str().into(),
                delay_s: secs(hm.delay),
                timeout_s: secs(hm.timeout),
                max_retries: hm.max_retries,
            },
            "the spec asks for a health monitor on the API pool".into(),
        );
    }
    let all_active = o
        .listeners
        .iter()
        .filter(|l| l.loadbalancer_id == lb_id)
        .all(|l| l.provisioning_status == ProvisioningStatus::Active)
        && o.pools
            .iter()
            .filter(|x| x.loadbalancer_id == lb_id)
            .all(|x| x.provisioning_status == ProvisioningStatus::Active);
    let pool = PoolInfo {
        pool_id,
        monitored: hm_id.is_some(),
        lb_active,
    };
    (Some(pool), complete && all_active)
}

fn secs(d: flightdeck_spec::Duration) -> u32 {
    u32::try_from(d.as_millis().div_ceil(1000))
        .unwrap_or(u32::MAX)
        .max(1)
}

/// Whether a recorded object absent from the lists has been absent long enough to be
/// taken for gone. Until then the planner waits (and says so) rather than create a
/// second one.
fn confirm_gone(p: &mut Planner<'_>, what: &str) -> bool {
    p.missing_checked = true;
    let since = *p.memory.ids.missing_since.get_or_insert(p.now);
    if p.now.since(since) >= crate::GONE_AFTER {
        return true;
    }
    p.condition(Condition::new(
        kind::OBJECT_MISSING,
        true,
        "NotListed",
        format!(
            "{what} is recorded but not listed by the cloud; it is taken for gone only after {}",
            crate::GONE_AFTER
        ),
    ));
    p.wait(crate::POLL_MACHINES);
    false
}
