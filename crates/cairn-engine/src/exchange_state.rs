//! The rest of a brain in the JSONL exchange: what is kept besides records, history, scopes,
//! the graph and events — settings, the identity, tasks, measure readings, awareness items, the
//! inbox, conflicts, transcript capture offsets, surfacings (passive use) and dream proposal sets (each with its
//! proposals and decision). Export writes one line per row, `{"kind": K, "row": {column:
//! value}}` (a dream set also carries `"proposals"`); import reads them after every memory
//! line, so record ids are remapped as the memories were, and each line gets its own outcome.
//!
//! Derived data is not exported but rebuilt: FTS rows (by the import's writes), vectors (the
//! background indexer, `cairn reindex`), the graph's `edges` (folded from the edge log) and the
//! bookkeeping in `meta` (model id, counters).

use crate::exchange::{ImportReport, LineStatus, record_line};
use crate::{EngineError, Result};
use cairn_store::{ExchangeTable, Reader, WriteTx};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::io::Write;

/// Line kinds this module writes and reads.
pub(crate) const STATE_KINDS: &[&str] = &[
    "setting",
    "identity",
    "task",
    "measure",
    "awareness",
    "inbox",
    "conflict",
    "capture_offset",
    "surfacing",
    "dream_set",
];

/// The table behind each row kind, in export order (`setting` and `dream_set` are apart).
const ROW_KINDS: &[(&str, ExchangeTable)] = &[
    ("identity", ExchangeTable::Identity),
    ("task", ExchangeTable::Tasks),
    ("measure", ExchangeTable::Measures),
    ("awareness", ExchangeTable::Awareness),
    ("inbox", ExchangeTable::Inbox),
    ("conflict", ExchangeTable::Conflicts),
    ("capture_offset", ExchangeTable::CaptureOffsets),
    ("surfacing", ExchangeTable::Surfacings),
];

/// Writes the state lines; returns how many.
pub(crate) fn export_state(reader: &Reader<'_>, out: &mut dyn Write) -> Result<usize> {
    let io = |source| EngineError::Io {
        path: "<export>".into(),
        source,
    };
    let mut lines = 0;
    let mut write = |value: Value| -> Result<()> {
        writeln!(out, "{value}").map_err(io)?;
        lines += 1;
        Ok(())
    };
    for (key, value) in crate::lifecycle::config::stored_settings(reader)? {
        write(json!({"kind": "setting", "key": key, "value": value}))?;
    }
    for (kind, table) in ROW_KINDS {
        for row in reader.exchange_rows(*table, None)? {
            write(json!({"kind": kind, "row": row}))?;
        }
    }
    for run in reader.exchange_rows(ExchangeTable::DreamRuns, None)? {
        let proposals = match run.get("id") {
            Some(id) => {
                reader.exchange_rows(ExchangeTable::DreamProposals, Some(("run_id", id)))?
            }
            None => Vec::new(),
        };
        let proposals: Vec<Map<String, Value>> = proposals
            .into_iter()
            .map(|mut p| {
                // The set's id is the line's; repeating it in every proposal adds nothing.
                p.remove("run_id");
                p
            })
            .collect();
        write(json!({"kind": "dream_set", "row": run, "proposals": proposals}))?;
    }
    Ok(lines)
}

/// Reads the state lines back, after the memories and the graph. A line that does not apply
/// is reported and skipped; only a store failure stops the import.
pub(crate) fn import_state(
    tx: &WriteTx<'_>,
    lines: &[(usize, Value)],
    id_map: &HashMap<i64, i64>,
    report: &mut ImportReport,
) -> Result<()> {
    for (line, value) in lines {
        record_line(report, *line, import_line(tx, value, id_map))?;
    }
    Ok(())
}

fn invalid(kind: &str, why: &str) -> EngineError {
    EngineError::Invalid(format!(
        "not a valid {kind} line ({why}); the line was skipped"
    ))
}

fn import_line(
    tx: &WriteTx<'_>,
    value: &Value,
    id_map: &HashMap<i64, i64>,
) -> Result<(LineStatus, String)> {
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind == "setting" {
        return import_setting(tx, value);
    }
    let row = value
        .get("row")
        .and_then(Value::as_object)
        .cloned()
        .ok_or_else(|| invalid(kind, "no \"row\" object"))?;
    if kind == "dream_set" {
        return import_dream_set(tx, row, value.get("proposals"), id_map);
    }
    let table = ROW_KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, table)| *table)
        .ok_or_else(|| invalid(kind, "unknown kind"))?;
    match table {
        ExchangeTable::Identity => import_identity(tx, &row),
        ExchangeTable::CaptureOffsets => {
            if tx.insert_exchange_row(table, &row)? {
                Ok((LineStatus::Added, kind.to_string()))
            } else {
                Ok((
                    LineStatus::Noop,
                    "the brain already has an offset for this session; kept it".to_string(),
                ))
            }
        }
        ExchangeTable::Surfacings => import_surfacing(tx, row, id_map),
        _ => import_numbered_row(tx, kind, table, row, id_map),
    }
}

