//! The request level: paths and verbs, create/replace/patch/delete with the API
//! server's preconditions, and `Status` bodies with the reasons and codes the real API
//! server gives. Lists and watches are [`super::read`]'s.
//!
//! There are no Table responses: the request carries no `Accept` header, and kubectl
//! prints plain lists itself.

use std::collections::BTreeMap;

use flightdeck_cloud::Timestamp;
use serde_json::{Value, json};

use super::discovery;
use super::eviction;
use super::kubevirt;
use super::patch;
use super::read::{api_version_of, read_list};
use super::store::{Kind, RESOURCES, Resource, at, labels_of, name_of, obj_at, set_at, str_at};
use super::workload;
use super::{INFRA_CLUSTER, KUBE_BODY_MAX, KUBE_OBJECTS_MAX, KubeRequest, KubeResponse};
use super::{tags_of_labels, uid_of};
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

/// An answer, and the object the call created, changed or removed (for the log).
pub(crate) type Answer = (KubeResponse, Option<Value>);

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
    let tags = match (res.kind, workload, obj) {
        (Kind::Node, Some(w), _) => w.node_tags.get(&name).cloned().unwrap_or_default(),
        (Kind::Pod, Some(w), Some(pod)) => str_at(pod, &["spec", "nodeName"])
            .and_then(|n| w.node_tags.get(n))
            .cloned()
            .unwrap_or_default(),
        (_, _, Some(obj)) => tags_of_labels(&labels_of(obj)),
        _ => Vec::new(),
    };
    Target {
        id,
        name: if name.is_empty() { String::new() } else { name },
        tags,
    }
}

pub(crate) fn json_response(status: u16, body: &Value) -> KubeResponse {
    KubeResponse {
        status,
        content_type: "application/json".into(),
        body: serde_json::to_vec(body).unwrap_or_default(),
    }
}

/// A 200 whose JSON body is already serialized.
pub(crate) fn served_response(body: impl Into<Vec<u8>>) -> KubeResponse {
    KubeResponse {
        status: 200,
        content_type: "application/json".into(),
        body: body.into(),
    }
}

/// A `Status` body: `Success` below 400, otherwise `Failure` with `reason`.
pub(crate) fn status_response(
    code: u16,
    reason: &str,
    message: &str,
    details: Option<Value>,
) -> KubeResponse {
    let mut body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "code": code});
    let m = obj_at(&mut body, &[]);
    if code < 400 {
        m.insert("status".into(), json!("Success"));
    } else {
        m.insert("status".into(), json!("Failure"));
        m.insert("message".into(), json!(message));
        m.insert("reason".into(), json!(reason));
    }
    if let Some(d) = details {
        m.insert("details".into(), d);
    }
    json_response(code, &body)
}

/// A call an API fault refused, as the API server answers it: 429 TooManyRequests
/// with `retryAfterSeconds` (its `Retry-After` header carries the same), else 503.
pub(crate) fn refused(e: &flightdeck_cloud::CloudError) -> KubeResponse {
    match e.class {
        flightdeck_cloud::ErrorClass::RateLimited(after) => {
            let secs = after.map_or(1, |d| d.as_millis().div_ceil(1000).max(1));
            status_response(
                429,
                "TooManyRequests",
                &e.message,
                Some(json!({"retryAfterSeconds": secs})),
            )
        }
        _ => status_response(503, "ServiceUnavailable", &e.message, None),
    }
}

pub(crate) fn fail(code: u16, reason: &str, message: &str) -> Answer {
    fail_with(code, reason, message, None)
}

pub(crate) fn fail_with(code: u16, reason: &str, message: &str, details: Option<Value>) -> Answer {
    (status_response(code, reason, message, details), None)
}

/// `pods "x"` as error messages name objects (`poddisruptionbudgets.policy "web"`).
fn qualified(kind: Kind) -> String {
    let r = kind.resource();
    if r.group.is_empty() {
        r.plural.to_string()
    } else {
        format!("{}.{}", r.plural, r.group)
    }
}

fn details(kind: Kind, name: &str) -> Value {
    let r = kind.resource();
    json!({"name": name, "group": r.group, "kind": r.plural})
}

pub(crate) fn not_found(kind: Kind, name: &str) -> Answer {
    fail_with(
        404,
        "NotFound",
        &format!("{} \"{name}\" not found", qualified(kind)),
        Some(details(kind, name)),
    )
}

pub(crate) fn unavailable() -> Answer {
    fail(
        503,
        "ServiceUnavailable",
        "the server is currently unable to handle the request",
    )
}

