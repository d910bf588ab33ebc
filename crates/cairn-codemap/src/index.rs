//! The code map kept between calls: every mapped file's parse with its identifiers interned
//! (one sorted name table, ids instead of strings), the files the content checks left out
//! (so an unchanged minified or binary file is not read again), and a compact binary form the
//! store keeps as one blob per project. An up-to-date map decodes the blob and ranks; a
//! refresh re-parses only the changed files and applies them here.
//!
//! The blob is keyed by [`Index::key`] (the format and every file's path, language and
//! content hash): the caller compares it with the key of the files it stores and never uses
//! an index whose key differs. The same files give the same bytes, whatever the history.

use crate::parse::{Def, FileParse, Kind, Lang};
use crate::walk::SkipReason;
use crate::{Parsed, Scan};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;

/// The blob's format; part of the key, so a blob of another format is never decoded as this.
/// Bump it when the encoding or what a parse holds changes.
pub const FORMAT: u32 = 1;

const MAGIC: &[u8; 4] = b"CMIX";

/// A mapped file's identity and the size and modification time it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    pub path: String,
    pub lang: Lang,
    /// SHA-256 of the content, hex.
    pub hash: String,
    pub size: u64,
    pub mtime_ns: i64,
}

/// One definition, its name interned, its signature in the index's text ([`Index::signature`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDef {
    pub name: u32,
    pub kind: Kind,
    pub line: u32,
    pub top_level: bool,
    sig_at: u32,
    sig_len: u32,
}

/// Marks a signature still in the fresh parses' text while [`Index::apply`] runs.
const FRESH: u32 = 1 << 31;

/// One mapped file: its metadata and its parse with names interned. `refs` is sorted by name
/// id (which is the names' string order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFile {
    pub meta: FileMeta,
    pub errors: bool,
    pub defs: Vec<IndexDef>,
    /// (name id, uses), sorted by id.
    pub refs: Vec<(u32, u32)>,
}

/// A file the content checks left out, remembered with the size and time it had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    pub path: String,
    pub size: u64,
    pub mtime_ns: i64,
    pub reason: SkipReason,
}

/// Every mapped file of a tree, names interned; files sorted by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    /// Sorted, unique; every name is used by some file.
    names: Vec<String>,
    files: Vec<IndexFile>,
    skipped: Vec<SkippedFile>,
    /// Every definition's signature, in file then definition order.
    sigs: String,
}

/// The key of an index holding these files (path, language, content hash; in path order).
pub fn index_key<'a>(files: impl IntoIterator<Item = (&'a str, Lang, &'a str)>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(MAGIC);
    hasher.update(FORMAT.to_le_bytes());
    for (path, lang, hash) in files {
        hasher.update(path.as_bytes());
        hasher.update([0, lang.code(), 0]);
        hasher.update(hash.as_bytes());
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())
}

impl Index {
    /// An index of `files` (sorted by path or not).
    pub fn from_parsed(files: Vec<Parsed>) -> Index {
        let mut index = Index::default();
        let scan = Scan {
            files: files.iter().map(Parsed::meta).collect(),
            parsed: files.iter().map(|p| p.path.clone()).collect(),
            fresh: files,
            ..Scan::default()
        };
        index.apply(scan);
        index
    }

    /// The files without their parses (what [`crate::scan`] compares a tree with), and the
    /// remembered skipped files: enough to tell whether anything changed, without reading the
    /// index itself. Not for ranking.
    pub fn from_meta(files: Vec<FileMeta>, skipped: Vec<SkippedFile>) -> Index {
        Index {
            files: files
                .into_iter()
                .map(|meta| IndexFile {
                    meta,
                    errors: false,
                    defs: Vec::new(),
                    refs: Vec::new(),
                })
                .collect(),
            skipped,
            ..Index::default()
        }
    }

    /// Whether [`Index::apply`] of `scan` would change this index.
    pub fn changed_by(&self, scan: &Scan) -> bool {
        !(scan.fresh.is_empty()
            && scan.files.len() == self.files.len()
            && scan
                .files
                .iter()
                .zip(&self.files)
                .all(|(m, f)| *m == f.meta)
            && scan.remembered_skips() == self.skipped)
    }

    /// The remembered skipped files' own encoding (kept beside the index, so that a call that
    /// finds nothing changed never reads the index).
    pub fn encode_skipped(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.uint(self.skipped.len() as u64);
        for s in &self.skipped {
            w.string(&s.path);
            w.uint(s.size);
            w.int(s.mtime_ns);
            w.byte(s.reason.code());
        }
        w.out
    }

