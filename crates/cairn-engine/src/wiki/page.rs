//! One record as a Markdown page, and back.
//!
//! ```text
//! ---
//! id: 42                      every field of the record, one line each (frontmatter.rs)
//! title: "Queue backend"
//! …
//! ---
//!
//! # Queue backend             the title again, for reading (the frontmatter one is imported)
//!
//! Use Postgres for the queue. the body, verbatim
//!
//! <!-- cairn:generated … -->  everything below is written from the brain and not imported
//!
//! ## Links                    `[[path|title]]` per relation (supersession now; graph later)
//! ## History                  earlier versions: when, how, by whom, and the text they had
//! ```
//!
//! The body ends at the LAST marker line: the generated part never contains a bare marker line
//! (its quoted history lines are prefixed), so a body that itself contains the marker keeps it.

use super::frontmatter::{self, Frontmatter, FrontmatterError, Value};
use cairn_core::memory::Memory;
use cairn_store::HistoryRow;

/// The line that separates the editable page from what cairn generates below it.
pub const MARKER: &str = "<!-- cairn:generated — everything below this line comes from the brain; edits here are not imported -->";

/// A link from a page to another record's page. `relation` reads as "this record RELATION
/// target" (`superseded by`, `supersedes`; a knowledge graph adds `requires`, `affects`, …).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PageLink {
    pub relation: String,
    /// The target's page path without `.md`.
    pub target: String,
    pub label: String,
    pub id: i64,
}

/// An earlier version read back from a page's history section.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    pub version: i64,
    pub at: String,
    pub op: String,
    pub actor: String,
    pub body: Option<String>,
}

/// A page as read.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedPage {
    pub frontmatter: Frontmatter,
    /// The first `# ` heading, when the page has one.
    pub heading: Option<String>,
    pub body: String,
    pub history: Vec<HistoryEntry>,
    /// Whether the page had cairn's generated part (it was written by `export wiki`).
    pub generated: bool,
}

/// Why a page could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    #[error("not valid UTF-8 (first bad byte at offset {0}); re-encode the page as UTF-8")]
    NotUtf8(usize),
    #[error("malformed frontmatter: {0}")]
    Frontmatter(#[from] FrontmatterError),
}

/// The frontmatter of a record, every field, in a fixed order.
pub fn frontmatter_of(memory: &Memory) -> String {
    let text = |v: &Option<String>| match v {
        Some(s) => Value::Str(s.clone()),
        None => Value::Null,
    };
    let id = |v: Option<i64>| match v {
        Some(i) => Value::Int(i),
        None => Value::Null,
    };
    frontmatter::write(&[
        ("id", Value::Int(memory.id)),
        ("title", text(&memory.title)),
        ("type", Value::Str(memory.memory_type.to_string())),
        ("status", Value::Str(memory.status.to_string())),
        ("project", text(&memory.project)),
        ("scope", Value::Str(memory.scope.clone())),
        ("summary", text(&memory.summary)),
        ("tags", Value::List(memory.tags.clone())),
        ("importance", Value::Int(memory.importance.into())),
        ("confidence", Value::Str(memory.confidence.to_string())),
        ("trust", Value::Str(memory.trust.to_string())),
        ("trust_zone", Value::Str(memory.trust_zone.to_string())),
        ("sensitivity", Value::Str(memory.sensitivity.to_string())),
        ("source", text(&memory.source)),
        ("commit", text(&memory.commit)),
        ("review_at", text(&memory.review_at)),
        ("expires_at", text(&memory.expires_at)),
        ("pinned", Value::Bool(memory.pinned)),
        ("supersedes", id(memory.supersedes)),
        ("superseded_by", id(memory.superseded_by)),
        ("external_id", text(&memory.external_id)),
        ("created_at", Value::Str(memory.created_at.clone())),
        ("updated_at", Value::Str(memory.updated_at.clone())),
        ("valid_from", Value::Str(memory.valid_from.clone())),
        ("retired_at", text(&memory.retired_at)),
        ("last_accessed_at", text(&memory.last_accessed_at)),
        ("use_count", Value::Int(memory.use_count.into())),
        ("content_hash", Value::Str(memory.content_hash.clone())),
    ])
}

/// A link label that cannot break `[[target|label]]` syntax or a list line.
pub fn link_label(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '[' => '(',
            ']' => ')',
            '|' => '/',
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect()
}

/// The readable name of a record: its title, or `#ID TYPE` for an untitled one.
pub fn display_title(memory_type: impl std::fmt::Display, title: Option<&str>, id: i64) -> String {
    match title {
        Some(title) => link_label(title),
        None => format!("#{id} {memory_type}"),
    }
}

