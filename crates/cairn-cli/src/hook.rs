//! `cairn hook <event>`: the agent hooks (docs/design.md §11). Reads the client's hook JSON on stdin,
//! answers in the client's JSON on stdout, and never fails the agent: whatever happens it exits
//! 0 within an internal deadline well inside the client's timeout, prints nothing on failure,
//! and logs the error to `hook-errors.log` next to the brain.
//!
//! The JSON shapes of each client's hook payloads live here and nowhere else
//! (research/agent-integration.md B.1; Gemini CLI and Cursor docs for theirs).

use crate::hook_server::HookServer;
use crate::settings::Settings;
use cairn_core::brief::{self, cap_injection};
use cairn_core::capture::is_trivial_prompt;
use cairn_core::hook_payload::HookPayload;
use cairn_engine::{BriefRequest, Engine, Mode};
use clap::Args;
use serde_json::json;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Default byte budget of what `user-prompt-submit` injects.
pub const RECALL_BUDGET: usize = cairn_engine::PROMPT_BUDGET;
/// Hook output never exceeds this many bytes (Claude Code caps hook output at 10,000
/// characters and replaces anything longer with a file path).
pub const OUTPUT_CAP: usize = 9_000;
/// Most hook JSON read from stdin.
const MAX_STDIN: u64 = 4 * 1024 * 1024;
/// The error log rolls over past this size.
const MAX_LOG_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Args)]
pub struct HookArgs {
    /// session-start, user-prompt-submit, stop, pre-compact, session-end (the client's own
    /// event names are accepted too: SessionStart, BeforeAgent, AfterAgent, PreCompress,
    /// sessionStart, afterAgentResponse, …).
    pub event: String,
    /// Which client is calling: claude-code, codex, cursor, gemini (sets the output shape).
    #[arg(long, default_value = "claude-code")]
    pub client: String,
    /// Byte budget of the injected text (session-start: 6144, user-prompt-submit: 2048).
    #[arg(long)]
    pub budget: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    Stop,
    PreCompact,
    SessionEnd,
}

impl HookEvent {
    pub fn parse(given: &str) -> Option<HookEvent> {
        let key: String = given
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        Some(match key.as_str() {
            "sessionstart" => HookEvent::SessionStart,
            "userpromptsubmit" | "beforeagent" | "beforesubmitprompt" => {
                HookEvent::UserPromptSubmit
            }
            "stop" | "afteragent" | "afteragentresponse" | "subagentstop" => HookEvent::Stop,
            "precompact" | "precompress" => HookEvent::PreCompact,
            "sessionend" => HookEvent::SessionEnd,
            _ => return None,
        })
    }

