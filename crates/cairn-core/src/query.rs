//! Turning anything a user types into a safe FTS5 query (docs/design.md §5.1).
//!
//! [`query_terms`] splits the input the way SQLite's `unicode61` tokenizer splits text: runs of
//! Unicode letters and digits, everything else a separator — `_`, `-`, `.`, `'`, `"`, `*`, `:`
//! and `^` included, so `snake_case` is `snake` + `case` on both sides of the index. Terms are
//! lowercased, English stop words and conversational fillers are dropped, and duplicates go.
//! [`fts_match_expression`] then double-quotes every term and joins them with ` OR `: a quoted
//! string is never read as FTS5 syntax (`AND`, `NEAR`, `*`, `^`, column filters), so no input
//! can cause a syntax error or be silently reinterpreted.
//!
//! FTS5 re-tokenizes each quoted term with the table's own tokenizer (`porter unicode61`), so a
//! term it splits further (a word with a non-Latin combining mark, which `unicode61` treats as
//! a separator) becomes a phrase: still valid, still matching. A term in which `unicode61` finds
//! no token at all would match nothing, so none is made: enclosed Latin letters (`ⓐ`, `⒜`,
//! `🄰` — symbols to `unicode61`, letters to Rust) are read as the letters they enclose, and a
//! run of combining marks alone (a Devanagari vowel sign typed by itself) is dropped, which
//! [`no_terms_reason`] explains when nothing else is left.

use crate::text::{sanitize, word_tokens};

/// English stop words and conversational fillers ("what did we decide about …"), sorted for
/// binary search. Includes the stubs contractions split into (`don`, `t`, `ll`, …). Words that
/// carry meaning in a technical memory (`up`, `down`, `off`, `new`, `go`, `use`, `may`, `us`)
/// are deliberately absent.
pub const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "anyone",
    "anything",
    "are",
    "aren",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "couldn",
    "d",
    "did",
    "didn",
    "do",
    "does",
    "doesn",
    "doing",
    "don",
    "during",
    "each",
    "either",
    "else",
    "ever",
    "every",
    "everything",
    "few",
    "for",
    "from",
    "further",
    "get",
    "gets",
    "got",
    "had",
    "hadn",
    "has",
    "hasn",
    "have",
    "haven",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "it",
    "its",
    "itself",
    "just",
    "know",
    "let",
    "like",
    "ll",
    "m",
    "me",
    "might",
    "mine",
    "more",
    "most",
    "much",
    "must",
    "my",
    "myself",
    "neither",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "on",
    "once",
    "only",
    "or",
    "other",
    "others",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "please",
    "re",
    "recall",
    "remember",
    "s",
    "said",
    "same",
    "say",
    "shall",
    "she",
    "should",
    "shouldn",
    "so",
    "some",
    "something",
    "such",
    "t",
    "tell",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "things",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "ve",
    "very",
    "was",
    "wasn",
    "way",
    "we",
    "were",
    "weren",
    "what",
    "whatever",
    "when",
    "whenever",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "won",
    "would",
    "wouldn",
    "yet",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// True when `word` (lowercase) is one of [`STOP_WORDS`].
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// The search terms in `input`: lowercase word tokens in order of first appearance, without
/// duplicates and without stop words. When every token is a stop word ("the who"), the tokens
/// are kept instead, so the search still runs. Empty or punctuation-only input gives no terms.
///
/// The input is sanitized first (NFC, invisible characters removed, NUL read as a space) so a
/// query pasted with a zero-width space in it finds the same words the stored text has.
pub fn query_terms(input: &str) -> Vec<String> {
    let mut tokens: Vec<String> = Vec::new();
    for token in query_tokens(input) {
        if indexable(&token) && !tokens.contains(&token) {
            tokens.push(token);
        }
    }
    let content: Vec<String> = tokens
        .iter()
        .filter(|token| !is_stop_word(token))
        .cloned()
        .collect();
    if content.is_empty() { tokens } else { content }
}

