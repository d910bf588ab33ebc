//! The code map (issue 17, docs/codemap.md): what in a repository matters, within a budget.
//!
//! `walk` finds the source files (`.gitignore` honoured; vendored, generated, build output,
//! minified, oversize, binary and non-UTF-8 files skipped), `parse` reads definitions and
//! references with tree-sitter, `rank` builds the file → file reference graph and runs
//! personalized PageRank, `render` cuts the map to a token budget. `scan` is the incremental
//! step the store builds on: it re-reads only files whose size or modification time changed,
//! and re-parses only those whose content hash changed.
//!
//! This crate touches the files of the tree it maps and nothing else: no database, no git.

pub mod index;
pub mod parse;
pub mod rank;
pub mod render;
pub mod walk;

pub use index::{
    Detail, FileMeta, IdMap, Index, IndexDef, IndexFile, IndexRef, NameId, SkippedFile, index_key,
    name_id,
};
pub use parse::{Def, FileParse, Kind, Lang, parse_source};
pub use rank::RankOptions;
pub use render::{CHARS_PER_TOKEN, Cut, MapFile, MapSymbol, RankedFile, Rendered, render};
pub use walk::{MAX_FILE_BYTES, SkipReason, SourceFile, Walk, walk, walk_listed};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::path::Path;
use std::time::Instant;

/// A parsed file: keyed by path, its content hash, the size and modification time it was
/// read at, and the parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parsed {
    pub path: String,
    pub lang: Lang,
    /// SHA-256 of the content, hex.
    pub hash: String,
    pub size: u64,
    pub mtime_ns: i64,
    pub parse: FileParse,
}

impl Parsed {
    pub fn meta(&self) -> FileMeta {
        FileMeta {
            path: self.path.clone(),
            lang: self.lang,
            hash: self.hash.clone(),
            size: self.size,
            mtime_ns: self.mtime_ns,
        }
    }
}

/// What a scan found, to apply to the index it was made against ([`Index::apply`]).
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// Every mapped file, sorted by path.
    pub files: Vec<FileMeta>,
    /// The files parsed in this scan (new or changed content), sorted by path.
    pub fresh: Vec<Parsed>,
    /// Their paths.
    pub parsed: Vec<String>,
    /// Files whose size or time changed but whose content did not (metadata to store again).
    pub touched: Vec<String>,
    /// Files of the index no longer mapped.
    pub removed: Vec<String>,
    /// Files left out, with why.
    pub skipped: Vec<(String, SkipReason)>,
    /// The files the content checks refused, with the size and time they had (so that they
    /// are not read again while unchanged).
    pub skipped_read: Vec<(String, u64, i64, SkipReason)>,
    /// Files with no supported language.
    pub unsupported: usize,
    /// Changed files the deadline left unparsed (their previous parse is kept, or they are
    /// missing): the map is stale.
    pub deferred: usize,
}

enum Work {
    Reuse(FileMeta),
    Touched(FileMeta),
    Fresh(Parsed),
    /// Refused by the content checks, now or (unchanged since) before.
    Skip(String, u64, i64, SkipReason),
    Deferred(Option<FileMeta>),
}

