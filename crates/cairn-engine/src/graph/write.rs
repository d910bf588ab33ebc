//! Writing the graph: appending to the edge log (and keeping the derived intervals in step),
//! linking a record to the entities its text mentions, supersession edges, and the user's
//! `relate` / `unrelate` / entity / relation-type commands.

use super::{EdgeView, endpoint_text, resolve_endpoint, unresolved};
use crate::remember::{RememberOutcome, RememberRequest, RememberStatus};
use crate::{Engine, EngineError, Result};
use cairn_core::graph::extract::{self, entity_key};
use cairn_core::graph::fold::{self, Applied, EdgeOp};
use cairn_core::graph::{COOCCURRENCE_CONFIDENCE, Node, normalize_relation};
use cairn_core::memory::Memory;
use cairn_core::time::{format_ts, parse_time};
use cairn_store::{EdgeKey, NewEvent, NewLogEntry, QuarantineRow, WriteTx};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Among a record's first this many entities (in order of first mention), each gets a
/// low-confidence `relates` edge to the next one: at most 4 co-occurrence edges per record,
/// which keeps the write path cheap and links neighbouring mentions rather than every pair.
pub const COOCCURRENCE_WINDOW: usize = 5;

/// Appends edge operations inside one write transaction. `recorded_at` never goes backwards,
/// so appending in sequence order is folding in `recorded_at` order.
pub(crate) struct EdgeWriter<'t, 'c> {
    tx: &'t WriteTx<'c>,
    recorded_at: String,
    actor: String,
}

impl<'t, 'c> EdgeWriter<'t, 'c> {
    pub(crate) fn new(tx: &'t WriteTx<'c>, now: &str, actor: &str) -> Result<EdgeWriter<'t, 'c>> {
        let last = tx.reader().last_recorded_at()?;
        let recorded_at = match last {
            Some(last) if last.as_str() > now => last,
            _ => now.to_string(),
        };
        Ok(EdgeWriter {
            tx,
            recorded_at,
            actor: actor.to_string(),
        })
    }

    /// Applies one operation through the fold's own step; appends it to the log only when it
    /// changes something. Returns what it did and the log sequence number when appended.
    pub(crate) fn apply(
        &self,
        op: EdgeOp,
        key: &EdgeKey,
        at: &str,
        confidence: f64,
        origin: &str,
    ) -> Result<(Applied, Option<i64>)> {
        let rows = self.tx.reader().intervals_of_key(key)?;
        if op == EdgeOp::Invalidate
            && let Some(open) = rows.iter().rev().find(|r| r.invalidate_seq.is_none())
            && at < open.valid_from.as_str()
        {
            return Err(EngineError::Invalid(format!(
                "{} {} {} is valid from {}; it cannot end at {at}, before it started — use --at {} (or later) to end it",
                key.src, key.relation, key.dst, open.valid_from, open.valid_from
            )));
        }
        let mut intervals: Vec<_> = rows.iter().map(|r| r.to_interval()).collect();
        // The sequence is not known before the append; the step only needs it to label the
        // interval, and the row is written with the real one below.
        let applied = fold::apply(&mut intervals, i64::MAX, op, &at.to_string(), confidence);
        if !applied.changed() {
            return Ok((applied, None));
        }
        let seq = self.tx.append_edge_log(&NewLogEntry {
            op,
            key,
            at,
            recorded_at: &self.recorded_at,
            confidence,
            origin,
            actor: &self.actor,
        })?;
        match applied {
            Applied::Opened => {
                self.tx.open_interval(key, at, confidence, seq)?;
            }
            Applied::Closed => {
                let open = rows
                    .iter()
                    .rev()
                    .find(|r| r.invalidate_seq.is_none())
                    .expect("a close has an open interval");
                self.tx.close_interval(open.id, at, seq)?;
            }
            Applied::AlreadyOpen | Applied::NothingOpen => {}
        }
        Ok((applied, Some(seq)))
    }

    /// Opens an interval for an edge known to have none open (a new record's mentions).
    fn open_fresh(&self, key: &EdgeKey, at: &str, confidence: f64, origin: &str) -> Result<i64> {
        let seq = self.tx.append_edge_log(&NewLogEntry {
            op: EdgeOp::Assert,
            key,
            at,
            recorded_at: &self.recorded_at,
            confidence,
            origin,
            actor: &self.actor,
        })?;
        self.tx.open_interval(key, at, confidence, seq)?;
        Ok(seq)
    }