/// The word tokens of a query: sanitized, enclosed letters read as letters.
fn query_tokens(input: &str) -> Vec<String> {
    let cleaned = sanitize(&input.replace('\0', " "))
        .map(|sanitized| sanitized.text)
        .unwrap_or_default();
    let folded: String = cleaned.chars().map(enclosed_letter).collect();
    word_tokens(&folded)
}

/// The Latin letter a circled, parenthesized or squared letter encloses (`ⓐ` → `a`, `🄰` →
/// `A`); any other character as it is. `unicode61` counts these as symbols, not letters, so
/// as typed they could never match; NFKC has no mapping for the negative circled and squared
/// ones, hence the table.
fn enclosed_letter(character: char) -> char {
    let offset = |first: char| character as u32 - first as u32;
    let letter = match character {
        '\u{249C}'..='\u{24B5}' => b'a' as u32 + offset('\u{249C}'),
        '\u{24B6}'..='\u{24CF}' => b'A' as u32 + offset('\u{24B6}'),
        '\u{24D0}'..='\u{24E9}' => b'a' as u32 + offset('\u{24D0}'),
        '\u{1F130}'..='\u{1F149}' => b'A' as u32 + offset('\u{1F130}'),
        '\u{1F150}'..='\u{1F169}' => b'A' as u32 + offset('\u{1F150}'),
        '\u{1F170}'..='\u{1F189}' => b'A' as u32 + offset('\u{1F170}'),
        _ => return character,
    };
    char::from_u32(letter).unwrap_or(character)
}

/// Whether FTS5's `unicode61` finds a token in `token`: a letter or digit that is not a
/// combining mark (marks alone are separators to it), or a private-use character.
fn indexable(token: &str) -> bool {
    token.chars().any(|c| {
        (c.is_alphanumeric() && !unicode_normalization::char::is_combining_mark(c))
            || matches!(c, '\u{E000}'..='\u{F8FF}' | '\u{F0000}'..='\u{FFFFD}' | '\u{100000}'..='\u{10FFFD}')
    })
}

/// Why `input` gives no search terms, for an answer that found nothing to look for: it names
/// the words made only of combining marks, which the full-text index cannot match.
pub fn no_terms_reason(input: &str) -> String {
    let marks: Vec<String> = query_tokens(input)
        .into_iter()
        .filter(|token| !indexable(token))
        .collect();
    if marks.is_empty() {
        return "the query has no searchable words; nothing to look for".to_string();
    }
    format!(
        "the query has no searchable words: {} {} only combining marks, which the full-text index does not index on their own; type the word they belong to",
        marks
            .iter()
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", "),
        if marks.len() == 1 { "is" } else { "are" }
    )
}

/// The terms of an expression of the shape [`fts_match_expression`] builds: quoted strings (with
/// `""` for a quote) joined by exactly ` OR `. `None` for any other shape.
pub fn or_expression_terms(expression: &str) -> Option<Vec<String>> {
    let mut terms = Vec::new();
    let mut rest = expression;
    loop {
        rest = rest.strip_prefix('"')?;
        let mut term = String::new();
        loop {
            let quote = rest.find('"')?;
            term.push_str(&rest[..quote]);
            rest = &rest[quote + 1..];
            match rest.strip_prefix('"') {
                Some(after) => {
                    term.push('"');
                    rest = after;
                }
                None => break,
            }
        }
        terms.push(term);
        if rest.is_empty() {
            return Some(terms);
        }
        rest = rest.strip_prefix(" OR ")?;
    }
}

/// An FTS5 MATCH expression for `terms`: each term double-quoted (an inner `"` doubled), joined
/// with ` OR `. Empty terms are skipped; `None` when no term is left.
pub fn fts_match_expression(terms: &[String]) -> Option<String> {
    let quoted: Vec<String> = terms
        .iter()
        .filter(|term| !term.is_empty())
        .map(|term| format!("\"{}\"", term.replace('"', "\"\"")))
        .collect();
    if quoted.is_empty() {
        None
    } else {
        Some(quoted.join(" OR "))
    }
}

