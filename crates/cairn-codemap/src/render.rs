//! The map cut to a token budget (tokens = characters / 4, never exceeded), as text and as the
//! JSON of docs/cli.md, naming what was cut.

use crate::parse::Kind;
use serde::{Deserialize, Serialize};

/// One ranked file handed to the renderer: its symbols already in rank order.
#[derive(Debug, Clone)]
pub struct RankedFile {
    pub path: String,
    pub rank: f64,
    pub symbols: Vec<MapSymbol>,
}

/// A symbol as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapSymbol {
    pub name: String,
    pub kind: Kind,
    pub line: u32,
    pub signature: String,
}

/// A file as printed, with the symbols shown (in line order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MapFile {
    pub path: String,
    pub rank: f64,
    pub symbols: Vec<MapSymbol>,
}

/// What did not fit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut {
    pub files: usize,
    pub symbols: usize,
}

/// The map within its budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rendered {
    /// The map as printed (the text form), at most `4 × budget` characters.
    pub text: String,
    /// The files shown, in map order.
    pub files: Vec<MapFile>,
    /// Characters of `text`.
    pub chars: usize,
    pub cut: Cut,
}

/// Characters per token.
pub const CHARS_PER_TOKEN: usize = 4;

/// The share of the budget the file lines may take before any symbol line is placed; symbol
/// lines come next, then more file lines if room is left.
const PATH_SHARE: f64 = 0.5;

fn path_line(path: &str) -> String {
    format!("{path}\n")
}

fn symbol_line(symbol: &MapSymbol) -> String {
    format!("  {}: {}\n", symbol.line, symbol.signature)
}

fn cut_line(cut: Cut) -> String {
    format!("[cut: {} files, {} symbols]\n", cut.files, cut.symbols)
}

fn width(text: &str) -> usize {
    text.chars().count()
}

/// Renders `files` (in map order) within `budget_tokens`: file lines in order while they take
/// at most half the budget, then symbol lines by priority (the file's place, then the
/// symbol's place in its file), then more file lines. What is left out is counted in a last
/// `[cut: …]` line, which is counted in the budget too (left out when even it does not fit).
pub fn render(files: &[RankedFile], budget_tokens: usize) -> Rendered {
    let heads: Vec<FileHead<'_>> = files
        .iter()
        .map(|f| FileHead {
            path: &f.path,
            rank: f.rank,
            symbols: f.symbols.len(),
        })
        .collect();
    render_with(&heads, |i| files[i].symbols.clone(), budget_tokens)
}

/// A file in map order before its symbols are needed: its path, rank and symbol count.
#[derive(Debug, Clone, Copy)]
pub struct FileHead<'a> {
    pub path: &'a str,
    pub rank: f64,
    pub symbols: usize,
}

