//! PATCH bodies: JSON merge patch (RFC 7386), strategic merge patch (as a merge patch
//! that honours the `$patch: replace|delete` directives and drops the `$setElementOrder`
//! / `$retainKeys` / `$deleteFromPrimitiveList` hints; lists are replaced, not merged
//! by their merge key), and JSON patch (RFC 6902: add, replace, remove, test, copy,
//! move).

use serde_json::{Map, Value};

/// Why a patch could not be applied: HTTP code, Status reason, message.
pub(crate) type PatchError = (u16, &'static str, String);

/// The media types PATCH accepts.
pub(crate) const ACCEPTED: &str = "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json";

/// `target` with the patch `body` of `content_type` applied.
pub(crate) fn apply(target: &Value, content_type: &str, body: &[u8]) -> Result<Value, PatchError> {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let strategic = match media.as_str() {
        "application/merge-patch+json" => false,
        "application/strategic-merge-patch+json" => true,
        "application/json-patch+json" => return json_patch(target, body),
        _ => {
            return Err((
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: {ACCEPTED}"
                ),
            ));
        }
    };
    let patch: Value = serde_json::from_slice(body).map_err(|e| bad(&e.to_string()))?;
    if !patch.is_object() {
        return Err(bad("a merge patch must be a JSON object"));
    }
    Ok(merge(target, &patch, strategic))
}

fn bad(msg: &str) -> PatchError {
    (400, "BadRequest", msg.to_string())
}

/// RFC 7386 merge of `patch` into `target` (with strategic directives if `strategic`).
fn merge(target: &Value, patch: &Value, strategic: bool) -> Value {
    let Value::Object(p) = patch else {
        return patch.clone();
    };
    if strategic && p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = p.clone();
        replaced.remove("$patch");
        return Value::Object(strip(replaced));
    }
    let mut out = match target {
        Value::Object(t) => t.clone(),
        _ => Map::new(),
    };
    for (k, v) in p {
        if strategic
            && (k.starts_with("$setElementOrder/")
                || k.starts_with("$deleteFromPrimitiveList/")
                || k == "$retainKeys"
                || k == "$patch")
        {
            continue;
        }
        let delete =
            v.is_null() || (strategic && v.get("$patch").and_then(Value::as_str) == Some("delete"));
        if delete {
            out.remove(k);
        } else {
            let merged = merge(out.get(k).unwrap_or(&Value::Null), v, strategic);
            out.insert(k.clone(), merged);
        }
    }
    Value::Object(out)
}

fn strip(mut m: Map<String, Value>) -> Map<String, Value> {
    m.retain(|k, _| !k.starts_with('$'));
    m
}

fn pointer(path: &str) -> Result<Vec<String>, PatchError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| invalid(&format!("invalid JSON pointer {path:?}")))?;
    Ok(rest
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn invalid(msg: &str) -> PatchError {
    (422, "Invalid", msg.to_string())
}

fn get<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |v, k| match v {
        Value::Object(m) => m.get(k),
        Value::Array(a) => k.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn parent_mut<'a>(doc: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let (_, parents) = path.split_last()?;
    parents.iter().try_fold(doc, |v, k| match v {
        Value::Object(m) => m.get_mut(k),
        Value::Array(a) => k.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
        _ => None,
    })
}

fn remove(doc: &mut Value, path: &[String]) -> Result<Value, PatchError> {
    let missing = || invalid(&format!("path /{} does not exist", path.join("/")));
    let last = path.last().ok_or_else(missing)?.clone();
    match parent_mut(doc, path).ok_or_else(missing)? {
        Value::Object(m) => m.remove(&last).ok_or_else(missing),
        Value::Array(a) => {
            let i = last.parse::<usize>().map_err(|_| missing())?;
            if i < a.len() {
                Ok(a.remove(i))
            } else {
                Err(missing())
            }
        }
        _ => Err(missing()),
    }
}

fn add(doc: &mut Value, path: &[String], value: Value, replace: bool) -> Result<(), PatchError> {
    let missing = || invalid(&format!("path /{} does not exist", path.join("/")));
    let Some(last) = path.last().cloned() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, path).ok_or_else(missing)? {
        Value::Object(m) => {
            if replace && !m.contains_key(&last) {
                return Err(missing());
            }
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" && !replace {
                a.push(value);
                return Ok(());
            }
            let i = last.parse::<usize>().map_err(|_| missing())?;
            if replace {
                let slot = a.get_mut(i).ok_or_else(missing)?;
                *slot = value;
            } else if i <= a.len() {
                a.insert(i, value);
            } else {
                return Err(missing());
            }
            Ok(())
        }
        _ => Err(missing()),
    }
}

