//! The code map kept in the brain (issue 17, docs/codemap.md): the project's source files
//! scanned incrementally against the stored parses (only changed content is parsed again), the
//! focus gathered (the working tree's changes, the caller's paths, the files recent memories
//! of the project mention), and the map ranked and cut to a budget by `cairn_codemap`.

use crate::graph::CodeLinks;
use crate::{Engine, EngineError, Result, git};
use cairn_codemap::{Cut, Index, IndexFile, Lang, MapFile, RankOptions};
use cairn_core::graph::extract::{EntityKind, extract};
use cairn_core::record::Status;
use cairn_core::time::format_ts;
use cairn_store::{CodeFileRow, CodeMapState, ListFilter};
use serde::Serialize;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

/// Default budget of `cairn codemap`, in tokens.
pub const DEFAULT_CODEMAP_BUDGET: usize = 1024;
/// How long a refresh may parse before the map is answered from what is stored, marked stale.
pub const DEFAULT_REFRESH_BOUND: Duration = Duration::from_secs(20);
/// How many recent memories of the project are read for the paths they mention.
const MEMORY_FOCUS_RECORDS: usize = 20;
/// Parses no file points at any more that are kept (a branch switched back is not re-parsed).
const ORPHAN_PARSES_KEPT: usize = 20_000;
/// A mentioned file's entity is linked to the files it uses most, at most this many.
const LINKS_PER_FILE: usize = 8;
/// A mention naming more mapped files than this (`main.rs`, `mod.rs`) links none of them; an
/// identifier defined in more files than this (`new`) links none.
const LINK_MAX_MATCHES: usize = 3;

/// What to map.
#[derive(Debug, Clone)]
pub struct CodeMapRequest {
    /// Paths to focus on, relative to the working directory or absolute; each must be inside
    /// the repository (else the request is refused).
    pub focus: Vec<PathBuf>,
    /// Tokens (characters / 4).
    pub budget: usize,
    /// Focus on the files the working tree changes too.
    pub working_tree: bool,
    /// The repository's working tree when the caller has it already (the brief's one
    /// `git status`); else, with `working_tree`, it is asked of git here.
    pub tree: Option<git::WorkingTree>,
    /// Focus on the files recent memories of the project mention too.
    pub memories: bool,
    /// Parsing stops here; files not reached keep their stored parse (`stale`).
    pub refresh_bound: Duration,
}

impl Default for CodeMapRequest {
    fn default() -> Self {
        CodeMapRequest {
            focus: Vec::new(),
            budget: DEFAULT_CODEMAP_BUDGET,
            working_tree: true,
            tree: None,
            memories: true,
            refresh_bound: DEFAULT_REFRESH_BOUND,
        }
    }
}

/// How the refresh went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RefreshStats {
    /// Files mapped.
    pub files: usize,
    /// Files parsed in this call (new or changed content).
    pub parsed: usize,
    /// Files no longer there.
    pub removed: usize,
    /// Files left out (binary, non-UTF-8, minified, generated, too large).
    pub skipped: usize,
    /// Changed files the refresh bound left unparsed.
    pub deferred: usize,
}

/// The map, as `cairn codemap --json` prints it (docs/cli.md).
#[derive(Debug, Clone, Serialize)]
pub struct CodeMap {
    /// HEAD when the map was built (`null` outside git or before the first commit).
    pub rev: Option<String>,
    /// Changed files were left unparsed within the time bound: parts of the map are older
    /// than the working tree.
    pub stale: bool,
    pub budget: usize,
    /// Tokens used (characters / 4, rounded up): never over `budget`.
    pub used: usize,
    /// The focus files (relative to the root), in the order they were gathered.
    pub focus: Vec<String>,
    pub files: Vec<MapFile>,
    pub cut: Cut,
    /// The map as printed without `--json`.
    pub text: String,
    pub refresh: RefreshStats,
}

/// The repository's parses, refreshed: the root, the index (files sorted by path), the commit.
#[derive(Debug, Clone)]
pub struct CodeIndex {
    pub root: PathBuf,
    pub rev: Option<String>,
    /// The working tree git reported (`None` outside git).
    pub tree: Option<git::WorkingTree>,
    /// The files; with their parses' graph parts when `full`, else only their metadata and
    /// the parses of this call ([`Engine::ensure_full_code_index`] reads the rest when needed).
    pub index: Index,
    pub full: bool,
    pub stale: bool,
    pub stats: RefreshStats,
    /// The reference graph of the full index, when it was built already (for the code links).
    pub graph: Option<cairn_codemap::rank::Graph>,
}

