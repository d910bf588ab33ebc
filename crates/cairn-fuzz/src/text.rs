//! The pure text parsers of cairn-core: sanitize and the secret guard, query escaping into FTS5
//! syntax (checked against a real FTS5 table), the transcript reader, the hook payload reader
//! and the history delta decoder.

use crate::{lossy, parts};
use cairn_core::brief::CONTEXT_OPEN;
use cairn_core::delta::{self, DeltaError};
use cairn_core::hook_payload::{HookPayload, HookPayloadError};
use cairn_core::query::{fts_at_least_two, fts_match_expression, query_terms};
use cairn_core::secrets::{self, KINDS};
use cairn_core::text::{self as text_pipeline, SanitizeError, is_always_stripped};
use cairn_core::transcript::{self, Role};
use rusqlite::Connection;
use std::cell::RefCell;
use std::collections::BTreeSet;

/// Panics when `text` holds anything sanitize removes or rewrites.
fn assert_sanitized(text: &str, what: &str) {
    for character in text.chars() {
        assert!(
            !is_always_stripped(character),
            "{what} keeps a stripped character U+{:04X}: {text:?}",
            character as u32
        );
        assert!(
            !matches!(character, '\r' | '\u{85}' | '\u{2028}' | '\u{2029}' | '\0'),
            "{what} keeps a line ending or NUL it should have rewritten: {text:?}"
        );
    }
    assert!(
        unicode_normalization::is_nfc(text),
        "{what} is not NFC: {text:?}"
    );
}

/// Sanitize: refuses exactly NUL and invalid UTF-8, never outputs a stripped character, is
/// idempotent. The secret guard: idempotent, its output matches no rule again, every kind it
/// reports is a known one with its placeholder in the text, and it changes nothing when it finds
/// nothing. Redacting sanitized text leaves it sanitized (the write path does both).
pub fn sanitize(data: &[u8]) {
    match text_pipeline::sanitize_bytes(data) {
        Err(SanitizeError::InvalidUtf8 { byte_offset }) => {
            let error = std::str::from_utf8(data).expect_err("refused as invalid UTF-8");
            assert_eq!(error.valid_up_to(), byte_offset);
        }
        Err(SanitizeError::Nul { byte_offset }) => {
            assert_eq!(data[byte_offset], 0, "NUL offset points at a NUL");
            assert!(!data[..byte_offset].contains(&0), "the first NUL is named");
        }
        Ok(sanitized) => {
            assert!(!data.contains(&0), "text with NUL was accepted");
            assert_sanitized(&sanitized.text, "sanitized text");
            let again = text_pipeline::sanitize(&sanitized.text).expect("sanitized text is valid");
            assert_eq!(again.text, sanitized.text, "sanitize is not idempotent");
            assert_eq!(again.stripped, 0, "re-sanitizing stripped something");

            let redacted = secrets::redact(&sanitized.text);
            let resanitized = text_pipeline::sanitize(&redacted.text).expect("redacted is valid");
            assert_eq!(
                resanitized.text, redacted.text,
                "redaction made sanitized text unsanitized"
            );
        }
    }

    let text = lossy(data);
    let redacted = secrets::redact(&text);
    if redacted.kinds.is_empty() {
        assert_eq!(redacted.text, text, "nothing found, yet the text changed");
    }
    for kind in &redacted.kinds {
        assert!(KINDS.contains(kind), "unknown kind {kind}");
        assert!(
            redacted.text.contains(&format!("[REDACTED:{kind}]")),
            "kind {kind} reported without its placeholder"
        );
    }
    let again = secrets::redact(&redacted.text);
    assert_eq!(again.text, redacted.text, "redact is not idempotent");
    assert!(
        again.kinds.is_empty(),
        "redacted text matched {:?}",
        again.kinds
    );
}

thread_local! {
    /// A full-text table tokenized like `memories_fts` (cairn-store's schema).
    static FTS: RefCell<Connection> = RefCell::new({
        let connection = Connection::open_in_memory().expect("in-memory SQLite");
        connection
            .execute_batch(
                "CREATE VIRTUAL TABLE t USING fts5(body, tokenize = 'porter unicode61');
                 CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');",
            )
            .expect("an FTS5 table");
        connection
    });
}

