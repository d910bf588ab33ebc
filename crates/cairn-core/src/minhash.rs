//! Deterministic MinHash over word 3-shingles, for near-duplicate detection (docs/design.md §4.4) and
//! consolidation candidates (§8).
//!
//! A signature is 128 minimums, one per hash function, over the text's shingles; the share of
//! positions two signatures agree on estimates the Jaccard similarity of their shingle sets.
//! Signatures are stored, so they must be byte-identical across runs, builds and platforms:
//! every hash here is spelled out (FNV-1a 64 over the shingle's UTF-8 bytes, then SplitMix64's
//! finalizer keyed by a per-function seed derived from one fixed constant). Nothing uses
//! `std`'s `DefaultHasher` or `RandomState`, whose output may change between runs and Rust
//! releases.

use crate::text::word_tokens;

/// Number of hash functions, and of `u32`s in a [`Signature`].
pub const NUM_HASHES: usize = 128;

/// Words per shingle.
const SHINGLE_WORDS: usize = 3;

/// The fixed seed every per-function seed derives from. Changing it changes every stored
/// signature: treat it like a schema version.
const SEED: u64 = 0x6361_6972_6e5f_6d68; // "cairn_mh"

/// One MinHash signature: the minimum of each hash function over the text's shingles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature(pub [u32; NUM_HASHES]);

/// The per-function seeds: a SplitMix64 stream from [`SEED`], computed at compile time.
const FUNCTION_SEEDS: [u64; NUM_HASHES] = {
    let mut seeds = [0u64; NUM_HASHES];
    let mut state = SEED;
    let mut index = 0;
    while index < NUM_HASHES {
        state = state.wrapping_add(GOLDEN_GAMMA);
        seeds[index] = mix64(state);
        index += 1;
    }
    seeds
};

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
/// Separates words inside a shingle; never occurs in UTF-8, so `["ab", "c"]` and `["a", "bc"]`
/// hash differently.
const WORD_SEPARATOR: u8 = 0xff;

/// SplitMix64's finalizer (Steele, Lea, Flood 2014): a bijection on u64 with full avalanche.
const fn mix64(value: u64) -> u64 {
    let mut z = value;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
    })
}

/// The base hash of one shingle (a run of consecutive words).
fn shingle_hash(words: &[String]) -> u64 {
    let mut hash = FNV_OFFSET;
    for (index, word) in words.iter().enumerate() {
        if index > 0 {
            hash = fnv1a(hash, &[WORD_SEPARATOR]);
        }
        hash = fnv1a(hash, word.as_bytes());
    }
    mix64(hash)
}

/// The signature of `text`: word 3-shingles over its lowercase word tokens
/// ([`word_tokens`]). A text of one or two words is one shingle of its whole token sequence;
/// a text with no words gets the all-`u32::MAX` signature.
pub fn signature(text: &str) -> Signature {
    let words = word_tokens(text);
    let mut shingles: Vec<u64> = if words.len() < SHINGLE_WORDS {
        if words.is_empty() {
            Vec::new()
        } else {
            vec![shingle_hash(&words)]
        }
    } else {
        words.windows(SHINGLE_WORDS).map(shingle_hash).collect()
    };
    // Repeated shingles cannot change a minimum; dropping them saves 128 hashes each.
    shingles.sort_unstable();
    shingles.dedup();

    let mut minimums = [u32::MAX; NUM_HASHES];
    for shingle in shingles {
        for (minimum, seed) in minimums.iter_mut().zip(FUNCTION_SEEDS) {
            let hashed = (mix64(shingle ^ seed) >> 32) as u32;
            *minimum = (*minimum).min(hashed);
        }
    }
    Signature(minimums)
}

impl Signature {
    /// Estimated Jaccard similarity of the two texts' shingle sets: the share of hash
    /// functions whose minimums agree, in 0..=1.
    ///
    /// A text with no words has no shingles, so nothing to compare: its similarity to any
    /// text, another word-less one included, is 0 (two different emoji-only records are not
    /// near duplicates; identical texts are caught by their content hash instead).
    pub fn jaccard(&self, other: &Signature) -> f64 {
        if self.is_empty() || other.is_empty() {
            return 0.0;
        }
        let agreeing = self
            .0
            .iter()
            .zip(other.0.iter())
            .filter(|(a, b)| a == b)
            .count();
        agreeing as f64 / NUM_HASHES as f64
    }

