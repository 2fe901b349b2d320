//! A workload cluster's PKI, as kubeadm lays it out under `/etc/kubernetes/pki`: the
//! cluster CA (`ca.crt`/`ca.key`), the etcd CA (`etcd/ca.*`), the front-proxy CA
//! (`front-proxy-ca.*`) and the service-account signing key pair (`sa.key`/`sa.pub`).
//! flightdeck makes them once per cluster and hands them to the machine that runs
//! `kubeadm init` (and to control-plane machines that join); kubeadm then makes every
//! leaf certificate from them.
//!
//! Keys are ECDSA P-256 (kubeadm's `ECDSA-P256`), made with rcgen on ring, the
//! workspace's one crypto backend; certificates are X.509 v3 with kubeadm's subject
//! names and ten years of validity. Validity starts at the instant the caller gives (the
//! engine's clock, never the system's). Private keys are [`Secret`]s: their `Debug`
//! prints no byte of them, and they are wiped when dropped.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyIdMethod,
    KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, PublicKeyData,
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use zeroize::Zeroize;

/// How long a CA made here is valid (kubeadm's CAs: ten years).
pub const CA_VALIDITY_SECS: i64 = 10 * 365 * 24 * 3600;

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("cannot make the {what} of cluster {cluster}: {message}")]
    Make {
        what: &'static str,
        cluster: String,
        message: String,
    },
    #[error("the {what} of cluster {cluster} is not usable: {message}")]
    Unusable {
        what: &'static str,
        cluster: String,
        message: String,
    },
}

/// Secret text (a private key in PEM): never printed, wiped when dropped.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: String) -> Secret {
        Secret(text)
    }

    /// The secret text, for the one place that must hand it on (a machine's bootstrap
    /// data, sealed storage).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

/// A certificate (PEM, public) and its private key (PEM, secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertAndKey {
    pub cert_pem: String,
    pub key_pem: Secret,
}

/// Everything a cluster's `kubeadm init` needs that must not be made on the machine:
/// made once per cluster, kept by flightdeck (sealed at rest), the same for every
/// control-plane machine of the cluster's life.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPki {
    /// The cluster's name, written into each CA's subject.
    pub cluster: String,
    /// `ca.crt`/`ca.key`: signs the API server's, the kubelets' and the clients'
    /// certificates (subject `CN=kubernetes`, as kubeadm's).
    pub cluster_ca: CertAndKey,
    /// `etcd/ca.crt`/`etcd/ca.key` (`CN=etcd-ca`).
    pub etcd_ca: CertAndKey,
    /// `front-proxy-ca.crt`/`front-proxy-ca.key` (`CN=front-proxy-ca`).
    pub front_proxy_ca: CertAndKey,
    /// `sa.pub` (PEM public key) and `sa.key`: signs service-account tokens.
    pub service_account_pub: String,
    pub service_account_key: Secret,
}

/// The three CAs, by file stem and subject common name.
const CAS: [(&str, &str); 3] = [
    ("cluster CA", "kubernetes"),
    ("etcd CA", "etcd-ca"),
    ("front-proxy CA", "front-proxy-ca"),
];

impl ClusterPki {
    /// Makes the PKI of `cluster`, its certificates valid from `now` (Unix seconds) for
    /// [`CA_VALIDITY_SECS`].
    pub fn generate(cluster: &str, now_unix_secs: i64) -> Result<ClusterPki, PkiError> {
        let [cluster_ca, etcd_ca, front_proxy_ca] =
            CAS.map(|(what, cn)| make_ca(cluster, what, cn, now_unix_secs));
        let sa = new_key(cluster, "service-account key pair")?;
        Ok(ClusterPki {
            cluster: cluster.to_string(),
            cluster_ca: cluster_ca?,
            etcd_ca: etcd_ca?,
            front_proxy_ca: front_proxy_ca?,
            service_account_pub: sa.public_key_pem(),
            service_account_key: Secret::new(sa.serialize_pem()),
        })
    }

