//! Octavia: load balancers and their listeners, pools and health monitors (members
//! live in [`crate::members`]).
//!
//! A load balancer takes one change at a time: a child create (or member delete) puts
//! it in `PENDING_UPDATE` and any other change meanwhile answers 409 "immutable"; so
//! does a load balancer in ERROR. A cascade delete takes it and everything under it
//! away at once, after the cascade latency.

use std::collections::BTreeSet;

use flightdeck_cloud::{
    CloudError, ErrorClass, HealthMonitor, HealthMonitorCreate, Listener, ListenerCreate,
    LoadBalancer, LoadBalancerCreate, LoadBalancing, Member, MemberCreate, OperatingStatus,
    Ownership, Pool, PoolCreate, ProvisioningStatus, Timestamp,
};

use crate::faults::SimFault;
use crate::members::{self, create_member, delete_member};
use crate::{Event as SimEvent, MutationKind, Result, SimCloud, State};

pub(crate) const OCTAVIA: &str = "octavia";

/// The most load balancers the cloud holds.
pub const LOAD_BALANCERS_MAX: usize = 5_000;
/// The most listeners, pools, health monitors or members (each) the cloud holds.
pub const CHILDREN_MAX: usize = 50_000;

pub(crate) struct LbRec {
    pub(crate) lb: LoadBalancer,
    /// Bumped whenever the load balancer starts a change, so a completion scheduled
    /// for an earlier change is recognised as stale.
    change: u64,
    /// A change is under way (its completion is scheduled).
    changing: bool,
    /// Held PENDING_UPDATE by `octavia.pendingUpdate` until it ends.
    held: bool,
}

#[derive(Clone, Debug)]
pub(crate) enum Child {
    Listener(String),
    Pool(String),
    HealthMonitor(String),
    Member(String),
    /// The members a batch update changed.
    Members(Vec<String>),
}

#[derive(Clone, Debug)]
pub(crate) enum Event {
    Created(String),
    ChangeDone {
        lb: String,
        change: u64,
        child: Child,
    },
    MemberRelease {
        member: String,
        change: u64,
    },
    CascadeDone(String),
    /// A health-check threshold passes: nothing but re-evaluation happens.
    HealthCheck(String),
}

pub(crate) fn error(class: ErrorClass, op: &str, status: u16, message: String) -> CloudError {
    CloudError::new(class, OCTAVIA, op, Some(status), message)
}

pub(crate) fn not_found(op: &str, resource: &str, id: &str) -> CloudError {
    error(
        ErrorClass::NotFound,
        op,
        404,
        format!("{resource} {id} not found."),
    )
}

pub(crate) fn duplicate(op: &str, message: String) -> CloudError {
    error(ErrorClass::AlreadyExists, op, 409, message)
}

pub(crate) fn quota(op: &str, resource: &str) -> CloudError {
    error(
        ErrorClass::Permanent,
        op,
        403,
        format!("Quota has been met for resources: {resource}"),
    )
}

/// Checks that load balancer `lb_id` exists and takes changes (is ACTIVE).
pub(crate) fn check_mutable(st: &State, op: &str, lb_id: &str) -> Result<()> {
    let Some(rec) = st.lbs.get(lb_id) else {
        return Err(not_found(op, "Load Balancer", lb_id));
    };
    if rec.lb.provisioning_status != ProvisioningStatus::Active {
        // Same answer for PENDING_* and ERROR: the client cannot tell them apart
        // without looking at the load balancer.
        return Err(error(
            ErrorClass::Conflict,
            op,
            409,
            format!("Load Balancer {lb_id} is immutable and cannot be updated."),
        ));
    }
    Ok(())
}

/// `octavia.pendingUpdate` starts: flightdeck's ACTIVE load balancers within
/// `fault`'s target go PENDING_UPDATE and stay there (an amphora failover that hangs):
/// every change of them or their children answers 409 until it ends. Answers their
/// ids.
pub(crate) fn hold(st: &mut State, fault: &SimFault) -> Vec<String> {
    let mut held = Vec::new();
    for rec in st.lbs.values_mut() {
        let owned = flightdeck_cloud::ownership::uid_of(&rec.lb.tags).is_some();
        if owned
            && fault.targets(&rec.lb.tags)
            && rec.lb.provisioning_status == ProvisioningStatus::Active
        {
            rec.held = true;
            rec.lb.provisioning_status = ProvisioningStatus::PendingUpdate;
            held.push(rec.lb.id.clone());
        }
    }
    held
}