    /// The internal deadline, well inside each client's timeout (Claude Code: 30 s for
    /// UserPromptSubmit, a shared 1.5 s for SessionEnd; the installers set 5–10 s).
    pub fn deadline(self) -> Duration {
        let default = match self {
            HookEvent::SessionStart => 2_000,
            HookEvent::UserPromptSubmit => 1_500,
            HookEvent::Stop | HookEvent::PreCompact => 3_000,
            HookEvent::SessionEnd => 1_000,
        };
        let millis = std::env::var("CAIRN_HOOK_DEADLINE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default);
        Duration::from_millis(millis)
    }

    /// How long Stop, PreCompact and SessionEnd keep taking backlog captures: two fifths of the
    /// deadline, or `CAIRN_HOOK_BACKLOG_MS` (a tuning and test setting: a test that asserts how
    /// much a backlog loop takes sets both, so its verdict never depends on the machine's speed).
    pub fn backlog_budget(self) -> Duration {
        std::env::var("CAIRN_HOOK_BACKLOG_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or_else(|| self.deadline() * 2 / 5)
    }

    /// The event name a client expects back in `hookSpecificOutput`.
    fn output_name(self, client: Client) -> &'static str {
        match (self, client) {
            (HookEvent::UserPromptSubmit, Client::Gemini) => "BeforeAgent",
            (HookEvent::SessionStart, _) => "SessionStart",
            (HookEvent::UserPromptSubmit, _) => "UserPromptSubmit",
            (HookEvent::Stop, _) => "Stop",
            (HookEvent::PreCompact, _) => "PreCompact",
            (HookEvent::SessionEnd, _) => "SessionEnd",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    ClaudeCode,
    Codex,
    Cursor,
    Gemini,
}

impl Client {
    pub fn parse(given: &str) -> Option<Client> {
        match given.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "claude-code" | "claude" => Some(Client::ClaudeCode),
            "codex" => Some(Client::Codex),
            "cursor" => Some(Client::Cursor),
            "gemini" | "gemini-cli" => Some(Client::Gemini),
            _ => None,
        }
    }
}

/// What the worker hands back: text for stdout, or nothing.
type Outcome = Result<Option<String>, String>;

pub fn run_hook(settings: &Settings, hook: &HookArgs) -> ExitCode {
    let log_path = settings
        .db
        .parent()
        .map(|dir| dir.join("hook-errors.log"))
        .unwrap_or_else(|| PathBuf::from("hook-errors.log"));
    let label = format!("{} ({})", hook.event, hook.client);
    let (Some(event), Some(client)) = (HookEvent::parse(&hook.event), Client::parse(&hook.client))
    else {
        log_error(
            &log_path,
            &label,
            "unknown event or client; nothing was done (events: session-start, user-prompt-submit, stop, pre-compact, session-end; clients: claude-code, codex, cursor, gemini)",
        );
        return ExitCode::SUCCESS;
    };
    // A panic anywhere must not print to the agent's terminal; the log gets it.
    let panic_log = log_path.clone();
    let panic_label = label.clone();
    std::panic::set_hook(Box::new(move |info| {
        log_error(&panic_log, &panic_label, &format!("panic: {info}"));
    }));
    // The work runs on this thread and a watchdog ends the process at the deadline, even if
    // the work is still waiting on a lock: an unfinished transaction is rolled back by SQLite,
    // and the agent must not wait for us. (The main thread's allocations grow the heap with
    // `brk`; a worker thread's malloc arena grows by `mprotect`: 775 calls in one prompt hook
    // at 100,000 records, 9 now.)
    let finished = Arc::new(Mutex::new(false));
    let watchdog_finished = Arc::clone(&finished);
    let watchdog_log = log_path.clone();
    let watchdog_label = label.clone();
    std::thread::spawn(move || {
        std::thread::sleep(event.deadline());
        let finished = watchdog_finished
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !*finished {
            log_error(
                &watchdog_log,
                &watchdog_label,
                &format!(
                    "gave up after the internal deadline of {} ms (a locked or slow brain?); the agent went on without cairn",
                    event.deadline().as_millis()
                ),
            );
            // Exits holding the lock: the work can no longer print half an answer.
            std::process::exit(0);
        }
    });
    let started = std::time::Instant::now();
    let mut notes = Vec::new();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        handle(event, client, settings, hook.budget, started, &mut notes)
    }))
    .unwrap_or_else(|_| Err("the hook panicked".to_string()));
    let mut finished = finished
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    *finished = true;
    match outcome {
        Ok(Some(output)) => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            let _ = out.write_all(output.as_bytes());
            let _ = out.write_all(b"\n");
            let _ = out.flush();
        }
        Ok(None) => {}
        Err(error) => log_error(&log_path, &label, &error),
    }
    for note in &notes {
        log_error(&log_path, &label, note);
    }
    std::process::exit(0)
}

fn log_error(path: &Path, label: &str, message: &str) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if std::fs::metadata(path).is_ok_and(|m| m.len() > MAX_LOG_BYTES) {
        let _ = std::fs::rename(path, path.with_extension("log.1"));
    }
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let at = cairn_core::time::format_ts(chrono::Utc::now());
        let flat = message.replace('\n', " ");
        let _ = writeln!(file, "{at} hook {label}: {flat}");
    }
}

fn read_payload() -> Result<HookPayload, String> {
    let mut raw = Vec::new();
    std::io::stdin()
        .take(MAX_STDIN)
        .read_to_end(&mut raw)
        .map_err(|e| format!("cannot read the hook JSON from stdin: {e}"))?;
    HookPayload::parse(&raw).map_err(|e| e.to_string())
}

/// The directory the agent works in: the payload's (`HookPayload::cwd`) when it is one, else
/// our own working directory.
fn working_dir(payload: &HookPayload) -> PathBuf {
    payload
        .cwd
        .as_deref()
        .map(PathBuf::from)
        .filter(|dir| dir.is_dir())
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."))
}

fn open_engine(settings: &Settings, cwd: &Path) -> Result<Engine, String> {
    settings
        .open_in("hook", cwd)
        .map_err(|e| format!("cannot open the brain: {e}"))
}

/// What is left of the hook's deadline, less a margin for printing and exiting.
fn time_left(event: HookEvent, started: std::time::Instant) -> Duration {
    event
        .deadline()
        .saturating_sub(started.elapsed())
        .saturating_sub(Duration::from_millis(50))
}

