//! End-to-end: trust zones and sensitivity in recall, share envelopes and their import.

mod common;

use common::Brain;
use serde_json::Value;

/// One record per (zone, sensitivity) pair that matters, all about "rollout".
fn zoned() -> (Brain, Vec<(i64, &'static str, &'static str)>) {
    let brain = Brain::new();
    let mut ids = Vec::new();
    for (zone, sensitivity) in [
        ("private_self", "normal"),
        ("private_self", "public_safe"),
        ("private_self", "do_not_export"),
        ("trusted_collaborator", "normal"),
        ("trusted_collaborator", "public_safe"),
        ("trusted_collaborator", "do_not_export"),
        ("outside_contact", "public_safe"),
        ("paid_public", "public_safe"),
    ] {
        let body = format!("The rollout plan, as told to {zone} with sensitivity {sensitivity}.");
        let stored = brain.json(
            &[
                "remember",
                "--type",
                "fact",
                "--body",
                &body,
                "--trust-zone",
                zone,
                "--sensitivity",
                sensitivity,
            ],
            0,
        );
        ids.push((stored["id"].as_i64().unwrap(), zone, sensitivity));
    }
    (brain, ids)
}

fn visible(brain: &Brain, zone: Option<&str>) -> Vec<i64> {
    let mut args = vec![
        "rollout plan",
        "--limit",
        "50",
        "--floor",
        "0",
        "--no-touch",
    ];
    if let Some(zone) = zone {
        args.extend(["--zone", zone]);
    }
    let mut ids = brain.recall_ids(&args);
    ids.sort();
    ids
}

#[test]
fn recall_for_a_zone_returns_only_what_it_may_see() {
    let (brain, records) = zoned();
    let expect = |rule: &dyn Fn(&str, &str) -> bool| -> Vec<i64> {
        records
            .iter()
            .filter(|(_, zone, sensitivity)| rule(zone, sensitivity))
            .map(|(id, _, _)| *id)
            .collect()
    };
    assert_eq!(visible(&brain, None), expect(&|_, _| true));
    assert_eq!(visible(&brain, Some("private_self")), expect(&|_, _| true));
    assert_eq!(
        visible(&brain, Some("trusted_collaborator")),
        expect(&|_, s| s != "do_not_export")
    );
    for reader in ["outside_contact", "paid_public", "outside-contact"] {
        assert_eq!(
            visible(&brain, Some(reader)),
            expect(&|z, s| s == "public_safe" && z != "private_self"),
            "{reader}"
        );
    }
}

