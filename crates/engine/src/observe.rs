//! Observation: what the cloud has for one cluster, one list per resource kind.

use flightdeck_cloud::ownership::role_of;
use flightdeck_cloud::{CloudError, Observed, Ownership, Provider, Role, Timestamp};

/// Lists every owned object of the cluster. Members are listed per pool (Octavia has no
/// cross-pool member list), and only for the cluster's own API pool.
pub async fn observe<P: Provider>(
    provider: &P,
    owner: &Ownership,
    now: Timestamp,
) -> Result<Observed, CloudError> {
    let servers = provider.list_servers(owner).await?;
    let security_groups = provider.list_security_groups(owner).await?;
    let load_balancers = provider.list_load_balancers(owner).await?;
    let (listeners, pools, health_monitors) = if load_balancers.is_empty() {
        // Children cannot exist without a load balancer: skip three calls.
        (Vec::new(), Vec::new(), Vec::new())
    } else {
        (
            provider.list_listeners(owner).await?,
            provider.list_pools(owner).await?,
            provider.list_health_monitors(owner).await?,
        )
    };
    let mut members = Vec::new();
    for pool in pools
        .iter()
        .filter(|p| role_of(&p.tags) == Some(Role::ApiPool) && owner.owns(&p.tags))
    {
        members.extend(provider.list_members(&pool.id).await?);
    }
    let nodes = if members.is_empty() {
        // No member, no API endpoint: the workload cluster cannot be reached.
        None
    } else {
        provider.list_nodes(owner).await?
    };
    Ok(Observed {
        at: now,
        after_write: 0,
        servers,
        security_groups,
        load_balancers,
        listeners,
        pools,
        health_monitors,
        members,
        nodes,
    })
}
