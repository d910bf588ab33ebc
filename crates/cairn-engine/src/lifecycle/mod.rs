//! The lifecycle of docs/design.md §8: decay, review of stale records, consolidation (`dream`) with
//! its optional LLM calls, the brain's own settings, and the maintenance a session end starts. Forgetting archives through the same
//! operations as `cairn forget`; repair lives with `doctor` in `maintenance.rs`.

pub mod config;
pub mod decay;
pub mod dream;
pub mod llm;
pub mod maintain;

pub use config::{SETTINGS, Setting, SettingValue};
pub use decay::{DecayChange, DecayExplanation, DecayReport};
pub use dream::{
    AcceptReport, DreamOptions, DreamOutcome, DreamView, KEEP_DECIDED_DAYS, ProposalOutcome,
    PruneSummary, PrunedView, is_safe,
};
pub use llm::LlmConfig;
pub use maintain::{
    AutoAccept, EmbedStep, MaintainOptions, MaintainReport, STEPS, StepReport, StepRun, StepState,
};
