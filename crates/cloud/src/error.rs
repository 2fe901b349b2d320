//! The error taxonomy. Every provider maps what its cloud answers into one of these
//! classes, and the engine decides by class alone how to go on.

use std::fmt;

use flightdeck_spec::Duration;

/// How the engine should treat a failed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// Worth retrying with backoff: 5xx, timeouts, connection errors.
    Transient,
    /// The object is busy (Octavia's 409 "immutable" while PENDING_*): wait and look
    /// again. Not a failure; does not grow the backoff.
    Conflict,
    /// The object already exists in the wanted form (Neutron's 409
    /// SecurityGroupRuleExists): the call succeeded in effect.
    AlreadyExists,
    /// The object is gone (404). For a delete that is success.
    NotFound,
    /// The cloud asks us to slow down (429), possibly saying for how long.
    RateLimited(Option<Duration>),
    /// Retrying will not help until something changes: 400, 401 after re-auth, 403,
    /// quota. Surfaced as a condition and retried slowly.
    Permanent,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::Conflict => "conflict",
            ErrorClass::AlreadyExists => "already-exists",
            ErrorClass::NotFound => "not-found",
            ErrorClass::RateLimited(_) => "rate-limited",
            ErrorClass::Permanent => "permanent",
        }
    }
}

/// A failed cloud call: which service and operation, the HTTP status if any, and the
/// cloud's own message, verbatim.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct CloudError {
    pub class: ErrorClass,
    pub service: &'static str,
    pub operation: String,
    pub status: Option<u16>,
    pub message: String,
}

impl CloudError {
    pub fn new(
        class: ErrorClass,
        service: &'static str,
        operation: impl Into<String>,
        status: Option<u16>,
        message: impl Into<String>,
    ) -> Self {
        CloudError {
            class,
            service,
            operation: operation.into(),
            status,
            message: message.into(),
        }
    }
}

impl fmt::Display for CloudError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.service, self.operation)?;
        if let Some(s) = self.status {
            write!(f, " answered {s}")?;
        } else {
            write!(f, " failed")?;
        }
        write!(f, " ({}): {}", self.class.as_str(), self.message)
    }
}
