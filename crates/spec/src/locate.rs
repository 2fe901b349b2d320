//! Where a field is in the YAML text: errors found after parsing (cross-field and
//! cross-cluster rules) name a field path, and this finds its line and column so they
//! read like the parser's own (`file:22:5: document 1: spec.network.podCIDR: ...`).
//!
//! It reads block-style YAML by indentation, which is how specs are written. A path that
//! goes into a flow collection (`machine: {flavor: m1}`) or an alias is placed at the
//! deepest key found on the way, which is still the right line for most of them.

/// One piece of a line: a `- ` sequence entry, or text (a key and maybe its value).
#[derive(Debug)]
struct Entry<'a> {
    line: usize,
    col: usize,
    dash: bool,
    text: &'a str,
}

/// A step of a field path: `spec`, `nodePools`, `[0]`.
#[derive(Debug, PartialEq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        for index in rest.split('[').filter(|s| !s.is_empty()) {
            if let Ok(n) = index.trim_end_matches(']').parse() {
                out.push(Step::Index(n));
            }
        }
    }
    out
}

/// The document's lines as entries, from line `first` (1-based) on.
fn entries(doc: &str, first: usize) -> Vec<Entry<'_>> {
    let mut out = Vec::new();
    for (i, raw) in doc.lines().enumerate() {
        let mut col = raw.len() - raw.trim_start_matches(' ').len();
        let mut rest = &raw[col..];
        while rest == "-" || rest.starts_with("- ") {
            out.push(Entry {
                line: first + i,
                col,
                dash: true,
                text: "-",
            });
            let after = &rest[1..];
            let trimmed = after.trim_start_matches(' ');
            col += 1 + after.len() - trimmed.len();
            rest = trimmed;
        }
        if !rest.is_empty() && !rest.starts_with('#') {
            out.push(Entry {
                line: first + i,
                col,
                dash: false,
                text: rest,
            });
        }
    }
    out
}

/// Whether `text` is the key `key` followed by `:`.
fn is_key(text: &str, key: &str) -> bool {
    let unquoted = [key.to_string(), format!("\"{key}\""), format!("'{key}'")];
    unquoted.iter().any(|k| {
        text.strip_prefix(k.as_str())
            .is_some_and(|r| r.trim_start().starts_with(':'))
    })
}

/// The entries of the block that `entries[at]` opens: those after it, indented deeper.
fn block<'e, 'a>(entries: &'e [Entry<'a>], at: usize) -> &'e [Entry<'a>] {
    let col = entries[at].col;
    let end = entries[at + 1..]
        .iter()
        .position(|e| e.col <= col)
        .map_or(entries.len(), |n| at + 1 + n);
    &entries[at + 1..end]
}

/// Where `path` is in document `document` (from 0) of `text`: `(line, column)`, both
/// from 1; the deepest key found on the way if the full path is not found; `None` if the
/// document or its first key is not found.
pub fn locate(text: &str, document: usize, path: &str) -> Option<(usize, usize)> {
    let (doc, first) = document_text(text, document)?;
    let all = entries(doc, first);
    if steps(path).is_empty() {
        // The whole document: its first line of content.
        return all.first().map(|e| (e.line, e.col + 1));
    }
    let mut scope: &[Entry<'_>] = &all;
    let mut found = None;
    for step in steps(path) {
        let child_col = scope.first()?.col;
        let at = match step {
            Step::Key(k) => scope
                .iter()
                .position(|e| e.col == child_col && !e.dash && is_key(e.text, k)),
            Step::Index(n) => scope
                .iter()
                .enumerate()
                .filter(|(_, e)| e.col == child_col && e.dash)
                .nth(n)
                .map(|(i, _)| i),
        };
        let Some(at) = at else {
            return found;
        };
        found = Some((scope[at].line, scope[at].col + 1));
        scope = block(scope, at);
        if scope.is_empty() {
            break;
        }
    }
    found
}

/// The text of document `document` (from 0) and the line it starts on, as the parser
/// counts documents: split at `---` lines, with nothing before a leading `---`.
fn document_text(text: &str, document: usize) -> Option<(&str, usize)> {
    let mut starts = vec![(0usize, 1usize)];
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let marker = line.trim_end();
        if marker == "---" || marker.starts_with("--- ") {
            starts.push((offset + line.len(), i + 2));
        }
        offset += line.len();
    }
    let head = &text[..starts.get(1).map_or(text.len(), |s| s.0)];
    let leading_marker = starts.len() > 1
        && head.lines().all(|l| {
            l.trim().is_empty() || l.starts_with('#') || l.starts_with("---") || l.starts_with('%')
        });
    if leading_marker {
        starts.remove(0);
    }
    let (start, line) = *starts.get(document)?;
    let end = starts.get(document + 1).map_or(text.len(), |(s, _)| *s);
    Some((&text[start..end], line))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# a comment\napiVersion: v1\nkind: Cluster\nmetadata:\n  name: a\nspec:\n  nodePools:\n    - name: w\n      replicas: 2\n    - name: x\n      machine: {flavor: m1}\n  network:\n    podCIDR: 10.0.0.0/16\n---\nkind: Cluster\nspec:\n  network:\n    \"podCIDR\": 10.1.0.0/16\n";

    #[test]
    fn fields_are_found_by_path_in_their_document() {
        assert_eq!(locate(TEXT, 0, "spec.network.podCIDR"), Some((13, 5)));
        assert_eq!(locate(TEXT, 0, "metadata.name"), Some((5, 3)));
        assert_eq!(locate(TEXT, 0, "spec.nodePools[0].replicas"), Some((9, 7)));
        assert_eq!(locate(TEXT, 0, "spec.nodePools[1].name"), Some((10, 7)));
        assert_eq!(locate(TEXT, 0, "spec.nodePools[1]"), Some((10, 5)));
        assert_eq!(locate(TEXT, 1, "spec.network.podCIDR"), Some((18, 5)));
    }

    #[test]
    fn a_path_into_flow_style_stops_at_the_deepest_key_found() {
        assert_eq!(
            locate(TEXT, 0, "spec.nodePools[1].machine.flavor"),
            Some((11, 7))
        );
        assert_eq!(locate(TEXT, 0, "nothing.here"), None);
        assert_eq!(locate(TEXT, 5, "spec"), None);
    }

    #[test]
    fn a_leading_marker_opens_the_first_document() {
        let text = "---\nkind: Cluster\nspec:\n  a: 1\n---\nspec:\n  b: 2\n";
        assert_eq!(locate(text, 0, "spec.a"), Some((4, 3)));
        assert_eq!(locate(text, 1, "spec.b"), Some((7, 3)));
    }
}