/// A record's surfacing (when the brief or the prompt hook last handed it to an agent), its
/// record id remapped; a record that already has one keeps it.
fn import_surfacing(
    tx: &WriteTx<'_>,
    mut row: Map<String, Value>,
    id_map: &HashMap<i64, i64>,
) -> Result<(LineStatus, String)> {
    let old = row
        .get("memory_id")
        .and_then(Value::as_i64)
        .ok_or_else(|| invalid("surfacing", "no memory_id"))?;
    let id = remap(id_map, old);
    if tx.reader().get(id)?.is_none() {
        return Ok((
            LineStatus::Refused,
            format!("record #{old} of this surfacing is not in the brain; skipped"),
        ));
    }
    row.insert("memory_id".to_string(), json!(id));
    if tx.insert_exchange_row(ExchangeTable::Surfacings, &row)? {
        Ok((LineStatus::Added, "surfacing".to_string()))
    } else {
        Ok((
            LineStatus::Noop,
            format!("record #{id} already has a surfacing in this brain; kept it"),
        ))
    }
}

/// Remaps an exported record id to the id the import gave it.
fn remap(id_map: &HashMap<i64, i64>, old: i64) -> i64 {
    id_map.get(&old).copied().unwrap_or(old)
}

/// A row with an integer `id`: kept when that id is free, re-numbered otherwise; a row equal
/// to one already there (every column but the id) is a no-op, so importing twice adds nothing.
fn import_numbered_row(
    tx: &WriteTx<'_>,
    kind: &str,
    table: ExchangeTable,
    mut row: Map<String, Value>,
    id_map: &HashMap<i64, i64>,
) -> Result<(LineStatus, String)> {
    if table == ExchangeTable::Conflicts {
        for column in ["memory_id", "other_id"] {
            let old = row
                .get(column)
                .and_then(Value::as_i64)
                .ok_or_else(|| invalid(kind, &format!("no {column}")))?;
            let id = remap(id_map, old);
            if tx.reader().get(id)?.is_none() {
                return Ok((
                    LineStatus::Refused,
                    format!("record #{old} of this conflict is not in the brain; skipped"),
                ));
            }
            row.insert(column.to_string(), json!(id));
        }
    }
    let wanted = row.remove("id").and_then(|id| id.as_i64());
    if tx.reader().exchange_row_exists(table, &row)? {
        return Ok((LineStatus::Noop, format!("this {kind} is already stored")));
    }
    if let Some(id) = wanted
        && !tx.exchange_id_taken(table, id)?
    {
        row.insert("id".to_string(), json!(id));
    }
    if tx.insert_exchange_row(table, &row)? {
        Ok((LineStatus::Added, kind.to_string()))
    } else {
        // The inbox keeps one item per text and project.
        Ok((
            LineStatus::Noop,
            format!("the brain already holds this {kind}; kept it"),
        ))
    }
}

fn import_identity(tx: &WriteTx<'_>, row: &Map<String, Value>) -> Result<(LineStatus, String)> {
    let text = |column: &str| {
        row.get(column)
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("identity", &format!("no {column}")))
    };
    let (body, updated_at) = (text("body")?, text("updated_at")?);
    let body = cairn_core::text::sanitize(body)
        .map_err(|e| invalid("identity", &e.to_string()))?
        .text;
    if let Some(current) = tx.reader().identity()? {
        if current.body == body {
            return Ok((LineStatus::Noop, "the identity is already this".to_string()));
        }
        if current.updated_at.as_str() >= updated_at {
            return Ok((
                LineStatus::Refused,
                "the brain's identity is as new or newer; kept it (`cairn identity set` replaces it)"
                    .to_string(),
            ));
        }
        tx.set_identity(&body, updated_at)?;
        return Ok((LineStatus::Updated, "identity".to_string()));
    }
    tx.set_identity(&body, updated_at)?;
    Ok((LineStatus::Added, "identity".to_string()))
}

