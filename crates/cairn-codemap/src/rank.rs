//! Ranking: the file → file reference graph (an edge from a file to each file defining an
//! identifier it uses, weighted by which identifiers), personalized PageRank over it (damping
//! 0.85, fixed iteration order, stopped when converged or capped), and the symbols of each
//! file ranked by how much the ranked files use them.

use crate::index::{Definers, Index, IndexRef, NameId, class_weight};
use std::collections::HashMap;

/// The knobs of the ranking (docs/codemap.md says why each has its value).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankOptions {
    /// PageRank damping: 0.85.
    pub damping: f64,
    /// Iterations are capped here...
    pub max_iterations: usize,
    /// ...or stop when the L1 change falls below this.
    pub tolerance: f64,
    /// The weight of an edge's reverse (a file that uses the focus is also near it: a change
    /// to a definition reaches its users), relative to the use edge.
    pub reverse_weight: f64,
    /// An identifier defined in more files than this links nothing (`new`, `fmt`, `run`).
    pub max_definers: usize,
    /// Personalization mass spread over the focus files' directory neighbours, relative to the
    /// focus files' own (0 = focus only).
    pub directory_prior: f64,
    /// The file's score is its PageRank divided by (1 + its weighted degree) to this power:
    /// 0 keeps plain PageRank (hubs first), 1 is the degree-normalized PageRank of local graph
    /// clustering (what is near the focus rather than what is central everywhere).
    pub degree_normalization: f64,
}

impl Default for RankOptions {
    fn default() -> Self {
        RankOptions {
            damping: 0.85,
            max_iterations: 100,
            tolerance: 1e-10,
            reverse_weight: 2.0,
            max_definers: 12,
            directory_prior: 1.0,
            degree_normalization: 0.5,
        }
    }
}

/// One edge of the reference graph: file `to` defines identifiers the file uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    pub to: usize,
    pub weight: f64,
}

/// The reference graph: for each file, the files it uses, with the weight. The identifiers
/// that link an edge are found again when asked ([`Graph::names`]): only the few files a map
/// shows need them.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// `uses[a]`: an edge to each file b defining something a uses, sorted by b.
    pub uses: Vec<Vec<Edge>>,
    /// `used_by[b]`: the files a with an edge a → b, sorted.
    pub used_by: Vec<Vec<usize>>,
    /// `used_by_weight[b][k]`: the weight of the edge `used_by[b][k]` → b (so that walking an
    /// edge backwards needs no search).
    used_by_weight: Vec<Vec<f64>>,
    definers: Definers,
    max_definers: usize,
}

impl Graph {
    /// The edge a → b, if any.
    pub fn edge(&self, a: usize, b: usize) -> Option<&Edge> {
        let list = &self.uses[a];
        list.binary_search_by(|e| e.to.cmp(&b))
            .ok()
            .map(|i| &list[i])
    }

    /// The identifiers of file `a` (of `index`, the graph's) that link it to `edge.to`, in
    /// the names' string order.
    pub fn names(&self, index: &Index, a: usize, edge: &Edge) -> Vec<IndexRef> {
        self.names_with(index, a, edge.to, &DefSet::of(index, edge.to))
    }

    /// [`Graph::names`] of a → b, `defined` being b's names.
    fn names_with(&self, index: &Index, a: usize, b: usize, defined: &DefSet) -> Vec<IndexRef> {
        index.files()[a]
            .refs
            .iter()
            .filter(|r| {
                defined.contains(r.name)
                    && self
                        .links(a, r)
                        .is_some_and(|(ds, _)| ds.binary_search(&(b as u32)).is_ok())
            })
            .copied()
            .collect()
    }

    /// The files a use `r` of file `a` links to (with `a` itself, if it defines the name
    /// too), and how many they are without `a`; `None` when it links nothing.
    fn links(&self, a: usize, r: &IndexRef) -> Option<(&[u32], usize)> {
        links_of(&self.definers, self.max_definers, a, r)
    }
}

/// [`Graph::links`] over `definers`.
fn links_of<'d>(
    definers: &'d Definers,
    max_definers: usize,
    a: usize,
    r: &IndexRef,
) -> Option<(&'d [u32], usize)> {
    if r.count == 0 || class_weight(r.class) <= 0.0 {
        return None;
    }
    let defined_in = definers.get(r.name);
    if defined_in.is_empty() {
        return None;
    }
    let mine = usize::from(defined_in.binary_search(&(a as u32)).is_ok());
    let others = defined_in.len() - mine;
    if others == 0 || others > max_definers {
        return None;
    }
    Some((defined_in, others))
}

