//! The timestamps OpenStack writes (`2026-01-01T00:00:00Z`, `2015-11-09T01:42:57.527363Z`,
//! `2026-01-01T00:00:00+00:00`, and Octavia's offset-less `2026-01-01T00:00:00`), read
//! into milliseconds since the Unix epoch. No dependency for one format.

use flightdeck_cloud::Timestamp;

/// Milliseconds since the Unix epoch of an ISO 8601 / RFC 3339 date-time. A time
/// without an offset is taken as UTC, which is what every OpenStack service means.
/// `None` for anything that is not such a date-time or lies before 1970.
pub fn parse_timestamp(s: &str) -> Option<Timestamp> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let part = s.get(from..to)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, min, sec) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut millis = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let mut ms = 0i64;
        for (i, c) in frac.bytes().take(3).enumerate().take(digits) {
            ms += i64::from(c - b'0') * [100, 10, 1][i];
        }
        millis = ms;
        rest = &frac[digits..];
    }
    let offset_s = match rest {
        "" | "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let off = &rest[1..];
            let (h, m) = match off.len() {
                5 if off.as_bytes()[2] == b':' => (off.get(0..2)?, off.get(3..5)?),
                4 => (off.get(0..2)?, off.get(2..4)?),
                2 => (off, "00"),
                _ => return None,
            };
            let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
            sign * (h * 3600 + m * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset_s;
    let ms = secs.checked_mul(1000)?.checked_add(millis)?;
    u64::try_from(ms).ok().map(Timestamp)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_formats_openstack_writes() {
        let epoch = Timestamp::SIM_EPOCH;
        assert_eq!(parse_timestamp("2026-01-01T00:00:00Z"), Some(epoch));
        assert_eq!(parse_timestamp("2026-01-01T00:00:00"), Some(epoch));
        assert_eq!(parse_timestamp("2026-01-01T00:00:00+00:00"), Some(epoch));
        assert_eq!(
            parse_timestamp("2026-01-01T01:00:00+01:00"),
            Some(epoch),
            "the offset is subtracted"
        );
        assert_eq!(
            parse_timestamp("2026-01-01T00:00:00.527363Z"),
            Some(epoch.plus_millis(527))
        );
        assert_eq!(
            parse_timestamp("2015-11-09T01:42:57.527363Z"),
            Some(Timestamp(1_447_033_377_527))
        );
        assert_eq!(
            parse_timestamp("2024-02-29T12:00:00Z"),
            Some(Timestamp(1_709_208_000_000))
        );
    }

    #[test]
    fn refuses_what_is_not_a_date_time() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-01-01",
            "1969-12-31T23:59:59Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00Q",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }
}
