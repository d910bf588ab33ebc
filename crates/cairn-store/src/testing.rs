//! Helpers shared by the store's unit tests.

use cairn_core::memory::Memory;
use cairn_core::record::MemoryType;

/// A record with every field at a plain default, ready for `WriteTx::insert_memory`.
pub(crate) fn memory(project: &str, memory_type: MemoryType, body: &str, status: &str) -> Memory {
    serde_json::from_value(serde_json::json!({
        "id": 0, "project": project, "scope": "global", "type": memory_type.as_str(),
        "title": null, "body": body, "summary": null, "tags": [], "importance": 3,
        "confidence": "reported", "trust": "stated", "trust_zone": "private_self",
        "sensitivity": "normal", "source": null, "commit": null, "review_at": null,
        "expires_at": null, "pinned": false, "status": status, "supersedes": null,
        "superseded_by": null, "external_id": null, "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z", "last_accessed_at": null,
        "valid_from": "2026-01-01T00:00:00Z", "use_count": 0, "content_hash": "x",
        "retired_at": null
    }))
    .expect("a memory")
}