/// The names a file defines: a 64-bit mask of their ids' low bits, then the sorted ids.
struct DefSet {
    mask: u64,
    ids: Vec<NameId>,
}

impl DefSet {
    fn of(index: &Index, b: usize) -> DefSet {
        let mut ids: Vec<NameId> = index.files()[b].defs.iter().map(|d| d.name).collect();
        ids.sort_unstable();
        ids.dedup();
        let mask = ids.iter().fold(0u64, |m, id| m | 1 << (id & 63));
        DefSet { mask, ids }
    }

    fn contains(&self, id: NameId) -> bool {
        self.mask & (1 << (id & 63)) != 0 && self.ids.binary_search(&id).is_ok()
    }
}

/// Builds the reference graph of `index` (files in its order; each file's uses in its
/// references' order, the names' string order).
pub fn graph(index: &Index, options: &RankOptions) -> Graph {
    let files = index.files();
    let n = files.len();
    let definers = index.definers();
    let mut uses: Vec<Vec<Edge>> = Vec::with_capacity(n);
    let mut in_degree = vec![0usize; n];
    // slot[b]: where a's edge to b is in `edges` (usize::MAX: none yet).
    let mut slot = vec![usize::MAX; n];
    let mut edges: Vec<(usize, f64)> = Vec::new();
    for (a, file) in files.iter().enumerate() {
        edges.clear();
        for r in &file.refs {
            let Some((defined_in, others)) = links_of(&definers, options.max_definers, a, r) else {
                continue;
            };
            let weight = class_weight(r.class) * f64::from(r.count).sqrt() / others as f64;
            for &b in defined_in.iter().filter(|&&b| b as usize != a) {
                let b = b as usize;
                if slot[b] == usize::MAX {
                    slot[b] = edges.len();
                    edges.push((b, 0.0));
                }
                edges[slot[b]].1 += weight;
            }
        }
        edges.sort_unstable_by_key(|&(b, _)| b);
        uses.push(
            edges
                .iter()
                .map(|&(b, weight)| {
                    slot[b] = usize::MAX;
                    in_degree[b] += 1;
                    Edge { to: b, weight }
                })
                .collect(),
        );
    }
    let mut used_by: Vec<Vec<usize>> = in_degree.iter().map(|&d| Vec::with_capacity(d)).collect();
    let mut used_by_weight: Vec<Vec<f64>> =
        in_degree.iter().map(|&d| Vec::with_capacity(d)).collect();
    for (a, list) in uses.iter().enumerate() {
        for edge in list {
            used_by[edge.to].push(a);
            used_by_weight[edge.to].push(edge.weight);
        }
    }
    Graph {
        uses,
        used_by,
        used_by_weight,
        definers,
        max_definers: options.max_definers,
    }
}

/// The personalization vector: the focus files, plus `directory_prior` spread over the
/// files sharing a focus file's directory (more for nearer directories). Uniform without focus.
fn personalization(paths: &[&str], focus: &[usize], options: &RankOptions) -> Vec<f64> {
    let n = paths.len();
    if focus.is_empty() {
        return vec![1.0 / n.max(1) as f64; n];
    }
    let mut p = vec![0.0; n];
    for &f in focus {
        p[f] += 1.0;
    }
    if options.directory_prior > 0.0 {
        // Each path's directories split once (not once per focus file and path), the focus
        // marked in a table: the same values added in the same order as the pairwise rule.
        let dirs: Vec<Vec<&str>> = paths
            .iter()
            .map(|path| dir_of(path).split('/').filter(|s| !s.is_empty()).collect())
            .collect();
        let mut in_focus = vec![false; n];
        for &f in focus {
            in_focus[f] = true;
        }
        let mut prior = vec![0.0; n];
        for &f in focus {
            let fdirs = &dirs[f];
            for (j, jdirs) in dirs.iter().enumerate() {
                if in_focus[j] {
                    continue;
                }
                let shared = fdirs.iter().zip(jdirs).take_while(|(x, y)| x == y).count();
                // Same directory 1, parent 1/2, grandparent 1/4...
                let up = fdirs.len().saturating_sub(shared);
                prior[j] += 0.5f64.powi(i32::try_from(up).unwrap_or(i32::MAX));
            }
        }
        let total: f64 = prior.iter().sum();
        if total > 0.0 {
            let mass = options.directory_prior * focus.len() as f64;
            for (pj, prj) in p.iter_mut().zip(&prior) {
                *pj += mass * prj / total;
            }
        }
    }
    let total: f64 = p.iter().sum();
    p.iter().map(|x| x / total).collect()
}

fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// Personalized PageRank over `graph` (each use edge plus its reverse at `reverse_weight`).
/// Deterministic: nodes and edges in index order, a fixed iteration cap.
///
/// Solved by Gauss–Seidel sweeps: each file's new rank is pulled from its neighbours' newest
/// ranks (those before it in index order already updated in this sweep), which reaches the
/// same fixed point as the power iteration in about half the sweeps; the restart mass of the
/// files without edges is the previous sweep's. A sweep's L1 change below `tolerance` ends it.
///
/// A tree of at most 65,536 files is swept with 16-bit sources read from a table of 65,536
/// shares (no bounds check per step, half the bytes per step); a larger one with 32-bit
/// sources. Both add the same products in the same order: the same bits.
pub fn pagerank(graph: &Graph, paths: &[&str], focus: &[usize], options: &RankOptions) -> Vec<f64> {
    let n = paths.len();
    if n == 0 {
        return Vec::new();
    }
    let p = personalization(paths, focus, options);
    if n <= NarrowShares::FILES {
        ranked::<NarrowShares>(graph, p, options)
    } else {
        ranked::<WideShares>(graph, p, options)
    }
}

/// [`pagerank`] from the restart `p`, the shares read through `S`.
fn ranked<S: Shares>(graph: &Graph, p: Vec<f64>, options: &RankOptions) -> Vec<f64> {
    let walk = Walk::of(graph, options.reverse_weight, S::source);
    let mut rank = sweeps::<S>(&walk, p, options);
    if options.degree_normalization > 0.0 {
        for (r, total) in rank.iter_mut().zip(&walk.totals) {
            *r /= (1.0 + total).powf(options.degree_normalization);
        }
    }
    rank
}

/// The sweeps of [`pagerank`] from the restart `p`, reading the shares through `S`; the ranks
/// before the degree normalization.
fn sweeps<S: Shares>(walk: &Walk<S::Source>, p: Vec<f64>, options: &RankOptions) -> Vec<f64> {
    let n = p.len();
    let d = options.damping;
    let mut rank = p.clone();
    // x[a]: the share of a's rank each unit of its out-weight carries (0 for a file with no
    // edge, whose rank is spread as the restart is), kept up to date as ranks change.
    let share = |ra: f64, total: f64| if total > 0.0 { d * ra / total } else { 0.0 };
    let mut x = S::new(n);
    for (a, (&ra, &total)) in rank.iter().zip(&walk.totals).enumerate() {
        x.set(a, share(ra, total));
    }
    let dangling_of = |rank: &[f64]| -> f64 {
        rank.iter()
            .zip(&walk.totals)
            .filter(|(_, total)| **total <= 0.0)
            .map(|(r, _)| r)
            .sum()
    };
    let mut dangling = dangling_of(&rank);
    for _ in 0..options.max_iterations {
        let mut change = 0.0;
        for v in 0..n {
            let (from, to) = (walk.offsets[v], walk.offsets[v + 1]);
            let mut sum = 0.0;
            for (&a, &w) in walk.sources[from..to].iter().zip(&walk.weights[from..to]) {
                sum += x.get(a) * w;
            }
            let value = sum + (1.0 - d) * p[v] + d * dangling * p[v];
            change += (value - rank[v]).abs();
            rank[v] = value;
            x.set(v, share(value, walk.totals[v]));
        }
        dangling = dangling_of(&rank);
        if change < options.tolerance {
            break;
        }
    }
    rank
}

/// Where a sweep reads each file's share from, by the walk's source type.
trait Shares {
    type Source: Copy;
    /// The shares of `n` files, all 0.
    fn new(n: usize) -> Self;
    /// File `a`'s source in a walk row (`a` < the `n` of [`Shares::new`]).
    fn source(a: usize) -> Self::Source;
    fn get(&self, a: Self::Source) -> f64;
    fn set(&mut self, a: usize, value: f64);
}

/// The shares of a tree of at most [`NarrowShares::FILES`] files: a 16-bit source always
/// indexes inside the table, so reading a share needs no bounds check.
struct NarrowShares(Box<[f64; NarrowShares::FILES]>);

