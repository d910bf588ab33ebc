//! Operations on one record: show, update, forget (archive or hard delete), restore, verify,
//! and listing.

use crate::remember::{clean_tags, log_event};
use crate::{Engine, EngineError, Result};
use cairn_core::memory::Memory;
use cairn_core::record::{Confidence, MemoryType, Status};
use cairn_core::time::{format_ts, parse_time_ahead};
use cairn_core::{secrets, text};
use cairn_store::{HistoryRow, ListFilter};
use serde_json::json;

/// Fields to change; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct UpdateRequest {
    pub title: Option<String>,
    pub body: Option<String>,
    pub summary: Option<String>,
    pub tags: Option<Vec<String>>,
    pub importance: Option<u8>,
    pub confidence: Option<Confidence>,
    pub source: Option<String>,
    pub memory_type: Option<MemoryType>,
    pub pinned: Option<bool>,
    pub review_at: Option<String>,
    pub expires_at: Option<String>,
}

/// What `update_with_warnings` did.
#[derive(Debug, Clone)]
pub struct Updated {
    /// The record as stored now.
    pub memory: Memory,
    /// Kinds of secrets redacted from the new text.
    pub redacted: Vec<&'static str>,
    /// What the caller should know: `confirmed` stored as `reported` (no source), or the record
    /// was stored but not embedded yet.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct ListRequest {
    pub types: Vec<MemoryType>,
    pub scope: Option<String>,
    pub status: Option<Status>,
    pub limit: usize,
    /// Every project, not just the context's (and personal).
    pub all_projects: bool,
}

/// The warning when `confirmed` (also spelled `high`) is asked for a record with no source:
/// docs/design.md §3 stores it as `reported`.
pub(crate) const CONFIRMED_NEEDS_SOURCE: &str = "stored as `reported`: `confirmed` (also spelled `high`) needs a source naming where it was confirmed (--source)";

fn cleaned(value: &str) -> Result<(String, Vec<&'static str>)> {
    let sanitized = text::sanitize(value)?;
    let redacted = secrets::redact(&sanitized.text);
    Ok((redacted.text.trim().to_string(), redacted.kinds))
}

impl Engine {
    pub fn get(&self, id: i64) -> Result<Memory> {
        self.store
            .reader()?
            .get(id)?
            .ok_or(EngineError::NotFound { id })
    }

    pub fn history(&self, id: i64) -> Result<Vec<HistoryRow>> {
        self.get(id)?;
        Ok(self.store.reader()?.history(id)?)
    }

    /// What `show --json` prints and `GET /v1/records/{id}` answers (docs/cli.md): the record,
    /// `merged_into` while a dream's merge holds it, `surfaced_at` (passive use), with
    /// `with_history` its earlier versions, and its open conflicts. One builder, so the CLI and
    /// the HTTP API cannot drift apart.
    pub fn show_document(&self, id: i64, with_history: bool) -> Result<serde_json::Value> {
        let memory = self.get(id)?;
        let mut value = serde_json::to_value(&memory).unwrap_or_default();
        if let Some(survivor) = self.merged_into(id)? {
            value["merged_into"] = survivor.into();
        }
        value["surfaced_at"] = self
            .surfaced_at(id)?
            .map_or(serde_json::Value::Null, Into::into);
        if with_history {
            value["history"] = serde_json::to_value(self.history(id)?).unwrap_or_default();
        }
        value["conflicts"] = serde_json::to_value(self.conflicts_of(id)?).unwrap_or_default();
        Ok(value)
    }

    /// The record a dream merged `id` into, while it stays merged away (a restore ends it):
    /// the survivor the merge named.
    pub fn merged_into(&self, id: i64) -> Result<Option<i64>> {
        let reader = self.store.reader()?;
        let Some(base) = reader.merged_base(id)? else {
            return Ok(None);
        };
        Ok(Some(reader.merged_into(id)?.unwrap_or(base)))
    }

    /// Open conflicts involving a record.
    pub fn conflicts_of(&self, id: i64) -> Result<Vec<cairn_store::ConflictRow>> {
        Ok(self.store.reader()?.open_conflicts(Some(id))?)
    }

    /// Changes fields of a record in place; the previous version goes to history.
    /// [`Engine::update_with_warnings`] without the warnings: the record as stored and the
    /// kinds of secrets redacted. Prefer `update_with_warnings` where a warning can be shown.
    pub fn update(
        &mut self,
        id: i64,
        request: &UpdateRequest,
    ) -> Result<(Memory, Vec<&'static str>)> {
        self.update_with_warnings(id, request)
            .map(|updated| (updated.memory, updated.redacted))
    }

