//! `HashEmbedder`: a deterministic stand-in for a real model, for tests.
//!
//! Feature hashing: each lower-cased alphanumeric word is hashed (FNV-1a, stable across
//! platforms and releases) to one of `dim` buckets with a ± sign, and the sum is
//! L2-normalized. Texts that share words get a positive cosine; nothing else about meaning is
//! captured. Never use it for a real brain.

use crate::{EmbedError, Embedder, l2_normalize};

/// Deterministic feature-hashing embedder. `model_id` is `hash-<dim>`.
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dimension: usize,
    model_id: String,
}

impl HashEmbedder {
    /// A hashing embedder with `dimension` buckets (at least 1).
    pub fn new(dimension: usize) -> Self {
        let dimension = dimension.max(1);
        HashEmbedder {
            dimension,
            model_id: format!("hash-{dimension}"),
        }
    }

    fn embed_text(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; self.dimension];
        let mut any_word = false;
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty())
        {
            any_word = true;
            self.add_token(&mut vector, &word.to_lowercase());
        }
        if !any_word {
            // Empty (or punctuation-only) text still gets a valid unit vector.
            self.add_token(&mut vector, "");
        }
        l2_normalize(&mut vector);
        vector
    }

    fn add_token(&self, vector: &mut [f32], token: &str) {
        let hash = fnv1a64(token.as_bytes());
        let bucket = (hash % self.dimension as u64) as usize;
        let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
        vector[bucket] += sign;
    }
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

impl Embedder for HashEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|text| self.embed_text(text)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cosine;

    fn norm(vector: &[f32]) -> f32 {
        vector.iter().map(|x| x * x).sum::<f32>().sqrt()
    }

    #[test]
    fn vectors_are_unit_length_and_deterministic() {
        let embedder = HashEmbedder::new(64);
        for text in [
            "",
            "   ",
            "!!!",
            "hello",
            "The quick brown fox",
            &"word ".repeat(10_000),
        ] {
            let first = embedder.embed_one(text).unwrap();
            let second = embedder.embed_one(text).unwrap();
            assert_eq!(first, second, "deterministic for {text:.20?}");
            assert_eq!(first.len(), 64);
            assert!(
                (norm(&first) - 1.0).abs() < 1e-6,
                "unit norm for {text:.20?}"
            );
        }
    }

    #[test]
    fn model_id_and_dimension() {
        let embedder = HashEmbedder::new(32);
        assert_eq!(embedder.model_id(), "hash-32");
        assert_eq!(embedder.dimension(), 32);
        assert_eq!(HashEmbedder::new(0).dimension(), 1);
    }

    #[test]
    fn shared_words_score_higher_than_unrelated_text() {
        let embedder = HashEmbedder::new(256);
        let query = embedder.embed_one("database migration plan").unwrap();
        let related = embedder.embed_one("the Database MIGRATION failed").unwrap();
        let unrelated = embedder.embed_one("cats sleep all afternoon").unwrap();
        assert!(cosine(&query, &related) > cosine(&query, &unrelated) + 0.2);
    }

    #[test]
    fn batch_matches_single_and_keeps_order() {
        let embedder = HashEmbedder::new(16);
        let texts = ["a b", "", "c"];
        let batch = embedder.embed_batch(&texts).unwrap();
        assert_eq!(batch.len(), 3);
        for (text, vector) in texts.iter().zip(&batch) {
            assert_eq!(&embedder.embed_one(text).unwrap(), vector);
        }
        assert!(embedder.embed_batch(&[]).unwrap().is_empty());
    }

    #[test]
    fn fnv_matches_the_reference_values() {
        // Published FNV-1a 64 test vectors: a change here would silently change every vector.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
