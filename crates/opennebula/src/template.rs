//! OpenNebula's template syntax: what `one.template.allocate`, `one.image.allocate` and
//! `one.template.instantiate` take, and how flightdeck renders a `TEMPLATE` element it
//! read back, so that spec content and observed content compare as text.
//!
//! ```text
//! CPU = "1"
//! DISK = [ IMAGE = "ubuntu", SIZE = "10240" ]
//! ```
//!
//! Guarantees:
//! - [`Template::render`] writes one attribute per line, in order, every value quoted,
//!   `"` and `\` escaped with a backslash, a vector on one line as
//!   `KEY = [ A = "x", B = "y" ]`. The same template always renders to the same text,
//!   so a hash of the text is stable.
//! - [`parse`] reads what [`Template::render`] writes back into the same template, and
//!   also OpenNebula's looser forms: unquoted values, `#` comments, vectors across lines,
//!   a trailing comma in a vector. Attribute names are upper-cased, as OpenNebula does.
//! - [`parse`] is bounded ([`ATTRIBUTES_MAX`], [`TEXT_MAX_BYTES`]) and never panics; an
//!   error names the line and what was expected there.

use std::fmt;

/// The most attributes (single or vector, plus vector members) one template may hold.
pub const ATTRIBUTES_MAX: usize = 10_000;
/// The longest template text [`parse`] reads.
pub const TEXT_MAX_BYTES: usize = 1 << 20;

/// One attribute of a template: `KEY = "value"` or `KEY = [ A = "x", ... ]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attribute {
    Single {
        name: String,
        value: String,
    },
    /// The members of a vector, in order.
    Vector {
        name: String,
        members: Vec<(String, String)>,
    },
}

impl Attribute {
    pub fn name(&self) -> &str {
        match self {
            Attribute::Single { name, .. } | Attribute::Vector { name, .. } => name,
        }
    }
}

/// A template body: its attributes in document order. The same name may occur more than
/// once (several `DISK` or `NIC` vectors).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Template {
    pub attributes: Vec<Attribute>,
}

impl Template {
    /// Appends `KEY = "value"`.
    pub fn push_single(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.attributes.push(Attribute::Single {
            name: name.into(),
            value: value.into(),
        });
    }

    /// Appends `KEY = [ ... ]`.
    pub fn push_vector(&mut self, name: impl Into<String>, members: Vec<(String, String)>) {
        self.attributes.push(Attribute::Vector {
            name: name.into(),
            members,
        });
    }

    /// The value of the first single attribute `name`.
    pub fn single(&self, name: &str) -> Option<&str> {
        self.attributes.iter().find_map(|a| match a {
            Attribute::Single { name: n, value } if n == name => Some(value.as_str()),
            _ => None,
        })
    }

    /// The members of every vector attribute `name`, in order.
    pub fn vectors<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Iterator<Item = &'a [(String, String)]> + 'a {
        self.attributes.iter().filter_map(move |a| match a {
            Attribute::Vector { name: n, members } if n == name => Some(members.as_slice()),
            _ => None,
        })
    }

    /// This template without the attributes named in `names`.
    pub fn without(&self, names: &[&str]) -> Template {
        Template {
            attributes: self
                .attributes
                .iter()
                .filter(|a| !names.contains(&a.name()))
                .cloned()
                .collect(),
        }
    }

    /// This template in the order OpenNebula stores one (its `Template` is a multimap
    /// by name, a vector a map by key): attributes sorted by name, attributes of the same
    /// name in their order, vector members sorted by key. A spec's content and the
    /// `TEMPLATE` OpenNebula answers with compare equal in this form.
    pub fn canonical(&self) -> Template {
        let mut attributes = self.attributes.clone();
        // Stable: same-name attributes (several DISKs) keep their order.
        attributes.sort_by(|a, b| a.name().cmp(b.name()));
        for a in &mut attributes {
            if let Attribute::Vector { members, .. } = a {
                members.sort_by(|x, y| x.0.cmp(&y.0));
            }
        }
        Template { attributes }
    }

    /// The canonical text: one attribute per line, in order, each line ending in `\n`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for a in &self.attributes {
            match a {
                Attribute::Single { name, value } => {
                    out.push_str(name);
                    out.push_str(" = ");
                    out.push_str(&quote(value));
                }
                Attribute::Vector { name, members } => {
                    out.push_str(name);
                    out.push_str(" = [");
                    for (i, (k, v)) in members.iter().enumerate() {
                        out.push_str(if i == 0 { " " } else { ", " });
                        out.push_str(k);
                        out.push_str(" = ");
                        out.push_str(&quote(v));
                    }
                    out.push_str(" ]");
                }
            }
            out.push('\n');
        }
        out
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

/// `value` in double quotes, with `"` and `\` escaped by a backslash.
pub fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Why template text could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("template line {line}: {what}")]
pub struct TemplateError {
    /// 1-based.
    pub line: usize,
    pub what: String,
}

