//! The API's connections: accepted, bounded and served one task each.
//!
//! A client on the network may be hostile. Nothing one connection does holds up another:
//! - each connection is served by a task of its own from the moment it is accepted, its
//!   TLS handshake included, under a deadline ([`Limits::handshake`]);
//! - hyper's own header-read timeout ([`Limits::header`]) bounds the wait for a request's
//!   headers, from the moment the connection is ready for one: a new connection that says
//!   nothing, a kept-alive one between requests, and a slow-loris that dribbles its
//!   headers are all closed at that bound;
//! - a request body that sends nothing for [`Limits::idle`] is cut (tower-http's
//!   `RequestBodyTimeout`), and so is a client that takes nothing of an answer for as
//!   long (`tokio-io-timeout`'s write timeout): a follower of the event stream that
//!   stops reading is dropped once its send buffer ([`SEND_BUFFER`]) and the kernel's
//!   are full;
//! - at most [`Limits::connections`] connections are open at once, and at most
//!   [`Limits::per_address`] from one address; a connection past either cap is closed as
//!   soon as it is accepted, so it holds no file descriptor.
//!
//! Only HTTP/1.1 is served (the CLI and the web view speak it; TLS offers it by ALPN).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

/// The most an answer's bytes wait in a connection's buffer for the client to take
/// them (an event stream's send buffer): hyper stops asking for more past it.
const SEND_BUFFER: usize = 64 * 1024;

/// The bounds on the API's connections. Each is a flag of `flightdeck serve`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A client gets this long to finish its TLS handshake (`--handshake-timeout`).
    pub handshake: Duration,
    /// A request's headers must arrive within this, counted from when the connection is
    /// ready for a request (`--header-timeout`): it is also how long a kept-alive
    /// connection may sit idle between requests.
    pub header: Duration,
    /// A request body that sends nothing for this long, or a client that takes nothing
    /// of an answer for this long, is cut (`--idle-timeout`).
    pub idle: Duration,
    /// Connections open at once, from every address (`--max-connections`).
    pub connections: usize,
    /// Connections open at once from one address (`--max-connections-per-address`).
    pub per_address: usize,
    /// Event streams (`follow=true`) open at once per token (`--max-streams-per-token`).
    pub streams_per_token: usize,
    /// Applies parsed at once; the others wait their turn (`--max-applies`).
    pub applies: usize,
    /// How long a stopping daemon waits for requests in flight before it closes their
    /// connections anyway.
    pub drain: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake: Duration::from_secs(10),
            header: Duration::from_secs(30),
            idle: Duration::from_secs(30),
            connections: 1024,
            per_address: 256,
            streams_per_token: 32,
            applies: 2,
            drain: Duration::from_secs(30),
        }
    }
}

/// File descriptors the daemon keeps for itself past the API's connections: the
/// store, its backups, cloud connections, watches.
const FDS_KEPT: u64 = 256;

impl Limits {
    /// These limits with `connections` lowered, if needed, to fit under the process's
    /// limit on open files (RLIMIT_NOFILE, read from /proc/self/limits), with the reason:
    /// past it `accept` fails and every client waits, the very stall the cap is for.
    pub fn fitted_to_open_files(mut self) -> (Limits, Option<String>) {
        let Some(soft) = open_files_limit() else {
            return (self, None);
        };
        let room = soft.saturating_sub(FDS_KEPT).max(16);
        if (self.connections as u64) <= room {
            return (self, None);
        }
        let why = format!(
            "--max-connections {} is above what this process may open ({soft} files, {FDS_KEPT} of them kept for the daemon): {room} connections at most. Raise the limit (`ulimit -n`, systemd's LimitNOFILE) for more",
            self.connections
        );
        self.connections = room as usize;
        self.per_address = self.per_address.min(self.connections);
        (self, Some(why))
    }

