//! Instruction files agents read at session start: Claude Code's `CLAUDE.md` (and
//! `CLAUDE.local.md`), its per-project memory folder (`~/.claude/projects/<project>/memory/`:
//! `MEMORY.md` plus one file per memory with `name` / `description` / `type` frontmatter), and
//! `AGENTS.md`.
//!
//! An instruction file becomes one record per section (a heading and the text under it); its
//! type is guessed from the heading (`## Code style` → preference, `## Commands` → procedure,
//! `## Rules` → policy, …, else note). A memory file with frontmatter becomes one record
//! (`user`/`feedback` → preference, `project`/`reference` → fact). `@path` imports are not
//! followed (they are reported: import that file itself), and `MEMORY.md`'s index lines (links
//! to the memory files) are dropped because the files they point to are imported themselves.

use super::{Candidate, Parsed, SourceKind, id_part, read_source, unreadable, walk};
use crate::Result;
use crate::wiki::frontmatter;
use cairn_core::record::MemoryType;
use std::collections::HashSet;
use std::path::Path;

/// The type a section's heading suggests.
pub fn classify(heading: &str) -> MemoryType {
    let heading = heading.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| heading.contains(w));
    if has(&[
        "gotcha",
        "pitfall",
        "caveat",
        "known issue",
        "troubleshoot",
        "debugging",
    ]) {
        MemoryType::Gotcha
    } else if has(&["decision", "adr", "rationale"]) {
        MemoryType::Decision
    } else if has(&[
        "style",
        "prefer",
        "convention",
        "tone",
        "communication",
        "formatting",
    ]) {
        MemoryType::Preference
    } else if has(&[
        "command",
        "build",
        "test",
        "run",
        "setup",
        "install",
        "workflow",
        "deploy",
        "release",
        "how to",
        "development",
        "usage",
    ]) {
        MemoryType::Procedure
    } else if has(&[
        "rule",
        "policy",
        "guideline",
        "must",
        "never",
        "always",
        "don't",
        "do not",
        "security",
        "guardrail",
        "important",
    ]) {
        MemoryType::Policy
    } else if has(&[
        "architecture",
        "overview",
        "structure",
        "layout",
        "stack",
        "about",
        "project",
        "context",
    ]) {
        MemoryType::Fact
    } else {
        MemoryType::Note
    }
}

fn is_heading(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &line[level..];
    rest.starts_with(' ')
        .then(|| (level, rest.trim().trim_end_matches('#').trim()))
}

/// `- [Title](file.md) — hook`: an index line of `MEMORY.md`.
fn is_index_line(line: &str) -> bool {
    let trimmed = line
        .trim_start()
        .trim_start_matches(['-', '*'])
        .trim_start();
    trimmed.starts_with('[')
        && trimmed
            .find("](")
            .is_some_and(|at| trimmed[at..].contains(".md)"))
}

