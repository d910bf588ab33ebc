//! The seeded synthetic corpus and query set.
//!
//! Words follow a Zipf law (s = 1) over a vocabulary of English function words (the head of the
//! ranking, as in real text) followed by ~30k content words: real English words from
//! `/usr/share/dict/words` when present (Debian `wamerican`), else pronounceable pseudo-words.
//! Records mix types, scopes, projects and tags; 70% have a title; bodies are sentences of
//! 20–150 words (mean ~60); `created_at` is spread over the year before `now`.

use crate::rng::{Rng, Weighted};
use anyhow::{Context as _, Result, bail};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Content words in the vocabulary (after the function-word head).
pub const CONTENT_WORDS: usize = 30_000;
/// Zipf exponent of word frequencies.
pub const ZIPF_S: f64 = 1.0;
pub const DICTIONARY: &str = "/usr/share/dict/words";
/// The most frequent English function words, in rank order: they take ~35% of tokens, as in
/// English prose, and recall drops them from queries.
const HEAD: &[&str] = &[
    "the", "a", "to", "of", "and", "in", "is", "it", "for", "that", "on", "with", "as", "was",
    "we", "be", "this", "at", "by", "not", "or", "from", "but", "are", "if", "when", "so", "after",
    "before", "then",
];
/// Memory types and their share of the corpus.
const TYPES: &[(&str, f64)] = &[
    ("fact", 24.0),
    ("note", 18.0),
    ("episode", 14.0),
    ("gotcha", 10.0),
    ("decision", 10.0),
    ("procedure", 8.0),
    ("infra", 5.0),
    ("preference", 3.0),
    ("incident", 3.0),
    ("constraint", 2.0),
    ("policy", 2.0),
    ("state", 1.0),
];
/// Scopes and their share (`None` = the default, `global`).
const SCOPES: &[(Option<&str>, f64)] = &[
    (None, 50.0),
    (Some("team:backend"), 15.0),
    (Some("team:frontend"), 10.0),
    (Some("channel:deploy"), 10.0),
    (Some("infra:db"), 10.0),
    (Some("channel:deploy:prod"), 5.0),
];
/// Tags are drawn (Zipf) from this many content words.
const TAG_WORDS: usize = 200;
pub const OTHER_PROJECT: &str = "other-project";

#[derive(Debug, Clone)]
pub struct Vocabulary {
    /// Rank order: `words[..head]` are function words, the rest content words.
    pub words: Vec<String>,
    pub head: usize,
    /// Where the content words came from, for the report.
    pub source: String,
}

/// `choice`: `auto` (dictionary if present), `dict` (required) or `generated`.
pub fn vocabulary(choice: &str, rng: &mut Rng) -> Result<Vocabulary> {
    let dictionary = Path::new(DICTIONARY);
    let use_dictionary = match choice {
        "auto" => dictionary.is_file(),
        "dict" => {
            if !dictionary.is_file() {
                bail!(
                    "{DICTIONARY} is missing: `apt-get install -y wamerican`, or use --vocab generated"
                );
            }
            true
        }
        "generated" => false,
        other => bail!("unknown --vocab {other:?}: expected auto, dict or generated"),
    };
    let (mut content, source) = if use_dictionary {
        let text = std::fs::read_to_string(dictionary)
            .with_context(|| format!("cannot read {DICTIONARY}"))?;
        let mut words: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|w| (3..=14).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_lowercase()))
            .filter(|w| !cairn_core::query::is_stop_word(w) && !HEAD.contains(w))
            .map(str::to_string)
            .collect();
        words.sort();
        words.dedup();
        let available = words.len();
        (
            words,
            format!(
                "{DICTIONARY} (lowercase a-z words of 3-14 letters, {available} available, seeded shuffle)"
            ),
        )
    } else {
        (
            generated_words(CONTENT_WORDS, rng),
            "generated pseudo-words (seeded syllables)".to_string(),
        )
    };
    rng.shuffle(&mut content);
    content.truncate(CONTENT_WORDS);
    let mut words: Vec<String> = HEAD.iter().map(|w| w.to_string()).collect();
    let head = words.len();
    words.extend(content);
    Ok(Vocabulary {
        words,
        head,
        source,
    })
}

