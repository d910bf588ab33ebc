//! `cairn eval locomo`: retrieval quality on LoCoMo through the paths users use.
//!
//! For each conversation: a fresh brain in a temporary directory, one `episode` per turn
//! (`<speaker>: <text>` plus ` [image: <caption>]`, created at its session date plus the turn's
//! index in seconds, `external_id` = the dia_id) written by `import_jsonl` and embedded by the
//! same indexing `cairn import` runs; then every question of categories 1–4 asked through
//! `Engine::recall` with `as_of` one day after the conversation's last session, once per mode.
//! Scoring follows `../shared/eval/locomo/README.md`.
//!
//! With `--store postgres://…` (or `CAIRN_STORE`), each conversation's brain is also copied by
//! `cairn migrate`'s code to a fresh database of its own on that server, the same questions
//! are asked there through recall on PostgreSQL (rows `MODE@postgres`, beside the SQLite rows
//! of the same run), and the database is dropped.

use crate::output::print_json;
use crate::settings::Settings;
use anyhow::{Context as _, Result, bail};
use cairn_engine::exchange::ImportOptions;
use cairn_engine::{Context, Engine, Mode, RecallRequest, SemanticConfig};
use cairn_store::migrate::{Endpoint, migrate};
use cairn_store::postgres::PgTarget;
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// LoCoMo turn retrieval: recall@k, recall_all@k, NDCG@10, per category, latency, RSS.
    #[command(
        after_help = "Of the global options, --json (the report as JSON) and --model-dir \
(with CAIRN_EMBEDDER and CAIRN_MODEL: the embedder of the semantic and hybrid modes) apply. \
--db and --project do not: each conversation is ingested into its own brain in a temporary \
directory, under the conversation's id as project."
    )]
    Locomo(Box<LocomoArgs>),
}

#[derive(Debug, Args)]
pub struct LocomoArgs {
    /// The LoCoMo JSON file (e.g. ../shared/eval/locomo/locomo-dev.json).
    #[arg(long, value_name = "FILE")]
    data: PathBuf,
    /// Cut-offs for recall@k and recall_all@k.
    #[arg(long, value_delimiter = ',', default_value = "5,10,25,50")]
    k: Vec<usize>,
    /// Modes to compare in this run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "lexical,semantic,hybrid",
        value_parser = crate::values::mode()
    )]
    mode: Vec<Mode>,
    /// Write the full report as JSON here.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Only the first N conversations (quick checks).
    #[arg(long)]
    conversations: Option<usize>,
    /// Tuning of the semantic leg (defaults are the shipped values): preceding turns an
    /// episode is embedded with.
    #[arg(long)]
    context_turns: Option<usize>,
    /// Following turns an episode is embedded with.
    #[arg(long)]
    context_after: Option<usize>,
    /// RRF weights `LEXICAL,SEMANTIC`.
    #[arg(long, value_delimiter = ',')]
    weights: Option<Vec<f64>>,
    /// Semantic-only candidates enter within this rank of the semantic list (0: never).
    #[arg(long)]
    vector_only_rank: Option<usize>,
    /// Semantic-only candidates need at least this cosine similarity (-1: no floor; default:
    /// the floor measured for the model).
    #[arg(long, allow_hyphen_values = true)]
    vector_only_floor: Option<f64>,
    /// The RRF constant.
    #[arg(long)]
    rrf_k: Option<f64>,
    /// Conversation context on the lexical side: `BEFORE,AFTER` fractions of the BM25 of the
    /// turn before / after an episode that it also scores (0,0: off).
    #[arg(long, value_delimiter = ',')]
    lexical_context: Option<Vec<f64>>,
    /// Relevance factor of an episode whose speaker the query names (1: off).
    #[arg(long)]
    speaker_boost: Option<f64>,
    /// Diversity in the first ten places of hybrid and semantic answers (MMR lambda, 0: off).
    #[arg(long)]
    diversity: Option<f64>,
    /// Relevance factor of a record dated in a period the question names (1: off).
    #[arg(long)]
    date_boost: Option<f64>,
    /// Lexical pseudo-relevance feedback: weight of the expansion words' BM25 (0: off).
    #[arg(long)]
    lexical_feedback: Option<f64>,
    /// The semantic weight follows the lists' agreement per query: × (1 − this × (1 − share of
    /// the first ten lexical hits among the first ten semantic ones)) (0: off).
    #[arg(long)]
    agreement: Option<f64>,
    /// The semantic weight follows the semantic leg's confidence per query: × clamp((best
    /// cosine − reference) / this, 0, 1) (0: off).
    #[arg(long)]
    confidence: Option<f64>,
    /// What the best cosine is measured against: `floor` (the vector-only floor) or `median`
    /// (the semantic candidates' median cosine).
    #[arg(long, value_name = "floor|median")]
    confidence_reference: Option<String>,
    /// Two-level retrieval: RRF weight of a third list, conversation windows around the best
    /// fused candidates ranked by the sum of their turns' fused scores (0: off; hybrid only).
    #[arg(long)]
    window_weight: Option<f64>,
    /// Episodes on each side of a window's centre.
    #[arg(long)]
    window_turns: Option<usize>,
    /// Window similarity on the semantic leg: the best semantic candidates also score the
    /// cosine of their window's mean vector, with this many episodes on each side (0: off).
    #[arg(long)]
    window_similarity: Option<usize>,
    /// Where lexical feedback reads its words: `lexical` (the best lexical hits) or `fused`
    /// (the best fused candidates).
    #[arg(long, value_name = "lexical|fused")]
    feedback_source: Option<String>,
    /// Extra rows over the same ingest, each the run's settings with some changed:
    /// `KEY=VALUE[;KEY=VALUE…]` with keys mode (hybrid, semantic, lexical), weights
    /// (`LEXICAL/SEMANTIC`), confidence, confidence_reference, window_weight, window_turns,
    /// agreement, diversity, window_similarity, lexical_feedback, feedback_source, graph_weight
    /// (the knowledge graph's list), graph_bridge and graph_neighbours (1 or 0); e.g. `--variant 'confidence=0.05'
    /// --variant 'confidence=0.1;confidence_reference=median'`. Repeatable.
    #[arg(long)]
    variant: Vec<String>,
    /// Extra hybrid rows over the same ingest, to compare fusion settings in one run:
    /// `LEXICAL_WEIGHT:SEMANTIC_WEIGHT:VECTOR_ONLY_RANK[:VECTOR_ONLY_FLOOR]` (rank `all` = no
    /// bound, floor -1 = none), e.g. `--fusion 1:0.5:all,1:1:10,1:1:all:0.8`.
    #[arg(long, value_delimiter = ',')]
    fusion: Vec<String>,
    /// A persistent embedding cache (created if missing): vectors the model produced, keyed by
    /// model, passage/query and text hash, so experiments do not re-embed unchanged texts.
    /// Results are identical with or without it.
    #[arg(long, value_name = "FILE")]
    cache: Option<PathBuf>,
    /// Write each question's ranked turns per mode here (JSON lines), for error analysis.
    #[arg(long, value_name = "FILE")]
    details: Option<PathBuf>,
    /// Also measure with extracted facts: `observations` stores LoCoMo's per-session
    /// observations through the extraction path (validated against the session's turns, stored
    /// with trust captured and confidence inferred, linked to their supporting turns), then
    /// asks every question again; a fact in the answer counts its supporting turns at its rank.
    /// Adds a `MODE+facts` row per mode.
    #[arg(long, value_name = "SOURCE", value_parser = ["observations"])]
    facts: Option<String>,
}