/// SHA-256 of `text`, hex.
pub fn content_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Walks `root` and compares it with `previous` (the last scan's index): a file with the same
/// size and modification time is taken as it was (a skipped one stays skipped, unread);
/// another is read and checked; its content hash decides whether it is parsed again. Files are
/// parsed in parallel; a file not started before `deadline` keeps its previous parse and
/// counts as `deferred`.
pub fn scan(root: &Path, previous: &Index, deadline: Option<Instant>) -> Scan {
    scan_walked(walk(root), previous, deadline)
}

/// [`scan`] of the files another walk found ([`walk::walk_listed`]: git's own lists).
pub fn scan_walked(walked: Walk, previous: &Index, deadline: Option<Instant>) -> Scan {
    let work: Vec<Work> = walked
        .files
        .par_iter()
        .map(|file| {
            let before = previous.file(&file.path).map(|f| &f.meta);
            if let Some(p) = before
                && p.size == file.size
                && p.mtime_ns == file.mtime_ns
                && p.lang == file.lang
            {
                return Work::Reuse(p.clone());
            }
            if before.is_none()
                && let Some(s) = previous.skipped(&file.path)
                && s.size == file.size
                && s.mtime_ns == file.mtime_ns
            {
                return Work::Skip(file.path.clone(), s.size, s.mtime_ns, s.reason);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Work::Deferred(before.cloned());
            }
            let text = match walk::read_source(file) {
                Ok(text) => text,
                Err(reason) => {
                    return Work::Skip(file.path.clone(), file.size, file.mtime_ns, reason);
                }
            };
            let hash = content_hash(&text);
            if let Some(p) = before
                && p.hash == hash
                && p.lang == file.lang
            {
                let mut p = p.clone();
                p.size = file.size;
                p.mtime_ns = file.mtime_ns;
                return Work::Touched(p);
            }
            Work::Fresh(Parsed {
                path: file.path.clone(),
                lang: file.lang,
                hash,
                size: file.size,
                mtime_ns: file.mtime_ns,
                parse: parse_source(file.lang, &text),
            })
        })
        .collect();
    let mut out = Scan {
        skipped: walked.skipped,
        unsupported: walked.unsupported,
        ..Scan::default()
    };
    for item in work {
        match item {
            Work::Reuse(p) => out.files.push(p),
            Work::Touched(p) => {
                out.touched.push(p.path.clone());
                out.files.push(p);
            }
            Work::Fresh(p) => {
                out.parsed.push(p.path.clone());
                out.files.push(p.meta());
                out.fresh.push(p);
            }
            Work::Skip(path, size, mtime_ns, reason) => {
                // An unreadable file may be readable next time: not remembered.
                if reason != SkipReason::Unreadable {
                    out.skipped_read
                        .push((path.clone(), size, mtime_ns, reason));
                }
                out.skipped.push((path, reason));
            }
            Work::Deferred(p) => {
                out.deferred += 1;
                out.files.extend(p);
            }
        }
    }
    out.skipped.sort();
    let kept: std::collections::BTreeSet<&str> =
        out.files.iter().map(|p| p.path.as_str()).collect();
    out.removed = previous
        .files()
        .iter()
        .map(|f| f.meta.path.as_str())
        .filter(|path| !kept.contains(path))
        .map(str::to_string)
        .collect();
    out
}

/// The ranking of an index: the reference graph and each file's score.
#[derive(Debug, Clone)]
pub struct Ranking {
    pub graph: rank::Graph,
    pub scores: Vec<f64>,
    /// The focus files' positions in the index.
    pub focus: Vec<usize>,
}

/// Ranks `index` toward `focus` (paths relative to the root; those not mapped are ignored).
pub fn rank_index(index: &Index, focus: &[String], options: &RankOptions) -> Ranking {
    rank_with(index, None, focus, options)
}

/// [`rank_index`] with the reference graph of `index` when it was built already.
pub fn rank_with(
    index: &Index,
    graph: Option<rank::Graph>,
    focus: &[String],
    options: &RankOptions,
) -> Ranking {
    let focus_idx: Vec<usize> = focus.iter().filter_map(|f| index.position(f)).collect();
    let graph = graph.unwrap_or_else(|| rank::graph(index, options));
    let paths: Vec<&str> = index.files().iter().map(|f| f.meta.path.as_str()).collect();
    let scores = rank::pagerank(&graph, &paths, &focus_idx, options);
    Ranking {
        graph,
        scores,
        focus: focus_idx,
    }
}

/// The files in map order: the focus files first (what the agent works on), then by rank,
/// ties by path. Indices into the index's files.
pub fn map_order(index: &Index, ranking: &Ranking) -> Vec<usize> {
    order_by(index, &ranking.focus, &ranking.scores)
}

/// The files in the order of `scores` (highest first), the `focus` files before all others,
/// ties by path: the one sort of [`map_order`] and [`map_order_within`].
pub fn order_by(index: &Index, focus: &[usize], scores: &[f64]) -> Vec<usize> {
    let files = index.files();
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by(|&a, &b| {
        focus
            .contains(&b)
            .cmp(&focus.contains(&a))
            .then_with(|| scores[b].total_cmp(&scores[a]))
            .then_with(|| files[a].meta.path.cmp(&files[b].meta.path))
    });
    order
}

/// What showing a file is estimated to take, in characters, before its details are read: its
/// path line and a line per top-level definition ([`TOP_LEVEL_LINE_CHARS`] each).
pub fn shown_cost(file: &IndexFile) -> usize {
    let top = file.defs.iter().filter(|d| d.top_level).count();
    file.meta.path.chars().count() + 1 + top * TOP_LEVEL_LINE_CHARS
}

/// The characters a top-level definition line is counted for in [`shown_cost`].
pub const TOP_LEVEL_LINE_CHARS: usize = 40;

/// How much a file's share of the budget lowers its place: its score is divided by
/// `1 + COST_WEIGHT × shown_cost / (4 × budget)`.
pub const COST_WEIGHT: f64 = 4.0;

/// [`map_order`] for a map of `budget` tokens: a file's score is divided by
/// `1 + COST_WEIGHT × (its estimated cost / the budget's characters)`, so that at a small
/// budget a file that would take a large share of it (a central file with many definitions)
/// gives way to cheaper ones of similar score, while at a large budget the order is nearly the
/// rank's. The focus files still come first; ties by path.
pub fn map_order_within(index: &Index, ranking: &Ranking, budget: usize) -> Vec<usize> {
    let files = index.files();
    let limit = (budget.max(1) * render::CHARS_PER_TOKEN) as f64;
    let adjusted: Vec<f64> = files
        .iter()
        .zip(&ranking.scores)
        .map(|(f, &s)| s / (1.0 + COST_WEIGHT * shown_cost(f) as f64 / limit))
        .collect();
    order_by(index, &ranking.focus, &adjusted)
}

/// The map of `index` focused on `focus` (paths relative to the root), cut to `budget` tokens.
/// Symbols are ranked only for the files whose lines are placed before the symbol lines; the
/// detail (names, signatures) of such a file that has none is asked of `detail`, and an error
/// it gives is the answer.
pub fn build_map(
    index: &Index,
    focus: &[String],
    budget: usize,
    options: &RankOptions,
    detail: impl FnMut(&IndexFile) -> Result<Detail, String>,
) -> Result<Rendered, String> {
    build_map_with(index, None, focus, budget, options, detail)
}

/// [`build_map`] with the reference graph of `index` when it was built already.
pub fn build_map_with(
    index: &Index,
    graph: Option<rank::Graph>,
    focus: &[String],
    budget: usize,
    options: &RankOptions,
    mut detail: impl FnMut(&IndexFile) -> Result<Detail, String>,
) -> Result<Rendered, String> {
    let ranking = rank_with(index, graph, focus, options);
    let order = map_order_within(index, &ranking, budget);
    let files = index.files();
    let heads: Vec<render::FileHead<'_>> = order
        .iter()
        .map(|&i| render::FileHead {
            path: &files[i].meta.path,
            rank: ranking.scores[i],
            symbols: files[i].defs.len(),
        })
        .collect();
    let mut failed: Option<String> = None;
    let rendered = render::render_with(
        &heads,
        |k| {
            let i = order[k];
            let file = &files[i];
            let read;
            let shown = match &file.detail {
                Some(d) => d,
                None => match detail(file) {
                    Ok(d) => {
                        read = d;
                        &read
                    }
                    Err(e) => {
                        failed.get_or_insert(e);
                        return Vec::new();
                    }
                },
            };
            rank::rank_symbols_of(index, &ranking.graph, &ranking.scores, i)
                .into_iter()
                .map(|d| {
                    let def = &file.defs[d];
                    MapSymbol {
                        name: shown.names[d].clone(),
                        kind: def.kind,
                        line: def.line,
                        signature: shown.signatures[d].clone(),
                    }
                })
                .collect()
        },
        budget,
    );
    match failed {
        Some(e) => Err(e),
        None => Ok(rendered),
    }
}

/// One neighbour of a file: the other file and the identifiers that link them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Neighbour {
    pub path: String,
    pub names: Vec<String>,
}