fn generated_words(count: usize, rng: &mut Rng) -> Vec<String> {
    const ONSETS: &[&str] = &[
        "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
        "br", "cr", "dr", "fl", "gr", "pl", "st", "tr", "sh", "ch", "th", "sp",
    ];
    const VOWELS: &[&str] = &["a", "e", "i", "o", "u", "ai", "ea", "ou", "io", "y"];
    const CODAS: &[&str] = &[
        "", "", "", "n", "r", "s", "t", "l", "m", "x", "nd", "st", "ck",
    ];
    let mut seen = std::collections::HashSet::new();
    let mut words = Vec::with_capacity(count);
    while words.len() < count {
        let syllables = rng.between(2, 4);
        let mut word = String::new();
        for _ in 0..syllables {
            word.push_str(rng.pick::<&str>(ONSETS));
            word.push_str(rng.pick::<&str>(VOWELS));
            word.push_str(rng.pick::<&str>(CODAS));
        }
        if word.len() <= 14 && !cairn_core::query::is_stop_word(&word) && seen.insert(word.clone())
        {
            words.push(word);
        }
    }
    words
}

/// What was generated, for the report.
#[derive(Debug, Clone, Default)]
pub struct CorpusStats {
    pub records: usize,
    pub titled: usize,
    pub bytes: u64,
    pub body_words_total: u64,
    pub body_words_min: usize,
    pub body_words_max: usize,
    pub types: BTreeMap<String, usize>,
    pub scopes: BTreeMap<String, usize>,
    pub personal: usize,
    pub other_project: usize,
    /// Documents containing each vocabulary word (surface form, before stemming).
    pub document_frequency: Vec<u32>,
}

impl CorpusStats {
    pub fn json(&self) -> Value {
        json!({
            "records": self.records,
            "titled": self.titled,
            "titled_fraction": self.titled as f64 / self.records.max(1) as f64,
            "jsonl_bytes": self.bytes,
            "body_words_mean": self.body_words_total as f64 / self.records.max(1) as f64,
            "body_words_min": self.body_words_min,
            "body_words_max": self.body_words_max,
            "types": self.types,
            "scopes": self.scopes,
            "personal_records": self.personal,
            "other_project_records": self.other_project,
        })
    }
}

