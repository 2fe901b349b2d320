//! Secrets sealed at rest: what flightdeck stores of a cluster's PKI (and, later, its
//! tokens) goes into the store only as XChaCha20-Poly1305 ciphertext, under a 256-bit key
//! kept outside the store, in a file readable by its owner alone ([`KEY_FILE`] in the
//! state directory by default). A store, or a backup of it, without that key holds no
//! usable secret; the key without the store holds none either.
//!
//! Each sealed value is bound to where it is kept (the associated data names its record),
//! so a ciphertext copied under another cluster's record does not open. Nonces are 192
//! random bits from ring's system generator: random nonces are safe at that length.
//! Losing the key is an error that names the key file, never a silent new key for a
//! store that holds sealed values.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use zeroize::Zeroize;

/// The key file's name in the state directory.
pub const KEY_FILE: &str = "secrets.key";

/// The algorithm sealed values name (the only one there is).
const ALG: &str = "xchacha20poly1305";

/// The first line of a key file; the second is the key in base64.
const KEY_HEADER: &str = "flightdeck secrets key v1";

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("secrets key file {path}: {message}")]
    KeyFile { path: PathBuf, message: String },
    #[error(
        "sealed secret {record} does not open with the key in {key}: the key is not the one it was sealed with, or the value was changed"
    )]
    WrongKey { record: String, key: String },
    #[error("sealed secret {record} is malformed: {message}")]
    Malformed { record: String, message: String },
    #[error("no randomness for a nonce: {0}")]
    Random(String),
}

/// The 256-bit key secrets are sealed with, and where it came from (for messages).
pub struct SecretsKey {
    key: [u8; 32],
    origin: String,
}

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretsKey(from {}, <redacted>)", self.origin)
    }
}

impl Drop for SecretsKey {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}

impl SecretsKey {
    /// A fresh random key, kept nowhere (tests, throw-away runs in memory).
    pub fn generate(origin: &str) -> Result<SecretsKey, SealError> {
        let mut key = [0u8; 32];
        SystemRandom::new()
            .fill(&mut key)
            .map_err(|e| SealError::Random(e.to_string()))?;
        Ok(SecretsKey {
            key,
            origin: origin.to_string(),
        })
    }

    /// Reads the key in `path`. A file that is missing, readable by others, or not a key
    /// is an error naming the file: the store's sealed values need this very key.
    pub fn load(path: &Path) -> Result<SecretsKey, SealError> {
        let fail = |message: String| SealError::KeyFile {
            path: path.to_path_buf(),
            message,
        };
        let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(fail(format!(
                    "is readable by others (mode {mode:03o}); make it 0600 (`chmod 600 {}`)",
                    path.display()
                )));
            }
        }
        #[cfg(not(unix))]
        let _ = meta;
        let mut text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let parsed = parse_key(&text);
        text.zeroize();
        let key = parsed.map_err(fail)?;
        Ok(SecretsKey {
            key,
            origin: path.display().to_string(),
        })
    }

    /// Reads the key in `path`, or makes one there (mode 0600, written whole or not at
    /// all) if no file is there. `store_has_sealed` says whether the store already holds
    /// sealed values: then a missing key is an error, never a new key that could not
    /// open them.
    pub fn load_or_create(path: &Path, store_has_sealed: bool) -> Result<SecretsKey, SealError> {
        if path.exists() || store_has_sealed {
            return SecretsKey::load(path).map_err(|e| match e {
                SealError::KeyFile { path, message } if store_has_sealed => SealError::KeyFile {
                    message: format!(
                        "{message}; the store holds secrets sealed with this key, and without it they are lost (restore the key file, or name it with --secrets-key-file)"
                    ),
                    path,
                },
                other => other,
            });
        }
        let key = SecretsKey::generate(&path.display().to_string())?;
        let mut text = format!("{KEY_HEADER}\n{}\n", B64.encode(key.key));
        let written = write_private_new(path, text.as_bytes());
        text.zeroize();
        written.map_err(|e| SealError::KeyFile {
            path: path.to_path_buf(),
            message: format!("cannot create it: {e}"),
        })?;
        Ok(key)
    }

    /// Seals `plaintext`, to be kept as record `record` (the associated data).
    pub fn seal(&self, record: &str, plaintext: &[u8]) -> Result<Sealed, SealError> {
        let mut nonce = [0u8; 24];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|e| SealError::Random(e.to_string()))?;
        let cipher = XChaCha20Poly1305::new((&self.key).into());
        let data = cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: record.as_bytes(),
                },
            )
            .map_err(|_| SealError::Malformed {
                record: record.to_string(),
                message: "the cipher refused the plaintext".into(),
            })?;
        Ok(Sealed {
            alg: ALG.to_string(),
            nonce: B64.encode(nonce),
            data: B64.encode(data),
        })
    }

    /// Opens `sealed`, kept as record `record`.
    pub fn open(&self, record: &str, sealed: &Sealed) -> Result<Vec<u8>, SealError> {
        let malformed = |message: String| SealError::Malformed {
            record: record.to_string(),
            message,
        };
        if sealed.alg != ALG {
            return Err(malformed(format!(
                "unknown algorithm {:?} (this flightdeck knows {ALG})",
                sealed.alg
            )));
        }
        let nonce = B64
            .decode(&sealed.nonce)
            .map_err(|e| malformed(format!("nonce: {e}")))?;
        if nonce.len() != 24 {
            return Err(malformed(format!("nonce of {} bytes, not 24", nonce.len())));
        }
        let data = B64
            .decode(&sealed.data)
            .map_err(|e| malformed(format!("data: {e}")))?;
        let cipher = XChaCha20Poly1305::new((&self.key).into());
        cipher
            .decrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &data,
                    aad: record.as_bytes(),
                },
            )
            .map_err(|_| SealError::WrongKey {
                record: record.to_string(),
                key: self.origin.clone(),
            })
    }
}