/// The root a map covers: the git work tree containing `cwd`, else `cwd` itself.
fn map_root(cwd: &Path) -> PathBuf {
    let root = git::repo_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
    root.canonicalize().unwrap_or(root)
}

/// `path` without `.` and `..` components (lexically).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A path a user gave, relative to `root` with `/` separators; refused when it is outside.
fn relative_to_root(root: &Path, cwd: &Path, given: &Path) -> Result<String> {
    let absolute = lexical(&if given.is_absolute() {
        given.to_path_buf()
    } else {
        cwd.join(given)
    });
    // Resolve symlinks where the path exists, so a link out of the tree is outside too.
    let resolved = absolute.canonicalize().unwrap_or(absolute);
    let rel = resolved.strip_prefix(root).map_err(|_| {
        EngineError::Invalid(format!(
            "--focus {} is outside the repository at {}; nothing was mapped — give a path inside it",
            given.display(),
            root.display()
        ))
    })?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Ok(parts.join("/"))
}

/// The stored files' metadata as an index to compare the tree with, with the skipped files
/// remembered (none when their row is missing or unreadable: they are only read again). A file
/// of a language this build does not know is left out (it is mapped again).
fn light_index(
    metas: &[cairn_store::CodeFileMeta],
    head: Option<&cairn_store::CodeProjectHead>,
) -> Index {
    let files: Vec<cairn_codemap::FileMeta> = metas
        .iter()
        .filter_map(|m| {
            Some(cairn_codemap::FileMeta {
                path: m.path.clone(),
                lang: Lang::from_name(&m.lang)?,
                hash: m.content_hash.clone(),
                size: u64::try_from(m.size).ok()?,
                mtime_ns: m.mtime_ns,
            })
        })
        .collect();
    let skipped = head
        .and_then(|h| Index::decode_skipped(&h.skipped).ok())
        .unwrap_or_default();
    Index::from_meta(files, skipped)
}

/// The key a rendered map is cached under: everything it depends on.
fn map_key(index_key: &str, focus: &[String], budget: usize) -> String {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    hasher.update(format!(
        "map {} {index_key} {budget}\n",
        cairn_codemap::index::FORMAT
    ));
    for path in focus {
        hasher.update(path.as_bytes());
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())
}

fn to_row(file: &IndexFile) -> CodeFileRow {
    CodeFileRow {
        path: file.meta.path.clone(),
        lang: file.meta.lang.as_str().to_string(),
        content_hash: file.meta.hash.clone(),
        size: i64::try_from(file.meta.size).unwrap_or(i64::MAX),
        mtime_ns: file.meta.mtime_ns,
        graph: file.encode_graph(),
        detail: file.encode_detail().unwrap_or_default(),
    }
}

