//! Markdown folders: basic-memory projects and Obsidian vaults. Each `.md` file becomes one
//! record: title from the frontmatter `title`, else the first `# ` heading, else the file name;
//! the text under it is the body (`[[links]]`, basic-memory observations `- [category] …` and
//! relations `- relates_to [[…]]` are kept as written); `tags`, `type` (when it is a cairn type;
//! otherwise it becomes a tag), `created`/`date` are mapped; the external id is basic-memory's
//! `permalink` when there is one, else the path. Hidden folders (`.obsidian`, `.trash`) and
//! symlinks are not read; other frontmatter keys are reported.

use super::{Candidate, Parsed, id_part, read_source, unreadable, walk};
use crate::Result;
use crate::wiki::page;
use cairn_core::record::MemoryType;
use cairn_core::time::{format_ts, parse_time};
use std::collections::BTreeMap;
use std::path::Path;

const MAPPED: &[&str] = &[
    "title",
    "tags",
    "tag",
    "type",
    "permalink",
    "created",
    "date",
    "summary",
    "description",
];

pub fn read(dir: &Path) -> Result<Parsed> {
    if !std::fs::symlink_metadata(dir)
        .map_err(|e| unreadable(dir, e.to_string()))?
        .is_dir()
    {
        return Err(unreadable(dir, "not a folder".into()));
    }
    let mut parsed = Parsed::default();
    let mut other_keys: BTreeMap<String, usize> = BTreeMap::new();
    let anchor = parse_time("2000-01-01T00:00:00Z", chrono::Utc::now()).expect("valid time");
    let files = walk(
        dir,
        &|relative| relative.ends_with(".md"),
        &mut parsed.unmapped,
    );
    for (relative, full) in files {
        let text = match read_source(&full) {
            Ok(text) => text,
            Err(why) => {
                parsed.unmapped.push(format!("{relative}: {why}; skipped"));
                continue;
            }
        };
        let page = match page::parse(text.as_bytes()) {
            Ok(page) => page,
            Err(error) => {
                parsed
                    .unmapped
                    .push(format!("{relative}: {error}; skipped"));
                continue;
            }
        };
        let fm = &page.frontmatter;
        for (key, _) in &fm.entries {
            if !MAPPED.contains(&key.as_str()) {
                *other_keys.entry(key.clone()).or_default() += 1;
            }
        }
        let stem = relative
            .rsplit('/')
            .next()
            .unwrap_or(&relative)
            .trim_end_matches(".md")
            .replace(['-', '_'], " ");
        let title = fm
            .text("title")
            .or_else(|| page.heading.clone())
            .unwrap_or(stem);
        let mut body = page.body.clone();
        if fm.text("title").is_some()
            && let Some(heading) = &page.heading
            && heading != &title
        {
            body = format!("# {heading}\n\n{body}").trim().to_string();
        }
        if body.is_empty() {
            parsed
                .unmapped
                .push(format!("{relative}: no text under the title; skipped"));
            continue;
        }
        let mut tags: Vec<String> = fm.list("tags");
        tags.extend(fm.list("tag"));
        let mut tags: Vec<String> = tags.iter().map(|t| id_part(t)).collect();
        let memory_type = match fm.text("type") {
            Some(t) => match t.parse::<MemoryType>() {
                Ok(memory_type) => memory_type,
                Err(_) => {
                    tags.push(id_part(&t));
                    MemoryType::Note
                }
            },
            None => MemoryType::Note,
        };
        tags.push("markdown".into());
        let created_at = fm
            .text("created")
            .or_else(|| fm.text("date"))
            .and_then(|at| parse_time(&at, anchor).ok())
            .map(format_ts);
        let external_id = match fm.text("permalink") {
            Some(permalink) => format!("markdown:permalink:{permalink}"),
            None => format!("markdown:{relative}"),
        };
        parsed.candidates.push(Candidate {
            origin: relative.clone(),
            external_id,
            memory_type,
            title: Some(title),
            body,
            summary: fm.text("summary").or_else(|| fm.text("description")),
            tags,
            source: Some(relative),
            created_at,
        });
    }
    for (key, count) in other_keys {
        parsed.unmapped.push(format!(
            "frontmatter key `{key}` ({count} file(s)) not mapped"
        ));
    }
    Ok(parsed)
}