/// A sealed value as the store keeps it (JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    pub alg: String,
    /// 24 bytes, base64.
    pub nonce: String,
    /// Ciphertext and tag, base64.
    pub data: String,
}

fn parse_key(text: &str) -> Result<[u8; 32], String> {
    let mut lines = text.lines();
    if lines.next() != Some(KEY_HEADER) {
        return Err(format!(
            "is not a flightdeck secrets key (its first line must be {KEY_HEADER:?})"
        ));
    }
    let mut bytes = B64
        .decode(lines.next().unwrap_or_default().trim())
        .map_err(|e| format!("its key is not base64: {e}"))?;
    let key: Result<[u8; 32], _> = bytes.as_slice().try_into();
    let len = bytes.len();
    bytes.zeroize();
    key.map_err(|_| format!("its key is {len} bytes, not 32"))
}

/// Writes `bytes` to a new file at `path`, mode 0600 from its creation; fails if a file is
/// there. Written to a temporary name first, so a crash leaves no half key.
fn write_private_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("key.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    {
        let mut file = options.open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    // A hard link fails if `path` exists: two processes cannot both make a key.
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    linked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_with_its_key_and_record_only() {
        let key = SecretsKey::generate("test").expect("key");
        let sealed = key
            .seal("pki/demo", b"-----BEGIN PRIVATE KEY-----")
            .expect("seal");
        assert!(!sealed.data.contains("PRIVATE"));
        assert_eq!(
            key.open("pki/demo", &sealed).expect("open"),
            b"-----BEGIN PRIVATE KEY-----"
        );
        // Under another record (copied to another cluster), it does not open.
        assert!(matches!(
            key.open("pki/other", &sealed),
            Err(SealError::WrongKey { .. })
        ));
        // With another key, it does not open, and the error names the key's origin.
        let other = SecretsKey::generate("the other key").expect("key");
        let e = other.open("pki/demo", &sealed).expect_err("wrong key");
        assert!(e.to_string().contains("the other key"), "{e}");
        // A changed byte does not open.
        let mut changed = sealed.clone();
        let mut data = B64.decode(&changed.data).expect("b64");
        data[0] ^= 1;
        changed.data = B64.encode(data);
        assert!(key.open("pki/demo", &changed).is_err());
        // Two seals of one secret differ (fresh nonces).
        assert_ne!(
            key.seal("pki/demo", b"x").expect("seal"),
            key.seal("pki/demo", b"x").expect("seal")
        );
    }

    #[test]
    fn a_key_file_is_made_once_private_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(KEY_FILE);
        let made = SecretsKey::load_or_create(&path, false).expect("create");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let sealed = made.seal("r", b"secret").expect("seal");
        let again = SecretsKey::load_or_create(&path, true).expect("load");
        assert_eq!(again.open("r", &sealed).expect("open"), b"secret");
        assert!(!format!("{again:?}").contains(&B64.encode(again.key)));
    }

    #[test]
    fn a_lost_or_exposed_key_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(KEY_FILE);
        let e = SecretsKey::load_or_create(&path, true).expect_err("lost");
        let text = e.to_string();
        assert!(
            text.contains(&path.display().to_string()) && text.contains("lost"),
            "{text}"
        );
        assert!(!path.exists(), "no new key for a store with sealed secrets");

        std::fs::write(&path, "not a key\n").expect("write");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
            let e = SecretsKey::load(&path).expect_err("exposed");
            assert!(e.to_string().contains("readable by others"), "{e}");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        let e = SecretsKey::load(&path).expect_err("not a key");
        assert!(
            e.to_string().contains("is not a flightdeck secrets key"),
            "{e}"
        );
    }
}
