//! One dream + accept leaves no two mergeable active records at MinHash ≥ 0.7 in a partition,
//! even when a near-duplicate group is a chain (A ~ B ~ C ~ D, but C and D under 0.7 to the
//! survivor A). The month benchmark (issue 6) found such a pair surviving every dream.

mod common;

use common::{engine_at, forty_words};

use cairn_core::minhash::signature;
use cairn_core::record::{MemoryType, Status};
use cairn_engine::lifecycle::DreamOptions;
use cairn_engine::{ListRequest, RememberRequest, RememberStatus};
use chrono::{TimeZone, Utc};

#[test]
fn a_chain_of_near_duplicates_is_merged_in_one_dream() {
    // One edited word spoils 3 of the 38 shingles (≈ 0.85), three adjacent words 5 (≈ 0.77);
    // A to C spoils 8 (≈ 0.65).
    let a = forty_words(&[]);
    let b = forty_words(&[(5, "alpha")]);
    let c = forty_words(&[(5, "alpha"), (15, "beta"), (16, "gamma"), (17, "delta")]);
    let d = forty_words(&[
        (5, "alpha"),
        (15, "beta"),
        (16, "gamma"),
        (17, "delta"),
        (35, "epsilon"),
    ]);
    let sim = |x: &str, y: &str| signature(x).jaccard(&signature(y));
    // The shape that left a pair behind: a bridge B, and C, D under the threshold to A.
    assert!(sim(&a, &b) >= 0.7, "a~b {}", sim(&a, &b));
    assert!(sim(&b, &c) >= 0.7, "b~c {}", sim(&b, &c));
    assert!(sim(&c, &d) >= 0.7, "c~d {}", sim(&c, &d));
    assert!(sim(&a, &c) < 0.7, "a~c {}", sim(&a, &c));
    assert!(sim(&a, &d) < 0.7, "a~d {}", sim(&a, &d));

    let dir = tempfile::tempdir().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap();
    // Stored oldest first, A last: A is the newest, so the group's survivor.
    let mut ids = Vec::new();
    for (minute, body) in [&d, &c, &b, &a].into_iter().enumerate() {
        let mut engine = engine_at(dir.path(), start + chrono::Duration::minutes(minute as i64));
        let mut request = RememberRequest::new(MemoryType::Episode, body.clone());
        request.capture = true;
        let outcome = engine.remember(&request).unwrap();
        assert_eq!(outcome.status, RememberStatus::Added, "{outcome:?}");
        ids.push(outcome.id.unwrap());
    }
    let (id_d, id_c, id_b, id_a) = (ids[0], ids[1], ids[2], ids[3]);

    let mut engine = engine_at(dir.path(), start + chrono::Duration::hours(10));
    let outcome = engine
        .dream(&DreamOptions {
            accept: true,
            ..DreamOptions::default()
        })
        .unwrap();
    let merges: Vec<_> = outcome
        .dream
        .proposals
        .iter()
        .filter(|p| p.kind == "merge")
        .collect();
    assert_eq!(merges.len(), 2, "{:#?}", outcome.dream.proposals);
    assert_eq!(merges[0].payload["survivor"], id_a);
    assert_eq!(merges[0].payload["merged"][0]["id"], id_b);
    // The second round: C and D, neither mergeable into A, are merged with each other.
    assert_eq!(merges[1].payload["survivor"], id_c);
    assert_eq!(merges[1].payload["merged"][0]["id"], id_d);

    let active = engine
        .list(&ListRequest {
            status: Some(Status::Active),
            limit: 0,
            all_projects: true,
            ..ListRequest::default()
        })
        .unwrap();
    let mut active_ids: Vec<i64> = active.iter().map(|m| m.id).collect();
    active_ids.sort_unstable();
    assert_eq!(active_ids, vec![id_c, id_a]);
    for (i, x) in active.iter().enumerate() {
        for y in &active[i + 1..] {
            assert!(sim(&x.body, &y.body) < 0.7, "#{} ~ #{}", x.id, y.id);
        }
    }
    // A second dream finds nothing left to merge.
    let again = engine.dream(&DreamOptions::default()).unwrap();
    assert!(
        again.dream.proposals.iter().all(|p| p.kind != "merge"),
        "{:#?}",
        again.dream.proposals
    );

    // Signatures are computed from the bodies (none is stored), so a restored record takes
    // part again at once: the next dream proposes the same merge again.
    engine.restore(id_d).unwrap();
    let doctor = engine.doctor(false).unwrap();
    assert!(doctor.ok, "{:#?}", doctor.checks);
    let after_restore = engine.dream(&DreamOptions::default()).unwrap();
    let merges: Vec<_> = after_restore
        .dream
        .proposals
        .iter()
        .filter(|p| p.kind == "merge")
        .collect();
    assert_eq!(merges.len(), 1, "{:#?}", after_restore.dream.proposals);
    // The restored record was just updated: it is the newer one, so it survives.
    assert_eq!(merges[0].payload["survivor"], id_d);
    assert_eq!(merges[0].payload["merged"][0]["id"], id_c);
}

#[test]
fn two_different_wordless_records_are_not_merged() {
    // Only emoji and punctuation: no words, so no shingles. Their signatures used to be equal
    // (all minimums untouched) and the dream paired them at similarity 1.0.
    let dir = tempfile::tempdir().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap();
    for (minute, body) in ["🎉🎉 !!!", "😢 … ???", "🚀 → ✅"].into_iter().enumerate() {
        let mut engine = engine_at(dir.path(), start + chrono::Duration::minutes(minute as i64));
        let outcome = engine
            .remember(&RememberRequest::new(MemoryType::Note, body))
            .unwrap();
        assert_eq!(outcome.status, RememberStatus::Added, "{outcome:?}");
    }
    let mut engine = engine_at(dir.path(), start + chrono::Duration::hours(10));
    let outcome = engine.dream(&DreamOptions::default()).unwrap();
    let pairings: Vec<_> = outcome
        .dream
        .proposals
        .iter()
        .filter(|p| p.kind == "merge" || p.kind == "forget")
        .collect();
    assert!(pairings.is_empty(), "{pairings:#?}");
}
