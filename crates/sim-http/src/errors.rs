//! Error bodies, one format per service, and the mapping of the simulator's
//! [`CloudError`]s (HTTP status and OpenStack's own message) back into them.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use flightdeck_cloud::{CloudError, ErrorClass};
use serde_json::json;

use crate::wire::json as json_response;

/// The service whose error format an answer takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Service {
    Nova,
    Neutron,
    Octavia,
}

/// The status a failed simulator call answers with: its own, else one fitting its
/// class.
fn status_of(err: &CloudError) -> StatusCode {
    let fallback = match err.class {
        ErrorClass::Transient => 503,
        ErrorClass::Conflict | ErrorClass::AlreadyExists => 409,
        ErrorClass::NotFound => 404,
        ErrorClass::RateLimited(_) => 429,
        ErrorClass::Permanent => 400,
    };
    StatusCode::from_u16(err.status.unwrap_or(fallback))
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The reason phrase OpenStack's WSGI stack puts in `title`.
fn title(status: StatusCode) -> &'static str {
    status.canonical_reason().unwrap_or("Error")
}

/// What keystonemiddleware answers for a missing, unknown or expired token. Every
/// service behind it (Nova, Neutron, Octavia, Glance) answers exactly this, with a
/// `WWW-Authenticate` header naming Keystone.
pub(crate) fn unauthorized(identity_url: &str) -> Response {
    let body = json!({"error": {
        "code": 401,
        "title": "Unauthorized",
        "message": "The request you have made requires authentication.",
    }});
    let mut resp = json_response(StatusCode::UNAUTHORIZED, &body);
    if let Ok(v) = HeaderValue::from_str(&format!("Keystone uri=\"{identity_url}\"")) {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    resp
}

/// Keystone's own errors: `{"error": {"code", "message", "title"}}`.
pub(crate) fn keystone(status: StatusCode, message: &str) -> Response {
    let body = json!({"error": {
        "code": status.as_u16(),
        "message": message,
        "title": title(status),
    }});
    json_response(status, &body)
}

/// A token issue the faults aimed at Keystone refused, in Keystone's format.
pub(crate) fn keystone_refused(err: &CloudError) -> Response {
    with_retry_after(keystone(status_of(err), &err.message), err)
}

/// `Retry-After` (whole seconds, rounded up) on a rate-limited answer.
fn with_retry_after(mut resp: Response, err: &CloudError) -> Response {
    if let ErrorClass::RateLimited(Some(after)) = err.class {
        let secs = after.as_millis().div_ceil(1000).max(1);
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    resp
}

/// Nova's fault body: the status's fault name wrapping `{"code", "message"}`.
pub(crate) fn nova(status: StatusCode, message: &str) -> Response {
    let name = match status.as_u16() {
        400 => "badRequest",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "itemNotFound",
        405 => "badMethod",
        409 => "conflictingRequest",
        413 | 429 => "overLimit",
        415 => "badMediaType",
        501 => "notImplemented",
        503 => "serviceUnavailable",
        _ => "computeFault",
    };
    json_response(
        status,
        &json!({ name: {"code": status.as_u16(), "message": message} }),
    )
}

/// Neutron's `{"NeutronError": {"type", "message", "detail"}}`.
pub(crate) fn neutron(status: StatusCode, kind: &str, message: &str) -> Response {
    json_response(
        status,
        &json!({"NeutronError": {"type": kind, "message": message, "detail": ""}}),
    )
}

/// Octavia's WSME fault: `faultcode` is `Client` for 4xx and `Server` for 5xx.
pub(crate) fn octavia(status: StatusCode, message: &str) -> Response {
    let code = if status.is_server_error() {
        "Server"
    } else {
        "Client"
    };
    json_response(
        status,
        &json!({"faultcode": code, "faultstring": message, "debuginfo": null}),
    )
}

/// Glance's webob fault, as it answers a client that accepts JSON.
pub(crate) fn glance(status: StatusCode, message: &str) -> Response {
    let code = format!("{} {}", status.as_u16(), title(status));
    json_response(
        status,
        &json!({"message": message, "code": code, "title": title(status)}),
    )
}

/// Neutron's exception type for one of the simulator's answers, told by status and
/// message (the simulator words them as Neutron does).
fn neutron_type(status: StatusCode, message: &str) -> &'static str {
    let has = |s: &str| message.contains(s);
    match status.as_u16() {
        404 if has("Security group") => "SecurityGroupNotFound",
        404 if has("Router") => "RouterNotFound",
        404 => "HTTPNotFound",
        409 if has("rule already exists") => "SecurityGroupRuleExists",
        409 if has("in use") => "SecurityGroupInUse",
        409 if has("Quota exceeded") => "OverQuota",
        409 => "Conflict",
        400 if has("number of routes exceeds") => "RoutesExhausted",
        400 if has("Conflicting value ethertype") => "SecurityGroupRuleParameterConflict",
        400 if has("Invalid input for operation") => "InvalidInput",
        400 => "HTTPBadRequest",
        403 => "HTTPForbidden",
        429 => "OverQuota",
        503 => "ServiceUnavailable",
        _ => "HTTPInternalServerError",
    }
}

/// A failed simulator call, answered in `service`'s format.
pub(crate) fn from_cloud(service: Service, err: &CloudError) -> Response {
    let status = status_of(err);
    tracing::debug!(service = err.service, operation = %err.operation, %status, "simulated failure: {}", err.message);
    let resp = match service {
        Service::Nova => nova(status, &err.message),
        Service::Neutron => neutron(status, neutron_type(status, &err.message), &err.message),
        Service::Octavia => octavia(status, &err.message),
    };
    with_retry_after(resp, err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutron_types_follow_status_and_message() {
        let t = |s: u16, m: &str| neutron_type(StatusCode::from_u16(s).unwrap_or_default(), m);
        assert_eq!(
            t(409, "Security group rule already exists. Rule id is x."),
            "SecurityGroupRuleExists"
        );
        assert_eq!(t(409, "Security Group x in use."), "SecurityGroupInUse");
        assert_eq!(
            t(
                400,
                "Unable to complete operation for r. The number of routes exceeds the maximum 30."
            ),
            "RoutesExhausted"
        );
        assert_eq!(
            t(404, "Security group x does not exist"),
            "SecurityGroupNotFound"
        );
        assert_eq!(t(404, "Router x could not be found"), "RouterNotFound");
    }
}
