//! A machine's bootstrap data, read back as cloud-init and kubeadm would read it: the
//! `#cloud-config` YAML, then the kubeadm file inside it, document by document.

use std::collections::BTreeMap;

use flightdeck_guest::bootstrap::KUBEADM_CONFIG_PATH;
use flightdeck_guest::cloudinit::Permissions;
use flightdeck_guest::{
    BootstrapError, BootstrapToken, ClusterBootstrap, ClusterPki, File, Role, Secret, render,
};
use serde::Deserialize as _;
use yaml_serde::Value;

const NOW: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z
const TOKEN: &str = "abcdef.0123456789abcdef";
const TOKEN_SECRET: &str = "0123456789abcdef";

fn pki() -> ClusterPki {
    ClusterPki::generate("demo", NOW).expect("pki")
}

fn token() -> BootstrapToken {
    BootstrapToken::parse(TOKEN).expect("token")
}

fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn cluster(version: &str) -> ClusterBootstrap {
    ClusterBootstrap {
        cluster: "demo".into(),
        kubernetes_version: version.into(),
        endpoint_host: "api.demo.example".into(),
        endpoint_port: 6443,
        pod_subnet: Some("10.244.0.0/16".into()),
        service_subnet: None,
        api_server_extra_args: args(&[("audit-log-maxage", "30"), ("v", "2")]),
        controller_manager_extra_args: args(&[("bind-address", "0.0.0.0")]),
        scheduler_extra_args: BTreeMap::new(),
        kubelet_extra_args: args(&[("cloud-provider", "external")]),
        pre_kubeadm_commands: vec!["swapoff -a".into(), "modprobe br_netfilter".into()],
        post_kubeadm_commands: vec!["touch /run/bootstrapped".into()],
        files: Vec::new(),
        cert_sans: vec!["10.0.0.10".into()],
    }
}

/// The cloud-config as YAML, after checking its first line.
fn cloud_config(user_data: &Secret) -> Value {
    let (first, rest) = user_data.expose().split_once('\n').expect("lines");
    assert_eq!(first, "#cloud-config");
    yaml_serde::from_str(rest).expect("cloud-config YAML")
}

/// `write_files` as (path, entry).
fn files(config: &Value) -> Vec<(String, Value)> {
    config["write_files"]
        .as_sequence()
        .expect("write_files")
        .iter()
        .map(|f| (f["path"].as_str().expect("path").to_string(), f.clone()))
        .collect()
}

/// The documents of the kubeadm file the cloud-config writes.
fn kubeadm_documents(config: &Value) -> Vec<Value> {
    let (_, file) = files(config)
        .into_iter()
        .find(|(path, _)| path == KUBEADM_CONFIG_PATH)
        .expect("a kubeadm file");
    assert_eq!(file["permissions"], "0600", "a join's holds the token");
    let text = file["content"].as_str().expect("content");
    yaml_serde::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("kubeadm YAML"))
        .collect()
}

fn runcmd(config: &Value) -> Vec<String> {
    config["runcmd"]
        .as_sequence()
        .expect("runcmd")
        .iter()
        .map(|c| c.as_str().expect("a shell line").to_string())
        .collect()
}

fn refusal(result: Result<Secret, BootstrapError>) -> String {
    result.expect_err("refused").to_string()
}

#[test]
fn a_workers_bootstrap_data_carries_no_ca_key() {
    let pki = pki();
    let hash = pki.discovery_hash().expect("hash");
    let token = token();
    let role = Role::JoinWorker {
        token: &token,
        ca_cert_hash: &hash,
    };
    let user_data = render(&cluster("v1.31.0"), "demo-md-0", role).expect("render");
    let config = cloud_config(&user_data);
    for (path, file) in files(&config) {
        assert!(!path.starts_with("/etc/kubernetes/pki"), "{path}");
        let content = file["content"].as_str().expect("content");
        assert!(!content.contains("PRIVATE KEY"), "{path}");
    }
    assert!(!user_data.expose().contains("PRIVATE KEY"));
    assert!(!user_data.expose().contains(&pki.cluster_ca.cert_pem));
}

