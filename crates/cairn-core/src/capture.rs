//! Deterministic heuristics of the agent hooks: which prompts are too trivial to recall
//! against, whether a recalled record matches a prompt well enough to inject, and which
//! sentences of a captured user turn are candidate durable facts for the inbox.
//!
//! No model, no randomness: the same text always gives the same answer.

use crate::query;
use crate::record::MemoryType;

/// Words that acknowledge or steer rather than ask about anything.
const ACKNOWLEDGEMENTS: &[&str] = &[
    "ok",
    "okay",
    "k",
    "yes",
    "y",
    "yep",
    "yeah",
    "no",
    "n",
    "nope",
    "thanks",
    "thank you",
    "thx",
    "ty",
    "continue",
    "go on",
    "go ahead",
    "proceed",
    "do it",
    "lgtm",
    "sure",
    "great",
    "nice",
    "cool",
    "perfect",
    "done",
    "next",
    "again",
    "retry",
    "stop",
    "wait",
    "hi",
    "hello",
    "hey",
];

/// A prompt not worth a recall: empty, a slash command, an acknowledgement, or fewer than two
/// searchable words.
pub fn is_trivial_prompt(prompt: &str) -> bool {
    let trimmed = prompt.trim();
    if trimmed.is_empty() || trimmed.starts_with('/') {
        return true;
    }
    let lowered = trimmed
        .to_lowercase()
        .trim_end_matches(['.', '!', '?', ' '])
        .to_string();
    if ACKNOWLEDGEMENTS.contains(&lowered.as_str()) {
        return true;
    }
    query::query_terms(trimmed).len() < 2
}

/// How many of the query's `terms` occur in `text` (case-insensitive; a term also counts when
/// the text holds a word sharing its first five letters, so `deploying` matches `deploy`).
pub fn matched_terms(terms: &[String], text: &str) -> usize {
    let words: Vec<String> = text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect();
    terms
        .iter()
        .filter(|term| {
            let term = term.to_lowercase();
            let stem: String = term.chars().take(5).collect();
            words
                .iter()
                .any(|w| *w == term || (stem.chars().count() >= 4 && w.starts_with(&stem)))
        })
        .count()
}

/// The absolute floor for injecting a recalled record into a prompt: the record must contain
/// at least two of the prompt's searchable words (one for a one-word query) and at least a
/// third of them. A relative floor alone would always inject the best of a bad lot.
pub fn passes_injection_floor(matched: usize, total_terms: usize) -> bool {
    if total_terms == 0 {
        return false;
    }
    let needed = if total_terms == 1 { 1 } else { 2 };
    matched >= needed && (matched as f64) >= (total_terms as f64) / 3.0
}

/// A sentence of a captured user turn that looks like a durable fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Which heuristic fired: `remember`, `rule`, `decision`, `preference`.
    pub kind: &'static str,
    pub suggested_type: MemoryType,
    pub text: String,
}

const REMEMBER_TRIGGERS: &[&str] = &[
    "remember that ",
    "remember: ",
    "please remember that ",
    "please remember ",
    "note that ",
    "keep in mind that ",
    "for the record, ",
    "fyi: ",
];
const RULE_TRIGGERS: &[&str] = &[
    "always ",
    "never ",
    "don't ever ",
    "do not ever ",
    "from now on, ",
    "from now on ",
    "make sure to always ",
];
const DECISION_MARKERS: &[&str] = &[
    "we decided ",
    "we've decided ",
    "we have decided ",
    "decision: ",
    "let's go with ",
    "we're going with ",
    "we are going with ",
    "we chose ",
    "we picked ",
];
const PREFERENCE_TRIGGERS: &[&str] = &[
    "i prefer ",
    "i'd prefer ",
    "i would prefer ",
    "i like it when ",
];

