//! The scenarios and examples shipped with flightdeck, embedded in the binary so that
//! `flightdeck sim run NAME` works from any directory.

/// Every embedded file, by its path in the repository.
pub const FILES: &[(&str, &str)] = &[
    (
        "examples/openstack.yaml",
        include_str!("../../../examples/openstack.yaml"),
    ),
    (
        "examples/two-clusters.yaml",
        include_str!("../../../examples/two-clusters.yaml"),
    ),
    (
        "scenarios/seed-001-member-stuck-pending.yaml",
        include_str!("../../../scenarios/seed-001-member-stuck-pending.yaml"),
    ),
    (
        "scenarios/member-offline-during-upgrade.yaml",
        include_str!("../../../scenarios/member-offline-during-upgrade.yaml"),
    ),
    (
        "scenarios/lifecycle.yaml",
        include_str!("../../../scenarios/lifecycle.yaml"),
    ),
    (
        "scenarios/api-faults.yaml",
        include_str!("../../../scenarios/api-faults.yaml"),
    ),
    (
        "scenarios/f3-unregistered-workers.yaml",
        include_str!("../../../scenarios/f3-unregistered-workers.yaml"),
    ),
    (
        "scenarios/f4-rule-lost.yaml",
        include_str!("../../../scenarios/f4-rule-lost.yaml"),
    ),
    (
        "scenarios/f5-dropped-security-group.yaml",
        include_str!("../../../scenarios/f5-dropped-security-group.yaml"),
    ),
    (
        "scenarios/f6-errored-servers.yaml",
        include_str!("../../../scenarios/f6-errored-servers.yaml"),
    ),
    (
        "scenarios/f7-stale-routes.yaml",
        include_str!("../../../scenarios/f7-stale-routes.yaml"),
    ),
    (
        "scenarios/f8-route-limit.yaml",
        include_str!("../../../scenarios/f8-route-limit.yaml"),
    ),
    (
        "scenarios/f3-outage-at-birth.yaml",
        include_str!("../../../scenarios/f3-outage-at-birth.yaml"),
    ),
    (
        "scenarios/f3-never-registered-at-birth.yaml",
        include_str!("../../../scenarios/f3-never-registered-at-birth.yaml"),
    ),
    (
        "scenarios/f11-pool-repairs-not-a-loop.yaml",
        include_str!("../../../scenarios/f11-pool-repairs-not-a-loop.yaml"),
    ),
    (
        "scenarios/f6-boot-failures-backoff.yaml",
        include_str!("../../../scenarios/f6-boot-failures-backoff.yaml"),
    ),
    (
        "scenarios/f8-router-takes-more.yaml",
        include_str!("../../../scenarios/f8-router-takes-more.yaml"),
    ),
    (
        "scenarios/f10-empty-node-list.yaml",
        include_str!("../../../scenarios/f10-empty-node-list.yaml"),
    ),
    (
        "scenarios/f10-all-not-ready.yaml",
        include_str!("../../../scenarios/f10-all-not-ready.yaml"),
    ),
    (
        "scenarios/f11-churn-breaker.yaml",
        include_str!("../../../scenarios/f11-churn-breaker.yaml"),
    ),
    (
        "examples/opennebula.yaml",
        include_str!("../../../examples/opennebula.yaml"),
    ),
    (
        "examples/opennebula-twins.yaml",
        include_str!("../../../examples/opennebula-twins.yaml"),
    ),
    (
        "examples/opennebula-bigger-masters.yaml",
        include_str!("../../../examples/opennebula-bigger-masters.yaml"),
    ),
    (
        "scenarios/f1-shared-templates.yaml",
        include_str!("../../../scenarios/f1-shared-templates.yaml"),
    ),
    (
        "scenarios/f1-manage-lock.yaml",
        include_str!("../../../scenarios/f1-manage-lock.yaml"),
    ),
    (
        "scenarios/f1-use-lock.yaml",
        include_str!("../../../scenarios/f1-use-lock.yaml"),
    ),
    (
        "scenarios/opennebula-lifecycle.yaml",
        include_str!("../../../scenarios/opennebula-lifecycle.yaml"),
    ),
    (
        "examples/kubevirt.yaml",
        include_str!("../../../examples/kubevirt.yaml"),
    ),
    (
        "scenarios/f9-drain-pdb-blocks.yaml",
        include_str!("../../../scenarios/f9-drain-pdb-blocks.yaml"),
    ),
    (
        "scenarios/f9-drain-deadline.yaml",
        include_str!("../../../scenarios/f9-drain-deadline.yaml"),
    ),
    (
        "scenarios/f9-drain-restart.yaml",
        include_str!("../../../scenarios/f9-drain-restart.yaml"),
    ),
    (
        "scenarios/f9-guest-names-differ.yaml",
        include_str!("../../../scenarios/f9-guest-names-differ.yaml"),
    ),
    (
        "scenarios/f9-live-migrate.yaml",
        include_str!("../../../scenarios/f9-live-migrate.yaml"),
    ),
    (
        "scenarios/f9-vmi-already-deleting.yaml",
        include_str!("../../../scenarios/f9-vmi-already-deleting.yaml"),
    ),
    (
        "scenarios/operator-deletes-machines.yaml",
        include_str!("../../../scenarios/operator-deletes-machines.yaml"),
    ),
    (
        "scenarios/f12-tag-filter-ignored.yaml",
        include_str!("../../../scenarios/f12-tag-filter-ignored.yaml"),
    ),
    (
        "scenarios/server-goes-error.yaml",
        include_str!("../../../scenarios/server-goes-error.yaml"),
    ),
    (
        "scenarios/octavia-pending-update.yaml",
        include_str!("../../../scenarios/octavia-pending-update.yaml"),
    ),
    (
        "scenarios/member-stuck-deleting.yaml",
        include_str!("../../../scenarios/member-stuck-deleting.yaml"),
    ),
    (
        "scenarios/api-rate-limited.yaml",
        include_str!("../../../scenarios/api-rate-limited.yaml"),
    ),
    (
        "scenarios/keystone-revoked-then-down.yaml",
        include_str!("../../../scenarios/keystone-revoked-then-down.yaml"),
    ),
    (
        "scenarios/opennebula-vm-terminated.yaml",
        include_str!("../../../scenarios/opennebula-vm-terminated.yaml"),
    ),
    (
        "scenarios/kubevirt-vm-deleted.yaml",
        include_str!("../../../scenarios/kubevirt-vm-deleted.yaml"),
    ),
    (
        "scenarios/f7-shared-router.yaml",
        include_str!("../../../scenarios/f7-shared-router.yaml"),
    ),
    (
        "scenarios/f9-deadline-keeps-quorum.yaml",
        include_str!("../../../scenarios/f9-deadline-keeps-quorum.yaml"),
    ),
    (
        "scenarios/f11-rules-keep-vanishing.yaml",
        include_str!("../../../scenarios/f11-rules-keep-vanishing.yaml"),
    ),
    (
        "scenarios/clusters/demo-no-monitor.yaml",
        include_str!("../../../scenarios/clusters/demo-no-monitor.yaml"),
    ),
    (
        "scenarios/clusters/neighbour.yaml",
        include_str!("../../../scenarios/clusters/neighbour.yaml"),
    ),
    (
        "scenarios/clusters/squatter.yaml",
        include_str!("../../../scenarios/clusters/squatter.yaml"),
    ),
];

/// Names of the built-in scenarios, in order.
pub fn scenario_names() -> Vec<&'static str> {
    FILES
        .iter()
        .filter_map(|(path, _)| path.strip_prefix("scenarios/")?.strip_suffix(".yaml"))
        // Cluster files that scenarios apply are not scenarios.
        .filter(|name| !name.contains('/'))
        .collect()
}

/// The embedded file at `path` (repository-relative, `..` resolved).
pub fn file(path: &str) -> Option<&'static str> {
    FILES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
}

/// Resolves `rel` against the directory of `base`, both repository-relative.
pub fn join(base: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = base.split('/').collect();
    parts.pop();
    for seg in rel.split('/') {
        match seg {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    parts.join("/")
}
