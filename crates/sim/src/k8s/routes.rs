//! Where a request goes: its query parameters, its path as a [`Route`], the operation
//! the call is counted under (a fixed set), what kind of mutation it is and the target
//! the mutation log names.

use std::collections::BTreeMap;

use serde_json::Value;

use super::discovery;
use super::store::{Kind, RESOURCES, Resource, labels_of, name_of, str_at};
use super::{INFRA_CLUSTER, KubeRequest, tags_of_labels};
use crate::{MutationKind, State};

/// The service calls are counted under.
pub(crate) const SERVICE: &str = "kubernetes";

/// Every operation calls are counted under: the set is fixed, so the counts stay
/// bounded whatever the paths.
const OPERATIONS: &[&str] = &[
    "GET namespaces",
    "WATCH namespaces",
    "POST namespaces",
    "PUT namespaces",
    "PATCH namespaces",
    "DELETE namespaces",
    "GET nodes",
    "WATCH nodes",
    "POST nodes",
    "PUT nodes",
    "PATCH nodes",
    "DELETE nodes",
    "GET pods",
    "WATCH pods",
    "POST pods",
    "PUT pods",
    "PATCH pods",
    "DELETE pods",
    "GET services",
    "WATCH services",
    "POST services",
    "PUT services",
    "PATCH services",
    "DELETE services",
    "GET secrets",
    "WATCH secrets",
    "POST secrets",
    "PUT secrets",
    "PATCH secrets",
    "DELETE secrets",
    "GET poddisruptionbudgets",
    "WATCH poddisruptionbudgets",
    "POST poddisruptionbudgets",
    "PUT poddisruptionbudgets",
    "PATCH poddisruptionbudgets",
    "DELETE poddisruptionbudgets",
    "GET daemonsets",
    "WATCH daemonsets",
    "POST daemonsets",
    "PUT daemonsets",
    "PATCH daemonsets",
    "DELETE daemonsets",
    "GET replicasets",
    "WATCH replicasets",
    "POST replicasets",
    "PUT replicasets",
    "PATCH replicasets",
    "DELETE replicasets",
    "GET virtualmachines",
    "WATCH virtualmachines",
    "POST virtualmachines",
    "PUT virtualmachines",
    "PATCH virtualmachines",
    "DELETE virtualmachines",
    "GET virtualmachineinstances",
    "WATCH virtualmachineinstances",
    "POST virtualmachineinstances",
    "PUT virtualmachineinstances",
    "PATCH virtualmachineinstances",
    "DELETE virtualmachineinstances",
    "POST pods/eviction",
    "GET discovery",
    "GET version",
];
const UNSUPPORTED: &str = "(unsupported)";

/// Where a request goes.
#[derive(Debug)]
pub(crate) enum Route {
    Version,
    Api,
    Apis,
    Group(String),
    Resources {
        group: String,
        version: String,
    },
    Collection {
        res: &'static Resource,
        version: String,
        ns: Option<String>,
        watch: bool,
    },
    Object {
        res: &'static Resource,
        version: String,
        ns: Option<String>,
        name: String,
        sub: Option<String>,
        watch: bool,
    },
    NotFound,
}

/// The decoded query parameters.
pub(crate) fn query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .take(64)
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Percent-decoding (and `+` as space), as form-encoded query strings need.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes.get(i) {
            Some(b'+') => out.push(b' '),
            Some(b'%') => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            Some(b) => out.push(*b),
            None => {}
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn is_watch(params: &BTreeMap<String, String>) -> bool {
    params
        .get("watch")
        .is_some_and(|w| matches!(w.as_str(), "true" | "1"))
}

/// Whether `route` is a watch.
pub(crate) fn watches(route: &Route) -> bool {
    matches!(
        route,
        Route::Collection { watch: true, .. } | Route::Object { watch: true, .. }
    )
}

/// Parses the request's path.
pub(crate) fn route(cluster: &str, req: &KubeRequest) -> Route {
    let infra = cluster == INFRA_CLUSTER;
    let segs: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
    let watch = is_watch(&query(&req.query));
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["api"] => Route::Api,
        ["apis"] => Route::Apis,
        ["api", "v1"] => Route::Resources {
            group: String::new(),
            version: "v1".into(),
        },
        ["apis", g] => Route::Group((*g).to_string()),
        ["apis", g, v] => Route::Resources {
            group: (*g).to_string(),
            version: (*v).to_string(),
        },
        ["api", "v1", rest @ ..] => resource_route(infra, "", "v1", rest, watch),
        ["apis", g, v, rest @ ..] => resource_route(infra, g, v, rest, watch),
        _ => Route::NotFound,
    }
}

