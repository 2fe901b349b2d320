//! How many event streams (`follow=true`) each token holds open: a stream holds its
//! history and a send buffer until its reader takes them, so a token gets a bounded
//! number (`--max-streams-per-token`) and the next one is answered 429.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;

use crate::auth::Role;
use crate::error::Failure;

/// The streams open, per token (a token is known here by its role: one token each).
pub struct Streams {
    max: usize,
    open: Arc<Mutex<HashMap<Role, usize>>>,
}

/// One open stream's place; given back when the stream is dropped (its reader left, it
/// was dropped for falling behind, or the daemon stops).
pub struct Place {
    role: Role,
    open: Arc<Mutex<HashMap<Role, usize>>>,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.role) {
            *n = n.saturating_sub(1);
        }
    }
}

impl Streams {
    pub fn new(max: usize) -> Streams {
        Streams {
            max,
            open: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A place for one more stream of the token with `role`, or a 429 that says why.
    pub fn open(&self, role: Option<Role>) -> Result<Place, Failure> {
        let role = role.unwrap_or(Role::Viewer);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(role).or_insert(0);
        if *n >= self.max {
            return Err(Failure::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "this token already holds {} event streams open, the most it may (--max-streams-per-token); close one first",
                    self.max
                ),
            ));
        }
        *n += 1;
        Ok(Place {
            role,
            open: self.open.clone(),
        })
    }

    /// Streams open now with the token of `role`.
    pub fn count(&self, role: Role) -> usize {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.get(&role).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_at_most_its_streams_and_gets_a_place_back_when_one_closes() {
        let s = Streams::new(2);
        let a = s.open(Some(Role::Viewer)).expect("first");
        let _b = s.open(Some(Role::Viewer)).expect("second");
        let refused = s.open(Some(Role::Viewer)).err().expect("third refused");
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(refused.message.contains("--max-streams-per-token"));
        assert!(
            s.open(Some(Role::Admin)).is_ok(),
            "another token has its own"
        );
        drop(a);
        assert_eq!(s.count(Role::Viewer), 1);
        assert!(s.open(Some(Role::Viewer)).is_ok());
    }
}
