//! YAML frontmatter: a writer that can only produce one line per key, and a small, strict reader
//! for the subset of YAML that Markdown tools put between `---` fences.
//!
//! The writer double-quotes every free-text value and escapes line breaks, quotes, backslashes
//! and every non-printable character, so no title, body or source can ever start a line of its
//! own, close the fence or inject a key. The reader takes top-level `key: value` pairs whose
//! values are double- or single-quoted strings, plain scalars, flow lists (`[a, "b"]`), block
//! lists (`- a`) or block scalars (`|`, `>`); anything else (nested maps, anchors, multi-line
//! quoted strings, duplicate keys) is refused with the line that is wrong, never guessed at.

use std::fmt::Write as _;

/// A frontmatter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    List(Vec<String>),
}

impl Value {
    /// The value as text: strings as they are, numbers and booleans spelled out.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Value::Null | Value::List(_) => None,
            Value::Bool(b) => Some(b.to_string()),
            Value::Int(i) => Some(i.to_string()),
            Value::Str(s) => Some(s.clone()),
        }
    }
}

/// Why a frontmatter block could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("frontmatter line {line}: {reason}")]
pub struct FrontmatterError {
    pub line: usize,
    pub reason: String,
}

/// Parsed frontmatter: keys in the order they were written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frontmatter {
    pub entries: Vec<(String, Value)>,
}

impl Frontmatter {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A text value; `None` when absent or null.
    pub fn text(&self, key: &str) -> Option<String> {
        self.get(key).and_then(Value::as_text)
    }

