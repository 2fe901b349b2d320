//! Issue 41: flightdeck makes the Kubernetes cluster, and the simulator judges every
//! machine's bootstrap on its own (bootstrapValid, singleInit). Each check is shown to
//! go red with the mechanism it guards switched off.

use std::sync::Arc;

use flightdeck_cloud::{Access, AccessBook, Clock as _, WorkloadAccess};
use flightdeck_guest::{CertAndKey, ClusterPki, Secret};
use flightdeck_plan::{Disabled, Mechanism};
use flightdeck_scenario::RunOptions;
use flightdeck_workload::Route;

use crate::common::{report, verdict};

/// Scenario `name` passes, and each of `checks` held and was checked.
async fn passes_with(name: &str, checks: &[&str]) {
    let r = report(name, &RunOptions::default()).await;
    assert!(r.passed, "{:#?}", r.invariants);
    for check in checks {
        let v = verdict(&r, check);
        assert!(v.held && v.checks > 0, "{v:?}");
    }
}

/// Runs scenario `name` over the wire; it passes, with bootstrapValid and singleInit
/// judged (not merely held for want of a machine).
async fn wire_bootstraps(name: &str) -> flightdeck_scenario::Run {
    let loaded = flightdeck_scenario::load_scenario(name).expect("loads");
    let run = flightdeck_scenario::run_wire(&loaded, &RunOptions::default(), &mut |_| {})
        .await
        .expect("run completes");
    assert!(run.report.passed, "{:#?}", run.report.invariants);
    for check in ["bootstrapValid", "singleInit"] {
        let v = verdict(&run.report, check);
        assert!(v.held && v.checks > 0, "{v:?}");
    }
    run
}

#[tokio::test]
async fn a_machine_that_boots_past_its_tokens_life_still_joins_because_its_token_is_moved_on() {
    passes_with("kubeadm-slow-boot", &["bootstrapValid"]).await;
}

#[tokio::test]
async fn without_token_refresh_a_slow_machines_token_runs_out_and_bootstrap_valid_goes_red() {
    let mut options = RunOptions::default();
    options.engine.plan.disabled = Disabled::of([Mechanism::TokenRefresh]);
    let r = report("kubeadm-slow-boot", &options).await;
    let valid = verdict(&r, "bootstrapValid");
    assert!(!valid.held, "{valid:?}");
    let message = &valid.first_violation.as_ref().expect("a violation").message;
    assert!(
        message.contains("expired before the machine joined"),
        "{message}"
    );
}

#[tokio::test]
async fn a_token_an_operator_deletes_costs_its_machine_a_repair_and_no_false_alarm() {
    passes_with("kubeadm-token-deleted", &["bootstrapValid"]).await;
}

#[tokio::test]
async fn a_control_plane_upgrade_joins_machines_rendered_for_the_new_version() {
    passes_with("kubeadm-upgrade", &["bootstrapValid", "singleInit"]).await;
}

/// What a wire run's workload clients build for `access`: the cluster's loopback TLS
/// listener, verified under the endpoint's host.
fn client_route(
    listeners: &flightdeck_sim_http::WorkloadListeners,
    cluster: &str,
    access: &WorkloadAccess,
) -> Route {
    let served = listeners
        .server(cluster)
        .expect("the listener starts")
        .expect("kubeadm init made the cluster");
    let host: http::Uri = access.server.parse().expect("the access names a URL");
    Route {
        url: format!("https://{}", served.addr),
        tls_server_name: host.host().map(str::to_string),
        proxy_url: None,
    }
}

/// `GET /api/v1/nodes` as the client of `access` at `route`: the body, or the error.
async fn list_nodes(
    cluster: &str,
    access: &WorkloadAccess,
    route: &Route,
) -> Result<String, String> {
    let kubeconfig = flightdeck_workload::issued::kubeconfig_of(cluster, access, route);
    let client =
        flightdeck_workload::clients::client_from("kubernetes", "test", kubeconfig, "default")
            .await
            .map_err(|e| e.to_string())?;
    let request = http::Request::get("/api/v1/nodes")
        .body(Vec::new())
        .expect("a request");
    client
        .request_text(request)
        .await
        .map_err(|e| format!("{e:?}"))
}

