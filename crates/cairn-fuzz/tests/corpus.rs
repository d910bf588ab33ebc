//! Every committed fuzz input, replayed through its target: the seed corpora
//! (`fuzz/corpus/<target>/`) and the inputs of past findings (`fuzz/regressions/<target>/`),
//! so the ordinary suite checks each target's invariants without a fuzzing engine.

use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files of `fuzz/<kind>/<target>/`, sorted (none when the folder does not exist).
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let folder = repository().join("fuzz").join(kind).join(target);
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a readable corpus folder").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Replays every input of `fuzz/<kind>/<target>/` for every target: how many there were per
/// target, and the inputs that broke an invariant (their panics are printed above).
fn replay_all(kind: &str) -> (Vec<(&'static str, usize)>, Vec<String>) {
    let mut counts = Vec::new();
    let mut broken = Vec::new();
    for (target, run) in cairn_fuzz::TARGETS {
        let files = inputs(kind, target);
        for file in &files {
            let data = std::fs::read(file).expect("a readable input");
            if std::panic::catch_unwind(|| run(&data)).is_err() {
                broken.push(format!("{target}: {}", file.display()));
            }
        }
        counts.push((*target, files.len()));
    }
    (counts, broken)
}

#[test]
fn every_target_has_a_seed_corpus_and_every_seed_holds() {
    let (counts, broken) = replay_all("corpus");
    assert!(
        broken.is_empty(),
        "seeds that break an invariant: {broken:#?}"
    );
    for (target, seeds) in counts {
        assert!(seeds > 0, "{target} has no seed in fuzz/corpus/{target}/");
    }
}

#[test]
fn every_past_finding_holds() {
    let (_, broken) = replay_all("regressions");
    assert!(
        broken.is_empty(),
        "past findings that break again: {broken:#?}"
    );
}

#[test]
fn every_corpus_folder_names_a_target() {
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(repository().join("fuzz").join(kind)) else {
            continue;
        };
        for entry in entries {
            let name = entry.expect("a readable folder").file_name();
            let name = name.to_string_lossy();
            assert!(
                cairn_fuzz::target(&name).is_some(),
                "fuzz/{kind}/{name} is not a target's folder"
            );
        }
    }
}
