//! Settings a brain keeps for itself (`cairn config set KEY VALUE`), stored in the `meta` table
//! under `config:KEY`. Only the keys listed here exist; an environment variable overrides the
//! stored value (`CAIRN_LLM_COMMAND` over `llm.command`), so a test or a one-off run can point
//! elsewhere without touching the brain. Secrets are never stored: the LLM key is read from the
//! environment variable `llm.api_key_env` names.

use crate::{Engine, EngineError, Result};
use serde::{Deserialize, Serialize};

/// A known setting: its key, the environment variable that overrides it, what it does.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    pub key: &'static str,
    pub env: &'static str,
    pub default: Option<&'static str>,
    pub help: &'static str,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "llm.command",
        env: "CAIRN_LLM_COMMAND",
        default: None,
        help: "shell command that gets a prompt on stdin and replies on stdout (e.g. `claude -p`)",
    },
    Setting {
        key: "llm.url",
        env: "CAIRN_LLM_URL",
        default: None,
        help: "OpenAI-compatible chat endpoint (…/v1 or …/v1/chat/completions); plain http unless built with TLS",
    },
    Setting {
        key: "llm.model",
        env: "CAIRN_LLM_MODEL",
        default: None,
        help: "model name sent to llm.url",
    },
    Setting {
        key: "llm.api_key_env",
        env: "CAIRN_LLM_API_KEY_ENV",
        default: Some("CAIRN_LLM_API_KEY"),
        help: "name of the environment variable holding the key for llm.url (the key is never stored)",
    },
    Setting {
        key: "llm.timeout_secs",
        env: "CAIRN_LLM_TIMEOUT_SECS",
        default: Some("120"),
        help: "seconds one LLM call may take before it is stopped and reported",
    },
    Setting {
        key: "capture.extract",
        env: "CAIRN_CAPTURE_EXTRACT",
        default: Some("inbox"),
        help: "where `cairn extract` (and the extraction after a session ends) puts candidate records: `inbox` for review, `auto` to store them (trust captured, confidence inferred), `off` for no extraction after a session ends",
    },
    Setting {
        key: "extract.max_llm_calls",
        env: "CAIRN_EXTRACT_MAX_LLM_CALLS",
        default: Some("4"),
        help: "most LLM calls (batches of up to 100 turns) one extraction makes; the rest waits for the next run",
    },
    Setting {
        key: "dream.auto_accept",
        env: "CAIRN_DREAM_AUTO_ACCEPT",
        default: Some("false"),
        help: "what an unattended dream (`cairn dream --unattended`) applies by itself: `false` nothing, `safe` what loses nothing (summaries, reflections, decay; never a merge or a forget), `true` everything",
    },
    Setting {
        key: "dream.max_llm_calls",
        env: "CAIRN_DREAM_MAX_LLM_CALLS",
        default: Some("6"),
        help: "most LLM calls (summaries + reflections) one dream makes",
    },
    Setting {
        key: "dream.keep_decided_days",
        env: "CAIRN_DREAM_KEEP_DECIDED_DAYS",
        default: Some("7"),
        help: "days a decided dream set keeps its proposal details before a dream prunes them (0: the next dream); the event log keeps what was applied",
    },
    Setting {
        key: "maintenance.dream_every",
        env: "CAIRN_MAINTENANCE_DREAM_EVERY",
        default: Some("1d"),
        help: "how often the maintenance a session end starts runs an unattended dream: `Nd` days, `Nh` hours, `0` every session end, `off` never (what it applies: dream.auto_accept)",
    },
    Setting {
        key: "maintenance.decay_every",
        env: "CAIRN_MAINTENANCE_DECAY_EVERY",
        default: Some("1d"),
        help: "how often the maintenance a session end starts applies decay: `Nd`, `Nh`, `0`, `off` (dream.auto_accept `safe`: demotions only, `true`: archives too, `false`: nothing, the dream proposes it)",
    },
    Setting {
        key: "maintenance.embed",
        env: "CAIRN_MAINTENANCE_EMBED",
        default: Some("on"),
        help: "whether the maintenance a session end starts embeds the records still waiting for a vector: `on` or `off`",
    },
];