    /// Refuses bounds that would make the API unusable or unbounded, naming the flag.
    pub fn check(&self) -> anyhow::Result<()> {
        let secs = |flag: &str, d: Duration, max: u64| {
            if d.is_zero() || d > Duration::from_secs(max) {
                anyhow::bail!("--{flag} must be above 0 and at most {max}s, got {d:?}");
            }
            Ok(())
        };
        secs("handshake-timeout", self.handshake, 3600)?;
        secs("header-timeout", self.header, 3600)?;
        secs("idle-timeout", self.idle, 3600)?;
        let count = |flag: &str, n: usize, max: usize| {
            if n == 0 || n > max {
                anyhow::bail!("--{flag} must be 1 to {max}, got {n}");
            }
            Ok(())
        };
        count("max-connections", self.connections, 1_000_000)?;
        count("max-connections-per-address", self.per_address, 1_000_000)?;
        count("max-streams-per-token", self.streams_per_token, 100_000)?;
        count("max-applies", self.applies, 64)?;
        if self.per_address > self.connections {
            anyhow::bail!(
                "--max-connections-per-address ({}) is above --max-connections ({})",
                self.per_address,
                self.connections
            );
        }
        Ok(())
    }
}

/// Open connections, in all and per address.
struct Slots {
    all: Arc<Semaphore>,
    per_address: usize,
    by_address: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place under both caps, given back when the connection ends.
struct Slot {
    slots: Arc<Slots>,
    address: IpAddr,
    _all: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut by = self
            .slots
            .by_address
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = by.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                by.remove(&self.address);
            }
        }
    }
}

impl Slots {
    /// A place for a connection from `address`, if both caps allow it.
    fn take(self: &Arc<Self>, address: IpAddr) -> Option<Slot> {
        let all = self.all.clone().try_acquire_owned().ok()?;
        let mut by = self.by_address.lock().unwrap_or_else(|e| e.into_inner());
        let n = by.entry(address).or_insert(0);
        if *n >= self.per_address {
            return None;
        }
        *n += 1;
        Some(Slot {
            slots: self.clone(),
            address,
            _all: all,
        })
    }
}

/// The soft limit on open files, from /proc/self/limits (`None` where it cannot be read,
/// or where it is unlimited).
fn open_files_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_open_files(&text)
}

