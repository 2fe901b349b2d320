//! Label and field selectors, as the API server parses and applies them.

use serde_json::Value;

use super::store::{Kind, at};

/// One requirement of a label selector.
pub(crate) enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// Splits at commas outside parentheses.
fn split_terms(s: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    terms.push(cur);
    terms
        .into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

pub(crate) fn parse_label_selector(s: &str) -> Result<Vec<Requirement>, String> {
    let mut reqs = Vec::new();
    for term in split_terms(s).into_iter().take(64) {
        let set = |rest: &str| -> Result<Vec<String>, String> {
            let inner = rest
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("unable to parse requirement: {term}"))?;
            Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
        };
        let req = if let Some((k, v)) = term.split_once("!=") {
            Requirement::NotEquals(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            Requirement::Equals(k.trim().into(), v.trim().into())
        } else if let Some((k, rest)) = term.split_once(" notin ") {
            Requirement::NotIn(k.trim().into(), set(rest)?)
        } else if let Some((k, rest)) = term.split_once(" in ") {
            Requirement::In(k.trim().into(), set(rest)?)
        } else if let Some(k) = term.strip_prefix('!') {
            Requirement::NotExists(k.trim().into())
        } else if term.contains([' ', '(', ')']) {
            return Err(format!("unable to parse requirement: {term}"));
        } else {
            Requirement::Exists(term.clone())
        };
        reqs.push(req);
    }
    Ok(reqs)
}

/// Whether `obj`'s labels (`metadata.labels`, string values only) meet `reqs`, read in
/// place.
pub(crate) fn labels_match(reqs: &[Requirement], obj: &Value) -> bool {
    let labels = at(obj, &["metadata", "labels"]).and_then(Value::as_object);
    let get = |k: &str| labels.and_then(|m| m.get(k)).and_then(Value::as_str);
    let any_of = |vs: &[String], l: &str| vs.iter().any(|v| v == l);
    reqs.iter().all(|r| match r {
        Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
        Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
        Requirement::In(k, vs) => get(k).is_some_and(|l| any_of(vs, l)),
        Requirement::NotIn(k, vs) => get(k).is_none_or(|l| !any_of(vs, l)),
        Requirement::Exists(k) => get(k).is_some(),
        Requirement::NotExists(k) => get(k).is_none(),
    })
}

/// The fields a kind can be selected by, and where they are.
fn field_path(kind: Kind, field: &str) -> Option<&'static [&'static str]> {
    Some(match (kind, field) {
        (_, "metadata.name") => &["metadata", "name"],
        (_, "metadata.namespace") => &["metadata", "namespace"],
        (Kind::Pod, "spec.nodeName") => &["spec", "nodeName"],
        (Kind::Pod, "status.phase") => &["status", "phase"],
        (Kind::Pod, "spec.schedulerName") => &["spec", "schedulerName"],
        (Kind::Pod, "spec.restartPolicy") => &["spec", "restartPolicy"],
        (Kind::Node, "spec.unschedulable") => &["spec", "unschedulable"],
        (Kind::Secret, "type") => &["type"],
        _ => return None,
    })
}

pub(crate) type FieldReq = (&'static [&'static str], bool, String);

pub(crate) fn parse_field_selector(kind: Kind, s: &str) -> Result<Vec<FieldReq>, String> {
    let mut reqs = Vec::new();
    for term in split_terms(s).into_iter().take(16) {
        let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
            (f, v, false)
        } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            (f, v, true)
        } else {
            return Err(format!(
                "invalid selector: '{term}'; can't understand '{term}'"
            ));
        };
        let path = field_path(kind, field.trim())
            .ok_or_else(|| format!("field label not supported: {}", field.trim()))?;
        reqs.push((path, equal, value.trim().to_string()));
    }
    Ok(reqs)
}

/// Whether `obj`'s fields meet `reqs` (a missing `spec.unschedulable` is `false`, any
/// other missing field empty), read in place.
pub(crate) fn fields_match(reqs: &[FieldReq], obj: &Value) -> bool {
    reqs.iter().all(|(path, equal, want)| {
        let same = match at(obj, path) {
            Some(Value::String(s)) => s == want,
            Some(Value::Bool(b)) => want == if *b { "true" } else { "false" },
            Some(Value::Null) | None if path.last() == Some(&"unschedulable") => want == "false",
            Some(Value::Null) | None => want.is_empty(),
            // A number or an object, as its JSON: rare enough to be written out.
            Some(other) => {
                let have = other.to_string();
                have == *want
            }
        };
        same == *equal
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn label_selectors_parse_equality_sets_and_existence() {
        let labels = json!({"metadata": {"labels": {"app": "web", "tier": "front", "n": 3}}});
        let ok = |s: &str| parse_label_selector(s).map(|r| labels_match(&r, &labels));
        assert_eq!(ok("app=web,tier=front"), Ok(true));
        assert_eq!(ok("app==web,tier!=front"), Ok(false));
        assert_eq!(ok("app in (web, api),!missing"), Ok(true));
        assert_eq!(ok("tier notin (front)"), Ok(false));
        assert_eq!(ok("app"), Ok(true));
        assert_eq!(ok("n"), Ok(false), "a label that is no string is none");
        assert!(parse_label_selector("app in web").is_err());
    }

    #[test]
    fn field_selectors_read_strings_booleans_and_defaults() {
        let node = json!({"metadata": {"name": "n1"}, "spec": {}});
        let ok = |s: &str| parse_field_selector(Kind::Node, s).map(|r| fields_match(&r, &node));
        assert_eq!(ok("metadata.name=n1"), Ok(true));
        assert_eq!(ok("metadata.name!=n1"), Ok(false));
        assert_eq!(ok("spec.unschedulable=false"), Ok(true), "missing is false");
        assert_eq!(ok("metadata.namespace="), Ok(true), "missing is empty");
        let cordoned = json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}});
        let r = parse_field_selector(Kind::Node, "spec.unschedulable=true").expect("parses");
        assert!(fields_match(&r, &cordoned));
        assert!(parse_field_selector(Kind::Node, "spec.podCIDR=x").is_err());
    }
}
