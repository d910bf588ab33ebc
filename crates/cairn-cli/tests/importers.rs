//! End-to-end: every importer on a realistic fixture (tests/fixtures/importers/): what it maps,
//! what it reports it could not map, trust `imported`, and importing twice adds nothing.

mod common;

use common::Brain;
use serde_json::Value;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/importers")
        .join(name)
        .display()
        .to_string()
}

/// Imports `source` twice and returns the first report; the second must add nothing.
fn import_twice(brain: &Brain, kind: &str, source: &str) -> Value {
    let first = brain.json(&["import", kind, source], 0);
    let second = brain.json(&["import", kind, source], 0);
    assert_eq!(second["summary"]["added"], 0, "idempotent: {second}");
    assert_eq!(second["summary"]["updated"], 0, "idempotent: {second}");
    assert_eq!(
        second["summary"]["noop"], first["summary"]["added"],
        "{second}"
    );
    first
}

fn records(brain: &Brain) -> Vec<Value> {
    let listed = brain.json(&["list", "--limit", "0"], 0);
    let mut all = listed.as_array().unwrap().clone();
    all.sort_by_key(|m| m["id"].as_i64());
    assert!(all.iter().all(|m| m["trust"] == "imported"), "{all:?}");
    all
}

fn by_title<'a>(all: &'a [Value], title: &str) -> &'a Value {
    all.iter()
        .find(|m| m["title"] == title)
        .unwrap_or_else(|| panic!("no record titled {title:?}"))
}

fn unmapped(report: &Value) -> Vec<String> {
    report["unmapped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn claude_md_files_become_one_record_per_section() {
    let brain = Brain::new();
    let report = import_twice(&brain, "claude-md", &fixture("claude-code/repo"));
    assert_eq!(report["kind"], "claude-md");
    assert_eq!(report["summary"]["added"], 8, "{report}");
    let all = records(&brain);
    assert_eq!(by_title(&all, "Commands")["type"], "procedure");
    assert_eq!(by_title(&all, "Code style")["type"], "preference");
    assert_eq!(by_title(&all, "Important rules")["type"], "policy");
    assert_eq!(by_title(&all, "Gotchas")["type"], "gotcha");
    assert!(
        by_title(&all, "Important rules")["body"]
            .as_str()
            .unwrap()
            .contains("NEVER commit `.env*` files")
    );
    assert!(by_title(&all, "Testing")["source"] == "services/api/CLAUDE.md");
    assert!(by_title(&all, "My sandbox")["source"] == "CLAUDE.local.md");
    assert!(by_title(&all, "Commands")["tags"] == serde_json::json!(["claude-md"]));
    let notes = unmapped(&report);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("`@docs/architecture.md`") && n.contains("not followed")),
        "{notes:?}"
    );
}

#[test]
fn claude_code_memory_files_map_their_frontmatter() {
    let brain = Brain::new();
    let report = import_twice(
        &brain,
        "claude-md",
        &fixture("claude-code/projects/-home-ana-src-shop/memory"),
    );
    assert_eq!(
        report["summary"]["added"], 4,
        "MEMORY.md is an index: {report}"
    );
    let all = records(&brain);
    let role = by_title(&all, "User role");
    assert_eq!(role["type"], "preference");
    assert!(
        role["summary"]
            .as_str()
            .unwrap()
            .contains("new to the React side")
    );
    assert_eq!(
        role["tags"],
        serde_json::json!(["claude-md", "memory-user"])
    );
    let feedback = by_title(&all, "Integration tests hit a real database");
    assert_eq!(feedback["type"], "preference");
    assert!(feedback["body"].as_str().unwrap().contains("**Why:**"));
    assert_eq!(
        by_title(&all, "Merge freeze for the mobile release")["type"],
        "fact"
    );
    assert_eq!(by_title(&all, "Pipeline bug tracker")["type"], "fact");
}

