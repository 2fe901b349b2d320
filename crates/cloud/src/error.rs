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
            message: bounded_message(message.into()),
        }
    }
}

/// The longest message kept from a cloud (or written to an event or a condition): a
/// broken cloud's 100 KB answer must not go into every event and the store.
pub const MESSAGE_MAX_BYTES: usize = 2048;

/// `message` cut to [`MESSAGE_MAX_BYTES`] (at a character boundary), saying how long it was.
pub fn bounded_message(message: String) -> String {
    if message.len() <= MESSAGE_MAX_BYTES {
        return message;
    }
    let mut end = MESSAGE_MAX_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut: {} bytes in all)", &message[..end], message.len())
}

/// For `#[serde(serialize_with)]`: a message field written bounded.
pub fn serialize_bounded<S: serde::Serializer>(message: &str, s: S) -> Result<S::Ok, S::Error> {
    if message.len() <= MESSAGE_MAX_BYTES {
        s.serialize_str(message)
    } else {
        s.serialize_str(&bounded_message(message.to_string()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_cloud_message_is_cut_and_says_so() {
        let e = CloudError::new(
            ErrorClass::Transient,
            "nova",
            "list",
            Some(500),
            "é".repeat(60_000),
        );
        assert!(
            e.message.len() < MESSAGE_MAX_BYTES + 64,
            "{}",
            e.message.len()
        );
        assert!(
            e.message.ends_with("(cut: 120000 bytes in all)"),
            "{}",
            &e.message[2000..]
        );
        let short = CloudError::new(ErrorClass::Transient, "nova", "list", None, "busy");
        assert_eq!(short.message, "busy");
    }
}
