//! Credentials and the endpoint, where OpenNebula's own tools look for them.
//!
//! - `$ONE_AUTH` names a file (default `$HOME/.one/one_auth`) whose first line is
//!   `user:password`; the password is everything after the first colon, trimmed.
//! - `$ONE_XMLRPC` is the endpoint (default [`DEFAULT_ENDPOINT`]).
//!
//! The password is a [`Secret`]: its `Debug` and `Display` print `***`, it is readable
//! only inside this crate (to build the XML-RPC session string), and no error, log line
//! or `Debug` output contains it. An error about the file names the file and what is
//! wrong with it, never its content.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use flightdeck_cloud::{CloudError, ErrorClass};

/// Where oned listens when `$ONE_XMLRPC` says nothing.
pub const DEFAULT_ENDPOINT: &str = "http://localhost:2633/RPC2";
/// The longest credentials file read; a longer one is not a `one_auth` file.
pub const AUTH_FILE_MAX_BYTES: u64 = 64 * 1024;

/// A value that must not be seen: `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The value itself, for the one place that sends it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// An OpenNebula user and password (core authentication).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OneCredentials {
    pub user: String,
    pub password: Secret,
}

/// Why no credentials came out of the environment. Every variant names the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("neither ONE_AUTH nor HOME is set, so there is no one_auth file to read")]
    NoPath,
    #[error("cannot read the OpenNebula credentials file {}: {reason}", .path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("the OpenNebula credentials file {} is larger than {AUTH_FILE_MAX_BYTES} bytes", .path.display())]
    TooLarge { path: PathBuf },
    #[error("the OpenNebula credentials file {} is empty", .path.display())]
    Empty { path: PathBuf },
    #[error("the first line of the OpenNebula credentials file {} has no `:` between user and password", .path.display())]
    NoColon { path: PathBuf },
    #[error("the first line of the OpenNebula credentials file {} has an empty user", .path.display())]
    NoUser { path: PathBuf },
    #[error("the first line of the OpenNebula credentials file {} has an empty password", .path.display())]
    NoPassword { path: PathBuf },
}

/// An [`AuthError`] as a Permanent `opennebula` `credentials` error.
pub fn auth_error(e: AuthError) -> CloudError {
    CloudError::new(
        ErrorClass::Permanent,
        "opennebula",
        "credentials",
        None,
        e.to_string(),
    )
}

impl OneCredentials {
    pub fn new(user: impl Into<String>, password: Secret) -> Self {
        OneCredentials {
            user: user.into(),
            password,
        }
    }

    /// The credentials in the file `$ONE_AUTH` names, or `$HOME/.one/one_auth`.
    pub fn from_env() -> Result<Self, AuthError> {
        let path = auth_file_path(std::env::var_os("ONE_AUTH"), std::env::var_os("HOME"))?;
        Self::from_file(&path)
    }

    /// The credentials on the first line of `path`.
    pub fn from_file(path: &Path) -> Result<Self, AuthError> {
        let unreadable = |e: std::io::Error| AuthError::Unreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let len = std::fs::metadata(path).map_err(unreadable)?.len();
        if len > AUTH_FILE_MAX_BYTES {
            return Err(AuthError::TooLarge {
                path: path.to_path_buf(),
            });
        }
        // Not read_to_string: its error for a non-UTF-8 file is fine, but keep one path.
        let bytes = std::fs::read(path).map_err(unreadable)?;
        let text = String::from_utf8(bytes).map_err(|_| AuthError::Unreadable {
            path: path.to_path_buf(),
            reason: "it is not UTF-8 text".into(),
        })?;
        parse_auth_line(&text, path)
    }

    /// The XML-RPC session string, `user:password`.
    pub(crate) fn session(&self) -> Secret {
        Secret(format!("{}:{}", self.user, self.password.expose()))
    }
}

/// `$ONE_AUTH` when set and not empty, else `$HOME/.one/one_auth`.
pub fn auth_file_path(
    one_auth: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf, AuthError> {
    if let Some(p) = one_auth.filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    match home.filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".one").join("one_auth")),
        None => Err(AuthError::NoPath),
    }
}

