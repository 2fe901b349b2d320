//! Per-key backoff with jitter, reset on success, and resync spreading.

use flightdeck_cloud::Rng;
use flightdeck_spec::Duration;

#[derive(Clone, Debug)]
pub struct BackoffPolicy {
    pub base: Duration,
    pub max: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        BackoffPolicy {
            base: Duration::from_secs(1),
            max: Duration::from_mins(5),
        }
    }
}

impl BackoffPolicy {
    /// The wait after the `failures`-th consecutive failure (1-based): doubling from
    /// `base`, capped at `max`, then spread by ±25% so that keys failing together do
    /// not retry together.
    pub fn delay(&self, failures: u32, rng: &mut dyn Rng) -> Duration {
        let exp = failures.saturating_sub(1).min(20);
        let raw = self
            .base
            .as_millis()
            .saturating_mul(1u64 << exp)
            .min(self.max.as_millis());
        Duration::from_millis(jitter(raw, 0.25, rng))
    }
}

/// `ms` spread uniformly by ±`fraction`.
pub fn jitter(ms: u64, fraction: f64, rng: &mut dyn Rng) -> u64 {
    let spread = (ms as f64 * fraction) as u64;
    ms.saturating_sub(spread) + rng.below(2 * spread + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flightdeck_cloud::SeededRng;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let p = BackoffPolicy::default();
        let mut rng = SeededRng::new(3);
        let d1 = p.delay(1, &mut rng).as_millis();
        let d3 = p.delay(3, &mut rng).as_millis();
        let d30 = p.delay(30, &mut rng).as_millis();
        assert!((750..=1250).contains(&d1), "{d1}");
        assert!((3000..=5000).contains(&d3), "{d3}");
        assert!((225_000..=375_000).contains(&d30), "{d30}");
    }
}
