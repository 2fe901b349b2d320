//! OpenNebula's template syntax (`src/parsers/template_parser.l`, `template_syntax.y`):
//! `KEY = value` and `KEY = "quoted value"` lines, vector attributes
//! `DISK = [ IMAGE = "x", SIZE = "10" ]`, `KEY =` (empty), `#` comments. Names are
//! upper-cased. A template keeps its attributes the way `Template` does (a multimap by
//! name): sorted by name, attributes of the same name in the order they were set, and
//! that is the order the XML documents list them in.
//!
//! A template whose first character is `<` is read in the XML form instead
//! (`Template::from_xml`, `rebuild_attributes`): see [`parse_xml`].

use std::collections::BTreeMap;
use std::sync::OnceLock;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// The longest template text the simulator parses; longer ones answer a parse error.
pub(crate) const TEMPLATE_LEN_MAX: usize = 64 * 1024;
/// The most attributes one template keeps.
pub(crate) const ATTRS_MAX: usize = 512;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Attr {
    Single(String, String),
    Vector(String, BTreeMap<String, String>),
}

impl Attr {
    pub(crate) fn name(&self) -> &str {
        match self {
            Attr::Single(n, _) | Attr::Vector(n, _) => n,
        }
    }
}

/// A parsed template: the attributes in multimap order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Body {
    attrs: Vec<Attr>,
    /// The body in template syntax, made when first asked for and dropped by any change
    /// (the world's snapshot asks for every body at every step of a run).
    text: OnceLock<String>,
}

/// Two bodies are equal when their attributes are.
impl PartialEq for Body {
    fn eq(&self, other: &Self) -> bool {
        self.attrs == other.attrs
    }
}

impl Eq for Body {}

impl Body {
    pub(crate) fn attrs(&self) -> &[Attr] {
        &self.attrs
    }

    /// Adds `attr` after every attribute whose name sorts before or equal to it.
    pub(crate) fn set(&mut self, attr: Attr) {
        self.text.take();
        let at = self.attrs.partition_point(|a| a.name() <= attr.name());
        self.attrs.insert(at, attr);
    }

    /// Replaces every attribute called `name` with one single attribute.
    pub(crate) fn replace(&mut self, name: &str, value: impl Into<String>) {
        self.erase(name);
        self.set(Attr::Single(name.into(), value.into()));
    }

    /// The first single attribute called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find_map(|a| match a {
            Attr::Single(n, v) if n == name => Some(v.as_str()),
            _ => None,
        })
    }

    /// Every vector attribute called `name`.
    pub(crate) fn vectors<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Iterator<Item = &'a BTreeMap<String, String>> + 'a {
        self.attrs.iter().filter_map(move |a| match a {
            Attr::Vector(n, v) if n == name => Some(v),
            _ => None,
        })
    }

    /// Removes every attribute called `name`, answering them.
    pub(crate) fn erase(&mut self, name: &str) -> Vec<Attr> {
        self.text.take();
        let (gone, kept) = std::mem::take(&mut self.attrs)
            .into_iter()
            .partition(|a| a.name() == name);
        self.attrs = kept;
        gone
    }

    /// `Template::merge`: every name `from` has is replaced by `from`'s attributes of
    /// that name (empty vectors are dropped).
    pub(crate) fn merge(&mut self, from: &Body) {
        for a in &from.attrs {
            self.erase(a.name());
        }
        for a in &from.attrs {
            if matches!(a, Attr::Vector(_, v) if v.is_empty()) {
                continue;
            }
            self.set(a.clone());
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.attrs.is_empty()
    }

    /// The body in template syntax, one attribute per line, quoted values.
    pub(crate) fn to_text(&self) -> String {
        self.text.get_or_init(|| render(&self.attrs)).clone()
    }
}

/// `attrs` in template syntax: `NAME = "value"` or `NAME = [ K = "v", ... ]`, one per
/// line, with `"` in values escaped.
fn render(attrs: &[Attr]) -> String {
    let mut out = String::new();
    for a in attrs {
        match a {
            Attr::Single(n, v) => {
                out.push_str(n);
                out.push_str(" = \"");
                push_quoted(&mut out, v);
                out.push_str("\"\n");
            }
            Attr::Vector(n, v) => {
                out.push_str(n);
                out.push_str(" = [ ");
                for (i, (k, v)) in v.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(k);
                    out.push_str(" = \"");
                    push_quoted(&mut out, v);
                    out.push('"');
                }
                out.push_str(" ]\n");
            }
        }
    }
    out
}

