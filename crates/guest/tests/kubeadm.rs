//! kubeadm's documents read back as kubeadm reads them: the API version a Kubernetes
//! release gets, kubeadm's exact field names, and what is left out when empty.

use flightdeck_guest::Secret;
use flightdeck_guest::kubeadm::{
    ApiEndpoint, ApiVersion, BootstrapTokenDiscovery, ClusterConfiguration, Discovery, Document,
    InitConfiguration, JoinConfiguration, JoinControlPlane, KubeadmApi, KubernetesVersion,
    NodeRegistration, V1beta3, V1beta4, to_yaml,
};

fn version(text: &str) -> KubernetesVersion {
    KubernetesVersion::parse(text).expect(text)
}

fn node<A: KubeadmApi>(kubelet_args: &[(&str, &str)]) -> NodeRegistration<A> {
    let args = kubelet_args
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    NodeRegistration {
        name: "cp-0".to_string(),
        kubelet_extra_args: A::extra_args(&args),
        taints: None,
    }
}

fn parse_all(text: &str) -> Vec<yaml_serde::Value> {
    use serde::Deserialize;
    yaml_serde::Deserializer::from_str(text)
        .map(|doc| yaml_serde::Value::deserialize(doc).expect("yaml"))
        .collect()
}

#[test]
fn the_kubernetes_version_picks_the_kubeadm_api() {
    for (text, api) in [
        ("v1.22.0", ApiVersion::V1beta3),
        ("v1.30.99", ApiVersion::V1beta3),
        ("v1.31.0", ApiVersion::V1beta4),
        ("v1.33.2", ApiVersion::V1beta4),
        ("v2.0.0", ApiVersion::V1beta4),
    ] {
        assert_eq!(version(text).api_version().expect(text), api, "{text}");
    }
    for old in ["v1.21.14", "v1.15.0", "v0.99.0"] {
        let err = version(old).api_version().expect_err(old);
        assert!(err.to_string().contains(old), "{err}");
    }
}

#[test]
fn a_version_must_be_v_major_minor_patch() {
    assert_eq!(
        version("v1.31.10"),
        KubernetesVersion {
            major: 1,
            minor: 31,
            patch: 10
        }
    );
    assert_eq!(version("v1.31.0").to_string(), "v1.31.0");
    for bad in [
        "1.31.0",
        "v1.31",
        "v1.31.0.1",
        "v1.31.0-rc.1",
        "v1.031.0",
        "v1..0",
        "v1.31.x",
        "V1.31.0",
        " v1.31.0",
        "",
    ] {
        let err = KubernetesVersion::parse(bad).expect_err(bad);
        assert!(err.to_string().contains("kubernetes_version"), "{err}");
    }
}

#[test]
fn every_document_carries_its_api_version_and_kind_and_the_file_separates_them() {
    let v = version("v1.31.0");
    let documents: Vec<Document<V1beta4>> = vec![
        Document::Init(InitConfiguration::new(node(&[]))),
        Document::Cluster(ClusterConfiguration::new(
            v,
            "demo".into(),
            "cp.example:6443".into(),
        )),
    ];
    let text = to_yaml(&documents).expect("yaml");
    assert!(text.lines().any(|l| l == "---"), "{}", *text);
    let parsed = parse_all(&text);
    assert_eq!(parsed.len(), 2);
    for (doc, kind) in parsed
        .iter()
        .zip(["InitConfiguration", "ClusterConfiguration"])
    {
        assert_eq!(doc["apiVersion"], "kubeadm.k8s.io/v1beta4");
        assert_eq!(doc["kind"], kind);
    }
    assert_eq!(parsed[1]["kubernetesVersion"], "v1.31.0");
}

