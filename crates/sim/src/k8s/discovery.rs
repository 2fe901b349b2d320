//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}` and
//! `/apis/{group}/{version}`, as kubectl reads them to build its REST mapping and to
//! find the Eviction subresource (`pods/eviction`, group `policy`).
//!
//! The servers are Kubernetes 1.24, the last release that serves both `policy/v1` and
//! `policy/v1beta1` (kubectl 1.20 evicts through v1beta1).

use serde_json::{Value, json};

use super::objects::KUBE_VERSION;
use super::store::{RESOURCES, Resource};

const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// The groups a cluster serves (the core group excluded), with their versions,
/// preferred first.
fn groups(infra: bool) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut groups: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| infra || !r.infra_only) {
        if r.group.is_empty() {
            continue;
        }
        match groups.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) => {
                for v in r.versions {
                    if !versions.contains(v) {
                        versions.push(v);
                    }
                }
            }
            None => groups.push((r.group, r.versions.to_vec())),
        }
    }
    groups
}

/// Whether `group/version` is served by the cluster.
pub(crate) fn serves(infra: bool, group: &str, version: &str) -> bool {
    if group.is_empty() {
        return version == "v1";
    }
    groups(infra)
        .iter()
        .any(|(g, vs)| *g == group && vs.contains(&version))
}

pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "24",
        "gitVersion": KUBE_VERSION,
        "gitCommit": "a1de1b4c2c3e7d4b5d3b2f2b0e4b1f0e2c9c9d6a",
        "gitTreeState": "clean",
        "buildDate": "2023-08-23T17:00:00Z",
        "goVersion": "go1.20.7",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub(crate) fn api_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.96.0.1:6443"}],
    })
}

fn group_object(group: &str, versions: &[&str]) -> Value {
    let gv = |v: &str| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "name": group,
        "versions": versions.iter().map(|v| gv(v)).collect::<Vec<_>>(),
        "preferredVersion": gv(versions.first().copied().unwrap_or("v1")),
    })
}

pub(crate) fn group_list(infra: bool) -> Value {
    let groups: Vec<Value> = groups(infra)
        .iter()
        .map(|(g, vs)| group_object(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn group(infra: bool, name: &str) -> Option<Value> {
    groups(infra)
        .iter()
        .find(|(g, _)| *g == name)
        .map(|(g, vs)| {
            let mut o = group_object(g, vs);
            if let Value::Object(m) = &mut o {
                m.insert("kind".into(), json!("APIGroup"));
                m.insert("apiVersion".into(), json!("v1"));
            }
            o
        })
}

fn resource_entry(r: &Resource) -> Value {
    json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind_name,
        "verbs": VERBS,
        "shortNames": r.short_names,
    })
}

/// The APIResourceList of `group/version` (`""` is the core group), if served.
pub(crate) fn resources(infra: bool, group: &str, version: &str) -> Option<Value> {
    if !serves(infra, group, version) {
        return None;
    }
    let mut list = Vec::new();
    for r in RESOURCES
        .iter()
        .filter(|r| (infra || !r.infra_only) && r.group == group && r.versions.contains(&version))
    {
        list.push(resource_entry(r));
        if matches!(
            r.plural,
            "pods" | "nodes" | "virtualmachineinstances" | "virtualmachines"
        ) {
            list.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind_name,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if r.plural == "pods" {
            list.push(json!({
                "name": "pods/eviction",
                "singularName": "",
                "namespaced": true,
                "group": "policy",
                "version": "v1",
                "kind": "Eviction",
                "verbs": ["create"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": list,
    }))
}
