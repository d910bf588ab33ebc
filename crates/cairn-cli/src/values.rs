//! clap value parsers for flags that take one word of a fixed vocabulary (`--type`,
//! `--confidence`, `--trust-zone`, `--mode`, …): `--help` lists the canonical words, every
//! spelling the vocabulary's own parser accepts stays valid (aliases, case, `-` for `_`), and
//! anything else is a usage error (exit 2) that names the allowed words.

use cairn_core::brief::SectionKind;
use cairn_core::record::{Confidence, MemoryType, Sensitivity, Status, TrustZone};
use cairn_engine::Mode;
use cairn_engine::graph::Direction;
use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use std::ffi::OsStr;
use std::str::FromStr;

/// A parser for one vocabulary: its canonical words (listed by `--help`) and how a typed value
/// maps to one (`None`: not a word of it).
#[derive(Clone, Copy)]
pub struct Words<T> {
    names: &'static [&'static str],
    parse: fn(&str) -> Option<T>,
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Words<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let text = value.to_string_lossy();
        if let Some(parsed) = (self.parse)(&text) {
            return Ok(parsed);
        }
        let mut error = clap::Error::new(ErrorKind::InvalidValue).with_cmd(cmd);
        let arg = arg.map_or_else(|| "VALUE".to_string(), ToString::to_string);
        error.insert(ContextKind::InvalidArg, ContextValue::String(arg));
        error.insert(
            ContextKind::InvalidValue,
            ContextValue::String(text.into_owned()),
        );
        error.insert(
            ContextKind::ValidValue,
            ContextValue::Strings(self.names.iter().map(ToString::to_string).collect()),
        );
        Err(error)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.names.iter().map(PossibleValue::new)))
    }
}

fn from_str<T: FromStr>(text: &str) -> Option<T> {
    text.parse().ok()
}

/// Canonical names of a core vocabulary, as a `'static` list for the help text.
macro_rules! names {
    ($type:ty) => {{
        static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        NAMES
            .get_or_init(|| <$type>::ALL.iter().map(|v| v.as_str()).collect())
            .as_slice()
    }};
}

pub fn memory_type() -> Words<MemoryType> {
    Words {
        names: names!(MemoryType),
        parse: from_str,
    }
}

pub fn confidence() -> Words<Confidence> {
    Words {
        names: names!(Confidence),
        parse: from_str,
    }
}

pub fn trust_zone() -> Words<TrustZone> {
    Words {
        names: names!(TrustZone),
        parse: from_str,
    }
}

pub fn sensitivity() -> Words<Sensitivity> {
    Words {
        names: names!(Sensitivity),
        parse: from_str,
    }
}

pub fn status() -> Words<Status> {
    Words {
        names: names!(Status),
        parse: from_str,
    }
}

/// `--mode`: how recall finds candidates.
pub fn mode() -> Words<Mode> {
    Words {
        names: &["hybrid", "lexical", "semantic"],
        parse: from_str,
    }
}

/// `--direction` of the blast radius (`incoming`, `outgoing` and `any` are accepted too).
pub fn direction() -> Words<Direction> {
    Words {
        names: &["in", "out", "both"],
        parse: from_str,
    }
}

/// The clients `cairn install` configures, by their canonical name (`claude` is accepted for
/// claude-code, `gemini-cli` for gemini).
pub fn client() -> Words<String> {
    Words {
        names: &["claude-code", "codex", "cursor", "gemini"],
        parse: |text| {
            let canonical = match text.trim().to_ascii_lowercase().replace('_', "-").as_str() {
                "claude-code" | "claude" => "claude-code",
                "codex" => "codex",
                "cursor" => "cursor",
                "gemini" | "gemini-cli" => "gemini",
                _ => return None,
            };
            Some(canonical.to_string())
        },
    }
}

/// `brief --section`: the brief's sections, in budget priority order.
pub fn section() -> Words<SectionKind> {
    static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    Words {
        names: NAMES
            .get_or_init(|| SectionKind::PRIORITY.iter().map(|k| k.name()).collect())
            .as_slice(),
        parse: SectionKind::parse,
    }
}

/// The file formats `export` and `import` read and write without a subcommand (one today; the
/// other targets are subcommands: `export wiki`, `import mem0`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeFormat {
    Jsonl,
}

/// `export --format` / `import --format`.
pub fn exchange_format() -> Words<ExchangeFormat> {
    Words {
        names: &["jsonl"],
        parse: |text| {
            text.trim()
                .eq_ignore_ascii_case("jsonl")
                .then_some(ExchangeFormat::Jsonl)
        },
    }
}

/// `token create --role`: what a token of `cairn serve` may do.
pub fn role() -> Words<cairn_engine::tokens::Role> {
    Words {
        names: &["read", "write", "admin"],
        parse: |text| cairn_engine::tokens::Role::parse(&text.trim().to_ascii_lowercase()),
    }
}
