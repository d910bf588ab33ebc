//! The code map kept between calls, one file at a time: each mapped file's parse in a compact
//! binary form of its own, in two parts the store keeps per content hash —
//!
//! - the **graph part** ([`IndexFile::encode_graph`]): what ranking needs — each definition's
//!   name id, kind, line and nesting, each referenced identifier's name id, count and weight
//!   class. A name id is the FNV-1a hash of the name ([`name_id`]), so a file's part depends on
//!   that file alone: a refresh writes the rows of the files that changed and nothing else, and
//!   ranking never needs the names themselves;
//! - the **detail part** ([`IndexFile::encode_detail`]): the definitions' names and signature
//!   lines, read only for the files a map shows.
//!
//! An [`Index`] is every mapped file's graph part (in path order) and the files the content
//! checks left out (so an unchanged minified or binary file is not read again). The same files
//! give the same parts and the same index, whatever the history.

use crate::parse::{Def, FileParse, Kind, Lang};
use crate::walk::SkipReason;
use crate::{Parsed, Scan};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// The parts' format; part of the key, so a part of another format is never decoded as this.
/// Bump it when the encoding or what a parse holds changes.
pub const FORMAT: u32 = 2;

const GRAPH_MAGIC: &[u8; 4] = b"CMG2";
const DETAIL_MAGIC: &[u8; 4] = b"CMD2";

/// A name's id: the 64-bit FNV-1a hash of its bytes. Two names sharing an id (about one chance
/// in 10⁷ among a million names) would only link each other's files.
pub type NameId = u64;

/// The id of `name` (see [`NameId`]).
pub fn name_id(name: &str) -> NameId {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A hasher for maps keyed by [`NameId`]s (already hashes: one multiply spreads them).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by name ids.
pub type IdMap<V> = HashMap<NameId, V, BuildHasherDefault<IdHasher>>;

/// How much one use of a name links, by its class ([`weight_class`]): short names and private
/// ones link little, long descriptive names (snake or camel case) more.
pub fn class_weight(class: u8) -> f64 {
    let mut weight = 1.0;
    match class {
        0 => return 0.0,
        1 => {}
        2 => weight *= 0.1,
        3 => weight *= 2.0,
        _ => {
            weight *= 0.1;
            weight *= 2.0;
        }
    }
    weight
}

/// The weight class of `name`: 0 shorter than two characters, else 1 plain, 2 private (`_x`),
/// 3 long and descriptive (8+ characters in snake or camel case), 4 both.
pub fn weight_class(name: &str) -> u8 {
    let chars = name.chars().count();
    if chars < 2 {
        return 0;
    }
    let private = name.starts_with('_');
    let mixed = name.chars().any(char::is_uppercase) && name.chars().any(char::is_lowercase);
    let long = chars >= 8 && (name.contains('_') || mixed);
    match (private, long) {
        (false, false) => 1,
        (true, false) => 2,
        (false, true) => 3,
        (true, true) => 4,
    }
}

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

/// One definition, its name as an id (the name and signature are in the file's [`Detail`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexDef {
    pub name: NameId,
    pub kind: Kind,
    pub line: u32,
    pub top_level: bool,
}

/// One identifier a file uses: its id, how many times, its weight class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexRef {
    pub name: NameId,
    pub count: u32,
    pub class: u8,
}

/// A file's definitions' names and signature lines, in definition order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Detail {
    pub names: Vec<String>,
    pub signatures: Vec<String>,
}

/// One mapped file: its metadata and its parse's graph part; its detail when it was parsed in
/// this call or read for showing. `refs` is in the names' string order (the parse's), so every
/// sum over them is taken in an order that depends on the file alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFile {
    pub meta: FileMeta,
    pub errors: bool,
    pub defs: Vec<IndexDef>,
    pub refs: Vec<IndexRef>,
    pub detail: Option<Detail>,
}

/// A file the content checks left out, remembered with the size and time it had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    pub path: String,
    pub size: u64,
    pub mtime_ns: i64,
    pub reason: SkipReason,
}

/// Every mapped file of a tree, sorted by path, and the skipped files remembered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    files: Vec<IndexFile>,
    skipped: Vec<SkippedFile>,
}

/// The key of an index holding these files (path, language, content hash; in path order).
pub fn index_key<'a>(files: impl IntoIterator<Item = (&'a str, Lang, &'a str)>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(GRAPH_MAGIC);
    hasher.update(FORMAT.to_le_bytes());
    for (path, lang, hash) in files {
        hasher.update(path.as_bytes());
        hasher.update([0, lang.code(), 0]);
        hasher.update(hash.as_bytes());
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())
}

