//! Bootstrap tokens, as kubeadm makes and stores them: `<id>.<secret>`, matching
//! `[a-z0-9]{6}\.[a-z0-9]{16}`. The id is public (it names the Secret that holds the
//! token); the secret part authenticates a joining machine and is a [`Secret`] here:
//! never printed, wiped when dropped.
//!
//! A token is made from randomness the caller passes in, never a global generator. A
//! token is a credential: the product draws it from the operating system's secure
//! generator ([`BootstrapToken::generate_secure`], ring's `SystemRandom`), never from
//! the engine's seeded generator, whose seed (the clock and the process id) can be
//! guessed. A simulated run may pass its own seeded generator, so that it replays. The API server learns of a token
//! from the `bootstrap.kubernetes.io/token` Secret [`BootstrapToken::secret_object`]
//! builds, key for key the one `kubeadm token create` writes.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

use crate::pki::Secret;

/// Characters in a token's id.
pub const TOKEN_ID_LEN: usize = 6;
/// Characters in a token's secret part.
pub const TOKEN_SECRET_LEN: usize = 16;
/// The type of the Secret that holds a bootstrap token.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The namespace bootstrap tokens live in.
pub const SECRET_NAMESPACE: &str = "kube-system";
/// The group kubeadm's join tokens authenticate in (kubeadm's
/// `NodeBootstrapTokenAuthGroup`): its RBAC lets a kubelet ask for its certificate.
pub const NODE_BOOTSTRAP_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";

/// The characters of a token, as kubeadm draws them.
const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
/// Values at or above this would favour the first characters (2^64 is no multiple of 36).
const UNBIASED_LIMIT: u64 = u64::MAX - (u64::MAX % 36);
/// Draws again, per character, for a value in the biased tail: an honest generator
/// lands there once in 2^59 draws, so only a broken one ever uses them all (and then
/// the character is taken anyway: a generator that broken gives no secret in any case).
const REDRAWS_MAX: u32 = 8;
/// kubeadm's default usages of a token (`DefaultTokenUsages`), by Secret key suffix.
const USAGES: [&str; 2] = ["authentication", "signing"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Says what is wrong without repeating the text, which may be a real token.
    #[error(
        "not a bootstrap token: {problem} (a token is <id>.<secret>, 6 then 16 of [a-z0-9]; the text given is not shown)"
    )]
    Malformed { problem: &'static str },
    #[error("the operating system gave no randomness for a bootstrap token")]
    NoRandomness,
    #[error("expiration {value:?} of bootstrap token {id} is not an RFC 3339 time: {message}")]
    Expiration {
        id: String,
        value: String,
        message: String,
    },
}

/// A bootstrap token. Its fields are private so that every token held is well formed:
/// one is made by [`BootstrapToken::generate`] or [`BootstrapToken::parse`] only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapToken {
    /// `[a-z0-9]{6}`, public.
    id: String,
    /// `[a-z0-9]{16}`, secret.
    secret: Secret,
}

impl BootstrapToken {
    /// A new token from `rng`, each call of which gives 64 random bits. Every character
    /// is uniform over `[a-z0-9]` (values that would bias it are drawn again).
    pub fn generate(rng: &mut dyn FnMut() -> u64) -> BootstrapToken {
        let id = random_chars(rng, TOKEN_ID_LEN);
        let secret = random_chars(rng, TOKEN_SECRET_LEN);
        BootstrapToken {
            id,
            secret: Secret::new(secret),
        }
    }

    /// A new token from the operating system's secure generator: the product's tokens.
    pub fn generate_secure() -> Result<BootstrapToken, TokenError> {
        use ring::rand::SecureRandom as _;
        let system = ring::rand::SystemRandom::new();
        let mut failed = false;
        let mut draw = || {
            let mut bytes = [0u8; 8];
            failed |= system.fill(&mut bytes).is_err();
            u64::from_le_bytes(bytes)
        };
        let token = BootstrapToken::generate(&mut draw);
        if failed {
            return Err(TokenError::NoRandomness);
        }
        Ok(token)
    }

    /// Reads `<id>.<secret>`, refusing anything else; the error never repeats the text.
    pub fn parse(text: &str) -> Result<BootstrapToken, TokenError> {
        let malformed = |problem| TokenError::Malformed { problem };
        let (id, secret) = text
            .split_once('.')
            .ok_or_else(|| malformed("there is no '.' between its id and its secret"))?;
        if !is_token_part(id, TOKEN_ID_LEN) {
            return Err(malformed("its id is not 6 of [a-z0-9]"));
        }
        if !is_token_part(secret, TOKEN_SECRET_LEN) {
            return Err(malformed("its secret is not 16 of [a-z0-9]"));
        }
        Ok(BootstrapToken {
            id: id.to_string(),
            secret: Secret::new(secret.to_string()),
        })
    }

