//! Writes of an object: create, replace or patch, and delete, with the API server's
//! preconditions (names, namespaces, `resourceVersion`s, UIDs, quota) and what a
//! removal implies.

use flightdeck_cloud::Timestamp;
use serde_json::{Value, json};

use super::answers::{
    Answer, conflict, details, fail, fail_with, invalid, json_response, not_found, page_not_found,
    present, qualified, status_response, unavailable,
};
use super::kubevirt;
use super::lost;
use super::patch;
use super::pods;
use super::routes::{Route, query, route_version};
use super::store::{
    Kind, RESOURCES, Resource, Store, at, deleting, name_of, obj_at, set_at, str_at,
};
use super::validate::{parse_object, valid_name, validate_meta};
use super::{DEFAULT_GRACE_SECONDS, KUBE_OBJECTS_MAX, KubeRequest, uid_of};
use crate::State;

pub(crate) fn create(
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
    if let Err(a) = check_kind_and_namespace(&obj, res, ns) {
        return a;
    }
    let name = match new_name(st, cluster, res, &obj) {
        Ok(n) => n,
        Err(a) => return a,
    };
    let Some(store) = st.kube.store(cluster) else {
        return unavailable();
    };
    if let Err(a) = check_room(store, res, ns, &name) {
        return a;
    }
    set_at(&mut obj, &["metadata", "name"], json!(name));
    set_defaults(res.kind, &mut obj);
    if res.kind == Kind::Service
        && let Err(a) = assign_cluster_ip(store, &mut obj)
    {
        return a;
    }
    let uid = st.kube.uid_in(cluster);
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

/// The body's `kind`, `apiVersion` and namespace, where it gives them, are the
/// request's.
fn check_kind_and_namespace(obj: &Value, res: &Resource, ns: &str) -> Result<(), Answer> {
    if let Some(kind) = obj.get("kind").and_then(Value::as_str)
        && kind != res.kind_name
    {
        return Err(fail(
            400,
            "BadRequest",
            &format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                res.kind_name
            ),
        ));
    }
    if let Some(v) = obj.get("apiVersion").and_then(Value::as_str) {
        let (g, ver) = v.rsplit_once('/').unwrap_or(("", v));
        if g != res.group || !res.versions.contains(&ver) {
            return Err(fail(
                400,
                "BadRequest",
                &format!(
                    "the API version in the data ({v}) does not match the expected API version ({})",
                    res.kind.api_version()
                ),
            ));
        }
    }
    same_namespace(res, obj, ns)
}

