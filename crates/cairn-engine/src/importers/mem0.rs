//! mem0 exports: the JSON of `get_all()` / the export API — a list of memories, or an object
//! holding one under `results` or `memories`. Each memory (`memory`, `id`, `categories`,
//! `metadata`, `user_id` / `agent_id` / `run_id`, `created_at`) becomes one record: the text is
//! the body, categories and the ids of whom it is about become tags, `created_at` is kept, and
//! the mem0 id is the external id. Metadata keys are reported, not mapped.

use super::{Candidate, Parsed, id_part, read_source, unreadable};
use crate::Result;
use cairn_core::record::MemoryType;
use cairn_core::time::{format_ts, parse_time};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

pub fn parse(text: &str, label: &str) -> std::result::Result<Parsed, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let items = match &value {
        Value::Array(items) => items.clone(),
        Value::Object(object) => match ["results", "memories", "data"]
            .iter()
            .find_map(|key| object.get(*key).and_then(Value::as_array))
        {
            Some(items) => items.clone(),
            None => {
                return Err(
                    "expected a list of memories, or an object with `results` or `memories`".into(),
                );
            }
        },
        _ => return Err("expected a list of memories".into()),
    };
    let mut parsed = Parsed::default();
    let mut metadata_keys: BTreeMap<String, usize> = BTreeMap::new();
    let anchor =
        parse_time("2000-01-01T00:00:00Z", chrono::Utc::now()).expect("a fixed valid time");
    for (index, item) in items.iter().enumerate() {
        let number = index + 1;
        let text_of = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_string);
        let Some(memory) = text_of("memory")
            .or_else(|| text_of("text"))
            .or_else(|| text_of("content"))
            .filter(|m| !m.trim().is_empty())
        else {
            parsed
                .unmapped
                .push(format!("item {number}: no `memory` text; skipped"));
            continue;
        };
        let categories: Vec<String> = item
            .get("categories")
            .and_then(Value::as_array)
            .map(|c| c.iter().filter_map(|v| v.as_str().map(id_part)).collect())
            .unwrap_or_default();
        let mut tags = categories.clone();
        for (key, prefix) in [
            ("user_id", "user"),
            ("agent_id", "agent"),
            ("run_id", "run"),
            ("app_id", "app"),
        ] {
            if let Some(who) = text_of(key) {
                tags.push(format!("{prefix}-{}", id_part(&who)));
            }
        }
        tags.push("mem0".into());
        if let Some(Value::Object(metadata)) = item.get("metadata") {
            for key in metadata.keys() {
                *metadata_keys.entry(key.clone()).or_default() += 1;
            }
        }
        let created_at = match text_of("created_at") {
            Some(at) => match parse_time(&at, anchor) {
                Ok(at) => Some(format_ts(at)),
                Err(_) => {
                    parsed.unmapped.push(format!(
                        "item {number}: created_at {at:?} is not a time; the import time is used"
                    ));
                    None
                }
            },
            None => None,
        };
        let memory_type = if categories.iter().any(|c| c.contains("preference")) {
            MemoryType::Preference
        } else {
            MemoryType::Fact
        };
        let id = text_of("id")
            .or_else(|| {
                item.get("id")
                    .and_then(Value::as_i64)
                    .map(|i| i.to_string())
            })
            .or_else(|| text_of("hash"))
            .unwrap_or_else(|| cairn_core::text::content_hash(&memory));
        parsed.candidates.push(Candidate {
            origin: format!("{label} item {number}"),
            external_id: format!("mem0:{id}"),
            memory_type,
            title: None,
            body: memory,
            summary: None,
            tags,
            source: Some(format!("mem0 export: {label}")),
            created_at,
        });
    }
    for (key, count) in metadata_keys {
        parsed
            .unmapped
            .push(format!("metadata key `{key}` ({count} item(s)) not mapped"));
    }
    Ok(parsed)
}

pub fn read(path: &Path) -> Result<Parsed> {
    let text = read_source(path).map_err(|why| unreadable(path, why))?;
    parse(&text, &path.display().to_string()).map_err(|why| unreadable(path, why))
}
