//! The memory record as plain data (docs/design.md §3). Field names are the JSON contract of docs/cli.md.

use crate::record::{Confidence, MemoryType, Sensitivity, Status, Trust, TrustZone};
use serde::{Deserialize, Serialize};

/// A stored memory record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Memory {
    pub id: i64,
    /// `None` for personal records, visible from every project.
    pub project: Option<String>,
    pub scope: String,
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    pub title: Option<String>,
    pub body: String,
    pub summary: Option<String>,
    pub tags: Vec<String>,
    pub importance: u8,
    pub confidence: Confidence,
    pub trust: Trust,
    pub trust_zone: TrustZone,
    pub sensitivity: Sensitivity,
    pub source: Option<String>,
    pub commit: Option<String>,
    pub review_at: Option<String>,
    pub expires_at: Option<String>,
    pub pinned: bool,
    pub status: Status,
    pub supersedes: Option<i64>,
    pub superseded_by: Option<i64>,
    pub external_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub last_accessed_at: Option<String>,
    pub valid_from: String,
    pub use_count: u32,
    pub content_hash: String,
    /// When the record stopped being active (superseded or archived); replays with `--as-of`
    /// treat it as active before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<String>,
}

impl Memory {
    /// The disclosure partition: records in different partitions are never merged.
    pub fn partition(&self) -> Partition {
        Partition {
            project: self.project.clone(),
            scope: self.scope.clone(),
            trust_zone: self.trust_zone,
            sensitivity: self.sensitivity,
        }
    }

    /// A short line naming the record for humans: `#42 title` or the start of the body.
    pub fn label(&self) -> String {
        let text = self.title.as_deref().unwrap_or(&self.body);
        let mut short: String = text.chars().take(70).collect();
        if text.chars().count() > 70 {
            short.push('…');
        }
        format!("#{} {}", self.id, short.replace('\n', " "))
    }
}

/// project + scope + trust zone + sensitivity (docs/design.md §4).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Partition {
    pub project: Option<String>,
    pub scope: String,
    pub trust_zone: TrustZone,
    pub sensitivity: Sensitivity,
}