impl Engine {
    /// Brings the project's stored parses up to date with its tree and returns them. Files
    /// whose size and modification time are unchanged are not read; read files whose content
    /// hash is unchanged are not parsed; parsing stops at `bound` (the rest keep their stored
    /// parse and the index is `stale`). Only the rows of what changed are written (unless the
    /// brain is read-only); the other files' parses are read only when something needs them
    /// (a map not cached, the code links).
    ///
    /// In a git work tree the files are git's own lists (the index's paths and `tree`'s untracked
    /// entries; `tree` is asked of git when not given), so no directory is read but an untracked
    /// one; outside git the directory is walked.
    pub fn code_index(
        &mut self,
        bound: Duration,
        tree: Option<&git::WorkingTree>,
    ) -> Result<CodeIndex> {
        // The root and HEAD asked of one git process (`map_root` and `git::head_commit` are two).
        let (root, rev, in_git) = match git::root_and_head(&self.context.cwd) {
            Some((root, rev)) => (root.canonicalize().unwrap_or(root), rev, true),
            None => {
                let cwd = self.context.cwd.clone();
                (cwd.canonicalize().unwrap_or(cwd), None, false)
            }
        };
        let tree = if in_git {
            tree.cloned().or_else(|| git::working_tree(&root))
        } else {
            None
        };
        // git's lists when `git status` answered (no `git ls-files` otherwise: the walk).
        let listed = tree
            .as_ref()
            .and_then(|tree| git::tracked_files(&root).map(|tracked| (tree, tracked)));
        let walked = match listed {
            Some((tree, tracked)) => cairn_codemap::walk_listed(&root, &tracked, &tree.untracked()),
            None => cairn_codemap::walk(&root),
        };
        let project = self.context.project.clone();
        let reader = self.store.reader()?;
        let metas = reader.codemap_file_meta(&project)?;
        let head = reader.codemap_project_head(&project)?;
        let state = reader.codemap_state(&project)?;
        let mut index = light_index(&metas, head.as_ref());
        let deadline = Instant::now() + bound;
        let scan = cairn_codemap::scan_walked(walked, &index, Some(deadline));
        let mut stale = scan.deferred > 0;
        let stats = RefreshStats {
            files: scan.files.len(),
            parsed: scan.parsed.len(),
            removed: scan.removed.len(),
            skipped: scan.skipped.len(),
            deferred: scan.deferred,
        };
        let links_synced = head.as_ref().and_then(|h| h.links_seq);
        // 0: an empty edge log (so "synced with an empty log" is not "never synced").
        let last_seq = self.store.reader()?.last_edge_seq()?.unwrap_or(0);
        let touched: Vec<(String, i64, i64)> = scan
            .files
            .iter()
            .filter(|m| scan.touched.contains(&m.path))
            .map(|m| {
                (
                    m.path.clone(),
                    i64::try_from(m.size).unwrap_or(i64::MAX),
                    m.mtime_ns,
                )
            })
            .collect();
        let removed = scan.removed.clone();
        let fresh_paths = scan.parsed.clone();
        let skipped_before = index.encode_skipped();
        let changed = index.apply(scan);
        if !self.context.read_only && changed {
            let rows: Vec<CodeFileRow> = fresh_paths
                .iter()
                .filter_map(|path| index.file(path))
                .map(to_row)
                .collect();
            let skipped = index.encode_skipped();
            let skipped_changed = head.is_none() || skipped != skipped_before;
            self.store.write(|tx| -> Result<()> {
                for row in &rows {
                    tx.codemap_put_file(&project, row)?;
                }
                for (path, size, mtime_ns) in &touched {
                    tx.codemap_touch_file(&project, path, *size, *mtime_ns)?;
                }
                for path in &removed {
                    tx.codemap_remove_file(&project, path)?;
                }
                if skipped_changed {
                    tx.codemap_put_skipped(&project, &skipped)?;
                }
                if !removed.is_empty() || !rows.is_empty() {
                    tx.codemap_prune_parses(ORPHAN_PARSES_KEPT)?;
                }
                Ok(())
            })?;
        }
        let mut code = CodeIndex {
            root,
            rev,
            tree,
            index,
            full: false,
            stale,
            stats,
            graph: None,
        };
        // The code links follow the map and the memories: brought up to date when either
        // changed since the last sync (the edge log's last entry tells the memories' side).
        // Only the entities the project's memories mention are linked (one that is no longer
        // mentioned keeps its last links): with none, the sync has nothing to do and neither the
        // full index nor the graph is needed for it.
        let links_due = !self.context.read_only && (changed || links_synced != Some(last_seq));
        let mentioned = if links_due {
            self.store.reader()?.code_entities_mentioned(&project)?
        } else {
            Vec::new()
        };
        let write_links = links_due && !mentioned.is_empty();
        if write_links {
            self.ensure_full_code_index(&mut code)?;
            stale = code.stale;
        }
        let root_text = code.root.display().to_string();
        let state_changed = state
            .as_ref()
            .is_none_or(|s| s.rev != code.rev || s.stale != stale || s.root != root_text);
        if !self.context.read_only && (state_changed || links_due) {
            let links = if write_links {
                let graph = cairn_codemap::rank::graph(&code.index, &RankOptions::default());
                let links = code_links(&code.index, &graph, &mentioned);
                code.graph = Some(graph);
                Some(links)
            } else {
                None
            };
            let built_at = format_ts(self.now());
            let actor = self.context.actor.clone();
            let rev = code.rev.clone();
            self.store.write(|tx| -> Result<()> {
                tx.codemap_set_state(
                    &project,
                    &CodeMapState {
                        root: root_text.clone(),
                        rev: rev.clone(),
                        built_at: built_at.clone(),
                        stale,
                    },
                )?;
                if let Some(links) = &links {
                    crate::graph::sync_code_links(tx, links, &built_at, &actor)?;
                }
                if links_due {
                    let synced = tx.reader().last_edge_seq()?.unwrap_or(0);
                    tx.codemap_set_links_seq(&project, Some(synced))?;
                }
                Ok(())
            })?;
        }
        Ok(code)
    }

