//! cairn's fuzz targets: one function per parser of text cairn did not write, each taking the
//! fuzzer's bytes and asserting the invariants that matter for that parser (a panic is a
//! finding, whether from the parser or from a broken invariant).
//!
//! Two runners call them: `fuzz/` (cargo-fuzz / libFuzzer, coverage-guided, run by
//! `scripts/fuzz.sh`) and this crate's `tests/corpus.rs`, which replays every committed seed and
//! regression input through the same functions in the ordinary test suite.
//!
//! Targets that need a brain (`jsonl_line`, `share_envelope`, `mcp_tools`) share one per thread,
//! on a temporary SQLite file (`$TMPDIR`), replaced every [`BRAIN_USES`] inputs so it stays small.

mod brain;
mod exchange;
mod text;
mod wiki;

pub use brain::BRAIN_USES;

/// A fuzz target: the fuzzer's bytes in, a panic when an invariant breaks.
pub type Target = fn(&[u8]);

/// Every target, by the name its corpus folder and its cargo-fuzz binary have.
pub const TARGETS: &[(&str, Target)] = &[
    ("sanitize", text::sanitize),
    ("query", text::query),
    ("transcript", text::transcript),
    ("hook_payload", text::hook_payload),
    ("delta", text::delta),
    ("frontmatter", wiki::frontmatter),
    ("wiki_page", wiki::wiki_page),
    ("importers", wiki::importers),
    ("jsonl_line", exchange::jsonl_line),
    ("share_envelope", exchange::share_envelope),
    ("mcp_tools", exchange::mcp_tools),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS
        .iter()
        .find(|(candidate, _)| *candidate == name)
        .map(|(_, target)| *target)
}

pub use exchange::{jsonl_line, mcp_tools, share_envelope};
pub use text::{delta, hook_payload, query, sanitize, transcript};
pub use wiki::{frontmatter, importers, wiki_page};

/// Splits fuzzer bytes into `N` parts at `0xFF` bytes (never part of UTF-8 text, so a seed
/// stays readable); missing parts are empty.
pub(crate) fn parts<const N: usize>(data: &[u8]) -> [&[u8]; N] {
    let mut out = [&data[..0]; N];
    let mut rest = data;
    for (index, slot) in out.iter_mut().enumerate() {
        if index + 1 == N {
            *slot = rest;
            break;
        }
        match rest.iter().position(|byte| *byte == 0xFF) {
            Some(at) => {
                *slot = &rest[..at];
                rest = &rest[at + 1..];
            }
            None => {
                *slot = rest;
                rest = &rest[rest.len()..];
            }
        }
    }
    out
}

/// Fuzzer bytes as text, invalid UTF-8 replaced.
pub(crate) fn lossy(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}
