//! The agent's own tables over a server (`review`, `inbox`, `task`, `measure`, `log`,
//! `identity`, `awareness`): each handler sends the command's request to its `/v1` endpoint,
//! reads the answer back into the struct the local command prints, and prints it with the
//! local command's printer (`commands::agent::print_*`), so both paths print the same.

use super::commands::{Remote, read, with_query, writable};
use crate::commands::agent::{
    self as local, AwarenessCommand, IdentityCommand, InboxCommand, LogArgs, MeasureCommand,
    TaskCommand,
};
use anyhow::Result;
use cairn_core::memory::Memory;
use cairn_engine::{ErrorKind, MeasureSummary, RememberOutcome, ReviewReport};
use cairn_store::{AwarenessRow, EventRow, IdentityRow, InboxRow, TaskRow};
use serde_json::json;
use std::process::ExitCode;

/// `true` as a query value, nothing when false (the server's default).
fn flag(on: bool) -> String {
    if on { "true".into() } else { String::new() }
}

pub fn review(remote: &Remote<'_>, stale_days: u32) -> Result<ExitCode> {
    let client = remote.client()?;
    let path = with_query("/v1/review", &[("stale_days", stale_days.to_string())]);
    let report: ReviewReport = read(&client, client.get(&path)?, "a review report")?;
    local::print_review(remote.settings, &report);
    Ok(ExitCode::SUCCESS)
}