fn push_quoted(out: &mut String, v: &str) {
    for c in v.chars() {
        if c == '"' {
            out.push('\\');
        }
        out.push(c);
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Var(String),
    Equal,
    EqualEmpty,
    Comma,
    OBracket,
    CBracket,
    Str(String),
    /// A value holding `]]>`: the grammar aborts on it.
    CData,
    /// A character no rule matches.
    Other,
}

/// A token with its line and columns, as the flex location tracking counts them.
struct Located {
    tok: Tok,
    line: usize,
    first_col: usize,
    last_col: usize,
}

fn is_var(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

fn lex(text: &str) -> Vec<Located> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0usize;
    let mut line = 1usize;
    let mut col = 0usize;
    let mut value_state = false;
    while i < chars.len() {
        let start = i;
        let start_line = line;
        let tok: Option<Tok>;
        let c = chars[i];
        if value_state {
            value_state = false;
            // `[blank]*\[[blank\n]*`
            let mut j = i;
            while j < chars.len() && is_blank(chars[j]) {
                j += 1;
            }
            if j < chars.len() && chars[j] == '[' {
                j += 1;
                while j < chars.len() && (is_blank(chars[j]) || chars[j] == '\n') {
                    j += 1;
                }
                i = j;
                tok = Some(Tok::OBracket);
            } else if c == '"' {
                let mut j = i + 1;
                let mut s = String::new();
                let mut closed = false;
                while j < chars.len() {
                    if chars[j] == '\\' && chars.get(j + 1) == Some(&'"') {
                        s.push('"');
                        j += 2;
                        continue;
                    }
                    if chars[j] == '"' {
                        closed = true;
                        break;
                    }
                    s.push(chars[j]);
                    j += 1;
                }
                if closed {
                    i = j + 1;
                    tok = Some(if s.contains("]]>") {
                        Tok::CData
                    } else {
                        Tok::Str(s)
                    });
                } else {
                    i += 1;
                    tok = Some(Tok::Other);
                }
            } else {
                let mut j = i;
                let mut s = String::new();
                while j < chars.len()
                    && !matches!(chars[j], '=' | '#' | ' ' | '\t' | '\n' | ',' | '[' | ']')
                {
                    s.push(chars[j]);
                    j += 1;
                }
                if j == i {
                    // Nothing a value rule matches: lex it in the initial state.
                    continue;
                }
                i = j;
                tok = Some(if s.contains("]]>") {
                    Tok::CData
                } else {
                    Tok::Str(s)
                });
            }
        } else if c == '#' || (is_blank(c) && rest_is_comment(&chars, i)) {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            i += 1;
            tok = None;
        } else if is_blank(c) || c == '\n' {
            // Blanks before `=`, `,` and `]` belong to those tokens.
            let mut j = i;
            while j < chars.len() && (is_blank(chars[j]) || chars[j] == '\n') {
                j += 1;
            }
            match chars.get(j) {
                Some('=') if chars[i..j].iter().all(|c| is_blank(*c)) => {
                    let (t, end) = equal(&chars, j);
                    value_state = t == Tok::Equal;
                    i = end;
                    tok = Some(t);
                }
                Some(',') => {
                    i = skip_ws(&chars, j + 1);
                    tok = Some(Tok::Comma);
                }
                Some(']') => {
                    i = skip_ws(&chars, j + 1);
                    tok = Some(Tok::CBracket);
                }
                _ => {
                    i = j;
                    tok = None;
                }
            }
        } else if c == '=' {
            let (t, end) = equal(&chars, i);
            value_state = t == Tok::Equal;
            i = end;
            tok = Some(t);
        } else if c == ',' {
            i = skip_ws(&chars, i + 1);
            tok = Some(Tok::Comma);
        } else if c == ']' {
            i = skip_ws(&chars, i + 1);
            tok = Some(Tok::CBracket);
        } else if is_var(c) {
            let mut j = i;
            while j < chars.len() && is_var(chars[j]) {
                j += 1;
            }
            tok = Some(Tok::Var(chars[i..j].iter().collect()));
            i = j;
        } else {
            i += 1;
            tok = Some(Tok::Other);
        }
        let len = i - start;
        let newlines = chars[start..i.min(chars.len())]
            .iter()
            .filter(|c| **c == '\n')
            .count();
        line += newlines;
        let first_col = col;
        col += len;
        if let Some(tok) = tok {
            out.push(Located {
                tok,
                line: if newlines > 0 { line } else { start_line },
                first_col,
                last_col: col,
            });
        }
    }
    out
}

fn rest_is_comment(chars: &[char], mut i: usize) -> bool {
    while i < chars.len() && is_blank(chars[i]) {
        i += 1;
    }
    chars.get(i) == Some(&'#')
}

fn skip_ws(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && (is_blank(chars[i]) || chars[i] == '\n') {
        i += 1;
    }
    i
}

/// `[blank]*=[blank]*` or, followed by a newline, `EQUAL_EMPTY`.
fn equal(chars: &[char], eq: usize) -> (Tok, usize) {
    let mut j = eq + 1;
    while j < chars.len() && is_blank(chars[j]) {
        j += 1;
    }
    if chars.get(j) == Some(&'\n') || j >= chars.len() {
        (Tok::EqualEmpty, (j + 1).min(chars.len()))
    } else {
        (Tok::Equal, j)
    }
}

/// What `Template::parse_str_or_xml` answers for XML it cannot read.
pub(crate) const XML_MALFORMED: &str = "Parse error: XML Template malformed.";

/// Parses `text` as OpenNebula does (`Template::parse_str_or_xml`): the XML form when
/// its first character is `<`, template syntax otherwise, answering `Parse error: ...`
/// on an error. A parsed template has the trailing blanks of its `NAME` trimmed
/// (`Template::trim_name`).
pub(crate) fn parse(text: &str) -> Result<Body, String> {
    if text.len() > TEMPLATE_LEN_MAX {
        return Err("Parse error: template too long".into());
    }
    let mut body = if text.starts_with('<') {
        parse_xml(text).ok_or_else(|| XML_MALFORMED.to_string())?
    } else {
        parse_syntax(text)?
    };
    if body.attrs.len() > ATTRS_MAX {
        return Err("Parse error: too many attributes".into());
    }
    trim_name(&mut body);
    Ok(body)
}

/// `Template::trim("NAME")`: the first single `NAME`, without its trailing blanks,
/// replaces every `NAME`; nothing happens when it is missing or empty.
fn trim_name(body: &mut Body) {
    let Some(name) = body.get("NAME").filter(|n| !n.is_empty()) else {
        return;
    };
    let trimmed = name
        .trim_end_matches([' ', '\x0c', '\n', '\r', '\t', '\x0b'])
        .to_string();
    body.replace("NAME", trimmed);
}

/// The `Attribute` constructor: the name upper-cased, and `ONE_` put before a name
/// that does not start with a letter or `_`, or starts with `XML`.
fn attr_name(name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    let first_ok = name
        .bytes()
        .next()
        .is_none_or(|c| c.is_ascii_alphabetic() || c == b'_');
    if !first_ok || name.starts_with("XML") {
        format!("ONE_{upper}")
    } else {
        upper
    }
}

/// Template syntax (`template_syntax.y`).
fn parse_syntax(text: &str) -> Result<Body, String> {
    let toks = lex(text);
    let mut body = Body::default();
    let mut i = 0;
    let err = |t: Option<&Located>| {
        let (line, a, b) = t.map_or((1, 0, 0), |t| (t.line, t.first_col, t.last_col));
        Err(format!(
            "Parse error: syntax error at line {line}, columns {a}:{b}"
        ))
    };
    while i < toks.len() {
        let Tok::Var(name) = &toks[i].tok else {
            return err(toks.get(i));
        };
        let name = attr_name(name);
        match toks.get(i + 1).map(|t| &t.tok) {
            Some(Tok::EqualEmpty) => {
                body.set(Attr::Single(name, String::new()));
                i += 2;
            }
            Some(Tok::Equal) => match toks.get(i + 2).map(|t| &t.tok) {
                Some(Tok::Str(v)) => {
                    body.set(Attr::Single(name, v.clone()));
                    i += 3;
                }
                Some(Tok::OBracket) => {
                    let mut map = BTreeMap::new();
                    let mut j = i + 3;
                    if toks.get(j).map(|t| &t.tok) == Some(&Tok::CBracket) {
                        body.set(Attr::Vector(name, map));
                        i = j + 1;
                        continue;
                    }
                    loop {
                        match (
                            toks.get(j).map(|t| &t.tok),
                            toks.get(j + 1).map(|t| &t.tok),
                            toks.get(j + 2).map(|t| &t.tok),
                        ) {
                            (Some(Tok::Var(k)), Some(Tok::Equal), Some(Tok::Str(v))) => {
                                map.entry(k.to_ascii_uppercase())
                                    .or_insert_with(|| v.clone());
                                j += 3;
                            }
                            (Some(Tok::Var(_)), Some(Tok::Equal), _) => return err(toks.get(j + 2)),
                            (Some(Tok::Var(_)), _, _) => return err(toks.get(j + 1)),
                            _ => return err(toks.get(j)),
                        }
                        match toks.get(j).map(|t| &t.tok) {
                            Some(Tok::Comma) => j += 1,
                            Some(Tok::CBracket) => break,
                            _ => return err(toks.get(j)),
                        }
                    }
                    body.set(Attr::Vector(name, map));
                    i = j + 1;
                }
                _ => return err(toks.get(i + 2)),
            },
            _ => return err(toks.get(i + 1)),
        }
        if body.attrs.len() > ATTRS_MAX {
            return Err("Parse error: too many attributes".into());
        }
    }
    Ok(body)
}

/// A child node of an element as libxml2 builds the tree: adjacent character data and
/// references make one text node, adjacent CDATA sections one CDATA node; comments and
/// processing instructions are nodes of their own.
enum Kid {
    Text(String),
    CData(String),
    /// An element, with the content of its first child when that is text or CDATA.
    Elem(String, Option<String>),
    Other,
}

/// An open element the parse keeps: the attribute elements (depth 2) and their
/// children (depth 3). Deeper elements only count.
struct Frame {
    name: String,
    kids: Vec<Kid>,
}

impl Frame {
    fn add_text(&mut self, s: &str, cdata: bool) {
        match (self.kids.last_mut(), cdata) {
            (Some(Kid::Text(t)), false) | (Some(Kid::CData(t)), true) => t.push_str(s),
            _ => self.kids.push(if cdata {
                Kid::CData(s.to_string())
            } else {
                Kid::Text(s.to_string())
            }),
        }
    }

    /// The content of the first child, when it is text or CDATA.
    fn first_value(&self) -> Option<String> {
        match self.kids.first() {
            Some(Kid::Text(t) | Kid::CData(t)) => Some(t.clone()),
            _ => None,
        }
    }

    /// `Template::single_xml_att`, then `vector_xml_att`: one text or CDATA child makes
    /// a single attribute; otherwise, element children make a vector attribute of those
    /// whose first child is text or CDATA (names kept as they are, the last of a name
    /// wins); anything else is no attribute.
    fn attr(self) -> Option<Attr> {
        let name = attr_name(&self.name);
        if let [Kid::Text(v) | Kid::CData(v)] = self.kids.as_slice() {
            return Some(Attr::Single(name, v.clone()));
        }
        if !self.kids.iter().any(|k| matches!(k, Kid::Elem(..))) {
            return None;
        }
        let mut map = BTreeMap::new();
        for k in self.kids {
            if let Kid::Elem(key, Some(v)) = k {
                map.insert(key, v);
            }
        }
        Some(Attr::Vector(name, map))
    }
}

/// An XML name as libxml2 takes it (ASCII rules; any other character is allowed).
fn xml_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':' || !c.is_ascii())
        && chars.all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '.' | '-') || !c.is_ascii()
        })
}