/// Issue 41: a kubeadm cluster's simulated API server speaks TLS with a certificate the
/// cluster CA signed, and lets in only clients of that CA in an administrators' group.
/// flightdeck's own certificate (issued by the engine into the access book) lists the
/// nodes; a certificate of another CA is refused at the handshake, one of the cluster
/// CA outside the groups is answered 403, and a client that trusts another CA refuses
/// the server.
#[tokio::test]
async fn the_workload_api_speaks_tls_and_admits_only_administrators_of_the_cluster_ca() {
    let book = Arc::new(AccessBook::new());
    let options = RunOptions {
        workload_access: Some(book.clone()),
        ..RunOptions::default()
    };
    let loaded = flightdeck_scenario::load_scenario("kubeadm-upgrade").expect("loads");
    let run = flightdeck_scenario::run(&loaded, &options, &mut |_| {})
        .await
        .expect("run completes");
    assert!(run.report.passed, "{:#?}", run.report.invariants);
    let cluster = loaded.clusters[0].name().to_string();
    let Some(Access::Issued(access)) = book.get(&cluster) else {
        panic!(
            "the engine issued itself no access to {cluster}: {:?}",
            book.get(&cluster)
        );
    };
    let ca = run
        .cloud
        .workload_ca(&cluster)
        .expect("kubeadm init made the cluster");
    let listeners = flightdeck_sim_http::WorkloadListeners::new(run.cloud.clone());
    let route = client_route(&listeners, &cluster, &access);

    let nodes = list_nodes(&cluster, &access, &route)
        .await
        .expect("flightdeck lists the nodes");
    assert!(nodes.contains("\"kind\":\"NodeList\""), "{nodes}");
    assert!(nodes.contains(&format!("{cluster}-cp-")), "{nodes}");

    let now = i64::try_from(run.cloud.clock().now().millis() / 1000).expect("a time");
    let other = ClusterPki::generate("other", now).expect("another PKI");
    let foreign = other
        .issue_client("intruder", &["system:masters"], now, 3600)
        .expect("a client certificate");
    let stranger = WorkloadAccess {
        cert_pem: foreign.cert_pem,
        key_pem: foreign.key_pem.expose().to_string(),
        ..access.clone()
    };
    let refused = list_nodes(&cluster, &stranger, &route)
        .await
        .expect_err("a certificate of another CA is refused");
    assert!(!refused.contains("NodeList"), "{refused}");

    let cluster_pki = ClusterPki {
        cluster: cluster.clone(),
        cluster_ca: CertAndKey {
            cert_pem: ca.cert_pem.clone(),
            key_pem: Secret::new(ca.key_pem.clone()),
        },
        ..other
    };
    let developer = cluster_pki
        .issue_client("dev", &["developers"], now, 3600)
        .expect("a client certificate");
    let outsider = WorkloadAccess {
        cert_pem: developer.cert_pem,
        key_pem: developer.key_pem.expose().to_string(),
        ..access.clone()
    };
    let forbidden = list_nodes(&cluster, &outsider, &route)
        .await
        .expect_err("a client outside the administrators' groups is refused");
    assert!(
        forbidden.contains("403") || forbidden.contains("Forbidden"),
        "{forbidden}"
    );

    let misled = WorkloadAccess {
        ca_pem: ClusterPki::generate("elsewhere", now)
            .expect("a PKI")
            .cluster_ca
            .cert_pem,
        ..access.clone()
    };
    let unverified = list_nodes(&cluster, &misled, &route)
        .await
        .expect_err("a server the client's CA did not sign is refused");
    assert!(!unverified.contains("NodeList"), "{unverified}");

    through_the_proxy(&run.cloud, &listeners, &cluster, &access).await;
}

/// Starts the simulator's proxy into the clusters' network on loopback: its URL.
async fn workload_proxy(listeners: Arc<flightdeck_sim_http::WorkloadListeners>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    tokio::spawn(flightdeck_sim_http::serve_workload_proxy(
        listeners, listener,
    ));
    url
}

