//! `export wiki DIR`: render what changed, write only what differs, never clobber an edit.
//!
//! 1. Read every record's skeleton (no bodies) and name every page (`paths::assign`).
//! 2. A page whose fingerprint (the inputs it is rendered from) and file stamp match the
//!    manifest is skipped without rendering: an unchanged brain rewrites nothing.
//! 3. Other pages are rendered; a file already holding those bytes is left alone (mtime kept);
//!    a file the manifest says is ours is replaced atomically; a file someone edited since the
//!    export (and did not import) is a conflict, reported and left as it is unless `force`.
//! 4. Pages no longer produced (a record moved to `archive/`, was deleted, or renamed) are
//!    removed when they are still exactly what was written.
//!
//! Links come from `links_for`: supersession, then the knowledge graph's record-to-record edges
//! valid at export time (`graph_links`), each named by its relation. They are part of a page's
//! fingerprint, so a new or closed edge re-renders the pages at both of its ends.

use super::fs::{FsError, SafeDir, Stamp};
use super::manifest::{self, Entry, Manifest};
use super::page::{self, PageLink};
use super::paths::{self, NameInput};
use super::{FileIssue, GENERATED_HEAD, MAX_PAGE_BYTES, SCHEMA};
use crate::{Engine, EngineError, Result};
use cairn_core::memory::Memory;
use cairn_core::record::{MemoryType, Status};
use cairn_store::Skeleton;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Bumped when page rendering changes, so every page is re-rendered once.
const RENDER_VERSION: &str = "wiki-1";
/// Records rendered per batch of reads.
const RENDER_BATCH: usize = 500;
/// Latest events shown in `log.md`.
const LOG_LATEST: usize = 100;
/// Written paths listed in the report (the counts are always exact).
const LISTED_PATHS: usize = 1000;

#[derive(Debug, Clone, Default)]
pub struct WikiExportOptions {
    /// Every project in the brain, not only the context's project and personal records.
    pub all_projects: bool,
    /// Overwrite pages edited since the last export (the brain wins).
    pub force: bool,
}

#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct WikiExportReport {
    pub dir: String,
    /// Records exported (one page each).
    pub records: usize,
    /// Files the export produces (pages, lists, index, schema, log).
    pub files: usize,
    pub written: usize,
    pub unchanged: usize,
    pub removed: usize,
    /// Up to 1000 of the paths written, sorted.
    pub written_paths: Vec<String>,
    /// Files edited since the last export and left as they are: import them, or export with
    /// `--force` to let the brain win.
    pub conflicts: Vec<FileIssue>,
    /// Writes refused for safety (a symlink in the way, a path that would leave the directory).
    pub refused: Vec<FileIssue>,
}

/// Renders a generated file when its fingerprint says it changed.
type Renderer<'a> = Box<dyn Fn() -> String + 'a>;

enum Put {
    Written(Stamp),
    Unchanged(Stamp),
    Conflict(String),
    Refused(String),
}

pub(super) fn fs_error(error: FsError) -> EngineError {
    match error {
        FsError::Io { path, source } => EngineError::Io {
            path: path.into(),
            source,
        },
        other => EngineError::Invalid(other.to_string()),
    }
}

/// A record's edges to other records in the knowledge graph: (relation as read from this
/// record, the other record's id).
type GraphLinks = HashMap<i64, Vec<(String, i64)>>;

/// The graph's record-to-record edges valid at `at`, by record, as each end reads them: the
/// source gets `relation`, the destination `← relation` (the other record holds it towards this
/// one), or `relation` again when the type is symmetric. `supersedes` is left out: the records'
/// own supersession fields give those links.
fn graph_links(reader: &cairn_store::Reader<'_>, at: &str) -> Result<GraphLinks> {
    let symmetric: std::collections::HashSet<String> = reader
        .relation_types()?
        .into_iter()
        .filter(|t| t.symmetric)
        .map(|t| t.name)
        .collect();
    let mut links: GraphLinks = HashMap::new();
    for (src, relation, dst) in reader.record_links_valid_at(at)? {
        if src == dst || relation == "supersedes" {
            continue;
        }
        let inverse = if symmetric.contains(&relation) {
            relation.clone()
        } else {
            format!("← {relation}")
        };
        links.entry(src).or_default().push((relation, dst));
        links.entry(dst).or_default().push((inverse, src));
    }
    Ok(links)
}