    /// The public id, which names the token's Secret (`bootstrap-token-<id>`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The secret part alone.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// The whole token, `<id>.<secret>`, as `kubeadm join` takes it.
    pub fn token(&self) -> Secret {
        Secret::new(format!("{}.{}", self.id, self.secret.expose()))
    }

    /// The name of the Secret that holds this token.
    pub fn secret_name(&self) -> String {
        format!("bootstrap-token-{}", self.id)
    }

    /// The `bootstrap.kubernetes.io/token` Secret in `kube-system` that makes this token
    /// valid until `expires_rfc3339`, as `kubeadm token create` writes it: base64 `data`
    /// with `token-id`, `token-secret`, `expiration` (RFC 3339, UTC), both usages
    /// (`usage-bootstrap-authentication`, `usage-bootstrap-signing`: `"true"`),
    /// `auth-extra-groups` (kubeadm's node group) and `description` when not empty.
    ///
    /// The value holds the token's secret: hand it to the API and drop it; never log it.
    pub fn secret_object(
        &self,
        expires_rfc3339: &str,
        description: &str,
    ) -> Result<Value, TokenError> {
        let data: BTreeMap<String, String> = self
            .secret_data(expires_rfc3339, description)?
            .into_iter()
            .map(|(k, v)| (k, B64.encode(v)))
            .collect();
        Ok(json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": { "name": self.secret_name(), "namespace": SECRET_NAMESPACE },
            "type": SECRET_TYPE,
            "data": data,
        }))
    }

    /// The keys and values of [`BootstrapToken::secret_object`]'s `data`, in the clear
    /// (a client encodes them). Holds the token's secret.
    pub fn secret_data(
        &self,
        expires_rfc3339: &str,
        description: &str,
    ) -> Result<BTreeMap<String, String>, TokenError> {
        let expiration =
            utc_rfc3339(expires_rfc3339).map_err(|message| TokenError::Expiration {
                id: self.id.clone(),
                value: expires_rfc3339.to_string(),
                message,
            })?;
        let mut data: BTreeMap<String, String> = BTreeMap::new();
        let mut put = |key: &str, value: &str| {
            data.insert(key.to_string(), value.to_string());
        };
        put("token-id", &self.id);
        put("token-secret", self.secret.expose());
        put("expiration", &expiration);
        for usage in USAGES {
            put(&format!("usage-bootstrap-{usage}"), "true");
        }
        put("auth-extra-groups", NODE_BOOTSTRAP_GROUP);
        if !description.is_empty() {
            put("description", description);
        }
        Ok(data)
    }
}

/// `count` characters of `[a-z0-9]`, each from one value of `rng` (drawn again, up to
/// [`REDRAWS_MAX`] times, while the value is in the tail that would bias it).
fn random_chars(rng: &mut dyn FnMut() -> u64, count: usize) -> String {
    (0..count)
        .map(|_| {
            let mut value = rng();
            for _ in 0..REDRAWS_MAX {
                if value < UNBIASED_LIMIT {
                    break;
                }
                value = rng();
            }
            char::from(ALPHABET[(value % 36) as usize])
        })
        .collect()
}

