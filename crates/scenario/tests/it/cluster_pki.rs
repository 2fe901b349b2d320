//! Issue 41: a cluster bootstrapped by kubeadm has its PKI made by flightdeck, kept
//! sealed at rest: the store file holds no CA private key, PEM or DER (and does once
//! sealing is switched off, so the search can fail); the PKI opens again only with the
//! key it was sealed with, an engine given another key stops naming it, and the PKI goes
//! with the cluster.

use std::sync::Arc;

use crate::common::{drive, example};
use base64::Engine as _;
use flightdeck_cloud::{SeededRng, SimClock, Timestamp};
use flightdeck_engine::secrets::SecretsAtRest;
use flightdeck_engine::{Engine, EngineConfig};
use flightdeck_guest::{ClusterPki, SecretsKey};
use flightdeck_sim::{SimCloud, SimConfig};
use flightdeck_spec::Cluster;
use flightdeck_spec::bootstrap::BootstrapProvider;
use flightdeck_store::Store;

fn kubeadm_example() -> Cluster {
    let mut c = example();
    c.spec.bootstrap.provider = BootstrapProvider::Kubeadm;
    c
}

fn sealed(origin: &str) -> SecretsAtRest {
    SecretsAtRest::Sealed(Arc::new(SecretsKey::generate(origin).expect("key")))
}

fn engine(
    cloud: &Arc<SimCloud>,
    clock: &SimClock,
    dir: &std::path::Path,
    secrets: SecretsAtRest,
) -> Result<Engine<SimCloud>, flightdeck_engine::EngineError> {
    Engine::new(
        cloud.clone(),
        Arc::new(Store::open(dir).expect("store")),
        Arc::new(clock.clone()),
        Box::new(SeededRng::new(1)),
        EngineConfig {
            secrets: Some(secrets),
            ..EngineConfig::default()
        },
    )
}

/// Every private key of the PKI, as PEM text and as the DER bytes inside it.
fn private_keys(pki: &ClusterPki) -> Vec<(String, Vec<u8>)> {
    [
        &pki.cluster_ca.key_pem,
        &pki.etcd_ca.key_pem,
        &pki.front_proxy_ca.key_pem,
        &pki.service_account_key,
    ]
    .into_iter()
    .map(|k| {
        let pem = k.expose().to_string();
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .expect("PEM body");
        assert!(der.len() > 60, "a key's DER");
        (pem, der)
    })
    .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Applies the kubeadm example on a store in `dir`; answers its PKI and the store file's
/// bytes once the engine is dropped.
fn applied(dir: &std::path::Path, secrets: SecretsAtRest) -> (ClusterPki, Vec<u8>) {
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), 1, clock.clone()));
    let mut e = engine(&cloud, &clock, dir, secrets).expect("engine");
    e.apply(kubeadm_example()).expect("apply");
    let pki = e
        .pki("demo")
        .expect("opens")
        .expect("a kubeadm cluster has a PKI");
    drop(e);
    let mut bytes = Vec::new();
    for f in std::fs::read_dir(dir).expect("dir") {
        bytes.extend(std::fs::read(f.expect("entry").path()).expect("read"));
    }
    (pki, bytes)
}

#[test]
fn the_store_file_holds_no_ca_private_key_and_does_once_sealing_is_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pki, bytes) = applied(dir.path(), sealed("test key"));
    let keys = private_keys(&pki);
    assert_eq!(keys.len(), 4);
    for (pem, der) in &keys {
        assert!(!contains(&bytes, pem.as_bytes()), "a PEM key in the store");
        assert!(!contains(&bytes, der), "a DER key in the store");
    }
    assert!(!contains(&bytes, b"PRIVATE KEY"));

    let open = tempfile::tempdir().expect("tempdir");
    let (pki, bytes) = applied(open.path(), SecretsAtRest::UnsafePlain);
    let found = private_keys(&pki)
        .iter()
        .filter(|(pem, _)| contains(&bytes, pem.replace('\n', "\\n").as_bytes()))
        .count();
    assert_eq!(found, 4, "unsealed, every key is in the store in the clear");
}

