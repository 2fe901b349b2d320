//! Bootstrap tokens in the simulated workload clusters: the Secrets a client sends,
//! the simulator's own calls when it is the provider itself, and an operator who
//! deletes tokens (`operator.deleteBootstrapToken`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use flightdeck_cloud::Ownership;
use serde_json::Value;

use crate::SimCloud;

/// A bootstrap token's Secret as a client sends it: its values base64, its machine's
/// ownership tags as `flightdeck.dev/…` labels.
pub(crate) fn token_object(token: &flightdeck_cloud::BootstrapTokenSecret) -> Value {
    let data: serde_json::Map<String, Value> = token
        .data
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(B64.encode(v))))
        .collect();
    let labels: serde_json::Map<String, Value> = token
        .tags
        .iter()
        .filter_map(|t| {
            let (key, value) = t.split_once('=')?;
            let key = key.strip_prefix("flightdeck-")?;
            Some((
                format!("flightdeck.dev/{key}"),
                Value::String(value.to_string()),
            ))
        })
        .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": token.name(), "namespace": "kube-system", "labels": labels},
        "type": "bootstrap.kubernetes.io/token",
        "data": data,
    })
}

/// A merge patch of a token's `expiration`.
pub(crate) fn expiration_patch(expiration: &str) -> Value {
    serde_json::json!({"data": {"expiration": B64.encode(expiration)}})
}

impl SimCloud {
    /// One request about a bootstrap token to `owner`'s workload API, for the
    /// simulator used as the provider itself: a create (`id` none), a patch or a delete
    /// (a token already gone is no error).
    pub(crate) fn token_call(
        &self,
        owner: &Ownership,
        method: &str,
        id: Option<&str>,
        body: Value,
    ) -> crate::Result<()> {
        use flightdeck_cloud::{CloudError, ErrorClass};
        let base = "/api/v1/namespaces/kube-system/secrets";
        let path = match id {
            Some(id) => format!("{base}/bootstrap-token-{id}"),
            None => base.to_string(),
        };
        let answer = self.kube_request(
            &owner.cluster,
            crate::KubeRequest {
                method: method.to_string(),
                path,
                query: String::new(),
                body: if body.is_null() {
                    Vec::new()
                } else {
                    body.to_string().into_bytes()
                },
                content_type: Some(
                    if method == "PATCH" {
                        "application/merge-patch+json"
                    } else {
                        "application/json"
                    }
                    .to_string(),
                ),
            },
        );
        let class = match answer.status {
            200..=299 => return Ok(()),
            404 if method == "DELETE" => return Ok(()),
            404 => ErrorClass::NotFound,
            409 => ErrorClass::AlreadyExists,
            429 => ErrorClass::Conflict,
            500..=599 => ErrorClass::Transient,
            _ => ErrorClass::Permanent,
        };
        Err(CloudError::new(
            class,
            "kubernetes",
            format!("{method} secrets"),
            Some(answer.status),
            String::from_utf8_lossy(&answer.body)
                .chars()
                .take(300)
                .collect::<String>(),
        ))
    }
}

/// `operator.deleteBootstrapToken` starts: an operator deletes `count` (every one when
/// none) of the bootstrap tokens of the workload clusters the fault targets, picked with
/// the fault stream in name order, as `kubeadm token delete` would. Each is remembered,
/// so that a join it breaks is blamed on the operator. Answers how many went.
pub(crate) fn delete_out_of_band(
    st: &mut crate::State,
    fault: &crate::faults::SimFault,
    count: Option<u32>,
) -> Vec<String> {
    let mut found = Vec::new();
    for (cluster, w) in &st.kube.workloads {
        if fault.cluster.as_deref().is_some_and(|c| c != cluster) {
            continue;
        }
        for secret in w.store.list(crate::k8s::SECRET_KIND, Some("kube-system")) {
            let is_token =
                secret.get("type").and_then(Value::as_str) == Some("bootstrap.kubernetes.io/token");
            let name = secret
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if is_token {
                found.push((cluster.clone(), name.to_string()));
            }
        }
    }
    let n = count.map_or(found.len(), |c| c as usize);
    let chosen = crate::faults::pick(&mut st.rng_faults, found, n);
    let mut gone = Vec::new();
    for (cluster, name) in chosen {
        let removed = st
            .kube
            .store_mut(&cluster)
            .and_then(|s| s.remove(crate::k8s::SECRET_KIND, "kube-system", &name));
        if removed.is_some() {
            st.kube.touch(&cluster);
            let key = format!("{cluster}/{name}");
            st.boot.deleted_by_operator.insert(key.clone());
            gone.push(key);
        }
    }
    gone
}
