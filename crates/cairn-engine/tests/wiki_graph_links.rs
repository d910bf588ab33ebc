//! Regression (issue 13, item 8): the wiki's pages linked only through supersession although
//! the knowledge graph exists (docs/design.md §11 promises `[[links]]` from the graph). A page now links
//! to the pages of the records the graph relates it to, named by the relation, in a
//! deterministic order, only to records that have a page; closing an edge re-renders both ends.

mod common;

use common::{engine_at, test_now};

use cairn_core::record::MemoryType;
use cairn_engine::graph::RelateRequest;
use cairn_engine::wiki::WikiExportOptions;
use cairn_engine::{Engine, RememberRequest};
use std::path::Path;

fn remember(engine: &mut Engine, title: &str, body: &str) -> i64 {
    let mut request = RememberRequest::new(MemoryType::Fact, body.to_string());
    request.title = Some(title.to_string());
    engine.remember(&request).unwrap().id.unwrap()
}

fn relate(engine: &mut Engine, src: &str, relation: &str, dst: &str) {
    engine
        .relate(&RelateRequest {
            src: src.to_string(),
            relation: relation.to_string(),
            dst: dst.to_string(),
            from: None,
            to: None,
            allow_dangling: false,
            confidence: None,
        })
        .unwrap();
}

/// The lines of a page's `## Links` section.
fn links(dir: &Path, page: &str) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join(page)).unwrap();
    let Some(start) = text.find("## Links\n\n") else {
        return Vec::new();
    };
    text[start + "## Links\n\n".len()..]
        .lines()
        .take_while(|line| line.starts_with("- "))
        .map(str::to_string)
        .collect()
}

#[test]
fn pages_link_the_records_the_graph_relates() {
    let brain = tempfile::tempdir().unwrap();
    let wiki = tempfile::tempdir().unwrap();
    let mut engine = engine_at(brain.path(), test_now());
    let api = remember(
        &mut engine,
        "Api server",
        "The api server answers on port 8081.",
    );
    let db = remember(
        &mut engine,
        "Main database",
        "The main database is Postgres 16.",
    );
    let cache = remember(
        &mut engine,
        "Edge cache",
        "The edge cache keeps pages for a minute.",
    );
    relate(
        &mut engine,
        &format!("#{api}"),
        "requires",
        &format!("#{db}"),
    );
    relate(
        &mut engine,
        &format!("#{cache}"),
        "relates",
        &format!("#{api}"),
    );
    relate(
        &mut engine,
        &format!("#{api}"),
        "affects",
        &format!("#{cache}"),
    );
    // An edge to an entity has no page to link to.
    engine.add_entity("postgres", "service", &[]).unwrap();
    relate(&mut engine, &format!("#{db}"), "part_of", "postgres");

    engine
        .export_wiki(wiki.path(), &WikiExportOptions::default())
        .unwrap();
    assert_eq!(
        links(wiki.path(), "fact/api-server.md"),
        [
            format!("- affects [[fact/edge-cache|Edge cache]] (#{cache})"),
            format!("- relates [[fact/edge-cache|Edge cache]] (#{cache})"),
            format!("- requires [[fact/main-database|Main database]] (#{db})"),
        ]
    );
    assert_eq!(
        links(wiki.path(), "fact/main-database.md"),
        [format!(
            "- ← requires [[fact/api-server|Api server]] (#{api})"
        )]
    );
    assert_eq!(
        links(wiki.path(), "fact/edge-cache.md"),
        [
            format!("- relates [[fact/api-server|Api server]] (#{api})"),
            format!("- ← affects [[fact/api-server|Api server]] (#{api})"),
        ]
    );

    // Unchanged graph, unchanged pages: the second export writes nothing.
    let again = engine
        .export_wiki(wiki.path(), &WikiExportOptions::default())
        .unwrap();
    assert_eq!(again.written, 0, "{again:?}");

    // Closing an edge re-renders the pages at both of its ends.
    let mut later = engine_at(brain.path(), test_now() + chrono::Duration::hours(1));
    later
        .unrelate(&format!("#{api}"), "requires", &format!("#{db}"), None)
        .unwrap();
    let after = later
        .export_wiki(wiki.path(), &WikiExportOptions::default())
        .unwrap();
    assert!(after.written >= 2, "{after:?}");
    assert!(links(wiki.path(), "fact/main-database.md").is_empty());
    assert!(
        !links(wiki.path(), "fact/api-server.md")
            .iter()
            .any(|l| l.contains("requires")),
    );
}
