//! `cairn codemap` and `cairn code-neighbors` on the real binary over real git repositories:
//! the budget, the focus (given, working tree, memories), the refusal of a focus outside the
//! repository, incremental refresh kept in the brain, staleness, and the bad inputs of issue 17
//! (unparseable, binary and non-UTF-8 files, no supported language, an empty repository, a
//! detached HEAD, a shallow clone).

mod common;

use common::Brain;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// A small Rust project: main uses config and store, store uses config; util stands apart.
fn project(brain: &Brain) -> PathBuf {
    let repo = brain.dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    write(
        &repo,
        "src/main.rs",
        "mod config;\nmod store;\n\nfn main() {\n    let settings = config::load_settings();\n    \
         let handle = store::open_store(&settings);\n    handle.flush_all();\n}\n",
    );
    write(
        &repo,
        "src/config.rs",
        "pub struct Settings {\n    pub path: String,\n}\n\npub fn load_settings() -> Settings {\n    \
         Settings { path: String::new() }\n}\n",
    );
    write(
        &repo,
        "src/store.rs",
        "use crate::config::Settings;\n\npub struct StoreHandle;\n\npub fn open_store(settings: &Settings) -> StoreHandle {\n    \
         let _ = &settings.path;\n    StoreHandle\n}\n\nimpl StoreHandle {\n    pub fn flush_all(&self) {}\n}\n",
    );
    write(
        &repo,
        "tools/util.py",
        "def unrelated_helper():\n    return 1\n",
    );
    write(&repo, "README.md", "# demo\n");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    repo
}

fn codemap(brain: &Brain, cwd: &Path, args: &[&str], code: i32) -> (Value, String) {
    let output = brain
        .cmd()
        .current_dir(cwd)
        .args(["--json", "codemap"])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout {stdout}\nstderr {stderr}"
    );
    (serde_json::from_str(&stdout).unwrap_or(Value::Null), stderr)
}

