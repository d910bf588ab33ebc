//! `MiniLmEmbedder`: all-MiniLM-L6-v2 in process, on the CPU, with candle (pure Rust).
//!
//! Same computation as sentence-transformers: WordPiece tokens (at most 256, the model's
//! `max_seq_length`), the 6-layer BERT encoder, mean pooling over real tokens (the attention
//! mask), L2 normalization. Two traps handled here:
//! * `tokenizer.json` as shipped pads every input to 128 tokens and truncates at 128. Both are
//!   switched off/overridden: each batch is padded only to its longest member (≈5x faster for
//!   short texts) and truncation is at 256, as sentence-transformers does.
//! * candle runs its matrix products on rayon. Inference runs inside this embedder's own
//!   rayon pool (default 1 thread) so a background indexer leaves the other cores to hooks.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use tokenizers::{Tokenizer, TruncationParams};

use crate::model_dir::{MINILM, check_model_dir};
use crate::{EmbedError, Embedder, l2_normalize, truncate_utf8};

/// Tuning for [`MiniLmEmbedder`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MiniLmOptions {
    /// Threads for inference: the size of this embedder's own rayon pool. candle splits each
    /// matrix product into `RAYON_NUM_THREADS` (default: physical cores) pieces, which all run
    /// on this pool, so this caps the cores used. 1 keeps a core free for interactive work on
    /// small machines; measured on 2 busy cores, a second thread gained nothing.
    pub threads: usize,
    /// Texts per forward pass. Texts are grouped by length first, so padding stays small.
    pub batch_size: usize,
}

impl Default for MiniLmOptions {
    fn default() -> Self {
        MiniLmOptions {
            threads: 1,
            batch_size: 32,
        }
    }
}

/// Bytes of a text handed to the tokenizer. 256 tokens of ordinary text take 1–2 KB; the cap
/// only bounds tokenizing cost for huge inputs (a 10 MB paste), the model sees 256 tokens.
const MAX_TEXT_BYTES: usize = 32 * 1024;

