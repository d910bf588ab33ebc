use cairn_codemap::*;
use std::time::Instant;
fn main() {
    let data = std::fs::read(std::env::args().nth(1).unwrap()).unwrap();
    let t = Instant::now();
    let index = Index::decode(&data).unwrap();
    eprintln!("decode {:?} files {} names {}", t.elapsed(), index.len(), index.names().len());
    let refs: usize = index.files().iter().map(|f| f.refs.len()).sum();
    let defs: usize = index.files().iter().map(|f| f.defs.len()).sum();
    eprintln!("refs {refs} defs {defs}");
    let t = Instant::now();
    let g = rank::graph(&index, &RankOptions::default());
    let edges: usize = g.uses.iter().map(|u| u.len()).sum();
    let names: usize = g.uses.iter().flat_map(|u| u.iter().map(|e| g.names(e).len())).sum();
    eprintln!("graph {:?} edges {edges} edge-names {names}", t.elapsed());
    let paths: Vec<&str> = index.files().iter().map(|f| f.meta.path.as_str()).collect();
    let t = Instant::now();
    let r = rank::pagerank(&g, &paths, &[10], &RankOptions::default());
    eprintln!("pagerank {:?}", t.elapsed());
    let t = Instant::now();
    let _s = rank::rank_symbols_of(&index, &g, &r, 10);
    eprintln!("symbols {:?}", t.elapsed());
    let t = Instant::now();
    let m = build_map(&index, &[paths[10].to_string()], 1024, &RankOptions::default());
    eprintln!("build_map total {:?} {}", t.elapsed(), m.files.len());
    let t = Instant::now();
    let e = index.encode();
    eprintln!("encode {:?} {}", t.elapsed(), e.len());
}
