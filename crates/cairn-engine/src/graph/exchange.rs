//! The graph in the JSONL exchange format: declared relation types, entities with aliases, the
//! whole edge log, quarantined edges and generated-record marks are exported, and read back by
//! `import` after every memory line (record ids remapped as the memories were).

use super::write::EdgeWriter;
use crate::exchange::{ImportReport, LineStatus, record_line};
use crate::{EngineError, Result};
use cairn_core::graph::fold::EdgeOp;
use cairn_core::graph::{Node, NodeKind, builtin_relation, extract::entity_key};
use cairn_store::{EdgeKey, QuarantineRow, Reader, WriteTx};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::Write;

/// Line kinds this module writes and reads.
pub(crate) const GRAPH_KINDS: &[&str] = &[
    "relation_type",
    "entity",
    "edge",
    "quarantined_edge",
    "generated",
];

fn node_json(node: Node) -> Value {
    json!({"kind": node.kind.as_str(), "id": node.id})
}

/// Writes the graph's lines; returns how many.
pub(crate) fn export_graph(reader: &Reader<'_>, out: &mut dyn Write) -> Result<usize> {
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
    for t in reader.relation_types()?.into_iter().filter(|t| !t.builtin) {
        write(
            json!({"kind": "relation_type", "name": t.name, "weight": t.weight, "symmetric": t.symmetric, "description": t.description, "declared_at": t.declared_at}),
        )?;
    }
    // In id order, so a fresh brain gives them the same ids.
    let mut entities = reader.entities(None, 0)?;
    entities.sort_by_key(|e| e.id);
    for e in entities {
        let aliases = reader.aliases(e.id)?;
        write(
            json!({"kind": "entity", "id": e.id, "name": e.name, "type": e.entity_type, "key": e.key, "aliases": aliases, "created_at": e.created_at}),
        )?;
    }
    for entry in reader.edge_log()? {
        write(json!({
            "kind": "edge", "seq": entry.seq, "op": entry.op,
            "src": node_json(entry.key.src), "relation": entry.key.relation, "dst": node_json(entry.key.dst),
            "valid_from": entry.valid_from, "valid_to": entry.valid_to, "recorded_at": entry.recorded_at,
            "confidence": entry.confidence, "origin": entry.origin, "actor": entry.actor,
        }))?;
    }
    for q in reader.quarantined(false)? {
        write(
            json!({"kind": "quarantined_edge", "src": q.src, "relation": q.relation, "dst": q.dst, "valid_from": q.valid_from, "valid_to": q.valid_to, "confidence": q.confidence, "recorded_at": q.recorded_at, "reason": q.reason}),
        )?;
    }
    let member_hashes = reader.generated_member_hashes()?;
    for (id, generator, at) in reader.generated_records()? {
        let mut line =
            json!({"kind": "generated", "memory_id": id, "generator": generator, "marked_at": at});
        if let Some(hash) = member_hashes.get(&id) {
            line["member_hash"] = json!(hash);
        }
        write(line)?;
    }
    Ok(lines)
}

fn text<'v>(value: &'v Value, field: &str) -> Option<&'v str> {
    value.get(field).and_then(Value::as_str)
}

/// Reads the graph's lines back, after the memories: `id_map` maps exported record ids to the
/// ids they got. Each line gets its own outcome; a line that does not apply never stops the
/// others. A line the brain already holds is a no-op — an edge log entry saying the same (op,
/// ends, relation, time), a declared type as declared, a quarantined edge, a generated mark —
/// so importing the same file twice changes nothing.
pub(crate) fn import_graph(
    tx: &WriteTx<'_>,
    lines: &[(usize, Value)],
    id_map: &HashMap<i64, i64>,
    now: &str,
    actor: &str,
    report: &mut ImportReport,
) -> Result<()> {
    let mut state = ImportState {
        entity_map: HashMap::new(),
        logged: HashMap::new(),
    };
    // The log as it was before this import, as a multiset: each line of the file that says
    // what an entry already says uses that entry up, so a log that legitimately repeats an
    // entry is restored whole into a fresh brain and left alone on a second import.
    for entry in tx.reader().edge_log()? {
        let at = entry.valid_from.or(entry.valid_to).unwrap_or_default();
        *state
            .logged
            .entry(log_key(&entry.op, &entry.key, &at))
            .or_default() += 1;
    }
    for (line, value) in lines {
        let outcome = import_line(tx, value, id_map, &mut state, now, actor);
        record_line(report, *line, outcome)?;
    }
    Ok(())
}