/// all-MiniLM-L6-v2 on candle.
pub struct MiniLmEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    pool: rayon::ThreadPool,
    options: MiniLmOptions,
}

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("model_id", &MINILM.id)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl MiniLmEmbedder {
    /// Loads the model from an installed model directory (see [`crate::locate_model_dir`])
    /// with default options.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        Self::load_with(dir, &MiniLmOptions::default())
    }

    /// Loads the model with explicit options. Checks that the install finished (manifest,
    /// file sizes) before reading anything; a file that fails to parse is named in the error.
    pub fn load_with(dir: &Path, options: &MiniLmOptions) -> Result<Self, EmbedError> {
        if options.threads == 0 || options.batch_size == 0 {
            return Err(EmbedError::InvalidConfig {
                reason: format!(
                    "MiniLM threads and batch size must be at least 1 (got {} and {})",
                    options.threads, options.batch_size
                ),
            });
        }
        check_model_dir(dir, &MINILM)?;

        let config_path = dir.join("config.json");
        let config_text = std::fs::read_to_string(&config_path)
            .map_err(|e| EmbedError::io("cannot read", &config_path, e))?;
        let config: BertConfig =
            serde_json::from_str(&config_text).map_err(|e| EmbedError::ModelCorrupt {
                path: config_path.clone(),
                reason: e.to_string(),
            })?;
        if config.hidden_size != MINILM.dimension {
            return Err(EmbedError::ModelCorrupt {
                path: config_path,
                reason: format!(
                    "hidden_size is {}, all-MiniLM-L6-v2 has {}",
                    config.hidden_size, MINILM.dimension
                ),
            });
        }

        let tokenizer = load_tokenizer(&dir.join("tokenizer.json"))?;

        let weights_path = dir.join("model.safetensors");
        let corrupt_weights = |reason: String| EmbedError::ModelCorrupt {
            path: weights_path.clone(),
            reason,
        };
        // Read into memory rather than mmap: mmap needs `unsafe`, and the load copies every
        // tensor out of the buffer anyway (the buffer is freed when loading ends).
        let bytes = std::fs::read(&weights_path)
            .map_err(|e| EmbedError::io("cannot read", &weights_path, e))?;
        let var_builder = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &Device::Cpu)
            .map_err(|e| corrupt_weights(e.to_string()))?;
        let model =
            BertModel::load(var_builder, &config).map_err(|e| corrupt_weights(e.to_string()))?;

        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.threads)
            .thread_name(|index| format!("cairn-embed-{index}"))
            .build()
            .map_err(|e| EmbedError::InvalidConfig {
                reason: format!("cannot start {} embedding threads: {e}", options.threads),
            })?;

        Ok(MiniLmEmbedder {
            model,
            tokenizer,
            pool,
            options: options.clone(),
        })
    }

    /// Inputs are truncated to this many tokens (`[CLS]` and `[SEP]` included).
    pub fn max_tokens(&self) -> usize {
        MINILM.max_tokens
    }

    /// The options the model was loaded with.
    pub fn options(&self) -> &MiniLmOptions {
        &self.options
    }

    fn inference_error(&self, error: candle_core::Error) -> EmbedError {
        EmbedError::Inference {
            model: MINILM.id.to_string(),
            reason: error.to_string(),
        }
    }

    fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let text = truncate_utf8(text, MAX_TEXT_BYTES);
        let encoding =
            self.tokenizer
                .encode_fast(text, true)
                .map_err(|e| EmbedError::Tokenize {
                    model: MINILM.id.to_string(),
                    reason: e.to_string(),
                })?;
        Ok(encoding.get_ids().to_vec())
    }

    /// One forward pass over token sequences (each ≤ 256 long); returns unit vectors.
    fn forward(&self, sequences: &[&[u32]]) -> Result<Vec<Vec<f32>>, candle_core::Error> {
        let batch = sequences.len();
        let longest = sequences.iter().map(|ids| ids.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(batch * longest);
        let mut mask = Vec::with_capacity(batch * longest);
        for sequence in sequences {
            ids.extend_from_slice(sequence);
            mask.extend(std::iter::repeat_n(1u32, sequence.len()));
            let padding = longest - sequence.len();
            ids.extend(std::iter::repeat_n(0u32, padding)); // [PAD] is id 0
            mask.extend(std::iter::repeat_n(0u32, padding));
        }
        let device = Device::Cpu;
        let ids = Tensor::from_vec(ids, (batch, longest), &device)?;
        let mask = Tensor::from_vec(mask, (batch, longest), &device)?;
        let token_types = ids.zeros_like()?;

        let hidden = self.model.forward(&ids, &token_types, Some(&mask))?; // (batch, len, 384)
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (batch, len, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (batch, 384)
        let counts = mask.sum(1)?; // (batch, 1); ≥ 2: [CLS] and [SEP] are always there
        let mean = summed.broadcast_div(&counts)?;
        let mut rows: Vec<Vec<f32>> = mean.to_vec2()?;
        for row in &mut rows {
            l2_normalize(row);
        }
        Ok(rows)
    }
}

fn load_tokenizer(path: &Path) -> Result<Tokenizer, EmbedError> {
    let corrupt = |reason: String| EmbedError::ModelCorrupt {
        path: path.to_path_buf(),
        reason,
    };
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| corrupt(e.to_string()))?;
    // The shipped file pads to a fixed 128 tokens; padding is done per batch here instead.
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: MINILM.max_tokens,
            ..TruncationParams::default()
        }))
        .map_err(|e| corrupt(e.to_string()))?;
    Ok(tokenizer)
}

impl Embedder for MiniLmEmbedder {
    fn model_id(&self) -> &str {
        MINILM.id
    }

    fn passage_tokens(&self, text: &str) -> usize {
        // A text the tokenizer refuses is refused again by `embed_batch`; count the bound.
        self.tokenize(text)
            .map_or(self.max_tokens(), |ids| ids.len())
    }

    fn dimension(&self) -> usize {
        MINILM.dimension
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let sequences = texts
            .iter()
            .map(|text| self.tokenize(text))
            .collect::<Result<Vec<_>, _>>()?;
        // Group texts of similar length so a batch pads little; results go back in input order.
        let mut order: Vec<usize> = (0..sequences.len()).collect();
        order.sort_by_key(|&index| std::cmp::Reverse(sequences[index].len()));
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); sequences.len()];
        self.pool.install(|| {
            for chunk in order.chunks(self.options.batch_size) {
                let batch: Vec<&[u32]> = chunk.iter().map(|&i| sequences[i].as_slice()).collect();
                let rows = self.forward(&batch).map_err(|e| self.inference_error(e))?;
                for (&index, row) in chunk.iter().zip(rows) {
                    vectors[index] = row;
                }
            }
            Ok::<(), EmbedError>(())
        })?;
        Ok(vectors)
    }
}