    /// kubeadm's `--discovery-token-ca-cert-hash` for this cluster's CA:
    /// `sha256:<hex of the SHA-256 of its SubjectPublicKeyInfo>`.
    pub fn discovery_hash(&self) -> Result<String, PkiError> {
        let key = KeyPair::from_pem(self.cluster_ca.key_pem.expose()).map_err(|e| {
            PkiError::Unusable {
                what: "cluster CA key",
                cluster: self.cluster.clone(),
                message: e.to_string(),
            }
        })?;
        Ok(discovery_hash(&key.subject_public_key_info()))
    }

    /// Signs a client certificate for `common_name` in the groups `organizations` with
    /// the cluster CA, valid from `now_unix_secs` for `ttl_secs`: flightdeck's own
    /// access, or a kubeconfig it hands out. Answers the certificate and a fresh key.
    pub fn issue_client(
        &self,
        common_name: &str,
        organizations: &[&str],
        now_unix_secs: i64,
        ttl_secs: i64,
    ) -> Result<CertAndKey, PkiError> {
        let unusable = |message: String| PkiError::Unusable {
            what: "cluster CA",
            cluster: self.cluster.clone(),
            message,
        };
        let ca_key = KeyPair::from_pem(self.cluster_ca.key_pem.expose())
            .map_err(|e| unusable(e.to_string()))?;
        let issuer = Issuer::new(
            ca_params(&self.cluster, "kubernetes", now_unix_secs)?,
            ca_key,
        );
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(|e| unusable(e.to_string()))?;
        let mut dn = DistinguishedName::new();
        for o in organizations {
            dn.push(DnType::OrganizationName, *o);
        }
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.not_before = instant(&self.cluster, now_unix_secs)?;
        params.not_after = instant(&self.cluster, now_unix_secs.saturating_add(ttl_secs))?;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        let key = new_key(&self.cluster, "client key")?;
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(|e| unusable(e.to_string()))?;
        Ok(CertAndKey {
            cert_pem: cert.pem(),
            key_pem: Secret::new(key.serialize_pem()),
        })
    }
}

/// kubeadm's discovery hash of a CA whose SubjectPublicKeyInfo (DER) is `spki`.
pub fn discovery_hash(spki: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, spki);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn new_key(cluster: &str, what: &'static str) -> Result<KeyPair, PkiError> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| PkiError::Make {
        what,
        cluster: cluster.to_string(),
        message: e.to_string(),
    })
}

fn instant(cluster: &str, unix_secs: i64) -> Result<OffsetDateTime, PkiError> {
    OffsetDateTime::from_unix_timestamp(unix_secs).map_err(|e| PkiError::Make {
        what: "certificate validity",
        cluster: cluster.to_string(),
        message: e.to_string(),
    })
}

/// The parameters of a CA of `cluster` with subject `CN=<common_name>`: the same each
/// time they are made again, so that an [`Issuer`] made from them signs as the CA.
fn ca_params(cluster: &str, common_name: &str, now: i64) -> Result<CertificateParams, PkiError> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| PkiError::Make {
        what: "CA",
        cluster: cluster.to_string(),
        message: e.to_string(),
    })?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    params.key_identifier_method = KeyIdMethod::Sha256;
    params.not_before = instant(cluster, now)?;
    params.not_after = instant(cluster, now.saturating_add(CA_VALIDITY_SECS))?;
    Ok(params)
}

