//! Helpers shared by the simulator's behaviour tests.
#![allow(dead_code)]

use std::future::Future;
use std::net::IpAddr;

use flightdeck_cloud::{
    Clock, Compute, HealthMonitorCreate, ListenerCreate, LoadBalancer, LoadBalancerCreate,
    LoadBalancing, MemberCreate, Ownership, PoolCreate, ProvisioningStatus, Role, Server,
    ServerCreate, SimClock, Timestamp,
};
use flightdeck_sim::{SimCloud, SimConfig, poll_ready};
use flightdeck_spec::Duration;

pub fn sim(seed: u64) -> SimCloud {
    sim_with(SimConfig::default(), seed)
}

/// A simulator whose clusters run a cloud controller manager: a Node goes 2 to 5 s after
/// its server or VM (by default it stays until someone deletes it).
pub fn sim_with_node_controller(seed: u64) -> SimCloud {
    sim_with(
        SimConfig {
            node_controller: true,
            ..SimConfig::default()
        },
        seed,
    )
}

pub fn sim_with(config: SimConfig, seed: u64) -> SimCloud {
    SimCloud::new(config, seed, SimClock::new(Timestamp::SIM_EPOCH))
}

/// The output of a simulator future, which is always ready.
pub fn ready<F: Future>(f: F) -> F::Output {
    poll_ready(f).expect("simulator futures are ready on first poll")
}

pub fn owner(uid: &str) -> Ownership {
    Ownership {
        cluster: "demo".into(),
        uid: uid.into(),
    }
}

pub fn now(sim: &SimCloud) -> Timestamp {
    sim.clock().now()
}

/// Moves virtual time on by `ms` and lets the cloud catch up.
pub fn wait_ms(sim: &SimCloud, ms: u64) {
    sim.clock().advance(Duration::from_millis(ms));
    sim.advance();
}

/// Moves virtual time to `t` and lets the cloud catch up.
pub fn wait_until(sim: &SimCloud, t: Timestamp) {
    sim.clock().advance_to(t);
    sim.advance();
}

/// Steps from transition to transition until `done` holds (at most 10 000 steps).
pub fn wait_for(sim: &SimCloud, mut done: impl FnMut(&SimCloud) -> bool) {
    for _ in 0..10_000 {
        if done(sim) {
            return;
        }
        let Some(t) = sim.next_transition_at() else {
            break;
        };
        wait_until(sim, t);
    }
    assert!(done(sim), "condition never held");
}

pub fn server_req(name: &str, o: &Ownership, groups: &[&str]) -> ServerCreate {
    ServerCreate {
        name: name.into(),
        flavor: "m1.small".into(),
        image: "ubuntu".into(),
        network: "net".into(),
        security_groups: groups.iter().map(|g| g.to_string()).collect(),
        tags: o.tags(&Role::Machine(name.into())),
        eviction_strategy: None,
        user_data: None,
    }
}

pub fn server(sim: &SimCloud, id: &str) -> Option<Server> {
    sim.snapshot()
        .servers
        .iter()
        .find(|s| s.id == id)
        .map(|s| Server::clone(s))
}

pub fn lb(sim: &SimCloud, id: &str) -> Option<LoadBalancer> {
    sim.snapshot()
        .load_balancers
        .into_iter()
        .find(|l| l.id == id)
}

pub fn lb_status(sim: &SimCloud, id: &str) -> Option<ProvisioningStatus> {
    lb(sim, id).map(|l| l.provisioning_status)
}

pub fn wait_lb_active(sim: &SimCloud, id: &str) {
    wait_for(sim, |s| {
        lb_status(s, id) == Some(ProvisioningStatus::Active)
    });
}

/// An API load balancer with listener and pool (and a health monitor if asked), each
/// change waited out; answers (load balancer id, pool id).
pub fn api_lb(sim: &SimCloud, o: &Ownership, monitored: bool) -> (String, String) {
    let lb = ready(sim.create_load_balancer(&LoadBalancerCreate {
        name: "api".into(),
        vip_subnet: "subnet".into(),
        tags: o.tags(&Role::ApiLoadBalancer),
    }))
    .expect("lb create");
    wait_lb_active(sim, &lb.id);
    let listener = ready(sim.create_listener(&ListenerCreate {
        name: "api".into(),
        loadbalancer_id: lb.id.clone(),
        protocol_port: 6443,
        tags: o.tags(&Role::ApiListener),
    }))
    .expect("listener create");
    wait_lb_active(sim, &lb.id);
    let pool = ready(sim.create_pool(&PoolCreate {
        name: "api".into(),
        listener_id: listener.id,
        tags: o.tags(&Role::ApiPool),
    }))
    .expect("pool create");
    wait_lb_active(sim, &lb.id);
    if monitored {
        ready(sim.create_health_monitor(&HealthMonitorCreate {
            name: "api".into(),
            pool_id: pool.id.clone(),
            kind: "TCP".into(),
            delay_s: 5,
            timeout_s: 3,
            max_retries: 3,
            tags: o.tags(&Role::ApiHealthMonitor),
        }))
        .expect("health monitor create");
        wait_lb_active(sim, &lb.id);
    }
    (lb.id, pool.id)
}

pub fn member_req(pool_id: &str, name: &str, address: IpAddr, o: &Ownership) -> MemberCreate {
    MemberCreate {
        name: name.into(),
        pool_id: pool_id.into(),
        address,
        protocol_port: 6443,
        tags: o.tags(&Role::Machine(name.into())),
    }
}

/// A server of `o`, waited until ACTIVE; answers (id, address).
pub fn active_server(sim: &SimCloud, o: &Ownership, name: &str) -> (String, IpAddr) {
    let s = ready(sim.create_server(&server_req(name, o, &[]))).expect("server create");
    wait_for(sim, |sim| {
        server(sim, &s.id).is_some_and(|s| s.address.is_some())
    });
    let address = server(sim, &s.id)
        .and_then(|s| s.address)
        .expect("active server has an address");
    (s.id, address)
}

/// The owner of cluster `name` with UID `uid`.
pub fn cluster_owner(name: &str, uid: &str) -> Ownership {
    Ownership {
        cluster: name.into(),
        uid: uid.into(),
    }
}

/// The node of server `server_id` as the ground truth has it.
pub fn node(sim: &SimCloud, server_id: &str) -> Option<flightdeck_cloud::Node> {
    sim.snapshot()
        .nodes
        .into_iter()
        .map(|(_, n)| n)
        .find(|n| n.server_id.as_deref() == Some(server_id))
}

/// A cluster whose API answers: a load balancer (unmonitored) serving from one control-
/// plane server with a Ready node. Answers the server's id.
pub fn reachable_cluster(sim: &SimCloud, o: &Ownership) -> String {
    let (lb, pool) = api_lb(sim, o, false);
    let (sid, addr) = active_server(sim, o, &format!("{}-cp-1", o.cluster));
    ready(sim.create_member(&member_req(&pool, "cp-1", addr, o))).expect("member");
    wait_lb_active(sim, &lb);
    wait_for(sim, |sim| {
        ready(flightdeck_cloud::GuestCluster::list_nodes(sim, o))
            .expect("call")
            .is_some()
    });
    sid
}
