//! Records in different disclosure partitions (project + scope + trust zone + sensitivity) are
//! never merged by the write path: not as an identity update, not as an exact duplicate, not as
//! a near duplicate, and they never flag each other as contradictions.

use cairn_core::record::{MemoryType, Sensitivity, TrustZone};
use cairn_engine::{Context, Engine, RememberRequest, RememberStatus};

fn engine(dir: &tempfile::TempDir) -> Engine {
    let context = Context {
        project: "p".into(),
        cwd: dir.path().to_path_buf(),
        actor: "test".into(),
        read_only: false,
        now: None,
    };
    Engine::open(&dir.path().join("brain.db"), context).unwrap()
}

fn request(
    title: Option<&str>,
    body: &str,
    zone: TrustZone,
    sensitivity: Sensitivity,
) -> RememberRequest {
    let mut request = RememberRequest::new(MemoryType::Fact, body);
    request.title = title.map(str::to_string);
    request.trust_zone = Some(zone);
    request.sensitivity = Some(sensitivity);
    request
}

const PARTITIONS: [(TrustZone, Sensitivity); 5] = [
    (TrustZone::PrivateSelf, Sensitivity::Normal),
    (TrustZone::PrivateSelf, Sensitivity::DoNotExport),
    (TrustZone::TrustedCollaborator, Sensitivity::Normal),
    (TrustZone::PaidPublic, Sensitivity::PublicSafe),
    (TrustZone::OutsideContact, Sensitivity::PublicSafe),
];

#[test]
fn the_same_text_in_every_partition_is_stored_separately() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(&dir);
    let mut ids = Vec::new();
    for (zone, sensitivity) in PARTITIONS {
        let outcome = engine
            .remember(&request(
                None,
                "The staging database is db-7.",
                zone,
                sensitivity,
            ))
            .unwrap();
        assert_eq!(
            outcome.status,
            RememberStatus::Added,
            "{zone} {sensitivity}: {outcome:?}"
        );
        ids.push(outcome.id.unwrap());
        // the same text again in the same partition is a no-op
        let again = engine
            .remember(&request(
                None,
                "The staging database is db-7.",
                zone,
                sensitivity,
            ))
            .unwrap();
        assert_eq!(again.status, RememberStatus::Noop);
        assert_eq!(again.id, outcome.id);
    }
    ids.dedup();
    assert_eq!(ids.len(), PARTITIONS.len());
}

#[test]
fn the_same_title_in_another_partition_is_not_an_identity_update() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(&dir);
    for (index, (zone, sensitivity)) in PARTITIONS.into_iter().enumerate() {
        let body = format!(
            "Version {index} of the zone boundary fixture, worded differently each time {}.",
            "x".repeat(index)
        );
        let outcome = engine
            .remember(&request(
                Some("Zone boundary fixture"),
                &body,
                zone,
                sensitivity,
            ))
            .unwrap();
        assert_eq!(
            outcome.status,
            RememberStatus::Added,
            "{zone} {sensitivity}: {outcome:?}"
        );
    }
    for (zone, sensitivity) in PARTITIONS {
        let record = engine
            .list(&cairn_engine::ListRequest {
                limit: 0,
                ..Default::default()
            })
            .unwrap()
            .into_iter()
            .find(|m| m.trust_zone == zone && m.sensitivity == sensitivity)
            .unwrap();
        assert!(
            engine.history(record.id).unwrap().is_empty(),
            "never updated across partitions"
        );
    }
}

#[test]
fn near_duplicates_and_contradictions_stay_inside_their_partition() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(&dir);
    let body = "The nightly export job for the billing warehouse runs at two in the morning and writes parquet files to the cold bucket";
    engine
        .remember(&request(
            None,
            body,
            TrustZone::PrivateSelf,
            Sensitivity::Normal,
        ))
        .unwrap();
    // a near-identical body in the same partition is refused…
    let near = format!("{body}.");
    let refused = engine
        .remember(&request(
            None,
            &format!("{near} Daily."),
            TrustZone::PrivateSelf,
            Sensitivity::Normal,
        ))
        .unwrap();
    assert_eq!(refused.status, RememberStatus::Refused, "{refused:?}");
    // …and stored when it lives in another partition
    let other = engine
        .remember(&request(
            None,
            &format!("{near} Daily."),
            TrustZone::TrustedCollaborator,
            Sensitivity::Normal,
        ))
        .unwrap();
    assert_eq!(other.status, RememberStatus::Added, "{other:?}");

    engine
        .remember(&request(
            Some("Feature flag"),
            "The new checkout flow is enabled.",
            TrustZone::PrivateSelf,
            Sensitivity::Normal,
        ))
        .unwrap();
    let flipped = engine
        .remember(&request(
            Some("Checkout flag"),
            "The new checkout flow is disabled.",
            TrustZone::PaidPublic,
            Sensitivity::PublicSafe,
        ))
        .unwrap();
    assert_eq!(
        flipped.status,
        RememberStatus::Added,
        "no conflict across partitions: {flipped:?}"
    );
    let same_partition = engine
        .remember(&request(
            Some("Checkout flag again"),
            "The new checkout flow is disabled.",
            TrustZone::PrivateSelf,
            Sensitivity::Normal,
        ))
        .unwrap();
    assert_eq!(
        same_partition.status,
        RememberStatus::Flagged,
        "{same_partition:?}"
    );
}
