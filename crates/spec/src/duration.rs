//! Human durations as they appear in specs: `90s`, `10m`, `1h30m`, `250ms`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// A non-negative span of time, written in a spec as a sum of `<integer><unit>` parts
/// with units `ms`, `s`, `m`, `h` and `d`. Bounded to 365 days so that arithmetic on
/// timestamps can never overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration {
    millis: u64,
}

/// The longest duration a spec may state.
pub const DURATION_MAX_MS: u64 = 365 * 24 * 3_600_000;

impl Duration {
    pub const ZERO: Duration = Duration { millis: 0 };

    pub const fn from_millis(millis: u64) -> Self {
        Duration { millis }
    }
    pub const fn from_secs(secs: u64) -> Self {
        Duration {
            millis: secs * 1000,
        }
    }
    pub const fn from_mins(mins: u64) -> Self {
        Duration {
            millis: mins * 60_000,
        }
    }
    pub const fn as_millis(self) -> u64 {
        self.millis
    }
    pub fn as_secs_f64(self) -> f64 {
        self.millis as f64 / 1000.0
    }
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.millis)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {why} (write e.g. 30s, 10m, 1h30m)")]
pub struct DurationError {
    input: String,
    why: &'static str,
}

impl FromStr for Duration {
    type Err = DurationError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |why| DurationError {
            input: input.to_string(),
            why,
        };
        let s = input.trim();
        if s.is_empty() {
            return Err(err("it is empty"));
        }
        if s == "0" {
            return Ok(Duration::ZERO);
        }
        let mut total: u64 = 0;
        let mut rest = s;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(err("expected a number"));
            }
            let value: u64 = rest[..digits]
                .parse()
                .map_err(|_| err("number out of range"))?;
            rest = &rest[digits..];
            let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
            let unit_ms: u64 = match &rest[..unit_len] {
                "ms" => 1,
                "s" => 1000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                "" => return Err(err("a number needs a unit (ms, s, m, h, d)")),
                _ => return Err(err("unknown unit (use ms, s, m, h, d)")),
            };
            rest = &rest[unit_len..];
            total = value
                .checked_mul(unit_ms)
                .and_then(|v| v.checked_add(total))
                .ok_or_else(|| err("too long"))?;
        }
        if total > DURATION_MAX_MS {
            return Err(err("longer than 365 days"));
        }
        Ok(Duration { millis: total })
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ms = self.millis;
        if ms == 0 {
            return f.write_str("0s");
        }
        for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)] {
            if ms >= size {
                write!(f, "{}{}", ms / size, unit)?;
                ms %= size;
            }
        }
        Ok(())
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as 30s, 10m or 1h30m")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
                if v == 0 {
                    Ok(Duration::ZERO)
                } else {
                    Err(E::custom(format!(
                        "invalid duration {v}: a number needs a unit (write e.g. {v}s or {v}m)"
                    )))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
                Err(E::custom(format!(
                    "invalid duration {v}: write e.g. 30s, 10m or 1h30m"
                )))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_compound_durations() {
        assert_eq!(
            "1h30m".parse::<Duration>().map(|d| d.as_millis()),
            Ok(5_400_000)
        );
        assert_eq!("250ms".parse::<Duration>().map(|d| d.as_millis()), Ok(250));
        assert_eq!(
            "10m".parse::<Duration>().map(|d| d.to_string()),
            Ok("10m".into())
        );
    }

    #[test]
    fn rejects_numbers_without_units_and_unknown_units() {
        assert!("10".parse::<Duration>().is_err());
        assert!("10y".parse::<Duration>().is_err());
        assert!("m".parse::<Duration>().is_err());
        assert!("400d".parse::<Duration>().is_err());
        assert!("-5s".parse::<Duration>().is_err());
    }
}
