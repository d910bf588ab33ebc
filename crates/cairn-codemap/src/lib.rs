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

pub mod parse;
pub mod rank;
pub mod render;
pub mod walk;

pub use parse::{Def, FileParse, Kind, Lang, parse_source};
pub use rank::RankOptions;
pub use render::{CHARS_PER_TOKEN, Cut, MapFile, MapSymbol, RankedFile, Rendered, render};
pub use walk::{MAX_FILE_BYTES, SkipReason, SourceFile, Walk, walk};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// A parsed file as the store keeps it: keyed by path, its content hash, the size and
/// modification time it was read at, and the parse.
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

/// What a scan found.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// Every mapped file, sorted by path.
    pub files: Vec<Parsed>,
    /// Files parsed in this scan (new or changed content).
    pub parsed: Vec<String>,
    /// Files whose size or time changed but whose content did not (metadata to store again).
    pub touched: Vec<String>,
    /// Files of `previous` no longer mapped.
    pub removed: Vec<String>,
    /// Files left out, with why.
    pub skipped: Vec<(String, SkipReason)>,
    /// Files with no supported language.
    pub unsupported: usize,
    /// Changed files the deadline left unparsed (their previous parse is kept, or they are
    /// missing): the map is stale.
    pub deferred: usize,
}

enum Work {
    Reuse(Parsed),
    Touched(Parsed),
    Fresh(Parsed),
    Skip(String, SkipReason),
    Deferred(Option<Parsed>),
}

/// SHA-256 of `text`, hex.
pub fn content_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Walks `root` and brings `previous` (the last scan's files, by path) up to date: a file with
/// the same size and modification time is taken as it was; another is read and checked; its
/// content hash decides whether it is parsed again. Files are parsed in parallel; a file not
/// started before `deadline` keeps its previous parse and counts as `deferred`.
pub fn scan(root: &Path, previous: &BTreeMap<String, Parsed>, deadline: Option<Instant>) -> Scan {
    let walked = walk(root);
    let work: Vec<Work> = walked
        .files
        .par_iter()
        .map(|file| {
            let before = previous.get(&file.path);
            if let Some(p) = before
                && p.size == file.size
                && p.mtime_ns == file.mtime_ns
                && p.lang == file.lang
            {
                return Work::Reuse(p.clone());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Work::Deferred(before.cloned());
            }
            let text = match walk::read_source(file) {
                Ok(text) => text,
                Err(reason) => return Work::Skip(file.path.clone(), reason),
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
                out.files.push(p);
            }
            Work::Skip(path, reason) => out.skipped.push((path, reason)),
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
        .keys()
        .filter(|path| !kept.contains(path.as_str()))
        .cloned()
        .collect();
    out
}

/// The files in map order (the focus files first, then by rank) with their symbols ranked,
/// before the budget cut.
pub fn ranked(files: &[Parsed], focus: &[String], options: &RankOptions) -> Vec<RankedFile> {
    let parses: Vec<&FileParse> = files.iter().map(|p| &p.parse).collect();
    let paths: Vec<&str> = files.iter().map(|p| p.path.as_str()).collect();
    let focus_idx: Vec<usize> = focus
        .iter()
        .filter_map(|f| paths.binary_search(&f.as_str()).ok())
        .collect();
    let graph = rank::graph(&parses, options);
    let scores = rank::pagerank(&graph, &paths, &focus_idx, options);
    let symbol_order = rank::rank_symbols(&parses, &graph, &scores);
    // The focus files lead (what the agent works on), then the rest by rank.
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by(|&a, &b| {
        focus_idx
            .contains(&b)
            .cmp(&focus_idx.contains(&a))
            .then_with(|| scores[b].total_cmp(&scores[a]))
            .then_with(|| paths[a].cmp(paths[b]))
    });
    order
        .into_iter()
        .map(|i| RankedFile {
            path: files[i].path.clone(),
            rank: scores[i],
            symbols: symbol_order[i]
                .iter()
                .map(|&d| {
                    let def = &files[i].parse.defs[d];
                    MapSymbol {
                        name: def.name.clone(),
                        kind: def.kind.as_str(),
                        line: def.line,
                        signature: def.signature.clone(),
                    }
                })
                .collect(),
        })
        .collect()
}

/// The map of `files` focused on `focus` (paths relative to the root), cut to `budget` tokens.
/// `files` must be sorted by path (as `scan` returns them).
pub fn build_map(
    files: &[Parsed],
    focus: &[String],
    budget: usize,
    options: &RankOptions,
) -> Rendered {
    render(&ranked(files, focus, options), budget)
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

/// The neighbours of `path` in the reference graph; `None` when it is not mapped.
pub fn neighbours(files: &[Parsed], path: &str, options: &RankOptions) -> Option<Neighbours> {
    let paths: Vec<&str> = files.iter().map(|p| p.path.as_str()).collect();
    let me = paths.binary_search(&path).ok()?;
    let parses: Vec<&FileParse> = files.iter().map(|p| &p.parse).collect();
    let graph = rank::graph(&parses, options);
    let mut uses: Vec<(f64, Neighbour)> = graph.uses[me]
        .iter()
        .map(|(&b, (w, names))| {
            (
                *w,
                Neighbour {
                    path: paths[b].to_string(),
                    names: names.clone(),
                },
            )
        })
        .collect();
    let mut used_by: Vec<(f64, Neighbour)> = graph.used_by[me]
        .iter()
        .filter_map(|&a| {
            let (w, names) = graph.uses[a].get(&me)?;
            Some((
                *w,
                Neighbour {
                    path: paths[a].to_string(),
                    names: names.clone(),
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
pub fn definers<'a>(files: &'a [Parsed], name: &str) -> Vec<&'a str> {
    files
        .iter()
        .filter(|p| p.parse.defs.iter().any(|d| d.name == name))
        .map(|p| p.path.as_str())
        .collect()
}