fn is_token_part(text: &str, len: usize) -> bool {
    text.len() == len
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// `text` (RFC 3339, any offset) as kubeadm writes an expiration: RFC 3339 in UTC, whole
/// seconds.
fn utc_rfc3339(text: &str) -> Result<String, String> {
    let at = OffsetDateTime::parse(text, &Rfc3339).map_err(|e| e.to_string())?;
    at.to_offset(UtcOffset::UTC)
        .replace_nanosecond(0)
        .map_err(|e| e.to_string())?
        .format(&Rfc3339)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64: a small seeded generator, as the engine's would be.
    fn seeded(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    #[test]
    fn secure_tokens_have_kubeadms_form_and_differ() {
        let a = BootstrapToken::generate_secure().expect("randomness");
        let b = BootstrapToken::generate_secure().expect("randomness");
        for t in [&a, &b] {
            let text = t.token();
            BootstrapToken::parse(text.expose()).expect("kubeadm's form");
        }
        assert_ne!(a.token().expose(), b.token().expose());
    }

    #[test]
    fn a_generated_token_has_kubeadms_form_and_replays_from_its_seed() {
        let token = BootstrapToken::generate(&mut seeded(7));
        let text = token.token();
        let parsed = BootstrapToken::parse(text.expose()).expect("own form");
        assert_eq!(parsed, token);
        assert_eq!(token.id().len(), TOKEN_ID_LEN);
        assert_eq!(token.secret().expose().len(), TOKEN_SECRET_LEN);
        assert_eq!(BootstrapToken::generate(&mut seeded(7)), token, "same seed");
        assert_ne!(
            BootstrapToken::generate(&mut seeded(8)),
            token,
            "other seed"
        );
    }

    #[test]
    fn values_that_would_bias_a_character_are_drawn_again() {
        // The first value of each pair is in the biased tail; the second gives 'b' (1).
        let mut values = [u64::MAX, 1].into_iter().cycle();
        let token = BootstrapToken::generate(&mut || values.next().unwrap_or(0));
        assert_eq!(token.id(), "bbbbbb");
        // A generator stuck in the tail still ends: the draws per character are bounded.
        let mut draws = 0u32;
        let stuck = BootstrapToken::generate(&mut || {
            draws += 1;
            u64::MAX
        });
        assert_eq!(stuck.id().len(), TOKEN_ID_LEN);
        assert_eq!(draws, (REDRAWS_MAX + 1) * 22);
    }

    #[test]
    fn a_malformed_token_is_refused_without_repeating_it() {
        for bad in [
            "",
            "abcdef0123456789abcdef",
            "abcde.0123456789abcdef",
            "ABCDEF.0123456789abcdef",
            "abcdef.0123456789abcde",
            "abcdef.0123456789abcdef.",
            "abcdef.0123456789abcdeF",
        ] {
            let err = BootstrapToken::parse(bad).expect_err(bad);
            let message = err.to_string();
            assert!(matches!(err, TokenError::Malformed { .. }), "{bad}");
            if !bad.is_empty() {
                assert!(!message.contains(bad), "{message}");
            }
            assert!(!message.contains("0123456789abcde"), "{message}");
        }
    }

    #[test]
    fn debug_of_a_token_shows_its_id_but_not_its_secret() {
        let token = BootstrapToken::parse("abcdef.0123456789abcdef").expect("parse");
        let printed = format!("{token:?}");
        assert!(printed.contains("abcdef"), "{printed}");
        assert!(!printed.contains("0123456789abcdef"), "{printed}");
    }

    #[test]
    fn the_token_secret_object_is_the_one_kubeadm_writes() {
        let token = BootstrapToken::parse("abcdef.0123456789abcdef").expect("parse");
        let object = token
            .secret_object("2026-01-02T01:00:00.5+01:00", "made by flightdeck")
            .expect("secret");
        assert_eq!(object["apiVersion"], "v1");
        assert_eq!(object["kind"], "Secret");
        assert_eq!(object["metadata"]["name"], "bootstrap-token-abcdef");
        assert_eq!(object["metadata"]["namespace"], "kube-system");
        assert_eq!(object["type"], "bootstrap.kubernetes.io/token");
        let data = object["data"].as_object().expect("data");
        let decoded: BTreeMap<&str, String> = data
            .iter()
            .map(|(k, v)| {
                let bytes = B64.decode(v.as_str().expect("string")).expect("base64");
                (k.as_str(), String::from_utf8(bytes).expect("utf-8"))
            })
            .collect();
        let expected: BTreeMap<&str, String> = [
            ("token-id", "abcdef"),
            ("token-secret", "0123456789abcdef"),
            ("expiration", "2026-01-02T00:00:00Z"),
            ("usage-bootstrap-authentication", "true"),
            ("usage-bootstrap-signing", "true"),
            (
                "auth-extra-groups",
                "system:bootstrappers:kubeadm:default-node-token",
            ),
            ("description", "made by flightdeck"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
        assert_eq!(decoded, expected);
        // No description: no key, as kubeadm.
        let bare = token
            .secret_object("2026-01-02T00:00:00Z", "")
            .expect("secret");
        assert!(bare["data"].get("description").is_none());
    }

    #[test]
    fn an_expiration_that_is_not_rfc3339_is_refused_naming_it() {
        let token = BootstrapToken::parse("abcdef.0123456789abcdef").expect("parse");
        let err = token.secret_object("tomorrow", "").expect_err("not a time");
        let message = err.to_string();
        assert!(message.contains("\"tomorrow\""), "{message}");
        assert!(message.contains("abcdef"), "{message}");
        assert!(!message.contains("0123456789abcdef"), "{message}");
    }
}
