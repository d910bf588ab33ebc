//! `cairn-bench pg-search`: lexical search on SQLite (FTS5) and on PostgreSQL (cairn's BM25
//! index, `cairn_store::pg_search`) side by side, on the same brain at N records (issue 15).
//!
//! Steps: the `core` corpus imported with `Engine::import_jsonl`; `cairn migrate` into a fresh
//! database of the given server (its throughput, the BM25 index build included); then each
//! measured query's lexical search on both stores, alternating which runs first, with the
//! answers compared (ids and order); disk bytes per record beside each other. The database is
//! dropped at the end unless `--keep`.

use crate::commands::core::{DEFAULT_SEED, NOW};
use anyhow::{Context as _, Result, bail};
use cairn_bench::corpus;
use cairn_bench::results::Run;
use cairn_bench::rng::Rng;
use cairn_bench::stats::{Summary, round3};
use cairn_bench::work::WorkDir;
use cairn_core::query::{fts_match_expression, query_terms};
use cairn_engine::exchange::ImportOptions;
use cairn_engine::{Context, Engine, RecallRequest};
use cairn_store::LexicalQuery;
use cairn_store::migrate::{Endpoint, Progress, migrate};
use cairn_store::postgres::PgTarget;
use chrono::{DateTime, Utc};
use clap::Args;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

const PROJECT: &str = "bench";
/// The limit a recall of 10 asks lexical search for.
const LIMIT: usize = 10;
/// Issue 15's targets at 100,000 memories.
const TARGET_LEXICAL_P95_MS: f64 = 15.0;
const TARGET_IMPORT_PER_S: f64 = 3_000.0;

#[derive(Debug, Args)]
pub struct PgSearchArgs {
    /// Records in the corpus.
    #[arg(long, default_value_t = 100_000)]
    records: usize,
    /// Measured queries (after the warm-up).
    #[arg(long, default_value_t = 500)]
    queries: usize,
    /// Warm-up queries (a separate draw from the same distribution).
    #[arg(long, default_value_t = 100)]
    warmup: usize,
    /// The PostgreSQL server (a database of its own is created on it, and dropped).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pg_url: String,
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Content words: `auto` (the dictionary when present), `dict` or `generated`.
    #[arg(long, default_value = "auto")]
    vocab: String,
    /// Where the corpus and the brain are written (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Keep the corpus, the brain and the database.
    #[arg(long)]
    keep: bool,
}

