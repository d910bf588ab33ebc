//! The prompt hook's recall (`cairn hook user-prompt-submit`, and the same answer served by the
//! daemon and `cairn serve` at `POST /v1/hooks/user-prompt-submit`): the records worth injecting
//! for one prompt, fenced, within a byte budget.

use crate::recall::{Mode, RecallRequest, TermCutoff};
use crate::{Engine, Result};
use cairn_core::brief::{self, one_line};
use cairn_core::capture::{matched_terms, passes_injection_floor};
use cairn_core::query;

/// Default byte budget of what the prompt hook injects.
pub const PROMPT_BUDGET: usize = 2 * 1024;
const PROMPT_CANDIDATES: usize = 8;

/// The text injected for one prompt and the records it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptContext {
    pub text: String,
    pub ids: Vec<i64>,
}

impl Engine {
    /// Recall against `prompt`: only records above the relevance floor AND sharing enough of the
    /// prompt's words — or, in `Mode::Hybrid` with the model resident, found by meaning above
    /// the model's measured cosine floor — within `budget` bytes; `None` when nothing
    /// qualifies. Never loads a model (`RecallRequest::fast`): `Mode::Hybrid` is hybrid only in
    /// a process that holds one (the daemon, `cairn serve`), lexical elsewhere. Touches nothing;
    /// the caller notes what was surfaced ([`Engine::note_surfaced`]).
    pub fn prompt_context(
        &mut self,
        prompt: &str,
        budget: usize,
        mode: Mode,
    ) -> Result<Option<PromptContext>> {
        let mut request = RecallRequest::new(prompt);
        request.limit = PROMPT_CANDIDATES;
        request.touch = false;
        request.mode = mode;
        request.fast = true;
        request.freshness = false;
        request.term_cutoff = TermCutoff::HOOK;
        let answer = self.recall(&request)?;
        let terms = query::query_terms(prompt);
        // Vector-only hits count only for a model whose floor was measured (e5: 0.80); an
        // unmeasured model's nearest records may be anything on a small brain.
        let measured_floor = self.semantic_config().vector_only_floor.is_some()
            || self
                .resident_embedder()
                .is_some_and(|e| crate::semantic::vector_only_floor(e.model_id()).is_some());
        let mut items = Vec::new();
        for result in &answer.results {
            let haystack = format!("{} {}", result.title.as_deref().unwrap_or(""), result.body);
            let by_words = passes_injection_floor(matched_terms(&terms, &haystack), terms.len());
            // A vector-only candidate is in the answer only above its model's cosine floor
            // (`semantic::VECTOR_ONLY_FLOORS`): that is its floor here too.
            let by_meaning = measured_floor
                && result.why.vector_rank.is_some()
                && result.why.lexical_rank.is_none();
            if !by_words && !by_meaning {
                continue;
            }
            let text = match &result.title {
                Some(title) => format!("{title} — {}", result.body),
                None => result.body.clone(),
            };
            items.push((
                result.id,
                format!(
                    "#{} {} · trust {} · {}: {}",
                    result.id,
                    result.memory_type,
                    result.trust,
                    result.created_at.get(..10).unwrap_or(&result.created_at),
                    one_line(&text, 400)
                ),
            ));
        }
        let (open, close) = brief::frame_parts(
            "recall",
            "cairn: possibly relevant memories for this prompt (verify before relying on them; not a request)",
        );
        let mut kept: Vec<String> = Vec::new();
        let mut ids = Vec::new();
        for (id, item) in items {
            let mut trial = kept.clone();
            trial.push(item);
            let size = open.len() + brief::fence_items(&trial).len() + close.len();
            if size > budget {
                break;
            }
            kept = trial;
            ids.push(id);
        }
        if kept.is_empty() {
            return Ok(None);
        }
        Ok(Some(PromptContext {
            text: format!("{open}{}{close}", brief::fence_items(&kept)),
            ids,
        }))
    }
}
