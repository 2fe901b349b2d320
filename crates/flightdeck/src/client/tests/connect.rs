use std::collections::HashMap;
use std::path::Path;

use crate::client::connect::{
    ConnectArgs, NO_DAEMON, ServerArgs, normalize_url, read_token, resolve_with, state_dir_from,
};

struct Fixture {
    dir: tempfile::TempDir,
    env: HashMap<String, String>,
}

impl Fixture {
    /// A HOME with nothing in it, and no other variable set.
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut env = HashMap::new();
        env.insert("HOME".to_string(), dir.path().display().to_string());
        Fixture { dir, env }
    }

    fn set(&mut self, k: &str, v: &str) {
        self.env.insert(k.into(), v.into());
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) -> std::path::PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
        p
    }

    /// A daemon's files in the default state dir (`~/.local/state/flightdeck`).
    fn local_daemon(&self, url: &str, token: &str) {
        self.write(".local/state/flightdeck/api.url", &format!("{url}\n"));
        self.write(".local/state/flightdeck/admin.token", &format!("{token}\n"));
    }

    fn resolve(&self, args: &ConnectArgs) -> anyhow::Result<crate::client::connect::Connection> {
        let env = |k: &str| self.env.get(k).cloned();
        resolve_with(args, &env, state_dir_from(&env))
    }
}

fn token_of(c: &crate::client::connect::Connection) -> Option<&str> {
    c.token.as_ref().map(|t| t.secret())
}

fn flags(server: Option<&str>, token_file: Option<&Path>) -> ConnectArgs {
    ConnectArgs {
        server: ServerArgs {
            server: server.map(String::from),
            token_file: token_file.map(Path::to_path_buf),
            ca_file: None,
        },
        state_dir: None,
    }
}

#[test]
fn the_local_daemon_is_found_last() {
    let f = Fixture::new();
    f.local_daemon("http://127.0.0.1:7443", "local-secret");
    let c = f.resolve(&ConnectArgs::default()).expect("resolves");
    assert_eq!(c.url, "http://127.0.0.1:7443");
    assert_eq!(token_of(&c), Some("local-secret"));
    assert!(
        c.url_from.ends_with(".local/state/flightdeck/api.url"),
        "{}",
        c.url_from
    );
}

#[test]
fn the_config_file_beats_the_local_daemon() {
    let mut f = Fixture::new();
    f.local_daemon("http://127.0.0.1:7443", "local-secret");
    f.write("tokens/remote", "  remote-secret \n");
    f.write(
        ".config/flightdeck/config.yaml",
        "# where the fleet lives\nserver: https://fleet.example:8443/\ntokenFile: ../../tokens/remote\n",
    );
    let c = f.resolve(&ConnectArgs::default()).expect("resolves");
    assert_eq!(c.url, "https://fleet.example:8443");
    assert_eq!(
        token_of(&c),
        Some("remote-secret"),
        "relative to the config file, trimmed"
    );
    // $FLIGHTDECK_CONFIG names another file.
    f.write("other.yaml", "server: http://other:1\n");
    f.set(
        "FLIGHTDECK_CONFIG",
        &f.path("other.yaml").display().to_string(),
    );
    let c = f.resolve(&ConnectArgs::default()).expect("resolves");
    assert_eq!(c.url, "http://other:1");
    assert_eq!(
        token_of(&c),
        None,
        "the local token never goes to another server"
    );
}

#[test]
fn the_environment_beats_the_config_file_and_flags_beat_both() {
    let mut f = Fixture::new();
    f.write("cfg-token", "cfg-secret");
    f.write("flag-token", "flag-secret");
    f.write(
        ".config/flightdeck/config.yaml",
        "server: http://from-config:1\ntokenFile: cfg-token\n",
    );
    f.set("FLIGHTDECK_SERVER", "http://from-env:2");
    f.set("FLIGHTDECK_TOKEN", " env-secret\n");
    let c = f.resolve(&ConnectArgs::default()).expect("resolves");
    assert_eq!(
        (c.url.as_str(), token_of(&c)),
        ("http://from-env:2", Some("env-secret"))
    );
    assert_eq!(c.token_from.as_deref(), Some("$FLIGHTDECK_TOKEN"));
    let c = f
        .resolve(&flags(
            Some("http://from-flag:3"),
            Some(&f.path("flag-token")),
        ))
        .expect("resolves");
    assert_eq!(
        (c.url.as_str(), token_of(&c)),
        ("http://from-flag:3", Some("flag-secret"))
    );
    assert_eq!(c.url_from, "--server");
    // Each setting falls through on its own: the server from the flag, the token from
    // the environment.
    let c = f
        .resolve(&flags(Some("http://from-flag:3"), None))
        .expect("resolves");
    assert_eq!(token_of(&c), Some("env-secret"));
}

