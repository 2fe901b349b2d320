//! Turning what an OpenStack service answers into a [`CloudError`] of the right
//! [`ErrorClass`]. Pure functions: no I/O, so every rule here is unit-tested.
//!
//! The classes follow what the engine needs to decide:
//! - 404 is [`ErrorClass::NotFound`]; 429 is [`ErrorClass::RateLimited`] with the
//!   `Retry-After` seconds; 5xx is [`ErrorClass::Transient`];
//! - 409 depends on the service: Octavia's "is immutable" and Neutron's
//!   `SecurityGroupInUse` are [`ErrorClass::Conflict`] (busy: wait); Neutron's
//!   `SecurityGroupRuleExists` and Octavia's other 409s (duplicates) are
//!   [`ErrorClass::AlreadyExists`]; Nova's "while it is in task_state/vm_state" is a
//!   `Conflict`, any other 409 is [`ErrorClass::Permanent`];
//! - every other 4xx is `Permanent`, with the service's own message kept verbatim.

use flightdeck_cloud::{CloudError, ErrorClass};
use flightdeck_spec::Duration;
use serde_json::Value;

/// The longest message kept from a body that is not one of OpenStack's error shapes.
const RAW_MESSAGE_MAX: usize = 500;
/// The longest `Retry-After` honoured (a day); longer values are clamped.
const RETRY_AFTER_MAX_S: u64 = 86_400;

/// An OpenStack service, as named in errors and chosen from the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Service {
    Keystone,
    Nova,
    Neutron,
    Octavia,
    Glance,
}

impl Service {
    /// The name errors carry: "keystone", "nova", "neutron", "octavia", "glance".
    pub fn name(self) -> &'static str {
        match self {
            Service::Keystone => "keystone",
            Service::Nova => "nova",
            Service::Neutron => "neutron",
            Service::Octavia => "octavia",
            Service::Glance => "glance",
        }
    }

    /// The service type in Keystone's catalog.
    pub fn catalog_type(self) -> &'static str {
        match self {
            Service::Keystone => "identity",
            Service::Nova => "compute",
            Service::Neutron => "network",
            Service::Octavia => "load-balancer",
            Service::Glance => "image",
        }
    }
}

/// What an error body said, in the service's own words.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fault {
    /// Neutron's `NeutronError.type` or Nova's top-level key (`itemNotFound`, ...).
    pub kind: Option<String>,
    pub message: String,
}

/// Reads the message out of any of OpenStack's error body shapes:
/// Nova `{"itemNotFound": {"message": .., "code": 404}}`, Neutron
/// `{"NeutronError": {"type": .., "message": .., "detail": ..}}`, Octavia
/// `{"faultcode": .., "faultstring": ..}`, Keystone `{"error": {"message": ..}}`, a bare
/// `{"message": ..}`, or plain text (Glance and proxies), trimmed and shortened.
pub fn parse_fault(body: &str) -> Fault {
    if let Ok(v) = serde_json::from_str::<Value>(body)
        && let Some(f) = fault_of_json(&v)
    {
        return f;
    }
    let text = body.split_whitespace().collect::<Vec<_>>().join(" ");
    Fault {
        kind: None,
        message: shorten(&text),
    }
}

fn fault_of_json(v: &Value) -> Option<Fault> {
    let obj = v.as_object()?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    if let Some(n) = obj.get("NeutronError") {
        // Old Neutron answers a bare string here.
        if let Some(s) = n.as_str() {
            return Some(Fault {
                kind: None,
                message: s.to_string(),
            });
        }
        return Some(Fault {
            kind: text(n.get("type")),
            message: text(n.get("message")).unwrap_or_default(),
        });
    }
    if let Some(s) = text(obj.get("faultstring")) {
        return Some(Fault {
            kind: None,
            message: s,
        });
    }
    if let Some(e) = obj.get("error").and_then(Value::as_object) {
        return Some(Fault {
            kind: text(e.get("title")),
            message: text(e.get("message")).unwrap_or_default(),
        });
    }
    if let Some(s) = text(obj.get("message")) {
        return Some(Fault {
            kind: None,
            message: s,
        });
    }
    // Nova: one key naming the fault, holding {"message", "code"}.
    if obj.len() == 1
        && let Some((key, inner)) = obj.iter().next()
        && let Some(message) = text(inner.get("message"))
    {
        return Some(Fault {
            kind: Some(key.clone()),
            message,
        });
    }
    None
}

