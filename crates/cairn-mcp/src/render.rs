//! Tool results: human text for the model (stored text fenced and labeled as data with its
//! trust, docs/design.md §1.4) plus the same answer as structured content (a JSON object).

use cairn_core::brief::{DATA_CLOSE, DATA_NOTE, DATA_OPEN, fence_items, neutralize, one_line};
use cairn_core::memory::Memory;
use cairn_engine::graph::{
    ClustersAnswer, Direction, EdgeView, EdgesAnswer, EntityAdded, EntityView, GraphAnswer,
    NeighborsAnswer, RelateOutcome, RelateStatus, UnrelateOutcome, UnrelateStatus,
};
use cairn_engine::lifecycle::{AcceptReport, DreamView};
use cairn_engine::{EngineError, RecallAnswer, RememberOutcome, RememberStatus, ReviewReport};
use cairn_store::{ConflictRow, HistoryRow};
use serde_json::{Value, json};

/// One tool's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub text: String,
    /// Always a JSON object (structuredContent must be one).
    pub structured: Value,
    pub is_error: bool,
}

fn object(value: Value) -> Value {
    match value {
        Value::Object(_) => value,
        other => json!({"result": other}),
    }
}

pub fn plain(text: String, structured: Value) -> Reply {
    Reply {
        text,
        structured: object(structured),
        is_error: false,
    }
}

pub fn error(text: String, structured: Value) -> Reply {
    Reply {
        text,
        structured: object(structured),
        is_error: true,
    }
}

/// An engine error as a tool error the model can act on (the message says what to do).
pub fn engine_error(error: &EngineError) -> Reply {
    match error {
        EngineError::Refused {
            message,
            existing,
            ways_out,
        } => self::error(
            message.clone(),
            json!({"status": "refused", "error": message, "existing": existing, "ways_out": ways_out}),
        ),
        EngineError::Internal(message) => self::error(
            message.clone(),
            json!({"status": "error", "error": "internal error"}),
        ),
        other => self::error(
            other.to_string(),
            json!({"status": "error", "error": other.to_string(), "kind": cairn_service::errors::label(other.kind())}),
        ),
    }
}

/// A list of stored items, fenced; "none" when empty.
pub fn listed(what: &str, lines: &[String], structured: Value) -> Reply {
    if lines.is_empty() {
        return plain(format!("no {what}"), structured);
    }
    let items: Vec<String> = lines.iter().map(|l| one_line(l, 600)).collect();
    plain(format!("{DATA_NOTE}\n{}", fence_items(&items)), structured)
}

fn memory_line(memory: &Memory) -> String {
    let text = match &memory.title {
        Some(title) => format!("{title} — {}", memory.body),
        None => memory.body.clone(),
    };
    format!(
        "#{} {} · trust {} · {} · {}: {}",
        memory.id,
        memory.memory_type,
        memory.trust,
        memory.status,
        memory.project.as_deref().unwrap_or("personal"),
        one_line(&text, 600)
    )
}

/// A headline plus one record, fenced.
pub fn memory_reply(headline: &str, memory: &Memory, structured: Value) -> Reply {
    plain(
        format!("{headline}\n{}", fence_items(&[memory_line(memory)])),
        structured,
    )
}

pub fn remembered(outcome: &RememberOutcome) -> Reply {
    let structured = serde_json::to_value(outcome).unwrap_or_default();
    let mut text = outcome.message.clone();
    for warning in &outcome.warnings {
        text.push_str(&format!("\nnote: {warning}"));
    }
    if outcome.status == RememberStatus::Refused {
        return error(text, structured);
    }
    plain(text, structured)
}

pub fn recalled(answer: &RecallAnswer) -> Reply {
    let structured = serde_json::to_value(answer).unwrap_or_default();
    if answer.results.is_empty() {
        let note = answer
            .note
            .clone()
            .unwrap_or_else(|| "nothing found".into());
        return plain(note, structured);
    }
    let items: Vec<String> = answer
        .results
        .iter()
        .map(|r| {
            let text = match &r.title {
                Some(title) => format!("{title} — {}", r.body),
                None => r.body.clone(),
            };
            let mut line = format!(
                "#{} {} · trust {} · score {:.2} · {} · {}: {}",
                r.id,
                r.memory_type,
                r.trust,
                r.score_norm,
                r.scope,
                r.project.as_deref().unwrap_or("personal"),
                one_line(&text, 1_000)
            );
            if let Some(from) = r.superseded_from {
                line.push_str(&format!(" (matched #{from}, which this supersedes)"));
            }
            if !r.derived_from.is_empty() {
                let turns: Vec<String> = r.derived_from.iter().map(|id| format!("#{id}")).collect();
                line.push_str(&format!(" (extracted from turns {})", turns.join(", ")));
            }
            if let Some(freshness) = &r.freshness {
                line.push_str(&format!(" [freshness: {freshness}]"));
            }
            if r.review_due {
                line.push_str(" [review due]");
            }
            line
        })
        .collect();
    plain(format!("{DATA_NOTE}\n{}", fence_items(&items)), structured)
}