fn now() -> DateTime<Utc> {
    NOW.parse().expect("NOW is RFC 3339")
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

fn progress(message: &str) {
    cairn_bench::results::progress("pg-search", message);
}

pub fn run(args: &PgSearchArgs) -> Result<()> {
    if args.records == 0 || args.queries == 0 {
        bail!("--records and --queries must be at least 1");
    }
    let mut run = Run::start("pg-search");
    let work_dir = WorkDir::new("pg-search", args.work_dir.as_deref(), args.keep)?;
    let work = work_dir.path().to_path_buf();

    run.phase("generate");
    let mut rng = Rng::new(args.seed);
    let vocabulary = corpus::vocabulary(&args.vocab, &mut rng)?;
    let corpus_path = work.join("corpus.jsonl");
    let corpus_stats =
        corpus::write_corpus(&corpus_path, args.records, &vocabulary, now(), &mut rng)?;
    let query_set = corpus::queries(
        args.warmup + args.queries,
        &vocabulary,
        &corpus_stats,
        &mut rng,
    )?;
    let (warmup, measured) = query_set.queries.split_at(args.warmup);

    run.phase("import");
    let brain = work.join("brain.db");
    let import_seconds = {
        let mut engine = Engine::open(&brain, context(&work))?;
        let mut input = std::io::BufReader::with_capacity(
            1 << 20,
            std::fs::File::open(&corpus_path)
                .with_context(|| format!("cannot read {}", corpus_path.display()))?,
        );
        let started = Instant::now();
        engine.import_jsonl(&mut input, &ImportOptions::default())?;
        started.elapsed().as_secs_f64()
    };
    progress(&format!("imported into SQLite in {import_seconds:.1}s"));

    run.phase("migrate");
    let admin = PgTarget::parse(&args.pg_url)?;
    let database = format!("cairn_bench_pg_search_{}", std::process::id());
    let mut admin_client = admin.connect()?;
    admin_client.batch_execute(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))?;
    admin_client.batch_execute(&format!("CREATE DATABASE {database}"))?;
    let target = admin.with_database(&database);
    let started = Instant::now();
    let mut copied_at: Option<f64> = None;
    let summary = migrate(
        &Endpoint::Sqlite(brain.clone()),
        &Endpoint::Postgres(admin.with_database(&database)),
        1000,
        &mut |event| {
            if matches!(event, Progress::Indexing) {
                copied_at = Some(started.elapsed().as_secs_f64());
            }
        },
    )?;
    let migrate_seconds = started.elapsed().as_secs_f64();
    let copy_seconds = copied_at.unwrap_or(migrate_seconds);
    let rows: u64 = summary.tables.iter().map(|t| t.rows).sum();
    progress(&format!(
        "migrated {rows} rows in {migrate_seconds:.1}s ({:.0} records/s, the BM25 index build included)",
        args.records as f64 / migrate_seconds
    ));

    run.phase("lexical");
    let lexical = measure(&brain, &target, warmup, measured)?;
    progress(&format!(
        "lexical p95: SQLite {:.2} ms, PostgreSQL {:.2} ms",
        lexical["sqlite"]["p95_ms"].as_f64().unwrap_or(f64::NAN),
        lexical["postgres"]["p95_ms"].as_f64().unwrap_or(f64::NAN)
    ));

    let mut client = target.connect()?;
    let pg_bytes: i64 = client
        .query_one("SELECT pg_database_size(current_database())", &[])?
        .get(0);
    let index_bytes: i64 = client
        .query_one(
            "SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c \
             WHERE c.relname IN ('cairn_fts_postings', 'cairn_fts_docs', 'cairn_fts_totals')",
            &[],
        )?
        .get(0);
    drop(client);
    let sqlite_bytes = std::fs::metadata(&brain).map(|m| m.len()).unwrap_or(0);
    if !args.keep {
        admin_client.batch_execute(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))?;
    }

    let records = args.records as f64;
    let migrate_per_s = records / migrate_seconds;
    let pg_p95 = lexical["postgres"]["p95_ms"].as_f64();
    let parameters = json!({
        "records": args.records,
        "queries": args.queries,
        "warmup": args.warmup,
        "seed": format!("{:#x}", args.seed),
        "now": NOW,
        "project": PROJECT,
        "lexical_limit": lexical_limit(),
        "pg_url": admin.shown(),
    });
    let results = json!({
        "corpus": corpus_stats.json(),
        "queries": query_set.json(measured, args.records),
        "sqlite_import_seconds": round3(import_seconds),
        "migrate": {
            "seconds": round3(migrate_seconds),
            "copy_seconds": round3(copy_seconds),
            "index_seconds": round3(migrate_seconds - copy_seconds),
            "records_per_s": round3(migrate_per_s),
            "rows": rows,
            "note": "cairn migrate SQLite → PostgreSQL, every table, the BM25 index build and its VACUUM ANALYZE included",
        },
        "lexical": lexical,
        "disk": {
            "sqlite_bytes": sqlite_bytes,
            "sqlite_bytes_per_record": round3(sqlite_bytes as f64 / records),
            "postgres_database_bytes": pg_bytes,
            "postgres_bytes_per_record": round3(pg_bytes as f64 / records),
            "postgres_bm25_index_bytes": index_bytes,
        },
        "targets": {
            "lexical_p95_ms": {"target": format!("<= {TARGET_LEXICAL_P95_MS}"), "value": pg_p95, "pass": pg_p95.map(|v| v <= TARGET_LEXICAL_P95_MS)},
            "import_per_s": {"target": format!(">= {TARGET_IMPORT_PER_S} (here: cairn migrate, index build included)"), "value": round3(migrate_per_s), "pass": migrate_per_s >= TARGET_IMPORT_PER_S},
        },
    });
    let body = markdown(&parameters, &results);
    run.finish(&args.out, parameters, results, &body)?;
    work_dir.finish();
    Ok(())
}

fn context(cwd: &Path) -> Context {
    Context {
        project: PROJECT.to_string(),
        cwd: cwd.to_path_buf(),
        actor: "bench".to_string(),
        read_only: false,
        now: Some(now()),
    }
}

/// The candidates a recall of [`LIMIT`] asks lexical search for.
fn lexical_limit() -> usize {
    (LIMIT * RecallRequest::CANDIDATES_PER_RESULT).max(RecallRequest::MIN_CANDIDATES)
}