/// A `--variant` row: the run's settings with the named ones changed.
fn variant_row(spec: &str, base: &SemanticConfig) -> Result<Row> {
    let mut config = base.clone();
    let mut mode = Mode::Hybrid;
    for part in spec.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = part.split_once('=') else {
            bail!("--variant {spec:?}: expected KEY=VALUE[;KEY=VALUE…], got {part:?}");
        };
        let (key, value) = (key.trim(), value.trim());
        let number = || -> Result<f64> {
            value
                .parse::<f64>()
                .with_context(|| format!("--variant {spec:?}: {key} needs a number, got {value:?}"))
        };
        match key {
            "mode" => {
                mode = value
                    .parse()
                    .map_err(|e| anyhow::anyhow!("--variant {spec:?}: {e}"))?
            }
            "weights" => {
                let Some((lexical, semantic)) = value.split_once('/') else {
                    bail!("--variant {spec:?}: weights are LEXICAL/SEMANTIC, got {value:?}");
                };
                config.lexical_weight = lexical.parse().context("lexical weight")?;
                config.semantic_weight = semantic.parse().context("semantic weight")?;
            }
            "confidence" => config.confidence = number()?,
            "confidence_reference" => {
                config.confidence_reference = value
                    .parse()
                    .map_err(|e: String| anyhow::anyhow!("--variant {spec:?}: {e}"))?;
            }
            "window_weight" => config.window_weight = number()?,
            "window_turns" => {
                config.window_turns = value.parse().with_context(|| {
                    format!("--variant {spec:?}: window_turns needs a count, got {value:?}")
                })?;
            }
            "agreement" => config.agreement = number()?,
            "diversity" => config.diversity = number()?,
            "window_similarity" => {
                config.window_similarity = value.parse().with_context(|| {
                    format!("--variant {spec:?}: window_similarity needs a count, got {value:?}")
                })?;
            }
            "lexical_feedback" => config.lexical_feedback = number()?,
            "feedback_source" => {
                config.feedback_source = value
                    .parse()
                    .map_err(|e: String| anyhow::anyhow!("--variant {spec:?}: {e}"))?;
            }
            "graph_weight" => config.graph_weight = number()?,
            "graph_bridge" => config.graph_bridge = switch(spec, key, value)?,
            "graph_neighbours" => config.graph_neighbours = switch(spec, key, value)?,
            _ => bail!(
                "--variant {spec:?}: unknown key {key:?} (mode, weights, confidence, confidence_reference, window_weight, window_turns, agreement, diversity, window_similarity, lexical_feedback, feedback_source, graph_weight, graph_bridge, graph_neighbours)"
            ),
        }
    }
    let mode_name = serde_json::to_value(mode)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    Ok(Row {
        label: format!("{mode_name}[{spec}]"),
        mode,
        config: Some(config),
    })
}

/// A `--variant` switch: `1`/`on`/`true` or `0`/`off`/`false`.
fn switch(spec: &str, key: &str, value: &str) -> Result<bool> {
    match value {
        "1" | "on" | "true" => Ok(true),
        "0" | "off" | "false" => Ok(false),
        _ => bail!("--variant {spec:?}: {key} is on or off (1 or 0), got {value:?}"),
    }
}

