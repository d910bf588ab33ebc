//! The e5 encoder (the BERT / XLM-R layer stack) over **packed** sequences: the tokens of every
//! text in a batch are rows of one matrix, back to back, with no padding and no mask.
//!
//! Why not candle's `BertEncoder` (what ran before, docs/retrieval.md "Embedding speed"): it
//! pads a batch to its longest text and masks the padding, computes the six projections per
//! layer as separate products, and its GELU evaluates `erf` in f64 one element at a time. Here:
//!
//! * the projections are three products per layer on the whole batch at once (query, key and
//!   value fused into one `hidden × 3·hidden` matrix), each a single large GEMM on the
//!   caller's rayon pool: the int8 one of `vnni/gemm.rs` on AVX-512 VNNI, else candle's (gemm's
//!   packed AVX2/AVX-512 kernels) on weights expanded to f32 and transposed once at load;
//! * attention runs per sequence (its own length, so nothing is padded), heads batched in one
//!   product each for the scores and the mixing;
//! * the element-wise work (bias, residual, LayerNorm, GELU, softmax) is plain Rust compiled
//!   for AVX2/AVX-512 by `multiversion`, with a branch-free `exp` that vectorizes.

use candle_core::{Device, Tensor};
use multiversion::multiversion;
use rayon::prelude::*;

use crate::vnni::{self, Int8Cpu, Int8Weight, Q8Blocks, Q8Rows};

type CandleResult<T> = Result<T, candle_core::Error>;

/// A dense layer `y = x·Wᵀ + b`, its weight held twice: in the form the large passes' kernel
/// reads ([`LargeWeight`]), and the model file's 4-bit blocks ([`Q4Weight`]) for small passes
/// (a query: a few tokens, where a product is bound by reading the weight, not by arithmetic).
pub(crate) struct Linear {
    large: LargeWeight,
    packed: Q4Weight,
    bias: Vec<f32>,
}

/// The weight of a layer's large passes, as its kernel reads it.
enum LargeWeight {
    /// `Wᵀ` in f32, contiguous (`input × output`), for candle's GEMM.
    F32(Tensor),
    /// Repacked from the 4-bit blocks for the int8 GEMM (`vnni/gemm.rs`).
    Int8(Int8Cpu, Int8Weight),
}

/// Which kernel runs the large passes (a batch of stored texts).
#[derive(Clone, Copy, Debug)]
pub(crate) enum LargeKernel {
    /// candle's GEMM on the weights expanded to f32 at load.
    F32,
    /// The int8 GEMM on the repacked 4-bit weights (`vnni::gemm`), on AVX-512 VNNI or AVX2.
    Int8(Int8Cpu),
}

impl LargeKernel {
    /// Int8 when asked for and the CPU has AVX-512 VNNI or AVX2, else f32.
    pub(crate) fn choose(int8: bool, cpu: Option<Int8Cpu>) -> LargeKernel {
        match (int8, cpu) {
            (true, Some(cpu)) => LargeKernel::Int8(cpu),
            _ => LargeKernel::F32,
        }
    }

    /// `"int8-avx512-vnni"`, `"int8-avx2"` or `"f32"`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            LargeKernel::Int8(cpu) => cpu.name(),
            LargeKernel::F32 => "f32",
        }
    }
}

impl Linear {
    /// From the weight's 4-bit blocks (PyTorch's `output × input`), the bias, and the kernel
    /// of the large passes (the f32 expansion is made only for the f32 kernel).
    pub(crate) fn new(
        packed: Q4Weight,
        bias: Vec<f32>,
        kernel: LargeKernel,
    ) -> CandleResult<Linear> {
        let (output, input) = (packed.outputs, packed.inputs);
        let large = match kernel {
            LargeKernel::Int8(cpu) => LargeWeight::Int8(
                cpu,
                Int8Weight::repack(output, input, &packed.scales, &packed.nibbles),
            ),
            LargeKernel::F32 => LargeWeight::F32(
                Tensor::from_vec(packed.expand(), (output, input), &Device::Cpu)?
                    .t()?
                    .contiguous()?,
            ),
        };
        Ok(Linear {
            large,
            packed,
            bias,
        })
    }