fn shorten(s: &str) -> String {
    if s.len() <= RAW_MESSAGE_MAX {
        return s.to_string();
    }
    let mut end = RAW_MESSAGE_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The wait a `Retry-After` header asks for, when it is a number of seconds.
pub fn parse_retry_after(value: Option<&str>) -> Option<Duration> {
    let v = value?.trim();
    let secs = if let Ok(n) = v.parse::<u64>() {
        n
    } else {
        let f = v.parse::<f64>().ok()?;
        if !f.is_finite() || f < 0.0 {
            return None;
        }
        f.ceil() as u64
    };
    Some(Duration::from_secs(secs.min(RETRY_AFTER_MAX_S)))
}

/// The class of an HTTP error answer from `service`.
pub fn classify(
    service: Service,
    status: u16,
    fault: &Fault,
    retry_after: Option<Duration>,
) -> ErrorClass {
    match status {
        404 => ErrorClass::NotFound,
        429 => ErrorClass::RateLimited(retry_after),
        // Nova's old rate limiter answered 413 with a Retry-After.
        413 if retry_after.is_some() => ErrorClass::RateLimited(retry_after),
        409 => classify_conflict(service, fault),
        500..=599 => ErrorClass::Transient,
        _ => ErrorClass::Permanent,
    }
}

fn classify_conflict(service: Service, fault: &Fault) -> ErrorClass {
    match service {
        Service::Neutron => match fault.kind.as_deref() {
            Some("SecurityGroupRuleExists") => ErrorClass::AlreadyExists,
            Some(k) if k.ends_with("InUse") => ErrorClass::Conflict,
            _ => ErrorClass::Permanent,
        },
        Service::Octavia => {
            if fault.message.contains("is immutable") {
                ErrorClass::Conflict
            } else {
                ErrorClass::AlreadyExists
            }
        }
        Service::Nova => {
            let busy = ["while it is in", "task_state", "vm_state"];
            if busy.iter().any(|b| fault.message.contains(b)) {
                ErrorClass::Conflict
            } else {
                ErrorClass::Permanent
            }
        }
        Service::Keystone | Service::Glance => ErrorClass::Permanent,
    }
}

/// The [`CloudError`] for an HTTP error answer: class from [`classify`], message from
/// [`parse_fault`] (falling back to the status when the body says nothing).
pub fn http_error(
    service: Service,
    operation: &str,
    status: u16,
    retry_after: Option<&str>,
    body: &str,
) -> CloudError {
    let fault = parse_fault(body);
    let class = classify(service, status, &fault, parse_retry_after(retry_after));
    let message = if fault.message.is_empty() {
        format!("HTTP {status}")
    } else {
        fault.message
    };
    CloudError::new(class, service.name(), operation, Some(status), message)
}

/// The [`CloudError`] for a request that got no answer: refused, reset, timed out.
/// Always [`ErrorClass::Transient`].
/// The most bytes read from one OpenStack answer (a page of a list included).
pub const RESPONSE_MAX_BYTES: usize = 32 * 1024 * 1024;

/// A redirect answer as a Permanent error naming where it pointed (none is followed).
/// A request flightdeck did not send: the replica's claim behind it is gone.
pub fn not_sent(service: Service, operation: &str, why: String) -> CloudError {
    CloudError::new(
        ErrorClass::Permanent,
        service.name(),
        operation,
        None,
        format!("not sent: {why}"),
    )
}

pub fn redirect_error(service: Service, operation: &str, why: String) -> CloudError {
    CloudError::new(ErrorClass::Permanent, service.name(), operation, None, why)
}

/// An answer whose body could not be read: too large (Permanent: asking again gets the
/// same), or the connection failed (Transient).
pub fn body_error(
    service: Service,
    operation: &str,
    status: u16,
    err: &flightdeck_http::BodyError,
) -> CloudError {
    let class = match err {
        flightdeck_http::BodyError::TooLarge { .. } => ErrorClass::Permanent,
        flightdeck_http::BodyError::Transport(_) => ErrorClass::Transient,
    };
    CloudError::new(
        class,
        service.name(),
        operation,
        Some(status),
        err.to_string(),
    )
}

pub fn transport_error(service: Service, operation: &str, err: &reqwest::Error) -> CloudError {
    let what = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    CloudError::new(
        ErrorClass::Transient,
        service.name(),
        operation,
        None,
        format!("{what}: {}", error_chain(err)),
    )
}

/// An error and its sources, joined: reqwest's own Display hides the cause.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut s = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let m = e.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = e.source();
    }
    s
}

/// The [`CloudError`] for a 2xx answer whose body is not what the API documents.
/// [`ErrorClass::Permanent`]: retrying the same call will read the same body.
pub fn decode_error(service: Service, operation: &str, status: u16, why: &str) -> CloudError {
    CloudError::new(
        ErrorClass::Permanent,
        service.name(),
        operation,
        Some(status),
        format!("unexpected response body: {why}"),
    )
}

#[cfg(test)]
#[path = "errors_tests.rs"]
mod tests;
