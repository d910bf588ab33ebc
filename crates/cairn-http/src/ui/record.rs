//! `/ui/records/{id}`: one record in full — text, metadata, review date, the supersession
//! chain both ways, open conflicts, graph neighbours, its history with a word diff between any
//! two versions — and its actions (edit, supersede, forget, restore, verify), each a POST that
//! runs the `/v1` handler's own function (`api::update_record` and the rest), so it lands in
//! the history like any other change.

use super::layout::{csrf_field, page, see_other, source_markup, text_block};
use super::{Form, Signed, read_page, write_action};
use crate::App;
use crate::api::{
    SupersedeBody, UpdateBody, forget_record, on_engine, require, restore_record, supersede_record,
    update_record, verify_record, visible,
};
use crate::problem::Problem;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use cairn_core::memory::Memory;
use cairn_core::record::Status;
use cairn_engine::graph::{NeighborsAnswer, NeighborsRequest};
use cairn_engine::tokens::Role;
use cairn_store::{ConflictRow, HistoryRow};
use maud::{Markup, html};
use similar::{Algorithm, DiffOp};

/// The longest supersession chain followed each way.
const CHAIN_LIMIT: usize = 50;

fn record_id(text: &str) -> Result<i64, Problem> {
    text.trim_start_matches('#')
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| {
            Problem::new(
                StatusCode::NOT_FOUND,
                "not-found",
                format!("`{text}` is not a record id (a positive number)"),
            )
        })
}

/// Everything the page shows, read in one engine call.
struct View {
    memory: Memory,
    history: Vec<HistoryRow>,
    conflicts: Vec<ConflictRow>,
    older: Vec<Memory>,
    newer: Vec<Memory>,
    merged_into: Option<i64>,
    surfaced_at: Option<String>,
    /// Recall's verdict against the working tree (the local owner's checkout only).
    freshness: Option<String>,
    neighbours: Option<NeighborsAnswer>,
    now: String,
}

pub(crate) async fn handler(
    State(app): State<App>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    read_page(app, headers, move |app, signed| {
        let id = record_id(&id)?;
        let form = Form::query(query.as_deref());
        let view = on_engine(app, &signed.caller, "show", |engine| {
            let memory = visible(engine, &signed.caller, id)?;
            let mut older = Vec::new();
            let mut back = memory.supersedes;
            while let Some(previous) = back
                && older.len() < CHAIN_LIMIT
            {
                match visible(engine, &signed.caller, previous) {
                    Ok(record) => {
                        back = record.supersedes;
                        older.push(record);
                    }
                    Err(_) => break,
                }
            }
            let mut newer = Vec::new();
            let mut forward = memory.superseded_by;
            while let Some(next) = forward
                && newer.len() < CHAIN_LIMIT
            {
                match visible(engine, &signed.caller, next) {
                    Ok(record) => {
                        forward = record.superseded_by;
                        newer.push(record);
                    }
                    Err(_) => break,
                }
            }
            // A record no relation touches has no neighbourhood: not an error for this page.
            let neighbours = engine
                .neighbors(&NeighborsRequest::new(format!("#{id}")))
                .ok();
            Ok(View {
                history: engine.history(id)?,
                conflicts: engine.conflicts_of(id)?,
                merged_into: engine.merged_into(id)?,
                surfaced_at: engine.surfaced_at(id)?,
                freshness: engine.freshness_of(&memory),
                now: cairn_core::time::format_ts(engine.now()),
                memory,
                older,
                newer,
                neighbours,
            })
        })?;
        let title = view.memory.label();
        Ok(super::layout::html_response(
            StatusCode::OK,
            page(&title, Some(signed), "", content(app, signed, &view, &form)),
        ))
    })
    .await
}