/// A start tag's name, if it and its attributes are well-formed (the attributes
/// themselves are ignored).
fn start_name(e: &BytesStart<'_>) -> Option<String> {
    let name = e.name().as_ref().to_string();
    if !xml_name_ok(&name) {
        return None;
    }
    for a in e.attributes() {
        let a = a.ok()?;
        if !xml_name_ok(a.key.as_ref()) || a.value.contains('<') {
            return None;
        }
        a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .ok()?;
    }
    Some(name)
}

/// `Template::from_xml`: `None` where `xmlParseMemory` finds the document is not
/// well-formed or has no root element. The root's name does not matter; each element
/// child of it becomes an attribute (see [`Frame::attr`]); text, comments and
/// processing instructions directly under the root are skipped.
pub(crate) fn parse_xml(text: &str) -> Option<Body> {
    let mut reader = Reader::from_str(text);
    let config = reader.config_mut();
    config.check_comments = true;
    config.check_end_names = true;
    let mut body = Body::default();
    // Open elements below the root, up to depth 3, and how deep the parse is.
    let mut frames: Vec<Frame> = Vec::new();
    let mut depth = 0usize;
    let mut root_done = false;
    let mut first_event = true;
    loop {
        let event = reader.read_event().ok()?;
        let at_start = std::mem::replace(&mut first_event, false);
        match event {
            Event::Decl(d) => {
                if !at_start || d.version().is_err() {
                    return None;
                }
            }
            Event::DocType(_) => {
                if depth > 0 || root_done {
                    return None;
                }
            }
            // "Extra content at the end of the document".
            Event::Start(_) | Event::Empty(_) if root_done => return None,
            Event::Start(e) => {
                let name = start_name(&e)?;
                open(&mut frames, depth, name);
                depth += 1;
            }
            Event::Empty(e) => {
                let name = start_name(&e)?;
                open(&mut frames, depth, name);
                depth += 1;
                close(&mut frames, &mut body, depth, &mut root_done);
                depth -= 1;
            }
            Event::End(_) => {
                if depth == 0 {
                    return None;
                }
                close(&mut frames, &mut body, depth, &mut root_done);
                depth -= 1;
            }
            Event::Text(t) => {
                if depth == 0 {
                    if !t.bytes().all(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n')) {
                        return None;
                    }
                } else {
                    if t.contains("]]>") {
                        return None;
                    }
                    if let Some(f) = frame_at(&mut frames, depth) {
                        f.add_text(&t.xml10_content(), false);
                    }
                }
            }
            Event::GeneralRef(r) => {
                let c = match r.resolve_char_ref().ok()? {
                    Some(c) => c.to_string(),
                    None => quick_xml::escape::resolve_predefined_entity(&r)?.to_string(),
                };
                if depth == 0 {
                    return None;
                }
                if let Some(f) = frame_at(&mut frames, depth) {
                    f.add_text(&c, false);
                }
            }
            Event::CData(t) => {
                if depth == 0 {
                    return None;
                }
                if let Some(f) = frame_at(&mut frames, depth) {
                    f.add_text(&t.xml10_content(), true);
                }
            }
            Event::Comment(_) | Event::PI(_) => {
                if let Some(f) = frame_at(&mut frames, depth) {
                    f.kids.push(Kid::Other);
                }
            }
            Event::Eof => {
                return (depth == 0 && root_done).then_some(body);
            }
        }
    }
}

