//! Issue 20's ranking steps on small built brains: diversity in the first places, a date the
//! question names, pseudo-relevance feedback on the lexical side, conversation windows, and
//! the knowledge graph as a candidate source. Each test shows the step's effect by comparing
//! the same brain with the step off and on.

use cairn_core::record::MemoryType;
use cairn_embed::HashEmbedder;
use cairn_engine::{
    Context, Engine, Mode, RecallAnswer, RecallRequest, RememberRequest, SemanticConfig,
};
use std::path::Path;

fn open(dir: &Path) -> Engine {
    let mut context = Context::for_directory(dir);
    context.project = "p".into();
    context.now = Some("2026-12-01T00:00:00Z".parse().unwrap());
    Engine::open(&dir.join("brain.db"), context).unwrap()
}

fn store(engine: &mut Engine, memory_type: MemoryType, body: &str, at: Option<&str>) -> i64 {
    let mut request = RememberRequest::new(memory_type, body);
    request.at = at.map(str::to_string);
    request.allow_duplicate = true;
    engine.remember(&request).unwrap().id.unwrap()
}

fn ask(engine: &mut Engine, query: &str, mode: Mode) -> RecallAnswer {
    let mut request = RecallRequest::new(query);
    request.mode = mode;
    request.touch = false;
    request.limit = 20;
    request.floor = Some(0.0);
    engine.recall(&request).unwrap()
}

fn ids(answer: &RecallAnswer) -> Vec<i64> {
    answer.results.iter().map(|r| r.id).collect()
}

fn configure(engine: &mut Engine, change: impl FnOnce(&mut SemanticConfig)) {
    let mut config = SemanticConfig::default();
    change(&mut config);
    engine.set_semantic_config(config);
}

/// A question with two hops: near-copies of one hop outrank the other hop; diversity puts the
/// other hop right after the best match.
#[test]
fn diversity_gives_the_second_hop_a_place_above_near_copies_of_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    engine.set_embedder(Box::new(HashEmbedder::new(256)));
    let copies: Vec<i64> = (0..5)
        .map(|n| {
            store(
                &mut engine,
                MemoryType::Note,
                &format!("Melanie pottery class clay bowl glaze kiln wheel studio session{n}"),
                None,
            )
        })
        .collect();
    let other_hop = store(
        &mut engine,
        MemoryType::Note,
        "Melanie camping trip tent mountains",
        None,
    );
    for filler in [
        "kafka consumer lag offset partition",
        "postgres vacuum index bloat autovacuum",
        "docker image registry cache layer",
        "oauth token rotate secret vault",
        "billing invoice customer ticket refund",
        "deploy rollback canary release train",
    ] {
        store(&mut engine, MemoryType::Note, filler, None);
    }
    engine.index_pending(None, &mut |_, _| {}).unwrap();
    let query = "Melanie pottery clay bowl glaze kiln wheel studio camping";
    configure(&mut engine, |c| c.diversity = 0.0);
    let plain = ids(&ask(&mut engine, query, Mode::Hybrid));
    let plain_place = plain.iter().position(|&id| id == other_hop).unwrap();
    assert!(
        plain_place >= 2,
        "copies come first without diversity: {plain:?}"
    );
    configure(&mut engine, |c| c.diversity = 0.5);
    let diverse = ids(&ask(&mut engine, query, Mode::Hybrid));
    let diverse_place = diverse.iter().position(|&id| id == other_hop).unwrap();
    assert_eq!(
        diverse_place, 1,
        "the other hop moves up: {plain:?} -> {diverse:?}"
    );
    assert_eq!(diverse[0], plain[0], "the best match stays first");
    assert!(copies.contains(&diverse[0]));
    // Only the order moves: the same records, the same scores.
    let mut a = plain.clone();
    let mut b = diverse.clone();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b);
    // Lexical mode has no vectors to compare: diversity leaves it alone.
    let lexical_plain = ids(&ask(&mut engine, query, Mode::Lexical));
    configure(&mut engine, |c| c.diversity = 0.0);
    assert_eq!(ids(&ask(&mut engine, query, Mode::Lexical)), lexical_plain);
}

