//! The TLS every cloud client is built with, set up once per process
//! (`platform_tls`), still verifies: a server whose certificate no system root signed
//! is refused, and the same server is reached by a client that trusts its certificate.
//!
//! `data/localhost.{crt,key}` is a throwaway certificate for `localhost` and
//! 127.0.0.1, signed by the throwaway `data/test-ca.crt`, made for this test: no key
//! here guards anything.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const CERT: &[u8] = include_bytes!("data/localhost.crt");
const KEY: &[u8] = include_bytes!("data/localhost.key");
const CA: &[u8] = include_bytes!("data/test-ca.crt");

/// An HTTPS server on loopback that answers every request `200 ok`; its base URL.
async fn server_of_an_unknown_ca() -> String {
    flightdeck_http::ensure_crypto_provider();
    let certs = vec![CertificateDer::from_pem_slice(CERT).expect("test certificate")];
    let key = PrivateKeyDer::from_pem_slice(KEY).expect("test key");
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = vec![0_u8; 4096];
                let _ = tls.read(&mut buf).await;
                let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
                let _ = tls.write_all(answer).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    format!("https://localhost:{port}/")
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[tokio::test]
async fn the_shared_tls_refuses_a_certificate_no_system_root_vouches_for() {
    let url = server_of_an_unknown_ca().await;
    let tls = flightdeck_http::platform_tls().expect("the system's CA store loads");
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .build()
        .expect("client");
    let refused = client.get(&url).send().await.expect_err("refused");
    let chain = error_chain(&refused).to_lowercase();
    assert!(chain.contains("certificate"), "the error says why: {chain}");

    // The same server, trusted: the refusal above was about trust, not the server.
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(CA).expect("test CA"))
        .expect("root");
    let trusting = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(trusting)
        .build()
        .expect("client");
    let answer = client.get(&url).send().await.expect("reached");
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.expect("body"), "ok");
}

#[test]
fn the_shared_tls_is_built_once_and_speaks_http_1_1() {
    let a = flightdeck_http::platform_tls().expect("loads");
    let b = flightdeck_http::platform_tls().expect("loads");
    assert_eq!(a.alpn_protocols, vec![b"http/1.1".to_vec()]);
    assert!(
        Arc::ptr_eq(&a.crypto_provider().clone(), &b.crypto_provider().clone()),
        "the second call hands out the configuration made by the first"
    );
}

#[tokio::test]
async fn a_ca_file_is_trusted_beside_the_system_roots() {
    let url = server_of_an_unknown_ca().await;
    let ca_file = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/test-ca.crt");
    let tls = flightdeck_http::tls_trusting(std::path::Path::new(ca_file)).expect("CA file");
    assert_eq!(tls.alpn_protocols, vec![b"http/1.1".to_vec()]);
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .build()
        .expect("client");
    let answer = client.get(&url).send().await.expect("reached");
    assert_eq!(answer.text().await.expect("body"), "ok");
}

#[test]
fn a_ca_file_without_a_certificate_is_refused_with_the_reason() {
    let dir = std::env::temp_dir().join(format!("fd-http-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let key_only = dir.join("key-only.pem");
    std::fs::write(&key_only, KEY).expect("write");
    let why = |path: &std::path::Path| match flightdeck_http::tls_trusting(path) {
        Ok(_) => panic!("{} is trusted", path.display()),
        Err(e) => e.to_string(),
    };
    assert_eq!(
        why(&key_only),
        "holds no certificate (no -----BEGIN CERTIFICATE----- block)"
    );
    assert!(
        why(&dir.join("missing.pem")).starts_with("cannot be read: "),
        "{}",
        why(&dir.join("missing.pem"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}