    pub fn int(&self, key: &str) -> Option<i64> {
        match self.get(key)? {
            Value::Int(i) => Some(*i),
            Value::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.get(key)? {
            Value::Bool(b) => Some(*b),
            Value::Str(s) => match s.trim() {
                "true" | "yes" => Some(true),
                "false" | "no" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// A list; a single string is split on commas and whitespace (`tags: a, b` or `#a #b`).
    pub fn list(&self, key: &str) -> Vec<String> {
        match self.get(key) {
            Some(Value::List(items)) => items.clone(),
            Some(Value::Str(s)) => s
                .split(|c: char| c == ',' || c.is_whitespace())
                .map(|t| t.trim().trim_start_matches('#').to_string())
                .filter(|t| !t.is_empty())
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Writes `---`, one `key: value` line per entry, `---`, each line ending in `\n`.
pub fn write(entries: &[(&str, Value)]) -> String {
    let mut out = String::from("---\n");
    for (key, value) in entries {
        debug_assert!(is_key(key), "frontmatter keys are fixed identifiers");
        out.push_str(key);
        out.push_str(": ");
        write_value(&mut out, value);
        out.push('\n');
    }
    out.push_str("---\n");
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Str(s) => quote_into(out, s),
        Value::List(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push_str(", ");
                }
                quote_into(out, item);
            }
            out.push(']');
        }
    }
}

/// A YAML (and JSON) double-quoted scalar that always stays on one line.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    quote_into(&mut out, text);
    out
}

fn quote_into(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Characters YAML does not allow unescaped (non-printable), plus the line and paragraph
/// separators and the BOM, which some readers treat as line breaks or strip.
fn needs_escape(c: char) -> bool {
    let code = c as u32;
    code < 0x20
        || (0x7F..=0x9F).contains(&code)
        || matches!(code, 0x2028 | 0x2029 | 0xFEFF | 0xFFFE | 0xFFFF)
        || (0xD800..=0xDFFF).contains(&code)
}

/// Whether `key` is one [`write`] can write bare and [`parse`] reads back: letters, digits, `_`,
/// `-` and `.`, not starting with `-`.
pub fn is_key(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with('-')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Splits a page into its frontmatter text (between the fences, without them) and the rest.
/// `Ok(None)` when the page has no frontmatter; an opening fence that never closes is an error.
pub fn split(page: &str) -> Result<Option<(&str, &str)>, FrontmatterError> {
    let first_line_end = match page.find('\n') {
        Some(end) => end,
        None => return Ok(None),
    };
    if page[..first_line_end].trim_end() != "---" {
        return Ok(None);
    }
    let inner_start = first_line_end + 1;
    let mut position = inner_start;
    while position <= page.len() {
        let line_end = page[position..]
            .find('\n')
            .map(|e| position + e)
            .unwrap_or(page.len());
        let line = page[position..line_end].trim_end();
        if line == "---" || line == "..." {
            let rest_start = (line_end + 1).min(page.len());
            return Ok(Some((&page[inner_start..position], &page[rest_start..])));
        }
        if line_end == page.len() {
            break;
        }
        position = line_end + 1;
    }
    Err(FrontmatterError {
        line: 1,
        reason: "the opening `---` is never closed: add a `---` line after the last key".into(),
    })
}

/// Reads the text between the fences.
pub fn parse(text: &str) -> Result<Frontmatter, FrontmatterError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut entries: Vec<(String, Value)> = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let number = index + 1;
        let line = lines[index].trim_end_matches('\r');
        let error = |reason: &str| FrontmatterError {
            line: number,
            reason: reason.to_string(),
        };
        index += 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with(' ') || line.starts_with('\t') || line.starts_with('-') {
            return Err(error(
                "an indented line or list item without a key above it",
            ));
        }
        let Some(colon) = find_key_colon(line) else {
            return Err(error("expected `key: value`"));
        };
        let key = line[..colon].trim();
        // A key never starts with `-` (that is a list item), even behind a stray `\r`: the
        // writer could not write it back (fuzz/regressions/frontmatter/).
        let key = unquote_key(key)
            .filter(|key| !key.starts_with('-'))
            .ok_or_else(|| error("a key must be a plain word"))?;
        if entries.iter().any(|(k, _)| *k == key) {
            return Err(error(&format!("the key `{key}` appears twice")));
        }
        let raw = line[colon + 1..].trim();
        let value = if raw.is_empty() {
            // A block list, a nested map (refused) or an empty value.
            let mut items = Vec::new();
            while index < lines.len() {
                let next = lines[index].trim_end_matches('\r');
                if next.trim().is_empty() {
                    index += 1;
                    continue;
                }
                let trimmed = next.trim_start();
                if !(next.starts_with(' ') || next.starts_with('\t') || next.starts_with('-')) {
                    break;
                }
                let Some(item) = trimmed.strip_prefix('-') else {
                    return Err(FrontmatterError {
                        line: index + 1,
                        reason: format!(
                            "`{key}` holds a nested map, which cairn does not read; use a list or a single value"
                        ),
                    });
                };
                match scalar(item.trim(), index + 1)? {
                    Value::Str(s) => items.push(s),
                    Value::Int(i) => items.push(i.to_string()),
                    Value::Bool(b) => items.push(b.to_string()),
                    Value::Null => {}
                    Value::List(_) => {
                        return Err(FrontmatterError {
                            line: index + 1,
                            reason: "a list inside a list is not read".into(),
                        });
                    }
                }
                index += 1;
            }
            if items.is_empty() {
                Value::Null
            } else {
                Value::List(items)
            }
        } else if let Some(style) = raw.chars().next().filter(|c| *c == '|' || *c == '>') {
            let indicators = &raw[1..];
            if !indicators
                .chars()
                .all(|c| matches!(c, '+' | '-') || c.is_ascii_digit())
            {
                return Err(error("unreadable block scalar header"));
            }
            let mut block = Vec::new();
            while index < lines.len() {
                let next = lines[index].trim_end_matches('\r');
                if !next.is_empty() && !next.starts_with(' ') && !next.starts_with('\t') {
                    break;
                }
                block.push(next.trim());
                index += 1;
            }
            while block.last().is_some_and(|l| l.is_empty()) {
                block.pop();
            }
            let joined = if style == '|' {
                block.join("\n")
            } else {
                block.join(" ")
            };
            Value::Str(joined)
        } else {
            scalar(raw, number)?
        };
        entries.push((key, value));
    }
    Ok(Frontmatter { entries })
}

/// The colon that ends the key: the first `:` followed by a space or the end of the line,
/// outside quotes.
fn find_key_colon(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if (b == b'"' || b == b'\'') && i == 0 => quote = Some(b),
            None if b == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') => {
                return Some(i);
            }
            None => {}
        }
    }
    None
}

fn unquote_key(key: &str) -> Option<String> {
    // A lone quote is no quoted key: `\r':` reached here as `'` and the slice below panicked
    // (fuzz/regressions/frontmatter/).
    let inner = if key.len() >= 2
        && ((key.starts_with('"') && key.ends_with('"'))
            || (key.starts_with('\'') && key.ends_with('\'')))
    {
        &key[1..key.len().saturating_sub(1)]
    } else {
        key
    };
    (!inner.is_empty()
        && inner
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ' ')))
    .then(|| inner.to_string())
}

