//! The text pipeline's first step (docs/design.md §4.1) and the normalizers behind identity and dedup.
//!
//! [`sanitize`] makes text safe to store: it refuses NUL, normalizes line endings to `\n`,
//! removes the invisible channels an attacker (or a sloppy copy/paste) can hide instructions in,
//! and applies Unicode NFC. What is removed, and why:
//!
//! - **Every `Default_Ignorable_Code_Point`** — Unicode's own list of characters that render as
//!   nothing: the Tags block U+E0000–E007F ("ASCII smuggling"), zero-width space / non-joiner
//!   (U+200B, U+200C), word joiner and the invisible operators (U+2060–U+206F, which also
//!   covers the bidi isolates U+2066–U+2069), BOM U+FEFF anywhere, the Mongolian vowel separator
//!   U+180E, soft hyphen U+00AD, LRM/RLM/ALM (U+200E, U+200F, U+061C), the bidi embeddings and
//!   overrides U+202A–U+202E (Trojan Source), the Hangul fillers, the combining grapheme joiner.
//!   The 3 RGI subdivision flags (England, Scotland, Wales) are built from tag characters; they
//!   degrade to a plain black flag 🏴. That is the price of closing the channel completely.
//! - **Variation selectors**, with one exception: VS15/VS16 (U+FE0E, U+FE0F, text vs. emoji
//!   presentation) are kept when they directly follow a visible character that is not itself a
//!   variation selector, so `❤️` and `✔️` survive. Every other selector (VS1–14, VS17–256)
//!   and every selector in a run is removed: the emoji-smuggling trick encodes one byte per
//!   selector, which this reduces to at most one bit per visible character.
//! - **Zero-width joiner** U+200D, except directly between two pictographs (optionally after the
//!   first one's VS16 or skin tone), so emoji sequences like 👩‍💻 and 🏳️‍🌈 keep their meaning.
//! - **C0/C1 control characters** other than `\t` and `\n`, including DEL; terminal escape
//!   sequences (`ESC [ … m`, OSC strings up to BEL/ST) are removed whole so no `[2J` residue is
//!   left. `\r\n`, a lone `\r`, NEL U+0085 and the line/paragraph separators U+2028/U+2029
//!   become `\n` (a line-ending change, not counted in [`Sanitized::stripped`]).
//!
//! Sanitizing is idempotent: sanitizing sanitized text changes nothing.
//!
//! The normalizers: [`normalize_title`] gives the identity key of a title, [`normalize_body`] and
//! [`content_hash`] the exact-duplicate key of a body, and [`title_tokens`] / [`title_overlap`]
//! the near-duplicate title test. [`word_tokens`] is the one word tokenizer the pipeline shares
//! (MinHash shingles, FTS query terms), so they agree on what a word is.

use sha2::{Digest, Sha256};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Sanitized text and how many characters were removed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sanitized {
    pub text: String,
    /// Invisible, control and escape-sequence characters removed (line-ending rewrites and
    /// NFC recomposition are not counted). Callers flag a record whose count is non-zero.
    pub stripped: usize,
}

/// Why text was refused by [`sanitize`] / [`sanitize_bytes`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SanitizeError {
    #[error(
        "text contains a NUL byte at offset {byte_offset}; NUL is not allowed in memory text — remove it and retry"
    )]
    Nul { byte_offset: usize },
    #[error(
        "text is not valid UTF-8 (first bad byte at offset {byte_offset}); re-encode it as UTF-8 and retry"
    )]
    InvalidUtf8 { byte_offset: usize },
}

/// Validates UTF-8, then [`sanitize`]s.
pub fn sanitize_bytes(input: &[u8]) -> Result<Sanitized, SanitizeError> {
    match std::str::from_utf8(input) {
        Ok(text) => sanitize(text),
        Err(error) => Err(SanitizeError::InvalidUtf8 {
            byte_offset: error.valid_up_to(),
        }),
    }
}