/// What a file uses and what uses it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Neighbours {
    pub path: String,
    /// Files defining identifiers this file uses (heaviest link first).
    pub uses: Vec<Neighbour>,
    /// Files using identifiers this file defines.
    pub used_by: Vec<Neighbour>,
}

/// The neighbours of `path` in the reference graph; `None` when it is not mapped. The linking
/// identifiers are named from the details of the files that define them (the file itself and
/// those it uses; one without its detail names none).
pub fn neighbours(index: &Index, graph: &rank::Graph, path: &str) -> Option<Neighbours> {
    let me = index.position(path)?;
    let files = index.files();
    let names_of = |a: usize, edge: &rank::Edge| -> Vec<String> {
        let file = &files[edge.to];
        let Some(detail) = &file.detail else {
            return Vec::new();
        };
        graph
            .names(index, a, edge)
            .iter()
            .filter_map(|r| {
                let d = file.defs.iter().position(|d| d.name == r.name)?;
                Some(detail.names[d].clone())
            })
            .collect()
    };
    let mut uses: Vec<(f64, Neighbour)> = graph.uses[me]
        .iter()
        .map(|edge| {
            (
                edge.weight,
                Neighbour {
                    path: files[edge.to].meta.path.clone(),
                    names: names_of(me, edge),
                },
            )
        })
        .collect();
    let mut used_by: Vec<(f64, Neighbour)> = graph.used_by[me]
        .iter()
        .filter_map(|&a| {
            let edge = graph.edge(a, me)?;
            Some((
                edge.weight,
                Neighbour {
                    path: files[a].meta.path.clone(),
                    names: names_of(a, edge),
                },
            ))
        })
        .collect();
    let by_weight = |x: &(f64, Neighbour), y: &(f64, Neighbour)| {
        y.0.total_cmp(&x.0).then_with(|| x.1.path.cmp(&y.1.path))
    };
    uses.sort_by(by_weight);
    used_by.sort_by(by_weight);
    Some(Neighbours {
        path: path.to_string(),
        uses: uses.into_iter().map(|(_, n)| n).collect(),
        used_by: used_by.into_iter().map(|(_, n)| n).collect(),
    })
}

/// The files defining `name` (a symbol), sorted.
pub fn definers<'a>(index: &'a Index, name: &str) -> Vec<&'a str> {
    let id = name_id(name);
    index
        .files()
        .iter()
        .filter(|f| f.defs.iter().any(|d| d.name == id))
        .map(|f| f.meta.path.as_str())
        .collect()
}