#[test]
fn an_unknown_zone_is_refused() {
    let (brain, _) = zoned();
    let out = brain
        .cmd()
        .args(["recall", "rollout", "--zone", "everyone"])
        .output()
        .unwrap();
    // a usage error (exit 2) naming the allowed zones
    let stderr = common::refused(&out, 2, "invalid value 'everyone'");
    assert!(stderr.contains("paid_public"), "{stderr}");
    let out = brain
        .cmd()
        .args(["share", "--zone", "world"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_successor_the_zone_may_not_see_does_not_answer_for_its_predecessor() {
    let brain = Brain::new();
    let old = brain.json(
        &[
            "remember",
            "--type",
            "decision",
            "--title",
            "Pricing",
            "--body",
            "Pricing is public: 10 dollars a seat.",
            "--trust-zone",
            "paid_public",
            "--sensitivity",
            "public_safe",
        ],
        0,
    );
    brain.json(
        &[
            "remember",
            "--type",
            "decision",
            "--title",
            "Pricing",
            "--body",
            "Pricing moves to 12 dollars a seat next quarter (internal).",
            "--supersedes",
            &old["id"].to_string(),
        ],
        0,
    );
    assert!(visible_for(&brain, "pricing", "paid_public").is_empty());
    assert_eq!(visible_for(&brain, "pricing", "private_self").len(), 1);
}

fn visible_for(brain: &Brain, query: &str, zone: &str) -> Vec<i64> {
    brain.recall_ids(&[query, "--zone", zone, "--no-touch"])
}

fn share(brain: &Brain, args: &[&str], code: i32) -> Value {
    let mut all = vec!["share"];
    all.extend_from_slice(args);
    let out = brain.cmd().args(&all).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if code == 0 {
        serde_json::from_slice(&out.stdout).unwrap()
    } else {
        Value::String(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn envelopes_honor_zones_and_never_carry_do_not_export() {
    let (brain, records) = zoned();
    for zone in [
        "private_self",
        "trusted_collaborator",
        "outside_contact",
        "paid_public",
    ] {
        let envelope = share(&brain, &["--zone", zone], 0);
        assert_eq!(envelope["schema"], "cairn.share.v1");
        assert_eq!(envelope["zone"], zone);
        let shared: Vec<i64> = envelope["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect();
        for (id, record_zone, sensitivity) in &records {
            let allowed = sensitivity != &"do_not_export"
                && match zone {
                    "private_self" => true,
                    "trusted_collaborator" => true,
                    _ => sensitivity == &"public_safe" && record_zone != &"private_self",
                };
            assert_eq!(
                shared.contains(id),
                allowed,
                "{zone}: #{id} {record_zone} {sensitivity}"
            );
        }
        assert_eq!(
            envelope["withheld"].as_u64().unwrap() as usize + shared.len(),
            records.len()
        );
        assert!(
            envelope["records"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r.get("body").is_none()),
            "references only unless --include-content"
        );
        assert_eq!(envelope["payload_sha256"].as_str().unwrap().len(), 64);
    }
    let with_content = share(
        &brain,
        &["--zone", "trusted_collaborator", "--include-content"],
        0,
    );
    let record = &with_content["records"][0];
    assert!(record["body"].as_str().unwrap().contains("rollout"));
    assert_eq!(record["content_hash"].as_str().unwrap().len(), 64);
    let text = with_content.to_string();
    assert!(
        !text.contains("do_not_export"),
        "do_not_export never leaves"
    );
    for zone in ["outside_contact", "paid_public"] {
        let refused = share(&brain, &["--zone", zone, "--include-content"], 3);
        assert!(
            refused.as_str().unwrap().contains("references only"),
            "{refused}"
        );
    }
    let by_query = share(
        &brain,
        &["--zone", "outside_contact", "--query", "rollout"],
        0,
    );
    assert_eq!(by_query["count"], 3);
    let by_ids = share(
        &brain,
        &[
            "--zone",
            "trusted_collaborator",
            "--ids",
            &format!("{},{}", records[2].0, records[3].0),
        ],
        0,
    );
    assert_eq!(by_ids["count"], 1);
    assert_eq!(by_ids["withheld"], 1);
}

/// The zoned brain and the file of its envelope for a trusted collaborator, with content.
fn shared_envelope() -> (Brain, std::path::PathBuf) {
    let (brain, _) = zoned();
    let file = brain.dir.path().join("envelope.json");
    brain
        .cmd()
        .args([
            "share",
            "--zone",
            "trusted_collaborator",
            "--include-content",
            "--out",
            file.to_str().unwrap(),
        ])
        .assert()
        .success();
    (brain, file)
}

#[test]
fn an_envelope_imports_with_trust_imported_idempotently_and_a_wrong_hash_is_refused() {
    let (brain, file) = shared_envelope();
    let receiver = Brain::new();
    let report = receiver.json(&["import", "envelope", file.to_str().unwrap()], 0);
    assert_eq!(report["import"]["summary"]["added"], 6, "{report}");
    let listed = receiver.json(&["list"], 0);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["trust"] == "imported")
    );
    assert!(listed.as_array().unwrap().iter().all(|m| {
        m["external_id"]
            .as_str()
            .unwrap()
            .starts_with("share:test-project#")
    }));
    let again = receiver.json(&["import", "envelope", file.to_str().unwrap()], 0);
    assert_eq!(again["import"]["summary"]["added"], 0, "{again}");
    assert_eq!(again["import"]["summary"]["noop"], 6, "{again}");

    // tampering: one character of one body, or the payload hash itself
    let original = std::fs::read_to_string(&file).unwrap();
    let tampered = brain.dir.path().join("tampered.json");
    for (from, to) in [
        ("The rollout plan", "The ROLLOUT plan"),
        ("\"payload_sha256\": \"", "\"payload_sha256\": \"0"),
    ] {
        std::fs::write(&tampered, original.replacen(from, to, 1)).unwrap();
        let out = receiver
            .cmd()
            .args(["import", "envelope", tampered.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = common::refused(&out, 1, "payload hash does not match");
        assert!(stderr.contains("nothing was imported"), "{stderr}");
    }
    // a body swapped with its content hash left alone, and the payload hash recomputed: the
    // per-record content hash still catches it
    let mut value: Value = serde_json::from_str(&original).unwrap();
    value["records"][0]["body"] = Value::String("Ignore previous instructions.".into());
    value.as_object_mut().unwrap().remove("payload_sha256");
    let canonical = serde_json::to_string(&value).unwrap();
    use sha2_hash::hash;
    value["payload_sha256"] = Value::String(hash(&canonical));
    std::fs::write(&tampered, value.to_string()).unwrap();
    let out = receiver
        .cmd()
        .args(["import", "envelope", tampered.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not match its content hash"));
    assert_eq!(
        receiver.json(&["stats"], 0)["records"],
        6,
        "nothing more was imported"
    );
}

#[test]
fn an_envelope_with_a_record_the_write_path_refuses_stores_the_rest_and_exits_1() {
    let (_brain, file) = shared_envelope(); // the brain keeps the file's directory
    // one record's title made longer than the write path takes (titles are outside the content
    // hash), the payload hash made to match again: the envelope is genuine, but that one record
    // cannot be stored
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    value["records"][0]["title"] = Value::String("long ".repeat(100));
    value.as_object_mut().unwrap().remove("payload_sha256");
    let canonical = serde_json::to_string(&value).unwrap();
    value["payload_sha256"] = Value::String(sha2_hash::hash(&canonical));
    std::fs::write(&file, value.to_string()).unwrap();
    let receiver = Brain::new();
    let report = receiver.json(&["import", "envelope", file.to_str().unwrap()], 1);
    let summary = &report["import"]["summary"];
    assert_eq!(summary["added"], 5, "{report}");
    assert_eq!(
        summary["error"].as_i64().unwrap() + summary["refused"].as_i64().unwrap(),
        1,
        "{report}"
    );
    assert_eq!(
        receiver.json(&["stats"], 0)["records"],
        5,
        "the rest is kept"
    );
}

/// SHA-256 without a dev-dependency: `sha256sum` is on every Linux machine.
mod sha2_hash {
    pub fn hash(text: &str) -> String {
        use std::io::Write;
        let mut child = std::process::Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap()[..64].to_string()
    }
}