    /// Reads [`Index::encode_skipped`] back.
    pub fn decode_skipped(data: &[u8]) -> Result<Vec<SkippedFile>, String> {
        let mut r = Reader { data, at: 0 };
        let skipped = read_skipped(&mut r)?;
        if r.at != data.len() {
            return Err("trailing bytes".into());
        }
        Ok(skipped)
    }

    pub fn files(&self) -> &[IndexFile] {
        &self.files
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The interned names, sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// The id of `name`, if some file defines or uses it.
    pub fn name_id(&self, name: &str) -> Option<u32> {
        self.names
            .binary_search_by(|n| n.as_str().cmp(name))
            .ok()
            .map(|i| i as u32)
    }

    /// The mapped file at `path`.
    pub fn file(&self, path: &str) -> Option<&IndexFile> {
        self.position(path).map(|i| &self.files[i])
    }

    /// The index of `path` in [`Index::files`].
    pub fn position(&self, path: &str) -> Option<usize> {
        self.files
            .binary_search_by(|f| f.meta.path.as_str().cmp(path))
            .ok()
    }

    /// The remembered skipped file at `path`.
    pub fn skipped(&self, path: &str) -> Option<&SkippedFile> {
        self.skipped
            .binary_search_by(|f| f.path.as_str().cmp(path))
            .ok()
            .map(|i| &self.skipped[i])
    }

    /// The key of this index (see [`index_key`]).
    pub fn key(&self) -> String {
        index_key(
            self.files
                .iter()
                .map(|f| (f.meta.path.as_str(), f.meta.lang, f.meta.hash.as_str())),
        )
    }

    /// A definition's signature line.
    pub fn signature(&self, def: &IndexDef) -> &str {
        let at = def.sig_at as usize;
        &self.sigs[at..at + def.sig_len as usize]
    }

    /// A file's parse with its names as strings.
    pub fn parse_of(&self, file: &IndexFile) -> FileParse {
        FileParse {
            defs: file
                .defs
                .iter()
                .map(|d| Def {
                    name: self.name(d.name).to_string(),
                    kind: d.kind,
                    line: d.line,
                    signature: self.signature(d).to_string(),
                    top_level: d.top_level,
                })
                .collect(),
            refs: file
                .refs
                .iter()
                .map(|&(id, count)| (self.name(id).to_string(), count))
                .collect(),
            errors: file.errors,
        }
    }

    /// Brings the index to what `scan` found: its files (kept, with new metadata, or parsed
    /// again), without the removed ones, and the skipped files it read. Returns whether
    /// anything changed.
    pub fn apply(&mut self, scan: Scan) -> bool {
        let skipped = scan.remembered_skips();
        let unchanged_files = scan.fresh.is_empty()
            && scan.files.len() == self.files.len()
            && scan
                .files
                .iter()
                .zip(&self.files)
                .all(|(m, f)| *m == f.meta);
        if unchanged_files {
            let changed = skipped != self.skipped;
            self.skipped = skipped;
            return changed;
        }
        let fresh: BTreeMap<String, FileParse> =
            scan.fresh.into_iter().map(|p| (p.path, p.parse)).collect();
        // Names: the old ones still used, and the fresh parses' names, merged in order.
        let mut old_files: BTreeMap<String, IndexFile> = std::mem::take(&mut self.files)
            .into_iter()
            .map(|f| (f.meta.path.clone(), f))
            .collect();
        let mut kept: Vec<IndexFile> = Vec::with_capacity(scan.files.len());
        let mut pending: Vec<(FileMeta, FileParse)> = Vec::new();
        for meta in scan.files {
            if let Some(parse) = fresh.get(&meta.path) {
                pending.push((meta, parse.clone()));
            } else if let Some(mut file) = old_files.remove(&meta.path) {
                file.meta = meta;
                kept.push(file);
            }
        }
        let old_names = std::mem::take(&mut self.names);
        let mut used = vec![false; old_names.len()];
        for file in &kept {
            for d in &file.defs {
                used[d.name as usize] = true;
            }
            for &(id, _) in &file.refs {
                used[id as usize] = true;
            }
        }
        let mut new_names: Vec<&str> = Vec::new();
        for (_, parse) in &pending {
            for name in parse
                .defs
                .iter()
                .map(|d| d.name.as_str())
                .chain(parse.refs.keys().map(String::as_str))
            {
                match old_names.binary_search_by(|n| n.as_str().cmp(name)) {
                    Ok(i) => used[i] = true,
                    Err(_) => new_names.push(name),
                }
            }
        }
        new_names.sort_unstable();
        new_names.dedup();
        // Merge the used old names and the new ones (both sorted) into the new table.
        let mut names: Vec<String> = Vec::with_capacity(old_names.len() + new_names.len());
        let mut remap = vec![u32::MAX; old_names.len()];
        {
            let mut old = old_names
                .iter()
                .enumerate()
                .filter(|(i, _)| used[*i])
                .peekable();
            let mut new = new_names.iter().peekable();
            loop {
                let take_old = match (old.peek(), new.peek()) {
                    (Some((_, o)), Some(n)) => o.as_str() < **n,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => break,
                };
                let id = names.len() as u32;
                if take_old {
                    let (i, name) = old.next().expect("peeked");
                    remap[i] = id;
                    names.push(name.clone());
                } else {
                    names.push((*new.next().expect("peeked")).to_string());
                }
            }
        }
        for file in &mut kept {
            for d in &mut file.defs {
                d.name = remap[d.name as usize];
            }
            for r in &mut file.refs {
                r.0 = remap[r.0 as usize];
            }
        }
        let id_of = |name: &str| -> u32 {
            names
                .binary_search_by(|n| n.as_str().cmp(name))
                .map(|i| i as u32)
                .expect("every name of a fresh parse was added")
        };
        let mut fresh_sigs = String::new();
        for (meta, parse) in pending {
            let file = IndexFile {
                meta,
                errors: parse.errors,
                defs: parse
                    .defs
                    .into_iter()
                    .map(|d| {
                        let sig_at = fresh_sigs.len() as u32 | FRESH;
                        fresh_sigs.push_str(&d.signature);
                        IndexDef {
                            name: id_of(&d.name),
                            kind: d.kind,
                            line: d.line,
                            top_level: d.top_level,
                            sig_at,
                            sig_len: d.signature.len() as u32,
                        }
                    })
                    .collect(),
                // The parse's refs are sorted by name, so their ids are sorted too.
                refs: parse
                    .refs
                    .iter()
                    .map(|(name, &count)| (id_of(name), count))
                    .collect(),
            };
            kept.push(file);
        }
        kept.sort_by(|a, b| a.meta.path.cmp(&b.meta.path));
        // The signatures again, in file order (the same text as decoding the index gives).
        let old_sigs = std::mem::take(&mut self.sigs);
        let mut sigs = String::with_capacity(old_sigs.len() + fresh_sigs.len());
        for file in &mut kept {
            for d in &mut file.defs {
                let (text, at) = if d.sig_at & FRESH != 0 {
                    (&fresh_sigs, d.sig_at & !FRESH)
                } else {
                    (&old_sigs, d.sig_at)
                };
                let at = at as usize;
                let new_at = sigs.len() as u32;
                sigs.push_str(&text[at..at + d.sig_len as usize]);
                d.sig_at = new_at;
            }
        }
        self.sigs = sigs;
        self.names = names;
        self.files = kept;
        self.skipped = skipped;
        true
    }

    /// The binary form (see the module's documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.bytes(MAGIC);
        w.bytes(&FORMAT.to_le_bytes());
        w.uint(self.names.len() as u64);
        // Front coding: the names are sorted, each is stored as the length it shares with the
        // previous one and the rest.
        let mut previous = "";
        for name in &self.names {
            let shared = shared_prefix(previous, name);
            w.uint(shared as u64);
            w.string(&name[shared..]);
            previous = name;
        }
        w.uint(self.files.len() as u64);
        for file in &self.files {
            w.string(&file.meta.path);
            w.byte(file.meta.lang.code());
            match hex::decode(&file.meta.hash) {
                Ok(raw) if raw.len() == 32 => {
                    w.byte(1);
                    w.bytes(&raw);
                }
                _ => {
                    w.byte(0);
                    w.string(&file.meta.hash);
                }
            }
            w.uint(file.meta.size);
            w.int(file.meta.mtime_ns);
            w.byte(u8::from(file.errors));
            w.uint(file.defs.len() as u64);
            for d in &file.defs {
                w.uint(u64::from(d.name));
                w.byte(d.kind.code());
                w.uint(u64::from(d.line));
                w.byte(u8::from(d.top_level));
                w.string(self.signature(d));
            }
            w.uint(file.refs.len() as u64);
            let mut last = 0u32;
            for &(id, count) in &file.refs {
                w.uint(u64::from(id - last));
                w.uint(u64::from(count));
                last = id;
            }
        }
        w.uint(self.skipped.len() as u64);
        for s in &self.skipped {
            w.string(&s.path);
            w.uint(s.size);
            w.int(s.mtime_ns);
            w.byte(s.reason.code());
        }
        w.out
    }