    /// The entity with this key, created (as `kind`) when missing. True when created.
    fn entity_for(&self, name: &str, kind: &str, key: &str) -> Result<(i64, bool)> {
        if let Some(entity) = self.tx.reader().entity_by_key(key)? {
            return Ok((entity.id, false));
        }
        Ok((
            self.tx.insert_entity(name, kind, key, &self.recorded_at)?,
            true,
        ))
    }
}

/// Links a record to what its text mentions: `mentions` edges to its entities (created when
/// new), invalidates mentions its text no longer has, and low-confidence `relates` edges
/// between co-occurring entities. Valid from the record's `valid_from`.
pub(crate) fn link_record(
    tx: &WriteTx<'_>,
    memory: &Memory,
    now: &str,
    actor: &str,
    fresh: bool,
) -> Result<usize> {
    let found = extract::extract(memory.title.as_deref(), &memory.body, &memory.tags);
    let writer = EdgeWriter::new(tx, now, actor)?;
    let record = Node::record(memory.id);
    let mut wanted: Vec<Node> = Vec::with_capacity(found.len());
    let mut created_any = false;
    for entity in &found {
        let (id, created) = writer.entity_for(&entity.name, entity.kind.as_str(), &entity.key)?;
        created_any |= created;
        wanted.push(Node::entity(id));
    }
    let from = memory.valid_from.as_str();
    let from = if from.is_empty() { now } else { from };
    // A record written for the first time has no edges yet (a reused id's were all closed by
    // its hard delete), so its mentions open without looking for open intervals first.
    let current = if fresh {
        Vec::new()
    } else {
        tx.reader().open_targets(record, "mentions")?
    };
    let mut written = 0;
    for (target, _) in &current {
        if !wanted.contains(target) {
            let key = EdgeKey {
                src: record,
                relation: "mentions".into(),
                dst: *target,
            };
            let at = if now < from { from } else { now };
            writer.apply(EdgeOp::Invalidate, &key, at, 1.0, "extraction")?;
            written += 1;
        }
    }
    for target in &wanted {
        if current.iter().any(|(t, _)| t == target) {
            continue;
        }
        let key = EdgeKey {
            src: record,
            relation: "mentions".into(),
            dst: *target,
        };
        if fresh {
            writer.open_fresh(&key, from, 1.0, "extraction")?;
            written += 1;
        } else if writer
            .apply(EdgeOp::Assert, &key, from, 1.0, "extraction")?
            .0
            .changed()
        {
            written += 1;
        }
    }
    let window = &wanted[..wanted.len().min(COOCCURRENCE_WINDOW)];
    for pair in window.windows(2) {
        let (src, dst) = if pair[0] < pair[1] {
            (pair[0], pair[1])
        } else {
            (pair[1], pair[0])
        };
        let key = EdgeKey {
            src,
            relation: "relates".into(),
            dst,
        };
        let (applied, _) = writer.apply(
            EdgeOp::Assert,
            &key,
            from,
            COOCCURRENCE_CONFIDENCE,
            "cooccurrence",
        )?;
        if applied.changed() {
            written += 1;
        }
    }
    if created_any {
        promote_quarantined(tx, &writer)?;
    }
    Ok(written)
}

/// The relation the code map writes from a file's entity to the files it uses (docs/codemap.md).
pub const CODE_USES: &str = "uses";
/// The relation the code map writes from an identifier's entity to the files defining it.
pub const CODE_DEFINED_IN: &str = "defined_in";

/// One entity the code map links: what its open `uses` / `defined_in` edges should point at
/// (path entities, by the mapped file's path; created when new).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeLinks {
    pub entity: i64,
    /// (relation, mapped path).
    pub targets: Vec<(&'static str, String)>,
}

