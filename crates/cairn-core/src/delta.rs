//! A text stored as its differences from another text: how a dream's merged-away record keeps
//! its body (docs/design.md §8, issue 6). A near duplicate (MinHash ≥ 0.7) shares most of its words
//! with the record it was merged into, so the copy ranges of a word diff against that body
//! take a few dozen bytes where the whole text took a kilobyte.
//!
//! Format (version 1): a version byte, the base's length and FNV-1a 32 hash (so a base that
//! changed without the delta being re-encoded is an error, never a wrong text), then ops, each
//! a varint `len << 1 | kind`: kind 0 copies `len` bytes of the base from a varint offset,
//! kind 1 inserts the `len` bytes that follow.

const VERSION: u8 = 1;
/// The most tokens (old plus new) the word diff compares after the common prefix and suffix
/// are taken off. Myers' diff costs up to (N + M) × D steps, so this bounds the work at a few
/// million steps; a longer changed middle is stored as one literal (exact, just coarser). The
/// bound is on the input, never on the clock, so the same texts always give the same bytes.
const MAX_DIFF_TOKENS: usize = 4096;
/// Equal runs shorter than this are cheaper as literals than as a copy op.
const MIN_COPY: usize = 6;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeltaError {
    #[error("the stored delta is malformed ({0})")]
    Malformed(&'static str),
    #[error(
        "the delta was made against a different text than its base holds now (base length {found_len}, expected {expected_len})"
    )]
    BaseChanged {
        expected_len: usize,
        found_len: usize,
    },
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn get_varint(bytes: &[u8], at: &mut usize) -> Result<u64, DeltaError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes
            .get(*at)
            .ok_or(DeltaError::Malformed("truncated number"))?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DeltaError::Malformed("number too long"))
}

/// Splits after each run of whitespace, so the tokens concatenate back to the text.
fn tokens(text: &str) -> Vec<&[u8]> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (at, byte) in bytes.iter().enumerate() {
        let space = byte.is_ascii_whitespace();
        if in_space && !space {
            out.push(&bytes[start..at]);
            start = at;
        }
        in_space = space;
    }
    if start < bytes.len() {
        out.push(&bytes[start..]);
    }
    out
}

/// The word diff of `old` against `new`: the common prefix and suffix as equal runs, and the
/// middle by Myers' algorithm when it is at most [`MAX_DIFF_TOKENS`] long, else as one
/// replacement.
fn diff_ops(old: &[&[u8]], new: &[&[u8]]) -> Vec<similar::DiffOp> {
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (old_end, new_end) = (old.len() - suffix, new.len() - suffix);
    let mut ops = Vec::new();
    if prefix > 0 {
        ops.push(similar::DiffOp::Equal {
            old_index: 0,
            new_index: 0,
            len: prefix,
        });
    }
    let (old_middle, new_middle) = (old_end - prefix, new_end - prefix);
    if old_middle + new_middle <= MAX_DIFF_TOKENS {
        ops.extend(similar::capture_diff(
            similar::Algorithm::Myers,
            old,
            prefix..old_end,
            new,
            prefix..new_end,
        ));
    } else {
        ops.push(similar::DiffOp::Replace {
            old_index: prefix,
            old_len: old_middle,
            new_index: prefix,
            new_len: new_middle,
        });
    }
    if suffix > 0 {
        ops.push(similar::DiffOp::Equal {
            old_index: old_end,
            new_index: new_end,
            len: suffix,
        });
    }
    ops
}

/// `text` as a delta against `base`. Always exact: `apply(base, &encode(base, text)) == text`.
pub fn encode(base: &str, text: &str) -> Vec<u8> {
    let old = tokens(base);
    let new = tokens(text);
    // Byte offset where each old token starts (and the end), and the same for the new text.
    let offsets = |tokens: &[&[u8]]| {
        let mut at = Vec::with_capacity(tokens.len() + 1);
        let mut sum = 0;
        at.push(0);
        for token in tokens {
            sum += token.len();
            at.push(sum);
        }
        at
    };
    let (old_at, new_at) = (offsets(&old), offsets(&new));
    let ops = diff_ops(&old, &new);
    let mut out = vec![VERSION];
    put_varint(&mut out, base.len() as u64);
    out.extend_from_slice(&fnv1a(base.as_bytes()).to_le_bytes());
    let text_bytes = text.as_bytes();
    let mut literal: Vec<u8> = Vec::new();
    let flush = |out: &mut Vec<u8>, literal: &mut Vec<u8>| {
        if !literal.is_empty() {
            put_varint(out, ((literal.len() as u64) << 1) | 1);
            out.append(literal);
        }
    };
    for op in ops {
        match op {
            similar::DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => {
                let (from, to) = (old_at[old_index], old_at[old_index + len]);
                if to - from >= MIN_COPY {
                    flush(&mut out, &mut literal);
                    put_varint(&mut out, ((to - from) as u64) << 1);
                    put_varint(&mut out, from as u64);
                } else {
                    literal
                        .extend_from_slice(&text_bytes[new_at[new_index]..new_at[new_index + len]]);
                }
            }
            similar::DiffOp::Delete { .. } => {}
            similar::DiffOp::Insert {
                new_index, new_len, ..
            }
            | similar::DiffOp::Replace {
                new_index, new_len, ..
            } => {
                literal
                    .extend_from_slice(&text_bytes[new_at[new_index]..new_at[new_index + new_len]]);
            }
        }
    }
    flush(&mut out, &mut literal);
    out
}

