//! The steps of a code-map refresh that ranks the whole tree again, timed one by one (CPU
//! time of this thread) on a brain a `cairn codemap` already filled: reading every file's
//! graph part, decoding it, the name → definers map, the reference graph, PageRank (and how
//! many rounds it took). What `perf` says in aggregate, said per step, for docs/codemap.md.
//!
//! `cargo run --release -p cairn-engine --example codemap_steps -- BRAIN PROJECT [FOCUS...]`

use cairn_codemap::{Index, IndexFile, Lang, RankOptions, rank};
use cairn_store::Store;
use std::time::Duration;

/// This thread's CPU time so far (`/proc/thread-self/schedstat`: nanoseconds on a CPU).
fn cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = text.split_whitespace().next().and_then(|n| n.parse().ok());
    Duration::from_nanos(ns.unwrap_or(0))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [brain, project, focus @ ..] = args.as_slice() else {
        return Err("usage: codemap_steps BRAIN PROJECT [FOCUS...]".into());
    };
    let store = Store::open(std::path::Path::new(brain))?;
    let mut step = cpu();
    let mut lap = |name: &str| {
        let now = cpu();
        println!(
            "{name:<24} {:>8.1} ms CPU",
            (now - step).as_secs_f64() * 1000.0
        );
        step = now;
    };
    let rows = store.reader().codemap_graphs(project)?;
    lap("read graph parts");
    let bytes: usize = rows
        .iter()
        .map(|(_, g)| g.as_ref().map_or(0, Vec::len))
        .sum();
    let files: Vec<IndexFile> = rows
        .into_iter()
        .filter_map(|(m, g)| {
            let meta = cairn_codemap::FileMeta {
                path: m.path,
                lang: Lang::from_name(&m.lang)?,
                hash: m.content_hash,
                size: m.size as u64,
                mtime_ns: m.mtime_ns,
            };
            IndexFile::decode_graph(meta, &g?).ok()
        })
        .collect();
    let index = Index::from_files(files, Vec::new());
    lap("decode");
    let options = RankOptions::default();
    let definers = index.definers();
    lap("definers (alone)");
    drop(definers);
    let graph = rank::graph(&index, &options);
    lap("graph (with definers)");
    let paths: Vec<&str> = index.files().iter().map(|f| f.meta.path.as_str()).collect();
    let focus: Vec<usize> = focus.iter().filter_map(|f| index.position(f)).collect();
    let scores = rank::pagerank(&graph, &paths, &focus, &options);
    lap("pagerank");
    let edges: usize = graph.uses.iter().map(Vec::len).sum();
    let refs: usize = index.files().iter().map(|f| f.refs.len()).sum();
    let defs: usize = index.files().iter().map(|f| f.defs.len()).sum();
    println!(
        "{} files, {bytes} bytes of graph parts, {defs} defs, {refs} refs, {edges} edges, top {:?}",
        index.len(),
        scores.iter().copied().fold(0.0, f64::max)
    );
    // The iterations PageRank took: the fewest whose result is the capped run's.
    let ran = (1..=options.max_iterations)
        .find(|&k| {
            let capped = RankOptions {
                max_iterations: k,
                ..options
            };
            rank::pagerank(&graph, &paths, &focus, &capped) == scores
        })
        .unwrap_or(options.max_iterations);
    println!(
        "pagerank took {ran} iterations (cap {})",
        options.max_iterations
    );
    Ok(())
}