fn paths(map: &Value) -> Vec<String> {
    map["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_map_ranks_toward_the_focus_within_the_budget() {
    let brain = Brain::new();
    let repo = project(&brain);
    let (map, _) = codemap(
        &brain,
        &repo,
        &["--focus", "src/store.rs", "--budget", "1024"],
        0,
    );
    assert_eq!(
        map["rev"].as_str().unwrap(),
        git(&repo, &["rev-parse", "HEAD"])
    );
    assert_eq!(map["stale"], false);
    assert_eq!(map["budget"], 1024);
    let got = paths(&map);
    assert_eq!(got[0], "src/store.rs");
    assert_eq!(got.last().unwrap(), "tools/util.py", "{got:?}");
    assert_eq!(got.len(), 4);
    let store = &map["files"][0];
    let names: Vec<&str> = store["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"open_store") && names.contains(&"flush_all"),
        "{names:?}"
    );
    let open = store["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "open_store")
        .unwrap();
    assert_eq!(open["kind"], "function");
    assert_eq!(open["line"], 5);
    assert_eq!(
        open["signature"],
        "pub fn open_store(settings: &Settings) -> StoreHandle {"
    );
    // The text form is the JSON's `text`, and fits.
    let text = brain
        .cmd()
        .current_dir(&repo)
        .args(["codemap", "--focus", "src/store.rs"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(text.stdout).unwrap(),
        map["text"].as_str().unwrap()
    );
    let used = map["used"].as_u64().unwrap();
    assert!(used <= 1024 && used * 4 >= map["text"].as_str().unwrap().chars().count() as u64);
}

#[test]
fn the_budget_is_never_exceeded_and_the_cut_is_named() {
    let brain = Brain::new();
    let repo = project(&brain);
    for budget in [0usize, 1, 5, 10, 12, 20, 30, 50, 80] {
        let (map, _) = codemap(&brain, &repo, &["--budget", &budget.to_string()], 0);
        let text = map["text"].as_str().unwrap();
        assert!(
            text.chars().count() <= budget * 4,
            "budget {budget}: {text:?}"
        );
        assert!(map["used"].as_u64().unwrap() <= budget as u64);
        let cut_files = map["cut"]["files"].as_u64().unwrap();
        assert_eq!(paths(&map).len() as u64 + cut_files, 4);
        if cut_files > 0 && budget >= 10 {
            assert!(text.contains("[cut: "), "budget {budget}: {text:?}");
        }
    }
}

#[test]
fn a_focus_outside_the_repository_is_refused() {
    let brain = Brain::new();
    let repo = project(&brain);
    let (_, stderr) = codemap(&brain, &repo, &["--focus", "../brain.db"], 1);
    assert!(stderr.contains("outside the repository"), "{stderr}");
    let (_, stderr) = codemap(&brain, &repo, &["--focus", "/etc/hostname"], 1);
    assert!(stderr.contains("outside the repository"), "{stderr}");
    // A symlink inside the tree that points out of it is outside too.
    std::os::unix::fs::symlink(brain.dir.path(), repo.join("escape")).unwrap();
    let (_, stderr) = codemap(&brain, &repo, &["--focus", "escape/brain.db"], 1);
    assert!(stderr.contains("outside the repository"), "{stderr}");
}

#[test]
fn the_working_tree_and_memories_join_the_focus() {
    let brain = Brain::new();
    let repo = project(&brain);
    write(
        &repo,
        "src/config.rs",
        "pub struct Settings { pub path: String }\npub fn load_settings() -> Settings { Settings { path: String::new() } }\n",
    );
    let (map, _) = codemap(&brain, &repo, &[], 0);
    assert_eq!(map["focus"], serde_json::json!(["src/config.rs"]));
    assert_eq!(paths(&map)[0], "src/config.rs");
    git(&repo, &["checkout", "-q", "--", "."]);
    brain.json(
        &[
            "remember",
            "--type",
            "gotcha",
            "--body",
            "tools/util.py must stay importable without the package",
        ],
        0,
    );
    let (map, _) = codemap(&brain, &repo, &[], 0);
    assert_eq!(map["focus"], serde_json::json!(["tools/util.py"]));
    assert_eq!(paths(&map)[0], "tools/util.py");
}

#[test]
fn refreshes_are_incremental_and_a_passed_bound_is_stale() {
    let brain = Brain::new();
    let repo = project(&brain);
    let (first, _) = codemap(&brain, &repo, &[], 0);
    assert_eq!(first["refresh"]["parsed"], 4);
    let (again, _) = codemap(&brain, &repo, &[], 0);
    assert_eq!(again["refresh"]["parsed"], 0);
    assert_eq!(
        again["text"], first["text"],
        "the same input gives the same map"
    );
    write(&repo, "src/config.rs", "pub fn renamed_loader() {}\n");
    // A zero time bound: the changed file is not parsed; its stored parse answers, stale.
    let (stale, stderr) = codemap(&brain, &repo, &["--refresh-ms", "0"], 0);
    assert_eq!(stale["stale"], true, "{stderr}");
    assert_eq!(stale["refresh"]["deferred"], 1);
    assert!(stale["text"].as_str().unwrap().contains("load_settings"));
    let (fresh, _) = codemap(&brain, &repo, &[], 0);
    assert_eq!(fresh["stale"], false);
    assert_eq!(fresh["refresh"]["parsed"], 1);
    assert!(fresh["text"].as_str().unwrap().contains("renamed_loader"));
    // A new commit moves `rev`.
    git(&repo, &["commit", "-q", "-am", "second"]);
    let (moved, _) = codemap(&brain, &repo, &[], 0);
    assert_eq!(
        moved["rev"].as_str().unwrap(),
        git(&repo, &["rev-parse", "HEAD"])
    );
    assert_eq!(moved["refresh"]["parsed"], 0);
    let stored = brain.sql("SELECT count(*) FROM codemap_files");
    assert_eq!(stored, "4");
}

#[test]
fn a_stored_parse_that_is_missing_or_corrupt_is_parsed_again_never_fatal() {
    let brain = Brain::new();
    let repo = project(&brain);
    let (first, _) = codemap(&brain, &repo, &[], 0);
    assert_eq!(first["refresh"]["parsed"], 4);
    // Each file's parse in its own rows: a one-file change writes one more parse.
    write(
        &repo,
        "src/store.rs",
        "pub fn open_store() {}\npub fn reopened_store() {}\n",
    );
    let (changed, _) = codemap(&brain, &repo, &[], 0);
    assert_eq!(changed["refresh"]["parsed"], 1);
    assert_eq!(brain.sql("SELECT count(*) FROM codemap_parses"), "5");
    // config.rs's graph part corrupted, main.rs's parse gone (derived data lost or damaged):
    // the map leaves them out and says it is stale; the next call parses them again.
    brain.sql(
        "UPDATE codemap_parses SET graph = x'00' WHERE content_hash = \
         (SELECT content_hash FROM codemap_files WHERE path = 'src/config.rs')",
    );
    brain.sql(
        "DELETE FROM codemap_parses WHERE content_hash = \
         (SELECT content_hash FROM codemap_files WHERE path = 'src/main.rs')",
    );
    // A focus the cached map was not rendered for (the working tree's change was the last
    // one's), so the parses are read.
    let (damaged, stderr) = codemap(&brain, &repo, &["--focus", "tools/util.py"], 0);
    assert_eq!(damaged["stale"], true, "{stderr}");
    let shown = paths(&damaged);
    assert!(
        !shown.contains(&"src/config.rs".to_string())
            && !shown.contains(&"src/main.rs".to_string()),
        "{shown:?}"
    );
    let (healed, _) = codemap(&brain, &repo, &["--focus", "tools/util.py"], 0);
    assert_eq!(healed["stale"], false);
    assert_eq!(healed["refresh"]["parsed"], 2);
    let shown = paths(&healed);
    assert!(
        shown.contains(&"src/config.rs".to_string()) && shown.contains(&"src/main.rs".to_string()),
        "{shown:?}"
    );
    assert!(healed["text"].as_str().unwrap().contains("load_settings"));
}

#[test]
fn bad_files_are_skipped_or_mapped_partially_never_fatal() {
    let brain = Brain::new();
    let repo = project(&brain);
    write(
        &repo,
        "src/broken.rs",
        "pub fn survives() {}\nfn broken( {\n",
    );
    write(&repo, "src/blob.c", b"int x;\0\0\x01");
    write(&repo, "src/latin.py", b"x = '\xe9'\n");
    let (map, _) = codemap(&brain, &repo, &["--focus", "src/broken.rs"], 0);
    assert_eq!(paths(&map)[0], "src/broken.rs");
    assert!(map["text"].as_str().unwrap().contains("pub fn survives()"));
    assert!(
        !paths(&map)
            .iter()
            .any(|p| p == "src/blob.c" || p == "src/latin.py")
    );
    assert_eq!(map["refresh"]["skipped"], 2);
}

/// The mapped files' paths, one per line in path order.
fn mapped(brain: &Brain) -> String {
    brain.sql("SELECT path FROM codemap_files ORDER BY path")
}

/// `repo`'s working tree copied to `to` without its `.git` (symlinks kept as links).
fn copy_without_git(repo: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(repo)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::remove_dir_all(to.join(".git")).unwrap();
}

#[test]
fn a_work_tree_is_listed_from_git_as_the_walk_finds_it() {
    // Inside git the files come from git's lists (the index's paths and the untracked entries
    // of `git status`), not from reading every directory; the same tree copied outside git is
    // walked. Both keep the same files — but a tracked file a `.gitignore` pattern matches,
    // which git maps (it tracks it) and the walk cannot know.
    let brain = Brain::new();
    let repo = project(&brain);
    write(&repo, ".gitignore", "*.gen.rs\nignored_dir/\n");
    write(&repo, "vendor/dep.rs", "pub fn vendored_fn() {}\n");
    write(&repo, ".hidden/h.rs", "pub fn hidden_fn() {}\n");
    write(&repo, "src/gone.rs", "pub fn gone_fn() {}\n");
    write(&repo, "src/forced.gen.rs", "pub fn forced_fn() {}\n");
    std::os::unix::fs::symlink("config.rs", repo.join("src/link.rs")).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["add", "-f", "src/forced.gen.rs"]);
    git(&repo, &["commit", "-q", "-m", "more"]);
    std::fs::remove_file(repo.join("src/gone.rs")).unwrap();
    write(&repo, "src/new_file.rs", "pub fn new_fn() {}\n");
    write(&repo, "src/extra/e.rs", "pub fn extra_fn() {}\n");
    write(&repo, "newdir/a.rs", "pub fn a_fn() {}\n");
    write(&repo, "newdir/b.gen.rs", "pub fn b_fn() {}\n");
    write(&repo, "newdir/.h.rs", "pub fn h_fn() {}\n");
    write(&repo, "newdir/build/out.rs", "pub fn out_fn() {}\n");
    write(&repo, "ignored_dir/x.rs", "pub fn x_fn() {}\n");
    let (map, _) = codemap(&brain, &repo, &[], 0);
    assert_eq!(map["stale"], false);
    let expected = [
        "newdir/a.rs",
        "src/config.rs",
        "src/extra/e.rs",
        "src/forced.gen.rs",
        "src/main.rs",
        "src/new_file.rs",
        "src/store.rs",
        "tools/util.py",
    ];
    assert_eq!(mapped(&brain), expected.join("\n"));
    let copy = brain.dir.path().join("copy");
    copy_without_git(&repo, &copy);
    let walked = Brain::new();
    codemap(&walked, &copy, &[], 0);
    let without_forced: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|p| *p != "src/forced.gen.rs")
        .collect();
    assert_eq!(mapped(&walked), without_forced.join("\n"));
    // A change to an untracked file inside an untracked directory is seen.
    write(
        &repo,
        "newdir/a.rs",
        "pub fn a_fn() {}\npub fn a_more() {}\n",
    );
    let (map, _) = codemap(&brain, &repo, &["--focus", "newdir/a.rs"], 0);
    assert_eq!(map["refresh"]["parsed"], 1);
    assert!(map["text"].as_str().unwrap().contains("a_more"));
}

#[test]
fn no_supported_language_and_an_empty_repository_give_an_empty_map() {
    let brain = Brain::new();
    let repo = brain.dir.path().join("empty");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let (map, _) = codemap(&brain, &repo, &[], 0);
    assert_eq!(map["rev"], Value::Null);
    assert_eq!(map["files"], serde_json::json!([]));
    assert_eq!(map["text"], "");
    write(&repo, "notes.md", "# only prose\n");
    write(&repo, "data.csv", "a,b\n");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "docs"]);
    let (map, _) = codemap(&brain, &repo, &["--focus", "notes.md"], 0);
    assert_eq!(map["files"], serde_json::json!([]));
    assert_eq!(map["focus"], serde_json::json!(["notes.md"]));
}