/// A one-line value: quoted string, flow list, or plain scalar.
fn scalar(raw: &str, line: usize) -> Result<Value, FrontmatterError> {
    let error = |reason: &str| FrontmatterError {
        line,
        reason: reason.to_string(),
    };
    if raw.starts_with('"') {
        let (text, rest) = double_quoted(raw, line)?;
        expect_end(rest, line)?;
        return Ok(Value::Str(text));
    }
    if raw.starts_with('\'') {
        let (text, rest) = single_quoted(raw, line)?;
        expect_end(rest, line)?;
        return Ok(Value::Str(text));
    }
    if raw.starts_with('[') {
        return flow_list(raw, line).map(Value::List);
    }
    if raw.starts_with('{') {
        return Err(error(
            "a nested map is not read; use a list or a single value",
        ));
    }
    if raw.starts_with('&') || raw.starts_with('*') || raw.starts_with('!') {
        return Err(error("anchors, aliases and tags are not read"));
    }
    let plain = match raw.find(" #") {
        Some(comment) => raw[..comment].trim_end(),
        None => raw,
    };
    Ok(match plain {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => match plain.parse::<i64>() {
            Ok(i) if !(plain.starts_with('+') || plain.starts_with('0') && plain.len() > 1) => {
                Value::Int(i)
            }
            _ => Value::Str(plain.to_string()),
        },
    })
}

fn expect_end(rest: &str, line: usize) -> Result<(), FrontmatterError> {
    let rest = rest.trim();
    if rest.is_empty() || rest.starts_with('#') {
        Ok(())
    } else {
        Err(FrontmatterError {
            line,
            reason: format!("unexpected text after the closing quote: {rest:?}"),
        })
    }
}

/// Reads a double-quoted scalar at the start of `raw`; returns the text and what follows.
fn double_quoted(raw: &str, line: usize) -> Result<(String, &str), FrontmatterError> {
    let error = |reason: String| FrontmatterError { line, reason };
    let mut out = String::new();
    let mut chars = raw.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &raw[i + 1..])),
            '\\' => {
                let Some((_, escape)) = chars.next() else {
                    break;
                };
                let mut hex = |digits: usize| -> Result<char, FrontmatterError> {
                    let mut code = 0u32;
                    for _ in 0..digits {
                        let digit = chars
                            .next()
                            .and_then(|(_, d)| d.to_digit(16))
                            .ok_or_else(|| error("a bad \\x, \\u or \\U escape".into()))?;
                        code = code * 16 + digit;
                    }
                    char::from_u32(code)
                        .ok_or_else(|| error(format!("escape \\u{code:X} is not a character")))
                };
                out.push(match escape {
                    '"' => '"',
                    '\\' => '\\',
                    '/' => '/',
                    'n' => '\n',
                    't' | '\t' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    'e' => '\u{1b}',
                    'f' => '\u{c}',
                    'v' => '\u{b}',
                    ' ' => ' ',
                    'N' => '\u{85}',
                    '_' => '\u{a0}',
                    'L' => '\u{2028}',
                    'P' => '\u{2029}',
                    'x' => hex(2)?,
                    'u' => hex(4)?,
                    'U' => hex(8)?,
                    other => return Err(error(format!("unknown escape \\{other}"))),
                });
            }
            c => out.push(c),
        }
    }
    Err(error(
        "a double-quoted value is not closed on its line (multi-line quoted values are not read)"
            .into(),
    ))
}

fn single_quoted(raw: &str, line: usize) -> Result<(String, &str), FrontmatterError> {
    let mut out = String::new();
    let bytes = raw.as_bytes();
    let mut i = 1;
    while i < raw.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            return Ok((out, &raw[i + 1..]));
        }
        let c = raw[i..].chars().next().expect("inside the string");
        out.push(c);
        i += c.len_utf8();
    }
    Err(FrontmatterError {
        line,
        reason: "a single-quoted value is not closed on its line".into(),
    })
}

