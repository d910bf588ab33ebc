//! `/ui/health`: the brain's counts (`GET /v1/stats`), the embedding state, the file's size,
//! growth over time as a chart, and a banner when the model is missing (recall is then
//! lexical-only) with the fix; with `?doctor=1` also the doctor's verdicts (`GET /v1/doctor`:
//! an integrity check reads the whole file, seconds at 100,000 records, so it runs when asked),
//! and with `?sizes=1` the file's size by table and index (`Engine::file_sizes`, SQLite's
//! `dbstat`: it too reads every page, so it too runs when asked).
//! Covers the whole brain, so like the API it needs a session of every project (a token made
//! with `--all`, or `cairn ui`).

use super::chart;
use super::layout::page;
use super::{Form, read_page};
use crate::App;
use crate::api::on_engine;
use crate::problem::Problem;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use cairn_engine::EngineError;
use cairn_store::FileSizes;
use maud::{Markup, html};
use std::collections::BTreeMap;

/// The events read for the growth chart (the newest ones).
const GROWTH_EVENTS: usize = 20_000;

pub(crate) async fn handler(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    read_page(app, headers, move |app, signed| {
        let form = Form::query(query.as_deref());
        let with_doctor = form.flag("doctor");
        let with_sizes = form.flag("sizes");
        if !signed.caller.every_project() {
            return Err(Problem::from_engine(&EngineError::Forbidden {
                role: signed.caller.grant.role.as_str(),
                operation: "health (it covers every project of the brain)".into(),
                needed: "token for every project (`cairn token create --all`), with the same",
            }));
        }
        let (stats, doctor, events) = on_engine(app, &signed.caller, "stats", |engine| {
            Ok((
                engine.stats()?,
                if with_doctor {
                    Some(engine.doctor(false)?)
                } else {
                    None
                },
                engine.activity(GROWTH_EVENTS, false)?,
            ))
        })?;
        // On a reader engine: the walk over every page never holds up a write.
        let sizes = if with_sizes {
            Some(
                app.service
                    .read(&signed.caller.request, "stats", |engine| engine.file_sizes())
                    .map_err(|e| Problem::from_engine(&e))?,
            )
        } else {
            None
        };
        let mut per_day: BTreeMap<String, f64> = BTreeMap::new();
        for event in events.iter().filter(|e| e.op == "remember") {
            *per_day
                .entry(event.at.get(..10).unwrap_or(&event.at).to_string())
                .or_default() += 1.0;
        }
        let mut total = 0.0;
        let growth: Vec<(String, f64)> = per_day
            .into_iter()
            .map(|(day, count)| {
                total += count;
                (day, total)
            })
            .collect();
        let model = app.service.embedder_state();
        let semantic = doctor
            .as_ref()
            .and_then(|d| d.checks.iter().find(|c| c.name == "semantic index"));
        let content = html! {
            h1 { "Health" }
            @if model == Some(false) {
                p.banner role="status" {
                    strong { "Degraded: no embedding model. " }
                    "Recall runs on words only. Fix: " code { "cairn model install" }
                    " (or set " code { "CAIRN_EMBEDDER" } "), then restart the server."
                }
            } @else if model.is_none() {
                p.banner role="status" { "The embedding model is still loading: recall is lexical until it is ready." }
            }
            section aria-labelledby="stats-h" {
                h2 #stats-h { "Counts" }
                dl.meta-list {
                    dt { "records" } dd { (stats.records) }
                    @for (status, count) in &stats.by_status { dt { (status) } dd { (count) } }
                    dt { "projects" } dd { (stats.projects) }
                    dt { "events" } dd { (stats.events) }
                    dt { "history versions" } dd { (stats.history_versions) }
                    dt { "open conflicts" } dd { (stats.open_conflicts) }
                }
                h3 { "By type" }
                dl.meta-list {
                    @for (kind, count) in &stats.by_type { dt { (kind) } dd { (count) } }
                }
            }
            section aria-labelledby="size-h" {
                h2 #size-h { "Size" }
                dl.meta-list {
                    dt { "file" } dd { (bytes(stats.file_bytes)) }
                    dt { "record text" } dd { (bytes(u64::try_from(stats.body_bytes).unwrap_or(0))) }
                }
                (by_table(sizes.as_ref()))
            }
            section aria-labelledby="lag-h" {
                h2 #lag-h { "Embedding" }
                p {
                    "Model: " (match model { None => "loading", Some(true) => "ready", Some(false) => "none" }) ". "
                    @if let Some(check) = semantic { (check.detail) } @else { "The doctor's checks below count the records still waiting for a vector." }
                }
            }
            section aria-labelledby="growth-h" {
                h2 #growth-h { "Growth" }
                (chart::bars("records written, running total per day", &growth))
            }
            section aria-labelledby="doctor-h" {
                h2 #doctor-h { "Doctor" }
                @match &doctor {
                    None => p {
                        a href="/ui/health?doctor=1#doctor-h" { "Run the doctor's checks" }
                        " (they read the whole file: a few seconds on a large brain)."
                    },
                    Some(doctor) => {
                        p { @if doctor.ok { "Every check passes." } @else { strong { "Something needs repair." } " " code { "cairn doctor --repair" } " repairs what it can." } }
                        ul.checks {
                            @for check in &doctor.checks {
                                li class=(if !check.ok { "check bad" } else if check.warning { "check warn" } else { "check" }) {
                                    strong { (if !check.ok { "✗ " } else if check.warning { "! " } else { "✓ " }) (check.name) }
                                    ": " (check.detail)
                                    @if let Some(fix) = &check.fix { " — " code { (fix) } }
                                }
                            }
                        }
                    },
                }
            }
        };
        Ok(super::layout::html_response(
            StatusCode::OK,
            page("Health", Some(signed), "/ui/health", content),
        ))
    })
    .await
}