/// [`render`], asking for a file's ranked symbols (`symbols(i)`, exactly `files[i].symbols`
/// of them) only for the files whose lines are placed before the symbol lines: the others
/// never show a symbol, so a map of thousands of files ranks the symbols of a few dozen.
pub fn render_with(
    files: &[FileHead<'_>],
    mut symbols: impl FnMut(usize) -> Vec<MapSymbol>,
    budget_tokens: usize,
) -> Rendered {
    let limit = budget_tokens.saturating_mul(CHARS_PER_TOKEN);
    let total_symbols: usize = files.iter().map(|f| f.symbols).sum();
    // Room kept for the notice: its widest form for these counts.
    let reserve = width(&cut_line(Cut {
        files: files.len(),
        symbols: total_symbols,
    }));
    let room = limit.saturating_sub(reserve);
    let mut used = 0usize;
    let mut shown = vec![false; files.len()];
    let mut picked: Vec<Vec<usize>> = vec![Vec::new(); files.len()];
    let mut fetched: Vec<Vec<MapSymbol>> = vec![Vec::new(); files.len()];
    let path_room = (room as f64 * PATH_SHARE) as usize;
    for (i, file) in files.iter().enumerate() {
        let cost = width(&path_line(file.path));
        if used + cost > path_room {
            break;
        }
        used += cost;
        shown[i] = true;
        fetched[i] = symbols(i);
        debug_assert_eq!(fetched[i].len(), file.symbols);
    }
    // Symbol lines: round by round, the k-th symbol of each shown file in file order (the
    // shown files listed once: the rounds go over them, not over every file of the tree).
    let with_symbols: Vec<usize> = (0..files.len())
        .filter(|&i| shown[i] && !fetched[i].is_empty())
        .collect();
    let max_symbols = fetched.iter().map(Vec::len).max().unwrap_or(0);
    for k in 0..max_symbols {
        for &i in &with_symbols {
            let Some(symbol) = fetched[i].get(k) else {
                continue;
            };
            let cost = width(&symbol_line(symbol));
            if used + cost <= room {
                used += cost;
                picked[i].push(k);
            }
        }
    }
    for (i, file) in files.iter().enumerate() {
        if shown[i] {
            continue;
        }
        let cost = width(&path_line(file.path));
        if used + cost <= room {
            used += cost;
            shown[i] = true;
        }
    }
    let mut text = String::new();
    let mut out_files = Vec::new();
    let mut cut = Cut::default();
    for (i, file) in files.iter().enumerate() {
        if !shown[i] {
            cut.files += 1;
            cut.symbols += file.symbols;
            continue;
        }
        let mut symbols: Vec<MapSymbol> =
            picked[i].iter().map(|&k| fetched[i][k].clone()).collect();
        symbols.sort_by(|a, b| a.line.cmp(&b.line).then_with(|| a.name.cmp(&b.name)));
        cut.symbols += file.symbols - symbols.len();
        text.push_str(&path_line(file.path));
        for symbol in &symbols {
            text.push_str(&symbol_line(symbol));
        }
        out_files.push(MapFile {
            path: file.path.to_string(),
            rank: file.rank,
            symbols,
        });
    }
    if cut != Cut::default() {
        let notice = cut_line(cut);
        if width(&text) + width(&notice) <= limit {
            text.push_str(&notice);
        }
    }
    let chars = width(&text);
    debug_assert!(chars <= limit);
    Rendered {
        text,
        files: out_files,
        chars,
        cut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(n: usize, symbols: usize) -> Vec<RankedFile> {
        (0..n)
            .map(|i| RankedFile {
                path: format!("src/file_{i}.rs"),
                rank: 1.0 / (i + 1) as f64,
                symbols: (0..symbols)
                    .map(|s| MapSymbol {
                        name: format!("f{s}"),
                        kind: Kind::Function,
                        line: u32::try_from(s * 10 + 1).unwrap(),
                        signature: format!("pub fn f{s}(x: u32) -> u32 {{"),
                    })
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn never_over_budget_at_every_boundary() {
        let input = files(30, 8);
        for budget in 0..400 {
            let map = render(&input, budget);
            assert!(
                map.chars <= budget * 4,
                "budget {budget}: {} chars",
                map.chars
            );
            assert_eq!(map.chars, map.text.chars().count());
            let shown: usize = map.files.iter().map(|f| f.symbols.len()).sum();
            assert_eq!(map.files.len() + map.cut.files, 30);
            assert_eq!(shown + map.cut.symbols, 240);
        }
    }

    #[test]
    fn exact_fit_shows_everything_and_one_less_cuts() {
        let input = files(2, 1);
        let full = render(&input, 10_000);
        assert_eq!(full.cut, Cut::default());
        let exact = full.chars;
        // A budget whose 4× equals the text (plus the notice room) shows everything; cutting
        // the budget below what all of it needs cuts and says so.
        let reserve = cut_line(Cut {
            files: 2,
            symbols: 2,
        })
        .chars()
        .count();
        let fits = render(&input, (exact + reserve).div_ceil(4));
        assert_eq!(fits.text, full.text);
        let tight = render(&input, (exact + reserve) / 4 - 1);
        assert!(tight.cut != Cut::default());
        assert!(tight.text.ends_with("symbols]\n"), "{}", tight.text);
        assert!(tight.chars <= ((exact + reserve) / 4 - 1) * 4);
    }

    #[test]
    fn text_lists_files_in_order_with_symbol_lines() {
        let map = render(&files(2, 2), 10_000);
        assert_eq!(
            map.text,
            "src/file_0.rs\n  1: pub fn f0(x: u32) -> u32 {\n  11: pub fn f1(x: u32) -> u32 {\n\
             src/file_1.rs\n  1: pub fn f0(x: u32) -> u32 {\n  11: pub fn f1(x: u32) -> u32 {\n"
        );
    }

    #[test]
    fn non_ascii_counts_characters_not_bytes() {
        let input = vec![RankedFile {
            path: "src/é.rs".into(),
            rank: 1.0,
            symbols: vec![MapSymbol {
                name: "ü".into(),
                kind: Kind::Function,
                line: 1,
                signature: "fn ü() -> «x» {".into(),
            }],
        }];
        let map = render(&input, 100);
        assert_eq!(map.chars, map.text.chars().count());
        assert!(map.text.len() > map.chars);
    }
}