#[test]
fn detached_heads_and_shallow_clones_are_mapped() {
    let brain = Brain::new();
    let repo = project(&brain);
    write(&repo, "src/extra.rs", "pub fn extra_step() {}\n");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "second"]);
    let first = git(&repo, &["rev-parse", "HEAD~1"]);
    git(&repo, &["checkout", "-q", "--detach", &first]);
    let (map, _) = codemap(&brain, &repo, &[], 0);
    assert_eq!(map["rev"].as_str().unwrap(), first);
    assert!(!paths(&map).contains(&"src/extra.rs".to_string()));

    let shallow = brain.dir.path().join("shallow");
    let url = format!("file://{}", repo.display());
    git(
        brain.dir.path(),
        &[
            "clone",
            "-q",
            "--depth",
            "1",
            "--branch",
            "main",
            &url,
            shallow.to_str().unwrap(),
        ],
    );
    assert_eq!(
        git(&shallow, &["rev-parse", "--is-shallow-repository"]),
        "true"
    );
    let (map, _) = codemap(&brain, &shallow, &["--focus", "src/extra.rs"], 0);
    assert_eq!(
        map["rev"].as_str().unwrap(),
        git(&repo, &["rev-parse", "main"])
    );
    assert_eq!(paths(&map)[0], "src/extra.rs");
}