/// Refuses NUL, normalizes line endings, strips invisible channels and control characters, and
/// applies NFC. See the module documentation for exactly what is removed.
pub fn sanitize(input: &str) -> Result<Sanitized, SanitizeError> {
    if let Some(byte_offset) = input.find('\0') {
        return Err(SanitizeError::Nul { byte_offset });
    }
    let chars: Vec<char> = input.chars().collect();
    let mut stripped = 0;

    // Pass 1: everything removed regardless of context, and line endings.
    let mut kept: Vec<char> = Vec::with_capacity(chars.len());
    let mut index = 0;
    while index < chars.len() {
        let character = chars[index];
        match character {
            '\r' => {
                kept.push('\n');
                if chars.get(index + 1) == Some(&'\n') {
                    index += 1;
                }
            }
            '\u{85}' | '\u{2028}' | '\u{2029}' => kept.push('\n'),
            '\u{1b}' => {
                let length = escape_sequence_len(&chars[index..]);
                stripped += length;
                index += length;
                continue;
            }
            _ if is_always_stripped(character) => stripped += 1,
            _ => kept.push(character),
        }
        index += 1;
    }

    // Pass 2: variation selectors and zero-width joiners, which are kept only in context. The
    // left context is what was already kept; the right context of a joiner must be a
    // pictograph, which pass 2 never removes, so the decision is stable under re-sanitizing.
    let mut contextual: Vec<char> = Vec::with_capacity(kept.len());
    for (position, &character) in kept.iter().enumerate() {
        let keep = match character {
            TEXT_PRESENTATION | EMOJI_PRESENTATION => contextual
                .last()
                .is_some_and(|&previous| can_carry_presentation(previous)),
            ZERO_WIDTH_JOINER => {
                let after_pictograph = match contextual.as_slice() {
                    [.., previous] if is_pictographic(*previous) => true,
                    [.., before, EMOJI_PRESENTATION] => is_pictographic(*before),
                    _ => false,
                };
                after_pictograph
                    && kept
                        .get(position + 1)
                        .is_some_and(|&next| is_pictographic(next))
            }
            _ => true,
        };
        if keep {
            contextual.push(character);
        } else {
            stripped += 1;
        }
    }

    let text: String = contextual.into_iter().nfc().collect();
    Ok(Sanitized { text, stripped })
}

const TEXT_PRESENTATION: char = '\u{FE0E}';
const EMOJI_PRESENTATION: char = '\u{FE0F}';
const ZERO_WIDTH_JOINER: char = '\u{200D}';

/// True for characters [`sanitize`] removes wherever they appear (public so the fuzz targets
/// can check that none is ever left in sanitized text).
pub fn is_always_stripped(character: char) -> bool {
    if character.is_control() {
        return character != '\n' && character != '\t';
    }
    matches!(
        character,
        // Default_Ignorable_Code_Point (DerivedCoreProperties.txt), minus the contextual
        // U+200D, U+FE0E and U+FE0F handled in pass 2.
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200C}'
            | '\u{200E}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0D}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
            // Interlinear annotation controls: invisible format characters, not ignorable.
            | '\u{FFF9}'..='\u{FFFB}'
    )
}

fn is_variation_selector(character: char) -> bool {
    matches!(character, '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}')
}

fn can_carry_presentation(previous: char) -> bool {
    !is_variation_selector(previous) && previous != ZERO_WIDTH_JOINER && !previous.is_whitespace()
}

/// Pictographs that take part in emoji ZWJ sequences (an approximation of
/// `Extended_Pictographic` by block, good enough to keep 👩‍💻, 🏳️‍🌈 and 🐈‍⬛ whole).
fn is_pictographic(character: char) -> bool {
    matches!(
        character,
        '\u{2300}'..='\u{23FF}'
            | '\u{2600}'..='\u{27BF}'
            | '\u{2B00}'..='\u{2BFF}'
            | '\u{1F000}'..='\u{1FAFF}'
    )
}

