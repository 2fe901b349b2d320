//! Keystone as the simulator's clients meet it.
//!
//! Over the wire, the served Keystone (`flightdeck-sim-http`) issues and checks real
//! tokens, and asks this module only what the cloud's faults say: whether issuing one
//! fails now ([`SimCloud::keystone_issue`]) and whether a token was revoked. In process
//! there is no HTTP, so the cloud keeps the one session its client holds: a token
//! issued at its first call, good for an hour and renewed five minutes before it
//! expires (as the REST provider does), refused once revoked, after which the client
//! authenticates again and repeats the call. Renewing is a Keystone call, and the
//! `api.*` faults aimed at `keystone` strike it.

use flightdeck_cloud::{Clock, CloudError, SimClock, Timestamp};

use crate::{Result, SimCloud, State, faults};

/// How long a token lives (Keystone's default `[token] expiration`).
pub const TOKEN_LIFETIME_MS: u64 = 3_600_000;
/// How long before its expiry the in-process client renews its token.
const RENEW_BEFORE_MS: u64 = 300_000;
/// The Keystone call that issues a token.
pub const ISSUE_OP: &str = "POST /v3/auth/tokens";
const KEYSTONE: &str = "keystone";

/// What Keystone knows of its tokens beyond their lifetime, and the in-process
/// client's token.
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// When the in-process client's token was issued.
    issued: Option<Timestamp>,
    /// The latest `keystone.revokeTokens`: when, and which fault.
    revoked: Option<(Timestamp, usize)>,
    /// Served over HTTP: the served Keystone keeps real tokens.
    external: bool,
}

impl Session {
    /// Every token issued up to `t` is revoked (fault `index`).
    pub(crate) fn revoke(&mut self, t: Timestamp, index: usize) {
        self.revoked = Some((t, index));
    }

    /// The revoking fault, if a token issued at `issued` is revoked.
    fn revoked_by(&self, issued: Timestamp) -> Option<usize> {
        self.revoked
            .filter(|(at, _)| issued <= *at)
            .map(|(_, index)| index)
    }
}

/// Before a call to `service` (in process): makes sure the client holds a good token,
/// renewing it through Keystone when needed. A renewal Keystone refuses fails the call.
pub(crate) fn ensure_token(
    st: &mut State,
    clock: &SimClock,
    service: &'static str,
    operation: &'static str,
) -> Result<()> {
    if st.session.external || !matches!(service, "nova" | "neutron" | "octavia") {
        return Ok(());
    }
    let now = clock.now();
    if let Some(issued) = st.session.issued {
        match st.session.revoked_by(issued) {
            Some(index) => {
                // The call answers 401; the client authenticates again and repeats it.
                faults::note(st, index, 1);
                st.log.count(service, operation);
                st.session.issued = None;
            }
            None if now.since(issued).as_millis() + RENEW_BEFORE_MS < TOKEN_LIFETIME_MS => {
                return Ok(());
            }
            None => {}
        }
    }
    issue(st, clock)?;
    st.session.issued = Some(clock.now());
    Ok(())
}

/// One Keystone token issue: counted, and struck by the faults aimed at Keystone.
fn issue(st: &mut State, clock: &SimClock) -> Result<()> {
    st.log.count(KEYSTONE, ISSUE_OP);
    // The token is renewed for the call that needed it: the same label says whose.
    let mut call = faults::CallFor::labelled();
    faults::before_call(st, clock, KEYSTONE, ISSUE_OP, &mut call)
}

impl SimCloud {
    /// The cloud is served over HTTP: its Keystone keeps real tokens, and the
    /// in-process session is not used. Not an API call.
    pub fn serve_keystone_externally(&self) {
        self.lock().session.external = true;
    }

    /// The served Keystone is about to issue a token: the call is counted, and the
    /// faults aimed at Keystone may refuse it (503, 429) or hold it up.
    pub fn keystone_issue(&self) -> std::result::Result<(), CloudError> {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        issue(&mut st, &self.clock)
    }

    /// Whether a token issued at `issued` has been revoked since; a refusal counts as
    /// an effect of the revoking fault. Not an API call.
    pub fn token_revoked(&self, issued: Timestamp) -> bool {
        let mut st = self.lock();
        st.run_due(self.clock.now());
        match st.session.revoked_by(issued) {
            Some(index) => {
                faults::note(&mut st, index, 1);
                true
            }
            None => false,
        }
    }
}