fn method_not_allowed() -> Answer {
    fail(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}

fn conflict(kind: Kind, name: &str) -> Answer {
    fail_with(
        409,
        "Conflict",
        &format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            qualified(kind)
        ),
        Some(details(kind, name)),
    )
}

fn invalid(kind: Kind, name: &str, field: &str, detail: &str) -> Answer {
    fail_with(
        422,
        "Invalid",
        &format!(
            "{} \"{name}\" is invalid: {field}: {detail}",
            kind.resource().kind_name
        ),
        Some(
            json!({"name": name, "group": kind.resource().group, "kind": kind.resource().kind_name,
            "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": field}]}),
        ),
    )
}

/// `obj` as answered for `version` of its group.
fn present(mut obj: Value, res: &Resource, version: &str) -> Value {
    let api_version = api_version_of(res, version);
    if let Value::Object(m) = &mut obj {
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(res.kind_name));
    }
    obj
}

/// Answers one request. The caller has counted it and applied API faults.
pub(crate) fn handle(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    req: &KubeRequest,
    route: &Route,
) -> Answer {
    if req.body.len() > KUBE_BODY_MAX {
        return fail(
            413,
            "RequestEntityTooLarge",
            &format!("Request entity too large: limit is {KUBE_BODY_MAX}"),
        );
    }
    let infra = cluster == INFRA_CLUSTER;
    if !infra && !st.kube.workloads.get(cluster).is_some_and(|w| w.up) {
        return unavailable();
    }
    let method = req.method.to_ascii_uppercase();
    let params = query(&req.query);
    let discovery_doc = match route {
        Route::Version => Some(Some(discovery::version())),
        Route::Api => Some(Some(discovery::api_versions())),
        Route::Apis => Some(Some(discovery::group_list(infra))),
        Route::Group(g) => Some(discovery::group(infra, g)),
        Route::Resources { group, version } => Some(discovery::resources(infra, group, version)),
        _ => None,
    };
    if let Some(doc) = discovery_doc {
        return match (method.as_str(), doc) {
            ("GET", Some(doc)) => (json_response(200, &doc), None),
            ("GET", None) => page_not_found(),
            _ => method_not_allowed(),
        };
    }
    match (route, method.as_str()) {
        (
            Route::Collection {
                res, version, ns, ..
            },
            "GET",
        ) => {
            let watch = is_watch(&params);
            read_list(
                st,
                cluster,
                res,
                version,
                ns.as_deref(),
                &params,
                None,
                watch,
            )
        }
        (Route::Collection { res, ns, .. }, "POST") => match ns {
            Some(ns) => create(st, now, cluster, req, res, ns),
            None if !res.namespaced => create(st, now, cluster, req, res, ""),
            None => method_not_allowed(),
        },
        (Route::Object { res, sub: None, .. }, "POST") if res.kind != Kind::Pod => {
            method_not_allowed()
        }
        (
            Route::Object {
                res,
                ns,
                name,
                sub: Some(sub),
                ..
            },
            "POST",
        ) if res.kind == Kind::Pod && sub == "eviction" => {
            let ns = ns.as_deref().unwrap_or("");
            eviction::evict(st, now, cluster, ns, name, &req.body)
        }
        (Route::Object { sub: Some(sub), .. }, _) if sub != "status" => page_not_found(),
        (
            Route::Object {
                res,
                version,
                ns,
                name,
                watch,
                ..
            },
            "GET",
        ) => {
            let ns = ns.as_deref().unwrap_or("");
            if *watch || is_watch(&params) {
                let ns = res.namespaced.then_some(ns);
                return read_list(st, cluster, res, version, ns, &params, Some(name), true);
            }
            match st
                .kube
                .store(cluster)
                .and_then(|s| s.get(res.kind, ns, name))
            {
                Some(obj) => (
                    json_response(200, &present(obj.clone(), res, version)),
                    None,
                ),
                None => not_found(res.kind, name),
            }
        }
        (Route::Object { .. }, "PUT" | "PATCH") => update(st, cluster, req, route),
        (
            Route::Object {
                res,
                ns,
                name,
                sub: None,
                version,
                ..
            },
            "DELETE",
        ) => delete(
            st,
            now,
            cluster,
            req,
            res,
            version,
            ns.as_deref().unwrap_or(""),
            name,
        ),
        (Route::NotFound, _) => page_not_found(),
        _ => method_not_allowed(),
    }
}

fn page_not_found() -> Answer {
    fail_with(
        404,
        "NotFound",
        "the server could not find the requested resource",
        Some(json!({})),
    )
}