/// Length in chars of the terminal escape sequence starting at `chars[0] == ESC`.
///
/// CSI (`ESC [ params intermediates final`) and the string sequences (OSC `ESC ]`, DCS, SOS,
/// PM, APC up to BEL or `ESC \`) are removed whole; an unterminated string sequence, or any
/// other escape, removes the ESC and, for a two-character escape, its final byte.
fn escape_sequence_len(chars: &[char]) -> usize {
    /// Longest string sequence looked for, so unterminated ones cost O(n), not O(n²).
    const MAX_STRING_SEQUENCE: usize = 512;
    match chars.get(1) {
        Some('[') => {
            let mut end = 2;
            while chars
                .get(end)
                .is_some_and(|c| ('\x30'..='\x3f').contains(c))
            {
                end += 1;
            }
            while chars
                .get(end)
                .is_some_and(|c| ('\x20'..='\x2f').contains(c))
            {
                end += 1;
            }
            if chars
                .get(end)
                .is_some_and(|c| ('\x40'..='\x7e').contains(c))
            {
                end += 1;
            }
            end
        }
        Some(']' | 'P' | 'X' | '^' | '_') => {
            let limit = chars.len().min(MAX_STRING_SEQUENCE);
            for end in 2..limit {
                match chars[end] {
                    '\x07' => return end + 1,
                    '\x1b' if chars.get(end + 1) == Some(&'\\') => return end + 2,
                    _ => {}
                }
            }
            1
        }
        Some('\x40'..='\x5f') => 2,
        _ => 1,
    }
}

fn is_private_use(character: char) -> bool {
    matches!(
        character,
        '\u{E000}'..='\u{F8FF}' | '\u{F0000}'..='\u{FFFFD}' | '\u{100000}'..='\u{10FFFD}'
    )
}