/// Candidate durable facts in a user's turn, in order, without duplicates.
pub fn candidate_facts(user_text: &str) -> Vec<Candidate> {
    let mut found: Vec<Candidate> = Vec::new();
    for sentence in sentences(user_text) {
        let lowered = sentence.to_lowercase();
        let candidate =
            if let Some(trigger) = REMEMBER_TRIGGERS.iter().find(|t| lowered.starts_with(*t)) {
                let rest = sentence[trigger.len()..].trim();
                Some(("remember", MemoryType::Fact, capitalize(rest)))
            } else if RULE_TRIGGERS.iter().any(|t| lowered.starts_with(t)) {
                Some(("rule", MemoryType::Preference, sentence.clone()))
            } else if DECISION_MARKERS
                .iter()
                .any(|t| lowered.starts_with(t) || lowered.contains(&format!(" {t}")))
            {
                Some(("decision", MemoryType::Decision, sentence.clone()))
            } else if PREFERENCE_TRIGGERS.iter().any(|t| lowered.starts_with(t)) {
                Some(("preference", MemoryType::Preference, sentence.clone()))
            } else {
                None
            };
        let Some((kind, suggested_type, text)) = candidate else {
            continue;
        };
        let words = text.split_whitespace().count();
        if words < 3 || text.chars().count() > 400 {
            continue;
        }
        if found.iter().any(|c| c.text == text) {
            continue;
        }
        found.push(Candidate {
            kind,
            suggested_type,
            text,
        });
    }
    found
}

/// Why a captured turn was not stored as an episode (`cairn stats` counts each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// The user only acknowledged or steered ("ok", "thanks", "continue") and the answer says
    /// nothing worth keeping.
    Acknowledgement,
    /// No words of the user and a short answer with no content: tool chatter ("Let me check.").
    ToolChatter,
    /// Nothing but cairn's own injected context.
    Injection,
}

impl SkipReason {
    pub const ALL: [SkipReason; 3] = [
        SkipReason::Acknowledgement,
        SkipReason::ToolChatter,
        SkipReason::Injection,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Acknowledgement => "acknowledgement",
            SkipReason::ToolChatter => "tool_chatter",
            SkipReason::Injection => "injection",
        }
    }
}

/// What capture does with one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Salience {
    /// Stored as an episode.
    Keep,
    /// Stored as an episode that expires (the 14 days docs/design.md gives captured `state`):
    /// it is about how things are right now, and says nothing decided, fixed or ruled.
    Expiring,
    /// Not stored.
    Skip(SkipReason),
}

/// Words that mark an error or a failure.
const ERROR_WORDS: &[&str] = &[
    "error",
    "errors",
    "err",
    "fail",
    "fails",
    "failed",
    "failing",
    "failure",
    "panic",
    "panics",
    "panicked",
    "exception",
    "traceback",
    "crash",
    "crashes",
    "crashed",
    "broken",
    "bug",
    "warning",
    "denied",
    "refused",
    "timeout",
    "timed",
    "cannot",
    "can't",
    "couldn't",
    "doesn't",
    "won't",
    "undefined",
    "null",
    "segfault",
    "stacktrace",
    "regression",
];
/// Words that mark a fix.
const FIX_WORDS: &[&str] = &[
    "fix",
    "fixed",
    "fixes",
    "fixing",
    "resolved",
    "resolve",
    "solved",
    "solve",
    "workaround",
    "patch",
    "patched",
    "revert",
    "reverted",
    "root",
    "cause",
    "because",
];
/// Words that mark a decision (besides the inbox's decision markers).
const DECISION_WORDS: &[&str] = &[
    "decided", "decide", "decision", "chose", "choose", "picked", "instead", "prefer", "agreed",
    "settled", "switch", "switched", "adopt", "adopted", "migrate", "migrated",
];
/// Programs whose name in a turn marks a command.
const COMMAND_WORDS: &[&str] = &[
    "cargo",
    "git",
    "npm",
    "pnpm",
    "yarn",
    "npx",
    "make",
    "docker",
    "kubectl",
    "python",
    "python3",
    "pip",
    "go",
    "rustc",
    "sudo",
    "ssh",
    "curl",
    "bash",
    "sh",
    "terraform",
    "helm",
    "psql",
    "sqlite3",
    "node",
    "deno",
    "bun",
    "uv",
    "brew",
    "apt",
    "systemctl",
    "cairn",
];
/// Phrases that make a turn about the present state of things, not a durable fact.
const TRANSIENT_MARKERS: &[&str] = &[
    "right now",
    "currently",
    "at the moment",
    "for now",
    "for the moment",
    "today",
    "tonight",
    "this morning",
    "this afternoon",
    "this week",
    "temporarily",
    "in progress",
    "is down",
    "are down",
    "still running",
    "is running",
    "wip",
];
/// An answer with at most this many searchable words and no signal is chatter.
const CHATTER_WORDS: usize = 4;