/// The links shown on a record's page: supersession first, then its graph edges to records
/// that have a page here, sorted (relation, target) and without repeats.
fn links_for(
    skeleton: &Skeleton,
    by_id: &HashMap<i64, &Skeleton>,
    paths: &HashMap<i64, String>,
    graph: &GraphLinks,
) -> Vec<PageLink> {
    let mut links = Vec::new();
    for (relation, target) in [
        ("superseded by", skeleton.superseded_by),
        ("supersedes", skeleton.supersedes),
    ] {
        if let Some(target) = target
            && let (Some(other), Some(path)) = (by_id.get(&target), paths.get(&target))
        {
            links.push(PageLink {
                relation: relation.to_string(),
                target: path.trim_end_matches(".md").to_string(),
                label: page::display_title(other.memory_type, other.title.as_deref(), other.id),
                id: target,
            });
        }
    }
    let mut related: Vec<PageLink> = graph
        .get(&skeleton.id)
        .into_iter()
        .flatten()
        .filter_map(|(relation, target)| {
            let (other, path) = (by_id.get(target)?, paths.get(target)?);
            Some(PageLink {
                relation: relation.clone(),
                target: path.trim_end_matches(".md").to_string(),
                label: page::display_title(other.memory_type, other.title.as_deref(), other.id),
                id: *target,
            })
        })
        .collect();
    related.sort();
    related.dedup();
    links.extend(related);
    links
}

fn record_fingerprint(skeleton: &Skeleton, path: &str, links: &[PageLink]) -> String {
    let mut hash = manifest::Fingerprint::new();
    hash.part(RENDER_VERSION)
        .part(path)
        .part(&skeleton.updated_at)
        .part(&skeleton.use_count.to_string())
        .part(skeleton.last_accessed_at.as_deref().unwrap_or("-"))
        .part(skeleton.status.as_str())
        .part(&skeleton.history_versions.to_string());
    for link in links {
        hash.part(&link.relation)
            .part(&link.target)
            .part(&link.label);
    }
    hash.finish()
}

struct Writer<'a> {
    dir: &'a SafeDir,
    /// Regular files in the directory now (one walk, not a stat per page).
    present: std::collections::HashSet<String>,
    old: &'a Manifest,
    new: Manifest,
    report: WikiExportReport,
    force: bool,
}

