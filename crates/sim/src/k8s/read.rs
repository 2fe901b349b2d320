//! Reads of a resource: a list, or the watch events after a `resourceVersion`, with
//! label and field selectors. Lists and watches ignore `limit`/`continue` (everything
//! comes in one page). A watch answers the events after its `resourceVersion` as
//! newline-delimited JSON and ends (a transport carries it on); without one it answers
//! the current objects as `ADDED`. A client that asks for bookmarks gets one at the end
//! of each answer.

use std::collections::BTreeMap;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value, json};

use super::KubeResponse;
use super::answers::{Answer, api_version_of, fail, served_response, unavailable};
use super::select::{fields_match, labels_match, parse_field_selector, parse_label_selector};
use super::store::Resource;
use crate::State;

/// A list, or (with `watch`) the watch events after `resourceVersion`. Objects are
/// written as they are stored, with their `apiVersion` and `kind` ([`Presented`]): no
/// object is copied to be answered.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_list(
    st: &State,
    cluster: &str,
    res: &'static Resource,
    version: &str,
    ns: Option<&str>,
    params: &BTreeMap<String, String>,
    only: Option<&str>,
    watch: bool,
) -> Answer {
    let labels = match parse_label_selector(params.get("labelSelector").map_or("", |s| s)) {
        Ok(r) => r,
        Err(e) => return fail(400, "BadRequest", &e),
    };
    let mut fields =
        match parse_field_selector(res.kind, params.get("fieldSelector").map_or("", |s| s)) {
            Ok(r) => r,
            Err(e) => return fail(400, "BadRequest", &e),
        };
    if let Some(name) = only {
        fields.push((&["metadata", "name"], true, name.to_string()));
    }
    let Some(store) = st.kube.store(cluster) else {
        return unavailable();
    };
    let matches = |obj: &Value| labels_match(&labels, obj) && fields_match(&fields, obj);
    let api_version = api_version_of(res, version);
    let presented = |obj| Presented {
        obj,
        api_version: &api_version,
        kind: res.kind_name,
    };
    if !watch {
        let mut body = Vec::with_capacity(1024);
        body.extend_from_slice(b"{\"apiVersion\":");
        write_json(&mut body, &api_version);
        body.extend_from_slice(b",\"items\":[");
        for (i, o) in store.list(res.kind, ns).filter(|o| matches(o)).enumerate() {
            if i > 0 {
                body.push(b',');
            }
            write_json(&mut body, &presented(o));
        }
        body.extend_from_slice(b"],\"kind\":");
        write_json(&mut body, &format!("{}List", res.kind_name));
        body.extend_from_slice(b",\"metadata\":{\"resourceVersion\":");
        write_json(&mut body, &store.resource_version().to_string());
        body.extend_from_slice(b"}}");
        return (served_response(body), None);
    }
    let since = match watch_since(params) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let mut body = Vec::new();
    match since.map(|s| (s, store.events_after(s))) {
        None => {
            for o in store.list(res.kind, ns).filter(|o| matches(o)) {
                presented_line(&mut body, "ADDED", &presented(o));
            }
        }
        Some((since, Err(oldest))) => {
            body.extend(expired_line(since, oldest));
            return watch_answer(body);
        }
        Some((_, Ok(events))) => {
            for e in events {
                let in_ns = ns.is_none_or(|n| n == e.namespace);
                if e.kind == res.kind && in_ns && matches(e.object()) {
                    presented_line(&mut body, e.kind_of_change, &presented(e.object()));
                }
            }
        }
    }
    if wants_bookmarks(params) {
        body.extend(bookmark_line(
            &api_version,
            res.kind_name,
            store.resource_version(),
        ));
    }
    watch_answer(body)
}

/// Whether a watch asked for `BOOKMARK` events (`allowWatchBookmarks=true`).
pub(crate) fn wants_bookmarks(params: &BTreeMap<String, String>) -> bool {
    params
        .get("allowWatchBookmarks")
        .is_some_and(|v| v == "true" || v == "1")
}