fn json_patch(target: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let ops: Value = serde_json::from_slice(body).map_err(|e| bad(&e.to_string()))?;
    let Value::Array(ops) = ops else {
        return Err(bad("a JSON patch must be an array of operations"));
    };
    let mut doc = target.clone();
    for op in ops.iter().take(1_000) {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = pointer(op.get("path").and_then(Value::as_str).unwrap_or(""))?;
        let value = op.get("value").cloned();
        let from = || pointer(op.get("from").and_then(Value::as_str).unwrap_or(""));
        match kind {
            "add" | "replace" => {
                let value = value.ok_or_else(|| bad(&format!("{kind} operation needs a value")))?;
                add(&mut doc, &path, value, kind == "replace")?;
            }
            "remove" => {
                remove(&mut doc, &path)?;
            }
            "test" => {
                if get(&doc, &path) != value.as_ref() {
                    return Err(invalid("testing value failed"));
                }
            }
            "copy" => {
                let v = get(&doc, &from()?)
                    .cloned()
                    .ok_or_else(|| invalid("copy from a path that does not exist"))?;
                add(&mut doc, &path, v, false)?;
            }
            "move" => {
                let v = remove(&mut doc, &from()?)?;
                add(&mut doc, &path, v, false)?;
            }
            _ => return Err(bad(&format!("unexpected JSON patch operation {kind:?}"))),
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_sets_and_removes_fields() {
        let node = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {}});
        let out = apply(
            &node,
            "application/merge-patch+json",
            br#"{"metadata":{"labels":{"a":null,"c":"3"}},"spec":{"unschedulable":true}}"#,
        );
        assert_eq!(
            out.ok(),
            Some(
                json!({"metadata": {"labels": {"b": "2", "c": "3"}}, "spec": {"unschedulable": true}})
            )
        );
    }

    #[test]
    fn strategic_merge_patch_ignores_ordering_directives() {
        let vm = json!({"spec": {"runStrategy": "Always"}});
        let out = apply(
            &vm,
            "application/strategic-merge-patch+json; charset=utf-8",
            br#"{"spec":{"runStrategy":"Halted","$setElementOrder/x":[]}}"#,
        );
        assert_eq!(out.ok(), Some(json!({"spec": {"runStrategy": "Halted"}})));
    }

    #[test]
    fn json_patch_replaces_adds_and_fails_on_missing_paths() {
        let node = json!({"spec": {"unschedulable": false}, "metadata": {"labels": {}}});
        let ops = br#"[{"op":"replace","path":"/spec/unschedulable","value":true},
                       {"op":"add","path":"/metadata/labels/x~1y","value":"z"}]"#;
        let out = apply(&node, "application/json-patch+json", ops);
        assert_eq!(
            out.ok(),
            Some(json!({"spec": {"unschedulable": true}, "metadata": {"labels": {"x/y": "z"}}}))
        );
        let missing = apply(
            &node,
            "application/json-patch+json",
            br#"[{"op":"replace","path":"/spec/nope","value":1}]"#,
        );
        assert_eq!(missing.err().map(|e| e.0), Some(422));
        let unknown = apply(&node, "application/apply-patch+yaml", b"{}");
        assert_eq!(unknown.err().map(|e| e.0), Some(415));
    }
}
