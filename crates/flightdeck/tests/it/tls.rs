//! The client against an https:// stand-in for the daemon: a certificate signed by a CA
//! the machine does not know is refused with what to do, and trusted once the CA file is
//! given; a CA certificate served as the daemon's own is explained.
//!
//! The certificates are throwaway ones made for tests, guarding nothing:
//! `crates/http/tests/data/localhost.{crt,key}` (for `localhost` and 127.0.0.1, signed by
//! `test-ca.crt` there) and `data/self-signed-ca.{crt,key}` here (a self-signed
//! certificate with the CA flag, for `localhost` and 127.0.0.1, as a user might make
//! with `openssl req -x509`).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn leaf() -> (PathBuf, PathBuf) {
    (
        data("../http/tests/data/localhost.crt"),
        data("../http/tests/data/localhost.key"),
    )
}

fn self_signed_ca() -> (PathBuf, PathBuf) {
    (
        data("tests/data/self-signed-ca.crt"),
        data("tests/data/self-signed-ca.key"),
    )
}

/// An https:// stand-in on loopback that serves `cert` and answers every request with
/// an empty cluster list; its base URL.
fn tls_stand_in((cert, key): (PathBuf, PathBuf)) -> String {
    let certs = vec![CertificateDer::from_pem_file(&cert).expect("test certificate")];
    let key = PrivateKeyDer::from_pem_file(&key).expect("test key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("server config");
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("https://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { return };
            let Ok(conn) = rustls::ServerConnection::new(config.clone()) else {
                return;
            };
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            // A refused handshake ends here, on the first read.
            let mut request = Vec::new();
            let mut buf = [0_u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            if request.is_empty() {
                continue;
            }
            let body = r#"{"items":[]}"#;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tls.write_all(answer.as_bytes());
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    url
}

/// Runs the binary with an empty environment: HOME in `home`, and `env`.
fn flightdeck(home: &Path, env: &[(&str, &Path)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .envs(env.iter().copied())
        .output()
        .expect("flightdeck runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn a_daemon_signed_by_an_unknown_ca_is_refused_with_advice_and_trusted_with_its_ca_file() {
    let home = tempfile::tempdir().expect("tempdir");
    let url = tls_stand_in(leaf());
    let out = flightdeck(home.path(), &[], &["get", "clusters", "--server", &url]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "flightdeck: cannot trust the flightdeck daemon at {url} (from --server): the daemon's certificate is signed by a CA this machine does not trust: pass --ca-file CA.pem, set FLIGHTDECK_CA_FILE or `caFile:` in the config file\n"
        )
    );

    let ca = data("../http/tests/data/test-ca.crt");
    let out = flightdeck(
        home.path(),
        &[],
        &["get", "clusters", "--server", &url, "--ca-file", arg(&ca)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("No clusters found."));

    // The same CA from the environment; a CA file that does not hold the signer says so.
    let out = flightdeck(
        home.path(),
        &[("FLIGHTDECK_CA_FILE", &ca)],
        &["get", "clusters", "--server", &url],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (other_ca, _) = self_signed_ca();
    let out = flightdeck(
        home.path(),
        &[("FLIGHTDECK_CA_FILE", &other_ca)],
        &["get", "clusters", "--server", &url],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "signed by a CA that neither this machine nor the CA file {} (from $FLIGHTDECK_CA_FILE) holds",
            other_ca.display()
        )),
        "{err}"
    );
}

#[test]
fn a_ca_certificate_served_as_the_daemon_s_own_is_explained() {
    let home = tempfile::tempdir().expect("tempdir");
    let url = tls_stand_in(self_signed_ca());
    let advice = "the daemon serves a CA certificate as its own (a self-signed certificate with the CA flag): give `flightdeck serve` a leaf certificate signed by that CA (--tls-cert), and pass the CA to the CLI with --ca-file";
    let out = flightdeck(home.path(), &[], &["get", "clusters", "--server", &url]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "flightdeck: cannot trust the flightdeck daemon at {url} (from --server): {advice}\n"
        )
    );
    assert!(!err.contains("is `flightdeck serve` running"), "{err}");
    // Trusting the certificate as a CA does not make it a server's certificate.
    let (ca, _) = self_signed_ca();
    let out = flightdeck(
        home.path(),
        &[],
        &["get", "clusters", "--server", &url, "--ca-file", arg(&ca)],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(advice), "{err}");
}

#[test]
fn a_ca_file_that_cannot_be_used_is_named_with_where_it_came_from() {
    let home = tempfile::tempdir().expect("tempdir");
    let missing = home.path().join("missing.pem");
    let out = flightdeck(
        home.path(),
        &[],
        &[
            "get",
            "clusters",
            "--server",
            "https://127.0.0.1:1",
            "--ca-file",
            arg(&missing),
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!(
            "flightdeck: the CA file {} (from --ca-file) cannot be read: ",
            missing.display()
        )),
        "{err}"
    );
    // The config file's `caFile:` is relative to the config file; a key is no certificate.
    let config_dir = home.path().join(".config/flightdeck");
    std::fs::create_dir_all(&config_dir).expect("mkdir");
    std::fs::copy(self_signed_ca().1, config_dir.join("daemon.key")).expect("copy");
    std::fs::write(config_dir.join("config.yaml"), "caFile: daemon.key\n").expect("write");
    let out = flightdeck(
        home.path(),
        &[],
        &["get", "clusters", "--server", "https://127.0.0.1:1"],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "flightdeck: the CA file {} (from {}) holds no certificate (no -----BEGIN CERTIFICATE----- block)\n",
            config_dir.join("daemon.key").display(),
            config_dir.join("config.yaml").display()
        )
    );
    // The same stale `caFile:` does not stand in the way of a plain-HTTP daemon: the
    // command gets as far as the connection.
    let out = flightdeck(
        home.path(),
        &[],
        &["get", "clusters", "--server", "http://127.0.0.1:1"],
    );
    let err = text(&out.stderr);
    assert!(err.contains("cannot reach the flightdeck daemon"), "{err}");
    assert!(!err.contains("CA file"), "{err}");
}

#[test]
fn only_a_refused_connection_asks_whether_serve_runs() {
    let home = tempfile::tempdir().expect("tempdir");
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let url = format!("https://127.0.0.1:{port}");
    let out = flightdeck(home.path(), &[], &["get", "clusters", "--server", &url]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!(
            "flightdeck: cannot reach the flightdeck daemon at {url} (from --server): "
        )) && err.ends_with("; is `flightdeck serve` running?\n"),
        "{err}"
    );
}
