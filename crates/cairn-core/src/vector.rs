//! Nearest-neighbour search over one contiguous row-major matrix (docs/design.md §5, semantic
//! candidates): an exact scan, an exact answer from an int8 first pass, and an inverted-file
//! index (IVF-flat) for large matrices.
//!
//! * **Rows in memory** are bfloat16 ([`Bf16`]: the upper half of an `f32`, rounded to nearest
//!   even), queries `f32`: half the memory of `f32` rows (77 MB instead of 154 MB for 100k
//!   e5 vectors), and a scan that reads half the bytes (widening a bfloat16 is a shift; a pass
//!   over 100k rows measured 4.9 against 8.1 ms). The rounding moves a component by at most
//!   2⁻⁸ of itself, a similarity of two 384-d unit vectors by about 10⁻⁴; the brain keeps its
//!   vectors in `f32`, and "exact" below means exact over the rows in memory.
//! * **Exact** (`top_k`): brute force, measured at 0.4 ms for 10k and about 5 ms for 100k
//!   384-d vectors on one core (`cairn-bench semantic`). The dot product keeps 16
//!   independent accumulators so LLVM vectorizes it without fast-math, and is compiled for
//!   SSE2, AVX2 and AVX-512 with the best one picked at run time (`multiversion`).
//! * **Quantized** (`QuantizedRows`): every row also as 8-bit integers with one scale per row
//!   (a quarter of the memory traffic). A query scans those, keeps its best
//!   `k × OVERSAMPLE + SLACK` rows, and re-scores them with the full rows: the answer carries
//!   exact similarities, and it misses a true neighbour only when the rounding moved it below
//!   the oversampled cut (its recall@k against `top_k` is measured by the benchmark).
//! * **IVF-flat** (`IvfIndex`): spherical k-means centroids (deterministic: evenly spaced
//!   seeds, a fixed number of Lloyd rounds on an evenly strided sample), every row in the list
//!   of its nearest centroid; a query scans the rows of its `probe` nearest lists exactly.
//!   The clustering happens in the centred space (rows minus their mean): embeddings share a
//!   common direction that would otherwise put most rows in a few lists. Approximate: its
//!   recall@10 against `top_k` is measured by the benchmark (docs/retrieval.md, "Vector
//!   search").

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use multiversion::multiversion;

/// Below this many rows an exact scan is cheap enough (≈ 1 ms at 20k × 384) that an index is
/// never worth building; the engine only uses one when configured to (`ann_min_rows`).
pub const IVF_MIN_ROWS: usize = 20_000;

/// Below this many rows the `f32` scan is about a millisecond and the int8 copy is not worth
/// its memory (`SemanticConfig::quantized_min_rows`).
pub const QUANTIZED_MIN_ROWS: usize = 20_000;

/// Dot product of two equal-length slices (unit vectors: the cosine similarity).
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut sums = [0.0f32; LANES];
    let chunks_a = a.chunks_exact(LANES);
    let chunks_b = b.chunks_exact(LANES);
    let tail_a = chunks_a.remainder();
    let tail_b = chunks_b.remainder();
    for (x, y) in chunks_a.zip(chunks_b) {
        for lane in 0..LANES {
            sums[lane] += x[lane] * y[lane];
        }
    }
    let mut total: f32 = sums.iter().sum();
    for (x, y) in tail_a.iter().zip(tail_b) {
        total += x * y;
    }
    total
}

/// A vector component as rows keep it in memory: bfloat16, the upper 16 bits of an `f32`
/// (its sign, its 8-bit exponent and 7 bits of mantissa), rounded to nearest even.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct Bf16(u16);

impl Bf16 {
    /// `value` rounded to the nearest bfloat16 (ties to even); a NaN stays a NaN, and what
    /// rounds past the largest finite value is infinite.
    #[inline]
    pub fn from_f32(value: f32) -> Bf16 {
        let bits = value.to_bits();
        if value.is_nan() {
            // Keep a mantissa bit set: truncation alone could turn a NaN into an infinity.
            return Bf16((bits >> 16) as u16 | 0x0040);
        }
        let round = 0x7fff + ((bits >> 16) & 1);
        Bf16((bits.wrapping_add(round) >> 16) as u16)
    }

    /// The exact `f32` of this value.
    #[inline]
    pub fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }
}

/// `values` as bfloat16, appended to `rows`.
pub fn extend_bf16(rows: &mut Vec<Bf16>, values: &[f32]) {
    rows.extend(values.iter().map(|&value| Bf16::from_f32(value)));
}

