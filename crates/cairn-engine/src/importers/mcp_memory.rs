//! The MCP reference memory server's knowledge graph (`memory.jsonl`): one JSON object a line,
//! `{"type":"entity","name":…,"entityType":…,"observations":[…]}` or
//! `{"type":"relation","from":…,"to":…,"relationType":…}`.
//!
//! Each entity becomes one record: title = name, body = its observations as a list, tags = its
//! entity type. Each relation becomes a knowledge-graph edge (`Engine::import_source` writes
//! them after the records): an end that is an entity of the file is that entity's record, any
//! other name becomes a graph entity; a relation type cairn does not know is declared. An
//! unknown line type and a malformed line are reported.

use super::{Candidate, Parsed, ParsedRelation, id_part, read_source, unreadable};
use crate::Result;
use cairn_core::record::MemoryType;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

struct Entity {
    line: usize,
    entity_type: String,
    observations: Vec<String>,
}

fn memory_type_for(entity_type: &str) -> MemoryType {
    match entity_type.to_lowercase().as_str() {
        "preference" | "preferences" => MemoryType::Preference,
        "decision" => MemoryType::Decision,
        "event" | "meeting" | "conversation" => MemoryType::Episode,
        "procedure" | "howto" | "how-to" => MemoryType::Procedure,
        "incident" => MemoryType::Incident,
        _ => MemoryType::Fact,
    }
}

/// Reads the JSONL text of a knowledge graph.
pub fn parse(text: &str, label: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut order: Vec<String> = Vec::new();
    let mut entities: BTreeMap<String, Entity> = BTreeMap::new();
    let mut relations: Vec<(usize, String, String, String)> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = match serde_json::from_str(line.trim()) {
            Ok(value) => value,
            Err(error) => {
                parsed
                    .unmapped
                    .push(format!("line {number}: not valid JSON ({error}); skipped"));
                continue;
            }
        };
        let text_of = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        match value.get("type").and_then(Value::as_str) {
            Some("entity") => {
                let Some(name) = text_of("name").filter(|n| !n.trim().is_empty()) else {
                    parsed
                        .unmapped
                        .push(format!("line {number}: an entity without a name; skipped"));
                    continue;
                };
                let observations: Vec<String> = value
                    .get("observations")
                    .and_then(Value::as_array)
                    .map(|items| {
                        items
                            .iter()
                            .filter_map(|o| o.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                let entity_type = text_of("entityType").unwrap_or_else(|| "entity".into());
                match entities.get_mut(&name) {
                    Some(existing) => {
                        parsed.unmapped.push(format!(
                            "line {number}: entity {name:?} appears again (first on line {}); observations merged",
                            existing.line
                        ));
                        existing.observations.extend(observations);
                    }
                    None => {
                        order.push(name.clone());
                        entities.insert(
                            name,
                            Entity {
                                line: number,
                                entity_type,
                                observations,
                            },
                        );
                    }
                }
            }
            Some("relation") => match (text_of("from"), text_of("to"), text_of("relationType")) {
                (Some(from), Some(to), Some(relation)) => {
                    relations.push((number, from, to, relation))
                }
                _ => parsed.unmapped.push(format!(
                    "line {number}: a relation needs from, to and relationType; skipped"
                )),
            },
            other => parsed.unmapped.push(format!(
                "line {number}: unknown line type {:?} (expected entity or relation); skipped",
                other.unwrap_or("none")
            )),
        }
    }
    // An end that is an entity of this file is its record (by external id); any other name is
    // a graph entity, named as the records are titled (underscores as spaces).
    let end = |name: &str| {
        (
            name.replace('_', " "),
            entities.contains_key(name).then(|| external_id(name)),
        )
    };
    for (number, from, to, relation) in relations {
        let (from_name, from_record) = end(&from);
        let (to_name, to_record) = end(&to);
        parsed.relations.push(ParsedRelation {
            origin: format!("{label} line {number} ({from} {relation} {to})"),
            from_name,
            from_record,
            relation,
            to_name,
            to_record,
        });
    }
    for name in &order {
        let entity = &entities[name];
        let mut body: String = entity
            .observations
            .iter()
            .map(|o| format!("- {o}"))
            .collect::<Vec<_>>()
            .join("\n");
        if body.is_empty() {
            body = format!("{name} ({})", entity.entity_type);
        }
        parsed.candidates.push(Candidate {
            origin: format!("{label} line {} ({name})", entity.line),
            external_id: external_id(name),
            memory_type: memory_type_for(&entity.entity_type),
            title: Some(name.replace('_', " ")),
            body,
            summary: None,
            tags: vec![id_part(&entity.entity_type), "mcp-memory".into()],
            source: Some(format!("mcp memory server: {label}")),
            created_at: None,
        });
    }
    parsed
}

/// The external id of an entity's record: re-importing finds it again.
fn external_id(name: &str) -> String {
    format!("mcp-memory:entity:{name}")
}

pub fn read(path: &Path) -> Result<Parsed> {
    let text = read_source(path).map_err(|why| unreadable(path, why))?;
    Ok(parse(&text, &path.display().to_string()))
}
