//! The brief (docs/design.md §10): what an agent gets at session start. This file gathers each section
//! from the store and git; `cairn_core::brief` decides what fits the budget and lays it out.

use crate::{Engine, Result, git};
use cairn_core::brief::{self, Assembled, Section, SectionKind, one_line};
use cairn_core::memory::Memory;
use cairn_core::record::{MemoryType, Status};
use cairn_core::time::format_ts;
use cairn_store::ListFilter;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};

/// Default byte budget of the brief.
pub const DEFAULT_BRIEF_BUDGET: usize = 6 * 1024;
/// Longest line of stored text per item.
const ITEM_CHARS: usize = 280;
const MAX_ITEMS_PER_SECTION: usize = 50;
const MAX_CHANGED_FILES: usize = 25;
const ACTIVITY_EVENTS: usize = 15;
/// The neighbourhood looks up at most this many of the changed files (git's order) …
const NEIGHBOURHOOD_FILES: usize = 25;
/// … shows at most this many records per file, best first …
const NEIGHBOURHOOD_PER_FILE: usize = 3;
/// … and at most this many in all.
const NEIGHBOURHOOD_ITEMS: usize = 12;
/// Shorter lines than other sections: the neighbourhood is a pointer, `cairn show` has the rest.
const NEIGHBOURHOOD_CHARS: usize = 160;
/// The code map gets a quarter of the brief's budget …
const CODEMAP_SHARE: usize = 4;
/// … and its refresh may parse for this long (the rest waits for the next call, marked stale).
/// The session-start hook's whole deadline is 2 s and the brief's other sections run after
/// this one, so the bound leaves most of it to them.
const BRIEF_CODEMAP_BOUND: std::time::Duration = std::time::Duration::from_millis(500);
/// A repository with more mapped files than this gets a pointer instead of the map in the brief.
/// An unchanged tree asked with the same focus reads only the files' metadata and the cached
/// map; a changed one reads the index and ranks (about 0.6 s of CPU at 5,000 files in a dev
/// build, `docs/codemap.md`), which must stay well inside the hook's deadline. `cairn codemap`
/// and the MCP `code_map` tool map any size.
const BRIEF_CODEMAP_MAX_FILES: usize = 10_000;

#[derive(Debug, Clone)]
pub struct BriefRequest {
    /// Byte budget; 0 = no limit.
    pub budget: usize,
    /// Only these sections, in full (the command a cut notice names).
    pub sections: Vec<SectionKind>,
}