/// A DNS-1123 subdomain (`label_only`: a DNS-1123 label).
fn valid_name(name: &str, label_only: bool) -> bool {
    let max = if label_only { 63 } else { 253 };
    !name.is_empty()
        && name.len() <= max
        && name.split('.').all(|part| {
            !part.is_empty()
                && part.len() <= 63
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
        && (!label_only || !name.contains('.'))
}

/// A label value, or the name part of a qualified key.
fn valid_label_value(v: &str) -> bool {
    v.len() <= 63
        && (v.is_empty()
            || (v
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                && v.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                && v.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())))
}

fn valid_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    prefix.is_none_or(|p| valid_name(p, false)) && !name.is_empty() && valid_label_value(name)
}

/// Checks metadata a client sent: labels and annotation keys.
fn validate_meta(kind: Kind, name: &str, obj: &Value) -> Result<(), Answer> {
    if let Some(labels) = at(obj, &["metadata", "labels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            if !valid_key(k) {
                return Err(invalid(
                    kind,
                    name,
                    "metadata.labels",
                    &format!(
                        "Invalid value: \"{k}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                    ),
                ));
            }
            let Some(v) = v.as_str() else {
                return Err(invalid(
                    kind,
                    name,
                    "metadata.labels",
                    "label values must be strings",
                ));
            };
            if !valid_label_value(v) {
                return Err(invalid(
                    kind,
                    name,
                    &format!("metadata.labels[{k}]"),
                    &format!(
                        "Invalid value: \"{v}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                    ),
                ));
            }
        }
    }
    if let Some(ann) = at(obj, &["metadata", "annotations"]).and_then(Value::as_object) {
        for (k, v) in ann {
            if !valid_key(k) || !v.is_string() {
                return Err(invalid(
                    kind,
                    name,
                    "metadata.annotations",
                    &format!("Invalid value: \"{k}\""),
                ));
            }
        }
    }
    Ok(())
}

fn parse_object(body: &[u8]) -> Result<Value, Answer> {
    match serde_json::from_slice::<Value>(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(fail(
            400,
            "BadRequest",
            "the body of the request must be a JSON object",
        )),
        Err(e) => Err(fail(
            400,
            "BadRequest",
            &format!("the body of the request could not be decoded: {e}"),
        )),
    }
}

fn create(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    req: &KubeRequest,
    res: &'static Resource,
    ns: &str,
) -> Answer {
    let mut obj = match parse_object(&req.body) {
        Ok(o) => o,
        Err(a) => return a,
    };
    if let Some(kind) = obj.get("kind").and_then(Value::as_str)
        && kind != res.kind_name
    {
        return fail(
            400,
            "BadRequest",
            &format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                res.kind_name
            ),
        );
    }
    if let Some(v) = obj.get("apiVersion").and_then(Value::as_str) {
        let (g, ver) = v.rsplit_once('/').unwrap_or(("", v));
        if g != res.group || !res.versions.contains(&ver) {
            return fail(
                400,
                "BadRequest",
                &format!(
                    "the API version in the data ({v}) does not match the expected API version ({})",
                    res.kind.api_version()
                ),
            );
        }
    }
    let body_ns = str_at(&obj, &["metadata", "namespace"]).unwrap_or("");
    if res.namespaced && !body_ns.is_empty() && body_ns != ns {
        return fail(
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request",
        );
    }
    let name = match (
        str_at(&obj, &["metadata", "name"]).filter(|n| !n.is_empty()),
        str_at(&obj, &["metadata", "generateName"]).filter(|n| !n.is_empty()),
    ) {
        (Some(n), _) => n.to_string(),
        (None, Some(prefix)) => format!("{prefix}{}", st.kube.suffix(5)),
        (None, None) => {
            return invalid(
                res.kind,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
            );
        }
    };
    let label_only = matches!(res.kind, Kind::Namespace | Kind::Service);
    if !valid_name(&name, label_only) {
        return invalid(
            res.kind,
            &name,
            "metadata.name",
            &format!(
                "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        );
    }
    if let Err(a) = validate_meta(res.kind, &name, &obj) {
        return a;
    }
    let Some(store) = st.kube.store(cluster) else {
        return unavailable();
    };
    if res.namespaced && !store.contains(Kind::Namespace, "", ns) {
        return not_found(Kind::Namespace, ns);
    }
    if store.contains(res.kind, ns, &name) {
        return fail_with(
            409,
            "AlreadyExists",
            &format!("{} \"{name}\" already exists", qualified(res.kind)),
            Some(details(res.kind, &name)),
        );
    }
    if store.len() >= KUBE_OBJECTS_MAX {
        return fail(
            403,
            "Forbidden",
            "exceeded quota: the cluster holds as many objects as it can",
        );
    }
    set_at(&mut obj, &["metadata", "name"], json!(name));
    match res.kind {
        Kind::Pod => {
            let spec = obj_at(&mut obj, &["spec"]);
            spec.entry("terminationGracePeriodSeconds")
                .or_insert(json!(super::DEFAULT_GRACE_SECONDS));
            spec.entry("schedulerName")
                .or_insert(json!("default-scheduler"));
            spec.entry("restartPolicy").or_insert(json!("Always"));
            set_at(
                &mut obj,
                &["status"],
                json!({"phase": "Pending", "qosClass": "BestEffort"}),
            );
        }
        Kind::Namespace => {
            set_at(&mut obj, &["spec"], json!({"finalizers": ["kubernetes"]}));
            set_at(&mut obj, &["status"], json!({"phase": "Active"}));
        }
        Kind::Vm | Kind::Vmi | Kind::Pdb | Kind::ReplicaSet | Kind::DaemonSet => {
            set_at(&mut obj, &["status"], json!({}));
        }
        Kind::Node | Kind::Service | Kind::Secret => {}
    }
    let uid = st.kube.uid();
    let version = match route_version(req) {
        Some(v) => v,
        None => res.versions.first().copied().unwrap_or("v1").to_string(),
    };
    match st
        .kube
        .store_mut(cluster)
        .and_then(|s| s.create(res.kind, ns, obj, uid, now))
    {
        Some(created) => (
            json_response(201, &present(created.clone(), res, &version)),
            Some(created),
        ),
        None => fail(500, "InternalError", "the object could not be stored"),
    }
}

/// The version segment of a resource path.
fn route_version(req: &KubeRequest) -> Option<String> {
    let segs: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["api", v, ..] | ["apis", _, v, ..] => Some((*v).to_string()),
        _ => None,
    }
}

fn update(st: &mut State, cluster: &str, req: &KubeRequest, route: &Route) -> Answer {
    let Route::Object {
        res,
        version,
        ns,
        name,
        sub,
        ..
    } = route
    else {
        return page_not_found();
    };
    let ns = ns.as_deref().unwrap_or("");
    let status_only = sub.as_deref() == Some("status");
    let Some(current) = st
        .kube
        .store(cluster)
        .and_then(|s| s.get(res.kind, ns, name))
        .cloned()
    else {
        return not_found(res.kind, name);
    };
    let put = req.method.eq_ignore_ascii_case("PUT");
    let incoming = if put {
        match parse_object(&req.body) {
            Ok(o) => o,
            Err(a) => return a,
        }
    } else {
        let content_type = req.content_type.as_deref().unwrap_or("");
        match patch::apply(&current, content_type, &req.body) {
            Ok(o) => o,
            Err((code, reason, msg)) => return fail(code, reason, &msg),
        }
    };
    if !incoming.is_object() {
        return fail(
            400,
            "BadRequest",
            "the body of the request must be a JSON object",
        );
    }
    let body_name = str_at(&incoming, &["metadata", "name"]).unwrap_or("");
    if put && body_name != name {
        return fail(
            400,
            "BadRequest",
            &format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            ),
        );
    }
    let body_ns = str_at(&incoming, &["metadata", "namespace"]).unwrap_or("");
    if res.namespaced && !body_ns.is_empty() && body_ns != ns {
        return fail(
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request",
        );
    }
    let current_rv = str_at(&current, &["metadata", "resourceVersion"]).unwrap_or("");
    match str_at(&incoming, &["metadata", "resourceVersion"]) {
        Some(rv) if !rv.is_empty() && rv != current_rv => return conflict(res.kind, name),
        None | Some("") if put => {
            return invalid(
                res.kind,
                name,
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            );
        }
        _ => {}
    }
    if let Err(a) = validate_meta(res.kind, name, &incoming) {
        return a;
    }
    let mut next = if status_only {
        let mut next = current.clone();
        set_at(
            &mut next,
            &["status"],
            incoming.get("status").cloned().unwrap_or(json!({})),
        );
        next
    } else {
        let mut next = incoming;
        // The main resource does not change status (nor deletion state) on a PUT.
        if put {
            match current.get("status") {
                Some(s) => set_at(&mut next, &["status"], s.clone()),
                None => {
                    obj_at(&mut next, &[]).remove("status");
                }
            }
        }
        for field in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
            let meta = obj_at(&mut next, &["metadata"]);
            match at(&current, &["metadata", field]) {
                Some(v) => {
                    meta.insert(field.into(), v.clone());
                }
                None => {
                    meta.remove(field);
                }
            }
        }
        next
    };
    set_at(&mut next, &["metadata", "name"], json!(name));
    match st
        .kube
        .store_mut(cluster)
        .and_then(|s| s.update(res.kind, ns, next))
    {
        Some(updated) => (
            json_response(200, &present(updated.clone(), res, version)),
            Some(updated),
        ),
        None => not_found(res.kind, name),
    }
}