    /// Whether this is the signature of a text with no words (no shingles: every minimum is
    /// still `u32::MAX`).
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|minimum| *minimum == u32::MAX)
    }

    /// The 512-byte storage form: each minimum as little-endian `u32`, in order.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.0
            .iter()
            .flat_map(|minimum| minimum.to_le_bytes())
            .collect()
    }

    /// Reads [`Signature::to_bytes`]'s form back; `None` unless `bytes` is exactly 512 long.
    pub fn from_bytes(bytes: &[u8]) -> Option<Signature> {
        if bytes.len() != NUM_HASHES * 4 {
            return None;
        }
        let mut minimums = [0u32; NUM_HASHES];
        for (minimum, chunk) in minimums.iter_mut().zip(bytes.chunks_exact(4)) {
            *minimum = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        Some(Signature(minimums))
    }
}

/// Locality-sensitive hashing bands: the signature cut into `bands` bands of
/// `128 / bands` rows, one hash per band. Two signatures that share any band hash are
/// candidates for a full comparison, which makes near-duplicate search sub-quadratic.
///
/// `bands` is clamped to 1..=128; rows left over when it does not divide 128 are not hashed.
/// Each band's hash covers its index too, so equal rows in different bands hash differently
/// and all bands can share one index column.
pub fn lsh_bands(sig: &Signature, bands: usize) -> Vec<u64> {
    let bands = bands.clamp(1, NUM_HASHES);
    let rows = NUM_HASHES / bands;
    sig.0
        .chunks_exact(rows)
        .take(bands)
        .enumerate()
        .map(|(band, values)| {
            let mut hash = fnv1a(FNV_OFFSET, &(band as u32).to_le_bytes());
            for value in values {
                hash = fnv1a(hash, &value.to_le_bytes());
            }
            mix64(hash)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    const RUNBOOK: &str = "To deploy the billing service, first merge the release branch into main, \
        wait for the CI pipeline to go green, then run the deploy script with the staging flag. \
        Check the dashboards for ten minutes, watch the error rate and the queue depth, and only \
        then promote the build to production with the same script and the prod flag set.";

    fn exact_jaccard(a: &str, b: &str) -> f64 {
        fn shingles(text: &str) -> BTreeSet<Vec<String>> {
            let words = word_tokens(text);
            if words.len() < SHINGLE_WORDS {
                return [words].into_iter().filter(|w| !w.is_empty()).collect();
            }
            words
                .windows(SHINGLE_WORDS)
                .map(<[String]>::to_vec)
                .collect()
        }
        let (a, b) = (shingles(a), shingles(b));
        a.intersection(&b).count() as f64 / a.union(&b).count() as f64
    }

    fn check(a: &str, b: &str, low: f64, high: f64) {
        let estimate = signature(a).jaccard(&signature(b));
        assert!(
            (low..=high).contains(&estimate),
            "estimate {estimate} not in {low}..={high} for {a:?} vs {b:?}"
        );
    }

    #[test]
    fn golden_signature_is_stable_across_runs_and_platforms() {
        // Computed once; a change here changes every stored signature (see `SEED`).
        let sig = signature("The quick brown fox jumps over the lazy dog");
        assert_eq!(
            sig.0[..4],
            [194_526_906, 252_013_918, 184_289_173, 18_326_903]
        );
    }

    #[test]
    fn hash_building_blocks_match_their_reference_values() {
        // SplitMix64 seeded with 0 yields 0xe220a8397b1dcdaf first.
        assert_eq!(mix64(GOLDEN_GAMMA), 0xe220_a839_7b1d_cdaf);
        // FNV-1a 64 test vectors.
        assert_eq!(fnv1a(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(FNV_OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn similarity_matches_intuition() {
        check(RUNBOOK, RUNBOOK, 1.0, 1.0);
        // Case, punctuation and whitespace are not words.
        check(
            RUNBOOK,
            &RUNBOOK.to_uppercase().replace(',', " ;"),
            1.0,
            1.0,
        );
        let one_word_edit = RUNBOOK.replace("ten minutes", "fifteen minutes");
        check(RUNBOOK, &one_word_edit, 0.8, 1.0);
        check(
            RUNBOOK,
            "Our API rate limit is 600 requests per minute per token; bursts above that get a 429 \
             with a Retry-After header, and the SDK backs off exponentially up to five times.",
            0.0,
            0.2,
        );
        check("postgres", "postgres", 1.0, 1.0);
        check("use postgres", "use mysql", 0.0, 0.1);
        // No words, nothing to compare: never a near duplicate, not even of itself.
        check("", "", 0.0, 0.0);
        check("", "a b c", 0.0, 0.0);
    }

    #[test]
    fn estimate_tracks_exact_shingle_jaccard() {
        let words: Vec<&str> = RUNBOOK.split_whitespace().collect();
        let cases = [
            (RUNBOOK.to_string(), words[..40].join(" ")),
            (RUNBOOK.to_string(), words[20..].join(" ")),
            (words[..30].join(" "), words[15..].join(" ")),
            (RUNBOOK.to_string(), RUNBOOK.replace("the", "a")),
            (
                RUNBOOK.to_string(),
                format!(
                    "{RUNBOOK} Afterwards, post a note in the release channel with the build number."
                ),
            ),
        ];
        for (a, b) in cases {
            let exact = exact_jaccard(&a, &b);
            let estimate = signature(&a).jaccard(&signature(&b));
            assert!(
                (estimate - exact).abs() <= 0.1,
                "estimate {estimate} vs exact {exact} for {a:?} / {b:?}"
            );
        }
    }

    #[test]
    fn short_and_empty_texts() {
        assert_eq!(signature(""), Signature([u32::MAX; NUM_HASHES]));
        assert_eq!(signature(" -- !! "), Signature([u32::MAX; NUM_HASHES]));
        assert_ne!(signature("hello"), signature(""));
        assert_ne!(signature("hello world"), signature("world hello"));
        assert_eq!(signature("Hello, World"), signature("hello world"));
        // Word boundaries are part of the shingle.
        assert_ne!(signature("ab c"), signature("a bc"));
    }

    #[test]
    fn two_different_wordless_texts_are_not_near_duplicates() {
        // Punctuation and emoji have no word tokens: both signatures are empty, which used to
        // agree at all 128 positions and read as similarity 1.0.
        let (party, tears) = (signature("🎉🎉 !!!"), signature("😢 ..."));
        assert!(party.is_empty() && tears.is_empty());
        assert_eq!(party.jaccard(&tears), 0.0);
        assert_eq!(party.jaccard(&party), 0.0);
        assert_eq!(party.jaccard(&signature("hello world")), 0.0);
        assert!(!signature("hello").is_empty());
        assert_eq!(signature("hello").jaccard(&signature("hello")), 1.0);
    }

    #[test]
    fn bytes_round_trip() {
        let sig = signature(RUNBOOK);
        let bytes = sig.to_bytes();
        assert_eq!(bytes.len(), 512);
        assert_eq!(bytes[..4], sig.0[0].to_le_bytes());
        assert_eq!(Signature::from_bytes(&bytes), Some(sig));
        assert_eq!(Signature::from_bytes(&bytes[..511]), None);
        assert_eq!(Signature::from_bytes(&[]), None);
    }

    #[test]
    fn lsh_bands_shape_and_sensitivity() {
        let sig = signature(RUNBOOK);
        for (bands, expect) in [
            (32, 32),
            (16, 16),
            (128, 128),
            (1, 1),
            (0, 1),
            (500, 128),
            (3, 3),
        ] {
            assert_eq!(lsh_bands(&sig, bands).len(), expect, "bands {bands}");
        }
        // Equal rows in different bands still give different band hashes.
        let flat = lsh_bands(&Signature([7; NUM_HASHES]), 16);
        assert_eq!(flat.iter().collect::<BTreeSet<_>>().len(), 16);
        // A near duplicate shares at least one band; an unrelated text shares none.
        let near = lsh_bands(
            &signature(&RUNBOOK.replace("ten minutes", "fifteen minutes")),
            32,
        );
        let far = lsh_bands(
            &signature("Our API rate limit is 600 requests per minute per token."),
            32,
        );
        let own = lsh_bands(&sig, 32);
        assert!(own.iter().zip(&near).any(|(a, b)| a == b));
        assert!(own.iter().zip(&far).all(|(a, b)| a != b));
    }

    proptest! {
        #[test]
        fn signature_is_deterministic_and_round_trips(text in any::<String>()) {
            let sig = signature(&text);
            prop_assert_eq!(&signature(&text), &sig);
            prop_assert_eq!(Signature::from_bytes(&sig.to_bytes()), Some(sig.clone()));
            prop_assert_eq!(sig.jaccard(&sig), if sig.is_empty() { 0.0 } else { 1.0 });
        }
    }
}