/// Brings the code map's edges of each linked entity to what the map says, through the edge
/// log (origin `codemap`): edges it no longer has are invalidated now, new ones asserted from
/// now. The two relation types are declared on first use. Returns the log entries written.
pub(crate) fn sync_code_links(
    tx: &WriteTx<'_>,
    links: &[CodeLinks],
    now: &str,
    actor: &str,
) -> Result<usize> {
    if links.iter().all(|l| l.targets.is_empty()) && tx.reader().relation_type(CODE_USES)?.is_none()
    {
        return Ok(0);
    }
    for (name, weight, description) in [
        (
            CODE_USES,
            1.0,
            "code: file A uses definitions of file B (written by the code map)",
        ),
        (
            CODE_DEFINED_IN,
            0.8,
            "code: identifier A is defined in file B (written by the code map)",
        ),
    ] {
        if tx.reader().relation_type(name)?.is_none() {
            tx.declare_relation_type(name, weight, false, Some(description), now)?;
        }
    }
    let writer = EdgeWriter::new(tx, now, actor)?;
    let mut written = 0;
    for link in links {
        let src = Node::entity(link.entity);
        for relation in [CODE_USES, CODE_DEFINED_IN] {
            let mut wanted: Vec<Node> = Vec::new();
            for (_, path) in link.targets.iter().filter(|(r, _)| *r == relation) {
                let (id, _) = writer.entity_for(path, "path", &entity_key(path))?;
                if id != link.entity && !wanted.contains(&Node::entity(id)) {
                    wanted.push(Node::entity(id));
                }
            }
            let current = tx.reader().open_targets(src, relation)?;
            for (target, _) in &current {
                if !wanted.contains(target) {
                    let key = EdgeKey {
                        src,
                        relation: relation.into(),
                        dst: *target,
                    };
                    writer.apply(EdgeOp::Invalidate, &key, now, 1.0, "codemap")?;
                    written += 1;
                }
            }
            for target in wanted {
                if current.iter().any(|(t, _)| *t == target) {
                    continue;
                }
                let key = EdgeKey {
                    src,
                    relation: relation.into(),
                    dst: target,
                };
                if writer
                    .apply(EdgeOp::Assert, &key, now, 1.0, "codemap")?
                    .0
                    .changed()
                {
                    written += 1;
                }
            }
        }
    }
    Ok(written)
}

/// Links a stored record by id (import).
pub(crate) fn link_record_id(
    tx: &WriteTx<'_>,
    id: i64,
    now: DateTime<Utc>,
    actor: &str,
    fresh: bool,
) -> Result<()> {
    if let Some(memory) = tx.reader().get(id)? {
        link_record(tx, &memory, &format_ts(now), actor, fresh)?;
    }
    Ok(())
}

/// The graph side of `remember`, in its transaction: link what was stored or updated to its
/// entities (when extraction is on), and record a `supersedes` edge for a supersession.
pub(crate) fn after_remember(
    tx: &WriteTx<'_>,
    request: &RememberRequest,
    outcome: &RememberOutcome,
    now: DateTime<Utc>,
    actor: &str,
    extract: bool,
) -> Result<()> {
    let stored = matches!(
        outcome.status,
        RememberStatus::Added | RememberStatus::Flagged | RememberStatus::Updated
    );
    let (true, Some(id)) = (stored, outcome.id) else {
        return Ok(());
    };
    let Some(memory) = tx.reader().get(id)? else {
        return Ok(());
    };
    let now_text = format_ts(now);
    if extract {
        let fresh = outcome.status != RememberStatus::Updated;
        link_record(tx, &memory, &now_text, actor, fresh)?;
    }
    if outcome.status != RememberStatus::Updated
        && let Some(old) = request.supersedes
    {
        record_supersedes(tx, id, old, &memory.valid_from, &now_text, actor)?;
    }
    Ok(())
}

/// The relation from an extracted record to each turn it was extracted from (`cairn extract`
/// with `capture.extract = auto`, `cairn eval locomo --facts`): declared in a brain the first
/// time extraction stores a record (weight 0.3, as `mentions`: a turn supports a fact, it is
/// not a dependency).
pub const DERIVED_FROM: &str = "derived_from";

/// Links an extracted record to the turns it was extracted from: one `derived_from` edge per
/// turn, valid from `now`; an edge already open is left as it is.
pub(crate) fn record_derived_from(
    tx: &WriteTx<'_>,
    record: i64,
    turns: &[i64],
    now: &str,
    actor: &str,
) -> Result<()> {
    if tx.reader().relation_type(DERIVED_FROM)?.is_none() {
        tx.declare_relation_type(
            DERIVED_FROM,
            0.3,
            false,
            Some("record A was extracted from turn B (written by extraction)"),
            now,
        )?;
    }
    let writer = EdgeWriter::new(tx, now, actor)?;
    for turn in turns {
        let key = EdgeKey {
            src: Node::record(record),
            relation: DERIVED_FROM.into(),
            dst: Node::record(*turn),
        };
        writer.apply(EdgeOp::Assert, &key, now, 1.0, "extract")?;
    }
    Ok(())
}