impl Default for BriefRequest {
    fn default() -> Self {
        BriefRequest {
            budget: DEFAULT_BRIEF_BUDGET,
            sections: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Brief {
    pub project: String,
    #[serde(flatten)]
    pub assembled: Assembled,
}

/// `#12 preference · trust stated: Title — body`
pub fn memory_item(memory: &Memory) -> String {
    let text = match &memory.title {
        Some(title) => format!("{title} — {}", memory.body),
        None => memory.body.clone(),
    };
    format!(
        "#{} {} · trust {}: {}",
        memory.id,
        memory.memory_type,
        memory.trust,
        one_line(&text, ITEM_CHARS)
    )
}

impl Engine {
    /// The brief as it is handed to an agent (`cairn brief`, MCP `brief`, the session-start
    /// hook): [`Engine::brief`], then every record it shows is marked surfaced (passive use,
    /// `surfaced_at`). That mark is bookkeeping: on a read-only brain it is not made, and a
    /// failure to make it never costs the caller the brief.
    pub fn brief_for_agent(&mut self, request: &BriefRequest) -> Result<Brief> {
        let brief = self.brief(request)?;
        if !self.context.read_only {
            let _ = self.note_surfaced(&cairn_core::brief::record_ids_shown(&brief.assembled.text));
        }
        Ok(brief)
    }

    /// The brief. `&mut`: the code map section refreshes the stored map (a write unless the
    /// brain is read-only).
    pub fn brief(&mut self, request: &BriefRequest) -> Result<Brief> {
        let wanted =
            |kind: SectionKind| request.sections.is_empty() || request.sections.contains(&kind);
        let mut sections = Vec::new();
        let mut shown_ids: BTreeSet<i64> = BTreeSet::new();
        // One `git status` serves both the working tree and its neighbourhood.
        let tree = if wanted(SectionKind::WorkingTree) || wanted(SectionKind::Neighbourhood) {
            self.working_tree()
        } else {
            None
        };
        for kind in SectionKind::PRIORITY {
            if !wanted(kind) {
                continue;
            }
            let items = if kind == SectionKind::CodeMap {
                // The same `git status` (when it is this machine's) gives the map its focus.
                let local = matches!(self.git, crate::GitSource::Local);
                self.code_map_items(request.budget, tree.as_ref().filter(|_| local))?
            } else {
                self.section_items(kind, tree.as_ref(), &mut shown_ids)?
            };
            sections.push(Section { kind, items });
        }
        let (header, footer) = brief::frame_parts(
            "brief",
            &format!("cairn brief for project {}", self.context.project),
        );
        let budget = if request.sections.is_empty() {
            request.budget
        } else {
            0
        };
        Ok(Brief {
            project: self.context.project.clone(),
            assembled: brief::assemble(&header, &footer, &sections, budget),
        })
    }

    fn records_of_types(&self, types: &[MemoryType]) -> Result<Vec<Memory>> {
        let projects = self.visible_projects();
        let mut records = self.store.reader()?.list(&ListFilter {
            projects: Some(&projects),
            types: Some(types),
            status: Some(Status::Active),
            limit: 500,
            ..ListFilter::default()
        })?;
        records.sort_by(|a, b| {
            b.pinned
                .cmp(&a.pinned)
                .then(b.importance.cmp(&a.importance))
                .then(a.id.cmp(&b.id))
        });
        Ok(records)
    }

    fn section_items(
        &self,
        kind: SectionKind,
        tree: Option<&git::WorkingTree>,
        shown_ids: &mut BTreeSet<i64>,
    ) -> Result<Vec<String>> {
        let reader = self.store.reader()?;
        let projects = self.visible_projects();
        let now = format_ts(self.now());
        let mut items = Vec::new();
        match kind {
            SectionKind::Guardrails | SectionKind::Preferences => {
                let types: &[MemoryType] = if kind == SectionKind::Guardrails {
                    &[MemoryType::Policy, MemoryType::Constraint]
                } else {
                    &[MemoryType::Preference]
                };
                for memory in self.records_of_types(types)? {
                    shown_ids.insert(memory.id);
                    items.push(memory_item(&memory));
                }
            }
            SectionKind::Identity => {
                if let Some(identity) = reader.identity()? {
                    items.push(one_line(&identity.body, 2_000));
                }
            }
            SectionKind::Pinned => {
                for memory in reader.pinned(&projects)? {
                    if shown_ids.insert(memory.id) {
                        items.push(memory_item(&memory));
                    }
                }
            }
            SectionKind::Due => {
                for memory in reader.review_due(&projects, &now)? {
                    let since = memory
                        .review_at
                        .as_deref()
                        .unwrap_or("")
                        .get(..10)
                        .unwrap_or("");
                    items.push(format!(
                        "review due since {since} (`cairn verify {} --source …`): {}",
                        memory.id,
                        memory_item(&memory)
                    ));
                }
                let review = self.review()?;
                let ids: Vec<i64> = review
                    .conflicts
                    .iter()
                    .flat_map(|c| [c.memory_id, c.other_id])
                    .collect();
                let records: HashMap<i64, Memory> = reader
                    .get_many(&ids)?
                    .into_iter()
                    .map(|m| (m.id, m))
                    .collect();
                for conflict in &review.conflicts {
                    let label = |id: i64| {
                        records
                            .get(&id)
                            .map(|m| one_line(&m.label(), 90))
                            .unwrap_or_else(|| format!("#{id}"))
                    };
                    items.push(format!(
                        "conflict: {} contradicts {} ({}); supersede one",
                        label(conflict.memory_id),
                        label(conflict.other_id),
                        one_line(&conflict.reason, 80)
                    ));
                }
                for task in reader.tasks(&projects, false)? {
                    let due = task
                        .due_at
                        .as_deref()
                        .map(|d| format!(" (due {})", d.get(..10).unwrap_or(d)))
                        .unwrap_or_default();
                    items.push(format!(
                        "task {}{due}: {}",
                        task.id,
                        one_line(&task.title, ITEM_CHARS)
                    ));
                }
                for item in reader.awareness(&projects, &now)? {
                    items.push(format!(
                        "aware until {}: {}",
                        item.expires_at.get(..16).unwrap_or(&item.expires_at),
                        one_line(&item.body, ITEM_CHARS)
                    ));
                }
            }
            SectionKind::WorkingTree => {
                if let Some(tree) = tree {
                    items.push(format!("branch {}", one_line(&tree.branch, 200)));
                    if tree.changed.is_empty() {
                        items.push("no uncommitted changes".to_string());
                    } else {
                        let shown: Vec<String> = tree
                            .changed
                            .iter()
                            .take(MAX_CHANGED_FILES)
                            .map(|l| one_line(l, 160))
                            .collect();
                        let more = tree.changed.len().saturating_sub(MAX_CHANGED_FILES);
                        let mut line =
                            format!("{} changed: {}", tree.changed.len(), shown.join(", "));
                        if more > 0 {
                            line.push_str(&format!(" (+{more} more: `git status`)"));
                        }
                        items.push(line);
                    }
                }
            }
            SectionKind::Inbox => {
                for row in reader.inbox(&projects, false)? {
                    items.push(format!(
                        "inbox {} {} · trust {}: {} (`cairn inbox accept {}` | `cairn inbox dismiss {}`)",
                        row.id,
                        row.suggested_type,
                        row.trust,
                        one_line(&row.body, ITEM_CHARS),
                        row.id,
                        row.id
                    ));
                }
            }
            SectionKind::Activity => {
                let events: Vec<_> = reader
                    .project_events(&projects, None, ACTIVITY_EVENTS * 4)?
                    .into_iter()
                    .filter(|e| e.op != "recall")
                    .collect();
                let ids: Vec<i64> = events.iter().filter_map(|e| e.memory_id).collect();
                let records: HashMap<i64, Memory> = reader
                    .get_many(&ids)?
                    .into_iter()
                    .map(|m| (m.id, m))
                    .collect();
                // newest first: the brief reads from what just happened
                for event in events.iter().rev().take(ACTIVITY_EVENTS) {
                    items.push(event_line(event, &records));
                }
            }
            SectionKind::Neighbourhood => {
                if let Some(tree) = tree {
                    items = self.neighbourhood_items(tree, shown_ids)?;
                }
            }
            // Gathered by `code_map_items` (it writes the refreshed map).
            SectionKind::CodeMap => {}
        }
        items.truncate(MAX_ITEMS_PER_SECTION);
        Ok(items)
    }
}

impl Engine {
    /// The code map section: only inside a git work tree (a session started in a home
    /// directory must not walk it), focused on the working tree's changes and the files recent
    /// memories mention, rendered within `CODEMAP_SHARE` of the brief's budget; parsing is
    /// bounded by `BRIEF_CODEMAP_BOUND` (a stale map says so in its last item). One item per
    /// file: its path, then its shown symbols' lines.
    fn code_map_items(
        &mut self,
        brief_budget: usize,
        tree: Option<&git::WorkingTree>,
    ) -> Result<Vec<String>> {
        if git::repo_root(&self.context.cwd).is_none() {
            return Ok(Vec::new());
        }
        // Ranking a changed map of tens of thousands of files takes seconds (measured:
        // docs/codemap.md); the hook must not lose the whole brief to it.
        let stored = self
            .store
            .reader()?
            .codemap_file_count(&self.context.project)?;
        if stored > BRIEF_CODEMAP_MAX_FILES {
            return Ok(vec![format!(
                "(the map of this repository has {stored} files, over the brief's {BRIEF_CODEMAP_MAX_FILES}: `cairn codemap` gives it)"
            )]);
        }
        let tokens = if brief_budget == 0 {
            crate::DEFAULT_CODEMAP_BUDGET
        } else {
            brief_budget / CODEMAP_SHARE / cairn_codemap::CHARS_PER_TOKEN
        };
        let map = self.code_map(&crate::CodeMapRequest {
            budget: tokens,
            refresh_bound: BRIEF_CODEMAP_BOUND,
            tree: tree.cloned(),
            ..crate::CodeMapRequest::default()
        })?;
        let mut items: Vec<String> = map
            .files
            .iter()
            .map(|file| {
                // Read from the repository's files: neutralized like any stored text.
                let mut item = cairn_core::brief::neutralize(&file.path);
                for symbol in &file.symbols {
                    item.push_str(&format!(
                        "\n  {}: {}",
                        symbol.line,
                        cairn_core::brief::neutralize(&symbol.signature)
                    ));
                }
                item
            })
            .collect();
        if map.cut.files > 0 {
            items.push(format!(
                "({} more files: `cairn codemap --budget N`)",
                map.cut.files
            ));
        }
        if map.stale {
            items.push(format!(
                "(stale: {} changed files were not parsed in time; `cairn codemap` refreshes)",
                map.refresh.deferred
            ));
        }
        Ok(items)
    }

    /// Active records the graph ties to the files the working tree touches (changed, staged,
    /// untracked), best first per file; records an earlier section already shows are left
    /// out. Bounded so that the session-start hook stays fast: the first
    /// [`NEIGHBOURHOOD_FILES`] files, [`NEIGHBOURHOOD_PER_FILE`] records each,
    /// [`NEIGHBOURHOOD_ITEMS`] in all.
    fn neighbourhood_items(
        &self,
        tree: &git::WorkingTree,
        shown_ids: &mut BTreeSet<i64>,
    ) -> Result<Vec<String>> {
        let mut paths = tree.paths();
        paths.truncate(NEIGHBOURHOOD_FILES);
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        // a few spare per file: some may be inactive or already shown
        let found = self.neighbourhood_of_paths(&paths, None, NEIGHBOURHOOD_PER_FILE + 3)?;
        let ids: Vec<i64> = found
            .iter()
            .flat_map(|p| p.records.iter().map(|n| n.node.id))
            .collect();
        let records: HashMap<i64, Memory> = self
            .store
            .reader()?
            .get_many(&ids)?
            .into_iter()
            .filter(|m| m.status == Status::Active)
            .map(|m| (m.id, m))
            .collect();
        let mut items = Vec::new();
        for file in &found {
            let mut shown = 0;
            for neighbor in &file.records {
                if shown == NEIGHBOURHOOD_PER_FILE || items.len() == NEIGHBOURHOOD_ITEMS {
                    break;
                }
                let Some(memory) = records.get(&neighbor.node.id) else {
                    continue;
                };
                if !shown_ids.insert(memory.id) {
                    continue;
                }
                let text = match &memory.title {
                    Some(title) => format!("{title} — {}", memory.body),
                    None => memory.body.clone(),
                };
                let edge = if neighbor.edge == "out" {
                    format!(
                        "{} {} {}",
                        neighbor.via.name, neighbor.relation, neighbor.node.name
                    )
                } else {
                    format!(
                        "{} {} {}",
                        neighbor.node.name, neighbor.relation, neighbor.via.name
                    )
                };
                items.push(format!(
                    "{}: #{} {} · trust {}: {} (via {})",
                    one_line(&file.path, 160),
                    memory.id,
                    memory.memory_type,
                    memory.trust,
                    one_line(&text, NEIGHBOURHOOD_CHARS),
                    one_line(&edge, 160)
                ));
                shown += 1;
            }
        }
        Ok(items)
    }
}

/// One line of the activity log.
pub fn event_line(event: &cairn_store::EventRow, records: &HashMap<i64, Memory>) -> String {
    let at = event.at.get(..16).unwrap_or(&event.at).replace('T', " ");
    let what = match event.memory_id.and_then(|id| records.get(&id)) {
        Some(memory) => one_line(&memory.label(), 100),
        None => {
            let detail = &event.detail;
            let pick = |key: &str| detail.get(key).and_then(|v| v.as_str()).map(str::to_string);
            match event.op.as_str() {
                "task_add" | "task_done" => format!(
                    "task {}: {}",
                    detail.get("task").and_then(|v| v.as_i64()).unwrap_or(0),
                    one_line(&pick("title").unwrap_or_default(), 100)
                ),
                "measure" => format!(
                    "{} = {}",
                    one_line(&pick("name").unwrap_or_default(), 60),
                    detail.get("value").and_then(|v| v.as_f64()).unwrap_or(0.0)
                ),
                "capture" => format!(
                    "{} turn(s) captured from session {}",
                    detail.get("turns").and_then(|v| v.as_i64()).unwrap_or(0),
                    one_line(&pick("session").unwrap_or_default(), 40)
                ),
                "session_start" | "session_end" => {
                    format!(
                        "session {}",
                        one_line(&pick("session").unwrap_or_default(), 40)
                    )
                }
                "aware" => one_line(&pick("body").unwrap_or_default(), 100),
                _ => event
                    .memory_id
                    .map(|id| format!("#{id}"))
                    .unwrap_or_default(),
            }
        }
    };
    format!("{at} {} {what}", event.op).trim_end().to_string()
}
