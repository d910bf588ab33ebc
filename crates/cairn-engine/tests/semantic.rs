//! The semantic leg of the engine with the hash embedder (a deterministic fake): fusion,
//! filters on vector candidates, the hook's fast path, the write path's indexing.

use cairn_core::record::MemoryType;
use cairn_embed::HashEmbedder;
use cairn_engine::{Context, Engine, Mode, RecallRequest, RememberRequest, SemanticConfig};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

fn engine(dir: &Path) -> Engine {
    let mut context = Context::for_directory(dir);
    context.project = "p".into();
    context.now = Some("2026-06-01T00:00:00Z".parse().unwrap());
    Engine::open(&dir.join("brain.db"), context).unwrap()
}

fn remember(engine: &mut Engine, memory_type: MemoryType, scope: Option<&str>, body: &str) -> i64 {
    let mut request = RememberRequest::new(memory_type, body);
    request.scope = scope.map(str::to_string);
    request.allow_duplicate = true;
    let outcome = engine.remember(&request).unwrap();
    assert!(outcome.warnings.is_empty(), "{outcome:?}");
    outcome.id.unwrap()
}

fn recall(engine: &mut Engine, query: &str, mode: Mode) -> cairn_engine::RecallAnswer {
    let mut request = RecallRequest::new(query);
    request.mode = mode;
    request.touch = false;
    engine.recall(&request).unwrap()
}

#[test]
fn vector_candidates_pass_the_same_filters_as_lexical_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(dir.path());
    engine.set_embedder(Box::new(HashEmbedder::new(64)));
    let deploy = remember(
        &mut engine,
        MemoryType::Note,
        Some("deploy"),
        "rollback the canary release",
    );
    let staging = remember(
        &mut engine,
        MemoryType::Note,
        Some("deploy:staging"),
        "rollback the canary release now",
    );
    let mut request = RecallRequest::new("rollback canary");
    request.mode = Mode::Semantic;
    request.touch = false;
    request.scope = Some("deploy".into());
    let ids: Vec<i64> = engine
        .recall(&request)
        .unwrap()
        .results
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, [deploy], "a child scope is never seen from its parent");
    request.scope = Some("deploy:staging".into());
    let ids: Vec<i64> = engine
        .recall(&request)
        .unwrap()
        .results
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&staging));
    engine.forget(deploy, false).unwrap();
    let answer = recall(&mut engine, "rollback canary", Mode::Semantic);
    assert!(
        answer.results.iter().all(|r| r.id != deploy),
        "archived records stay out"
    );
}

#[test]
fn the_fast_path_never_loads_a_model_but_uses_a_resident_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(dir.path());
    engine.set_embedder(Box::new(HashEmbedder::new(64)));
    remember(
        &mut engine,
        MemoryType::Note,
        None,
        "the kiln fires at night",
    );
    drop(engine);

    let loads = Arc::new(AtomicUsize::new(0));
    let mut engine = self::engine(dir.path());
    let counter = loads.clone();
    engine.set_embedder_loader(Box::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(Some(Box::new(HashEmbedder::new(64))))
    }));
    let mut request = RecallRequest::new("kiln night");
    request.fast = true;
    request.touch = false;
    let answer = engine.recall(&request).unwrap();
    assert_eq!(answer.degraded.as_deref(), Some("lexical-only"));
    assert_eq!(answer.results.len(), 1);
    assert_eq!(
        loads.load(Ordering::SeqCst),
        0,
        "the hook path loaded a model"
    );
    // A normal recall loads it; from then on the fast path uses it (a resident process).
    assert!(
        recall(&mut engine, "kiln night", Mode::Hybrid)
            .degraded
            .is_none()
    );
    assert_eq!(loads.load(Ordering::SeqCst), 1);
    let answer = engine.recall(&request).unwrap();
    assert!(answer.degraded.is_none());
    assert!(answer.results[0].why.vector_rank.is_some());
}