/// Two equal turns months apart: recency prefers the newer one; a question that names the
/// older one's month prefers that one, and says why.
#[test]
fn a_named_month_prefers_the_turn_of_that_month() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    // The same words that match, one that does not: BM25 cannot tell them apart.
    let june = store(
        &mut engine,
        MemoryType::Episode,
        "Melanie: we went camping by the lake with the kids",
        Some("2026-06-20T10:00:00Z"),
    );
    let november = store(
        &mut engine,
        MemoryType::Episode,
        "Melanie: we went camping by the lake with the dogs",
        Some("2026-11-28T10:00:00Z"),
    );
    configure(&mut engine, |c| c.date_boost = 1.0);
    let query = "Where did Melanie go camping in June?";
    assert_eq!(
        ids(&ask(&mut engine, query, Mode::Lexical)),
        [november, june]
    );
    configure(&mut engine, |c| c.date_boost = 1.1);
    let answer = ask(&mut engine, query, Mode::Lexical);
    assert_eq!(ids(&answer), [june, november], "{answer:#?}");
    assert!(answer.results[0].why.named_date);
    assert!(!answer.results[1].why.named_date);
    // A question that names no date, or another month, changes nothing.
    let answer = ask(&mut engine, "Where did Melanie go camping?", Mode::Lexical);
    assert_eq!(ids(&answer), [november, june]);
    let answer = ask(
        &mut engine,
        "Where did Melanie go camping in March?",
        Mode::Lexical,
    );
    assert_eq!(ids(&answer), [november, june]);
}

/// A record that shares no word with the question, but shares telling words with the best
/// match, is found through feedback, below the match itself.
#[test]
fn lexical_feedback_finds_a_record_through_the_words_of_the_best_match() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    let best = store(
        &mut engine,
        MemoryType::Note,
        "The pottery studio fires its kiln with a cone six glaze",
        None,
    );
    let related = store(
        &mut engine,
        MemoryType::Note,
        "Cone six glaze crawled in the kiln again last night",
        None,
    );
    for filler in [
        "kafka consumer lag offset partition",
        "postgres vacuum index bloat autovacuum",
        "docker image registry cache layer",
        "oauth token rotate secret vault",
        "billing invoice customer ticket refund",
        "deploy rollback canary release train",
    ] {
        store(&mut engine, MemoryType::Note, filler, None);
    }
    configure(&mut engine, |c| c.lexical_feedback = 0.0);
    assert_eq!(
        ids(&ask(&mut engine, "pottery studio", Mode::Lexical)),
        [best]
    );
    configure(&mut engine, |c| c.lexical_feedback = 0.3);
    let answer = ask(&mut engine, "pottery studio", Mode::Lexical);
    assert_eq!(ids(&answer), [best, related], "{answer:#?}");
    // The fast (hook) path never pays for the second search.
    let mut request = RecallRequest::new("pottery studio");
    request.mode = Mode::Lexical;
    request.touch = false;
    request.fast = true;
    request.floor = Some(0.0);
    assert_eq!(ids(&engine.recall(&request).unwrap()), [best]);
}

