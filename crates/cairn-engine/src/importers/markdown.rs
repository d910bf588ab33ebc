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
        match parse_file(&relative, &text, anchor) {
            Ok((candidate, unmapped_keys)) => {
                for key in unmapped_keys {
                    *other_keys.entry(key).or_default() += 1;
                }
                parsed.candidates.push(candidate);
            }
            Err(why) => parsed.unmapped.push(format!("{relative}: {why}; skipped")),
        }
    }
    for (key, count) in other_keys {
        parsed.unmapped.push(format!(
            "frontmatter key `{key}` ({count} file(s)) not mapped"
        ));
    }
    Ok(parsed)
}

/// One Markdown file (`relative` is its path under the folder, `/`-separated) as a candidate,
/// with the frontmatter keys it had that are not mapped; `Err` says why the file is skipped.
/// `anchor` is the time relative dates in `created`/`date` are read against.
pub fn parse_file(
    relative: &str,
    text: &str,
    anchor: chrono::DateTime<chrono::Utc>,
) -> std::result::Result<(Candidate, Vec<String>), String> {
    let page = page::parse(text.as_bytes()).map_err(|error| error.to_string())?;
    let fm = &page.frontmatter;
    let unmapped_keys: Vec<String> = fm
        .entries
        .iter()
        .map(|(key, _)| key)
        .filter(|key| !MAPPED.contains(&key.as_str()))
        .cloned()
        .collect();
    let stem = relative
        .rsplit('/')
        .next()
        .unwrap_or(relative)
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
        return Err("no text under the title".into());
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
    let candidate = Candidate {
        origin: relative.to_string(),
        external_id,
        memory_type,
        title: Some(title),
        body,
        summary: fm.text("summary").or_else(|| fm.text("description")),
        tags,
        source: Some(relative.to_string()),
        created_at,
    };
    Ok((candidate, unmapped_keys))
}