#[test]
fn an_episode_is_embedded_with_the_turn_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(dir.path());
    engine.set_embedder(Box::new(HashEmbedder::new(256)));
    let mut first = RememberRequest::new(
        MemoryType::Episode,
        "Ana: did you try the new pottery wheel",
    );
    first.at = Some("2026-05-01T10:00:00Z".into());
    engine.remember(&first).unwrap();
    let mut second = RememberRequest::new(MemoryType::Episode, "Ben: yes, twice this week");
    second.at = Some("2026-05-01T10:00:30Z".into());
    let reply = engine.remember(&second).unwrap().id.unwrap();
    // "pottery" is only in the question; the reply carries it through its context.
    let answer = recall(&mut engine, "pottery wheel", Mode::Semantic);
    let ranks: Vec<i64> = answer.results.iter().map(|r| r.id).collect();
    assert!(ranks.contains(&reply), "{ranks:?}");
    // Without context the reply shares nothing with the query.
    let dir2 = tempfile::tempdir().unwrap();
    let mut plain = self::engine(dir2.path());
    plain.set_embedder(Box::new(HashEmbedder::new(256)));
    plain.set_semantic_config(SemanticConfig {
        context_turns: 0,
        ..SemanticConfig::default()
    });
    plain.remember(&first).unwrap();
    let reply = plain.remember(&second).unwrap().id.unwrap();
    let answer = recall(&mut plain, "pottery wheel", Mode::Semantic);
    let top = answer.results.first().map(|r| r.id);
    assert_ne!(top, Some(reply));
}

#[test]
fn an_edit_drops_the_stale_vector_and_the_write_path_embeds_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(dir.path());
    engine.set_embedder(Box::new(HashEmbedder::new(64)));
    let id = remember(
        &mut engine,
        MemoryType::Fact,
        None,
        "the cache lives in redis",
    );
    let before = engine
        .store()
        .unwrap()
        .reader()
        .vector_of(id, 64)
        .unwrap()
        .unwrap();
    let request = cairn_engine::UpdateRequest {
        body: Some("the cache lives in postgres now".into()),
        ..Default::default()
    };
    engine.update(id, &request).unwrap();
    let after = engine
        .store()
        .unwrap()
        .reader()
        .vector_of(id, 64)
        .unwrap()
        .unwrap();
    assert_ne!(before, after);
    assert_eq!(
        engine
            .store()
            .unwrap()
            .reader()
            .vector_counts()
            .unwrap()
            .pending(),
        0
    );
}

/// Cosine similarities are not a ratio scale (every one close to the next): a semantic-only
/// answer ranks by the semantic list, and recency only breaks near ties. The best match,
/// two years old, stays near the top among six newer, slightly weaker ones (with relevance
/// taken from the similarity ratio, 0.9 of the best, it fell to the bottom).
#[test]
fn semantic_only_answers_are_not_reordered_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(dir.path());
    engine.set_embedder(Box::new(HashEmbedder::new(4096)));
    let words = "alder birch cedar dogwood elm fir ginkgo hazel ironwood juniper";
    let mut request = RememberRequest::new(MemoryType::Fact, words);
    request.at = Some("2024-06-01".into());
    request.allow_duplicate = true;
    let best = engine.remember(&request).unwrap().id.unwrap();
    for n in 0..6 {
        // nine of the ten words and one other: cosine 0.9
        let body = words.replacen("juniper", &format!("maple{n}"), 1);
        remember(&mut engine, MemoryType::Fact, None, &body);
    }
    let answer = recall(&mut engine, words, Mode::Semantic);
    assert_eq!(answer.results.len(), 7);
    let position = answer.results.iter().position(|r| r.id == best).unwrap();
    assert!(position <= 2, "best match at {position}: {answer:#?}");
}

/// 2,400 notes over six topics with a fake embedder: a brain big enough for the vector
/// search's large-matrix paths when their thresholds are set low.
fn topical_brain(dir: &std::path::Path) -> Engine {
    let mut engine = engine(dir);
    engine.set_embedder(Box::new(HashEmbedder::new(48)));
    let topics = [
        "deploy rollback canary release",
        "postgres vacuum index bloat",
        "kafka consumer lag offset",
        "oauth token rotate secret",
        "docker image registry cache",
        "billing invoice customer ticket",
    ];
    let mut lines = String::new();
    for i in 0..2400 {
        let topic = topics[i % topics.len()];
        let other = topics[(i * 7 + 3) % topics.len()];
        let words: Vec<&str> = other.split(' ').collect();
        lines.push_str(&format!(
            "{{\"type\":\"note\",\"body\":\"{topic} {} note {i}\"}}\n",
            words[i % words.len()]
        ));
    }
    engine
        .import_jsonl(&mut lines.as_bytes(), &Default::default())
        .unwrap();
    engine.index_pending(None, &mut |_, _| {}).unwrap();
    engine
}