/// `structured` is `Engine::show_document`, the JSON `show --json` prints.
pub fn shown(
    memory: &Memory,
    history: &[HistoryRow],
    conflicts: &[ConflictRow],
    structured: Value,
) -> Reply {
    let mut text = format!(
        "#{} {} · trust {} · {} · scope {} · {} · importance {} · confidence {}\n",
        memory.id,
        memory.memory_type,
        memory.trust,
        memory.status,
        memory.scope,
        memory.project.as_deref().unwrap_or("personal"),
        memory.importance,
        memory.confidence
    );
    text.push_str(DATA_NOTE);
    text.push('\n');
    text.push_str(&format!(
        "{DATA_OPEN} source=\"cairn\" id=\"{}\">\n",
        memory.id
    ));
    if let Some(title) = &memory.title {
        text.push_str(&neutralize(title));
        text.push('\n');
    }
    text.push_str(&neutralize(&memory.body));
    text.push('\n');
    text.push_str(DATA_CLOSE);
    text.push('\n');
    for conflict in conflicts {
        text.push_str(&format!(
            "conflict: #{} contradicts #{} ({})\n",
            conflict.memory_id,
            conflict.other_id,
            one_line(&conflict.reason, 200)
        ));
    }
    if let Some(next) = memory.superseded_by {
        text.push_str(&format!("superseded by #{next}\n"));
    }
    for version in history {
        text.push_str(&format!(
            "v{} {} {} by {}\n",
            version.version, version.at, version.op, version.actor
        ));
    }
    plain(text, structured)
}

pub fn reviewed(report: &ReviewReport) -> Reply {
    let mut lines: Vec<String> = report
        .due
        .iter()
        .map(|m| {
            format!(
                "review due {}: {}",
                m.review_at.as_deref().unwrap_or("").get(..10).unwrap_or(""),
                memory_line(m)
            )
        })
        .collect();
    lines.extend(report.conflicts.iter().map(|c| {
        format!(
            "conflict: #{} contradicts #{} ({})",
            c.memory_id, c.other_id, c.reason
        )
    }));
    let structured = serde_json::to_value(report).unwrap_or_default();
    if lines.is_empty() {
        return plain("nothing to review".into(), structured);
    }
    listed("reviews", &lines, structured)
}

// ---- the knowledge graph -------------------------------------------------------------------
//
// Entity names, record titles and relation endpoints all come from stored text (extraction
// reads memory bodies), so every line that names a node is fenced as data; the headlines carry
// only counts, times and the walk's parameters.

/// A headline, then `lines` fenced as stored data (nothing fenced when there are none).
fn headed(headline: String, lines: &[String], structured: Value) -> Reply {
    if lines.is_empty() {
        return plain(headline, structured);
    }
    let items: Vec<String> = lines.iter().map(|l| one_line(l, 600)).collect();
    plain(
        format!("{headline}\n{DATA_NOTE}\n{}", fence_items(&items)),
        structured,
    )
}

pub fn related(outcome: &RelateOutcome) -> Reply {
    let structured = serde_json::to_value(outcome).unwrap_or_default();
    let headline = match outcome.status {
        RelateStatus::Asserted => "related",
        RelateStatus::AlreadyAsserted => "already related: nothing changed",
        RelateStatus::Quarantined => "kept in quarantine until both ends exist",
    };
    let lines = match &outcome.edge {
        Some(edge) => vec![edge.line()],
        None => vec![outcome.message.clone()],
    };
    headed(headline.to_string(), &lines, structured)
}