/// The new object's name (`metadata.name`, or `metadata.generateName` with a random
/// suffix), once it and the object's labels and annotations are valid.
fn new_name(st: &mut State, cluster: &str, res: &Resource, obj: &Value) -> Result<String, Answer> {
    let name = match (
        str_at(obj, &["metadata", "name"]).filter(|n| !n.is_empty()),
        str_at(obj, &["metadata", "generateName"]).filter(|n| !n.is_empty()),
    ) {
        (Some(n), _) => n.to_string(),
        (None, Some(prefix)) => format!("{prefix}{}", st.kube.suffix(cluster, 5)),
        (None, None) => {
            return Err(invalid(
                res.kind,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
            ));
        }
    };
    let label_only = matches!(res.kind, Kind::Namespace | Kind::Service);
    if !valid_name(&name, label_only) {
        return Err(invalid(
            res.kind,
            &name,
            "metadata.name",
            &format!(
                "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ));
    }
    validate_meta(res.kind, &name, obj)?;
    Ok(name)
}

/// The object `name` can be stored: its namespace exists, it does not, and the
/// cluster holds fewer than [`KUBE_OBJECTS_MAX`] objects.
fn check_room(store: &Store, res: &Resource, ns: &str, name: &str) -> Result<(), Answer> {
    if res.namespaced && !store.contains(Kind::Namespace, "", ns) {
        return Err(not_found(Kind::Namespace, ns));
    }
    if store.contains(res.kind, ns, name) {
        return Err(fail_with(
            409,
            "AlreadyExists",
            &format!("{} \"{name}\" already exists", qualified(res.kind)),
            Some(details(res.kind, name)),
        ));
    }
    if store.len() >= KUBE_OBJECTS_MAX {
        return Err(fail(
            403,
            "Forbidden",
            "exceeded quota: the cluster holds as many objects as it can",
        ));
    }
    Ok(())
}

/// The service CIDR the simulated API servers allocate cluster IPs from (kubeadm's
/// default, 10.96.0.0/12; `.1` is the `kubernetes` Service's).
const SERVICE_CIDR_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const SERVICE_CIDR_SIZE: u32 = 1 << 20;

/// Gives a new Service its `spec.clusterIP` (and `clusterIPs`), as the API server does
/// on create: the lowest free address of the service CIDR, unless the Service asks for
/// none (`None`, a headless Service) or names one, which must be in the CIDR and free.
fn assign_cluster_ip(store: &Store, obj: &mut Value) -> Result<(), Answer> {
    let used: std::collections::BTreeSet<String> = store
        .list(Kind::Service, None)
        .filter_map(|s| str_at(s, &["spec", "clusterIP"]).map(str::to_string))
        .collect();
    let name = str_at(obj, &["metadata", "name"]).unwrap_or("").to_string();
    let ip = match str_at(obj, &["spec", "clusterIP"]).filter(|ip| !ip.is_empty()) {
        Some("None") => return Ok(()),
        Some(asked) => {
            let in_cidr = asked
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| u32::from(ip).wrapping_sub(SERVICE_CIDR_BASE) < SERVICE_CIDR_SIZE);
            if !in_cidr {
                return Err(invalid(
                    Kind::Service,
                    &name,
                    "spec.clusterIP",
                    &format!(
                        "Invalid value: \"{asked}\": provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12"
                    ),
                ));
            }
            if used.contains(asked) {
                return Err(invalid(
                    Kind::Service,
                    &name,
                    "spec.clusterIP",
                    &format!("Invalid value: \"{asked}\": provided IP is already allocated"),
                ));
            }
            asked.to_string()
        }
        None => (2..SERVICE_CIDR_SIZE - 1)
            .map(|n| std::net::Ipv4Addr::from(SERVICE_CIDR_BASE + n).to_string())
            .find(|ip| !used.contains(ip))
            .ok_or_else(|| {
                fail(
                    500,
                    "InternalError",
                    "failed to allocate a serviceIP: range is full",
                )
            })?,
    };
    set_at(obj, &["spec", "clusterIP"], json!(ip));
    set_at(obj, &["spec", "clusterIPs"], json!([ip]));
    Ok(())
}

/// The defaults and initial status the API server gives a new object of `kind`.
fn set_defaults(kind: Kind, obj: &mut Value) {
    match kind {
        Kind::Pod => {
            let spec = obj_at(obj, &["spec"]);
            spec.entry("terminationGracePeriodSeconds")
                .or_insert(json!(DEFAULT_GRACE_SECONDS));
            spec.entry("schedulerName")
                .or_insert(json!("default-scheduler"));
            spec.entry("restartPolicy").or_insert(json!("Always"));
            set_at(
                obj,
                &["status"],
                json!({"phase": "Pending", "qosClass": "BestEffort"}),
            );
        }
        Kind::Namespace => {
            set_at(obj, &["spec"], json!({"finalizers": ["kubernetes"]}));
            set_at(obj, &["status"], json!({"phase": "Active"}));
        }
        Kind::Vm | Kind::Vmi | Kind::Pdb | Kind::ReplicaSet | Kind::DaemonSet => {
            set_at(obj, &["status"], json!({}));
        }
        Kind::Node | Kind::Service | Kind::Secret => {}
    }
}

pub(crate) fn update(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    req: &KubeRequest,
    route: &Route,
) -> Answer {
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
    let current = match stored(st, cluster, res.kind, ns, name) {
        Ok(c) => c,
        Err(a) => return a,
    };
    let put = req.method.eq_ignore_ascii_case("PUT");
    let incoming = match incoming_object(req, put, &current) {
        Ok(o) => o,
        Err(a) => return a,
    };
    if let Err(a) = check_update(res, ns, name, put, &current, &incoming) {
        return a;
    }
    let mut next = next_object(&current, incoming, status_only, put);
    set_at(&mut next, &["metadata", "name"], json!(name));
    if res.kind == Kind::Node {
        let cordoned = at(&next, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true);
        super::lost::note_cordon(st, now, cluster, name, cordoned);
    }
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

/// The object an update sends: a `PUT`'s body, or `current` with a `PATCH`'s body
/// applied; a JSON object either way.
fn incoming_object(req: &KubeRequest, put: bool, current: &Value) -> Result<Value, Answer> {
    let incoming = if put {
        parse_object(&req.body)?
    } else {
        let content_type = req.content_type.as_deref().unwrap_or("");
        match patch::apply(current, content_type, &req.body) {
            Ok(o) => o,
            Err((code, reason, msg)) => return Err(fail(code, reason, &msg)),
        }
    };
    if !incoming.is_object() {
        return Err(fail(
            400,
            "BadRequest",
            "the body of the request must be a JSON object",
        ));
    }
    Ok(incoming)
}

/// An update's preconditions: the name (on a `PUT`) and namespace are the URL's, the
/// `resourceVersion` is the current one (and given, on a `PUT`), the metadata is valid.
fn check_update(
    res: &Resource,
    ns: &str,
    name: &str,
    put: bool,
    current: &Value,
    incoming: &Value,
) -> Result<(), Answer> {
    let body_name = str_at(incoming, &["metadata", "name"]).unwrap_or("");
    if put && body_name != name {
        return Err(fail(
            400,
            "BadRequest",
            &format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            ),
        ));
    }
    same_namespace(res, incoming, ns)?;
    let current_rv = str_at(current, &["metadata", "resourceVersion"]).unwrap_or("");
    match str_at(incoming, &["metadata", "resourceVersion"]) {
        Some(rv) if !rv.is_empty() && rv != current_rv => return Err(conflict(res.kind, name)),
        None | Some("") if put => {
            return Err(invalid(
                res.kind,
                name,
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            ));
        }
        _ => {}
    }
    validate_meta(res.kind, name, incoming)
}

/// The object an update stores: `current` with `incoming`'s status (`status_only`),
/// else `incoming` with `current`'s deletion state (and, on a `PUT`, its status).
fn next_object(current: &Value, incoming: Value, status_only: bool, put: bool) -> Value {
    if status_only {
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
            match at(current, &["metadata", field]) {
                Some(v) => {
                    meta.insert(field.into(), v.clone());
                }
                None => {
                    meta.remove(field);
                }
            }
        }
        next
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn delete(
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
    let current = match stored(st, cluster, res.kind, ns, name) {
        Ok(c) => c,
        Err(a) => return a,
    };
    if let Err(a) = check_preconditions(&options, &current, res.kind, name) {
        return a;
    }
    let deleted_status = |obj: &Value| {
        let d = json!({"name": name, "group": res.group, "kind": res.plural, "uid": uid_of(obj)});
        status_response(200, "", "", Some(d))
    };
    if res.kind == Kind::Pod && !deleting(&current) {
        lost::note_budget(
            st,
            now,
            cluster,
            &current,
            lost::BudgetEventKind::PodDeleted,
        );
    }
    match res.kind {
        Kind::Pod => match pods::delete_pod(st, now, cluster, ns, name, grace) {
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
            if let Err(a) = remove_namespace(st, now, cluster, name) {
                return a;
            }
            (deleted_status(&current), Some(current))
        }
        kind => {
            remove_object(st, now, cluster, kind, ns, name);
            (deleted_status(&current), Some(current))
        }
    }
}

/// The delete options' `preconditions` (`uid`, `resourceVersion`) hold for `current`.
fn check_preconditions(
    options: &Value,
    current: &Value,
    kind: Kind,
    name: &str,
) -> Result<(), Answer> {
    if let Some(uid) = at(options, &["preconditions", "uid"]).and_then(Value::as_str)
        && uid != uid_of(current)
    {
        return Err(fail_with(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                qualified(kind),
                uid_of(current)
            ),
            Some(details(kind, name)),
        ));
    }
    if let Some(rv) = at(options, &["preconditions", "resourceVersion"]).and_then(Value::as_str)
        && Some(rv) != str_at(current, &["metadata", "resourceVersion"])
    {
        return Err(conflict(kind, name));
    }
    Ok(())
}

/// Removes the namespace `name` and everything in it at once (a system namespace is
/// refused).
fn remove_namespace(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    name: &str,
) -> Result<(), Answer> {
    if matches!(name, "default" | "kube-system" | "kube-public") {
        return Err(fail(
            403,
            "Forbidden",
            &format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
        ));
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
    Ok(())
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

/// The object `kind` `ns`/`name` as the cluster's store has it, or the 404 it earns.
fn stored(st: &State, cluster: &str, kind: Kind, ns: &str, name: &str) -> Result<Value, Answer> {
    st.kube
        .store(cluster)
        .and_then(|s| s.get(kind, ns, name))
        .cloned()
        .ok_or_else(|| not_found(kind, name))
}

/// A namespaced object's body names no namespace, or the request's.
fn same_namespace(res: &Resource, obj: &Value, ns: &str) -> Result<(), Answer> {
    let body_ns = str_at(obj, &["metadata", "namespace"]).unwrap_or("");
    if res.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(fail(
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}
