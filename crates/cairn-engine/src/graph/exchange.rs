//! The graph in the JSONL exchange format: declared relation types, entities with aliases, the
//! whole edge log, quarantined edges and generated-record marks are exported, and read back by
//! `import` after every memory line (record ids remapped as the memories were).

use super::write::EdgeWriter;
use crate::exchange::{ImportReport, LineStatus, record};
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
/// others.
pub(crate) fn import_graph(
    tx: &WriteTx<'_>,
    lines: &[(usize, Value)],
    id_map: &HashMap<i64, i64>,
    now: &str,
    actor: &str,
    report: &mut ImportReport,
) -> Result<()> {
    let mut entity_map: HashMap<i64, i64> = HashMap::new();
    for (line, value) in lines {
        let outcome = import_line(tx, value, id_map, &mut entity_map, now, actor);
        match outcome {
            Ok((status, message)) => record(report, *line, status, None, Some(message)),
            Err(EngineError::Store(error)) => return Err(EngineError::Store(error)),
            Err(other) => record(
                report,
                *line,
                LineStatus::Error,
                None,
                Some(other.to_string()),
            ),
        }
    }
    Ok(())
}

fn import_line(
    tx: &WriteTx<'_>,
    value: &Value,
    id_map: &HashMap<i64, i64>,
    entity_map: &mut HashMap<i64, i64>,
    now: &str,
    actor: &str,
) -> Result<(LineStatus, String)> {
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
            tx.declare_relation_type(
                &name,
                weight,
                symmetric,
                text(value, "description"),
                text(value, "declared_at").unwrap_or(now),
            )?;
            Ok((LineStatus::Added, format!("relation type {name}")))
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
            let recorded_at = text(value, "recorded_at").unwrap_or(now);
            let writer = EdgeWriter::new(tx, recorded_at, text(value, "actor").unwrap_or(actor))?;
            let key = EdgeKey { src, relation, dst };
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
            tx.quarantine_edge(&QuarantineRow {
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
            })?;
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
