//! Whom the client trusts for an https:// daemon, and what it says when it trusts no one:
//! the system's CA roots plus the user's CA file (`--ca-file`, `FLIGHTDECK_CA_FILE`,
//! `caFile:`), and a refused certificate explained in plain words with what to do.

use std::error::Error;
use std::path::PathBuf;

use anyhow::anyhow;
use rustls::CertificateError;

use super::connect::Connection;
use super::render::human_duration;

/// The TLS of the client. A CA file is trusted *besides* the system's roots, not
/// instead of them: the file is often set once in the config file while `--server`
/// moves between a daemon with a private CA and one behind a proxy with a public
/// certificate, and a clouds.yaml `cacert` means the same (both go through
/// [`flightdeck_http::tls_trusting`]).
/// The CA file is read only for an https:// daemon: a `caFile:` in the config file
/// that names a file gone stale does not stop commands to a local plain-HTTP daemon.
pub fn client_tls(conn: &Connection) -> anyhow::Result<rustls::ClientConfig> {
    let https = conn.url.starts_with("https://");
    match &conn.ca_file {
        Some((path, from)) if https => flightdeck_http::tls_trusting(path)
            .map_err(|e| anyhow!("the CA file {} (from {from}) {e}", path.display())),
        _ => flightdeck_http::platform_tls().map_err(anyhow::Error::msg),
    }
}

/// The certificate problem behind a failed connection, if the daemon's certificate was
/// refused: rustls's error, found down the chain of causes.
pub fn certificate_error<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a CertificateError> {
    causes(e).find_map(|err| match err.downcast_ref::<rustls::Error>() {
        Some(rustls::Error::InvalidCertificate(c)) => Some(c),
        _ => None,
    })
}

/// Whether the connection was refused: nothing listens at the daemon's address.
pub fn is_refused(e: &(dyn Error + 'static)) -> bool {
    causes(e).any(|err| {
        err.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    })
}

/// `e` and its causes. An `io::Error`'s `source()` skips the error it wraps (the
/// connector wraps tokio-rustls's `io::Error`, which wraps rustls's error, in another),
/// so the next cause of an `io::Error` is the error inside it.
fn causes<'a>(e: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(e), |&err| match err.downcast_ref::<std::io::Error>() {
        Some(io) => io.get_ref().map(|inner| inner as &(dyn Error + 'static)),
        None => err.source(),
    })
}

/// What is wrong with the daemon's certificate and what to do, in plain words. `host`
/// is the host the server URL names; `ca_file` the CA file in use, with where it came
/// from.
pub fn advice(
    problem: &CertificateError,
    host: &str,
    ca_file: Option<&(PathBuf, String)>,
) -> String {
    match problem {
        CertificateError::UnknownIssuer => match ca_file {
            None => "the daemon's certificate is signed by a CA this machine does not trust: pass --ca-file CA.pem, set FLIGHTDECK_CA_FILE or `caFile:` in the config file".into(),
            Some((path, from)) => format!(
                "the daemon's certificate is signed by a CA that neither this machine nor the CA file {} (from {from}) holds: give the CA that signed it with --ca-file, FLIGHTDECK_CA_FILE or `caFile:` in the config file",
                path.display()
            ),
        },
        CertificateError::Other(other) if is_ca_used_as_end_entity(other) => {
            "the daemon serves a CA certificate as its own (a self-signed certificate with the CA flag): give `flightdeck serve` a leaf certificate signed by that CA (--tls-cert), and pass the CA to the CLI with --ca-file".into()
        }
        CertificateError::NotValidForName => not_for_host(host, &[]),
        CertificateError::NotValidForNameContext { presented, .. } => not_for_host(host, presented),
        CertificateError::Expired => "the daemon's certificate has expired: give `flightdeck serve` a new one (--tls-cert), or check this machine's clock".into(),
        CertificateError::ExpiredContext { time, not_after } => format!(
            "the daemon's certificate expired {} ago: give `flightdeck serve` a new one (--tls-cert), or check this machine's clock",
            human_duration(i128::from(time.as_secs()) - i128::from(not_after.as_secs()))
        ),
        CertificateError::NotValidYet => "the daemon's certificate is not valid yet: check this machine's clock and the clock of the machine that made the certificate".into(),
        CertificateError::NotValidYetContext { time, not_before } => format!(
            "the daemon's certificate becomes valid only in {}: check this machine's clock and the clock of the machine that made the certificate",
            human_duration(i128::from(not_before.as_secs()) - i128::from(time.as_secs()))
        ),
        other => format!("the daemon's certificate was refused: {other}"),
    }
}

/// webpki's `CaUsedAsEndEntity`, which rustls passes on as an `Other` error.
fn is_ca_used_as_end_entity(other: &rustls::OtherError) -> bool {
    matches!(
        other.0.downcast_ref::<webpki::Error>(),
        Some(webpki::Error::CaUsedAsEndEntity)
    )
}

fn not_for_host(host: &str, presented: &[String]) -> String {
    // webpki lists the certificate's names as it debug-prints them: `DnsName("x")`.
    let names: Vec<&str> = presented
        .iter()
        .filter_map(|p| p.strip_prefix("DnsName(\"")?.strip_suffix("\")"))
        .collect();
    let covers = if names.is_empty() {
        String::new()
    } else {
        format!(" (it covers {})", names.join(", "))
    };
    format!(
        "the daemon's certificate does not cover {host}, the host the server URL names{covers}: name the daemon by a host its certificate covers, or give `flightdeck serve` a certificate for {host} (--tls-cert)"
    )
}
