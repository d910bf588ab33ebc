//! The graph through the engine API on real SQLite files: the stored fold against a model,
//! generated records kept out of clustering, and the neighbourhood of files for the brief.

use cairn_core::record::MemoryType;
use cairn_engine::graph::{ClustersRequest, GraphRequest, RelateRequest};
use cairn_engine::{Context, Engine, RememberRequest};
use chrono::{TimeZone, Utc};
use proptest::prelude::*;

fn engine(dir: &tempfile::TempDir) -> Engine {
    let context = Context {
        project: "graph-test".into(),
        cwd: dir.path().to_path_buf(),
        actor: "test".into(),
        read_only: false,
        now: Some(Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap()),
    };
    Engine::open(&dir.path().join("brain.db"), context).expect("brain opens")
}

fn remember(engine: &mut Engine, title: &str, body: &str) -> i64 {
    let mut request = RememberRequest::new(MemoryType::Note, body);
    request.title = Some(title.to_string());
    request.allow_duplicate = true;
    engine.remember(&request).unwrap().id.expect("stored")
}

fn relate(engine: &mut Engine, a: &str, relation: &str, b: &str) {
    engine
        .relate(&RelateRequest {
            src: a.into(),
            relation: relation.into(),
            dst: b.into(),
            ..RelateRequest::default()
        })
        .unwrap();
}

fn day(d: i64) -> String {
    format!("2025-01-{:02}T00:00:00Z", d + 1)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random assert/invalidate sequences over three edges: at every day, the graph the engine
    /// answers equals the model (an assert opens when nothing is open, an invalidate closes the
    /// open interval, validity is [from, to)).
    #[test]
    fn the_stored_fold_matches_the_model_at_every_time_point(
        ops in prop::collection::vec((any::<bool>(), 0usize..3, 0i64..20), 1..24),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut engine = engine(&dir);
        for name in ["a", "b", "c", "d"] {
            engine.add_entity(name, "thing", &[]).unwrap();
        }
        let pairs = [("a", "b"), ("b", "c"), ("c", "d")];
        // model: per edge, the open interval's start and the closed intervals
        let mut open: [Option<i64>; 3] = [None; 3];
        let mut closed: Vec<(usize, i64, i64)> = Vec::new();
        for (assert, edge, at) in &ops {
            let (src, dst) = pairs[*edge];
            if *assert {
                engine.relate(&RelateRequest { src: src.into(), relation: "requires".into(), dst: dst.into(), from: Some(day(*at)), ..RelateRequest::default() }).unwrap();
                if open[*edge].is_none() {
                    open[*edge] = Some(*at);
                }
            } else {
                let result = engine.unrelate(src, "requires", dst, Some(&day(*at)));
                match open[*edge] {
                    Some(from) if *at < from => prop_assert!(result.is_err()),
                    Some(from) => {
                        result.unwrap();
                        closed.push((*edge, from, *at));
                        open[*edge] = None;
                    }
                    None => prop_assert_eq!(result.unwrap().status, cairn_engine::graph::UnrelateStatus::NothingOpen),
                }
            }
        }
        for t in -1i64..22 {
            let expected = (0..3)
                .filter(|e| {
                    open[*e].is_some_and(|from| from <= t)
                        || closed.iter().any(|(edge, from, to)| edge == e && *from <= t && t < *to)
                })
                .count();
            let at = if t < 0 { "2024-12-31T00:00:00Z".to_string() } else { day(t) };
            let graph = engine.graph(&GraphRequest { as_of: Some(at), limit: 0, relation: None }).unwrap();
            prop_assert_eq!(graph.edges, expected, "day {}", t);
        }
    }
}

#[test]
fn generated_records_never_feed_clustering() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(&dir);
    let ids: Vec<i64> = (0..5)
        .map(|i| {
            remember(
                &mut engine,
                &format!("topic note {i}"),
                &format!("plain text {i}"),
            )
        })
        .collect();
    for (i, a) in ids.iter().enumerate() {
        for b in &ids[i + 1..] {
            relate(&mut engine, &a.to_string(), "relates", &b.to_string());
        }
    }
    let request = ClustersRequest {
        min_size: 2,
        max: 8,
    };
    let before = engine.clusters(&request).unwrap();
    assert_eq!(before.clusters[0].size, 5);
    // a consolidation summary of the cluster, tied to every member
    let summary = remember(
        &mut engine,
        "summary of the topic",
        "generated summary text",
    );
    for id in &ids {
        relate(
            &mut engine,
            &summary.to_string(),
            "relates",
            &id.to_string(),
        );
    }
    engine.mark_generated(summary, "dream").unwrap();
    let after = engine.clusters(&request).unwrap();
    assert_eq!(after.records, 5);
    assert_eq!(after.clusters[0].size, 5);
    assert_eq!(
        after.clusters[0].member_hash,
        before.clusters[0].member_hash
    );
}

#[test]
fn the_neighbourhood_of_the_files_the_tree_touches() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(&dir);
    let exact = remember(
        &mut engine,
        "core lib",
        "Careful in crates/core/src/lib.rs: exports are the API.",
    );
    let short = remember(
        &mut engine,
        "lib gotcha",
        "src/lib.rs must stay free of I/O.",
    );
    let other = remember(
        &mut engine,
        "unrelated",
        "The README.md describes the install.",
    );
    let found = engine
        .neighbourhood_of_paths(
            &[
                "crates/core/src/lib.rs".to_string(),
                "docs/none.md".to_string(),
            ],
            None,
            5,
        )
        .unwrap();
    assert_eq!(found.len(), 1, "a file the graph does not know is left out");
    assert_eq!(found[0].path, "crates/core/src/lib.rs");
    let records: Vec<i64> = found[0].records.iter().map(|n| n.node.id).collect();
    assert!(
        records.contains(&exact) && records.contains(&short),
        "{records:?}"
    );
    assert!(!records.contains(&other));
    assert_eq!(found[0].entities.len(), 2);
}