/// Lowercase word tokens, in order: runs of Unicode letters and digits (plus private-use
/// characters, as SQLite's `unicode61` tokenizer counts them), with combining marks continuing
/// a word. Everything else separates words, including `_`, `-`, `'` and `.`.
///
/// No normalization is applied; callers pass sanitized (NFC) text.
pub fn word_tokens(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    for character in text.chars() {
        let starts_or_continues = character.is_alphanumeric() || is_private_use(character);
        if starts_or_continues || (!current.is_empty() && is_combining_mark(character)) {
            current.extend(character.to_lowercase());
        } else if !current.is_empty() {
            tokens.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// The identity key of a title: NFKC-folded, lowercased word tokens joined by one space, so
/// `"Deploy: Staging  DB"` and `"deploy staging db"` are the same title. A title with no word
/// characters at all (`"🚀"`) keys on its lowercased, whitespace-collapsed form instead, so two
/// different emoji titles do not collide on the empty key.
pub fn normalize_title(title: &str) -> String {
    let tokens = title_tokens(title);
    if tokens.is_empty() {
        let folded: String = title.nfkc().flat_map(char::to_lowercase).collect();
        return folded.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    tokens.join(" ")
}

/// The body as hashed for exact-duplicate detection: NFC, trimmed, every run of whitespace
/// collapsed to one space. Case is kept (it matters in code), so `"a  b\n"` and `"a b"` are
/// equal but `"A b"` is not.
pub fn normalize_body(body: &str) -> String {
    let composed: String = body.nfc().collect();
    composed.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Lowercase hex SHA-256 of [`normalize_body`].
pub fn content_hash(body: &str) -> String {
    hex::encode(Sha256::digest(normalize_body(body).as_bytes()))
}

/// The title's lowercase word tokens, in order (after NFKC folding, so `ﬁle` and `ＡＰＩ` read
/// as `file` and `api`).
pub fn title_tokens(title: &str) -> Vec<String> {
    let folded: String = title.nfkc().collect();
    word_tokens(&folded)
}

/// Fewest distinct tokens a title needs before [`title_overlap`] judges it.
pub const MIN_OVERLAP_TOKENS: usize = 5;

/// Share of distinct title tokens two titles have in common: |A ∩ B| / max(|A|, |B|), in 0..=1.
///
/// `None` when either title has fewer than [`MIN_OVERLAP_TOKENS`] distinct tokens: short titles
/// overlap by accident too easily for the figure to mean anything. (≥ 0.5 means near-duplicate
/// title, docs/design.md §4.4.)
pub fn title_overlap(a: &str, b: &str) -> Option<f64> {
    let tokens_a: std::collections::BTreeSet<String> = title_tokens(a).into_iter().collect();
    let tokens_b: std::collections::BTreeSet<String> = title_tokens(b).into_iter().collect();
    if tokens_a.len() < MIN_OVERLAP_TOKENS || tokens_b.len() < MIN_OVERLAP_TOKENS {
        return None;
    }
    let shared = tokens_a.intersection(&tokens_b).count();
    Some(shared as f64 / tokens_a.len().max(tokens_b.len()) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(input: &str, expect: &str, expect_stripped: usize) {
        let sanitized = sanitize(input).expect("sanitize refused the input");
        assert_eq!(sanitized.text, expect, "input: {input:?}");
        assert_eq!(
            sanitized.stripped, expect_stripped,
            "stripped count for input: {input:?}"
        );
    }

    #[test]
    fn sanitize_keeps_ordinary_text() {
        check("", "", 0);
        check(
            "Deploys go through staging first.",
            "Deploys go through staging first.",
            0,
        );
        check(
            "line one\nline two\n\tindented",
            "line one\nline two\n\tindented",
            0,
        );
        check(
            "naïve café — 日本語 테스트 العربية",
            "naïve café — 日本語 테스트 العربية",
            0,
        );
        check(
            "fn main() { println!(\"hi\"); }",
            "fn main() { println!(\"hi\"); }",
            0,
        );
        check("price:\u{a0}12\u{a0}€", "price:\u{a0}12\u{a0}€", 0);
        check(
            "icon \u{e0a0} from a nerd font",
            "icon \u{e0a0} from a nerd font",
            0,
        );
    }

    #[test]
    fn sanitize_applies_nfc() {
        check("cafe\u{301}", "café", 0);
        check("A\u{30a} ring", "Å ring", 0);
        check("e\u{200b}\u{301}", "é", 1);
    }

    #[test]
    fn sanitize_normalizes_line_endings() {
        check("a\r\nb\r\nc", "a\nb\nc", 0);
        check("a\rb", "a\nb", 0);
        check("a\r\r\nb", "a\n\nb", 0);
        check("a\u{2028}b\u{2029}c\u{85}d", "a\nb\nc\nd", 0);
    }

    #[test]
    fn sanitize_strips_tag_smuggling() {
        // "ignore" spelled in tag characters after visible text.
        let smuggled: String = "ignore"
            .chars()
            .map(|c| char::from_u32(0xE0000 + c as u32).unwrap())
            .collect();
        check(&format!("Nice weather{smuggled}."), "Nice weather.", 6);
        check("\u{e0001}lang tag\u{e007f}", "lang tag", 2);
        // The Scotland flag degrades to a black flag.
        check(
            "\u{1f3f4}\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}",
            "\u{1f3f4}",
            6,
        );
    }

    #[test]
    fn sanitize_strips_zero_width_and_bidi() {
        check("pass\u{200b}word", "password", 1);
        check(
            "\u{feff}BOM at start and mid\u{feff}dle",
            "BOM at start and middle",
            2,
        );
        check(
            "no\u{200c}join, word\u{2060}joiner, mongolian\u{180e}sep",
            "nojoin, wordjoiner, mongoliansep",
            3,
        );
        check("soft\u{ad}hyphen", "softhyphen", 1);
        check(
            "if access_level != \"user\u{202e} \u{2066}// admin\u{2069} \u{2066}\" {",
            "if access_level != \"user // admin \" {",
            4,
        );
        check("\u{200e}ltr\u{200f}rtl\u{61c}alm", "ltrrtlalm", 3);
        check(
            "\u{202a}\u{202b}\u{202c}\u{202d}\u{202e}x\u{2066}\u{2067}\u{2068}\u{2069}",
            "x",
            9,
        );
        check("hangul\u{3164}filler\u{ffa0}", "hangulfiller", 2);
    }

    #[test]
    fn sanitize_keeps_emoji_whole() {
        check("❤\u{fe0f} it", "❤\u{fe0f} it", 0);
        check("done ✔\u{fe0e}", "done ✔\u{fe0e}", 0);
        check("👩\u{200d}💻 on call", "👩\u{200d}💻 on call", 0);
        check(
            "👨\u{200d}👩\u{200d}👧\u{200d}👦",
            "👨\u{200d}👩\u{200d}👧\u{200d}👦",
            0,
        );
        check("🏳\u{fe0f}\u{200d}🌈", "🏳\u{fe0f}\u{200d}🌈", 0);
        check("👍🏽 thanks", "👍🏽 thanks", 0);
        check("🧑🏽\u{200d}🚀", "🧑🏽\u{200d}🚀", 0);
    }

    #[test]
    fn sanitize_strips_variation_selector_payloads() {
        // One byte per selector after an emoji (VS17–256 and VS1–14): all gone.
        check("😀\u{e0100}\u{e0148}\u{e0165}\u{fe01}", "😀", 4);
        // A run of VS16: only the first is meaningful.
        check("❤\u{fe0f}\u{fe0f}\u{fe0e}", "❤\u{fe0f}", 2);
        check("\u{fe0f}leading", "leading", 1);
        check("space \u{fe0f}x", "space x", 1);
    }

    #[test]
    fn sanitize_strips_zwj_outside_emoji() {
        check("a\u{200d}b", "ab", 1);
        check("👩\u{200d}\u{200d}💻", "👩\u{200d}💻", 1);
        check("👩\u{200d}", "👩", 1);
        check("\u{200d}💻", "💻", 1);
    }

    #[test]
    fn sanitize_strips_controls_and_escapes() {
        check("bell\u{7}tab\tok", "belltab\tok", 1);
        check("\u{1b}[31mred\u{1b}[0m text", "red text", 9);
        check("\u{1b}[2Jcleared", "cleared", 4);
        check("\u{1b}]0;title\u{7}after", "after", 10);
        check(
            "\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\",
            "link",
            22,
        );
        check("lone \u{1b} escape", "lone  escape", 1);
        check("del\u{7f} c1\u{9b}x \u{80}", "del c1x ", 3);
        check("vt\u{b}ff\u{c}bs\u{8}", "vtffbs", 3);
    }

    #[test]
    fn sanitize_refuses_nul_with_its_offset() {
        assert_eq!(
            sanitize("ok\0bad"),
            Err(SanitizeError::Nul { byte_offset: 2 })
        );
        assert_eq!(sanitize("é\0"), Err(SanitizeError::Nul { byte_offset: 2 }));
        assert_eq!(
            SanitizeError::Nul { byte_offset: 17 }.to_string(),
            "text contains a NUL byte at offset 17; NUL is not allowed in memory text — remove it and retry"
        );
    }

    #[test]
    fn sanitize_bytes_validates_utf8() {
        assert_eq!(
            sanitize_bytes(b"abc\xff def"),
            Err(SanitizeError::InvalidUtf8 { byte_offset: 3 })
        );
        assert_eq!(
            sanitize_bytes(b"\xc3"),
            Err(SanitizeError::InvalidUtf8 { byte_offset: 0 })
        );
        assert_eq!(
            sanitize_bytes(b"ok\0"),
            Err(SanitizeError::Nul { byte_offset: 2 })
        );
        assert_eq!(
            sanitize_bytes("zero\u{200b}width".as_bytes()),
            Ok(Sanitized {
                text: "zerowidth".into(),
                stripped: 1
            })
        );
        assert_eq!(
            SanitizeError::InvalidUtf8 { byte_offset: 3 }.to_string(),
            "text is not valid UTF-8 (first bad byte at offset 3); re-encode it as UTF-8 and retry"
        );
    }

    #[test]
    fn word_tokens_split_like_unicode61() {
        fn check(input: &str, expect: &[&str]) {
            assert_eq!(word_tokens(input), expect, "input: {input:?}");
        }
        check("", &[]);
        check("  --- ", &[]);
        check("Hello, World!", &["hello", "world"]);
        check(
            "snake_case and kebab-case",
            &["snake", "case", "and", "kebab", "case"],
        );
        check("v1.2.3 on x86_64", &["v1", "2", "3", "on", "x86", "64"]);
        check("don't", &["don", "t"]);
        check("Ünïcödé ÉCOLE", &["ünïcödé", "école"]);
        check("नमस्ते दुनिया", &["नमस्ते", "दुनिया"]);
        check("東京タワー", &["東京タワー"]);
        check("e\u{301}t\u{301}e", &["e\u{301}t\u{301}e"]);
        check("\u{301}orphan", &["orphan"]);
    }

    #[test]
    fn normalize_title_is_the_identity_key() {
        fn check(input: &str, expect: &str) {
            assert_eq!(normalize_title(input), expect, "input: {input:?}");
        }
        check("Deploy: Staging  DB", "deploy staging db");
        check("  deploy staging db ", "deploy staging db");
        check(
            "Why we chose Postgres (not MySQL)?",
            "why we chose postgres not mysql",
        );
        check("API-key rotation", "api key rotation");
        check("ＡＰＩ ﬁle limits", "api file limits");
        check("Straße", "straße");
        check("🚀", "🚀");
        check("  🚀  🎉 ", "🚀 🎉");
        check("", "");
    }

    #[test]
    fn normalize_body_and_content_hash() {
        fn check(a: &str, b: &str, equal: bool) {
            assert_eq!(content_hash(a) == content_hash(b), equal, "{a:?} vs {b:?}");
        }
        check("a  b\n", "a b", true);
        check("  fn main() {\n\tok();\n}\n", "fn main() { ok(); }", true);
        check("cafe\u{301}", "café", true);
        check("A b", "a b", false);
        check("a b", "ab", false);
        assert_eq!(
            normalize_body("\n  line one \r\n line   two\t"),
            "line one line two"
        );
        assert_eq!(
            content_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            content_hash("hello   world\n"),
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
    }

    #[test]
    fn title_tokens_are_lowercase_words_in_order() {
        assert_eq!(
            title_tokens("Fix: CI fails on ARM64 (again)"),
            ["fix", "ci", "fails", "on", "arm64", "again"]
        );
        assert_eq!(title_tokens("ＡＰＩ"), ["api"]);
        assert!(title_tokens("—").is_empty());
    }

    #[test]
    fn title_overlap_needs_five_distinct_tokens() {
        fn check(a: &str, b: &str, expect: Option<f64>) {
            let got = title_overlap(a, b);
            match (got, expect) {
                (Some(got), Some(expect)) => {
                    assert!((got - expect).abs() < 1e-9, "{a:?} vs {b:?}: {got}")
                }
                _ => assert_eq!(got, expect, "{a:?} vs {b:?}"),
            }
        }
        check("Deploy staging", "Deploy staging", None);
        check(
            "deploy deploy deploy deploy deploy",
            "deploy deploy deploy deploy deploy",
            None,
        );
        check(
            "How we deploy the staging cluster",
            "How we deploy the staging cluster",
            Some(1.0),
        );
        check(
            "How we deploy the staging cluster",
            "How we deploy the production cluster",
            Some(5.0 / 6.0),
        );
        check(
            "Postgres connection pool sizing for workers",
            "Redis eviction policy on the cache tier",
            Some(0.0),
        );
        check(
            "Rotate the API keys every quarter",
            "Rotate API keys every quarter please now",
            Some(5.0 / 7.0),
        );
        check("a b c d e", "a b c d e f g h i j", Some(0.5));
    }

    /// Characters that exercise every branch of the sanitizer.
    fn tricky_char() -> impl Strategy<Value = char> {
        prop_oneof![
            4 => proptest::char::range('a', 'z'),
            1 => Just(' '),
            1 => Just('\n'),
            1 => Just('\r'),
            1 => Just('\t'),
            1 => Just('\u{1b}'),
            1 => Just('['),
            1 => Just(']'),
            1 => Just('\\'),
            1 => Just('\u{7}'),
            1 => Just('0'),
            1 => Just('m'),
            1 => Just('\u{301}'),
            1 => Just('\u{200b}'),
            2 => Just('\u{200d}'),
            2 => Just('\u{fe0f}'),
            1 => Just('\u{fe0e}'),
            1 => Just('\u{fe01}'),
            1 => Just('\u{e0100}'),
            1 => Just('\u{feff}'),
            1 => Just('\u{202e}'),
            1 => Just('\u{2067}'),
            1 => Just('\u{ad}'),
            1 => Just('\u{85}'),
            1 => Just('\u{2028}'),
            2 => proptest::char::range('\u{e0000}', '\u{e007f}'),
            2 => Just('👩'),
            1 => Just('💻'),
            1 => Just('❤'),
            1 => Just('🏽'),
            1 => proptest::char::range('\u{80}', '\u{9f}'),
            1 => proptest::char::range('\u{1}', '\u{1f}'),
            1 => Just('é'),
            1 => Just('\u{f900}'),
        ]
    }

    fn tricky_text() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::collection::vec(tricky_char(), 0..48)
                .prop_map(|chars| chars.into_iter().collect()),
            any::<String>().prop_map(|text| text.replace('\0', "")),
        ]
    }

    /// The invariant the rest of cairn relies on: nothing invisible survives sanitizing, except
    /// VS15/16 after a visible base and ZWJ between pictographs.
    fn assert_clean(text: &str) {
        let chars: Vec<char> = text.chars().collect();
        for (index, &character) in chars.iter().enumerate() {
            assert!(
                !is_always_stripped(character),
                "{character:?} survived in {text:?}"
            );
            assert_ne!(character, '\r');
            match character {
                TEXT_PRESENTATION | EMOJI_PRESENTATION => {
                    let previous = index.checked_sub(1).map(|i| chars[i]);
                    assert!(
                        previous.is_some_and(can_carry_presentation),
                        "stray selector in {text:?}"
                    );
                }
                ZERO_WIDTH_JOINER => {
                    assert!(
                        chars.get(index + 1).is_some_and(|&c| is_pictographic(c)),
                        "stray ZWJ in {text:?}"
                    );
                    let previous = index.checked_sub(1).map(|i| chars[i]);
                    assert!(
                        previous.is_some_and(|c| is_pictographic(c) || c == EMOJI_PRESENTATION),
                        "stray ZWJ in {text:?}"
                    );
                }
                _ => assert!(
                    !is_variation_selector(character),
                    "stray selector in {text:?}"
                ),
            }
        }
    }

    proptest! {
        #[test]
        fn sanitize_is_idempotent(input in tricky_text()) {
            let once = sanitize(&input).unwrap();
            let twice = sanitize(&once.text).unwrap();
            prop_assert_eq!(&twice.text, &once.text);
            prop_assert_eq!(twice.stripped, 0);
        }

        #[test]
        fn sanitized_text_has_no_invisible_channels(input in tricky_text()) {
            let sanitized = sanitize(&input).unwrap();
            assert_clean(&sanitized.text);
        }

        #[test]
        fn sanitize_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            match sanitize_bytes(&bytes) {
                Ok(sanitized) => assert_clean(&sanitized.text),
                Err(SanitizeError::InvalidUtf8 { byte_offset }) => prop_assert!(std::str::from_utf8(&bytes[..byte_offset]).is_ok()),
                Err(SanitizeError::Nul { byte_offset }) => prop_assert_eq!(bytes[byte_offset], 0),
            }
        }

        #[test]
        fn normalize_body_is_idempotent(input in tricky_text()) {
            let once = normalize_body(&input);
            prop_assert_eq!(normalize_body(&once), once);
        }

        #[test]
        fn normalize_title_is_idempotent(input in tricky_text()) {
            let once = normalize_title(&input);
            prop_assert_eq!(normalize_title(&once), once);
        }
    }
}