fn import_setting(tx: &WriteTx<'_>, value: &Value) -> Result<(LineStatus, String)> {
    let text = |field: &str| {
        value
            .get(field)
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("setting", &format!("no {field}")))
    };
    let (key, setting) = (text("key")?, text("value")?);
    let meta = crate::lifecycle::config::checked_meta_key(key, setting)?;
    match tx.reader().meta(&meta)? {
        Some(current) if current == setting => {
            Ok((LineStatus::Noop, format!("{key} is already {setting:?}")))
        }
        Some(current) => Ok((
            LineStatus::Refused,
            format!(
                "{key} is set to {current:?} in this brain; kept it (`cairn config set {key} …` changes it)"
            ),
        )),
        None => {
            tx.set_meta(&meta, setting)?;
            Ok((LineStatus::Added, format!("setting {key}")))
        }
    }
}

/// A dream proposal set with its proposals: kept whole (status, report, decision, outcomes);
/// the record ids its targets and payloads name are remapped.
fn import_dream_set(
    tx: &WriteTx<'_>,
    run: Map<String, Value>,
    proposals: Option<&Value>,
    id_map: &HashMap<i64, i64>,
) -> Result<(LineStatus, String)> {
    let id = run
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("dream_set", "no id"))?
        .to_string();
    let proposals = match proposals {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err(invalid("dream_set", "\"proposals\" is not a list")),
    };
    if !tx.insert_exchange_row(ExchangeTable::DreamRuns, &run)? {
        return Ok((
            LineStatus::Noop,
            format!("dream set {id} is already stored"),
        ));
    }
    for proposal in proposals {
        let Value::Object(mut proposal) = proposal else {
            return Err(invalid("dream_set", "a proposal is not an object"));
        };
        proposal.insert("run_id".to_string(), json!(id));
        for column in ["targets", "payload"] {
            if let Some(Value::String(text)) = proposal.get(column) {
                let mut parsed: Value = serde_json::from_str(text).map_err(|_| {
                    invalid("dream_set", &format!("a proposal's {column} is not JSON"))
                })?;
                if remap_ids(&mut parsed, id_map) {
                    proposal.insert(column.to_string(), json!(parsed.to_string()));
                }
            }
        }
        tx.insert_exchange_row(ExchangeTable::DreamProposals, &proposal)?;
    }
    Ok((LineStatus::Added, format!("dream set {id}")))
}

/// Rewrites the record ids a proposal names (`id`, `survivor`, `twin`, `members`, and the `id`
/// of `merged` items and of targets); says whether anything changed.
fn remap_ids(value: &mut Value, id_map: &HashMap<i64, i64>) -> bool {
    let mut changed = false;
    let mut fix = |slot: &mut Value| {
        if let Some(old) = slot.as_i64() {
            let new = remap(id_map, old);
            if new != old {
                *slot = json!(new);
                changed = true;
            }
        }
    };
    match value {
        Value::Array(items) => {
            for item in items {
                if let Some(slot) = item.get_mut("id") {
                    fix(slot);
                }
            }
        }
        Value::Object(fields) => {
            for key in ["id", "survivor", "twin"] {
                if let Some(slot) = fields.get_mut(key) {
                    fix(slot);
                }
            }
            if let Some(Value::Array(members)) = fields.get_mut("members") {
                members.iter_mut().for_each(&mut fix);
            }
            if let Some(Value::Array(merged)) = fields.get_mut("merged") {
                for item in merged {
                    if let Some(slot) = item.get_mut("id") {
                        fix(slot);
                    }
                }
            }
        }
        _ => {}
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposal_ids_are_remapped_where_they_name_records() {
        let map: HashMap<i64, i64> = [(1, 11), (2, 12), (3, 13)].into_iter().collect();
        let mut targets = json!([{"id": 1, "updated_at": "t"}, {"id": 9}]);
        assert!(remap_ids(&mut targets, &map));
        assert_eq!(targets, json!([{"id": 11, "updated_at": "t"}, {"id": 9}]));
        let mut payload = json!({"survivor": 2, "merged": [{"id": 3, "similarity": 0.9}], "members": [1, 2], "importance": 3});
        assert!(remap_ids(&mut payload, &map));
        assert_eq!(
            payload,
            json!({"survivor": 12, "merged": [{"id": 13, "similarity": 0.9}], "members": [11, 12], "importance": 3})
        );
        let mut untouched = json!({"id": 7, "twin": 8});
        assert!(!remap_ids(&mut untouched, &map));
    }
}