    /// Makes `code`'s index the full one (every file's graph part) when it is only the files'
    /// metadata. A file whose stored parse is missing or unreadable is left out, the index
    /// marked stale, and its row dropped (unless read-only) so that the next call parses it
    /// again.
    pub fn ensure_full_code_index(&mut self, code: &mut CodeIndex) -> Result<()> {
        if code.full {
            return Ok(());
        }
        let project = self.context.project.clone();
        let stored = self.store.reader()?.codemap_graphs(&project)?;
        let mut stored = stored.into_iter().peekable();
        let light = std::mem::take(&mut code.index);
        let skipped = light.skipped_files().to_vec();
        let mut files: Vec<IndexFile> = Vec::with_capacity(light.len());
        let mut broken: Vec<String> = Vec::new();
        for file in light.files() {
            if file.detail.is_some() {
                // Parsed in this call.
                files.push(file.clone());
                continue;
            }
            while stored
                .peek()
                .is_some_and(|(m, _)| m.path.as_str() < file.meta.path.as_str())
            {
                stored.next();
            }
            let graph = match stored.peek() {
                Some((m, graph))
                    if m.path == file.meta.path && m.content_hash == file.meta.hash =>
                {
                    graph.as_deref()
                }
                _ => None,
            };
            match graph.map(|g| IndexFile::decode_graph(file.meta.clone(), g)) {
                Some(Ok(decoded)) => files.push(decoded),
                _ => broken.push(file.meta.path.clone()),
            }
        }
        if !broken.is_empty() {
            code.stale = true;
            if !self.context.read_only {
                self.store.write(|tx| -> Result<()> {
                    for path in &broken {
                        tx.codemap_remove_file(&project, path)?;
                    }
                    Ok(())
                })?;
            }
        }
        code.index = Index::from_files(files, skipped);
        code.full = true;
        code.graph = None;
        Ok(())
    }

