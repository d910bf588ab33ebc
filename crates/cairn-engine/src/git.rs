//! What cairn reads from git: the project key, the current commit, and freshness verdicts.
//!
//! git is called as a process (`git -C DIR …`): no library, no network, and a missing git or a
//! directory outside a repository simply yields `None`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What `git -C DIR ARGS…` printed, when it ran and succeeded.
fn git_output(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output.status.success().then_some(output.stdout)
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    git_output(dir, args).map(|out| String::from_utf8_lossy(&out).trim().to_string())
}

/// The root of the git work tree containing `dir`.
pub fn repo_root(dir: &Path) -> Option<PathBuf> {
    git(dir, &["rev-parse", "--show-toplevel"])
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

/// The project key of `dir`: the normalized origin URL when there is one, else the absolute
/// root path of the repository, else the absolute directory itself.
pub fn project_key(dir: &Path) -> String {
    match repo_root(dir) {
        Some(root) => {
            match git(&root, &["config", "--get", "remote.origin.url"]).filter(|u| !u.is_empty()) {
                Some(url) => normalize_remote(&url),
                None => root.display().to_string(),
            }
        }
        None => std::path::absolute(dir)
            .unwrap_or_else(|_| dir.to_path_buf())
            .display()
            .to_string(),
    }
}

/// `git@github.com:Org/Repo.git`, `https://user@github.com/org/repo` → `github.com/org/repo`.
pub fn normalize_remote(url: &str) -> String {
    let mut rest = url.trim();
    if let Some((_, after)) = rest.split_once("://") {
        rest = after;
    }
    if let Some((_, after)) = rest.split_once('@') {
        rest = after;
    }
    let rest = rest.trim_end_matches('/').trim_end_matches(".git");
    let rest = match rest.split_once(':') {
        // scp-like `host:path`, but not `host:port/path`
        Some((host, path)) if !path.starts_with(|c: char| c.is_ascii_digit()) => {
            format!("{host}/{path}")
        }
        Some((host, path)) => {
            let path = path
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start_matches('/');
            format!("{host}/{path}")
        }
        None => rest.to_string(),
    };
    rest.to_lowercase()
}

/// The commit HEAD points at.
pub fn head_commit(dir: &Path) -> Option<String> {
    git(dir, &["rev-parse", "HEAD"]).filter(|s| s.len() >= 7)
}

/// The root of the git work tree containing `dir` and the commit HEAD points at (`None` before
/// the first commit), from one `git` process when there is a commit; `None` outside git.
pub fn root_and_head(dir: &Path) -> Option<(PathBuf, Option<String>)> {
    if let Some(out) = git(dir, &["rev-parse", "--show-toplevel", "HEAD"]) {
        let mut lines = out.lines();
        if let (Some(root), Some(head), None) = (lines.next(), lines.next(), lines.next())
            && !root.is_empty()
            && head.len() >= 7
        {
            return Some((PathBuf::from(root), Some(head.to_string())));
        }
    }
    // Before the first commit HEAD names nothing and the question above fails: the root alone.
    Some((repo_root(dir)?, None))
}

/// Where a commit-stamped record was stamped, as far as freshness is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StampedIn {
    /// A record of the project `dir` belongs to: its commit is of this repository, so a commit
    /// missing from the tree (a rebase, a shallow clone) is worth saying.
    ThisProject,
    /// A personal record: stamped in whatever repository it was written from. Only a commit
    /// this tree holds says anything about it; any other is another repository's, no verdict.
    Personal,
}

/// Whether a stored claim is still fresh against the working tree's history. A record of
/// another project gets no verdict at all: the caller does not ask.
pub fn freshness(dir: &Path, commit: &str, stamped_in: StampedIn) -> Option<String> {
    let short: String = commit.chars().take(8).collect();
    head_commit(dir)?;
    if git(dir, &["cat-file", "-e", &format!("{commit}^{{commit}}")]).is_none() {
        if stamped_in == StampedIn::Personal {
            return None;
        }
        return Some(format!(
            "stored at {short}, which is not in this tree; re-check against source"
        ));
    }
    let count: u64 = git(dir, &["rev-list", "--count", &format!("{commit}..HEAD")])?
        .parse()
        .ok()?;
    Some(match count {
        0 => format!("tree unchanged since stored ({short})"),
        1 => format!("1 commit since {short}; re-check against source"),
        n => format!("{n} commits since {short}; re-check against source"),
    })
}

/// The working tree as git reports it now.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct WorkingTree {
    /// `main`, `HEAD (detached)`, or the branch line with its upstream and ahead/behind.
    pub branch: String,
    /// `XY path` lines of `git status --porcelain`, in git's order.
    pub changed: Vec<String>,
}

impl WorkingTree {
    /// The untracked entries (`??`), relative to the root: a file, or a directory ending in
    /// `/` (git names an untracked directory once, not its files).
    pub fn untracked(&self) -> Vec<String> {
        self.changed
            .iter()
            .filter_map(|line| line.strip_prefix("?? "))
            .map(unquote)
            .filter(|name| !name.is_empty())
            .collect()
    }

