//! The only code that touches files under a wiki directory. Every path is a checked relative
//! path (`paths::check_relative`); every directory on the way is looked at without following
//! symlinks at the moment of the write; the real path of the target's folder is compared with the
//! real path of the root just before the rename; files are written to a fresh temporary file in
//! the same folder (`create_new`, so an existing file or symlink there is never opened) and
//! renamed into place, so a reader never sees half a page.
//!
//! What this does not defend against: a process racing the export to swap a checked folder for
//! a symlink between the check and the rename (that needs `openat2(RESOLVE_BENEATH)`, which std
//! does not expose). The threat it does stop is a symlink or `..` planted in the directory
//! beforehand, or a hostile title, sending a write outside it.

use super::paths::{UnsafePath, check_relative};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A file operation that did not happen, and why.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error(transparent)]
    Path(#[from] UnsafePath),
    #[error("{reason}")]
    Unsafe { path: String, reason: String },
    #[error("{path:?}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Size and modification time of a file, as the manifest keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub size: u64,
    pub mtime_ns: i128,
}

impl Stamp {
    fn of(metadata: &std::fs::Metadata) -> Stamp {
        let mtime_ns = metadata
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        Stamp {
            size: metadata.len(),
            mtime_ns,
        }
    }
}

/// A wiki directory opened for confined reads and writes.
#[derive(Debug)]
pub struct SafeDir {
    root: PathBuf,
    real_root: PathBuf,
    temp_counter: AtomicU64,
}