/// The hook's work. `notes`: what went wrong without costing the agent anything (logged).
fn handle(
    event: HookEvent,
    client: Client,
    settings: &Settings,
    budget: Option<usize>,
    started: std::time::Instant,
    notes: &mut Vec<String>,
) -> Outcome {
    let payload = read_payload()?;
    let cwd = working_dir(&payload);
    let session = payload.session.as_deref().unwrap_or("unknown").to_string();
    if settings.nested_run
        && matches!(
            event,
            HookEvent::Stop | HookEvent::PreCompact | HookEvent::SessionEnd
        )
    {
        // An LLM call cairn started (e.g. `claude -p`) fires the client's hooks too: its turns
        // are cairn's own prompts, never captured, and its end starts no maintenance.
        return Ok(None);
    }
    // `CAIRN_URL`: the brain is the server's, for every hook.
    if let Some(server) = HookServer::remote(settings, &cwd, time_left(event, started)) {
        return remote_hook(
            event, client, settings, &server?, &payload, &session, budget, notes,
        );
    }
    match event {
        HookEvent::SessionStart => {
            let mut engine = open_engine(settings, &cwd)?;
            let brief = engine
                .brief(&BriefRequest {
                    budget: budget.unwrap_or(cairn_engine::DEFAULT_BRIEF_BUDGET),
                    sections: Vec::new(),
                })
                .map_err(|e| format!("brief: {e}"))?;
            if !engine.context().read_only {
                // bookkeeping only: a failure here must not cost the agent its brief
                let _ = engine.note_event(
                    "session_start",
                    json!({"session": session, "source": payload.source, "client": client_name(client)}),
                );
                // passive use: what the brief hands over counts against decay
                let _ = engine.note_surfaced(&brief::record_ids_shown(&brief.assembled.text));
            }
            Ok(Some(inject(event, client, &brief.assembled.text)))
        }
        HookEvent::UserPromptSubmit => {
            let Some(prompt) = payload.prompt.as_deref() else {
                return Ok(None);
            };
            if is_trivial_prompt(prompt) || client == Client::Cursor {
                // Cursor's beforeSubmitPrompt cannot add context; its agent recalls over MCP.
                return Ok(None);
            }
            let budget = budget.unwrap_or(RECALL_BUDGET);
            // The live daemon recalls hybrid (its model is resident); none running: it is
            // started in the background (never waited for) and the file answers, lexically.
            let (route, problem) = crate::daemon::route_quietly(settings);
            notes.extend(problem);
            if let crate::daemon::Route::Daemon(socket) = route {
                // Half of what is left, so the file can still answer if the daemon does not.
                let answered =
                    HookServer::daemon(settings, &socket, &cwd, time_left(event, started) / 2)
                        .and_then(|server| server.prompt(prompt, budget));
                match answered {
                    Ok(text) => return Ok(text.map(|text| inject(event, client, &text))),
                    Err(error) => notes.push(format!(
                        "the daemon did not answer ({error}); recalled from the file, lexically"
                    )),
                }
            }
            let mut engine = open_engine(settings, &cwd)?;
            let found = engine
                .prompt_context(prompt, budget, Mode::Lexical)
                .map_err(|e| format!("recall: {e}"))?;
            if let Some(found) = &found
                && !engine.context().read_only
            {
                // passive use, bookkeeping only: a failure must not cost the agent its context
                let _ = engine.note_surfaced(&found.ids);
            }
            Ok(found.map(|found| inject(event, client, &found.text)))
        }
        HookEvent::Stop | HookEvent::PreCompact => {
            let mut engine = open_engine(settings, &cwd)?;
            // A client that hands the turn over directly (Gemini AfterAgent, Cursor
            // afterAgentResponse) is captured from the payload; Claude Code from its transcript.
            let response = payload.response.as_deref();
            let report = if let Some(response) = response {
                let prompt = payload.prompt.as_deref().unwrap_or("");
                engine.capture_turn(&session, prompt, response)
            } else if let Some(path) = payload.transcript_path.as_deref() {
                capture_with_backlog(
                    &mut engine,
                    &session,
                    Path::new(path),
                    event.backlog_budget(),
                )
                .map(|(report, _)| report)
            } else {
                return Ok(None);
            };
            report.map_err(|e| format!("capture: {e}"))?;
            Ok(None)
        }
        HookEvent::SessionEnd => {
            let mut engine = open_engine(settings, &cwd)?;
            if !engine.context().read_only {
                // The session's last chance: a backlog its Stops did not finish is taken now,
                // within this hook's shorter deadline; what is still left is recorded.
                let mut uncaptured = None;
                if let Some(path) = payload.transcript_path.as_deref()
                    && client == Client::ClaudeCode
                    && Path::new(path).exists()
                {
                    let (report, size) = capture_with_backlog(
                        &mut engine,
                        &session,
                        Path::new(path),
                        event.backlog_budget(),
                    )
                    .map_err(|e| format!("capture at session end: {e}"))?;
                    if report.more {
                        uncaptured = Some(size.saturating_sub(report.offset_after));
                    }
                }
                let mut detail = json!({"session": session, "reason": payload.reason, "client": client_name(client)});
                if let Some(bytes) = uncaptured {
                    detail["uncaptured_bytes"] = bytes.into();
                }
                engine
                    .note_event("session_end", detail)
                    .map_err(|e| format!("session end: {e}"))?;
                // The work a session's end makes due (extraction of its turns, embedding,
                // decay, a dream: `cairn maintain`) runs detached: this hook returns within
                // its deadline whatever the LLM takes.
                crate::commands::lifecycle::spawn_after_session(settings, &engine, &session, &cwd)
                    .map_err(|e| format!("session end: cannot start the maintenance: {e}"))?;
            }
            Ok(None)
        }
    }
}

