//! Incremental transcript capture (docs/design.md §11, Stop / PreCompact): the transcript is read from
//! the session's stored byte offset, complete turns become `episode` records through the write
//! path with `capture: true` (trust `captured`, near duplicates of earlier captures merged), and
//! candidate durable facts go to the inbox.
//!
//! Idempotent under repeats and concurrent hooks: the offset is read, the turns stored and the
//! new offset written in ONE `BEGIN IMMEDIATE` transaction, so a second capture of the same
//! session waits for the first and then finds nothing new.

use crate::agent::append_event;
use crate::remember::{RememberStatus, TermCounts, prepare, remember_in_batch};
use crate::{Engine, EngineError, RememberRequest, Result};
use cairn_core::capture::{Salience, SkipReason, candidate_facts, turn_salience};
use cairn_core::record::MemoryType;
use cairn_core::time::format_ts;
use cairn_core::transcript::{Turn, plan_capture_at_most, strip_injected};
use cairn_core::{secrets, text};
use cairn_store::{CaptureOffset, NewInboxItem, WriteTx};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Most transcript bytes read by one capture; a longer backlog is taken over several captures.
pub const MAX_CAPTURE_BYTES: u64 = 8 * 1024 * 1024;
/// Most turns stored by one capture, for the same reason: the hook's deadline (3 s) must hold
/// on a big brain under load. The first capture of a 5 MB transcript (1,279 turns) took 3.9 s
/// at 100,000 memories — rolled back at the deadline, and again at every later attempt.
pub const MAX_CAPTURE_TURNS: usize = 200;

#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct CaptureReport {
    pub session_id: String,
    pub turns: usize,
    pub episodes_added: usize,
    /// Turns that were already stored (exact or near duplicates of earlier captures).
    pub episodes_merged: usize,
    pub inbox_added: usize,
    /// Turns not stored, by reason (`acknowledgement`, `tool_chatter`, `injection`); counted
    /// in the brain too, for `cairn stats`.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub skipped: std::collections::BTreeMap<&'static str, usize>,
    /// Turns stored to expire (present-state talk): 14 days, as captured `state`.
    #[serde(skip_serializing_if = "is_zero")]
    pub expiring: usize,
    pub offset_before: u64,
    pub offset_after: u64,
    /// The capture stopped at its turn or byte bound with whole turns left behind it: another
    /// capture continues from `offset_after` (the hooks do, within their deadline).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The `meta` key counting the turns capture skipped for `reason`.
pub fn skipped_meta_key(reason: SkipReason) -> String {
    format!("capture.skipped.{}", reason.as_str())
}

/// Adds a capture's skipped turns to the brain's running counts (inside its transaction).
fn count_skipped(tx: &WriteTx<'_>, report: &CaptureReport) -> Result<()> {
    for reason in SkipReason::ALL {
        let Some(&n) = report.skipped.get(reason.as_str()) else {
            continue;
        };
        let key = skipped_meta_key(reason);
        let before: u64 = tx
            .reader()
            .meta(&key)?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        tx.set_meta(&key, &(before + n as u64).to_string())?;
    }
    Ok(())
}

/// Reads `[from, to)` of the file, keeping only whole lines ([`whole_lines`]).
fn read_lines(path: &Path, from: u64, to: u64) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::with_capacity((to - from) as usize);
    file.take(to - from).read_to_end(&mut bytes)?;
    Ok(whole_lines(&bytes))
}

/// The whole lines of `bytes` (up to the last newline) as text; invalid UTF-8 inside a line is
/// blanked byte for byte so offsets stay exact (the line then parses as nothing). What a remote
/// hook sends ([`Engine::capture_transcript_text`]) is made by this function too.
pub fn whole_lines(bytes: &[u8]) -> String {
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut text = String::with_capacity(end);
    for line in bytes[..end].split_inclusive(|b| *b == b'\n') {
        match std::str::from_utf8(line) {
            Ok(valid) => text.push_str(valid),
            Err(_) => {
                text.push_str(&" ".repeat(line.len() - 1));
                text.push('\n');
            }
        }
    }
    text
}

