//! The large-pass product in int8 on AVX-512 VNNI (issue 19): `y = x·Wᵀ + b` for many rows
//! (a batch of stored texts, thousands of tokens), what the encoder's projections run on when
//! the CPU has `vpdpbusd`; candle's f32 GEMM stays the fallback and the reference.
//!
//! * **Activations** are quantized once per product to int8 per 32-input block with one f32
//!   scale (Q8_0, as in [`super::Q8Rows`]), row-major in input order ([`Q8Blocks`]), with
//!   `−8 ·` each block's sum kept beside its scale.
//! * **Weights** are repacked once at load from the model's Q4_0 blocks ([`Int8Weight`]):
//!   tiles of 16 outputs, and per tile, block and 4-input step one 64-byte register of the
//!   16 outputs' four 4-bit values (0–15, one per byte), so the micro-kernel streams each tile
//!   contiguously. Bytes instead of nibbles: twice the 4-bit size (21 MB for the 12 layers,
//!   a quarter of the f32 expansion it replaces) and no unpacking in the inner loop.
//! * **The micro-kernel** keeps a register block of [`ROWS`] rows × [`TILES`] tiles: per
//!   4-input step, one weight register per tile serves every row, and one broadcast of a
//!   row's four activation bytes serves every tile (`vpdpbusd`: unsigned weight bytes ×
//!   signed activation bytes, four products summed per 32-bit lane, lane = output). Each
//!   block's integer sums start at the row's `−8 · Σa` (so `Σ (w − 8)·a` comes out with no
//!   per-weight subtraction), then are converted to f32 and scaled by the weight's and the
//!   row's block scales.
//! * **Threads**: tasks of [`CHUNK_ROWS`] rows on the caller's rayon pool (each writes whole
//!   output rows); passes of fewer rows split the output tiles instead.

use std::ops::Range;

use multiversion::multiversion;
use rayon::prelude::*;

use super::{Int8Cpu, Vnni};

/// Inputs that share one scale (Q4_0's and Q8_0's block).
const BLOCK: usize = 32;
/// Outputs of one tile: the 32-bit lanes of a 512-bit register.
const TILE: usize = 16;
/// Bytes of one tile's weights for one 4-input step (16 outputs × 4 inputs).
const STEP_BYTES: usize = TILE * 4;
/// Steps of one block.
const STEPS: usize = BLOCK / 4;
/// Rows of a register block.
const ROWS: usize = 4;
/// Tiles of a register block: `ROWS × TILES` integer and as many f32 accumulators, the
/// weight registers and the temporaries, well inside AVX-512's 32 registers.
const TILES: usize = 2;
/// Rows of one task.
const CHUNK_ROWS: usize = 32;

/// Rows of activations quantized to int8 per 32-input block: values row-major in input
/// order; per row and block a scale and `−8 ·` the block's sum.
pub(crate) struct Q8Blocks {
    rows: usize,
    blocks: usize,
    values: Vec<i8>,
    scales: Vec<f32>,
    offsets: Vec<i32>,
}

impl Q8Blocks {
    /// `rows` rows of `inputs` floats (`inputs` a multiple of 32), quantized on the caller's
    /// rayon pool.
    pub(crate) fn quantize(x: &[f32], rows: usize, inputs: usize) -> Q8Blocks {
        assert!(inputs.is_multiple_of(BLOCK) && x.len() == rows * inputs);
        let blocks = inputs / BLOCK;
        let mut q8 = Q8Blocks {
            rows,
            blocks,
            values: vec![0; rows * inputs],
            scales: vec![0.0; rows * blocks],
            offsets: vec![0; rows * blocks],
        };
        if rows > 0 {
            let chunk = CHUNK_ROWS;
            q8.values
                .par_chunks_mut(chunk * inputs)
                .zip(q8.scales.par_chunks_mut(chunk * blocks))
                .zip(q8.offsets.par_chunks_mut(chunk * blocks))
                .zip(x.par_chunks(chunk * inputs))
                .for_each(|(((values, scales), offsets), x)| match Vnni::detect() {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: the CPU has AVX-512 F/BW/VNNI; the slices are whole blocks
                    // (one scale and offset each), as `quantize` laid them out.
                    #[allow(unsafe_code)]
                    Some(_) => unsafe { x86::quantize_blocks(x, values, scales, offsets) },
                    _ => quantize_blocks(x, values, scales, offsets),
                });
        }
        q8
    }

    /// Row `row` as the kernel sees it, back in f32 (for tests).
    #[cfg(test)]
    pub(crate) fn dequantized(&self, row: usize) -> Vec<f32> {
        let inputs = self.blocks * BLOCK;
        self.values[row * inputs..(row + 1) * inputs]
            .iter()
            .enumerate()
            .map(|(i, &q)| f32::from(q) * self.scales[row * self.blocks + i / BLOCK])
            .collect()
    }
}