/// Sections of an instruction file. `key` identifies the file in external ids; `label` names
/// it in the report.
pub fn parse_instructions(text: &str, key: &str, label: &str, kind: SourceKind) -> Parsed {
    let mut parsed = Parsed::default();
    let is_memory_index = label.ends_with("MEMORY.md");
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut lines: Vec<&str> = Vec::new();
    let mut in_fence = false;
    let mut taken: HashSet<String> = HashSet::new();
    let mut flush = |stack: &[(usize, String)], lines: &mut Vec<&str>, parsed: &mut Parsed| {
        let body = lines.join("\n").trim().to_string();
        lines.clear();
        if body.is_empty() {
            return;
        }
        let path: Vec<&str> = stack.iter().map(|(_, h)| h.as_str()).collect();
        let heading = path.join(" > ");
        let title = stack.last().map(|(_, h)| h.clone());
        // A repeated heading gets `-2`, `-3`, …; the suffix may be taken by a heading of its
        // own (`# A`, `# A`, `# A 2`: fuzz/regressions/importers/), so count on until the id
        // is free: two sections never share a record.
        let base = format!("{}:{key}#{}", kind.as_str(), id_part(&heading));
        let mut external = base.clone();
        let mut count = 1;
        while !taken.insert(external.clone()) {
            count += 1;
            external = format!("{base}-{count}");
        }
        parsed.candidates.push(Candidate {
            origin: if heading.is_empty() {
                format!("{label} (before the first heading)")
            } else {
                format!("{label}#{heading}")
            },
            external_id: external,
            memory_type: match classify(title.as_deref().unwrap_or("")) {
                MemoryType::Note => {
                    classify(&format!("{heading} {}", body.lines().next().unwrap_or("")))
                }
                guessed => guessed,
            },
            title,
            body,
            summary: None,
            tags: vec![kind.as_str().to_string()],
            source: Some(label.to_string()),
            created_at: None,
        });
    };
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            lines.push(line);
            continue;
        }
        if in_fence {
            lines.push(line);
            continue;
        }
        if let Some((level, heading)) = is_heading(line) {
            flush(&stack, &mut lines, &mut parsed);
            while stack.last().is_some_and(|(l, _)| *l >= level) {
                stack.pop();
            }
            stack.push((level, heading.to_string()));
            continue;
        }
        if let Some(import) = trimmed.strip_prefix('@')
            && !import.is_empty()
            && !import.contains(' ')
        {
            parsed.unmapped.push(format!(
                "{label} line {}: `@{import}` imports another file; not followed — import that file itself",
                number + 1
            ));
            continue;
        }
        if is_memory_index && is_index_line(line) {
            continue;
        }
        lines.push(line);
    }
    flush(&stack, &mut lines, &mut parsed);
    parsed
}

/// A Claude Code memory file (`name` / `description` / `type` frontmatter) as one record, or
/// `None` when the text has no such frontmatter.
pub fn parse_memory_file(text: &str, key: &str, label: &str) -> Option<Parsed> {
    let (inner, rest) = frontmatter::split(text).ok()??;
    let fm = frontmatter::parse(inner).ok()?;
    let name = fm.text("name");
    let description = fm.text("description");
    let kind = fm.text("type");
    if name.is_none() && description.is_none() {
        return None;
    }
    let mut parsed = Parsed::default();
    let memory_type = match kind.as_deref() {
        Some("user") | Some("feedback") => MemoryType::Preference,
        Some("project") | Some("reference") => MemoryType::Fact,
        Some(other) => {
            parsed.unmapped.push(format!(
                "{label}: memory type {other:?} is not one of user, feedback, project, reference; stored as a note"
            ));
            MemoryType::Note
        }
        None => MemoryType::Note,
    };
    for (key_name, _) in &fm.entries {
        if !matches!(key_name.as_str(), "name" | "description" | "type") {
            parsed
                .unmapped
                .push(format!("{label}: frontmatter key `{key_name}` not mapped"));
        }
    }
    let body = rest.trim();
    let body = if body.is_empty() {
        description.clone().unwrap_or_default()
    } else {
        body.to_string()
    };
    if body.trim().is_empty() {
        // A name and nothing else (fuzz/regressions/importers/): no record to make.
        parsed.unmapped.push(format!(
            "{label}: a memory file with no text and no description; skipped"
        ));
        return Some(parsed);
    }
    let mut tags = vec![SourceKind::ClaudeMd.as_str().to_string()];
    if let Some(kind) = kind {
        tags.push(format!("memory-{}", id_part(&kind)));
    }
    parsed.candidates.push(Candidate {
        origin: label.to_string(),
        external_id: format!("claude-md:{key}"),
        memory_type,
        title: name,
        body,
        summary: description,
        tags,
        source: Some(label.to_string()),
        created_at: None,
    });
    Some(parsed)
}

fn parse_file(text: &str, key: &str, label: &str, kind: SourceKind) -> Parsed {
    if kind == SourceKind::ClaudeMd
        && let Some(parsed) = parse_memory_file(text, key, label)
    {
        return parsed;
    }
    // Frontmatter other than a memory file's is metadata, not instructions.
    let body = match frontmatter::split(text) {
        Ok(Some((_, rest))) => rest,
        _ => text,
    };
    parse_instructions(body, key, label, kind)
}