pub fn inbox(remote: &Remote<'_>, command: Option<&InboxCommand>) -> Result<ExitCode> {
    match command.unwrap_or(&InboxCommand::List { all: false }) {
        InboxCommand::List { all } => {
            let client = remote.client()?;
            let path = with_query("/v1/inbox", &[("all", flag(*all))]);
            let rows: Vec<InboxRow> = read(&client, client.get(&path)?, "inbox items")?;
            local::print_inbox(remote.settings, &rows);
            Ok(ExitCode::SUCCESS)
        }
        InboxCommand::Accept { id, memory_type } => {
            writable(remote, "inbox accept")?;
            let client = remote.writer()?;
            let body = json!({ "type": memory_type.map(|t| t.as_str()) });
            let outcome: RememberOutcome = match client
                .post(&format!("/v1/inbox/{id}/accept"), &body)
            {
                Ok(answer) => read(&client, answer, "a remember outcome")?,
                // A refused write (a near duplicate) is an answer: exit 3, as locally.
                Err(error)
                    if error.kind == ErrorKind::Refused && error.member("outcome").is_some() =>
                {
                    let outcome = error.member("outcome").cloned().unwrap_or_default();
                    read(&client, outcome, "a remember outcome")?
                }
                Err(error) => return Err(error.into()),
            };
            Ok(local::print_inbox_accepted(remote.settings, &outcome))
        }
        InboxCommand::Dismiss { id } => {
            writable(remote, "inbox dismiss")?;
            let client = remote.client()?;
            let answer = client.post_empty(&format!("/v1/inbox/{id}/dismiss"))?;
            let row: InboxRow = read(&client, answer, "an inbox item")?;
            local::print_inbox_dismissed(remote.settings, &row);
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub fn task(remote: &Remote<'_>, command: &TaskCommand) -> Result<ExitCode> {
    match command {
        TaskCommand::Add {
            title,
            detail,
            due,
            personal,
        } => {
            writable(remote, "task add")?;
            let client = remote.client()?;
            let body = json!({"title": title, "detail": detail, "due": due, "personal": personal});
            let task: TaskRow = read(&client, client.post("/v1/tasks", &body)?, "a task")?;
            local::print_task(remote.settings, &task, "added");
        }
        TaskCommand::List { all } => {
            let client = remote.client()?;
            let path = with_query("/v1/tasks", &[("all", flag(*all))]);
            let tasks: Vec<TaskRow> = read(&client, client.get(&path)?, "tasks")?;
            local::print_tasks(remote.settings, &tasks);
        }
        TaskCommand::Done { id } => {
            writable(remote, "task done")?;
            let client = remote.client()?;
            let answer = client.post_empty(&format!("/v1/tasks/{id}/done"))?;
            let task: TaskRow = read(&client, answer, "a task")?;
            local::print_task(remote.settings, &task, "done");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn measure(remote: &Remote<'_>, command: &MeasureCommand) -> Result<ExitCode> {
    let client = remote.client()?;
    match command {
        MeasureCommand::Record {
            name,
            value,
            unit,
            note,
        } => {
            writable(remote, "measure record")?;
            let body = json!({"name": name, "value": value, "unit": unit, "note": note});
            let answer = client.post("/v1/measures", &body)?;
            let summary: MeasureSummary = read(&client, answer, "a measure")?;
            local::print_measures(remote.settings, std::slice::from_ref(&summary), true);
        }
        MeasureCommand::Show { name } => {
            let path = with_query(
                "/v1/measures",
                &[("name", name.clone().unwrap_or_default())],
            );
            let summaries: Vec<MeasureSummary> = read(&client, client.get(&path)?, "measures")?;
            local::print_measures(remote.settings, &summaries, false);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn log(remote: &Remote<'_>, args: &LogArgs) -> Result<ExitCode> {
    let client = remote.client()?;
    let path = with_query(
        "/v1/log",
        &[
            ("limit", args.limit.to_string()),
            ("last_session", flag(args.last_session)),
            ("actor", args.actor.clone().unwrap_or_default()),
        ],
    );
    let events: Vec<EventRow> = read(&client, client.get(&path)?, "events")?;
    // The text names each event's record as the local log does: one read per record shown
    // (at most `--limit`), only for text; a record gone since is named by the event's detail.
    let record = |id: i64| -> Option<Memory> {
        let answer = client.get(&format!("/v1/records/{id}")).ok()?;
        serde_json::from_value(answer).ok()
    };
    if remote.settings.json {
        local::print_log(remote.settings, &events, |_| None);
    } else {
        local::print_log(remote.settings, &events, record);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn identity(remote: &Remote<'_>, command: &IdentityCommand) -> Result<ExitCode> {
    let client = remote.client()?;
    let answer = match command {
        IdentityCommand::Show => client.get("/v1/identity")?,
        IdentityCommand::Set { text } => {
            writable(remote, "identity set")?;
            let text = local::identity_text(text)?;
            client.put("/v1/identity", &json!({ "text": text }))?
        }
    };
    let identity: Option<IdentityRow> = read(&client, answer, "an identity")?;
    local::print_identity(remote.settings, identity.as_ref());
    Ok(ExitCode::SUCCESS)
}

/// `POST /v1/awareness`'s answer.
#[derive(serde::Deserialize)]
struct Aware {
    item: AwarenessRow,
    dropped: Option<AwarenessRow>,
}

/// `DELETE /v1/awareness/{id}`'s answer.
#[derive(serde::Deserialize)]
struct Dropped {
    dropped: bool,
}

pub fn awareness(remote: &Remote<'_>, command: &AwarenessCommand) -> Result<ExitCode> {
    let client = remote.client()?;
    match command {
        AwarenessCommand::Add { text, expires } => {
            writable(remote, "awareness add")?;
            let body = json!({"text": text, "expires": expires});
            let answer: Aware = read(
                &client,
                client.post("/v1/awareness", &body)?,
                "an awareness item",
            )?;
            local::print_aware(remote.settings, &answer.item, answer.dropped.as_ref());
        }
        AwarenessCommand::List => {
            let rows: Vec<AwarenessRow> =
                read(&client, client.get("/v1/awareness")?, "awareness items")?;
            local::print_awareness(remote.settings, &rows);
        }
        AwarenessCommand::Drop { id } => {
            writable(remote, "awareness drop")?;
            let answer = client.delete(&format!("/v1/awareness/{id}"))?;
            let answer: Dropped = read(&client, answer, "an awareness drop")?;
            local::print_awareness_dropped(remote.settings, *id, answer.dropped);
        }
    }
    Ok(ExitCode::SUCCESS)
}
