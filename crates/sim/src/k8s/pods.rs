//! A pod's life once the API server has it: its containers start when it is bound to
//! a Ready node, and a graceful deletion (`deletionTimestamp`, gone when the grace
//! period is over).

use flightdeck_cloud::Timestamp;
use serde_json::{Value, json};

use super::objects::{node_is_ready, pod_node, pod_phase, set_condition};
use super::store::{Kind, at, deleting, obj_at, rfc3339};
use super::{DEFAULT_GRACE_SECONDS, Event, uid_of};
use crate::{Event as SimEvent, State};

/// Deletes pod `ns/name` gracefully: it gets `deletionTimestamp` (now + grace) and
/// `deletionGracePeriodSeconds` and is gone when the grace period is over. `grace` is
/// the request's `gracePeriodSeconds` (default: the pod's
/// `terminationGracePeriodSeconds`, else 30); 0, or a pod on no node, goes at once.
/// Answers the pod as it is after the call (`None`: no such pod).
pub(crate) fn delete_pod(
    st: &mut State,
    now: Timestamp,
    cluster: &str,
    ns: &str,
    name: &str,
    grace: Option<u64>,
) -> Option<Value> {
    let pod = st.kube.store(cluster)?.get(Kind::Pod, ns, name)?.clone();
    let grace = grace
        .or_else(|| at(&pod, &["spec", "terminationGracePeriodSeconds"]).and_then(Value::as_u64))
        .unwrap_or(DEFAULT_GRACE_SECONDS)
        .min(86_400 * 365);
    let store = st.kube.store_mut(cluster)?;
    if grace == 0 || pod_node(&pod).is_none() {
        return store.remove(Kind::Pod, ns, name);
    }
    if let Some(current) =
        at(&pod, &["metadata", "deletionGracePeriodSeconds"]).and_then(Value::as_u64)
        && current <= grace
    {
        return Some(pod);
    }
    let updated = store.modify(Kind::Pod, ns, name, |p| {
        let meta = obj_at(p, &["metadata"]);
        meta.insert(
            "deletionTimestamp".into(),
            json!(rfc3339(now.plus_millis(grace * 1000))),
        );
        meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
    });
    let gone_at = super::on_tick(st, cluster, now.plus_millis(grace * 1000));
    st.schedule(
        gone_at,
        SimEvent::K8s(Event::PodGone {
            cluster: cluster.to_string(),
            ns: ns.to_string(),
            name: name.to_string(),
            uid: uid_of(&pod).to_string(),
        }),
    );
    updated
}

/// A bound pod's containers start: Running and Ready (if its node is Ready).
pub(crate) fn pod_start(
    st: &mut State,
    t: Timestamp,
    cluster: &str,
    ns: &str,
    name: &str,
    uid: &str,
) {
    st.kube
        .pods_starting
        .remove(&(cluster.to_string(), uid.to_string()));
    let Some(store) = st.kube.store_mut(cluster) else {
        return;
    };
    let Some(pod) = store.get(Kind::Pod, ns, name).filter(|p| uid_of(p) == uid) else {
        return;
    };
    if deleting(pod) || pod_phase(pod) != "Pending" {
        return;
    }
    let ready = pod_node(pod)
        .and_then(|n| store.get(Kind::Node, "", n))
        .is_some_and(node_is_ready);
    if !ready {
        return;
    }
    store.modify(Kind::Pod, ns, name, |p| {
        let containers: Vec<Value> = at(p, &["spec", "containers"])
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        json!({"name": c.get("name").cloned().unwrap_or(json!("main")),
                            "image": c.get("image").cloned().unwrap_or(json!("")),
                            "ready": true, "started": true, "restartCount": 0,
                            "state": {"running": {"startedAt": rfc3339(t)}}})
                    })
                    .collect()
            })
            .unwrap_or_default();
        let status = obj_at(p, &["status"]);
        status.insert("phase".into(), json!("Running"));
        status.insert("startTime".into(), json!(rfc3339(t)));
        status.insert("containerStatuses".into(), Value::Array(containers));
        for c in ["Initialized", "ContainersReady", "Ready"] {
            set_condition(p, c, "True", "", t);
        }
    });
}
