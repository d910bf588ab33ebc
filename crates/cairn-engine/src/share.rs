//! Export envelopes for another agent (docs/design.md §11 "Exchange"): a versioned JSON document of
//! selected records — with their text, or as references only — that honors trust zones and
//! sensitivity, carries each record's content hash and a SHA-256 of the whole payload, and can
//! be imported by another brain (`import_envelope`) with trust `imported`.
//!
//! Rules: a record leaves only when the target zone may see it (`TrustZone::may_see`) and it is
//! not `do_not_export` — never, in any envelope; `outside_contact` and `paid_public` envelopes
//! carry references only (asking for content is refused); the envelope names how many selected
//! records were withheld, never which.

use crate::exchange::{ImportOptions, ImportReport};
use crate::{Engine, EngineError, RecallRequest, Result};
use cairn_core::memory::Memory;
use cairn_core::receipt;
use cairn_core::record::{Confidence, MemoryType, Sensitivity, Status, TrustZone};
use cairn_core::time::format_ts;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The envelope format this build writes and reads.
pub const ENVELOPE_SCHEMA: &str = "cairn.share.v1";
/// Largest envelope read, in bytes.
pub const MAX_ENVELOPE_BYTES: usize = 64 * 1024 * 1024;

/// What to share, with whom.
#[derive(Debug, Clone)]
pub struct ShareRequest {
    pub zone: TrustZone,
    /// Records matching a recall for this query (as seen from `zone`).
    pub query: Option<String>,
    /// These records (when neither query nor ids: every active record of the project).
    pub ids: Vec<i64>,
    pub include_content: bool,
    /// Most records selected by a query.
    pub limit: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnvelopeSource {
    pub project: String,
    pub generator: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Selection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub ids: Vec<i64>,
}

/// One record in an envelope: metadata and content hash always, the body only with content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SharedRecord {
    pub id: i64,
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    pub title: Option<String>,
    pub summary: Option<String>,
    pub tags: Vec<String>,
    pub scope: String,
    pub trust_zone: TrustZone,
    pub sensitivity: Sensitivity,
    pub confidence: Confidence,
    pub importance: u8,
    pub source: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub content_hash: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub body: Option<String>,
}

/// The envelope (`cairn.share.v1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Envelope {
    pub schema: String,
    pub zone: TrustZone,
    pub created_at: String,
    pub source: EnvelopeSource,
    pub selection: Selection,
    pub include_content: bool,
    pub count: usize,
    /// Selected records this zone may not receive (not named).
    pub withheld: usize,
    pub records: Vec<SharedRecord>,
    /// SHA-256 of the canonical JSON of every other field.
    pub payload_sha256: String,
}

/// What importing an envelope did.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EnvelopeImportReport {
    pub payload_sha256: String,
    pub zone: TrustZone,
    pub from_project: String,
    /// Records that came as references only (no content to store).
    pub references: usize,
    pub import: ImportReport,
}

/// The payload hash: SHA-256 over the canonical JSON of the envelope without its hash field.
pub fn payload_sha256(envelope: &Value) -> String {
    let mut value = envelope.clone();
    if let Some(object) = value.as_object_mut() {
        object.remove("payload_sha256");
    }
    receipt::receipt(&value)
}

fn refused(message: String) -> EngineError {
    EngineError::Invalid(format!("{message}; nothing was imported"))
}