fn resource_route(infra: bool, group: &str, version: &str, rest: &[&str], watch: bool) -> Route {
    if !discovery::serves(infra, group, version) {
        return Route::NotFound;
    }
    let (rest, watch) = match rest {
        ["watch", rest @ ..] => (rest, true),
        _ => (rest, watch),
    };
    let find = |plural: &str| {
        RESOURCES.iter().find(|r| {
            r.plural == plural
                && r.group == group
                && r.versions.contains(&version)
                && (infra || !r.infra_only)
        })
    };
    let (ns, rest) = match rest {
        ["namespaces", ns, plural, rest @ ..] if find(plural).is_some_and(|r| r.namespaced) => {
            (Some((*ns).to_string()), [&[*plural][..], rest].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let Some(res) = rest.first().and_then(|p| find(p)) else {
        return Route::NotFound;
    };
    if ns.is_some() != res.namespaced && rest.len() > 1 {
        return Route::NotFound;
    }
    let version = version.to_string();
    match rest.as_slice() {
        [_] => Route::Collection {
            res,
            version,
            ns,
            watch,
        },
        [_, name] | [_, name, _] => Route::Object {
            res,
            version,
            ns,
            name: (*name).to_string(),
            sub: rest.get(2).map(|s| (*s).to_string()),
            watch,
        },
        _ => Route::NotFound,
    }
}

/// The operation a call is counted under.
pub(crate) fn operation(method: &str, route: &Route) -> &'static str {
    let method = method.to_ascii_uppercase();
    let wanted = match route {
        Route::Version if method == "GET" => "GET version".to_string(),
        Route::Api | Route::Apis | Route::Group(_) | Route::Resources { .. } if method == "GET" => {
            "GET discovery".to_string()
        }
        Route::Collection { res, watch, .. } | Route::Object { res, watch, .. } => {
            let sub = match route {
                Route::Object { sub, .. } => sub.as_deref(),
                _ => None,
            };
            match (method.as_str(), sub) {
                ("POST", Some("eviction")) if res.kind == Kind::Pod => "POST pods/eviction".into(),
                ("GET", _) if *watch => format!("WATCH {}", res.plural),
                (m, _) => format!("{m} {}", res.plural),
            }
        }
        _ => String::new(),
    };
    OPERATIONS
        .iter()
        .find(|op| **op == wanted)
        .copied()
        .unwrap_or(UNSUPPORTED)
}

/// What a mutating method does, `None` for reads.
pub(crate) fn mutation_kind(method: &str, route: &Route) -> Option<MutationKind> {
    match method.to_ascii_uppercase().as_str() {
        "POST" => match route {
            Route::Object { sub, .. } if sub.as_deref() == Some("eviction") => {
                Some(MutationKind::Delete)
            }
            _ => Some(MutationKind::Create),
        },
        "PUT" | "PATCH" => Some(MutationKind::Update),
        "DELETE" => Some(MutationKind::Delete),
        _ => None,
    }
}

/// A call's target as the mutation log names it.
pub(crate) struct Target {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) tags: Vec<String>,
}

/// The target of a call on `route`: the object it names (or `created`).
pub(crate) fn target(st: &State, cluster: &str, route: &Route, created: Option<&Value>) -> Target {
    let (res, ns, name) = match (route, created) {
        (Route::Collection { res, ns, .. } | Route::Object { res, ns, .. }, Some(obj)) => (
            *res,
            ns.clone().unwrap_or_default(),
            name_of(obj).to_string(),
        ),
        (Route::Object { res, ns, name, .. }, None) => {
            (*res, ns.clone().unwrap_or_default(), name.clone())
        }
        _ => {
            return Target {
                id: String::new(),
                name: String::new(),
                tags: Vec::new(),
            };
        }
    };
    // VMs and VMIs are named without their namespace (`infra/vmi/<name>`): flightdeck
    // keeps its VMs in one namespace.
    let id = if res.namespaced && !matches!(res.kind, Kind::Vm | Kind::Vmi) {
        format!("{cluster}/{}/{ns}/{name}", res.target)
    } else {
        format!("{cluster}/{}/{name}", res.target)
    };
    let stored = st
        .kube
        .store(cluster)
        .and_then(|s| s.get(res.kind, &ns, &name));
    let obj = created.or(stored);
    let workload = st.kube.workloads.get(cluster);
    let node_tags = |w: &super::Workload, node: &str| {
        if w.cloud {
            super::machines::node_machine_tags(st, cluster, node)
        } else {
            w.node_tags.get(node).cloned().unwrap_or_default()
        }
    };
    let tags = match (res.kind, workload, obj) {
        (Kind::Node, Some(w), _) => node_tags(w, &name),
        (Kind::Pod, Some(w), Some(pod)) => str_at(pod, &["spec", "nodeName"])
            .map(|n| node_tags(w, n))
            .unwrap_or_default(),
        (_, _, Some(obj)) => tags_of_labels(&labels_of(obj)),
        _ => Vec::new(),
    };
    Target { id, name, tags }
}

/// The version segment of a resource path.
pub(crate) fn route_version(req: &KubeRequest) -> Option<String> {
    let segs: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["api", v, ..] | ["apis", _, v, ..] => Some((*v).to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_percent_decoded() {
        let q = query("fieldSelector=spec.nodeName%3Dnode-1&labelSelector=a+b");
        assert_eq!(
            q.get("fieldSelector").map(String::as_str),
            Some("spec.nodeName=node-1")
        );
        assert_eq!(q.get("labelSelector").map(String::as_str), Some("a b"));
        assert_eq!(decode("%zz%4"), "%zz%4");
    }
}
