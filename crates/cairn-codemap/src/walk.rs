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
    walk_into(root, root, false, &mut out);
    out.finish()
}

/// The files of a git work tree from git's own lists, without reading its directories:
/// `tracked` (`git ls-files`: the index's paths, relative to `root`, some possibly deleted from
/// the working tree or not regular files there) and `untracked` (`git status`'s `??` entries: a
/// file, or a directory ending in `/`, walked as [`walk`] walks, its parents' `.gitignore`
/// read). The same rules as [`walk`] for what is kept: hidden paths and `SKIPPED_DIRS` are left
/// out, a symlink or a submodule is not a file, a deleted file is simply absent. A tracked file
/// is mapped even when a `.gitignore` pattern matches it (git tracks it). Sorted by path.
pub fn walk_listed(root: &Path, tracked: &[String], untracked: &[String]) -> Walk {
    let mut out = Walk::default();
    let mut seen: Option<&str> = None;
    for path in tracked {
        // A file in conflict is listed once per stage.
        if seen == Some(path.as_str()) {
            continue;
        }
        seen = Some(path.as_str());
        consider_listed(root, path, &mut out);
    }
    for path in untracked {
        match path.strip_suffix('/') {
            Some(dir) if listed_path_kept(dir) => walk_into(root, &root.join(dir), true, &mut out),
            Some(_) => {}
            None => consider_listed(root, path, &mut out),
        }
    }
    out.finish()
}

/// Whether a listed path can be in a map: no hidden component, no skipped directory.
fn listed_path_kept(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let Some((_, dirs)) = parts.split_last() else {
        return false;
    };
    !parts.iter().any(|p| p.is_empty() || p.starts_with('.'))
        && !dirs.iter().any(|d| SKIPPED_DIRS.contains(d))
}

fn consider_listed(root: &Path, path: &str, out: &mut Walk) {
    if !listed_path_kept(path) {
        return;
    }
    let abs = root.join(path);
    match std::fs::symlink_metadata(&abs) {
        Ok(meta) if meta.is_file() => out.add(path.to_string(), abs, Ok(meta)),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => out.add(path.to_string(), abs, Err(e)),
    }
}

/// Walks `dir` (`root` itself or a directory under it) into `out` with [`walk`]'s rules; with
/// `parents`, the `.gitignore` files of the directories above `dir` are read too.
fn walk_into(root: &Path, dir: &Path, parents: bool, out: &mut Walk) {
    let walker = WalkBuilder::new(dir)
        .follow_links(false)
        .require_git(false)
        .git_global(false)
        .hidden(true)
        .parents(parents)
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
        let meta = entry.metadata().map_err(std::io::Error::other);
        out.add(path, entry.path().to_path_buf(), meta);
    }
}

impl Walk {
    /// One file found (its metadata, or why there is none): kept, skipped by size or unreadable,
    /// or counted as unsupported.
    fn add(&mut self, path: String, abs: PathBuf, meta: std::io::Result<std::fs::Metadata>) {
        let Some(lang) = Lang::from_path(&path) else {
            self.unsupported += 1;
            return;
        };
        let Ok(meta) = meta else {
            self.skipped.push((path, SkipReason::Unreadable));
            return;
        };
        if meta.len() > MAX_FILE_BYTES {
            self.skipped.push((path, SkipReason::TooLarge));
            return;
        }
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        self.files.push(SourceFile {
            path,
            abs,
            lang,
            size: meta.len(),
            mtime_ns,
        });
    }

    fn finish(mut self) -> Walk {
        self.files.sort_by(|a, b| a.path.cmp(&b.path));
        self.files.dedup_by(|a, b| a.path == b.path);
        self.skipped.sort();
        self.skipped.dedup();
        self
    }
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