#[tokio::test]
async fn the_pki_opens_with_its_key_and_an_engine_given_another_key_stops_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), 1, clock.clone()));
    let key = sealed("the first key");
    let mut e = engine(&cloud, &clock, dir.path(), key.clone()).expect("engine");
    e.apply(kubeadm_example()).expect("apply");
    let first = e.pki("demo").expect("opens").expect("pki");
    drop(e);

    // The same key: the same CAs, never new ones.
    let e = engine(&cloud, &clock, dir.path(), key.clone()).expect("engine");
    let again = e.pki("demo").expect("opens").expect("pki");
    assert_eq!(again.cluster_ca.cert_pem, first.cluster_ca.cert_pem);
    assert_eq!(
        again.discovery_hash().expect("hash"),
        first.discovery_hash().expect("hash")
    );
    drop(e);

    // Another key: the engine does not start, and says which key failed.
    let err = engine(&cloud, &clock, dir.path(), sealed("the other key"))
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("cluster demo") && err.contains("the other key"),
        "{err}"
    );
    // No key given at all (an engine that would make its own): refused too.
    let err = Engine::new(
        cloud.clone(),
        Arc::new(Store::open(dir.path()).expect("store")),
        Arc::new(clock.clone()),
        Box::new(SeededRng::new(1)),
        EngineConfig::default(),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(err.contains("--secrets-key-file"), "{err}");
}

#[tokio::test]
async fn the_pki_goes_with_its_cluster_and_a_cluster_without_kubeadm_has_none() {
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), 1, clock.clone()));
    let store = Arc::new(Store::in_memory().expect("store"));
    let mut e = Engine::new(
        cloud.clone(),
        store.clone(),
        Arc::new(clock.clone()),
        Box::new(SeededRng::new(1)),
        EngineConfig::default(),
    )
    .expect("engine");
    e.apply(kubeadm_example()).expect("apply");
    assert_eq!(
        store.keys(flightdeck_engine::secrets::T_PKI).expect("keys"),
        ["demo"]
    );
    e.delete("demo").expect("delete");
    assert!(
        drive(&mut e, &cloud, &clock, 3600, |e| e
            .cluster("demo")
            .is_none())
        .await,
        "the deletion finishes"
    );
    assert!(
        store
            .keys(flightdeck_engine::secrets::T_PKI)
            .expect("keys")
            .is_empty()
    );

    let mut none = example();
    none.spec.bootstrap.provider = BootstrapProvider::None;
    none.metadata.name = flightdeck_spec::Name::new("plain").expect("name");
    e.apply(none).expect("apply");
    assert!(e.pki("plain").expect("no error").is_none());
    assert!(
        store
            .keys(flightdeck_engine::secrets::T_PKI)
            .expect("keys")
            .is_empty()
    );
}