#[test]
fn code_neighbors_names_what_a_file_or_symbol_uses_and_what_uses_it() {
    let brain = Brain::new();
    let repo = project(&brain);
    let output = brain
        .cmd()
        .current_dir(&repo)
        .args(["--json", "code-neighbors", "src/store.rs"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["kind"], "file");
    let file = &answer["files"][0];
    assert_eq!(file["uses"][0]["path"], "src/config.rs");
    assert_eq!(file["used_by"][0]["path"], "src/main.rs");
    let output = brain
        .cmd()
        .current_dir(&repo)
        .args(["--json", "code-neighbors", "load_settings"])
        .output()
        .unwrap();
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["kind"], "symbol");
    assert_eq!(answer["files"][0]["path"], "src/config.rs");
    assert_eq!(answer["files"][0]["used_by"][0]["path"], "src/main.rs");
    assert_eq!(
        answer["files"][0]["used_by"][0]["names"],
        serde_json::json!(["load_settings"])
    );
    let output = brain
        .cmd()
        .current_dir(&repo)
        .args(["code-neighbors", "no_such_name"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("neither a mapped file"));
}

#[test]
fn the_brief_has_a_code_map_section_inside_git_only() {
    let brain = Brain::new();
    let repo = project(&brain);
    write(
        &repo,
        "src/store.rs",
        "use crate::config::Settings;\npub fn open_store(s: &Settings) {}\n",
    );
    let output = brain
        .cmd()
        .current_dir(&repo)
        .args(["brief"])
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    let section = text
        .split("## Code map")
        .nth(1)
        .expect("a code map section");
    // The changed file leads, fenced as data, with its symbols' lines.
    assert!(section.starts_with(" (the files that matter"), "{text}");
    let first = section.lines().find(|l| l.starts_with("- ")).unwrap();
    assert_eq!(first, "- src/store.rs", "{text}");
    assert!(
        section.contains("  2: pub fn open_store(s: &Settings) {}"),
        "{text}"
    );
    let only = brain
        .cmd()
        .current_dir(&repo)
        .args(["--json", "brief", "--section", "code-map"])
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&only.stdout).unwrap();
    assert!(json["text"].as_str().unwrap().contains("src/config.rs"));
    // Outside git (a home directory, say) the brief never walks the directory.
    let plain = brain.dir.path().join("plain");
    write(&plain, "x.rs", "fn x() {}\n");
    let output = brain
        .cmd()
        .current_dir(&plain)
        .args(["brief"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8(output.stdout)
            .unwrap()
            .contains("## Code map")
    );
}

/// The ids of the records and the names of the entities a `neighbors --json` answer reached.
fn reached(answer: &Value) -> Vec<String> {
    answer["neighbors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| match n["node"]["kind"].as_str() {
            Some("record") => format!("#{}", n["node"]["id"]),
            _ => n["node"]["name"].as_str().unwrap_or_default().to_string(),
        })
        .collect()
}

