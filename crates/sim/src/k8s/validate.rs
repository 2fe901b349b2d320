//! Checks of what a client sends: a JSON object for a body, DNS-1123 names, and label
//! and annotation keys and values as the API server validates them.

use serde_json::Value;

use super::answers::{Answer, fail, invalid};
use super::store::{Kind, at};

/// A DNS-1123 subdomain (`label_only`: a DNS-1123 label).
pub(crate) fn valid_name(name: &str, label_only: bool) -> bool {
    let max = if label_only { 63 } else { 253 };
    !name.is_empty()
        && name.len() <= max
        && name.split('.').all(|part| {
            !part.is_empty()
                && part.len() <= 63
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
        && (!label_only || !name.contains('.'))
}

/// A label value, or the name part of a qualified key.
fn valid_label_value(v: &str) -> bool {
    v.len() <= 63
        && (v.is_empty()
            || (v
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                && v.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                && v.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())))
}

fn valid_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    prefix.is_none_or(|p| valid_name(p, false)) && !name.is_empty() && valid_label_value(name)
}

/// Checks metadata a client sent: labels and annotation keys.
pub(crate) fn validate_meta(kind: Kind, name: &str, obj: &Value) -> Result<(), Answer> {
    if let Some(labels) = at(obj, &["metadata", "labels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            if !valid_key(k) {
                return Err(invalid(
                    kind,
                    name,
                    "metadata.labels",
                    &format!(
                        "Invalid value: \"{k}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                    ),
                ));
            }
            let Some(v) = v.as_str() else {
                return Err(invalid(
                    kind,
                    name,
                    "metadata.labels",
                    "label values must be strings",
                ));
            };
            if !valid_label_value(v) {
                return Err(invalid(
                    kind,
                    name,
                    &format!("metadata.labels[{k}]"),
                    &format!(
                        "Invalid value: \"{v}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                    ),
                ));
            }
        }
    }
    if let Some(ann) = at(obj, &["metadata", "annotations"]).and_then(Value::as_object) {
        for (k, v) in ann {
            if !valid_key(k) || !v.is_string() {
                return Err(invalid(
                    kind,
                    name,
                    "metadata.annotations",
                    &format!("Invalid value: \"{k}\""),
                ));
            }
        }
    }
    Ok(())
}

pub(crate) fn parse_object(body: &[u8]) -> Result<Value, Answer> {
    match serde_json::from_slice::<Value>(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(fail(
            400,
            "BadRequest",
            "the body of the request must be a JSON object",
        )),
        Err(e) => Err(fail(
            400,
            "BadRequest",
            &format!("the body of the request could not be decoded: {e}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys_follow_kubernetes_rules() {
        assert!(valid_key("flightdeck.dev/cluster"));
        assert!(valid_key("app"));
        assert!(!valid_key("flightdeck-cluster=x"));
        assert!(!valid_key("Bad_Prefix/x"));
    }
}
