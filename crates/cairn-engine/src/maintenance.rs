//! Looking after a brain: `doctor` (integrity and index consistency), `stats`, and scopes.

use crate::{Engine, EngineError, Result};
use cairn_core::memory::Memory;
use cairn_core::record::MemoryType;
use cairn_core::scope::Scope;
use cairn_core::time::format_ts;
use cairn_store::{ScopeRow, Stats};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// `doctor --repair` runs `VACUUM` when more than this share of the file is free pages.
pub const VACUUM_FREE_RATIO: f64 = 0.2;

/// The `meta` key saying that space was freed inside pages (which `freelist_count` does not
/// see) and the next `doctor --repair` should `VACUUM`; its value is the reason.
pub(crate) const VACUUM_DUE_KEY: &str = "vacuum_due";
/// Reclaimable space (free pages plus space merges freed inside pages) from which a dream's
/// accept and `doctor --repair` compact the brain.
pub const COMPACT_RATIO: f64 = 0.05;
/// A WAL larger than this is checkpointed and truncated by `doctor --repair`.
pub const WAL_LIMIT_BYTES: u64 = 64 * 1024 * 1024;

/// Reads what can be read from a damaged brain into a new file at `target` (which must not
/// exist). The damaged file is opened read-only and is never changed or deleted.
pub fn recover_brain(
    damaged: &std::path::Path,
    target: &std::path::Path,
) -> Result<Vec<cairn_store::RecoveredTable>> {
    Ok(cairn_store::Store::recover_into(damaged, target)?)
}

/// Why a stored vector does not stand for its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disagreement {
    WrongSize,
    OtherText,
}

/// One finding of `doctor`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    /// Not a failure but worth acting on (`ok` stays true, `doctor` exits 0): lag such as
    /// records still waiting for their vectors. Written only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warning: bool,
    pub detail: String,
    /// What to run to fix it, when something is wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DoctorReport {
    pub path: String,
    pub schema_version: i64,
    pub ok: bool,
    pub checks: Vec<Check>,
    pub repaired: Vec<String>,
}

/// `scope map`: stored scopes nobody declared (typos) and declared scopes that hold nothing.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ScopeMap {
    pub project: String,
    pub scopes: Vec<ScopeRow>,
    pub undeclared: Vec<String>,
    pub empty: Vec<String>,
}

impl Engine {
    /// Checks the file and the index against the records; with `repair`, rebuilds what is
    /// derived (the full-text index, the graph's intervals, vectors). Idempotent.
    pub fn doctor(&mut self, repair: bool) -> Result<DoctorReport> {
        if repair {
            self.ensure_writable("doctor --repair")?;
        }
        let mut checks = Vec::new();
        let mut repaired = Vec::new();
        let integrity = self.store.sqlite()?.integrity_check()?;
        let integrity_ok = integrity.len() == 1 && integrity[0] == "ok";
        checks.push(Check {
            name: "integrity".into(),
            warning: false,
            ok: integrity_ok,
            detail: if integrity_ok { "PRAGMA integrity_check: ok".into() } else { integrity.join("; ") },
            fix: (!integrity_ok).then(|| {
                "copy what can be read into a new file: `sqlite3 BRAIN .recover | sqlite3 NEW.db`, then point --db at NEW.db; the damaged file is left untouched".into()
            }),
        });
        let gaps = self.store.reader()?.index_gaps()?;
        let fts_problem = self.store.sqlite()?.fts_integrity_check()?;
        let fts_ok = fts_problem.is_none() && gaps.fts_rows == gaps.records;
        if !fts_ok && repair {
            self.store.sqlite_mut()?.rebuild_fts()?;
            repaired.push("rebuilt the full-text index from the records".to_string());
        }
        checks.push(Check {
            name: "full-text index".into(),
            warning: false,
            ok: fts_ok,
            detail: match &fts_problem {
                Some(problem) => format!(
                    "{problem} ({} records, {} indexed)",
                    gaps.records, gaps.fts_rows
                ),
                None => format!("{} records, {} indexed", gaps.records, gaps.fts_rows),
            },
            fix: (!fts_ok && !repair).then(|| "cairn doctor --repair".into()),
        });
        checks.push(Check {
            name: "supersession links".into(),
            warning: false,
            ok: gaps.dangling_links == 0,
            detail: format!(
                "{} records point at a record that does not exist",
                gaps.dangling_links
            ),
            fix: (gaps.dangling_links > 0).then(|| {
                "inspect with `cairn show ID --history`; the links are kept as they are".into()
            }),
        });
        let (graph, graph_repaired) = self.graph_check(repair)?;
        checks.push(graph);
        repaired.extend(graph_repaired);
        self.lifecycle_checks(repair, &mut checks, &mut repaired)?;
        self.semantic_checks(repair, &mut checks, &mut repaired)?;
        let ok = checks.iter().all(|c| c.ok) || (repair && integrity_ok);
        Ok(DoctorReport {
            path: self.store.sqlite()?.path().display().to_string(),
            schema_version: self.store.sqlite()?.schema_version()?,
            ok,
            checks,
            repaired,
        })
    }

