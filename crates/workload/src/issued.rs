//! Workload clients that reach a kubeadm cluster with flightdeck's own certificate
//! ([`IssuedFirst`]): the engine writes its access into an [`AccessBook`]
//! (`engine/src/access.rs`); a cluster the book names is reached with it, its server
//! verified against the cluster CA alone (never `insecure-skip-tls-verify`); any other
//! cluster the way its spec says (the inner [`WorkloadClients`]).
//!
//! The client for one certificate is built once, and again when the engine issues
//! another (a new serial) or the address moves.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use flightdeck_cloud::{Access, AccessBook, CloudError, ErrorClass, Ownership, WorkloadAccess};
use kube::Client;
use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

use crate::clients::{WorkloadClients, client_from};
use crate::errors::WORKLOAD;

/// Where a client connects for an access: the product connects to the server the
/// access names; a test bed whose API servers listen elsewhere (on loopback) says
/// where, and under which name the server's certificate is verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The URL connected to.
    pub url: String,
    /// The name the server's certificate must carry (and SNI sends), when it is not
    /// the URL's host.
    pub tls_server_name: Option<String>,
    /// An HTTP proxy the connection is tunnelled through (`CONNECT`), as kubeconfig's
    /// `proxy-url`: a bastion in front of the clusters' network.
    pub proxy_url: Option<String>,
}

/// How an access is routed: `Ok(None)` when its server cannot be reached yet.
pub type Router = dyn Fn(&str, &WorkloadAccess) -> Result<Option<Route>, CloudError> + Send + Sync;

/// The clients of [`AccessBook`]'s clusters first, the inner ones' for the rest.
pub struct IssuedFirst<W> {
    book: Arc<AccessBook>,
    inner: W,
    router: Option<Box<Router>>,
    /// The proxy every access's server is reached through, when it is not routed.
    proxy_url: Option<String>,
    /// Per cluster: the serial and route its client was built for, and the client.
    built: Mutex<BTreeMap<String, (String, Route, Client)>>,
}

impl<W> IssuedFirst<W> {
    /// Clients that connect to each access's server as it is.
    pub fn new(book: Arc<AccessBook>, inner: W) -> Self {
        IssuedFirst {
            book,
            inner,
            router: None,
            proxy_url: None,
            built: Mutex::new(BTreeMap::new()),
        }
    }

    /// Reaches each access's server through the HTTP proxy at `proxy_url` (`CONNECT`;
    /// see [`proxy_url`]), or directly when `None`.
    pub fn through_proxy(mut self, proxy_url: Option<String>) -> Self {
        self.proxy_url = proxy_url;
        self
    }

    /// Clients that connect where `router` says (a test bed's loopback listeners).
    pub fn routed(book: Arc<AccessBook>, inner: W, router: Box<Router>) -> Self {
        IssuedFirst {
            router: Some(router),
            ..IssuedFirst::new(book, inner)
        }
    }

    pub fn book(&self) -> &Arc<AccessBook> {
        &self.book
    }

    fn route(&self, cluster: &str, access: &WorkloadAccess) -> Result<Option<Route>, CloudError> {
        match &self.router {
            Some(router) => router(cluster, access),
            None => Ok(Some(Route {
                url: access.server.clone(),
                tls_server_name: None,
                proxy_url: self.proxy_url.clone(),
            })),
        }
    }
}

/// The kubeconfig of `access` (as kubectl would read it), connecting by `route`.
pub fn kubeconfig_of(cluster: &str, access: &WorkloadAccess, route: &Route) -> Kubeconfig {
    let user = format!("flightdeck@{cluster}");
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: cluster.to_string(),
            cluster: Some(Cluster {
                server: Some(route.url.clone()),
                certificate_authority_data: Some(B64.encode(access.ca_pem.as_bytes())),
                tls_server_name: route.tls_server_name.clone(),
                proxy_url: route.proxy_url.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: user.clone(),
            auth_info: Some(AuthInfo {
                client_certificate_data: Some(B64.encode(access.cert_pem.as_bytes())),
                client_key_data: Some(B64.encode(access.key_pem.as_bytes()).into()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: user.clone(),
            context: Some(Context {
                cluster: cluster.to_string(),
                user: Some(user.clone()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        current_context: Some(user),
        ..Default::default()
    }
}

impl<W: WorkloadClients> WorkloadClients for IssuedFirst<W> {
    async fn client(&self, owner: &Ownership) -> Result<Option<Client>, CloudError> {
        let access = match self.book.get(&owner.cluster) {
            None => return self.inner.client(owner).await,
            Some(Access::Pending) => return Ok(None),
            Some(Access::Issued(a)) => a,
        };
        let Some(route) = self.route(&owner.cluster, &access)? else {
            return Ok(None);
        };
        {
            let built = self.built.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((serial, r, client)) = built.get(&owner.cluster)
                && *serial == access.serial
                && *r == route
            {
                return Ok(Some(client.clone()));
            }
        }
        let what = format!("flightdeck's own access to cluster {}", owner.cluster);
        let kubeconfig = kubeconfig_of(&owner.cluster, &access, &route);
        let client = client_from(WORKLOAD, &what, kubeconfig, "default").await?;
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        built.insert(
            owner.cluster.clone(),
            (access.serial.clone(), route, client.clone()),
        );
        Ok(Some(client))
    }
}

/// `url` if it names an HTTP proxy kube can tunnel through (`http://HOST:PORT`, no
/// path), else why not, in words that name it.
pub fn proxy_url(url: &str) -> Result<String, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!(
            "{url:?}: only an HTTP proxy (http://HOST:PORT, tunnelling with CONNECT) is supported"
        ));
    }
    let Some(authority) = uri.authority() else {
        return Err(format!("{url:?} names no host"));
    };
    if authority.port_u16().is_none() {
        return Err(format!("{url:?} names no port"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(format!("{url:?}: a proxy URL has no path or query"));
    }
    Ok(url.to_string())
}

/// The error of a route that cannot be had: Transient, as a connection refused is.
pub fn unroutable(cluster: &str, message: impl Into<String>) -> CloudError {
    CloudError::new(
        ErrorClass::Transient,
        WORKLOAD,
        "connect",
        None,
        format!("cluster {cluster}: {}", message.into()),
    )
}