/// The text a delta from [`encode`] stands for, given the same base.
pub fn apply(base: &str, delta: &[u8]) -> Result<String, DeltaError> {
    let base_bytes = base.as_bytes();
    if delta.first() != Some(&VERSION) {
        return Err(DeltaError::Malformed("unknown version"));
    }
    let mut at = 1;
    let expected_len = get_varint(delta, &mut at)? as usize;
    let hash = delta
        .get(at..at + 4)
        .ok_or(DeltaError::Malformed("truncated header"))?;
    at += 4;
    if expected_len != base_bytes.len() || hash != fnv1a(base_bytes).to_le_bytes().as_slice() {
        return Err(DeltaError::BaseChanged {
            expected_len,
            found_len: base_bytes.len(),
        });
    }
    let mut out = Vec::with_capacity(base_bytes.len() + 64);
    while at < delta.len() {
        let head = get_varint(delta, &mut at)?;
        let len = (head >> 1) as usize;
        if head & 1 == 0 {
            let from = get_varint(delta, &mut at)? as usize;
            let range = from
                .checked_add(len)
                .filter(|end| *end <= base_bytes.len())
                .ok_or(DeltaError::Malformed("copy past the end of the base"))?;
            out.extend_from_slice(&base_bytes[from..range]);
        } else {
            let bytes = at
                .checked_add(len)
                .and_then(|end| delta.get(at..end))
                .ok_or(DeltaError::Malformed("truncated literal"))?;
            out.extend_from_slice(bytes);
            at += len;
        }
    }
    String::from_utf8(out).map_err(|_| DeltaError::Malformed("not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_near_duplicate_is_a_few_bytes() {
        let base = "User: the deploy failed again\nAssistant: the queue worker ran out of memory while \
                    draining the retry backlog; I raised the limit to 2 GiB and added an alert on the \
                    backlog size so it pages before the worker dies";
        let text = base.replace("2 GiB", "4 GiB").replace("alert", "warning");
        let delta = encode(base, &text);
        assert_eq!(apply(base, &delta).unwrap(), text);
        assert!(delta.len() < 40, "{} bytes", delta.len());
    }

    #[test]
    fn unrelated_and_empty_texts_round_trip() {
        for (base, text) in [
            ("", "something"),
            ("something", ""),
            ("", ""),
            ("alpha beta", "gamma delta épsilon 🦀"),
            ("  leading and trailing  ", "  leading and trailing  "),
        ] {
            assert_eq!(apply(base, &encode(base, text)).unwrap(), text);
        }
    }

    #[test]
    fn a_changed_base_is_refused_not_misread() {
        let delta = encode(
            "one two three four five six",
            "one two three four five seven",
        );
        assert!(matches!(
            apply("one two three four five SIX", &delta),
            Err(DeltaError::BaseChanged { .. })
        ));
        assert!(matches!(
            apply("one two", &delta),
            Err(DeltaError::BaseChanged { .. })
        ));
    }

    #[test]
    fn malformed_deltas_are_errors() {
        let base = "one two three four five six";
        let mut delta = encode(base, "one two three four five seven");
        assert!(apply(base, &[]).is_err());
        assert!(apply(base, &[9]).is_err());
        delta.push(0x80);
        assert!(apply(base, &delta).is_err());
        // A copy reaching past the base.
        let mut bad = encode(base, "");
        put_varint(&mut bad, 100 << 1);
        put_varint(&mut bad, 0);
        assert!(apply(base, &bad).is_err());
    }

    /// Numbered words, so every token differs from every other.
    fn words(range: std::ops::Range<usize>, tag: &str) -> String {
        range.map(|n| format!("{tag}{n} ")).collect()
    }

    #[test]
    fn a_long_changed_middle_gives_the_same_bytes_every_time() {
        // 6,000 changed tokens in the middle: beyond the diff's bound, the middle is one
        // literal between a copy of the common prefix and one of the common suffix, whatever
        // the machine's load (this used to hang on a wall-clock deadline).
        let (head, tail) = (words(0..200, "head"), words(0..200, "tail"));
        let base = format!("{head}{}{tail}", words(0..3000, "old"));
        let text = format!("{head}{}{tail}", words(0..3000, "new"));
        let delta = encode(&base, &text);
        assert_eq!(apply(&base, &delta).unwrap(), text);
        assert_eq!(encode(&base, &text), delta);
        let middle = words(0..3000, "new");
        let mut expected = vec![VERSION];
        put_varint(&mut expected, base.len() as u64);
        expected.extend_from_slice(&fnv1a(base.as_bytes()).to_le_bytes());
        put_varint(&mut expected, (head.len() as u64) << 1);
        put_varint(&mut expected, 0);
        put_varint(&mut expected, ((middle.len() as u64) << 1) | 1);
        expected.extend_from_slice(middle.as_bytes());
        put_varint(&mut expected, (tail.len() as u64) << 1);
        put_varint(&mut expected, (base.len() - tail.len()) as u64);
        assert_eq!(delta, expected);
    }

    #[test]
    fn a_middle_within_the_bound_is_diffed_word_by_word() {
        let base = words(0..1500, "w");
        let text = base.replacen("w700 ", "changed ", 1);
        let delta = encode(&base, &text);
        assert_eq!(apply(&base, &delta).unwrap(), text);
        assert!(delta.len() < 40, "{} bytes", delta.len());
    }

    proptest! {
        #[test]
        fn every_text_round_trips(base in "[a-c é\\n]{0,80}", text in "[a-c é\\n]{0,80}") {
            prop_assert_eq!(apply(&base, &encode(&base, &text)).unwrap(), text);
        }
    }
}
