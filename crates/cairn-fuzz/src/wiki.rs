//! The Markdown readers of cairn-engine: the frontmatter reader and writer, a whole wiki page
//! (read, edited onto a record, and written then read back), and the importers of other tools'
//! formats.

use crate::{lossy, parts};
use cairn_core::memory::Memory;
use cairn_core::record::MemoryType;
use cairn_engine::importers::{
    Candidate, Parsed, SourceKind, claude_md, markdown, mcp_memory, mem0,
};
use cairn_engine::remember::prepare;
use cairn_engine::wiki::apply_edits;
use cairn_engine::wiki::frontmatter::{self, Value};
use cairn_engine::wiki::page::{self, HistoryEntry};
use cairn_engine::{RememberRequest, Review};
use cairn_store::HistoryRow;
use chrono::{DateTime, TimeZone, Utc};
use std::collections::BTreeSet;

/// The fixed clock of every target (so an input replays the same way).
pub(crate) fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0)
        .single()
        .expect("a valid time")
}

/// Writes `entries` and reads them back: the reader must give exactly what the writer wrote.
fn assert_round_trip(entries: &[(String, Value)]) {
    let borrowed: Vec<(&str, Value)> = entries
        .iter()
        .map(|(key, value)| (key.as_str(), value.clone()))
        .collect();
    let written = frontmatter::write(&borrowed);
    assert_eq!(
        written.lines().count(),
        entries.len() + 2,
        "a value took more than its line: {written:?}"
    );
    let (inner, rest) = frontmatter::split(&written)
        .expect("written frontmatter splits")
        .expect("written frontmatter has fences");
    assert!(rest.is_empty(), "text after the closing fence: {rest:?}");
    let read = frontmatter::parse(inner)
        .unwrap_or_else(|error| panic!("written frontmatter is refused ({error}): {written:?}"));
    assert_eq!(read.entries, entries, "read back differently: {written:?}");
}

/// The frontmatter reader never panics, and whatever it reads the writer writes on one line per
/// key and the reader reads back the same; values built from the input round-trip too.
pub fn frontmatter(data: &[u8]) {
    let text = lossy(data);
    if let Ok(Some((inner, _))) = frontmatter::split(&text)
        && let Ok(read) = frontmatter::parse(inner)
        && read.entries.iter().all(|(key, _)| frontmatter::is_key(key))
    {
        assert_round_trip(&read.entries);
    }
    if let Ok(read) = frontmatter::parse(&text)
        && read.entries.iter().all(|(key, _)| frontmatter::is_key(key))
    {
        assert_round_trip(&read.entries);
    }
    let [first, second, list] = parts::<3>(data);
    let items: Vec<String> = lossy(list).split(',').map(str::to_string).collect();
    assert_round_trip(&[
        ("title".to_string(), Value::Str(lossy(first))),
        ("body".to_string(), Value::Str(lossy(second))),
        ("tags".to_string(), Value::List(items)),
        ("id".to_string(), Value::Int(data.len() as i64 - 7)),
        (
            "pinned".to_string(),
            Value::Bool(data.len().is_multiple_of(2)),
        ),
        ("gone".to_string(), Value::Null),
    ]);
}

/// A record as the write path makes it, from the fuzzer's title, body, summary, tags and an
/// earlier body; `None` when the write path refuses the text.
fn record_from(data: &[u8]) -> Option<(Memory, Option<String>)> {
    let [title, body, summary, tags, earlier] = parts::<5>(data);
    let selector = data.first().copied().unwrap_or(0);
    let mut request = RememberRequest::new(
        MemoryType::ALL[usize::from(selector) % MemoryType::ALL.len()],
        lossy(body),
    );
    request.title = (!title.is_empty()).then(|| lossy(title));
    request.summary = (!summary.is_empty()).then(|| lossy(summary));
    request.tags = lossy(tags)
        .split(',')
        .filter(|tag| !tag.is_empty())
        .map(str::to_string)
        .collect();
    request.importance = Some(selector % 5 + 1);
    request.pinned = selector & 0x40 != 0;
    request.review = Review::Never;
    request.personal = selector & 0x80 != 0;
    let project = (!request.personal).then(|| "fuzz".to_string());
    let mut memory = prepare(&request, project.clone(), now(), None).ok()?.memory;
    memory.id = i64::from(selector) + 1;
    let earlier = prepare(
        &RememberRequest::new(memory.memory_type, lossy(earlier)),
        project,
        now(),
        None,
    )
    .ok()
    .map(|prepared| prepared.memory.body);
    Some((memory, earlier))
}

