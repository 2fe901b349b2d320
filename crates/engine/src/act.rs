//! Acting: one planned action becomes one provider call, its result is classified and
//! the IDs it returns are recorded in memory.

use flightdeck_cloud::ownership::Role;
use flightdeck_cloud::{
    CloudError, EndpointService, ErrorClass, HealthMonitorCreate, ImageCreate, Instantiate,
    ListenerCreate, LoadBalancerCreate, MemberCreate, Observed, Ownership, PoolCreate, Provider,
    ServerCreate, TemplateCreate,
};
use flightdeck_plan::memory::Blocked;
use flightdeck_plan::{Action, Memory};

/// What became of one action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActOutcome {
    Done,
    /// The cloud said the wanted state already holds (an existing rule, a delete of
    /// something already gone).
    AlreadyDone(String),
    Failed(CloudError),
    /// flightdeck refused: the target does not carry the cluster's ownership tag.
    Refused(String),
    /// A permanent error remembered in memory and retried on its own slow clock, so it
    /// does not hold back the rest of the cluster.
    Deferred(CloudError),
    /// The cloud said "not now" for this one object (a disruption budget); the planner
    /// looks again on its own clock.
    Blocked(String),
}

/// A machine's tags: its ownership, and the digest of the template it is built from.
fn machine_tags(owner: &Ownership, key: &str, template: &str) -> Vec<String> {
    let mut tags = owner.tags(&Role::Machine(key.to_string()));
    if !template.is_empty() {
        tags.push(format!(
            "{}{template}",
            flightdeck_cloud::ownership::TAG_TEMPLATE
        ));
    }
    tags
}

/// A create the cloud refused made nothing: the machine's create may be sent again at
/// once. A transient error (a 5xx, a timeout) may have come after the server was made,
/// so the record keeps its `create_sent_at` and the planner waits for the lists.
fn forget_refused_create(memory: &mut Memory, machine: &str, e: &CloudError) {
    let refused = !matches!(e.class, ErrorClass::Transient);
    if refused && let Some(r) = memory.machines.get_mut(machine) {
        r.create_sent_at = None;
    }
}

