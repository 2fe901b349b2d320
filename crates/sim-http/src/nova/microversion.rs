//! Microversion negotiation and the version documents.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Value, json};

use crate::{App, errors, wire};

/// A compute API microversion, `2.x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Mv(pub(super) u32, pub(super) u32);

const MIN_VERSION: Mv = Mv(2, 1);
const MAX_VERSION: Mv = Mv(2, 93);

impl Mv {
    pub(super) fn at_least(self, minor: u32) -> bool {
        self >= Mv(2, minor)
    }
}

impl std::fmt::Display for Mv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

fn version_doc(app: &App) -> Value {
    json!({
        "id": "v2.1",
        "status": "CURRENT",
        "version": MAX_VERSION.to_string(),
        "min_version": MIN_VERSION.to_string(),
        "updated": "2013-07-23T11:33:21Z",
        "links": [
            {"rel": "self", "href": format!("{}/compute/v2.1/", app.base)},
            {"rel": "describedby", "type": "text/html", "href": "http://docs.openstack.org/"},
        ],
        "media-types": [{
            "base": "application/json",
            "type": "application/vnd.openstack.compute+json;version=2.1",
        }],
    })
}

pub(super) async fn versions(State(app): State<App>) -> Response {
    wire::json(StatusCode::OK, &json!({"versions": [version_doc(&app)]}))
}

pub(super) async fn version(State(app): State<App>) -> Response {
    wire::json(StatusCode::OK, &json!({"version": version_doc(&app)}))
}

/// The microversion a request asks for, from `OpenStack-API-Version: compute X` or
/// the legacy `X-OpenStack-Nova-API-Version: X`; 2.1 when it asks for none.
fn requested(headers: &HeaderMap) -> Result<Mv, String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let raw = header("openstack-api-version")
        .and_then(|v| {
            v.split(',').find_map(|part| {
                let mut words = part.split_whitespace();
                (words.next() == Some("compute")).then(|| words.next().unwrap_or("").to_string())
            })
        })
        .or_else(|| header("x-openstack-nova-api-version").map(|v| v.trim().to_string()));
    let Some(raw) = raw else {
        return Ok(MIN_VERSION);
    };
    if raw.eq_ignore_ascii_case("latest") {
        return Ok(MAX_VERSION);
    }
    let invalid = || {
        format!(
            "API Version String {raw} is of invalid format. Must be of format MajorNum.MinorNum."
        )
    };
    let (major, minor) = raw.split_once('.').ok_or_else(invalid)?;
    match (major.parse(), minor.parse()) {
        (Ok(a), Ok(b)) => Ok(Mv(a, b)),
        _ => Err(invalid()),
    }
}

/// Negotiates the microversion and stamps it on the response, as Nova does.
pub(super) async fn microversion(mut req: Request, next: Next) -> Response {
    let mv = match requested(req.headers()) {
        Ok(mv) if (MIN_VERSION..=MAX_VERSION).contains(&mv) => mv,
        Ok(mv) => {
            let message = format!(
                "Version {mv} is not supported by the API. Minimum is {MIN_VERSION} and maximum is {MAX_VERSION}."
            );
            return errors::nova(StatusCode::NOT_ACCEPTABLE, &message);
        }
        Err(message) => return errors::nova(StatusCode::BAD_REQUEST, &message),
    };
    req.extensions_mut().insert(mv);
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("compute {mv}")) {
        h.insert("openstack-api-version", v);
    }
    if let Ok(v) = HeaderValue::from_str(&mv.to_string()) {
        h.insert("x-openstack-nova-api-version", v);
    }
    h.insert(
        header::VARY,
        HeaderValue::from_static("OpenStack-API-Version, X-OpenStack-Nova-API-Version"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microversion_headers_parse() {
        let mut h = HeaderMap::new();
        assert_eq!(requested(&h), Ok(MIN_VERSION));
        h.insert(
            "openstack-api-version",
            HeaderValue::from_static("compute 2.60"),
        );
        assert_eq!(requested(&h), Ok(Mv(2, 60)));
        h.insert(
            "openstack-api-version",
            HeaderValue::from_static("compute latest"),
        );
        assert_eq!(requested(&h), Ok(MAX_VERSION));
        h.insert(
            "openstack-api-version",
            HeaderValue::from_static("compute two"),
        );
        assert!(requested(&h).is_err());
    }
}
