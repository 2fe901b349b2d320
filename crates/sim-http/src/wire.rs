//! Request and response plumbing shared by every service: query strings, tag filters,
//! pagination, timestamps, stable ids and JSON bodies.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use flightdeck_cloud::Ownership;
use flightdeck_cloud::Timestamp;
use flightdeck_cloud::ownership::TAG_UID;
use serde_json::Value;

/// The most items one list page holds (Nova's `osapi_max_limit`, Neutron's and
/// Octavia's defaults are the same order).
pub(crate) const MAX_LIMIT: usize = 1000;

/// A decoded query string, keeping repeated keys in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    pub(crate) fn parse(raw: Option<&str>) -> Query {
        let Some(raw) = raw else {
            return Query::default();
        };
        Query(
            raw.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (decode(k), decode(v)),
                    None => (decode(p), String::new()),
                })
                .collect(),
        )
    }

    /// The first value of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `key`, each split on commas (`tags=a,b&tags=c` is a, b, c).
    pub(crate) fn list(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .flat_map(|(_, v)| v.split(','))
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect()
    }

    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The query re-encoded without `marker`, with `marker=<marker>` appended: the
    /// query of the next page.
    pub(crate) fn next_page(&self, marker: &str) -> String {
        let mut parts: Vec<String> = self
            .0
            .iter()
            .filter(|(k, _)| k != "marker")
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        parts.push(format!("marker={}", encode(marker)));
        parts.join("&")
    }
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// Percent-decoding as browsers and Python's `urlencode` produce it (`+` is a space).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The tag filters Nova, Neutron and Octavia share: `tags` (all of), `tags-any`,
/// `not-tags` (not all of) and `not-tags-any` (none of).
#[derive(Clone, Debug, Default)]
pub(crate) struct TagFilter {
    all: Vec<String>,
    any: Vec<String>,
    not_all: Vec<String>,
    not_any: Vec<String>,
}

impl TagFilter {
    pub(crate) fn from_query(q: &Query) -> TagFilter {
        TagFilter {
            all: q.list("tags"),
            any: q.list("tags-any"),
            not_all: q.list("not-tags"),
            not_any: q.list("not-tags-any"),
        }
    }

    pub(crate) fn matches(&self, tags: &[String]) -> bool {
        self.matches_by(|t| tags.iter().any(|x| x == t))
    }

    /// Whether a rendered object, by its `"tags"` (strings; none if absent), passes.
    pub(crate) fn matches_object(&self, item: &Value) -> bool {
        let tags = item
            .get("tags")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        self.matches_by(|t| tags.iter().any(|x| x.as_str() == Some(t)))
    }

    fn matches_by(&self, has: impl Fn(&str) -> bool) -> bool {
        let has = |t: &String| has(t);
        self.all.iter().all(has)
            && (self.any.is_empty() || self.any.iter().any(has))
            && (self.not_all.is_empty() || !self.not_all.iter().all(has))
            && !self.not_any.iter().any(has)
    }

    /// The owner a list call goes to the simulator as: the cluster whose UID tag the
    /// filter requires, or nobody (the call is then counted, and the answer taken
    /// from the simulator's snapshot).
    pub(crate) fn owner(&self) -> Ownership {
        let uid = self
            .all
            .iter()
            .find_map(|t| t.strip_prefix(TAG_UID))
            .unwrap_or_default();
        owner_of_uid(uid)
    }
}

/// An [`Ownership`] carrying only a UID (the simulator's lists match on the UID tag).
/// The empty UID matches nothing but an object tagged exactly `flightdeck-uid=`.
pub(crate) fn owner_of_uid(uid: &str) -> Ownership {
    Ownership {
        cluster: String::new(),
        uid: uid.to_string(),
    }
}

