//! The fleet's web view, served at `/` from assets compiled into the binary: one page,
//! its script and its style sheet. The page holds no data: it asks for a bearer token,
//! keeps it in the tab's session storage (never in a URL or a cookie), and reads the
//! same API as the CLI with it. So the assets are public, and the API decides what a
//! token may see or do. A strict Content-Security-Policy allows only these assets and
//! same-origin API calls.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// Each asset: its path, its body and its content type.
const ASSETS: [(&str, &str, &str); 4] = [
    (
        "/",
        include_str!("../web/index.html"),
        "text/html; charset=utf-8",
    ),
    (
        "/ui/app.js",
        include_str!("../web/app.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "/ui/app.css",
        include_str!("../web/app.css"),
        "text/css; charset=utf-8",
    ),
    (
        "/ui/icon.svg",
        include_str!("../web/icon.svg"),
        "image/svg+xml",
    ),
];

/// Whether `path` is one of the web view's assets (public: they carry no data).
pub fn is_asset(path: &str) -> bool {
    ASSETS.iter().any(|(p, _, _)| *p == path)
}

/// Scripts, styles and connections from this origin only; no frames, no plugins, no
/// inline script.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The web view's routes.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    ASSETS
        .iter()
        .fold(Router::new(), |router, &(path, body, content_type)| {
            router.route(path, get(move || async move { asset(body, content_type) }))
        })
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}