/// Where a transcript's bytes come from: the file itself (a hook on the same machine), or a
/// stretch of it a remote hook sent, starting at the offset it read from the server.
enum Source<'a> {
    File(&'a Path),
    Sent { offset: u64, text: &'a str },
}

impl Engine {
    /// Captures what a session's transcript gained since the last capture.
    pub fn capture_transcript(&mut self, session_id: &str, path: &Path) -> Result<CaptureReport> {
        self.ensure_writable("capture")?;
        let size = std::fs::metadata(path)
            .map_err(|source| EngineError::Io {
                path: path.to_path_buf(),
                source,
            })?
            .len();
        self.capture_from(
            session_id,
            &path.display().to_string(),
            size,
            Source::File(path),
        )
    }

    /// Where the next capture of `session_id`'s `transcript` starts: the byte offset stored by
    /// the last one (0 for a transcript not seen yet). A remote hook reads its transcript from
    /// here and sends it to [`Engine::capture_transcript_text`].
    pub fn capture_offset(&self, session_id: &str, transcript: &str) -> Result<u64> {
        Ok(match self.store.reader()?.capture_offset(session_id)? {
            Some(stored) if stored.transcript_path == transcript => stored.byte_offset,
            _ => 0,
        })
    }

    /// Captures `text` — whole lines of `transcript` from byte `offset` on, as [`whole_lines`]
    /// makes them — sent by a hook whose transcript is on another machine. The offset must be
    /// the stored one ([`Engine::capture_offset`]): otherwise nothing is stored and the error
    /// names the stored offset, so the client reads again from there (a concurrent hook got
    /// there first). One transaction, like a capture from the file.
    pub fn capture_transcript_text(
        &mut self,
        session_id: &str,
        transcript: &str,
        offset: u64,
        text: &str,
    ) -> Result<CaptureReport> {
        self.ensure_writable("capture")?;
        if !text.is_empty() && !text.ends_with('\n') {
            return Err(EngineError::Invalid(
                "the transcript text must be whole lines (ending with a newline); nothing was captured".into(),
            ));
        }
        let size = offset + text.len() as u64;
        self.capture_from(session_id, transcript, size, Source::Sent { offset, text })
    }

    fn capture_from(
        &mut self,
        session_id: &str,
        path_text: &str,
        size: u64,
        source: Source<'_>,
    ) -> Result<CaptureReport> {
        // Fast path without the write lock: nothing new since the stored offset.
        if let Some(stored) = self.store.reader()?.capture_offset(session_id)?
            && stored.byte_offset == size
            && stored.transcript_path == path_text
        {
            return Ok(CaptureReport {
                session_id: session_id.to_string(),
                offset_before: size,
                offset_after: size,
                ..CaptureReport::default()
            });
        }
        let now = self.now();
        let project = self.context.project.clone();
        let actor = self.context.actor.clone();
        self.store.write(|tx| {
            let stored = tx.reader().capture_offset(session_id)?;
            let (mut from, turns_before) = match &stored {
                Some(s) if s.transcript_path == path_text => (s.byte_offset, s.turns),
                Some(s) => (0, s.turns),
                None => (0, 0),
            };
            if let Source::Sent { offset, .. } = source
                && offset != from
            {
                return Err(EngineError::Refused {
                    message: format!(
                        "the transcript of session {session_id} is captured up to byte {from}, not {offset}; nothing was captured — send it again from byte {from}"
                    ),
                    existing: None,
                    ways_out: vec![format!("offset {from}")],
                });
            }
            if from > size {
                from = 0; // the file was replaced or truncated: start over (duplicates are no-ops)
            }
            let mut report = CaptureReport {
                session_id: session_id.to_string(),
                offset_before: from,
                offset_after: from,
                ..CaptureReport::default()
            };
            if from == size {
                return Ok(report);
            }
            let to = size.min(from + MAX_CAPTURE_BYTES);
            let chunk = match source {
                Source::File(path) => read_lines(path, from, to).map_err(|source| EngineError::Io {
                    path: path.to_path_buf(),
                    source,
                })?,
                Source::Sent { offset, text } => {
                    let bytes = &text.as_bytes()[(from - offset) as usize..(to - offset) as usize];
                    whole_lines(bytes)
                }
            };
            let plan = plan_capture_at_most(&chunk, MAX_CAPTURE_TURNS);
            let source = format!("transcript of session {session_id}");
            let mut counts = TermCounts::default();
            for turn in &plan.turns {
                let salience = turn_salience(&turn.user, &turn.assistant, &turn.user, &turn.assistant);
                store_turn(tx, turn, salience, &project, &source, now, &actor, &mut report, &mut counts)?;
            }
            count_skipped(tx, &report)?;
            report.offset_after = from + plan.consumed;
            report.more = report.offset_after > from
                && (plan.turns.len() >= MAX_CAPTURE_TURNS || (to < size && report.offset_after < size));
            let at = format_ts(now);
            tx.set_capture_offset(&CaptureOffset {
                session_id: session_id.to_string(),
                transcript_path: path_text.to_string(),
                byte_offset: report.offset_after,
                turns: turns_before + plan.turns.len() as i64,
                updated_at: at.clone(),
            })?;
            if report.turns > 0 {
                append_event(
                    tx,
                    "capture",
                    Some(&project),
                    &at,
                    &actor,
                    json!({"session": session_id, "turns": report.turns, "episodes_added": report.episodes_added,
                           "inbox_added": report.inbox_added, "from": from, "to": report.offset_after}),
                )?;
            }
            Ok(report)
        })
    }

    /// Captures one turn handed over directly by a client (Gemini's AfterAgent, Cursor's
    /// afterAgentResponse). Repeats are no-ops: the same text is an exact duplicate.
    pub fn capture_turn(
        &mut self,
        session_id: &str,
        user: &str,
        assistant: &str,
    ) -> Result<CaptureReport> {
        self.ensure_writable("capture")?;
        let turn = Turn {
            user: strip_injected(user).trim().to_string(),
            assistant: strip_injected(assistant).trim().to_string(),
        };
        let mut report = CaptureReport {
            session_id: session_id.to_string(),
            ..CaptureReport::default()
        };
        let salience = turn_salience(user, assistant, &turn.user, &turn.assistant);
        if user.trim().is_empty() && assistant.trim().is_empty() {
            return Ok(report);
        }
        let now = self.now();
        let project = self.context.project.clone();
        let actor = self.context.actor.clone();
        let source = format!("turn of session {session_id}");
        self.store.write(|tx| {
            let mut counts = TermCounts::default();
            store_turn(tx, &turn, salience, &project, &source, now, &actor, &mut report, &mut counts)?;
            count_skipped(tx, &report)?;
            if report.episodes_added > 0 || report.inbox_added > 0 {
                append_event(
                    tx,
                    "capture",
                    Some(&project),
                    &format_ts(now),
                    &actor,
                    json!({"session": session_id, "turns": 1, "episodes_added": report.episodes_added,
                           "inbox_added": report.inbox_added}),
                )?;
            }
            Ok(report)
        })
    }
}

/// One turn: an episode through the write path, then candidate facts into the inbox. A turn
/// that cannot be stored (say, nothing left after sanitizing) is reported, never fatal.
#[allow(clippy::too_many_arguments)]
fn store_turn(
    tx: &WriteTx<'_>,
    turn: &Turn,
    salience: Salience,
    project: &str,
    source: &str,
    now: DateTime<Utc>,
    actor: &str,
    report: &mut CaptureReport,
    counts: &mut TermCounts<'_>,
) -> Result<()> {
    report.turns += 1;
    if let Salience::Skip(reason) = salience {
        *report.skipped.entry(reason.as_str()).or_default() += 1;
        return Ok(());
    }
    let mut request = RememberRequest::new(MemoryType::Episode, turn.episode_body());
    request.capture = true;
    request.source = Some(source.to_string());
    request.tags = vec!["captured".to_string()];
    if salience == Salience::Expiring {
        request.expires_at = Some(format_ts(
            now + chrono::Duration::days(crate::remember::CAPTURE_EXPIRY_DAYS),
        ));
        report.expiring += 1;
    }
    match prepare(&request, Some(project.to_string()), now, None) {
        Ok(prepared) => {
            let outcome = remember_in_batch(tx, &request, prepared, now, actor, counts)?;
            match outcome.status {
                RememberStatus::Added | RememberStatus::Flagged => report.episodes_added += 1,
                _ => report.episodes_merged += 1,
            }
        }
        Err(error) => report
            .warnings
            .push(format!("a turn was not stored: {error}")),
    }
    let at = format_ts(now);
    for candidate in candidate_facts(&turn.user) {
        let Ok(sanitized) = text::sanitize(&candidate.text) else {
            continue;
        };
        let body = secrets::redact(&sanitized.text).text;
        let hash = text::content_hash(&body);
        if tx
            .insert_inbox(&NewInboxItem {
                project: Some(project),
                kind: candidate.kind,
                suggested_type: candidate.suggested_type.as_str(),
                body: &body,
                content_hash: &hash,
                source,
                at: &at,
            })?
            .is_some()
        {
            report.inbox_added += 1;
        }
    }
    Ok(())
}
