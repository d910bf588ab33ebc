//! Printing: human text on a terminal, or the JSON contract with `--json`; errors and exit codes.

use cairn_engine::EngineError;
use serde::Serialize;
use std::process::ExitCode;

/// Exit code 3: the write needs a decision.
pub const REFUSED: u8 = 3;

pub fn print_json<T: Serialize>(value: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("output serializes")
    );
}

pub fn exit_code(error: &anyhow::Error) -> ExitCode {
    match error.downcast_ref::<EngineError>() {
        Some(EngineError::Refused { .. }) => ExitCode::from(REFUSED),
        _ => ExitCode::from(1),
    }
}

pub fn print_error(error: &anyhow::Error, json: bool) {
    let message = error_message(error);
    if json {
        let mut value = serde_json::json!({"status": "error", "error": message});
        if let Some(EngineError::Refused {
            existing, ways_out, ..
        }) = error.downcast_ref::<EngineError>()
        {
            value = serde_json::json!({"status": "refused", "error": message, "existing": existing, "ways_out": ways_out});
        }
        println!("{value}");
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