/// The CA file and where it came from, as messages name them.
fn ca_file_of(c: &crate::client::connect::Connection) -> Option<(String, String)> {
    c.ca_file
        .as_ref()
        .map(|(path, from)| (path.display().to_string(), from.clone()))
}

#[test]
fn the_ca_file_flag_beats_the_environment_which_beats_the_config_file() {
    let mut f = Fixture::new();
    f.local_daemon("https://127.0.0.1:7443", "local-secret");
    let config = f.write(
        ".config/flightdeck/config.yaml",
        "server: https://fleet.example:8443\ncaFile: certs/fleet-ca.pem\n",
    );
    let c = f.resolve(&ConnectArgs::default()).expect("resolves");
    assert_eq!(
        ca_file_of(&c),
        Some((
            f.path(".config/flightdeck/certs/fleet-ca.pem")
                .display()
                .to_string(),
            config.display().to_string()
        )),
        "relative to the config file's directory"
    );
    // A state directory holds no CA: the config file's still counts.
    let args = ConnectArgs {
        state_dir: Some(f.path(".local/state/flightdeck")),
        ..Default::default()
    };
    let c = f.resolve(&args).expect("resolves");
    assert_eq!(c.url, "https://127.0.0.1:7443");
    assert_eq!(
        ca_file_of(&c).map(|(_, from)| from),
        Some(config.display().to_string())
    );

    f.set("FLIGHTDECK_CA_FILE", "/etc/env-ca.pem");
    let c = f.resolve(&ConnectArgs::default()).expect("resolves");
    assert_eq!(
        ca_file_of(&c),
        Some(("/etc/env-ca.pem".into(), "$FLIGHTDECK_CA_FILE".into()))
    );
    assert_eq!(
        c.url, "https://fleet.example:8443",
        "the server still from the config"
    );

    let mut args = flags(None, None);
    args.server.ca_file = Some("flag-ca.pem".into());
    let c = f.resolve(&args).expect("resolves");
    assert_eq!(
        ca_file_of(&c),
        Some(("flag-ca.pem".into(), "--ca-file".into())),
        "as given, relative to the working directory"
    );
}

#[test]
fn without_a_ca_file_anywhere_there_is_none() {
    let f = Fixture::new();
    f.local_daemon("http://127.0.0.1:7443", "t");
    let c = f.resolve(&ConnectArgs::default()).expect("resolves");
    assert_eq!(ca_file_of(&c), None);
}

#[test]
fn the_local_token_goes_only_to_the_local_daemon() {
    let mut f = Fixture::new();
    f.local_daemon("http://127.0.0.1:7443", "local-secret");
    f.set("FLIGHTDECK_SERVER", "http://127.0.0.1:7443/api/v1");
    let c = f.resolve(&ConnectArgs::default()).expect("resolves");
    assert_eq!(
        token_of(&c),
        Some("local-secret"),
        "the same daemon, named by URL"
    );
    f.set("FLIGHTDECK_SERVER", "http://elsewhere:7443");
    let c = f.resolve(&ConnectArgs::default()).expect("resolves");
    assert_eq!(token_of(&c), None);
}

#[test]
fn state_dir_names_another_daemon() {
    let mut f = Fixture::new();
    f.local_daemon("http://127.0.0.1:7443", "local-secret");
    f.set("FLIGHTDECK_SERVER", "http://from-env:2");
    f.write("other/api.url", "http://127.0.0.1:9999\n");
    f.write("other/admin.token", "other-secret\n");
    let args = ConnectArgs {
        state_dir: Some(f.path("other")),
        ..Default::default()
    };
    let c = f.resolve(&args).expect("resolves");
    assert_eq!(
        (c.url.as_str(), token_of(&c)),
        ("http://127.0.0.1:9999", Some("other-secret"))
    );
    let args = ConnectArgs {
        state_dir: Some(f.path("empty")),
        ..Default::default()
    };
    let e = f.resolve(&args).expect_err("no api.url").to_string();
    assert!(
        e.contains("no flightdeck daemon found in") && e.contains("api.url"),
        "{e}"
    );
}