    /// `rows` rows of `input` floats in, `rows` rows of `output` floats out: from the 4-bit
    /// weight when `rows ≤ small.rows` (in int8 when `small.int8` and the inputs are whole
    /// 128-input groups), else the large-pass kernel.
    fn forward(&self, x: &[f32], rows: usize, small: SmallPass) -> CandleResult<Vec<f32>> {
        if rows <= small.rows {
            return Ok(match small.int8 {
                Some(cpu) if self.packed.inputs.is_multiple_of(vnni::GROUP) => {
                    self.forward_int8(cpu, x, rows)
                }
                _ => self.forward_small(x, rows),
            });
        }
        match &self.large {
            LargeWeight::Int8(cpu, weight) => {
                let q8 = Q8Blocks::quantize(x, rows, weight.inputs());
                let mut y = vec![0.0f32; rows * weight.outputs()];
                vnni::gemm(*cpu, &q8, weight, &self.bias, &mut y);
                Ok(y)
            }
            LargeWeight::F32(weight_t) => {
                let x = Tensor::from_slice(x, (rows, self.packed.inputs), &Device::Cpu)?;
                let mut y: Vec<f32> = x.matmul(weight_t)?.flatten_all()?.to_vec1()?;
                add_rows(&mut y, &self.bias);
                Ok(y)
            }
        }
    }

    /// The small-pass product: outputs split across the pool in groups of
    /// [`OUTPUTS_PER_TASK`]; each output's weight row is expanded from its 4-bit blocks once
    /// (into a buffer that stays in L1) and dotted with every input row. The 4-bit weights of
    /// the 12 layers are 12 MB (the f32 ones 84 MB, more than this machine's L3), so a query
    /// reads a seventh of the bytes, mostly from cache.
    fn forward_small(&self, x: &[f32], rows: usize) -> Vec<f32> {
        let (inputs, outputs) = (self.packed.inputs, self.packed.outputs);
        debug_assert_eq!(x.len(), rows * inputs);
        // Output-major first (each task writes whole contiguous columns), then transposed.
        let mut columns = vec![0.0f32; outputs * rows];
        if rows > 0 {
            columns
                .par_chunks_mut(rows * OUTPUTS_PER_TASK)
                .enumerate()
                .for_each(|(task, part)| {
                    let mut weight = vec![0.0f32; inputs];
                    for (j, column) in part.chunks_exact_mut(rows).enumerate() {
                        self.packed
                            .expand_row(task * OUTPUTS_PER_TASK + j, &mut weight);
                        dot_rows(x, &weight, column);
                    }
                });
        }
        self.rows_with_bias(&columns, rows)
    }

    /// The small-pass product in int8 on AVX-512 VNNI or AVX2 (`vnni.rs`): the activations
    /// quantized once, outputs split across the pool as in [`Linear::forward_small`].
    fn forward_int8(&self, cpu: Int8Cpu, x: &[f32], rows: usize) -> Vec<f32> {
        let (inputs, outputs) = (self.packed.inputs, self.packed.outputs);
        let q8 = Q8Rows::quantize(x, rows, inputs);
        let mut columns = vec![0.0f32; outputs * rows];
        if rows > 0 {
            let (blocks, bytes) = (inputs / Q4_BLOCK, inputs / 2);
            columns
                .par_chunks_mut(rows * OUTPUTS_PER_TASK)
                .enumerate()
                .for_each(|(task, part)| {
                    let first = task * OUTPUTS_PER_TASK;
                    let count = part.len() / rows;
                    let scales = &self.packed.scales[first * blocks..(first + count) * blocks];
                    let nibbles = &self.packed.nibbles[first * bytes..(first + count) * bytes];
                    vnni::dot_outputs(cpu, &q8, scales, nibbles, part);
                });
        }
        self.rows_with_bias(&columns, rows)
    }

    /// Output-major `columns` (`outputs × rows`) to row-major rows, plus the bias.
    fn rows_with_bias(&self, columns: &[f32], rows: usize) -> Vec<f32> {
        let outputs = self.packed.outputs;
        let mut y = vec![0.0f32; rows * outputs];
        // Columns read in order, each written across the rows (a few streams of writes, where
        // reading each row's outputs `rows` apart cost a twentieth of a query).
        for ((o, column), bias) in columns
            .chunks_exact(rows.max(1))
            .enumerate()
            .zip(&self.bias)
        {
            for (r, value) in column.iter().enumerate() {
                y[r * outputs + o] = value + bias;
            }
        }
        y
    }
}

/// Which kernel a pass's products take ([`Linear::forward`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SmallPass {
    /// Passes of at most this many tokens run on the 4-bit weights.
    pub(crate) rows: usize,
    /// The int8 kernel, when enabled and the CPU has AVX-512 VNNI or AVX2; else the f32 one.
    pub(crate) int8: Option<Int8Cpu>,
}