#[allow(clippy::too_many_arguments)]
fn delete(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    req: &KubeRequest,
    res: &'static Resource,
    version: &str,
    ns: &str,
    name: &str,
) -> Answer {
    let options = if req.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        match parse_object(&req.body) {
            Ok(o) => o,
            Err(a) => return a,
        }
    };
    let params = query(&req.query);
    let grace = options
        .get("gracePeriodSeconds")
        .and_then(Value::as_u64)
        .or_else(|| {
            params
                .get("gracePeriodSeconds")
                .and_then(|g| g.parse().ok())
        });
    let Some(current) = st
        .kube
        .store(cluster)
        .and_then(|s| s.get(res.kind, ns, name))
        .cloned()
    else {
        return not_found(res.kind, name);
    };
    if let Some(uid) = at(&options, &["preconditions", "uid"]).and_then(Value::as_str)
        && uid != uid_of(&current)
    {
        return fail_with(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                qualified(res.kind),
                uid_of(&current)
            ),
            Some(details(res.kind, name)),
        );
    }
    if let Some(rv) = at(&options, &["preconditions", "resourceVersion"]).and_then(Value::as_str)
        && Some(rv) != str_at(&current, &["metadata", "resourceVersion"])
    {
        return conflict(res.kind, name);
    }
    let deleted_status = |obj: &Value| {
        let d = json!({"name": name, "group": res.group, "kind": res.plural, "uid": uid_of(obj)});
        status_response(200, "", "", Some(d))
    };
    match res.kind {
        Kind::Pod => match workload::delete_pod(st, now, cluster, ns, name, grace) {
            Some(pod) => (
                json_response(200, &present(pod.clone(), res, version)),
                Some(pod),
            ),
            None => not_found(res.kind, name),
        },
        Kind::Vmi => {
            let cause = "DELETE virtualmachineinstances";
            match kubevirt::start_deletion(st, now, ns, name, cause) {
                Some(vmi) => (
                    json_response(200, &present(vmi.clone(), res, version)),
                    Some(vmi),
                ),
                None => not_found(res.kind, name),
            }
        }
        Kind::Namespace => {
            if matches!(name, "default" | "kube-system" | "kube-public") {
                return fail(
                    403,
                    "Forbidden",
                    &format!(
                        "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
                    ),
                );
            }
            for kind in RESOURCES.iter().filter(|r| r.namespaced).map(|r| r.kind) {
                let names: Vec<String> = st
                    .kube
                    .store(cluster)
                    .map(|s| {
                        s.list(kind, Some(name))
                            .map(|o| name_of(o).to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                for n in names {
                    remove_object(st, now, cluster, kind, name, &n);
                }
            }
            remove_object(st, now, cluster, Kind::Namespace, "", name);
            (deleted_status(&current), Some(current))
        }
        kind => {
            remove_object(st, now, cluster, kind, ns, name);
            (deleted_status(&current), Some(current))
        }
    }
}

/// Removes an object at once, with what its removal implies (a VM's VMI goes, a
/// node's machine tags are forgotten).
fn remove_object(st: &mut State, now: Timestamp, cluster: &str, kind: Kind, ns: &str, name: &str) {
    match kind {
        Kind::Vmi => {
            kubevirt::start_deletion(st, now, ns, name, "DELETE namespaces");
            return;
        }
        Kind::Vm => kubevirt::vm_deleted(st, now, ns, name, "DELETE virtualmachines"),
        Kind::Node => {
            if let Some(w) = st.kube.workloads.get_mut(cluster) {
                w.node_tags.remove(name);
            }
        }
        _ => {}
    }
    if let Some(s) = st.kube.store_mut(cluster) {
        s.remove(kind, ns, name);
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

    #[test]
    fn label_keys_follow_kubernetes_rules() {
        assert!(valid_key("flightdeck.dev/cluster"));
        assert!(valid_key("app"));
        assert!(!valid_key("flightdeck-cluster=x"));
        assert!(!valid_key("Bad_Prefix/x"));
    }
}
