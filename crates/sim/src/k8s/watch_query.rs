//! What a transport that carries a watch on (the HTTP server, the in-process client)
//! reads of a request and of its answer: query parameters as sent, the
//! `resourceVersion` to ask again from, and the version an event line carries.

use serde_json::Value;

use super::KubeRequest;

/// The raw value of `key` in the raw query `query` (`""` for a bare key); values a
/// client sends for these keys are plain.
pub fn query_param<'q>(query: &'q str, key: &str) -> Option<&'q str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// `query` with `resourceVersion` set to `rv` (replaced, or appended).
pub fn with_resource_version(query: &str, rv: &str) -> String {
    let mut parts: Vec<String> = query
        .split('&')
        .filter(|kv| !kv.is_empty() && kv.split('=').next() != Some("resourceVersion"))
        .map(str::to_string)
        .collect();
    parts.push(format!("resourceVersion={rv}"));
    parts.join("&")
}

/// The `object.metadata.resourceVersion` of one watch event line.
pub fn watch_line_version(line: &[u8]) -> Option<String> {
    let event: Value = serde_json::from_slice(line).ok()?;
    event
        .pointer("/object/metadata/resourceVersion")?
        .as_str()
        .map(str::to_string)
}

impl KubeRequest {
    /// Whether the request is a watch: a `GET` with `watch=true` (or `1`), or of a
    /// `/watch/` path.
    pub fn is_watch(&self) -> bool {
        self.method.eq_ignore_ascii_case("GET")
            && (self.path.split('/').any(|s| s == "watch")
                || matches!(query_param(&self.query, "watch"), Some("true" | "1")))
    }
}
