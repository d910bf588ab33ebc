//! Salience at capture on a fixture set of real-shaped turns (tests/fixtures/salience_turns.jsonl):
//! no turn that carries a decision, an error, a fix, a path, a command or a number is ever
//! skipped, acknowledgements and tool chatter are, and present-state talk expires.

use cairn_core::capture::{Salience, SkipReason, turn_salience};

fn expected(word: &str) -> Salience {
    match word {
        "keep" => Salience::Keep,
        "expiring" => Salience::Expiring,
        other => {
            let reason = other
                .strip_prefix("skip:")
                .expect("keep, expiring or skip:REASON");
            let reason = SkipReason::ALL
                .into_iter()
                .find(|r| r.as_str() == reason)
                .unwrap_or_else(|| panic!("no skip reason {reason}"));
            Salience::Skip(reason)
        }
    }
}

#[test]
fn the_fixture_turns_get_their_salience_and_no_signal_is_skipped() {
    let fixture = include_str!("fixtures/salience_turns.jsonl");
    let mut with_signal = 0;
    for line in fixture.lines().filter(|l| !l.trim().is_empty()) {
        let turn: serde_json::Value = serde_json::from_str(line).unwrap();
        let user = turn["user"].as_str().unwrap();
        let assistant = turn["assistant"].as_str().unwrap();
        let got = turn_salience(user, assistant, user, assistant);
        if !turn["signal"].is_null() {
            with_signal += 1;
            assert!(
                !matches!(got, Salience::Skip(_)),
                "a turn with a {} was skipped: {line}",
                turn["signal"]
            );
        }
        assert_eq!(got, expected(turn["expect"].as_str().unwrap()), "{line}");
    }
    assert!(with_signal >= 20, "the fixture covers every kind of signal");
}

#[test]
fn a_turn_that_was_only_cairns_injection_is_skipped_as_such() {
    assert_eq!(
        turn_salience(
            "<cairn-context kind=\"recall\">…</cairn-context>",
            "",
            "",
            ""
        ),
        Salience::Skip(SkipReason::Injection)
    );
}