/// Reads template text. See the module documentation for what is accepted.
pub fn parse(text: &str) -> Result<Template, TemplateError> {
    if text.len() > TEXT_MAX_BYTES {
        return Err(TemplateError {
            line: 1,
            what: format!(
                "the template is {} bytes, more than the {TEXT_MAX_BYTES} allowed",
                text.len()
            ),
        });
    }
    let mut p = Parser {
        chars: text.chars().collect(),
        pos: 0,
        line: 1,
        count: 0,
    };
    let mut template = Template::default();
    loop {
        p.skip_blank(true);
        if p.peek().is_none() {
            return Ok(template);
        }
        let name = p.name()?;
        p.skip_blank(false);
        p.expect('=', "`=` after the attribute name")?;
        p.skip_blank(false);
        p.count_one()?;
        if p.peek() == Some('[') {
            p.pos += 1;
            let members = p.vector_members()?;
            template.push_vector(name, members);
        } else {
            let value = p.value()?;
            template.push_single(name, value);
        }
        p.skip_blank(false);
        match p.peek() {
            None | Some('\n') | Some('#') => {}
            Some(c) => return Err(p.error(format!("unexpected {c:?} after a value"))),
        }
    }
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    line: usize,
    count: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn error(&self, what: impl Into<String>) -> TemplateError {
        TemplateError {
            line: self.line,
            what: what.into(),
        }
    }

    fn count_one(&mut self) -> Result<(), TemplateError> {
        self.count += 1;
        if self.count > ATTRIBUTES_MAX {
            return Err(self.error(format!("more than {ATTRIBUTES_MAX} attributes")));
        }
        Ok(())
    }

    /// Skips spaces and tabs, `#` comments, and newlines too when `newlines`.
    fn skip_blank(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                '#' => {
                    while let Some(c) = self.peek() {
                        if c == '\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                '\n' if newlines => {
                    self.line += 1;
                    self.pos += 1;
                }
                c if c != '\n' && c.is_whitespace() => self.pos += 1,
                _ => return,
            }
        }
    }

    fn expect(&mut self, want: char, what: &str) -> Result<(), TemplateError> {
        match self.peek() {
            Some(c) if c == want => {
                self.pos += 1;
                Ok(())
            }
            Some(c) => Err(self.error(format!("expected {what}, found {c:?}"))),
            None => Err(self.error(format!("expected {what}, found the end"))),
        }
    }

    fn name(&mut self) -> Result<String, TemplateError> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                self.pos += 1;
            } else {
                break;
            }
        }
        if self.pos == start {
            return Err(match self.peek() {
                Some(c) => self.error(format!("expected an attribute name, found {c:?}")),
                None => self.error("expected an attribute name, found the end"),
            });
        }
        let name: String = self
            .chars
            .get(start..self.pos)
            .unwrap_or_default()
            .iter()
            .collect();
        Ok(name.to_ascii_uppercase())
    }

    /// A quoted value (escapes resolved) or an unquoted one (up to blank, `,` or `]`).
    fn value(&mut self) -> Result<String, TemplateError> {
        if self.peek() == Some('"') {
            self.pos += 1;
            let start_line = self.line;
            let mut out = String::new();
            loop {
                match self.peek() {
                    None => {
                        return Err(TemplateError {
                            line: start_line,
                            what: "a quoted value is not closed".into(),
                        });
                    }
                    Some('"') => {
                        self.pos += 1;
                        return Ok(out);
                    }
                    Some('\\') => {
                        self.pos += 1;
                        match self.peek() {
                            Some(c) => {
                                if c == '\n' {
                                    self.line += 1;
                                }
                                out.push(c);
                                self.pos += 1;
                            }
                            None => out.push('\\'),
                        }
                    }
                    Some(c) => {
                        if c == '\n' {
                            self.line += 1;
                        }
                        out.push(c);
                        self.pos += 1;
                    }
                }
            }
        }
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_whitespace() || matches!(c, ',' | ']' | '[' | '"') {
                break;
            }
            self.pos += 1;
        }
        if self.pos == start {
            return Err(match self.peek() {
                Some(c) => self.error(format!("expected a value, found {c:?}")),
                None => self.error("expected a value, found the end"),
            });
        }
        Ok(self
            .chars
            .get(start..self.pos)
            .unwrap_or_default()
            .iter()
            .collect())
    }

    /// `A = "x", B = y ]`, the opening `[` already read.
    fn vector_members(&mut self) -> Result<Vec<(String, String)>, TemplateError> {
        let mut members = Vec::new();
        loop {
            self.skip_blank(true);
            if self.peek() == Some(']') {
                self.pos += 1;
                return Ok(members);
            }
            let name = self.name()?;
            self.skip_blank(true);
            self.expect('=', "`=` after the member name")?;
            self.skip_blank(true);
            self.count_one()?;
            let value = self.value()?;
            members.push((name, value));
            self.skip_blank(true);
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(']') => {}
                Some(c) => return Err(self.error(format!("expected `,` or `]`, found {c:?}"))),
                None => return Err(self.error("a vector is not closed with `]`")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Template {
        let mut t = Template::default();
        t.push_single("CPU", "1");
        t.push_single("MEMORY", "2048");
        t.push_vector(
            "DISK",
            vec![
                ("IMAGE".into(), "ubuntu-24.04".into()),
                ("SIZE".into(), "10240".into()),
            ],
        );
        t.push_vector("NIC", vec![("NETWORK".into(), "nodes".into())]);
        t.push_vector("DISK", vec![("IMAGE".into(), "data".into())]);
        t.push_single("DESCRIPTION", r#"say "hi" \ bye"#);
        t
    }

    #[test]
    fn rendering_is_one_attribute_per_line_in_document_order() {
        assert_eq!(
            sample().render(),
            concat!(
                "CPU = \"1\"\n",
                "MEMORY = \"2048\"\n",
                "DISK = [ IMAGE = \"ubuntu-24.04\", SIZE = \"10240\" ]\n",
                "NIC = [ NETWORK = \"nodes\" ]\n",
                "DISK = [ IMAGE = \"data\" ]\n",
                "DESCRIPTION = \"say \\\"hi\\\" \\\\ bye\"\n",
            )
        );
    }

    #[test]
    fn rendered_text_parses_back_to_the_same_template() {
        let cases = [sample(), Template::default(), {
            let mut t = Template::default();
            t.push_single("EMPTY", "");
            t.push_single("MULTI", "line one\nline two");
            t.push_single("BACKSLASH_END", "ends in \\");
            t.push_single("QUOTES", "\"\"");
            t.push_vector("EMPTY_VECTOR", vec![]);
            t.push_single("UNICODE", "ñ — ✓");
            t
        }];
        for t in cases {
            let text = t.render();
            assert_eq!(parse(&text).as_ref(), Ok(&t), "round trip of {text:?}");
            assert_eq!(
                parse(&text).map(|p| p.render()).as_deref(),
                Ok(text.as_str()),
                "rendering is stable"
            );
        }
    }

    #[test]
    fn the_looser_forms_opennebula_accepts_are_read() {
        let text = "# a comment\ncpu = 1   # trailing\nMemory=\"512\"\nDISK = [\n  IMAGE_ID = 3,\n  TARGET = \"vda\",\n]\nCONTEXT = [ NETWORK = YES, URL = http://x/?a=b ]\n\n";
        let t = parse(text).expect("parses");
        assert_eq!(
            t.render(),
            concat!(
                "CPU = \"1\"\n",
                "MEMORY = \"512\"\n",
                "DISK = [ IMAGE_ID = \"3\", TARGET = \"vda\" ]\n",
                "CONTEXT = [ NETWORK = \"YES\", URL = \"http://x/?a=b\" ]\n",
            )
        );
    }

    #[test]
    fn bad_template_text_is_refused_with_its_line() {
        let cases = [
            ("CPU 1", 1, "expected `=`"),
            ("CPU = \"1", 1, "not closed"),
            (
                "A = \"1\"\nDISK = [ IMAGE = \"x\"",
                2,
                "not closed with `]`",
            ),
            ("A = \"1\"\n\n= \"2\"", 3, "expected an attribute name"),
            ("A = \"1\" B", 1, "after a value"),
            ("D = [ A = \"1\" B = \"2\" ]", 1, "expected `,` or `]`"),
            ("A =", 1, "expected a value"),
        ];
        for (text, line, what) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.what.contains(what), "{text:?}: {e}");
        }
    }

    #[test]
    fn spec_content_in_any_order_compares_equal_to_what_opennebula_stores() {
        let spec = parse(
            "MEMORY = 2048\nDISK = [ SIZE = 10, IMAGE = a ]\nCPU = 1\nDISK = [ IMAGE = b ]\n",
        )
        .expect("parses");
        let stored = parse("CPU = \"1\"\nDISK = [ IMAGE = \"a\", SIZE = \"10\" ]\nDISK = [ IMAGE = \"b\" ]\nMEMORY = \"2048\"\n")
            .expect("parses");
        assert_ne!(spec, stored);
        assert_eq!(spec.canonical(), stored.canonical());
        assert_eq!(
            stored.canonical(),
            stored,
            "OpenNebula's order is canonical already"
        );
    }

    #[test]
    fn lookups_find_singles_and_every_vector_of_a_name() {
        let t = sample();
        assert_eq!(t.single("MEMORY"), Some("2048"));
        assert_eq!(t.single("DISK"), None);
        assert_eq!(t.vectors("DISK").count(), 2);
        assert_eq!(t.without(&["DISK", "CPU"]).attributes.len(), 3);
    }
}
