//! Printing: human text on a terminal, or the JSON contract with `--json`; errors and exit codes.

use crate::remote::RemoteError;
use cairn_engine::EngineError;
use serde::Serialize;
use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;

/// Exit code 3: the write needs a decision.
pub const REFUSED: u8 = cairn_service::errors::EXIT_REFUSED;

/// Exit status when stdout was closed under us (`cairn recall … | head`): what a process killed
/// by SIGPIPE reports to a shell (128 + 13), without a panic or a message.
pub const BROKEN_PIPE: u8 = 141;

/// Writes to stdout (`outln!` / `out!`). When the reader has gone away (EPIPE), the process
/// ends now with `BROKEN_PIPE` and no message; any other write error is reported once on
/// stderr with exit 1. Every write before it was already committed, so nothing is lost.
pub fn write_stdout(text: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout.write_fmt(text) {
        stdout_failed(&error);
    }
}

/// Ends the process after a failed write to stdout (see `write_stdout`).
pub fn stdout_failed(error: &std::io::Error) -> ! {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(BROKEN_PIPE));
    }
    eprintln!("cairn: cannot write to stdout: {error}");
    std::process::exit(1);
}

/// Whether `error` comes from writing to a closed pipe (an export streamed into `head`).
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

pub fn print_json<T: Serialize>(value: &T) {
    outln!(
        "{}",
        serde_json::to_string_pretty(value).expect("output serializes")
    );
}

/// The exit code of a failed command: the service layer's one table (`cairn_service::errors`),
/// by the error's kind.
pub fn exit_code(error: &anyhow::Error) -> ExitCode {
    if let Some(remote) = error.downcast_ref::<RemoteError>() {
        return ExitCode::from(remote.exit_code());
    }
    if error
        .downcast_ref::<crate::settings::PostgresNotServed>()
        .is_some()
    {
        return ExitCode::from(crate::settings::EXIT_CONFIG);
    }
    match error.downcast_ref::<EngineError>() {
        Some(error) => ExitCode::from(cairn_service::errors::exit_code(error.kind())),
        None => ExitCode::from(1),
    }
}

pub fn print_error(error: &anyhow::Error, json: bool) {
    let message = error_message(error);
    if json {
        let mut value = serde_json::json!({"status": "error", "error": message});
        match error.downcast_ref::<EngineError>() {
            Some(EngineError::Refused {
                existing, ways_out, ..
            }) => {
                value = serde_json::json!({"status": "refused", "error": message, "existing": existing, "ways_out": ways_out});
            }
            // A write to a read-only brain is refused (exit 3), with no record and no way out
            // from inside (`CAIRN_READ_ONLY`, a nested LLM run).
            Some(EngineError::ReadOnly { .. }) => {
                value = serde_json::json!({"status": "refused", "error": message, "existing": null, "ways_out": []});
            }
            _ => {}
        }
        if let Some(remote) = error.downcast_ref::<RemoteError>()
            && remote.kind == cairn_engine::ErrorKind::Refused
        {
            // The same answer as a local refusal: the server's problem carries both members.
            let member = |key: &str| remote.member(key).cloned().unwrap_or_default();
            let ways_out = match member("ways_out") {
                serde_json::Value::Null => serde_json::json!([]),
                ways => ways,
            };
            value = serde_json::json!({"status": "refused", "error": message, "existing": member("existing"), "ways_out": ways_out});
        }
        outln!("{value}");
    }
    eprintln!("cairn: {message}");
}

fn error_message(error: &anyhow::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

/// First `max` characters of `text` on one line.
pub fn snippet(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max).collect();
    cut.push('…');
    cut
}

/// A progress callback: a bar on a terminal (stderr), nothing otherwise.
pub fn progress_bar(label: &'static str) -> impl FnMut(usize, usize) {
    let mut bar: Option<indicatif::ProgressBar> = None;
    let terminal = std::io::stderr().is_terminal();
    move |done, total| {
        if !terminal || total == 0 {
            return;
        }
        let bar = bar.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::new(total as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} [{bar:30}] {pos}/{len} ({per_sec}, eta {eta})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_message(label);
            bar
        });
        bar.set_position(done as u64);
        if done >= total {
            bar.finish_and_clear();
        }
    }
}