/// `octavia.pendingUpdate` ends: the load balancers it held are ACTIVE again, unless a
/// change of theirs is still under way (its completion makes them ACTIVE).
pub(crate) fn release(st: &mut State, ids: &[String]) {
    for id in ids {
        if let Some(rec) = st.lbs.get_mut(id) {
            rec.held = false;
            if !rec.changing && rec.lb.provisioning_status == ProvisioningStatus::PendingUpdate {
                rec.lb.provisioning_status = ProvisioningStatus::Active;
            }
        }
    }
}

/// Puts `lb_id` in PENDING_UPDATE until the change to `child` completes.
pub(crate) fn begin_change(
    st: &mut State,
    now: Timestamp,
    lb_id: &str,
    child: Child,
    latency: (u64, u64),
) {
    let Some(rec) = st.lbs.get_mut(lb_id) else {
        return;
    };
    rec.change += 1;
    rec.changing = true;
    rec.lb.provisioning_status = ProvisioningStatus::PendingUpdate;
    let change = rec.change;
    let event = Event::ChangeDone {
        lb: lb_id.into(),
        change,
        child,
    };
    st.schedule_after(now, latency, SimEvent::Octavia(event));
}

fn new_lb(st: &mut State, name: &str, tags: &[String], active: bool) -> LoadBalancer {
    let id = st.new_id();
    let lb = LoadBalancer {
        id: id.clone(),
        name: name.into(),
        provisioning_status: if active {
            ProvisioningStatus::Active
        } else {
            ProvisioningStatus::PendingCreate
        },
        operating_status: if active {
            OperatingStatus::Online
        } else {
            OperatingStatus::Offline
        },
        vip_address: st.addresses.allocate(),
        tags: tags.to_vec(),
    };
    let seq = st.next_seq();
    st.lbs.insert(
        seq,
        id,
        LbRec {
            lb: lb.clone(),
            change: 0,
            changing: false,
            held: false,
        },
    );
    lb
}

fn create_lb(st: &mut State, now: Timestamp, req: &LoadBalancerCreate) -> Result<LoadBalancer> {
    // The operator's own load balancers (fixtures) are not the project's to count.
    if st.lbs.len().saturating_sub(st.fixtures.load_balancers) >= LOAD_BALANCERS_MAX {
        return Err(quota("POST /v2/lbaas/loadbalancers", "Load Balancer"));
    }
    let lb = new_lb(st, &req.name, &req.tags, false);
    let latency = st.config.latencies.lb_create;
    st.schedule_after(
        now,
        latency,
        SimEvent::Octavia(Event::Created(lb.id.clone())),
    );
    Ok(lb)
}

pub(crate) fn add_foreign(st: &mut State, name: &str) -> String {
    new_lb(st, name, &[], true).id
}

fn create_listener(st: &mut State, now: Timestamp, req: &ListenerCreate) -> Result<Listener> {
    const OP: &str = "POST /v2/lbaas/listeners";
    check_mutable(st, OP, &req.loadbalancer_id)?;
    if req.protocol_port == 0 {
        return Err(error(
            ErrorClass::Permanent,
            OP,
            400,
            "Validation failure: protocol_port must be between 1 and 65535.".into(),
        ));
    }
    if st
        .listeners
        .values()
        .any(|l| l.loadbalancer_id == req.loadbalancer_id && l.protocol_port == req.protocol_port)
    {
        return Err(duplicate(
            OP,
            format!(
                "Another Listener on this Load Balancer is already using protocol_port {}",
                req.protocol_port
            ),
        ));
    }
    if st.listeners.len() >= CHILDREN_MAX {
        return Err(quota(OP, "Listener"));
    }
    let listener = Listener {
        id: st.new_id(),
        name: req.name.clone(),
        loadbalancer_id: req.loadbalancer_id.clone(),
        protocol_port: req.protocol_port,
        provisioning_status: ProvisioningStatus::PendingCreate,
        tags: req.tags.clone(),
    };
    let seq = st.next_seq();
    st.listeners
        .insert(seq, listener.id.clone(), listener.clone());
    let latency = st.config.latencies.lb_update;
    let child = Child::Listener(listener.id.clone());
    begin_change(st, now, &req.loadbalancer_id, child, latency);
    Ok(listener)
}