    /// Reads the binary form back; an error says what was wrong (the caller rebuilds).
    pub fn decode(data: &[u8]) -> Result<Index, String> {
        let mut r = Reader { data, at: 0 };
        if r.take(4)? != MAGIC {
            return Err("not a code map index".into());
        }
        let format = u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes"));
        if format != FORMAT {
            return Err(format!("index format {format}, this build reads {FORMAT}"));
        }
        let count = r.len()?;
        let mut names: Vec<String> = Vec::with_capacity(count);
        for _ in 0..count {
            let shared = r.len()?;
            let rest = r.string()?;
            let previous = names.last().map_or("", String::as_str);
            let prefix = previous
                .get(..shared)
                .ok_or("a name shares more than the previous one has")?;
            let name = format!("{prefix}{rest}");
            if names.last().is_some_and(|p| *p >= name) {
                return Err("names out of order".into());
            }
            names.push(name);
        }
        let n_names = names.len() as u64;
        let name_id = |v: u64| -> Result<u32, String> {
            if v < n_names {
                Ok(v as u32)
            } else {
                Err(format!("name id {v} out of {n_names}"))
            }
        };
        let count = r.len()?;
        let mut files = Vec::with_capacity(count);
        let mut sigs = String::new();
        for _ in 0..count {
            let path = r.string()?;
            let lang = Lang::from_code(r.byte()?).ok_or("unknown language")?;
            let hash = match r.byte()? {
                1 => hex::encode(r.take(32)?),
                _ => r.string()?,
            };
            let size = r.uint()?;
            let mtime_ns = r.int()?;
            let errors = r.byte()? != 0;
            let n_defs = r.len()?;
            let mut defs = Vec::with_capacity(n_defs);
            for _ in 0..n_defs {
                let name = name_id(r.uint()?)?;
                let kind = Kind::from_code(r.byte()?).ok_or("unknown kind")?;
                let line = u32::try_from(r.uint()?).map_err(|_| "line out of range")?;
                let top_level = r.byte()? != 0;
                let signature = r.str()?;
                let sig_at = u32::try_from(sigs.len())
                    .ok()
                    .filter(|at| at & FRESH == 0)
                    .ok_or("signatures over 2 GB")?;
                sigs.push_str(signature);
                defs.push(IndexDef {
                    name,
                    kind,
                    line,
                    top_level,
                    sig_at,
                    sig_len: signature.len() as u32,
                });
            }
            let n_refs = r.len()?;
            let mut refs = Vec::with_capacity(n_refs);
            let mut last = 0u64;
            for _ in 0..n_refs {
                last += r.uint()?;
                let count = u32::try_from(r.uint()?).map_err(|_| "count out of range")?;
                refs.push((name_id(last)?, count));
            }
            files.push(IndexFile {
                meta: FileMeta {
                    path,
                    lang,
                    hash,
                    size,
                    mtime_ns,
                },
                errors,
                defs,
                refs,
            });
        }
        if files.windows(2).any(|w| w[0].meta.path >= w[1].meta.path) {
            return Err("files out of order".into());
        }
        let skipped = read_skipped(&mut r)?;
        if r.at != data.len() {
            return Err("trailing bytes".into());
        }
        Ok(Index {
            names,
            files,
            skipped,
            sigs,
        })
    }

