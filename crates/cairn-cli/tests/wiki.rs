//! End-to-end: `cairn export wiki DIR` / `cairn import wiki DIR` on the real binary.

mod common;

use common::Brain;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Every file under `dir` (hidden ones too) with its bytes and mtime.
fn snapshot(dir: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap().display().to_string();
                let metadata = std::fs::symlink_metadata(&path).unwrap();
                files.insert(
                    relative,
                    (std::fs::read(&path).unwrap(), metadata.modified().unwrap()),
                );
            }
        }
    }
    files
}

/// Sets the modification time of every file under `dir` to one fixed moment in 2001.
fn set_times_in_the_past(dir: &Path) {
    let past = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    for (relative, _) in snapshot(dir) {
        std::fs::File::options()
            .write(true)
            .open(dir.join(relative))
            .unwrap()
            .set_modified(past)
            .unwrap();
    }
}

fn export(brain: &Brain, dir: &Path) -> Value {
    brain.json(&["export", "wiki", dir.to_str().unwrap()], 0)
}

fn import(brain: &Brain, dir: &Path) -> Value {
    import_exit(brain, dir, 0)
}

/// `import wiki` expecting exit `code`: 1 when a page was an error or a conflict.
fn import_exit(brain: &Brain, dir: &Path, code: i32) -> Value {
    brain.json(&["import", "wiki", dir.to_str().unwrap()], code)
}

fn seeded() -> Brain {
    let brain = Brain::new();
    let old = brain.remember(
        "decision",
        Some("Queue backend"),
        "Use Redis for the queue.",
    );
    brain.json(
        &[
            "remember",
            "--type",
            "decision",
            "--title",
            "Queue backend",
            "--body",
            "Use Postgres for the queue: one less service to run.",
            "--supersedes",
            &old["id"].to_string(),
        ],
        0,
    );
    let port = brain.remember("fact", Some("API port"), "The API listens on 8080.");
    brain.json(
        &[
            "update",
            &port["id"].to_string(),
            "--body",
            "The API listens on 8081.",
        ],
        0,
    );
    brain.json(
        &[
            "remember",
            "--type",
            "preference",
            "--personal",
            "--title",
            "Answer style",
            "--body",
            "Short answers, no preamble.\n\n- bullet one\n- bullet two",
            "--tags",
            "style,writing",
        ],
        0,
    );
    brain.remember(
        "note",
        None,
        "An untitled note with \"quotes\" and a: colon.",
    );
    brain
}

fn page_of(dir: &Path, id: i64) -> PathBuf {
    let manifest = std::fs::read_to_string(dir.join(".cairn-wiki.tsv")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.split('\t').nth(1) == Some(&id.to_string()))
        .unwrap_or_else(|| panic!("no page for #{id} in {manifest}"));
    dir.join(line.split('\t').next().unwrap())
}

#[test]
fn export_writes_the_layout_and_an_unchanged_brain_rewrites_nothing() {
    let brain = seeded();
    let dir = brain.dir.path().join("wiki");
    let report = export(&brain, &dir);
    assert_eq!(report["records"], 5);
    assert!(report["conflicts"].as_array().unwrap().is_empty());
    for path in [
        "index.md",
        "SCHEMA.md",
        "log.md",
        "decision/_index.md",
        "decision/queue-backend.md",
        "archive/decision/queue-backend.md",
        "archive/_index.md",
        "fact/api-port.md",
        "preference/answer-style.md",
        "note/note-5.md",
    ] {
        assert!(dir.join(path).is_file(), "{path} is written");
    }
    let current = std::fs::read_to_string(dir.join("decision/queue-backend.md")).unwrap();
    assert!(
        current.starts_with("---\nid: 2\ntitle: \"Queue backend\"\n"),
        "{current}"
    );
    assert!(current.contains("\n# Queue backend\n\nUse Postgres for the queue"));
    assert!(current.contains("- supersedes [[archive/decision/queue-backend|Queue backend]] (#1)"));
    let old = std::fs::read_to_string(dir.join("archive/decision/queue-backend.md")).unwrap();
    assert!(old.contains("status: \"superseded\""));
    assert!(old.contains("- superseded by [[decision/queue-backend|Queue backend]] (#2)"));
    let port = std::fs::read_to_string(dir.join("fact/api-port.md")).unwrap();
    assert!(port.contains("## History\n\n- v1 · "), "{port}");
    assert!(port.contains("  > The API listens on 8080."), "{port}");
    let log = std::fs::read_to_string(dir.join("log.md")).unwrap();
    assert!(log.contains("· remember · #1 · receipt `"), "{log}");

    // Every file's time set well in the past: a rewrite, however quick, would show.
    set_times_in_the_past(&dir);
    let before = snapshot(&dir);
    let again = export(&brain, &dir);
    assert_eq!(again["written"], 0, "{again}");
    assert_eq!(snapshot(&dir), before, "byte-identical, mtimes untouched");
}