/// Whether `item` passes every plain attribute filter in `q` (`name=x`, `id=y`,
/// `provisioning_status=ACTIVE`, ...): Neutron and Octavia filter on any attribute
/// of the resource. Keys that are not top-level scalar attributes of `item`, and
/// `skip`, are ignored; repeated keys match any of their values.
pub(crate) fn attributes_match(item: &Value, q: &Query, skip: &[&str]) -> bool {
    const CONTROL: [&str; 9] = [
        "limit",
        "marker",
        "fields",
        "sort_key",
        "sort_dir",
        "page_reverse",
        "tags",
        "tags-any",
        "not-tags",
    ];
    let mut wanted: Vec<(&str, Vec<&str>)> = Vec::new();
    for (k, v) in q.pairs() {
        if CONTROL.contains(&k) || k == "not-tags-any" || skip.contains(&k) {
            continue;
        }
        match wanted.iter_mut().find(|(key, _)| *key == k) {
            Some((_, vals)) => vals.push(v),
            None => wanted.push((k, vec![v])),
        }
    }
    wanted.iter().all(|(k, vals)| match item.get(*k) {
        Some(Value::String(s)) => vals.contains(&s.as_str()),
        Some(Value::Bool(b)) => vals.iter().any(|v| v.eq_ignore_ascii_case(&b.to_string())),
        Some(Value::Number(n)) => vals.contains(&n.to_string().as_str()),
        Some(Value::Null) => vals.iter().any(|v| v.is_empty()),
        _ => true,
    })
}

/// A page of `items` (each with an id, `id_of`): the ones after `marker`, at most
/// `limit`. Answers the page and, when it is full, the id of its last item (the next
/// page's marker). `Err` names a marker that is not in the list.
pub(crate) fn paginate<T>(
    items: Vec<T>,
    q: &Query,
    id_of: impl Fn(&T) -> Option<&str>,
) -> std::result::Result<(Vec<T>, Option<String>), Paging> {
    let limit = match q.get("limit") {
        None => None,
        Some(l) => match l.parse::<usize>() {
            Ok(n) => Some(n.min(MAX_LIMIT)),
            Err(_) => return Err(Paging::BadLimit(l.to_string())),
        },
    };
    let start = match q.get("marker") {
        None => 0,
        Some(m) => match items.iter().position(|v| id_of(v) == Some(m)) {
            Some(i) => i + 1,
            None => return Err(Paging::BadMarker(m.to_string())),
        },
    };
    let rest: Vec<T> = items.into_iter().skip(start).collect();
    match limit {
        Some(n) if rest.len() >= n && n > 0 => {
            let page: Vec<T> = rest.into_iter().take(n).collect();
            let last = page.last().and_then(id_of).map(str::to_string);
            Ok((page, last))
        }
        _ => Ok((rest, None)),
    }
}

/// A rendered object's `"id"`, for [`paginate`].
pub(crate) fn value_id(v: &Value) -> Option<&str> {
    v.get("id").and_then(Value::as_str)
}

/// Why a page could not be cut.
#[derive(Clone, Debug)]
pub(crate) enum Paging {
    BadLimit(String),
    BadMarker(String),
}

/// How a service writes timestamps.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TimeStyle {
    /// `2026-01-01T00:00:00Z` (Nova, Neutron, Glance).
    Zulu,
    /// `2026-01-01T00:00:00.000000Z` (Keystone).
    Micros,
    /// `2026-01-01T00:00:00` (Octavia: WSME writes naive datetimes).
    Naive,
}

/// `ts` as ISO-8601 UTC in `style`.
pub(crate) fn iso(ts: Timestamp, style: TimeStyle) -> String {
    let millis = ts.millis();
    let secs = millis / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    let hms = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    );
    match style {
        TimeStyle::Zulu => format!("{hms}Z"),
        TimeStyle::Micros => format!("{hms}.{:06}Z", (millis % 1000) * 1000),
        TimeStyle::Naive => hms,
    }
}

/// Howard Hinnant's days-from-civil inverse: days since 1970-01-01 to (y, m, d).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