/// `values` as bfloat16.
pub fn to_bf16(values: &[f32]) -> Vec<Bf16> {
    let mut rows = Vec::with_capacity(values.len());
    extend_bf16(&mut rows, values);
    rows
}

/// A bfloat16 row back as `f32` (exact).
pub fn from_bf16(row: &[Bf16]) -> Vec<f32> {
    row.iter().map(|value| value.to_f32()).collect()
}

/// Dot product of a bfloat16 row with an `f32` query of the same length, accumulated in `f32`
/// like [`dot`].
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn dot_bf16(row: &[Bf16], query: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut sums = [0.0f32; LANES];
    let chunks_a = row.chunks_exact(LANES);
    let chunks_b = query.chunks_exact(LANES);
    let tail_a = chunks_a.remainder();
    let tail_b = chunks_b.remainder();
    for (x, y) in chunks_a.zip(chunks_b) {
        for lane in 0..LANES {
            sums[lane] += x[lane].to_f32() * y[lane];
        }
    }
    let mut total: f32 = sums.iter().sum();
    for (x, y) in tail_a.iter().zip(tail_b) {
        total += x.to_f32() * y;
    }
    total
}

/// Integer dot product of two equal-length int8 slices (exact: at most 2¹⁴ per term, so
/// `i32` holds 131,072 terms; rows are far shorter).
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    const LANES: usize = 32;
    let mut sums = [0i32; LANES];
    let chunks_a = a.chunks_exact(LANES);
    let chunks_b = b.chunks_exact(LANES);
    let tail_a = chunks_a.remainder();
    let tail_b = chunks_b.remainder();
    for (x, y) in chunks_a.zip(chunks_b) {
        for lane in 0..LANES {
            sums[lane] += i32::from(x[lane]) * i32::from(y[lane]);
        }
    }
    let mut total: i32 = sums.iter().sum();
    for (x, y) in tail_a.iter().zip(tail_b) {
        total += i32::from(*x) * i32::from(*y);
    }
    total
}

/// One nearest row: its index in the matrix and its similarity to the query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Nearest {
    pub row: usize,
    pub similarity: f32,
}

/// The `k` rows of `matrix` (rows of `query.len()` floats) most similar to `query`, best first;
/// ties break on the lower row so the order is total. Rows that are not finite are skipped.
pub fn top_k(matrix: &[Bf16], query: &[f32], k: usize) -> Vec<Nearest> {
    let dimension = query.len();
    if dimension == 0 || k == 0 {
        return Vec::new();
    }
    // Sorted best-first; `worst` is the admission bar once full.
    let mut best: Vec<Nearest> = Vec::with_capacity(k + 1);
    for (row, vector) in matrix.chunks_exact(dimension).enumerate() {
        let similarity = dot_bf16(vector, query);
        if !similarity.is_finite() {
            continue;
        }
        if best.len() == k && similarity <= best[k - 1].similarity {
            continue;
        }
        let position = best
            .iter()
            .position(|n| similarity > n.similarity)
            .unwrap_or(best.len());
        best.insert(position, Nearest { row, similarity });
        if best.len() > k {
            best.pop();
        }
    }
    best
}

/// Candidates kept by the int8 pass per wanted row, plus a constant: the rows re-scored
/// exactly. At 100k e5 vectors, 2× + 32 loses no row of the exact top 200 in the benchmark.
const OVERSAMPLE: usize = 2;
const SLACK: usize = 32;

/// A candidate of the int8 pass, ordered so that a `BinaryHeap` pops the worst (lowest score,
/// then the higher row) first.
#[derive(Clone, Copy)]
struct Candidate {
    score: f32,
    row: usize,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    /// Reversed: the "greatest" candidate is the worst one.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.row.cmp(&other.row))
    }
}

/// Symmetric int8 codes of `vector` into `codes`, and the scale that maps them back
/// (`value ≈ code × scale`); `None` when the vector is not finite (such rows are skipped, as
/// `top_k` skips them). An all-zero vector has scale 0.
fn quantize_into(vector: &[f32], codes: &mut Vec<i8>) -> Option<f32> {
    let largest = vector.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if !largest.is_finite() || vector.iter().any(|v| v.is_nan()) {
        codes.extend(std::iter::repeat_n(0, vector.len()));
        return None;
    }
    if largest == 0.0 {
        codes.extend(std::iter::repeat_n(0, vector.len()));
        return Some(0.0);
    }
    let scale = largest / 127.0;
    codes.extend(
        vector
            .iter()
            .map(|v| (v / scale).round().clamp(-127.0, 127.0) as i8),
    );
    Some(scale)
}

