//! The connection to etcd: one client per member on a runtime of its own, moving to the
//! next member when one is unreachable.

use std::future::Future;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, GetOptions, Identity, TlsOptions, Txn,
    TxnOp,
};
use flightdeck_store::StoreError;

use crate::EtcdOptions;

/// The connection: etcd's client on a runtime of its own, shared by the store and the
/// replica's lease and claims.
pub(crate) struct Conn {
    /// Taken on drop and shut down in the background: a runtime must not be dropped
    /// where blocking is not allowed (inside the daemon's own runtime).
    runtime: Option<tokio::runtime::Runtime>,
    /// One client per member, connected on first use. etcd-client's own balancing over
    /// several endpoints fails calls while one member is down (etcdv3/etcd-client#39),
    /// so the connection keeps to one member and moves to the next when it is
    /// unreachable.
    members: Vec<Member>,
    /// The member calls go to first: the last one that answered.
    current: std::sync::atomic::AtomicUsize,
    options: ConnectOptions,
    pub(crate) prefix: String,
    shown: String,
    timeout: Duration,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// One member's endpoint and its client, once connected.
struct Member {
    endpoint: String,
    client: std::sync::Mutex<Option<Client>>,
}

/// Why a call failed: `unreachable` when another member may answer it (the member is
/// down, unreachable, or has no leader); otherwise etcd's own refusal.
struct Failed {
    unreachable: bool,
    message: String,
}

fn unreachable(e: &etcd_client::Error) -> bool {
    use etcd_client::Error as E;
    // etcd's own refusals, which every member would give alike: the request is wrong, or
    // the state it names says no. Everything else may be the member's own trouble (down,
    // cut off from the quorum, no leader yet, a leader that is not yet the lease's
    // primary, a stream reset) and is tried on the next member: a member that keeps
    // failing one way must not hold every call on itself.
    const REFUSALS: [i32; 9] = [
        3,  // INVALID_ARGUMENT
        5,  // NOT_FOUND
        6,  // ALREADY_EXISTS
        7,  // PERMISSION_DENIED
        8,  // RESOURCE_EXHAUSTED: too many operations in a transaction
        9,  // FAILED_PRECONDITION
        11, // OUT_OF_RANGE: a compacted revision
        12, // UNIMPLEMENTED
        16, // UNAUTHENTICATED
    ];
    match e {
        E::TransportError(_) | E::IoError(_) | E::LeaseKeepAliveError(_) | E::WatchError(_) => true,
        E::GRpcStatus(s) => !REFUSALS.contains(&(s.code() as i32)),
        _ => false,
    }
}

/// Runs `fut` on `handle` and waits for it, at most `timeout`.
fn wait<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    timeout: Duration,
    fut: impl Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
) -> Result<T, Failed> {
    let (tx, rx) = mpsc::sync_channel(1);
    handle.spawn(async move {
        let r = tokio::time::timeout(timeout, fut).await;
        let _ = tx.send(r);
    });
    match rx.recv_timeout(timeout + Duration::from_secs(1)) {
        Ok(Ok(Ok(v))) => Ok(v),
        Ok(Ok(Err(e))) => Err(Failed {
            unreachable: unreachable(&e),
            message: e.to_string(),
        }),
        Ok(Err(_)) | Err(_) => Err(Failed {
            unreachable: true,
            message: format!("no answer within {}s", timeout.as_secs()),
        }),
    }
}