fn create_pool(st: &mut State, now: Timestamp, req: &PoolCreate) -> Result<Pool> {
    const OP: &str = "POST /v2/lbaas/pools";
    let Some(listener) = st.listeners.get(&req.listener_id) else {
        return Err(not_found(OP, "Listener", &req.listener_id));
    };
    let lb_id = listener.loadbalancer_id.clone();
    check_mutable(st, OP, &lb_id)?;
    let taken = |p: &Pool| p.listener_id.as_deref() == Some(req.listener_id.as_str());
    if st.pools.values().any(taken) {
        return Err(duplicate(
            OP,
            "This listener already has a default pool".into(),
        ));
    }
    if st.pools.len() >= CHILDREN_MAX {
        return Err(quota(OP, "Pool"));
    }
    let pool = Pool {
        id: st.new_id(),
        name: req.name.clone(),
        loadbalancer_id: lb_id.clone(),
        listener_id: Some(req.listener_id.clone()),
        provisioning_status: ProvisioningStatus::PendingCreate,
        tags: req.tags.clone(),
    };
    let seq = st.next_seq();
    st.pools.insert(seq, pool.id.clone(), pool.clone());
    let latency = st.config.latencies.lb_update;
    begin_change(st, now, &lb_id, Child::Pool(pool.id.clone()), latency);
    Ok(pool)
}

/// The pool `pool_id` and its load balancer's id.
pub(crate) fn pool_lb(st: &State, op: &str, pool_id: &str) -> Result<String> {
    st.pools
        .get(pool_id)
        .map(|p| p.loadbalancer_id.clone())
        .ok_or_else(|| not_found(op, "Pool", pool_id))
}

fn create_health_monitor(
    st: &mut State,
    now: Timestamp,
    req: &HealthMonitorCreate,
) -> Result<HealthMonitor> {
    const OP: &str = "POST /v2/lbaas/healthmonitors";
    let lb_id = pool_lb(st, OP, &req.pool_id)?;
    check_mutable(st, OP, &lb_id)?;
    if st
        .health_monitors
        .values()
        .any(|h| h.pool_id == req.pool_id)
    {
        return Err(duplicate(
            OP,
            "This pool already has a health monitor".into(),
        ));
    }
    if st.health_monitors.len() >= CHILDREN_MAX {
        return Err(quota(OP, "Health Monitor"));
    }
    let hm = HealthMonitor {
        id: st.new_id(),
        name: req.name.clone(),
        pool_id: req.pool_id.clone(),
        kind: req.kind.clone(),
        provisioning_status: ProvisioningStatus::PendingCreate,
        tags: req.tags.clone(),
    };
    let seq = st.next_seq();
    st.health_monitors.insert(seq, hm.id.clone(), hm.clone());
    let latency = st.config.latencies.lb_update;
    begin_change(
        st,
        now,
        &lb_id,
        Child::HealthMonitor(hm.id.clone()),
        latency,
    );
    Ok(hm)
}

fn delete_cascade(st: &mut State, now: Timestamp, id: &str) -> Result<()> {
    const OP: &str = "DELETE /v2/lbaas/loadbalancers/{loadbalancer_id}";
    let Some(rec) = st.lbs.get_mut(id) else {
        return Err(not_found(OP, "Load Balancer", id));
    };
    if rec.lb.provisioning_status.is_pending() {
        return Err(error(
            ErrorClass::Conflict,
            OP,
            409,
            format!("Load Balancer {id} is immutable and cannot be updated."),
        ));
    }
    rec.lb.provisioning_status = ProvisioningStatus::PendingDelete;
    let latency = st.config.latencies.cascade_delete;
    st.schedule_after(
        now,
        latency,
        SimEvent::Octavia(Event::CascadeDone(id.into())),
    );
    Ok(())
}

