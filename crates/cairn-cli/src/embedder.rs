//! Which embedder the configuration picks: `CAIRN_EMBEDDER` / `CAIRN_MODEL` (read once into
//! [`Settings`]), `--model-dir` (and the `CAIRN_EMBED_*` variables for http) turned into a lazy
//! loader handed to the engine. Shared by the commands, the MCP server and the evaluation.

use crate::settings::Settings;
use cairn_embed::{EmbedError, EmbedderConfig, HttpConfig, LocalModel, MiniLmOptions};
use cairn_engine::EmbedderLoader;

/// The local model `name` (else `CAIRN_MODEL`) names (`e5` or `minilm`), else the default.
pub fn local_model(settings: &Settings, name: Option<&str>) -> Result<LocalModel, EmbedError> {
    match name
        .or(settings.model.as_deref())
        .filter(|n| !n.trim().is_empty())
    {
        None => Ok(DEFAULT_LOCAL_MODEL),
        Some(name) => LocalModel::parse(name).ok_or_else(|| EmbedError::InvalidConfig {
            reason: format!("unknown local model {name:?}: expected e5 or minilm"),
        }),
    }
}

/// The default local model, chosen by the LoCoMo evaluation (docs/retrieval.md).
pub const DEFAULT_LOCAL_MODEL: LocalModel = LocalModel::E5Small;

/// What `CAIRN_EMBEDDER` picks.
pub enum Choice {
    /// A real embedder (or none).
    Configured(EmbedderConfig),
    /// `hash` / `hash-DIM`: a deterministic fake for tests (it shares words, not meaning).
    Hash(usize),
}

impl Choice {
    /// The provider's name, as `model status` reports it.
    pub fn provider(&self) -> &'static str {
        match self {
            Choice::Configured(EmbedderConfig::Local { .. }) => "local",
            Choice::Configured(EmbedderConfig::Http(_)) => "http",
            Choice::Configured(EmbedderConfig::None) => "none",
            Choice::Hash(_) => "hash",
        }
    }
}

/// The embedder the settings ask for: `CAIRN_EMBEDDER=local|http|none|hash[-DIM]` (default:
/// local, or http when `CAIRN_EMBED_URL` is set), the local model from `CAIRN_MODEL`, the
/// model directory from `--model-dir` / `CAIRN_MODEL_DIR` / the cache dir, and the
/// `CAIRN_EMBED_*` variables for http.
pub fn choice(settings: &Settings) -> Result<Choice, EmbedError> {
    if let Some(rest) = settings
        .embedder
        .as_deref()
        .and_then(|c| c.strip_prefix("hash"))
    {
        let dimension = match rest.strip_prefix('-') {
            None if rest.is_empty() => Some(64),
            Some(dimension) => dimension.parse().ok().filter(|&d: &usize| d > 0),
            None => None,
        };
        return dimension.map(Choice::Hash).ok_or_else(|| EmbedError::InvalidConfig {
            reason: format!(
                "CAIRN_EMBEDDER={:?}: the test embedder is `hash` or `hash-DIM` (DIM a positive whole number)",
                settings.embedder.as_deref().unwrap_or_default()
            ),
        });
    }
    config(settings).map(Choice::Configured)
}

fn config(settings: &Settings) -> Result<EmbedderConfig, EmbedError> {
    let http = HttpConfig::from_env()?;
    let model = local_model(settings, None)?;
    let local = || EmbedderConfig::Local {
        model,
        model_dir: settings.model_dir.clone(),
        options: MiniLmOptions::default(),
    };
    match (settings.embedder.as_deref(), http) {
        (Some("none" | "off" | "lexical"), _) => Ok(EmbedderConfig::None),
        (Some("http"), Some(http)) => Ok(EmbedderConfig::Http(http)),
        (Some("http"), None) => Err(EmbedError::InvalidConfig {
            reason: "CAIRN_EMBEDDER=http needs CAIRN_EMBED_URL (and CAIRN_EMBED_MODEL)".into(),
        }),
        (Some("local"), _) | (None, None) => Ok(local()),
        (None, Some(http)) => Ok(EmbedderConfig::Http(http)),
        (Some(other), _) => Err(EmbedError::InvalidConfig {
            reason: format!("CAIRN_EMBEDDER={other:?}: expected local, http or none"),
        }),
    }
}

/// A loader for the engine: nothing is loaded until semantic search or indexing needs it.
pub fn loader(settings: &Settings) -> EmbedderLoader {
    match choice(settings) {
        Ok(Choice::Hash(dimension)) => {
            Box::new(move || Ok(Some(Box::new(cairn_embed::HashEmbedder::new(dimension)))))
        }
        Ok(Choice::Configured(config)) => Box::new(move || cairn_embed::open_embedder(&config)),
        Err(error) => Box::new(move || Err(error)),
    }
}