/// `new` supersedes `old`: a `supersedes` edge valid from `at`.
pub(crate) fn record_supersedes(
    tx: &WriteTx<'_>,
    new: i64,
    old: i64,
    at: &str,
    now: &str,
    actor: &str,
) -> Result<()> {
    let writer = EdgeWriter::new(tx, now, actor)?;
    let key = EdgeKey {
        src: Node::record(new),
        relation: "supersedes".into(),
        dst: Node::record(old),
    };
    writer.apply(EdgeOp::Assert, &key, at, 1.0, "supersede")?;
    Ok(())
}

/// A record deleted for good: every open edge touching it is invalidated (the log keeps them).
pub(crate) fn unlink_record(tx: &WriteTx<'_>, id: i64, now: &str, actor: &str) -> Result<()> {
    let writer = EdgeWriter::new(tx, now, actor)?;
    for row in tx.reader().intervals_touching(Node::record(id))? {
        if row.invalidate_seq.is_none() {
            let at = if now < row.valid_from.as_str() {
                row.valid_from.as_str()
            } else {
                now
            };
            writer.apply(EdgeOp::Invalidate, &row.key, at, row.confidence, "delete")?;
        }
    }
    Ok(())
}

/// Retries quarantined edges whose ends now resolve; returns how many became edges.
fn promote_quarantined(tx: &WriteTx<'_>, writer: &EdgeWriter<'_, '_>) -> Result<usize> {
    let mut promoted = 0;
    for row in tx.reader().quarantined(false)? {
        let (Ok(Some(src)), Ok(Some(dst))) = (
            resolve_endpoint(&tx.reader(), &row.src, None),
            resolve_endpoint(&tx.reader(), &row.dst, None),
        ) else {
            continue;
        };
        let key = EdgeKey {
            src,
            relation: row.relation.clone(),
            dst,
        };
        let (_, seq) = writer.apply(
            EdgeOp::Assert,
            &key,
            &row.valid_from,
            row.confidence,
            "quarantine",
        )?;
        if let Some(to) = &row.valid_to {
            writer.apply(EdgeOp::Invalidate, &key, to, row.confidence, "quarantine")?;
        }
        let seq = match seq {
            Some(seq) => seq,
            None => tx
                .reader()
                .intervals_of_key(&key)?
                .last()
                .map_or(0, |r| r.assert_seq),
        };
        tx.resolve_quarantined(row.id, seq)?;
        promoted += 1;
    }
    Ok(promoted)
}

