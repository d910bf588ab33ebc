//! The e5 encoder (the BERT / XLM-R layer stack) over **packed** sequences: the tokens of every
//! text in a batch are rows of one matrix, back to back, with no padding and no mask.
//!
//! Why not candle's `BertEncoder` (what ran before, docs/retrieval.md "Embedding speed"): it
//! pads a batch to its longest text and masks the padding, computes the six projections per
//! layer as separate products, and its GELU evaluates `erf` in f64 one element at a time. Here:
//!
//! * the projections are three products per layer on the whole batch at once (query, key and
//!   value fused into one `hidden × 3·hidden` matrix, the weights transposed once at load so
//!   the right-hand side is contiguous), each a single large GEMM through candle (gemm's
//!   packed AVX2/AVX-512 kernels, on the caller's rayon pool);
//! * attention runs per sequence (its own length, so nothing is padded), heads batched in one
//!   product each for the scores and the mixing;
//! * the element-wise work (bias, residual, LayerNorm, GELU, softmax) is plain Rust compiled
//!   for AVX2/AVX-512 by `multiversion`, with a branch-free `exp` that vectorizes.

use candle_core::{Device, Tensor};
use multiversion::multiversion;
use rayon::prelude::*;

type CandleResult<T> = Result<T, candle_core::Error>;

/// A dense layer `y = x·Wᵀ + b`, with `Wᵀ` stored contiguous (`input × output`).
pub(crate) struct Linear {
    weight_t: Tensor,
    bias: Vec<f32>,
}

impl Linear {
    /// From a row-major `output × input` weight (PyTorch's layout) and its bias.
    pub(crate) fn from_rows(
        weight: Vec<f32>,
        output: usize,
        input: usize,
        bias: Vec<f32>,
    ) -> CandleResult<Linear> {
        let weight_t = Tensor::from_vec(weight, (output, input), &Device::Cpu)?
            .t()?
            .contiguous()?;
        Ok(Linear { weight_t, bias })
    }

    fn input(&self) -> usize {
        self.weight_t.dims()[0]
    }

    /// `rows` rows of `input` floats in, `rows` rows of `output` floats out.
    fn forward(&self, x: &[f32], rows: usize) -> CandleResult<Vec<f32>> {
        let x = Tensor::from_slice(x, (rows, self.input()), &Device::Cpu)?;
        let mut y: Vec<f32> = x.matmul(&self.weight_t)?.flatten_all()?.to_vec1()?;
        add_rows(&mut y, &self.bias);
        Ok(y)
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
            let qkv = layer.qkv.forward(&x, rows)?;
            let context = self.attention(&qkv, lengths)?;
            drop(qkv);
            let mut attended = layer.attention_out.forward(&context, rows)?;
            drop(context);
            residual_norm(&mut attended, &x, &layer.attention_norm, h, self.eps);
            x = attended;
            let mut inner = layer.up.forward(&x, rows)?;
            inner.par_chunks_mut(CHUNK).for_each(gelu);
            let mut output = layer.down.forward(&inner, rows)?;
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