/// What in a text marks it as worth keeping: a decision, an error, a fix, a path, a command or
/// a number, or a sentence the inbox would take.
pub fn carries_signal(text: &str) -> bool {
    if text.chars().any(|c| c.is_ascii_digit()) || text.contains('`') || text.contains("$ ") {
        return true;
    }
    let lowered = text.to_lowercase();
    if DECISION_MARKERS.iter().any(|m| lowered.contains(m.trim())) {
        return true;
    }
    for token in lowered.split_whitespace() {
        let word = token.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'' && c != '_');
        if ERROR_WORDS.contains(&word)
            || FIX_WORDS.contains(&word)
            || DECISION_WORDS.contains(&word)
            || COMMAND_WORDS.contains(&word)
            || looks_like_path(token)
            || word.contains('_')
        {
            return true;
        }
    }
    !candidate_facts(text).is_empty()
}

/// `src/main.rs`, `./x`, `C:\\dir`, `Cargo.toml`, `~/.config`: a token that names a file.
fn looks_like_path(token: &str) -> bool {
    let token = token.trim_matches(|c: char| matches!(c, ',' | ';' | ':' | '(' | ')' | '"' | '\''));
    let token = token.strip_suffix('.').unwrap_or(token);
    if token.starts_with("~/") || token.starts_with("./") || token.starts_with('/') {
        return token.len() > 1;
    }
    if let Some((left, right)) = token.split_once(['/', '\\']) {
        return !left.is_empty() && !right.is_empty();
    }
    // name.ext with a short alphabetic extension (not a sentence's last word: the dot is inside)
    match token.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && stem
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
        }
        None => false,
    }
}

/// Whether a captured turn is stored, stored to expire, or skipped (and why). A turn that
/// carries a decision, an error, a fix, a path, a command or a number is never skipped.
/// `raw_user` / `raw_assistant` are the texts before cairn's injections were stripped, `user`
/// / `assistant` after.
pub fn turn_salience(raw_user: &str, raw_assistant: &str, user: &str, assistant: &str) -> Salience {
    let user = user.trim();
    let assistant = assistant.trim();
    if user.is_empty() && assistant.is_empty() {
        return if raw_user.trim().is_empty() && raw_assistant.trim().is_empty() {
            Salience::Skip(SkipReason::ToolChatter)
        } else {
            Salience::Skip(SkipReason::Injection)
        };
    }
    let user_signal = carries_signal(user);
    let assistant_signal = carries_signal(assistant);
    if !user_signal && !assistant_signal {
        let answer_is_chatter = query::query_terms(assistant).len() <= CHATTER_WORDS;
        if user.is_empty() && answer_is_chatter {
            return Salience::Skip(SkipReason::ToolChatter);
        }
        if is_trivial_prompt(user) && !user.starts_with('/') && answer_is_chatter {
            return Salience::Skip(SkipReason::Acknowledgement);
        }
    }
    let lowered = format!("{user}\n{assistant}").to_lowercase();
    let durable = DECISION_MARKERS.iter().any(|m| lowered.contains(m.trim()))
        || lowered.split_whitespace().any(|token| {
            let word = token.trim_matches(|c: char| !c.is_alphanumeric());
            FIX_WORDS.contains(&word) || DECISION_WORDS.contains(&word)
        })
        || !candidate_facts(user).is_empty();
    if !durable
        && TRANSIENT_MARKERS
            .iter()
            .any(|m| contains_phrase(&lowered, m))
    {
        return Salience::Expiring;
    }
    Salience::Keep
}

