//! Where the daemon is, which token to show it and which CA to trust it by. Each setting
//! comes from the first source that has it: flags, then the environment, then the config
//! file, then (server and token) the local daemon's own files in the default state
//! directory.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use serde::Deserialize;

/// The file the daemon writes its base URL to, in its state directory.
pub const URL_FILE: &str = "api.url";
/// The file holding the daemon's admin token, in its state directory.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";

pub const NO_DAEMON: &str =
    "no flightdeck daemon found: start `flightdeck serve`, or set --server / FLIGHTDECK_SERVER";

/// `--server`, `--token-file` and `--ca-file`.
#[derive(Args, Clone, Debug, Default)]
pub struct ServerArgs {
    /// The daemon's base URL, e.g. http://127.0.0.1:7443 (else $FLIGHTDECK_SERVER, the
    /// config file's `server:`, or the local daemon's api.url).
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// A file holding the API token (else the token in $FLIGHTDECK_TOKEN, the config
    /// file's `tokenFile:`, or the local daemon's admin.token).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// A PEM file of CA certificates to trust for an https:// server, besides the
    /// system's (else $FLIGHTDECK_CA_FILE or the config file's `caFile:`).
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
}

/// `--server`, `--token-file`, `--ca-file` and `--state-dir`.
#[derive(Args, Clone, Debug, Default)]
pub struct ConnectArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Talk to the daemon that keeps its state in DIR (its DIR/api.url and
    /// DIR/admin.token) instead of the local default one.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// The API token. It is never printed: `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<hidden>)")
    }
}

/// Where the daemon is, and how to prove who we are.
#[derive(Clone, Debug)]
pub struct Connection {
    /// The base URL, without a trailing slash.
    pub url: String,
    /// Where the URL came from, for messages (`--server`, `$FLIGHTDECK_SERVER`, a file).
    pub url_from: String,
    pub token: Option<Token>,
    /// Where the token came from (a file or a variable's name, never the token).
    pub token_from: Option<String>,
    /// A PEM file of CA certificates trusted besides the system's, and where that
    /// setting came from (`--ca-file`, `$FLIGHTDECK_CA_FILE` or the config file). It is
    /// read when the client is built ([`super::http::Api::new`]).
    pub ca_file: Option<(PathBuf, String)>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConfigFile {
    server: Option<String>,
    token_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
}

/// The config file's settings, with `tokenFile` and `caFile` resolved against the file's
/// directory.
#[derive(Debug, Default)]
struct Config {
    path: PathBuf,
    server: Option<String>,
    token_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
}

/// Reads the process environment; tests pass their own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn var(env: Env<'_>, key: &str) -> Option<String> {
    env(key).filter(|v| !v.trim().is_empty())
}

/// [`super::default_state_dir`] with the environment given.
pub(super) fn state_dir_from(env: Env<'_>) -> Option<PathBuf> {
    if let Some(d) = var(env, "FLIGHTDECK_STATE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = var(env, "XDG_STATE_HOME") {
        return Some(PathBuf::from(d).join("flightdeck"));
    }
    var(env, "HOME").map(|h| PathBuf::from(h).join(".local/state/flightdeck"))
}

/// Resolves the connection from the flags and the process environment.
pub fn resolve(args: &ConnectArgs) -> anyhow::Result<Connection> {
    resolve_with(args, &|k| std::env::var(k).ok(), super::default_state_dir())
}

/// `local`: the local daemon's state directory, the last place to look.
pub fn resolve_with(
    args: &ConnectArgs,
    env: Env<'_>,
    local: Option<PathBuf>,
) -> anyhow::Result<Connection> {
    let flags = &args.server;
    let env_server = var(env, "FLIGHTDECK_SERVER");
    let env_token = var(env, "FLIGHTDECK_TOKEN");
    let env_ca_file = var(env, "FLIGHTDECK_CA_FILE");
    let needs_config = (flags.server.is_none() && args.state_dir.is_none() && env_server.is_none())
        || (flags.token_file.is_none() && args.state_dir.is_none() && env_token.is_none())
        || (flags.ca_file.is_none() && env_ca_file.is_none());
    let config = if needs_config {
        load_config(env)?
    } else {
        None
    };
    let (url, url_from) = resolve_url(args, local.as_deref(), env_server, config.as_ref())?;
    let (token, token_from) = if let Some(path) = &flags.token_file {
        (Some(read_token(path)?), Some(path.display().to_string()))
    } else if let Some(dir) = &args.state_dir {
        dir_token(dir)?
    } else if let Some(t) = env_token {
        (
            Some(Token(t.trim().to_string())),
            Some("$FLIGHTDECK_TOKEN".into()),
        )
    } else if let Some(path) = config.as_ref().and_then(|c| c.token_file.as_ref()) {
        (Some(read_token(path)?), Some(path.display().to_string()))
    } else {
        local_token(local.as_deref(), &url)?
    };
    if let Some(t) = &token {
        check_token(t, token_from.as_deref().unwrap_or("the token"))?;
    }
    // A state directory holds no CA, so `--state-dir` does not stop the config file's.
    let ca_file = if let Some(path) = &flags.ca_file {
        Some((path.clone(), "--ca-file".to_string()))
    } else if let Some(path) = env_ca_file {
        Some((PathBuf::from(path), "$FLIGHTDECK_CA_FILE".to_string()))
    } else {
        config
            .as_ref()
            .and_then(|c| Some((c.ca_file.clone()?, c.path.display().to_string())))
    };
    Ok(Connection {
        url,
        url_from,
        token,
        token_from,
        ca_file,
    })
}