    /// Merges the full-text index's segments (deleted rows' tombstones go with them) and
    /// `VACUUM`s, then folds the WAL back so the file on disk really shrinks (in WAL mode
    /// VACUUM writes the whole new file into the log; a reader elsewhere may postpone the
    /// truncate).
    fn compact_now(&mut self) -> Result<()> {
        self.store.sqlite_mut()?.optimize()?;
        self.store.sqlite_mut()?.vacuum()?;
        self.store.write(|tx| {
            tx.delete_meta(VACUUM_DUE_KEY)?;
            Ok::<_, EngineError>(())
        })?;
        self.store.sqlite_mut()?.checkpoint_truncate()?;
        Ok(())
    }

    /// After a dream's accept: compacts the brain when free pages and the space merges freed
    /// inside pages reach [`COMPACT_RATIO`] of the file, so a brain consolidated every day
    /// stays small without anybody running `doctor --repair`. The accept is already saved; a
    /// compaction that fails (locked, disk full) is reported, not raised.
    pub(crate) fn compact_after_accept(&mut self) -> Option<String> {
        let before = match self.store.reader().and_then(|r| r.page_stats()) {
            Ok(pages) => pages,
            Err(e) => return Some(format!("not compacted: {e}")),
        };
        if before.reclaimable_ratio() < COMPACT_RATIO {
            return None;
        }
        let file = |pages: &cairn_store::PageStats| pages.page_count * pages.page_size;
        Some(match self.compact_now() {
            Ok(()) => match self.store.reader().and_then(|r| r.page_stats()) {
                Ok(after) => format!(
                    "compacted the brain: {:.1} → {:.1} MB",
                    file(&before) as f64 / 1_048_576.0,
                    file(&after) as f64 / 1_048_576.0
                ),
                Err(e) => format!("compacted the brain; reading its size failed: {e}"),
            },
            Err(e) => format!(
                "the accept is saved, but compacting the brain failed ({e}); `cairn doctor --repair` compacts it later"
            ),
        })
    }

