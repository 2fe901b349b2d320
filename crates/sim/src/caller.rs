//! Who sent the call being served: the HTTP front end sets it from the call's
//! `X-Flightdeck-Caller` header for as long as the call is served, and the mutation log
//! records it with every mutation the call makes. A replica of flightdeck names itself
//! and the claim revision it acted under there, so a check can tell, from the cloud's
//! own log, which replica mutated what under which claim.

use std::future::Future;

tokio::task_local! {
    static CALLER: String;
}

/// Serves `call` as sent by `caller`.
pub async fn serve_as<F: Future>(caller: String, call: F) -> F::Output {
    CALLER.scope(caller, call).await
}

/// Who sent the call being served, if it said.
pub(crate) fn current() -> Option<String> {
    CALLER.try_with(Clone::clone).ok()
}