/// Words that are no query term (the first one not among the terms is the control row).
const CONTROLS: &[&str] = &["qzxvbn", "wkfjpq", "zzvkxq"];

/// Rowids of `table` rows matching `expression`; an FTS syntax error panics.
fn matching(connection: &Connection, expression: &str) -> BTreeSet<i64> {
    let mut statement = connection
        .prepare_cached("SELECT rowid FROM t WHERE t MATCH ?1")
        .expect("the match statement");
    let rows = statement
        .query_map([expression], |row| row.get::<_, i64>(0))
        .and_then(|rows| rows.collect::<Result<BTreeSet<i64>, _>>());
    match rows {
        Ok(rows) => rows,
        Err(error) => panic!("FTS5 refused {expression:?}: {error}"),
    }
}

/// Query escaping: whatever is typed, the terms are non-empty single words, and the match
/// expressions are valid FTS5 syntax (run on a real FTS5 table) that match each term's own text
/// (when FTS5 indexes a token of it) and not a text with none of the words.
pub fn query(data: &[u8]) {
    let input = lossy(data);
    let terms = query_terms(&input);
    for term in &terms {
        assert!(!term.is_empty(), "an empty term from {input:?}");
        assert!(
            !term.chars().any(char::is_whitespace),
            "a term with a space: {term:?}"
        );
    }
    let Some(any_term) = fts_match_expression(&terms) else {
        assert!(terms.is_empty(), "terms {terms:?} gave no expression");
        return;
    };
    // A control shares no 4-letter start with a term: the porter stemmer may cut a term down
    // to a control (`qzxvbns` → `qzxvbn`, fuzz/regressions/query/).
    let control = CONTROLS
        .iter()
        .find(|control| !terms.iter().any(|term| term.starts_with(&control[..4])))
        .copied();
    // The engine pairs at most six rare terms; eight keeps the expression small.
    let paired: Vec<String> = terms.iter().take(8).cloned().collect();
    let two_of = fts_at_least_two(&paired).expect("non-empty terms give an expression");
    FTS.with(|connection| {
        let connection = connection.borrow();
        connection
            .execute("DELETE FROM t", [])
            .expect("clear the table");
        if let Some(control) = control {
            connection
                .execute("INSERT INTO t(rowid, body) VALUES (0, ?1)", [control])
                .expect("the control row");
        }
        for (index, term) in terms.iter().enumerate() {
            connection
                .execute(
                    "INSERT INTO t(rowid, body) VALUES (?1, ?2)",
                    rusqlite::params![index as i64 + 1, term],
                )
                .expect("a term row");
        }
        // Rows FTS5 indexed a token of: a term of combining marks only (U+065C) or of symbols
        // Rust calls alphabetic (circled letters) is a word to `word_tokens` but no token to
        // unicode61, so it can match nothing (fuzz/regressions/query/; harmless, never a wrong
        // match, docs/fuzzing.md).
        let indexed: BTreeSet<i64> = connection
            .prepare_cached("SELECT DISTINCT doc FROM v")
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| row.get::<_, i64>(0))?
                    .collect::<Result<BTreeSet<i64>, _>>()
            })
            .expect("the FTS5 vocabulary");
        let found = matching(&connection, &any_term);
        assert!(
            !found.contains(&0),
            "{any_term:?} matches {control:?}, which has none of its words"
        );
        for (index, term) in terms.iter().enumerate() {
            let row = index as i64 + 1;
            assert!(
                found.contains(&row) || !indexed.contains(&row),
                "{any_term:?} does not match the text {term:?} of its own term"
            );
        }
        let found = matching(&connection, &two_of);
        assert!(!found.contains(&0), "{two_of:?} matches the control row");
        if paired.len() >= 2 && indexed.contains(&1) && indexed.contains(&2) {
            connection
                .execute(
                    "INSERT INTO t(rowid, body) VALUES (-1, ?1)",
                    [format!("{} {}", paired[0], paired[1])],
                )
                .expect("a two-term row");
            let found = matching(&connection, &two_of);
            assert!(
                found.contains(&-1),
                "{two_of:?} does not match a text holding two of its terms"
            );
        }
    });
}