#[test]
fn memories_about_code_are_linked_to_it_and_a_change_surfaces_the_gotchas_of_its_users() {
    let brain = Brain::new();
    let repo = project(&brain);
    // A gotcha about main.rs (which uses config.rs and store.rs), a note about an identifier
    // store.rs defines, and one about nothing the map knows.
    let gotcha = brain.remember(
        "gotcha",
        None,
        "src/main.rs must call flush_all before exit or the last batch is lost",
    )["id"]
        .as_i64()
        .unwrap();
    let note = brain.remember("note", None, "`open_store` takes the settings by reference")["id"]
        .as_i64()
        .unwrap();
    brain.remember("note", None, "the kiln in docs/kiln.md fires at cone 6");
    let query = ["recall", "flush settings batch", "--no-touch"];
    let recall_before = brain.json(&query, 0);
    codemap(&brain, &repo, &[], 0);
    // Written through the graph's edge log, with their origin.
    let asserted = brain.sql(
        "SELECT relation || ' ' || count(*) FROM edge_log WHERE origin = 'codemap' AND op = 'assert' GROUP BY relation ORDER BY relation",
    );
    // main.rs uses config.rs and store.rs; open_store and flush_all are defined in store.rs.
    assert_eq!(asserted, "defined_in 2\nuses 2", "{asserted}");
    // What depends on config.rs: main.rs uses it, and the gotcha about main.rs is behind it.
    let around = brain.json(
        &[
            "neighbors",
            "src/config.rs",
            "--direction",
            "in",
            "--depth",
            "2",
        ],
        0,
    );
    let names = reached(&around);
    assert!(names.contains(&"src/main.rs".to_string()), "{around}");
    assert!(names.contains(&format!("#{gotcha}")), "{around}");
    let main = &around["neighbors"].as_array().unwrap()
        [names.iter().position(|n| n == "src/main.rs").unwrap()];
    assert_eq!(main["relation"], "uses", "{around}");
    // An identifier: open_store is defined in store.rs, and the note about it is reached.
    let around = brain.json(
        &[
            "neighbors",
            "src/store.rs",
            "--direction",
            "in",
            "--depth",
            "2",
        ],
        0,
    );
    let names = reached(&around);
    assert!(names.contains(&"open_store".to_string()), "{around}");
    assert!(names.contains(&format!("#{note}")), "{around}");
    assert!(
        names.contains(&format!("#{gotcha}")),
        "main.rs uses store.rs too: {around}"
    );
    // A change to config.rs: the brief's neighbourhood shows the gotcha about its user.
    write(
        &repo,
        "src/config.rs",
        "pub struct Settings { pub path: String }\npub fn load_settings() -> Settings { Settings { path: String::new() } }\n",
    );
    let near = brain
        .cmd()
        .current_dir(&repo)
        .args(["--json", "brief", "--section", "neighbourhood"])
        .output()
        .unwrap();
    let near: Value = serde_json::from_slice(&near.stdout).unwrap();
    let text = near["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("src/config.rs: #{gotcha} gotcha")),
        "{text}"
    );
    // Recall is exactly as before: the links add no signal to its ranking.
    assert_eq!(brain.json(&query, 0)["results"], recall_before["results"]);
    // Nothing changed: a map writes no edge.
    let log = brain.sql("SELECT count(*) FROM edge_log");
    codemap(&brain, &repo, &[], 0);
    assert_eq!(brain.sql("SELECT count(*) FROM edge_log"), log);
    // main.rs stops using config.rs: that edge is invalidated, the history kept.
    write(
        &repo,
        "src/main.rs",
        "mod store;\n\nfn main() {\n    let handle = store::open_store(&Default::default());\n    handle.flush_all();\n}\n",
    );
    codemap(&brain, &repo, &[], 0);
    let around = brain.json(&["neighbors", "src/config.rs", "--direction", "in"], 0);
    assert!(
        !reached(&around).contains(&"src/main.rs".to_string()),
        "{around}"
    );
    assert_eq!(
        brain.sql("SELECT count(*) FROM edge_log WHERE origin = 'codemap' AND op = 'invalidate'"),
        "1"
    );
}