/// Every hook with `CAIRN_URL`: the server does the work (`/v1/hooks/…`); the transcript is
/// read here and its new lines sent.
#[allow(clippy::too_many_arguments)]
fn remote_hook(
    event: HookEvent,
    client: Client,
    settings: &Settings,
    server: &HookServer,
    payload: &HookPayload,
    session: &str,
    budget: Option<usize>,
    notes: &mut Vec<String>,
) -> Outcome {
    let writes = || {
        if settings.read_only {
            Err("CAIRN_READ_ONLY is set: nothing was sent to the server".to_string())
        } else {
            Ok(())
        }
    };
    match event {
        HookEvent::SessionStart => {
            let text = server.session_start(
                budget.unwrap_or(cairn_engine::DEFAULT_BRIEF_BUDGET),
                session,
                payload.source.as_deref(),
                client_name(client),
            )?;
            Ok(Some(inject(event, client, &text)))
        }
        HookEvent::UserPromptSubmit => {
            let Some(prompt) = payload.prompt.as_deref() else {
                return Ok(None);
            };
            if is_trivial_prompt(prompt) || client == Client::Cursor {
                return Ok(None);
            }
            let text = server.prompt(prompt, budget.unwrap_or(RECALL_BUDGET))?;
            Ok(text.map(|text| inject(event, client, &text)))
        }
        HookEvent::Stop | HookEvent::PreCompact => {
            writes()?;
            if let Some(response) = payload.response.as_deref() {
                server.turn(session, payload.prompt.as_deref().unwrap_or(""), response)?;
            } else if let Some(path) = payload.transcript_path.as_deref() {
                server.capture(session, Path::new(path), event.backlog_budget())?;
            }
            Ok(None)
        }
        HookEvent::SessionEnd => {
            writes()?;
            let mut detail = json!({"session": session, "reason": payload.reason, "client": client_name(client)});
            if let Some(path) = payload.transcript_path.as_deref()
                && client == Client::ClaudeCode
                && Path::new(path).exists()
            {
                let left = server.capture(session, Path::new(path), event.backlog_budget())?;
                if left > 0 {
                    detail["uncaptured_bytes"] = left.into();
                }
            }
            // The server starts the maintenance this end makes due (extraction of its turns,
            // decay, a dream) in the background: its answer does not wait for it.
            if server.session_end(&detail)?.is_none() {
                notes.push(format!(
                    "session {session} ended on a server that starts no maintenance (an older cairn): run `cairn maintain --session {session}` there"
                ));
            }
            Ok(None)
        }
    }
}

/// Captures a transcript, and again while a capture stops at its bound (200 turns, 8 MB) with
/// whole turns left behind it — a backlog: cairn installed in the middle of a long session,
/// hooks that failed for a while — as long as `budget` (two fifths of the hook's deadline,
/// `HookEvent::backlog_budget`) has not passed; the first capture always runs (a capture of
/// 200 turns takes under 0.2 s on a 100,000-record brain). Each capture is its own transaction,
/// so a hook stopped at its deadline loses nothing: the next one goes on from the stored offset.
/// Returns the last capture and the transcript's size.
fn capture_with_backlog(
    engine: &mut Engine,
    session: &str,
    path: &Path,
    budget: Duration,
) -> Result<(cairn_engine::CaptureReport, u64), cairn_engine::EngineError> {
    let started = std::time::Instant::now();
    loop {
        let report = engine.capture_transcript(session, path)?;
        if !report.more || started.elapsed() >= budget {
            let size = std::fs::metadata(path).map_or(report.offset_after, |m| m.len());
            return Ok((report, size));
        }
    }
}

fn client_name(client: Client) -> &'static str {
    match client {
        Client::ClaudeCode => "claude-code",
        Client::Codex => "codex",
        Client::Cursor => "cursor",
        Client::Gemini => "gemini",
    }
}

/// The client's JSON for injected context, capped under the output limit.
fn inject(event: HookEvent, client: Client, text: &str) -> String {
    let text = cap_injection(text, OUTPUT_CAP);
    match client {
        Client::Cursor => json!({"additional_context": text}).to_string(),
        _ => json!({"hookSpecificOutput": {
            "hookEventName": event.output_name(client),
            "additionalContext": text,
        }})
        .to_string(),
    }
}