fn read_pem(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn connect_options(o: &EtcdOptions) -> Result<ConnectOptions, String> {
    let mut opts = ConnectOptions::new()
        .with_timeout(o.timeout)
        .with_connect_timeout(o.timeout);
    if let (Some(user), Some(password)) = (&o.user, &o.password) {
        opts = opts.with_user(user.clone(), password.expose());
    }
    if let Some(ca) = &o.ca_file {
        let mut tls = TlsOptions::new().ca_certificate(Certificate::from_pem(read_pem(ca)?));
        if let (Some(cert), Some(key)) = (&o.cert_file, &o.key_file) {
            tls = tls.identity(Identity::from_pem(read_pem(cert)?, read_pem(key)?));
        }
        opts = opts.with_tls(tls);
    }
    Ok(opts)
}

impl Conn {
    pub(crate) fn connect(o: &EtcdOptions) -> Result<Conn, StoreError> {
        let shown = o.describe();
        let fail = |message: String| StoreError::Backend {
            path: shown.clone(),
            message,
        };
        o.validate().map_err(|e| fail(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("etcd-client")
            .enable_all()
            .build()
            .map_err(|e| fail(format!("cannot start the etcd client's runtime: {e}")))?;
        let scheme = if o.ca_file.is_some() { "https" } else { "http" };
        let members = o
            .endpoints
            .iter()
            .map(|e| Member {
                endpoint: format!("{scheme}://{e}"),
                client: std::sync::Mutex::new(None),
            })
            .collect();
        let options = connect_options(o).map_err(fail)?;
        let conn = Conn {
            runtime: Some(runtime),
            members,
            current: Default::default(),
            options,
            prefix: o.prefix.clone(),
            shown,
            timeout: o.timeout,
        };
        // Connecting is lazy for some failures (a member that refuses): one read proves
        // a quorum answers before the daemon starts on it.
        conn.get_range(&conn.prefix.clone(), true, Some(1))?;
        Ok(conn)
    }

    /// The client of member `i`, connected now if it was not.
    fn client(&self, rt: &tokio::runtime::Runtime, i: usize) -> Result<Client, Failed> {
        let member = &self.members[i];
        let mut slot = member.client.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let (endpoint, options) = (member.endpoint.clone(), self.options.clone());
        let c = wait(rt.handle(), self.timeout, async move {
            Client::connect([endpoint], Some(options)).await
        })?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Runs a call on the member that answered last; when that member is unreachable,
    /// on the next, and so on once round. A call retried on another member after no
    /// answer may have been applied by the first: every write flightdeck sends is
    /// guarded (create-if-absent, compares), so applying it twice is refused, not doubled.
    pub(crate) fn call<T: Send + 'static, F>(
        &self,
        what: &str,
        f: impl Fn(Client) -> F,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    {
        use std::sync::atomic::Ordering;
        let Some(rt) = &self.runtime else {
            return Err(self.error(what, "the store is closed".into()));
        };
        let n = self.members.len();
        let first = self.current.load(Ordering::Relaxed) % n.max(1);
        let mut tried = Vec::new();
        for k in 0..n {
            let i = (first + k) % n;
            let result = self
                .client(rt, i)
                .and_then(|c| wait(rt.handle(), self.timeout, f(c)));
            match result {
                Ok(v) => {
                    self.current.store(i, Ordering::Relaxed);
                    return Ok(v);
                }
                Err(e) if e.unreachable => {
                    tried.push(format!("{}: {}", self.members[i].endpoint, e.message));
                }
                Err(e) => return Err(self.error(what, e.message)),
            }
        }
        Err(self.error(
            what,
            format!(
                "no member answered ({}); are the members up, and is a quorum of them reachable?",
                tried.join("; ")
            ),
        ))
    }

    pub(crate) fn error(&self, what: &str, message: String) -> StoreError {
        StoreError::Backend {
            path: self.shown.clone(),
            message: format!("{what}: {message}"),
        }
    }

    /// The keys (and values, unless `keys_only`) under `prefix`, in key order.
    pub(crate) fn get_range(
        &self,
        prefix: &str,
        keys_only: bool,
        limit: Option<i64>,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut opts = GetOptions::new().with_prefix();
        if keys_only {
            opts = opts.with_keys_only();
        }
        if let Some(n) = limit {
            opts = opts.with_limit(n);
        }
        let key = prefix.to_string();
        let resp = self.call(&format!("reading {prefix}"), move |mut c| {
            let (key, opts) = (key.clone(), opts.clone());
            async move { c.get(key, Some(opts)).await }
        })?;
        Ok(resp
            .kvs()
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(kv.key()).into_owned(),
                    kv.value().to_vec(),
                )
            })
            .collect())
    }

    pub(crate) fn describe(&self) -> String {
        self.shown.clone()
    }

    /// The names under `prefix` (the keys, without it).
    pub(crate) fn names_under(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        Ok(self
            .get_range(prefix, true, None)?
            .into_iter()
            .filter_map(|(k, _)| k.strip_prefix(prefix).map(str::to_string))
            .collect())
    }

    /// Puts `key` = `value` under `lease` if the key does not exist; whether it did, and
    /// the transaction's revision (the key's create revision when it did).
    pub(crate) fn create_leased(
        &self,
        what: &str,
        key: String,
        value: String,
        lease: i64,
    ) -> Result<(bool, i64), StoreError> {
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then(vec![TxnOp::put(
                key,
                value,
                Some(etcd_client::PutOptions::new().with_lease(lease)),
            )]);
        let resp = self.call(what, move |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })?;
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        Ok((resp.succeeded(), revision))
    }

    /// The claim key of `cluster`.
    pub(crate) fn claim_key(&self, cluster: &str) -> String {
        format!("{}claims/{cluster}", self.prefix)
    }
}
