//! flightdeck's state store on etcd: the backend replicas share, chosen with
//! `serve --store etcd://host:port[,host:port…]`.
//!
//! The layout under the prefix (`/flightdeck/` unless told otherwise):
//!
//! - `r/<table>/<key>`: one record (a JSON document);
//! - `e/<key>/<seq>`: one event, `seq` zero-padded so that etcd's key order is the
//!   events' order; at most [`flightdeck_store::EVENTS_PER_KEY_MAX`] per key, the
//!   oldest deleted in the commit that adds past it.
//!
//! Every [`Store::commit`](flightdeck_store::Store::commit) is one etcd transaction, so
//! a reader sees all of its writes or none. The client (etcd-client, over gRPC) runs on
//! a runtime of its own; the store's calls wait for it with a deadline, like the
//! embedded store's commits wait for the disk.
//!
//! This file holds what needs no etcd: the `etcd://` address and the connection
//! options, checked with errors that name what is wrong. The client is behind the
//! `client` feature (it needs `protoc` to build); without it, [`connect`] says so.

mod assign;
#[cfg(feature = "client")]
mod backend;
#[cfg(feature = "client")]
mod conn;
// Read by the client's store and replica; without the client only its tests use it.
#[cfg_attr(not(feature = "client"), allow(dead_code))]
mod fence;
#[cfg(feature = "client")]
mod replica;

pub use assign::assign;
pub use fence::{FENCED_TABLES, Now, clusters_written};
#[cfg(feature = "client")]
pub use replica::{Balance, Claimed, KEEP_REVISIONS, LEASE_MARGIN, Replica};

use std::path::PathBuf;
use std::time::Duration;

use flightdeck_store::{Store, StoreError};

/// The prefix every key of flightdeck's lives under, unless told otherwise.
pub const PREFIX_DEFAULT: &str = "/flightdeck/";
/// How long one call to etcd may take before the store gives up on it.
pub const TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);
/// etcd's own default for the operations one transaction may hold (`--max-txn-ops`).
pub const TXN_OPS_DEFAULT: usize = 128;

/// A password, never shown: its `Debug` prints stars.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn new(p: impl Into<String>) -> Password {
        Password(p.into())
    }
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// How to reach etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdOptions {
    /// `host:port` of each member.
    pub endpoints: Vec<String>,
    /// The CA that signed the members' certificates: TLS when set.
    pub ca_file: Option<PathBuf>,
    /// A client certificate and its key, for members that ask for one.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// etcd's user and password authentication.
    pub user: Option<String>,
    pub password: Option<Password>,
    /// Where flightdeck's keys live; ends with `/`.
    pub prefix: String,
    /// How long one call may take.
    pub timeout: Duration,
    /// The most operations one transaction may hold: the members' `--max-txn-ops`.
    pub max_txn_ops: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EtcdError {
    #[error("store address {url:?}: {why}")]
    Address { url: String, why: String },
    #[error("etcd options: {0}")]
    Options(String),
}

impl EtcdOptions {
    /// Options for the members in `url` (`etcd://host:port[,host:port…]`), without TLS
    /// or authentication, under the default prefix.
    pub fn from_url(url: &str) -> Result<EtcdOptions, EtcdError> {
        Ok(EtcdOptions {
            endpoints: parse_url(url)?,
            ca_file: None,
            cert_file: None,
            key_file: None,
            user: None,
            password: None,
            prefix: PREFIX_DEFAULT.to_string(),
            timeout: TIMEOUT_DEFAULT,
            max_txn_ops: TXN_OPS_DEFAULT,
        })
    }

    /// Checks the options that do not need etcd to be checked.
    pub fn validate(&self) -> Result<(), EtcdError> {
        let bad = |why: String| Err(EtcdError::Options(why));
        if self.cert_file.is_some() != self.key_file.is_some() {
            return bad("a client certificate needs its key, and a key its certificate (--etcd-cert with --etcd-key)".into());
        }
        if self.cert_file.is_some() && self.ca_file.is_none() {
            return bad("a client certificate is sent over TLS only: give the members' CA with --etcd-cacert".into());
        }
        if self.user.is_some() != self.password.is_some() {
            return bad("etcd's authentication needs a user and a password (--etcd-user and FLIGHTDECK_ETCD_PASSWORD)".into());
        }
        if !self.prefix.starts_with('/') || !self.prefix.ends_with('/') {
            return bad(format!(
                "the key prefix {:?} must begin and end with '/'",
                self.prefix
            ));
        }
        if self.timeout.is_zero() {
            return bad("the timeout must be longer than zero".into());
        }
        if self.max_txn_ops < 8 {
            return bad(format!(
                "at most {} operations per transaction is too few to commit anything",
                self.max_txn_ops
            ));
        }
        Ok(())
    }

    /// The members as shown in messages: `etcd://a:2379,b:2379`.
    pub fn describe(&self) -> String {
        format!("etcd://{}{}", self.endpoints.join(","), self.prefix)
    }
}

/// The `host:port` of each member in `etcd://host:port[,host:port…]`.
pub fn parse_url(url: &str) -> Result<Vec<String>, EtcdError> {
    let err = |why: String| EtcdError::Address {
        url: url.to_string(),
        why,
    };
    let Some(rest) = url.strip_prefix("etcd://") else {
        return Err(err(
            "an etcd store is named etcd://host:port[,host:port…]".into()
        ));
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Err(err("no member given".into()));
    }
    let mut endpoints = Vec::new();
    for member in rest.split(',') {
        let Some((host, port)) = member.rsplit_once(':') else {
            return Err(err(format!("member {member:?} has no port (host:port)")));
        };
        let bracketed = host.starts_with('[') && host.ends_with(']');
        let host_ok = !host.is_empty()
            && (bracketed
                || host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'));
        if !host_ok {
            return Err(err(format!(
                "member {member:?}: {host:?} is not a host name or address"
            )));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => {
                return Err(err(format!(
                    "member {member:?}: {port:?} is not a port (1 to 65535)"
                )));
            }
        }
        if endpoints.iter().any(|e| e == member) {
            return Err(err(format!("member {member:?} is named twice")));
        }
        endpoints.push(member.to_string());
    }
    Ok(endpoints)
}

/// Connects to etcd and returns a [`Store`] on it.
#[cfg(feature = "client")]
pub fn connect(options: &EtcdOptions) -> Result<Store, StoreError> {
    let conn = std::sync::Arc::new(conn::Conn::connect(options)?);
    let store = backend::EtcdStore::new(
        conn,
        Default::default(),
        std::sync::Arc::new(std::time::Instant::now),
        options.max_txn_ops,
    );
    Ok(Store::with_backend(Box::new(store)))
}

/// Connects to etcd: not in this build, which has no etcd client.
#[cfg(not(feature = "client"))]
pub fn connect(options: &EtcdOptions) -> Result<Store, StoreError> {
    Err(StoreError::Backend {
        path: options.describe(),
        message: "this flightdeck was built without the etcd client; build it with \
                  `cargo build --release -p flightdeck --features etcd` (it needs protoc: \
                  Debian's protobuf-compiler)"
            .into(),
    })
}

#[cfg(test)]
mod tests;
