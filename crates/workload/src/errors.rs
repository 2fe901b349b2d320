//! kube-rs errors as flightdeck's [`CloudError`]s.
//!
//! - An API answer (`kube::Error::Api`) keeps its code and the API's message verbatim:
//!   404 NotFound; 409 AlreadyExists (reason `AlreadyExists`) or Conflict; 429 Conflict for
//!   an eviction (a PodDisruptionBudget: look again later) and RateLimited otherwise; 500
//!   on an eviction Permanent (the pod has several disruption budgets, which the Eviction
//!   API refuses until someone changes them); 408 and other 5xx Transient; other 4xx
//!   Permanent.
//! - Transport failures (connection refused, reset, timeouts) are Transient.
//! - Anything else (an answer that does not decode, a request that cannot be built, a
//!   TLS or auth problem) is Permanent: retrying the same thing will not help.
//!
//! Secrets never reach a message: the output of a kubeconfig's exec plugin is left out.

use std::io;

use flightdeck_cloud::{CloudError, ErrorClass};
use flightdeck_spec::Duration;

/// The service name of calls to the infra cluster (KubeVirt's objects, the Service).
pub const INFRA: &str = "kubevirt";
/// The service name of calls to the workload cluster (nodes, pods, evictions).
pub const WORKLOAD: &str = "kubernetes";

/// Longest message kept from an answer that was not a Kubernetes `Status` (a proxy's
/// HTML page, say).
pub const MESSAGE_CHARS_MAX: usize = 512;

/// How a call's failure is classified beyond its code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    Plain,
    /// `POST …/pods/{name}/eviction`: 429 is a disruption budget, 500 several budgets.
    Eviction,
}

/// The class of an API answer with HTTP status `code` and Kubernetes `reason`.
pub fn class_of(code: u16, reason: &str, kind: CallKind, retry_after_s: Option<u32>) -> ErrorClass {
    match code {
        404 => ErrorClass::NotFound,
        409 if reason == "AlreadyExists" => ErrorClass::AlreadyExists,
        409 => ErrorClass::Conflict,
        429 if kind == CallKind::Eviction => ErrorClass::Conflict,
        429 => ErrorClass::RateLimited(retry_after_s.map(|s| Duration::from_secs(u64::from(s)))),
        500 if kind == CallKind::Eviction => ErrorClass::Permanent,
        408 | 500..=599 => ErrorClass::Transient,
        _ => ErrorClass::Permanent,
    }
}

/// `err` from a call `operation` (e.g. `delete virtualmachineinstance`) to `service`.
pub fn cloud_error(
    service: &'static str,
    operation: &str,
    kind: CallKind,
    err: kube::Error,
) -> CloudError {
    match err {
        kube::Error::Api(status) => {
            let retry_after_s = status
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0);
            let code = status.code;
            CloudError::new(
                class_of(code, &status.reason, kind, retry_after_s),
                service,
                operation,
                Some(code),
                bounded(&status.message),
            )
        }
        other => {
            let class = if is_transport(&other) {
                ErrorClass::Transient
            } else {
                ErrorClass::Permanent
            };
            CloudError::new(class, service, operation, None, describe(&other))
        }
    }
}

/// Whether the server could not be reached or stopped answering: a connection refused,
/// reset or timed out, or a failure below HTTP.
pub fn is_transport(err: &kube::Error) -> bool {
    match err {
        kube::Error::HyperError(_) | kube::Error::ReadEvents(_) => true,
        // A tower service's error: hyper-util's connection errors, a timeout, or what an
        // in-process service answers. Transport unless it says it is TLS or auth.
        kube::Error::Service(_) => {
            unreachable_io(err) || !chain(err).any(|e| is_tls_text(&e.to_string()))
        }
        _ => false,
    }
}

/// Whether the error says the server is not there (yet): connection refused, reset,
/// aborted or timed out, host or network unreachable. A workload cluster whose API is
/// not up answers this way.
pub fn unreachable_io(err: &kube::Error) -> bool {
    chain(err).any(|e| {
        e.downcast_ref::<io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                io::ErrorKind::ConnectionRefused
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::NotConnected
                    | io::ErrorKind::TimedOut
                    | io::ErrorKind::HostUnreachable
                    | io::ErrorKind::NetworkUnreachable
            )
        })
    })
}

/// Whether the workload cluster's API is not reachable: a transport failure of that
/// kind, or 503 (the API server or a proxy in front of it is not ready).
pub fn workload_unreachable(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(s) => s.code == 503,
        other => unreachable_io(other),
    }
}

fn is_tls_text(s: &str) -> bool {
    let s = s.to_ascii_lowercase();
    s.contains("certificate") || s.contains("tls")
}

fn chain<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(err), |e: &&'a (dyn std::error::Error + 'static)| {
        (*e).source()
    })
}