fn flow_list(raw: &str, line: usize) -> Result<Vec<String>, FrontmatterError> {
    let error = |reason: &str| FrontmatterError {
        line,
        reason: reason.to_string(),
    };
    let mut items = Vec::new();
    let mut rest = raw[1..].trim_start();
    loop {
        if let Some(after) = rest.strip_prefix(']') {
            expect_end(after, line)?;
            return Ok(items);
        }
        let quoted = rest.starts_with('"') || rest.starts_with('\'');
        let (item, after) = if rest.starts_with('"') {
            double_quoted(rest, line)?
        } else if rest.starts_with('\'') {
            single_quoted(rest, line)?
        } else {
            let end = rest
                .find([',', ']'])
                .ok_or_else(|| error("a `[` list is not closed on its line"))?;
            (rest[..end].trim().to_string(), &rest[end..])
        };
        if !quoted && (item.starts_with('[') || item.starts_with('{')) {
            return Err(error("nested lists and maps are not read"));
        }
        if quoted || !item.is_empty() {
            items.push(item);
        }
        let after = after.trim_start();
        rest = match after.strip_prefix(',') {
            Some(next) => next.trim_start(),
            None if after.starts_with(']') => after,
            None => return Err(error("expected `,` or `]` in a list")),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(value: &str) -> String {
        let text = write(&[("title", Value::Str(value.to_string()))]);
        let (inner, rest) = split(&text).unwrap().unwrap();
        assert_eq!(rest, "");
        let parsed = parse(inner).unwrap();
        assert_eq!(parsed.entries.len(), 1, "{text}");
        parsed.text("title").unwrap()
    }

    #[test]
    fn hostile_values_cannot_inject_keys_or_close_the_fence() {
        for hostile in [
            "x\n---\ninjected: true",
            "a\"\nstatus: archived",
            "\\\"\n",
            "line\rbreak\u{2028}sep\u{85}nel",
            "'single' and \"double\" and # hash: colon",
            "- list item",
            "[not, a, list]",
            "{not: map}",
            "&anchor *alias !tag",
            "\u{1b}[2Jescape\u{7f}del\u{feff}bom",
            "",
            "null",
            "true",
            "42",
        ] {
            assert_eq!(round_trip(hostile), hostile, "{hostile:?}");
            let text = write(&[("title", Value::Str(hostile.to_string()))]);
            assert_eq!(text.lines().count(), 3, "one line per key: {text:?}");
        }
    }

    #[test]
    fn reads_what_markdown_tools_write() {
        let text = "title: Plain title: with colon\ntags: [a, \"b c\", 'd''e']\naliases:\n  - one\n  - \"two\"\ncount: 12\nzip: 0123\ndraft: false\nempty:\nnote: |\n  first\n  second\nfolded: >-\n  one\n  two\n# a comment\npermalink: notes/x # trailing comment\n";
        let fm = parse(text).unwrap();
        assert_eq!(fm.text("title").unwrap(), "Plain title: with colon");
        assert_eq!(fm.list("tags"), ["a", "b c", "d'e"]);
        assert_eq!(fm.list("aliases"), ["one", "two"]);
        assert_eq!(fm.int("count"), Some(12));
        assert_eq!(fm.text("zip").unwrap(), "0123");
        assert_eq!(fm.bool("draft"), Some(false));
        assert_eq!(fm.get("empty"), Some(&Value::Null));
        assert_eq!(fm.text("note").unwrap(), "first\nsecond");
        assert_eq!(fm.text("folded").unwrap(), "one two");
        assert_eq!(fm.text("permalink").unwrap(), "notes/x");
    }

    #[test]
    fn malformed_frontmatter_names_the_line() {
        let check = |text: &str, line: usize, needle: &str| {
            let error = parse(text).unwrap_err();
            assert_eq!(error.line, line, "{text:?}: {error}");
            assert!(error.to_string().contains(needle), "{error}");
        };
        check("a: 1\na: 2\n", 2, "twice");
        check("a: \"open\n", 1, "not closed");
        check("just text\n", 1, "expected `key: value`");
        check("a:\n  b: 1\n", 2, "nested map");
        check("a: {b: 1}\n", 1, "nested map");
        check("  - stray\n", 1, "without a key");
        check("a: \"x\" trailing\n", 1, "after the closing quote");
        check("a: [1, 2\n", 1, "not closed");
        check("\r--: x\n", 1, "plain word");
        check("\r':\n", 1, "plain word");
        check("\r\":\n", 1, "plain word");
        assert!(!is_key("--"));
        assert!(split("---\ntitle: x\nno close").is_err());
        assert_eq!(split("no frontmatter\n---\n").unwrap(), None);
    }

    proptest! {
        #[test]
        fn any_string_round_trips_on_one_line(value in any::<String>()) {
            let text = write(&[("title", Value::Str(value.clone())), ("tags", Value::List(vec![value.clone()]))]);
            prop_assert_eq!(text.lines().count(), 4);
            let (inner, _) = split(&text).unwrap().unwrap();
            let parsed = parse(inner).unwrap();
            prop_assert_eq!(parsed.text("title").unwrap(), value.clone());
            prop_assert_eq!(parsed.list("tags"), vec![value]);
        }
    }
}
