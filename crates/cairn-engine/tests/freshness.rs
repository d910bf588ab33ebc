//! Freshness verdicts are about the repository the question is asked in: a record of this
//! project gets one, a record of another project none, and a personal record only when this
//! tree holds the commit it was stamped at (issue 13, item 10).

mod common;

use cairn_core::record::MemoryType;
use cairn_engine::{Context, Engine, Mode, RecallRequest, RememberRequest};
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// A repository with one commit whose message is `name` (so two repositories never share it).
fn repository(parent: &Path, name: &str) -> std::path::PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["commit", "-q", "--allow-empty", "-m", name]);
    dir
}

fn engine(brain: &Path, cwd: &Path, project: &str) -> Engine {
    let context = Context {
        project: project.into(),
        cwd: cwd.to_path_buf(),
        actor: "test".into(),
        read_only: false,
        now: Some(common::test_now()),
    };
    Engine::open(brain, context).expect("the brain opens")
}

fn gotcha(engine: &mut Engine, body: &str, personal: bool) {
    let mut request = RememberRequest::new(MemoryType::Gotcha, body);
    request.personal = personal;
    engine.remember(&request).expect("remember");
}

/// The verdict recall attaches to the one result for `query`, searching `project`.
fn verdict(engine: &mut Engine, query: &str, project: Option<&str>) -> Option<String> {
    let request = RecallRequest {
        touch: false,
        mode: Mode::Lexical,
        project: project.map(str::to_string),
        ..RecallRequest::new(query)
    };
    let answer = engine.recall(&request).expect("recall");
    assert_eq!(answer.results.len(), 1, "{query}: {:?}", answer.results);
    answer.results[0].freshness.clone()
}

#[test]
fn a_verdict_only_for_records_stamped_in_this_repository() {
    let dir = tempfile::tempdir().unwrap();
    let brain = dir.path().join("brain.db");
    let (alpha, beta) = (
        repository(dir.path(), "alpha"),
        repository(dir.path(), "beta"),
    );
    {
        let mut in_alpha = engine(&brain, &alpha, "alpha");
        gotcha(
            &mut in_alpha,
            "the gasket leaks under alpha pressure",
            false,
        );
        gotcha(&mut in_alpha, "personal gotcha about torque wrenches", true);
        // Asked where they were stamped, both get the verdict.
        let here = verdict(&mut in_alpha, "gasket", None).expect("a verdict");
        assert!(here.starts_with("tree unchanged since stored"), "{here}");
        let personal = verdict(&mut in_alpha, "torque", None).expect("a verdict");
        assert!(
            personal.starts_with("tree unchanged since stored"),
            "{personal}"
        );
    }
    let mut in_beta = engine(&brain, &beta, "beta");
    // Another project's record, searched from beta: alpha's commit says nothing about beta.
    assert_eq!(verdict(&mut in_beta, "gasket", Some("alpha")), None);
    // A personal record stamped in alpha: not beta's history either.
    assert_eq!(verdict(&mut in_beta, "torque", None), None);
    // A record of beta whose commit is not in beta's tree (history rewritten) still says so.
    gotcha(&mut in_beta, "beta bearings overheat", false);
    git(&beta, &["checkout", "-q", "--orphan", "rewritten"]);
    git(&beta, &["commit", "-q", "--allow-empty", "-m", "rewritten"]);
    git(&beta, &["reflog", "expire", "--expire=now", "--all"]);
    git(&beta, &["branch", "-D", "-q", "main"]);
    git(&beta, &["gc", "-q", "--prune=now"]);
    let rewritten = verdict(&mut in_beta, "bearings", None).expect("a verdict");
    assert!(rewritten.contains("not in this tree"), "{rewritten}");
}
