//! What every HTTP client flightdeck points at a cloud shares:
//! - **no redirects**: a redirect would carry a password, a token or a request body to
//!   wherever the server says, so none is followed; a 3xx answer is an error that names
//!   where the server wanted to send the request (see [`redirect_refused`]);
//! - **bounded bodies**: an answer is read up to a limit and no further
//!   ([`read_body`]), so a broken or hostile server cannot take the process's memory;
//! - **TLS set up once**: the platform's verifier over the ring provider
//!   ([`platform_tls`]), read from the system's CA store once per process; a client
//!   given its own CA file adds it to the platform's roots ([`tls_trusting`]).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Installs ring as the process's rustls provider unless one is already installed.
pub fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err only means another thread installed one first: fine either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// TLS as reqwest sets it up by default (the platform's certificate verifier over the
/// ring provider, TLS 1.2 and 1.3, HTTP/1.1 by ALPN), built once per process and
/// handed to each client with `use_preconfigured_tls`. Building it reads the system's
/// CA store, about 2 ms, which every client built paid before; a root added to the
/// system later is trusted after a restart. A client given its own CA file takes
/// [`tls_trusting`] instead; one told not to verify builds its own.
pub fn platform_tls() -> Result<rustls::ClientConfig, String> {
    static TLS: OnceLock<Result<rustls::ClientConfig, String>> = OnceLock::new();
    TLS.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
            .map_err(|e| format!("cannot set up TLS from the system's CA store: {e}"))?;
        client_tls(provider, verifier)
    })
    .clone()
}

/// [`platform_tls`] that also trusts the CA certificates of the PEM file `ca_file` (a
/// clouds.yaml `cacert`, the CLI's `--ca-file`): the platform's roots stay trusted, as
/// a CA bundle given to reqwest's `tls_certs_merge` would leave them. Built anew on
/// each call: such a client is made once per cloud or per command.
pub fn tls_trusting(ca_file: &Path) -> Result<rustls::ClientConfig, CaFileError> {
    let pem = std::fs::read(ca_file).map_err(CaFileError::Unreadable)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CaFileError::NotPem(e.to_string()))?;
    if certs.is_empty() {
        return Err(CaFileError::NoCertificate);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // A certificate that cannot be a root is refused here, not ignored: the user named
    // this file to be trusted.
    let verifier =
        rustls_platform_verifier::Verifier::new_with_extra_roots(certs, provider.clone())
            .map_err(|e| CaFileError::Refused(e.to_string()))?;
    client_tls(provider, verifier).map_err(CaFileError::Refused)
}

fn client_tls(
    provider: Arc<rustls::crypto::CryptoProvider>,
    verifier: rustls_platform_verifier::Verifier,
) -> Result<rustls::ClientConfig, String> {
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tls)
}

/// Why a CA file gives nothing to trust. Its text is a predicate, to follow the file's
/// name: "the CA file ca.pem {error}".
#[derive(Debug)]
pub enum CaFileError {
    /// It could not be read.
    Unreadable(std::io::Error),
    /// A `-----BEGIN CERTIFICATE-----` block in it is not PEM.
    NotPem(String),
    /// It holds no `-----BEGIN CERTIFICATE-----` block.
    NoCertificate,
    /// A certificate in it cannot be a root, or TLS cannot be set up with it.
    Refused(String),
}

impl std::fmt::Display for CaFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaFileError::Unreadable(e) => write!(f, "cannot be read: {e}"),
            CaFileError::NotPem(e) => write!(f, "is not PEM: {e}"),
            CaFileError::NoCertificate => {
                f.write_str("holds no certificate (no -----BEGIN CERTIFICATE----- block)")
            }
            CaFileError::Refused(e) => write!(f, "cannot be trusted: {e}"),
        }
    }
}

impl std::error::Error for CaFileError {}

/// The redirect policy of every cloud client: none is followed.
pub fn no_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::none()
}

