//! A client-side rate limit: one token bucket per endpoint.
//!
//! Each endpoint (a base URL from the catalog, or Keystone's) gets `per_second` tokens a
//! second, up to `burst` saved up. A request takes a token; when none is left it
//! reserves the next one and sleeps (`tokio::time`) until it is due. Reservations are
//! handed out in call order under a short lock that is never held across an `.await`,
//! so the waiting futures stay `Send` and requests leave at no more than the rate.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::time::{Duration, Instant};

/// How fast requests may go to one endpoint.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// Sustained requests per second; must be positive and finite.
    pub per_second: f64,
    /// How many requests may go at once after a quiet spell (at least 1).
    pub burst: u32,
}

impl Default for RateLimit {
    /// 20 requests a second, 20 at once.
    fn default() -> Self {
        RateLimit {
            per_second: 20.0,
            burst: 20,
        }
    }
}

#[derive(Debug)]
struct Bucket {
    /// Tokens in hand; negative when requests have reserved tokens not yet due.
    tokens: f64,
    last: Instant,
}

/// Token buckets keyed by endpoint. `None` limit: requests are never held back.
#[derive(Debug)]
pub struct RateLimiter {
    limit: Option<RateLimit>,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    /// A limiter with `limit` per endpoint. A limit that is not positive and finite,
    /// or has no burst, is corrected to the nearest sane one (rate 0.001/s, burst 1).
    pub fn new(limit: Option<RateLimit>) -> Self {
        let limit = limit.map(|l| RateLimit {
            per_second: if l.per_second.is_finite() && l.per_second > 0.0 {
                l.per_second
            } else {
                0.001
            },
            burst: l.burst.max(1),
        });
        RateLimiter {
            limit,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// How long the caller must wait before sending to `endpoint`; takes its token.
    fn reserve(&self, endpoint: &str) -> Duration {
        let Some(limit) = self.limit else {
            return Duration::ZERO;
        };
        let now = Instant::now();
        let burst = f64::from(limit.burst);
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let b = buckets.entry(endpoint.to_string()).or_insert(Bucket {
            tokens: burst,
            last: now,
        });
        let elapsed = now.saturating_duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * limit.per_second).min(burst);
        b.last = now;
        b.tokens -= 1.0;
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.tokens / limit.per_second)
        }
    }

    /// Waits until a request may go to `endpoint`.
    pub async fn acquire(&self, endpoint: &str) {
        let wait = self.reserve(endpoint);
        if !wait.is_zero() {
            tracing::trace!(endpoint, wait_ms = wait.as_millis(), "rate limit: waiting");
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn requests_beyond_the_burst_wait_for_their_token() {
        let rl = RateLimiter::new(Some(RateLimit {
            per_second: 50.0,
            burst: 2,
        }));
        let start = std::time::Instant::now();
        for _ in 0..6 {
            rl.acquire("http://nova").await;
        }
        // 2 at once, then 4 more at 50/s: at least 80 ms.
        let took = start.elapsed();
        assert!(took >= std::time::Duration::from_millis(75), "{took:?}");
        assert!(took < std::time::Duration::from_secs(2), "{took:?}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn endpoints_have_their_own_buckets_and_none_means_unlimited() {
        let rl = RateLimiter::new(Some(RateLimit {
            per_second: 1.0,
            burst: 1,
        }));
        let start = std::time::Instant::now();
        rl.acquire("http://nova").await;
        rl.acquire("http://neutron").await;
        rl.acquire("http://octavia").await;
        assert!(start.elapsed() < std::time::Duration::from_millis(500));
        let free = RateLimiter::new(None);
        for _ in 0..1000 {
            assert_eq!(free.reserve("x"), Duration::ZERO);
        }
    }

    #[test]
    fn reservations_queue_up_in_order() {
        let rl = RateLimiter::new(Some(RateLimit {
            per_second: 10.0,
            burst: 1,
        }));
        assert_eq!(rl.reserve("e"), Duration::ZERO);
        let second = rl.reserve("e");
        let third = rl.reserve("e");
        assert!(second > Duration::from_millis(80) && second <= Duration::from_millis(100));
        assert!(third > Duration::from_millis(180) && third <= Duration::from_millis(200));
    }
}
