//! Reading YAML files of one or more documents into typed `Cluster` and `Scenario`s.

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::cluster::Cluster;
use crate::kind_probe::{KindValue, Probe};
use crate::scenario::Scenario;

/// The largest spec file flightdeck reads; anything bigger is a mistake, not a spec.
pub const SPEC_FILE_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// The most documents one file may hold.
pub const DOCUMENTS_MAX: usize = 4_096;

#[derive(Clone, Debug, PartialEq)]
pub enum Document {
    Cluster(Box<Cluster>),
    Scenario(Box<Scenario>),
}

/// A spec that could not be read. `path` is the field path inside the document (for
/// example `spec.network.podCIDR`); `line` is where the YAML parser placed the problem.
///
/// A file is checked whole: this is its first error, and each error holds the file's
/// next one in `next`, in document order (after [`ERRORS_MAX`], a last one says that
/// checking stopped). [`SpecError::all`] walks them; `Display` shows each, one a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    pub source: String,
    pub document: usize,
    pub path: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
    /// The file's next error. A chain rather than a list keeps the error small enough
    /// to return by value (clippy's `result_large_err`).
    pub next: Option<Box<SpecError>>,
}

/// The most errors one file reports: a file with more is checked no further.
pub const ERRORS_MAX: usize = 64;

impl SpecError {
    /// Every error of the file: this one, then each `next`.
    pub fn all(&self) -> impl Iterator<Item = &SpecError> {
        std::iter::successors(Some(self), |e| e.next.as_deref())
    }

    /// The first of `errors` with the rest chained behind it, or `None` when there are
    /// none.
    fn chain(errors: Vec<SpecError>) -> Option<SpecError> {
        errors.into_iter().rev().fold(None, |next, mut e| {
            e.next = next.map(Box::new);
            Some(e)
        })
    }