/// Every row of a matrix as int8 codes with one scale per row: a first pass that reads a
/// quarter of the bytes, whose best rows are re-scored exactly (see the module notes).
#[derive(Debug, Clone)]
pub struct QuantizedRows {
    dimension: usize,
    codes: Vec<i8>,
    /// Per row; NaN marks a row that is not finite.
    scales: Vec<f32>,
}

impl QuantizedRows {
    /// The int8 copy of `matrix` (rows of `dimension` values).
    pub fn build(matrix: &[Bf16], dimension: usize) -> QuantizedRows {
        let rows = matrix.len().checked_div(dimension).unwrap_or(0);
        let mut codes = Vec::with_capacity(rows * dimension);
        let mut scales = Vec::with_capacity(rows);
        if dimension > 0 {
            for row in matrix.chunks_exact(dimension) {
                scales.push(quantize_into(&from_bf16(row), &mut codes).unwrap_or(f32::NAN));
            }
        }
        QuantizedRows {
            dimension,
            codes,
            scales,
        }
    }

    /// The int8 copy of `matrix` that reuses `previous`'s codes where a row did not change:
    /// `sources[row]` is the row of the previous matrix that `row` repeats, `None` for a new
    /// or changed row (quantized afresh). The same as `build` when the sources are right.
    pub fn rebuild(
        previous: &QuantizedRows,
        sources: &[Option<usize>],
        matrix: &[Bf16],
        dimension: usize,
    ) -> QuantizedRows {
        if dimension == 0 || previous.dimension != dimension {
            return QuantizedRows::build(matrix, dimension);
        }
        let rows = matrix.len() / dimension;
        let mut codes = Vec::with_capacity(rows * dimension);
        let mut scales = Vec::with_capacity(rows);
        for (row, vector) in matrix.chunks_exact(dimension).enumerate() {
            match sources.get(row).copied().flatten() {
                Some(old) if old < previous.rows() => {
                    codes
                        .extend_from_slice(&previous.codes[old * dimension..(old + 1) * dimension]);
                    scales.push(previous.scales[old]);
                }
                _ => scales.push(quantize_into(&from_bf16(vector), &mut codes).unwrap_or(f32::NAN)),
            }
        }
        QuantizedRows {
            dimension,
            codes,
            scales,
        }
    }

    /// Replaces row `row` with the codes of `vector` (a vector that changed in place).
    pub fn set_row(&mut self, row: usize, vector: &[Bf16]) {
        let dimension = self.dimension;
        if row >= self.rows() || vector.len() != dimension {
            return;
        }
        let mut codes = Vec::with_capacity(dimension);
        self.scales[row] = quantize_into(&from_bf16(vector), &mut codes).unwrap_or(f32::NAN);
        self.codes[row * dimension..(row + 1) * dimension].copy_from_slice(&codes);
    }

    /// Appends the codes of `vector` as a new last row.
    pub fn push_row(&mut self, vector: &[Bf16]) {
        if vector.len() != self.dimension {
            return;
        }
        let scale = quantize_into(&from_bf16(vector), &mut self.codes).unwrap_or(f32::NAN);
        self.scales.push(scale);
    }

    /// Rows it was built over.
    pub fn rows(&self) -> usize {
        self.scales.len()
    }

    /// The `k` rows of `matrix` most similar to `query`, best first, ties on the lower row,
    /// with the similarities of [`top_k`]: the int8 pass picks `k × 2 + 32` candidates, the
    /// full rows re-score them. `matrix` must be the one these rows were built from.
    pub fn search(&self, matrix: &[Bf16], query: &[f32], k: usize) -> Vec<Nearest> {
        let dimension = self.dimension;
        if dimension == 0
            || k == 0
            || query.len() != dimension
            || matrix.len() != self.rows() * dimension
        {
            return Vec::new();
        }
        let mut query_codes = Vec::with_capacity(dimension);
        // The query's own scale multiplies every score alike: only its codes matter.
        if quantize_into(query, &mut query_codes).is_none() {
            return Vec::new();
        }
        let keep = k.saturating_mul(OVERSAMPLE).saturating_add(SLACK);
        let mut heap: BinaryHeap<Candidate> = BinaryHeap::with_capacity(keep + 1);
        for (row, (codes, scale)) in self
            .codes
            .chunks_exact(dimension)
            .zip(&self.scales)
            .enumerate()
        {
            if scale.is_nan() {
                continue;
            }
            let score = dot_i8(codes, &query_codes) as f32 * scale;
            if heap.len() == keep {
                match heap.peek() {
                    Some(worst) if score > worst.score => {
                        heap.pop();
                    }
                    _ => continue,
                }
            }
            heap.push(Candidate { score, row });
        }
        let mut best: Vec<Nearest> = heap
            .into_iter()
            .filter_map(|candidate| {
                let row = candidate.row;
                let similarity = dot_bf16(&matrix[row * dimension..(row + 1) * dimension], query);
                similarity
                    .is_finite()
                    .then_some(Nearest { row, similarity })
            })
            .collect();
        best.sort_by(|a, b| {
            b.similarity
                .total_cmp(&a.similarity)
                .then(a.row.cmp(&b.row))
        });
        best.truncate(k);
        best
    }
}

