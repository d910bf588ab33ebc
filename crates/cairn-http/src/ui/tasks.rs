//! `/ui/tasks`: the open tasks (`GET /v1/tasks`), due ones first, and every measure with its
//! readings as a trend chart (`GET /v1/measures`), drawn on the server as SVG.

use super::chart;
use super::layout::{html_response, page};
use super::read_page;
use crate::App;
use crate::api::on_engine;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::html;

pub(crate) async fn handler(State(app): State<App>, headers: HeaderMap) -> Response {
    read_page(app, headers, move |app, signed| {
        let (mut tasks, measures, now) = on_engine(app, &signed.caller, "tasks", |engine| {
            Ok((
                engine.tasks(false)?,
                engine.measures(None)?,
                cairn_core::time::format_ts(engine.now()),
            ))
        })?;
        // Due first (soonest first), then the undated ones.
        tasks.sort_by(|a, b| match (&a.due_at, &b.due_at) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.id.cmp(&b.id),
        });
        let content = html! {
            h1 { "Tasks and measures" }
            section aria-labelledby="tasks-h" {
                h2 #tasks-h { "Open tasks (" (tasks.len()) ")" }
                @if tasks.is_empty() { p { "No open tasks." } }
                ol.results {
                    @for task in &tasks {
                        li.result {
                            strong { (task.title) }
                            p.meta {
                                "#" (task.id) " · " (task.status)
                                @if let Some(due) = &task.due_at {
                                    @if due.as_str() <= now.as_str() { " · " strong { "due " (due) } } @else { " · due " (due) }
                                }
                            }
                            @if let Some(detail) = &task.detail { p { (detail) } }
                        }
                    }
                }
            }
            section aria-labelledby="measures-h" {
                h2 #measures-h { "Measures (" (measures.len()) ")" }
                @if measures.is_empty() { p { "No measures. " code { "cairn measure NAME VALUE" } " records a reading." } }
                @for measure in &measures {
                    article.result {
                        h3 { (measure.name) }
                        p.meta {
                            "last " (chart::trim(measure.last)) @if let Some(unit) = &measure.unit { " " (unit) }
                            " at " (measure.last_at) " · " (measure.readings) " readings · " (measure.trend)
                        }
                        @let points: Vec<(String, f64)> = measure.history.iter()
                            .map(|row| (row.at.clone(), row.value)).collect();
                        (chart::bars(&format!("{} over time", measure.name), &points))
                    }
                }
            }
        };
        Ok(html_response(
            StatusCode::OK,
            page("Tasks", Some(signed), "/ui/tasks", content),
        ))
    })
    .await
}
