//! The secrets the engine keeps of a cluster (its PKI, for `spec.bootstrap.provider:
//! kubeadm`), sealed at rest: made when the cluster is first applied, in the same commit
//! as its memory, opened again when an engine takes the cluster up (a wrong or missing
//! key is an error naming the key file, never a new CA), and removed with the cluster.
//!
//! What is sealed is bound to `pki/<cluster>/<uid>`: a sealed PKI copied under another
//! cluster, or under an earlier cluster of the same name, does not open.

use std::sync::Arc;

use flightdeck_guest::{ClusterPki, SealError, Sealed, SecretsKey};
use flightdeck_store::Write;
use serde::{Deserialize, Serialize};

/// The store table of each cluster's sealed PKI, by cluster name.
pub const T_PKI: &str = "pki";

/// How the engine keeps secrets at rest.
#[derive(Clone)]
pub enum SecretsAtRest {
    /// Sealed under this key: the product.
    Sealed(Arc<SecretsKey>),
    /// In the clear. Only a test's switch (`--unsafe-disable secrets-encryption`), to
    /// prove that the test which looks for private keys in the store can fail.
    UnsafePlain,
}

impl std::fmt::Debug for SecretsAtRest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretsAtRest::Sealed(key) => write!(f, "Sealed({key:?})"),
            SecretsAtRest::UnsafePlain => f.write_str("UnsafePlain"),
        }
    }
}

/// A cluster's PKI as the store keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StoredPki {
    /// The UID of the cluster it was made for.
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<Sealed>,
    /// Only under [`SecretsAtRest::UnsafePlain`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain: Option<ClusterPki>,
}

/// Why a cluster's PKI could not be made, kept or opened.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("cluster {cluster}: {source}")]
    Seal {
        cluster: String,
        #[source]
        source: SealError,
    },
    #[error("cluster {cluster}: cannot make its PKI: {message}")]
    Pki { cluster: String, message: String },
    #[error(
        "cluster {cluster}: its stored PKI was made for UID {stored}, not the cluster's {uid}; the store was changed by hand, or restored from another flightdeck"
    )]
    OtherUid {
        cluster: String,
        stored: String,
        uid: String,
    },
    #[error(
        "cluster {cluster}: the store holds its PKI in the clear, and this flightdeck seals secrets; it was written with secrets-encryption disabled (a test's switch)"
    )]
    Unsealed { cluster: String },
    #[error(
        "cluster {cluster}: the store holds its sealed PKI, and this flightdeck was given no key to open it (name the key file with --secrets-key-file)"
    )]
    NoKey { cluster: String },
    #[error(
        "cluster {cluster}: its bootstrap is kubeadm, and the store holds no PKI for it; the store was changed by hand, or restored from a backup of another flightdeck"
    )]
    Missing { cluster: String },
}

fn record(cluster: &str, uid: &str) -> String {
    format!("pki/{cluster}/{uid}")
}

impl SecretsAtRest {
    /// Makes cluster `cluster`'s PKI (UID `uid`) at `now_unix_secs`: the write that keeps
    /// it, sealed.
    pub fn make_pki(
        &self,
        cluster: &str,
        uid: &str,
        now_unix_secs: i64,
    ) -> Result<Write, SecretsError> {
        let pki = ClusterPki::generate(cluster, now_unix_secs).map_err(|e| SecretsError::Pki {
            cluster: cluster.to_string(),
            message: e.to_string(),
        })?;
        let stored = match self {
            SecretsAtRest::Sealed(key) => {
                let mut json = serde_json::to_vec(&pki).map_err(|e| SecretsError::Pki {
                    cluster: cluster.to_string(),
                    message: e.to_string(),
                })?;
                let sealed = key.seal(&record(cluster, uid), &json);
                zeroize_vec(&mut json);
                StoredPki {
                    uid: uid.to_string(),
                    sealed: Some(sealed.map_err(|source| SecretsError::Seal {
                        cluster: cluster.to_string(),
                        source,
                    })?),
                    plain: None,
                }
            }
            SecretsAtRest::UnsafePlain => StoredPki {
                uid: uid.to_string(),
                sealed: None,
                plain: Some(pki),
            },
        };
        Ok(Write::put(T_PKI, cluster, &stored))
    }

