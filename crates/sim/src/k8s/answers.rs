//! What the simulated API servers answer: JSON responses, objects as answered for a
//! version of their group, and `Status` bodies with the reasons and codes the real API
//! server gives.

use serde_json::{Value, json};

use super::KubeResponse;
use super::store::{Kind, Resource, obj_at};

/// An answer, and the object the call created, changed or removed (for the log).
pub(crate) type Answer = (KubeResponse, Option<Value>);

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

/// The `apiVersion` of `res` at `version` of its group.
pub(crate) fn api_version_of(res: &Resource, version: &str) -> String {
    if res.group.is_empty() {
        version.to_string()
    } else {
        format!("{}/{version}", res.group)
    }
}

/// `obj` as answered for `version` of its group.
pub(crate) fn present(mut obj: Value, res: &Resource, version: &str) -> Value {
    let api_version = api_version_of(res, version);
    if let Value::Object(m) = &mut obj {
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(res.kind_name));
    }
    obj
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
pub(crate) fn qualified(kind: Kind) -> String {
    let r = kind.resource();
    if r.group.is_empty() {
        r.plural.to_string()
    } else {
        format!("{}.{}", r.plural, r.group)
    }
}

pub(crate) fn details(kind: Kind, name: &str) -> Value {
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

pub(crate) fn page_not_found() -> Answer {
    fail_with(
        404,
        "NotFound",
        "the server could not find the requested resource",
        Some(json!({})),
    )
}

pub(crate) fn unavailable() -> Answer {
    fail(
        503,
        "ServiceUnavailable",
        "the server is currently unable to handle the request",
    )
}

pub(crate) fn method_not_allowed() -> Answer {
    fail(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}

pub(crate) fn conflict(kind: Kind, name: &str) -> Answer {
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

pub(crate) fn invalid(kind: Kind, name: &str, field: &str, detail: &str) -> Answer {
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