pub(crate) fn apply(st: &mut State, t: Timestamp, event: Event) {
    match event {
        Event::Created(id) => {
            let Some(rec) = st.lbs.get_mut(&id) else {
                return;
            };
            if rec.lb.provisioning_status != ProvisioningStatus::PendingCreate {
                return;
            }
            // Without a VIP port there is no amphora to plug in: the build fails.
            let (prov, oper) = if rec.lb.vip_address.is_some() {
                (ProvisioningStatus::Active, OperatingStatus::Online)
            } else {
                (ProvisioningStatus::Error, OperatingStatus::Offline)
            };
            rec.lb.provisioning_status = prov;
            rec.lb.operating_status = oper;
        }
        Event::ChangeDone { lb, change, child } => {
            let Some(rec) = st.lbs.get_mut(&lb) else {
                return;
            };
            if rec.change != change
                || rec.lb.provisioning_status != ProvisioningStatus::PendingUpdate
            {
                return;
            }
            rec.changing = false;
            if !rec.held {
                rec.lb.provisioning_status = ProvisioningStatus::Active;
            }
            let activate = |s: &mut ProvisioningStatus| {
                if *s == ProvisioningStatus::PendingCreate {
                    *s = ProvisioningStatus::Active;
                }
            };
            match child {
                Child::Listener(id) => {
                    if let Some(l) = st.listeners.get_mut(&id) {
                        activate(&mut l.provisioning_status);
                    }
                }
                Child::Pool(id) => {
                    if let Some(p) = st.pools.get_mut(&id) {
                        activate(&mut p.provisioning_status);
                    }
                }
                Child::HealthMonitor(id) => {
                    if let Some(h) = st.health_monitors.get_mut(&id) {
                        activate(&mut h.provisioning_status);
                    }
                }
                Child::Member(id) => members::complete(st, t, &id),
                Child::Members(ids) => {
                    for id in ids {
                        members::complete(st, t, &id);
                    }
                }
            }
        }
        Event::MemberRelease { member, change } => {
            if st.members.get(&member).is_some_and(|m| m.change == change) {
                members::complete(st, t, &member);
            }
        }
        Event::CascadeDone(id) => {
            let Some(rec) = st.lbs.remove(&id) else {
                return;
            };
            if let Some(ip) = rec.lb.vip_address {
                st.addresses.release(ip);
            }
            let pools: BTreeSet<String> = st
                .pools
                .values()
                .filter(|p| p.loadbalancer_id == id)
                .map(|p| p.id.clone())
                .collect();
            remove_where(
                &mut st.members,
                |m| pools.contains(&m.member.pool_id),
                |m| &m.member.id,
            );
            remove_where(
                &mut st.health_monitors,
                |h| pools.contains(&h.pool_id),
                |h| &h.id,
            );
            remove_where(&mut st.pools, |p| pools.contains(&p.id), |p| &p.id);
            remove_where(&mut st.listeners, |l| l.loadbalancer_id == id, |l| &l.id);
        }
        // A threshold is reached: the member's health is derived again at this settle.
        Event::HealthCheck(id) => {
            let _ = st.members.get_mut(&id);
        }
    }
}

fn remove_where<T: crate::ids::Grouped>(
    table: &mut crate::ids::Table<T>,
    doomed: impl Fn(&T) -> bool,
    id: impl Fn(&T) -> &String,
) {
    let ids: Vec<String> = table
        .values()
        .filter(|v| doomed(v))
        .map(|v| id(v).clone())
        .collect();
    for i in ids {
        table.remove(&i);
    }
}

pub(crate) fn is_live(st: &State, event: &Event) -> bool {
    match event {
        Event::Created(id) => st
            .lbs
            .get(id)
            .is_some_and(|l| l.lb.provisioning_status == ProvisioningStatus::PendingCreate),
        Event::ChangeDone { lb, change, .. } => st.lbs.get(lb).is_some_and(|l| l.change == *change),
        Event::MemberRelease { member, change } => {
            st.members.get(member).is_some_and(|m| m.change == *change)
        }
        Event::CascadeDone(id) => st.lbs.contains(id),
        Event::HealthCheck(id) => st.members.contains(id),
    }
}

/// The objects of `table` tagged with `owner`'s UID, as `view` shows them.
fn owned<T: crate::ids::Grouped, V>(
    table: &crate::ids::Table<T>,
    owner: &Ownership,
    tags: impl Fn(&T) -> &[String],
    view: impl Fn(&T) -> V,
) -> Vec<V> {
    table
        .in_group(&owner.uid)
        .filter(|v| owner.owns(tags(v)))
        .map(view)
        .collect()
}

impl LoadBalancing for SimCloud {
    async fn list_load_balancers(&self, owner: &Ownership) -> Result<Vec<LoadBalancer>> {
        self.read(OCTAVIA, "GET /v2/lbaas/loadbalancers", |st, _| {
            Ok(owned(&st.lbs, owner, |l| &l.lb.tags, |l| l.lb.clone()))
        })
    }

    async fn list_listeners(&self, owner: &Ownership) -> Result<Vec<Listener>> {
        self.read(OCTAVIA, "GET /v2/lbaas/listeners", |st, _| {
            Ok(owned(&st.listeners, owner, |l| &l.tags, Clone::clone))
        })
    }

    async fn list_pools(&self, owner: &Ownership) -> Result<Vec<Pool>> {
        self.read(OCTAVIA, "GET /v2/lbaas/pools", |st, _| {
            Ok(owned(&st.pools, owner, |p| &p.tags, Clone::clone))
        })
    }

