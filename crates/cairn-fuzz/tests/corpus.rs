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

fn replay(target: &str, kind: &str) -> usize {
    let run = cairn_fuzz::target(target).expect("a known target");
    let files = inputs(kind, target);
    for file in &files {
        let data = std::fs::read(file).expect("a readable input");
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(
            outcome.is_ok(),
            "{target}: {} breaks an invariant (the panic above says which)",
            file.display()
        );
    }
    files.len()
}

#[test]
fn every_target_has_a_seed_corpus_and_every_seed_holds() {
    for (target, _) in cairn_fuzz::TARGETS {
        let seeds = replay(target, "corpus");
        assert!(seeds > 0, "{target} has no seed in fuzz/corpus/{target}/");
    }
}

#[test]
fn every_past_finding_holds() {
    for (target, _) in cairn_fuzz::TARGETS {
        replay(target, "regressions");
    }
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