/// One row of the report: a mode, and for extra hybrid rows their fusion settings.
struct Row {
    label: String,
    mode: Mode,
    config: Option<SemanticConfig>,
}

fn fusion_row(spec: &str, base: &SemanticConfig) -> Result<Row> {
    let parts: Vec<&str> = spec.split(':').collect();
    let (lexical, semantic, rank, floor) = match parts.as_slice() {
        [lexical, semantic, rank] => (lexical, semantic, rank, None),
        [lexical, semantic, rank, floor] => (lexical, semantic, rank, Some(floor)),
        _ => bail!("--fusion {spec:?}: expected LEXICAL_WEIGHT:SEMANTIC_WEIGHT:RANK[:FLOOR]"),
    };
    let mut config = base.clone();
    config.lexical_weight = lexical.parse().context("lexical weight")?;
    config.semantic_weight = semantic.parse().context("semantic weight")?;
    config.vector_only_rank = if *rank == "all" {
        usize::MAX
    } else {
        rank.parse().context("vector-only rank")?
    };
    if let Some(floor) = floor {
        config.vector_only_floor = Some(floor.parse().context("vector-only floor")?);
    }
    Ok(Row {
        label: format!("hybrid[{spec}]"),
        mode: Mode::Hybrid,
        config: Some(config),
    })
}

struct Question {
    text: String,
    answer: String,
    evidence: Vec<String>,
    category: u64,
}

struct Conversation {
    id: String,
    lines: String,
    as_of: String,
    questions: Vec<Question>,
    turns: usize,
    /// The dia id of each imported line, in order.
    dia_ids: Vec<String>,
    /// Per session: its capture session id, the end of its turns, and its observations
    /// (text, supporting dia ids).
    sessions: Vec<SessionFacts>,
}

struct SessionFacts {
    session: String,
    ends_at: chrono::NaiveDateTime,
    observations: Vec<(String, Vec<String>)>,
}

/// A session's observations as LoCoMo writes them: `{speaker: [[text, "D1:3" | ["D1:3", …]],
/// …]}`; evidence that names no turn is dropped (and the observation with it, when none is
/// left).
fn observations_of(value: &Value) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let Some(speakers) = value.as_object() else {
        return out;
    };
    for items in speakers.values().filter_map(Value::as_array) {
        for item in items {
            let Some(text) = item.get(0).and_then(Value::as_str) else {
                continue;
            };
            let evidence = match item.get(1) {
                Some(Value::Array(ids)) => evidence_ids(ids),
                Some(one @ Value::String(_)) => evidence_ids(std::slice::from_ref(one)),
                _ => Vec::new(),
            };
            if !evidence.is_empty() {
                out.push((text.to_string(), evidence));
            }
        }
    }
    out
}

fn parse_session_date(text: &str) -> Result<chrono::NaiveDateTime> {
    chrono::NaiveDateTime::parse_from_str(text.trim(), "%I:%M %p on %d %B, %Y")
        .with_context(|| format!("unreadable session date {text:?}"))
}

/// Evidence ids as LoCoMo writes them, some malformed (`D8:6; D9:17`, `D`): split on `;`/`,`,
/// keep what names a turn.
fn evidence_ids(raw: &[Value]) -> Vec<String> {
    let mut ids = Vec::new();
    for item in raw.iter().filter_map(Value::as_str) {
        for part in item.split([';', ',']) {
            let part = part.trim();
            let valid = part
                .strip_prefix('D')
                .and_then(|rest| rest.split_once(':'))
                .is_some_and(|(a, b)| {
                    !a.is_empty()
                        && !b.is_empty()
                        && a.bytes().all(|c| c.is_ascii_digit())
                        && b.bytes().all(|c| c.is_ascii_digit())
                });
            if valid {
                ids.push(part.to_string());
            }
        }
    }
    ids
}

fn load(path: &PathBuf) -> Result<Vec<Conversation>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let data: Vec<Value> = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a LoCoMo JSON list", path.display()))?;
    let mut conversations = Vec::new();
    for sample in &data {
        let id = sample["sample_id"].as_str().unwrap_or("conv").to_string();
        let conversation = &sample["conversation"];
        let mut lines = String::new();
        let mut last: Option<chrono::NaiveDateTime> = None;
        let mut turns = 0;
        let mut dia_ids = Vec::new();
        let mut sessions = Vec::new();
        let mut session = 1;
        while let Some(list) = conversation[format!("session_{session}")].as_array() {
            let date_text = conversation[format!("session_{session}_date_time")]
                .as_str()
                .unwrap_or_default();
            let date = parse_session_date(date_text)?;
            last = Some(last.map_or(date, |l| l.max(date)));
            let session_id = format!("{id}-s{session}");
            for (index, turn) in list.iter().enumerate() {
                let mut body = format!(
                    "{}: {}",
                    turn["speaker"].as_str().unwrap_or("?"),
                    turn["text"].as_str().unwrap_or("")
                );
                if let Some(caption) = turn["blip_caption"].as_str() {
                    body.push_str(&format!(" [image: {caption}]"));
                }
                let at = date + chrono::Duration::seconds(index as i64);
                // The source a client's turn capture gives (`turn of session ID`): what
                // extraction reads a session's turns by. Not indexed, not embedded.
                let line = json!({
                    "type": "episode",
                    "body": body,
                    "external_id": turn["dia_id"],
                    "created_at": at.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
                    "project": id,
                    "source": format!("turn of session {session_id}"),
                });
                lines.push_str(&line.to_string());
                lines.push('\n');
                dia_ids.push(turn["dia_id"].as_str().unwrap_or_default().to_string());
                turns += 1;
            }
            sessions.push(SessionFacts {
                session: session_id,
                ends_at: date + chrono::Duration::seconds(list.len() as i64),
                observations: observations_of(
                    &sample["observation"][format!("session_{session}_observation")],
                ),
            });
            session += 1;
        }
        let Some(last) = last else { continue };
        let as_of = (last + chrono::Duration::days(1))
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let questions = sample["qa"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|qa| {
                let category = qa["category"].as_u64()?;
                if !(1..=4).contains(&category) {
                    return None;
                }
                let evidence = evidence_ids(qa["evidence"].as_array()?);
                (!evidence.is_empty()).then(|| Question {
                    text: qa["question"].as_str().unwrap_or("").to_string(),
                    answer: match &qa["answer"] {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    },
                    evidence,
                    category,
                })
            })
            .collect();
        conversations.push(Conversation {
            id,
            lines,
            as_of,
            questions,
            turns,
            dia_ids,
            sessions,
        });
    }
    Ok(conversations)
}