impl NarrowShares {
    const FILES: usize = 1 << 16;
}

impl Shares for NarrowShares {
    type Source = u16;
    fn new(_n: usize) -> Self {
        let table: Box<[f64]> = vec![0.0; Self::FILES].into_boxed_slice();
        NarrowShares(table.try_into().expect("a table of FILES shares"))
    }
    fn source(a: usize) -> u16 {
        u16::try_from(a).expect("a narrow walk has at most 65,536 files")
    }
    fn get(&self, a: u16) -> f64 {
        self.0[usize::from(a)]
    }
    fn set(&mut self, a: usize, value: f64) {
        self.0[a] = value;
    }
}

/// The shares of any tree, read by 32-bit sources.
struct WideShares(Vec<f64>);

impl Shares for WideShares {
    type Source = u32;
    fn new(n: usize) -> Self {
        WideShares(vec![0.0; n])
    }
    fn source(a: usize) -> u32 {
        u32::try_from(a).expect("at most 2^32 files")
    }
    fn get(&self, a: u32) -> f64 {
        self.0[a as usize]
    }
    fn set(&mut self, a: usize, value: f64) {
        self.0[a] = value;
    }
}

/// The walk PageRank takes, flat (CSR) and pulled: row v lists every file a with an edge
/// between them in either direction (in index order), with the weight of the step a → v —
/// a's use of v plus `reverse_weight` × v's use of a; `totals[a]` is the weight of all of a's
/// steps. `S` is the sources' type ([`Shares::Source`]).
struct Walk<S> {
    offsets: Vec<usize>,
    sources: Vec<S>,
    weights: Vec<f64>,
    totals: Vec<f64>,
}

impl<S> Walk<S> {
    /// The walk of `graph`, each source file's number given by `source`.
    fn of(graph: &Graph, reverse_weight: f64, source: fn(usize) -> S) -> Walk<S> {
        let n = graph.uses.len();
        let capacity: usize = graph.uses.iter().map(Vec::len).sum::<usize>() * 2;
        let mut walk = Walk {
            offsets: Vec::with_capacity(n + 1),
            sources: Vec::with_capacity(capacity),
            weights: Vec::with_capacity(capacity),
            totals: Vec::with_capacity(n),
        };
        walk.offsets.push(0);
        for v in 0..n {
            // v's uses (v → b, sorted by b) and its users (c → v, sorted by c), merged.
            let uses = &graph.uses[v];
            // Both, whatever the reverse weight: a's use of v is a step a → v.
            let (users, back) = (&graph.used_by[v], &graph.used_by_weight[v]);
            let (mut i, mut j) = (0, 0);
            let mut total = 0.0;
            while i < uses.len() || j < users.len() {
                // (the other file, v's use of it, its use of v)
                let (a, out, inc) = match (uses.get(i), users.get(j)) {
                    (Some(e), Some(&c)) if e.to == c => {
                        i += 1;
                        j += 1;
                        (c, e.weight, back[j - 1])
                    }
                    (Some(e), Some(&c)) if e.to < c => {
                        i += 1;
                        (e.to, e.weight, 0.0)
                    }
                    (Some(e), None) => {
                        i += 1;
                        (e.to, e.weight, 0.0)
                    }
                    _ => {
                        j += 1;
                        (users[j - 1], 0.0, back[j - 1])
                    }
                };
                // The step v → a: v's use of a, and a's use of v walked backwards.
                total += out + reverse_weight * inc;
                walk.sources.push(source(a));
                // The step a → v: a's use of v, and v's use of a walked backwards.
                walk.weights.push(inc + reverse_weight * out);
            }
            walk.totals.push(total);
            walk.offsets.push(walk.sources.len());
        }
        walk
    }
}