/// How an [`IvfIndex`] is built and searched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IvfParams {
    /// Number of lists (k-means centroids); 0 picks `√rows / 2` clamped to 16..=1024.
    pub lists: usize,
    /// Lists scanned per query (at least; more while fewer than `4 × k` rows were scanned).
    pub probe: usize,
    /// Lloyd rounds of k-means.
    pub rounds: usize,
    /// Rows of the training sample per list.
    pub sample_per_list: usize,
    /// Threads that assign rows to lists (the build's slowest step).
    pub threads: usize,
}

impl Default for IvfParams {
    fn default() -> Self {
        IvfParams {
            lists: 0,
            probe: 12,
            rounds: 6,
            sample_per_list: 40,
            threads: 2,
        }
    }
}

/// An inverted-file index over a matrix (which it does not own: searches are given the same
/// matrix it was built from).
#[derive(Debug, Clone)]
pub struct IvfIndex {
    dimension: usize,
    rows: usize,
    /// `lists × dimension`, unit length, in the centred space (see `build`).
    centroids: Vec<f32>,
    /// Each centroid's dot product with the mean row: `c·(x − mean) = c·x − c·mean`, so rows
    /// and queries are compared with centroids without centring them.
    offsets: Vec<f32>,
    /// Row numbers of each list, ascending.
    lists: Vec<Vec<u32>>,
    params: IvfParams,
}

fn normalize(vector: &mut [f32]) {
    let norm = dot(vector, vector).sqrt();
    if norm > 0.0 && norm.is_finite() {
        for value in vector.iter_mut() {
            *value /= norm;
        }
    }
}

/// The nearest centroid of `row` in the centred space (the lower one on a tie): the largest
/// `c·row − offset`.
fn nearest_centroid(centroids: &[f32], offsets: &[f32], dimension: usize, row: &[f32]) -> usize {
    let mut best = 0;
    let mut best_similarity = f32::NEG_INFINITY;
    for (index, (centroid, offset)) in centroids.chunks_exact(dimension).zip(offsets).enumerate() {
        let similarity = dot(centroid, row) - offset;
        if similarity > best_similarity {
            best = index;
            best_similarity = similarity;
        }
    }
    best
}

