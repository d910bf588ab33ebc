//! The code map's tables (migrations `MIGRATION_CODEMAP`, `MIGRATION_CODEMAP_FILES`): per
//! project, each mapped file's path, content hash, size and modification time; the parses
//! keyed by content hash and language, each in two parts — what ranking reads (the graph
//! part) and what only a shown file needs (the detail part: names, signatures) — so that a
//! refresh writes only the rows of what changed and a file that comes back to a content seen
//! before is not parsed again; the state of the last build (the commit it was built at); and
//! per project the files the content checks refused, the code-link bookkeeping and the last
//! map rendered. Plain rows: what a part holds is the codemap crate's business (its binary
//! form), when to refresh is the engine's.

use crate::{Reader, Result, StoreError, WriteTx};
use rusqlite::{OptionalExtension, params};

/// One mapped file as stored, with its parse's two parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeFileRow {
    pub path: String,
    pub lang: String,
    pub content_hash: String,
    pub size: i64,
    pub mtime_ns: i64,
    /// What ranking reads (`cairn_codemap::IndexFile::encode_graph`).
    pub graph: Vec<u8>,
    /// What a shown file needs (`cairn_codemap::IndexFile::encode_detail`).
    pub detail: Vec<u8>,
}

/// A mapped file's row without its parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeFileMeta {
    pub path: String,
    pub lang: String,
    pub content_hash: String,
    pub size: i64,
    pub mtime_ns: i64,
}

/// A project's bookkeeping: the skipped files it remembers (their own small encoding), the
/// code-link sync, the cached map's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeProjectHead {
    pub skipped: Vec<u8>,
    /// The edge log's last entry after the last code-link sync (`None`: never synced).
    pub links_seq: Option<i64>,
    /// The key of the cached map (`None`: none).
    pub map_key: Option<String>,
}

/// The last build of a project's map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeMapState {
    pub root: String,
    /// HEAD when it was built (`None` outside git or before the first commit).
    pub rev: Option<String>,
    pub built_at: String,
    /// Whether changed files were left unparsed at the deadline.
    pub stale: bool,
}