#[test]
fn agents_md_sections_are_imported() {
    let brain = Brain::new();
    let report = import_twice(&brain, "agents-md", &fixture("AGENTS.md"));
    assert_eq!(report["summary"]["added"], 4, "{report}");
    let all = records(&brain);
    assert_eq!(by_title(&all, "Setup commands")["type"], "procedure");
    assert_eq!(by_title(&all, "Testing instructions")["type"], "procedure");
    assert!(
        by_title(&all, "PR instructions")["body"]
            .as_str()
            .unwrap()
            .contains("Title format")
    );
    assert!(
        all.iter()
            .all(|m| m["tags"] == serde_json::json!(["agents-md"]))
    );
}

#[test]
fn the_mcp_memory_graph_maps_entities_and_reports_the_rest() {
    let brain = Brain::new();
    let report = import_twice(&brain, "mcp-memory", &fixture("memory.jsonl"));
    assert_eq!(report["summary"]["added"], 3, "{report}");
    let all = records(&brain);
    let ana = by_title(&all, "Ana Lima");
    let body = ana["body"].as_str().unwrap();
    assert!(
        body.contains("- Backend engineer on the shop team"),
        "{body}"
    );
    assert!(
        body.contains("- Uses Neovim"),
        "a repeated entity's observations merge: {body}"
    );
    assert!(
        !body.contains("works_on"),
        "relations are graph edges, not text: {body}"
    );
    assert_eq!(ana["tags"], serde_json::json!(["mcp-memory", "person"]));
    assert_eq!(ana["external_id"], "mcp-memory:entity:Ana_Lima");
    let notes = unmapped(&report).join("\n");
    for needle in [
        "line 7: entity \"Ana_Lima\" appears again",
        "line 8: unknown line type \"note\"",
        "line 9: not valid JSON",
    ] {
        assert!(notes.contains(needle), "{needle}: {notes}");
    }
    assert!(!notes.contains("kept as text"), "{notes}");
}

