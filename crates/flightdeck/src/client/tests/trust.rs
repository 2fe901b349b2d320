use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{ServerName, UnixTime};
use rustls::{CertificateError, OtherError};

use crate::client::trust::{advice, certificate_error, is_refused};

const DAY_SECS: u64 = 24 * 3600;

fn at(secs: u64) -> UnixTime {
    UnixTime::since_unix_epoch(Duration::from_secs(secs))
}

#[test]
fn an_unknown_issuer_says_how_to_trust_the_ca() {
    assert_eq!(
        advice(&CertificateError::UnknownIssuer, "fleet.example", None),
        "the daemon's certificate is signed by a CA this machine does not trust: pass --ca-file CA.pem, set FLIGHTDECK_CA_FILE or `caFile:` in the config file"
    );
    let ca = (PathBuf::from("/etc/fleet-ca.pem"), "--ca-file".to_string());
    let text = advice(&CertificateError::UnknownIssuer, "fleet.example", Some(&ca));
    assert!(
        text.contains(
            "neither this machine nor the CA file /etc/fleet-ca.pem (from --ca-file) holds"
        ),
        "{text}"
    );
}

#[test]
fn a_ca_served_as_the_daemon_s_certificate_says_to_serve_a_leaf() {
    let problem = CertificateError::Other(OtherError(Arc::new(webpki::Error::CaUsedAsEndEntity)));
    assert_eq!(
        advice(&problem, "fleet.example", None),
        "the daemon serves a CA certificate as its own (a self-signed certificate with the CA flag): give `flightdeck serve` a leaf certificate signed by that CA (--tls-cert), and pass the CA to the CLI with --ca-file"
    );
}

#[test]
fn a_certificate_for_another_host_names_the_url_s_host() {
    let problem = CertificateError::NotValidForNameContext {
        expected: ServerName::try_from("fleet.example")
            .expect("a name")
            .to_owned(),
        presented: vec![
            "DnsName(\"localhost\")".into(),
            "DnsName(\"*.lab.example\")".into(),
        ],
    };
    assert_eq!(
        advice(&problem, "fleet.example", None),
        "the daemon's certificate does not cover fleet.example, the host the server URL names (it covers localhost, *.lab.example): name the daemon by a host its certificate covers, or give `flightdeck serve` a certificate for fleet.example (--tls-cert)"
    );
    let text = advice(&CertificateError::NotValidForName, "10.0.0.5", None);
    assert!(
        text.starts_with(
            "the daemon's certificate does not cover 10.0.0.5, the host the server URL names: "
        ),
        "{text}"
    );
}

#[test]
fn an_expired_or_future_certificate_says_by_how_much() {
    let now = 100 * DAY_SECS;
    let expired = CertificateError::ExpiredContext {
        time: at(now),
        not_after: at(now - 3 * DAY_SECS),
    };
    assert_eq!(
        advice(&expired, "fleet.example", None),
        "the daemon's certificate expired 3d ago: give `flightdeck serve` a new one (--tls-cert), or check this machine's clock"
    );
    let early = CertificateError::NotValidYetContext {
        time: at(now),
        not_before: at(now + 5 * 3600),
    };
    assert_eq!(
        advice(&early, "fleet.example", None),
        "the daemon's certificate becomes valid only in 5h: check this machine's clock and the clock of the machine that made the certificate"
    );
    assert!(advice(&CertificateError::Expired, "h", None).contains("has expired"));
    assert!(advice(&CertificateError::NotValidYet, "h", None).contains("not valid yet"));
}

#[test]
fn the_certificate_problem_is_found_inside_an_io_error() {
    // As tokio-rustls hands it up: rustls's error inside an io::Error, whose source()
    // skips it.
    let io = std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
    );
    assert_eq!(
        certificate_error(&io),
        Some(&CertificateError::UnknownIssuer)
    );
    assert!(!is_refused(&io));
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    assert_eq!(certificate_error(&refused), None);
    assert!(is_refused(&refused));
}