/// Q8_0 of consecutive 32-float blocks: `scale = max|x| / 127`, `q = round(x / scale)`.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn quantize_blocks(x: &[f32], values: &mut [i8], scales: &mut [f32], offsets: &mut [i32]) {
    for (((x, values), scale), offset) in x
        .chunks_exact(BLOCK)
        .zip(values.chunks_exact_mut(BLOCK))
        .zip(scales.iter_mut())
        .zip(offsets.iter_mut())
    {
        let largest = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        *scale = largest / 127.0;
        let inverse = if largest > 0.0 { 127.0 / largest } else { 0.0 };
        let mut sum = 0i32;
        for (q, v) in values.iter_mut().zip(x) {
            let rounded = (v * inverse).round_ties_even().clamp(-127.0, 127.0) as i8;
            *q = rounded;
            sum += i32::from(rounded);
        }
        *offset = -8 * sum;
    }
}

/// A dense weight repacked from its 4-bit blocks for [`gemm`]: per tile of 16 outputs, per
/// 32-input block, per 4-input step, 16 lanes of 4 bytes (the 4-bit values 0–15, input order
/// within the lane); per tile and block the 16 outputs' scales. Outputs past the last whole
/// tile are padded with value 8 and scale 0 (weight 0).
pub(crate) struct Int8Weight {
    outputs: usize,
    inputs: usize,
    tiles: usize,
    values: Vec<u8>,
    scales: Vec<f32>,
}

impl Int8Weight {
    /// From `outputs × inputs` weights in the model file's Q4_0 blocks: `scales` (one per
    /// block) and `nibbles` (16 bytes a block: byte `j` holds input `j` low, `j + 16` high).
    pub(crate) fn repack(
        outputs: usize,
        inputs: usize,
        scales: &[f32],
        nibbles: &[u8],
    ) -> Int8Weight {
        let blocks = inputs / BLOCK;
        assert!(
            inputs.is_multiple_of(BLOCK)
                && scales.len() == outputs * blocks
                && nibbles.len() == outputs * blocks * BLOCK / 2
        );
        let tiles = outputs.div_ceil(TILE);
        let mut packed = Int8Weight {
            outputs,
            inputs,
            tiles,
            values: vec![8; tiles * blocks * STEPS * STEP_BYTES],
            scales: vec![0.0; tiles * blocks * TILE],
        };
        for output in 0..outputs {
            let (tile, lane) = (output / TILE, output % TILE);
            for block in 0..blocks {
                let at = output * blocks + block;
                packed.scales[(tile * blocks + block) * TILE + lane] = scales[at];
                let bytes = &nibbles[at * BLOCK / 2..(at + 1) * BLOCK / 2];
                for input in 0..BLOCK {
                    let value = if input < BLOCK / 2 {
                        bytes[input] & 0x0f
                    } else {
                        bytes[input - BLOCK / 2] >> 4
                    };
                    let step = (tile * blocks + block) * STEPS + input / 4;
                    packed.values[step * STEP_BYTES + lane * 4 + input % 4] = value;
                }
            }
        }
        packed
    }

    pub(crate) fn outputs(&self) -> usize {
        self.outputs
    }

    pub(crate) fn inputs(&self) -> usize {
        self.inputs
    }
}

/// `out[r][o] = Σ_i x[r][i] · w[o][i] + bias[o]`, `out` row-major (`x.rows × w.outputs`), on
/// the caller's rayon pool.
pub(crate) fn gemm(cpu: Int8Cpu, x: &Q8Blocks, w: &Int8Weight, bias: &[f32], out: &mut [f32]) {
    let (rows, outputs) = (x.rows, w.outputs);
    assert!(x.blocks * BLOCK == w.inputs && bias.len() == outputs && out.len() == rows * outputs);
    if rows == 0 || outputs == 0 {
        return;
    }
    let threads = rayon::current_num_threads();
    if rows >= CHUNK_ROWS * threads {
        out.par_chunks_mut(CHUNK_ROWS * outputs)
            .enumerate()
            .for_each(|(chunk, out)| {
                let first = chunk * CHUNK_ROWS;
                let count = out.len() / outputs;
                panel(
                    cpu,
                    x,
                    first..first + count,
                    w,
                    0..w.tiles,
                    bias,
                    out,
                    outputs,
                );
            });
        return;
    }
    // Few rows (a query, a short record): the tiles split across the pool, each task into
    // its own buffer, copied into the output rows after.
    let per_task = w.tiles.div_ceil(threads * 4).max(1);
    let parts: Vec<(Range<usize>, Vec<f32>)> = (0..w.tiles.div_ceil(per_task))
        .into_par_iter()
        .map(|task| {
            let tiles = task * per_task..((task + 1) * per_task).min(w.tiles);
            let width = tiles.len() * TILE;
            let mut part = vec![0.0f32; rows * width];
            panel(cpu, x, 0..rows, w, tiles.clone(), bias, &mut part, width);
            (tiles, part)
        })
        .collect();
    for (tiles, part) in parts {
        let width = tiles.len() * TILE;
        let first = tiles.start * TILE;
        let count = (tiles.end * TILE).min(outputs) - first;
        for (row, part) in out.chunks_exact_mut(outputs).zip(part.chunks_exact(width)) {
            row[first..first + count].copy_from_slice(&part[..count]);
        }
    }
}