    /// A map from name id to the files defining it (each file once, in file order).
    pub fn definers(&self) -> Vec<Vec<u32>> {
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); self.names.len()];
        for (i, file) in self.files.iter().enumerate() {
            for d in &file.defs {
                let list = &mut out[d.name as usize];
                if list.last() != Some(&(i as u32)) {
                    list.push(i as u32);
                }
            }
        }
        out
    }
}

impl Scan {
    /// The skipped files worth remembering: those the content checks refused after reading
    /// (the walk refuses by size without reading).
    fn remembered_skips(&self) -> Vec<SkippedFile> {
        let mut out: Vec<SkippedFile> = self
            .skipped_read
            .iter()
            .map(|(path, size, mtime_ns, reason)| SkippedFile {
                path: path.clone(),
                size: *size,
                mtime_ns: *mtime_ns,
                reason: *reason,
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }
}

fn read_skipped(r: &mut Reader<'_>) -> Result<Vec<SkippedFile>, String> {
    let count = r.len()?;
    let mut skipped = Vec::with_capacity(count);
    for _ in 0..count {
        skipped.push(SkippedFile {
            path: r.string()?,
            size: r.uint()?,
            mtime_ns: r.int()?,
            reason: SkipReason::from_code(r.byte()?).ok_or("unknown skip reason")?,
        });
    }
    Ok(skipped)
}

fn shared_prefix(a: &str, b: &str) -> usize {
    let mut n = 0;
    for ((i, x), y) in a.char_indices().zip(b.chars()) {
        if x != y {
            return i;
        }
        n = i + x.len_utf8();
    }
    n
}

#[derive(Default)]
struct Writer {
    out: Vec<u8>,
}

impl Writer {
    fn byte(&mut self, b: u8) {
        self.out.push(b);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }
    fn uint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }
    fn int(&mut self, v: i64) {
        self.uint(((v << 1) ^ (v >> 63)) as u64);
    }
    fn string(&mut self, s: &str) {
        self.uint(s.len() as u64);
        self.bytes(s.as_bytes());
    }
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len());
        let end = end.ok_or_else(|| format!("truncated at byte {}", self.at))?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn uint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(format!("a number too long at byte {}", self.at))
    }
    fn int(&mut self) -> Result<i64, String> {
        let v = self.uint()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }
    /// A count: bounded by the bytes left, so a corrupt count cannot allocate wildly.
    fn len(&mut self) -> Result<usize, String> {
        let v = self.uint()?;
        let left = (self.data.len() - self.at) as u64;
        if v > left.saturating_mul(64).max(1 << 20) {
            return Err(format!("a count of {v} with {left} bytes left"));
        }
        Ok(v as usize)
    }
    fn string(&mut self) -> Result<String, String> {
        self.str().map(str::to_string)
    }
    fn str(&mut self) -> Result<&'a str, String> {
        let n = self.len()?;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes).map_err(|_| "a string that is not UTF-8".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_source;

    fn parsed(path: &str, text: &str) -> Parsed {
        let lang = Lang::from_path(path).unwrap();
        Parsed {
            path: path.into(),
            lang,
            hash: crate::content_hash(text),
            size: text.len() as u64,
            mtime_ns: -5,
            parse: parse_source(lang, text),
        }
    }

    #[test]
    fn encode_decode_round_trips_and_corruption_is_an_error() {
        let index = Index::from_parsed(vec![
            parsed("b.rs", "pub fn beta_worker() { alpha_helper(); }\n"),
            parsed("a.rs", "pub fn alpha_helper() {}\nconst É: u32 = 1;\n"),
            parsed("c.py", "def gamma():\n    return alpha_helper()\n"),
        ]);
        assert_eq!(
            index
                .files()
                .iter()
                .map(|f| f.meta.path.as_str())
                .collect::<Vec<_>>(),
            ["a.rs", "b.rs", "c.py"]
        );
        let bytes = index.encode();
        let back = Index::decode(&bytes).unwrap();
        assert_eq!(back, index);
        assert_eq!(back.key(), index.key());
        let b = back.file("b.rs").unwrap();
        assert_eq!(
            back.parse_of(b),
            parsed("b.rs", "pub fn beta_worker() { alpha_helper(); }\n").parse
        );
        for cut in [0, 3, 4, 8, bytes.len() / 2, bytes.len() - 1] {
            assert!(Index::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong = bytes.clone();
        wrong[4] = 99;
        assert!(Index::decode(&wrong).unwrap_err().contains("format"));
    }

    #[test]
    fn applying_changes_gives_the_same_index_as_building_from_scratch() {
        let a = parsed("a.rs", "pub fn alpha_helper() {}\n");
        let b = parsed("b.rs", "pub fn beta_worker() { alpha_helper(); }\n");
        let c = parsed("c.rs", "pub fn gamma() { beta_worker(); }\n");
        let mut index = Index::from_parsed(vec![a.clone(), b.clone(), c.clone()]);
        // b changes (a new name, an old one no longer used), c goes away, d comes.
        // b.rs now uses `gamma`, which only c.rs (going away) had: an old name a fresh parse
        // brings back.
        let b2 = parsed("b.rs", "pub fn beta_renamed() { zeta(); gamma(); }\n");
        let d = parsed("d.rs", "fn delta() { beta_renamed(); }\n");
        let scan = Scan {
            files: vec![a.meta(), b2.meta(), d.meta()],
            parsed: vec!["b.rs".into(), "d.rs".into()],
            fresh: vec![b2.clone(), d.clone()],
            removed: vec!["c.rs".into()],
            ..Scan::default()
        };
        assert!(index.apply(scan));
        let scratch = Index::from_parsed(vec![a, b2, d]);
        assert_eq!(index, scratch);
        assert_eq!(index.encode(), scratch.encode());
        assert!(
            index.name_id("beta_worker").is_none(),
            "unused names are dropped"
        );
        assert!(index.name_id("gamma").is_some());
        assert!(index.name_id("zeta").is_some());
    }
}
