//! `/ui/timeline`: the event log (`GET /v1/log`'s `Engine::activity`), newest first, grouped by
//! day, with each session's start marked; "last session" shows what the latest session did.
//! Filter by actor (who wrote the event — a token's name, `cli`, `hook`, `mcp`, …: the select
//! lists the actors present, read from the `events_actor` index; the filter is the query's, so
//! a rare actor's events are found however many others came after) and by operation (among the
//! events shown). Events written before schema v16 name no actor: they are under "every actor".

use super::layout::page;
use super::{Form, read_page};
use crate::App;
use crate::api::on_engine;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use cairn_store::EventRow;
use maud::{Markup, html};

/// Most events one page shows.
const LIMIT: usize = 500;

pub(crate) async fn handler(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    read_page(app, headers, move |app, signed| {
        let form = Form::query(query.as_deref());
        let last_session = form.flag("last_session");
        let actor = form.get("actor").map(str::to_string);
        let (events, actors) = on_engine(app, &signed.caller, "log", |engine| {
            Ok((
                engine.activity_by(LIMIT, last_session, actor.as_deref())?,
                engine.activity_actors()?,
            ))
        })?;
        let mut operations: Vec<String> = events.iter().map(|e| e.op.clone()).collect();
        operations.sort();
        operations.dedup();
        let wanted = form.get("op").map(str::to_string);
        let shown: Vec<&EventRow> = events
            .iter()
            .rev()
            .filter(|e| wanted.as_deref().is_none_or(|op| e.op == op))
            .collect();
        let content = html! {
            h1 { "Timeline" }
            form.inline method="get" action="/ui/timeline" {
                label { "Actor "
                    select name="actor" {
                        option value="" { "every actor" }
                        @for name in &actors {
                            option value=(name) selected[actor.as_deref() == Some(name.as_str())] { (name) }
                        }
                    }
                }
                label { "Operation "
                    select name="op" {
                        option value="" { "every operation" }
                        @for op in &operations {
                            option value=(op) selected[wanted.as_deref() == Some(op.as_str())] { (op) }
                        }
                    }
                }
                label.check { input type="checkbox" name="last_session" value="1" checked[last_session]; " last session only" }
                button type="submit" { "Show" }
            }
            p.hint {
                (shown.len()) " of the latest " (events.len()) " events"
                @if let Some(actor) = &actor { " by " strong { (actor) } }
                ", newest first."
            }
            (days(&shown))
        };
        Ok(super::layout::html_response(
            StatusCode::OK,
            page("Timeline", Some(signed), "/ui/timeline", content),
        ))
    })
    .await
}

fn days(events: &[&EventRow]) -> Markup {
    let mut groups: Vec<(&str, Vec<&EventRow>)> = Vec::new();
    for event in events {
        let day = event.at.get(..10).unwrap_or(&event.at);
        match groups.last_mut() {
            Some((current, list)) if *current == day => list.push(event),
            _ => groups.push((day, vec![event])),
        }
    }
    html! {
        @for (day, list) in &groups {
            section.day aria-label=(day) {
                h2 { (day) }
                ol.events {
                    @for event in list {
                        li class=(if event.op == "session_start" { "event session" } else { "event" }) {
                            span.time { (event.at.get(11..19).unwrap_or(&event.at)) }
                            " " span.badge { (event.op) }
                            @if let Some(id) = event.memory_id {
                                " " a href=(format!("/ui/records/{id}")) { "#" (id) }
                            }
                            @if !event.actor.is_empty() { " " span.actor { "by " (event.actor) } }
                            @if event.op == "session_start" { " " strong { "a session started" } }
                            @if let Some(status) = event.detail.get("status").and_then(|s| s.as_str()) {
                                " · " (status)
                            }
                        }
                    }
                }
            }
        }
    }
}