/// Renders a record's page.
pub fn render(memory: &Memory, history: &[HistoryRow], links: &[PageLink]) -> String {
    let mut page = frontmatter_of(memory);
    page.push_str("\n# ");
    page.push_str(&display_title(
        memory.memory_type,
        memory.title.as_deref(),
        memory.id,
    ));
    page.push_str("\n\n");
    page.push_str(&memory.body);
    page.push_str("\n\n");
    page.push_str(MARKER);
    page.push('\n');
    if memory.status != cairn_core::record::Status::Active {
        page.push_str(&format!(
            "\n**{}**{}\n",
            memory.status,
            match memory.status {
                cairn_core::record::Status::Archived => format!(
                    " — kept, not shown by recall; `cairn restore {}` brings it back",
                    memory.id
                ),
                _ => " — kept for history; recall answers with its successor".to_string(),
            }
        ));
    }
    if !links.is_empty() {
        page.push_str("\n## Links\n\n");
        for link in links {
            page.push_str(&format!(
                "- {} [[{}|{}]] (#{})\n",
                link.relation, link.target, link.label, link.id
            ));
        }
    }
    if !history.is_empty() {
        page.push_str("\n## History\n\n");
        for row in history {
            page.push_str(&format!(
                "- v{} · {} · {} by {}\n",
                row.version,
                one_line(&row.at),
                one_line(&row.op),
                one_line(&row.actor)
            ));
            if let Some(body) = row.snapshot.get("body").and_then(|b| b.as_str())
                && body != memory.body
            {
                for line in body.lines() {
                    if line.is_empty() {
                        page.push_str("  >\n");
                    } else {
                        page.push_str("  > ");
                        page.push_str(line);
                        page.push('\n');
                    }
                }
            }
        }
    }
    page
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r', '·'], " ")
}

/// Reads a page: frontmatter (when present), heading, body, and the history section.
pub fn parse(bytes: &[u8]) -> Result<ParsedPage, PageError> {
    let text = std::str::from_utf8(bytes).map_err(|e| PageError::NotUtf8(e.valid_up_to()))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (frontmatter, rest) = match frontmatter::split(text)? {
        Some((inner, rest)) => (frontmatter::parse(inner)?, rest),
        None => (Frontmatter::default(), text),
    };
    let lines: Vec<&str> = rest.split('\n').collect();
    let mut start = 0;
    while start < lines.len() && lines[start].trim().is_empty() {
        start += 1;
    }
    let mut heading = None;
    if let Some(line) = lines.get(start)
        && let Some(title) = line.trim_end_matches('\r').strip_prefix("# ")
    {
        heading = Some(title.trim().to_string());
        start += 1;
    }
    let marker = lines
        .iter()
        .rposition(|line| line.trim_end_matches('\r').trim() == MARKER)
        .filter(|&index| index >= start);
    let body_end = marker.unwrap_or(lines.len());
    let body = lines[start.min(body_end)..body_end].join("\n");
    let history = marker
        .map(|index| parse_history(&lines[index + 1..]))
        .unwrap_or_default();
    Ok(ParsedPage {
        frontmatter,
        heading,
        body: body.trim().to_string(),
        history,
        generated: marker.is_some(),
    })
}

fn parse_history(lines: &[&str]) -> Vec<HistoryEntry> {
    let Some(start) = lines.iter().position(|l| l.trim_end() == "## History") else {
        return Vec::new();
    };
    let mut entries: Vec<HistoryEntry> = Vec::new();
    let mut body: Vec<String> = Vec::new();
    let flush = |entries: &mut Vec<HistoryEntry>, body: &mut Vec<String>| {
        if let Some(last) = entries.last_mut()
            && !body.is_empty()
        {
            last.body = Some(std::mem::take(body).join("\n"));
        }
    };
    for line in &lines[start + 1..] {
        if let Some(rest) = line.strip_prefix("- v") {
            let parts: Vec<&str> = rest.splitn(3, " · ").collect();
            if let [version, at, op_by] = parts.as_slice()
                && let Ok(version) = version.parse::<i64>()
                && let Some((op, actor)) = op_by.split_once(" by ")
            {
                flush(&mut entries, &mut body);
                entries.push(HistoryEntry {
                    version,
                    at: at.to_string(),
                    op: op.to_string(),
                    actor: actor.to_string(),
                    body: None,
                });
            }
        } else if let Some(quoted) = line.strip_prefix("  > ") {
            body.push(quoted.to_string());
        } else if line.trim_end() == "  >" {
            body.push(String::new());
        } else if line.starts_with("## ") {
            break;
        }
    }
    flush(&mut entries, &mut body);
    entries
}
