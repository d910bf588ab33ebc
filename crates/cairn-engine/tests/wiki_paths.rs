//! Property: whatever the titles, scopes and zones, every file `export wiki` writes resolves
//! inside the wiki directory, and nothing is written anywhere else.

use cairn_core::record::{MemoryType, TrustZone};
use cairn_engine::wiki::WikiExportOptions;
use cairn_engine::{Context, Engine, RememberRequest};
use proptest::prelude::*;
use std::path::Path;

fn all_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let file_type = entry.file_type().unwrap();
        assert!(
            !file_type.is_symlink(),
            "the export made a symlink: {:?}",
            entry.path()
        );
        if file_type.is_dir() {
            all_files(&entry.path(), out);
        } else {
            out.push(entry.path());
        }
    }
}

fn hostile_title() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "(\\.\\./){1,6}[a-z]{1,8}",
        "/[a-z/]{1,20}",
        "[A-Z]:\\\\[a-z\\\\]{1,10}",
        "(CON|PRN|AUX|NUL|COM1|LPT9)(\\.[a-z]{1,3})?",
        "[a-zA-Z ./\\\\:*?\"<>|-]{1,40}",
        "[éeÉE\u{301}]{1,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]
    #[test]
    fn no_generated_path_resolves_outside_the_directory(
        titles in proptest::collection::vec((hostile_title(), 0usize..4, 0usize..2), 1..12)
    ) {
        let sandbox = tempfile::tempdir().unwrap();
        let context = Context {
            project: "p".into(),
            cwd: sandbox.path().to_path_buf(),
            actor: "test".into(),
            read_only: false,
            now: None,
        };
        let mut engine = Engine::open(&sandbox.path().join("brain.db"), context).unwrap();
        for (index, (title, zone, scope)) in titles.iter().enumerate() {
            let mut request = RememberRequest::new(MemoryType::Note, format!("body {index}"));
            request.title = Some(title.clone());
            request.trust_zone = Some(TrustZone::ALL[*zone]);
            request.scope = Some(["global", "a:b"][*scope].to_string());
            request.allow_duplicate = true;
            // titles the write path refuses (NUL, too long) never reach the export
            let _ = engine.remember(&request);
        }
        let wiki = sandbox.path().join("deep/wiki");
        let report = engine.export_wiki(&wiki, &WikiExportOptions::default()).unwrap();
        prop_assert!(report.refused.is_empty(), "{:?}", report.refused);
        let root = std::fs::canonicalize(&wiki).unwrap();
        let mut files = Vec::new();
        all_files(&root, &mut files);
        for file in &files {
            let real = std::fs::canonicalize(file).unwrap();
            prop_assert!(real.starts_with(&root), "{} escapes {}", real.display(), root.display());
        }
        let mut outside: Vec<String> = std::fs::read_dir(sandbox.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with("brain.db"))
            .collect();
        outside.sort();
        prop_assert_eq!(outside, vec!["deep".to_string()]);
        let deep: Vec<_> = std::fs::read_dir(sandbox.path().join("deep")).unwrap().flatten().collect();
        prop_assert_eq!(deep.len(), 1);
    }
}