/// Carries out one action. `observed` is what the plan was made from; deletions are
/// checked against it so that nothing without the cluster's UID tag is ever touched.
pub async fn act<P: Provider>(
    provider: &P,
    owner: &Ownership,
    observed: &Observed,
    memory: &mut Memory,
    action: &Action,
    ownership: crate::config::OwnershipScope,
    now: flightdeck_cloud::Timestamp,
) -> ActOutcome {
    if ownership != crate::config::OwnershipScope::Off
        && let Some(why) = not_owned(owner, observed, memory, action, ownership)
    {
        return ActOutcome::Refused(why);
    }
    let result: Result<(), CloudError> = async {
        match action {
            Action::CreateSecurityGroup { name } => {
                let g = provider
                    .create_security_group(name, &owner.tags(&Role::SecurityGroup))
                    .await?;
                memory.ids.security_group = Some(g.id);
            }
            Action::CreateSecurityGroupRule { rule } => {
                provider.create_security_group_rule(rule).await?;
            }
            Action::CreateLoadBalancer { name, subnet } => {
                let lb = provider
                    .create_load_balancer(&LoadBalancerCreate {
                        name: name.clone(),
                        vip_subnet: subnet.clone(),
                        tags: owner.tags(&Role::ApiLoadBalancer),
                    })
                    .await?;
                memory.ids.load_balancer = Some(lb.id);
            }
            Action::CreateListener {
                name,
                load_balancer_id,
                port,
            } => {
                let l = provider
                    .create_listener(&ListenerCreate {
                        name: name.clone(),
                        loadbalancer_id: load_balancer_id.clone(),
                        protocol_port: *port,
                        tags: owner.tags(&Role::ApiListener),
                    })
                    .await?;
                memory.ids.listener = Some(l.id);
            }
            Action::CreatePool { name, listener_id } => {
                let pool = provider
                    .create_pool(&PoolCreate {
                        name: name.clone(),
                        listener_id: listener_id.clone(),
                        tags: owner.tags(&Role::ApiPool),
                    })
                    .await?;
                memory.ids.pool = Some(pool.id);
            }
            Action::CreateHealthMonitor {
                name,
                pool_id,
                kind,
                delay_s,
                timeout_s,
                max_retries,
            } => {
                let hm = provider
                    .create_health_monitor(&HealthMonitorCreate {
                        name: name.clone(),
                        pool_id: pool_id.clone(),
                        kind: kind.clone(),
                        delay_s: *delay_s,
                        timeout_s: *timeout_s,
                        max_retries: *max_retries,
                        tags: owner.tags(&Role::ApiHealthMonitor),
                    })
                    .await?;
                memory.ids.health_monitor = Some(hm.id);
            }
            Action::CreateServer {
                machine,
                key,
                flavor,
                image,
                network,
                security_group,
                eviction_strategy,
                user_data,
                template,
                ..
            } => {
                let s = provider
                    .create_server(&ServerCreate {
                        name: machine.clone(),
                        flavor: flavor.clone(),
                        image: image.clone(),
                        network: network.clone(),
                        security_groups: if security_group.is_empty() {
                            Vec::new()
                        } else {
                            vec![security_group.clone()]
                        },
                        tags: machine_tags(owner, key, template),
                        eviction_strategy: eviction_strategy.clone(),
                        user_data: user_data.clone(),
                    })
                    .await
                    .inspect_err(|e| forget_refused_create(memory, machine, e))?;
                if let Some(r) = memory.machines.get_mut(machine) {
                    r.server_id = Some(s.id);
                    r.create_sent_at = None;
                }
            }
            Action::CreateMember {
                machine,
                key,
                pool_id,
                address,
                port,
            } => {
                let m = provider
                    .create_member(&MemberCreate {
                        name: machine.clone(),
                        pool_id: pool_id.clone(),
                        address: *address,
                        protocol_port: *port,
                        tags: owner.tags(&Role::Machine(key.clone())),
                    })
                    .await?;
                if let Some(r) = memory.machines.get_mut(machine) {
                    r.member_id = Some(m.id);
                }
            }
            Action::AddMembers {
                pool_id,
                port,
                members,
            } => {
                let batch: Vec<MemberCreate> = members
                    .iter()
                    .map(|m| MemberCreate {
                        name: m.machine.clone(),
                        pool_id: pool_id.clone(),
                        address: m.address,
                        protocol_port: *port,
                        tags: owner.tags(&Role::Machine(m.key.clone())),
                    })
                    .collect();
                // Octavia answers with no body: the IDs come with the next member list,
                // which finds each member by its machine tag.
                provider.add_members(pool_id, &batch).await?;
            }
            Action::DeleteMember {
                pool_id, member_id, ..
            } => {
                provider.delete_member(pool_id, member_id).await?;
            }
            Action::DeleteServer { server_id, .. } => provider.delete_server(server_id).await?,
            Action::DeleteLoadBalancer { load_balancer_id } => {
                provider
                    .delete_load_balancer_cascade(load_balancer_id)
                    .await?;
            }
            Action::DeleteSecurityGroup { security_group_id } => {
                provider.delete_security_group(security_group_id).await?;
            }
            Action::AddSecurityGroup {
                server_id,
                security_group,
                ..
            } => {
                provider
                    .add_security_group(server_id, security_group)
                    .await?;
            }
            Action::AddRoutes {
                router_id, routes, ..
            } => {
                if let Err(e) = provider.add_extra_routes(router_id, routes).await {
                    // Remember the router's limit so the planner stops asking (F8).
                    if let Some(limit) = route_limit_in(&e.message) {
                        memory.route_limit = Some((limit, now));
                    }
                    return Err(e);
                }
            }
            Action::RemoveRoutes {
                router_id, routes, ..
            } => {
                provider.remove_extra_routes(router_id, routes).await?;
            }
            Action::CreateImage {
                name,
                content,
                datastore,
            } => {
                let id = provider
                    .create_image(&ImageCreate {
                        name: name.clone(),
                        content: content.clone(),
                        datastore_id: *datastore,
                    })
                    .await?;
                if let Some(h) = memory.one.images.get_mut(name) {
                    h.id = Some(id);
                }
            }
            Action::CreateTemplate { name, content } => {
                let id = provider
                    .create_template(&TemplateCreate {
                        name: name.clone(),
                        content: content.clone(),
                    })
                    .await?;
                if let Some(h) = memory.one.templates.get_mut(name) {
                    h.id = Some(id);
                }
            }
            Action::Instantiate {
                machine,
                key,
                template_id,
                user_data,
                template,
                ..
            } => {
                let answer = provider
                    .instantiate(&Instantiate {
                        template_id: template_id.clone(),
                        name: machine.clone(),
                        tags: machine_tags(owner, key, template),
                        user_data: user_data.clone(),
                    })
                    .await;
                let id = match answer {
                    Ok(id) => {
                        memory.one.blocked.remove(template_id);
                        id
                    }
                    Err(e) if e.class == ErrorClass::Permanent => {
                        // A USE lock (AUTHORIZATION): remembered, so this template is
                        // tried again slowly while the rest of the cluster goes on.
                        memory.one.blocked.insert(
                            template_id.clone(),
                            Blocked {
                                since: now,
                                message: e.message.clone(),
                            },
                        );
                        forget_refused_create(memory, machine, &e);
                        return Err(e);
                    }
                    Err(e) => {
                        forget_refused_create(memory, machine, &e);
                        return Err(e);
                    }
                };
                if let Some(r) = memory.machines.get_mut(machine) {
                    r.server_id = Some(id);
                    r.create_sent_at = None;
                }
            }
            Action::DeleteTemplate { template_id, .. } => {
                provider.delete_template(template_id).await?;
            }
            Action::DeleteImage { image_id, .. } => provider.delete_image(image_id).await?,
            Action::CreateEndpointService { name, port } => {
                provider
                    .create_endpoint_service(&EndpointService {
                        name: name.clone(),
                        port: *port,
                        address: None,
                        tags: owner.tags(&Role::ApiLoadBalancer),
                    })
                    .await?;
            }
            Action::DeleteEndpointService { name } => {
                provider.delete_endpoint_service(name).await?;
            }
            Action::CordonNode { node, .. } => {
                provider.set_unschedulable(owner, node, true).await?;
            }
            Action::UncordonNode { node, .. } => {
                provider.set_unschedulable(owner, node, false).await?;
            }
            Action::EvictPod { namespace, pod, .. } => {
                provider.evict_pod(owner, namespace, pod).await?;
            }
            Action::DeletePod { namespace, pod, .. } => {
                provider.delete_pod(owner, namespace, pod).await?;
            }
            Action::DeleteNode { node, .. } => provider.delete_node(owner, node).await?,
            Action::PatchNode {
                node,
                labels,
                taints,
                ..
            } => {
                provider
                    .patch_node_metadata(owner, node, labels, taints.as_deref())
                    .await?
            }
            Action::DeleteVmi { vmi, .. } => provider.delete_vmi(vmi).await?,
            Action::RefreshBootstrapToken {
                machine,
                token_id,
                expires_at,
            } => {
                crate::bootstrap::refresh(provider, owner, memory, machine, token_id, *expires_at)
                    .await?
            }
            Action::DeleteBootstrapToken { machine, token_id } => {
                provider.delete_bootstrap_token(owner, token_id).await?;
                if let Some(r) = memory.machines.get_mut(machine) {
                    r.token = None;
                }
            }
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => ActOutcome::Done,
        // Remembered in memory and retried on its own slow clock (see above): it must
        // not slow down the reconcile of everything else.
        Err(e)
            if e.class == ErrorClass::Permanent && matches!(action, Action::Instantiate { .. }) =>
        {
            ActOutcome::Deferred(e)
        }
        // A disruption budget says "not now" (429): the drain looks again on its own
        // clock (F9); it is no failure of the cluster's reconcile.
        Err(e) if e.class == ErrorClass::Conflict && matches!(action, Action::EvictPod { .. }) => {
            ActOutcome::Blocked(e.message)
        }
        // Only a rule is identified by its content alone: the same rule existing is the
        // rule we wanted. Any other object that already exists is not one we made (ours
        // would have been listed by its tags), so it is reported, not taken over.
        Err(e) if e.class == ErrorClass::AlreadyExists => match action {
            Action::CreateSecurityGroupRule { .. } => ActOutcome::AlreadyDone(e.message),
            // A content-addressed name that is taken holds the same content: the next
            // observation finds it by name (an unanswered create is adopted, anything
            // else is used, never owned).
            Action::CreateTemplate { .. } | Action::CreateImage { .. } => {
                ActOutcome::AlreadyDone(e.message)
            }
            _ => ActOutcome::Failed(CloudError {
                class: ErrorClass::Permanent,
                message: flightdeck_cloud::error::bounded_message(format!(
                    "{} (an object flightdeck did not create is in the way; remove it or adopt it by tagging it)",
                    e.message
                )),
                ..e
            }),
        },
        Err(e) if e.class == ErrorClass::NotFound && is_delete(action) => {
            ActOutcome::AlreadyDone(e.message)
        }
        Err(e) => ActOutcome::Failed(e),
    }
}

/// The limit in Neutron's RoutesExhausted message ("... exceeds the maximum 30.").
fn route_limit_in(message: &str) -> Option<usize> {
    let rest = message.split("maximum").nth(1)?;
    rest.trim()
        .trim_end_matches('.')
        .split_whitespace()
        .next()?
        .trim_end_matches('.')
        .parse()
        .ok()
}

fn is_delete(action: &Action) -> bool {
    matches!(
        action,
        Action::DeleteMember { .. }
            | Action::DeleteServer { .. }
            | Action::DeleteLoadBalancer { .. }
            | Action::DeleteSecurityGroup { .. }
            | Action::DeleteTemplate { .. }
            | Action::DeleteImage { .. }
            | Action::DeleteEndpointService { .. }
            | Action::DeletePod { .. }
            | Action::DeleteNode { .. }
            | Action::DeleteVmi { .. }
    )
}

/// Why a deletion must not go ahead, if it must not: its target is not among the
/// observed objects carrying this cluster's UID tag.
fn not_owned(
    owner: &Ownership,
    o: &Observed,
    memory: &Memory,
    action: &Action,
    scope: crate::config::OwnershipScope,
) -> Option<String> {
    // Templates and images carry no tags: they are flightdeck's when the cluster's
    // memory says flightdeck registered them and this cluster holds them.
    if let Action::DeleteTemplate {
        template_id: id, ..
    }
    | Action::DeleteImage { image_id: id, .. } = action
    {
        let held = memory
            .one
            .templates
            .values()
            .chain(memory.one.images.values())
            .any(|h| h.id.as_deref() == Some(id.as_str()) && h.created);
        return (!held).then(|| {
            format!(
                "refusing to delete {} {id}: cluster {} does not hold it as one flightdeck registered",
                action.kind().trim_start_matches("Delete").to_lowercase(),
                owner.cluster
            )
        });
    }
    // Routes belong to the cluster whose pod network holds their destination.
    if let Action::AddRoutes {
        routes, pod_cidr, ..
    }
    | Action::RemoveRoutes {
        routes, pod_cidr, ..
    } = action
    {
        let pod: Option<flightdeck_spec::Cidr> = pod_cidr.parse().ok();
        let foreign: Vec<&str> = routes
            .iter()
            .filter(|r| {
                let dest: Option<flightdeck_spec::Cidr> = r.destination.parse().ok();
                !matches!((pod, dest), (Some(p), Some(d)) if p.covers(&d))
            })
            .map(|r| r.destination.as_str())
            .collect();
        return (!foreign.is_empty()).then(|| {
            format!(
                "refusing to touch route(s) to {}: outside cluster {}'s pod network {pod_cidr}",
                foreign.join(", "),
                owner.cluster
            )
        });
    }
    let (what, id, tags) = match action {
        Action::DeleteServer { server_id, .. } => (
            "server",
            server_id,
            o.servers
                .iter()
                .find(|s| s.id == *server_id)
                .map(|s| &s.tags),
        ),
        Action::DeleteMember { member_id, .. } => (
            "member",
            member_id,
            o.members
                .iter()
                .find(|m| m.id == *member_id)
                .map(|m| &m.tags),
        ),
        Action::DeleteLoadBalancer { load_balancer_id } => (
            "load balancer",
            load_balancer_id,
            o.load_balancers
                .iter()
                .find(|l| l.id == *load_balancer_id)
                .map(|l| &l.tags),
        ),
        Action::DeleteSecurityGroup { security_group_id } => (
            "security group",
            security_group_id,
            o.security_groups
                .iter()
                .find(|g| g.id == *security_group_id)
                .map(|g| &g.tags),
        ),
        Action::DeleteVmi { vmi, .. } => (
            "VMI",
            vmi,
            o.vmis.iter().find(|v| v.name == *vmi).map(|v| &v.tags),
        ),
        Action::DeleteEndpointService { name } => (
            "service",
            name,
            o.services.iter().find(|s| s.name == *name).map(|s| &s.tags),
        ),
        _ => return None,
    };
    match tags {
        Some(tags) if scope.keeps(owner, tags) => None,
        _ => Some(format!(
            "refusing to delete {what} {id}: it does not carry cluster {}'s ownership tag {}",
            owner.cluster,
            owner.uid_tag()
        )),
    }
}