/// Each query's lexical search on both stores (every term of the query, the recall's filters
/// and limit), alternating which runs first; the answers compared.
fn measure(
    brain: &Path,
    target: &PgTarget,
    warmup: &[corpus::Query],
    measured: &[corpus::Query],
) -> Result<Value> {
    let store = cairn_store::Store::open_read_only(brain)?;
    let reader = store.reader();
    let mut client = target.connect()?;
    let projects = vec![Some(PROJECT.to_string()), None];
    let mut sqlite_ms = Vec::new();
    let mut postgres_ms = Vec::new();
    let (mut same, mut differ, mut empty) = (0usize, 0usize, 0usize);
    for (index, query) in warmup.iter().chain(measured).enumerate() {
        let terms = query_terms(&query.text);
        let Some(expression) = fts_match_expression(&terms) else {
            continue;
        };
        let lexical = LexicalQuery {
            match_expression: &expression,
            projects: &projects,
            limit: lexical_limit(),
            ..LexicalQuery::default()
        };
        let time_sqlite = || -> Result<(f64, Vec<i64>)> {
            let started = Instant::now();
            let hits = reader.lexical_search(&lexical)?;
            Ok((ms(started), hits.iter().map(|h| h.id).collect()))
        };
        let mut time_postgres = || -> Result<(f64, Vec<i64>)> {
            let started = Instant::now();
            let hits =
                cairn_store::pg_search::lexical_search(target, &mut client, &terms, &lexical)?;
            Ok((ms(started), hits.iter().map(|h| h.id).collect()))
        };
        let (sqlite, postgres) = if index % 2 == 0 {
            let sqlite = time_sqlite()?;
            (sqlite, time_postgres()?)
        } else {
            let postgres = time_postgres()?;
            (time_sqlite()?, postgres)
        };
        if index < warmup.len() {
            continue;
        }
        sqlite_ms.push(sqlite.0);
        postgres_ms.push(postgres.0);
        if sqlite.1.is_empty() {
            empty += 1;
        }
        if sqlite.1 == postgres.1 {
            same += 1;
        } else {
            differ += 1;
        }
    }
    let sqlite = Summary::of(&sqlite_ms);
    let postgres = Summary::of(&postgres_ms);
    Ok(json!({
        "note": "Reader::lexical_search (FTS5 bm25) against pg_search::lexical_search (one statement over cairn_fts_postings) on the same brain, every query term, no term cut-off; both in this process, PostgreSQL over a local TCP connection",
        "sqlite": sqlite.json(),
        "postgres": postgres.json(),
        "p95_ratio_postgres_to_sqlite": round3(postgres.p95 / sqlite.p95),
        "answers_identical": same,
        "answers_different": differ,
        "answers_empty": empty,
    }))
}

fn markdown(parameters: &Value, results: &Value) -> String {
    let mut s = String::new();
    let r = results;
    let f = |v: &Value| match v.as_f64() {
        Some(x) => format!("{x:.2}"),
        None => v.to_string(),
    };
    let _ = writeln!(
        s,
        "## Lexical search, SQLite FTS5 against PostgreSQL BM25 ({} records, {} queries, limit {})\n",
        parameters["records"], parameters["queries"], parameters["lexical_limit"]
    );
    let _ = writeln!(s, "| | p50 ms | p95 ms | p99 ms |");
    let _ = writeln!(s, "|---|---|---|---|");
    for (name, key) in [("SQLite (FTS5)", "sqlite"), ("PostgreSQL", "postgres")] {
        let l = &r["lexical"][key];
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {} |",
            f(&l["p50_ms"]),
            f(&l["p95_ms"]),
            f(&l["p99_ms"])
        );
    }
    let _ = writeln!(
        s,
        "\nPostgreSQL / SQLite p95: **{}**. Identical answers: {} of {} ({} empty).\n",
        f(&r["lexical"]["p95_ratio_postgres_to_sqlite"]),
        r["lexical"]["answers_identical"],
        r["lexical"]["answers_identical"].as_u64().unwrap_or(0)
            + r["lexical"]["answers_different"].as_u64().unwrap_or(0),
        r["lexical"]["answers_empty"]
    );
    let _ = writeln!(
        s,
        "`cairn migrate` into PostgreSQL: {} s, **{} records/s** (BM25 index build included: the rows copied in {} s, the index built in {} s).\n",
        f(&r["migrate"]["seconds"]),
        f(&r["migrate"]["records_per_s"]),
        f(&r["migrate"]["copy_seconds"]),
        f(&r["migrate"]["index_seconds"])
    );
    let _ = writeln!(
        s,
        "Disk: SQLite {} bytes/record; PostgreSQL {} bytes/record (BM25 index {} MB).",
        f(&r["disk"]["sqlite_bytes_per_record"]),
        f(&r["disk"]["postgres_bytes_per_record"]),
        f(&json!(
            r["disk"]["postgres_bm25_index_bytes"]
                .as_f64()
                .unwrap_or(0.0)
                / 1_048_576.0
        ))
    );
    s
}