/// Outputs of a small-pass product computed by one task.
const OUTPUTS_PER_TASK: usize = 32;

/// Weights in the model file's 4-bit blocks (Q4_0: 32 consecutive inputs of one output share
/// a scale; weight `(q − 8) · scale`), row-major by output, scales and nibbles apart.
pub(crate) struct Q4Weight {
    outputs: usize,
    inputs: usize,
    /// `outputs × inputs / 32` scales.
    scales: Vec<f32>,
    /// 16 bytes a block: byte `j` holds input `j` (low nibble) and input `j + 16` (high).
    nibbles: Vec<u8>,
}

/// Inputs that share one scale.
pub(crate) const Q4_BLOCK: usize = 32;

impl Q4Weight {
    /// `scales` and `nibbles` of `outputs × inputs` weights, block after block.
    pub(crate) fn new(
        outputs: usize,
        inputs: usize,
        scales: Vec<f32>,
        nibbles: Vec<u8>,
    ) -> Result<Q4Weight, String> {
        let blocks = outputs * inputs / Q4_BLOCK;
        if !inputs.is_multiple_of(Q4_BLOCK)
            || scales.len() != blocks
            || nibbles.len() != blocks * Q4_BLOCK / 2
        {
            return Err(format!(
                "a {outputs} × {inputs} 4-bit weight needs {blocks} blocks (got {} scales, {} bytes)",
                scales.len(),
                nibbles.len()
            ));
        }
        Ok(Q4Weight {
            outputs,
            inputs,
            scales,
            nibbles,
        })
    }

    /// Stacks weights with the same inputs (query, key and value into one product).
    pub(crate) fn stack(parts: Vec<Q4Weight>) -> Result<Q4Weight, String> {
        let inputs = parts.first().map_or(0, |p| p.inputs);
        if parts.iter().any(|p| p.inputs != inputs) {
            return Err("stacked 4-bit weights must have the same inputs".to_string());
        }
        let mut stacked = Q4Weight {
            outputs: 0,
            inputs,
            scales: Vec::new(),
            nibbles: Vec::new(),
        };
        for part in parts {
            stacked.outputs += part.outputs;
            stacked.scales.extend(part.scales);
            stacked.nibbles.extend(part.nibbles);
        }
        Ok(stacked)
    }

    /// All the weights expanded to f32, row-major (`outputs × inputs`).
    pub(crate) fn expand(&self) -> Vec<f32> {
        let mut dense = vec![0.0f32; self.outputs * self.inputs];
        expand_blocks(&self.scales, &self.nibbles, &mut dense);
        dense
    }

    /// Output `row`'s weights expanded to f32 (the same values as the model's f32 expansion).
    fn expand_row(&self, row: usize, out: &mut [f32]) {
        let blocks = self.inputs / Q4_BLOCK;
        let scales = &self.scales[row * blocks..(row + 1) * blocks];
        let nibbles = &self.nibbles[row * blocks * Q4_BLOCK / 2..(row + 1) * blocks * Q4_BLOCK / 2];
        expand_blocks(scales, nibbles, out);
    }
}

/// Expands 4-bit blocks to f32: `(q − 8) · scale`, low nibbles first.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub(crate) fn expand_blocks(scales: &[f32], nibbles: &[u8], out: &mut [f32]) {
    for ((out, scale), bytes) in out
        .chunks_exact_mut(Q4_BLOCK)
        .zip(scales)
        .zip(nibbles.chunks_exact(Q4_BLOCK / 2))
    {
        let (low, high) = out.split_at_mut(Q4_BLOCK / 2);
        for ((low, high), byte) in low.iter_mut().zip(high.iter_mut()).zip(bytes) {
            *low = (f32::from(byte & 0x0f) - 8.0) * scale;
            *high = (f32::from(byte >> 4) - 8.0) * scale;
        }
    }
}

/// `out[r] = x_r · weight` for every row `r` of `x` (`out.len()` rows of `weight.len()`
/// floats), six rows at a time so each weight chunk loaded serves six products.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn dot_rows(x: &[f32], weight: &[f32], out: &mut [f32]) {
    use multiversion::target::target_cfg_f;
    if cfg!(target_arch = "aarch64") || target_cfg_f!(target_feature = "fma") {
        dot_rows_with::<true>(x, weight, out);
    } else {
        dot_rows_with::<false>(x, weight, out);
    }
}