#[test]
fn a_change_rewrites_only_the_affected_pages() {
    let brain = seeded();
    let dir = brain.dir.path().join("wiki");
    export(&brain, &dir);
    brain.json(&["update", "3", "--importance", "5"], 0);
    let report = export(&brain, &dir);
    let written: Vec<&str> = report["written_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let month = written
        .iter()
        .find(|p| p.starts_with("log/"))
        .expect("the month of the new event");
    assert_eq!(written, ["fact/api-port.md", "log.md", month], "{report}");
    // a new title moves the page and updates the lists that link to it
    brain.json(&["update", "3", "--title", "API port number"], 0);
    let report = export(&brain, &dir);
    assert_eq!(report["removed"], 1, "{report}");
    assert!(dir.join("fact/api-port-number.md").is_file());
    assert!(!dir.join("fact/api-port.md").exists());
}

#[test]
fn export_import_export_is_byte_identical() {
    let brain = seeded();
    let dir = brain.dir.path().join("wiki");
    export(&brain, &dir);
    let before = snapshot(&dir);
    let report = import(&brain, &dir);
    assert_eq!(report["summary"]["unchanged"], 5, "{report}");
    assert_eq!(report["summary"]["updated"], 0);
    assert_eq!(report["summary"]["added"], 0);
    let again = export(&brain, &dir);
    assert_eq!(again["written"], 0, "{again}");
    assert_eq!(snapshot(&dir), before);
}

#[test]
fn a_wiki_restores_into_a_fresh_brain_page_for_page() {
    let brain = seeded();
    let dir = brain.dir.path().join("wiki");
    export(&brain, &dir);
    let fresh = Brain::new();
    let report = import(&fresh, &dir);
    assert_eq!(report["summary"]["added"], 5, "{report}");
    assert_eq!(report["summary"]["errors"], 0, "{report}");
    let restored = fresh.dir.path().join("wiki");
    export(&fresh, &restored);
    let (a, b) = (snapshot(&dir), snapshot(&restored));
    for (path, (bytes, _)) in &a {
        if path.ends_with(".md") && !path.starts_with("log") {
            assert_eq!(
                String::from_utf8_lossy(&b[path].0),
                String::from_utf8_lossy(bytes),
                "{path} restores byte for byte"
            );
        }
    }
    let shown = fresh.json(&["show", "1"], 0);
    assert_eq!(shown["status"], "superseded");
    assert_eq!(shown["superseded_by"], 2);
    assert_eq!(
        shown["trust"], "stated",
        "untouched pages keep their metadata"
    );
}

#[test]
fn edits_new_pages_and_deletions_come_back_as_updates_records_and_reports() {
    let brain = seeded();
    let dir = brain.dir.path().join("wiki");
    export(&brain, &dir);
    // edit: body and tags of the current queue decision
    let page = dir.join("decision/queue-backend.md");
    let text = std::fs::read_to_string(&page).unwrap();
    let edited = text
        .replace(
            "Use Postgres for the queue: one less service to run.",
            "Use Postgres (SKIP LOCKED) for the queue: one less service to run.",
        )
        .replace("tags: []", "tags: [queue, postgres]");
    std::fs::write(&page, edited).unwrap();
    // new page, written by hand
    std::fs::write(
        dir.join("gotcha-by-hand.md"),
        "---\ntype: gotcha\ntags: [ci]\n---\n\n# Lockfile drift\n\nCI fails when pnpm-lock.yaml is stale; run pnpm install.\n",
    )
    .unwrap();
    // deletion
    std::fs::remove_file(dir.join("note/note-5.md")).unwrap();

    let report = import(&brain, &dir);
    let summary = &report["summary"];
    assert_eq!(summary["updated"], 1, "{report}");
    assert_eq!(summary["added"], 1, "{report}");
    assert_eq!(summary["deleted"], 1, "{report}");
    let deleted = report["pages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["status"] == "deleted")
        .unwrap();
    assert_eq!(deleted["id"], 5);
    assert!(
        deleted["message"]
            .as_str()
            .unwrap()
            .contains("cairn forget 5")
    );

    let shown = brain.json(&["show", "2", "--history"], 0);
    assert!(shown["body"].as_str().unwrap().contains("SKIP LOCKED"));
    assert_eq!(shown["tags"], serde_json::json!(["postgres", "queue"]));
    let history = shown["history"].as_array().unwrap();
    assert_eq!(history.last().unwrap()["op"], "wiki-edit");
    assert!(
        history.last().unwrap()["snapshot"]["body"]
            .as_str()
            .unwrap()
            .starts_with("Use Postgres for the queue")
    );
    assert_eq!(
        brain.json(&["show", "5"], 0)["status"],
        "active",
        "deleting a page deletes nothing"
    );
    let added = brain.recall_ids(&["lockfile drift"]);
    let new = brain.json(&["show", &added[0].to_string()], 0);
    assert_eq!(new["type"], "gotcha");
    assert_eq!(new["title"], "Lockfile drift");
    assert_eq!(new["trust"], "imported");

    // importing again adds nothing
    let twice = import(&brain, &dir);
    assert_eq!(twice["summary"]["added"], 0, "{twice}");
    assert_eq!(twice["summary"]["updated"], 0, "{twice}");
    // the next export writes the edited page canonically (its edit was imported) and the page
    // for the new record
    let report = export(&brain, &dir);
    assert!(
        report["conflicts"].as_array().unwrap().is_empty(),
        "{report}"
    );
    assert!(dir.join("gotcha/lockfile-drift.md").is_file());
    assert!(
        dir.join("note/note-5.md").is_file(),
        "the kept record's page comes back"
    );
}

#[test]
fn an_edit_is_never_clobbered_by_an_export() {
    let brain = seeded();
    let dir = brain.dir.path().join("wiki");
    export(&brain, &dir);
    let page = page_of(&dir, 3);
    let text = std::fs::read_to_string(&page).unwrap();
    std::fs::write(&page, text.replace("8081", "9090")).unwrap();
    brain.json(&["update", "3", "--importance", "4"], 0);
    let out = brain
        .cmd()
        .args(["--json", "export", "wiki", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["conflicts"][0]["path"], "fact/api-port.md",
        "{report}"
    );
    assert!(std::fs::read_to_string(&page).unwrap().contains("9090"));
    // and the import refuses to overwrite the brain's newer change without --force
    let report = import_exit(&brain, &dir, 1);
    assert_eq!(report["summary"]["conflicts"], 1, "{report}");
    let forced = brain.json(&["import", "wiki", "--force", dir.to_str().unwrap()], 0);
    assert_eq!(forced["summary"]["updated"], 1, "{forced}");
    assert!(
        brain.json(&["show", "3"], 0)["body"]
            .as_str()
            .unwrap()
            .contains("9090")
    );
    assert_eq!(
        export(&brain, &dir)["conflicts"].as_array().unwrap().len(),
        0
    );
}

#[test]
fn hostile_titles_stay_inside_the_directory_with_unique_names() {
    let brain = Brain::new();
    let long = "ü".repeat(150); // 300 bytes
    // NFC/NFD and case twins share a normalized title, so they are separate records only in
    // separate scopes or zones; their pages collide and take the suffixes.
    let titles: Vec<(&str, Vec<&str>)> = vec![
        ("../escape", vec![]),
        ("../../../../tmp/owned", vec![]),
        ("/etc/passwd", vec![]),
        ("C:\\Windows\\win.ini", vec![]),
        ("\\\\?\\GLOBALROOT\\Device", vec![]),
        ("CON", vec![]),
        ("nul.txt", vec![]),
        (long.as_str(), vec![]),
        ("Café", vec![]),
        ("Cafe\u{301}", vec!["--scope", "ops"]),
        ("café", vec!["--trust-zone", "trusted_collaborator"]),
        (
            "CAFÉ",
            vec!["--scope", "ops", "--trust-zone", "trusted_collaborator"],
        ),
        (".hidden", vec![]),
        ("a/b/c", vec![]),
        ("a\u{1}b", vec![]),
    ];
    for (index, (title, extra)) in titles.iter().enumerate() {
        let body = format!("hostile title number {index}");
        let mut args = vec![
            "remember", "--type", "note", "--title", title, "--body", &body,
        ];
        args.extend(extra.iter().copied());
        brain.json(&args, 0);
    }
    let root = brain.dir.path().join("wiki");
    let report = export(&brain, &root);
    assert!(report["refused"].as_array().unwrap().is_empty(), "{report}");
    let real_root = std::fs::canonicalize(&root).unwrap();
    let files = snapshot(&root);
    let pages: Vec<&String> = files
        .keys()
        .filter(|p| p.starts_with("note/") && !p.ends_with("_index.md"))
        .collect();
    assert_eq!(pages.len(), titles.len(), "{pages:?}");
    for page in &pages {
        let name = page.rsplit('/').next().unwrap();
        assert!(name.len() <= 255);
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'),
            "{name}"
        );
        let real = std::fs::canonicalize(root.join(page)).unwrap();
        assert!(real.starts_with(&real_root), "{page}");
    }
    assert!(files.contains_key("note/con-record.md"));
    assert!(files.contains_key("note/cafe.md"));
    assert!(files.contains_key("note/cafe--ops--private-self.md"));
    assert!(files.contains_key("note/cafe--global--trusted-collaborator.md"));
    assert!(files.contains_key("note/cafe--ops--trusted-collaborator.md"));
    assert!(
        files.contains_key("note/ab.md"),
        "control characters are stripped before storage"
    );
    let parent: Vec<_> = std::fs::read_dir(brain.dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        !parent.iter().any(|n| n == "escape" || n == "owned"),
        "{parent:?}"
    );
}

#[cfg(unix)]
#[test]
fn a_planted_symlink_inside_the_directory_is_refused_not_followed() {
    let brain = seeded();
    let dir = brain.dir.path().join("wiki");
    let outside = brain.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("decision")).unwrap();
    std::fs::create_dir_all(dir.join("fact")).unwrap();
    std::os::unix::fs::symlink(outside.join("stolen.md"), dir.join("fact/api-port.md")).unwrap();
    let out = brain
        .cmd()
        .args(["--json", "export", "wiki", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a refused write is an error");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let refused: Vec<&str> = report["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert!(refused.contains(&"decision/queue-backend.md"), "{report}");
    assert!(refused.contains(&"fact/api-port.md"), "{report}");
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing written outside"
    );
    assert!(
        dir.join("preference/answer-style.md").is_file(),
        "the other pages are written"
    );
    // the import does not follow it either
    let report = import(&brain, &dir);
    assert!(
        report["summary"]["skipped"].as_i64().unwrap() >= 2,
        "{report}"
    );
    // a wiki root that is itself a symlink is refused
    let link = brain.dir.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let out = brain
        .cmd()
        .args(["export", "wiki", link.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symlink"));
}

#[test]
fn bad_pages_are_reported_and_the_rest_imported() {
    let brain = seeded();
    let dir = brain.dir.path().join("wiki");
    export(&brain, &dir);
    std::fs::write(
        dir.join("malformed.md"),
        "---\ntitle: \"never closed\ntype: note\n---\n\nBody.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("injected.md"),
        "---\ntitle: a\ntitle: b\n---\n\nBody.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("unclosed.md"),
        "---\ntitle: x\n\nno closing fence\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("latin1.md"),
        b"---\ntitle: caf\xe9\n---\n\nbody \xff\n",
    )
    .unwrap();
    std::fs::write(dir.join("huge.md"), "x".repeat(5 * 1024 * 1024)).unwrap();
    std::fs::write(
        dir.join("nul-title.md"),
        "---\ntitle: \"a\\u0000b\"\n---\n\nBody with a NUL title.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("big-body.md"),
        format!("# Big\n\n{}\n", "word ".repeat(20_000)),
    )
    .unwrap();
    std::fs::write(dir.join("fine.md"), "# A fine page\n\nThis one imports.\n").unwrap();
    // pages that fail make the import exit 1; the fine one is stored all the same
    let report = import_exit(&brain, &dir, 1);
    let status = |name: &str| {
        report["pages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["path"] == name)
            .unwrap_or_else(|| panic!("{name} in {report}"))
            .clone()
    };
    for (name, needle) in [
        ("malformed.md", "not closed"),
        ("injected.md", "twice"),
        ("unclosed.md", "never closed"),
        ("latin1.md", "UTF-8"),
        ("huge.md", "over the limit"),
        ("nul-title.md", "NUL"),
        ("big-body.md", "over the limit"),
    ] {
        let page = status(name);
        assert_eq!(page["status"], "error", "{name}: {page}");
        assert!(
            page["message"].as_str().unwrap().contains(needle),
            "{name}: {page}"
        );
    }
    assert_eq!(status("fine.md")["status"], "added");
    assert_eq!(report["summary"]["errors"], 7);
}
