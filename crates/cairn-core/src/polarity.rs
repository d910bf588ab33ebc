//! Contradiction flagging (docs/design.md §4.5): does a new record make the same key claim as an
//! existing one, with the opposite polarity?
//!
//! Two texts contradict when, once stop words and polarity words are set aside, they are about
//! the same thing (content-token Jaccard ≥ [`MIN_CONTENT_JACCARD`] with at least
//! [`MIN_SHARED_CONTENT`] shared tokens) and their polarity differs: one is negated and the
//! other is not, or an antonym pair is split across them (`enabled` / `disabled`). Flips
//! cancel: "X is not enabled" and "X is disabled" agree, so the texts contradict only when the
//! number of flips (a negation difference, plus each split antonym pair) is odd.
//!
//! This is a cheap lexical signal that proposes a conflict for a person to settle; it is
//! deterministic and never decides which text is right.

use crate::query::is_stop_word;
use std::collections::BTreeSet;

/// Smallest content-token Jaccard for two texts to count as the same claim.
pub const MIN_CONTENT_JACCARD: f64 = 0.6;
/// Fewest content tokens two texts must share to count as the same claim.
pub const MIN_SHARED_CONTENT: usize = 2;

/// Words that negate a claim (apostrophes normalized to `'`).
const NEGATIONS: &[&str] = &[
    "aren't",
    "arent",
    "can't",
    "cannot",
    "couldn't",
    "didn't",
    "doesn't",
    "doesnt",
    "don't",
    "dont",
    "hasn't",
    "haven't",
    "isn't",
    "isnt",
    "mustn't",
    "neither",
    "never",
    "no",
    "nor",
    "not",
    "shouldn't",
    "shouldnt",
    "wasn't",
    "weren't",
    "without",
    "won't",
    "wouldn't",
];

/// Antonym groups: (positive side, negative side). No word appears in two groups, so one
/// wording difference is never counted twice.
const ANTONYMS: &[(&[&str], &[&str])] = &[
    (
        &[
            "approve", "approved", "approves", "accept", "accepted", "accepts",
        ],
        &["reject", "rejected", "rejects"],
    ),
    (
        &["enable", "enabled", "enables"],
        &["disable", "disabled", "disables"],
    ),
    (
        &["allow", "allowed", "allows", "permit", "permitted"],
        &[
            "deny",
            "denied",
            "denies",
            "forbid",
            "forbidden",
            "disallow",
            "disallowed",
            "prohibited",
        ],
    ),
    (&["use", "uses", "using"], &["avoid", "avoids", "avoiding"]),
    (&["true"], &["false"]),
    (&["on"], &["off"]),
    (&["open", "opened"], &["closed", "close"]),
    (&["up"], &["down"]),
    (
        &["pass", "passes", "passing", "passed"],
        &["fail", "fails", "failing", "failed"],
    ),
    (&["works", "working"], &["broken"]),
    (&["required", "mandatory"], &["optional"]),
    (&["supported"], &["unsupported"]),
    (
        &["include", "includes", "included"],
        &["exclude", "excludes", "excluded"],
    ),
    (
        &["start", "started", "starts"],
        &["stop", "stopped", "stops"],
    ),
    (
        &["keep", "keeps", "kept"],
        &["remove", "removes", "removed"],
    ),
    (&["valid"], &["invalid"]),
];

/// `Some(reason)` when `new_text` makes the same key claim as `existing_text` with the opposite
/// polarity, e.g. `opposite polarity: "enabled" vs "disabled"` (the new text's word first) or
/// `negation: one says "don't", the other does not`.
pub fn contradiction(new_text: &str, existing_text: &str) -> Option<String> {
    let new_claim = Claim::read(new_text);
    let existing_claim = Claim::read(existing_text);

    let shared = new_claim
        .content
        .intersection(&existing_claim.content)
        .count();
    let union = new_claim.content.union(&existing_claim.content).count();
    if shared < MIN_SHARED_CONTENT || (shared as f64) < MIN_CONTENT_JACCARD * union as f64 {
        return None;
    }

    let negation = match (
        new_claim.negation_of(&existing_claim.content),
        existing_claim.negation_of(&new_claim.content),
    ) {
        (Some(marker), None) | (None, Some(marker)) => Some(marker),
        _ => None,
    };
    let splits: Vec<(&str, &str)> = ANTONYMS
        .iter()
        .filter_map(|&(positive, negative)| {
            match (
                new_claim.side(positive, negative),
                existing_claim.side(positive, negative),
            ) {
                (Some(Side::Positive(new_word)), Some(Side::Negative(old_word)))
                | (Some(Side::Negative(new_word)), Some(Side::Positive(old_word))) => {
                    Some((new_word, old_word))
                }
                _ => None,
            }
        })
        .collect();

    let flips = usize::from(negation.is_some()) + splits.len();
    if flips.is_multiple_of(2) {
        return None;
    }
    let opposite = |(new_word, old_word): (&str, &str)| {
        format!("opposite polarity: \"{new_word}\" vs \"{old_word}\"")
    };
    Some(match (negation, splits.first()) {
        (None, Some(&split)) => opposite(split),
        (Some(marker), None) => format!("negation: one says \"{marker}\", the other does not"),
        (Some(marker), Some(&split)) => format!("{}, and one says \"{marker}\"", opposite(split)),
        (None, None) => unreachable!("an odd number of flips has at least one"),
    })
}