#[test]
fn an_init_machine_gets_the_cluster_pki_keys_private_and_certificates_public() {
    let pki = pki();
    let user_data =
        render(&cluster("v1.31.0"), "demo-cp-0", Role::Init { pki: &pki }).expect("render");
    let written: BTreeMap<String, Value> = files(&cloud_config(&user_data)).into_iter().collect();
    let expected = [
        ("ca.crt", pki.cluster_ca.cert_pem.as_str(), "0644"),
        ("ca.key", pki.cluster_ca.key_pem.expose(), "0600"),
        ("etcd/ca.crt", pki.etcd_ca.cert_pem.as_str(), "0644"),
        ("etcd/ca.key", pki.etcd_ca.key_pem.expose(), "0600"),
        (
            "front-proxy-ca.crt",
            pki.front_proxy_ca.cert_pem.as_str(),
            "0644",
        ),
        (
            "front-proxy-ca.key",
            pki.front_proxy_ca.key_pem.expose(),
            "0600",
        ),
        ("sa.pub", pki.service_account_pub.as_str(), "0644"),
        ("sa.key", pki.service_account_key.expose(), "0600"),
    ];
    for (name, content, permissions) in expected {
        let file = &written[&format!("/etc/kubernetes/pki/{name}")];
        assert_eq!(file["content"], content, "{name}");
        assert_eq!(file["permissions"], permissions, "{name}");
        assert_eq!(file["owner"], "root:root", "{name}");
    }
    assert_eq!(
        written.len(),
        expected.len() + 1,
        "the PKI and the kubeadm file"
    );
}

#[test]
fn kubernetes_1_31_gets_v1beta4_with_extra_args_as_a_list() {
    let pki = pki();
    let user_data =
        render(&cluster("v1.31.0"), "demo-cp-0", Role::Init { pki: &pki }).expect("render");
    let documents = kubeadm_documents(&cloud_config(&user_data));
    for doc in &documents {
        assert_eq!(doc["apiVersion"], "kubeadm.k8s.io/v1beta4");
    }
    let (init, config) = (&documents[0], &documents[1]);
    let api_server_args = config["apiServer"]["extraArgs"]
        .as_sequence()
        .expect("a list");
    let pairs: Vec<(&str, &str)> = api_server_args
        .iter()
        .map(|a| {
            (
                a["name"].as_str().expect("name"),
                a["value"].as_str().expect("a string value"),
            )
        })
        .collect();
    assert_eq!(pairs, [("audit-log-maxage", "30"), ("v", "2")]);
    assert_eq!(
        config["controllerManager"]["extraArgs"][0]["name"],
        "bind-address"
    );
    assert!(
        config.get("scheduler").is_none(),
        "no scheduler arguments, no section"
    );
    assert_eq!(
        init["nodeRegistration"]["kubeletExtraArgs"][0]["name"],
        "cloud-provider"
    );
    assert_eq!(
        init["nodeRegistration"]["kubeletExtraArgs"][0]["value"],
        "external"
    );
    assert_eq!(
        config["encryptionAlgorithm"], "ECDSA-P256",
        "the CAs' algorithm"
    );
}

#[test]
fn kubernetes_1_30_gets_v1beta3_with_extra_args_as_a_map() {
    let pki = pki();
    let user_data =
        render(&cluster("v1.30.0"), "demo-cp-0", Role::Init { pki: &pki }).expect("render");
    let documents = kubeadm_documents(&cloud_config(&user_data));
    for doc in &documents {
        assert_eq!(doc["apiVersion"], "kubeadm.k8s.io/v1beta3");
    }
    let (init, config) = (&documents[0], &documents[1]);
    let api_server_args = config["apiServer"]["extraArgs"]
        .as_mapping()
        .expect("a map");
    assert_eq!(api_server_args.len(), 2);
    assert_eq!(
        config["apiServer"]["extraArgs"]["audit-log-maxage"], "30",
        "a string"
    );
    assert_eq!(
        config["controllerManager"]["extraArgs"]["bind-address"],
        "0.0.0.0"
    );
    assert_eq!(
        init["nodeRegistration"]["kubeletExtraArgs"]["cloud-provider"],
        "external"
    );
    assert!(
        config.get("encryptionAlgorithm").is_none(),
        "v1beta3 has no such field"
    );
}