/// The transcript reader: it consumes whole lines only, every captured turn has an answer and no
/// injected context, and a capture cut at a number of turns then resumed from its offset gives
/// exactly the turns and offset of one capture.
pub fn transcript(data: &[u8]) {
    let chunk = lossy(data);
    let whole = transcript::plan_capture(&chunk);
    let consumed = usize::try_from(whole.consumed).expect("an offset fits");
    assert!(consumed <= chunk.len(), "consumed past the end");
    assert!(
        consumed == 0 || chunk.as_bytes()[consumed - 1] == b'\n',
        "consumed {consumed} is not at a line end"
    );
    for turn in &whole.turns {
        assert!(!turn.assistant.is_empty(), "a turn without an answer");
        for side in [&turn.user, &turn.assistant] {
            assert!(
                !side.contains(CONTEXT_OPEN),
                "captured text keeps an injected block: {side:?}"
            );
        }
    }
    for line in chunk.split_inclusive('\n') {
        if let Some(message) = transcript::parse_line(line) {
            assert!(!message.text.is_empty());
            assert_eq!(message.text.trim(), message.text);
            assert!(!message.text.contains(CONTEXT_OPEN));
            let _ = message.role == Role::User;
        }
    }
    assert!(!transcript::strip_injected(&chunk).contains(CONTEXT_OPEN));
    for max_turns in 1..=3 {
        let first = transcript::plan_capture_at_most(&chunk, max_turns);
        assert!(first.turns.len() <= max_turns);
        let offset = usize::try_from(first.consumed).expect("an offset fits");
        let rest = transcript::plan_capture(&chunk[offset..]);
        let mut resumed = first.turns.clone();
        resumed.extend(rest.turns);
        assert_eq!(resumed, whole.turns, "a capture cut at {max_turns} turns");
        assert_eq!(
            first.consumed + rest.consumed,
            whole.consumed,
            "offsets after a capture cut at {max_turns} turns"
        );
    }
}

/// The hook payload reader: a payload is read exactly when it is a JSON object, and every field
/// it gives is non-blank.
pub fn hook_payload(data: &[u8]) {
    let text = lossy(data);
    let as_json: Option<serde_json::Value> = serde_json::from_str(&text).ok();
    match HookPayload::parse(data) {
        Ok(payload) => {
            assert!(as_json.is_some_and(|value| value.is_object()));
            for field in [
                &payload.cwd,
                &payload.session,
                &payload.prompt,
                &payload.response,
                &payload.transcript_path,
                &payload.source,
                &payload.reason,
            ]
            .into_iter()
            .flatten()
            {
                assert!(!field.trim().is_empty(), "a blank field was read");
            }
        }
        Err(HookPayloadError::Empty) => assert!(text.trim().is_empty()),
        Err(HookPayloadError::NotObject) => {
            assert!(as_json.is_some_and(|value| !value.is_object()))
        }
        Err(HookPayloadError::NotJson(message)) => {
            assert!(as_json.is_none());
            assert!(!message.is_empty());
        }
    }
}

/// The history delta: a delta decodes to exactly the text it was made from; against any other
/// base it is refused; and any bytes after a valid header decode to some text or an error.
pub fn delta(data: &[u8]) {
    let [base, text, ops] = parts::<3>(data);
    let (base, text) = (lossy(base), lossy(text));
    let encoded = delta::encode(&base, &text);
    assert_eq!(
        delta::apply(&base, &encoded).as_deref(),
        Ok(text.as_str()),
        "a delta does not decode to its text"
    );
    let other_base = format!("{base}.");
    assert!(
        matches!(
            delta::apply(&other_base, &encoded),
            Err(DeltaError::BaseChanged { .. })
        ),
        "a delta applied to a changed base was not refused"
    );
    // The header alone (a delta of the empty text), then the fuzzer's ops.
    let mut forged = delta::encode(&base, "");
    forged.extend_from_slice(ops);
    let _ = delta::apply(&base, &forged);
    let _ = delta::apply(&base, ops);
}
