//! What every answer of the API keeps to, whichever part of the stack made it:
//! - every 4xx and 5xx is the API's error JSON (`ApiError`), including those that axum's
//!   extractors and router make themselves (a bad query string, a body too large, an
//!   unknown route, a method not allowed);
//! - data is never cached (`Cache-Control: no-store`): it holds what a token may see;
//! - under TLS, browsers are told to keep to it (`Strict-Transport-Security`).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::Failure;

/// The most of a non-JSON error body kept as the error's message.
const ERROR_TEXT_MAX: usize = 4096;

/// HSTS for a year, as under TLS the API is only ever meant to be reached so.
const HSTS: &str = "max-age=31536000";

/// Whether the API is served over TLS (the `answer_contract` layer's state).
#[derive(Clone, Copy)]
pub struct Tls(pub bool);

/// Applies the contract above to every answer.
pub async fn answer_contract(State(tls): State<Tls>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let mut res = next.run(req).await;
    let status = res.status();
    // The probes answer plain text, as load balancers and kubelets expect.
    let probe = matches!(path.as_str(), "/healthz" | "/readyz");
    if (status.is_client_error() || status.is_server_error()) && !is_json(res.headers()) && !probe {
        res = as_api_error(res, &method, &path).await;
    }
    let headers = res.headers_mut();
    if path.starts_with("/api/") || path == "/metrics" {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if tls.0 {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(HSTS),
        );
    }
    res
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// An error answer made by the stack (plain text or empty) as the API's error JSON,
/// with the same status and headers (`Allow` on a 405 stays).
async fn as_api_error(res: Response, method: &axum::http::Method, path: &str) -> Response {
    let (mut parts, body) = res.into_parts();
    let text = axum::body::to_bytes(body, ERROR_TEXT_MAX)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let message = match parts.status {
        StatusCode::NOT_FOUND if text.is_empty() => format!(
            "{method} {path}: no such route; the API is under /api/v1 (its routes: /api/v1/openapi.json)"
        ),
        StatusCode::METHOD_NOT_ALLOWED => {
            let allowed = parts
                .headers
                .get(header::ALLOW)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            format!("{method} is not allowed on {path}; it takes {allowed}")
        }
        StatusCode::PAYLOAD_TOO_LARGE => format!(
            "{method} {path}: the body is larger than the API takes ({} bytes)",
            crate::api::APPLY_BODY_MAX
        ),
        _ if text.is_empty() => format!(
            "{method} {path}: {}",
            parts.status.canonical_reason().unwrap_or("failed")
        ),
        _ => format!("{method} {path}: {text}"),
    };
    let fresh = Failure::new(parts.status, message).into_response();
    let (fresh_parts, body) = fresh.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        fresh_parts
            .headers
            .get(header::CONTENT_TYPE)
            .cloned()
            .unwrap_or(HeaderValue::from_static("application/json")),
    );
    Response::from_parts(parts, body)
}

/// The media types an apply takes: YAML (which JSON is a part of) or JSON. A request
/// with no Content-Type is read as YAML; one with another type is refused (415).
pub fn spec_content_type(headers: &HeaderMap) -> Result<(), Failure> {
    let Some(v) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let essence = v
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml"
        | "application/json" => Ok(()),
        _ => Err(Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Type {:?}: an apply takes a spec as application/yaml or application/json",
                v.to_str().unwrap_or("(not text)")
            ),
        )),
    }
}

/// A body that could not be read, as the API answers it: 413 when it is too large, 408
/// when its sender went quiet (`--idle-timeout`), 400 otherwise.
pub fn body_failure(e: axum::extract::rejection::BytesRejection) -> Failure {
    let status = e.status();
    let quiet = std::error::Error::source(&e)
        .into_iter()
        .flat_map(|s| std::iter::successors(Some(s), |e| e.source()))
        .any(|s| s.is::<tower_http::timeout::TimeoutError>());
    if quiet {
        return Failure::new(
            StatusCode::REQUEST_TIMEOUT,
            "the request body stopped arriving (--idle-timeout): send it whole",
        );
    }
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return Failure::new(
            status,
            format!(
                "the body is larger than an apply takes ({} bytes)",
                crate::api::APPLY_BODY_MAX
            ),
        );
    }
    Failure::new(
        status,
        format!("cannot read the request body: {}", e.body_text()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_type(t: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(t).expect("header"),
        );
        h
    }

    #[test]
    fn an_apply_takes_yaml_or_json_and_refuses_a_form() {
        assert!(spec_content_type(&HeaderMap::new()).is_ok());
        assert!(spec_content_type(&with_type("application/yaml; charset=utf-8")).is_ok());
        assert!(spec_content_type(&with_type("Application/JSON")).is_ok());
        let f = spec_content_type(&with_type("application/x-www-form-urlencoded"))
            .expect_err("a form is no spec");
        assert_eq!(f.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(f.message.contains("application/yaml"), "{}", f.message);
    }
}