    /// Orphaned rows, free pages and the WAL's size; with `repair`, drops the orphans,
    /// `VACUUM`s when more than [`VACUUM_FREE_RATIO`] of the file is free pages (or `vacuum_due`
    /// is set) and checkpoints
    /// a WAL over [`WAL_LIMIT_BYTES`]. Each step is a no-op the second time.
    fn lifecycle_checks(
        &mut self,
        repair: bool,
        checks: &mut Vec<Check>,
        repaired: &mut Vec<String>,
    ) -> Result<()> {
        let orphans = self.store.reader()?.orphans()?;
        if orphans.total() > 0 && repair {
            let dropped = self.store.write(|tx| {
                let dropped = tx.drop_orphans()?;
                Ok::<_, EngineError>(dropped)
            })?;
            repaired.push(format!(
                "dropped {} orphaned rows ({} conflicts, {} generated marks, {} dream proposals)",
                dropped.total(),
                dropped.conflicts,
                dropped.generated_marks,
                dropped.proposals
            ));
        }
        checks.push(Check {
            name: "orphans".into(),
            warning: false,
            ok: orphans.total() == 0,
            detail: format!(
                "{} conflicts, {} generated marks, {} dream proposals point at nothing",
                orphans.conflicts, orphans.generated_marks, orphans.proposals
            ),
            fix: (orphans.total() > 0 && !repair).then(|| "cairn doctor --repair".into()),
        });
        // Records merged away before schema v10 are still whole and indexed: stored against
        // their survivors they leave the index and take a few bytes each. Not a defect.
        let unpacked = self.store.reader()?.merged_away_unpacked()?;
        if !unpacked.is_empty() && repair {
            let packed = self.store.write(|tx| {
                let mut packed = 0;
                for (id, survivor) in &unpacked {
                    packed += usize::from(tx.pack_merged(*id, *survivor)?);
                }
                Ok::<_, EngineError>(packed)
            })?;
            repaired.push(format!(
                "stored {packed} merged-away records as changes to the records they were merged into (out of the full-text index; `cairn show ID` reads them whole)"
            ));
        }
        checks.push(Check {
            name: "merged-away records".into(),
            warning: false,
            ok: true,
            detail: if unpacked.is_empty() || repair {
                "every merged-away record is stored against its survivor".into()
            } else {
                format!(
                    "{} records merged by dreams before schema v10 are still stored whole and indexed",
                    unpacked.len()
                )
            },
            fix: (!unpacked.is_empty() && !repair).then(|| "cairn doctor --repair".into()),
        });
        let pages = self.store.reader()?.page_stats()?;
        // Free pages are visible to SQLite; space freed inside pages (a migration dropping a
        // column) is not, so whatever frees it sets `vacuum_due` with the reason.
        // It is not a defect (nothing is wrong, the file is only larger than it needs to be),
        // so it does not fail the check; `--repair` acts on it.
        let vacuum_due = self.store.reader()?.meta(VACUUM_DUE_KEY)?;
        let bloated = pages.free_ratio() > VACUUM_FREE_RATIO;
        // Space freed inside pages (merged-away records stored as changes) counts from 5 %,
        // the line a dream's accept compacts at.
        let reclaimable = pages.reclaimable_ratio() >= COMPACT_RATIO;
        if (bloated || reclaimable || vacuum_due.is_some()) && repair {
            self.compact_now()?;
            let after = self.store.reader()?.page_stats()?;
            repaired.push(format!(
                "VACUUM: {} → {} pages ({} free pages and {} KiB freed inside pages released)",
                pages.page_count,
                after.page_count,
                pages.freelist_count,
                pages.reclaimable_bytes / 1024
            ));
        }
        let vacuum_due = vacuum_due.filter(|_| !repair);
        checks.push(Check {
            name: "free pages".into(),
            warning: false,
            ok: !bloated,
            detail: format!(
                "{} of {} pages free ({:.0} %; VACUUM above {:.0} %){}{}",
                pages.freelist_count,
                pages.page_count,
                pages.free_ratio() * 100.0,
                VACUUM_FREE_RATIO * 100.0,
                if pages.reclaimable_bytes > 0 && !repair {
                    format!(
                        "; {} KiB freed inside pages by merges (a dream's accept or `cairn doctor --repair` compacts from {:.0} %)",
                        pages.reclaimable_bytes / 1024,
                        COMPACT_RATIO * 100.0
                    )
                } else {
                    String::new()
                },
                vacuum_due.as_ref().map_or(String::new(), |reason| format!(
                    "; free space inside pages ({reason}): `cairn doctor --repair` compacts it"
                ))
            ),
            fix: (bloated && !repair).then(|| "cairn doctor --repair".into()),
        });
        let wal = self.store.sqlite()?.wal_bytes();
        let wal_big = wal > WAL_LIMIT_BYTES;
        if wal_big && repair {
            let (busy, _, _) = self.store.sqlite_mut()?.checkpoint_truncate()?;
            repaired.push(if busy == 0 {
                format!(
                    "checkpointed and truncated the {} MiB WAL",
                    wal / (1024 * 1024)
                )
            } else {
                "checkpointed the WAL; another process is reading, so it could not be truncated yet"
                    .to_string()
            });
        }
        checks.push(Check {
            name: "write-ahead log".into(),
            warning: false,
            ok: !wal_big,
            detail: format!(
                "{} KiB (limit {} MiB)",
                wal / 1024,
                WAL_LIMIT_BYTES / (1024 * 1024)
            ),
            fix: (wal_big && !repair).then(|| "cairn doctor --repair".into()),
        });
        Ok(())
    }

