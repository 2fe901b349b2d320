//! Bearer tokens with two roles: a viewer may look, an admin may also change things.
//! `serve` creates both tokens on first start, each in a file only its owner can read,
//! and never prints or logs them. Tokens are compared in constant time.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::error::Failure;

pub const ADMIN_TOKEN_FILE: &str = "admin.token";
pub const VIEWER_TOKEN_FILE: &str = "viewer.token";
/// Bytes of randomness in a token.
const TOKEN_BYTES: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Viewer,
    Admin,
}

pub struct Tokens {
    admin: String,
    viewer: String,
    pub admin_file: PathBuf,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("admin_file", &self.admin_file)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// Reads the tokens in `dir`, creating each that is missing (mode 0600).
    pub fn load_or_create(dir: &Path) -> anyhow::Result<Tokens> {
        let admin_file = dir.join(ADMIN_TOKEN_FILE);
        Ok(Tokens {
            admin: read_or_create(&admin_file)?,
            viewer: read_or_create(&dir.join(VIEWER_TOKEN_FILE))?,
            admin_file,
        })
    }

    /// The role of a presented token, if it is one of ours.
    pub fn role_of(&self, presented: &str) -> Option<Role> {
        let p = presented.as_bytes();
        // Both comparisons always run, so the time taken does not tell which matched.
        let admin: bool = p.ct_eq(self.admin.as_bytes()).into();
        let viewer: bool = p.ct_eq(self.viewer.as_bytes()).into();
        if admin {
            Some(Role::Admin)
        } else if viewer {
            Some(Role::Viewer)
        } else {
            None
        }
    }
}

fn read_or_create(path: &Path) -> anyhow::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => {
            let t = t.trim().to_string();
            if t.len() < 32 {
                anyhow::bail!(
                    "{}: the token is shorter than 32 characters; remove the file to have a new one made",
                    path.display()
                );
            }
            return Ok(t);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    }
    let token = random_token()?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
    f.write_all(format!("{token}\n").as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(token)
}

/// A token from the operating system's randomness (the daemon's edge; never the engine).
fn random_token() -> anyhow::Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; TOKEN_BYTES];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| anyhow::anyhow!("cannot read /dev/urandom for a token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Paths that need no token: probes, and the web view's assets (they carry no data; the
/// page asks for a token and reads the API with it).
fn is_public(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz") || crate::web::is_asset(path)
}

/// Whether a request only looks.
fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD)
}

/// Lets a request through if its token allows it, with the token's [`Role`] in the
/// request's extensions.
pub async fn authorize(
    State(tokens): State<Arc<Tokens>>,
    mut req: Request,
    next: Next,
) -> Response {
    if is_public(req.uri().path()) {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(presented) = presented else {
        return unauthorized(
            "missing bearer token: send `Authorization: Bearer <token>`; the daemon keeps its tokens in admin.token and viewer.token in its state directory",
            "Bearer realm=\"flightdeck\"",
        );
    };
    match tokens.role_of(presented) {
        None => unauthorized(
            "the bearer token is not one of this flightdeck's tokens",
            "Bearer realm=\"flightdeck\", error=\"invalid_token\"",
        ),
        Some(Role::Viewer) if !is_read(req.method()) => Failure::new(
            StatusCode::FORBIDDEN,
            format!(
                "{} {}: this token has the viewer role, which may only look; applying, deleting, resuming and breaking the simulator need the admin token",
                req.method(),
                req.uri().path()
            ),
        )
        .into_response(),
        Some(role) => {
            req.extensions_mut().insert(role);
            next.run(req).await
        }
    }
}

/// A 401 with the challenge RFC 6750 asks for; it names no path of the daemon's host.
fn unauthorized(message: &str, challenge: &'static str) -> Response {
    let mut r = Failure::new(StatusCode::UNAUTHORIZED, message).into_response();
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        axum::http::HeaderValue::from_static(challenge),
    );
    r
}