/// `flightdeck get kubeconfig`: for a built kubeadm cluster, a kubeconfig whose server is
/// the load balancer's VIP, trusted through the cluster CA, with a client certificate
/// the CA signed; issuing it is an event that holds none of it. A cluster without
/// flightdeck's PKI, an unknown endpoint and a TTL out of bounds are refused by name.
#[tokio::test]
async fn a_kubeconfig_names_the_vip_trusts_the_cluster_ca_and_its_issue_is_an_event() {
    use base64::Engine as _;
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), 1, clock.clone()));
    let mut e = Engine::new(
        cloud.clone(),
        Arc::new(Store::in_memory().expect("store")),
        Arc::new(clock.clone()),
        Box::new(SeededRng::new(1)),
        EngineConfig::default(),
    )
    .expect("engine");
    e.apply(kubeadm_example()).expect("apply");
    let day = flightdeck_spec::Duration::from_secs(24 * 3600);
    match e.issue_kubeconfig("demo", day, "alice") {
        Err(flightdeck_engine::EngineError::EndpointUnknown(c)) => assert_eq!(c, "demo"),
        other => panic!("no VIP yet: {:?}", other.map(|_| "a kubeconfig")),
    }
    assert!(
        drive(&mut e, &cloud, &clock, 3600, |e| {
            e.cluster("demo").is_some_and(|c| c.status.ready)
        })
        .await,
        "the cluster is built"
    );
    let text = e
        .issue_kubeconfig("demo", day, "alice")
        .expect("kubeconfig");
    let v: serde_json::Value = yaml_serde::from_str(text.expose()).expect("YAML");
    let vip = cloud.snapshot().load_balancers[0]
        .vip_address
        .expect("the VIP");
    assert_eq!(
        v["clusters"][0]["cluster"]["server"],
        format!("https://{vip}:6443")
    );
    let pki = e.pki("demo").expect("opens").expect("pki");
    let ca = v["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .expect("CA");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ca)
        .expect("base64");
    assert_eq!(ca, pki.cluster_ca.cert_pem.as_bytes());
    assert!(v["users"][0]["user"]["client-certificate-data"].is_string());
    let issued: Vec<_> = e
        .drain_events()
        .into_iter()
        .filter(|ev| ev.reason == "KubeconfigIssued")
        .collect();
    assert_eq!(issued.len(), 1);
    assert!(issued[0].message.contains("alice"), "{}", issued[0].message);
    assert!(
        issued[0].message.contains("kubeadm:cluster-admins")
            || issued[0].message.contains("system:masters")
    );
    assert!(!issued[0].message.contains("PRIVATE"));

    let zero = flightdeck_spec::Duration::from_secs(0);
    assert!(matches!(
        e.issue_kubeconfig("demo", zero, "alice"),
        Err(flightdeck_engine::EngineError::Invalid(_))
    ));
    let mut none = example();
    none.spec.bootstrap.provider = BootstrapProvider::None;
    none.metadata.name = flightdeck_spec::Name::new("plain").expect("name");
    none.spec.network.security_group =
        Some(flightdeck_spec::Text::new("plain-nodes").expect("text"));
    none.spec.network.pod_cidr = "10.245.0.0/16".parse().expect("cidr");
    e.apply(none).expect("apply");
    assert!(matches!(
        e.issue_kubeconfig("plain", day, "alice"),
        Err(flightdeck_engine::EngineError::NoPki(_))
    ));
}

/// A cluster stored before kubeadm became the default (its spec has no `bootstrap`) was
/// made with `none`: an engine of today opens that store and drives it as `none`, with
/// no PKI asked of the store (without the reading rule it would stop: "its bootstrap is
/// kubeadm, and the store holds no PKI for it"), and what it stores again names `none`.
#[test]
fn a_cluster_stored_before_kubeadm_became_the_default_goes_on_booting_its_own_data() {
    let dir = tempfile::tempdir().expect("dir");
    let clock = SimClock::new(Timestamp::SIM_EPOCH);
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), 1, clock.clone()));
    {
        let mut e = engine(&cloud, &clock, dir.path(), sealed("then")).expect("engine");
        let mut old = example();
        old.spec.bootstrap.provider = BootstrapProvider::None;
        e.apply(old).expect("apply");
    }
    // The spec as a flightdeck of before stored it: no `bootstrap` at all.
    {
        let store = Store::open(dir.path()).expect("store");
        let raw = store
            .get_raw(flightdeck_engine::SPEC_TABLE, "demo")
            .expect("read")
            .expect("stored");
        let mut json: serde_json::Value = serde_json::from_slice(&raw).expect("json");
        json["spec"]
            .as_object_mut()
            .expect("a spec")
            .remove("bootstrap");
        store
            .commit(vec![flightdeck_store::Write::Put {
                table: flightdeck_engine::SPEC_TABLE,
                key: "demo".into(),
                json: serde_json::to_vec(&json).expect("bytes"),
            }])
            .expect("the old spec stored");
    }
    let e = engine(&cloud, &clock, dir.path(), sealed("now")).expect("the engine opens it");
    let driven = e.cluster("demo").expect("driven");
    assert_eq!(driven.spec.spec.bootstrap.provider, BootstrapProvider::None);
    drop(e);
    let store = Store::open(dir.path()).expect("store");
    let read = flightdeck_engine::stored_spec(&store, "demo")
        .expect("read")
        .expect("stored");
    assert_eq!(read.spec.bootstrap.provider, BootstrapProvider::None);
    // A spec stored today names its provider, and the default is kubeadm.
    store
        .commit(vec![flightdeck_store::Write::put(
            flightdeck_engine::SPEC_TABLE,
            "fresh",
            &example(),
        )])
        .expect("a new spec stored");
    let fresh = flightdeck_engine::stored_spec(&store, "fresh")
        .expect("read")
        .expect("stored");
    assert_eq!(fresh.spec.bootstrap.provider, BootstrapProvider::Kubeadm);
}
