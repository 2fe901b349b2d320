//! The request level: a routed request answered by discovery, a read
//! ([`super::read`]), a write ([`super::writes`]) or an eviction
//! ([`super::eviction`]). Paths and verbs are [`super::routes`]'s, `Status` bodies
//! [`super::answers`]'.
//!
//! There are no Table responses: the request carries no `Accept` header, and kubectl
//! prints plain lists itself.

use std::collections::BTreeMap;

use flightdeck_cloud::Timestamp;

use super::answers::{
    Answer, fail, json_response, method_not_allowed, not_found, page_not_found, present,
    unavailable,
};
use super::discovery;
use super::eviction;
use super::read::read_list;
use super::routes::{Route, is_watch, query};
use super::store::{Kind, Resource};
use super::writes::{create, delete, update};
use super::{INFRA_CLUSTER, KUBE_BODY_MAX, KubeRequest};
use crate::State;

/// Answers one request. The caller has counted it and applied API faults.
pub(crate) fn handle(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    req: &KubeRequest,
    route: &Route,
) -> Answer {
    if let Some(answer) = turned_away(st, cluster, req) {
        return answer;
    }
    let infra = cluster == INFRA_CLUSTER;
    let method = req.method.to_ascii_uppercase();
    let params = query(&req.query);
    if let Some(answer) = discovery_answer(infra, route, &method) {
        return answer;
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
            get_object(st, cluster, res, version, ns, name, *watch, &params)
        }
        (Route::Object { .. }, "PUT" | "PATCH") => update(st, now, cluster, req, route),
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

/// The answer to a request turned away before it is looked at: a body over
/// [`KUBE_BODY_MAX`] (413), a workload cluster whose API is not up (503).
fn turned_away(st: &State, cluster: &str, req: &KubeRequest) -> Option<Answer> {
    if req.body.len() > KUBE_BODY_MAX {
        return Some(fail(
            413,
            "RequestEntityTooLarge",
            &format!("Request entity too large: limit is {KUBE_BODY_MAX}"),
        ));
    }
    let infra = cluster == INFRA_CLUSTER;
    // A cloud guest's API answers while its cluster's endpoint does (`kubelets`).
    if !infra
        && !st
            .kube
            .workloads
            .get(cluster)
            .is_some_and(|w| w.up || w.cloud)
    {
        return Some(unavailable());
    }
    None
}

/// The answer to a discovery request (`/version`, `/api`, `/apis`, a group, a group
/// version's resources), `None` if `route` is not one.
fn discovery_answer(infra: bool, route: &Route, method: &str) -> Option<Answer> {
    let doc = match route {
        Route::Version => Some(discovery::version()),
        Route::Api => Some(discovery::api_versions()),
        Route::Apis => Some(discovery::group_list(infra)),
        Route::Group(g) => discovery::group(infra, g),
        Route::Resources { group, version } => discovery::resources(infra, group, version),
        _ => return None,
    };
    Some(match (method, doc) {
        ("GET", Some(doc)) => (json_response(200, &doc), None),
        ("GET", None) => page_not_found(),
        _ => method_not_allowed(),
    })
}

/// A `GET` of one object: the object, or (`watch` in the path or the query) a watch
/// of it.
#[allow(clippy::too_many_arguments)]
fn get_object(
    st: &State,
    cluster: &str,
    res: &'static Resource,
    version: &str,
    ns: &str,
    name: &str,
    watch: bool,
    params: &BTreeMap<String, String>,
) -> Answer {
    if watch || is_watch(params) {
        let ns = res.namespaced.then_some(ns);
        return read_list(st, cluster, res, version, ns, params, Some(name), true);
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