/// A whole wiki page: any bytes read as a page never panic, and editing a record with a page
/// read is a clear result or a clear error; a record written as a page and read back gives the
/// same record (no edit), the same body and the same history.
pub fn wiki_page(data: &[u8]) {
    let (memory, earlier) = match record_from(data) {
        Some(made) => made,
        None => {
            let (memory, _) = record_from(b"\x02title\xffbody").expect("a fixed record");
            (memory, None)
        }
    };
    if let Ok(parsed) = page::parse(data) {
        let _ = apply_edits(&parsed, &memory, now());
    }

    let history: Vec<HistoryRow> = earlier
        .iter()
        .map(|body| HistoryRow {
            version: 1,
            at: "2026-05-01T00:00:00Z".into(),
            op: "remember".into(),
            actor: "cli".into(),
            snapshot: serde_json::json!({ "body": body }),
        })
        .collect();
    let written = page::render(&memory, &history, &[]);
    let parsed = page::parse(written.as_bytes())
        .unwrap_or_else(|error| panic!("a written page is refused ({error}): {written:?}"));
    assert_eq!(parsed.frontmatter.int("id"), Some(memory.id));
    assert_eq!(parsed.body, memory.body, "the body read back differs");
    assert!(parsed.generated);
    let expected_history: Vec<HistoryEntry> = history
        .iter()
        .map(|row| HistoryEntry {
            version: row.version,
            at: row.at.clone(),
            op: row.op.clone(),
            actor: row.actor.clone(),
            body: earlier.clone().filter(|body| *body != memory.body),
        })
        .collect();
    assert_eq!(
        parsed.history, expected_history,
        "the history read back differs"
    );
    match apply_edits(&parsed, &memory, now()) {
        Ok(None) => {}
        Ok(Some(changed)) => panic!(
            "a page read back changes its record:\n  was {memory:?}\n  now {changed:?}\n  page {written:?}"
        ),
        Err(error) => panic!("a written page is refused on import ({error}): {written:?}"),
    }
}

/// What a parse produced, comparable.
fn summary(parsed: &Parsed) -> (Vec<Candidate>, Vec<String>) {
    (parsed.candidates.clone(), parsed.unmapped.clone())
}

/// Each importer's parser (the first byte picks one): deterministic, every candidate has text
/// and an external id, and the ids cairn makes up (instruction sections, entities, files) are
/// unique, so one import never makes a record overwrite another.
pub fn importers(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let text = lossy(rest);
    let (parsed, ids_must_be_unique) = match selector % 5 {
        0 => (
            claude_md::parse_memory_file(&text, "fuzz", "CLAUDE.md").unwrap_or_else(|| {
                claude_md::parse_instructions(&text, "fuzz", "CLAUDE.md", SourceKind::ClaudeMd)
            }),
            true,
        ),
        1 => (
            claude_md::parse_instructions(&text, "fuzz", "memory/MEMORY.md", SourceKind::AgentsMd),
            true,
        ),
        2 => (mcp_memory::parse(&text, "memory.jsonl"), true),
        3 => match mem0::parse(&text, "mem0.json") {
            Ok(parsed) => (parsed, false),
            Err(why) => {
                assert!(!why.is_empty());
                return;
            }
        },
        _ => {
            let mut parsed = Parsed::default();
            match markdown::parse_file("notes/fuzz.md", &text, now()) {
                Ok((candidate, keys)) => {
                    parsed.candidates.push(candidate);
                    parsed.unmapped = keys;
                }
                Err(why) => assert!(!why.is_empty()),
            }
            (parsed, true)
        }
    };
    let again = match selector % 5 {
        0 => claude_md::parse_memory_file(&text, "fuzz", "CLAUDE.md").unwrap_or_else(|| {
            claude_md::parse_instructions(&text, "fuzz", "CLAUDE.md", SourceKind::ClaudeMd)
        }),
        1 => claude_md::parse_instructions(&text, "fuzz", "memory/MEMORY.md", SourceKind::AgentsMd),
        2 => mcp_memory::parse(&text, "memory.jsonl"),
        3 => mem0::parse(&text, "mem0.json").expect("parsed once"),
        _ => parsed.clone(),
    };
    assert_eq!(
        summary(&parsed),
        summary(&again),
        "a parser is not deterministic"
    );
    let mut seen = BTreeSet::new();
    for candidate in &parsed.candidates {
        assert!(
            !candidate.body.trim().is_empty(),
            "a candidate without text: {candidate:?}"
        );
        assert!(!candidate.external_id.is_empty());
        assert!(!candidate.origin.is_empty());
        if ids_must_be_unique {
            assert!(
                seen.insert(candidate.external_id.clone()),
                "two candidates share the external id {:?}",
                candidate.external_id
            );
        }
    }
}