/// What a graph import carries from line to line.
struct ImportState {
    /// Exported entity id → the id it has here.
    entity_map: HashMap<i64, i64>,
    /// Edge log entries the brain held before this import, by what they say, with a count.
    logged: HashMap<String, usize>,
}

/// What an edge log entry says, as one comparable string: op, ends, relation and its time.
fn log_key(op: &str, key: &EdgeKey, at: &str) -> String {
    format!(
        "{op}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{at}",
        key.src, key.relation, key.dst
    )
}

fn import_line(
    tx: &WriteTx<'_>,
    value: &Value,
    id_map: &HashMap<i64, i64>,
    state: &mut ImportState,
    now: &str,
    actor: &str,
) -> Result<(LineStatus, String)> {
    let entity_map = &mut state.entity_map;
    let invalid = |what: &str| EngineError::Invalid(format!("not a valid {what} line"));
    let record_id = |old: i64| -> Result<Option<i64>> {
        let id = id_map.get(&old).copied().unwrap_or(old);
        Ok(tx.reader().get(id)?.map(|_| id))
    };
    match text(value, "kind") {
        Some("relation_type") => {
            let name = text(value, "name").ok_or_else(|| invalid("relation type"))?;
            let name = cairn_core::graph::normalize_relation(name)
                .map_err(|e| EngineError::Invalid(e.to_string()))?;
            if builtin_relation(&name).is_some() {
                return Ok((
                    LineStatus::Noop,
                    format!("relation type {name} is built in"),
                ));
            }
            let weight = value
                .get("weight")
                .and_then(Value::as_f64)
                .unwrap_or(cairn_core::graph::DEFAULT_DECLARED_WEIGHT)
                .clamp(0.0, 1.0);
            let symmetric = value
                .get("symmetric")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let description = text(value, "description");
            let status = match tx.reader().relation_type(&name)? {
                Some(existing)
                    if existing.weight == weight
                        && existing.symmetric == symmetric
                        && (description.is_none()
                            || existing.description.as_deref() == description) =>
                {
                    return Ok((
                        LineStatus::Noop,
                        format!("relation type {name} is already declared so"),
                    ));
                }
                Some(_) => LineStatus::Updated,
                None => LineStatus::Added,
            };
            tx.declare_relation_type(
                &name,
                weight,
                symmetric,
                description,
                text(value, "declared_at").unwrap_or(now),
            )?;
            Ok((status, format!("relation type {name}")))
        }
        Some("entity") => {
            let name = text(value, "name").ok_or_else(|| invalid("entity"))?;
            let key = entity_key(name);
            if key.is_empty() {
                return Err(invalid("entity"));
            }
            let (id, status) = match tx.reader().entity_by_key(&key)? {
                Some(existing) => (existing.id, LineStatus::Noop),
                None => (
                    tx.insert_entity(
                        name,
                        text(value, "type").unwrap_or("thing"),
                        &key,
                        text(value, "created_at").unwrap_or(now),
                    )?,
                    LineStatus::Added,
                ),
            };
            if let Some(old) = value.get("id").and_then(Value::as_i64) {
                entity_map.insert(old, id);
            }
            for alias in value
                .get("aliases")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let alias_key = entity_key(alias);
                if !alias_key.is_empty() && tx.reader().entity_by_key(&alias_key)?.is_none() {
                    tx.add_alias(id, alias, &alias_key)?;
                }
            }
            Ok((status, format!("entity {name}")))
        }
        Some("edge") => {
            let node = |field: &str| -> Result<Option<Node>> {
                let end = value.get(field).ok_or_else(|| invalid("edge"))?;
                let id = end
                    .get("id")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| invalid("edge"))?;
                match end
                    .get("kind")
                    .and_then(Value::as_str)
                    .and_then(NodeKind::parse)
                {
                    Some(NodeKind::Record) => Ok(record_id(id)?.map(Node::record)),
                    Some(NodeKind::Entity) => Ok(entity_map
                        .get(&id)
                        .copied()
                        .or_else(|| tx.reader().entity(id).ok().flatten().map(|e| e.id))
                        .map(Node::entity)),
                    None => Err(invalid("edge")),
                }
            };
            let (Some(src), Some(dst)) = (node("src")?, node("dst")?) else {
                return Ok((
                    LineStatus::Refused,
                    "an end of this edge is not in the brain; skipped".to_string(),
                ));
            };
            let relation = text(value, "relation")
                .ok_or_else(|| invalid("edge"))?
                .to_string();
            if tx.reader().relation_type(&relation)?.is_none() {
                return Ok((
                    LineStatus::Refused,
                    format!("relation type {relation} is not declared; skipped"),
                ));
            }
            let op = text(value, "op")
                .and_then(EdgeOp::parse)
                .ok_or_else(|| invalid("edge"))?;
            let at = match op {
                EdgeOp::Assert => text(value, "valid_from"),
                EdgeOp::Invalidate => text(value, "valid_to"),
            }
            .ok_or_else(|| invalid("edge"))?;
            let key = EdgeKey { src, relation, dst };
            if let Some(count) = state
                .logged
                .get_mut(&log_key(op.as_str(), &key, at))
                .filter(|count| **count > 0)
            {
                *count -= 1;
                return Ok((
                    LineStatus::Noop,
                    format!(
                        "edge {} {} {}: the edge log already holds this entry",
                        key.src, key.relation, key.dst
                    ),
                ));
            }
            let recorded_at = text(value, "recorded_at").unwrap_or(now);
            let writer = EdgeWriter::new(tx, recorded_at, text(value, "actor").unwrap_or(actor))?;
            let confidence = value
                .get("confidence")
                .and_then(Value::as_f64)
                .unwrap_or(1.0);
            let (applied, _) = writer.apply(
                op,
                &key,
                at,
                confidence,
                text(value, "origin").unwrap_or("import"),
            )?;
            let status = if applied.changed() {
                LineStatus::Added
            } else {
                LineStatus::Noop
            };
            Ok((
                status,
                format!("edge {} {} {}", key.src, key.relation, key.dst),
            ))
        }
        Some("quarantined_edge") => {
            let field = |name: &str| {
                text(value, name)
                    .map(str::to_string)
                    .ok_or_else(|| invalid("quarantined edge"))
            };
            let row = QuarantineRow {
                id: 0,
                src: field("src")?,
                relation: field("relation")?,
                dst: field("dst")?,
                valid_from: field("valid_from")?,
                valid_to: text(value, "valid_to").map(str::to_string),
                confidence: value
                    .get("confidence")
                    .and_then(Value::as_f64)
                    .unwrap_or(1.0),
                recorded_at: text(value, "recorded_at").unwrap_or(now).to_string(),
                reason: text(value, "reason").unwrap_or("imported").to_string(),
                resolved_seq: None,
            };
            let same = |q: &QuarantineRow| {
                (&q.src, &q.relation, &q.dst, &q.valid_from, &q.valid_to)
                    == (
                        &row.src,
                        &row.relation,
                        &row.dst,
                        &row.valid_from,
                        &row.valid_to,
                    )
                    && q.recorded_at == row.recorded_at
            };
            if tx.reader().quarantined(true)?.iter().any(same) {
                return Ok((
                    LineStatus::Noop,
                    "this quarantined edge is already kept".to_string(),
                ));
            }
            tx.quarantine_edge(&row)?;
            Ok((LineStatus::Added, "quarantined edge".to_string()))
        }
        Some("generated") => {
            let old = value
                .get("memory_id")
                .and_then(Value::as_i64)
                .ok_or_else(|| invalid("generated"))?;
            let Some(id) = record_id(old)? else {
                return Ok((
                    LineStatus::Refused,
                    format!("record #{old} is not in the brain; skipped"),
                ));
            };
            let generator = text(value, "generator").unwrap_or("import");
            if tx
                .reader()
                .generated_records()?
                .iter()
                .any(|(marked, _, _)| *marked == id)
            {
                return Ok((
                    LineStatus::Noop,
                    format!("#{id} is already marked generated"),
                ));
            }
            let marked_at = text(value, "marked_at").unwrap_or(now);
            match text(value, "member_hash") {
                Some(hash) => tx.mark_generated_from(id, generator, hash, marked_at)?,
                None => tx.mark_generated(id, generator, marked_at)?,
            }
            Ok((LineStatus::Added, format!("#{id} marked generated")))
        }
        _ => Err(invalid("graph")),
    }
}