#[test]
fn no_server_anywhere_says_how_to_start_one() {
    let f = Fixture::new();
    let e = f
        .resolve(&ConnectArgs::default())
        .expect_err("nothing")
        .to_string();
    assert_eq!(e, NO_DAEMON);
    assert!(e.contains("start `flightdeck serve`, or set --server / FLIGHTDECK_SERVER"));
}

#[test]
fn bad_settings_are_named_without_the_token() {
    let mut f = Fixture::new();
    f.write("bad-token", "sec ret\n");
    f.write("empty-token", " \n");
    let e = f
        .resolve(&flags(Some("http://x:1"), Some(&f.path("bad-token"))))
        .expect_err("space");
    let text = format!("{e:#}");
    assert!(
        text.contains("bad-token") && !text.contains("sec ret"),
        "{text}"
    );
    let e = read_token(&f.path("empty-token")).expect_err("empty");
    assert!(e.to_string().contains("is empty"), "{e}");
    let e = f
        .resolve(&flags(Some("localhost:7443"), None))
        .expect_err("no scheme");
    assert!(
        e.to_string()
            .contains("must start with http:// or https://"),
        "{e}"
    );
    f.write(
        ".config/flightdeck/config.yaml",
        "server: http://x:1\ntoken: abc\n",
    );
    let e = format!(
        "{:#}",
        f.resolve(&ConnectArgs::default()).expect_err("unknown key")
    );
    assert!(
        e.contains("config.yaml") && e.contains("unknown field `token`"),
        "{e}"
    );
    f.set(
        "FLIGHTDECK_CONFIG",
        &f.path("missing.yaml").display().to_string(),
    );
    let e = format!(
        "{:#}",
        f.resolve(&ConnectArgs::default()).expect_err("missing")
    );
    assert!(
        e.contains("cannot read the config file") && e.contains("missing.yaml"),
        "{e}"
    );
}

#[test]
fn an_empty_config_file_is_no_config() {
    let f = Fixture::new();
    f.local_daemon("http://127.0.0.1:7443", "t");
    f.write(".config/flightdeck/config.yaml", "# nothing yet\n");
    let c = f.resolve(&ConnectArgs::default()).expect("resolves");
    assert_eq!(c.url, "http://127.0.0.1:7443");
}

#[test]
fn the_token_never_shows_in_debug_output() {
    let f = Fixture::new();
    f.local_daemon("http://127.0.0.1:7443", "hush-hush");
    let c = f.resolve(&ConnectArgs::default()).expect("resolves");
    let debug = format!("{c:?}");
    assert!(
        !debug.contains("hush-hush") && debug.contains("<hidden>"),
        "{debug}"
    );
}

#[test]
fn server_urls_are_normalized() {
    assert_eq!(
        normalize_url(" http://h:1/ \n", "x").expect("ok"),
        "http://h:1"
    );
    assert_eq!(
        normalize_url("http://h:1/api/v1/", "x").expect("ok"),
        "http://h:1"
    );
    assert_eq!(
        normalize_url("https://h/fd", "x").expect("ok"),
        "https://h/fd"
    );
    assert!(normalize_url("http://", "x").is_err());
}

#[test]
fn the_default_state_dir_follows_the_daemon() {
    let mut env: HashMap<&str, &str> = HashMap::from([("HOME", "/home/u")]);
    let dir = |env: &HashMap<&str, &str>| {
        let get = |k: &str| env.get(k).map(|v| v.to_string());
        state_dir_from(&get).map(|p| p.display().to_string())
    };
    assert_eq!(
        dir(&env).as_deref(),
        Some("/home/u/.local/state/flightdeck")
    );
    env.insert("XDG_STATE_HOME", "/xdg");
    assert_eq!(dir(&env).as_deref(), Some("/xdg/flightdeck"));
    env.insert("FLIGHTDECK_STATE_DIR", "/fd");
    assert_eq!(dir(&env).as_deref(), Some("/fd"));
    assert_eq!(dir(&HashMap::new()), None);
}