pub fn neighbors(answer: &NeighborsAnswer) -> Reply {
    let structured = serde_json::to_value(answer).unwrap_or_default();
    let direction = match answer.direction {
        Direction::In => "incoming edges: what depends on it (breaks if it changes)",
        Direction::Out => "outgoing edges: what it depends on",
        Direction::Both => "both directions",
    };
    let mut headline = format!(
        "blast radius — {direction}, depth {}, as of {}: {} reached{}",
        answer.depth,
        answer.as_of,
        answer.reached,
        if answer.truncated {
            " (walk cut at its budget)"
        } else {
            ""
        }
    );
    if answer.neighbors.len() < answer.reached {
        headline.push_str(&format!(
            "; {} shown (limit: 0 shows all)",
            answer.neighbors.len()
        ));
    }
    let mut lines = vec![format!("origin: {}", answer.origin.describe())];
    for n in &answer.neighbors {
        let edge = if n.edge == "out" {
            format!("{} {} {}", n.via.name, n.relation, n.node.name)
        } else {
            format!("{} {} {}", n.node.name, n.relation, n.via.name)
        };
        lines.push(format!(
            "{:.3} hop {} {} · via: {edge}",
            n.score,
            n.hop,
            n.node.describe()
        ));
    }
    if let Some(note) = &answer.note {
        lines.push(note.clone());
    }
    headed(headline, &lines, structured)
}

pub fn entities(list: &[EntityView]) -> Reply {
    let structured = json!({ "entities": list });
    if list.is_empty() {
        return plain(
            "no entities yet (they are extracted from what is remembered, or added with `cairn entity add`)".into(),
            structured,
        );
    }
    let lines: Vec<String> = list
        .iter()
        .map(|e| {
            let aliases = if e.aliases.is_empty() {
                String::new()
            } else {
                format!(" · aliases: {}", e.aliases.join(", "))
            };
            format!(
                "{} ({}) · {} mentions{aliases}",
                e.name, e.entity_type, e.mentions
            )
        })
        .collect();
    headed(
        format!("{} entities, most mentioned first", list.len()),
        &lines,
        structured,
    )
}

pub fn graph(answer: &GraphAnswer) -> Reply {
    let structured = serde_json::to_value(answer).unwrap_or_default();
    let mut headline = format!(
        "graph as of {}: {} edges between {} records and {} entities",
        answer.as_of, answer.edges, answer.records, answer.entities
    );
    for count in &answer.by_relation {
        headline.push_str(&format!("\n  {:<14} {}", count.relation, count.edges));
    }
    if let Some(note) = &answer.note {
        headline.push('\n');
        headline.push_str(note);
    }
    if !answer.listed.is_empty() && answer.listed.len() < answer.edges {
        headline.push_str(&format!(
            "\nfirst {} of {} edges (limit: 0 lists all):",
            answer.listed.len(),
            answer.edges
        ));
    }
    let lines: Vec<String> = answer.listed.iter().map(EdgeView::line).collect();
    headed(headline, &lines, structured)
}

pub fn unrelated(outcome: &UnrelateOutcome) -> Reply {
    let structured = serde_json::to_value(outcome).unwrap_or_default();
    let headline = match outcome.status {
        UnrelateStatus::Invalidated => "unrelated: the edge no longer holds from then on",
        UnrelateStatus::NothingOpen => "no open edge to close: nothing changed",
    };
    headed(headline.to_string(), &[outcome.edge.line()], structured)
}

pub fn edges(answer: &EdgesAnswer) -> Reply {
    let structured = serde_json::to_value(answer).unwrap_or_default();
    let headline = format!(
        "{} edge(s) valid as of {}",
        answer.edges.len(),
        answer.as_of
    );
    // The node's name is stored text (an entity's name, a record's title): fenced with the rest.
    let mut lines = vec![format!("node: {}", answer.node.describe())];
    lines.extend(answer.edges.iter().map(EdgeView::line));
    if let Some(intervals) = &answer.intervals {
        lines.extend(
            intervals
                .iter()
                .map(|edge| format!("interval: {}", edge.line())),
        );
    }
    if let Some(history) = &answer.history {
        lines.extend(history.iter().map(|entry| {
            format!(
                "log #{} {} {}: {} {} {} ({})",
                entry.seq,
                entry.recorded_at,
                entry.op,
                entry.src.name,
                entry.relation,
                entry.dst.name,
                entry.origin
            )
        }));
    }
    headed(headline, &lines, structured)
}