/// The size by table and index, or the link that measures it.
fn by_table(sizes: Option<&FileSizes>) -> Markup {
    let Some(sizes) = sizes else {
        return html! {
            p {
                a href="/ui/health?sizes=1#size-h" { "Measure the size of each table and index" }
                " (SQLite's dbstat reads every page of the file: a few seconds on a large brain)."
            }
        };
    };
    let file = sizes.page_count * sizes.page_size;
    let share = |n: u64| {
        if file == 0 {
            String::from("0 %")
        } else {
            format!("{:.1} %", n as f64 * 100.0 / file as f64)
        }
    };
    html! {
        div.table-scroll tabindex="0" role="region" aria-label="size by table and index" { table.sizes {
            caption { "By table and index, measured with SQLite's dbstat (" (sizes.page_count) " pages of " (bytes(sizes.page_size)) ")" }
            thead { tr { th scope="col" { "b-tree" } th scope="col" { "kind" } th scope="col" { "size" } th scope="col" { "of the file" } th scope="col" { "holding data" } } }
            tbody {
                @for table in &sizes.tables {
                    tr {
                        th scope="row" { code { (table.name) } }
                        td { @if table.kind == "index" { "index of " code { (table.table) } } @else { (table.kind) } }
                        td { (bytes(table.bytes)) }
                        td { (share(table.bytes)) }
                        td { (bytes(table.used_bytes)) }
                    }
                }
                tr {
                    th scope="row" { "free pages" }
                    td { "free list" }
                    td { (bytes(sizes.free_pages * sizes.page_size)) }
                    td { (share(sizes.free_pages * sizes.page_size)) }
                    td { "0 B" }
                }
                @if sizes.other_pages > 0 {
                    tr {
                        th scope="row" { "other pages" }
                        td { "lock page, pointer maps" }
                        td { (bytes(sizes.other_pages * sizes.page_size)) }
                        td { (share(sizes.other_pages * sizes.page_size)) }
                        td { "—" }
                    }
                }
            }
        } }
    }
}

fn bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}