/// The `BOOKMARK` line that ends each watch answer of a client that asked for them: the
/// answer is complete up to `version`, and a watch from there misses nothing.
/// Its `type` comes first, so a transport can tell it from an event by its start.
pub(crate) fn bookmark_line(api_version: &str, kind: &str, version: u64) -> Vec<u8> {
    let object = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"resourceVersion": version.to_string()}});
    format!("{BOOKMARK_START}\"object\":{object}}}\n").into_bytes()
}

/// How a `BOOKMARK` line starts.
pub const BOOKMARK_START: &str = "{\"type\":\"BOOKMARK\",";

/// Where a watch starts: `None` for every object now (no `resourceVersion`, or `0`),
/// else after the version given; a version that is not one is a 400.
pub(crate) fn watch_since(params: &BTreeMap<String, String>) -> Result<Option<u64>, Answer> {
    match params.get("resourceVersion").map_or("", String::as_str) {
        "" | "0" => Ok(None),
        since => since.parse::<u64>().map(Some).map_err(|_| {
            fail(
                400,
                "BadRequest",
                &format!("invalid resource version: {since}"),
            )
        }),
    }
}

/// One watch event line.
pub(crate) fn watch_line(kind: &str, obj: &Value) -> Vec<u8> {
    let mut l = serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
    l.push(b'\n');
    l
}

/// The `ERROR` line of a watch from a version whose events are no longer kept: the
/// client lists again.
pub(crate) fn expired_line(since: u64, oldest: u64) -> Vec<u8> {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": "Expired", "code": 410,
        "message": format!("too old resource version: {since} ({oldest})")});
    watch_line("ERROR", &status)
}

/// A watch's event lines as the answer.
pub(crate) fn watch_answer(body: Vec<u8>) -> Answer {
    (
        KubeResponse {
            status: 200,
            content_type: "application/json".into(),
            body,
        },
        None,
    )
}

/// A stored object as answered: its own fields with `apiVersion` and `kind` set, keys in
/// order as a parsed object's are, serialized from where it is stored.
pub(crate) struct Presented<'a> {
    pub(crate) obj: &'a Value,
    pub(crate) api_version: &'a str,
    pub(crate) kind: &'a str,
}

impl Serialize for Presented<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(m) = self.obj else {
            return self.obj.serialize(s);
        };
        let mut set = [("apiVersion", self.api_version), ("kind", self.kind)]
            .into_iter()
            .peekable();
        let mut map = s.serialize_map(None)?;
        for (k, v) in m {
            while let Some((sk, sv)) = set.next_if(|(sk, _)| *sk < k.as_str()) {
                map.serialize_entry(sk, sv)?;
            }
            if let Some((sk, sv)) = set.next_if(|(sk, _)| *sk == k.as_str()) {
                map.serialize_entry(sk, sv)?;
                continue;
            }
            map.serialize_entry(k, v)?;
        }
        for (sk, sv) in set {
            map.serialize_entry(sk, sv)?;
        }
        map.end()
    }
}

/// Appends `v` as JSON: a `Value`, a string or a [`Presented`] into memory, which never
/// fails (its map keys are strings).
fn write_json(out: &mut Vec<u8>, v: &impl Serialize) {
    let written = serde_json::to_writer(&mut *out, v);
    debug_assert!(written.is_ok(), "in-memory JSON of a Value never fails");
}

/// One watch line of `obj`, as [`watch_line`] writes it.
fn presented_line(out: &mut Vec<u8>, kind: &str, obj: &Presented<'_>) {
    out.extend_from_slice(b"{\"object\":");
    write_json(out, obj);
    out.extend_from_slice(b",\"type\":");
    write_json(out, &kind);
    out.extend_from_slice(b"}\n");
}