    /// The stored detail (names, signature lines) of `file`.
    fn code_detail(&self, file: &IndexFile) -> std::result::Result<cairn_codemap::Detail, String> {
        let data = self
            .store
            .reader()
            .and_then(|reader| reader.codemap_detail(&file.meta.hash, file.meta.lang.as_str()))
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("the stored parse of {} is missing", file.meta.path))?;
        file.decode_detail(&data)
            .map_err(|e| format!("the stored parse of {} is unreadable: {e}", file.meta.path))
    }

    /// Reads the details of the files at `positions` of a full index.
    fn load_code_details(&self, index: &mut Index, positions: &[usize]) -> Result<()> {
        for &i in positions {
            if index.files()[i].detail.is_none() {
                let detail = self
                    .code_detail(&index.files()[i])
                    .map_err(EngineError::Internal)?;
                index.set_detail(i, detail);
            }
        }
        Ok(())
    }

    /// Resolves focus paths given by a user against the map's root (refused when outside).
    pub fn code_focus_paths(&self, given: &[PathBuf]) -> Result<Vec<String>> {
        if given.is_empty() {
            return Ok(Vec::new());
        }
        let root = map_root(&self.context.cwd);
        let cwd = self
            .context
            .cwd
            .canonicalize()
            .unwrap_or_else(|_| self.context.cwd.clone());
        given
            .iter()
            .map(|g| relative_to_root(&root, &cwd, g))
            .collect()
    }

    /// The mapped files recent active memories of the project mention (by path, or by a path's
    /// tail: `src/main.rs` matches `crates/x/src/main.rs`), newest memory first.
    fn memory_focus(&self, index: &Index) -> Result<Vec<String>> {
        let projects = vec![Some(self.context.project.clone())];
        let records = self.store.reader()?.list(&ListFilter {
            projects: Some(&projects),
            status: Some(Status::Active),
            newest_first: true,
            limit: MEMORY_FOCUS_RECORDS,
            ..ListFilter::default()
        })?;
        let mut out: Vec<String> = Vec::new();
        for record in &records {
            for entity in extract(record.title.as_deref(), &record.body, &record.tags) {
                if entity.kind != EntityKind::Path {
                    continue;
                }
                for path in mapped_paths_named(index, &entity.name) {
                    if !out.contains(&path) {
                        out.push(path);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The code map of the project (see [`CodeMapRequest`]).
    pub fn code_map(&mut self, request: &CodeMapRequest) -> Result<CodeMap> {
        let given = self.code_focus_paths(&request.focus)?;
        let index = self.code_index(request.refresh_bound, request.tree.as_ref())?;
        let mut focus: Vec<String> = Vec::new();
        let add = |path: String, focus: &mut Vec<String>| {
            if !focus.contains(&path) {
                focus.push(path);
            }
        };
        for path in given {
            add(path, &mut focus);
        }
        if request.working_tree
            && let Some(tree) = &index.tree
        {
            for path in tree.paths() {
                add(path, &mut focus);
            }
        }
        if request.memories {
            for path in self.memory_focus(&index.index)? {
                add(path, &mut focus);
            }
        }
        // Only mapped files take part in the ranking; the others are still reported as focus.
        // The same index, focus and budget give the same map: the last one is kept.
        let key = map_key(&index.index.key(), &focus, request.budget);
        let project = self.context.project.clone();
        let cached: Option<cairn_codemap::Rendered> = if index.stale {
            None
        } else {
            self.store
                .reader()?
                .codemap_cached_map(&project, &key)?
                .and_then(|text| serde_json::from_str(&text).ok())
        };
        let mut index = index;
        let rendered = match cached {
            Some(rendered) => rendered,
            None => {
                self.ensure_full_code_index(&mut index)?;
                let rendered = cairn_codemap::build_map_with(
                    &index.index,
                    index.graph.take(),
                    &focus,
                    request.budget,
                    &RankOptions::default(),
                    |file| self.code_detail(file),
                )
                .map_err(EngineError::Internal)?;
                if !self.context.read_only && !index.stale {
                    let text = serde_json::to_string(&rendered)
                        .map_err(|e| EngineError::Internal(e.to_string()))?;
                    self.store
                        .write(|tx| tx.codemap_put_map(&project, &key, &text))?;
                }
                rendered
            }
        };
        Ok(CodeMap {
            rev: index.rev,
            stale: index.stale,
            budget: request.budget,
            used: rendered.chars.div_ceil(cairn_codemap::CHARS_PER_TOKEN),
            focus,
            files: rendered.files,
            cut: rendered.cut,
            text: rendered.text,
            refresh: index.stats,
        })
    }
}

/// What `code_neighbors` answers.
#[derive(Debug, Clone, Serialize)]
pub struct CodeNeighbors {
    pub target: String,
    /// `file` or `symbol`.
    pub kind: &'static str,
    /// For a file, that file; for a symbol, each file defining it, whose `used_by` keeps only
    /// the files using that symbol (its `uses` are its file's: uses are not kept per symbol).
    pub files: Vec<cairn_codemap::Neighbours>,
    pub rev: Option<String>,
    pub stale: bool,
}

impl Engine {
    /// What a file or symbol uses and what uses it, in the reference graph of the refreshed
    /// map. A path is tried first (it must be inside the repository); else the target is a
    /// symbol name. Neither mapped → `Invalid` naming what was looked for.
    pub fn code_neighbors(&mut self, target: &str) -> Result<CodeNeighbors> {
        let mut index = self.code_index(DEFAULT_REFRESH_BOUND, None)?;
        self.ensure_full_code_index(&mut index)?;
        let graph = match index.graph.take() {
            Some(graph) => graph,
            None => cairn_codemap::rank::graph(&index.index, &RankOptions::default()),
        };
        let as_path = self
            .code_focus_paths(&[PathBuf::from(target)])
            .ok()
            .and_then(|p| p.into_iter().next());
        // The linking identifiers are named from the details of the files defining them: the
        // file (or the symbol's files) and what they use.
        let mut wanted: Vec<usize> = Vec::new();
        let mut want = |me: usize| {
            wanted.push(me);
            wanted.extend(graph.uses[me].iter().map(|e| e.to));
        };
        if let Some(me) = as_path.as_deref().and_then(|p| index.index.position(p)) {
            want(me);
        } else {
            for path in cairn_codemap::definers(&index.index, target) {
                if let Some(me) = index.index.position(path) {
                    want(me);
                }
            }
        }
        wanted.sort_unstable();
        wanted.dedup();
        self.load_code_details(&mut index.index, &wanted)?;
        if let Some(path) = as_path
            && let Some(found) = cairn_codemap::neighbours(&index.index, &graph, &path)
        {
            return Ok(CodeNeighbors {
                target: target.to_string(),
                kind: "file",
                files: vec![found],
                rev: index.rev,
                stale: index.stale,
            });
        }
        let files: Vec<cairn_codemap::Neighbours> = cairn_codemap::definers(&index.index, target)
            .into_iter()
            .filter_map(|path| cairn_codemap::neighbours(&index.index, &graph, path))
            .map(|mut n| {
                n.used_by
                    .retain(|u| u.names.iter().any(|name| name == target));
                for u in &mut n.used_by {
                    u.names.retain(|name| name == target);
                }
                n
            })
            .collect();
        if files.is_empty() {
            return Err(EngineError::Invalid(format!(
                "{target} is neither a mapped file nor a symbol defined in one ({} files mapped); nothing to show — give a source file's path or a defined name",
                index.index.len()
            )));
        }
        Ok(CodeNeighbors {
            target: target.to_string(),
            kind: "symbol",
            files,
            rev: index.rev,
            stale: index.stale,
        })
    }
}

/// What the code map links (docs/codemap.md, "Linked to memory"): each `path` entity the
/// project's memories mention that names 1–[`LINK_MAX_MATCHES`] mapped files gets `uses` edges
/// to the files those use most ([`LINKS_PER_FILE`] each, heaviest first); each `code` entity
/// (an identifier) defined in 1–[`LINK_MAX_MATCHES`] mapped files gets `defined_in` edges to
/// them. Every mentioned entity is listed, so one whose links went away loses its edges.
fn code_links(
    index: &Index,
    graph: &cairn_codemap::rank::Graph,
    mentioned: &[(i64, String, String, String)],
) -> Vec<CodeLinks> {
    let files = index.files();
    mentioned
        .iter()
        .map(|(id, kind, name, _key)| {
            let mut targets: Vec<(&'static str, String)> = Vec::new();
            if kind == "path" {
                let named = mapped_paths_named(index, name);
                if (1..=LINK_MAX_MATCHES).contains(&named.len()) {
                    for path in &named {
                        let Some(a) = index.position(path) else {
                            continue;
                        };
                        let mut uses: Vec<&cairn_codemap::rank::Edge> =
                            graph.uses[a].iter().collect();
                        uses.sort_by(|x, y| y.weight.total_cmp(&x.weight).then(x.to.cmp(&y.to)));
                        for edge in uses.into_iter().take(LINKS_PER_FILE) {
                            targets
                                .push((crate::graph::CODE_USES, files[edge.to].meta.path.clone()));
                        }
                    }
                }
            } else {
                let bare = name.trim_matches('`').trim_end_matches("()");
                let bare = bare.rsplit("::").next().unwrap_or(bare);
                let defining = cairn_codemap::definers(index, bare);
                if (1..=LINK_MAX_MATCHES).contains(&defining.len()) {
                    for path in defining {
                        targets.push((crate::graph::CODE_DEFINED_IN, path.to_string()));
                    }
                }
            }
            CodeLinks {
                entity: *id,
                targets,
            }
        })
        .collect()
}

/// The mapped files a path mention names: the same path, or one ending in `/` + it.
pub fn mapped_paths_named(index: &Index, mention: &str) -> Vec<String> {
    let mention = mention
        .trim_start_matches("./")
        .split(':')
        .next()
        .unwrap_or(mention);
    if mention.is_empty() {
        return Vec::new();
    }
    let suffix = format!("/{mention}");
    index
        .files()
        .iter()
        .map(|f| &f.meta.path)
        .filter(|path| *path == mention || path.ends_with(&suffix))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn focus_paths_outside_the_root_are_refused() {
        let root = Path::new("/repo");
        assert_eq!(
            relative_to_root(root, Path::new("/repo/src"), Path::new("main.rs")).unwrap(),
            "src/main.rs"
        );
        assert_eq!(
            relative_to_root(root, Path::new("/repo/src"), Path::new("../lib/./x.rs")).unwrap(),
            "lib/x.rs"
        );
        let outside = relative_to_root(root, Path::new("/repo"), Path::new("../other/x.rs"));
        assert!(matches!(outside, Err(EngineError::Invalid(_))));
        let absolute = relative_to_root(root, Path::new("/repo"), Path::new("/etc/passwd"));
        assert!(matches!(absolute, Err(EngineError::Invalid(_))));
    }
}