/// The semantic leg's confidence: when the query's nearest record stands below the reference
/// (here the vector-only floor), the semantic ranks lose their weight and hybrid keeps the
/// lexical order; far above it, hybrid is the fixed-weight fusion.
#[test]
fn a_semantic_leg_without_confidence_leaves_the_order_to_the_words() {
    use cairn_embed::Embedder;
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    engine.set_embedder(Box::new(HashEmbedder::new(256)));
    let texts = [
        "harbor lantern festival boats parade music food stalls evening crowd",
        "lantern festival",
        "harbor lantern repair shop opening hours",
        "festival tickets sold out early",
        "kafka consumer lag offset partition",
        "postgres vacuum index bloat autovacuum",
        "docker image registry cache layer",
        "oauth token rotate secret vault",
    ];
    for text in texts {
        store(&mut engine, MemoryType::Note, text, None);
    }
    engine.index_pending(None, &mut |_, _| {}).unwrap();
    let query = "harbor lantern festival parade";
    let hash = HashEmbedder::new(256);
    let q = hash.embed_query(query).unwrap();
    let best = texts
        .iter()
        .map(|t| {
            let v = hash.embed_one(t).unwrap();
            v.iter().zip(&q).map(|(a, b)| (a * b) as f64).sum::<f64>()
        })
        .fold(f64::MIN, f64::max);
    let lexical = ids(&ask(&mut engine, query, Mode::Lexical));
    let at = |engine: &mut Engine, floor: f64, confidence: f64| {
        configure(engine, |c| {
            c.vector_only_floor = Some(floor);
            c.confidence = confidence;
        });
        ids(&ask(engine, query, Mode::Hybrid))
    };
    // The floor just above the best cosine: no confidence, the words decide.
    let fixed_high = at(&mut engine, best + 0.01, 0.0);
    let unsure = at(&mut engine, best + 0.01, 0.05);
    assert_eq!(unsure, lexical, "fixed weight: {fixed_high:?}");
    // Far below it: full confidence, the same answer as the fixed weight.
    let fixed_low = at(&mut engine, best - 0.5, 0.0);
    let sure = at(&mut engine, best - 0.5, 0.05);
    assert_eq!(sure, fixed_low);
    assert_ne!(
        fixed_low[..2],
        lexical[..2],
        "the semantic leg reorders the top when trusted"
    );
    // Lexical mode is never touched.
    assert_eq!(ids(&ask(&mut engine, query, Mode::Lexical)), lexical);
}

/// Two-level retrieval: the turn that answers the question two turns later shares no word
/// with it; the window around the turn that matches brings it in, below that turn.
#[test]
fn a_conversation_window_brings_in_the_answer_two_turns_later() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    // No embedded context, and a floor that keeps unrelated turns out of the semantic list:
    // only the window can find the answer.
    configure(&mut engine, |c| {
        c.context_turns = 0;
        c.vector_only_floor = Some(0.5);
    });
    engine.set_embedder(Box::new(HashEmbedder::new(256)));
    let turns = [
        "Melanie: I finally signed up for that pottery class",
        "Caroline: oh nice, good for you",
        "Melanie: first session is next Tuesday evening at the community centre",
        "Caroline: I will come and watch",
    ];
    let mut conversation = Vec::new();
    for (n, text) in turns.iter().enumerate() {
        let at = format!("2026-11-20T10:00:{:02}Z", n * 10);
        conversation.push(store(&mut engine, MemoryType::Episode, text, Some(&at)));
    }
    // Another conversation, days later, about something else.
    for (n, text) in [
        "Caroline: the adoption agency called back",
        "Melanie: what did they say",
        "Caroline: the interview is in March",
    ]
    .iter()
    .enumerate()
    {
        let at = format!("2026-11-25T18:00:{:02}Z", n * 10);
        store(&mut engine, MemoryType::Episode, text, Some(&at));
    }
    engine.index_pending(None, &mut |_, _| {}).unwrap();
    let query = "pottery class signed up";
    let answer_turn = conversation[2];
    configure(&mut engine, |c| {
        c.context_turns = 0;
        c.vector_only_floor = Some(0.5);
        c.window_weight = 0.0;
    });
    let plain = ids(&ask(&mut engine, query, Mode::Hybrid));
    assert!(!plain.contains(&answer_turn), "{plain:?}");
    configure(&mut engine, |c| {
        c.context_turns = 0;
        c.vector_only_floor = Some(0.5);
        c.window_weight = 0.5;
    });
    let windowed = ids(&ask(&mut engine, query, Mode::Hybrid));
    let place = |id: i64| windowed.iter().position(|&x| x == id);
    assert_eq!(windowed[0], conversation[0], "{windowed:?}");
    assert!(place(answer_turn).is_some(), "{windowed:?}");
    // A window never crosses into the other conversation: its turns stay out.
    for id in &windowed {
        assert!(
            conversation.contains(id) || plain.contains(id),
            "{id} came from another conversation: {plain:?} -> {windowed:?}"
        );
    }
    // Windows are a hybrid list: lexical mode is unchanged.
    let lexical_with = ids(&ask(&mut engine, query, Mode::Lexical));
    configure(&mut engine, |c| {
        c.context_turns = 0;
        c.window_weight = 0.0;
    });
    assert_eq!(ids(&ask(&mut engine, query, Mode::Lexical)), lexical_with);
}