fn resolve_url(
    args: &ConnectArgs,
    local: Option<&Path>,
    env_server: Option<String>,
    config: Option<&Config>,
) -> anyhow::Result<(String, String)> {
    if let Some(s) = &args.server.server {
        return Ok((normalize_url(s, "--server")?, "--server".into()));
    }
    if let Some(dir) = &args.state_dir {
        let file = dir.join(URL_FILE);
        if !file.is_file() {
            bail!(
                "no flightdeck daemon found in {}: {} does not exist (start `flightdeck serve --state-dir {}`)",
                dir.display(),
                file.display(),
                dir.display()
            );
        }
        return url_from_file(&file);
    }
    if let Some(s) = env_server {
        return Ok((
            normalize_url(&s, "$FLIGHTDECK_SERVER")?,
            "$FLIGHTDECK_SERVER".into(),
        ));
    }
    if let Some(c) = config
        && let Some(s) = &c.server
    {
        let from = c.path.display().to_string();
        return Ok((normalize_url(s, &from)?, from));
    }
    if let Some(dir) = local {
        let file = dir.join(URL_FILE);
        if file.is_file() {
            return url_from_file(&file);
        }
    }
    bail!("{NO_DAEMON}")
}

fn url_from_file(file: &Path) -> anyhow::Result<(String, String)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let from = file.display().to_string();
    Ok((normalize_url(&text, &from)?, from))
}

/// Checks a base URL and strips a trailing `/` or `/api/v1` (as `serve` prints it).
pub fn normalize_url(raw: &str, from: &str) -> anyhow::Result<String> {
    let s = raw.trim();
    if !(s.starts_with("http://") || s.starts_with("https://")) {
        bail!("the server URL {s:?} (from {from}) must start with http:// or https://");
    }
    if let Err(e) = reqwest::Url::parse(s) {
        bail!("the server URL {s:?} (from {from}) is not a URL: {e}");
    }
    let s = s.trim_end_matches('/');
    let s = s.strip_suffix("/api/v1").unwrap_or(s);
    Ok(s.trim_end_matches('/').to_string())
}

/// The token of an explicitly named state directory, if it has one.
fn dir_token(dir: &Path) -> anyhow::Result<(Option<Token>, Option<String>)> {
    let file = dir.join(ADMIN_TOKEN_FILE);
    if !file.is_file() {
        return Ok((None, None));
    }
    Ok((Some(read_token(&file)?), Some(file.display().to_string())))
}

/// The default state directory's admin token, only for the daemon that directory
/// describes: a server named elsewhere never sees the local daemon's token.
fn local_token(local: Option<&Path>, url: &str) -> anyhow::Result<(Option<Token>, Option<String>)> {
    let Some(dir) = local else {
        return Ok((None, None));
    };
    let url_file = dir.join(URL_FILE);
    let same = std::fs::read_to_string(&url_file)
        .ok()
        .and_then(|t| normalize_url(&t, "").ok())
        .is_some_and(|local| local == url);
    if !same {
        return Ok((None, None));
    }
    dir_token(dir)
}

/// Reads a token file, trimmed. Errors name the file, never its content.
pub fn read_token(path: &Path) -> anyhow::Result<Token> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read the token file {}", path.display()))?;
    let Ok(text) = String::from_utf8(bytes) else {
        bail!("the token file {} does not hold text", path.display());
    };
    let token = text.trim();
    if token.is_empty() {
        bail!("the token file {} is empty", path.display());
    }
    Ok(Token(token.to_string()))
}

fn check_token(t: &Token, from: &str) -> anyhow::Result<()> {
    if t.0.is_empty() || !t.0.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "the token from {from} holds characters a token cannot have (spaces, control or non-ASCII characters)"
        );
    }
    Ok(())
}

fn config_path(env: Env<'_>) -> Option<(PathBuf, bool)> {
    if let Some(p) = var(env, "FLIGHTDECK_CONFIG") {
        return Some((PathBuf::from(p), true));
    }
    var(env, "HOME").map(|h| {
        (
            PathBuf::from(h).join(".config/flightdeck/config.yaml"),
            false,
        )
    })
}

/// Reads `$FLIGHTDECK_CONFIG` (which must exist) or `~/.config/flightdeck/config.yaml`
/// (if it exists).
fn load_config(env: Env<'_>) -> anyhow::Result<Option<Config>> {
    let Some((path, explicit)) = config_path(env) else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => return Ok(None),
        Err(e) => bail!("cannot read the config file {}: {e}", path.display()),
    };
    let file = parse_config(&text).with_context(|| format!("config file {}", path.display()))?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let token_file = file.token_file.map(|t| expand_path(&t, &base, env));
    let ca_file = file.ca_file.map(|c| expand_path(&c, &base, env));
    Ok(Some(Config {
        path,
        server: file.server.filter(|s| !s.trim().is_empty()),
        token_file,
        ca_file,
    }))
}

fn parse_config(text: &str) -> anyhow::Result<ConfigFile> {
    let meaningful = text
        .lines()
        .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#') && l.trim() != "---");
    if !meaningful {
        return Ok(ConfigFile::default());
    }
    let file: ConfigFile = yaml_serde::from_str(text)?;
    Ok(file)
}

/// `~/x` is under $HOME; a relative path is relative to the config file's directory.
fn expand_path(p: &Path, base: &Path, env: Env<'_>) -> PathBuf {
    if let Ok(rest) = p.strip_prefix("~")
        && let Some(home) = var(env, "HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    if p.is_relative() {
        base.join(p)
    } else {
        p.to_path_buf()
    }
}
