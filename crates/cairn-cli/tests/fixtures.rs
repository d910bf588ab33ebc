//! Old data must still open: each schema version's brain file under tests/fixtures/ is copied
//! and used by the current binary.

mod common;

use common::Brain;

#[test]
fn a_schema_v1_brain_opens_and_answers() {
    let brain = Brain::new();
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/brain-v1.db");
    std::fs::copy(&fixture, &brain.db).expect("fixture present");
    let answer = brain.json(
        &[
            "--project",
            "fixture-project",
            "recall",
            "lighthouse keeper",
            "--no-touch",
        ],
        0,
    );
    assert_eq!(answer["results"][0]["id"], 2);
    let current = brain.json(
        &[
            "--project",
            "fixture-project",
            "recall",
            "SQLite brain",
            "--no-touch",
        ],
        0,
    );
    assert_eq!(current["results"][0]["id"], 3);
    assert_eq!(brain.json(&["doctor"], 0)["ok"], true);
}

#[test]
fn the_project_key_comes_from_the_git_origin() {
    let brain = Brain::new();
    let repo = brain.dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    for args in [
        vec!["init", "-q"],
        vec!["remote", "add", "origin", "git@github.com:Acme/Shop.git"],
    ] {
        assert!(
            std::process::Command::new("git")
                .current_dir(&repo)
                .args(&args)
                .status()
                .unwrap()
                .success()
        );
    }
    let out = brain
        .cmd()
        .current_dir(&repo)
        .env_remove("CAIRN_PROJECT")
        .args([
            "--json",
            "remember",
            "--type",
            "fact",
            "--body",
            "origin derived",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown = brain.json(&["show", "1"], 0);
    assert_eq!(shown["project"], "github.com/acme/shop");
}