/// An FTS5 match expression for records holding at least two of `terms`: every pair of quoted
/// terms AND-ed, the pairs OR-ed (`("a" AND "b") OR ("a" AND "c") OR ("b" AND "c")`). A single
/// term is matched alone. Empty terms are skipped; `None` when no term is left. The number of
/// pairs grows with the square of the terms: meant for a handful of rare ones, where each pair
/// is a cheap intersection of two short lists instead of a union of long ones.
pub fn fts_at_least_two(terms: &[String]) -> Option<String> {
    let quoted: Vec<String> = terms
        .iter()
        .filter(|term| !term.is_empty())
        .map(|term| format!("\"{}\"", term.replace('"', "\"\"")))
        .collect();
    if quoted.len() < 2 {
        return quoted.into_iter().next();
    }
    let mut pairs = Vec::new();
    for (index, first) in quoted.iter().enumerate() {
        for second in &quoted[index + 1..] {
            pairs.push(format!("({first} AND {second})"));
        }
    }
    Some(pairs.join(" OR "))
}

/// The speaker of a conversation turn written as `<speaker>: <text>` (how captured
/// transcripts and imported chats store an `episode`: `User: …`, `Caroline: …`): one to three
/// words of letters (`.`, `'` and `-` allowed inside), at most 40 characters, followed by `:`
/// and a space or a line end. `None` when the text does not start that way (`12:30 …`,
/// `https://…`, `error: a b c d e: …`).
pub fn speaker_of(body: &str) -> Option<&str> {
    let line = body.lines().next()?;
    let (name, rest) = line.split_once(':')?;
    if !(rest.is_empty() || rest.starts_with(char::is_whitespace)) {
        return None;
    }
    let name = name.trim();
    let words: Vec<&str> = name.split_whitespace().collect();
    let word_ok = |word: &&str| {
        word.chars().next().is_some_and(char::is_alphabetic)
            && word
                .chars()
                .all(|c| c.is_alphabetic() || matches!(c, '.' | '\'' | '-' | '’'))
    };
    (!words.is_empty()
        && words.len() <= 3
        && name.chars().count() <= 40
        && words.iter().all(word_ok))
    .then_some(name)
}

/// Whether a query whose word tokens are `query_tokens` (lowercase, stop words kept, e.g.
/// from [`crate::text::word_tokens`]) names `speaker`: every word of the name is among them
/// ("What did Caroline say…" names `Caroline`; "Caroline's" does too).
pub fn names_speaker(query_tokens: &[String], speaker: &str) -> bool {
    let words = word_tokens(speaker);
    !words.is_empty() && words.iter().all(|w| query_tokens.contains(w))
}

/// A calendar period a question names: a year, a month (of any year, or of a named year), or a
/// day. `None` fields are free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedPeriod {
    pub year: Option<i32>,
    pub month: Option<u32>,
    pub day: Option<u32>,
}