impl SafeDir {
    /// Opens `dir`, creating it when `create` and missing. A root that is itself a symlink is
    /// refused: the user may not know where it points.
    pub fn open(dir: &Path, create: bool) -> Result<SafeDir, FsError> {
        let shown = dir.display().to_string();
        match std::fs::symlink_metadata(dir) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                return Err(FsError::Unsafe {
                    reason: format!(
                        "{shown} is a symlink; give the wiki directory's real path instead"
                    ),
                    path: shown,
                });
            }
            Ok(metadata) if !metadata.is_dir() => {
                return Err(FsError::Unsafe {
                    reason: format!("{shown} exists and is not a directory"),
                    path: shown,
                });
            }
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound && create => {
                std::fs::create_dir_all(dir).map_err(|source| FsError::Io {
                    path: shown.clone(),
                    source,
                })?;
            }
            Err(source) => {
                return Err(FsError::Io {
                    path: shown,
                    source,
                });
            }
        }
        let real_root = std::fs::canonicalize(dir).map_err(|source| FsError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        Ok(SafeDir {
            root: dir.to_path_buf(),
            real_root,
            temp_counter: AtomicU64::new(0),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn join(&self, relative: &str) -> PathBuf {
        let mut path = self.real_root.clone();
        for component in relative.split('/') {
            path.push(component);
        }
        path
    }

    /// Size and mtime of a regular file; `None` when missing, a symlink or not a file.
    pub fn stamp(&self, relative: &str) -> Option<Stamp> {
        check_relative(relative, true).ok()?;
        let metadata = std::fs::symlink_metadata(self.join(relative)).ok()?;
        metadata.is_file().then(|| Stamp::of(&metadata))
    }

    /// Reads a regular file of at most `limit` bytes. `Ok(None)` when missing; a symlink, a
    /// folder or a bigger file is an error.
    pub fn read(&self, relative: &str, limit: u64) -> Result<Option<Vec<u8>>, FsError> {
        check_relative(relative, true)?;
        let path = self.join(relative);
        let metadata = match std::fs::symlink_metadata(&path) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(FsError::Io {
                    path: relative.into(),
                    source,
                });
            }
        };
        if metadata.file_type().is_symlink() {
            return Err(FsError::Unsafe {
                path: relative.into(),
                reason: "it is a symlink; cairn does not follow links inside the wiki".into(),
            });
        }
        if !metadata.is_file() {
            return Err(FsError::Unsafe {
                path: relative.into(),
                reason: "it is not a regular file".into(),
            });
        }
        if metadata.len() > limit {
            return Err(FsError::Unsafe {
                path: relative.into(),
                reason: format!(
                    "it is {} bytes, over the limit of {limit} bytes for one page",
                    metadata.len()
                ),
            });
        }
        std::fs::read(&path)
            .map(Some)
            .map_err(|source| FsError::Io {
                path: relative.into(),
                source,
            })
    }

    /// Makes sure every folder on the way to `relative` is a real folder inside the root
    /// (creating missing ones), looked at now, without following symlinks.
    fn ensure_parents(&self, relative: &str) -> Result<PathBuf, FsError> {
        let components: Vec<&str> = relative.split('/').collect();
        let mut folder = self.real_root.clone();
        for component in &components[..components.len() - 1] {
            folder.push(component);
            match std::fs::symlink_metadata(&folder) {
                Ok(metadata) if metadata.file_type().is_symlink() => {
                    return Err(FsError::Unsafe {
                        path: relative.into(),
                        reason: format!(
                            "folder {component:?} on the way is a symlink (it could point outside the wiki); remove it and export again"
                        ),
                    });
                }
                Ok(metadata) if metadata.is_dir() => {}
                Ok(_) => {
                    return Err(FsError::Unsafe {
                        path: relative.into(),
                        reason: format!("{component:?} on the way is a file, not a folder"),
                    });
                }
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir(&folder).map_err(|source| FsError::Io {
                        path: relative.into(),
                        source,
                    })?;
                }
                Err(source) => {
                    return Err(FsError::Io {
                        path: relative.into(),
                        source,
                    });
                }
            }
        }
        Ok(folder)
    }

    /// The real path of `folder` must be the root, or under it, exactly where expected.
    fn confirm_inside(&self, relative: &str, folder: &Path) -> Result<(), FsError> {
        let real = std::fs::canonicalize(folder).map_err(|source| FsError::Io {
            path: relative.into(),
            source,
        })?;
        if real != folder || !real.starts_with(&self.real_root) {
            return Err(FsError::Unsafe {
                path: relative.into(),
                reason: format!(
                    "its folder resolves to {} outside the wiki directory",
                    real.display()
                ),
            });
        }
        Ok(())
    }

    /// Writes `bytes` to `relative` atomically (temporary file + rename) and returns the new
    /// file's stamp. A symlink at the target is refused, never followed or replaced.
    pub fn write(&self, relative: &str, bytes: &[u8]) -> Result<Stamp, FsError> {
        check_relative(relative, true)?;
        let folder = self.ensure_parents(relative)?;
        let target = self.join(relative);
        if let Ok(metadata) = std::fs::symlink_metadata(&target) {
            if metadata.file_type().is_symlink() {
                return Err(FsError::Unsafe {
                    path: relative.into(),
                    reason: "a symlink sits where the page goes (it could point outside the wiki); remove it and export again".into(),
                });
            }
            if !metadata.is_file() {
                return Err(FsError::Unsafe {
                    path: relative.into(),
                    reason: "something that is not a file sits where the page goes".into(),
                });
            }
        }
        let name = relative.rsplit('/').next().unwrap_or(relative);
        let counter = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temporary = folder.join(format!(
            ".{name}.cairn-tmp-{}-{counter}",
            std::process::id()
        ));
        let io = |source| FsError::Io {
            path: relative.into(),
            source,
        };
        let result = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temporary)
                .map_err(io)?;
            file.write_all(bytes).map_err(io)?;
            drop(file);
            self.confirm_inside(relative, &folder)?;
            std::fs::rename(&temporary, &target).map_err(io)
        })();
        if let Err(error) = result {
            let _ = std::fs::remove_file(&temporary);
            return Err(error);
        }
        let metadata = std::fs::symlink_metadata(&target).map_err(io)?;
        Ok(Stamp::of(&metadata))
    }

    /// Removes a regular file (never a symlink or folder); missing is fine.
    pub fn remove(&self, relative: &str) -> Result<(), FsError> {
        check_relative(relative, true)?;
        let target = self.join(relative);
        match std::fs::symlink_metadata(&target) {
            Ok(metadata) if metadata.is_file() => {}
            Ok(_) => {
                return Err(FsError::Unsafe {
                    path: relative.into(),
                    reason: "not a regular file; left in place".into(),
                });
            }
            Err(_) => return Ok(()),
        }
        if let Some(parent) = target.parent() {
            self.confirm_inside(relative, parent)?;
        }
        std::fs::remove_file(&target).map_err(|source| FsError::Io {
            path: relative.into(),
            source,
        })
    }

    /// Every file under the root as a relative path, sorted, with what was skipped and why
    /// (symlinks are reported, never followed; hidden entries are ignored).
    pub fn walk(&self) -> (Vec<String>, Vec<(String, String)>) {
        let mut files = Vec::new();
        let mut skipped = Vec::new();
        let mut stack = vec![(self.real_root.clone(), String::new())];
        while let Some((folder, prefix)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&folder) else {
                skipped.push((prefix.clone(), "cannot read this folder".into()));
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else {
                    skipped.push((
                        format!("{prefix}{}", name.to_string_lossy()),
                        "the file name is not UTF-8".into(),
                    ));
                    continue;
                };
                if name.starts_with('.') {
                    continue;
                }
                let relative = format!("{prefix}{name}");
                let Ok(file_type) = entry.file_type() else {
                    continue;
                };
                if file_type.is_symlink() {
                    skipped.push((relative, "a symlink; not followed".into()));
                } else if file_type.is_dir() {
                    stack.push((entry.path(), format!("{relative}/")));
                } else if file_type.is_file() {
                    files.push(relative);
                }
            }
        }
        files.sort();
        skipped.sort();
        (files, skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_stay_inside_and_symlinks_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let wiki = SafeDir::open(dir.path(), true).unwrap();
        wiki.write("decision/a.md", b"hello").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("decision/a.md")).unwrap(),
            b"hello"
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outside.path(), dir.path().join("note")).unwrap();
            let error = wiki.write("note/x.md", b"escape").unwrap_err();
            assert!(error.to_string().contains("symlink"), "{error}");
            std::os::unix::fs::symlink(
                outside.path().join("target.md"),
                dir.path().join("decision/b.md"),
            )
            .unwrap();
            let error = wiki.write("decision/b.md", b"escape").unwrap_err();
            assert!(error.to_string().contains("symlink"), "{error}");
            assert!(wiki.read("decision/b.md", 100).is_err());
            assert!(wiki.remove("decision/b.md").is_err());
            assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
            let linked_root = outside.path().join("link");
            std::os::unix::fs::symlink(dir.path(), &linked_root).unwrap();
            assert!(SafeDir::open(&linked_root, true).is_err());
        }
        assert!(wiki.write("../x.md", b"x").is_err());
        assert!(wiki.write("/tmp/x.md", b"x").is_err());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("decision"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("cairn-tmp"))
            .collect();
        assert!(leftovers.is_empty(), "no temporary files are left behind");
    }
}