impl IndexFile {
    /// A fresh parse, detail included.
    pub fn from_parsed(parsed: Parsed) -> IndexFile {
        let meta = parsed.meta();
        let parse = parsed.parse;
        let defs = parse
            .defs
            .iter()
            .map(|d| IndexDef {
                name: name_id(&d.name),
                kind: d.kind,
                line: d.line,
                top_level: d.top_level,
            })
            .collect();
        let refs = parse
            .refs
            .iter()
            .map(|(name, &count)| IndexRef {
                name: name_id(name),
                count,
                class: weight_class(name),
            })
            .collect();
        let (names, signatures) = parse
            .defs
            .into_iter()
            .map(|d| (d.name, d.signature))
            .unzip();
        IndexFile {
            meta,
            errors: parse.errors,
            defs,
            refs,
            detail: Some(Detail { names, signatures }),
        }
    }

    /// The graph part (see the module's documentation); the same parse gives the same bytes.
    pub fn encode_graph(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.bytes(GRAPH_MAGIC);
        w.byte(u8::from(self.errors));
        w.uint(self.defs.len() as u64);
        for d in &self.defs {
            w.bytes(&d.name.to_le_bytes());
            w.byte(d.kind.code());
            w.uint(u64::from(d.line));
            w.byte(u8::from(d.top_level));
        }
        w.uint(self.refs.len() as u64);
        for r in &self.refs {
            w.bytes(&r.name.to_le_bytes());
            w.uint(u64::from(r.count));
            w.byte(r.class);
        }
        w.out
    }

    /// Reads a graph part back for the file `meta`; an error says what was wrong.
    pub fn decode_graph(meta: FileMeta, data: &[u8]) -> Result<IndexFile, String> {
        let mut r = Reader { data, at: 0 };
        if r.take(4)? != GRAPH_MAGIC {
            return Err("not a code map graph part of this format".into());
        }
        let errors = r.byte()? != 0;
        let n = r.len()?;
        let mut defs = Vec::with_capacity(n);
        for _ in 0..n {
            defs.push(IndexDef {
                name: r.u64()?,
                kind: Kind::from_code(r.byte()?).ok_or("unknown kind")?,
                line: u32::try_from(r.uint()?).map_err(|_| "line out of range")?,
                top_level: r.byte()? != 0,
            });
        }
        let n = r.len()?;
        let mut refs = Vec::with_capacity(n);
        for _ in 0..n {
            refs.push(IndexRef {
                name: r.u64()?,
                count: u32::try_from(r.uint()?).map_err(|_| "count out of range")?,
                class: r.byte()?,
            });
        }
        if r.at != data.len() {
            return Err("trailing bytes".into());
        }
        Ok(IndexFile {
            meta,
            errors,
            defs,
            refs,
            detail: None,
        })
    }

    /// The detail part, when this file has its detail.
    pub fn encode_detail(&self) -> Option<Vec<u8>> {
        let detail = self.detail.as_ref()?;
        let mut w = Writer::default();
        w.bytes(DETAIL_MAGIC);
        w.uint(detail.names.len() as u64);
        for (name, signature) in detail.names.iter().zip(&detail.signatures) {
            w.string(name);
            w.string(signature);
        }
        Some(w.out)
    }

    /// Reads a detail part back, checked against this file's definitions (their count and
    /// names' ids).
    pub fn decode_detail(&self, data: &[u8]) -> Result<Detail, String> {
        let mut r = Reader { data, at: 0 };
        if r.take(4)? != DETAIL_MAGIC {
            return Err("not a code map detail part of this format".into());
        }
        let n = r.len()?;
        if n != self.defs.len() {
            return Err(format!(
                "{n} definitions in the detail, {} in the parse",
                self.defs.len()
            ));
        }
        let mut detail = Detail {
            names: Vec::with_capacity(n),
            signatures: Vec::with_capacity(n),
        };
        for def in &self.defs {
            let name = r.string()?;
            if name_id(&name) != def.name {
                return Err(format!("the detail's name {name} is not the parse's"));
            }
            detail.names.push(name);
            detail.signatures.push(r.string()?);
        }
        if r.at != data.len() {
            return Err("trailing bytes".into());
        }
        Ok(detail)
    }

    /// The name of definition `d`, when the detail is here.
    pub fn def_name(&self, d: usize) -> Option<&str> {
        self.detail.as_ref().map(|x| x.names[d].as_str())
    }

    /// The signature line of definition `d`, when the detail is here.
    pub fn signature(&self, d: usize) -> Option<&str> {
        self.detail.as_ref().map(|x| x.signatures[d].as_str())
    }

