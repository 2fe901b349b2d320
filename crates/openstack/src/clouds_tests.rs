use super::*;

const FILE: &str = r#"
clouds:
  prod:
    auth:
      auth_url: https://keystone.example:5000/v3
      username: flightdeck
      password: s3cret-Pa55
      project_name: k8s
    region_name: RegionTwo
  dev:
    auth:
      auth_url: http://127.0.0.1:5000
      username: demo
      password: demopass
      project_name: demo
      user_domain_name: Users
      project_domain_id: abc123
    interface: internalURL
    verify: false
  broken:
    auth:
      auth_url: http://127.0.0.1:5000
      username: demo
      project_name: demo
"#;

fn path() -> PathBuf {
    PathBuf::from("/tmp/clouds.yaml")
}

#[test]
fn reads_an_entry_with_defaults() {
    let e = parse(FILE, &path(), Some("prod")).expect("entry");
    assert_eq!(e.name, "prod");
    assert_eq!(e.auth.auth_url, "https://keystone.example:5000/v3");
    assert_eq!(e.auth.username, "flightdeck");
    assert_eq!(e.auth.password.expose(), "s3cret-Pa55");
    assert_eq!(
        e.auth.project,
        Scope::Name {
            name: "k8s".into(),
            domain: Domain::Name("Default".into())
        }
    );
    assert_eq!(e.auth.user_domain, Domain::Name("Default".into()));
    assert_eq!(e.region_name.as_deref(), Some("RegionTwo"));
    assert_eq!(e.interface, Interface::Public);
    assert!(e.verify);
}

#[test]
fn reads_domains_interface_and_verify() {
    let e = parse(FILE, &path(), Some("dev")).expect("entry");
    assert_eq!(e.auth.user_domain, Domain::Name("Users".into()));
    assert_eq!(
        e.auth.project,
        Scope::Name {
            name: "demo".into(),
            domain: Domain::Id("abc123".into())
        }
    );
    assert_eq!(e.interface, Interface::Internal);
    assert!(!e.verify);
    assert_eq!(e.region_name, None);
}

#[test]
fn a_missing_field_is_named_with_file_and_entry() {
    let err = parse(FILE, &path(), Some("broken")).expect_err("no password");
    assert_eq!(
        err,
        ConfigError::MissingField {
            path: path(),
            cloud: "broken".into(),
            field: "auth.password"
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("/tmp/clouds.yaml"), "{msg}");
    assert!(msg.contains("\"broken\""), "{msg}");
    assert!(msg.contains("auth.password"), "{msg}");
}

#[test]
fn an_unknown_entry_lists_the_known_ones() {
    let err = parse(FILE, &path(), Some("nope")).expect_err("unknown");
    let msg = err.to_string();
    assert!(
        msg.contains("\"nope\"") && msg.contains("prod") && msg.contains("dev"),
        "{msg}"
    );
    let err = parse(FILE, &path(), None).expect_err("none chosen");
    assert!(matches!(err, ConfigError::NoCloudChosen { .. }), "{err}");
}

#[test]
fn debug_never_shows_the_password() {
    let e = parse(FILE, &path(), Some("prod")).expect("entry");
    let dbg = format!("{e:?} {:?} {:#?}", e.auth, e);
    assert!(!dbg.contains("s3cret-Pa55"), "{dbg}");
    assert!(dbg.contains("<redacted>"));
}

#[test]
fn the_search_path_takes_the_first_existing_file_and_os_cloud() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.yaml");
    let real = dir.path().join("clouds.yaml");
    std::fs::write(&real, FILE).expect("write");
    let e = load_from(&[missing.clone(), real.clone()], None, Some("dev")).expect("entry");
    assert_eq!(e.name, "dev");
    assert_eq!(e.source, real);
    let e = load_from(std::slice::from_ref(&real), Some("prod"), Some("dev")).expect("entry");
    assert_eq!(e.name, "prod", "an explicit name wins over OS_CLOUD");
    let err = load_from(std::slice::from_ref(&missing), Some("prod"), None).expect_err("none");
    assert!(err.to_string().contains("missing.yaml"), "{err}");
}

#[test]
fn unsupported_auth_and_bad_values_are_refused_by_name() {
    let text = r#"
clouds:
  a:
    auth_type: token
    auth: {auth_url: "http://k", username: u, password: p, project_name: x}
  b:
    auth: {auth_url: "http://k", username: u, password: p, project_name: x}
    interface: sideways
  c:
    auth: {auth_url: "keystone:5000", username: u, password: p, project_name: x}
"#;
    let field = |name| match parse(text, &path(), Some(name)) {
        Err(ConfigError::Invalid { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field("a"), "auth_type");
    assert_eq!(field("b"), "interface");
    assert_eq!(field("c"), "auth.auth_url");
}

#[test]
fn a_numeric_password_is_read_as_text_and_never_quoted() {
    let text = "clouds:\n  n:\n    auth: {auth_url: \"http://k\", username: u, password: 987654321, project_name: x}\n";
    let e = parse(text, &path(), Some("n")).expect("entry");
    assert_eq!(e.auth.password.expose(), "987654321");
    assert!(!format!("{e:?}").contains("987654321"));
}

#[test]
fn a_password_inside_the_auth_url_is_refused_and_never_shown() {
    let text = r#"
clouds:
  a:
    auth: {auth_url: "https://admin:s3cret@keystone.example:5000/v3", username: u, password: p, project_name: x}
  b:
    auth: {auth_url: "admin:s3cret@keystone.example:5000", username: u, password: p, project_name: x}
"#;
    for name in ["a", "b"] {
        let e = parse(text, &path(), Some(name)).expect_err("refused");
        let shown = e.to_string();
        assert!(shown.contains("auth.auth_url"), "{shown}");
        assert!(!shown.contains("s3cret"), "the password is shown: {shown}");
        assert!(!shown.contains("admin"), "the user is shown: {shown}");
    }
    assert_eq!(
        crate::clouds::without_userinfo("https://u:p@k:5000/v3?x=a@b"),
        "https://***@k:5000/v3?x=a@b"
    );
    assert_eq!(
        crate::clouds::without_userinfo("http://k/v3"),
        "http://k/v3"
    );
}