/// Reads a file, or every instruction and memory file under a folder.
pub fn read(path: &Path, kind: SourceKind) -> Result<Parsed> {
    let metadata = std::fs::symlink_metadata(path).map_err(|e| unreadable(path, e.to_string()))?;
    let canonical = std::fs::canonicalize(path).map_err(|e| unreadable(path, e.to_string()))?;
    if !metadata.is_dir() {
        let text = read_source(path).map_err(|why| unreadable(path, why))?;
        let label = path.display().to_string();
        return Ok(parse_file(
            &text,
            &canonical.display().to_string(),
            &label,
            kind,
        ));
    }
    let mut parsed = Parsed::default();
    // A memory folder may be given itself (`…/memory`) or found below the given folder.
    let base = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let keep = |relative: &str| {
        let name = relative.rsplit('/').next().unwrap_or(relative);
        let relative = format!("{base}/{relative}");
        match kind {
            SourceKind::AgentsMd => name == "AGENTS.md",
            _ => {
                matches!(name, "CLAUDE.md" | "CLAUDE.local.md")
                    || (name.ends_with(".md")
                        && (relative.starts_with("memory/") || relative.contains("/memory/")))
            }
        }
    };
    for (relative, full) in walk(path, &keep, &mut parsed.unmapped) {
        match read_source(&full) {
            Ok(text) => {
                let key = format!("{}/{relative}", canonical.display());
                let mut one = parse_file(&text, &key, &relative, kind);
                parsed.candidates.append(&mut one.candidates);
                parsed.unmapped.append(&mut one.unmapped);
            }
            Err(why) => parsed.unmapped.push(format!("{relative}: {why}")),
        }
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_become_records_with_guessed_types() {
        let text = "# Project\n\nA Rust service.\n\n## Commands\n\n- `cargo test`\n\n```sh\n# not a heading\n```\n\n## Code style\n\n- snake_case\n@docs/more.md\n\n### Never\n\nNever push to main.\n\n## Empty\n";
        let parsed = parse_instructions(text, "k", "CLAUDE.md", SourceKind::ClaudeMd);
        let summary: Vec<(Option<&str>, MemoryType)> = parsed
            .candidates
            .iter()
            .map(|c| (c.title.as_deref(), c.memory_type))
            .collect();
        assert_eq!(
            summary,
            [
                (Some("Project"), MemoryType::Fact),
                (Some("Commands"), MemoryType::Procedure),
                (Some("Code style"), MemoryType::Preference),
                (Some("Never"), MemoryType::Policy),
            ]
        );
        assert!(parsed.candidates[1].body.contains("# not a heading"));
        assert_eq!(
            parsed.candidates[3].external_id,
            "claude-md:k#project-code-style-never"
        );
        assert!(parsed.unmapped[0].contains("@docs/more.md"));
    }

    #[test]
    fn a_heading_that_spells_a_suffix_does_not_share_its_id() {
        let text = "# A\n\none\n\n# A\n\ntwo\n\n# A 2\n\nthree\n";
        let parsed = parse_instructions(text, "k", "CLAUDE.md", SourceKind::ClaudeMd);
        let ids: Vec<&str> = parsed
            .candidates
            .iter()
            .map(|c| c.external_id.as_str())
            .collect();
        assert_eq!(
            ids,
            ["claude-md:k#a", "claude-md:k#a-2", "claude-md:k#a-2-2"]
        );
    }

    #[test]
    fn a_memory_file_with_a_name_only_is_skipped_with_a_note() {
        let parsed = parse_memory_file("---\nname: n\ndescription: \"\"\n---\n", "k", "m.md")
            .expect("a memory file");
        assert!(parsed.candidates.is_empty());
        assert!(
            parsed.unmapped[0].contains("no text"),
            "{:?}",
            parsed.unmapped
        );
    }
}
