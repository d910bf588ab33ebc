//! `/`: search. The form is a plain GET (works without JavaScript); htmx re-runs it as you type
//! (debounced) and swaps in `#results` only. The search is `POST /v1/recall`'s: the same
//! [`RecallBody`] turned into the same engine request, with the access not recorded (a search
//! per keystroke is no use of a record). Each result says why it is there.

use super::layout::{page, text_block};
use super::{Form, Signed, full_or_fragment, read_page};
use crate::App;
use crate::api::{RecallBody, on_engine as run};
use crate::problem::Problem;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use cairn_core::record::{MemoryType, TrustZone};
use cairn_engine::{ListRequest, RecallAnswer};
use maud::{Markup, html};

pub(crate) async fn handler(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    read_page(app, headers.clone(), move |app, signed| {
        let form = Form::query(query.as_deref());
        let results = results(app, signed, &form)?;
        Ok(full_or_fragment(&headers, "results", results, |results| {
            page("Search", Some(signed), "/", search_form(&form, results))
        }))
    })
    .await
}

/// The recall request of the form, exactly as `POST /v1/recall` builds it.
fn recall_body(form: &Form) -> RecallBody {
    RecallBody {
        query: form.get("q").unwrap_or("").to_string(),
        limit: form
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .or(Some(20)),
        scope: form.get("scope").map(str::to_string),
        types: form.all("type"),
        all: form.flag("all"),
        no_touch: true,
        as_of: form.get("as_of").map(str::to_string),
        since: form.get("since").map(str::to_string),
        until: form.get("until").map(str::to_string),
        mode: form.get("mode").map(str::to_string),
        floor: None,
        zone: form.get("zone").map(str::to_string),
    }
}

fn results(app: &App, signed: &Signed, form: &Form) -> Result<Markup, Problem> {
    let Some(_) = form.get("q") else {
        // No query: the latest records of this project, to start from.
        let recent = run(app, &signed.caller, "list", |engine| {
            Ok(engine.list(&ListRequest {
                types: Vec::new(),
                scope: None,
                status: None,
                limit: 20,
                all_projects: false,
            })?)
        })?;
        return Ok(html! {
            section #results aria-live="polite" {
                h2 { "Latest records" }
                @if recent.is_empty() {
                    p { "This brain has no records in this project yet." }
                }
                ol.results {
                    @for memory in &recent {
                        li.result {
                            a.title href=(format!("/ui/records/{}", memory.id)) { (memory.label()) }
                            p.meta {
                                span.badge { (memory.memory_type.as_str()) }
                                " " (memory.scope) " · " (memory.status.as_str()) " · " (memory.created_at)
                            }
                        }
                    }
                }
            }
        });
    };
    let project = form.get("project").map(str::to_string);
    if let Some(named) = &project
        && !signed.caller.every_project()
        && *named != signed.caller.request.project
    {
        return Err(Problem::from_kind(
            cairn_engine::ErrorKind::NotFound,
            format!("no project {named:?} here; this session sees its own project only"),
        ));
    }
    let body = recall_body(form);
    let answer: RecallAnswer = run(app, &signed.caller, "recall", move |engine| {
        let mut request = body.request()?;
        request.project = project;
        Ok(engine.recall(&request)?)
    })?;
    Ok(results_markup(&answer))
}

