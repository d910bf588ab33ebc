//! The directory a benchmark writes its corpus and brains to: a given one (kept), or a new
//! temporary one (deleted at the end unless `--keep`).

use anyhow::{Context as _, Result};
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct WorkDir {
    path: PathBuf,
    temp: Option<tempfile::TempDir>,
    keep: bool,
}

impl WorkDir {
    /// `given` (created if missing, never deleted), or a new temporary directory named after
    /// the benchmark.
    pub fn new(name: &str, given: Option<&Path>, keep: bool) -> Result<WorkDir> {
        let (path, temp) = match given {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                (dir.to_path_buf(), None)
            }
            None => {
                let dir = tempfile::Builder::new()
                    .prefix(&format!("cairn-bench-{name}-"))
                    .tempdir()
                    .context("cannot create a temporary directory")?;
                (dir.path().to_path_buf(), Some(dir))
            }
        };
        let path = std::fs::canonicalize(&path)
            .with_context(|| format!("cannot resolve {}", path.display()))?;
        Ok(WorkDir { path, temp, keep })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes a temporary directory, or says where the files were kept.
    pub fn finish(self) {
        match self.temp {
            Some(dir) if self.keep => eprintln!("[cairn-bench] kept {}", dir.keep().display()),
            Some(dir) => drop(dir),
            None => eprintln!("[cairn-bench] kept {}", self.path.display()),
        }
    }
}
