//! What each table and index takes in the file, measured with SQLite's `dbstat` virtual table
//! (compiled into the bundled SQLite: `SQLITE_ENABLE_DBSTAT_VTAB`). A measurement, not an
//! estimate: `dbstat` walks every b-tree page of the file (a read of the whole file, so callers
//! run it when asked). Its pages plus the free list are the file's pages but for the few
//! `dbstat` does not report (the lock-byte page of a file over 1 GiB, pointer-map pages with
//! auto-vacuum): those are counted as `other_pages`. One statement, so one read snapshot.

use crate::{Reader, Result, StoreError};
use serde::{Deserialize, Serialize};

/// One b-tree of the file: a table, an index, or a table's internal index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TableSize {
    /// The b-tree's name (`memories`, `events_actor`, `memories_fts_data`,
    /// `sqlite_autoindex_meta_1`, `sqlite_schema`, …).
    pub name: String,
    /// `table` or `index`.
    pub kind: String,
    /// The table an index belongs to (the table itself for a table).
    pub table: String,
    /// Pages it holds.
    pub pages: u64,
    /// Bytes of those pages (pages × page size).
    pub bytes: u64,
    /// Bytes of those pages that hold data (cells and their headers); the rest is free space
    /// inside the pages.
    pub used_bytes: u64,
}

/// The file's pages by b-tree, largest first, and the pages on the free list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileSizes {
    pub page_size: u64,
    /// Every page of the file (`PRAGMA page_count`): the b-trees' pages plus the free list.
    pub page_count: u64,
    pub free_pages: u64,
    /// Pages neither in a b-tree nor free (the lock-byte page, pointer maps).
    pub other_pages: u64,
    pub tables: Vec<TableSize>,
}

impl Reader<'_> {
    /// Measures every table and index of the file with `dbstat` (reads the whole file).
    pub fn file_sizes(&self) -> Result<FileSizes> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        // `aggregate = TRUE`: one row per b-tree, its pages summed (`pageno` is then the page
        // count). `sqlite_schema` has no row for itself: its b-tree is a table. The pragmas
        // ride along on every row so that everything is read in one snapshot.
        let mut statement = self
            .conn
            .prepare(
                "SELECT d.name, COALESCE(s.type, 'table'), COALESCE(s.tbl_name, d.name), \
                 d.pageno, d.pgsize, d.pgsize - d.unused, \
                 (SELECT page_size FROM pragma_page_size()), \
                 (SELECT page_count FROM pragma_page_count()), \
                 (SELECT freelist_count FROM pragma_freelist_count()) \
                 FROM dbstat('main', 1) AS d LEFT JOIN sqlite_schema AS s ON s.name = d.name \
                 ORDER BY d.pgsize DESC, d.name",
            )
            .map_err(map)?;
        let mut file = (0, 0, 0);
        let tables = statement
            .query_map([], |row| {
                let number = |index: usize| -> rusqlite::Result<u64> {
                    Ok(u64::try_from(row.get::<_, i64>(index)?).unwrap_or(0))
                };
                Ok((
                    TableSize {
                        name: row.get(0)?,
                        kind: row.get(1)?,
                        table: row.get(2)?,
                        pages: number(3)?,
                        bytes: number(4)?,
                        used_bytes: number(5)?,
                    },
                    (number(6)?, number(7)?, number(8)?),
                ))
            })
            .map_err(map)?
            .map(|row| {
                row.map(|(table, pragmas)| {
                    file = pragmas;
                    table
                })
            })
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(map)?;
        let (page_size, page_count, free_pages) = file;
        let counted: u64 = tables.iter().map(|t| t.pages).sum();
        Ok(FileSizes {
            page_size,
            page_count,
            free_pages,
            other_pages: page_count.saturating_sub(counted + free_pages),
            tables,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;

    #[test]
    fn every_page_of_the_file_is_a_tables_or_free_and_the_largest_comes_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        let body = "a long body of text that fills pages ".repeat(40);
        store
            .write(|tx| {
                for i in 0..200 {
                    tx.tx
                        .execute(
                            "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                            rusqlite::params![format!("k{i}"), body],
                        )
                        .map_err(|e| crate::StoreError::from_sqlite(e, tx.path))?;
                }
                Ok::<_, crate::StoreError>(())
            })
            .unwrap();
        let sizes = store.reader().file_sizes().unwrap();
        assert!(sizes.page_size.is_power_of_two() && sizes.page_size >= 512);
        // A small file without auto-vacuum: every page is a b-tree's or free.
        let counted: u64 = sizes.tables.iter().map(|t| t.pages).sum();
        assert_eq!(sizes.other_pages, 0, "{sizes:#?}");
        assert_eq!(counted + sizes.free_pages, sizes.page_count, "{sizes:#?}");
        for table in &sizes.tables {
            assert_eq!(table.bytes, table.pages * sizes.page_size, "{table:?}");
            assert!(table.used_bytes <= table.bytes, "{table:?}");
        }
        // 200 × ~1.5 KB of text: `meta` is the largest, and its primary-key index is its own.
        assert_eq!(sizes.tables[0].name, "meta", "{sizes:#?}");
        assert!(sizes.tables[0].bytes >= 200 * 1400, "{sizes:#?}");
        let key_index = sizes
            .tables
            .iter()
            .find(|t| t.name == "sqlite_autoindex_meta_1")
            .expect("meta's primary key");
        assert_eq!(
            (key_index.kind.as_str(), key_index.table.as_str()),
            ("index", "meta")
        );
        let events = sizes
            .tables
            .iter()
            .find(|t| t.name == "events_actor")
            .unwrap();
        assert_eq!(
            (events.kind.as_str(), events.table.as_str()),
            ("index", "events")
        );
        assert!(
            sizes
                .tables
                .iter()
                .any(|t| t.name == "sqlite_schema" || t.name == "sqlite_master"),
            "{sizes:#?}"
        );
    }
}