pub fn entity_added(added: &EntityAdded) -> Reply {
    let structured = serde_json::to_value(added).unwrap_or_default();
    let aliases = if added.aliases.is_empty() {
        String::new()
    } else {
        format!(" · aliases: {}", added.aliases.join(", "))
    };
    headed(
        format!(
            "entity {} ({} edge(s) left quarantine)",
            added.status, added.promoted_from_quarantine
        ),
        &[format!("{} ({}){aliases}", added.name, added.entity_type)],
        structured,
    )
}

pub fn clusters(answer: &ClustersAnswer) -> Reply {
    let structured = serde_json::to_value(answer).unwrap_or_default();
    let mut headline = format!(
        "{} cluster(s) among {} records (label propagation {} after {} round(s))",
        answer.found,
        answer.records,
        if answer.converged {
            "converged"
        } else {
            "stopped at the round limit"
        },
        answer.rounds
    );
    if answer.found > answer.clusters.len() {
        headline.push_str(&format!("; {} shown (max)", answer.clusters.len()));
    }
    let mut lines = Vec::new();
    for cluster in &answer.clusters {
        lines.push(format!(
            "cluster #{} · {} records · member_hash {}",
            cluster.id,
            cluster.size,
            &cluster.member_hash[..cluster.member_hash.len().min(16)]
        ));
        lines.extend(
            cluster
                .members
                .iter()
                .map(|m| format!("  #{} {}", m.id, m.title)),
        );
    }
    headed(headline, &lines, structured)
}

pub fn dream_list(runs: &[DreamView]) -> Reply {
    let structured = json!({ "dreams": runs });
    if runs.is_empty() {
        return plain(
            "no dreams yet: `cairn dream` makes a proposal set".into(),
            structured,
        );
    }
    // Ids, times, statuses and counts only: no stored text.
    let lines: Vec<String> = runs
        .iter()
        .map(|run| {
            format!(
                "{} {} {} · {} proposals{}",
                run.id,
                run.created_at,
                run.status,
                run.report["proposals"],
                if run.pruned.is_some() {
                    " (details pruned)"
                } else {
                    ""
                }
            )
        })
        .collect();
    plain(lines.join("\n"), structured)
}

/// What one proposal would do, in a line (labels are stored text: the caller fences it).
fn proposal_line(kind: &str, payload: &Value) -> String {
    match kind {
        "decay" => format!(
            "#{} {}: {} ({})",
            payload["id"],
            payload["action"].as_str().unwrap_or(""),
            payload["label"].as_str().unwrap_or(""),
            payload["reason"].as_str().unwrap_or("")
        ),
        "merge" => {
            let merged: Vec<String> = payload["merged"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| format!("#{}", m["id"]))
                .collect();
            format!(
                "keep #{} {}, archive near duplicates {}",
                payload["survivor"],
                payload["survivor_label"].as_str().unwrap_or(""),
                merged.join(", ")
            )
        }
        "forget" => format!(
            "#{} {} (covered by #{})",
            payload["id"],
            payload["label"].as_str().unwrap_or(""),
            payload["twin"]
        ),
        _ => format!(
            "{}: {}",
            payload["title"].as_str().unwrap_or(""),
            payload["body"].as_str().unwrap_or("")
        ),
    }
}

pub fn dream(view: &DreamView) -> Reply {
    let structured = serde_json::to_value(view).unwrap_or_default();
    let headline = format!(
        "dream {} · {} · made {} from the snapshot of {} · {} proposal(s)",
        view.id,
        view.status,
        view.created_at,
        view.snapshot_at,
        view.proposals.len()
    );
    let lines: Vec<String> = view
        .proposals
        .iter()
        .map(|p| {
            format!(
                "{}. {} {}{}",
                p.seq,
                p.kind,
                proposal_line(&p.kind, &p.payload),
                p.outcome
                    .as_deref()
                    .map(|o| format!(" → {o}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    headed(headline, &lines, structured)
}

pub fn dream_accepted(report: &AcceptReport) -> Reply {
    let structured = serde_json::to_value(report).unwrap_or_default();
    let mut headline = format!(
        "dream {}: {} applied, {} skipped ({})",
        report.id,
        report.applied.len(),
        report.skipped.len(),
        report.status
    );
    if let Some(compacted) = &report.compacted {
        headline.push_str(&format!("\ncompaction: {compacted}"));
    }
    let lines: Vec<String> = report
        .applied
        .iter()
        .chain(&report.skipped)
        .map(|o| format!("{}. {} {}: {}", o.seq, o.kind, o.outcome, o.detail))
        .collect();
    headed(headline, &lines, structured)
}