    /// Changes fields of a record in place (the previous version goes to its history). A
    /// changed text loses its vector; it is embedded again at once when an embedder is
    /// configured, and when that fails the answer warns, as `remember` does: the record is
    /// stored and found lexically, `cairn reindex` embeds it.
    pub fn update_with_warnings(&mut self, id: i64, request: &UpdateRequest) -> Result<Updated> {
        self.ensure_writable("update")?;
        let now = format_ts(self.now());
        let actor = self.context.actor.clone();
        let now_time = self.now();
        let extract = self.extract_entities;
        self.store
            .write(|tx| {
                let previous = tx.reader().get(id)?.ok_or(EngineError::NotFound { id })?;
                let mut updated = previous.clone();
                let mut redacted = Vec::new();
                if let Some(title) = &request.title {
                    let (title, kinds) = cleaned(title)?;
                    redacted.extend(kinds);
                    if title.chars().count() > cairn_core::record::MAX_TITLE_CHARS {
                        return Err(EngineError::TooLarge {
                            what: "the title",
                            actual: title.chars().count(),
                            limit: cairn_core::record::MAX_TITLE_CHARS,
                            unit: "characters",
                        });
                    }
                    updated.title = (!title.is_empty()).then_some(title);
                }
                if let Some(body) = &request.body {
                    let (body, kinds) = cleaned(body)?;
                    redacted.extend(kinds);
                    if body.is_empty() {
                        return Err(EngineError::Empty { what: "the body" });
                    }
                    if body.len() > cairn_core::record::MAX_BODY_BYTES {
                        return Err(EngineError::TooLarge {
                            what: "the body",
                            actual: body.len(),
                            limit: cairn_core::record::MAX_BODY_BYTES,
                            unit: "bytes",
                        });
                    }
                    updated.content_hash = text::content_hash(&body);
                    updated.body = body;
                }
                if let Some(summary) = &request.summary {
                    let (summary, kinds) = cleaned(summary)?;
                    redacted.extend(kinds);
                    updated.summary = (!summary.is_empty()).then_some(summary);
                }
                if let Some(tags) = &request.tags {
                    updated.tags = clean_tags(tags)?;
                }
                if let Some(importance) = request.importance {
                    if !(1..=5).contains(&importance) {
                        return Err(EngineError::Invalid(format!(
                            "importance {importance} is out of range: use 1 to 5"
                        )));
                    }
                    updated.importance = importance;
                }
                if let Some(source) = &request.source {
                    let (source, kinds) = cleaned(source)?;
                    redacted.extend(kinds);
                    updated.source = (!source.is_empty()).then_some(source);
                }
                let mut warnings = Vec::new();
                if let Some(confidence) = request.confidence {
                    updated.confidence =
                        if confidence == Confidence::Confirmed && updated.source.is_none() {
                            warnings.push(CONFIRMED_NEEDS_SOURCE.to_string());
                            Confidence::Reported
                        } else {
                            confidence
                        };
                }
                if let Some(memory_type) = request.memory_type {
                    updated.memory_type = memory_type;
                }
                if let Some(pinned) = request.pinned {
                    updated.pinned = pinned;
                }
                if let Some(review_at) = &request.review_at {
                    updated.review_at = Some(format_ts(parse_time_ahead(review_at, now_time)?));
                }
                if let Some(expires_at) = &request.expires_at {
                    updated.expires_at = Some(format_ts(parse_time_ahead(expires_at, now_time)?));
                }
                if updated == previous {
                    return Ok((previous, Vec::new(), warnings));
                }
                updated.updated_at = now.clone();
                let norm = updated.title.as_deref().map(text::normalize_title);
                tx.update_memory(&updated, norm.as_deref(), &previous, "update", &actor)?;
                log_event(
                    tx,
                    "update",
                    &updated,
                    &now,
                    &actor,
                    json!({"previous_hash": previous.content_hash}),
                )?;
                if extract
                    && (updated.body != previous.body
                        || updated.title != previous.title
                        || updated.tags != previous.tags)
                {
                    crate::graph::write::link_record(tx, &updated, &now, &actor, false)?;
                }
                redacted.sort();
                redacted.dedup();
                Ok((updated, redacted, warnings))
            })
            .map(|(memory, redacted, mut warnings)| {
                // A changed text lost its vector (a trigger drops it); embed it again now when an
                // embedder is configured, else it waits for `cairn reindex` like any pending one.
                warnings.extend(self.index_after_write(&[memory.id], false));
                Updated {
                    memory,
                    redacted,
                    warnings,
                }
            })
    }