/// A request to assert an edge.
#[derive(Debug, Clone, Default)]
pub struct RelateRequest {
    /// `#42` or `42` for a record, a name or alias for an entity.
    pub src: String,
    pub relation: String,
    pub dst: String,
    /// Valid from (default now).
    pub from: Option<String>,
    /// Valid until (exclusive); recorded as an invalidate right after the assert.
    pub to: Option<String>,
    /// Keep an edge whose end does not resolve in quarantine instead of refusing it.
    pub allow_dangling: bool,
    /// 0..=1, default 1.
    pub confidence: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RelateStatus {
    /// A new validity interval was opened.
    Asserted,
    /// The edge was already valid (open); nothing changed.
    AlreadyAsserted,
    /// An end did not resolve; the edge waits in quarantine.
    Quarantined,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RelateOutcome {
    pub status: RelateStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edge: Option<EdgeView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantine_id: Option<i64>,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UnrelateStatus {
    Invalidated,
    /// There was no open interval to close: nothing changed.
    NothingOpen,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UnrelateOutcome {
    pub status: UnrelateStatus,
    pub edge: EdgeView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EntityAdded {
    pub status: String,
    pub id: i64,
    pub name: String,
    #[serde(rename = "type")]
    pub entity_type: String,
    pub aliases: Vec<String>,
    pub promoted_from_quarantine: usize,
    pub message: String,
}

fn unresolved_refusal(name: &str) -> EngineError {
    let what = match super::record_number(name) {
        Some(id) => format!("no record #{id} in this brain (or it belongs to another project)"),
        None => format!(
            "nothing in this brain is called {name:?} (not a record id, no entity name or alias)"
        ),
    };
    EngineError::Refused {
        message: format!(
            "{what}; nothing was written — create the entity with `cairn entity add {name:?} --type TYPE`, or pass --allow-dangling to keep the edge in quarantine until it exists"
        ),
        existing: None,
        ways_out: vec![
            format!("cairn entity add {name:?} --type TYPE"),
            "--allow-dangling".to_string(),
        ],
    }
}

fn check_confidence(confidence: Option<f64>) -> Result<f64> {
    let value = confidence.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&value) || value.is_nan() {
        return Err(EngineError::Invalid(format!(
            "confidence {value} is out of range: use a number from 0 to 1"
        )));
    }
    Ok(value)
}

fn check_entity_type(given: &str) -> Result<String> {
    let lowered = given.trim().to_lowercase();
    let valid = !lowered.is_empty()
        && lowered.len() <= 32
        && lowered.starts_with(|c: char| c.is_ascii_lowercase())
        && lowered
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if valid {
        Ok(lowered)
    } else {
        Err(EngineError::Invalid(format!(
            "{given:?} cannot be an entity type: use up to 32 lowercase letters, digits, `_` or `-`, starting with a letter (e.g. service, person)"
        )))
    }
}

fn log_graph_event(
    tx: &WriteTx<'_>,
    op: &str,
    at: &str,
    project: &str,
    actor: &str,
    detail: serde_json::Value,
    record: Option<i64>,
) -> Result<String> {
    let detail = json!({"op": op, "at": at, "extra": detail});
    let receipt = cairn_core::receipt::receipt(&detail);
    tx.append_event(
        &NewEvent {
            at,
            op,
            memory_id: record,
            project: Some(project),
            detail: &detail,
            actor,
        },
        &receipt,
    )?;
    Ok(receipt)
}

/// A relate request with its relation, confidence and times checked.
struct PreparedRelate {
    relation: String,
    confidence: f64,
    from: String,
    to: Option<String>,
}

fn prepare_relate(
    request: &RelateRequest,
    known: &[String],
    now: DateTime<Utc>,
) -> Result<PreparedRelate> {
    let relation =
        normalize_relation(&request.relation).map_err(|e| EngineError::Invalid(e.to_string()))?;
    if !known.contains(&relation) {
        return Err(EngineError::Refused {
            message: format!(
                "unknown relation type {relation:?} (known: {}); nothing was written — declare it first with `cairn relation-type declare {relation}`",
                known.join(", ")
            ),
            existing: None,
            ways_out: vec![format!("cairn relation-type declare {relation}")],
        });
    }
    let confidence = check_confidence(request.confidence)?;
    let from = match request.from.as_deref() {
        Some(at) => format_ts(parse_time(at, now)?),
        None => format_ts(now),
    };
    let to = request
        .to
        .as_deref()
        .map(|at| parse_time(at, now).map(format_ts))
        .transpose()?;
    if let Some(to) = &to
        && to.as_str() <= from.as_str()
    {
        return Err(EngineError::Invalid(format!(
            "--to {to} is not after --from {from}: validity is [from, to), so the edge would never hold"
        )));
    }
    Ok(PreparedRelate {
        relation,
        confidence,
        from,
        to,
    })
}

/// One relate inside the write transaction.
fn relate_in(
    tx: &WriteTx<'_>,
    request: &RelateRequest,
    prepared: PreparedRelate,
    project: &str,
    actor: &str,
    now_text: &str,
) -> Result<RelateOutcome> {
    let PreparedRelate {
        relation,
        confidence,
        from,
        to,
    } = prepared;
    let allow_dangling = request.allow_dangling;
    let project = project.to_string();
    let now_text = now_text.to_string();
    let reader = tx.reader();
    let src = resolve_endpoint(&reader, &request.src, Some(&project))?;
    let dst = resolve_endpoint(&reader, &request.dst, Some(&project))?;
    let (src, dst) = match (src, dst) {
        (Some(src), Some(dst)) => (src, dst),
        (src, _) => {
            let missing = if src.is_none() {
                &request.src
            } else {
                &request.dst
            };
            if !allow_dangling {
                return Err(unresolved_refusal(missing.trim()));
            }
            let id = tx.quarantine_edge(&QuarantineRow {
                id: 0,
                src: request.src.trim().to_string(),
                relation: relation.clone(),
                dst: request.dst.trim().to_string(),
                valid_from: from.clone(),
                valid_to: to.clone(),
                confidence,
                recorded_at: now_text.clone(),
                reason: format!("{:?} did not resolve", missing.trim()),
                resolved_seq: None,
            })?;
            log_graph_event(
                tx,
                "relate",
                &now_text,
                &project,
                actor,
                json!({"quarantined": id, "src": request.src, "relation": relation, "dst": request.dst}),
                None,
            )?;
            return Ok(RelateOutcome {
                status: RelateStatus::Quarantined,
                edge: None,
                seq: None,
                quarantine_id: Some(id),
                message: format!(
                    "{:?} does not name a record or entity yet; the edge is kept in quarantine (#{id}) and becomes real when it does (`cairn entity add`)",
                    missing.trim()
                ),
            });
        }
    };
    if src == dst {
        return Err(EngineError::Invalid(format!(
            "{} cannot {relation} itself: an edge needs two different ends",
            endpoint_text(&tx.reader(), src)?
        )));
    }
    let key = EdgeKey {
        src,
        relation: relation.clone(),
        dst,
    };
    let writer = EdgeWriter::new(tx, &now_text, actor)?;
    let (applied, seq) = writer.apply(EdgeOp::Assert, &key, &from, confidence, "user")?;
    if applied == Applied::AlreadyOpen && to.is_some() {
        return Err(EngineError::Invalid(format!(
            "{} {relation} {} is already valid (open-ended); end it with `cairn unrelate … --at {}` instead of asserting it again with --to",
            endpoint_text(&tx.reader(), src)?,
            endpoint_text(&tx.reader(), dst)?,
            to.as_deref().unwrap_or_default()
        )));
    }
    if let Some(to) = &to {
        writer.apply(EdgeOp::Invalidate, &key, to, confidence, "user")?;
    }
    let record = [src, dst]
        .iter()
        .find(|n| n.kind == cairn_core::graph::NodeKind::Record)
        .map(|n| n.id);
    let edge = EdgeView::from_key(&tx.reader(), &key, from.clone(), to.clone(), confidence)?;
    let shown = edge.describe();
    let (status, message) = match applied {
        Applied::Opened => {
            log_graph_event(
                tx,
                "relate",
                &now_text,
                &project,
                actor,
                json!({"seq": seq, "edge": shown}),
                record,
            )?;
            (
                RelateStatus::Asserted,
                match &to {
                    Some(to) => format!("{shown}, valid from {from} until {to}"),
                    None => format!("{shown}, valid from {from}"),
                },
            )
        }
        _ => (
            RelateStatus::AlreadyAsserted,
            format!("{shown} already holds; nothing changed"),
        ),
    };
    Ok(RelateOutcome {
        status,
        edge: Some(edge),
        seq,
        quarantine_id: None,
        message,
    })
}

impl Engine {
    /// Asserts `src relation dst` from `from` (default now), optionally until `to`.
    pub fn relate(&mut self, request: &RelateRequest) -> Result<RelateOutcome> {
        let mut results = self.relate_many(std::slice::from_ref(request))?;
        results.pop().expect("one answer per request")
    }

    /// Asserts many edges in one transaction, with one answer per request: a refused or
    /// invalid request never stops the others (a store failure rolls back all of them).
    pub fn relate_many(
        &mut self,
        requests: &[RelateRequest],
    ) -> Result<Vec<Result<RelateOutcome>>> {
        self.ensure_writable("relate")?;
        let now = self.now();
        let now_text = format_ts(now);
        let known: Vec<String> = self.relation_types()?.into_iter().map(|r| r.name).collect();
        let prepared: Vec<Result<PreparedRelate>> = requests
            .iter()
            .map(|request| prepare_relate(request, &known, now))
            .collect();
        let project = self.context.project.clone();
        let actor = self.context.actor.clone();
        self.store.write(|tx| {
            let mut answers = Vec::with_capacity(prepared.len());
            for (request, prepared) in requests.iter().zip(prepared) {
                let answer =
                    prepared.and_then(|p| relate_in(tx, request, p, &project, &actor, &now_text));
                match answer {
                    Err(EngineError::Store(error)) => return Err(EngineError::Store(error)),
                    other => answers.push(other),
                }
            }
            Ok(answers)
        })
    }

    /// Closes the open interval of `src relation dst` at `at` (default now). No open interval:
    /// nothing changes, and the answer says so.
    pub fn unrelate(
        &mut self,
        src: &str,
        relation: &str,
        dst: &str,
        at: Option<&str>,
    ) -> Result<UnrelateOutcome> {
        self.ensure_writable("unrelate")?;
        let now = self.now();
        let now_text = format_ts(now);
        let relation =
            normalize_relation(relation).map_err(|e| EngineError::Invalid(e.to_string()))?;
        let at = match at {
            Some(at) => format_ts(parse_time(at, now)?),
            None => now_text.clone(),
        };
        let project = self.context.project.clone();
        let actor = self.context.actor.clone();
        self.store.write(|tx| {
            let reader = tx.reader();
            let resolve = |name: &str| -> Result<Node> {
                resolve_endpoint(&reader, name, Some(&project))?.ok_or_else(|| unresolved(name))
            };
            let key = EdgeKey { src: resolve(src)?, relation: relation.clone(), dst: resolve(dst)? };
            let writer = EdgeWriter::new(tx, &now_text, &actor)?;
            let (applied, seq) = writer.apply(EdgeOp::Invalidate, &key, &at, 1.0, "user")?;
            let edge = EdgeView::from_key(&tx.reader(), &key, String::new(), Some(at.clone()), 1.0)?;
            let shown = edge.describe();
            if applied == Applied::Closed {
                let record = [key.src, key.dst].iter().find(|n| n.kind == cairn_core::graph::NodeKind::Record).map(|n| n.id);
                log_graph_event(tx, "unrelate", &now_text, &project, &actor, json!({"seq": seq, "edge": shown}), record)?;
                let interval = tx.reader().intervals_of_key(&key)?.into_iter().find(|r| r.invalidate_seq == seq);
                let edge = match interval {
                    Some(row) => EdgeView::from_key(&tx.reader(), &key, row.valid_from, row.valid_to, row.confidence)?,
                    None => edge,
                };
                Ok(UnrelateOutcome {
                    status: UnrelateStatus::Invalidated,
                    message: format!("{shown} no longer holds from {at} (history kept: `cairn edges {} --history`)", endpoint_text(&tx.reader(), key.src)?),
                    edge,
                    seq,
                })
            } else {
                Ok(UnrelateOutcome {
                    status: UnrelateStatus::NothingOpen,
                    message: format!("{shown} is not currently asserted (no open interval); nothing changed"),
                    edge,
                    seq: None,
                })
            }
        })
    }

    /// Creates an entity (or adds aliases to the existing one with that name), then turns any
    /// quarantined edge that now resolves into a real one.
    pub fn add_entity(
        &mut self,
        name: &str,
        entity_type: &str,
        aliases: &[String],
    ) -> Result<EntityAdded> {
        self.ensure_writable("entity add")?;
        let clean = cairn_core::text::sanitize(name)?.text;
        let clean = clean.trim().to_string();
        let key = entity_key(&clean);
        if key.is_empty() || clean.chars().count() > 200 {
            return Err(EngineError::Invalid(format!(
                "{name:?} cannot be an entity name: give 1–200 characters"
            )));
        }
        if clean.trim_start_matches('#').parse::<i64>().is_ok() {
            return Err(EngineError::Invalid(format!(
                "{name:?} looks like a record id (#42 and 42 name records); give the entity a name with a letter in it"
            )));
        }
        let entity_type = check_entity_type(entity_type)?;
        let now_text = format_ts(self.now());
        let actor = self.context.actor.clone();
        let project = self.context.project.clone();
        self.store.write(|tx| {
            let reader = tx.reader();
            let (id, status) = match reader.entity_by_key(&key)? {
                Some(existing) => {
                    if existing.entity_type != entity_type {
                        tx.set_entity_type(existing.id, &entity_type)?;
                    }
                    (existing.id, "exists")
                }
                None => (
                    tx.insert_entity(&clean, &entity_type, &key, &now_text)?,
                    "added",
                ),
            };
            let mut skipped = Vec::new();
            for alias in aliases {
                let alias = alias.trim();
                let alias_key = entity_key(alias);
                if alias_key.is_empty() || alias_key == key {
                    continue;
                }
                match tx.reader().entity_by_key(&alias_key)? {
                    Some(other) if other.id != id => {
                        skipped.push(format!("{alias:?} already names {}", other.name))
                    }
                    Some(_) => {}
                    None => {
                        tx.add_alias(id, alias, &alias_key)?;
                    }
                }
            }
            let writer = EdgeWriter::new(tx, &now_text, &actor)?;
            let promoted = promote_quarantined(tx, &writer)?;
            log_graph_event(
                tx,
                "entity",
                &now_text,
                &project,
                &actor,
                json!({"id": id, "name": clean, "type": entity_type}),
                None,
            )?;
            let entity = tx.reader().entity(id)?.expect("just written");
            let mut message = if status == "added" {
                format!("added entity {} ({})", entity.name, entity.entity_type)
            } else {
                format!(
                    "entity {} ({}) already exists",
                    entity.name, entity.entity_type
                )
            };
            if promoted > 0 {
                message.push_str(&format!(
                    "; {promoted} quarantined edge(s) now resolve and were asserted"
                ));
            }
            for skip in &skipped {
                message.push_str(&format!("; alias skipped: {skip}"));
            }
            Ok(EntityAdded {
                status: status.to_string(),
                id,
                name: entity.name,
                entity_type: entity.entity_type,
                aliases: tx.reader().aliases(id)?,
                promoted_from_quarantine: promoted,
                message,
            })
        })
    }

    /// Declares a relation type (weight in the blast radius, symmetric or not). Built-in types
    /// cannot be redefined.
    pub fn declare_relation_type(
        &mut self,
        name: &str,
        weight: Option<f64>,
        symmetric: bool,
        description: Option<&str>,
    ) -> Result<cairn_store::RelationTypeRow> {
        self.ensure_writable("relation-type declare")?;
        let name = normalize_relation(name).map_err(|e| EngineError::Invalid(e.to_string()))?;
        if cairn_core::graph::builtin_relation(&name).is_some() {
            return Err(EngineError::Invalid(format!(
                "{name} is a built-in relation type; its weight is fixed (see `cairn relation-type list`)"
            )));
        }
        let weight = weight.unwrap_or(cairn_core::graph::DEFAULT_DECLARED_WEIGHT);
        if !(0.0..=1.0).contains(&weight) || weight.is_nan() {
            return Err(EngineError::Invalid(format!(
                "weight {weight} is out of range: use a number from 0 to 1 (requires is 1.0, relates 0.5)"
            )));
        }
        let now_text = format_ts(self.now());
        let project = self.context.project.clone();
        let actor = self.context.actor.clone();
        self.store.write(|tx| {
            tx.declare_relation_type(&name, weight, symmetric, description, &now_text)?;
            log_graph_event(
                tx,
                "relation-type",
                &now_text,
                &project,
                &actor,
                json!({"name": name, "weight": weight, "symmetric": symmetric}),
                None,
            )?;
            Ok::<_, EngineError>(())
        })?;
        Ok(self
            .store
            .reader()?
            .relation_type(&name)?
            .expect("just declared"))
    }

    pub fn relation_types(&self) -> Result<Vec<cairn_store::RelationTypeRow>> {
        Ok(self.store.reader()?.relation_types()?)
    }

    /// Re-extracts the entities of every record in the brain (every project) and brings its
    /// `mentions` up to date: for brains written before the graph existed, or after the
    /// extractor changed. Idempotent; a page of 1,000 records per transaction. Returns
    /// (records read, edge operations written).
    pub fn relink_records(&mut self) -> Result<(usize, usize)> {
        self.ensure_writable("entity relink")?;
        let now_text = format_ts(self.now());
        let actor = self.context.actor.clone();
        let mut after = None;
        let (mut records, mut written) = (0usize, 0usize);
        loop {
            let page = self.store.reader()?.list(&cairn_store::ListFilter {
                after_id: after,
                limit: 1000,
                ..cairn_store::ListFilter::default()
            })?;
            let Some(last) = page.last() else { break };
            after = Some(last.id);
            records += page.len();
            written += self.store.write(|tx| {
                let mut count = 0;
                for memory in &page {
                    count += link_record(tx, memory, &now_text, &actor, false)?;
                }
                Ok::<_, EngineError>(count)
            })?;
        }
        Ok((records, written))
    }

    /// Marks a record as generated by consolidation: it never feeds clustering.
    pub fn mark_generated(&mut self, id: i64, generator: &str) -> Result<()> {
        self.ensure_writable("mark generated")?;
        let now_text = format_ts(self.now());
        self.store.write(|tx| {
            tx.reader().get(id)?.ok_or(EngineError::NotFound { id })?;
            tx.mark_generated(id, generator, &now_text)?;
            Ok::<_, EngineError>(())
        })
    }

    /// Turns entity extraction on the write path on or off for this engine (benchmarks measure
    /// its cost; everything else leaves it on).
    pub fn set_entity_extraction(&mut self, on: bool) {
        self.extract_entities = on;
    }
}