/// The first line of the proxy's answer to `request` (sent as is).
async fn proxy_status(proxy: &str, request: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut tcp = tokio::net::TcpStream::connect(proxy.trim_start_matches("http://"))
        .await
        .expect("the proxy listens");
    tcp.write_all(request.as_bytes()).await.expect("sent");
    let mut answer = vec![0; 1024];
    let n = tcp.read(&mut answer).await.expect("an answer");
    String::from_utf8_lossy(&answer[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Through the simulator's proxy (`sim serve --workload-proxy`), a client reaches the
/// cluster by its endpoint's own address and verifies the API server under it; the
/// proxy tunnels only CONNECT, only to a workload API server.
async fn through_the_proxy(
    cloud: &flightdeck_sim::SimCloud,
    listeners: &Arc<flightdeck_sim_http::WorkloadListeners>,
    cluster: &str,
    access: &WorkloadAccess,
) {
    let proxy = workload_proxy(listeners.clone()).await;
    let route = Route {
        url: access.server.clone(),
        tls_server_name: None,
        proxy_url: Some(flightdeck_workload::proxy_url(&proxy).expect("an HTTP proxy")),
    };
    let nodes = list_nodes(cluster, access, &route)
        .await
        .expect("flightdeck lists the nodes through the proxy");
    assert!(nodes.contains("\"kind\":\"NodeList\""), "{nodes}");

    let endpoint = cloud
        .workload_ca(cluster)
        .expect("kubeadm init made the cluster")
        .endpoint;
    let host = endpoint.rsplit_once(':').expect("host:port").0;
    let answers = [
        (
            format!("CONNECT {endpoint} HTTP/1.1\r\nHost: {endpoint}\r\n\r\n"),
            "200",
        ),
        (
            format!("GET http://{endpoint}/ HTTP/1.1\r\nHost: {endpoint}\r\n\r\n"),
            "405",
        ),
        (
            format!("CONNECT {host}:1 HTTP/1.1\r\nHost: {host}:1\r\n\r\n"),
            "502",
        ),
        (
            "CONNECT nowhere HTTP/1.1\r\nHost: nowhere\r\n\r\n".to_string(),
            "400",
        ),
    ];
    for (request, status) in answers {
        let line = proxy_status(&proxy, &request).await;
        assert!(
            line.starts_with(&format!("HTTP/1.1 {status}")),
            "{request:?} → {line:?}, not {status}"
        );
    }
    for bad in [
        "https://127.0.0.1:3128",
        "http://127.0.0.1",
        "socks5://h:1",
        "not a url",
        "http://h:1/path",
    ] {
        let e = flightdeck_workload::proxy_url(bad).expect_err("refused");
        assert!(e.contains(bad), "{e}");
    }
}

/// The same scenario over the wire: every workload call (tokens, nodes, drains) goes
/// over TLS with flightdeck's own certificate, and the cluster still comes up.
#[tokio::test]
async fn over_the_wire_flightdeck_reaches_a_kubeadm_cluster_with_its_own_certificate() {
    wire_bootstraps("kubeadm-upgrade").await;
}

/// On KubeVirt the endpoint is the endpoint Service's cluster IP, known only once the
/// infra cluster gave the Service one: every VMI's data names it, the simulated guest
/// runs init and the joins from the VMIs' `cloudInitNoCloud` data, and the check reads
/// what the simulator recorded.
#[tokio::test]
async fn on_kubevirt_the_machines_bootstrap_at_the_endpoint_services_cluster_ip() {
    passes_with("kubeadm-kubevirt", &["bootstrapValid", "singleInit"]).await;
}

/// The same over the wire: flightdeck reaches the KubeVirt guest's API at the Service's
/// address over TLS with its own certificate (tokens, nodes), and the cluster comes up.
#[tokio::test]
async fn over_the_wire_flightdeck_reaches_a_kubevirt_kubeadm_cluster_with_its_own_certificate() {
    let run = wire_bootstraps("kubeadm-kubevirt").await;
    let (_, status) = run
        .report
        .clusters
        .first()
        .and_then(|c| c.status.as_ref().map(|s| (c, s)))
        .expect("a cluster with a status");
    let endpoint = status.api_endpoint.as_deref().expect("an API endpoint");
    assert!(endpoint.starts_with("10.96."), "{endpoint}");
}
