//! Page names: safe slugs from titles, deterministic collision suffixes, and the check every
//! relative path passes before it touches the disk.
//!
//! A slug is `[a-z0-9-]`, at most 80 bytes, never empty, never a reserved device name, never
//! containing `--`. The first record (lowest id) of a folder to claim a slug gets it bare; the
//! others get `slug--scope--zone`, and when even that is taken, `slug--scope--zone--ID`. Because a
//! bare slug never contains `--`, a suffixed name can never collide with a bare one.

use cairn_core::record::{MemoryType, Status, TrustZone};
use std::collections::{HashMap, HashSet};
use unicode_normalization::UnicodeNormalization;

/// Longest slug taken from a title, in bytes.
pub const MAX_SLUG: usize = 80;
/// Longest scope part of a collision suffix.
const MAX_SCOPE_SLUG: usize = 40;

/// Names that Windows refuses as file names whatever the extension.
const RESERVED: &[&str] = &[
    "con", "prn", "aux", "nul", "com0", "com1", "com2", "com3", "com4", "com5", "com6", "com7",
    "com8", "com9", "lpt0", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
    "conin$", "conout$",
];

/// `[a-z0-9-]` text from anything: accents folded (NFKD, marks dropped), apostrophes dropped,
/// every other run of characters one `-`, at most `max` bytes; may be empty.
pub fn slug_text(text: &str, max: usize) -> String {
    let mut slug = String::with_capacity(text.len().min(max + 2));
    let folded: Box<dyn Iterator<Item = char>> = if text.is_ascii() {
        Box::new(text.chars())
    } else {
        Box::new(text.nfkd())
    };
    for c in folded {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if matches!(c, '\'' | '’') || unicode_normalization::char::is_combining_mark(c) {
            continue;
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
        if slug.len() > max + 1 {
            break;
        }
    }
    let mut slug = slug.trim_matches('-').to_string();
    slug.truncate(max);
    slug.trim_end_matches('-').to_string()
}

/// The bare page name of a record: its title's slug, or `TYPE-ID` for an untitled record (or a
/// title with no letters or digits, such as one in a script that does not fold to ASCII).
pub fn base_slug(title: Option<&str>, memory_type: MemoryType, id: i64) -> String {
    let slug = title.map(|t| slug_text(t, MAX_SLUG)).unwrap_or_default();
    if slug.is_empty() {
        return format!("{memory_type}-{id}");
    }
    if RESERVED.contains(&slug.as_str()) {
        return format!("{slug}-record");
    }
    slug
}

/// The folder of a record's page: its type, under `archive/` once it is no longer active.
pub fn folder(memory_type: MemoryType, status: Status) -> String {
    match status {
        Status::Active => memory_type.to_string(),
        Status::Superseded | Status::Archived => format!("archive/{memory_type}"),
    }
}

/// What page naming needs to know about a record.
#[derive(Debug, Clone)]
pub struct NameInput<'a> {
    pub id: i64,
    pub title: Option<&'a str>,
    pub memory_type: MemoryType,
    pub status: Status,
    pub scope: &'a str,
    pub trust_zone: TrustZone,
}