    /// The semantic index: is the embedder usable, does it match the brain's vectors, how
    /// many records still wait for a vector. With `repair`, embeds them.
    fn semantic_checks(
        &mut self,
        repair: bool,
        checks: &mut Vec<Check>,
        repaired: &mut Vec<String>,
    ) -> Result<()> {
        let orphans = self.store.reader()?.orphan_vectors()?;
        if orphans > 0 && repair {
            self.store.write(|tx| tx.drop_orphan_vectors())?;
            repaired.push(format!("dropped {orphans} vectors of deleted records"));
        }
        // Resolve the loader first: a loader may say "none configured".
        let loaded = self.embedder();
        if matches!(loaded, Ok(None)) {
            let counts = self.store.reader()?.vector_counts()?;
            checks.push(Check {
                name: "semantic index".into(),
                warning: false,
                ok: true,
                detail: format!(
                    "no embedder configured (CAIRN_EMBEDDER=none): recall is lexical-only; {} of {} records have a vector",
                    counts.with_vector, counts.records
                ),
                fix: None,
            });
            return Ok(());
        }
        let mut status = self.semantic_status()?;
        if let Some(problem) = &status.problem {
            checks.push(Check {
                name: "embedding model".into(),
                warning: false,
                ok: false,
                detail: "semantic search is off: recall answers lexical-only (degraded)".into(),
                fix: Some(problem.clone()),
            });
            return Ok(());
        }
        checks.push(Check {
            name: "embedding model".into(),
            warning: false,
            ok: true,
            detail: format!(
                "{} ({} dims) loads",
                status.model.clone().unwrap_or_default(),
                status.dimension.unwrap_or(0)
            ),
            fix: None,
        });
        // Vectors that disagree with their records are wrong answers waiting to happen: a
        // failure, unlike vectors that are merely missing.
        let dimension = status.dimension.unwrap_or(0);
        let disagreeing = self.disagreeing_vectors(dimension)?;
        if !disagreeing.is_empty() && repair {
            self.store.write(|tx| {
                for (id, _) in &disagreeing {
                    tx.drop_vector(*id)?;
                }
                Ok::<_, EngineError>(())
            })?;
            repaired.push(format!(
                "dropped {} vectors that disagreed with their records (embedded again below)",
                disagreeing.len()
            ));
            status = self.semantic_status()?;
        }
        if !disagreeing.is_empty() && !repair {
            let (wrong_size, stale) =
                disagreeing
                    .iter()
                    .fold((0, 0), |(size, stale), (_, why)| match why {
                        Disagreement::WrongSize => (size + 1, stale),
                        Disagreement::OtherText => (size, stale + 1),
                    });
            let examples: Vec<String> = disagreeing
                .iter()
                .take(5)
                .map(|(id, _)| format!("#{id}"))
                .collect();
            checks.push(Check {
                name: "semantic vectors".into(),
                warning: false,
                ok: false,
                detail: format!(
                    "{} vectors disagree with their records ({wrong_size} not {dimension} numbers long, {stale} made from another text; e.g. {}): recall may rank by the wrong meaning",
                    disagreeing.len(),
                    examples.join(", ")
                ),
                fix: Some("cairn doctor --repair (drops them and embeds the records again)".into()),
            });
        }
        let pending = status.counts.pending();
        if pending > 0 && repair {
            let report = self.index_pending(None, &mut |_, _| {})?;
            repaired.push(format!(
                "embedded {} records ({} reused){}",
                report.embedded,
                report.reused,
                if report.failed > 0 {
                    format!(", {} failed: {}", report.failed, report.errors.join("; "))
                } else {
                    String::new()
                }
            ));
            status = self.semantic_status()?;
        }
        // Records waiting for their vectors are lag, not damage: hooks store without embedding
        // and a running `cairn mcp` (or `cairn reindex`) catches up. Recall still finds them
        // lexically, so this warns and never fails the health check.
        let pending_now = status.counts.pending();
        checks.push(Check {
            name: "semantic index".into(),
            ok: true,
            warning: pending_now > 0,
            detail: format!(
                "{} of {} records have a vector{}",
                status.counts.with_vector,
                status.counts.records,
                if pending_now > 0 {
                    format!(
                        " ({pending_now} pending: recall finds them lexically only until they are embedded)"
                    )
                } else {
                    String::new()
                }
            ),
            fix: (pending_now > 0).then(|| {
                "cairn reindex (or cairn doctor --repair); a running `cairn mcp` embeds them in the background".into()
            }),
        });
        Ok(())
    }