fn results_markup(answer: &RecallAnswer) -> Markup {
    html! {
        section #results aria-live="polite" {
            @if let Some(degraded) = &answer.degraded {
                p.banner role="status" {
                    "Recall is " (degraded) ": results are ranked by words only (the embedding model is not loaded). "
                    "Run " code { "cairn model install" } " (or set " code { "CAIRN_EMBEDDER" } ") and restart the server for meaning."
                }
            }
            @for warning in &answer.warnings {
                p.banner role="status" { (warning) }
            }
            h2 { (answer.results.len()) " result" @if answer.results.len() != 1 { "s" } " for “" (answer.query) "”" }
            @if let Some(note) = &answer.note {
                p { (note) }
            }
            ol.results {
                @for result in &answer.results {
                    li.result {
                        a.title href=(format!("/ui/records/{}", result.id)) {
                            (result.title.as_deref().unwrap_or("(untitled)")) " #" (result.id)
                        }
                        p.meta {
                            span.badge { (result.memory_type.as_str()) }
                            " " (result.scope)
                            @if let Some(project) = &result.project { " · " (project) } @else { " · personal" }
                            " · " (result.status.as_str()) " · " (result.trust.as_str()) " · " (result.created_at)
                            @if result.review_due { " · " strong { "review due" } }
                            @if let Some(freshness) = &result.freshness { " · " (freshness) }
                            @if let Some(from) = result.superseded_from {
                                " · replaces " a href=(format!("/ui/records/{from}")) { "#" (from) }
                            }
                        }
                        (text_block(&snippet(&result.body, 320)))
                        dl.why aria-label="Why this result" {
                            dt { "lexical rank" } dd { (rank(result.why.lexical_rank)) }
                            dt { "vector rank" } dd { (rank(result.why.vector_rank)) }
                            dt { "relevance" } dd { (format!("{:.3}", result.why.relevance)) }
                            dt { "recency" } dd { (format!("{:.3}", result.why.recency)) }
                            dt { "stakes" } dd { (format!("{:.3}", result.why.stakes)) }
                            dt { "score" } dd { (format!("{:.3}", result.score_norm)) }
                            @if let Some(speaker) = &result.why.speaker { dt { "speaker" } dd { (speaker) } }
                            @if result.why.named_date { dt { "date" } dd { "in the period the query names" } }
                        }
                    }
                }
            }
        }
    }
}

fn rank(rank: Option<u32>) -> String {
    rank.map_or_else(|| "—".to_string(), |r| format!("#{r}"))
}

/// The first `limit` characters of `text`, cut at a character boundary.
fn snippet(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

fn search_form(form: &Form, results: Markup) -> Markup {
    let types = form.all("type");
    html! {
        h1 { "Search" }
        form.search role="search" method="get" action="/"
            hx-get="/" hx-target="#results" hx-select="#results" hx-swap="outerHTML"
            hx-push-url="true" hx-trigger="input changed delay:250ms, change, submit" {
            div.query {
                label for="q" { "What are you looking for?" }
                input #q type="search" name="q" value=(form.raw("q").unwrap_or(""))
                    autocomplete="off" autofocus;
                button type="submit" { "Search" }
            }
            details.filters open[has_filters(form)] {
                summary { "Filters" }
                fieldset {
                    legend { "Type" }
                    div.types {
                        @for memory_type in MemoryType::ALL {
                            label.check {
                                input type="checkbox" name="type" value=(memory_type.as_str())
                                    checked[types.iter().any(|t| t == memory_type.as_str())];
                                " " (memory_type.as_str())
                            }
                        }
                    }
                }
                div.grid {
                    label { "Scope" input type="text" name="scope" value=(form.raw("scope").unwrap_or("")) placeholder="global:…"; }
                    label { "Project" input type="text" name="project" value=(form.raw("project").unwrap_or("")); }
                    label { "Since" input type="text" name="since" value=(form.raw("since").unwrap_or("")) placeholder="2026-01-01 or 30d"; }
                    label { "Until" input type="text" name="until" value=(form.raw("until").unwrap_or("")); }
                    label { "As of" input type="text" name="as_of" value=(form.raw("as_of").unwrap_or("")) placeholder="replay a date"; }
                    label { "Trust zone"
                        select name="zone" {
                            option value="" { "owner (everything)" }
                            @for zone in TrustZone::ALL {
                                option value=(zone.as_str()) selected[form.get("zone") == Some(zone.as_str())] { (zone.as_str()) }
                            }
                        }
                    }
                    label { "Mode"
                        select name="mode" {
                            @for mode in ["hybrid", "lexical", "semantic"] {
                                option value=(mode) selected[form.get("mode").unwrap_or("hybrid") == mode] { (mode) }
                            }
                        }
                    }
                    label.check { input type="checkbox" name="all" value="1" checked[form.flag("all")]; " include superseded and archived" }
                }
            }
        }
        (results)
    }
}

fn has_filters(form: &Form) -> bool {
    [
        "type", "scope", "project", "since", "until", "as_of", "zone", "all",
    ]
    .iter()
    .any(|name| form.get(name).is_some())
}