/// A `maintenance.*_every` value: `off` (`None`), `0` (every time), `Nd` days or `Nh` hours;
/// a bare number is days.
pub fn parse_every(value: &str) -> Option<Option<chrono::TimeDelta>> {
    let value = value.trim();
    if value == "off" {
        return Some(None);
    }
    let (digits, hours_per_unit) = match value.strip_suffix('h') {
        Some(digits) => (digits, 1),
        None => (value.strip_suffix('d').unwrap_or(value), 24),
    };
    let n: i64 = digits.trim().parse::<u32>().ok()?.into();
    chrono::TimeDelta::try_hours(n * hours_per_unit).map(Some)
}

/// One setting's value and where it came from.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SettingValue {
    pub key: String,
    pub value: Option<String>,
    /// `env`, `brain`, `default` or `unset`.
    pub from: String,
    pub help: String,
}

fn setting(key: &str) -> Result<&'static Setting> {
    SETTINGS.iter().find(|s| s.key == key).ok_or_else(|| {
        EngineError::Invalid(format!(
            "unknown setting {key:?}: known settings are {}",
            SETTINGS
                .iter()
                .map(|s| s.key)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

fn meta_key(key: &str) -> String {
    format!("config:{key}")
}

impl Engine {
    /// A setting's effective value: the environment, then the brain, then the default.
    pub fn setting(&self, key: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<SettingValue> {
        let known = setting(key)?;
        let (value, from) = if let Some(v) = env(known.env).filter(|v| !v.trim().is_empty()) {
            (Some(v), "env")
        } else if let Some(v) = self.store.reader()?.meta(&meta_key(key))? {
            (Some(v), "brain")
        } else if let Some(v) = known.default {
            (Some(v.to_string()), "default")
        } else {
            (None, "unset")
        };
        Ok(SettingValue {
            key: key.to_string(),
            value,
            from: from.to_string(),
            help: known.help.to_string(),
        })
    }

    pub fn settings(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<SettingValue>> {
        SETTINGS.iter().map(|s| self.setting(s.key, env)).collect()
    }

    /// Stores a setting in the brain (`None` removes it).
    pub fn set_setting(&mut self, key: &str, value: Option<&str>) -> Result<()> {
        self.ensure_writable("config set")?;
        let known = setting(key)?;
        if let Some(value) = value {
            validate(known, value)?;
        }
        let meta = meta_key(key);
        self.store.write(|tx| {
            match value {
                Some(value) => tx.set_meta(&meta, value)?,
                None => tx.delete_meta(&meta)?,
            }
            Ok::<_, EngineError>(())
        })
    }
}

/// The settings stored in the brain (not the environment's overrides), in `SETTINGS` order:
/// what an export carries.
pub(crate) fn stored_settings(reader: &cairn_store::Reader<'_>) -> Result<Vec<(String, String)>> {
    let mut stored = Vec::new();
    for known in SETTINGS {
        if let Some(value) = reader.meta(&meta_key(known.key))? {
            stored.push((known.key.to_string(), value));
        }
    }
    Ok(stored)
}

/// The `meta` key an imported setting is stored under, after the checks `config set` makes.
pub(crate) fn checked_meta_key(key: &str, value: &str) -> Result<String> {
    validate(setting(key)?, value)?;
    Ok(meta_key(key))
}

/// A `dream.keep_decided_days` value: a whole number of days, 0 or more.
pub fn parse_days(value: &str) -> Option<u32> {
    value.trim().parse::<u32>().ok()
}

fn validate(setting: &Setting, value: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(EngineError::Invalid(format!(
            "{} = {value:?} is not valid: {why}; nothing was stored",
            setting.key
        )))
    };
    match setting.key {
        "llm.timeout_secs" | "dream.max_llm_calls" | "extract.max_llm_calls" => {
            match value.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(()),
                _ => bad("expected a whole number above 0"),
            }
        }
        "dream.keep_decided_days" => match parse_days(value) {
            Some(_) => Ok(()),
            None => bad("expected a whole number of days, 0 or more"),
        },
        "maintenance.dream_every" | "maintenance.decay_every" => match parse_every(value) {
            Some(_) => Ok(()),
            None => bad("expected a whole number of days (`1d`) or hours (`12h`), `0` or `off`"),
        },
        "maintenance.embed" => match value.trim() {
            "on" | "off" => Ok(()),
            _ => bad("expected on or off"),
        },
        "capture.extract" => match value.trim() {
            "inbox" | "auto" | "off" => Ok(()),
            _ => bad("expected inbox, auto or off"),
        },
        "dream.auto_accept" => match value.trim() {
            "true" | "false" | "safe" => Ok(()),
            _ => bad("expected true, false or safe"),
        },
        "llm.url" => {
            let lower = value.trim().to_ascii_lowercase();
            if lower.starts_with("http://") || lower.starts_with("https://") {
                Ok(())
            } else {
                bad("expected an http:// or https:// URL")
            }
        }
        _ if value.trim().is_empty() => bad("empty (use `cairn config unset` to remove it)"),
        _ => Ok(()),
    }
}

impl Engine {
    /// The LLM the settings configure: the command wins over the URL; `None` when neither is
    /// set. The key is read from the environment variable `llm.api_key_env` names.
    pub fn llm_config(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<super::LlmConfig>> {
        let value = |key: &str| -> Result<Option<String>> { Ok(self.setting(key, env)?.value) };
        let timeout = value("llm.timeout_secs")?
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(120);
        let timeout = std::time::Duration::from_secs(timeout);
        if let Some(command) = value("llm.command")?.filter(|c| !c.trim().is_empty()) {
            return Ok(Some(super::LlmConfig::Command { command, timeout }));
        }
        let Some(url) = value("llm.url")?.filter(|u| !u.trim().is_empty()) else {
            return Ok(None);
        };
        let Some(model) = value("llm.model")?.filter(|m| !m.trim().is_empty()) else {
            return Err(EngineError::Invalid(format!(
                "llm.url is set ({url}) but llm.model is not; nothing was run — `cairn config set llm.model NAME`"
            )));
        };
        let key_env = value("llm.api_key_env")?.unwrap_or_else(|| "CAIRN_LLM_API_KEY".into());
        Ok(Some(super::LlmConfig::Http {
            url,
            model,
            api_key: env(&key_env).filter(|k| !k.is_empty()),
            timeout,
        }))
    }

    /// The options of a dream a person runs, from the settings: the LLM (none with `no_llm`),
    /// `dream.max_llm_calls` and `dream.keep_decided_days`. Attended and not accepting: the
    /// caller sets `accept`, `unattended` and `auto_accept`.
    pub fn dream_options(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        no_llm: bool,
    ) -> Result<super::DreamOptions> {
        let llm = if no_llm { None } else { self.llm_config(env)? };
        let max_llm_calls = self
            .setting("dream.max_llm_calls", env)?
            .value
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(6);
        let keep = self.setting("dream.keep_decided_days", env)?;
        let keep_decided_days = match keep.value.as_deref() {
            None => super::KEEP_DECIDED_DAYS,
            Some(value) => parse_days(value).ok_or_else(|| {
                EngineError::Invalid(format!(
                    "dream.keep_decided_days = {value:?} (from {}) is not a whole number of days, 0 or more; nothing was run — `cairn config set dream.keep_decided_days 7`",
                    keep.from
                ))
            })?,
        };
        Ok(super::DreamOptions {
            llm,
            max_llm_calls,
            keep_decided_days,
            ..super::DreamOptions::default()
        })
    }
}

impl Engine {
    /// The options of an extraction from the settings: the LLM (none with `no_llm`), where
    /// candidates go (`capture.extract`) and the call budget (`extract.max_llm_calls`).
    pub fn extract_options(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        session: Option<String>,
        no_llm: bool,
    ) -> Result<crate::ExtractOptions> {
        let target = self
            .setting("capture.extract", env)?
            .value
            .as_deref()
            .and_then(crate::ExtractTarget::parse)
            .unwrap_or(crate::ExtractTarget::Inbox);
        let max_calls = self
            .setting("extract.max_llm_calls", env)?
            .value
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(4);
        Ok(crate::ExtractOptions {
            session,
            llm: if no_llm { None } else { self.llm_config(env)? },
            target,
            max_calls,
        })
    }

    /// What a maintenance run may do, from the settings: `embed` says who embeds when
    /// `maintenance.embed` is on (the caller knows whether an embedder is configured, and
    /// whether a server's indexer embeds in the background).
    pub fn maintain_options(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        embed: super::EmbedStep,
    ) -> Result<super::MaintainOptions> {
        let word = |key: &str| -> Result<Option<String>> {
            Ok(self.setting(key, env)?.value.map(|v| v.trim().to_string()))
        };
        let extract = match word("capture.extract")?.as_deref() {
            Some("off") => None,
            _ => Some(self.extract_options(env, None, false)?),
        };
        let embed = if word("maintenance.embed")?.as_deref() == Some("off") {
            super::EmbedStep::Off
        } else {
            embed
        };
        let every = |key: &str| -> Result<Option<chrono::TimeDelta>> {
            let setting = self.setting(key, env)?;
            let value = setting.value.unwrap_or_else(|| "off".into());
            parse_every(&value).ok_or_else(|| {
                EngineError::Invalid(format!(
                    "{key} = {value:?} (from {}) is not an interval; nothing was run — use `1d`, `12h`, `0` or `off`: `cairn config set {key} 1d`",
                    setting.from
                ))
            })
        };
        Ok(super::MaintainOptions {
            extract,
            embed,
            decay_every: every("maintenance.decay_every")?,
            dream_every: every("maintenance.dream_every")?,
            auto_accept: super::AutoAccept::parse(&word("dream.auto_accept")?.unwrap_or_default()),
            dream: self.dream_options(env, false)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maintenance_intervals_take_days_hours_zero_or_off() {
        let day = chrono::TimeDelta::try_days(1).unwrap();
        assert_eq!(parse_every("1d"), Some(Some(day)));
        assert_eq!(parse_every(" 1 "), Some(Some(day)));
        assert_eq!(parse_every("24h"), Some(Some(day)));
        assert_eq!(parse_every("0"), Some(Some(chrono::TimeDelta::zero())));
        assert_eq!(parse_every("off"), Some(None));
        let known = setting("maintenance.dream_every").unwrap();
        assert_eq!(known.default.and_then(parse_every), Some(Some(day)));
        for bad in ["-1d", "1.5d", "daily", "", "1w", "d"] {
            let error = validate(known, bad).unwrap_err().to_string();
            assert!(
                error.contains("maintenance.dream_every") && error.contains("nothing was stored"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn keep_decided_days_defaults_to_the_engine_default_and_takes_whole_days_only() {
        let known = setting("dream.keep_decided_days").unwrap();
        assert_eq!(
            known.default.and_then(parse_days),
            Some(super::super::dream::KEEP_DECIDED_DAYS)
        );
        for good in ["0", "7", " 30 ", "3650"] {
            assert!(validate(known, good).is_ok(), "{good}");
        }
        for bad in ["-1", "1.5", "seven", "", "7d"] {
            let error = validate(known, bad).unwrap_err().to_string();
            assert!(
                error.contains("dream.keep_decided_days") && error.contains("whole number of days"),
                "{bad}: {error}"
            );
        }
    }
}