impl Writer<'_> {
    /// Whether `path` was written from inputs with this fingerprint and is still there. A page
    /// edited since is left alone (the import reads it); a deleted one is written again.
    fn unchanged(&mut self, path: &str, fingerprint: &str, id: Option<i64>) -> bool {
        let Some(entry) = self.old.entries.get(path) else {
            return false;
        };
        if entry.fingerprint != fingerprint || entry.id != id || !self.present.contains(path) {
            return false;
        }
        self.new.entries.insert(path.to_string(), entry.clone());
        self.report.unchanged += 1;
        true
    }

    /// Puts `bytes` at `path` unless they are already there or the file was edited since the
    /// export. `adopt` says whether an unexpected file there may be replaced.
    fn put(
        &mut self,
        path: &str,
        bytes: &[u8],
        id: Option<i64>,
        version: Option<String>,
        fingerprint: String,
        adopt: &dyn Fn(&[u8], bool) -> bool,
    ) {
        let sha = manifest::sha256(bytes);
        let old = self.old.entries.get(path);
        let outcome = self.decide(path, bytes, &sha, old, adopt);
        match outcome {
            Put::Written(stamp) | Put::Unchanged(stamp) => {
                if matches!(outcome, Put::Written(_)) {
                    self.report.written += 1;
                    if self.report.written_paths.len() < LISTED_PATHS {
                        self.report.written_paths.push(path.to_string());
                    }
                } else {
                    self.report.unchanged += 1;
                }
                self.new.entries.insert(
                    path.to_string(),
                    Entry {
                        id,
                        version,
                        fingerprint,
                        sha256: sha,
                        stamp,
                    },
                );
            }
            Put::Conflict(problem) => {
                if let Some(old) = old {
                    self.new.entries.insert(path.to_string(), old.clone());
                }
                self.report.conflicts.push(FileIssue {
                    path: path.to_string(),
                    problem,
                });
            }
            Put::Refused(problem) => self.report.refused.push(FileIssue {
                path: path.to_string(),
                problem,
            }),
        }
    }

    fn decide(
        &self,
        path: &str,
        bytes: &[u8],
        sha: &str,
        old: Option<&Entry>,
        adopt: &dyn Fn(&[u8], bool) -> bool,
    ) -> Put {
        let write = || match self.dir.write(path, bytes) {
            Ok(stamp) => Put::Written(stamp),
            Err(error) => Put::Refused(error.to_string()),
        };
        let Some(stamp) = self.dir.stamp(path) else {
            // Missing, or not a regular file (the write refuses a symlink).
            return write();
        };
        if let Some(old) = old
            && old.stamp == stamp
        {
            return if old.sha256 == sha {
                Put::Unchanged(stamp)
            } else {
                write()
            };
        }
        let disk = match self
            .dir
            .read(path, MAX_PAGE_BYTES.max(bytes.len() as u64 * 2))
        {
            Ok(Some(disk)) => disk,
            Ok(None) => return write(),
            Err(error) => return Put::Refused(error.to_string()),
        };
        let disk_sha = manifest::sha256(&disk);
        if disk_sha == sha {
            return Put::Unchanged(stamp);
        }
        if old.is_some_and(|o| o.sha256 == disk_sha) || self.force || adopt(&disk, old.is_some()) {
            return write();
        }
        Put::Conflict(if old.is_some() {
            "edited since the last export and not imported: run `cairn import wiki DIR` to keep the edit, or export with --force to let the brain win".into()
        } else {
            "a file cairn did not write is in the way; move it, or export with --force to replace it".into()
        })
    }

    /// Removes a file the export no longer produces, if it is still what was written.
    fn retire(&mut self, path: &str, entry: &Entry) {
        let Some(stamp) = self.dir.stamp(path) else {
            return;
        };
        let ours = stamp == entry.stamp
            || matches!(self.dir.read(path, MAX_PAGE_BYTES), Ok(Some(disk)) if manifest::sha256(&disk) == entry.sha256);
        if !ours && !self.force {
            self.new.entries.insert(path.to_string(), entry.clone());
            self.report.conflicts.push(FileIssue {
                path: path.to_string(),
                problem: "no longer exported (its record moved, was renamed or deleted) but edited since the last export; left in place".into(),
            });
            return;
        }
        match self.dir.remove(path) {
            Ok(()) => self.report.removed += 1,
            Err(error) => self.report.refused.push(FileIssue {
                path: path.to_string(),
                problem: error.to_string(),
            }),
        }
    }
}

fn generated_adopt(disk: &[u8], _ours: bool) -> bool {
    disk.starts_with(GENERATED_HEAD.as_bytes())
}