    /// The parse back, names as strings (the detail must be here); the references' names are
    /// those of definitions somewhere in `index` (a name no file defines is not known).
    pub fn parse_in(&self, names: &IdMap<String>) -> Option<FileParse> {
        let detail = self.detail.as_ref()?;
        Some(FileParse {
            defs: self
                .defs
                .iter()
                .enumerate()
                .map(|(i, d)| Def {
                    name: detail.names[i].clone(),
                    kind: d.kind,
                    line: d.line,
                    signature: detail.signatures[i].clone(),
                    top_level: d.top_level,
                })
                .collect(),
            refs: self
                .refs
                .iter()
                .filter_map(|r| Some((names.get(&r.name)?.clone(), r.count)))
                .collect(),
            errors: self.errors,
        })
    }
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
    /// remembered skipped files: enough to tell whether anything changed, without reading a
    /// parse. Not for ranking.
    pub fn from_meta(files: Vec<FileMeta>, skipped: Vec<SkippedFile>) -> Index {
        Index {
            files: files
                .into_iter()
                .map(|meta| IndexFile {
                    meta,
                    errors: false,
                    defs: Vec::new(),
                    refs: Vec::new(),
                    detail: None,
                })
                .collect(),
            skipped,
        }
    }

    /// An index of these files (sorted here by path; a path given twice keeps the last).
    pub fn from_files(mut files: Vec<IndexFile>, skipped: Vec<SkippedFile>) -> Index {
        files.sort_by(|a, b| a.meta.path.cmp(&b.meta.path));
        files.dedup_by(|next, kept| {
            if next.meta.path == kept.meta.path {
                std::mem::swap(next, kept);
                true
            } else {
                false
            }
        });
        Index { files, skipped }
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

    /// The remembered skipped files' encoding (kept per project).
    pub fn encode_skipped(&self) -> Vec<u8> {
        encode_skipped(&self.skipped)
    }

    /// Reads [`Index::encode_skipped`] back.
    pub fn decode_skipped(data: &[u8]) -> Result<Vec<SkippedFile>, String> {
        let mut r = Reader { data, at: 0 };
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
        if r.at != data.len() {
            return Err("trailing bytes".into());
        }
        Ok(skipped)
    }

    pub fn files(&self) -> &[IndexFile] {
        &self.files
    }

    /// The remembered skipped files, sorted by path.
    pub fn skipped_files(&self) -> &[SkippedFile] {
        &self.skipped
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
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

    /// Gives file `i` its detail (read for showing it).
    pub fn set_detail(&mut self, i: usize, detail: Detail) {
        self.files[i].detail = Some(detail);
    }

    /// The key of this index (see [`index_key`]).
    pub fn key(&self) -> String {
        index_key(
            self.files
                .iter()
                .map(|f| (f.meta.path.as_str(), f.meta.lang, f.meta.hash.as_str())),
        )
    }

    /// Every defined name whose file's detail is here, by id.
    pub fn known_names(&self) -> IdMap<String> {
        let mut out = IdMap::default();
        for file in &self.files {
            if let Some(detail) = &file.detail {
                for (d, name) in file.defs.iter().zip(&detail.names) {
                    out.entry(d.name).or_insert_with(|| name.clone());
                }
            }
        }
        out
    }

    /// Brings the index to what `scan` found: its files (kept, with new metadata, or parsed
    /// again), without the removed ones, and the skipped files it read. Returns whether
    /// anything changed.
    pub fn apply(&mut self, scan: Scan) -> bool {
        let changed = self.changed_by(&scan);
        let skipped = scan.remembered_skips();
        let mut fresh: BTreeMap<String, Parsed> = scan
            .fresh
            .into_iter()
            .map(|p| (p.path.clone(), p))
            .collect();
        let mut old: BTreeMap<String, IndexFile> = std::mem::take(&mut self.files)
            .into_iter()
            .map(|f| (f.meta.path.clone(), f))
            .collect();
        let mut files: Vec<IndexFile> = Vec::with_capacity(scan.files.len());
        for meta in scan.files {
            if let Some(parsed) = fresh.remove(&meta.path) {
                files.push(IndexFile::from_parsed(parsed));
            } else if let Some(mut file) = old.remove(&meta.path) {
                file.meta = meta;
                files.push(file);
            }
        }
        files.sort_by(|a, b| a.meta.path.cmp(&b.meta.path));
        self.files = files;
        self.skipped = skipped;
        changed
    }

    /// The files defining each name (each file once, in file order).
    pub fn definers(&self) -> Definers {
        Definers::build(
            self.files
                .iter()
                .enumerate()
                .flat_map(|(i, f)| f.defs.iter().map(move |d| (d.name, i as u32))),
            self.files.iter().map(|f| f.defs.len()).sum(),
        )
    }
}

/// The files defining each name, as sorted arrays: every defined name once (`names`, sorted),
/// its files at `files[offsets[k]..offsets[k + 1]]` (sorted, each once). Name ids are hashes,
/// so their top bits spread them evenly: `buckets[b]` is the first name whose top bits are `b`,
/// and a lookup reads two small neighbouring entries there instead of searching the whole
/// array. Built by a counting sort on those top bits: no hash map, no allocation per name (a
/// hash map of 400,000 names cost more to fill than the whole graph's edges).
#[derive(Debug, Clone, Default)]
pub struct Definers {
    buckets: Vec<u32>,
    names: Vec<NameId>,
    offsets: Vec<u32>,
    files: Vec<u32>,
    shift: u32,
}

impl Definers {
    /// From every (name, file) definition, in any order; `count` is how many there are (a
    /// hint).
    pub fn build(defs: impl Iterator<Item = (NameId, u32)>, count: usize) -> Definers {
        // About two definitions per bucket.
        let bits = (count / 2)
            .max(1)
            .next_power_of_two()
            .trailing_zeros()
            .max(1);
        let shift = 64 - bits;
        let nb = 1usize << bits;
        let mut pairs: Vec<(NameId, u32)> = Vec::with_capacity(count);
        pairs.extend(defs);
        // Counting sort by bucket, then each bucket (a few entries) sorted in place.
        let mut starts = vec![0u32; nb + 1];
        for &(name, _) in &pairs {
            starts[(name >> shift) as usize + 1] += 1;
        }
        for b in 0..nb {
            starts[b + 1] += starts[b];
        }
        let mut next: Vec<u32> = starts[..nb].to_vec();
        let mut sorted = vec![(0u64, 0u32); pairs.len()];
        for &(name, file) in &pairs {
            let b = (name >> shift) as usize;
            sorted[next[b] as usize] = (name, file);
            next[b] += 1;
        }
        drop(pairs);
        for b in 0..nb {
            let bucket = &mut sorted[starts[b] as usize..starts[b + 1] as usize];
            if bucket.len() > 1 {
                bucket.sort_unstable();
            }
        }
        sorted.dedup();
        let mut out = Definers {
            buckets: vec![0u32; nb + 1],
            names: Vec::with_capacity(sorted.len()),
            offsets: Vec::with_capacity(sorted.len() + 1),
            files: Vec::with_capacity(sorted.len()),
            shift,
        };
        for &(name, file) in &sorted {
            if out.names.last() != Some(&name) {
                out.offsets.push(out.files.len() as u32);
                out.names.push(name);
                out.buckets[(name >> shift) as usize + 1] += 1;
            }
            out.files.push(file);
        }
        out.offsets.push(out.files.len() as u32);
        for b in 0..nb {
            out.buckets[b + 1] += out.buckets[b];
        }
        out
    }

    /// The files defining `name`, in file order (none: empty).
    pub fn get(&self, name: NameId) -> &[u32] {
        if self.names.is_empty() {
            return &[];
        }
        let b = (name >> self.shift) as usize;
        let (lo, hi) = (self.buckets[b] as usize, self.buckets[b + 1] as usize);
        let Some(k) = self.names[lo..hi].iter().position(|&n| n >= name) else {
            return &[];
        };
        let k = lo + k;
        if self.names[k] != name {
            return &[];
        }
        &self.files[self.offsets[k] as usize..self.offsets[k + 1] as usize]
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

fn encode_skipped(skipped: &[SkippedFile]) -> Vec<u8> {
    let mut w = Writer::default();
    w.uint(skipped.len() as u64);
    for s in skipped {
        w.string(&s.path);
        w.uint(s.size);
        w.int(s.mtime_ns);
        w.byte(s.reason.code());
    }
    w.out
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
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
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
    fn parts_round_trip_and_corruption_is_an_error() {
        let p = parsed(
            "b.rs",
            "pub fn beta_worker() { alpha_helper(); }\nconst É: u32 = 1;\n",
        );
        let file = IndexFile::from_parsed(p.clone());
        let graph = file.encode_graph();
        let detail = file.encode_detail().unwrap();
        let mut back = IndexFile::decode_graph(p.meta(), &graph).unwrap();
        assert_eq!(back.detail, None);
        back.detail = Some(back.decode_detail(&detail).unwrap());
        assert_eq!(back, file);
        let mut names = IdMap::default();
        names.insert(name_id("alpha_helper"), "alpha_helper".to_string());
        let parse = back.parse_in(&names).unwrap();
        assert_eq!(parse.defs, p.parse.defs);
        assert_eq!(
            parse.refs.keys().collect::<Vec<_>>(),
            ["alpha_helper"],
            "names no file defines are not known"
        );
        for cut in [0, 3, 4, 8, graph.len() / 2, graph.len() - 1] {
            assert!(
                IndexFile::decode_graph(p.meta(), &graph[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        for cut in [0, 4, detail.len() - 1] {
            assert!(file.decode_detail(&detail[..cut]).is_err(), "cut at {cut}");
        }
        // A detail of another parse is refused.
        let other = IndexFile::from_parsed(parsed("c.rs", "fn gamma() {}\nfn delta() {}\n"));
        assert!(other.decode_detail(&detail).is_err());
        let mut wrong = graph.clone();
        wrong[3] = b'1';
        assert!(
            IndexFile::decode_graph(p.meta(), &wrong)
                .unwrap_err()
                .contains("format")
        );
    }

    #[test]
    fn applying_changes_gives_the_same_index_as_building_from_scratch() {
        let a = parsed("a.rs", "pub fn alpha_helper() {}\n");
        let b = parsed("b.rs", "pub fn beta_worker() { alpha_helper(); }\n");
        let c = parsed("c.rs", "pub fn gamma() { beta_worker(); }\n");
        let mut index = Index::from_parsed(vec![a.clone(), b.clone(), c.clone()]);
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
        let encoded =
            |i: &Index| -> Vec<Vec<u8>> { i.files().iter().map(IndexFile::encode_graph).collect() };
        assert_eq!(encoded(&index), encoded(&scratch));
        let definers = index.definers();
        assert!(definers.get(name_id("beta_worker")).is_empty());
        assert_eq!(definers.get(name_id("beta_renamed")), [1]);
        let several = Index::from_parsed(vec![
            parsed("x.rs", "fn shared_name() {}\nfn shared_name() {}\n"),
            parsed("y.rs", "fn shared_name() {}\nfn only_y() {}\n"),
            parsed("z.rs", "fn shared_name() {}\n"),
        ]);
        let definers = several.definers();
        assert_eq!(definers.get(name_id("shared_name")), [0, 1, 2]);
        assert_eq!(definers.get(name_id("only_y")), [1]);
        assert_eq!(
            index.file("b.rs").unwrap().def_name(0),
            Some("beta_renamed")
        );
    }

    #[test]
    fn definers_answer_what_a_map_of_every_definition_answers() {
        // Random names (some sharing their top bits, some defined in many files, some twice in
        // a file), against a plain map of name → sorted files.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for count in [0usize, 1, 2, 7, 100, 5_000] {
            let mut defs: Vec<(NameId, u32)> = Vec::new();
            let mut names: Vec<NameId> = (0..count / 3 + 1).map(|_| next()).collect();
            // Neighbours in the top bits: the same bucket.
            names.push(names[0] ^ 1);
            names.push(names[0] | 0xffff);
            for _ in 0..count {
                let name = names[(next() % names.len() as u64) as usize];
                defs.push((name, (next() % 50) as u32));
            }
            let mut model: BTreeMap<NameId, Vec<u32>> = BTreeMap::new();
            for &(name, file) in &defs {
                model.entry(name).or_default().push(file);
            }
            for files in model.values_mut() {
                files.sort_unstable();
                files.dedup();
            }
            let definers = Definers::build(defs.iter().copied(), defs.len());
            for name in names.iter().chain(&[0, u64::MAX, 12_345]) {
                let expected: &[u32] = model.get(name).map_or(&[], Vec::as_slice);
                assert_eq!(definers.get(*name), expected, "{count} {name:x}");
            }
            // A probe of names nobody defines.
            for _ in 0..200 {
                let name = next();
                let expected: &[u32] = model.get(&name).map_or(&[], Vec::as_slice);
                assert_eq!(definers.get(name), expected);
            }
        }
    }

    #[test]
    fn weight_classes_give_the_ranking_weights() {
        for (name, weight) in [
            ("x", 0.0),
            ("run", 1.0),
            ("_run", 0.1),
            ("open_store", 2.0),
            ("OpenStore", 2.0),
            ("openstore", 1.0),
            ("_open_store", 0.1 * 2.0),
        ] {
            assert_eq!(class_weight(weight_class(name)), weight, "{name}");
        }
        assert_ne!(name_id("a"), name_id("b"));
        assert_eq!(name_id("open_store"), name_id("open_store"));
    }
}
