//! The export's memory of what it wrote: `.cairn-wiki.tsv` in the wiki directory, one line per
//! file with the record it shows, the record's `updated_at`, a fingerprint of everything the
//! page was rendered from, the SHA-256 of the bytes written, and the file's size and mtime.
//!
//! It lets a re-export skip unchanged pages without rendering or reading them (fingerprint and
//! stamp match), tells an export which files are its own (and which a person edited since), and
//! tells an import which pages were edited since the export and which were deleted. Losing it
//! costs speed and deletion reports, never data: without it every page is compared by content.

use super::fs::{SafeDir, Stamp};
use std::collections::BTreeMap;

pub const FILE: &str = ".cairn-wiki.tsv";
const HEADER: &str = "# cairn wiki manifest v1 — written by `cairn export wiki`; do not edit";

/// What was written at one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The record shown, for record pages.
    pub id: Option<i64>,
    /// The record's version when the page was written: `updated_at#history-versions` (times
    /// have whole seconds; the history count tells apart two changes in one second).
    pub version: Option<String>,
    pub fingerprint: String,
    pub sha256: String,
    pub stamp: Stamp,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub entries: BTreeMap<String, Entry>,
}

impl Manifest {
    /// Reads the manifest; a missing or unreadable one is empty (the export then compares
    /// files by content instead).
    pub fn load(dir: &SafeDir) -> Manifest {
        let Ok(Some(bytes)) = dir.read(FILE, 1 << 30) else {
            return Manifest::default();
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return Manifest::default();
        };
        let mut entries = BTreeMap::new();
        for line in text.lines() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split('\t').collect();
            let [path, id, version, fingerprint, sha256, size, mtime] = fields.as_slice() else {
                continue;
            };
            let (Ok(size), Ok(mtime_ns)) = (size.parse(), mtime.parse()) else {
                continue;
            };
            entries.insert(
                path.to_string(),
                Entry {
                    id: id.parse().ok(),
                    version: (*version != "-").then(|| version.to_string()),
                    fingerprint: fingerprint.to_string(),
                    sha256: sha256.to_string(),
                    stamp: Stamp { size, mtime_ns },
                },
            );
        }
        Manifest { entries }
    }

    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.entries.len() * 160);
        out.push_str(HEADER);
        out.push('\n');
        for (path, entry) in &self.entries {
            let id = entry
                .id
                .map(|i| i.to_string())
                .unwrap_or_else(|| "-".into());
            out.push_str(&format!(
                "{path}\t{id}\t{}\t{}\t{}\t{}\t{}\n",
                entry.version.as_deref().unwrap_or("-"),
                entry.fingerprint,
                entry.sha256,
                entry.stamp.size,
                entry.stamp.mtime_ns
            ));
        }
        out
    }

    /// The path of the page showing record `id`, if any.
    pub fn path_of(&self, id: i64) -> Option<&str> {
        self.entries
            .iter()
            .find(|(_, e)| e.id == Some(id))
            .map(|(p, _)| p.as_str())
    }
}

/// Lowercase hex SHA-256 of bytes.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// A record's version as the manifest keeps it.
pub fn version(updated_at: &str, history_versions: i64) -> String {
    format!("{updated_at}#{history_versions}")
}

/// A short deterministic fingerprint (FNV-1a, 64 bits) of the parts a page is rendered from.
pub fn fingerprint(parts: &[&str]) -> String {
    let mut hash = Fingerprint::new();
    for part in parts {
        hash.part(part);
    }
    hash.finish()
}

/// `fingerprint` fed one part at a time, so a list of 10,000 members is hashed without first
/// collecting its parts: `Fingerprint::new().part(a).part(b).finish() == fingerprint(&[a, b])`.
#[derive(Debug, Clone, Copy)]
pub struct Fingerprint(u64);

impl Fingerprint {
    pub fn new() -> Fingerprint {
        Fingerprint(0xcbf2_9ce4_8422_2325)
    }

    /// Adds one part (its bytes, then the unit separator that ends every part).
    pub fn part(&mut self, part: &str) -> &mut Fingerprint {
        for byte in part.bytes().chain(std::iter::once(0x1f)) {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    pub fn finish(&self) -> String {
        format!("{:016x}", self.0)
    }
}

impl Default for Fingerprint {
    fn default() -> Fingerprint {
        Fingerprint::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_fed_part_by_part_is_the_fingerprint_of_the_parts() {
        for parts in [
            &[][..],
            &[""][..],
            &["wiki-1", "fact/a.md", "2026-01-01T00:00:00Z"][..],
            &["a", "b"][..],
            &["ab"][..],
        ] {
            let mut streamed = Fingerprint::new();
            for part in parts {
                streamed.part(part);
            }
            assert_eq!(streamed.finish(), fingerprint(parts), "{parts:?}");
        }
        // the separator keeps part boundaries: ["a", "b"] is not ["ab"]
        assert_ne!(fingerprint(&["a", "b"]), fingerprint(&["ab"]));
        // the value manifests on disk hold: a changed hash would re-render every page
        assert_eq!(fingerprint(&["wiki-1"]), "d3ed85d85d57fab0");
    }
}
