//! `cairn mcp` with `CAIRN_URL`: the same tools, served by the server's `/mcp`. A forwarder of
//! JSON-RPC messages: each line the agent writes on stdin is posted to `/mcp` with the bearer
//! token (the server's MCP endpoint is Streamable HTTP, stateless, answering JSON), and each
//! answer is written back as one line on stdout. Notifications are answered with nothing
//! (`202 Accepted`). A request the server cannot take (down, 401, …) gets a JSON-RPC error with
//! the same message the CLI prints, also said on stderr; the forwarder keeps reading, so the
//! agent sees each failure and the next request tries again.

use super::RemoteError;
use super::commands::Remote;
use anyhow::{Context as _, Result};
use serde_json::{Value, json};
use std::io::{BufRead as _, Write as _};
use std::process::ExitCode;

/// JSON-RPC's "server error" range: the request reached cairn, the server did not take it.
const SERVER_ERROR: i64 = -32000;

pub fn forward(remote: &Remote<'_>) -> Result<ExitCode> {
    let client = remote.client()?;
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    // The version the server agreed on at `initialize` (sent back on every later request, as
    // Streamable HTTP asks), and its session when it keeps one.
    let mut protocol: Option<String> = None;
    let mut session: Option<String> = None;
    for line in stdin.lock().lines() {
        let line = line.context("cannot read the MCP client's messages on stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let message: Option<Value> = serde_json::from_str(&line).ok();
        let initialize = message
            .as_ref()
            .is_some_and(|m| m.get("method").and_then(Value::as_str) == Some("initialize"));
        let mut headers = Vec::new();
        if let Some(version) = &protocol {
            headers.push(("MCP-Protocol-Version", version.clone()));
        }
        if let Some(id) = &session {
            headers.push(("Mcp-Session-Id", id.clone()));
        }
        let answers = match client.send_raw(
            ureq::http::Method::POST,
            "/mcp",
            "application/json",
            "application/json, text/event-stream",
            &headers,
            line.as_bytes(),
        ) {
            // A notification or a response taken: nothing to relay.
            Ok(answer) if answer.status == 202 => Vec::new(),
            Ok(answer) => {
                if answer.session.is_some() {
                    session = answer.session.clone();
                }
                messages(&answer.content_type, &answer.body)
            }
            Err(error) => {
                eprintln!("cairn mcp: {error}");
                refusal(message.as_ref(), &error).into_iter().collect()
            }
        };
        let mut out = stdout.lock();
        for answer in answers {
            if initialize && let Some(version) = answer["result"]["protocolVersion"].as_str() {
                protocol = Some(version.to_string());
            }
            if let Err(error) = writeln!(out, "{answer}").and_then(|()| out.flush()) {
                if error.kind() == std::io::ErrorKind::BrokenPipe {
                    // The agent went away: nothing is left to answer.
                    return Ok(ExitCode::SUCCESS);
                }
                return Err(error).context("cannot write to the MCP client on stdout");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The JSON-RPC messages of an answer: a JSON body (one message or a batch), or the `data:`
/// lines of a server-sent event stream; nothing for an empty body (a notification taken).
fn messages(content_type: &str, body: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(body);
    if content_type.starts_with("text/event-stream") {
        return text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect();
    }
    if text.trim().is_empty() {
        return Vec::new();
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(batch)) => batch,
        Ok(one) => vec![one],
        Err(error) => {
            eprintln!("cairn mcp: the server's answer is not JSON ({error}); dropped");
            Vec::new()
        }
    }
}

/// The JSON-RPC error answering `message` when the server did not take it: only a request (a
/// message with an id and a method) gets one. `data` says what the server answered (its HTTP
/// status and title; `null` status when no answer came).
fn refusal(message: Option<&Value>, error: &RemoteError) -> Option<Value> {
    let message = message?;
    let id = message.get("id")?;
    message.get("method")?;
    Some(json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": SERVER_ERROR,
            "message": error.detail,
            "data": {"status": error.status, "title": error.title},
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_come_from_json_or_event_streams_and_only_requests_get_refusals() {
        assert_eq!(messages("application/json", b""), Vec::<Value>::new());
        assert_eq!(
            messages(
                "application/json",
                br#"{"jsonrpc":"2.0","id":1,"result":{}}"#
            ),
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": {}})]
        );
        assert_eq!(
            messages(
                "text/event-stream",
                b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n"
            ),
            vec![json!({"jsonrpc": "2.0", "id": 2, "result": {}})]
        );
        let down = RemoteError {
            kind: cairn_engine::ErrorKind::Other,
            status: None,
            title: "no answer".into(),
            detail: "down".into(),
            members: serde_json::Map::new(),
        };
        let request = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
        assert_eq!(
            refusal(Some(&request), &down),
            Some(json!({"jsonrpc": "2.0", "id": 7, "error": {
                "code": -32000, "message": "down", "data": {"status": null, "title": "no answer"}
            }}))
        );
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(refusal(Some(&notification), &down), None);
        assert_eq!(refusal(None, &down), None);
    }
}