/// `phrase` in `text` on word boundaries.
fn contains_phrase(text: &str, phrase: &str) -> bool {
    text.match_indices(phrase).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + phrase.len()..].chars().next();
        before.is_none_or(|c| !c.is_alphanumeric()) && after.is_none_or(|c| !c.is_alphanumeric())
    })
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Sentences outside fenced code, list markers and quotes trimmed, questions dropped.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || trimmed.is_empty() {
            continue;
        }
        let line = trimmed
            .trim_start_matches(['-', '*', '>', '•'])
            .trim_start();
        let mut sentence = String::new();
        let chars: Vec<char> = line.chars().collect();
        for (i, c) in chars.iter().enumerate() {
            sentence.push(*c);
            let ends = matches!(c, '.' | '!' | '?')
                && chars.get(i + 1).is_none_or(|next| next.is_whitespace());
            if ends {
                push_sentence(&mut out, &sentence);
                sentence.clear();
            }
        }
        push_sentence(&mut out, &sentence);
    }
    out
}

fn push_sentence(out: &mut Vec<String>, sentence: &str) {
    let sentence = sentence.trim();
    if sentence.is_empty() || sentence.ends_with('?') {
        return;
    }
    out.push(sentence.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trivial_prompts() {
        for (prompt, trivial) in [
            ("", true),
            ("   ", true),
            ("ok", true),
            ("Thanks!", true),
            ("continue", true),
            ("/compact", true),
            ("lgtm.", true),
            ("fix it", true), // one searchable word
            ("why does the deploy pipeline fail on staging?", false),
            ("pnpm lockfile drift", false),
        ] {
            assert_eq!(is_trivial_prompt(prompt), trivial, "{prompt:?}");
        }
    }

    #[test]
    fn the_injection_floor_needs_real_overlap() {
        let terms: Vec<String> = ["deploy", "pipeline", "staging", "fails"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            matched_terms(&terms, "Deploying the pipeline to staging"),
            3
        );
        assert_eq!(matched_terms(&terms, "unrelated text about cats"), 0);
        for (matched, total, passes) in [
            (0, 0, false),
            (1, 1, true),
            (1, 2, false),
            (2, 2, true),
            (2, 6, true),
            (2, 7, false),
            (3, 7, true),
        ] {
            assert_eq!(
                passes_injection_floor(matched, total),
                passes,
                "{matched}/{total}"
            );
        }
    }

    fn check(text: &str, expect: &[(&str, MemoryType, &str)]) {
        let found = candidate_facts(text);
        let got: Vec<(&str, MemoryType, &str)> = found
            .iter()
            .map(|c| (c.kind, c.suggested_type, c.text.as_str()))
            .collect();
        assert_eq!(got, expect, "{text}");
    }

    #[test]
    fn candidate_facts_from_plain_words() {
        check(
            "Remember that the staging DB is on port 5433.",
            &[(
                "remember",
                MemoryType::Fact,
                "The staging DB is on port 5433.",
            )],
        );
        check(
            "ok. Always run cargo fmt before committing! never push to main.",
            &[
                (
                    "rule",
                    MemoryType::Preference,
                    "Always run cargo fmt before committing!",
                ),
                ("rule", MemoryType::Preference, "never push to main."),
            ],
        );
        check(
            "After the outage we decided to use Postgres for the queue.",
            &[(
                "decision",
                MemoryType::Decision,
                "After the outage we decided to use Postgres for the queue.",
            )],
        );
        check(
            "I prefer small commits with clear messages",
            &[(
                "preference",
                MemoryType::Preference,
                "I prefer small commits with clear messages",
            )],
        );
    }

    #[test]
    fn questions_code_and_short_fragments_are_not_facts() {
        check("Should we always use tabs?", &[]);
        check("```\nalways do x in code\n```", &[]);
        check("never mind", &[]);
        check("remember that", &[]);
        check("what did we decide about the queue?", &[]);
    }
}