/// What the polarity test needs from one text.
struct Claim {
    /// Lowercase words in order, apostrophes kept inside words (`don't`).
    words: Vec<String>,
    /// Each negation word, with the content word after it (if any) that it negates.
    negations: Vec<(&'static str, Option<String>)>,
    /// Words that say what the claim is about: no stop, negation or antonym words, with a
    /// possessive `'s` and a plural `s` folded away.
    content: BTreeSet<String>,
}

enum Side<'a> {
    Positive(&'a str),
    Negative(&'a str),
}

impl Claim {
    fn read(text: &str) -> Claim {
        let words = words_with_apostrophes(text);
        let mut negations = Vec::new();
        let mut content = BTreeSet::new();
        for (index, word) in words.iter().enumerate() {
            if let Some(marker) = NEGATIONS.iter().find(|&&marker| marker == word) {
                // What the negation is about: the next word that is not a stop word, if it is
                // a content word (a polarity word like `use` or `allowed` is the claim itself).
                let negated = words[index + 1..]
                    .iter()
                    .find(|next| !is_stop_word(next))
                    .and_then(|next| content_word(next));
                negations.push((*marker, negated));
            } else if let Some(word) = content_word(word) {
                content.insert(word);
            }
        }
        Claim {
            words,
            negations,
            content,
        }
    }

    /// The first negation that bears on the claim both texts share: one followed by a content
    /// word the other text lacks ("use Postgres, not Redis") negates something else.
    fn negation_of(&self, other_content: &BTreeSet<String>) -> Option<&'static str> {
        self.negations
            .iter()
            .find(|(_, negated)| {
                negated
                    .as_ref()
                    .is_none_or(|word| other_content.contains(word))
            })
            .map(|(marker, _)| *marker)
    }

    /// Which side of an antonym group this text takes: `None` when it uses neither side's
    /// words, or both.
    fn side<'a>(&self, positive: &'a [&'a str], negative: &'a [&'a str]) -> Option<Side<'a>> {
        let find = |group: &'a [&'a str]| {
            self.words
                .iter()
                .find_map(|word| group.iter().find(|&&w| w == word).copied())
        };
        match (find(positive), find(negative)) {
            (Some(word), None) => Some(Side::Positive(word)),
            (None, Some(word)) => Some(Side::Negative(word)),
            _ => None,
        }
    }
}

/// The content form of a word (`None` for stop, negation and antonym words): a possessive
/// `'s` and a plural `s` folded away.
fn content_word(word: &str) -> Option<String> {
    let word = word.strip_suffix("'s").unwrap_or(word);
    if is_stop_word(word) || NEGATIONS.contains(&word) || is_antonym_word(word) {
        return None;
    }
    Some(fold_plural(word))
}

fn is_antonym_word(word: &str) -> bool {
    ANTONYMS
        .iter()
        .any(|(positive, negative)| positive.contains(&word) || negative.contains(&word))
}

fn fold_plural(word: &str) -> String {
    match word.strip_suffix('s') {
        Some(stem) if stem.chars().count() >= 3 && !stem.ends_with('s') => stem.to_string(),
        _ => word.to_string(),
    }
}

/// Lowercase words (letters and digits), keeping an apostrophe (`'` or `’`) that joins two
/// letters, so `don't` is one word and its negation is not lost.
fn words_with_apostrophes(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (index, &character) in chars.iter().enumerate() {
        let joins = matches!(character, '\'' | '\u{2019}')
            && !current.is_empty()
            && chars
                .get(index + 1)
                .is_some_and(|next| next.is_alphanumeric());
        if character.is_alphanumeric() {
            current.extend(character.to_lowercase());
        } else if joins {
            current.push('\'');
        } else if !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(new_text: &str, existing_text: &str, expect: Option<&str>) {
        assert_eq!(
            contradiction(new_text, existing_text).as_deref(),
            expect,
            "{new_text:?} vs {existing_text:?}"
        );
    }

    #[test]
    fn negation_flips_a_claim() {
        let negated = Some("negation: one says \"don't\", the other does not");
        check(
            "Use Postgres for the job queue",
            "Don't use Postgres for the job queue",
            negated,
        );
        check(
            "Don't use Postgres for the job queue",
            "Use Postgres for the job queue",
            negated,
        );
        check(
            "Don’t use Postgres for the job queue",
            "Use Postgres for the job queue",
            negated,
        );
        check(
            "Deploys on Friday are allowed",
            "Deploys on Friday are not allowed",
            Some("negation: one says \"not\", the other does not"),
        );
        check(
            "The cache is never warmed on boot",
            "The cache is warmed on boot",
            Some("negation: one says \"never\", the other does not"),
        );
        check(
            "Do not use Postgres for the job queue",
            "Use Postgres for the job queue",
            Some("negation: one says \"not\", the other does not"),
        );
        check(
            "Run migrations without the maintenance window",
            "Run migrations in the maintenance window",
            Some("negation: one says \"without\", the other does not"),
        );
    }

    #[test]
    fn antonyms_flip_a_claim() {
        check(
            "Feature flag new-checkout is enabled in prod",
            "Feature flag new-checkout is disabled in prod",
            Some("opposite polarity: \"enabled\" vs \"disabled\""),
        );
        check(
            "tests pass on CI",
            "tests fail on CI",
            Some("opposite polarity: \"pass\" vs \"fail\""),
        );
        check(
            "The RFC for the new auth flow was rejected",
            "The RFC for the new auth flow was approved",
            Some("opposite polarity: \"rejected\" vs \"approved\""),
        );
        check(
            "Avoid ORMs in the billing service",
            "Use ORMs in the billing service",
            Some("opposite polarity: \"avoid\" vs \"use\""),
        );
        check(
            "The api gateway is down",
            "The api gateway is up",
            Some("opposite polarity: \"down\" vs \"up\""),
        );
        check(
            "strict_mode = true in tsconfig",
            "strict_mode = false in tsconfig",
            Some("opposite polarity: \"true\" vs \"false\""),
        );
        check(
            "Signing commits is optional for this repo",
            "Signing commits is required for this repo",
            Some("opposite polarity: \"optional\" vs \"required\""),
        );
        check(
            "Keep the legacy export endpoint",
            "Remove the legacy export endpoint",
            Some("opposite polarity: \"keep\" vs \"remove\""),
        );
    }

    #[test]
    fn flips_cancel() {
        check(
            "The cron job is not enabled",
            "The cron job is disabled",
            None,
        );
        check("Never avoid the cache layer", "Use the cache layer", None);
        check(
            "Don't use Postgres for the job queue",
            "Never use Postgres for the job queue",
            None,
        );
    }

    #[test]
    fn different_claims_do_not_conflict() {
        check(
            "deploys go through staging",
            "the staging database is small",
            None,
        );
        check(
            "We use Redis for caching",
            "We use Memcached for caching",
            None,
        );
        // The negation is about something only one text mentions.
        check(
            "Use Postgres for the job queue, not Redis",
            "Use Postgres for the job queue",
            None,
        );
        check(
            "Use Postgres for the job queue",
            "Use Postgres for the job queue and never SQLite",
            None,
        );
        check(
            "Use Postgres for the job queue",
            "Use Postgres for the job queue",
            None,
        );
        // One shared content word is too little to call it the same claim.
        check("The server is down", "The server is up", None);
        check("", "", None);
        check("not", "", None);
        check(
            "Don't use Postgres for the analytics warehouse or the reporting jobs",
            "Use Postgres for the job queue",
            None,
        );
    }

    #[test]
    fn words_keep_inner_apostrophes() {
        assert_eq!(
            words_with_apostrophes("Don't STOP—it's fine'"),
            ["don't", "stop", "it's", "fine"]
        );
        assert_eq!(
            words_with_apostrophes("'quoted' can’t"),
            ["quoted", "can't"]
        );
    }

    proptest! {
        #[test]
        fn contradiction_is_deterministic_and_never_flags_identical_texts(a in ".{0,80}", b in ".{0,80}") {
            prop_assert_eq!(contradiction(&a, &b), contradiction(&a, &b));
            prop_assert_eq!(contradiction(&a, &a), None);
            prop_assert_eq!(contradiction(&a, &b).is_some(), contradiction(&b, &a).is_some());
        }
    }
}