#[inline(always)]
fn dot_rows_with<const FUSED: bool>(x: &[f32], weight: &[f32], out: &mut [f32]) {
    let width = weight.len();
    let mut blocks = out.chunks_exact_mut(DOT_ROWS);
    let mut at = 0;
    for block in &mut blocks {
        dot_block::<DOT_ROWS, FUSED>(&x[at..at + DOT_ROWS * width], weight, block);
        at += DOT_ROWS * width;
    }
    let rest = blocks.into_remainder();
    let x = &x[at..at + rest.len() * width];
    match rest.len() {
        1 => dot_block::<1, FUSED>(x, weight, rest),
        2 => dot_block::<2, FUSED>(x, weight, rest),
        3 => dot_block::<3, FUSED>(x, weight, rest),
        4 => dot_block::<4, FUSED>(x, weight, rest),
        5 => dot_block::<5, FUSED>(x, weight, rest),
        _ => {}
    }
}

/// Rows of one register block of [`dot_rows`] (six accumulators of 16 lanes: twelve AVX2
/// registers, with the weight chunk and an input chunk, fifteen of sixteen).
const DOT_ROWS: usize = 6;
const LANES: usize = 16;

#[inline(always)]
fn dot_block<const R: usize, const FUSED: bool>(x: &[f32], weight: &[f32], out: &mut [f32]) {
    let width = weight.len();
    for (r, value) in out.iter_mut().enumerate().take(R) {
        let row = &x[r * width..(r + 1) * width];
        let mut sum = [0.0f32; LANES];
        for (x, w) in row.chunks_exact(LANES).zip(weight.chunks_exact(LANES)) {
            for ((sum, x), w) in sum.iter_mut().zip(x).zip(w) {
                *sum = if FUSED {
                    x.mul_add(*w, *sum)
                } else {
                    x * w + *sum
                };
            }
        }
        *value = sum.iter().sum();
    }
}

/// LayerNorm's scale and shift.
pub(crate) struct Norm {
    pub(crate) weight: Vec<f32>,
    pub(crate) bias: Vec<f32>,
}

/// One transformer layer.
pub(crate) struct Layer {
    /// Query, key and value in one product (`hidden → 3·hidden`).
    pub(crate) qkv: Linear,
    pub(crate) attention_out: Linear,
    pub(crate) attention_norm: Norm,
    pub(crate) up: Linear,
    pub(crate) down: Linear,
    pub(crate) output_norm: Norm,
}

pub(crate) struct Encoder {
    pub(crate) layers: Vec<Layer>,
    pub(crate) hidden: usize,
    pub(crate) heads: usize,
    pub(crate) eps: f32,
    /// Which passes run on the 4-bit weights, and on which kernel ([`Linear::forward`]).
    pub(crate) small: SmallPass,
    /// The kernel of the other passes (what every [`Linear`] was built for).
    pub(crate) large: LargeKernel,
}

/// Element-wise chunk handed to one rayon task.
const CHUNK: usize = 32 * 1024;

impl Encoder {
    /// `x`: the embedded tokens of all sequences back to back (`hidden` floats per token),
    /// `lengths`: each sequence's token count. Returns the last hidden states, same layout.
    pub(crate) fn forward(&self, mut x: Vec<f32>, lengths: &[usize]) -> CandleResult<Vec<f32>> {
        let rows: usize = lengths.iter().sum();
        let h = self.hidden;
        debug_assert_eq!(x.len(), rows * h);
        for layer in &self.layers {
            let qkv = layer.qkv.forward(&x, rows, self.small)?;
            let context = self.attention(&qkv, lengths)?;
            drop(qkv);
            let mut attended = layer.attention_out.forward(&context, rows, self.small)?;
            drop(context);
            residual_norm(&mut attended, &x, &layer.attention_norm, h, self.eps);
            x = attended;
            let mut inner = layer.up.forward(&x, rows, self.small)?;
            inner.par_chunks_mut(CHUNK).for_each(gelu);
            let mut output = layer.down.forward(&inner, rows, self.small)?;
            drop(inner);
            residual_norm(&mut output, &x, &layer.output_norm, h, self.eps);
            x = output;
        }
        Ok(x)
    }