#[test]
fn empty_fields_are_left_out() {
    let documents: Vec<Document<V1beta3>> = vec![
        Document::Init(InitConfiguration::new(node(&[]))),
        Document::Cluster(ClusterConfiguration::new(
            version("v1.30.0"),
            "demo".into(),
            "cp.example:6443".into(),
        )),
    ];
    let parsed = parse_all(&to_yaml(&documents).expect("yaml"));
    let keys = |doc: &yaml_serde::Value| -> Vec<String> {
        let map = doc.as_mapping().expect("mapping");
        map.keys()
            .map(|k| k.as_str().expect("key").to_string())
            .collect()
    };
    assert_eq!(keys(&parsed[0]), ["apiVersion", "kind", "nodeRegistration"]);
    assert_eq!(keys(&parsed[0]["nodeRegistration"]), ["name"]);
    assert_eq!(
        keys(&parsed[1]),
        [
            "apiVersion",
            "kind",
            "kubernetesVersion",
            "clusterName",
            "controlPlaneEndpoint"
        ],
        "v1beta3 has no encryptionAlgorithm"
    );
}

#[test]
fn field_names_are_kubeadms_own() {
    let mut cluster = ClusterConfiguration::<V1beta4>::new(
        version("v1.31.0"),
        "demo".into(),
        "cp.example:6443".into(),
    );
    cluster.api_server.cert_sans = vec!["api.example".into()];
    cluster.networking.dns_domain = Some("cluster.local".into());
    let mut init = InitConfiguration::<V1beta4>::new(node(&[]));
    init.local_api_endpoint = Some(ApiEndpoint {
        advertise_address: Some("10.0.0.5".into()),
        bind_port: Some(6443),
    });
    init.node_registration.taints = Some(Vec::new());
    let parsed =
        parse_all(&to_yaml(&[Document::Init(init), Document::Cluster(cluster)]).expect("yaml"));
    let endpoint = &parsed[0]["localAPIEndpoint"];
    assert_eq!(endpoint["advertiseAddress"], "10.0.0.5");
    assert_eq!(endpoint["bindPort"], 6443);
    let taints = parsed[0]["nodeRegistration"]["taints"].as_sequence();
    assert_eq!(taints.map(Vec::len), Some(0), "taints: [] is written");
    assert_eq!(parsed[1]["apiServer"]["certSANs"][0], "api.example");
    assert_eq!(parsed[1]["networking"]["dnsDomain"], "cluster.local");
    assert_eq!(parsed[1]["encryptionAlgorithm"], "ECDSA-P256");
}

#[test]
fn extra_args_are_a_map_in_v1beta3_and_a_list_in_v1beta4() {
    let old = parse_all(
        &to_yaml(&[Document::Init(InitConfiguration::<V1beta3>::new(node(&[
            ("v", "2"),
        ])))])
        .expect("yaml"),
    );
    let map = &old[0]["nodeRegistration"]["kubeletExtraArgs"];
    assert_eq!(map["v"], "2");
    let new = parse_all(
        &to_yaml(&[Document::Init(InitConfiguration::<V1beta4>::new(node(&[
            ("v", "2"),
        ])))])
        .expect("yaml"),
    );
    let list = new[0]["nodeRegistration"]["kubeletExtraArgs"]
        .as_sequence()
        .expect("a list");
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["name"], "v");
    assert_eq!(list[0]["value"], "2", "a string, not a number");
}

#[test]
fn a_control_plane_join_is_marked_by_an_empty_control_plane_section() {
    let discovery = || Discovery {
        bootstrap_token: BootstrapTokenDiscovery {
            token: Secret::new("abcdef.0123456789abcdef".into()),
            api_server_endpoint: "cp.example:6443".into(),
            ca_cert_hashes: vec!["sha256:00".into()],
        },
    };
    let join = JoinConfiguration::<V1beta3>::new(
        node(&[]),
        discovery(),
        Some(JoinControlPlane::default()),
    );
    let parsed = parse_all(&to_yaml(&[Document::Join(join.clone())]).expect("yaml"));
    let section = parsed[0]["controlPlane"]
        .as_mapping()
        .expect("controlPlane");
    assert!(section.is_empty());
    assert_eq!(
        parsed[0]["discovery"]["bootstrapToken"]["apiServerEndpoint"],
        "cp.example:6443"
    );
    let worker = JoinConfiguration::<V1beta3>::new(node(&[]), discovery(), None);
    let parsed = parse_all(&to_yaml(&[Document::Join(worker)]).expect("yaml"));
    assert!(parsed[0].get("controlPlane").is_none());
    // Debug of a document holding a token does not show it.
    assert!(!format!("{join:?}").contains("0123456789abcdef"));
}