/// The error and its causes, one line, with nothing secret.
pub fn describe(err: &kube::Error) -> String {
    if let kube::Error::Auth(auth) = err {
        return describe_auth(auth);
    }
    let mut parts: Vec<String> = Vec::new();
    for e in chain(err) {
        let s = e.to_string();
        // Each level usually repeats its source's text; keep what is new.
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    bounded(&parts.join(": "))
}

fn describe_auth(auth: &kube::client::AuthError) -> String {
    use kube::client::AuthError as A;
    match auth {
        // The plugin's output may hold a token: only the command and how it ended.
        A::AuthExecRun { cmd, out } => format!(
            "the kubeconfig's exec plugin {cmd:?} failed with {} (its output is not shown: it may hold credentials)",
            out.status
        ),
        A::AuthExecParse(_) => {
            "the kubeconfig's exec plugin answered something that is not an ExecCredential (not shown: it may hold credentials)".into()
        }
        other => bounded(&format!("authentication failed: {other}")),
    }
}

/// `s` cut to [`MESSAGE_CHARS_MAX`] characters.
pub fn bounded(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(MESSAGE_CHARS_MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn api(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Status::failure(message, reason).with_code(code).boxed())
    }

    #[test]
    fn api_answers_map_to_classes_with_the_message_verbatim() {
        let cases = [
            (404, "NotFound", CallKind::Plain, ErrorClass::NotFound),
            (
                409,
                "AlreadyExists",
                CallKind::Plain,
                ErrorClass::AlreadyExists,
            ),
            (409, "Conflict", CallKind::Plain, ErrorClass::Conflict),
            (
                429,
                "TooManyRequests",
                CallKind::Plain,
                ErrorClass::RateLimited(None),
            ),
            (
                429,
                "TooManyRequests",
                CallKind::Eviction,
                ErrorClass::Conflict,
            ),
            (500, "InternalError", CallKind::Plain, ErrorClass::Transient),
            (
                500,
                "InternalError",
                CallKind::Eviction,
                ErrorClass::Permanent,
            ),
            (
                503,
                "ServiceUnavailable",
                CallKind::Plain,
                ErrorClass::Transient,
            ),
            (504, "Timeout", CallKind::Eviction, ErrorClass::Transient),
            (408, "Timeout", CallKind::Plain, ErrorClass::Transient),
            (400, "BadRequest", CallKind::Plain, ErrorClass::Permanent),
            (403, "Forbidden", CallKind::Plain, ErrorClass::Permanent),
            (422, "Invalid", CallKind::Plain, ErrorClass::Permanent),
        ];
        for (code, reason, kind, want) in cases {
            let e = cloud_error(INFRA, "op", kind, api(code, reason, "the API's words"));
            assert_eq!(e.class, want, "{code} {reason} {kind:?}");
            assert_eq!(e.status, Some(code));
            assert_eq!(e.message, "the API's words");
            assert_eq!(e.service, "kubevirt");
        }
    }

    #[test]
    fn a_429_with_retry_after_seconds_is_rate_limited_for_that_long() {
        let mut s = Status::failure("slow down", "TooManyRequests").with_code(429);
        s.details = Some(
            serde_json::from_value(serde_json::json!({"retryAfterSeconds": 3})).expect("details"),
        );
        let e = cloud_error(
            WORKLOAD,
            "list nodes",
            CallKind::Plain,
            kube::Error::Api(s.boxed()),
        );
        assert_eq!(
            e.class,
            ErrorClass::RateLimited(Some(Duration::from_secs(3)))
        );
    }

    #[test]
    fn connection_refused_is_transient_and_unreachable() {
        let err = kube::Error::Service(Box::new(io::Error::from(io::ErrorKind::ConnectionRefused)));
        assert!(workload_unreachable(&err));
        let e = cloud_error(WORKLOAD, "list nodes", CallKind::Plain, err);
        assert_eq!(e.class, ErrorClass::Transient);
        assert_eq!(e.status, None);
        assert!(
            e.message.to_lowercase().contains("refused"),
            "{}",
            e.message
        );
    }

    #[test]
    fn an_undecodable_answer_is_permanent_not_a_panic() {
        let serde = serde_json::from_str::<serde_json::Value>("<html>").expect_err("not json");
        let e = cloud_error(
            INFRA,
            "list virtualmachines",
            CallKind::Plain,
            kube::Error::SerdeError(serde),
        );
        assert_eq!(e.class, ErrorClass::Permanent);
    }

    #[test]
    fn a_503_means_the_workload_api_is_not_there_yet() {
        assert!(workload_unreachable(&api(503, "ServiceUnavailable", "x")));
        assert!(!workload_unreachable(&api(500, "InternalError", "x")));
        assert!(!workload_unreachable(&api(403, "Forbidden", "x")));
    }

    #[test]
    fn long_messages_are_bounded() {
        let long = "x".repeat(MESSAGE_CHARS_MAX * 2);
        assert_eq!(bounded(&long).chars().count(), MESSAGE_CHARS_MAX + 1);
        assert_eq!(bounded(" short "), "short");
    }
}