impl Reader<'_> {
    fn codemap_map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    /// Every mapped file of `project` with its parse's graph part (`None` when the parse row
    /// is missing), sorted by path.
    pub fn codemap_graphs(&self, project: &str) -> Result<Vec<(CodeFileMeta, Option<Vec<u8>>)>> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT f.path, f.lang, f.content_hash, f.size, f.mtime_ns, p.graph \
                 FROM codemap_files f LEFT JOIN codemap_parses p \
                   ON p.content_hash = f.content_hash AND p.lang = f.lang \
                 WHERE f.project = ?1 ORDER BY f.path",
            )
            .map_err(self.codemap_map())?;
        let rows = statement
            .query_map([project], |row| {
                Ok((
                    CodeFileMeta {
                        path: row.get(0)?,
                        lang: row.get(1)?,
                        content_hash: row.get(2)?,
                        size: row.get(3)?,
                        mtime_ns: row.get(4)?,
                    },
                    row.get(5)?,
                ))
            })
            .map_err(self.codemap_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.codemap_map())
    }

    /// The detail part of this content's parse, if stored.
    pub fn codemap_detail(&self, content_hash: &str, lang: &str) -> Result<Option<Vec<u8>>> {
        self.conn
            .prepare_cached(
                "SELECT detail FROM codemap_parses WHERE content_hash = ?1 AND lang = ?2",
            )
            .map_err(self.codemap_map())?
            .query_row(params![content_hash, lang], |row| row.get(0))
            .optional()
            .map_err(self.codemap_map())
    }

    /// Every mapped file of `project` without its parse, sorted by path.
    pub fn codemap_file_meta(&self, project: &str) -> Result<Vec<CodeFileMeta>> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT path, lang, content_hash, size, mtime_ns FROM codemap_files \
                 WHERE project = ?1 ORDER BY path",
            )
            .map_err(self.codemap_map())?;
        let rows = statement
            .query_map([project], |row| {
                Ok(CodeFileMeta {
                    path: row.get(0)?,
                    lang: row.get(1)?,
                    content_hash: row.get(2)?,
                    size: row.get(3)?,
                    mtime_ns: row.get(4)?,
                })
            })
            .map_err(self.codemap_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.codemap_map())
    }

    /// `project`'s bookkeeping, if any.
    pub fn codemap_project_head(&self, project: &str) -> Result<Option<CodeProjectHead>> {
        self.conn
            .query_row(
                "SELECT skipped, links_seq, map_key FROM codemap_project WHERE project = ?1",
                [project],
                |row| {
                    Ok(CodeProjectHead {
                        skipped: row.get(0)?,
                        links_seq: row.get(1)?,
                        map_key: row.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(self.codemap_map())
    }

    /// `project`'s cached map when it was rendered under `map_key`.
    pub fn codemap_cached_map(&self, project: &str, map_key: &str) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT map FROM codemap_project WHERE project = ?1 AND map_key = ?2 AND map IS NOT NULL",
                params![project, map_key],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.codemap_map())
    }

    /// How many files of `project` are mapped (one index lookup, no parse read).
    pub fn codemap_file_count(&self, project: &str) -> Result<usize> {
        self.conn
            .query_row(
                "SELECT count(*) FROM codemap_files WHERE project = ?1",
                [project],
                |row| row.get::<_, i64>(0),
            )
            .map(|n| usize::try_from(n).unwrap_or(0))
            .map_err(self.codemap_map())
    }

    /// Whether this content's parse is stored.
    pub fn codemap_has_parse(&self, content_hash: &str, lang: &str) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT 1 FROM codemap_parses WHERE content_hash = ?1 AND lang = ?2",
                params![content_hash, lang],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
            .map_err(self.codemap_map())
    }

    /// The state of `project`'s last build.
    pub fn codemap_state(&self, project: &str) -> Result<Option<CodeMapState>> {
        self.conn
            .query_row(
                "SELECT root, rev, built_at, stale FROM codemap_state WHERE project = ?1",
                [project],
                |row| {
                    Ok(CodeMapState {
                        root: row.get(0)?,
                        rev: row.get(1)?,
                        built_at: row.get(2)?,
                        stale: row.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(self.codemap_map())
    }
}

impl WriteTx<'_> {
    fn codemap_map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    /// Stores a file's row and its parse (kept once per content hash and language).
    pub fn codemap_put_file(&self, project: &str, row: &CodeFileRow) -> Result<()> {
        self.tx
            .prepare_cached(
                "INSERT INTO codemap_parses (content_hash, lang, graph, detail) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (content_hash, lang) DO NOTHING",
            )
            .map_err(self.codemap_map())?
            .execute(params![row.content_hash, row.lang, row.graph, row.detail])
            .map_err(self.codemap_map())?;
        self.tx
            .prepare_cached(
                "INSERT INTO codemap_files (project, path, lang, content_hash, size, mtime_ns) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (project, path) DO UPDATE SET lang = excluded.lang, \
                   content_hash = excluded.content_hash, size = excluded.size, \
                   mtime_ns = excluded.mtime_ns",
            )
            .map_err(self.codemap_map())?
            .execute(params![
                project,
                row.path,
                row.lang,
                row.content_hash,
                row.size,
                row.mtime_ns
            ])
            .map_err(self.codemap_map())?;
        Ok(())
    }

    /// Records a file's new size and modification time (its content is unchanged).
    pub fn codemap_touch_file(
        &self,
        project: &str,
        path: &str,
        size: i64,
        mtime_ns: i64,
    ) -> Result<()> {
        self.tx
            .prepare_cached(
                "UPDATE codemap_files SET size = ?3, mtime_ns = ?4 WHERE project = ?1 AND path = ?2",
            )
            .map_err(self.codemap_map())?
            .execute(params![project, path, size, mtime_ns])
            .map_err(self.codemap_map())?;
        Ok(())
    }

    /// Stores `project`'s remembered skipped files (creating its row).
    pub fn codemap_put_skipped(&self, project: &str, skipped: &[u8]) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO codemap_project (project, skipped) VALUES (?1, ?2) \
                 ON CONFLICT (project) DO UPDATE SET skipped = excluded.skipped",
                params![project, skipped],
            )
            .map_err(self.codemap_map())?;
        Ok(())
    }

    /// Records that `project`'s code links were synced when the edge log's last entry was `seq`.
    pub fn codemap_set_links_seq(&self, project: &str, seq: Option<i64>) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO codemap_project (project, skipped, links_seq) VALUES (?1, x'00', ?2) \
                 ON CONFLICT (project) DO UPDATE SET links_seq = excluded.links_seq",
                params![project, seq],
            )
            .map_err(self.codemap_map())?;
        Ok(())
    }

    /// Caches `project`'s map rendered under `map_key`.
    pub fn codemap_put_map(&self, project: &str, map_key: &str, map: &str) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO codemap_project (project, skipped, map_key, map) \
                 VALUES (?1, x'00', ?2, ?3) \
                 ON CONFLICT (project) DO UPDATE SET map_key = excluded.map_key, map = excluded.map",
                params![project, map_key, map],
            )
            .map_err(self.codemap_map())?;
        Ok(())
    }

    /// Forgets a file that is no longer mapped.
    pub fn codemap_remove_file(&self, project: &str, path: &str) -> Result<()> {
        self.tx
            .prepare_cached("DELETE FROM codemap_files WHERE project = ?1 AND path = ?2")
            .map_err(self.codemap_map())?
            .execute(params![project, path])
            .map_err(self.codemap_map())?;
        Ok(())
    }

    /// Drops the parses no project's file points at any more, keeping the `keep` most recently
    /// stored ones (a branch switched back and forth is not parsed again). The parses are
    /// scanned only when there are surely more than `keep` of them (more parse rows than file
    /// rows and `keep` together; two counts first), so a refresh does not pay for a scan of
    /// every parse. Returns how many were dropped.
    pub fn codemap_prune_parses(&self, keep: usize) -> Result<usize> {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        let over: bool = self
            .tx
            .query_row(
                "SELECT (SELECT count(*) FROM codemap_parses) > \
                   (SELECT count(*) FROM codemap_files) + ?1",
                [keep],
                |row| row.get(0),
            )
            .map_err(self.codemap_map())?;
        if !over {
            return Ok(0);
        }
        self.tx
            .execute(
                "DELETE FROM codemap_parses WHERE rowid IN ( \
                   SELECT p.rowid FROM codemap_parses p WHERE NOT EXISTS ( \
                     SELECT 1 FROM codemap_files f \
                     WHERE f.content_hash = p.content_hash AND f.lang = p.lang) \
                   ORDER BY p.rowid DESC LIMIT -1 OFFSET ?1)",
                [keep],
            )
            .map_err(self.codemap_map())
    }

    /// Records `project`'s build.
    pub fn codemap_set_state(&self, project: &str, state: &CodeMapState) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO codemap_state (project, root, rev, built_at, stale) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (project) DO UPDATE SET root = excluded.root, rev = excluded.rev, \
                   built_at = excluded.built_at, stale = excluded.stale",
                params![project, state.root, state.rev, state.built_at, state.stale],
            )
            .map_err(self.codemap_map())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    fn row(path: &str, hash: &str) -> CodeFileRow {
        CodeFileRow {
            path: path.into(),
            lang: "rust".into(),
            content_hash: hash.into(),
            size: 10,
            mtime_ns: 5,
            graph: format!("graph of {hash}").into_bytes(),
            detail: format!("detail of {hash}").into_bytes(),
        }
    }

    fn meta(row: &CodeFileRow) -> CodeFileMeta {
        CodeFileMeta {
            path: row.path.clone(),
            lang: row.lang.clone(),
            content_hash: row.content_hash.clone(),
            size: row.size,
            mtime_ns: row.mtime_ns,
        }
    }

    #[test]
    fn files_parses_and_state_round_trip_per_project() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        store
            .write(|tx| {
                tx.codemap_put_file("p", &row("b.rs", "h2"))?;
                tx.codemap_put_file("p", &row("a.rs", "h1"))?;
                // Same content in another project: one parse row.
                tx.codemap_put_file("q", &row("x.rs", "h1"))?;
                tx.codemap_set_state(
                    "p",
                    &CodeMapState {
                        root: "/r".into(),
                        rev: Some("abc".into()),
                        built_at: "t".into(),
                        stale: false,
                    },
                )
            })
            .unwrap();
        let graphs = store.reader().codemap_graphs("p").unwrap();
        let (a, b) = (row("a.rs", "h1"), row("b.rs", "h2"));
        assert_eq!(
            graphs,
            [
                (meta(&a), Some(a.graph.clone())),
                (meta(&b), Some(b.graph.clone()))
            ]
        );
        assert_eq!(
            store.reader().codemap_detail("h2", "rust").unwrap(),
            Some(b.detail.clone())
        );
        assert_eq!(store.reader().codemap_detail("h2", "go").unwrap(), None);
        assert_eq!(store.reader().codemap_file_count("p").unwrap(), 2);
        assert_eq!(
            store
                .reader()
                .codemap_state("p")
                .unwrap()
                .unwrap()
                .rev
                .as_deref(),
            Some("abc")
        );
        assert_eq!(store.reader().codemap_state("q").unwrap(), None);
        let metas = store.reader().codemap_file_meta("p").unwrap();
        assert_eq!(metas, [meta(&a), meta(&b)]);
        store
            .write(|tx| tx.codemap_touch_file("p", "a.rs", 11, 6))
            .unwrap();
        let a2 = &store.reader().codemap_file_meta("p").unwrap()[0];
        assert_eq!(
            (a2.size, a2.mtime_ns, a2.content_hash.as_str()),
            (11, 6, "h1")
        );
        // The project's bookkeeping: created by whichever write comes first.
        let head = |store: &Store| store.reader().codemap_project_head("p").unwrap();
        assert_eq!(head(&store), None);
        store
            .write(|tx| tx.codemap_set_links_seq("p", Some(17)))
            .unwrap();
        assert_eq!(
            head(&store),
            Some(CodeProjectHead {
                skipped: vec![0],
                links_seq: Some(17),
                map_key: None
            })
        );
        store
            .write(|tx| tx.codemap_put_skipped("p", &[1, 2, 3]))
            .unwrap();
        store
            .write(|tx| tx.codemap_put_map("p", "m1", "{}"))
            .unwrap();
        assert_eq!(
            head(&store),
            Some(CodeProjectHead {
                skipped: vec![1, 2, 3],
                links_seq: Some(17),
                map_key: Some("m1".into())
            })
        );
        let cached = |key: &str| store.reader().codemap_cached_map("p", key).unwrap();
        assert_eq!(cached("m1").as_deref(), Some("{}"));
        assert_eq!(cached("m2"), None);
        assert_eq!(store.reader().codemap_project_head("q").unwrap(), None);
        // a.rs changes content; b.rs goes away; the old parses stay (within `keep`) or go.
        store
            .write(|tx| {
                tx.codemap_put_file("p", &row("a.rs", "h3"))?;
                tx.codemap_remove_file("p", "b.rs")
            })
            .unwrap();
        let a3 = row("a.rs", "h3");
        assert_eq!(
            store.reader().codemap_graphs("p").unwrap(),
            [(meta(&a3), Some(a3.graph.clone()))]
        );
        assert!(store.reader().codemap_has_parse("h2", "rust").unwrap());
        // Three parses, two files: at most one orphan, so keeping one scans nothing.
        assert_eq!(store.write(|tx| tx.codemap_prune_parses(1)).unwrap(), 0);
        assert!(store.reader().codemap_has_parse("h2", "rust").unwrap());
        let dropped = store.write(|tx| tx.codemap_prune_parses(0)).unwrap();
        assert_eq!(dropped, 1, "h2 is orphaned; h1 is still q's");
        assert!(!store.reader().codemap_has_parse("h2", "rust").unwrap());
        assert!(store.reader().codemap_has_parse("h1", "rust").unwrap());
        // A file whose parse row went missing reads back without one (the engine re-parses it).
        store
            .write(|tx| {
                tx.tx
                    .execute("DELETE FROM codemap_parses WHERE content_hash = 'h3'", [])
                    .map(|_| ())
                    .map_err(tx.codemap_map())
            })
            .unwrap();
        assert_eq!(
            store.reader().codemap_graphs("p").unwrap(),
            [(meta(&a3), None)]
        );
    }
}
