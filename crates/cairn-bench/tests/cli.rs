//! The `cairn-bench` binary, run for real: every subcommand answers `--help` with its own
//! options, bad options are usage errors, and a small `wiki` run writes one result pair in the
//! common envelope.

use assert_cmd::Command;
use serde_json::Value;

fn bench() -> Command {
    Command::cargo_bin("cairn-bench").expect("the cairn-bench binary")
}

#[test]
fn every_subcommand_has_help_with_its_options() {
    for (subcommand, option) in [
        ("core", "--skip-process"),
        ("semantic", "--ingest-texts"),
        ("graph", "--edges"),
        ("graph-probe", "<DEPTH>"),
        ("lifecycle", "--only"),
        ("wiki", "--records"),
        ("agent", "--seed-cache"),
    ] {
        let output = bench().args([subcommand, "--help"]).output().unwrap();
        assert!(output.status.success(), "{subcommand} --help failed");
        let help = String::from_utf8(output.stdout).unwrap();
        assert!(
            help.contains(option),
            "{subcommand} --help lacks {option}:\n{help}"
        );
    }
}

#[test]
fn unknown_options_and_values_are_usage_errors() {
    let output = bench().args(["wiki", "--bogus"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let output = bench()
        .args(["lifecycle", "--only", "sleep"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("dream"));
    let output = bench().args(["wiki", "--records", "0"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least 1"));
}

#[test]
fn a_small_wiki_run_writes_one_result_pair() {
    let out = tempfile::tempdir().unwrap();
    bench()
        .args(["wiki", "--records", "40", "--out"])
        .arg(out.path())
        .assert()
        .success();
    let mut names: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names[0].starts_with("wiki-") && names[0].ends_with(".json"),
        "{names:?}"
    );
    assert_eq!(names[1], names[0].replace(".json", ".md"));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join(&names[0])).unwrap())
            .unwrap();
    assert_eq!(report["benchmark"], "wiki");
    assert_eq!(report["parameters"]["records"], 40);
    assert!(report["results"]["export_full_files"].as_u64().unwrap() >= 40);
    assert_eq!(report["results"]["export_unchanged_written"], 0);
    assert_eq!(report["results"]["import_fresh_brain_added"], 40);
    assert!(report["load_average"]["by_phase"].as_array().unwrap().len() >= 5);
    assert!(report["cpu_seconds"]["process"].as_f64().unwrap() >= 0.0);
}