/// The kept frame of the element open at `depth` (the root, depth 1, keeps none).
fn frame_at(frames: &mut [Frame], depth: usize) -> Option<&mut Frame> {
    if (2..=3).contains(&depth) {
        frames.get_mut(depth - 2)
    } else {
        None
    }
}

/// An element opens inside the one at `depth`.
fn open(frames: &mut Vec<Frame>, depth: usize, name: String) {
    match depth {
        1 | 2 => frames.push(Frame {
            name,
            kids: Vec::new(),
        }),
        // An element below an attribute's child: that child's first child is not text.
        3 => {
            if let Some(f) = frame_at(frames, depth) {
                f.kids.push(Kid::Other);
            }
        }
        _ => {}
    }
}

/// The element open at `depth` closes.
fn close(frames: &mut Vec<Frame>, body: &mut Body, depth: usize, root_done: &mut bool) {
    match depth {
        1 => *root_done = true,
        2 => {
            if let Some(attr) = frames.pop().and_then(Frame::attr) {
                body.set(attr);
            }
        }
        3 => {
            if let Some(f) = frames.pop() {
                let first = f.first_value();
                if let Some(parent) = frames.last_mut() {
                    parent.kids.push(Kid::Elem(f.name, first));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_singles_vectors_comments_and_unquoted_values() {
        let b = parse(
            "# a comment\nname = \"web\"\nCPU=1\nMEMORY = 2048\nDISK = [ IMAGE = \"ubuntu\", size = 10 ]\nEMPTY =\nNIC=[NETWORK_ID=\"0\"]\n",
        )
        .unwrap_or_default();
        assert_eq!(b.get("NAME"), Some("web"));
        assert_eq!(b.get("CPU"), Some("1"));
        assert_eq!(b.get("MEMORY"), Some("2048"));
        assert_eq!(b.get("EMPTY"), Some(""));
        let disk = b.vectors("DISK").next().cloned().unwrap_or_default();
        assert_eq!(disk.get("IMAGE").map(String::as_str), Some("ubuntu"));
        assert_eq!(disk.get("SIZE").map(String::as_str), Some("10"));
        let names: Vec<&str> = b.attrs().iter().map(Attr::name).collect();
        assert_eq!(names, vec!["CPU", "DISK", "EMPTY", "MEMORY", "NAME", "NIC"]);
    }

    #[test]
    fn a_syntax_error_names_its_line() {
        let e = parse("A = 1\nB = [ X = 1\nC = 2").err().unwrap_or_default();
        assert!(e.starts_with("Parse error: syntax error at line "), "{e}");
        let e = parse("A = 1\n= 2\n").err().unwrap_or_default();
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn quoted_values_keep_escaped_quotes_and_render_back() {
        let b = parse("A = \"say \\\"hi\\\"\"\n").unwrap_or_default();
        assert_eq!(b.get("A"), Some("say \"hi\""));
        assert_eq!(parse(&b.to_text()).unwrap_or_default(), b);
    }

    #[test]
    fn any_input_parses_or_fails_without_panicking() {
        let pieces = [
            "A", " ", "=", "\"", "[", "]", ",", "\n", "#", "x y", "]]>", "\\\"", "\t", "é",
        ];
        let mut n = 0u64;
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    for d in pieces {
                        let text = format!("{a}{b}{c}{d}");
                        n += u64::from(parse(&text).is_ok());
                    }
                }
            }
        }
        assert!(n > 0);
    }

    fn xml(text: &str) -> Result<Body, String> {
        parse(text)
    }

    #[test]
    fn xml_form_as_pyone_sends_it() {
        let b = xml(
            "<TEMPLATE><CPU><![CDATA[1]]></CPU><DISK><IMAGE_ID><![CDATA[0]]></IMAGE_ID></DISK>\
             <DISK><IMAGE_ID><![CDATA[1]]></IMAGE_ID></DISK><L><![CDATA[a<b&c]]></L>\
             <NAME><![CDATA[web]]></NAME></TEMPLATE>",
        )
        .unwrap_or_default();
        assert_eq!(b.get("CPU"), Some("1"));
        assert_eq!(b.get("L"), Some("a<b&c"));
        assert_eq!(b.get("NAME"), Some("web"));
        let disks: Vec<&str> = b
            .vectors("DISK")
            .filter_map(|d| d.get("IMAGE_ID").map(String::as_str))
            .collect();
        assert_eq!(disks, ["0", "1"]);
        let names: Vec<&str> = b.attrs().iter().map(Attr::name).collect();
        assert_eq!(names, ["CPU", "DISK", "DISK", "L", "NAME"]);
    }

    #[test]
    fn xml_form_follows_rebuild_attributes() {
        let b = xml(
            "<?xml version=\"1.0\"?>\n<!-- c --><ANY a=\"1\">\n  <cpu>2</cpu>\n  <memory>a &amp; b&#x21;</memory>\n  \
             <DISK>\n    <image_id>7</image_id>\n    <SIZE>1<!-- c -->2</SIZE>\n    <SIZE>3</SIZE>\n    \
             <DEEP><X>1</X></DEEP>\n    <EMPTY/>\n  </DISK>\n  <NIC/>\n  <MIXED>a<![CDATA[b]]></MIXED>\n  \
             <CD><![CDATA[a]]><![CDATA[b]]></CD>\n  <BLANK> </BLANK>\n  <NONE><![CDATA[]]></NONE>\n  \
             <XMLA>x</XMLA><_u>u</_u>\n  <NAME>web \t\n</NAME>\n</ANY>\n<?pi x?>\n",
        )
        .unwrap_or_default();
        assert_eq!(b.get("CPU"), Some("2"), "names are upper-cased");
        assert_eq!(b.get("MEMORY"), Some("a & b!"), "references are text");
        let disk = b.vectors("DISK").next().cloned().unwrap_or_default();
        assert_eq!(
            disk.into_iter().collect::<Vec<_>>(),
            [
                ("SIZE".to_string(), "3".to_string()),
                ("image_id".to_string(), "7".to_string())
            ],
            "vector keys keep their case, the last one of a name wins, keys whose first \
             child is not text are dropped"
        );
        assert!(b.get("NIC").is_none() && b.vectors("NIC").next().is_none());
        assert!(b.get("MIXED").is_none(), "text then CDATA is two nodes");
        assert_eq!(
            b.get("CD"),
            Some("ab"),
            "adjacent CDATA sections are one node"
        );
        assert_eq!(b.get("BLANK"), Some(" "));
        assert_eq!(b.get("NONE"), Some(""));
        assert_eq!(b.get("ONE_XMLA"), Some("x"));
        assert_eq!(b.get("_U"), Some("u"));
        assert_eq!(b.get("NAME"), Some("web"), "NAME is trimmed");
        assert_eq!(
            xml("<T/>").map(|b| b.is_empty()),
            Ok(true),
            "an empty root is an empty template"
        );
    }

    #[test]
    fn malformed_xml_answers_the_oned_message() {
        for bad in [
            "<",
            "<T>",
            "<T><A>1</T>",
            "<T><A>1</B></T>",
            "<T></T><U/>",
            "<T></T>x",
            "<!-- only a comment -->",
            "<T><A>&nbsp;</A></T>",
            "<T><A>a & b</A></T>",
            "<T><A x=1>1</A></T>",
            "<T><A x=\"1\" x=\"2\">1</A></T>",
            "<T><1A>1</1A></T>",
            "<T><A>]]></A></T>",
            "<T><!-- a -- b --></T>",
            "<T><?xml version=\"1.0\"?></T>",
            "<T></T>]]>",
        ] {
            assert_eq!(xml(bad), Err(XML_MALFORMED.to_string()), "{bad}");
        }
        // Only a `<` first makes it XML.
        let e = xml(" <T><A>1</A></T>").err().unwrap_or_default();
        assert!(e.starts_with("Parse error: syntax error"), "{e}");
    }

    #[test]
    fn template_syntax_names_follow_the_attribute_constructor() {
        let b = parse("1A = x\nXMLRPC = y\nxmlrpc = z\nNAME = \"web  \"\n").unwrap_or_default();
        assert_eq!(b.get("ONE_1A"), Some("x"));
        assert_eq!(b.get("ONE_XMLRPC"), Some("y"));
        assert_eq!(b.get("XMLRPC"), Some("z"));
        assert_eq!(b.get("NAME"), Some("web"));
    }

    #[test]
    fn any_xml_parses_or_fails_without_panicking() {
        let pieces = [
            "<T>",
            "</T>",
            "<A>",
            "</A>",
            "<B/>",
            "x",
            "&amp;",
            "&#0;",
            "<![CDATA[c]]>",
            "<!--c-->",
            "<?p?>",
            " ",
            "é",
        ];
        let mut n = 0u64;
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    for d in pieces {
                        let text = format!("<T>{a}{b}{c}{d}</T>");
                        n += u64::from(parse(&text).is_ok());
                    }
                }
            }
        }
        assert!(n > 0);
    }
}