    /// Opens cluster `cluster`'s stored PKI, checking it was made for UID `uid`.
    pub(crate) fn open_pki(
        &self,
        cluster: &str,
        uid: &str,
        stored: &StoredPki,
    ) -> Result<ClusterPki, SecretsError> {
        if stored.uid != uid {
            return Err(SecretsError::OtherUid {
                cluster: cluster.to_string(),
                stored: stored.uid.clone(),
                uid: uid.to_string(),
            });
        }
        match (self, &stored.sealed, &stored.plain) {
            (SecretsAtRest::Sealed(key), Some(sealed), _) => {
                let mut json = key.open(&record(cluster, uid), sealed).map_err(|source| {
                    SecretsError::Seal {
                        cluster: cluster.to_string(),
                        source,
                    }
                })?;
                let pki = serde_json::from_slice(&json).map_err(|e| SecretsError::Pki {
                    cluster: cluster.to_string(),
                    message: format!("its opened PKI does not parse: {e}"),
                });
                zeroize_vec(&mut json);
                pki
            }
            (SecretsAtRest::Sealed(_), None, _) => Err(SecretsError::Unsealed {
                cluster: cluster.to_string(),
            }),
            (SecretsAtRest::UnsafePlain, _, Some(pki)) => Ok(pki.clone()),
            (SecretsAtRest::UnsafePlain, _, None) => Err(SecretsError::NoKey {
                cluster: cluster.to_string(),
            }),
        }
    }
}

impl SecretsAtRest {
    /// Cluster `owner`'s PKI, opened from `store` for one machine's data; a failure is
    /// the machine's create failing for good (the store or its key is wrong).
    pub(crate) fn open_for_machine(
        &self,
        store: &flightdeck_store::Store,
        owner: &flightdeck_cloud::Ownership,
    ) -> Result<ClusterPki, flightdeck_cloud::CloudError> {
        let fail = |message: String| {
            flightdeck_cloud::CloudError::new(
                flightdeck_cloud::ErrorClass::Permanent,
                "flightdeck",
                "cluster PKI",
                None,
                message,
            )
        };
        let cluster = owner.cluster.as_str();
        let stored = store
            .get::<StoredPki>(T_PKI, cluster)
            .map_err(|e| fail(e.to_string()))?
            .ok_or_else(|| {
                fail(
                    SecretsError::Missing {
                        cluster: cluster.to_string(),
                    }
                    .to_string(),
                )
            })?;
        self.open_pki(cluster, &owner.uid, &stored)
            .map_err(|e| fail(e.to_string()))
    }
}

fn zeroize_vec(v: &mut [u8]) {
    use flightdeck_guest::zeroize::Zeroize as _;
    v.zeroize();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(w: &Write) -> StoredPki {
        let Write::Put { table, json, .. } = w else {
            panic!("a put: {w:?}");
        };
        assert_eq!(*table, T_PKI);
        serde_json::from_slice(json).expect("stored PKI")
    }

    #[test]
    fn a_sealed_pki_opens_only_for_its_own_cluster_and_uid() {
        let key = Arc::new(SecretsKey::generate("test").expect("key"));
        let secrets = SecretsAtRest::Sealed(key);
        let w = secrets.make_pki("demo", "u1", 1_767_225_600).expect("made");
        let s = stored(&w);
        let Write::Put { json, .. } = &w else {
            unreachable!()
        };
        let text = String::from_utf8_lossy(json);
        assert!(!text.contains("PRIVATE KEY"), "{text}");
        assert!(!text.contains("BEGIN CERTIFICATE"), "sealed whole: {text}");
        let pki = secrets.open_pki("demo", "u1", &s).expect("opens");
        assert_eq!(pki.cluster, "demo");
        assert!(matches!(
            secrets.open_pki("demo", "u2", &s),
            Err(SecretsError::OtherUid { .. })
        ));
        let mut moved = s.clone();
        moved.uid = "u2".into();
        assert!(matches!(
            secrets.open_pki("demo", "u2", &moved),
            Err(SecretsError::Seal { .. })
        ));
        assert!(matches!(
            secrets.open_pki("other", "u1", &s),
            Err(SecretsError::Seal { .. })
        ));
    }

    #[test]
    fn a_pki_sealed_under_one_key_is_an_error_under_another_naming_the_key() {
        let a = SecretsAtRest::Sealed(Arc::new(SecretsKey::generate("key a").expect("key")));
        let b = SecretsAtRest::Sealed(Arc::new(SecretsKey::generate("key b").expect("key")));
        let s = stored(&a.make_pki("demo", "u1", 1_767_225_600).expect("made"));
        let e = b
            .open_pki("demo", "u1", &s)
            .expect_err("wrong key")
            .to_string();
        assert!(e.contains("cluster demo") && e.contains("key b"), "{e}");
    }

    #[test]
    fn with_sealing_switched_off_the_keys_are_in_the_clear() {
        let w = SecretsAtRest::UnsafePlain
            .make_pki("demo", "u1", 1_767_225_600)
            .expect("made");
        let Write::Put { json, .. } = &w else {
            unreachable!()
        };
        assert!(String::from_utf8_lossy(json).contains("PRIVATE KEY"));
        let sealing = SecretsAtRest::Sealed(Arc::new(SecretsKey::generate("k").expect("key")));
        assert!(matches!(
            sealing.open_pki("demo", "u1", &stored(&w)),
            Err(SecretsError::Unsealed { .. })
        ));
    }
}
