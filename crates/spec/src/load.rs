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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    pub source: String,
    pub document: usize,
    pub path: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

impl std::error::Error for SpecError {}

/// Reads every document of the file at `path`.
pub fn load_file(path: &Path) -> Result<Vec<Document>, SpecError> {
    let source = path.display().to_string();
    let io_err = |message: String| SpecError {
        source: source.clone(),
        document: 0,
        path: String::new(),
        line: None,
        column: None,
        message,
    };
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
    for (i, d) in docs.iter_mut().enumerate() {
        if let Document::Cluster(c) = d {
            if let Some(w) = c.spec.workload.as_mut() {
                w.resolve(base);
            }
            crate::userdata::resolve_cluster(c, base).map_err(|(field, message)| SpecError {
                source: source.clone(),
                document: i,
                path: field,
                line: None,
                column: None,
                message,
            })?;
        }
    }
    Ok(docs)
}

/// Parses YAML text holding one or more `---`-separated documents. `source` names the
/// text in errors (usually the file path).
pub fn load_documents(text: &str, source: &str) -> Result<Vec<Document>, SpecError> {
    // Pass one finds each document's kind; pass two parses it as that type, which keeps
    // the parser's line numbers and the field paths in errors.
    if let Err((line, column, why)) = crate::yaml_shape::check(text) {
        return Err(SpecError {
            source: source.to_string(),
            document: 0,
            path: String::new(),
            line: Some(line),
            column: Some(column),
            message: why,
        });
    }
    let mut kinds = Vec::new();
    for (i, doc) in yaml_serde::Deserializer::from_str(text).enumerate() {
        if i >= DOCUMENTS_MAX {
            return Err(located(
                text,
                source,
                i,
                "",
                format!("more than {DOCUMENTS_MAX} documents"),
            ));
        }
        let probe = match Option::<Probe>::deserialize(doc) {
            Ok(p) => p,
            Err(e) if e.to_string().contains("expected struct Probe") => {
                return Err(located(
                    text,
                    source,
                    i,
                    "",
                    "a document must be a mapping with apiVersion, kind, metadata and spec".into(),
                ));
            }
            Err(e) => return Err(yaml_error(source, i, "", &e)),
        };
        let Some(probe) = probe else {
            kinds.push(None);
            continue;
        };
        let kind = match probe.kind {
            Some(KindValue::Text(k)) => k,
            Some(KindValue::Other) => {
                return Err(located(text, source, i, "kind", "must be a string".into()));
            }
            None => {
                return Err(located(
                    text,
                    source,
                    i,
                    "kind",
                    "missing field `kind` (Cluster or Scenario)".into(),
                ));
            }
        };
        kinds.push(Some(kind));
    }

    let mut docs = Vec::new();
    let mut doc_index = Vec::new();
    for (i, doc) in yaml_serde::Deserializer::from_str(text).enumerate() {
        let Some(Some(kind)) = kinds.get(i) else {
            continue;
        };
        let parsed = match kind.as_str() {
            "Cluster" => {
                let c: Cluster = typed(doc, source, i)?;
                c.validate()
                    .map_err(|(path, msg)| located(text, source, i, &path, msg))?;
                Document::Cluster(Box::new(c))
            }
            "Scenario" => {
                let s: Scenario = typed(doc, source, i)?;
                s.validate()
                    .map_err(|(path, msg)| located(text, source, i, &path, msg))?;
                Document::Scenario(Box::new(s))
            }
            other => {
                return Err(located(
                    text,
                    source,
                    i,
                    "kind",
                    format!("unknown kind {other:?}; flightdeck reads Cluster and Scenario"),
                ));
            }
        };
        docs.push(parsed);
        doc_index.push(i);
    }
    if docs.is_empty() {
        return Err(plain(source, 0, "", "the file holds no documents".into()));
    }
    let clusters: Vec<(usize, &Cluster)> = docs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match d {
            Document::Cluster(c) => Some((doc_index[i], c.as_ref())),
            Document::Scenario(_) => None,
        })
        .collect();
    crate::capacity::check_file(&clusters)
        .map_err(|(i, path, msg)| located(text, source, i, &path, msg))?;
    Ok(docs)
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
    }
}