    /// Multi-head self-attention of each sequence over itself: `qkv` rows of `3·hidden`
    /// (query, key, value) in, context rows of `hidden` out.
    fn attention(&self, qkv: &[f32], lengths: &[usize]) -> CandleResult<Vec<f32>> {
        let h = self.hidden;
        let rows: usize = lengths.iter().sum();
        let mut context = vec![0.0f32; rows * h];
        let mut parts: Vec<(&[f32], &mut [f32])> = Vec::with_capacity(lengths.len());
        let (mut rest_in, mut rest_out) = (qkv, context.as_mut_slice());
        for &length in lengths {
            let (input, tail_in) = rest_in.split_at(length * 3 * h);
            let (output, tail_out) = std::mem::take(&mut rest_out).split_at_mut(length * h);
            parts.push((input, output));
            (rest_in, rest_out) = (tail_in, tail_out);
        }
        parts
            .into_par_iter()
            .try_for_each(|(input, output)| attend(input, output, h, self.heads))?;
        Ok(context)
    }
}

/// Attention of one sequence (`qkv.len() / (3·hidden)` tokens), all heads.
fn attend(qkv: &[f32], out: &mut [f32], hidden: usize, heads: usize) -> CandleResult<()> {
    let length = qkv.len() / (3 * hidden);
    if length == 0 {
        return Ok(());
    }
    let d = hidden / heads;
    let scale = 1.0 / (d as f32).sqrt();
    let mut q = vec![0.0f32; heads * length * d];
    let mut k_t = vec![0.0f32; heads * d * length];
    let mut v = vec![0.0f32; heads * length * d];
    for (t, row) in qkv.chunks_exact(3 * hidden).enumerate() {
        for head in 0..heads {
            let at = head * d;
            let into = (head * length + t) * d;
            for j in 0..d {
                q[into + j] = row[at + j] * scale;
                k_t[(head * d + j) * length + t] = row[hidden + at + j];
                v[into + j] = row[2 * hidden + at + j];
            }
        }
    }
    let device = Device::Cpu;
    let q = Tensor::from_vec(q, (heads, length, d), &device)?;
    let k_t = Tensor::from_vec(k_t, (heads, d, length), &device)?;
    let mut scores: Vec<f32> = q.matmul(&k_t)?.flatten_all()?.to_vec1()?;
    softmax_rows(&mut scores, length);
    let probabilities = Tensor::from_vec(scores, (heads, length, length), &device)?;
    let v = Tensor::from_vec(v, (heads, length, d), &device)?;
    let mixed: Vec<f32> = probabilities.matmul(&v)?.flatten_all()?.to_vec1()?;
    for head in 0..heads {
        for t in 0..length {
            let from = (head * length + t) * d;
            out[t * hidden + head * d..t * hidden + (head + 1) * d]
                .copy_from_slice(&mixed[from..from + d]);
        }
    }
    Ok(())
}

/// `x[r] += bias` for every row `r`.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn add_rows(x: &mut [f32], bias: &[f32]) {
    for row in x.chunks_exact_mut(bias.len()) {
        for (value, b) in row.iter_mut().zip(bias) {
            *value += b;
        }
    }
}

/// `x = LayerNorm(x + residual)`, row by row.
fn residual_norm(x: &mut [f32], residual: &[f32], norm: &Norm, width: usize, eps: f32) {
    x.par_chunks_mut(width * 64)
        .zip(residual.par_chunks(width * 64))
        .for_each(|(x, residual)| residual_norm_rows(x, residual, norm, width, eps));
}

#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn residual_norm_rows(x: &mut [f32], residual: &[f32], norm: &Norm, width: usize, eps: f32) {
    for (row, residual) in x.chunks_exact_mut(width).zip(residual.chunks_exact(width)) {
        for (value, r) in row.iter_mut().zip(residual) {
            *value += r;
        }
        layer_norm_row(row, &norm.weight, &norm.bias, eps);
    }
}

/// LayerNorm of one row in place (mean and variance over the row, then scale and shift).
#[inline(always)]
pub(crate) fn layer_norm_row(row: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = sum(row) / n;
    let mut squares = [0.0f32; 16];
    let chunks = row.chunks_exact(16);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (s, x) in squares.iter_mut().zip(chunk) {
            *s += (x - mean) * (x - mean);
        }
    }
    let variance = (squares.iter().sum::<f32>()
        + tail.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>())
        / n;
    let inverse = 1.0 / (variance + eps).sqrt();
    for ((value, w), b) in row.iter_mut().zip(weight).zip(bias) {
        *value = (*value - mean) * inverse * w + b;
    }
}

/// A sum in 16 lanes (so it vectorizes).
#[inline(always)]
fn sum(values: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let chunks = values.chunks_exact(16);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (s, x) in lanes.iter_mut().zip(chunk) {
            *s += x;
        }
    }
    lanes.iter().sum::<f32>() + tail.iter().sum::<f32>()
}