#[test]
fn the_cloud_config_parses_and_its_kubeadm_file_is_two_documents_for_init_one_for_a_join() {
    let pki = pki();
    let hash = pki.discovery_hash().expect("hash");
    let token = token();
    let init = render(&cluster("v1.31.0"), "demo-cp-0", Role::Init { pki: &pki }).expect("init");
    let documents = kubeadm_documents(&cloud_config(&init));
    let kinds: Vec<&str> = documents
        .iter()
        .map(|d| d["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["InitConfiguration", "ClusterConfiguration"]);
    let config = &documents[1];
    assert_eq!(config["kubernetesVersion"], "v1.31.0");
    assert_eq!(config["clusterName"], "demo");
    assert_eq!(config["controlPlaneEndpoint"], "api.demo.example:6443");
    assert_eq!(config["networking"]["podSubnet"], "10.244.0.0/16");
    assert!(config["networking"].get("serviceSubnet").is_none());
    assert_eq!(config["apiServer"]["certSANs"][0], "10.0.0.10");
    assert_eq!(documents[0]["nodeRegistration"]["name"], "demo-cp-0");
    assert!(documents[0].get("bootstrapTokens").is_none());
    assert!(documents[0].get("localAPIEndpoint").is_none());
    assert!(documents[0]["nodeRegistration"].get("taints").is_none());
    for version in ["v1.30.0", "v1.31.0"] {
        let roles = [
            Role::JoinControlPlane {
                pki: &pki,
                token: &token,
                ca_cert_hash: &hash,
            },
            Role::JoinWorker {
                token: &token,
                ca_cert_hash: &hash,
            },
        ];
        for role in roles {
            let join = render(&cluster(version), "demo-1", role).expect("join");
            let documents = kubeadm_documents(&cloud_config(&join));
            assert_eq!(documents.len(), 1, "{version}");
            assert_eq!(documents[0]["kind"], "JoinConfiguration");
        }
    }
}

#[test]
fn a_join_carries_the_discovery_hash_and_the_token() {
    let pki = pki();
    let hash = pki.discovery_hash().expect("hash");
    let token = token();
    let worker = Role::JoinWorker {
        token: &token,
        ca_cert_hash: &hash,
    };
    let user_data = render(&cluster("v1.31.0"), "demo-md-0", worker).expect("render");
    let documents = kubeadm_documents(&cloud_config(&user_data));
    let discovery = &documents[0]["discovery"]["bootstrapToken"];
    assert_eq!(discovery["token"], TOKEN);
    assert_eq!(discovery["apiServerEndpoint"], "api.demo.example:6443");
    let hashes = discovery["caCertHashes"].as_sequence().expect("hashes");
    assert_eq!(hashes.len(), 1);
    assert_eq!(hashes[0], hash.as_str());
    assert!(documents[0].get("controlPlane").is_none(), "a worker");
    assert_eq!(documents[0]["nodeRegistration"]["name"], "demo-md-0");
}

#[test]
fn a_control_plane_join_gets_the_pki_and_a_control_plane_section() {
    let pki = pki();
    let hash = pki.discovery_hash().expect("hash");
    let token = token();
    let role = Role::JoinControlPlane {
        pki: &pki,
        token: &token,
        ca_cert_hash: &hash,
    };
    let user_data = render(&cluster("v1.30.0"), "demo-cp-1", role).expect("render");
    let config = cloud_config(&user_data);
    let paths: Vec<String> = files(&config).into_iter().map(|(p, _)| p).collect();
    assert!(paths.contains(&"/etc/kubernetes/pki/ca.key".to_string()));
    assert!(paths.contains(&"/etc/kubernetes/pki/sa.key".to_string()));
    let documents = kubeadm_documents(&config);
    assert!(
        documents[0]["controlPlane"].as_mapping().is_some(),
        "controlPlane: {{}}"
    );
    assert_eq!(documents[0]["discovery"]["bootstrapToken"]["token"], TOKEN);
    assert_eq!(
        runcmd(&config)[2],
        "kubeadm join --config /run/kubeadm/kubeadm.yaml"
    );
}

#[test]
fn the_commands_run_pre_then_kubeadm_then_post() {
    let pki = pki();
    let user_data =
        render(&cluster("v1.31.0"), "demo-cp-0", Role::Init { pki: &pki }).expect("render");
    assert_eq!(
        runcmd(&cloud_config(&user_data)),
        [
            "swapoff -a",
            "modprobe br_netfilter",
            "kubeadm init --config /run/kubeadm/kubeadm.yaml",
            "touch /run/bootstrapped",
        ]
    );
}

#[test]
fn user_files_follow_the_bootstrap_files_with_their_mode_and_owner() {
    let pki = pki();
    let mut cluster = cluster("v1.31.0");
    cluster.files = vec![File {
        path: "/usr/local/bin/hello".into(),
        content: Secret::new("#!/bin/sh\necho hello\n".into()),
        permissions: Permissions::new(0o755).expect("mode"),
        owner: "root:adm".into(),
    }];
    let user_data = render(&cluster, "demo-cp-0", Role::Init { pki: &pki }).expect("render");
    let written = files(&cloud_config(&user_data));
    let (path, file) = written.last().expect("files");
    assert_eq!(path, "/usr/local/bin/hello");
    assert_eq!(file["content"], "#!/bin/sh\necho hello\n");
    assert_eq!(file["permissions"], "0755");
    assert_eq!(file["owner"], "root:adm");
}

#[test]
fn debug_of_the_rendered_secret_shows_no_key() {
    let pki = pki();
    let user_data =
        render(&cluster("v1.31.0"), "demo-cp-0", Role::Init { pki: &pki }).expect("render");
    assert!(
        user_data.expose().contains("PRIVATE KEY"),
        "the keys are in it"
    );
    let printed = format!("{user_data:?}");
    assert_eq!(printed, "Secret(<redacted>)");
    // Nor does Debug of what it was made from.
    let token = token();
    let hash = pki.discovery_hash().expect("hash");
    let role = Role::JoinControlPlane {
        pki: &pki,
        token: &token,
        ca_cert_hash: &hash,
    };
    let printed = format!("{role:?} {:?}", cluster("v1.31.0"));
    assert!(!printed.contains("PRIVATE KEY"), "{printed}");
    assert!(!printed.contains(TOKEN_SECRET), "{printed}");
}

#[test]
fn a_misnamed_machine_is_refused_naming_the_field() {
    let pki = pki();
    for bad in ["Demo-CP-0", "demo_cp_0", "-demo", "demo-", "", "demo..cp"] {
        let message = refusal(render(&cluster("v1.31.0"), bad, Role::Init { pki: &pki }));
        assert!(message.contains("machine_name"), "{message}");
        assert!(message.contains(&format!("{bad:?}")), "{message}");
    }
}

#[test]
fn kubernetes_older_than_1_22_is_refused_naming_the_version() {
    let pki = pki();
    let message = refusal(render(
        &cluster("v1.21.14"),
        "demo-cp-0",
        Role::Init { pki: &pki },
    ));
    assert!(message.contains("kubernetes_version"), "{message}");
    assert!(message.contains("v1.21.14"), "{message}");
}

#[test]
fn each_bad_input_is_refused_naming_its_field_and_value() {
    let pki = pki();
    type Edit = fn(&mut ClusterBootstrap);
    let cases: [(Edit, &str, &str); 11] = [
        (
            |c| c.kubernetes_version = "1.31.0".into(),
            "kubernetes_version",
            "1.31.0",
        ),
        (
            |c| c.kubernetes_version = "v1.31".into(),
            "kubernetes_version",
            "v1.31",
        ),
        (|c| c.endpoint_host = String::new(), "endpoint_host", "\"\""),
        (
            |c| c.endpoint_host = "[fd00::1]".into(),
            "endpoint_host",
            "[fd00::1]",
        ),
        (|c| c.endpoint_port = 0, "endpoint_port", "0"),
        (|c| c.cluster = "Demo".into(), "cluster", "Demo"),
        (
            |c| c.pod_subnet = Some("10.244.0.0".into()),
            "pod_subnet",
            "10.244.0.0",
        ),
        (
            |c| c.api_server_extra_args = args(&[("--v", "2")]),
            "api_server_extra_args",
            "--v",
        ),
        (
            |c| c.scheduler_extra_args = args(&[("", "x")]),
            "scheduler_extra_args",
            "\"\"",
        ),
        (
            |c| c.kubelet_extra_args = args(&[("-v", "2")]),
            "kubelet_extra_args",
            "-v",
        ),
        (
            |c| c.cert_sans = vec!["not a name".into()],
            "cert_sans",
            "not a name",
        ),
    ];
    for (edit, field, value) in cases {
        let mut cluster = cluster("v1.31.0");
        edit(&mut cluster);
        let message = refusal(render(&cluster, "demo-cp-0", Role::Init { pki: &pki }));
        assert!(message.contains(field), "{field}: {message}");
        assert!(message.contains(value), "{field}: {message}");
    }
}

#[test]
fn a_user_file_over_a_bootstrap_file_is_refused() {
    let pki = pki();
    for path in [
        KUBEADM_CONFIG_PATH,
        "/etc/kubernetes/pki/ca.key",
        "relative/path",
    ] {
        let mut cluster = cluster("v1.31.0");
        cluster.files = vec![File {
            path: path.into(),
            content: Secret::new("x".into()),
            permissions: Permissions::PRIVATE,
            owner: "root:root".into(),
        }];
        let message = refusal(render(&cluster, "demo-cp-0", Role::Init { pki: &pki }));
        assert!(message.contains("files[0].path"), "{message}");
        assert!(message.contains(path), "{message}");
    }
}

#[test]
fn another_clusters_pki_or_ca_hash_is_refused_without_showing_the_token() {
    let other = ClusterPki::generate("other", NOW).expect("pki");
    let message = refusal(render(
        &cluster("v1.31.0"),
        "demo-cp-0",
        Role::Init { pki: &other },
    ));
    assert!(
        message.contains("\"other\"") && message.contains("\"demo\""),
        "{message}"
    );
    // A control-plane join whose hash is not that of the PKI's CA.
    let pki = pki();
    let token = token();
    let other_hash = other.discovery_hash().expect("hash");
    let role = Role::JoinControlPlane {
        pki: &pki,
        token: &token,
        ca_cert_hash: &other_hash,
    };
    let message = refusal(render(&cluster("v1.31.0"), "demo-cp-1", role));
    assert!(message.contains("ca_cert_hash"), "{message}");
    assert!(!message.contains(TOKEN_SECRET), "{message}");
    // A malformed hash.
    let role = Role::JoinWorker {
        token: &token,
        ca_cert_hash: "sha256:XYZ",
    };
    let message = refusal(render(&cluster("v1.31.0"), "demo-md-0", role));
    assert!(
        message.contains("ca_cert_hash") && message.contains("sha256:XYZ"),
        "{message}"
    );
    assert!(!message.contains(TOKEN_SECRET), "{message}");
}

#[test]
fn an_ipv6_endpoint_is_written_in_brackets() {
    let pki = pki();
    let hash = pki.discovery_hash().expect("hash");
    let token = token();
    let mut cluster = cluster("v1.31.0");
    cluster.endpoint_host = "fd00::10".into();
    let init = render(&cluster, "demo-cp-0", Role::Init { pki: &pki }).expect("render");
    let documents = kubeadm_documents(&cloud_config(&init));
    assert_eq!(documents[1]["controlPlaneEndpoint"], "[fd00::10]:6443");
    let worker = Role::JoinWorker {
        token: &token,
        ca_cert_hash: &hash,
    };
    let join = render(&cluster, "demo-md-0", worker).expect("render");
    let documents = kubeadm_documents(&cloud_config(&join));
    assert_eq!(
        documents[0]["discovery"]["bootstrapToken"]["apiServerEndpoint"],
        "[fd00::10]:6443"
    );
}