    /// Vectors of indexed records that disagree with them: a blob that is not `dimension`
    /// floats, or (for records embedded without context, every type but `episode`) a text hash
    /// that is not the hash of the record's text now. An episode's text includes the turns
    /// around it, which later captures may change without an embedder at hand: that is lag
    /// (`reindex` catches up), so episodes are checked for their size only.
    fn disagreeing_vectors(&self, dimension: usize) -> Result<Vec<(i64, Disagreement)>> {
        let reader = self.store.reader()?;
        let rows = reader.vector_rows()?;
        let mut found = Vec::new();
        for chunk in rows.chunks(500) {
            let ids: Vec<i64> = chunk.iter().map(|row| row.0).collect();
            let memories: HashMap<i64, Memory> = reader
                .get_many(&ids)?
                .into_iter()
                .map(|memory| (memory.id, memory))
                .collect();
            for (id, text_hash, bytes) in chunk {
                if *bytes != dimension * 4 {
                    found.push((*id, Disagreement::WrongSize));
                    continue;
                }
                let Some(memory) = memories.get(id) else {
                    continue;
                };
                if memory.memory_type != MemoryType::Episode
                    && crate::semantic::text_hash(&crate::semantic::embedding_text(
                        memory,
                        &[],
                        &[],
                    )) != *text_hash
                {
                    found.push((*id, Disagreement::OtherText));
                }
            }
        }
        Ok(found)
    }

    pub fn stats(&self) -> Result<Stats> {
        Ok(self.store.reader()?.stats()?)
    }

    /// The file's pages by table and index, measured with SQLite's `dbstat` (the whole brain:
    /// it reads every page of the file, so run it when asked).
    pub fn file_sizes(&self) -> Result<cairn_store::FileSizes> {
        Ok(self.store.reader()?.file_sizes()?)
    }

    /// Declares a scope of the context's project.
    pub fn declare_scope(&mut self, scope: &str, description: Option<&str>) -> Result<Scope> {
        self.ensure_writable("scope declare")?;
        let scope = Scope::parse(scope)?;
        let now = format_ts(self.now());
        let project = self.context.project.clone();
        self.store.write(|tx| {
            tx.declare_scope(Some(&project), scope.as_str(), description, &now)?;
            Ok::<_, EngineError>(())
        })?;
        Ok(scope)
    }

    pub fn scopes(&self) -> Result<Vec<ScopeRow>> {
        Ok(self.store.reader()?.scopes(Some(&self.context.project))?)
    }

    pub fn scope_map(&self) -> Result<ScopeMap> {
        let scopes = self.scopes()?;
        let undeclared = scopes
            .iter()
            .filter(|s| s.declared_at.is_none() && s.scope != cairn_core::scope::GLOBAL)
            .map(|s| s.scope.clone())
            .collect();
        let empty = scopes
            .iter()
            .filter(|s| s.declared_at.is_some() && s.records == 0)
            .map(|s| s.scope.clone())
            .collect();
        Ok(ScopeMap {
            project: self.context.project.clone(),
            scopes,
            undeclared,
            empty,
        })
    }
}