const TOPICAL_QUERIES: [&str; 5] = [
    "canary rollback",
    "consumer lag",
    "invoice ticket",
    "registry image",
    "vacuum bloat secret",
];

/// The ids of a semantic recall's top 10 (no floor).
fn semantic_ids(engine: &mut Engine, query: &str) -> Vec<i64> {
    let mut request = RecallRequest::new(query);
    request.mode = Mode::Semantic;
    request.touch = false;
    request.limit = 10;
    request.floor = Some(0.0);
    engine
        .recall(&request)
        .unwrap()
        .results
        .iter()
        .map(|r| r.id)
        .collect()
}

/// From `quantized_min_rows` vectors on, a long-lived engine scans an int8 copy first and
/// re-scores its best rows exactly: the answers are the exact scan's, and a write is seen.
#[test]
fn the_int8_first_pass_answers_exactly_like_the_exact_scan() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = topical_brain(dir.path());
    engine.set_semantic_config(SemanticConfig {
        quantized_min_rows: usize::MAX,
        ..SemanticConfig::default()
    });
    let exact: Vec<Vec<i64>> = TOPICAL_QUERIES
        .iter()
        .map(|q| semantic_ids(&mut engine, q))
        .collect();
    assert!(!engine.prepare_quantized_vectors().unwrap());
    engine.set_semantic_config(SemanticConfig {
        quantized_min_rows: 500,
        ..SemanticConfig::default()
    });
    assert!(
        engine.prepare_quantized_vectors().unwrap(),
        "2400 vectors get an int8 copy"
    );
    for (query, exact) in TOPICAL_QUERIES.iter().zip(&exact) {
        assert_eq!(&semantic_ids(&mut engine, query), exact, "{query}");
    }
    // A new record is found at once (the copy is rebuilt for the new vectors).
    let id = engine
        .remember(&RememberRequest::new(
            MemoryType::Note,
            "canary rollback canary rollback",
        ))
        .unwrap()
        .id
        .unwrap();
    engine.index_pending(None, &mut |_, _| {}).unwrap();
    for _ in 0..3 {
        let found = semantic_ids(&mut engine, "canary rollback");
        assert_eq!(found.first(), Some(&id), "{found:?}");
    }
}

