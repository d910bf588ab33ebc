//! Which query terms a large brain searches (`TermCutoff`, docs/design.md §5.1): a term found in too many
//! records is dropped unless it is among the rarest the cutoff keeps. Checked on a real brain of
//! 2,100 records (the cutoff applies from 2,000): `common` is in every record, `omega` in 45,
//! `zeta` in 5 (which also hold `omega`).

mod common;

use common::{engine_at, test_now};

use cairn_core::record::MemoryType;
use cairn_engine::remember::prepare;
use cairn_engine::{Engine, Mode, RecallRequest, RememberRequest, TermCutoff};

fn brain() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let now = test_now();
    let mut engine = engine_at(dir.path(), now);
    engine
        .store_mut()
        .unwrap()
        .write(|tx| {
            for index in 0..2_100 {
                let body = match index {
                    0..5 => format!("common omega zeta record {index}"),
                    5..45 => format!("common omega record {index}"),
                    _ => format!("common filler record {index}"),
                };
                let request = RememberRequest::new(MemoryType::Note, body);
                let prepared = prepare(&request, Some("p".into()), now, None).expect("valid");
                tx.insert_memory(&prepared.memory, prepared.title_norm.as_deref())?;
            }
            Ok::<_, cairn_store::StoreError>(())
        })
        .expect("seeded");
    (dir, engine)
}

/// How many records answer `zeta omega common` under `cutoff`.
fn found(engine: &mut Engine, cutoff: TermCutoff) -> usize {
    let request = RecallRequest {
        limit: 200,
        touch: false,
        mode: Mode::Lexical,
        floor: Some(0.0),
        freshness: false,
        term_cutoff: cutoff,
        ..RecallRequest::new("zeta omega common")
    };
    engine.recall(&request).expect("recalled").results.len()
}

#[test]
fn frequent_terms_are_dropped_unless_among_the_rarest_kept() {
    let (_dir, mut engine) = brain();
    let check = |engine: &mut Engine, most_records: usize, keep_rarest: usize, expect: usize| {
        let cutoff = TermCutoff {
            share: 0.1,
            most_records,
            keep_rarest,
        };
        assert_eq!(found(engine, cutoff), expect, "{cutoff:?}");
    };
    // 10 % of 2,100 is 210: `common` goes, `omega` and `zeta` stay.
    assert_eq!(found(&mut engine, TermCutoff::DEFAULT), 45);
    check(&mut engine, usize::MAX, 1, 45);
    // At most 20 records: `omega` (45) goes too, unless the two rarest are kept.
    check(&mut engine, 20, 1, 5);
    check(&mut engine, 20, 2, 45);
    // Keeping the three rarest brings `common` back, whatever the cutoff.
    check(&mut engine, 20, 3, 200);
    // The hook's cutoff on a brain this small is the default one.
    assert_eq!(found(&mut engine, TermCutoff::HOOK), 45);
}
