//! Any query string is safe to recall with (docs/design.md §5.1, STYLE.md §Tests): it never causes an
//! FTS syntax error, and a word that one record holds finds that record whatever surrounds it
//! (no false "nothing found").
//!
//! The brain is a real SQLite file with 30 records, each holding one word no other record has
//! (in its body, title, summary or tags). Queries are built from FTS5 syntax (`AND`, `OR`,
//! `NOT`, `NEAR`, quotes, `*`, `^`, `:`, brackets, `-`, `+`), ASCII punctuation and control
//! characters, letters of several scripts, emoji, combining marks and invisible characters,
//! with or without one of the unique words spelled in one of several ways.

mod common;

use common::{engine_at, test_now};

use cairn_core::record::MemoryType;
use cairn_engine::{Engine, RecallAnswer, RecallRequest, RememberRequest};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::cell::RefCell;

/// One word per record. None is a stop word, none folds onto another under the tokenizer
/// (diacritics removed, porter stemming), and each survives upper-casing.
const WORDS: [&str; 30] = [
    "near", // an FTS5 keyword, and an ordinary word
    "zephyr",
    "quokka",
    "café",
    "zürich",
    "東京",
    "ñandú",
    "नमस्ते", // combining marks that the tokenizer splits on
    "ελληνικά",
    "mañana",
    "naïveté",
    "kayak",
    "xylophone",
    "obsidian",
    "wombat",
    "pelican",
    "tsunami",
    "gazebo",
    "hologram",
    "igloo",
    "jackal",
    "lemming",
    "manatee",
    "nebula",
    "origami",
    "platypus",
    "quasar",
    "rhubarb",
    "sphinx",
    "toboggan",
];

struct Brain {
    _dir: tempfile::TempDir,
    engine: Engine,
    /// `ids[i]` holds `WORDS[i]`.
    ids: Vec<i64>,
}

fn brain() -> Brain {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut engine = engine_at(dir.path(), test_now());
    let fillers = ["harbor", "lantern", "meadow", "copper", "violet", "thistle"];
    let mut ids = Vec::new();
    for (index, word) in WORDS.iter().enumerate() {
        let filler = fillers[index % fillers.len()];
        let other = fillers[(index / fillers.len()) % fillers.len()];
        let mut request = RememberRequest::new(
            MemoryType::Fact,
            format!("The {filler} entry of the safety corpus, {other} edition."),
        );
        // The unique word sits in each indexed field in turn.
        match index % 5 {
            1 => request.title = Some(format!("About {word}")),
            2 => request.summary = Some(format!("Mentions {word} once")),
            3 => request.tags = vec![word.to_string(), "corpus".into()],
            _ => request.body = format!("{} It mentions {word}.", request.body),
        }
        request.allow_duplicate = true;
        let outcome = engine.remember(&request).expect("stored");
        ids.push(outcome.id.expect("a new record"));
    }
    Brain {
        _dir: dir,
        engine,
        ids,
    }
}

fn recall(engine: &mut Engine, query: &str) -> Result<RecallAnswer, String> {
    let request = RecallRequest {
        limit: 50,
        touch: false,
        ..RecallRequest::new(query)
    };
    engine
        .recall(&request)
        .map_err(|error| format!("recall {query:?} failed: {error}"))
}

/// Canonical decomposition of the precomposed letters in [`WORDS`].
fn decomposed(word: &str) -> String {
    word.chars()
        .map(|c| match c {
            'é' => "e\u{301}".to_string(),
            'ü' => "u\u{308}".to_string(),
            'ñ' => "n\u{303}".to_string(),
            'ú' => "u\u{301}".to_string(),
            'ï' => "i\u{308}".to_string(),
            'ά' => "α\u{301}".to_string(),
            other => other.to_string(),
        })
        .collect()
}

/// `word` inside some hostile dressing that sanitizing or tokenizing takes off again.
fn spelled(word: &str, spelling: usize) -> String {
    let mut chars = word.chars();
    let first: String = chars.next().into_iter().collect();
    let rest: String = chars.collect();
    match spelling {
        0 => word.to_string(),
        1 => word.to_uppercase(),
        2 => decomposed(word),
        3 => format!("{first}\u{200b}{rest}"),
        4 => format!("{first}\u{ad}{rest}"),
        5 => format!("\"{word}\""),
        6 => format!("\"{word}"),
        7 => format!("{word}*"),
        8 => format!("+{word}"),
        9 => format!("-{word}"),
        10 => format!("^{word}"),
        11 => format!("title:{word}"),
        12 => format!("NEAR({word} x, 3)"),
        13 => format!("({word})"),
        14 => format!("{{{word}}}"),
        15 => format!("\u{202e}{word}\u{202c}"),
        16 => format!("{word}\u{e0041}\u{e0042}"),
        17 => format!("NOT {word}"),
        _ => format!("{word} AND"),
    }
}
const SPELLINGS: usize = 19;

