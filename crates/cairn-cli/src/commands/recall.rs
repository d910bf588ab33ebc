//! `cairn recall`: one query, or a batch of JSONL query lines answered line by line.

use crate::output::{print_json, snippet};
use crate::settings::Settings;
use crate::values;
use anyhow::{Context as _, Result};
use cairn_core::record::{MemoryType, TrustZone};
use cairn_engine::{EngineError, Mode, RecallAnswer, RecallRequest};
use clap::Args;
use std::io::{BufRead, BufReader, Write};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct RecallArgs {
    /// What to look for (anything: quotes and operators are searched as words).
    #[arg(required_unless_present = "batch")]
    pub(crate) query: Option<String>,
    /// JSONL file of queries (`-` for stdin), one answer line per query.
    #[arg(long, value_name = "FILE", conflicts_with = "query")]
    pub(crate) batch: Option<String>,
    #[arg(long, short = 'k', default_value_t = 10)]
    pub(crate) limit: usize,
    #[arg(long)]
    pub(crate) scope: Option<String>,
    #[arg(long = "type", value_name = "TYPE", value_delimiter = ',', value_parser = values::memory_type())]
    pub(crate) types: Vec<MemoryType>,
    /// Show superseded and archived versions instead of following them forward.
    #[arg(long)]
    pub(crate) all: bool,
    /// Do not record the access.
    #[arg(long)]
    pub(crate) no_touch: bool,
    #[arg(long, value_name = "TIME")]
    pub(crate) as_of: Option<String>,
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    #[arg(long, value_name = "TIME")]
    pub(crate) until: Option<String>,
    #[arg(long, default_value = "hybrid", value_parser = values::mode())]
    pub(crate) mode: Mode,
    /// Relevance floor relative to the best match (0 keeps every match).
    #[arg(long)]
    pub(crate) floor: Option<f64>,
    /// Answer as a reader in this trust zone sees it (private_self sees everything).
    #[arg(long, value_name = "ZONE", value_parser = values::trust_zone())]
    pub(crate) zone: Option<TrustZone>,
}

