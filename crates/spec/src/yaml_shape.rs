//! A linear pre-scan of a spec's YAML before the parser sees it: nesting deeper than
//! [`NESTING_MAX`] and more than [`ALIASES_MAX`] aliases are refused at once, with the
//! line. The parser has limits of its own, but reaching them costs time that grows with
//! the square of the depth (an 80,000-deep file of 320 KB took 17 s to refuse).
//!
//! The scan knows quotes and comments; text inside block scalars is scanned as if it
//! were structure, which can only make it stricter for text that looks like 64 open
//! brackets in a row.

/// The deepest nesting of flow collections (`[`/`{`) a spec may have.
pub const NESTING_MAX: usize = 64;
/// The deepest block indentation (in columns) a spec may have.
pub const INDENT_MAX: usize = 512;
/// The most aliases (`*name`) a spec file may use.
pub const ALIASES_MAX: usize = 256;

/// The YAML tags a spec may carry: the core schema's scalar tags, which only say what the
/// field says already. Any other tag (`!custom`, `!!python/object`) is refused rather
/// than silently dropped.
pub const TAGS_KNOWN: [&str; 5] = ["!!str", "!!int", "!!float", "!!bool", "!!null"];

/// Where the text goes past a limit: `(line, column, why)`, both from 1.
pub fn check(text: &str) -> Result<(), (usize, usize, String)> {
    let (mut line, mut col) = (1usize, 0usize);
    let (mut depth, mut aliases) = (0usize, 0usize);
    let (mut single, mut double, mut comment, mut escaped) = (false, false, false, false);
    let mut at_line_start = true;
    let mut indent = 0usize;
    let mut prev = '\n';
    for (at, c) in text.char_indices() {
        col += 1;
        if c == '\n' {
            line += 1;
            col = 0;
            comment = false;
            at_line_start = true;
            indent = 0;
            prev = c;
            continue;
        }
        if at_line_start {
            if c == ' ' {
                indent += 1;
                if indent > INDENT_MAX {
                    return Err((
                        line,
                        col,
                        format!("indented deeper than {INDENT_MAX} columns"),
                    ));
                }
                prev = c;
                continue;
            }
            at_line_start = false;
        }
        if comment {
            continue;
        }
        if double {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => double = false,
                _ => {}
            }
            prev = c;
            continue;
        }
        if single {
            if c == '\'' {
                single = false;
            }
            prev = c;
            continue;
        }
        let token_start = prev.is_whitespace() || matches!(prev, '[' | '{' | ',' | ':');
        match c {
            '#' if prev.is_whitespace() => comment = true,
            '"' if token_start => double = true,
            '\'' if token_start => single = true,
            '[' | '{' => {
                depth += 1;
                if depth > NESTING_MAX {
                    return Err((
                        line,
                        col,
                        format!("nested deeper than {NESTING_MAX} levels"),
                    ));
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            '!' if token_start => {
                let tag = text[at..]
                    .split(|c: char| c.is_whitespace() || matches!(c, ',' | ']' | '}'))
                    .next()
                    .unwrap_or_default();
                if !TAGS_KNOWN.contains(&tag) {
                    return Err((
                        line,
                        col,
                        format!(
                            "YAML tag {:?} is not one flightdeck reads: a value's type comes from its field (only {} may be written)",
                            tag.chars().take(40).collect::<String>(),
                            TAGS_KNOWN.join(", ")
                        ),
                    ));
                }
            }
            '*' if token_start => {
                aliases += 1;
                if aliases > ALIASES_MAX {
                    return Err((line, col, format!("more than {ALIASES_MAX} aliases")));
                }
            }
            _ => {}
        }
        prev = c;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_specs_pass() {
        let text =
            "a: [1, {b: \"[[[[\"}, 'x[y']  # [[[[ not counted\nc:\n  - d: *anchor\n  - \"*not\"\n";
        assert_eq!(check(text), Ok(()));
    }

    #[test]
    fn deep_flow_nesting_is_refused_with_its_line() {
        let text = format!("a: 1\nspec: {}{}\n", "[".repeat(80_000), "]".repeat(80_000));
        let (line, col, why) = check(&text).expect_err("too deep");
        assert_eq!((line, col), (2, 6 + NESTING_MAX + 1), "{why}");
        assert!(why.contains("nested deeper"), "{why}");
    }

    #[test]
    fn unknown_tags_are_refused_and_core_scalar_tags_pass() {
        assert_eq!(check("a: !!str 1.30\nb: 'x!y'\nc: \"!z\"\n"), Ok(()));
        let (line, col, why) = check("a: 1\nreplicas: !custom 3\n").expect_err("tag");
        assert_eq!((line, col), (2, 11));
        assert!(why.contains("\"!custom\""), "{why}");
        assert!(check("a: [!!python/object:os.system x]\n").is_err());
    }

    #[test]
    fn deep_indentation_and_many_aliases_are_refused() {
        let text = format!("a:\n{}b: 1\n", " ".repeat(INDENT_MAX + 1));
        assert_eq!(check(&text).map_err(|e| e.0), Err(2));
        let text = format!("a: [{}]\n", vec!["*x"; ALIASES_MAX + 1].join(", "));
        let (_, _, why) = check(&text).expect_err("too many");
        assert!(why.contains("aliases"), "{why}");
    }
}