/// The list of every row, on up to `threads` threads (same answer as one thread).
fn assign(
    matrix: &[Bf16],
    dimension: usize,
    centroids: &[f32],
    offsets: &[f32],
    threads: usize,
) -> Vec<u32> {
    let rows = matrix.len() / dimension;
    let threads = threads.clamp(1, 8).min(rows.max(1));
    let per_thread = rows.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let parts: Vec<_> = matrix
            .chunks(per_thread * dimension)
            .map(|part| {
                scope.spawn(move || {
                    let mut row = vec![0.0f32; dimension];
                    part.chunks_exact(dimension)
                        .map(|values| {
                            for (into, value) in row.iter_mut().zip(values) {
                                *into = value.to_f32();
                            }
                            nearest_centroid(centroids, offsets, dimension, &row) as u32
                        })
                        .collect::<Vec<u32>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|part| part.join().expect("assignment does not panic"))
            .collect()
    })
}

impl IvfIndex {
    /// Builds the index of `matrix` (rows of `dimension` values). Deterministic: the same
    /// matrix and parameters give the same index.
    pub fn build(matrix: &[Bf16], dimension: usize, params: IvfParams) -> IvfIndex {
        let rows = matrix.len().checked_div(dimension).unwrap_or(0);
        let lists = if params.lists > 0 {
            params.lists
        } else {
            (((rows as f64).sqrt() / 2.0) as usize).clamp(16, 1024)
        }
        .min(rows.max(1));
        let mut index = IvfIndex {
            dimension,
            rows,
            centroids: Vec::new(),
            offsets: Vec::new(),
            lists: vec![Vec::new(); lists],
            params,
        };
        if rows == 0 {
            return index;
        }
        // Training sample: evenly strided rows. Seeds: evenly spaced sample rows.
        let sample_size = (lists * params.sample_per_list.max(1)).min(rows);
        let stride = rows as f64 / sample_size as f64;
        let sample: Vec<usize> = (0..sample_size)
            .map(|i| ((i as f64 * stride) as usize).min(rows - 1))
            .collect();
        let row = |r: usize| from_bf16(&matrix[r * dimension..(r + 1) * dimension]);
        // Embeddings share a large common direction (every e5 vector is close to every
        // other): clustering them as they are puts most rows in a few lists. The clusters are
        // made in the centred space (each row minus the sample's mean, normalized), where they
        // balance.
        let mut mean = vec![0.0f32; dimension];
        for &r in &sample {
            for (m, value) in mean.iter_mut().zip(row(r)) {
                *m += value;
            }
        }
        for m in mean.iter_mut() {
            *m /= sample_size as f32;
        }
        let centred: Vec<f32> = sample
            .iter()
            .flat_map(|&r| {
                let mut vector: Vec<f32> = row(r).iter().zip(&mean).map(|(x, m)| x - m).collect();
                normalize(&mut vector);
                vector
            })
            .collect();
        let mut centroids: Vec<f32> = Vec::with_capacity(lists * dimension);
        for list in 0..lists {
            let seed = list * sample_size / lists;
            centroids.extend_from_slice(&centred[seed * dimension..(seed + 1) * dimension]);
        }
        let zeros = vec![0.0f32; lists];
        for _ in 0..params.rounds {
            let mut sums = vec![0.0f32; lists * dimension];
            let mut counts = vec![0usize; lists];
            for vector in centred.chunks_exact(dimension) {
                let list = nearest_centroid(&centroids, &zeros, dimension, vector);
                counts[list] += 1;
                for (sum, value) in sums[list * dimension..(list + 1) * dimension]
                    .iter_mut()
                    .zip(vector)
                {
                    *sum += value;
                }
            }
            for list in 0..lists {
                // An empty cluster keeps its centroid (it may win rows in the full assignment).
                if counts[list] > 0 {
                    let centroid = &mut sums[list * dimension..(list + 1) * dimension];
                    normalize(centroid);
                    centroids[list * dimension..(list + 1) * dimension].copy_from_slice(centroid);
                }
            }
        }
        let offsets: Vec<f32> = centroids
            .chunks_exact(dimension)
            .map(|centroid| dot(centroid, &mean))
            .collect();
        for (r, list) in assign(matrix, dimension, &centroids, &offsets, params.threads)
            .into_iter()
            .enumerate()
        {
            index.lists[list as usize].push(r as u32);
        }
        index.offsets = offsets;
        index.centroids = centroids;
        index
    }

    /// Rows the index was built over.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of lists.
    pub fn list_count(&self) -> usize {
        self.lists.len()
    }

    /// The `k` rows most similar to `query` among the rows of its nearest lists, best first,
    /// ties on the lower row (like [`top_k`]). `probe` 0 uses the build's default. Approximate:
    /// a true neighbour in a list that was not scanned is missed. `matrix` must be the one the
    /// index was built from.
    pub fn search(&self, matrix: &[Bf16], query: &[f32], k: usize, probe: usize) -> Vec<Nearest> {
        let dimension = self.dimension;
        if dimension == 0
            || k == 0
            || query.len() != dimension
            || matrix.len() != self.rows * dimension
        {
            return Vec::new();
        }
        let probe = if probe == 0 { self.params.probe } else { probe }.max(1);
        let mut order: Vec<(usize, f32)> = self
            .centroids
            .chunks_exact(dimension)
            .zip(&self.offsets)
            .map(|(centroid, offset)| dot(centroid, query) - offset)
            .enumerate()
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut best: Vec<Nearest> = Vec::with_capacity(k + 1);
        let mut scanned = 0usize;
        for (probed, (list, _)) in order.iter().enumerate() {
            if probed >= probe && scanned >= k.saturating_mul(4) {
                break;
            }
            for &r in &self.lists[*list] {
                let r = r as usize;
                let similarity = dot_bf16(&matrix[r * dimension..(r + 1) * dimension], query);
                scanned += 1;
                offer(&mut best, k, Nearest { row: r, similarity });
            }
        }
        best
    }
}

/// Keeps `best` the sorted (best first, lower row on ties) top `k` after offering `candidate`.
fn offer(best: &mut Vec<Nearest>, k: usize, candidate: Nearest) {
    if !candidate.similarity.is_finite() {
        return;
    }
    let better = |a: &Nearest, b: &Nearest| {
        a.similarity > b.similarity || (a.similarity == b.similarity && a.row < b.row)
    };
    if best.len() == k && !better(&candidate, &best[k - 1]) {
        return;
    }
    let position = best
        .iter()
        .position(|n| better(&candidate, n))
        .unwrap_or(best.len());
    best.insert(position, candidate);
    if best.len() > k {
        best.pop();
    }
}

/// Share of `exact`'s rows that `approximate` also found (recall@k of an index against the
/// exact scan; 1.0 when `exact` is empty).
pub fn recall_at(exact: &[Nearest], approximate: &[Nearest]) -> f64 {
    if exact.is_empty() {
        return 1.0;
    }
    let found: std::collections::BTreeSet<usize> = approximate.iter().map(|n| n.row).collect();
    exact.iter().filter(|n| found.contains(&n.row)).count() as f64 / exact.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(matrix: &[Bf16], query: &[f32], k: usize) -> Vec<usize> {
        let matrix = from_bf16(matrix);
        let mut scored: Vec<(usize, f32)> = matrix
            .chunks_exact(query.len())
            .enumerate()
            .map(|(i, row)| (i, row.iter().zip(query).map(|(a, b)| a * b).sum()))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.into_iter().take(k).map(|(i, _)| i).collect()
    }

    /// A tiny deterministic generator (no RandomState anywhere).
    fn numbers(seed: u64, count: usize) -> Vec<f32> {
        let mut state = seed;
        (0..count)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5
            })
            .collect()
    }

    #[test]
    fn dot_matches_the_plain_sum_for_every_length() {
        for length in [0, 1, 15, 16, 17, 33, 384] {
            let a = numbers(1, length);
            let b = numbers(2, length);
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - plain).abs() < 1e-4, "length {length}");
        }
    }

    #[test]
    fn top_k_agrees_with_a_full_sort() {
        let dimension = 24;
        let matrix = to_bf16(&numbers(7, dimension * 500));
        for seed in 0..20 {
            let query = numbers(100 + seed, dimension);
            for k in [1, 5, 50, 600] {
                let got: Vec<usize> = top_k(&matrix, &query, k).iter().map(|n| n.row).collect();
                assert_eq!(got, naive(&matrix, &query, k), "seed {seed} k {k}");
            }
        }
    }

    #[test]
    fn degenerate_inputs_give_nothing_or_skip_bad_rows() {
        assert!(top_k(&[], &[1.0], 3).is_empty());
        assert!(top_k(&to_bf16(&[1.0, 2.0]), &[], 3).is_empty());
        assert!(top_k(&to_bf16(&[1.0, 2.0]), &[1.0, 0.0], 0).is_empty());
        let matrix = to_bf16(&[f32::NAN, 0.0, 0.5, 0.5, 1.0, 0.0]);
        let rows: Vec<usize> = top_k(&matrix, &[1.0, 0.0], 3)
            .iter()
            .map(|n| n.row)
            .collect();
        assert_eq!(rows, [2, 1]);
    }

    #[test]
    fn ties_keep_the_lower_row_first() {
        let matrix = to_bf16(&[1.0, 0.0, 1.0, 0.0, 0.0, 1.0]);
        let rows: Vec<usize> = top_k(&matrix, &[1.0, 0.0], 2)
            .iter()
            .map(|n| n.row)
            .collect();
        assert_eq!(rows, [0, 1]);
    }

    /// Clustered unit vectors: `centres` random directions, each row one of them plus noise.
    fn clustered(seed: u64, rows: usize, dimension: usize, centres: usize) -> Vec<f32> {
        let directions = numbers(seed, centres * dimension);
        let noise = numbers(seed + 1, rows * dimension);
        let mut matrix = Vec::with_capacity(rows * dimension);
        for r in 0..rows {
            let c = (r * 7919) % centres;
            let mut row: Vec<f32> = (0..dimension)
                .map(|d| directions[c * dimension + d] + 0.35 * noise[r * dimension + d])
                .collect();
            normalize(&mut row);
            matrix.extend(row);
        }
        matrix
    }

    #[test]
    fn the_ivf_index_agrees_with_the_exact_scan_on_clustered_vectors() {
        let dimension = 32;
        let matrix = to_bf16(&clustered(11, 4000, dimension, 40));
        let index = IvfIndex::build(&matrix, dimension, IvfParams::default());
        assert_eq!(index.rows(), 4000);
        assert_eq!(index.list_count(), 31);
        let mut total = 0.0;
        for seed in 0..20 {
            let mut query = clustered(500 + seed, 1, dimension, 1);
            normalize(&mut query);
            let exact = top_k(&matrix, &query, 10);
            let found = index.search(&matrix, &query, 10, 0);
            assert_eq!(found.len(), 10);
            // Whatever the index finds is scored exactly and ordered like the exact scan.
            for pair in found.windows(2) {
                assert!(pair[0].similarity >= pair[1].similarity);
            }
            total += recall_at(&exact, &found);
            // Probing every list is the exact scan.
            let all = index.search(&matrix, &query, 10, index.list_count());
            assert_eq!(all, exact, "seed {seed}");
        }
        assert!(total / 20.0 >= 0.9, "recall@10 {}", total / 20.0);
    }

    #[test]
    fn the_ivf_index_is_deterministic_and_handles_degenerate_input() {
        let dimension = 16;
        let values = clustered(3, 500, dimension, 8);
        let matrix = to_bf16(&values);
        let params = IvfParams {
            lists: 8,
            threads: 3,
            ..IvfParams::default()
        };
        let a = IvfIndex::build(&matrix, dimension, params);
        let b = IvfIndex::build(
            &matrix,
            dimension,
            IvfParams {
                threads: 1,
                ..params
            },
        );
        assert_eq!(a.lists, b.lists);
        assert_eq!(a.centroids, b.centroids);
        assert_eq!(a.offsets, b.offsets);
        assert!(
            IvfIndex::build(&[], dimension, params)
                .search(&[], &[0.0; 16], 5, 0)
                .is_empty()
        );
        let tiny = IvfIndex::build(&matrix[..3 * dimension], dimension, params);
        assert_eq!(tiny.list_count(), 3);
        assert_eq!(
            tiny.search(&matrix[..3 * dimension], &values[..dimension], 5, 0)
                .len(),
            3
        );
        // A query of the wrong length or a matrix that is not the indexed one finds nothing.
        assert!(a.search(&matrix, &[1.0; 3], 5, 0).is_empty());
        assert!(
            a.search(&matrix[..dimension], &values[..dimension], 5, 0)
                .is_empty()
        );
    }

    #[test]
    fn bfloat16_rounds_to_nearest_even_and_keeps_specials() {
        for exact in [
            0.0f32,
            -0.0,
            1.0,
            -2.5,
            0.5,
            2f32.powi(120),
            f32::INFINITY,
            f32::NEG_INFINITY,
        ] {
            assert_eq!(Bf16::from_f32(exact).to_f32().to_bits(), exact.to_bits());
        }
        // 1 + 2⁻⁸ lies halfway between 1 and 1 + 2⁻⁷: the even neighbour, 1, wins; just above
        // the half it rounds up; 1 + 3·2⁻⁸ is halfway to an even 1 + 2⁻⁶.
        let step = 2f32.powi(-7);
        assert_eq!(Bf16::from_f32(1.0 + step / 2.0).to_f32(), 1.0);
        assert_eq!(
            Bf16::from_f32(1.0 + step / 2.0 + step / 64.0).to_f32(),
            1.0 + step
        );
        assert_eq!(Bf16::from_f32(1.0 + 1.5 * step).to_f32(), 1.0 + 2.0 * step);
        assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
        // A NaN whose payload sits in the low half does not become an infinity.
        assert!(
            Bf16::from_f32(f32::from_bits(0x7f80_0001))
                .to_f32()
                .is_nan()
        );
        assert_eq!(Bf16::from_f32(f32::MAX).to_f32(), f32::INFINITY);
        // Every value within 2⁻⁸ of itself (half a unit in the last of 8 significant bits).
        for value in numbers(4, 10_000) {
            let back = Bf16::from_f32(value).to_f32();
            assert!(
                (back - value).abs() <= value.abs() / 256.0,
                "{value} → {back}"
            );
        }
    }

    #[test]
    fn bfloat16_dot_matches_the_plain_sum_for_every_length() {
        for length in [0, 1, 15, 16, 17, 33, 384] {
            let row = to_bf16(&numbers(1, length));
            let query = numbers(2, length);
            let plain: f32 = from_bf16(&row).iter().zip(&query).map(|(x, y)| x * y).sum();
            assert!(
                (dot_bf16(&row, &query) - plain).abs() < 1e-4,
                "length {length}"
            );
        }
    }

    #[test]
    fn int8_dot_matches_the_plain_sum_for_every_length() {
        for length in [0, 1, 31, 32, 33, 65, 384] {
            let a: Vec<i8> = (0..length).map(|i| ((i * 37) % 255) as i8).collect();
            let b: Vec<i8> = (0..length).map(|i| (127 - (i * 11) % 255) as i8).collect();
            let plain: i32 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum();
            assert_eq!(dot_i8(&a, &b), plain, "length {length}");
        }
    }

    #[test]
    fn the_quantized_search_returns_the_exact_answer_on_clustered_vectors() {
        let dimension = 64;
        let matrix = to_bf16(&clustered(21, 6000, dimension, 60));
        let rows = QuantizedRows::build(&matrix, dimension);
        assert_eq!(rows.rows(), 6000);
        for seed in 0..20 {
            let query = clustered(900 + seed, 1, dimension, 1);
            for k in [1, 10, 200] {
                let exact = top_k(&matrix, &query, k);
                let found = rows.search(&matrix, &query, k);
                // Re-scored with the full rows: the same rows, order and similarities.
                assert_eq!(found, exact, "seed {seed} k {k}");
            }
        }
    }

    #[test]
    fn a_rebuilt_int8_copy_equals_a_fresh_one() {
        let dimension = 16;
        let before = to_bf16(&clustered(5, 300, dimension, 6));
        let previous = QuantizedRows::build(&before, dimension);
        // Drop row 0, change row 10, keep the rest, append two new rows.
        let mut after = before[dimension..].to_vec();
        let changed = to_bf16(&clustered(77, 1, dimension, 1));
        after[9 * dimension..10 * dimension].copy_from_slice(&changed);
        after.extend(to_bf16(&clustered(78, 2, dimension, 2)));
        let mut sources: Vec<Option<usize>> = (1..300).map(Some).collect();
        sources[9] = None;
        sources.extend([None, None]);
        let rebuilt = QuantizedRows::rebuild(&previous, &sources, &after, dimension);
        let fresh = QuantizedRows::build(&after, dimension);
        assert_eq!(rebuilt.codes, fresh.codes);
        assert_eq!(rebuilt.scales, fresh.scales);
        // Edited in place: row 10 changed, two rows appended.
        let mut edited = previous.clone();
        let mut expected = before.clone();
        expected[10 * dimension..11 * dimension].copy_from_slice(&changed);
        edited.set_row(10, &changed);
        for row in after[299 * dimension..].chunks_exact(dimension) {
            edited.push_row(row);
            expected.extend_from_slice(row);
        }
        let fresh = QuantizedRows::build(&expected, dimension);
        assert_eq!(edited.codes, fresh.codes);
        assert_eq!(edited.scales, fresh.scales);
    }

    #[test]
    fn the_quantized_search_skips_bad_rows_and_degenerate_input() {
        let matrix = to_bf16(&[f32::NAN, 0.0, 0.5, 0.5, 1.0, 0.0, 0.0, 0.0]);
        let rows = QuantizedRows::build(&matrix, 2);
        let found: Vec<usize> = rows
            .search(&matrix, &[1.0, 0.0], 3)
            .iter()
            .map(|n| n.row)
            .collect();
        assert_eq!(
            found,
            top_k(&matrix, &[1.0, 0.0], 3)
                .iter()
                .map(|n| n.row)
                .collect::<Vec<_>>()
        );
        assert_eq!(found, [2, 1, 3]);
        assert!(rows.search(&matrix, &[1.0], 3).is_empty());
        assert!(rows.search(&matrix, &[f32::NAN, 0.0], 3).is_empty());
        assert!(rows.search(&matrix[..4], &[1.0, 0.0], 3).is_empty());
        assert!(rows.search(&matrix, &[1.0, 0.0], 0).is_empty());
        assert!(
            QuantizedRows::build(&[], 2)
                .search(&[], &[1.0, 0.0], 3)
                .is_empty()
        );
        assert!(
            QuantizedRows::build(&matrix, 0)
                .search(&matrix, &[], 3)
                .is_empty()
        );
    }
}