#[derive(Default)]
struct Tally {
    questions: usize,
    recall: BTreeMap<usize, f64>,
    recall_all: BTreeMap<usize, f64>,
    ndcg10: f64,
    by_category: BTreeMap<u64, (usize, f64)>,
    latencies_ms: Vec<f64>,
    degraded: usize,
}

impl Tally {
    fn add(&mut self, ks: &[usize], ranked: &[String], question: &Question) {
        let evidence: HashSet<&str> = question.evidence.iter().map(String::as_str).collect();
        self.questions += 1;
        for &k in ks {
            let hits = ranked
                .iter()
                .take(k)
                .filter(|id| evidence.contains(id.as_str()))
                .collect::<HashSet<_>>()
                .len();
            *self.recall.entry(k).or_default() += hits as f64 / evidence.len() as f64;
            *self.recall_all.entry(k).or_default() += f64::from(u8::from(hits == evidence.len()));
        }
        let dcg: f64 = ranked
            .iter()
            .take(10)
            .enumerate()
            .filter(|(_, id)| evidence.contains(id.as_str()))
            .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
            .sum();
        let ideal: f64 = (0..evidence.len().min(10))
            .map(|i| 1.0 / ((i + 2) as f64).log2())
            .sum();
        self.ndcg10 += dcg / ideal;
        let at10 = ranked
            .iter()
            .take(10)
            .filter(|id| evidence.contains(id.as_str()))
            .collect::<HashSet<_>>()
            .len() as f64
            / evidence.len() as f64;
        let entry = self.by_category.entry(question.category).or_default();
        entry.0 += 1;
        entry.1 += at10;
    }

    fn report(&self) -> Value {
        let n = self.questions.max(1) as f64;
        // The benchmarks' one percentile definition (nearest rank); 0 when nothing was asked.
        let percentile = |p: f64| -> f64 {
            if self.latencies_ms.is_empty() {
                return 0.0;
            }
            round3(cairn_core::stats::percentile(&self.latencies_ms, p))
        };
        let mut out = serde_json::Map::new();
        out.insert("questions".into(), json!(self.questions));
        for (k, total) in &self.recall {
            out.insert(format!("recall@{k}"), json!(round3(total / n)));
        }
        for (k, total) in &self.recall_all {
            out.insert(format!("recall_all@{k}"), json!(round3(total / n)));
        }
        out.insert("ndcg@10".into(), json!(round3(self.ndcg10 / n)));
        let names = [
            (1, "multi-hop"),
            (2, "temporal"),
            (3, "open-domain"),
            (4, "single-hop"),
        ];
        let categories: serde_json::Map<String, Value> = self
            .by_category
            .iter()
            .map(|(category, (count, total))| {
                let name = names
                    .iter()
                    .find(|(c, _)| c == category)
                    .map_or("other", |(_, n)| n);
                (
                    format!("{category}-{name}"),
                    json!({"questions": count, "recall@10": round3(total / *count as f64)}),
                )
            })
            .collect();
        out.insert("recall@10_by_category".into(), Value::Object(categories));
        out.insert("query_ms_p50".into(), json!(percentile(50.0)));
        out.insert("query_ms_p95".into(), json!(percentile(95.0)));
        out.insert("degraded_answers".into(), json!(self.degraded));
        Value::Object(out)
    }
}

/// What storing the observations did, over every conversation.
#[derive(Default)]
struct FactsTally {
    sessions: usize,
    observations: usize,
    /// Observations whose every supporting dia id names no imported turn (not handed over).
    unmapped: usize,
    report: cairn_engine::ExtractReport,
    secs: f64,
}

