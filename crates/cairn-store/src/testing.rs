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

/// The seeded generator of the store's randomized tests (an LCG: the same seed gives the same
/// records), drawing words Zipf-like from its module's list.
pub(crate) struct WordRng {
    state: u64,
    words: &'static [&'static str],
}

impl WordRng {
    pub(crate) fn new(seed: u64, words: &'static [&'static str]) -> WordRng {
        WordRng { state: seed, words }
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.state = self
            .state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.state >> 33) as usize % n
    }

    /// Zipf-like: early words far more often.
    pub(crate) fn word(&mut self) -> &'static str {
        let a = self.below(self.words.len());
        let b = self.below(self.words.len());
        self.words[a.min(b)]
    }

    pub(crate) fn text(&mut self, most: usize) -> String {
        let n = 1 + self.below(most);
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }

    pub(crate) fn maybe_text(&mut self, most: usize) -> Option<String> {
        (self.below(3) > 0).then(|| self.text(most))
    }

    pub(crate) fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }

    pub(crate) fn unit_vector(&mut self, dimension: usize) -> Vec<f32> {
        let raw: Vec<f32> = (0..dimension)
            .map(|_| self.below(2_000_001) as f32 / 1_000_000.0 - 1.0)
            .collect();
        let norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        raw.iter().map(|x| x / norm).collect()
    }
}