/// The definitions of file `b` ranked: by the rank-weighted uses of their name from other
/// files (Σ over the files a using it of rank[a] × the use's weight share), then top level
/// first, then kind (interfaces, types, functions, ...), then line. Indices into its `defs`.
pub fn rank_symbols_of(index: &Index, graph: &Graph, rank: &[f64], b: usize) -> Vec<usize> {
    let file = &index.files()[b];
    let mut score: HashMap<NameId, f64> = HashMap::new();
    let defined = DefSet::of(index, b);
    for &a in &graph.used_by[b] {
        for r in graph.names_with(index, a, b, &defined) {
            *score.entry(r.name).or_insert(0.0) +=
                rank[a] * class_weight(r.class) * f64::from(r.count).sqrt();
        }
    }
    let keys: Vec<f64> = file
        .defs
        .iter()
        .map(|d| score.get(&d.name).copied().unwrap_or(0.0))
        .collect();
    let mut order: Vec<usize> = (0..file.defs.len()).collect();
    order.sort_by(|&x, &y| {
        let (dx, dy) = (&file.defs[x], &file.defs[y]);
        keys[y]
            .total_cmp(&keys[x])
            .then_with(|| dy.top_level.cmp(&dx.top_level))
            .then_with(|| dx.kind.cmp(&dy.kind))
            .then_with(|| dx.line.cmp(&dy.line))
    });
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Parsed;
    use crate::parse::{Lang, parse_source};

    fn index(sources: &[(&str, &str)]) -> Index {
        Index::from_parsed(
            sources
                .iter()
                .map(|(path, text)| Parsed {
                    path: path.to_string(),
                    lang: Lang::Rust,
                    hash: crate::content_hash(text),
                    size: text.len() as u64,
                    mtime_ns: 0,
                    parse: parse_source(Lang::Rust, text),
                })
                .collect(),
        )
    }

    /// A xorshift generator from `seed`: each call gives a number below its argument.
    /// [`index`] of generated `(path, text)` pairs.
    fn index_owned(sources: &[(String, String)]) -> Index {
        let refs: Vec<(&str, &str)> = sources
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        index(&refs)
    }

    fn below(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        }
    }

    #[test]
    fn the_focus_pulls_its_neighbours_up_and_the_result_is_deterministic() {
        let sources = [
            ("a.rs", "pub fn alpha_helper() {}\n"),
            ("b.rs", "pub fn beta_worker() { alpha_helper(); }\n"),
            ("c.rs", "pub fn gamma_thing() { delta_thing(); }\n"),
            ("d.rs", "pub fn delta_thing() {}\n"),
        ];
        let index = index(&sources);
        let paths: Vec<&str> = sources.iter().map(|(p, _)| *p).collect();
        let options = RankOptions {
            directory_prior: 0.0,
            degree_normalization: 0.0,
            ..RankOptions::default()
        };
        let g = graph(&index, &options);
        assert_eq!(g.uses[1].iter().map(|e| e.to).collect::<Vec<_>>(), [0]);
        assert_eq!(g.used_by[0], [1]);
        assert_eq!(
            g.edge(1, 0).map(|e| g.names(&index, 1, e).len()),
            Some(1),
            "b uses alpha_helper once"
        );
        let r = pagerank(&g, &paths, &[0], &options);
        assert!(r[0] > r[1] && r[1] > r[2] && r[1] > r[3], "{r:?}");
        assert!((r.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let again = pagerank(&g, &paths, &[0], &options);
        assert_eq!(r, again);
        // Focused on c, d is its neighbour.
        let r = pagerank(&g, &paths, &[2], &options);
        assert!(r[3] > r[0] && r[3] > r[1], "{r:?}");
    }

    /// PageRank as the docs define it, over a dense matrix: the step a → b weighs a's use of b
    /// plus `reverse_weight` × b's use of a.
    fn dense_pagerank(graph: &Graph, p: &[f64], options: &RankOptions) -> Vec<f64> {
        let n = graph.uses.len();
        let mut w = vec![vec![0.0; n]; n];
        for (a, edges) in graph.uses.iter().enumerate() {
            for e in edges {
                w[a][e.to] += e.weight;
                w[e.to][a] += options.reverse_weight * e.weight;
            }
        }
        let totals: Vec<f64> = w.iter().map(|row| row.iter().sum()).collect();
        let d = options.damping;
        let mut rank = p.to_vec();
        for _ in 0..options.max_iterations {
            let dangling: f64 = (0..n).filter(|&a| totals[a] <= 0.0).map(|a| rank[a]).sum();
            let mut next: Vec<f64> = p
                .iter()
                .map(|pv| (1.0 - d) * pv + d * dangling * pv)
                .collect();
            for a in 0..n {
                if totals[a] > 0.0 {
                    for b in 0..n {
                        next[b] += d * rank[a] * w[a][b] / totals[a];
                    }
                }
            }
            rank = next;
        }
        for (r, total) in rank.iter_mut().zip(&totals) {
            *r /= (1.0 + total).powf(options.degree_normalization);
        }
        rank
    }

    #[test]
    fn the_flat_walk_gives_the_dense_definition_s_pagerank() {
        // 40 files, each defining two names and using a few of the others' (some files use
        // nothing, some are used by nothing), with some names defined twice.
        let mut next = below(0x2545_f491_4f6c_dd1d);
        let sources: Vec<(String, String)> = (0..40)
            .map(|i| {
                let mut text = format!(
                    "pub fn name_number_{i}() {{}}\npub fn other_{}() {{\n",
                    i % 31
                );
                for _ in 0..next(6) {
                    text.push_str(&format!("    name_number_{}();\n", next(40)));
                }
                text.push_str("}\n");
                (format!("d{}/f{i:02}.rs", i % 4), text)
            })
            .collect();
        let index = index_owned(&sources);
        let paths: Vec<&str> = index.files().iter().map(|f| f.meta.path.as_str()).collect();
        for reverse_weight in [0.0, 1.0, 2.0] {
            let options = RankOptions {
                reverse_weight,
                max_iterations: 200,
                tolerance: 0.0,
                ..RankOptions::default()
            };
            let g = graph(&index, &options);
            assert!(g.uses.iter().map(Vec::len).sum::<usize>() > 40);
            for focus in [vec![], vec![3], vec![5, 17]] {
                let p = personalization(&paths, &focus, &options);
                let expected = dense_pagerank(&g, &p, &options);
                let got = pagerank(&g, &paths, &focus, &options);
                for (x, y) in got.iter().zip(&expected) {
                    assert!(
                        (x - y).abs() < 1e-12,
                        "{reverse_weight} {focus:?}: {x} vs {y}"
                    );
                }
                assert_eq!(got, pagerank(&g, &paths, &focus, &options));
            }
        }
    }

    #[test]
    fn the_narrow_sweep_gives_the_wide_sweep_s_bits() {
        // 300 files using each other's names at random (some unused, some using nothing).
        let mut next = below(0x9e37_79b9_7f4a_7c15);
        let sources: Vec<(String, String)> = (0..300)
            .map(|i| {
                let mut text = format!("pub fn widely_used_{i}() {{}}\npub fn caller_{i}() {{\n");
                for _ in 0..next(20) {
                    text.push_str(&format!("    widely_used_{}();\n", next(300)));
                }
                text.push_str("}\n");
                (format!("d{}/f{i:03}.rs", i % 7), text)
            })
            .collect();
        let index = index_owned(&sources);
        let paths: Vec<&str> = index.files().iter().map(|f| f.meta.path.as_str()).collect();
        for reverse_weight in [0.0, 2.0] {
            let options = RankOptions {
                reverse_weight,
                ..RankOptions::default()
            };
            let g = graph(&index, &options);
            assert!(g.uses.iter().map(Vec::len).sum::<usize>() > 1000);
            for focus in [vec![], vec![7], vec![3, 150, 299]] {
                let p = personalization(&paths, &focus, &options);
                let narrow = ranked::<NarrowShares>(&g, p.clone(), &options);
                let wide = ranked::<WideShares>(&g, p, &options);
                let bits = |r: &[f64]| r.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&narrow), bits(&wide), "{reverse_weight} {focus:?}");
                assert_eq!(narrow, pagerank(&g, &paths, &focus, &options));
            }
        }
    }

    /// How many leading directories two directories share.
    fn common_dirs(a: &str, b: &str) -> usize {
        a.split('/')
            .filter(|s| !s.is_empty())
            .zip(b.split('/').filter(|s| !s.is_empty()))
            .take_while(|(x, y)| x == y)
            .count()
    }

    /// The personalization as first written: each focus file against each path, splitting
    /// both every time.
    fn pairwise_personalization(
        paths: &[&str],
        focus: &[usize],
        options: &RankOptions,
    ) -> Vec<f64> {
        let n = paths.len();
        let mut p = vec![0.0; n];
        for &f in focus {
            p[f] += 1.0;
        }
        let mut prior = vec![0.0; n];
        for &f in focus {
            let fdir = dir_of(paths[f]);
            for (j, path) in paths.iter().enumerate() {
                if focus.contains(&j) {
                    continue;
                }
                let shared = common_dirs(fdir, dir_of(path));
                let depth = fdir.split('/').filter(|s| !s.is_empty()).count();
                let up = depth.saturating_sub(shared);
                prior[j] += 0.5f64.powi(i32::try_from(up).unwrap_or(i32::MAX));
            }
        }
        let total: f64 = prior.iter().sum();
        let mass = options.directory_prior * focus.len() as f64;
        for (pj, prj) in p.iter_mut().zip(&prior) {
            *pj += mass * prj / total;
        }
        let total: f64 = p.iter().sum();
        p.iter().map(|x| x / total).collect()
    }

    #[test]
    fn the_graph_s_weights_are_the_rule_s_bits() {
        // Random files sharing names (some defined in many files, some in the user itself),
        // against the rule computed the plain way: every file's definitions scanned per use.
        let mut next = below(0x1234_5678_9abc_def1);
        let sources: Vec<(String, String)> = (0..60)
            .map(|i| {
                let mut text = String::new();
                for _ in 0..1 + next(4) {
                    text.push_str(&format!("pub fn shared_name_{}() {{}}\n", next(30)));
                }
                text.push_str("pub fn caller_fn() {\n");
                for _ in 0..next(12) {
                    text.push_str(&format!("    shared_name_{}();\n", next(30)));
                }
                text.push_str("}\n");
                (format!("f{i:02}.rs"), text)
            })
            .collect();
        let index = index_owned(&sources);
        let files = index.files();
        for max_definers in [1, 3, 12] {
            let options = RankOptions {
                max_definers,
                ..RankOptions::default()
            };
            let g = graph(&index, &options);
            for (a, file) in files.iter().enumerate() {
                let mut expected: Vec<(usize, f64)> = Vec::new();
                for r in &file.refs {
                    let defined_in: Vec<usize> = (0..files.len())
                        .filter(|&b| files[b].defs.iter().any(|d| d.name == r.name))
                        .collect();
                    let others = defined_in.iter().filter(|&&b| b != a).count();
                    if r.count == 0
                        || class_weight(r.class) <= 0.0
                        || others == 0
                        || others > max_definers
                    {
                        continue;
                    }
                    let weight = class_weight(r.class) * f64::from(r.count).sqrt() / others as f64;
                    for b in defined_in.into_iter().filter(|&b| b != a) {
                        match expected.iter_mut().find(|(x, _)| *x == b) {
                            Some((_, w)) => *w += weight,
                            None => expected.push((b, weight)),
                        }
                    }
                }
                expected.sort_by_key(|&(b, _)| b);
                let got: Vec<(usize, f64)> = g.uses[a].iter().map(|e| (e.to, e.weight)).collect();
                assert_eq!(got, expected, "file {a}, max {max_definers}");
                for &(b, w) in &got {
                    let k = g.used_by[b].iter().position(|&x| x == a).unwrap();
                    assert_eq!(g.used_by_weight[b][k], w);
                }
            }
            if max_definers == 12 {
                assert!(g.uses.iter().map(Vec::len).sum::<usize>() > 60);
            }
        }
    }

    #[test]
    fn the_directory_prior_gives_the_pairwise_rule_s_bits() {
        let paths = [
            "a.rs",
            "b.rs",
            "src/a.rs",
            "src/b.rs",
            "src/x/c.rs",
            "src/x/d.rs",
            "src/xy/e.rs",
            "src/x/deep/er/f.rs",
            "tests/g.rs",
            "tests/x/h.rs",
        ];
        let options = RankOptions::default();
        for focus in [
            vec![0],
            vec![4],
            vec![7, 2],
            vec![9, 4, 0],
            vec![1, 3, 5, 8],
        ] {
            let got = personalization(&paths, &focus, &options);
            let expected = pairwise_personalization(&paths, &focus, &options);
            assert_eq!(got, expected, "{focus:?}");
        }
    }

    #[test]
    fn symbols_used_elsewhere_rank_first() {
        let index = index(&[
            (
                "a.rs",
                "fn unused_one() {}\npub fn popular_one() {}\npub struct Thing;\n",
            ),
            ("b.rs", "fn x() { popular_one(); popular_one(); }\n"),
        ]);
        let options = RankOptions::default();
        let g = graph(&index, &options);
        let r = pagerank(&g, &["a.rs", "b.rs"], &[], &options);
        let order = rank_symbols_of(&index, &g, &r, 0);
        let a = &index.files()[0];
        let names: Vec<&str> = order.iter().map(|&i| a.def_name(i).unwrap()).collect();
        assert_eq!(names, ["popular_one", "Thing", "unused_one"]);
    }
}