    /// The files the changed lines name, relative to the repository root as git prints them:
    /// for a rename, the new name; C-quoted names unquoted; untracked directories keep their
    /// trailing `/`. In git's order, without repeats.
    pub fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = Vec::new();
        for line in &self.changed {
            let Some(rest) = line.get(3..) else {
                continue;
            };
            let status = line.get(..2).unwrap_or("");
            let renamed = status.contains('R') || status.contains('C');
            let name = match split_rename(rest).filter(|_| renamed) {
                Some((_, to)) => to,
                None => rest,
            };
            let name = unquote(name);
            if !name.is_empty() && !paths.contains(&name) {
                paths.push(name);
            }
        }
        paths
    }
}

/// `old -> new` of a rename or copy line (either side possibly C-quoted).
fn split_rename(rest: &str) -> Option<(&str, &str)> {
    if let Some(body) = rest.strip_prefix('"') {
        // the old name is quoted: find its closing quote, then ` -> `
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    let after = &body[i + 1..];
                    return after.strip_prefix(" -> ").map(|to| (&rest[..i + 2], to));
                }
                _ => escaped = false,
            }
        }
        return None;
    }
    rest.split_once(" -> ")
}

/// Undoes git's C-style quoting of a path (`"a\tb\303\251.rs"`); other names are returned
/// as they are.
fn unquote(name: &str) -> String {
    let Some(inner) = name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) else {
        return name.to_string();
    };
    let mut bytes = Vec::with_capacity(inner.len());
    let mut chars = inner.bytes().peekable();
    while let Some(b) = chars.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        match chars.next() {
            Some(b'n') => bytes.push(b'\n'),
            Some(b't') => bytes.push(b'\t'),
            Some(b'r') => bytes.push(b'\r'),
            Some(b'a') => bytes.push(0x07),
            Some(b'b') => bytes.push(0x08),
            Some(b'f') => bytes.push(0x0c),
            Some(b'v') => bytes.push(0x0b),
            Some(d @ b'0'..=b'7') => {
                let mut value = u32::from(d - b'0');
                for _ in 0..2 {
                    match chars.peek() {
                        Some(&n @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(n - b'0');
                            chars.next();
                        }
                        _ => break,
                    }
                }
                bytes.push(value as u8);
            }
            Some(other) => bytes.push(other),
            None => bytes.push(b'\\'),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The paths in the index of the work tree whose root is `root` (`git ls-files -z`), relative
/// to it, in git's order (a path in conflict once per stage); a name that is not UTF-8 is left
/// out. `None` when git cannot answer.
pub fn tracked_files(root: &Path) -> Option<Vec<String>> {
    Some(
        git_output(root, &["ls-files", "-z"])?
            .split(|&b| b == 0)
            .filter(|name| !name.is_empty())
            .filter_map(|name| std::str::from_utf8(name).ok().map(str::to_string))
            .collect(),
    )
}

/// Branch and changed files of the tree containing `dir` (one `git status` call); `None`
/// outside git.
pub fn working_tree(dir: &Path) -> Option<WorkingTree> {
    let output = git_output(
        dir,
        &[
            "status",
            "--porcelain=v1",
            "--branch",
            "--untracked-files=normal",
        ],
    )?;
    let text = String::from_utf8_lossy(&output);
    let mut lines = text.lines();
    let branch = lines
        .next()
        .and_then(|l| l.strip_prefix("## "))
        .unwrap_or("unknown")
        .replace("No commits yet on ", "")
        .to_string();
    Some(WorkingTree {
        branch,
        changed: lines
            .map(|l| l.trim_end().to_string())
            .filter(|l| !l.is_empty())
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_question_gives_the_root_and_head_of_what_the_two_give() {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let status = Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", dir.path())
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        };
        let inside = dir.path().join("sub");
        std::fs::create_dir_all(&inside).unwrap();
        assert_eq!(root_and_head(&inside), None, "outside git");
        run(&["init", "-q"]);
        let root = repo_root(&inside).unwrap();
        assert_eq!(
            root_and_head(&inside),
            Some((root.clone(), None)),
            "no commit yet"
        );
        run(&["commit", "-q", "--allow-empty", "-m", "first"]);
        let head = head_commit(&root);
        assert_eq!(head.as_deref().map(str::len), Some(40));
        assert_eq!(root_and_head(&inside), Some((root, head)));
    }

    #[test]
    fn remotes_normalize_to_one_key() {
        for url in [
            "git@github.com:Org/Repo.git",
            "https://github.com/org/repo",
            "https://user:tok@github.com/org/repo.git/",
            "ssh://git@github.com/org/repo.git",
            "ssh://git@github.com:22/org/repo.git",
        ] {
            assert_eq!(normalize_remote(url), "github.com/org/repo", "{url}");
        }
    }

    #[test]
    fn changed_lines_name_their_files() {
        let tree = WorkingTree {
            branch: "main".into(),
            changed: [
                " M src/lib.rs",
                "?? docs/",
                "R  old name.rs -> src/new.rs",
                "R  \"a \\\"q\\\".rs\" -> \"caf\\303\\251.rs\"",
                "?? \"tab\\there.txt\"",
                "MM src/lib.rs",
                "?? odd -> name.txt",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        };
        assert_eq!(
            tree.paths(),
            vec![
                "src/lib.rs",
                "docs/",
                "src/new.rs",
                "café.rs",
                "tab\there.txt",
                "odd -> name.txt"
            ]
        );
        assert_eq!(
            tree.untracked(),
            vec!["docs/", "tab\there.txt", "odd -> name.txt"]
        );
    }
}