fn parse_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// IPv4 clients of a dual-stack socket count as their IPv4 address.
fn client_address(addr: SocketAddr) -> IpAddr {
    match addr.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Serves `app` on `listener` (over TLS when `tls` is given) until `stop` completes;
/// then takes no new connection, lets the requests in flight finish (at most
/// [`Limits::drain`]) and returns.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: axum::Router,
    limits: Limits,
    stop: impl std::future::Future<Output = ()>,
) {
    let slots = Arc::new(Slots {
        all: Arc::new(Semaphore::new(limits.connections)),
        per_address: limits.per_address,
        by_address: Mutex::new(HashMap::new()),
    });
    let acceptor = tls.map(TlsAcceptor::from);
    let graceful = GracefulShutdown::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut refused_logged_at: Option<tokio::time::Instant> = None;
    tokio::pin!(stop);
    loop {
        let (tcp, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors, most often: wait for some to be freed.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let Some(slot) = slots.take(client_address(addr)) else {
            // Closed at once: the client sees the connection reset, not a hang.
            drop(tcp);
            let now = tokio::time::Instant::now();
            if refused_logged_at.is_none_or(|t| now.duration_since(t) > Duration::from_secs(10)) {
                refused_logged_at = Some(now);
                tracing::warn!(%addr, max = limits.connections, per_address = limits.per_address,
                    "connection refused: too many connections open (logged at most every 10 s)");
            }
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let watcher = graceful.watcher();
        let app = app.clone();
        let acceptor = acceptor.clone();
        let limits = limits.clone();
        // A client that takes nothing of an answer for `idle` is cut: a stalled write
        // fails, and hyper closes the connection (an event stream's reader included).
        let mut tcp = tokio_io_timeout::TimeoutStream::new(tcp);
        tcp.set_write_timeout(Some(limits.idle));
        let tcp = Box::pin(tcp);
        // Tasks that ended are let go of as new ones come, so the set stays as large as
        // the connections open.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            let _slot = slot;
            match acceptor {
                None => connection(tcp, app, &limits, watcher).await,
                Some(acceptor) => {
                    match tokio::time::timeout(limits.handshake, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => connection(tls, app, &limits, watcher).await,
                        Ok(Err(e)) => tracing::debug!(%addr, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "requests still in flight after {:?}: their connections are closed",
            limits.drain
        );
    }
    // What is left (a connection past the drain, a TLS handshake not yet done) ends
    // here, so nothing of the API outlives `serve`.
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
}

/// One connection, HTTP/1.1, until the client or the server closes it.
async fn connection<I>(
    io: I,
    app: axum::Router,
    limits: &Limits,
    watcher: hyper_util::server::graceful::Watcher,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header)
        .max_buf_size(SEND_BUFFER);
    let service = tower_http::timeout::RequestBodyTimeout::new(app, limits.idle);
    let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(error = %e, "connection ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(all: usize, per_address: usize) -> Arc<Slots> {
        Arc::new(Slots {
            all: Arc::new(Semaphore::new(all)),
            per_address,
            by_address: Mutex::new(HashMap::new()),
        })
    }

    #[test]
    fn one_address_takes_no_more_than_its_share_and_gets_it_back() {
        let s = slots(10, 2);
        let a: IpAddr = "127.0.0.1".parse().expect("ip");
        let b: IpAddr = "127.0.0.2".parse().expect("ip");
        let first = s.take(a).expect("first");
        let _second = s.take(a).expect("second");
        assert!(s.take(a).is_none(), "a third from one address is refused");
        assert!(s.take(b).is_some(), "another address still gets in");
        drop(first);
        assert!(
            s.take(a).is_some(),
            "a closed connection gives its place back"
        );
    }

    #[test]
    fn the_total_cap_holds_across_addresses() {
        let s = slots(2, 2);
        let _a = s.take("10.0.0.1".parse().expect("ip")).expect("a");
        let _b = s.take("10.0.0.2".parse().expect("ip")).expect("b");
        assert!(s.take("10.0.0.3".parse().expect("ip")).is_none());
        assert!(s.by_address.lock().expect("lock").len() == 2);
    }

    #[test]
    fn an_ipv4_client_of_a_dual_stack_socket_counts_as_its_ipv4_address() {
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:80".parse().expect("addr");
        assert_eq!(
            client_address(mapped),
            "127.0.0.1".parse::<IpAddr>().expect("ip")
        );
    }

    #[test]
    fn the_connection_cap_is_lowered_to_fit_the_open_files_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax cpu time              unlimited            unlimited            seconds   \nMax open files            1024                 524288               files     \n";
        assert_eq!(parse_open_files(limits), Some(1024));
        assert_eq!(
            parse_open_files("Max open files unlimited unlimited files"),
            None
        );
        let (l, why) = Limits::default().fitted_to_open_files();
        // This process's own limit decides; whatever it is, the cap fits under it.
        if let Some(soft) = open_files_limit() {
            assert!(l.connections as u64 <= soft.saturating_sub(FDS_KEPT).max(16));
            assert_eq!(why.is_some(), l.connections < Limits::default().connections);
        }
        assert!(l.per_address <= l.connections);
    }

    #[test]
    fn bounds_that_make_no_sense_are_refused_by_flag_name() {
        let l = Limits {
            per_address: 10,
            connections: 5,
            ..Limits::default()
        };
        let e = l.check().expect_err("per address above all");
        assert!(
            e.to_string().contains("--max-connections-per-address"),
            "{e}"
        );
        let l = Limits {
            header: Duration::ZERO,
            ..Limits::default()
        };
        assert!(
            l.check()
                .expect_err("zero")
                .to_string()
                .contains("--header-timeout")
        );
        assert!(Limits::default().check().is_ok());
    }
}