/// Every record's page path (`folder/name.md`), deterministic for the same set of records.
pub fn assign(records: &[NameInput<'_>]) -> HashMap<i64, String> {
    // (folder, base) → records claiming it. Suffixed names keep their bare slug before the
    // first `--`, so names can only collide inside one group and groups are independent.
    // The folder is keyed by (type, active): `folder` gives the same text for every status but
    // `Active`, and its text is built once per group, not once per record.
    let mut claims: HashMap<(MemoryType, bool, String), Vec<usize>> =
        HashMap::with_capacity(records.len());
    for (index, record) in records.iter().enumerate() {
        let key = (
            record.memory_type,
            record.status == Status::Active,
            base_slug(record.title, record.memory_type, record.id),
        );
        claims.entry(key).or_default().push(index);
    }
    let mut paths = HashMap::with_capacity(records.len());
    for ((memory_type, active, base), mut members) in claims {
        let folder = folder(
            memory_type,
            if active {
                Status::Active
            } else {
                Status::Archived
            },
        );
        if let [index] = members[..] {
            // the usual case: a slug only one record claims
            paths.insert(records[index].id, format!("{folder}/{base}.md"));
            continue;
        }
        members.sort_by_key(|&i| records[i].id);
        let mut taken: HashSet<String> = HashSet::new();
        for (rank, index) in members.into_iter().enumerate() {
            let record = &records[index];
            let mut name = base.clone();
            if rank > 0 {
                let scope = slug_text(record.scope, MAX_SCOPE_SLUG);
                let zone = record.trust_zone.as_str().replace('_', "-");
                name = format!("{base}--{scope}--{zone}");
                if taken.contains(&name) {
                    name = format!("{name}--{}", record.id);
                }
            }
            taken.insert(name.clone());
            paths.insert(record.id, format!("{folder}/{name}.md"));
        }
    }
    paths
}

/// Why a relative path is not allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused path {path:?}: {reason}")]
pub struct UnsafePath {
    pub path: String,
    pub reason: &'static str,
}

/// Checks a path relative to the wiki root: `/`-separated components of `[A-Za-z0-9._-]`, none
/// empty, `.` or `..`, none starting with `.` unless `hidden_ok`, none a reserved device name,
/// each at most 255 bytes. Absolute paths, drive letters (`C:`), UNC and device paths
/// (`\\?\`), backslashes and NUL all fail the character check.
pub fn check_relative(path: &str, hidden_ok: bool) -> Result<(), UnsafePath> {
    let refuse = |reason| {
        Err(UnsafePath {
            path: path.to_string(),
            reason,
        })
    };
    if path.is_empty() {
        return refuse("it is empty");
    }
    if path.starts_with('/') {
        return refuse("it is absolute");
    }
    for component in path.split('/') {
        if component.is_empty() {
            return refuse("it has an empty component");
        }
        if component == "." || component == ".." {
            return refuse("it climbs out of the directory");
        }
        if component.len() > 255 {
            return refuse("a component is longer than 255 bytes");
        }
        if !component
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return refuse("it has a character outside [A-Za-z0-9._-]");
        }
        if component.starts_with('.') && !hidden_ok {
            return refuse("a component starts with a dot");
        }
        let stem = component
            .split('.')
            .next()
            .unwrap_or(component)
            .to_ascii_lowercase();
        if RESERVED.contains(&stem.as_str()) {
            return refuse("a component is a reserved device name");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn input(
        id: i64,
        title: &str,
        scope: &'static str,
        zone: TrustZone,
    ) -> (i64, String, &'static str, TrustZone) {
        (id, title.to_string(), scope, zone)
    }

    fn names(records: &[(i64, String, &'static str, TrustZone)]) -> Vec<String> {
        let inputs: Vec<NameInput<'_>> = records
            .iter()
            .map(|(id, title, scope, zone)| NameInput {
                id: *id,
                title: Some(title),
                memory_type: MemoryType::Decision,
                status: Status::Active,
                scope,
                trust_zone: *zone,
            })
            .collect();
        let paths = assign(&inputs);
        records.iter().map(|r| paths[&r.0].clone()).collect()
    }

    #[test]
    fn hostile_titles_become_safe_slugs() {
        let check = |title: &str, expect: &str| {
            assert_eq!(
                base_slug(Some(title), MemoryType::Note, 7),
                expect,
                "{title:?}"
            );
        };
        check("../../etc/passwd", "etc-passwd");
        check("/absolute/path", "absolute-path");
        check("C:\\Windows\\system32", "c-windows-system32");
        check("\\\\?\\device", "device");
        check("CON", "con-record");
        check("lpt1", "lpt1-record");
        check("nul\0byte", "nul-byte");
        check("Café déjà vu", "cafe-deja-vu");
        check("Cafe\u{301} de\u{301}ja\u{300} vu", "cafe-deja-vu");
        check("Don't use Redis", "dont-use-redis");
        check("日本語のタイトル", "note-7");
        check("🚀", "note-7");
        check("---", "note-7");
        check(&"a".repeat(300), &"a".repeat(80));
        check(
            &"ab-".repeat(100),
            "ab-".repeat(27)[..80].trim_end_matches('-'),
        );
        assert!(slug_text("x--y", 80) == "x-y", "slugs never hold `--`");
    }

    #[test]
    fn collisions_get_deterministic_suffixes() {
        use TrustZone::*;
        let records = vec![
            input(5, "Deploy", "global", PrivateSelf),
            input(9, "deploy", "global", PaidPublic),
            input(3, "DEPLOY", "channel:ops", PrivateSelf),
            input(12, "Déploy", "global", PaidPublic),
        ];
        assert_eq!(
            names(&records),
            [
                "decision/deploy--global--private-self.md",
                "decision/deploy--global--paid-public.md",
                "decision/deploy.md",
                "decision/deploy--global--paid-public--12.md",
            ]
        );
        let mut shuffled = records.clone();
        shuffled.reverse();
        let mut again = names(&shuffled);
        again.reverse();
        assert_eq!(again, names(&records), "order of input does not matter");
    }

    #[test]
    fn relative_paths_are_checked() {
        for good in [
            "index.md",
            "decision/x.md",
            "archive/note/a-b--c.md",
            "log/2026-01.md",
        ] {
            assert!(check_relative(good, false).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x.md",
            "a/../../x.md",
            "a//b.md",
            "./x.md",
            "C:/x.md",
            "C:x.md",
            "\\\\?\\x.md",
            "a\\b.md",
            "nul.md",
            "x/CON.txt",
            "a\0b.md",
            ".hidden.md",
            "é.md",
        ] {
            assert!(check_relative(bad, false).is_err(), "{bad:?}");
        }
        assert!(check_relative(".cairn-wiki.tsv", true).is_ok());
    }

    proptest! {
        #[test]
        fn every_assigned_path_passes_the_check(titles in proptest::collection::vec(any::<String>(), 1..20)) {
            let records: Vec<(i64, String, &'static str, TrustZone)> = titles
                .into_iter()
                .enumerate()
                .map(|(i, t)| (i as i64 + 1, t, "global", TrustZone::PrivateSelf))
                .collect();
            let paths = names(&records);
            let unique: HashSet<&String> = paths.iter().collect();
            prop_assert_eq!(unique.len(), paths.len());
            for path in &paths {
                prop_assert!(check_relative(path, false).is_ok(), "{}", path);
            }
        }
    }
}
