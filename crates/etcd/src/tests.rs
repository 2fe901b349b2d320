use super::*;

#[test]
fn an_etcd_address_names_each_member() {
    assert_eq!(
        parse_url("etcd://10.0.0.1:2379,etcd-2.example:2379,[::1]:23790").expect("parses"),
        vec!["10.0.0.1:2379", "etcd-2.example:2379", "[::1]:23790"]
    );
    assert_eq!(
        parse_url("etcd://127.0.0.1:2379/").expect("a trailing slash is fine"),
        vec!["127.0.0.1:2379"]
    );
}

#[test]
fn a_bad_etcd_address_says_what_is_wrong_with_it() {
    for (url, says) in [
        ("http://127.0.0.1:2379", "etcd://host:port"),
        ("etcd://", "no member given"),
        ("etcd://127.0.0.1", "has no port"),
        ("etcd://127.0.0.1:0", "is not a port"),
        ("etcd://127.0.0.1:99999", "is not a port"),
        ("etcd://a:1,,b:2", "has no port"),
        ("etcd://bad host:2379", "is not a host name"),
        ("etcd://a:1,a:1", "named twice"),
    ] {
        let err = parse_url(url).expect_err(url).to_string();
        assert!(err.contains(says), "{url}: {err}");
        assert!(
            err.contains(url),
            "{url}: the message names the address: {err}"
        );
    }
}

#[test]
fn options_that_cannot_work_are_refused_before_connecting() {
    let base = EtcdOptions::from_url("etcd://127.0.0.1:2379").expect("parses");
    assert_eq!(base.validate(), Ok(()));
    let cases: Vec<(EtcdOptions, &str)> = vec![
        (
            EtcdOptions {
                cert_file: Some("c.pem".into()),
                ..base.clone()
            },
            "needs its key",
        ),
        (
            EtcdOptions {
                cert_file: Some("c.pem".into()),
                key_file: Some("k.pem".into()),
                ..base.clone()
            },
            "--etcd-cacert",
        ),
        (
            EtcdOptions {
                user: Some("flightdeck".into()),
                ..base.clone()
            },
            "FLIGHTDECK_ETCD_PASSWORD",
        ),
        (
            EtcdOptions {
                prefix: "flightdeck".into(),
                ..base.clone()
            },
            "must begin and end with '/'",
        ),
        (
            EtcdOptions {
                max_txn_ops: 2,
                ..base.clone()
            },
            "too few",
        ),
    ];
    for (o, says) in cases {
        let err = o.validate().expect_err(says).to_string();
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn a_password_is_never_shown() {
    let o = EtcdOptions {
        user: Some("flightdeck".into()),
        password: Some(Password::new("hunter2")),
        ..EtcdOptions::from_url("etcd://127.0.0.1:2379").expect("parses")
    };
    let shown = format!("{o:?} {}", o.describe());
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("***"), "{shown}");
}

#[cfg(not(feature = "client"))]
#[test]
fn without_the_client_connecting_says_how_to_build_with_it() {
    let o = EtcdOptions::from_url("etcd://127.0.0.1:2379").expect("parses");
    let err = connect(&o).expect_err("no client").to_string();
    assert!(err.contains("--features etcd"), "{err}");
    assert!(err.contains("etcd://127.0.0.1:2379"), "{err}");
}
