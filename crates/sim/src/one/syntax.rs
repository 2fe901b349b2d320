//! OpenNebula's template syntax (`src/parsers/template_parser.l`, `template_syntax.y`):
//! `KEY = value` and `KEY = "quoted value"` lines, vector attributes
//! `DISK = [ IMAGE = "x", SIZE = "10" ]`, `KEY =` (empty), `#` comments. Names are
//! upper-cased. A template keeps its attributes the way `Template` does (a multimap by
//! name): sorted by name, attributes of the same name in the order they were set, and
//! that is the order the XML documents list them in.

use std::collections::BTreeMap;

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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Body {
    attrs: Vec<Attr>,
}

impl Body {
    pub(crate) fn attrs(&self) -> &[Attr] {
        &self.attrs
    }

    /// Adds `attr` after every attribute whose name sorts before or equal to it.
    pub(crate) fn set(&mut self, attr: Attr) {
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
        let mut out = String::new();
        for a in &self.attrs {
            match a {
                Attr::Single(n, v) => {
                    out.push_str(&format!("{n} = \"{}\"\n", quote(v)));
                }
                Attr::Vector(n, v) => {
                    let inner: Vec<String> = v
                        .iter()
                        .map(|(k, v)| format!("{k} = \"{}\"", quote(v)))
                        .collect();
                    out.push_str(&format!("{n} = [ {} ]\n", inner.join(", ")));
                }
            }
        }
        out
    }
}

fn quote(v: &str) -> String {
    v.replace('"', "\\\"")
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

/// Parses `text` as OpenNebula does, answering `Parse error: ...` like
/// `Template::parse_str_or_xml` on a syntax error.
pub(crate) fn parse(text: &str) -> Result<Body, String> {
    if text.len() > TEMPLATE_LEN_MAX {
        return Err("Parse error: template too long".into());
    }
    if text.starts_with('<') {
        // OpenNebula also takes the XML form; the simulator does not.
        return Err("Parse error: XML Template malformed.".into());
    }
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
        let name = name.to_ascii_uppercase();
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
}