/// Strings made of FTS5 syntax, punctuation, control characters, words in several scripts,
/// emoji, combining marks and invisible characters.
fn hostile(pieces: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = String> {
    let piece = proptest::string::string_regex(concat!(
        r#"(AND|OR|NOT|NEAR|NEAR/[0-9]|NEAR\(|"|""|'|\*|\^|:|\(|\)|\{|\}|-|\+|[[:punct:]]"#,
        r#"|[ \t\n]|[\x00-\x1f\x7f]|[a-zA-Z]{1,8}|[0-9]{1,3}|[\xe0-\xff]{1,3}"#,
        r#"|[\x{4e00}-\x{4e40}]{1,3}|[\x{0900}-\x{097f}]{1,3}|[\x{0600}-\x{06ff}]{1,3}"#,
        r#"|[\x{1f300}-\x{1f64f}]|[\x{0300}-\x{036f}]|\x{200d}|[\x{fe00}-\x{fe0f}]"#,
        r#"|[\x{200b}-\x{200f}\x{2060}\x{2066}-\x{2069}\x{202a}-\x{202e}\x{feff}\x{ad}]"#,
        r#"|[\x{e0020}-\x{e007f}])"#
    ))
    .expect("a valid regex");
    proptest::collection::vec(piece, pieces).prop_map(|pieces| pieces.concat())
}

/// Prompt-sized prose: 16 to 40 words with punctuation (a hook recalls against whole prompts).
fn prose() -> impl Strategy<Value = String> {
    proptest::collection::vec("[a-z]{3,9}[ ,.;:!?]{1,2}", 16..=40).prop_map(|words| words.concat())
}

/// A query, and the index of the unique word injected into it (if any).
fn query() -> impl Strategy<Value = (String, Option<usize>)> {
    let around = || prop_oneof![3 => hostile(0..=12), 1 => hostile(12..=48), 1 => prose()];
    prop_oneof![
        1 => around().prop_map(|query| (query, None)),
        3 => (around(), around(), 0..WORDS.len(), 0..SPELLINGS).prop_map(
            |(before, after, word, spelling)| {
                (format!("{before} {} {after}", spelled(WORDS[word], spelling)), Some(word))
            }
        ),
    ]
}

#[test]
fn any_query_runs_and_finds_the_one_record_holding_its_word() {
    let Brain {
        _dir, engine, ids, ..
    } = brain();
    let engine = RefCell::new(engine);
    let mut runner = TestRunner::new(Config {
        cases: 512,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = runner.run(&query(), |(query, word)| {
        let answer = recall(&mut engine.borrow_mut(), &query).map_err(TestCaseError::fail)?;
        if let Some(word) = word {
            let found: Vec<i64> = answer.results.iter().map(|r| r.id).collect();
            prop_assert!(
                found.contains(&ids[word]),
                "{query:?} holds {:?} (#{}) but recall answered {found:?} ({:?})",
                WORDS[word],
                ids[word],
                answer.note
            );
        }
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

#[test]
fn every_word_is_found_in_every_spelling() {
    let Brain {
        _dir,
        mut engine,
        ids,
    } = brain();
    let mut misses = Vec::new();
    for (index, word) in WORDS.iter().enumerate() {
        for spelling in 0..SPELLINGS {
            let query = spelled(word, spelling);
            let answer = recall(&mut engine, &query).unwrap();
            if !answer.results.iter().any(|r| r.id == ids[index]) {
                misses.push(query);
            }
        }
    }
    assert!(misses.is_empty(), "not found: {misses:?}");
}

#[test]
fn syntax_alone_answers_plainly_instead_of_failing() {
    let Brain {
        _dir, mut engine, ..
    } = brain();
    for query in [
        "",
        " ",
        "\"",
        "\"\"",
        "*",
        "^",
        ":",
        "-",
        "+",
        "(",
        ")",
        "{",
        "}",
        "()",
        "{}:",
        "AND",
        "OR",
        "NOT",
        "AND OR NOT",
        "NEAR",
        "NEAR(",
        "NEAR/2",
        "NEAR(a b, 2)",
        "title:",
        "body:*",
        "\"unterminated",
        "a OR",
        "OR a",
        "NOT NOT",
        "\0",
        "\u{200b}",
        "\u{feff}",
        "🚀",
        "\u{301}",
        "\u{e0041}",
        "\\",
        "'",
        "''",
        "*:*",
        "^*",
        "- - -",
        "+\"\"+",
    ] {
        let answer = recall(&mut engine, query).unwrap();
        let found: Vec<i64> = answer.results.iter().map(|r| r.id).collect();
        if found.is_empty() {
            assert!(answer.note.is_some(), "{query:?}: no results and no note");
        }
    }
}

#[test]
fn a_long_query_still_finds_its_rare_word() {
    // A prompt-sized query (a hook recalls against the whole prompt): sixteen words no record
    // holds, then the one word a record does hold.
    let Brain {
        _dir,
        mut engine,
        ids,
    } = brain();
    let filler: Vec<String> = (0..16).map(|n| format!("unmatched{n}")).collect();
    let query = format!("{} wombat", filler.join(" "));
    let answer = recall(&mut engine, &query).unwrap();
    let wombat = ids[WORDS.iter().position(|w| *w == "wombat").unwrap()];
    let found: Vec<i64> = answer.results.iter().map(|r| r.id).collect();
    assert!(
        found.contains(&wombat),
        "{query:?} answered {found:?} ({:?})",
        answer.note
    );
}