    /// `source:line:col: document N: path: message`, leaving out what this error lacks.
    fn fmt_one(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        write!(f, ": document {}", self.document + 1)?;
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.all().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            e.fmt_one(f)?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecError {}

/// Reads every document of the file at `path`.
pub fn load_file(path: &Path) -> Result<Vec<Document>, SpecError> {
    let source = path.display().to_string();
    let io_err = |message: String| plain(&source, 0, "", message);
    let meta = std::fs::metadata(path).map_err(|e| io_err(format!("cannot read: {e}")))?;
    if meta.len() > SPEC_FILE_MAX_BYTES {
        return Err(io_err(format!(
            "file is {} bytes; spec files are limited to {SPEC_FILE_MAX_BYTES}",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| io_err(format!("cannot read: {e}")))?;
    let mut docs = load_documents(&text, &source)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut errors = Vec::new();
    for (i, d) in docs.iter_mut().enumerate() {
        if let Document::Cluster(c) = d {
            if let Some(w) = c.spec.workload.as_mut() {
                w.resolve(base);
            }
            if let Err((field, message)) = crate::userdata::resolve_cluster(c, base)
                && errors.len() < ERRORS_MAX
            {
                errors.push(plain(&source, i, &field, message));
            }
        }
    }
    match SpecError::chain(errors) {
        Some(e) => Err(e),
        None => Ok(docs),
    }
}

/// Parses YAML text holding one or more `---`-separated documents. `source` names the
/// text in errors (usually the file path). Every document is checked: the error holds
/// every problem found (see [`SpecError`]).
pub fn load_documents(text: &str, source: &str) -> Result<Vec<Document>, SpecError> {
    // Pass one finds each document's kind; pass two parses it as that type, which keeps
    // the parser's line numbers and the field paths in errors.
    if let Err((line, column, why)) = crate::yaml_shape::check(text) {
        return Err(SpecError {
            line: Some(line),
            column: Some(column),
            ..plain(source, 0, "", why)
        });
    }
    let mut errors = Vec::new();
    let mut kinds = Vec::new();
    for (i, doc) in yaml_serde::Deserializer::from_str(text).enumerate() {
        if errors.len() >= ERRORS_MAX {
            break;
        }
        if i >= DOCUMENTS_MAX {
            errors.push(located(
                text,
                source,
                i,
                "",
                format!("more than {DOCUMENTS_MAX} documents"),
            ));
            break;
        }
        let probe = match Option::<Probe>::deserialize(doc) {
            Ok(p) => p,
            Err(e) if e.to_string().contains("expected struct Probe") => {
                errors.push(located(
                    text,
                    source,
                    i,
                    "",
                    "a document must be a mapping with apiVersion, kind, metadata and spec".into(),
                ));
                // Not read past: after a document serde could not take whole, yaml_serde
                // can hand the next one over mid-structure and panic on it (the fuzzer
                // found `[[…*b]` followed by `[[…]]]]`).
                break;
            }
            Err(e) => {
                // YAML the parser cannot read: it cannot tell where the next document
                // begins either (it answers every later one with this same error).
                errors.push(yaml_error(source, i, "", &e));
                break;
            }
        };
        let kind = match probe.map(|p| p.kind) {
            None => None,
            Some(Some(KindValue::Text(k))) => Some(k),
            Some(Some(KindValue::Other)) => {
                errors.push(located(text, source, i, "kind", "must be a string".into()));
                None
            }
            Some(None) => {
                errors.push(located(
                    text,
                    source,
                    i,
                    "kind",
                    "missing field `kind` (Cluster or Scenario)".into(),
                ));
                None
            }
        };
        kinds.push(kind);
    }

    let mut docs = Vec::new();
    let mut doc_index = Vec::new();
    let documents = yaml_serde::Deserializer::from_str(text).take(kinds.len());
    for (i, doc) in documents.enumerate() {
        if errors.len() >= ERRORS_MAX {
            break;
        }
        let Some(Some(kind)) = kinds.get(i) else {
            continue;
        };
        let (parsed, problems) = match kind.as_str() {
            "Cluster" => match typed::<Cluster>(doc, source, i) {
                Ok(c) => {
                    let problems = c.problems();
                    (Document::Cluster(Box::new(c)), problems)
                }
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            },
            "Scenario" => match typed::<Scenario>(doc, source, i) {
                Ok(s) => {
                    let problems = s.problems();
                    (Document::Scenario(Box::new(s)), problems)
                }
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            },
            other => {
                errors.push(located(
                    text,
                    source,
                    i,
                    "kind",
                    format!("unknown kind {other:?}; flightdeck reads Cluster and Scenario"),
                ));
                continue;
            }
        };
        if problems.is_empty() {
            docs.push(parsed);
            doc_index.push(i);
        }
        let room = ERRORS_MAX.saturating_sub(errors.len());
        for (path, msg) in problems.into_iter().take(room) {
            errors.push(located(text, source, i, &path, msg));
        }
    }
    if docs.is_empty() && errors.is_empty() {
        return Err(plain(source, 0, "", "the file holds no documents".into()));
    }
    // The rules across clusters, over the clusters that are valid on their own.
    let clusters: Vec<(usize, &Cluster)> = docs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match d {
            Document::Cluster(c) => Some((doc_index[i], c.as_ref())),
            Document::Scenario(_) => None,
        })
        .collect();
    let room = ERRORS_MAX.saturating_sub(errors.len());
    for (i, path, msg) in crate::capacity::check_file(&clusters)
        .into_iter()
        .take(room)
    {
        errors.push(located(text, source, i, &path, msg));
    }
    // Each document's errors together, in the order they were found within it.
    errors.sort_by_key(|e| e.document);
    if errors.len() >= ERRORS_MAX
        && let Some(last) = errors.last()
    {
        let stop = SpecError {
            message: format!("stopped after {ERRORS_MAX} errors; the rest is not checked"),
            path: String::new(),
            ..last.clone()
        };
        errors.push(stop);
    }
    match SpecError::chain(errors) {
        Some(e) => Err(e),
        None => Ok(docs),
    }
}

fn typed<'de, T: Deserialize<'de>>(
    doc: yaml_serde::Deserializer<'de>,
    source: &str,
    index: usize,
) -> Result<T, SpecError> {
    serde_path_to_error::deserialize(doc).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        yaml_error(source, index, &path, e.inner())
    })
}

fn yaml_error(source: &str, document: usize, path: &str, e: &yaml_serde::Error) -> SpecError {
    let location = e.location();
    let mut message = e.to_string();
    // The parser appends its own position; we report it in a fixed place instead.
    if let Some(pos) = message.find(" at line ") {
        message.truncate(pos);
    }
    // yaml_serde prefixes the path of the enclosing mapping; the full path is ours.
    if let Some((prefix, rest)) = message.split_once(": ")
        && !prefix.contains(' ')
        && path.starts_with(prefix)
    {
        message = rest.to_string();
    }
    // An integer past 64 bits reaches serde as a u128 no field takes, and the parser's
    // words for it ("as u128, expected any YAML value") say nothing to a user.
    if let Some((number, rest)) = message
        .strip_prefix("invalid type: integer `")
        .and_then(|r| r.split_once("` as u128"))
    {
        let wanted = rest
            .strip_prefix(", expected ")
            .filter(|w| *w != "any YAML value")
            .map(|w| format!(" ({w})"))
            .unwrap_or_default();
        message = format!("the number {number} is too large{wanted}");
    }
    SpecError {
        source: source.to_string(),
        document,
        path: path.to_string(),
        line: location.as_ref().map(|l| l.line()),
        column: location.as_ref().map(|l| l.column()),
        message,
        next: None,
    }
}

/// An error found after parsing, placed at its field's line (see [`crate::locate`]).
fn located(text: &str, source: &str, document: usize, path: &str, message: String) -> SpecError {
    let at = crate::locate::locate(text, document, path);
    SpecError {
        line: at.map(|a| a.0),
        column: at.map(|a| a.1),
        ..plain(source, document, path, message)
    }
}

fn plain(source: &str, document: usize, path: &str, message: String) -> SpecError {
    SpecError {
        source: source.to_string(),
        document,
        path: path.to_string(),
        line: None,
        column: None,
        message,
        next: None,
    }
}