/// Writes `count` memory lines to `path` (the import format) and returns what it wrote.
pub fn write_corpus(
    path: &Path,
    count: usize,
    vocabulary: &Vocabulary,
    now: DateTime<Utc>,
    rng: &mut Rng,
) -> Result<CorpusStats> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let zipf = Weighted::zipf(vocabulary.words.len(), ZIPF_S);
    let tag_zipf = Weighted::zipf(TAG_WORDS, 1.0);
    let types = Weighted::new(TYPES.iter().map(|(_, w)| *w));
    let scopes = Weighted::new(SCOPES.iter().map(|(_, w)| *w));
    let mut stats = CorpusStats {
        body_words_min: usize::MAX,
        document_frequency: vec![0; vocabulary.words.len()],
        ..CorpusStats::default()
    };
    let mut last_seen = vec![0u32; vocabulary.words.len()];
    let year_seconds = 365 * 24 * 3600;
    for index in 0..count {
        let doc = index as u32 + 1;
        let mut seen = |word: usize, stats: &mut CorpusStats| {
            if last_seen[word] != doc {
                last_seen[word] = doc;
                stats.document_frequency[word] += 1;
            }
        };
        let mut line = Map::new();
        let memory_type = TYPES[types.sample(rng)].0;
        line.insert("type".into(), json!(memory_type));
        *stats.types.entry(memory_type.to_string()).or_default() += 1;
        if rng.chance(0.7) {
            let length = rng.between(4, 10);
            let mut words = Vec::with_capacity(length);
            for _ in 0..length {
                let mut word = zipf.sample(rng);
                // Titles are mostly content words.
                if word < vocabulary.head && rng.chance(0.7) {
                    word = zipf.sample(rng);
                }
                seen(word, &mut stats);
                words.push(vocabulary.words[word].as_str());
            }
            line.insert("title".into(), json!(capitalize(&words.join(" "))));
            stats.titled += 1;
        }
        // 20 + a capped exponential: 20–150 words, mean ~60, a long tail of long notes.
        let extra = (-(1.0 - rng.unit()).ln() * 41.5).min(130.0) as usize;
        let body_words = 20 + extra;
        let mut body = String::with_capacity(body_words * 9);
        let mut sentence_left = 0usize;
        for position in 0..body_words {
            let sentence_start = sentence_left == 0;
            if sentence_start {
                if position > 0 {
                    body.push_str(". ");
                }
                sentence_left = rng.between(5, 14);
            } else {
                body.push(' ');
            }
            let start = body.len();
            let roll = rng.unit();
            if roll < 0.01 {
                body.push_str(&rng.between(2, 65_535).to_string());
            } else if roll < 0.02 {
                // A snake_case identifier of two content words.
                let content = vocabulary.words.len() - vocabulary.head;
                let a = vocabulary.head + zipf.sample(rng) % content;
                let b = vocabulary.head + zipf.sample(rng) % content;
                seen(a, &mut stats);
                seen(b, &mut stats);
                body.push_str(&vocabulary.words[a]);
                body.push('_');
                body.push_str(&vocabulary.words[b]);
            } else {
                let word = zipf.sample(rng);
                seen(word, &mut stats);
                body.push_str(&vocabulary.words[word]);
            }
            if sentence_start {
                capitalize_at(&mut body, start);
            }
            sentence_left -= 1;
        }
        body.push('.');
        line.insert("body".into(), json!(body));
        stats.body_words_total += body_words as u64;
        stats.body_words_min = stats.body_words_min.min(body_words);
        stats.body_words_max = stats.body_words_max.max(body_words);
        let tag_count = [0, 1, 1, 2, 2, 3][rng.below(6)];
        let mut tags: Vec<&str> = Vec::new();
        for _ in 0..tag_count {
            let word = vocabulary.head + tag_zipf.sample(rng);
            seen(word, &mut stats);
            tags.push(&vocabulary.words[word]);
        }
        tags.sort();
        tags.dedup();
        line.insert("tags".into(), json!(tags));
        match SCOPES[scopes.sample(rng)].0 {
            Some(scope) => {
                line.insert("scope".into(), json!(scope));
                *stats.scopes.entry(scope.to_string()).or_default() += 1;
            }
            None => *stats.scopes.entry("global".to_string()).or_default() += 1,
        }
        let project_roll = rng.unit();
        if project_roll < 0.10 {
            line.insert("project".into(), Value::Null);
            stats.personal += 1;
        } else if project_roll < 0.18 {
            line.insert("project".into(), json!(OTHER_PROJECT));
            stats.other_project += 1;
        }
        if rng.chance(0.2) {
            line.insert("importance".into(), json!(rng.between(1, 5)));
        }
        let created = now - Duration::seconds(1 + rng.below(year_seconds) as i64);
        line.insert(
            "created_at".into(),
            json!(created.format("%Y-%m-%dT%H:%M:%SZ").to_string()),
        );
        let text = serde_json::to_string(&Value::Object(line))?;
        out.write_all(text.as_bytes())?;
        out.write_all(b"\n")?;
        stats.bytes += text.len() as u64 + 1;
        stats.records += 1;
    }
    out.flush()?;
    Ok(stats)
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn capitalize_at(text: &mut String, at: usize) {
    if let Some(first) = text[at..].chars().next()
        && first.is_ascii_lowercase()
    {
        text.replace_range(at..at + 1, &first.to_ascii_uppercase().to_string());
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum QueryClass {
    /// 2–4 mid-frequency content words.
    Mid,
    /// One very frequent content word plus 1–3 mid-frequency words.
    Frequent,
    /// Mid-frequency words with FTS operator characters (`"`, `*`, `(`, `NOT`, `:`, `-`).
    Operators,
}

impl QueryClass {
    pub const ALL: [QueryClass; 3] = [QueryClass::Mid, QueryClass::Frequent, QueryClass::Operators];

    pub fn name(self) -> &'static str {
        match self {
            QueryClass::Mid => "mid",
            QueryClass::Frequent => "frequent",
            QueryClass::Operators => "operators",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Query {
    pub text: String,
    pub class: QueryClass,
}

#[derive(Debug, Clone)]
pub struct QuerySet {
    pub queries: Vec<Query>,
    pub mid_band: (u32, u32),
    pub mid_words: usize,
    /// The frequent words queries draw from, with their document frequency.
    pub frequent: Vec<(String, u32)>,
}

impl QuerySet {
    /// Described for the report; `measured` are the queries whose times are reported.
    pub fn json(&self, measured: &[Query], records: usize) -> Value {
        let mut counts = BTreeMap::new();
        for query in measured {
            *counts.entry(query.class.name()).or_insert(0usize) += 1;
        }
        let frequent_df: Vec<f64> = self.frequent.iter().map(|(_, df)| *df as f64).collect();
        json!({
            "count": measured.len(),
            "warmup": self.queries.len() - measured.len(),
            "classes": counts,
            "mid_band_document_frequency": [self.mid_band.0, self.mid_band.1],
            "mid_words": self.mid_words,
            "frequent_words": self.frequent.len(),
            "frequent_df_fraction_range": [
                frequent_df.iter().copied().fold(f64::INFINITY, f64::min) / records.max(1) as f64,
                frequent_df.iter().copied().fold(0.0, f64::max) / records.max(1) as f64,
            ],
            "examples": measured.iter().take(12).map(|q| json!({"class": q.class.name(), "text": q.text})).collect::<Vec<_>>(),
        })
    }
}

/// `count` queries drawn from the corpus's own word distribution: ~85% mid-frequency words,
/// ~10% with one very frequent word, ~5% with FTS operator characters.
pub fn queries(
    count: usize,
    vocabulary: &Vocabulary,
    stats: &CorpusStats,
    rng: &mut Rng,
) -> Result<QuerySet> {
    let records = stats.records.max(1) as f64;
    let df = &stats.document_frequency;
    let low = ((records * 0.0005) as u32).max(2);
    let high = ((records * 0.01) as u32).max(low + 8);
    let mid: Vec<usize> = (vocabulary.head..vocabulary.words.len())
        .filter(|&w| (low..=high).contains(&df[w]))
        .collect();
    if mid.len() < 8 {
        bail!(
            "only {} words have a document frequency in {low}..={high}; use more --records",
            mid.len()
        );
    }
    // Same distribution as the text: each mid word weighted by its Zipf weight.
    let mid_weights = Weighted::new(mid.iter().map(|&w| 1.0 / ((w + 1) as f64).powf(ZIPF_S)));
    let mut by_df: Vec<usize> = (vocabulary.head..vocabulary.words.len()).collect();
    by_df.sort_by(|a, b| df[*b].cmp(&df[*a]).then(a.cmp(b)));
    let mut frequent: Vec<usize> = by_df
        .iter()
        .copied()
        .take(50)
        .filter(|&w| df[w] as f64 >= records * 0.05)
        .collect();
    if frequent.is_empty() {
        frequent = by_df.iter().copied().take(20).collect();
    }
    let draw_mid = |rng: &mut Rng, taken: &mut Vec<usize>| loop {
        let word = mid[mid_weights.sample(rng)];
        if !taken.contains(&word) {
            taken.push(word);
            return vocabulary.words[word].clone();
        }
    };
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let roll = rng.unit();
        let mut taken = Vec::new();
        let (class, text) = if roll < 0.05 {
            let a = draw_mid(rng, &mut taken);
            let b = draw_mid(rng, &mut taken);
            let c = draw_mid(rng, &mut taken);
            let text = match rng.below(6) {
                0 => format!("\"{a} {b}\" {c}"),
                1 => format!("{a}* {b}"),
                2 => format!("({a} OR {b}) {c}"),
                3 => format!("{a} NOT {b}"),
                4 => format!("title:{a} {b}"),
                _ => format!("{a} AND -{b} \"{c}"),
            };
            (QueryClass::Operators, text)
        } else if roll < 0.15 {
            let extra = rng.between(1, 3);
            let mut words: Vec<String> = (0..extra).map(|_| draw_mid(rng, &mut taken)).collect();
            let common = vocabulary.words[*rng.pick(&frequent)].clone();
            let at = rng.below(words.len() + 1);
            words.insert(at, common);
            (QueryClass::Frequent, words.join(" "))
        } else {
            let n = rng.between(2, 4);
            let words: Vec<String> = (0..n).map(|_| draw_mid(rng, &mut taken)).collect();
            (QueryClass::Mid, words.join(" "))
        };
        out.push(Query { text, class });
    }
    Ok(QuerySet {
        queries: out,
        mid_band: (low, high),
        mid_words: mid.len(),
        frequent: frequent
            .iter()
            .map(|&w| (vocabulary.words[w].clone(), df[w]))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-06-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn corpus_is_deterministic_and_shaped() {
        let dir = tempfile::tempdir().unwrap();
        let mut digests = Vec::new();
        for _ in 0..2 {
            let mut rng = Rng::new(42);
            let vocabulary = vocabulary("generated", &mut rng).unwrap();
            let path = dir.path().join("c.jsonl");
            let stats = write_corpus(&path, 3000, &vocabulary, now(), &mut rng).unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text.lines().count(), 3000);
            let mean = stats.body_words_total as f64 / 3000.0;
            assert!((50.0..70.0).contains(&mean), "mean body words {mean}");
            assert!(stats.body_words_min >= 20 && stats.body_words_max <= 150);
            let titled = stats.titled as f64 / 3000.0;
            assert!((0.65..0.75).contains(&titled), "titled {titled}");
            for line in text.lines().take(50) {
                let value: Value = serde_json::from_str(line).unwrap();
                assert!(value["body"].as_str().unwrap().ends_with('.'));
                assert!(value["created_at"].as_str().unwrap() < "2026-06-01");
            }
            let set = queries(200, &vocabulary, &stats, &mut rng).unwrap();
            assert_eq!(set.queries.len(), 200);
            digests.push((
                text,
                set.queries
                    .iter()
                    .map(|q| q.text.clone())
                    .collect::<Vec<_>>(),
            ));
        }
        assert_eq!(digests[0], digests[1]);
    }
}