/// Rows `rows` of `x` times the tiles `tiles` of `w`, plus the bias, into `out`: row `r`
/// (from 0) at `out[r · stride..]`, column 0 the first output of `tiles`, only real outputs
/// written.
#[allow(clippy::too_many_arguments, unsafe_code)]
fn panel(
    cpu: Int8Cpu,
    x: &Q8Blocks,
    rows: Range<usize>,
    w: &Int8Weight,
    tiles: Range<usize>,
    bias: &[f32],
    out: &mut [f32],
    stride: usize,
) {
    let columns = (tiles.end * TILE)
        .min(w.outputs)
        .saturating_sub(tiles.start * TILE);
    assert!(
        rows.end <= x.rows
            && tiles.end <= w.tiles
            && x.blocks * BLOCK == w.inputs
            && bias.len() == w.outputs
            && columns <= stride
            && (rows.is_empty() || out.len() >= (rows.len() - 1) * stride + columns)
    );
    // SAFETY: a `Vnni` (an `Avx2`) exists only when the CPU has every feature `x86::panel`
    // (`avx2::panel`) is compiled for; the ranges and lengths the kernel reads and writes by
    // were checked above.
    match cpu {
        #[cfg(target_arch = "x86_64")]
        Int8Cpu::Vnni(_) => unsafe { x86::panel(x, rows, w, tiles, bias, out, stride) },
        #[cfg(target_arch = "x86_64")]
        Int8Cpu::Avx2(_) => unsafe { avx2::panel(x, rows, w, tiles, bias, out, stride) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("no int8 CPU is detected off x86-64"),
    }
}

/// The same products on AVX2 (a CPU without AVX-512 VNNI): a tile's 16 outputs are two
/// 256-bit halves, and each `vpdpbusd` becomes `vpmaddubsw` (unsigned weight bytes × signed
/// activation bytes, neighbouring pairs summed into 16-bit lanes: at most 2 · 15 · 127 = 3,810)
/// added up in 16 bits over a block's 8 steps (at most 30,480: nothing wraps), then one
/// `vpmaddwd` by ones per block into the 32-bit lanes `vpdpbusd` fills — the same integers,
/// then the same f32 operations in the same order: the same bits as the VNNI kernel.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx2 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use super::{BLOCK, Int8Weight, Q8Blocks, STEP_BYTES, STEPS, TILE};

    /// Rows of a register block: 2 × 2 halves of 16-bit sums and as many f32 sums, the two
    /// weight halves, a broadcast and the ones, inside AVX2's 16 registers.
    const ROWS: usize = 2;

    /// See [`super::panel`]; the caller checked the ranges against `x`, `w`, `bias`, `out`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn panel(
        x: &Q8Blocks,
        rows: Range<usize>,
        w: &Int8Weight,
        tiles: Range<usize>,
        bias: &[f32],
        out: &mut [f32],
        stride: usize,
    ) {
        let blocks = x.blocks;
        let inputs = blocks * BLOCK;
        for tile in tiles.clone() {
            let values = w.values[tile * blocks * STEPS * STEP_BYTES..].as_ptr();
            let scales = w.scales[tile * blocks * TILE..].as_ptr();
            let real = (w.outputs - tile * TILE).min(TILE);
            let column = (tile - tiles.start) * TILE;
            let mut row = rows.start;
            while row < rows.end {
                let n = ROWS.min(rows.end - row);
                let a = x.values[row * inputs..].as_ptr();
                let a_scales = x.scales[row * blocks..].as_ptr();
                let a_offsets = x.offsets[row * blocks..].as_ptr();
                let mut sums = [[0.0f32; TILE]; ROWS];
                // SAFETY: rows `row..row + n` are rows of `x`, `tile` a tile of `w`.
                unsafe {
                    if n == ROWS {
                        block_sums::<ROWS>(
                            a, inputs, a_scales, a_offsets, blocks, values, scales, &mut sums,
                        );
                    } else {
                        block_sums::<1>(
                            a, inputs, a_scales, a_offsets, blocks, values, scales, &mut sums,
                        );
                    }
                }
                for (r, sums) in sums.iter().take(n).enumerate() {
                    let at = (row - rows.start + r) * stride + column;
                    for (o, (out, sum)) in out[at..at + real].iter_mut().zip(sums).enumerate() {
                        *out = sum + bias[tile * TILE + o];
                    }
                }
                row += n;
            }
        }
    }

    /// `R` rows × one tile: per block the integer dots, scaled into f32 sums (`sums[r]`, the
    /// tile's 16 outputs, without the bias).
    ///
    /// SAFETY (caller): `R` rows of `inputs` bytes at `a` with `blocks` scales and offsets each
    /// at `a_scales` / `a_offsets`, and one tile's `blocks` packed blocks at `values` and
    /// scales at `scales`.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    #[inline]
    unsafe fn block_sums<const R: usize>(
        a: *const i8,
        inputs: usize,
        a_scales: *const f32,
        a_offsets: *const i32,
        blocks: usize,
        values: *const u8,
        scales: *const f32,
        sums: &mut [[f32; TILE]; ROWS],
    ) {
        let ones = _mm256_set1_epi16(1);
        let zero = _mm256_setzero_ps();
        let mut acc = [[zero; 2]; R];
        for block in 0..blocks {
            let mut small = [[_mm256_setzero_si256(); 2]; R];
            // SAFETY (every read below): inside the rows, the tile and the block `block`.
            let w = unsafe { values.add(block * STEPS * STEP_BYTES) };
            for step in 0..STEPS {
                let (k0, k1) = unsafe {
                    (
                        _mm256_loadu_si256(w.add(step * STEP_BYTES).cast()),
                        _mm256_loadu_si256(w.add(step * STEP_BYTES + 32).cast()),
                    )
                };
                for (r, small) in small.iter_mut().enumerate() {
                    let four = unsafe {
                        a.add(r * inputs + block * BLOCK + step * 4)
                            .cast::<i32>()
                            .read_unaligned()
                    };
                    let b = _mm256_set1_epi32(four);
                    small[0] = _mm256_add_epi16(small[0], _mm256_maddubs_epi16(k0, b));
                    small[1] = _mm256_add_epi16(small[1], _mm256_maddubs_epi16(k1, b));
                }
            }
            let (c0, c1) = unsafe {
                (
                    _mm256_loadu_ps(scales.add(block * TILE)),
                    _mm256_loadu_ps(scales.add(block * TILE + 8)),
                )
            };
            for (r, (acc, small)) in acc.iter_mut().zip(&small).enumerate() {
                let offset = _mm256_set1_epi32(unsafe { *a_offsets.add(r * blocks + block) });
                let row = _mm256_set1_ps(unsafe { *a_scales.add(r * blocks + block) });
                for (h, c) in [c0, c1].into_iter().enumerate() {
                    let dot = _mm256_add_epi32(offset, _mm256_madd_epi16(small[h], ones));
                    acc[h] =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(c, row), acc[h]);
                }
            }
        }
        for (sums, acc) in sums.iter_mut().zip(&acc) {
            // SAFETY: 16 floats, two stores of 8.
            unsafe {
                _mm256_storeu_ps(sums.as_mut_ptr(), acc[0]);
                _mm256_storeu_ps(sums.as_mut_ptr().add(8), acc[1]);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use super::{BLOCK, Int8Weight, Q8Blocks, ROWS, STEP_BYTES, STEPS, TILE, TILES};

    /// See [`super::panel`]; the caller checked the ranges against `x`, `w`, `bias`, `out`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn panel(
        x: &Q8Blocks,
        rows: Range<usize>,
        w: &Int8Weight,
        tiles: Range<usize>,
        bias: &[f32],
        out: &mut [f32],
        stride: usize,
    ) {
        let blocks = x.blocks;
        let inputs = blocks * BLOCK;
        let mut tile = tiles.start;
        while tile < tiles.end {
            let count = TILES.min(tiles.end - tile);
            let block = Weights {
                values: w.values[tile * blocks * STEPS * STEP_BYTES..].as_ptr(),
                values_stride: blocks * STEPS * STEP_BYTES,
                scales: w.scales[tile * blocks * TILE..].as_ptr(),
                scales_stride: blocks * TILE,
                bias: bias[tile * TILE..].as_ptr(),
                outputs: w.outputs - tile * TILE,
            };
            let column = (tile - tiles.start) * TILE;
            let mut row = rows.start;
            while row < rows.end {
                let n = ROWS.min(rows.end - row);
                let a = Activations {
                    values: x.values[row * inputs..].as_ptr(),
                    stride: inputs,
                    scales: x.scales[row * blocks..].as_ptr(),
                    offsets: x.offsets[row * blocks..].as_ptr(),
                    blocks,
                };
                let at = out[(row - rows.start) * stride + column..].as_mut_ptr();
                // SAFETY: rows `row..row + n` are rows of `x`, tiles `tile..tile + count`
                // tiles of `w`, and the outputs written are inside `out` (checked by the
                // caller: every real output of those tiles, row by row at `stride`).
                unsafe {
                    match (n, count) {
                        (4, 2) => micro_4x2(&a, &block, at, stride),
                        (3, 2) => micro::<3, 2>(&a, &block, at, stride),
                        (2, 2) => micro::<2, 2>(&a, &block, at, stride),
                        (1, 2) => micro::<1, 2>(&a, &block, at, stride),
                        (4, _) => micro::<4, 1>(&a, &block, at, stride),
                        (3, _) => micro::<3, 1>(&a, &block, at, stride),
                        (2, _) => micro::<2, 1>(&a, &block, at, stride),
                        _ => micro::<1, 1>(&a, &block, at, stride),
                    }
                }
                row += n;
            }
            tile += count;
        }
    }

    /// The first row of a register block: its values (`stride` bytes a row), and per row
    /// `blocks` scales and offsets.
    struct Activations {
        values: *const i8,
        stride: usize,
        scales: *const f32,
        offsets: *const i32,
        blocks: usize,
    }

    /// The first tile of a register block: its packed values and scales (the next tile
    /// `*_stride` further), its bias, and the outputs from its first on (fewer than 16 per
    /// tile only in the last).
    struct Weights {
        values: *const u8,
        values_stride: usize,
        scales: *const f32,
        scales_stride: usize,
        bias: *const f32,
        outputs: usize,
    }

    /// [`micro`] for 4 rows × 2 tiles (every register block but the last rows of a pass),
    /// written out so the 8 integer and 8 f32 accumulators stay in registers (the generic
    /// one's arrays were kept on the stack: a third of the time spent on spills).
    ///
    /// SAFETY (caller): as [`micro`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn micro_4x2(a: &Activations, w: &Weights, out: *mut f32, stride: usize) {
        let blocks = a.blocks;
        let zero = _mm512_setzero_ps();
        let (mut s00, mut s01, mut s10, mut s11) = (zero, zero, zero, zero);
        let (mut s20, mut s21, mut s30, mut s31) = (zero, zero, zero, zero);
        for block in 0..blocks {
            // SAFETY (every read below): inside rows `0..4` of `a` and tiles `0..2` of `w`,
            // block `block < blocks`, step `< STEPS`.
            let offset =
                |r: usize| _mm512_set1_epi32(unsafe { *a.offsets.add(r * blocks + block) });
            let (o0, o1, o2, o3) = (offset(0), offset(1), offset(2), offset(3));
            let (mut d00, mut d01, mut d10, mut d11) = (o0, o0, o1, o1);
            let (mut d20, mut d21, mut d30, mut d31) = (o2, o2, o3, o3);
            let w0 = unsafe { w.values.add(block * STEPS * STEP_BYTES) };
            let w1 = unsafe { w0.add(w.values_stride) };
            let x0 = unsafe { a.values.add(block * BLOCK) };
            let (x1, x2, x3) =
                unsafe { (x0.add(a.stride), x0.add(2 * a.stride), x0.add(3 * a.stride)) };
            for step in 0..STEPS {
                let (k0, k1) = unsafe {
                    (
                        _mm512_loadu_si512(w0.add(step * STEP_BYTES).cast()),
                        _mm512_loadu_si512(w1.add(step * STEP_BYTES).cast()),
                    )
                };
                let four = |x: *const i8| {
                    _mm512_set1_epi32(unsafe { x.add(step * 4).cast::<i32>().read_unaligned() })
                };
                let b0 = four(x0);
                d00 = _mm512_dpbusd_epi32(d00, k0, b0);
                d01 = _mm512_dpbusd_epi32(d01, k1, b0);
                let b1 = four(x1);
                d10 = _mm512_dpbusd_epi32(d10, k0, b1);
                d11 = _mm512_dpbusd_epi32(d11, k1, b1);
                let b2 = four(x2);
                d20 = _mm512_dpbusd_epi32(d20, k0, b2);
                d21 = _mm512_dpbusd_epi32(d21, k1, b2);
                let b3 = four(x3);
                d30 = _mm512_dpbusd_epi32(d30, k0, b3);
                d31 = _mm512_dpbusd_epi32(d31, k1, b3);
            }
            let (c0, c1) = unsafe {
                (
                    _mm512_loadu_ps(w.scales.add(block * TILE)),
                    _mm512_loadu_ps(w.scales.add(w.scales_stride + block * TILE)),
                )
            };
            let scale = |r: usize| _mm512_set1_ps(unsafe { *a.scales.add(r * blocks + block) });
            let f = |sum, dot, c, row| {
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(c, row), sum)
            };
            let r0 = scale(0);
            s00 = f(s00, d00, c0, r0);
            s01 = f(s01, d01, c1, r0);
            let r1 = scale(1);
            s10 = f(s10, d10, c0, r1);
            s11 = f(s11, d11, c1, r1);
            let r2 = scale(2);
            s20 = f(s20, d20, c0, r2);
            s21 = f(s21, d21, c1, r2);
            let r3 = scale(3);
            s30 = f(s30, d30, c0, r3);
            s31 = f(s31, d31, c1, r3);
        }
        let sums = [[s00, s01], [s10, s11], [s20, s21], [s30, s31]];
        // SAFETY: as the caller's contract of `micro`.
        unsafe { store::<4, 2>(&sums, w, out, stride) };
    }

    /// The bias added to `R × T` sums, the real outputs stored at `out` (row `r` at `out +
    /// r · stride`).
    ///
    /// SAFETY (caller): `out` can take `R` rows of `min(16·T, w.outputs)` floats at `stride`,
    /// and `w.bias` holds `w.outputs` floats.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn store<const R: usize, const T: usize>(
        sums: &[[__m512; T]; R],
        w: &Weights,
        out: *mut f32,
        stride: usize,
    ) {
        for t in 0..T {
            let real = w.outputs.saturating_sub(t * TILE).min(TILE);
            let mask: __mmask16 = if real == TILE {
                0xffff
            } else {
                (1u16 << real) - 1
            };
            // SAFETY: the mask covers only real outputs, inside the bias and `out`.
            let bias = unsafe { _mm512_maskz_loadu_ps(mask, w.bias.add(t * TILE)) };
            for (r, sums) in sums.iter().enumerate() {
                let value = _mm512_add_ps(sums[t], bias);
                unsafe { _mm512_mask_storeu_ps(out.add(r * stride + t * TILE), mask, value) };
            }
        }
    }

    /// `R` rows × `T` tiles: integer dot per block, scaled into f32 sums; bias added and the
    /// real outputs stored at `out` (row `r` at `out + r · stride`).
    ///
    /// SAFETY (caller): `R` rows of `a` and `T` tiles of `w` exist, and `out` can take `R`
    /// rows of `min(16·T, w.outputs)` floats at `stride`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn micro<const R: usize, const T: usize>(
        a: &Activations,
        w: &Weights,
        out: *mut f32,
        stride: usize,
    ) {
        let blocks = a.blocks;
        let mut sums = [[_mm512_setzero_ps(); T]; R];
        for block in 0..blocks {
            let mut dots = [[_mm512_setzero_si512(); T]; R];
            for (r, dots) in dots.iter_mut().enumerate() {
                // SAFETY (every read below): inside rows `0..R` of `a` and tiles `0..T` of
                // `w`, block `block < blocks`, step `< STEPS`.
                let offset = unsafe { *a.offsets.add(r * blocks + block) };
                *dots = [_mm512_set1_epi32(offset); T];
            }
            let values = unsafe { w.values.add(block * STEPS * STEP_BYTES) };
            let inputs = unsafe { a.values.add(block * BLOCK) };
            for step in 0..STEPS {
                let mut weight = [_mm512_setzero_si512(); T];
                for (t, weight) in weight.iter_mut().enumerate() {
                    let at = unsafe { values.add(t * w.values_stride + step * STEP_BYTES) };
                    *weight = unsafe { _mm512_loadu_si512(at.cast()) };
                }
                for (r, dots) in dots.iter_mut().enumerate() {
                    let at = unsafe { inputs.add(r * a.stride + step * 4) };
                    let four = unsafe { at.cast::<i32>().read_unaligned() };
                    let activation = _mm512_set1_epi32(four);
                    for (dot, weight) in dots.iter_mut().zip(&weight) {
                        *dot = _mm512_dpbusd_epi32(*dot, *weight, activation);
                    }
                }
            }
            let mut scale = [_mm512_setzero_ps(); T];
            for (t, scale) in scale.iter_mut().enumerate() {
                let at = unsafe { w.scales.add(t * w.scales_stride + block * TILE) };
                *scale = unsafe { _mm512_loadu_ps(at) };
            }
            for (r, (sums, dots)) in sums.iter_mut().zip(&dots).enumerate() {
                let row_scale = _mm512_set1_ps(unsafe { *a.scales.add(r * blocks + block) });
                for ((sum, dot), scale) in sums.iter_mut().zip(dots).zip(&scale) {
                    let both = _mm512_mul_ps(*scale, row_scale);
                    *sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(*dot), both, *sum);
                }
            }
        }
        // SAFETY: the caller's contract.
        unsafe { store::<R, T>(&sums, w, out, stride) };
    }

    /// [`super::quantize_blocks`] in AVX-512: per 32-float block, the largest magnitude, the
    /// values scaled and rounded to nearest-even (`vcvtps2dq`), narrowed with saturation.
    ///
    /// SAFETY (caller): the CPU has AVX-512 F/BW; `x`, `values` hold whole blocks, `scales`
    /// and `offsets` one entry per block.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn quantize_blocks(
        x: &[f32],
        values: &mut [i8],
        scales: &mut [f32],
        offsets: &mut [i32],
    ) {
        for (((x, values), scale), offset) in x
            .chunks_exact(BLOCK)
            .zip(values.chunks_exact_mut(BLOCK))
            .zip(scales.iter_mut())
            .zip(offsets.iter_mut())
        {
            // SAFETY: each block is 32 floats and 32 bytes: two loads, two 16-byte stores.
            let (low, high) = unsafe {
                (
                    _mm512_loadu_ps(x.as_ptr()),
                    _mm512_loadu_ps(x.as_ptr().add(16)),
                )
            };
            let largest =
                _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(low), _mm512_abs_ps(high)));
            *scale = largest / 127.0;
            let inverse = _mm512_set1_ps(if largest > 0.0 { 127.0 / largest } else { 0.0 });
            let q_low = _mm512_cvtps_epi32(_mm512_mul_ps(low, inverse));
            let q_high = _mm512_cvtps_epi32(_mm512_mul_ps(high, inverse));
            let bound = _mm512_set1_epi32(127);
            let q_low = _mm512_max_epi32(_mm512_min_epi32(q_low, bound), _mm512_set1_epi32(-127));
            let q_high = _mm512_max_epi32(_mm512_min_epi32(q_high, bound), _mm512_set1_epi32(-127));
            *offset = -8 * _mm512_reduce_add_epi32(_mm512_add_epi32(q_low, q_high));
            unsafe {
                _mm_storeu_si128(values.as_mut_ptr().cast(), _mm512_cvtsepi32_epi8(q_low));
                _mm_storeu_si128(
                    values.as_mut_ptr().add(16).cast(),
                    _mm512_cvtsepi32_epi8(q_high),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // The 4-bit weights and noise of the small-pass kernel's tests.
    use crate::vnni::tests::{noise, random_q4};

    #[test]
    fn quantized_blocks_round_to_half_a_step() {
        let inputs = 96;
        let mut x: Vec<f32> = (0..3 * inputs).map(|i| noise(i) * 3.0).collect();
        x[32..64].fill(0.0); // an all-zero block
        x[200] = 1e-30;
        let q8 = Q8Blocks::quantize(&x, 3, inputs);
        for row in 0..3 {
            let back = q8.dequantized(row);
            for (ours, exact) in back
                .chunks_exact(BLOCK)
                .zip(x[row * inputs..(row + 1) * inputs].chunks_exact(BLOCK))
            {
                let step = exact.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0;
                for (a, b) in ours.iter().zip(exact) {
                    assert!((a - b).abs() <= step * 0.5 * 1.0001 + 1e-12, "{a} vs {b}");
                }
            }
        }
        for (block, offset) in q8.offsets.iter().enumerate() {
            let sum: i32 = q8.values[block * BLOCK..(block + 1) * BLOCK]
                .iter()
                .map(|&q| i32::from(q))
                .sum();
            assert_eq!(*offset, -8 * sum);
        }
    }

    /// The kernel computes the dot of the quantized activations with the 4-bit weights plus
    /// the bias (up to f32 summation order), on ragged shapes: rows not a multiple of the
    /// register block or of a task, outputs not a multiple of a tile or a tile pair, and
    /// both the row-split and the tile-split paths.
    #[test]
    fn gemm_equals_the_quantized_products_on_ragged_shapes() {
        let cpus = Int8Cpu::available();
        if cpus.is_empty() {
            eprintln!("this CPU has neither AVX-512 VNNI nor AVX2: the int8 GEMM is not run here");
        }
        for cpu in cpus {
            gemm_equals_the_quantized_products_on(cpu);
        }
    }

    fn gemm_equals_the_quantized_products_on(cpu: Int8Cpu) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let shapes = [
            (1, 16, 32),
            (3, 40, 64),
            (5, 17, 96),
            (9, 48, 384),
            (31, 33, 128),
            (65, 50, 160),
            (130, 96, 384),
            (77, 1, 32),
        ];
        for (case, &(rows, outputs, inputs)) in shapes.iter().enumerate() {
            let (scales, nibbles, dense) = random_q4(outputs, inputs, case * 31 + 1);
            let weight = Int8Weight::repack(outputs, inputs, &scales, &nibbles);
            let bias: Vec<f32> = (0..outputs).map(|o| noise(o + 4242)).collect();
            let x: Vec<f32> = (0..rows * inputs)
                .map(|i| noise(i * 3 + case) * (1.0 + (i % 13) as f32))
                .collect();
            let q8 = Q8Blocks::quantize(&x, rows, inputs);
            let mut out = vec![f32::NAN; rows * outputs];
            pool.install(|| gemm(cpu, &q8, &weight, &bias, &mut out));
            for r in 0..rows {
                let back = q8.dequantized(r);
                for o in 0..outputs {
                    let products = back
                        .iter()
                        .zip(&dense[o * inputs..(o + 1) * inputs])
                        .map(|(a, w)| f64::from(*a) * f64::from(*w));
                    let exact: f64 = products.clone().sum::<f64>() + f64::from(bias[o]);
                    let magnitude: f64 = products.map(f64::abs).sum::<f64>() + 1.0;
                    let ours = f64::from(out[r * outputs + o]);
                    assert!(
                        (ours - exact).abs() <= 1e-5 * magnitude,
                        "{}: {rows}×{inputs}→{outputs}, [{r}][{o}]: {ours} vs {exact}",
                        cpu.name()
                    );
                }
            }
        }
    }

    /// Against the f32 product of the unquantized activations: the int8 rounding costs well
    /// under 1 % of each output row's norm.
    /// The AVX2 kernel computes the VNNI kernel's integers and then the same f32 operations
    /// in the same order: the same bits (run where the CPU has both).
    #[test]
    fn the_avx2_gemm_gives_the_vnni_gemm_s_bits() {
        let cpus = Int8Cpu::available();
        let (Some(vnni), Some(avx2)) = (
            cpus.iter().copied().find(|c| matches!(c, Int8Cpu::Vnni(_))),
            cpus.iter().copied().find(|c| matches!(c, Int8Cpu::Avx2(_))),
        ) else {
            eprintln!("this CPU lacks AVX-512 VNNI or AVX2: the two kernels are not compared");
            return;
        };
        for (case, &(rows, outputs, inputs)) in
            [(1, 16, 384), (7, 40, 64), (70, 1536, 384), (33, 17, 1536)]
                .iter()
                .enumerate()
        {
            let (scales, nibbles, _) = random_q4(outputs, inputs, case * 7 + 3);
            let weight = Int8Weight::repack(outputs, inputs, &scales, &nibbles);
            let bias: Vec<f32> = (0..outputs).map(|o| noise(o + 99)).collect();
            let x: Vec<f32> = (0..rows * inputs)
                .map(|i| noise(i * 5 + case) * (1.0 + (i % 29) as f32))
                .collect();
            let q8 = Q8Blocks::quantize(&x, rows, inputs);
            let run = |cpu| {
                let mut out = vec![f32::NAN; rows * outputs];
                gemm(cpu, &q8, &weight, &bias, &mut out);
                out.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
            };
            assert_eq!(run(vnni), run(avx2), "{rows}×{inputs}→{outputs}");
        }
    }

    #[test]
    fn gemm_stays_close_to_f32() {
        for cpu in Int8Cpu::available() {
            gemm_stays_close_to_f32_on(cpu);
        }
    }

    fn gemm_stays_close_to_f32_on(cpu: Int8Cpu) {
        let (outputs, inputs, rows) = (64, 1536, 70);
        let (scales, nibbles, dense) = random_q4(outputs, inputs, 9);
        let weight = Int8Weight::repack(outputs, inputs, &scales, &nibbles);
        let x: Vec<f32> = (0..rows * inputs)
            .map(|i| noise(i + 5) * (1.0 + (i % 97) as f32 / 10.0))
            .collect();
        let q8 = Q8Blocks::quantize(&x, rows, inputs);
        let mut out = vec![0.0f32; outputs * rows];
        gemm(cpu, &q8, &weight, &vec![0.0; outputs], &mut out);
        for r in 0..rows {
            let (mut error, mut norm) = (0.0f64, 0.0f64);
            for o in 0..outputs {
                let exact: f64 = x[r * inputs..(r + 1) * inputs]
                    .iter()
                    .zip(&dense[o * inputs..(o + 1) * inputs])
                    .map(|(a, w)| f64::from(*a) * f64::from(*w))
                    .sum();
                error += (f64::from(out[r * outputs + o]) - exact).powi(2);
                norm += exact * exact;
            }
            let relative = (error / norm).sqrt();
            assert!(relative < 0.01, "row {r}: relative error {relative}");
        }
    }
}
