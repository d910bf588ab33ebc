//! A persistent embedding cache for `cairn eval`: the vectors a model produced, keyed by the
//! model id, the kind of text (stored passage or query: e5 embeds them with different
//! prefixes) and the SHA-256 of the text. A cached vector is the very vector the model
//! returned for that text, so a run with the cache ranks exactly like a run without it; it
//! only saves re-embedding the same 2,000 turns for every experiment on the query side.
//!
//! File format (little endian): `CAIRNEC1`, the dimension (u32), then entries of 32 bytes of
//! key and `dimension` f32s. The file is rewritten whole by [`CachedEmbedder::save`].

use anyhow::{Context as _, Result, bail};
use cairn_embed::{EmbedError, Embedder};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const MAGIC: &[u8; 8] = b"CAIRNEC1";

type Key = [u8; 32];

/// An embedder that answers from the cache when it can and asks the model otherwise.
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    path: PathBuf,
    vectors: Mutex<HashMap<Key, Vec<f32>>>,
    /// (answered from the cache, embedded by the model)
    counts: Mutex<(usize, usize)>,
}

fn key(model: &str, kind: &str, text: &str) -> Key {
    let mut hasher = Sha256::new();
    hasher.update(model.as_bytes());
    hasher.update([0]);
    hasher.update(kind.as_bytes());
    hasher.update([0]);
    hasher.update(text.as_bytes());
    hasher.finalize().into()
}

impl CachedEmbedder {
    /// Wraps `inner`, reading `path` if it exists (a missing file is an empty cache).
    pub fn open(inner: Arc<dyn Embedder>, path: &Path) -> Result<CachedEmbedder> {
        let dimension = inner.dimension();
        let mut vectors = HashMap::new();
        if path.exists() {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            if bytes.len() < 12 || &bytes[..8] != MAGIC {
                bail!("{} is not a cairn embedding cache", path.display());
            }
            let stored = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
            if stored == dimension {
                let entry = 32 + 4 * dimension;
                let body = &bytes[12..];
                if body.len() % entry != 0 {
                    bail!("{} is truncated", path.display());
                }
                for chunk in body.chunks_exact(entry) {
                    let key: Key = chunk[..32].try_into().expect("32 bytes");
                    let vector = chunk[32..]
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                        .collect();
                    vectors.insert(key, vector);
                }
            }
        }
        Ok(CachedEmbedder {
            inner,
            path: path.to_path_buf(),
            vectors: Mutex::new(vectors),
            counts: Mutex::new((0, 0)),
        })
    }

    /// Writes every vector (the old ones and the new ones) back to the file.
    pub fn save(&self) -> Result<()> {
        let vectors = self.vectors.lock().expect("cache lock");
        let dimension = self.inner.dimension();
        let mut bytes = Vec::with_capacity(12 + vectors.len() * (32 + 4 * dimension));
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(dimension as u32).to_le_bytes());
        let mut keys: Vec<&Key> = vectors.keys().collect();
        keys.sort();
        for key in keys {
            bytes.extend_from_slice(key);
            for x in &vectors[key] {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
        let temporary = self.path.with_extension("tmp");
        std::fs::write(&temporary, bytes)
            .with_context(|| format!("cannot write {}", temporary.display()))?;
        std::fs::rename(&temporary, &self.path)
            .with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// (answered from the cache, embedded by the model) so far.
    pub fn counts(&self) -> (usize, usize) {
        *self.counts.lock().expect("cache lock")
    }

    fn cached(
        &self,
        kind: &str,
        texts: &[&str],
        embed: impl FnOnce(&[&str]) -> Result<Vec<Vec<f32>>, EmbedError>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = self.inner.model_id();
        let keys: Vec<Key> = texts.iter().map(|t| key(model, kind, t)).collect();
        let mut out: Vec<Option<Vec<f32>>> = {
            let vectors = self.vectors.lock().expect("cache lock");
            keys.iter().map(|k| vectors.get(k).cloned()).collect()
        };
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
        if !missing.is_empty() {
            let asked: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
            let fresh = embed(&asked)?;
            if fresh.len() != asked.len() {
                return Err(EmbedError::Inference {
                    model: model.to_string(),
                    reason: "the embedder returned a different number of vectors".into(),
                });
            }
            let mut vectors = self.vectors.lock().expect("cache lock");
            for (&i, vector) in missing.iter().zip(fresh) {
                vectors.insert(keys[i], vector.clone());
                out[i] = Some(vector);
            }
        }
        let mut counts = self.counts.lock().expect("cache lock");
        counts.0 += texts.len() - missing.len();
        counts.1 += missing.len();
        Ok(out.into_iter().map(|v| v.expect("filled")).collect())
    }
}

impl Embedder for CachedEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.cached("passage", texts, |t| self.inner.embed_batch(t))
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.cached("query", texts, |t| self.inner.embed_queries(t))
    }

    fn prefer_queries(&self) {
        self.inner.prefer_queries();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_embed::HashEmbedder;

    #[test]
    fn cached_vectors_are_the_models_and_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.bin");
        let inner: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(16));
        let cache = CachedEmbedder::open(inner.clone(), &path).unwrap();
        let texts = ["alpha beta", "gamma"];
        let first = cache.embed_batch(&texts).unwrap();
        assert_eq!(first, inner.embed_batch(&texts).unwrap());
        assert_eq!(cache.counts(), (0, 2));
        assert_eq!(cache.embed_batch(&texts).unwrap(), first);
        assert_eq!(cache.counts(), (2, 2));
        // queries are keyed apart from passages
        cache.embed_queries(&["gamma"]).unwrap();
        assert_eq!(cache.counts(), (2, 3));
        cache.save().unwrap();
        let reloaded = CachedEmbedder::open(inner.clone(), &path).unwrap();
        assert_eq!(reloaded.embed_batch(&texts).unwrap(), first);
        assert_eq!(reloaded.counts(), (2, 0));
        // another dimension starts empty
        let other = CachedEmbedder::open(Arc::new(HashEmbedder::new(8)), &path).unwrap();
        other.embed_batch(&["gamma"]).unwrap();
        assert_eq!(other.counts(), (0, 1));
    }
}