    /// Archives a record (reversible with `restore`), or with `hard` deletes it for good.
    /// A hard delete of a record that supersedes others is refused: it would cut their history.
    pub fn forget(&mut self, id: i64, hard: bool) -> Result<Memory> {
        self.ensure_writable("forget")?;
        let now = format_ts(self.now());
        let actor = self.context.actor.clone();
        self.store.write(|tx| {
            let previous = tx.reader().get(id)?.ok_or(EngineError::NotFound { id })?;
            if hard {
                if let Some(older) = previous.supersedes {
                    return Err(EngineError::Refused {
                        message: format!(
                            "#{id} supersedes #{older}; deleting it would cut that history. Nothing was deleted: archive it instead with `cairn forget {id}`"
                        ),
                        existing: Some(older),
                        ways_out: vec![format!("cairn forget {id}")],
                    });
                }
                // Its successor keeps no link to a record that no longer exists; the link
                // stays readable in the successor's history.
                if let Some(successor_id) = previous.superseded_by
                    && let Some(successor) = tx.reader().get(successor_id)?
                    && successor.supersedes == Some(id)
                {
                    let mut unlinked = successor.clone();
                    unlinked.supersedes = None;
                    unlinked.updated_at = now.clone();
                    let norm = unlinked.title.as_deref().map(text::normalize_title);
                    tx.update_memory(&unlinked, norm.as_deref(), &successor, "unlink", &actor)?;
                }
                tx.delete_memory(&previous, &now, &actor)?;
                crate::graph::write::unlink_record(tx, id, &now, &actor)?;
                tx.resolve_conflicts(id, &now)?;
                log_event(tx, "delete", &previous, &now, &actor, json!({"hard": true}))?;
                return Ok(previous);
            }
            if previous.status == Status::Archived {
                return Ok(previous);
            }
            let mut archived = previous.clone();
            archived.status = Status::Archived;
            archived.retired_at = Some(now.clone());
            archived.updated_at = now.clone();
            let norm = archived.title.as_deref().map(text::normalize_title);
            tx.update_memory(&archived, norm.as_deref(), &previous, "forget", &actor)?;
            tx.resolve_conflicts(id, &now)?;
            log_event(tx, "forget", &archived, &now, &actor, json!({"previous_status": previous.status.as_str()}))?;
            Ok(archived)
        })
    }

    /// Brings an archived record back: active again, or superseded when it has a successor.
    pub fn restore(&mut self, id: i64) -> Result<Memory> {
        self.ensure_writable("restore")?;
        let now = format_ts(self.now());
        let actor = self.context.actor.clone();
        self.store.write(|tx| {
            let previous = tx.reader().get(id)?.ok_or(EngineError::NotFound { id })?;
            if previous.status != Status::Archived {
                return Err(EngineError::Invalid(format!(
                    "#{id} is {}, not archived; nothing to restore",
                    previous.status
                )));
            }
            let mut restored = previous.clone();
            if restored.superseded_by.is_some() {
                restored.status = Status::Superseded;
            } else {
                restored.status = Status::Active;
                restored.retired_at = None;
            }
            restored.updated_at = now.clone();
            // Bringing a record back is an access: decay must not archive it again at once.
            restored.last_accessed_at = Some(now.clone());
            let norm = restored.title.as_deref().map(text::normalize_title);
            tx.update_memory(&restored, norm.as_deref(), &previous, "restore", &actor)?;
            log_event(tx, "restore", &restored, &now, &actor, json!({}))?;
            Ok(restored)
        })
    }

    /// Re-checks a claim against a source: confirmed, review date renewed by the type's default.
    pub fn verify(&mut self, id: i64, source: &str) -> Result<Memory> {
        self.ensure_writable("verify")?;
        let now_time = self.now();
        let now = format_ts(now_time);
        let actor = self.context.actor.clone();
        let (source, _) = cleaned(source)?;
        if source.is_empty() {
            return Err(EngineError::Empty { what: "the source" });
        }
        self.store.write(|tx| {
            let previous = tx.reader().get(id)?.ok_or(EngineError::NotFound { id })?;
            let mut verified = previous.clone();
            verified.source = Some(source.clone());
            verified.confidence = Confidence::Confirmed;
            verified.review_at = previous
                .memory_type
                .default_review_days()
                .map(|days| format_ts(now_time + chrono::Duration::days(days)));
            verified.updated_at = now.clone();
            // A re-check is an access: decay's clock starts again (docs/design.md §8).
            verified.last_accessed_at = Some(now.clone());
            let norm = verified.title.as_deref().map(text::normalize_title);
            tx.update_memory(&verified, norm.as_deref(), &previous, "verify", &actor)?;
            log_event(
                tx,
                "verify",
                &verified,
                &now,
                &actor,
                json!({"source": source}),
            )?;
            Ok(verified)
        })
    }

    pub fn list(&self, request: &ListRequest) -> Result<Vec<Memory>> {
        let projects = self.visible_projects();
        let scopes = match request.scope.as_deref() {
            Some(scope) => Some(vec![
                cairn_core::scope::Scope::parse(scope)?.as_str().to_string(),
            ]),
            None => None,
        };
        Ok(self.store.reader()?.list(&ListFilter {
            projects: (!request.all_projects).then_some(projects.as_slice()),
            types: (!request.types.is_empty()).then_some(request.types.as_slice()),
            scopes: scopes.as_deref(),
            status: request.status,
            after_id: None,
            newest_first: true,
            limit: request.limit,
        })?)
    }
}