/// Window similarity: a question answered by two neighbouring turns, each holding half of its
/// words, loses to a single turn of another conversation that holds more of them; scored by
/// the window (the pair's mean vector), both turns come first. Lexical mode is untouched.
#[test]
fn window_similarity_lets_two_half_matching_turns_beat_one_better_single_turn() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    configure(&mut engine, |c| c.context_turns = 0);
    engine.set_embedder(Box::new(HashEmbedder::new(1024)));
    // Earlier and alone in its conversation: a window of one.
    let single = store(
        &mut engine,
        MemoryType::Episode,
        "pottery kiln lunch",
        Some("2026-11-10T12:00:00Z"),
    );
    let first = store(
        &mut engine,
        MemoryType::Episode,
        "Melanie: pottery class tonight",
        Some("2026-11-20T10:00:00Z"),
    );
    let second = store(
        &mut engine,
        MemoryType::Episode,
        "Caroline: kiln glaze colours",
        Some("2026-11-20T10:00:10Z"),
    );
    for (n, filler) in [
        "kafka consumer lag offset partition",
        "postgres vacuum index bloat autovacuum",
        "docker image registry cache layer",
    ]
    .iter()
    .enumerate()
    {
        let at = format!("2026-11-0{}T09:00:00Z", n + 1);
        store(&mut engine, MemoryType::Episode, filler, Some(&at));
    }
    engine.index_pending(None, &mut |_, _| {}).unwrap();
    let query = "pottery class kiln glaze";
    let place = |answer: &[i64], id: i64| answer.iter().position(|&x| x == id).unwrap();
    configure(&mut engine, |c| {
        c.context_turns = 0;
        c.window_similarity = 0;
    });
    let plain = ids(&ask(&mut engine, query, Mode::Semantic));
    assert_eq!(plain[0], single, "{plain:?}");
    let lexical = ids(&ask(&mut engine, query, Mode::Lexical));
    configure(&mut engine, |c| {
        c.context_turns = 0;
        c.window_similarity = 1;
    });
    let windowed = ids(&ask(&mut engine, query, Mode::Semantic));
    assert!(
        place(&windowed, first) < place(&windowed, single)
            && place(&windowed, second) < place(&windowed, single),
        "{plain:?} -> {windowed:?}"
    );
    assert_eq!(ids(&ask(&mut engine, query, Mode::Lexical)), lexical);
}

/// Lexical feedback read from the fused list (`FeedbackSource::Fused`): in hybrid mode the
/// words of the candidate both legs put first find a record that shares no query word (and
/// is too far from the query for the vector list), below the match itself.
#[test]
fn feedback_from_the_fused_list_finds_a_record_through_the_words_of_the_best_candidate() {
    use cairn_engine::FeedbackSource;
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    engine.set_embedder(Box::new(HashEmbedder::new(1024)));
    let best = store(
        &mut engine,
        MemoryType::Note,
        "The pottery studio fires its kiln with a cone six glaze",
        None,
    );
    let related = store(
        &mut engine,
        MemoryType::Note,
        "Cone six glaze crawled in the kiln again last night",
        None,
    );
    for filler in [
        "kafka consumer lag offset partition",
        "postgres vacuum index bloat autovacuum",
        "docker image registry cache layer",
        "oauth token rotate secret vault",
        "billing invoice customer ticket refund",
        "deploy rollback canary release train",
    ] {
        store(&mut engine, MemoryType::Note, filler, None);
    }
    engine.index_pending(None, &mut |_, _| {}).unwrap();
    let at = |engine: &mut Engine, weight: f64| {
        configure(engine, |c| {
            c.vector_only_floor = Some(0.5);
            c.lexical_feedback = weight;
            c.feedback_source = FeedbackSource::Fused;
        });
        ids(&ask(engine, "pottery studio", Mode::Hybrid))
    };
    assert_eq!(at(&mut engine, 0.0), [best]);
    assert_eq!(at(&mut engine, 0.3), [best, related]);
}

fn place(list: &[i64], id: i64) -> Option<usize> {
    list.iter().position(|&x| x == id)
}

