//! The labels and taints flightdeck keeps on a set's Nodes, checked as the API server
//! checks them, so that a bad one is refused at apply with its field's line rather than
//! by the workload cluster at every reconcile.

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::NodeTaint;

/// The taint effects Kubernetes knows.
pub const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A name part of a label key or a label value: at most 63 characters, alphanumerics,
/// `-`, `_` and `.`, beginning and ending with an alphanumeric.
fn name_part(s: &str, max: usize) -> Result<(), String> {
    if s.len() > max {
        return Err(format!("must be at most {max} characters, got {}", s.len()));
    }
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !s.chars().all(ok) || !ends(s.chars().next()) || !ends(s.chars().last()) {
        return Err(
            "must consist of alphanumerics, '-', '_' or '.', and begin and end with an alphanumeric"
                .into(),
        );
    }
    Ok(())
}

/// A DNS subdomain (RFC 1123): at most 253 characters of lowercase dot-separated labels.
fn dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 253 {
        return Err("its prefix must be a DNS subdomain of 1 to 253 characters".into());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !s.split('.').all(label_ok) {
        return Err(format!(
            "its prefix {s:?} must be a lowercase DNS subdomain (e.g. example.com)"
        ));
    }
    Ok(())
}

/// A label or taint key: `[prefix/]name`.
pub fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        dns_subdomain(p)?;
    }
    if name.is_empty() {
        return Err("its name part must not be empty".into());
    }
    name_part(name, 63).map_err(|e| format!("its name part {name:?} {e}"))
}

/// A label value (may be empty).
pub fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    name_part(value, 63)
}

/// Every problem of a set's `labels` and `taints`, with the field each is at (`at` is the
/// set's path, e.g. `spec.nodePools[0]`).
pub fn problems(
    at: &str,
    labels: &BTreeMap<String, String>,
    taints: &[NodeTaint],
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in labels {
        if let Err(e) = check_key(k) {
            out.push((format!("{at}.labels"), format!("label key {k:?}: {e}")));
        }
        if let Err(e) = check_value(v) {
            out.push((
                format!("{at}.labels"),
                format!("label {k:?}: value {v:?} {e}"),
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for (i, t) in taints.iter().enumerate() {
        let field = format!("{at}.taints[{i}]");
        if let Err(e) = check_key(&t.key) {
            out.push((
                format!("{field}.key"),
                format!("taint key {:?}: {e}", t.key),
            ));
        }
        if let Some(v) = &t.value
            && let Err(e) = check_value(v)
        {
            out.push((format!("{field}.value"), format!("taint value {v:?} {e}")));
        }
        if !TAINT_EFFECTS.contains(&t.effect.as_str()) {
            out.push((
                format!("{field}.effect"),
                format!(
                    "effect {:?} is not one of {}",
                    t.effect,
                    TAINT_EFFECTS.join(", ")
                ),
            ));
        }
        if !seen.insert((t.key.as_str(), t.effect.as_str())) {
            out.push((
                field,
                format!(
                    "taint {}:{} is given twice (a key may carry each effect once)",
                    t.key, t.effect
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys_and_values_follow_the_api_servers_rules() {
        for good in [
            "tier",
            "node-role.kubernetes.io/gpu",
            "example.com/a_b.c",
            "a",
        ] {
            assert_eq!(check_key(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "/x",
            "Example.com/x",
            "-x",
            "x-",
            "a/b/c",
            &"x".repeat(64),
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
        assert_eq!(check_value(""), Ok(()));
        assert!(check_value("has space").is_err());
    }

    #[test]
    fn a_bad_taint_names_its_field() {
        let taints = vec![
            NodeTaint {
                key: "dedicated".into(),
                value: Some("gpu".into()),
                effect: "NoSchedul".into(),
            },
            NodeTaint {
                key: "dedicated".into(),
                value: None,
                effect: "NoSchedul".into(),
            },
        ];
        let p = problems("spec.nodePools[1]", &BTreeMap::new(), &taints);
        assert!(
            p.iter()
                .any(|(f, m)| f == "spec.nodePools[1].taints[0].effect" && m.contains("NoSchedul"))
        );
        assert!(p.iter().any(|(f, _)| f == "spec.nodePools[1].taints[1]"));
    }
}