impl Engine {
    /// Builds an envelope for `request.zone`.
    pub fn share(&mut self, request: &ShareRequest) -> Result<Envelope> {
        let zone = request.zone;
        if request.include_content
            && matches!(zone, TrustZone::OutsideContact | TrustZone::PaidPublic)
        {
            return Err(EngineError::Refused {
                message: format!(
                    "envelopes for {zone} carry references only, never content; nothing was shared: drop --include-content, or share with a trusted_collaborator"
                ),
                existing: None,
                ways_out: vec!["drop --include-content".into()],
            });
        }
        let selected: Vec<Memory> = if let Some(query) = &request.query {
            let mut recall = RecallRequest::new(query.clone());
            recall.limit = request.limit.max(1);
            recall.touch = false;
            recall.zone = Some(zone);
            let ids: Vec<i64> = self.recall(&recall)?.results.iter().map(|r| r.id).collect();
            self.store.reader()?.get_many(&ids)?
        } else if !request.ids.is_empty() {
            let mut found = Vec::new();
            for id in &request.ids {
                found.push(self.get(*id)?);
            }
            found
        } else {
            let projects = self.visible_projects();
            self.store.reader()?.list(&cairn_store::ListFilter {
                projects: Some(&projects),
                status: Some(Status::Active),
                ..cairn_store::ListFilter::default()
            })?
        };
        let mut records = Vec::new();
        let mut withheld = 0;
        for memory in selected {
            let leaves = memory.status == Status::Active
                && memory.sensitivity != Sensitivity::DoNotExport
                && zone.may_see(memory.trust_zone, memory.sensitivity);
            if !leaves {
                withheld += 1;
                continue;
            }
            records.push(SharedRecord {
                id: memory.id,
                memory_type: memory.memory_type,
                title: memory.title,
                summary: memory.summary,
                tags: memory.tags,
                scope: memory.scope,
                trust_zone: memory.trust_zone,
                sensitivity: memory.sensitivity,
                confidence: memory.confidence,
                importance: memory.importance,
                source: memory.source,
                created_at: memory.created_at,
                updated_at: memory.updated_at,
                content_hash: memory.content_hash,
                body: request.include_content.then_some(memory.body),
            });
        }
        let mut envelope = Envelope {
            schema: ENVELOPE_SCHEMA.to_string(),
            zone,
            created_at: format_ts(self.now()),
            source: EnvelopeSource {
                project: self.context.project.clone(),
                generator: format!("cairn {}", env!("CARGO_PKG_VERSION")),
            },
            selection: Selection {
                query: request.query.clone(),
                ids: request.ids.clone(),
            },
            include_content: request.include_content,
            count: records.len(),
            withheld,
            records,
            payload_sha256: String::new(),
        };
        let value = serde_json::to_value(&envelope).expect("an envelope serializes");
        envelope.payload_sha256 = payload_sha256(&value);
        Ok(envelope)
    }

    /// Takes an envelope in: the payload hash and every content hash must match, or nothing is
    /// imported. Records with content are stored with trust `imported` (idempotently: the
    /// sender's id is kept as the external id); references are counted, not stored.
    pub fn import_envelope(&mut self, bytes: &[u8]) -> Result<EnvelopeImportReport> {
        self.ensure_writable("import envelope")?;
        if bytes.len() > MAX_ENVELOPE_BYTES {
            return Err(refused(format!(
                "the envelope is {} bytes, over the limit of {MAX_ENVELOPE_BYTES}",
                bytes.len()
            )));
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            refused(format!(
                "the envelope is not UTF-8 (byte {})",
                e.valid_up_to()
            ))
        })?;
        let value: Value =
            serde_json::from_str(text).map_err(|e| refused(format!("not a JSON envelope: {e}")))?;
        let schema = value.get("schema").and_then(Value::as_str).unwrap_or("");
        if schema != ENVELOPE_SCHEMA {
            return Err(refused(format!(
                "unknown envelope schema {schema:?}: this cairn reads {ENVELOPE_SCHEMA}"
            )));
        }
        let claimed = value
            .get("payload_sha256")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let actual = payload_sha256(&value);
        if claimed != actual {
            return Err(refused(format!(
                "refused: the payload hash does not match (envelope says {claimed:?}, content hashes to {actual}); it was changed after it was made"
            )));
        }
        let envelope: Envelope = serde_json::from_value(value)
            .map_err(|e| refused(format!("not a {ENVELOPE_SCHEMA} envelope: {e}")))?;
        for record in &envelope.records {
            if let Some(body) = &record.body {
                let hash = cairn_core::text::content_hash(body);
                if hash != record.content_hash {
                    return Err(refused(format!(
                        "refused: the text of record #{} does not match its content hash",
                        record.id
                    )));
                }
            }
        }
        let mut lines = String::new();
        let mut references = 0;
        for record in &envelope.records {
            let Some(body) = &record.body else {
                references += 1;
                continue;
            };
            let line = json!({
                "type": record.memory_type,
                "title": record.title,
                "body": body,
                "summary": record.summary,
                "tags": record.tags,
                "scope": record.scope,
                "importance": record.importance,
                "confidence": record.confidence,
                "trust": "imported",
                "trust_zone": record.trust_zone,
                "sensitivity": record.sensitivity,
                "source": record.source.clone().unwrap_or_else(|| format!("shared from {}", envelope.source.project)),
                "external_id": format!("share:{}#{}", envelope.source.project, record.id),
                "created_at": record.created_at,
            });
            lines.push_str(&line.to_string());
            lines.push('\n');
        }
        let import = self.import_jsonl(
            &mut std::io::Cursor::new(lines.into_bytes()),
            &ImportOptions::default(),
        )?;
        Ok(EnvelopeImportReport {
            payload_sha256: envelope.payload_sha256,
            zone: envelope.zone,
            from_project: envelope.source.project,
            references,
            import,
        })
    }
}
