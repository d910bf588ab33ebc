//! Lexical search from FTS5 (`Reader::lexical_search`) against the in-memory index
//! (`LexicalIndex::search`) on one seeded brain: the same queries alternated, CPU time per
//! query for each, the index's build time, and a check that every answer is the same.
//!
//! `cargo build --workspace --all-targets --locked`, then
//! `target/debug/examples/lexical_index [RECORDS] [QUERIES]` (defaults 100000 and 300). In a
//! dev build SQLite runs optimized and the index's Rust does not (`profile.dev.package."*"`),
//! so the ratio is a lower bound of a release build's.

use cairn_core::query::fts_match_expression;
use cairn_store::{LexicalIndex, LexicalQuery, Store, StoreError};
use std::time::Instant;

/// This thread's CPU time so far (`/proc/thread-self/schedstat`, nanoseconds on the CPU).
fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e9)
}

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize % n
    }
    /// Zipf-like over `words`.
    fn word<'a>(&mut self, words: &'a [String]) -> &'a str {
        let r = self.below(1 << 20) as f64 / f64::from(1 << 20);
        let rank = ((words.len() as f64).powf(r) as usize).saturating_sub(1);
        &words[rank.min(words.len() - 1)]
    }
}

fn main() -> Result<(), StoreError> {
    let args: Vec<String> = std::env::args().collect();
    let records: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let queries: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(300);
    let dir = tempfile::tempdir().map_err(|e| StoreError::Migration {
        detail: e.to_string(),
    })?;
    let mut store = Store::open(&dir.path().join("brain.db"))?;
    let mut rng = Rng(0x5eed);
    let words: Vec<String> = (0..30_000)
        .map(|i| {
            let syllables = [
                "ka", "lo", "mi", "ren", "tu", "sa", "vel", "dor", "pin", "que",
            ];
            let mut w = String::new();
            let mut n = i + 1;
            while n > 0 {
                w.push_str(syllables[n % 10]);
                n /= 10;
            }
            w
        })
        .collect();
    let seeded = Instant::now();
    for chunk in 0..records.div_ceil(5000) {
        store.write(|tx| {
            for _ in 0..5000.min(records - chunk * 5000) {
                let body: Vec<&str> = (0..20 + rng.below(130)).map(|_| rng.word(&words)).collect();
                let title: Vec<&str> = (0..1 + rng.below(6)).map(|_| rng.word(&words)).collect();
                let memory: cairn_core::memory::Memory = serde_json::from_value(serde_json::json!({
                    "id": 0, "project": "p", "scope": "global", "type": "note",
                    "title": title.join(" "), "body": body.join(" "), "summary": null, "tags": [],
                    "importance": 3, "confidence": "reported", "trust": "stated",
                    "trust_zone": "private_self", "sensitivity": "normal", "source": null,
                    "commit": null, "review_at": null, "expires_at": null, "pinned": false,
                    "status": "active", "supersedes": null, "superseded_by": null,
                    "external_id": null, "created_at": "2026-01-01T00:00:00Z",
                    "updated_at": "2026-01-01T00:00:00Z", "last_accessed_at": null,
                    "valid_from": "2026-01-01T00:00:00Z", "use_count": 0, "content_hash": "x",
                    "retired_at": null
                }))
                .expect("a memory");
                tx.insert_memory(&memory, None)?;
            }
            Ok::<_, StoreError>(())
        })?;
    }
    eprintln!(
        "seeded {records} records in {:.1} s",
        seeded.elapsed().as_secs_f64()
    );
    let index = LexicalIndex::new();
    let reader = store.reader();
    let projects = [Some("p".to_string()), None];
    let expressions: Vec<String> = (0..queries)
        .map(|_| {
            // Two to four words of the first 2,000 ranks: each matches hundreds to tens of
            // thousands of records, as a recall's terms do.
            let terms: Vec<String> = (0..2 + rng.below(3))
                .map(|_| words[rng.below(2000)].clone())
                .collect();
            fts_match_expression(&terms).expect("terms")
        })
        .collect();
    fn query<'a>(expression: &'a str, projects: &'a [Option<String>]) -> LexicalQuery<'a> {
        LexicalQuery {
            match_expression: expression,
            projects,
            limit: 40,
            ..LexicalQuery::default()
        }
    }
    let (cpu, wall) = (cpu_seconds(), Instant::now());
    index.search(&reader, &query(&expressions[0], &projects))?;
    let build = (cpu_seconds() - cpu, wall.elapsed().as_secs_f64());
    let (mut fts, mut memory) = (0.0f64, 0.0f64);
    for expression in &expressions {
        let t = thread_cpu();
        let want = reader.lexical_search(&query(expression, &projects))?;
        fts += thread_cpu() - t;
        let t = thread_cpu();
        let got = index.search(&reader, &query(expression, &projects))?;
        memory += thread_cpu() - t;
        assert_eq!(got, want, "{expression}");
    }
    let rss = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .map(|l| l.to_string())
        .unwrap_or_default();
    println!(
        "{records} records, {queries} queries (2-4 terms, limit 40), answers identical\n\
         index build: {:.2} s CPU ({:.2} s wall)\n\
         FTS5 lexical_search: {:.2} ms CPU per query\n\
         in-memory index:     {:.2} ms CPU per query ({:.1}x)\n\
         peak RSS of the process ({rss})",
        build.0,
        build.1,
        fts * 1000.0 / queries as f64,
        memory * 1000.0 / queries as f64,
        fts / memory
    );
    Ok(())
}