/// A UUID-shaped id derived from `name`: the same name gives the same id in every
/// run, so fixed objects (network, subnet, images, project) keep their ids.
pub(crate) fn stable_id(name: &str) -> String {
    let hi = flightdeck_spec::fnv1a(format!("flightdeck-sim-http/hi/{name}").as_bytes());
    let lo = flightdeck_spec::fnv1a(format!("flightdeck-sim-http/lo/{name}").as_bytes());
    format!(
        "{:08x}-{:04x}-5{:03x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0x0fff,
        ((lo >> 48) & 0x3fff) | 0x8000,
        lo & 0xffff_ffff_ffff
    )
}

/// `stable_id` without dashes, as Keystone writes its ids.
pub(crate) fn stable_hex(name: &str) -> String {
    stable_id(name).replace('-', "")
}

/// A JSON response.
pub(crate) fn json(status: StatusCode, body: &Value) -> Response {
    let mut resp = (status, body.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// A JSON response written by `body`'s serializer, without a JSON tree in between.
pub(crate) fn serialized<T: serde::Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => {
            let mut resp = (status, bytes).into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            resp
        }
        // Only a map with non-string keys fails to serialize: a bug here, said as one.
        Err(e) => crate::errors::keystone(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the simulator could not write its answer: {e}"),
        ),
    }
}

/// An empty response (`204 No Content`, `202 Accepted` of an action).
pub(crate) fn empty(status: StatusCode) -> Response {
    status.into_response()
}

/// The request body as a JSON object, or why it is not one.
pub(crate) fn body_object(body: &[u8]) -> std::result::Result<Value, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err("The request body is empty.".into());
    }
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("Malformed JSON: {e}"))?;
    if v.is_object() {
        Ok(v)
    } else {
        Err("The request body must be a JSON object.".into())
    }
}

/// The string array at `v[key]` (missing: empty; anything but strings: `Err`).
pub(crate) fn strings(v: &Value, key: &str) -> std::result::Result<Vec<String>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("Invalid input for {key}: not a list of strings."))
            })
            .collect(),
        Some(_) => Err(format!("Invalid input for {key}: not a list.")),
    }
}

/// The string at `v[key]`, if it is one.
pub(crate) fn string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The last path segment of an id-or-URL reference (`flavorRef`, `imageRef`).
pub(crate) fn last_segment(reference: &str) -> &str {
    reference
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(reference)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_format_as_iso_8601_utc() {
        let t = Timestamp::SIM_EPOCH.plus_millis(3_723_456);
        assert_eq!(iso(t, TimeStyle::Zulu), "2026-01-01T01:02:03Z");
        assert_eq!(iso(t, TimeStyle::Micros), "2026-01-01T01:02:03.456000Z");
        assert_eq!(iso(t, TimeStyle::Naive), "2026-01-01T01:02:03");
        assert_eq!(iso(Timestamp(0), TimeStyle::Zulu), "1970-01-01T00:00:00Z");
        assert_eq!(
            iso(Timestamp(951_782_400_000), TimeStyle::Zulu),
            "2000-02-29T00:00:00Z"
        );
    }

    #[test]
    fn query_decodes_repeats_and_commas() {
        let q = Query::parse(Some("tags=a%3Db,c&tags=d&name=x+y&limit=2"));
        assert_eq!(q.list("tags"), vec!["a=b", "c", "d"]);
        assert_eq!(q.get("name"), Some("x y"));
        assert_eq!(
            q.next_page("m1"),
            "tags=a%3Db%2Cc&tags=d&name=x%20y&limit=2&marker=m1"
        );
    }

    #[test]
    fn stable_ids_are_uuid_shaped_and_stable() {
        let id = stable_id("cirros");
        assert_eq!(id, stable_id("cirros"));
        assert_ne!(id, stable_id("ubuntu"));
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, vec![8, 4, 4, 4, 12]);
    }
}
