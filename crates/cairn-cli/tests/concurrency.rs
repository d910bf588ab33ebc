//! Real processes writing at once: 8 processes × 500 `remember` each → exactly 4,000 records.

mod common;

use common::Brain;

const WORDS: &[&str] = &[
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "amber", "basalt", "cobalt", "dune",
    "ember", "fjord", "granite", "harbor", "iris", "jade",
];

fn body(process: usize, index: usize) -> String {
    // distinct word sequences, so the near-duplicate guard has nothing to refuse
    let mut state = ((process * 1_000 + index) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut words = vec![format!("p{process}i{index}")];
    for _ in 0..12 {
        state ^= state >> 33;
        state = state.wrapping_mul(0xff51_afd7_ed55_8ccd);
        words.push(WORDS[(state % WORDS.len() as u64) as usize].to_string());
    }
    words.join(" ")
}

#[test]
fn eight_processes_times_five_hundred_remembers_lose_nothing() {
    let brain = Brain::new();
    brain.remember("note", None, "warm up the schema");
    let binary = assert_cmd::cargo::cargo_bin("cairn");
    let script = "while IFS= read -r line; do \"$CAIRN_BIN\" remember --type note --body \"$line\" > /dev/null || { echo \"failed: $line\" >&2; exit 1; }; done";
    let children: Vec<_> = (0..8)
        .map(|process| {
            let mut child = std::process::Command::new("bash")
                .arg("-c")
                .arg(script)
                .env("CAIRN_BIN", &binary)
                .env("CAIRN_DB", &brain.db)
                .env("CAIRN_DAEMON", "off")
                .env("CAIRN_PROJECT", "test-project")
                .env("CAIRN_BUSY_TIMEOUT_MS", "60000")
                .env("CAIRN_EMBEDDER", "none")
                .current_dir(brain.dir.path())
                .stdin(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let input: String = (0..500).map(|i| body(process, i) + "\n").collect();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
            child
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "a writer failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            output.stderr.is_empty(),
            "no error surfaced: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stats = brain.json(&["stats"], 0);
    assert_eq!(stats["records"], 4_001);
    let doctor = brain.json(&["doctor"], 0);
    assert_eq!(doctor["checks"][0]["detail"], "PRAGMA integrity_check: ok");
}