/// Why an answer's body could not be read.
#[derive(Debug)]
pub enum BodyError {
    /// It was longer than the limit.
    TooLarge { limit: usize },
    /// The connection failed while reading it.
    Transport(reqwest::Error),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge { limit } => write!(
                f,
                "the answer is larger than {limit} bytes, the most flightdeck reads from one response"
            ),
            BodyError::Transport(e) => write!(f, "the answer could not be read: {e}"),
        }
    }
}

/// The body of `resp`, at most `limit` bytes: a longer body is [`BodyError::TooLarge`]
/// as soon as it passes the limit (a `Content-Length` over it is refused before
/// reading anything).
pub async fn read_body(mut resp: reqwest::Response, limit: usize) -> Result<Vec<u8>, BodyError> {
    if resp
        .content_length()
        .is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX))
    {
        return Err(BodyError::TooLarge { limit });
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(BodyError::Transport)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The body of `resp` as text (invalid UTF-8 replaced), at most `limit` bytes.
pub async fn read_text(resp: reqwest::Response, limit: usize) -> Result<String, BodyError> {
    let body = read_body(resp, limit).await?;
    Ok(String::from_utf8(body).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into()))
}

/// For a redirect (3xx) answer, why it is refused: it names where the server wanted the
/// request to go, with any credentials in that URL left out. `None` for any other status.
pub fn redirect_refused(resp: &reqwest::Response) -> Option<String> {
    let status = resp.status();
    if !status.is_redirection() {
        return None;
    }
    let location = resp
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(|l| match resp.url().join(l) {
            Ok(mut u) => {
                let _ = u.set_password(None);
                let _ = u.set_username("");
                u.to_string()
            }
            Err(_) => "an unreadable Location".to_string(),
        })
        .unwrap_or_else(|| "no Location".to_string());
    let mut from = resp.url().clone();
    let _ = from.set_password(None);
    let _ = from.set_username("");
    from.set_query(None);
    Some(format!(
        "{from} answered HTTP {} redirecting to {location}; flightdeck follows no redirects, so that credentials never leave the endpoint they were given for: configure the final URL",
        status.as_u16()
    ))
}

/// The header a flightdeck replica names itself in on every call to a cloud: its name
/// and the claim revision (fencing token) it acts under, e.g. `replica=r1 claim=4711`.
/// Clouds ignore it; the simulator records it in its mutation log.
pub const CALLER_HEADER: &str = "X-Flightdeck-Caller";

tokio::task_local! {
    static CALLER: String;
}

/// Runs `calls` with every cloud request they send naming `caller` in [`CALLER_HEADER`].
pub async fn as_caller<F: std::future::Future>(caller: String, calls: F) -> F::Output {
    CALLER.scope(caller, calls).await
}

/// Who the request being built is sent by, if [`as_caller`] said.
pub fn caller() -> Option<String> {
    CALLER.try_with(Clone::clone).ok()
}

/// Says, right before a request goes on the wire, whether it still may: `Err(why)` once
/// the replica's claim behind it moved or its lease ran out on its own clock.
pub type SendGuard = std::sync::Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

tokio::task_local! {
    static GUARD: SendGuard;
}

/// Runs `calls` with every cloud request they send asking `guard` first, each attempt
/// (a retry, a request sent again after a new token, one held in a rate limiter): a
/// process paused between the engine's last fence check and the send must not send
/// once it has lost the claim (SIGSTOP trials found a DELETE sent so).
pub async fn with_send_guard<F: std::future::Future>(guard: SendGuard, calls: F) -> F::Output {
    GUARD.scope(guard, calls).await
}

/// Whether the request about to be sent still may be (see [`with_send_guard`]); `Ok`
/// outside a guarded reconcile.
pub fn may_send() -> Result<(), String> {
    GUARD.try_with(|g| g()).unwrap_or(Ok(()))
}