    async fn list_health_monitors(&self, owner: &Ownership) -> Result<Vec<HealthMonitor>> {
        self.read(OCTAVIA, "GET /v2/lbaas/healthmonitors", |st, _| {
            Ok(owned(&st.health_monitors, owner, |h| &h.tags, Clone::clone))
        })
    }

    async fn list_members(&self, pool_id: &str) -> Result<Vec<Member>> {
        const OP: &str = "GET /v2/lbaas/pools/{pool_id}/members";
        self.list(OCTAVIA, OP, pool_id, |st, _| {
            pool_lb(st, OP, pool_id)?;
            Ok(st
                .members
                .in_group(pool_id)
                .filter(|m| m.member.pool_id == pool_id)
                .map(|m| m.member.clone())
                .collect())
        })
    }

    async fn create_load_balancer(&self, req: &LoadBalancerCreate) -> Result<LoadBalancer> {
        self.create(
            OCTAVIA,
            "POST /v2/lbaas/loadbalancers",
            &req.tags,
            |st, now| create_lb(st, now, req),
        )
    }

    async fn create_listener(&self, req: &ListenerCreate) -> Result<Listener> {
        self.create(OCTAVIA, "POST /v2/lbaas/listeners", &req.tags, |st, now| {
            create_listener(st, now, req)
        })
    }

    async fn create_pool(&self, req: &PoolCreate) -> Result<Pool> {
        self.create(OCTAVIA, "POST /v2/lbaas/pools", &req.tags, |st, now| {
            create_pool(st, now, req)
        })
    }

    async fn create_health_monitor(&self, req: &HealthMonitorCreate) -> Result<HealthMonitor> {
        self.create(
            OCTAVIA,
            "POST /v2/lbaas/healthmonitors",
            &req.tags,
            |st, now| create_health_monitor(st, now, req),
        )
    }

    async fn create_member(&self, req: &MemberCreate) -> Result<Member> {
        let op = "POST /v2/lbaas/pools/{pool_id}/members";
        self.create(OCTAVIA, op, &req.tags, |st, now| {
            create_member(st, now, req)
        })
    }

    async fn add_members(&self, pool_id: &str, members: &[MemberCreate]) -> Result<()> {
        self.batch_members(pool_id, members, true).map(drop)
    }

    async fn delete_member(&self, pool_id: &str, member_id: &str) -> Result<()> {
        let op = "DELETE /v2/lbaas/pools/{pool_id}/members/{member_id}";
        self.change(OCTAVIA, op, MutationKind::Delete, member_id, |st, now| {
            delete_member(st, now, pool_id, member_id)
        })
    }

    async fn delete_load_balancer_cascade(&self, id: &str) -> Result<()> {
        let op = "DELETE /v2/lbaas/loadbalancers/{loadbalancer_id}";
        self.change(OCTAVIA, op, MutationKind::Delete, id, |st, now| {
            delete_cascade(st, now, id)
        })
    }
}

/// The simulated OpenStack has no VM templates: the default methods answer so. The
/// simulated OpenNebula is reached through its XML-RPC interface (`one::rpc`).
impl flightdeck_cloud::Templates for SimCloud {}
/// The simulated OpenStack has no KubeVirt: the default methods answer so. The simulated
/// Kubernetes API is reached through its own request interface.
impl flightdeck_cloud::VirtualMachines for SimCloud {}
/// See [`flightdeck_cloud::VirtualMachines`] above; bootstrap tokens go through the
/// simulated workload API's own request interface ([`crate::bootstrap`]).
impl flightdeck_cloud::GuestDrain for SimCloud {
    async fn create_bootstrap_token(
        &self,
        owner: &flightdeck_cloud::Ownership,
        token: &flightdeck_cloud::BootstrapTokenSecret,
    ) -> crate::Result<()> {
        self.token_call(owner, "POST", None, crate::bootstrap::token_object(token))
    }
    async fn set_bootstrap_token_expiration(
        &self,
        owner: &flightdeck_cloud::Ownership,
        id: &str,
        expiration: &str,
    ) -> crate::Result<()> {
        self.token_call(
            owner,
            "PATCH",
            Some(id),
            crate::bootstrap::expiration_patch(expiration),
        )
    }
    async fn delete_bootstrap_token(
        &self,
        owner: &flightdeck_cloud::Ownership,
        id: &str,
    ) -> crate::Result<()> {
        self.token_call(owner, "DELETE", Some(id), serde_json::Value::Null)
    }
}