impl Engine {
    /// Writes the brain (this project and personal records, or every project) as a Markdown
    /// wiki under `dir`; see the module documentation for what is written and when.
    pub fn export_wiki(&self, dir: &Path, options: &WikiExportOptions) -> Result<WikiExportReport> {
        let safe = SafeDir::open(dir, true).map_err(fs_error)?;
        let old = Manifest::load(&safe);
        let visible = self.visible_projects();
        let projects = (!options.all_projects).then_some(visible.as_slice());
        let reader = self.store.reader()?;
        let skeletons = reader.skeletons(projects)?;
        let inputs: Vec<NameInput<'_>> = skeletons
            .iter()
            .map(|s| NameInput {
                id: s.id,
                title: s.title.as_deref(),
                memory_type: s.memory_type,
                status: s.status,
                scope: &s.scope,
                trust_zone: s.trust_zone,
            })
            .collect();
        let paths = paths::assign(&inputs);
        let by_id: HashMap<i64, &Skeleton> = skeletons.iter().map(|s| (s.id, s)).collect();
        let mut writer = Writer {
            dir: &safe,
            present: safe.walk().0.into_iter().collect(),
            old: &old,
            new: Manifest::default(),
            report: WikiExportReport {
                dir: dir.display().to_string(),
                records: skeletons.len(),
                ..WikiExportReport::default()
            },
            force: options.force,
        };

        // Record pages.
        let graph = graph_links(&reader, &cairn_core::time::format_ts(self.now()))?;
        let mut dirty: Vec<(i64, String, Vec<PageLink>, String, String)> = Vec::new();
        // In path order, the manifests' own order: each lookup in the old manifest and each
        // insert into the new one lands next to the previous one (at 100k pages, id order
        // made every one a walk through cold memory, most of an unchanged re-export's time).
        let mut in_path_order: Vec<(&str, &Skeleton)> = skeletons
            .iter()
            .map(|s| (paths[&s.id].as_str(), s))
            .collect();
        in_path_order.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (path, skeleton) in in_path_order {
            let links = links_for(skeleton, &by_id, &paths, &graph);
            let fingerprint = record_fingerprint(skeleton, path, &links);
            if !writer.unchanged(path, &fingerprint, Some(skeleton.id)) {
                let version = manifest::version(&skeleton.updated_at, skeleton.history_versions);
                dirty.push((skeleton.id, path.to_string(), links, fingerprint, version));
            }
        }
        dirty.sort_unstable_by_key(|d| d.0);
        for chunk in dirty.chunks(RENDER_BATCH) {
            let ids: Vec<i64> = chunk.iter().map(|d| d.0).collect();
            let memories: HashMap<i64, Memory> = reader
                .get_many(&ids)?
                .into_iter()
                .map(|m| (m.id, m))
                .collect();
            for (id, path, links, fingerprint, version) in chunk {
                let Some(memory) = memories.get(id) else {
                    continue;
                };
                let history = reader.history(*id)?;
                let bytes = page::render(memory, &history, links);
                let now = self.now();
                let adopt = |disk: &[u8], ours: bool| adopt_page(disk, memory, ours, now);
                writer.put(
                    path,
                    bytes.as_bytes(),
                    Some(*id),
                    Some(version.clone()),
                    fingerprint.clone(),
                    &adopt,
                );
            }
        }

        // Lists, index, schema.
        let mut active_by_type: BTreeMap<MemoryType, Vec<&Skeleton>> = BTreeMap::new();
        let mut retired: Vec<&Skeleton> = Vec::new();
        for skeleton in &skeletons {
            match skeleton.status {
                Status::Active => active_by_type
                    .entry(skeleton.memory_type)
                    .or_default()
                    .push(skeleton),
                _ => retired.push(skeleton),
            }
        }
        // Each list is fingerprinted by what it shows and rendered only when that changed.
        let paths = &paths;
        let mut generated: Vec<(String, String, Renderer<'_>)> = Vec::new();
        let member_parts = |members: &[&Skeleton]| -> String {
            use std::fmt::Write as _;
            let mut hash = manifest::Fingerprint::new();
            hash.part(RENDER_VERSION);
            let mut line = String::new();
            for s in members {
                line.clear();
                let _ = write!(
                    line,
                    "{}|{}|{}|{:?}|{:?}|{:?}",
                    s.id,
                    s.scope,
                    s.status,
                    s.superseded_by,
                    s.project.is_none(),
                    s.memory_type
                );
                hash.part(&paths[&s.id])
                    .part(s.title.as_deref().unwrap_or_default())
                    .part(&line);
            }
            hash.finish()
        };
        for (memory_type, members) in &active_by_type {
            let memory_type = *memory_type;
            generated.push((
                format!("{memory_type}/_index.md"),
                member_parts(members),
                Box::new(move || render_type_list(memory_type, members, paths)),
            ));
        }
        if !retired.is_empty() {
            generated.push((
                "archive/_index.md".to_string(),
                member_parts(&retired),
                Box::new(|| render_archive_list(&retired, paths)),
            ));
        }
        let mut projects_shown: Vec<String> = skeletons
            .iter()
            .map(|s| s.project.clone().unwrap_or_else(|| "personal".into()))
            .collect();
        projects_shown.sort();
        projects_shown.dedup();
        let index = render_index(&active_by_type, &retired, &projects_shown);
        generated.push((
            "index.md".to_string(),
            manifest::sha256(index.as_bytes()),
            Box::new(move || index.clone()),
        ));
        generated.push((
            "SCHEMA.md".to_string(),
            manifest::sha256(SCHEMA.as_bytes()),
            Box::new(|| SCHEMA.to_string()),
        ));
        for (path, fingerprint, render) in &generated {
            if !writer.unchanged(path, fingerprint, None) {
                let text = render();
                writer.put(
                    path,
                    text.as_bytes(),
                    None,
                    None,
                    fingerprint.clone(),
                    &generated_adopt,
                );
            }
        }

        // The event log: only months that grew are rendered.
        let months = reader.event_months(projects)?;
        let mut log_paths: Vec<String> = Vec::new();
        for month in &months {
            let path = format!("log/{}.md", month.month);
            log_paths.push(path.clone());
            let fingerprint = manifest::fingerprint(&[
                RENDER_VERSION,
                &month.count.to_string(),
                &month.max_id.to_string(),
            ]);
            if writer.unchanged(&path, &fingerprint, None) {
                continue;
            }
            let events = reader.events_of_month(projects, &month.month)?;
            let text = render_log_month(&month.month, &events);
            writer.put(
                &path,
                text.as_bytes(),
                None,
                None,
                fingerprint,
                &generated_adopt,
            );
        }
        let total: i64 = months.iter().map(|m| m.count).sum();
        let newest = months.iter().map(|m| m.max_id).max().unwrap_or(0);
        let log_fingerprint =
            manifest::fingerprint(&[RENDER_VERSION, &total.to_string(), &newest.to_string()]);
        if !writer.unchanged("log.md", &log_fingerprint, None) {
            let mut latest = Vec::new();
            for month in months.iter().rev() {
                let mut events = reader.events_of_month(projects, &month.month)?;
                events.append(&mut latest);
                latest = events;
                if latest.len() >= LOG_LATEST {
                    break;
                }
            }
            let skip = latest.len().saturating_sub(LOG_LATEST);
            let text = render_log(&months, &latest[skip..]);
            writer.put(
                "log.md",
                text.as_bytes(),
                None,
                None,
                log_fingerprint,
                &generated_adopt,
            );
        }

        // Whatever was written before and is no longer produced.
        let produced: std::collections::HashSet<&str> = paths
            .values()
            .map(String::as_str)
            .chain(generated.iter().map(|(p, _, _)| p.as_str()))
            .chain(log_paths.iter().map(String::as_str))
            .chain(std::iter::once("log.md"))
            .collect();
        let stale: Vec<(String, Entry)> = old
            .entries
            .iter()
            .filter(|(path, _)| !produced.contains(path.as_str()))
            .map(|(p, e)| (p.clone(), e.clone()))
            .collect();
        for (path, entry) in &stale {
            writer.retire(path, entry);
        }

        writer.report.files = produced.len();
        writer.report.written_paths.sort();
        if writer.new != old || safe.stamp(manifest::FILE).is_none() {
            safe.write(manifest::FILE, writer.new.render().as_bytes())
                .map_err(fs_error)?;
        }
        Ok(writer.report)
    }
}

/// Whether an export may replace a page it finds on disk for `memory`: a page it did not
/// write (`ours` false) that shows this record, or one that was edited and whose edit has been
/// imported (its editable fields already match the brain).
fn adopt_page(
    disk: &[u8],
    memory: &Memory,
    ours: bool,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    let Ok(parsed) = page::parse(disk) else {
        return false;
    };
    match parsed.frontmatter.int("id") {
        Some(id) if id == memory.id => {
            if !ours {
                return true;
            }
            super::import::apply_edits(&parsed, memory, now)
                .map(|edited| edited.is_none())
                .unwrap_or(false)
        }
        None if !ours => cairn_core::text::content_hash(&parsed.body) == memory.content_hash,
        _ => false,
    }
}

fn markdown_text(text: &str) -> String {
    text.replace('`', "'").replace(['\n', '\r'], " ")
}

fn render_type_list(
    memory_type: MemoryType,
    members: &[&Skeleton],
    paths: &HashMap<i64, String>,
) -> String {
    let mut lines: Vec<(String, String)> = members
        .iter()
        .map(|s| {
            let path = paths[&s.id].trim_end_matches(".md").to_string();
            let mut line = format!(
                "- [[{path}|{}]] · #{} · {}",
                page::display_title(s.memory_type, s.title.as_deref(), s.id),
                s.id,
                s.scope
            );
            if s.project.is_none() {
                line.push_str(" · personal");
            }
            (path, line)
        })
        .collect();
    lines.sort();
    let mut text = format!(
        "{GENERATED_HEAD}\n# {memory_type}\n\n{} active {memory_type} record(s), tier {:?}. Back to [[index]].\n\n",
        members.len(),
        memory_type.tier()
    );
    for (_, line) in lines {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

fn render_archive_list(retired: &[&Skeleton], paths: &HashMap<i64, String>) -> String {
    let mut lines: Vec<(String, String)> = retired
        .iter()
        .map(|s| {
            let path = paths[&s.id].trim_end_matches(".md").to_string();
            let state = match (s.status, s.superseded_by) {
                (Status::Superseded, Some(next)) | (Status::Archived, Some(next)) => {
                    format!("{} by #{next}", s.status)
                }
                _ => s.status.to_string(),
            };
            let line = format!(
                "- [[{path}|{}]] · #{} · {} · {state}",
                page::display_title(s.memory_type, s.title.as_deref(), s.id),
                s.id,
                s.memory_type
            );
            (path, line)
        })
        .collect();
    lines.sort();
    let mut text = format!(
        "{GENERATED_HEAD}\n# Archive\n\n{} superseded or archived record(s): kept for history, not shown by recall unless asked (`--all`). Back to [[index]].\n\n",
        retired.len()
    );
    for (_, line) in lines {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

fn render_index(
    active_by_type: &BTreeMap<MemoryType, Vec<&Skeleton>>,
    retired: &[&Skeleton],
    projects: &[String],
) -> String {
    let active: usize = active_by_type.values().map(Vec::len).sum();
    let mut text = format!(
        "{GENERATED_HEAD}\n# Memory\n\nAn export of a cairn brain: {active} active record(s) and {} superseded or archived, one page each, a folder per type. Edit a page and run `cairn import wiki DIR` to bring the change back; add a page to add a record. [[SCHEMA]] says what each field means; [[log]] is the activity log.\n\n",
        retired.len()
    );
    if !projects.is_empty() {
        let listed: Vec<String> = projects
            .iter()
            .map(|p| format!("`{}`", markdown_text(p)))
            .collect();
        text.push_str(&format!("Projects: {}.\n\n", listed.join(", ")));
    }
    text.push_str("## Records by type\n\n| type | tier | active | list |\n|---|---|---|---|\n");
    for (memory_type, members) in active_by_type {
        text.push_str(&format!(
            "| {memory_type} | {:?} | {} | [[{memory_type}/_index\\|{memory_type}]] |\n",
            memory_type.tier(),
            members.len()
        ));
    }
    if !retired.is_empty() {
        let superseded = retired
            .iter()
            .filter(|s| s.status == Status::Superseded)
            .count();
        text.push_str(&format!(
            "\n## Archive\n\n{superseded} superseded and {} archived: [[archive/_index|archive]].\n",
            retired.len() - superseded
        ));
    }
    text
}

use cairn_store::LogEvent as EventLine;

fn event_line(event: &EventLine) -> String {
    let (_, at, op, memory_id, receipt) = event;
    let target = memory_id.map(|id| format!(" · #{id}")).unwrap_or_default();
    format!(
        "- {} · {}{target} · receipt `{}`\n",
        markdown_text(at),
        markdown_text(op),
        markdown_text(receipt)
    )
}

fn render_log_month(month: &str, events: &[EventLine]) -> String {
    let mut text = format!(
        "{GENERATED_HEAD}\n# Log {month}\n\n{} event(s), oldest first. Each receipt is the SHA-256 of the operation's canonical JSON. Back to [[log]].\n\n",
        events.len()
    );
    for event in events {
        text.push_str(&event_line(event));
    }
    text
}

fn render_log(months: &[cairn_store::EventMonth], latest: &[EventLine]) -> String {
    let mut text = format!(
        "{GENERATED_HEAD}\n# Log\n\nThe activity log of the brain (remember, update, supersede, forget, recall, import, …), each event with its receipt: the SHA-256 of the operation's canonical JSON, as stored in the brain. Back to [[index]].\n\n## Months\n\n"
    );
    for month in months.iter().rev() {
        text.push_str(&format!(
            "- [[log/{}|{}]] · {} event(s)\n",
            month.month, month.month, month.count
        ));
    }
    text.push_str(&format!(
        "\n## Latest {} event(s), oldest first\n\n",
        latest.len()
    ));
    for event in latest {
        text.push_str(&event_line(event));
    }
    text
}
