//! Which embedder the configuration picks: `CAIRN_EMBEDDER` / `CAIRN_MODEL` / `--model-dir`
//! (and the `CAIRN_EMBED_*` variables for http) turned into a lazy loader handed to the engine.
//! Shared by the commands, the MCP server and the evaluation.

use cairn_embed::{EmbedError, EmbedderConfig, HttpConfig, LocalModel, MiniLmOptions};
use cairn_engine::EmbedderLoader;
use std::path::Path;

/// The local model `CAIRN_MODEL` names (`e5` or `minilm`), else the default.
pub fn local_model(name: Option<&str>) -> Result<LocalModel, EmbedError> {
    let from_env = std::env::var("CAIRN_MODEL").ok();
    match name
        .or(from_env.as_deref())
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

/// The embedder the environment asks for: `CAIRN_EMBEDDER=local|http|none` (default: local,
/// or http when `CAIRN_EMBED_URL` is set), the local model from `CAIRN_MODEL`, the model
/// directory from `--model-dir` / `CAIRN_MODEL_DIR` / the cache dir, and the `CAIRN_EMBED_*`
/// variables for http.
pub fn config(model_dir: Option<&Path>) -> Result<EmbedderConfig, EmbedError> {
    let choice = std::env::var("CAIRN_EMBEDDER")
        .ok()
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty());
    let http = HttpConfig::from_env()?;
    let model = local_model(None)?;
    let local = || EmbedderConfig::Local {
        model,
        model_dir: model_dir.map(Path::to_path_buf),
        options: MiniLmOptions::default(),
    };
    match (choice.as_deref(), http) {
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
/// `CAIRN_EMBEDDER=hash` (or `hash-DIM`) is a deterministic fake for tests: it shares words,
/// not meaning.
pub fn loader(model_dir: Option<&Path>) -> EmbedderLoader {
    if let Some(dimension) = hash_embedder_dimension() {
        return Box::new(move || Ok(Some(Box::new(cairn_embed::HashEmbedder::new(dimension)))));
    }
    let config = config(model_dir);
    Box::new(move || cairn_embed::open_embedder(&config?))
}

fn hash_embedder_dimension() -> Option<usize> {
    let choice = std::env::var("CAIRN_EMBEDDER").ok()?;
    let rest = choice.trim().strip_prefix("hash")?;
    match rest.strip_prefix('-') {
        Some(dimension) => dimension.parse().ok(),
        None if rest.is_empty() => Some(64),
        None => None,
    }
}