/// The graph's list keeps a name whole: records that hold a question's words apart ("Anna" and
/// "Lee", two people on the trip) outrank lexically the one record about Anna Lee herself; her
/// entity, found by the question's words, puts that record first. Lexical mode is unchanged.
#[test]
fn the_graph_list_puts_the_record_naming_the_questions_entity_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    let target = store(
        &mut engine,
        MemoryType::Note,
        "Anna Lee sprained an ankle on day two",
        None,
    );
    for body in [
        "Anna planned the hiking trip route and hiking trip snacks",
        "Lee booked the hiking trip cabin for the hiking trip",
        "Anna and Lee argued about the hiking trip budget on the hiking trip",
        "Lee drove and Anna read the map on the hiking trip",
        "Anna thanked Lee for the hiking trip",
        "the hiking trip photos from the hiking trip are up",
        "kafka consumer lag offset partition",
        "postgres vacuum index bloat autovacuum",
    ] {
        store(&mut engine, MemoryType::Note, body, None);
    }
    let query = "what happened to anna lee on the hiking trip";
    configure(&mut engine, |c| c.graph_weight = 0.0);
    let plain = ids(&ask(&mut engine, query, Mode::Hybrid));
    let lexical = ids(&ask(&mut engine, query, Mode::Lexical));
    assert!(place(&plain, target) > Some(0), "{plain:?}");
    configure(&mut engine, |c| c.graph_weight = 1.0);
    let graph = ids(&ask(&mut engine, query, Mode::Hybrid));
    assert_eq!(place(&graph, target), Some(0), "{plain:?} -> {graph:?}");
    assert_eq!(ids(&ask(&mut engine, query, Mode::Lexical)), lexical);
}

/// Bridge entities: the question names no entity, its best match names the sister, and the
/// answer names only her. With the bridge the answer comes second; without it (or without
/// the graph) it is not found at all, since it shares no word with the question.
#[test]
fn a_bridge_entity_of_the_best_match_finds_the_second_hop() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    let first_hop = store(
        &mut engine,
        MemoryType::Note,
        "Jon says his sister Maria Lopez quit her job",
        None,
    );
    let second_hop = store(
        &mut engine,
        MemoryType::Note,
        "Maria Lopez rented a flat in Lisbon",
        None,
    );
    for body in [
        "kafka consumer lag offset partition",
        "postgres vacuum index bloat autovacuum",
        "Jon fixed the docker image registry cache",
    ] {
        store(&mut engine, MemoryType::Note, body, None);
    }
    let query = "where does Jon's sister live now";
    configure(&mut engine, |c| c.graph_weight = 1.0);
    let named_only = ids(&ask(&mut engine, query, Mode::Hybrid));
    assert_eq!(named_only[0], first_hop, "{named_only:?}");
    assert_eq!(place(&named_only, second_hop), None, "{named_only:?}");
    configure(&mut engine, |c| {
        c.graph_weight = 1.0;
        c.graph_bridge = true;
    });
    let bridged = ids(&ask(&mut engine, query, Mode::Hybrid));
    assert_eq!(&bridged[..2], &[first_hop, second_hop], "{bridged:?}");
}

/// Neighbours: the question names Maria Lopez; a record written with her names the Atlas
/// Project beside her (a co-occurrence edge), and a later record names only the project. One
/// `relates` hop brings the later record in.
#[test]
fn a_neighbour_entity_brings_in_records_that_name_only_the_neighbour() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    let both = store(
        &mut engine,
        MemoryType::Note,
        "Maria Lopez leads the Atlas Project team",
        None,
    );
    let neighbour_only = store(
        &mut engine,
        MemoryType::Note,
        "the Atlas Project deadline slipped to March",
        None,
    );
    for body in [
        "kafka consumer lag offset partition",
        "postgres vacuum index bloat autovacuum",
    ] {
        store(&mut engine, MemoryType::Note, body, None);
    }
    let query = "what is Maria Lopez busy with";
    configure(&mut engine, |c| c.graph_weight = 1.0);
    let named_only = ids(&ask(&mut engine, query, Mode::Hybrid));
    assert_eq!(named_only, vec![both]);
    configure(&mut engine, |c| {
        c.graph_weight = 1.0;
        c.graph_neighbours = true;
    });
    let with_neighbours = ids(&ask(&mut engine, query, Mode::Hybrid));
    assert_eq!(with_neighbours, vec![both, neighbour_only]);
}