fn recall_request(recall: &RecallArgs, query: String) -> RecallRequest {
    let mut request = RecallRequest::new(query);
    request.limit = recall.limit;
    request.scope = recall.scope.clone();
    request.types = recall.types.clone();
    request.all = recall.all;
    request.touch = !recall.no_touch;
    request.as_of = recall.as_of.clone();
    request.since = recall.since.clone();
    request.until = recall.until.clone();
    request.mode = recall.mode;
    request.floor = recall.floor;
    request.zone = recall.zone;
    request
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchLine {
    query: String,
    limit: Option<usize>,
    project: Option<String>,
    scope: Option<String>,
    as_of: Option<String>,
    mode: Option<String>,
    floor: Option<f64>,
    #[serde(rename = "type")]
    types: Option<Vec<String>>,
    zone: Option<String>,
}

pub fn run(settings: &Settings, recall: &RecallArgs) -> Result<ExitCode> {
    let mut engine = settings.open("cli")?;
    if let Some(batch) = &recall.batch {
        // One query at a time: an answer is printed as soon as its line is read.
        return run_batch(recall, batch, 1, |requests| {
            Ok(requests
                .iter()
                .map(|request| engine.recall(request).map_err(|e| e.to_string()))
                .collect())
        });
    }
    let answer = engine.recall(&single_request(recall))?;
    print_recall(settings, &answer);
    Ok(ExitCode::SUCCESS)
}

/// The request of a single query (`cairn recall QUERY …`).
pub(crate) fn single_request(recall: &RecallArgs) -> RecallRequest {
    recall_request(recall, recall.query.clone().unwrap_or_default())
}

/// Prints one answer: its JSON, or the text.
pub(crate) fn print_recall(settings: &Settings, answer: &RecallAnswer) {
    if settings.json {
        print_json(answer);
    } else {
        print_answer(answer);
    }
}

/// `recall --batch FILE`: reads query lines (flags give the defaults a line may override),
/// hands them to `answer` up to `chunk` at a time, and prints one compact answer line per
/// query line, in order (an error line for a line that is not a query or whose query failed).
pub(crate) fn run_batch(
    recall: &RecallArgs,
    batch: &str,
    chunk: usize,
    mut answer: impl FnMut(&[RecallRequest]) -> Result<Vec<Result<RecallAnswer, String>>>,
) -> Result<ExitCode> {
    let input: Box<dyn BufRead> = if batch == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        Box::new(BufReader::new(
            std::fs::File::open(batch).with_context(|| format!("cannot read {batch}"))?,
        ))
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut pending: Vec<Result<RecallRequest, String>> = Vec::new();
    let mut flush =
        |pending: &mut Vec<Result<RecallRequest, String>>, out: &mut dyn Write| -> Result<()> {
            let requests: Vec<RecallRequest> = pending
                .iter()
                .filter_map(|line| line.as_ref().ok().cloned())
                .collect();
            let mut answers = answer(&requests)?.into_iter();
            for line in pending.drain(..) {
                let result = line.and_then(|_| {
                    answers
                        .next()
                        .unwrap_or_else(|| Err("no answer came for this query".to_string()))
                });
                match result {
                    Ok(answer) => writeln!(out, "{}", serde_json::to_string(&answer)?)?,
                    Err(error) => writeln!(
                        out,
                        "{}",
                        serde_json::json!({"status": "error", "error": error})
                    )?,
                }
            }
            out.flush()?;
            Ok(())
        };
    for (number, line) in input.lines().enumerate() {
        let line = line.with_context(|| format!("cannot read line {} of {batch}", number + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        pending.push(batch_request(recall, &line, number + 1));
        if pending.len() >= chunk.max(1) {
            flush(&mut pending, &mut out)?;
        }
    }
    flush(&mut pending, &mut out)?;
    Ok(ExitCode::SUCCESS)
}

/// One batch line as a request: the flags' request with what the line says over it.
fn batch_request(recall: &RecallArgs, line: &str, number: usize) -> Result<RecallRequest, String> {
    let parsed = serde_json::from_str::<BatchLine>(line)
        .map_err(|e| format!("line {number}: not a query line: {e}"))?;
    let mut request = recall_request(recall, parsed.query);
    if let Some(limit) = parsed.limit {
        request.limit = limit;
    }
    request.project = parsed.project;
    request.scope = parsed.scope.or(request.scope);
    request.as_of = parsed.as_of.or(request.as_of);
    if let Some(mode) = parsed.mode {
        request.mode = mode.parse::<Mode>().map_err(|e| e.to_string())?;
    }
    request.floor = parsed.floor.or(request.floor);
    if let Some(types) = parsed.types {
        request.types = parse_types(&types).map_err(|e| e.to_string())?;
    }
    if let Some(zone) = parsed.zone {
        request.zone = Some(zone.parse::<TrustZone>().map_err(|e| e.to_string())?);
    }
    Ok(request)
}

/// A batch line's types, in the vocabulary's spellings (empty entries ignored).
fn parse_types(types: &[String]) -> Result<Vec<MemoryType>, EngineError> {
    types
        .iter()
        .filter(|t| !t.trim().is_empty())
        .map(|t| t.parse::<MemoryType>().map_err(EngineError::from))
        .collect()
}

fn print_answer(answer: &RecallAnswer) {
    if let Some(degraded) = &answer.degraded {
        if answer.warnings.is_empty() {
            outln!("(search is {degraded}: semantic search is unavailable)");
        } else {
            outln!("(search is {degraded}: semantic search is unavailable, see the notes below)");
        }
    }
    if answer.results.is_empty() {
        outln!("{}", answer.note.as_deref().unwrap_or("nothing found"));
    }
    for result in &answer.results {
        let mut header = format!("#{} {} · {}", result.id, result.memory_type, result.scope);
        if let Some(project) = &result.project {
            header.push_str(&format!(" · {}", snippet(project, 40)));
        } else {
            header.push_str(" · personal");
        }
        header.push_str(&format!(" · score {:.2}", result.score_norm));
        outln!("{header}");
        if let Some(title) = &result.title {
            outln!("  {title}");
        }
        outln!("  {}", snippet(&result.body, 240));
        let mut why = Vec::new();
        if let Some(rank) = result.why.lexical_rank {
            why.push(format!("lexical #{rank}"));
        }
        if let Some(rank) = result.why.vector_rank {
            why.push(format!("vector #{rank}"));
        }
        why.push(format!("recency {:.2}", result.why.recency));
        why.push(format!("stakes {:.2}", result.why.stakes));
        outln!("  why: {}", why.join(" · "));
        if let Some(from) = result.superseded_from {
            outln!("  (matched #{from}, which this record supersedes)");
        }
        if !result.derived_from.is_empty() {
            let turns: Vec<String> = result
                .derived_from
                .iter()
                .map(|id| format!("#{id}"))
                .collect();
            outln!("  extracted from turns {}", turns.join(", "));
        }
        if let Some(freshness) = &result.freshness {
            outln!("  freshness: {freshness}");
        }
        if result.review_due {
            outln!(
                "  review due: re-check this claim (`cairn verify {} --source …`)",
                result.id
            );
        }
    }
    for warning in &answer.warnings {
        outln!("note: {warning}");
    }
}