fn content(app: &App, signed: &Signed, view: &View, form: &Form) -> Markup {
    let memory = &view.memory;
    let review_due = memory
        .review_at
        .as_deref()
        .is_some_and(|at| at <= view.now.as_str());
    html! {
        article.record {
            h1 {
                (memory.title.as_deref().unwrap_or("(untitled)"))
                " " span.id { "#" (memory.id) }
            }
            p.meta {
                span.badge { (memory.memory_type.as_str()) }
                " " span.status { (memory.status.as_str()) }
                @if memory.pinned { " · pinned" }
                @if let Some(survivor) = view.merged_into {
                    " · merged into " a href=(format!("/ui/records/{survivor}")) { "#" (survivor) }
                }
            }
            @if let Some(summary) = &memory.summary {
                p.summary { (summary) }
            }
            section aria-labelledby="body-h" {
                h2 #body-h { "Text" }
                (text_block(&memory.body))
            }
            section aria-labelledby="fresh-h" {
                h2 #fresh-h { "Freshness" }
                p {
                    @match &memory.review_at {
                        Some(at) if review_due => { strong { "Review due" } " since " (at) "." }
                        Some(at) => { "Next review " (at) "." }
                        None => { "No review date." }
                    }
                    @if let Some(expires) = &memory.expires_at { " Expires " (expires) "." }
                    @if let Some(commit) = &memory.commit { " Written at commit " code { (short(commit)) } "." }
                    @if let Some(verdict) = &view.freshness { " " strong { (verdict) } }
                    @if let Some(at) = &view.surfaced_at { " Last handed to an agent " (at) "." }
                }
            }
            section aria-labelledby="meta-h" {
                h2 #meta-h { "Metadata" }
                dl.meta-list {
                    dt { "scope" } dd { (memory.scope) }
                    dt { "project" } dd { (memory.project.as_deref().unwrap_or("personal (every project)")) }
                    dt { "tags" } dd { @if memory.tags.is_empty() { "—" } @else { (memory.tags.join(", ")) } }
                    dt { "importance" } dd { (memory.importance) }
                    dt { "confidence" } dd { (memory.confidence.as_str()) }
                    dt { "trust" } dd { (memory.trust.as_str()) }
                    dt { "trust zone" } dd { (memory.trust_zone.as_str()) }
                    dt { "sensitivity" } dd { (memory.sensitivity.as_str()) }
                    dt { "source" } dd { @match &memory.source { Some(source) => (source_markup(source)), None => "—" } }
                    dt { "created" } dd { (memory.created_at) }
                    dt { "updated" } dd { (memory.updated_at) }
                    dt { "valid from" } dd { (memory.valid_from) }
                    dt { "last used" } dd { (memory.last_accessed_at.as_deref().unwrap_or("never")) " (" (memory.use_count) " uses)" }
                    @if let Some(external) = &memory.external_id { dt { "external id" } dd { (external) } }
                }
            }
            section aria-labelledby="chain-h" {
                h2 #chain-h { "Supersession" }
                @if view.older.is_empty() && view.newer.is_empty() {
                    p { "This record replaces nothing and nothing replaces it." }
                } @else {
                    ol.chain {
                        @for record in view.older.iter().rev() {
                            li { a href=(format!("/ui/records/{}", record.id)) { (record.label()) } " (" (record.status.as_str()) ")" }
                        }
                        li aria-current="true" { strong { (memory.label()) } " (this record)" }
                        @for record in &view.newer {
                            li { a href=(format!("/ui/records/{}", record.id)) { (record.label()) } " (" (record.status.as_str()) ")" }
                        }
                    }
                }
            }
            section aria-labelledby="conflicts-h" {
                h2 #conflicts-h { "Open conflicts" }
                @if view.conflicts.is_empty() {
                    p { "None." }
                } @else {
                    ul {
                        @for conflict in &view.conflicts {
                            @let other = if conflict.memory_id == memory.id { conflict.other_id } else { conflict.memory_id };
                            li { "with " a href=(format!("/ui/records/{other}")) { "#" (other) } ": " (conflict.reason) " (" (conflict.created_at) ")" }
                        }
                    }
                }
            }
            section aria-labelledby="graph-h" {
                h2 #graph-h { "Graph neighbours" }
                @match &view.neighbours {
                    Some(answer) if !answer.neighbors.is_empty() => {
                        ul {
                            @for neighbour in &answer.neighbors {
                                li {
                                    @if neighbour.node.kind == cairn_core::graph::NodeKind::Record {
                                        a href=(format!("/ui/records/{}", neighbour.node.id)) { (neighbour.node.describe()) }
                                    } @else {
                                        (neighbour.node.describe())
                                    }
                                    " — " (neighbour.relation) " (" (neighbour.edge) ", hop " (neighbour.hop) ")"
                                }
                            }
                        }
                    }
                    _ => { p { "No relations." } }
                }
            }
            (history(view, form))
            @if signed.may_write(app) {
                (actions(signed, memory))
            }
        }
    }
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// Every version of the record: the earlier ones from its history, then the current one.
fn versions(view: &View) -> Vec<(i64, String, String, String, String, String)> {
    let mut versions: Vec<_> = view
        .history
        .iter()
        .map(|row| {
            let text = |key: &str| {
                row.snapshot
                    .get(key)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            (
                row.version,
                row.at.clone(),
                row.op.clone(),
                row.actor.clone(),
                text("title"),
                text("body"),
            )
        })
        .collect();
    let next = versions.iter().map(|v| v.0).max().unwrap_or(0) + 1;
    versions.push((
        next,
        view.memory.updated_at.clone(),
        "current".to_string(),
        String::new(),
        view.memory.title.clone().unwrap_or_default(),
        view.memory.body.clone(),
    ));
    versions
}

fn history(view: &View, form: &Form) -> Markup {
    let versions = versions(view);
    let last = versions.len() - 1;
    let pick = |name: &str, default: usize| {
        form.get(name)
            .and_then(|v| v.parse::<i64>().ok())
            .and_then(|wanted| versions.iter().position(|v| v.0 == wanted))
            .unwrap_or(default)
    };
    let to = pick("to", last);
    let from = pick("from", to.saturating_sub(1));
    html! {
        section #history aria-labelledby="history-h" {
            h2 #history-h { "History" }
            ol.history {
                @for version in &versions {
                    li {
                        "v" (version.0) " · " (version.1) " · " (version.2)
                        @if !version.3.is_empty() { " by " (version.3) }
                    }
                }
            }
            @if versions.len() > 1 {
                form.inline method="get" action=(format!("/ui/records/{}#history", view.memory.id)) {
                    label { "From " select name="from" {
                        @for (index, version) in versions.iter().enumerate() {
                            option value=(version.0) selected[index == from] { "v" (version.0) " " (version.2) }
                        }
                    } }
                    label { " to " select name="to" {
                        @for (index, version) in versions.iter().enumerate() {
                            option value=(version.0) selected[index == to] { "v" (version.0) " " (version.2) }
                        }
                    } }
                    " " button type="submit" { "Compare" }
                }
                h3 { "v" (versions[from].0) " → v" (versions[to].0) }
                @if versions[from].4 != versions[to].4 {
                    p { "Title: " (word_diff(&versions[from].4, &versions[to].4)) }
                }
                div.text.diff { (word_diff(&versions[from].5, &versions[to].5)) }
            }
        }
    }
}

/// Words and the white space between them, in order.
fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = None;
    for (at, c) in text.char_indices() {
        let space = c.is_whitespace();
        if in_space.is_some_and(|was| was != space) {
            out.push(&text[start..at]);
            start = at;
        }
        in_space = Some(space);
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// A word diff: removed words in `<del>`, added ones in `<ins>`, all of it escaped text.
pub(crate) fn word_diff(old: &str, new: &str) -> Markup {
    let old_words = words(old);
    let new_words = words(new);
    let ops = similar::capture_diff_slices(Algorithm::Myers, &old_words, &new_words);
    html! {
        @for op in &ops {
            @match *op {
                DiffOp::Equal { old_index, len, .. } => { (old_words[old_index..old_index + len].concat()) }
                DiffOp::Delete { old_index, old_len, .. } => { del { (old_words[old_index..old_index + old_len].concat()) } }
                DiffOp::Insert { new_index, new_len, .. } => { ins { (new_words[new_index..new_index + new_len].concat()) } }
                DiffOp::Replace { old_index, old_len, new_index, new_len } => {
                    del { (old_words[old_index..old_index + old_len].concat()) }
                    ins { (new_words[new_index..new_index + new_len].concat()) }
                }
            }
        }
    }
}

fn actions(signed: &Signed, memory: &Memory) -> Markup {
    let base = format!("/ui/records/{}", memory.id);
    html! {
        section.actions aria-labelledby="actions-h" {
            h2 #actions-h { "Actions" }
            details {
                summary { "Edit" }
                form.stack method="post" action=(format!("{base}/edit")) {
                    (csrf_field(signed))
                    label for="edit-title" { "Title" }
                    input #edit-title type="text" name="title" value=(memory.title.as_deref().unwrap_or(""));
                    label for="edit-body" { "Text" }
                    textarea #edit-body name="body" rows="8" { (memory.body) }
                    label for="edit-tags" { "Tags " span.hint { "(comma-separated)" } }
                    input #edit-tags type="text" name="tags" value=(memory.tags.join(", "));
                    label for="edit-importance" { "Importance (1–5)" }
                    input #edit-importance type="number" min="1" max="5" name="importance" value=(memory.importance);
                    label for="edit-review" { "Review on " span.hint { "(date, or an age ahead as 30d)" } }
                    input #edit-review type="text" name="review" value=(memory.review_at.as_deref().unwrap_or(""));
                    button type="submit" { "Save" }
                }
            }
            @if memory.status == Status::Active {
                details {
                    summary { "Supersede" }
                    form.stack method="post" action=(format!("{base}/supersede")) {
                        (csrf_field(signed))
                        label for="sup-body" { "The claim's new text" }
                        textarea #sup-body name="body" rows="6" required { (memory.body) }
                        label for="sup-source" { "Source " span.hint { "(optional)" } }
                        input #sup-source type="text" name="source";
                        button type="submit" { "Supersede" }
                    }
                }
                form.stack method="post" action=(format!("{base}/verify")) {
                    (csrf_field(signed))
                    label for="verify-source" { "Checked against" }
                    input #verify-source type="text" name="source" required placeholder="URL, file:line, checked by hand";
                    button type="submit" { "Verify" }
                }
                form method="post" action=(format!("{base}/forget")) {
                    (csrf_field(signed))
                    button.danger type="submit" { "Forget (archive)" }
                }
            } @else if memory.status == Status::Archived {
                form method="post" action=(format!("{base}/restore")) {
                    (csrf_field(signed))
                    button type="submit" { "Restore" }
                }
            }
        }
    }
}

/// `POST /ui/records/{id}/{action}`.
pub(crate) async fn action(
    State(app): State<App>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    write_action(app, headers, body, move |app, signed, form| {
        let id = record_id(&id)?;
        let operation: &'static str = match action.as_str() {
            "edit" => "update",
            "supersede" => "supersede",
            "forget" => "forget",
            "restore" => "restore",
            "verify" => "verify",
            _ => {
                return Err(Problem::new(
                    StatusCode::NOT_FOUND,
                    "no-route",
                    format!("no action {action:?} on a record"),
                ));
            }
        };
        // The role check of the API's handlers, before anything else: a read token's write
        // is refused here whatever the page showed.
        require(&signed.caller, Role::Write, operation)?;
        let caller = &signed.caller;
        let landing = on_engine(app, caller, operation, |engine| match operation {
            "update" => {
                let tags = form.raw("tags").map(|tags| {
                    tags.split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                });
                let importance = match form.get("importance") {
                    None => None,
                    Some(text) => Some(text.parse::<u8>().map_err(|_| {
                        Problem::bad_request(format!(
                            "importance {text:?} is not a number from 1 to 5; nothing was changed"
                        ))
                    })?),
                };
                let args = UpdateBody {
                    title: form.raw("title").map(str::to_string),
                    body: form.raw("body").map(str::to_string),
                    summary: None,
                    tags,
                    importance,
                    confidence: None,
                    source: None,
                    memory_type: None,
                    pinned: None,
                    review: form.get("review").map(str::to_string),
                    expires: None,
                };
                update_record(engine, caller, id, args).map(|answer| answer.id)
            }
            "supersede" => {
                let args = SupersedeBody {
                    body: form.raw("body").unwrap_or("").to_string(),
                    title: None,
                    memory_type: None,
                    source: form.get("source").map(str::to_string),
                    fork_ok: false,
                };
                supersede_record(engine, caller, id, args).map(|outcome| outcome.id.unwrap_or(id))
            }
            "forget" => forget_record(engine, caller, id, false).map(|answer| answer.id),
            "restore" => restore_record(engine, caller, id).map(|answer| answer.id),
            _ => verify_record(engine, caller, id, form.get("source").unwrap_or(""))
                .map(|answer| answer.id),
        })?;
        Ok(see_other(&format!("/ui/records/{landing}#history")))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_diff_marks_what_changed_and_escapes_it() {
        let markup = word_diff("the port is 7777", "the port is <b>8080</b>").into_string();
        assert!(markup.contains("<del>7777</del>"), "{markup}");
        assert!(
            markup.contains("<ins>&lt;b&gt;8080&lt;/b&gt;</ins>"),
            "{markup}"
        );
        assert!(markup.starts_with("the port is "));
    }

    #[test]
    fn words_keep_every_character() {
        let text = "  two  words\nand more ";
        assert_eq!(words(text).concat(), text);
        assert_eq!(words("a b"), vec!["a", " ", "b"]);
    }
}