/// Stores a conversation's observations through the extraction path, each session's with the
/// engine's clock just after that session (a fact is extracted once its session ended), and
/// returns the dia id of every imported turn by record id.
fn store_observations(
    engine: &mut Engine,
    conversation: &Conversation,
    lines: &[cairn_engine::exchange::LineOutcome],
    tally: &mut FactsTally,
) -> Result<std::collections::HashMap<i64, String>> {
    let mut id_of = std::collections::HashMap::new();
    let mut dia_of = std::collections::HashMap::new();
    for outcome in lines {
        if let (Some(id), Some(dia)) = (outcome.id, conversation.dia_ids.get(outcome.line - 1)) {
            id_of.insert(dia.clone(), id);
            dia_of.insert(id, dia.clone());
        }
    }
    let base = engine.context().clone();
    for session in &conversation.sessions {
        if session.observations.is_empty() {
            continue;
        }
        tally.sessions += 1;
        let mut candidates = Vec::new();
        for (text, evidence) in &session.observations {
            tally.observations += 1;
            let turns: Vec<i64> = evidence
                .iter()
                .filter_map(|dia| id_of.get(dia).copied())
                .collect();
            if turns.is_empty() {
                tally.unmapped += 1;
                continue;
            }
            candidates.push(json!({"type": "fact", "body": text, "turns": turns}));
        }
        let mut context = base.clone();
        context.now = Some((session.ends_at + chrono::Duration::hours(1)).and_utc());
        engine.set_context(context);
        let report = engine.extract_candidates(
            &session.session,
            &candidates,
            "LoCoMo observations",
            cairn_engine::ExtractTarget::Auto,
        );
        engine.set_context(base.clone());
        let report = report?;
        let total = &mut tally.report;
        total.candidates += report.candidates;
        total.stored += report.stored;
        total.updated += report.updated;
        total.duplicates += report.duplicates;
        total.refused += report.refused;
        total.dropped += report.dropped;
        for reason in report.reasons {
            if total.reasons.len() < 20 {
                total.reasons.push(format!("{}: {reason}", session.session));
            }
        }
    }
    Ok(dia_of)
}

/// Asks every question of a conversation once per row, scoring the ranked turns.
struct Asking<'a> {
    ks: &'a [usize],
    limit: usize,
    base: &'a SemanticConfig,
    details: Option<&'a mut String>,
}

impl Asking<'_> {
    /// With `facts` (the dia id of each turn by record id), a fact in the answer stands for
    /// its supporting turns (`derived_from`), at the fact's rank; a turn counts once, where it
    /// first appears.
    fn ask(
        &mut self,
        engine: &mut Engine,
        conversation: &Conversation,
        rows: &[Row],
        tallies: &mut [Tally],
        facts: Option<&std::collections::HashMap<i64, String>>,
        suffix: &str,
    ) -> Result<()> {
        for (row, tally) in rows.iter().zip(tallies.iter_mut()) {
            engine.set_semantic_config(row.config.clone().unwrap_or_else(|| self.base.clone()));
            for question in &conversation.questions {
                let mut request = RecallRequest::new(question.text.clone());
                request.limit = self.limit;
                request.touch = false;
                request.as_of = Some(conversation.as_of.clone());
                request.mode = row.mode;
                request.project = Some(conversation.id.clone());
                let clock = Instant::now();
                let answer = engine.recall(&request)?;
                tally
                    .latencies_ms
                    .push(clock.elapsed().as_secs_f64() * 1000.0);
                if answer.degraded.is_some() {
                    tally.degraded += 1;
                }
                let mut ranked: Vec<String> = Vec::new();
                for result in &answer.results {
                    let turns = match (&result.external_id, facts) {
                        (Some(dia), _) => vec![dia.clone()],
                        // What recall answers: a fact's `derived_from` turns.
                        (None, Some(dia_of)) => result
                            .derived_from
                            .iter()
                            .filter_map(|id| dia_of.get(id).cloned())
                            .collect(),
                        (None, None) => Vec::new(),
                    };
                    for dia in turns {
                        if !ranked.contains(&dia) {
                            ranked.push(dia);
                        }
                    }
                }
                ranked.truncate(self.limit);
                tally.add(self.ks, &ranked, question);
                if let Some(details) = self.details.as_deref_mut() {
                    let line = json!({
                        "conversation": conversation.id,
                        "row": format!("{}{suffix}", row.label),
                        "question": question.text,
                        "answer": question.answer,
                        "category": question.category,
                        "evidence": question.evidence,
                        "ranked": ranked,
                    });
                    details.push_str(&line.to_string());
                    details.push('\n');
                }
            }
        }
        Ok(())
    }
}

/// A database of one conversation's own on the evaluation's PostgreSQL server, dropped (with
/// any connection still open to it) when the handle goes.
struct EvalDatabase {
    /// The server, at the database the URL names (where the copy is created and dropped).
    admin: PgTarget,
    name: String,
}

impl EvalDatabase {
    fn create(server: &PgTarget, conversation: &str) -> Result<EvalDatabase> {
        let suffix: String = conversation
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        let name = format!("cairn_eval_{}_{suffix}", std::process::id());
        let mut client = server.connect().map_err(cairn_engine::EngineError::from)?;
        // Two statements: CREATE DATABASE refuses to run inside a transaction (a batch is one).
        for statement in [
            format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            format!("CREATE DATABASE {name}"),
        ] {
            client.batch_execute(&statement).map_err(|e| {
                cairn_engine::EngineError::from(
                    server.error("cannot create a database for the evaluation", &e),
                )
            })?;
        }
        Ok(EvalDatabase {
            admin: server.with_database(&server.database()),
            name,
        })
    }

    fn target(&self) -> PgTarget {
        self.admin.with_database(&self.name)
    }
}

