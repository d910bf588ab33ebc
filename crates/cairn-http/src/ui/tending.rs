//! `/ui/tending`: what needs a person — the inbox (accept as a record, or dismiss), the review
//! queue (due, open conflicts, stale), and the dream's proposal sets; `/ui/dreams/{id}`: one
//! set, each merge shown as a word diff of the survivor and what it absorbs, each forget
//! candidate beside its twin; accept all, some kinds, or reject. Every action is a CSRF-checked
//! POST running the engine call and checks of the matching `/v1` handler.

use super::layout::{csrf_field, html_response, page, see_other, text_block};
use super::record::word_diff;
use super::{Form, read_page, write_action};
use crate::App;
use crate::api::agent::visible_inbox_item;
use crate::api::lifecycle::known_dream;
use crate::api::{on_engine, remembered, require, visible, whole_brain};
use crate::problem::Problem;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use cairn_core::record::MemoryType;
use cairn_engine::tokens::Role;
use maud::{Markup, html};

/// Records not re-checked for this many days are stale (the API's default).
const STALE_DAYS: u32 = 180;
/// Proposal kinds, in the order they are shown.
const KINDS: [&str; 5] = ["merge", "forget", "decay", "summary", "reflection"];

pub(crate) async fn handler(State(app): State<App>, headers: HeaderMap) -> Response {
    read_page(app, headers, move |app, signed| {
        let (inbox, review, dreams) = on_engine(app, &signed.caller, "review", |engine| {
            let dreams = if signed.caller.every_project() {
                Some(engine.dream_list(20)?)
            } else {
                None
            };
            Ok((engine.inbox(false)?, engine.review_stale(STALE_DAYS)?, dreams))
        })?;
        let write = signed.may_write(app);
        let content = html! {
            h1 { "Tending" }
            section aria-labelledby="inbox-h" {
                h2 #inbox-h { "Inbox (" (inbox.len()) ")" }
                @if inbox.is_empty() { p { "Nothing waiting." } }
                ol.results {
                    @for item in &inbox {
                        li.result {
                            p.meta { span.badge { (item.kind) } " suggested " (item.suggested_type) " · " (item.trust) " · " (item.created_at) }
                            (text_block(&item.body))
                            p.meta { "from " (item.source) }
                            @if write {
                                div.inline {
                                    form.inline method="post" action=(format!("/ui/inbox/{}/accept", item.id)) {
                                        (csrf_field(signed))
                                        label { "as "
                                            select name="type" {
                                                @for kind in MemoryType::ALL {
                                                    option value=(kind.as_str()) selected[kind.as_str() == item.suggested_type] { (kind.as_str()) }
                                                }
                                            }
                                        }
                                        button type="submit" { "Accept" }
                                    }
                                    form method="post" action=(format!("/ui/inbox/{}/dismiss", item.id)) {
                                        (csrf_field(signed))
                                        button.secondary type="submit" { "Dismiss" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            section aria-labelledby="review-h" {
                h2 #review-h { "Review" }
                h3 { "Due (" (review.due.len()) ")" }
                (record_list(&review.due))
                h3 { "Open conflicts (" (review.conflicts.len()) ")" }
                ul {
                    @for conflict in &review.conflicts {
                        li {
                            a href=(format!("/ui/records/{}", conflict.memory_id)) { "#" (conflict.memory_id) }
                            " and " a href=(format!("/ui/records/{}", conflict.other_id)) { "#" (conflict.other_id) }
                            ": " (conflict.reason)
                        }
                    }
                }
                h3 { "Not verified in " (STALE_DAYS) " days (" (review.stale.len()) ")" }
                (record_list(&review.stale))
            }
            section aria-labelledby="dreams-h" {
                h2 #dreams-h { "Dreams" }
                @match &dreams {
                    None => p { "Dreams cover every project of the brain: they need a session of every project (a token made with " code { "--all" } ", or " code { "cairn ui" } ")." },
                    Some(dreams) if dreams.is_empty() => p { "No proposal sets. " code { "cairn dream" } " makes one." },
                    Some(dreams) => ul {
                        @for dream in dreams {
                            li {
                                a href=(format!("/ui/dreams/{}", dream.id)) { "Dream " (dream.id) }
                                " · " (dream.status) " · " (dream.created_at) " · " (dream.proposals.len()) " proposals"
                            }
                        }
                    },
                }
            }
        };
        Ok(html_response(
            StatusCode::OK,
            page("Tending", Some(signed), "/ui/tending", content),
        ))
    })
    .await
}

fn record_list(records: &[cairn_core::memory::Memory]) -> Markup {
    html! {
        @if records.is_empty() { p { "None." } }
        ul {
            @for memory in records {
                li { a href=(format!("/ui/records/{}", memory.id)) { (memory.label()) } " · " (memory.memory_type.as_str()) }
            }
        }
    }
}

/// `POST /ui/inbox/{id}/{accept|dismiss}`.
pub(crate) async fn inbox_action(
    State(app): State<App>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    write_action(app, headers, body, move |app, signed, form| {
        let id = id
            .parse::<i64>()
            .map_err(|_| not_found(&format!("no inbox item {id:?}")))?;
        let operation = match action.as_str() {
            "accept" => "inbox accept",
            "dismiss" => "inbox dismiss",
            _ => return Err(not_found(&format!("no inbox action {action:?}"))),
        };
        require(&signed.caller, Role::Write, operation)?;
        on_engine(app, &signed.caller, operation, |engine| {
            visible_inbox_item(engine, id)?;
            if operation == "inbox accept" {
                let memory_type = form
                    .get("type")
                    .map(str::parse::<MemoryType>)
                    .transpose()
                    .map_err(cairn_engine::EngineError::from)?;
                remembered(engine.inbox_accept(id, memory_type)?)?;
            } else {
                engine.inbox_dismiss(id)?;
            }
            Ok(())
        })?;
        Ok(see_other("/ui/tending"))
    })
    .await
}

fn not_found(detail: &str) -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "not-found", detail.to_string())
}

/// `GET /ui/dreams/{id}`.
pub(crate) async fn dream(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    read_page(app, headers, move |app, signed| {
        whole_brain(&signed.caller, "dream show")?;
        let (view, records) = on_engine(app, &signed.caller, "dream show", |engine| {
            known_dream(engine, &id)?;
            let view = engine.dream_show(&id)?;
            // The records the proposals name, as they are now (text for the diffs).
            let mut records = std::collections::HashMap::new();
            for proposal in &view.proposals {
                for id in proposal_ids(proposal) {
                    if let Ok(memory) = visible(engine, &signed.caller, id) {
                        records.insert(id, memory);
                    }
                }
            }
            Ok((view, records))
        })?;
        let pending = view.status == "proposed" || view.status == "partial";
        let write = signed.may_write(app) && pending;
        let body_of = |id: i64| records.get(&id).map(|m| m.body.as_str()).unwrap_or("");
        let content = html! {
            h1 { "Dream " (view.id) }
            p.meta { (view.status) " · made " (view.created_at) @if let Some(at) = &view.decided_at { " · decided " (at) } }
            @for kind in KINDS {
                @let proposals: Vec<_> = view.proposals.iter().filter(|p| p.kind == kind).collect();
                @if !proposals.is_empty() {
                    section aria-label=(kind) {
                        h2 { (kind) " (" (proposals.len()) ")" }
                        ol.results {
                            @for proposal in &proposals {
                                li.result {
                                    @if let Some(outcome) = &proposal.outcome { p.meta { (outcome) } }
                                    (proposal_markup(proposal, &body_of))
                                }
                            }
                        }
                    }
                }
            }
            @if view.proposals.is_empty() { p { "This set proposes nothing." } }
            @if write {
                section.actions aria-labelledby="decide-h" {
                    h2 #decide-h { "Decide" }
                    form.stack method="post" action=(format!("/ui/dreams/{}/accept", view.id)) {
                        (csrf_field(signed))
                        fieldset {
                            legend { "Accept only these kinds (none ticked: all)" }
                            @for kind in KINDS {
                                @if view.proposals.iter().any(|p| p.kind == kind) {
                                    label.check { input type="checkbox" name="only" value=(kind); " " (kind) }
                                }
                            }
                        }
                        button type="submit" { "Accept" }
                    }
                    form method="post" action=(format!("/ui/dreams/{}/reject", view.id)) {
                        (csrf_field(signed))
                        button.danger type="submit" { "Reject the whole set" }
                    }
                }
            }
        };
        Ok(html_response(
            StatusCode::OK,
            page(&format!("Dream {}", view.id), Some(signed), "/ui/tending", content),
        ))
    })
    .await
}

fn proposal_ids(proposal: &cairn_store::ProposalRow) -> Vec<i64> {
    let mut ids: Vec<i64> = proposal
        .targets
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("id").and_then(serde_json::Value::as_i64))
        .collect();
    if let Some(twin) = proposal
        .payload
        .get("twin")
        .and_then(serde_json::Value::as_i64)
    {
        ids.push(twin);
    }
    ids
}

fn record_link(id: i64) -> Markup {
    html! { a href=(format!("/ui/records/{id}")) { "#" (id) } }
}

fn proposal_markup<'a>(
    proposal: &cairn_store::ProposalRow,
    body_of: &dyn Fn(i64) -> &'a str,
) -> Markup {
    let payload = &proposal.payload;
    let int = |key: &str| payload.get(key).and_then(serde_json::Value::as_i64);
    match proposal.kind.as_str() {
        "merge" => {
            let survivor = int("survivor").unwrap_or(0);
            let merged: Vec<i64> = payload
                .get("merged")
                .and_then(|m| m.as_array())
                .into_iter()
                .flatten()
                .filter_map(|m| m.get("id").and_then(serde_json::Value::as_i64))
                .collect();
            html! {
                p { "Keep " (record_link(survivor)) "; merge into it: "
                    @for (index, id) in merged.iter().enumerate() { @if index > 0 { ", " } (record_link(*id)) } }
                @for id in &merged {
                    p.hint { "What " (record_link(*id)) " says beyond " (record_link(survivor)) ":" }
                    div.text.diff { (word_diff(body_of(survivor), body_of(*id))) }
                }
            }
        }
        "forget" => {
            let target = proposal_ids(proposal).first().copied().unwrap_or(0);
            let twin = int("twin");
            html! {
                p { "Forget " (record_link(target)) @if let Some(twin) = twin { ", covered by its twin " (record_link(twin)) } }
                div.twins {
                    div { h3 { "#" (target) } (text_block(body_of(target))) }
                    @if let Some(twin) = twin { div { h3 { "twin #" (twin) } (text_block(body_of(twin))) } }
                }
            }
        }
        _ => html! {
            p { "On " @for (index, id) in proposal_ids(proposal).iter().enumerate() { @if index > 0 { ", " } (record_link(*id)) } }
            @if let Some(title) = payload.get("title").and_then(|t| t.as_str()) { p { strong { (title) } } }
            @if let Some(body) = payload.get("body").and_then(|t| t.as_str()) { (text_block(body)) }
            @if let Some(reason) = payload.get("reason").and_then(|t| t.as_str()) { p.hint { (reason) } }
        },
    }
}

/// `POST /ui/dreams/{id}/{accept|reject}`.
pub(crate) async fn dream_action(
    State(app): State<App>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    write_action(app, headers, body, move |app, signed, form: &Form| {
        let operation = match action.as_str() {
            "accept" => "dream accept",
            "reject" => "dream reject",
            _ => return Err(not_found(&format!("no dream action {action:?}"))),
        };
        require(&signed.caller, Role::Write, operation)?;
        whole_brain(&signed.caller, operation)?;
        on_engine(app, &signed.caller, operation, |engine| {
            known_dream(engine, &id)?;
            if operation == "dream accept" {
                engine.dream_accept(&id, &form.all("only"))?;
            } else {
                engine.dream_reject(&id)?;
            }
            Ok(())
        })?;
        Ok(see_other(&format!("/ui/dreams/{id}")))
    })
    .await
}
