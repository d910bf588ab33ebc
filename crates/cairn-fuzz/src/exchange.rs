//! The readers that write into a brain: one JSONL import line, a share envelope, and the
//! arguments of every MCP tool. Each runs on a real brain (crate::brain).

use crate::brain::with_engine;
use cairn_core::secrets;
use cairn_core::text::{content_hash, sanitize};
use cairn_engine::exchange::{ImportOptions, LineStatus};
use cairn_engine::share::{ENVELOPE_SCHEMA, payload_sha256};
use cairn_engine::{Engine, EngineError};
use cairn_mcp::tools::{ToolSpec, registry};
use serde_json::Value;

/// Panics unless `text` is what the write path stores: sanitized, with no secret left.
fn assert_stored(text: &str, what: &str) {
    let again = sanitize(text).unwrap_or_else(|error| panic!("stored {what} is invalid: {error}"));
    assert_eq!(again.text, text, "stored {what} is not sanitized");
    assert_eq!(again.stripped, 0, "stored {what} keeps stripped characters");
    let redacted = secrets::redact(text);
    assert!(
        redacted.kinds.is_empty(),
        "stored {what} keeps a secret ({:?}): {text:?}",
        redacted.kinds
    );
}

/// Panics unless record `id` is stored the way the write path stores every record.
fn assert_record_stored(engine: &Engine, id: i64) {
    let memory = engine
        .get(id)
        .unwrap_or_else(|error| panic!("record #{id} was reported but cannot be read: {error}"));
    assert!(!memory.body.trim().is_empty(), "#{id} has an empty body");
    assert_stored(&memory.body, "body");
    assert_eq!(memory.content_hash, content_hash(&memory.body));
    for text in [&memory.title, &memory.summary].into_iter().flatten() {
        assert_stored(text, "title or summary");
    }
}

/// One JSONL import line (or a few): the import itself never fails for what a line says, each
/// line gets at most one outcome, in order, and every record it adds or updates is stored
/// sanitized, with no secret, its hash matching its text.
pub fn jsonl_line(data: &[u8]) {
    // Lines as the import reads them: blank ones skipped, broken UTF-8 an error line.
    let expected_lines = data
        .split_inclusive(|byte| *byte == b'\n')
        .filter(|line| std::str::from_utf8(line).map_or(true, |text| !text.trim().is_empty()))
        .count();
    let report = with_engine(|engine| {
        let report = engine
            .import_jsonl(&mut &data[..], &ImportOptions::default())
            .unwrap_or_else(|error| panic!("an import failed as a whole: {error}"));
        for outcome in &report.lines {
            if matches!(outcome.status, LineStatus::Added | LineStatus::Updated)
                && let Some(id) = outcome.id
            {
                assert_record_stored(engine, id);
            }
            if matches!(outcome.status, LineStatus::Error | LineStatus::Refused) {
                assert!(
                    outcome.message.as_deref().is_some_and(|m| !m.is_empty()),
                    "a refused line without a reason: {outcome:?}"
                );
            }
        }
        report
    });
    // Event and graph lines are restored into the log without an outcome of their own.
    assert!(
        report.lines.len() <= expected_lines,
        "{} outcomes for {expected_lines} lines",
        report.lines.len()
    );
    let total_lines = data.split_inclusive(|byte| *byte == b'\n').count();
    let mut previous = 0;
    for outcome in &report.lines {
        assert!(
            outcome.line > previous && outcome.line <= total_lines,
            "outcome line numbers out of order or range: {:?}",
            report.lines
        );
        previous = outcome.line;
    }
    let summary = &report.summary;
    assert_eq!(
        summary.added + summary.updated + summary.noop + summary.refused + summary.error,
        report.lines.len()
    );
}

/// `value` re-sealed: every record's content hash made to match its body and the payload hash
/// made to match the whole, as a sender would have.
fn sealed(mut value: Value) -> Value {
    if let Some(records) = value.get_mut("records").and_then(Value::as_array_mut) {
        for record in records {
            if let Some(body) = record.get("body").and_then(Value::as_str) {
                let hash = content_hash(body);
                record["content_hash"] = Value::String(hash);
            }
        }
    }
    let hash = payload_sha256(&value);
    value["payload_sha256"] = Value::String(hash);
    value
}

fn assert_refused(result: Result<cairn_engine::share::EnvelopeImportReport, EngineError>) {
    match result {
        Ok(report) => panic!("a changed envelope was imported: {report:?}"),
        Err(EngineError::Invalid(message)) => {
            assert!(message.contains("nothing was imported"), "{message}")
        }
        Err(other) => panic!("a changed envelope was refused without saying so: {other}"),
    }
}

/// The share envelope reader: any bytes are imported or refused with a reason; an envelope
/// sealed as its sender would seal it imports one outcome per record with content and counts the
/// rest as references; a sealed envelope changed afterwards is refused whole.
pub fn share_envelope(data: &[u8]) {
    with_engine(|engine| {
        if let Err(error) = engine.import_envelope(data) {
            assert!(!error.to_string().is_empty());
        }
        let Ok(Value::Object(mut object)) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        object.insert("schema".into(), Value::String(ENVELOPE_SCHEMA.into()));
        let value = sealed(Value::Object(object));
        let bytes = serde_json::to_vec(&value).expect("JSON serializes");
        if let Ok(report) = engine.import_envelope(&bytes) {
            let records = value["records"].as_array().map_or(0, Vec::len);
            assert_eq!(
                report.references + report.import.lines.len(),
                records,
                "records unaccounted for"
            );
            for outcome in &report.import.lines {
                if matches!(outcome.status, LineStatus::Added | LineStatus::Updated)
                    && let Some(id) = outcome.id
                {
                    assert_record_stored(engine, id);
                }
            }
            let mut changed = value.clone();
            changed["withheld"] = Value::from(value["withheld"].as_u64().unwrap_or(0) + 1);
            let bytes = serde_json::to_vec(&changed).expect("JSON serializes");
            assert_refused(engine.import_envelope(&bytes));
        }
    });
}

thread_local! {
    static TOOLS: Vec<ToolSpec> = registry();
}

/// MCP tool arguments: the first byte picks a tool, the rest is its arguments object. Every
/// call answers (never panics) with a structured object, and an error names what went wrong.
pub fn mcp_tools(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(Value::Object(arguments)) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    TOOLS.with(|tools| {
        let spec = &tools[usize::from(selector) % tools.len()];
        let reply = with_engine(|engine| spec.call_on(engine, arguments.clone()));
        assert!(
            reply.structured.is_object(),
            "`{}` answered a non-object",
            spec.name
        );
        if reply.is_error {
            assert!(
                !reply.text.trim().is_empty(),
                "`{}` failed without saying why",
                spec.name
            );
        }
    });
}