impl Drop for EvalDatabase {
    fn drop(&mut self) {
        let admin = &self.admin;
        match admin.connect() {
            Ok(mut client) => {
                if let Err(error) = client.batch_execute(&format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    self.name
                )) {
                    eprintln!(
                        "cairn eval: {}",
                        admin.error(&format!("cannot drop the database {}", self.name), &error)
                    );
                }
            }
            Err(error) => eprintln!("cairn eval: {error}"),
        }
    }
}

fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// Peak resident set size of this process, in MB (Linux: VmHWM, read as the benchmarks read
/// it: `cairn_core::stats::status_kb`).
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = cairn_core::stats::status_kb(&status, "VmHWM:")?;
    Some(round3(kb as f64 / 1024.0))
}

pub fn run(settings: &Settings, command: &EvalCommand) -> Result<ExitCode> {
    let EvalCommand::Locomo(locomo) = command;
    let modes: &[Mode] = &locomo.mode;
    let mut ks = locomo.k.clone();
    ks.sort_unstable();
    ks.dedup();
    if ks.is_empty() || ks[0] == 0 {
        bail!("--k needs cut-offs of at least 1, e.g. --k 5,10,25,50");
    }
    let limit = *ks.last().expect("not empty");
    let mut conversations = load(&locomo.data)?;
    if let Some(count) = locomo.conversations {
        conversations.truncate(count);
    }
    let mut config = SemanticConfig::default();
    if let Some(turns) = locomo.context_turns {
        config.context_turns = turns;
    }
    if let Some(turns) = locomo.context_after {
        config.context_after = turns;
    }
    if let Some(weights) = &locomo.weights {
        config.lexical_weight = weights.first().copied().unwrap_or(1.0);
        config.semantic_weight = weights.get(1).copied().unwrap_or(1.0);
    }
    if let Some(rank) = locomo.vector_only_rank {
        config.vector_only_rank = rank;
    }
    if let Some(floor) = locomo.vector_only_floor {
        config.vector_only_floor = Some(floor);
    }
    if let Some(k) = locomo.rrf_k {
        config.rrf_k = k;
    }
    if let Some(weights) = &locomo.lexical_context {
        config.lexical_context_before = weights.first().copied().unwrap_or(0.0);
        config.lexical_context_after = weights.get(1).copied().unwrap_or(0.0);
    }
    if let Some(boost) = locomo.speaker_boost {
        config.speaker_boost = boost;
    }
    if let Some(lambda) = locomo.diversity {
        config.diversity = lambda;
    }
    if let Some(boost) = locomo.date_boost {
        config.date_boost = boost;
    }
    if let Some(weight) = locomo.lexical_feedback {
        config.lexical_feedback = weight;
    }
    if let Some(agreement) = locomo.agreement {
        config.agreement = agreement;
    }
    if let Some(span) = locomo.confidence {
        config.confidence = span;
    }
    if let Some(reference) = &locomo.confidence_reference {
        config.confidence_reference = reference
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--confidence-reference: {e}"))?;
    }
    if let Some(weight) = locomo.window_weight {
        config.window_weight = weight;
    }
    if let Some(turns) = locomo.window_turns {
        config.window_turns = turns;
    }
    if let Some(turns) = locomo.window_similarity {
        config.window_similarity = turns;
    }
    if let Some(source) = &locomo.feedback_source {
        config.feedback_source = source
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--feedback-source: {e}"))?;
    }
    let workdir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let mut shared: Option<Arc<dyn cairn_embed::Embedder>> = None;
    let mut cache: Option<Arc<crate::embed_cache::CachedEmbedder>> = None;
    let mut details = String::new();
    let mut embedder_problem: Option<String> = None;
    let mut rows: Vec<Row> = modes
        .iter()
        .map(|mode| Row {
            label: serde_json::to_value(mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            mode: *mode,
            config: None,
        })
        .collect();
    for spec in &locomo.fusion {
        rows.push(fusion_row(spec, &config)?);
    }
    for spec in &locomo.variant {
        rows.push(variant_row(spec, &config)?);
    }
    let mut tallies: Vec<Tally> = rows.iter().map(|_| Tally::default()).collect();
    let postgres = settings
        .store_url
        .as_deref()
        .map(PgTarget::parse)
        .transpose()
        .map_err(cairn_engine::EngineError::from)?;
    let mut postgres_tallies: Vec<Tally> = rows.iter().map(|_| Tally::default()).collect();
    let mut postgres_copy_secs = 0.0;
    let mut facts_tallies: Vec<Tally> = rows.iter().map(|_| Tally::default()).collect();
    let mut facts_tally = FactsTally::default();
    let mut ingest_secs = 0.0;
    let mut embed_secs = 0.0;
    let mut turns = 0;
    let started = Instant::now();
    for conversation in &conversations {
        let path = workdir.path().join(format!("{}.db", conversation.id));
        let cwd = std::env::current_dir()?;
        let mut context = Context::for_directory(&cwd);
        context.project = conversation.id.clone();
        context.actor = "eval".into();
        let mut engine = Engine::open(&path, context.clone())?;
        engine.set_semantic_config(config.clone());
        match &shared {
            Some(embedder) => engine.set_shared_embedder(embedder.clone()),
            None if embedder_problem.is_none() => {
                engine.set_embedder_loader(crate::embedder::loader(settings));
                match engine.load_embedder() {
                    Ok(Some(embedder)) => match &locomo.cache {
                        Some(path) => {
                            let cached =
                                Arc::new(crate::embed_cache::CachedEmbedder::open(embedder, path)?);
                            cache = Some(cached.clone());
                            engine.set_shared_embedder(cached.clone());
                            shared = Some(cached);
                        }
                        None => shared = Some(embedder),
                    },
                    Ok(None) => embedder_problem = Some("no embedder configured".into()),
                    Err(problem) => {
                        eprintln!("cairn eval: {problem}");
                        embedder_problem = Some(problem);
                    }
                }
            }
            None => {}
        }
        let clock = Instant::now();
        let report = engine.import_jsonl(
            &mut std::io::Cursor::new(conversation.lines.as_bytes()),
            &ImportOptions::default(),
        )?;
        if report.summary.error > 0 || report.summary.refused > 0 {
            bail!(
                "{}: {} turns were not imported: {:?}",
                conversation.id,
                report.summary.error + report.summary.refused,
                report.lines.iter().find(|l| l.message.is_some())
            );
        }
        let imported = clock.elapsed().as_secs_f64();
        if shared.is_some() {
            let clock = Instant::now();
            let mut progress = crate::output::progress_bar("embedding");
            let indexed = engine.index_pending(None, &mut progress)?;
            if indexed.failed > 0 {
                eprintln!(
                    "cairn eval: {}: {} turns not embedded: {:?}",
                    conversation.id, indexed.failed, indexed.errors
                );
            }
            embed_secs += clock.elapsed().as_secs_f64();
        }
        ingest_secs += clock.elapsed().as_secs_f64().max(imported);
        turns += conversation.turns;
        let mut asking = Asking {
            ks: &ks,
            limit,
            base: &config,
            details: locomo.details.is_some().then_some(&mut details),
        };
        asking.ask(&mut engine, conversation, &rows, &mut tallies, None, "")?;
        if let Some(server) = &postgres {
            let clock = Instant::now();
            let copy = EvalDatabase::create(server, &conversation.id)?;
            migrate(
                &Endpoint::Sqlite(path.clone()),
                &Endpoint::Postgres(copy.target()),
                1000,
                &mut |_| {},
            )
            .map_err(cairn_engine::EngineError::from)?;
            postgres_copy_secs += clock.elapsed().as_secs_f64();
            let mut on_postgres = Engine::open_postgres(copy.target(), context)?;
            on_postgres.set_semantic_config(config.clone());
            if let Some(embedder) = &shared {
                on_postgres.set_shared_embedder(embedder.clone());
            }
            asking.ask(
                &mut on_postgres,
                conversation,
                &rows,
                &mut postgres_tallies,
                None,
                "@postgres",
            )?;
        }
        if locomo.facts.is_some() {
            let clock = Instant::now();
            let dia_of =
                store_observations(&mut engine, conversation, &report.lines, &mut facts_tally)?;
            if shared.is_some() {
                let indexed = engine.index_pending(None, &mut |_, _| {})?;
                if indexed.failed > 0 {
                    eprintln!(
                        "cairn eval: {}: {} facts not embedded: {:?}",
                        conversation.id, indexed.failed, indexed.errors
                    );
                }
            }
            facts_tally.secs += clock.elapsed().as_secs_f64();
            asking.ask(
                &mut engine,
                conversation,
                &rows,
                &mut facts_tallies,
                Some(&dia_of),
                "+facts",
            )?;
        }
        eprintln!(
            "cairn eval: {} done ({} turns, {} questions, {:.0} s so far)",
            conversation.id,
            conversation.turns,
            conversation.questions.len(),
            started.elapsed().as_secs_f64()
        );
    }
    if let Some(cache) = &cache {
        cache.save()?;
        let (hits, misses) = cache.counts();
        eprintln!("cairn eval: embedding cache: {hits} reused, {misses} embedded");
    }
    if let Some(path) = &locomo.details {
        std::fs::write(path, details)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut mode_reports: serde_json::Map<String, Value> = rows
        .iter()
        .zip(&tallies)
        .map(|(row, tally)| (row.label.clone(), tally.report()))
        .collect();
    if locomo.facts.is_some() {
        for (row, tally) in rows.iter().zip(&facts_tallies) {
            mode_reports.insert(format!("{}+facts", row.label), tally.report());
        }
    }
    if postgres.is_some() {
        for (row, tally) in rows.iter().zip(&postgres_tallies) {
            mode_reports.insert(format!("{}@postgres", row.label), tally.report());
        }
    }
    let report = json!({
        "data": locomo.data,
        "conversations": conversations.len(),
        "turns": turns,
        "embedder": shared.as_ref().map(|e| e.model_id().to_string()),
        "embedder_problem": embedder_problem,
        "semantic_config": {
            "context_turns": config.context_turns,
            "context_after": config.context_after,
            "lexical_weight": config.lexical_weight,
            "semantic_weight": config.semantic_weight,
            "vector_only_rank": (config.vector_only_rank != usize::MAX).then_some(config.vector_only_rank),
            "vector_only_floor": config.vector_only_floor,
            "rrf_k": config.rrf_k,
            "lexical_context_before": config.lexical_context_before,
            "lexical_context_after": config.lexical_context_after,
            "speaker_boost": config.speaker_boost,
            "diversity": config.diversity,
            "date_boost": config.date_boost,
            "lexical_feedback": config.lexical_feedback,
            "agreement": config.agreement,
            "confidence": config.confidence,
            "confidence_reference": format!("{:?}", config.confidence_reference).to_lowercase(),
            "window_weight": config.window_weight,
            "window_turns": config.window_turns,
            "window_similarity": config.window_similarity,
            "feedback_source": format!("{:?}", config.feedback_source).to_lowercase(),
            "graph_weight": config.graph_weight,
            "graph_bridge": config.graph_bridge,
            "graph_neighbours": config.graph_neighbours,
        },
        "embedding_cache": cache.as_ref().map(|c| {
            let (reused, embedded) = c.counts();
            json!({"file": locomo.cache, "reused": reused, "embedded": embedded})
        }),
        "facts": locomo.facts.as_ref().map(|source| json!({
            "source": source,
            "sessions": facts_tally.sessions,
            "observations": facts_tally.observations,
            "unmapped": facts_tally.unmapped,
            "candidates": facts_tally.report.candidates,
            "stored": facts_tally.report.stored,
            "updated": facts_tally.report.updated,
            "duplicates": facts_tally.report.duplicates,
            "refused": facts_tally.report.refused,
            "dropped": facts_tally.report.dropped,
            "reasons": facts_tally.report.reasons,
            "secs": round3(facts_tally.secs),
        })),
        "postgres": postgres.as_ref().map(|server| json!({
            "server": server.shown(),
            "copy_secs": round3(postgres_copy_secs),
        })),
        "ingest_secs": round3(ingest_secs),
        "embed_secs": round3(embed_secs),
        "ingest_turns_per_sec": round3(turns as f64 / ingest_secs.max(1e-9)),
        "peak_rss_mb": peak_rss_mb(),
        "modes": mode_reports,
    });
    if let Some(out) = &locomo.out {
        std::fs::write(out, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("cannot write {}", out.display()))?;
    }
    if settings.json {
        print_json(&report);
    } else {
        print_summary(&report, &ks);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_summary(report: &Value, ks: &[usize]) {
    outln!(
        "LoCoMo {} ({} conversations, {} turns), embedder {}",
        report["data"].as_str().unwrap_or(""),
        report["conversations"],
        report["turns"],
        report["embedder"].as_str().unwrap_or("none")
    );
    outln!(
        "ingest {:.1} s ({:.0} turns/s), peak RSS {} MB",
        report["ingest_secs"].as_f64().unwrap_or(0.0),
        report["ingest_turns_per_sec"].as_f64().unwrap_or(0.0),
        report["peak_rss_mb"]
    );
    let mut header = format!("{:<24}", "mode");
    for k in ks {
        header.push_str(&format!(" {:>8}", format!("R@{k}")));
    }
    header.push_str(&format!(
        " {:>8} {:>8} {:>8} {:>8}",
        "Rall@10", "NDCG@10", "p50 ms", "p95 ms"
    ));
    outln!("{header}");
    if let Some(modes) = report["modes"].as_object() {
        for (mode, values) in modes {
            let mut line = format!("{mode:<24}");
            for k in ks {
                line.push_str(&format!(
                    " {:>8.3}",
                    values[format!("recall@{k}")].as_f64().unwrap_or(0.0)
                ));
            }
            line.push_str(&format!(
                " {:>8.3} {:>8.3} {:>8.2} {:>8.2}",
                values["recall_all@10"].as_f64().unwrap_or(0.0),
                values["ndcg@10"].as_f64().unwrap_or(0.0),
                values["query_ms_p50"].as_f64().unwrap_or(0.0),
                values["query_ms_p95"].as_f64().unwrap_or(0.0)
            ));
            outln!("{line}");
            if let Some(categories) = values["recall@10_by_category"].as_object() {
                let parts: Vec<String> = categories
                    .iter()
                    .map(|(name, c)| {
                        format!("{name} {:.3}", c["recall@10"].as_f64().unwrap_or(0.0))
                    })
                    .collect();
                outln!("  R@10 by category: {}", parts.join(", "));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_evidence_ids_are_split_and_dropped() {
        let check = |raw: Value, expect: &[&str]| {
            assert_eq!(evidence_ids(raw.as_array().unwrap()), expect, "{raw}");
        };
        check(json!(["D1:3"]), &["D1:3"]);
        check(json!(["D8:6; D9:17"]), &["D8:6", "D9:17"]);
        check(json!(["D", "D1:", ":3", "D1:2,D3:4"]), &["D1:2", "D3:4"]);
        check(json!(["X1:2", 7]), &[]);
    }

    #[test]
    fn graph_variants_set_the_graph_list_and_refuse_a_bad_switch() {
        let base = SemanticConfig::default();
        let row = variant_row(
            "graph_weight=0.5;graph_bridge=1;graph_neighbours=off",
            &base,
        )
        .unwrap();
        let config = row.config.unwrap();
        assert_eq!(config.graph_weight, 0.5);
        assert!(config.graph_bridge);
        assert!(!config.graph_neighbours);
        let Err(error) = variant_row("graph_bridge=yes", &base) else {
            panic!("graph_bridge=yes was accepted");
        };
        let error = error.to_string();
        assert!(error.contains("graph_bridge is on or off"), "{error}");
    }

    #[test]
    fn session_dates_parse() {
        let date = parse_session_date("1:56 pm on 8 May, 2023").unwrap();
        assert_eq!(date.to_string(), "2023-05-08 13:56:00");
        assert!(parse_session_date("yesterday").is_err());
    }
}