impl NamedPeriod {
    /// Whether a date (year, month 1–12, day 1–31) lies in the period.
    pub fn contains(&self, year: i32, month: u32, day: u32) -> bool {
        self.year.is_none_or(|y| y == year)
            && self.month.is_none_or(|m| m == month)
            && self.day.is_none_or(|d| d == day)
    }
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The calendar periods a query names, from its word tokens (lowercase, as
/// [`crate::text::word_tokens`] makes them): "in June" (June of any year), "July 2023",
/// "29 Dec 2023", "May 7", "in 2022". A month's full name counts on its own except "may" (a
/// verb as often), which, like the three-letter abbreviations, needs a day or a year beside it
/// or "in"/"of" before it. Relative expressions ("last summer") are not read.
pub fn named_periods(query_tokens: &[String]) -> Vec<NamedPeriod> {
    let year_of = |token: &str| -> Option<i32> {
        (token.len() == 4 && token.bytes().all(|b| b.is_ascii_digit()))
            .then(|| token.parse::<i32>().ok())
            .flatten()
            .filter(|year| (1900..=2199).contains(year))
    };
    let day_of = |token: &str| -> Option<u32> {
        let digits = ["st", "nd", "rd", "th"]
            .iter()
            .find_map(|suffix| token.strip_suffix(suffix))
            .unwrap_or(token);
        (!digits.is_empty() && digits.len() <= 2 && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse::<u32>().ok())
            .flatten()
            .filter(|day| (1..=31).contains(day))
    };
    let month_of = |token: &str| -> Option<(u32, bool)> {
        MONTHS.iter().enumerate().find_map(|(index, name)| {
            let number = index as u32 + 1;
            if token == *name {
                Some((number, *name != "may"))
            } else if token.len() >= 3 && name.starts_with(token) && token.len() <= 4 {
                // "dec", "sept": an abbreviation needs a number beside it.
                Some((number, false))
            } else {
                None
            }
        })
    };
    let token = |index: usize| query_tokens.get(index).map(String::as_str);
    let mut periods = Vec::new();
    let mut used_years = Vec::new();
    for (index, word) in query_tokens.iter().enumerate() {
        let Some((month, alone)) = month_of(word) else {
            continue;
        };
        let before = index.checked_sub(1).and_then(token);
        let day = before
            .and_then(day_of)
            .or_else(|| token(index + 1).and_then(day_of));
        let year_at = if day.is_some() && before.and_then(day_of).is_none() {
            index + 2
        } else {
            index + 1
        };
        let year = token(year_at).and_then(year_of);
        if year.is_some() {
            used_years.push(year_at);
        }
        let introduced = before.is_some_and(|b| b == "in" || b == "of");
        if alone || introduced || day.is_some() || year.is_some() {
            periods.push(NamedPeriod {
                year,
                month: Some(month),
                day,
            });
        }
    }
    for (index, word) in query_tokens.iter().enumerate() {
        if let Some(year) = year_of(word)
            && !used_years.contains(&index)
        {
            periods.push(NamedPeriod {
                year: Some(year),
                month: None,
                day: None,
            });
        }
    }
    periods
}

#[cfg(test)]
mod tests {
    #[test]
    fn named_periods_read_months_days_and_years() {
        let read = |text: &str| named_periods(&word_tokens(text));
        let period = |year, month, day| NamedPeriod { year, month, day };
        assert_eq!(
            read("When did Melanie go camping in June?"),
            [period(None, Some(6), None)]
        );
        assert_eq!(
            read("What did Mel paint in July 2023?"),
            [period(Some(2023), Some(7), None)]
        );
        assert_eq!(
            read("What pasta did Kate make on 29 Dec 2023?"),
            [period(Some(2023), Some(12), Some(29))]
        );
        assert_eq!(
            read("Where was she on May 7th?"),
            [period(None, Some(5), Some(7))]
        );
        assert_eq!(
            read("How many times did she go to the beach in 2023?"),
            [period(Some(2023), None, None)]
        );
        // "may" as a verb and a bare abbreviation are not dates; neither is a 5-digit number.
        assert!(read("What may Caroline do next?").is_empty());
        assert!(read("Did she mar the table or dec the hall?").is_empty());
        assert!(read("port 20231 on the server").is_empty());
        assert_eq!(read("in may"), [period(None, Some(5), None)]);
        let june = period(None, Some(6), None);
        assert!(june.contains(2023, 6, 30));
        assert!(!june.contains(2023, 7, 1));
        assert!(period(Some(2023), Some(12), Some(29)).contains(2023, 12, 29));
        assert!(!period(Some(2023), Some(12), Some(29)).contains(2022, 12, 29));
    }

    use super::*;
    use proptest::prelude::*;

    fn check(input: &str, expect: &[&str]) {
        assert_eq!(query_terms(input), expect, "input: {input:?}");
    }

    #[test]
    fn stop_words_are_sorted_and_unique() {
        assert!(
            STOP_WORDS.windows(2).all(|pair| pair[0] < pair[1]),
            "STOP_WORDS must be sorted and unique"
        );
        assert!(
            STOP_WORDS.iter().all(|word| word_tokens(word) == [*word]),
            "stop words must be single lowercase tokens"
        );
        assert!(is_stop_word("the") && is_stop_word("about") && is_stop_word("what"));
        assert!(!is_stop_word("postgres") && !is_stop_word("down") && !is_stop_word("The"));
    }

    #[test]
    fn at_least_two_pairs_every_term() {
        let terms = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert_eq!(fts_at_least_two(&terms(&[])), None);
        assert_eq!(fts_at_least_two(&terms(&["", ""])), None);
        assert_eq!(
            fts_at_least_two(&terms(&["a", ""])).as_deref(),
            Some("\"a\"")
        );
        assert_eq!(
            fts_at_least_two(&terms(&["a", "b\"c", "d"])).as_deref(),
            Some(r#"("a" AND "b""c") OR ("a" AND "d") OR ("b""c" AND "d")"#)
        );
    }

    #[test]
    fn query_terms_drop_fillers() {
        check(
            "What did we decide about the job queue?",
            &["decide", "job", "queue"],
        );
        check(
            "when does the staging deploy run",
            &["staging", "deploy", "run"],
        );
        check(
            "Do you remember anything about Postgres vacuum settings?",
            &["postgres", "vacuum", "settings"],
        );
        check("is the API down", &["api", "down"]);
        check("why don't we use Redis", &["use", "redis"]);
    }

    #[test]
    fn query_terms_split_like_unicode61() {
        check("snake_case_name", &["snake", "case", "name"]);
        check("kebab-case-name", &["kebab", "case", "name"]);
        check("config.yaml:42", &["config", "yaml", "42"]);
        check("x86_64 v1.2.3", &["x86", "64", "v1", "2", "3"]);
        check("ERR_CONNECTION_REFUSED", &["err", "connection", "refused"]);
        check("Ünïcödé CAFÉ café", &["ünïcödé", "café"]);
        check("cafe\u{301}", &["café"]);
        check("東京 タワー", &["東京", "タワー"]);
        check("pass\u{200b}word", &["password"]);
    }

    #[test]
    fn enclosed_letters_are_read_as_letters_and_lone_marks_are_dropped() {
        // Regression: a term unicode61 finds no token in matched nothing, silently.
        check("ⓓⓔⓟⓛⓞⓨ", &["deploy"]);
        check("ⒹⒺⓅⓁⓄⓎ 🄰🅑🅲", &["deploy", "abc"]);
        check("⒜⒝", &["ab"]);
        // U+093F DEVANAGARI VOWEL SIGN I is alphabetic to Rust but a mark to unicode61
        check("\u{93f}", &[]);
        check("\u{93f} deploy", &["deploy"]);
        check("कि", &["कि"]);
        assert!(no_terms_reason("\u{93f}").contains("combining marks"));
        assert!(no_terms_reason("\u{93f}").contains("`\u{93f}`"));
        assert_eq!(
            no_terms_reason("?!"),
            "the query has no searchable words; nothing to look for"
        );
    }

    #[test]
    fn query_terms_neutralize_fts_syntax() {
        check("\"unterminated", &["unterminated"]);
        check(
            "title:deploy OR body:rollback",
            &["title", "deploy", "body", "rollback"],
        );
        check("NEAR(a b, 3) AND c*", &["near", "b", "3", "c"]);
        check(
            "^start -minus +plus (group)",
            &["start", "minus", "plus", "group"],
        );
        check("foo\0bar", &["foo", "bar"]);
    }

    #[test]
    fn query_terms_dedupe_and_fall_back() {
        check(
            "deploy Deploy DEPLOY staging deploy",
            &["deploy", "staging"],
        );
        check("the who", &["the", "who"]);
        check("what is it", &["what", "is", "it"]);
        check("the the", &["the"]);
        check("", &[]);
        check("   ", &[]);
        check("?!.,;:-_()[]{}\"'*^", &[]);
        check("🚀🚀", &[]);
    }

    #[test]
    fn speakers_are_read_from_the_turn_prefix_only() {
        assert_eq!(
            speaker_of("Caroline: I went to a support group."),
            Some("Caroline")
        );
        assert_eq!(
            speaker_of("User: fix the build\nAssistant: done"),
            Some("User")
        );
        assert_eq!(
            speaker_of("Dr. Jean-Luc O'Neil: hi"),
            Some("Dr. Jean-Luc O'Neil")
        );
        assert_eq!(speaker_of("Nate:"), Some("Nate"));
        for none in [
            "12:30 standup moved",
            "see https://example.com",
            "note:foo",
            "We use Postgres.",
            "a b c d: too many words",
            ": empty",
            "",
            "x86_64: arch",
        ] {
            assert_eq!(speaker_of(none), None, "{none:?}");
        }
        let tokens = word_tokens("What did Caroline's mentor say?");
        assert!(names_speaker(&tokens, "Caroline"));
        assert!(!names_speaker(&tokens, "Melanie"));
        assert!(!names_speaker(&tokens, "Caroline Smith"));
        assert!(names_speaker(&word_tokens("what did the user ask"), "User"));
    }

    #[test]
    fn match_expression_quotes_every_term() {
        fn check(terms: &[&str], expect: Option<&str>) {
            let terms: Vec<String> = terms.iter().map(|term| term.to_string()).collect();
            assert_eq!(
                fts_match_expression(&terms).as_deref(),
                expect,
                "terms: {terms:?}"
            );
        }
        check(&[], None);
        check(&[""], None);
        check(&["deploy"], Some("\"deploy\""));
        check(&["job", "queue"], Some("\"job\" OR \"queue\""));
        check(&["say \"hi\""], Some("\"say \"\"hi\"\"\""));
        check(&["NEAR", "", "AND"], Some("\"NEAR\" OR \"AND\""));
    }

    fn hostile_query() -> impl Strategy<Value = String> {
        let pieces = proptest::sample::select(vec![
            "\"", "\"\"", "*", "(", ")", ":", "^", "-", "+", "NEAR", "NEAR/3", "AND", "OR", "NOT",
            " ", "the", "deploy", "café", "e\u{301}", "_", "'", "\\", "\u{200b}", "\0", "{", "}",
            "title:", "日本",
        ]);
        prop_oneof![
            proptest::collection::vec(pieces, 0..12).prop_map(|parts| parts.concat()),
            any::<String>(),
        ]
    }

    proptest! {
        #[test]
        fn any_input_gives_a_well_formed_expression(input in hostile_query()) {
            let terms = query_terms(&input);
            for term in &terms {
                prop_assert!(!term.is_empty());
                prop_assert!(!term.contains(['"', ' ', '*', '(', ')', ':', '^', '-', '+', '_', '\0']), "term {term:?}");
            }
            let mut unique = terms.clone();
            unique.sort();
            unique.dedup();
            prop_assert_eq!(unique.len(), terms.len());
            match fts_match_expression(&terms) {
                None => prop_assert!(terms.is_empty()),
                Some(expression) => prop_assert_eq!(super::or_expression_terms(&expression), Some(terms)),
            }
        }

        #[test]
        fn any_terms_round_trip_through_quoting(terms in proptest::collection::vec(any::<String>(), 0..6)) {
            let non_empty: Vec<String> = terms.iter().filter(|term| !term.is_empty()).cloned().collect();
            match fts_match_expression(&terms) {
                None => prop_assert!(non_empty.is_empty()),
                Some(expression) => prop_assert_eq!(super::or_expression_terms(&expression), Some(non_empty)),
            }
        }
    }
}