/// Each mapped file's path, content hash and stored graph part (hex), in path order.
fn stored_parts(brain: &Brain) -> String {
    brain.sql(
        "SELECT f.path, f.content_hash, hex(p.graph), hex(p.detail) FROM codemap_files f \
         JOIN codemap_parses p ON p.content_hash = f.content_hash AND p.lang = f.lang \
         ORDER BY f.path",
    )
}

#[test]
fn a_brain_refreshed_after_each_random_edit_answers_what_a_fresh_brain_answers() {
    // Files added, removed, renamed and rewritten a few at a time; after each step the brain
    // that refreshed from the last step and a brain mapping the tree for the first time must
    // give the same map (text, files, focus), with and without a focus, and hold the same
    // parts. Each write gets its own modification time (a same-size rewrite within one clock
    // tick would otherwise be taken for unchanged, by design).
    let kept = Brain::new();
    let repo = project(&kept);
    let mut seed: u64 = 0x0c0d_e3a9_5eed_0017;
    let mut next = move |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    let mut clock = 1_000u64;
    let mut put = |rel: &str, text: &str| {
        write(&repo, rel, text);
        clock += 1;
        std::fs::File::options()
            .append(true)
            .open(repo.join(rel))
            .unwrap()
            .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(clock))
            .unwrap();
    };
    let source = |next: &mut dyn FnMut(u64) -> u64| -> String {
        let mut text = String::new();
        for _ in 0..1 + next(3) {
            let calls: Vec<String> = (0..next(4))
                .map(|_| format!("shared_name_{}()", next(25)))
                .collect();
            text.push_str(&format!(
                "pub fn shared_name_{}() {{ {}; }}\n",
                next(25),
                calls.join("; ")
            ));
        }
        text
    };
    let mut present: Vec<String> = vec![
        "src/config.rs".into(),
        "src/main.rs".into(),
        "src/store.rs".into(),
    ];
    codemap(&kept, &repo, &[], 0);
    for step in 0..8 {
        for _ in 0..1 + next(3) {
            let k = next(present.len() as u64) as usize;
            match next(4) {
                0 => {
                    let rel = format!("src/m{}/added_{step}_{}.rs", next(3), next(1000));
                    put(&rel, &source(&mut next));
                    present.push(rel);
                }
                1 if present.len() > 2 => {
                    std::fs::remove_file(repo.join(present.remove(k))).unwrap();
                }
                2 => {
                    let from = present.remove(k);
                    let text = std::fs::read_to_string(repo.join(&from)).unwrap();
                    std::fs::remove_file(repo.join(&from)).unwrap();
                    let to = format!("src/m{}/moved_{step}_{}.rs", next(3), next(1000));
                    put(&to, &text);
                    present.push(to);
                }
                _ => put(&present[k].clone(), &source(&mut next)),
            }
        }
        present.sort();
        let focus = present[next(present.len() as u64) as usize].clone();
        let fresh = Brain::new();
        for args in [vec![], vec!["--focus", focus.as_str()]] {
            let (a, _) = codemap(&kept, &repo, &args, 0);
            let (b, _) = codemap(&fresh, &repo, &args, 0);
            for field in ["text", "files", "focus", "stale", "rev"] {
                assert_eq!(a[field], b[field], "step {step}, {args:?}: {field}");
            }
        }
        assert_eq!(
            stored_parts(&kept),
            stored_parts(&fresh),
            "step {step}: the stored parts"
        );
        // Git listed the files (tracked, untracked files and directories, deleted ones); the
        // same tree walked outside git holds the same files and parts.
        let copy = fresh.dir.path().join("copy");
        copy_without_git(&repo, &copy);
        let walked = Brain::new();
        codemap(&walked, &copy, &[], 0);
        assert_eq!(
            stored_parts(&walked),
            stored_parts(&fresh),
            "step {step}: the walked copy's parts"
        );
        // Now and then the changes are committed: tracked edits and deletions, a new HEAD.
        if step % 3 == 1 {
            git(&repo, &["add", "-A"]);
            git(&repo, &["commit", "-q", "-m", &format!("step {step}")]);
        }
    }
}