fn make_ca(
    cluster: &str,
    what: &'static str,
    common_name: &str,
    now: i64,
) -> Result<CertAndKey, PkiError> {
    let key = new_key(cluster, what)?;
    let cert = ca_params(cluster, common_name, now)?
        .self_signed(&key)
        .map_err(|e| PkiError::Make {
            what,
            cluster: cluster.to_string(),
            message: e.to_string(),
        })?;
    Ok(CertAndKey {
        cert_pem: cert.pem(),
        key_pem: Secret::new(key.serialize_pem()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    #[test]
    fn a_cluster_pki_holds_three_cas_and_a_service_account_key_pair() {
        let pki = ClusterPki::generate("demo", NOW).expect("generate");
        for ca in [&pki.cluster_ca, &pki.etcd_ca, &pki.front_proxy_ca] {
            assert!(ca.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
            assert!(
                ca.key_pem
                    .expose()
                    .starts_with("-----BEGIN PRIVATE KEY-----")
            );
        }
        assert_ne!(
            pki.cluster_ca.cert_pem, pki.etcd_ca.cert_pem,
            "each CA its own"
        );
        assert_ne!(
            pki.cluster_ca.key_pem.expose(),
            pki.front_proxy_ca.key_pem.expose()
        );
        assert!(
            pki.service_account_pub
                .starts_with("-----BEGIN PUBLIC KEY-----")
        );
        assert!(
            pki.service_account_key
                .expose()
                .starts_with("-----BEGIN PRIVATE KEY-----")
        );
    }

    #[test]
    fn no_private_key_is_printed_by_debug() {
        let pki = ClusterPki::generate("demo", NOW).expect("generate");
        let printed = format!("{pki:?}");
        assert!(!printed.contains("PRIVATE KEY"), "{printed}");
        assert!(printed.contains("Secret(<redacted>)"));
        // Serialized (to be sealed), the keys are there.
        let json = serde_json::to_string(&pki).expect("json");
        assert!(json.contains("PRIVATE KEY"));
        let back: ClusterPki = serde_json::from_str(&json).expect("back");
        assert_eq!(back, pki);
    }

    #[test]
    fn the_discovery_hash_is_the_sha256_of_the_ca_public_key() {
        let pki = ClusterPki::generate("demo", NOW).expect("generate");
        let hash = pki.discovery_hash().expect("hash");
        assert!(
            hash.starts_with("sha256:") && hash.len() == 7 + 64,
            "{hash}"
        );
        assert_eq!(pki.discovery_hash().expect("again"), hash, "stable");
        let other = ClusterPki::generate("demo", NOW).expect("generate");
        assert_ne!(other.discovery_hash().expect("other"), hash);
        assert_eq!(
            discovery_hash(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn a_client_certificate_is_signed_by_the_cluster_ca_and_verifies_against_it() {
        let pki = ClusterPki::generate("demo", NOW).expect("generate");
        let client = pki
            .issue_client("flightdeck", &["system:masters"], NOW, 3600)
            .expect("issue");
        assert!(client.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        // rustls' verifier (webpki) accepts it as a client of the cluster CA: the
        // signature, the issuer's name and the validity all hold.
        let ca = pem_der(&pki.cluster_ca.cert_pem);
        let leaf = pem_der(&client.cert_pem);
        verify_client(&ca, &leaf, NOW + 60).expect("verifies against the cluster CA");
        // Not against another cluster's CA.
        let other = ClusterPki::generate("other", NOW).expect("generate");
        let other_ca = pem_der(&other.cluster_ca.cert_pem);
        assert!(verify_client(&other_ca, &leaf, NOW + 60).is_err());
        // Nor once it has expired.
        assert!(verify_client(&ca, &leaf, NOW + 7200).is_err());
    }

    fn pem_der(pem: &str) -> Vec<u8> {
        use base64::Engine;
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .expect("base64")
    }

    /// Verifies `leaf` as a client certificate issued by the CA `ca` at `unix`.
    fn verify_client(ca: &[u8], leaf: &[u8], unix: i64) -> Result<(), String> {
        let unix = u64::try_from(unix).map_err(|e| e.to_string())?;
        use rustls_pki_types::{CertificateDer, UnixTime};
        let ca = CertificateDer::from(ca.to_vec());
        let anchor = webpki::anchor_from_trusted_cert(&ca).map_err(|e| e.to_string())?;
        let leaf = CertificateDer::from(leaf.to_vec());
        let cert = webpki::EndEntityCert::try_from(&leaf).map_err(|e| e.to_string())?;
        cert.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &[anchor],
            &[],
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(unix)),
            webpki::KeyUsage::client_auth(),
            None,
            None,
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    }
}