/// Regression (issue 13, item 8): the MCP-memory importer kept relations as text "until the
/// graph lands". Each relation is now an edge: between the records of the file's entities, or
/// to a graph entity for a name the file does not define; unknown relation types are declared;
/// a second import adds no edge.
#[test]
fn mcp_memory_relations_become_graph_edges() {
    let brain = Brain::new();
    let report = brain.json(&["import", "mcp-memory", &fixture("memory.jsonl")], 0);
    let relations = report["relations"].as_array().unwrap();
    assert_eq!(relations.len(), 3, "{report}");
    assert!(relations.iter().all(|r| r["status"] == "added"), "{report}");
    let all = records(&brain);
    let id = |title: &str| by_title(&all, title)["id"].as_i64().unwrap();
    let (ana, shop, pricing) = (id("Ana Lima"), id("Shop Platform"), id("Pricing Service"));

    let edges = brain.json(&["edges", &format!("#{shop}")], 0);
    let mut seen: Vec<(String, String, String)> = edges["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["relation"] != "mentions")
        .map(|e| {
            (
                e["src"]["name"].as_str().unwrap().to_string(),
                e["relation"].as_str().unwrap().to_string(),
                e["dst"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    let record = |id: i64| format!("#{id}");
    let mut expected = vec![
        (record(ana), "works_on".to_string(), record(shop)),
        (record(pricing), "part_of".to_string(), record(shop)),
        (
            "Mobile Team".to_string(),
            "depends_on".to_string(),
            record(shop),
        ),
    ];
    expected.sort();
    assert_eq!(seen, expected, "{edges}");

    let types = brain.json(&["relation-type", "list"], 0);
    let declared: Vec<&str> = types
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["builtin"] == false)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(declared, ["depends_on", "works_on"], "{types}");

    let again = brain.json(&["import", "mcp-memory", &fixture("memory.jsonl")], 0);
    assert!(
        again["relations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] == "noop"),
        "a second import adds no edge: {again}"
    );
    let graph = brain.json(&["graph", "--relation", "works_on"], 0);
    assert_eq!(graph["edges"], 1, "{graph}");
}

#[test]
fn basic_memory_and_obsidian_folders_become_one_record_per_note() {
    let brain = Brain::new();
    let report = import_twice(&brain, "markdown", &fixture("basic-memory"));
    assert_eq!(report["summary"]["added"], 2, "{report}");
    let all = records(&brain);
    let queue = by_title(&all, "Queue backend");
    assert_eq!(queue["type"], "decision", "a cairn type in `type:` is kept");
    assert_eq!(queue["created_at"], "2026-01-12T09:30:00Z");
    assert_eq!(
        queue["tags"],
        serde_json::json!(["markdown", "postgres", "queue"])
    );
    assert_eq!(
        queue["external_id"],
        "markdown:permalink:decisions/queue-backend"
    );
    let search = by_title(&all, "Search Design");
    assert!(
        search["body"]
            .as_str()
            .unwrap()
            .contains("- implements [[Search Specification]]")
    );

    let vault = brain.json(&["import", "markdown", &fixture("obsidian")], 0);
    assert_eq!(vault["summary"]["added"], 2, "{vault}");
    let all = records(&brain);
    let checklist = by_title(&all, "Deploy checklist");
    assert_eq!(
        checklist["tags"],
        serde_json::json!(["deploy", "markdown", "ops"])
    );
    assert!(
        by_title(&all, "2026 02 03")["body"]
            .as_str()
            .unwrap()
            .contains("[[Ana Lima]]")
    );
    let notes = unmapped(&vault).join("\n");
    assert!(
        notes.contains("`aliases`") && notes.contains("`cssclasses`"),
        "{notes}"
    );
    assert!(!notes.contains("app.json"), ".obsidian is not read");
}

#[test]
fn mem0_exports_map_memories_categories_and_times() {
    let brain = Brain::new();
    let report = import_twice(&brain, "mem0", &fixture("mem0-export.json"));
    assert_eq!(report["summary"]["added"], 3, "{report}");
    let all = records(&brain);
    let diet = all
        .iter()
        .find(|m| m["body"] == "Is vegetarian and avoids dairy")
        .unwrap();
    assert_eq!(diet["type"], "preference");
    assert_eq!(diet["created_at"], "2026-01-20T18:14:31Z");
    assert_eq!(
        diet["tags"],
        serde_json::json!(["food", "mem0", "user-alice", "user-preferences"])
    );
    assert_eq!(
        diet["external_id"],
        "mem0:6f1c2b1e-8a52-4c6f-9d2e-3b7a1f0c9e11"
    );
    let notes = unmapped(&report).join("\n");
    assert!(notes.contains("item 4: no `memory` text"), "{notes}");
    assert!(notes.contains("\"not a date\" is not a time"), "{notes}");
    assert!(
        notes.contains("metadata key `source` (2 item(s))"),
        "{notes}"
    );
}

#[test]
fn cairn_jsonl_still_imports_through_the_plain_command() {
    let brain = Brain::new();
    let first = brain.json(&["import", "--format", "jsonl", &fixture("cairn.jsonl")], 0);
    assert_eq!(first["summary"]["added"], 2, "{first}");
    let second = brain.json(&["import", &fixture("cairn.jsonl")], 0);
    assert_eq!(second["summary"]["added"], 0, "{second}");
    records(&brain);
}

#[test]
fn unreadable_sources_are_refused_or_reported() {
    let brain = Brain::new();
    let dir = brain.dir.path().join("notes");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("latin1.md"), b"# Caf\xe9\n\nna\xefve\n").unwrap();
    std::fs::write(dir.join("ok.md"), "# Fine\n\nThis imports.\n").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd.md")).unwrap();
    let report = brain.json(&["import", "markdown", dir.to_str().unwrap()], 0);
    assert_eq!(report["summary"]["added"], 1, "{report}");
    let notes = unmapped(&report).join("\n");
    assert!(notes.contains("latin1.md: not valid UTF-8"), "{notes}");
    #[cfg(unix)]
    assert!(
        notes.contains("passwd.md: a symlink; not followed"),
        "{notes}"
    );

    let huge = brain.dir.path().join("huge.jsonl");
    std::fs::write(&huge, vec![b' '; 17 * 1024 * 1024]).unwrap();
    let out = brain
        .cmd()
        .args(["import", "mcp-memory", huge.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("over the limit"));
    let bad = brain.dir.path().join("bad.json");
    std::fs::write(&bad, "{\"unexpected\": true}").unwrap();
    let out = brain
        .cmd()
        .args(["import", "mem0", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`results` or `memories`"));
}
