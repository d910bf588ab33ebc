//! Which files a map covers: the walk (the `ignore` crate: `.gitignore`, `.ignore`, git's
//! excludes, hidden files skipped, symlinks never followed) and the content checks that keep
//! vendored, generated, minified, oversize, binary and non-UTF-8 files out.

use crate::parse::Lang;
use ignore::WalkBuilder;
use std::path::{Path, PathBuf};

/// Files larger than this are never read (a committed bundle, a data file, a 50 MB minified
/// script): 1 MiB holds any hand-written source file.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Directories skipped at any depth: vendored code, dependencies and build output (the
/// reference system's incident: committed build bundles ate 42 % of its map budget).
pub const SKIPPED_DIRS: &[&str] = &[
    "vendor",
    "vendored",
    "node_modules",
    "bower_components",
    "dist",
    "build",
    "target",
    "third_party",
    "third-party",
    "__pycache__",
    "site-packages",
    ".git",
    ".venv",
    "venv",
];

/// One source file the walk found, before its content is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Relative to the root, `/`-separated.
    pub path: String,
    pub abs: PathBuf,
    pub lang: Lang,
    pub size: u64,
    /// Modification time in nanoseconds since the epoch (0 when the platform has none).
    pub mtime_ns: i64,
}

/// Why a file is not in the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Over `MAX_FILE_BYTES`.
    TooLarge,
    /// A NUL byte in its first 8 KiB.
    Binary,
    /// Not valid UTF-8.
    NotUtf8,
    /// Very long lines (a minified bundle) or a `.min.` name.
    Minified,
    /// Marked as generated (`@generated`, `DO NOT EDIT`, `Code generated`).
    Generated,
    /// The file could not be read.
    Unreadable,
}

impl SkipReason {
    const ALL: [SkipReason; 6] = [
        SkipReason::TooLarge,
        SkipReason::Binary,
        SkipReason::NotUtf8,
        SkipReason::Minified,
        SkipReason::Generated,
        SkipReason::Unreadable,
    ];

    pub(crate) fn code(self) -> u8 {
        SkipReason::ALL
            .iter()
            .position(|&r| r == self)
            .expect("listed") as u8
    }

    pub(crate) fn from_code(code: u8) -> Option<SkipReason> {
        SkipReason::ALL.get(usize::from(code)).copied()
    }
}

/// What the walk found: the source files (sorted by path) and how many files it passed over.
#[derive(Debug, Clone, Default)]
pub struct Walk {
    pub files: Vec<SourceFile>,
    /// Files skipped by size at walk time (the others are skipped when read).
    pub skipped: Vec<(String, SkipReason)>,
    /// Files with no supported language (not counted as skipped).
    pub unsupported: usize,
}

/// Walks `root`: `.gitignore` is honoured inside and outside git (outside git the directory is
/// walked with the same rules), hidden files and `SKIPPED_DIRS` are skipped, symlinks are not
/// followed (so a symlink loop is never entered). The result is sorted by path.
pub fn walk(root: &Path) -> Walk {
    let mut out = Walk::default();
    let walker = WalkBuilder::new(root)
        .follow_links(false)
        .require_git(false)
        .git_global(false)
        .hidden(true)
        .parents(false)
        .filter_entry(|entry| {
            !(entry.file_type().is_some_and(|t| t.is_dir())
                && entry
                    .file_name()
                    .to_str()
                    .is_some_and(|name| SKIPPED_DIRS.contains(&name)))
        })
        .build();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let Some(path) = rel_string(rel) else {
            continue;
        };
        let Some(lang) = Lang::from_path(&path) else {
            out.unsupported += 1;
            continue;
        };
        let Ok(meta) = entry.metadata() else {
            out.skipped.push((path, SkipReason::Unreadable));
            continue;
        };
        if meta.len() > MAX_FILE_BYTES {
            out.skipped.push((path, SkipReason::TooLarge));
            continue;
        }
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        out.files.push(SourceFile {
            path,
            abs: entry.path().to_path_buf(),
            lang,
            size: meta.len(),
            mtime_ns,
        });
    }
    out.files.sort_by(|a, b| a.path.cmp(&b.path));
    out.skipped.sort();
    out
}

/// `rel` as a `/`-separated string; `None` for a name that is not UTF-8.
fn rel_string(rel: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for part in rel.components() {
        parts.push(part.as_os_str().to_str()?);
    }
    Some(parts.join("/"))
}

/// Reads a source file and checks its content: the text, or why it is left out.
pub fn read_source(file: &SourceFile) -> Result<String, SkipReason> {
    let bytes = std::fs::read(&file.abs).map_err(|_| SkipReason::Unreadable)?;
    check_content(&file.path, bytes)
}

/// The content checks of `read_source`, on bytes already read.
pub fn check_content(path: &str, bytes: Vec<u8>) -> Result<String, SkipReason> {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(SkipReason::TooLarge);
    }
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return Err(SkipReason::Binary);
    }
    let text = String::from_utf8(bytes).map_err(|_| SkipReason::NotUtf8)?;
    let name = path.rsplit('/').next().unwrap_or(path);
    if name.contains(".min.") || name.contains(".bundle.") || is_minified(&text) {
        return Err(SkipReason::Minified);
    }
    let head: String = text.chars().take(2048).collect();
    if head.contains("@generated")
        || head.contains("DO NOT EDIT")
        || head.contains("Code generated")
        || head.contains("autogenerated by")
    {
        return Err(SkipReason::Generated);
    }
    Ok(text)
}

/// A line over 4,000 bytes, or lines averaging over 300 bytes: nobody writes code like that.
fn is_minified(text: &str) -> bool {
    let mut lines = 0usize;
    for line in text.lines() {
        lines += 1;
        if line.len() > 4000 {
            return true;
        }
    }
    lines > 0 && text.len() / lines > 300
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_checks_name_their_reason() {
        assert_eq!(
            check_content("a.rs", b"fn a() {}\n".to_vec()),
            Ok("fn a() {}\n".into())
        );
        assert_eq!(
            check_content("a.rs", vec![b'f', 0, b'x']),
            Err(SkipReason::Binary)
        );
        assert_eq!(
            check_content("a.rs", vec![b'f', 0xff, 0xfe]),
            Err(SkipReason::NotUtf8)
        );
        assert_eq!(
            check_content("a.min.js", b"var a;".to_vec()),
            Err(SkipReason::Minified)
        );
        let long = format!("var a={};\n", "1+".repeat(3000));
        assert_eq!(
            check_content("a.js", long.into_bytes()),
            Err(SkipReason::Minified)
        );
        assert_eq!(
            check_content(
                "a.go",
                b"// Code generated by x. DO NOT EDIT.\npackage a\n".to_vec()
            ),
            Err(SkipReason::Generated)
        );
    }
}