/// A long-lived engine (the MCP server) brings its loaded vectors up to date after another
/// process wrote: a changed record is found by its new text only, a hard-forgotten one not
/// at all, a new one at once, and the int8 copy follows.
#[test]
fn a_long_lived_engine_sees_vectors_that_another_process_changed() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = topical_brain(dir.path());
    server.set_semantic_config(SemanticConfig {
        quantized_min_rows: 500,
        ..SemanticConfig::default()
    });
    assert!(server.prepare_quantized_vectors().unwrap());
    let before = semantic_ids(&mut server, "consumer lag");
    assert_eq!(before.len(), 10);

    let mut other = engine(dir.path());
    other.set_embedder(Box::new(HashEmbedder::new(48)));
    let changed = before[0];
    let update = cairn_engine::UpdateRequest {
        body: Some("walrus tusk glacier".into()),
        ..Default::default()
    };
    other.update(changed, &update).unwrap();
    let gone = before[1];
    other.forget(gone, true).unwrap();
    let added = remember(
        &mut other,
        MemoryType::Note,
        None,
        "consumer lag consumer lag",
    );
    other.index_pending(None, &mut |_, _| {}).unwrap();

    for _ in 0..3 {
        let after = semantic_ids(&mut server, "consumer lag");
        assert_eq!(after.first(), Some(&added), "{after:?}");
        assert!(
            !after.contains(&changed) && !after.contains(&gone),
            "{after:?}"
        );
        assert_eq!(
            semantic_ids(&mut server, "walrus tusk glacier").first(),
            Some(&changed)
        );
    }
    // Only a changed vector and a new one (edited in place, int8 codes included).
    let retold = before[2];
    other
        .update(
            retold,
            &cairn_engine::UpdateRequest {
                body: Some("narwhal fjord iceberg".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let appended = remember(
        &mut other,
        MemoryType::Note,
        None,
        "invoice ticket invoice ticket",
    );
    other.index_pending(None, &mut |_, _| {}).unwrap();
    for _ in 0..3 {
        assert_eq!(
            semantic_ids(&mut server, "narwhal fjord iceberg").first(),
            Some(&retold)
        );
        assert_eq!(
            semantic_ids(&mut server, "invoice ticket").first(),
            Some(&appended)
        );
    }
    // The same answers as a fresh engine that loads every vector.
    let mut fresh = engine(dir.path());
    fresh.set_embedder(Box::new(HashEmbedder::new(48)));
    for query in TOPICAL_QUERIES {
        assert_eq!(
            semantic_ids(&mut server, query),
            semantic_ids(&mut fresh, query),
            "{query}"
        );
    }
}

/// Vectors another engine of the process stored (the service's background indexer) go into a
/// long-lived engine's matrix and int8 copy in place: it answers like a fresh engine without
/// reading the brain's vectors again. When it was already behind (a third writer changed a
/// vector), it takes nothing and brings itself up to date from the brain as before.
#[test]
fn vectors_handed_over_by_another_engine_go_into_the_matrix_without_a_reread() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = topical_brain(dir.path());
    server.set_semantic_config(SemanticConfig {
        quantized_min_rows: 500,
        ..SemanticConfig::default()
    });
    assert!(server.prepare_quantized_vectors().unwrap());
    let before = semantic_ids(&mut server, "consumer lag");
    let reads = server.vector_reads();

    let mut indexer = engine(dir.path());
    indexer.set_embedder(Box::new(HashEmbedder::new(48)));
    indexer.keep_written_vectors();
    let added = remember(
        &mut indexer,
        MemoryType::Note,
        None,
        "consumer lag consumer lag",
    );
    let walrus = remember(&mut indexer, MemoryType::Note, None, "walrus tusk glacier");
    let written = indexer.take_written_vectors();
    assert_eq!(written.rows(), 2, "{written:?}");
    assert_eq!(server.absorb_vectors(&written), 2);
    assert!(indexer.take_written_vectors().is_empty());
    for _ in 0..2 {
        assert_eq!(
            semantic_ids(&mut server, "consumer lag").first(),
            Some(&added)
        );
        assert_eq!(
            semantic_ids(&mut server, "walrus tusk glacier").first(),
            Some(&walrus)
        );
    }
    assert_eq!(server.vector_reads(), reads, "nothing read again");
    let mut fresh = engine(dir.path());
    fresh.set_embedder(Box::new(HashEmbedder::new(48)));
    for query in TOPICAL_QUERIES {
        assert_eq!(
            semantic_ids(&mut server, query),
            semantic_ids(&mut fresh, query),
            "{query}"
        );
    }

    // A writer the server hears nothing from changes a vector first (an edit drops it and
    // embeds the new text): the indexer's next vectors are refused, and the server reads the
    // changes itself.
    let mut other = engine(dir.path());
    other.set_embedder(Box::new(HashEmbedder::new(48)));
    let retold = before[0];
    other
        .update(
            retold,
            &cairn_engine::UpdateRequest {
                body: Some("narwhal fjord iceberg".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let late = remember(
        &mut indexer,
        MemoryType::Note,
        None,
        "invoice ticket invoice ticket",
    );
    let written = indexer.take_written_vectors();
    assert_eq!(written.rows(), 1);
    assert_eq!(server.absorb_vectors(&written), 0, "the server was behind");
    assert_eq!(
        semantic_ids(&mut server, "narwhal fjord iceberg").first(),
        Some(&retold)
    );
    assert_eq!(
        semantic_ids(&mut server, "invoice ticket").first(),
        Some(&late)
    );
    assert_eq!(
        server.vector_reads(),
        reads + 1,
        "one refresh from the brain"
    );
}

/// Above `ann_min_rows` a long-lived engine searches an IVF index instead of every vector; on
/// a seeded brain its semantic answers agree with the exact scan's (recall@10 of the index is
/// measured at 100k by `cairn-bench-semantic`; here a generous bound). 2,400 rows: the index
/// is searched only when the candidates wanted (200 here) are at most an eighth of the rows.
#[test]
fn the_ivf_index_answers_like_the_exact_scan() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = topical_brain(dir.path());
    let queries = TOPICAL_QUERIES;
    let answer = semantic_ids;
    let exact: Vec<Vec<i64>> = queries.iter().map(|q| answer(&mut engine, q)).collect();
    engine.set_semantic_config(SemanticConfig {
        ann_min_rows: 500,
        ..SemanticConfig::default()
    });
    assert!(
        engine.prepare_vector_index().unwrap(),
        "2400 vectors get an index"
    );
    let mut agreed = 0;
    for (query, exact) in queries.iter().zip(&exact) {
        let approximate = answer(&mut engine, query);
        assert_eq!(approximate.len(), exact.len(), "{query}");
        agreed += approximate.iter().filter(|id| exact.contains(id)).count();
    }
    let total: usize = exact.iter().map(Vec::len).sum();
    assert!(
        agreed as f64 >= 0.8 * total as f64,
        "the index found {agreed} of the exact scan's {total}"
    );
    // Below the threshold nothing is built.
    engine.set_semantic_config(SemanticConfig::default());
    engine
        .remember(&RememberRequest::new(MemoryType::Note, "one more write"))
        .unwrap();
    assert!(!engine.prepare_vector_index().unwrap());
}

fn pending(dir: &Path) -> i64 {
    let store = cairn_store::Store::open(&dir.join("brain.db")).unwrap();
    store.reader().vector_counts().unwrap().pending()
}

#[test]
fn a_write_embeds_older_pending_records_unless_a_background_indexer_takes_them() {
    let dir = tempfile::tempdir().unwrap();
    // Two records stored without a model: both pending.
    let mut plain = engine(dir.path());
    remember(
        &mut plain,
        MemoryType::Note,
        None,
        "the kiln fires at night",
    );
    remember(
        &mut plain,
        MemoryType::Note,
        None,
        "the glaze cracks in frost",
    );
    drop(plain);
    assert_eq!(pending(dir.path()), 2);

    // A long-lived process with a background indexer: a write embeds only what it wrote.
    let mut served = engine(dir.path());
    served.set_embedder(Box::new(HashEmbedder::new(64)));
    served.leave_backlog_to_indexer();
    let third = remember(&mut served, MemoryType::Note, None, "the wheel squeaks");
    assert_eq!(pending(dir.path()), 2, "the older two are the indexer's");
    let answer = recall(&mut served, "wheel squeaks", Mode::Semantic);
    assert_eq!(answer.results[0].id, third, "what it wrote has its vector");
    drop(served);

    // Any other process: a write embeds what it wrote and up to 16 older pending records.
    let mut cli = engine(dir.path());
    cli.set_embedder(Box::new(HashEmbedder::new(64)));
    remember(&mut cli, MemoryType::Note, None, "the clay dries slowly");
    assert_eq!(pending(dir.path()), 0);
}

/// A service embeds the query before it takes the engine with the vectors
/// (`Engine::recall_with_query_vector`): with the vector the engine's own model makes, the
/// answer is the one `recall` gives; the vector is what the semantic leg ranks by (another
/// query's vector gives that query's answer); a lexical recall ignores it.
#[test]
fn a_query_vector_made_before_the_recall_is_the_one_ranked_by() {
    use cairn_embed::Embedder;
    let dir = tempfile::tempdir().unwrap();
    let mut engine = topical_brain(dir.path());
    let model = HashEmbedder::new(48);
    let ranked = |answer: cairn_engine::RecallAnswer| -> Vec<(i64, String)> {
        answer
            .results
            .iter()
            .map(|r| (r.id, format!("{:.6}", r.score)))
            .collect()
    };
    for mode in [Mode::Semantic, Mode::Hybrid] {
        for query in TOPICAL_QUERIES {
            let mut request = RecallRequest::new(query);
            request.mode = mode;
            request.touch = false;
            let plain = ranked(engine.recall(&request).unwrap());
            let vector = model.embed_query(query).unwrap();
            let given = ranked(engine.recall_with_query_vector(&request, vector).unwrap());
            assert!(!plain.is_empty(), "{query}");
            assert_eq!(plain, given, "{mode:?} {query}");
        }
    }
    let mut request = RecallRequest::new("canary rollback");
    request.mode = Mode::Semantic;
    request.touch = false;
    let other = model.embed_query("consumer lag").unwrap();
    let steered = ranked(engine.recall_with_query_vector(&request, other).unwrap());
    let mut lag = RecallRequest::new("consumer lag");
    lag.mode = Mode::Semantic;
    lag.touch = false;
    assert_eq!(steered, ranked(engine.recall(&lag).unwrap()));
    request.mode = Mode::Lexical;
    let lexical = ranked(engine.recall(&request).unwrap());
    let ignored = model.embed_query("consumer lag").unwrap();
    assert_eq!(
        lexical,
        ranked(engine.recall_with_query_vector(&request, ignored).unwrap())
    );
}