/// Reads `user:password` from the first line of `text` (the content of `path`).
fn parse_auth_line(text: &str, path: &Path) -> Result<OneCredentials, AuthError> {
    let line = text.lines().next().map(str::trim).unwrap_or_default();
    if line.is_empty() {
        return Err(AuthError::Empty {
            path: path.to_path_buf(),
        });
    }
    let Some((user, password)) = line.split_once(':') else {
        return Err(AuthError::NoColon {
            path: path.to_path_buf(),
        });
    };
    let (user, password) = (user.trim(), password.trim());
    if user.is_empty() {
        return Err(AuthError::NoUser {
            path: path.to_path_buf(),
        });
    }
    if password.is_empty() {
        return Err(AuthError::NoPassword {
            path: path.to_path_buf(),
        });
    }
    Ok(OneCredentials::new(user, Secret::new(password)))
}

/// The endpoint: `explicit` when given, else `$ONE_XMLRPC`, else [`DEFAULT_ENDPOINT`].
pub fn endpoint(explicit: Option<&str>) -> String {
    endpoint_from(explicit, std::env::var("ONE_XMLRPC").ok())
}

fn endpoint_from(explicit: Option<&str>, env: Option<String>) -> String {
    explicit
        .map(str::to_string)
        .or(env)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWORD: &str = "s3cr3t-pa55:with-colon";

    fn write(content: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("one_auth");
        std::fs::write(&path, content).expect("write");
        (dir, path)
    }

    #[test]
    fn the_first_line_is_user_and_password_split_at_the_first_colon() {
        let (_dir, path) = write(&format!("  flightdeck:{PASSWORD}  \nignored:line\n"));
        let c = OneCredentials::from_file(&path).expect("reads");
        assert_eq!(c.user, "flightdeck");
        assert_eq!(c.password.expose(), PASSWORD);
        assert_eq!(c.session().expose(), format!("flightdeck:{PASSWORD}"));
    }

    #[test]
    fn a_bad_credentials_file_is_named_with_what_is_wrong_but_not_its_content() {
        let cases = [
            ("", "is empty"),
            ("\n\n", "is empty"),
            ("flightdeck s3cr3t-pa55", "has no `:`"),
            (&format!(":{PASSWORD}") as &str, "empty user"),
            ("flightdeck:", "empty password"),
        ];
        for (content, want) in cases {
            let (_dir, path) = write(content);
            let e = OneCredentials::from_file(&path).expect_err(content);
            let text = e.to_string();
            assert!(text.contains(want), "{content:?}: {text}");
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(!text.contains("s3cr3t"), "the password leaked: {text}");
            assert!(!auth_error(e).to_string().contains("s3cr3t"));
        }
    }

    #[test]
    fn a_missing_credentials_file_is_a_permanent_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nope");
        let e = auth_error(OneCredentials::from_file(&path).expect_err("missing"));
        assert_eq!(e.class, ErrorClass::Permanent);
        assert!(e.message.contains("nope"), "{e}");
        assert!(e.message.contains("cannot read"), "{e}");
    }

    #[test]
    fn one_auth_names_the_file_and_home_is_the_fallback() {
        assert_eq!(
            auth_file_path(Some("/etc/one/auth".into()), Some("/home/x".into())),
            Ok(PathBuf::from("/etc/one/auth"))
        );
        assert_eq!(
            auth_file_path(Some("".into()), Some("/home/x".into())),
            Ok(PathBuf::from("/home/x/.one/one_auth"))
        );
        assert_eq!(auth_file_path(None, None), Err(AuthError::NoPath));
    }

    #[test]
    fn the_endpoint_is_explicit_then_one_xmlrpc_then_the_default() {
        assert_eq!(
            endpoint_from(Some("http://a:2633/RPC2"), Some("http://b".into())),
            "http://a:2633/RPC2"
        );
        assert_eq!(
            endpoint_from(None, Some("http://b/RPC2".into())),
            "http://b/RPC2"
        );
        assert_eq!(endpoint_from(None, Some(" ".into())), DEFAULT_ENDPOINT);
        assert_eq!(endpoint_from(None, None), DEFAULT_ENDPOINT);
    }

    #[test]
    fn a_secret_never_shows_in_debug_or_display() {
        let c = OneCredentials::new("flightdeck", Secret::new(PASSWORD));
        for shown in [
            format!("{c:?}"),
            format!("{:?}", c.session()),
            format!("{}", c.password),
        ] {
            assert!(!shown.contains("s3cr3t"), "{shown}");
            assert!(shown.contains("***"), "{shown}");
        }
    }
}
