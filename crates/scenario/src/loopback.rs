//! What every wire-mode run needs: one reconcile at a time, and a loopback port.

use crate::runner::{RunError, RunOptions};

/// Wire mode runs one reconcile at a time: that keeps the order of requests, and so the
/// run, replayable.
pub(crate) fn one_at_a_time(options: &RunOptions) -> RunOptions {
    let mut options = options.clone();
    options.engine.concurrency_max = 1;
    options
}

/// A listener on a free loopback port, and its `http://ADDR` base URL.
pub(crate) async fn loopback() -> std::result::Result<(tokio::net::TcpListener, String), RunError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| RunError::Wire(format!("cannot listen on loopback: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| RunError::Wire(format!("no local address: {e}")))?;
    Ok((listener, format!("http://{addr}")))
}