/// Softmax of each row of `width` floats, in place.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn softmax_rows(x: &mut [f32], width: usize) {
    for row in x.chunks_exact_mut(width) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for value in row.iter_mut() {
            *value = exp(*value - max);
        }
        let inverse = 1.0 / sum(row);
        for value in row.iter_mut() {
            *value *= inverse;
        }
    }
}

/// GELU (the exact, erf-based one BERT uses), in place.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub(crate) fn gelu(x: &mut [f32]) {
    for value in x.iter_mut() {
        let v = *value;
        *value = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// `e^x` for f32 without branches or float-to-int casts, so it vectorizes (Cephes' `expf`:
/// `2^n · e^r` with `|r| ≤ ln2/2` and a degree-6 polynomial; relative error ~1e-7). `n` is
/// rounded by the 1.5·2²³ trick, and its float's low bits are `n` itself, which gives `2^n`'s
/// exponent field with integer arithmetic. Inputs are clamped to the finite range.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * std::f32::consts::LOG2_E + MAGIC;
    let n = shifted - MAGIC;
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    let exponent = shifted
        .to_bits()
        .wrapping_sub(MAGIC.to_bits())
        .wrapping_add(127)
        << 23;
    e * f32::from_bits(exponent)
}

/// The error function (Abramowitz & Stegun 7.1.26, absolute error ≤ 1.5e-7), branch-free.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let polynomial = ((((1.061_405_4 * t - 1.453_152) * t + 1.421_413_8) * t - 0.284_496_74) * t
        + 0.254_829_6)
        * t;
    let magnitude = 1.0 - polynomial * exp(-a * a);
    magnitude.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_the_standard_library() {
        for i in -2000..=2000 {
            let x = i as f32 * 0.04;
            let (ours, std) = (exp(x), x.exp());
            assert!(
                ((ours - std) / std).abs() < 3e-7,
                "exp({x}) = {ours}, std {std}"
            );
        }
        assert_eq!(exp(-1000.0), exp(-87.0));
        assert!(exp(-87.0) > 0.0 && exp(-87.0) < 2e-38);
    }

    #[test]
    fn erf_and_gelu_match_their_definitions() {
        // erf from its series, in f64, at points where the series converges fast.
        let series = |x: f64| {
            let mut term = x;
            let mut total = x;
            for n in 1..60 {
                term *= -x * x / n as f64;
                total += term / (2 * n + 1) as f64;
            }
            total * 2.0 / std::f64::consts::PI.sqrt()
        };
        for i in -300..=300 {
            let x = i as f32 * 0.01;
            let expected = series(f64::from(x));
            assert!(
                (f64::from(erf(x)) - expected).abs() < 5e-7,
                "erf({x}) = {}, series {expected}",
                erf(x)
            );
        }
        assert!((erf(6.0) - 1.0).abs() < 1e-7 && (erf(-6.0) + 1.0).abs() < 1e-7);
        let mut values = [-3.0f32, -1.0, 0.0, 0.5, 2.0];
        gelu(&mut values);
        let expected = [-0.004_049_7, -0.158_655_3, 0.0, 0.345_731_1, 1.954_499_7];
        for (ours, expected) in values.iter().zip(expected) {
            assert!((ours - expected).abs() < 1e-6, "{ours} vs {expected}");
        }
    }

    #[test]
    fn softmax_rows_sum_to_one_and_keep_order() {
        let mut x = vec![1.0f32, 2.0, 3.0, -50.0, 0.0, 50.0];
        softmax_rows(&mut x, 3);
        let first: f32 = x[..3].iter().sum();
        assert!((first - 1.0).abs() < 1e-6);
        assert!(x[0] < x[1] && x[1] < x[2]);
        assert!((x[2] - 0.665_240_9).abs() < 1e-6);
        assert!((x[5] - 1.0).abs() < 1e-6 && x[3] < 1e-37, "{x:?}");
    }

    /// A deterministic pseudo-random value in [-1, 1).
    fn noise(i: usize) -> f32 {
        let x = (i as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(17);
        (x % 20_000) as f32 / 10_000.0 - 1.0
    }

    /// Random 4-bit weights: the scales, nibbles and their f32 expansion (row-major).
    fn random_q4(outputs: usize, inputs: usize, seed: usize) -> (Q4Weight, Vec<f32>) {
        let blocks = outputs * inputs / Q4_BLOCK;
        let scales: Vec<f32> = (0..blocks)
            .map(|b| 0.01 + noise(seed + b).abs() * 0.05)
            .collect();
        let nibbles: Vec<u8> = (0..blocks * 16)
            .map(|i| ((noise(seed * 7 + i) + 1.0) * 128.0) as u8)
            .collect();
        let mut dense = vec![0.0f32; outputs * inputs];
        expand_blocks(&scales, &nibbles, &mut dense);
        (
            Q4Weight::new(outputs, inputs, scales, nibbles).unwrap(),
            dense,
        )
    }

    #[test]
    fn expand_blocks_puts_low_nibbles_first() {
        let mut nibbles = [0x88u8; 16];
        nibbles[0] = 0x9f; // input 0: 15 − 8 = 7, input 16: 9 − 8 = 1
        let mut out = [0.0f32; 32];
        expand_blocks(&[0.5], &nibbles, &mut out);
        assert_eq!((out[0], out[16], out[1], out[17]), (3.5, 0.5, 0.0, 0.0));
    }

    #[test]
    fn small_products_match_the_gemm_for_every_row_count() {
        let (outputs, inputs) = (96, 160);
        let (packed, dense) = random_q4(outputs, inputs, 3);
        let bias: Vec<f32> = (0..outputs).map(|i| noise(i + 999)).collect();
        let linear = Linear::new(packed, bias.clone(), LargeKernel::F32).unwrap();
        for rows in [0, 1, 2, 5, 6, 7, 13, 40] {
            let x: Vec<f32> = (0..rows * inputs).map(|i| noise(i + 31)).collect();
            let small = linear.forward(&x, rows, f32_pass(usize::MAX)).unwrap();
            let gemm = linear.forward(&x, rows, f32_pass(0)).unwrap();
            assert_eq!(small.len(), rows * outputs);
            for r in 0..rows {
                for o in 0..outputs {
                    let exact: f64 = (0..inputs)
                        .map(|i| f64::from(x[r * inputs + i]) * f64::from(dense[o * inputs + i]))
                        .sum::<f64>()
                        + f64::from(bias[o]);
                    let (a, b) = (small[r * outputs + o], gemm[r * outputs + o]);
                    assert!(
                        (f64::from(a) - exact).abs() < 1e-4,
                        "{rows} rows, [{r}][{o}]: {a} vs {exact}"
                    );
                    assert!((a - b).abs() < 1e-4, "[{r}][{o}]: small {a}, gemm {b}");
                }
            }
        }
    }

    fn f32_pass(rows: usize) -> SmallPass {
        SmallPass { rows, int8: None }
    }

    /// The int8 small pass through `Linear` (quantization, task split, bias, transpose)
    /// against the GEMM on the f32 weight: within 1 % of each output row's norm. Inputs that
    /// are not whole 128-input groups keep the f32 kernel, exactly.
    #[test]
    fn int8_small_products_match_the_gemm() {
        let cpus = Int8Cpu::available();
        if cpus.is_empty() {
            eprintln!(
                "this CPU has neither AVX-512 VNNI nor AVX2: the int8 kernel is not run here"
            );
        }
        for cpu in cpus {
            int8_small_products_match_the_gemm_on(cpu);
        }
    }

    fn int8_small_products_match_the_gemm_on(cpu: Int8Cpu) {
        let int8 = SmallPass {
            rows: usize::MAX,
            int8: Some(cpu),
        };
        for (outputs, inputs) in [(72, 384), (40, 160)] {
            let (packed, _) = random_q4(outputs, inputs, 4);
            let bias: Vec<f32> = (0..outputs).map(|i| noise(i + 99)).collect();
            let linear = Linear::new(packed, bias, LargeKernel::F32).unwrap();
            for rows in [0, 1, 5, 9, 30] {
                let x: Vec<f32> = (0..rows * inputs).map(|i| noise(i + 3)).collect();
                let ours = linear.forward(&x, rows, int8).unwrap();
                let gemm = linear.forward(&x, rows, f32_pass(0)).unwrap();
                let f32_small = linear.forward(&x, rows, f32_pass(usize::MAX)).unwrap();
                assert_eq!(ours.len(), rows * outputs);
                for r in 0..rows {
                    let row = r * outputs..(r + 1) * outputs;
                    if !inputs.is_multiple_of(vnni::GROUP) {
                        assert_eq!(ours[row.clone()], f32_small[row]);
                        continue;
                    }
                    let error: f32 = ours[row.clone()]
                        .iter()
                        .zip(&gemm[row.clone()])
                        .map(|(a, b)| (a - b) * (a - b))
                        .sum();
                    let norm: f32 = gemm[row].iter().map(|b| b * b).sum();
                    let relative = (error / norm).sqrt();
                    assert!(
                        relative < 0.01,
                        "{}: {rows} rows, row {r}: {relative}",
                        cpu.name()
                    );
                }
            }
        }
    }

    /// The int8 large pass through `Linear` (quantization, repacked weights, bias) against
    /// the f32 GEMM of the same 4-bit weights: within 1 % of each output row's norm, on row
    /// counts that take the tile split (few rows) and the row split (many), outputs not a
    /// multiple of a tile.
    #[test]
    fn int8_large_products_match_the_f32_gemm() {
        for cpu in Int8Cpu::available() {
            int8_large_products_match_the_f32_gemm_on(cpu);
        }
    }

    fn int8_large_products_match_the_f32_gemm_on(cpu: Int8Cpu) {
        let (outputs, inputs) = (88, 384);
        let (packed, _) = random_q4(outputs, inputs, 8);
        let (same, _) = random_q4(outputs, inputs, 8);
        let bias: Vec<f32> = (0..outputs).map(|i| noise(i + 7)).collect();
        let int8 = Linear::new(packed, bias.clone(), LargeKernel::Int8(cpu)).unwrap();
        let f32 = Linear::new(same, bias, LargeKernel::F32).unwrap();
        for rows in [1, 3, 17, 64, 133, 300] {
            let x: Vec<f32> = (0..rows * inputs).map(|i| noise(i + 11) * 2.0).collect();
            let ours = int8.forward(&x, rows, f32_pass(0)).unwrap();
            let theirs = f32.forward(&x, rows, f32_pass(0)).unwrap();
            assert_eq!(ours.len(), rows * outputs);
            for (r, (ours, theirs)) in ours
                .chunks_exact(outputs)
                .zip(theirs.chunks_exact(outputs))
                .enumerate()
            {
                let error: f32 = ours
                    .iter()
                    .zip(theirs)
                    .map(|(a, b)| (a - b) * (a - b))
                    .sum();
                let norm: f32 = theirs.iter().map(|b| b * b).sum();
                let relative = (error / norm).sqrt();
                assert!(relative < 0.01, "{rows} rows, row {r}: {relative}");
            }
        }
    }

    /// Without AVX-512 VNNI or AVX2 (or with int8 turned off) the large passes take the f32
    /// GEMM.
    #[test]
    fn the_large_kernel_is_int8_only_when_asked_and_supported() {
        assert_eq!(LargeKernel::choose(true, None).name(), "f32");
        assert_eq!(LargeKernel::choose(false, None).name(), "f32");
        for cpu in Int8Cpu::available() {
            assert_eq!(LargeKernel::choose(true, Some(cpu)).name(), cpu.name());
            assert_eq!(LargeKernel::choose(false, Some(cpu)).name(), "f32");
        }
    }

    #[test]
    fn stacked_weights_keep_their_rows() {
        let (a, dense_a) = random_q4(32, 64, 1);
        let (b, dense_b) = random_q4(64, 64, 2);
        let stacked = Q4Weight::stack(vec![a, b]).unwrap();
        assert_eq!((stacked.outputs, stacked.inputs), (96, 64));
        let mut row = vec![0.0f32; 64];
        stacked.expand_row(31, &mut row);
        assert_eq!(row, dense_a[31 * 64..32 * 64]);
        stacked.expand_row(32, &mut row);
        assert_eq!(row, dense_b[..64]);
        let (c, _) = random_q4(32, 32, 3);
        assert!(Q4Weight::stack(vec![stacked, c]).is_err());
        assert!(Q4Weight::new(2, 33, vec![0.0; 2], vec![0; 32]).is_err());
    }

    #[test]
    fn layer_norm_centers_and_scales() {
        let mut row: Vec<f32> = (0..40).map(|i| i as f32).collect();
        let (weight, bias) = (vec![2.0f32; 40], vec![1.0f32; 40]);
        layer_norm_row(&mut row, &weight, &bias, 0.0);
        let mean = row.iter().sum::<f32>() / 40.0;
        let variance = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / 40.0;
        assert!((mean - 1.0).abs() < 1e-5, "{mean}");
        assert!((variance - 4.0).abs() < 1e-4, "{variance}");
    }
}
