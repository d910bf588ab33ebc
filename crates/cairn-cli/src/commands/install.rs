//! `cairn install claude-code | codex | cursor | gemini [--dry-run] [--uninstall]`: writes the
//! hook and MCP configuration where each client reads it.
//!
//! Idempotent (a second install changes nothing), keeps a backup of every file it changes,
//! prints a diff instead with `--dry-run`, and refuses — touching nothing — when an existing
//! file is not valid JSON or TOML. Only entries that run cairn are ever added or removed; the
//! rest of a file keeps its content and key order.

use crate::ojson::Json;
use crate::settings::Settings;
use crate::values;
use anyhow::{Context as _, Result, bail};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The client to configure.
    #[arg(value_parser = values::client())]
    pub client: String,
    /// Print what would change (a diff per file) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Remove cairn's entries instead.
    #[arg(long)]
    pub uninstall: bool,
    /// The command the client runs (default: this binary's absolute path).
    #[arg(long, value_name = "PATH")]
    pub command: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Toml,
}

/// One file the installer manages, with its content before and after.
struct Change {
    path: PathBuf,
    before: Option<String>,
    after: Option<String>,
}

struct HookSpec {
    /// The client's event name.
    event: &'static str,
    /// cairn's event name.
    cairn_event: &'static str,
    matcher: Option<&'static str>,
    /// Seconds for Claude Code, milliseconds for Gemini CLI.
    timeout: i64,
}

const CLAUDE_HOOKS: &[HookSpec] = &[
    HookSpec {
        event: "SessionStart",
        cairn_event: "session-start",
        matcher: Some("startup|resume|clear|compact"),
        timeout: 10,
    },
    HookSpec {
        event: "UserPromptSubmit",
        cairn_event: "user-prompt-submit",
        matcher: None,
        timeout: 5,
    },
    HookSpec {
        event: "Stop",
        cairn_event: "stop",
        matcher: None,
        timeout: 10,
    },
    HookSpec {
        event: "PreCompact",
        cairn_event: "pre-compact",
        matcher: Some("auto|manual"),
        timeout: 10,
    },
    HookSpec {
        event: "SessionEnd",
        cairn_event: "session-end",
        matcher: None,
        timeout: 5,
    },
];

const GEMINI_HOOKS: &[HookSpec] = &[
    HookSpec {
        event: "SessionStart",
        cairn_event: "session-start",
        matcher: None,
        timeout: 10_000,
    },
    HookSpec {
        event: "BeforeAgent",
        cairn_event: "user-prompt-submit",
        matcher: None,
        timeout: 5_000,
    },
    HookSpec {
        event: "AfterAgent",
        cairn_event: "stop",
        matcher: None,
        timeout: 10_000,
    },
    HookSpec {
        event: "PreCompress",
        cairn_event: "pre-compact",
        matcher: None,
        timeout: 10_000,
    },
    HookSpec {
        event: "SessionEnd",
        cairn_event: "session-end",
        matcher: None,
        timeout: 5_000,
    },
];

const CURSOR_HOOKS: &[HookSpec] = &[
    HookSpec {
        event: "sessionStart",
        cairn_event: "session-start",
        matcher: None,
        timeout: 10,
    },
    HookSpec {
        event: "afterAgentResponse",
        cairn_event: "stop",
        matcher: None,
        timeout: 10,
    },
    HookSpec {
        event: "preCompact",
        cairn_event: "pre-compact",
        matcher: None,
        timeout: 10,
    },
    HookSpec {
        event: "sessionEnd",
        cairn_event: "session-end",
        matcher: None,
        timeout: 5,
    },
];

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set: cannot find the client's configuration")
}

/// Quotes `word` for a POSIX shell when it needs it.
fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@,".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Whether a hook handler's command is one of cairn's.
fn is_cairn_command(command: &str) -> bool {
    command.contains("cairn") && command.contains(" hook ")
}

fn read_existing(path: &Path, format: Format) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            if !text.trim().is_empty() {
                let valid = match format {
                    Format::Json => Json::parse(&text).map(|_| ()).map_err(|e| e.to_string()),
                    Format::Toml => text
                        .parse::<toml_edit::DocumentMut>()
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                };
                if let Err(error) = valid {
                    bail!(
                        "{} is not valid {}: {}; nothing was changed — fix or move the file, then run the installer again",
                        path.display(),
                        if format == Format::Json {
                            "JSON"
                        } else {
                            "TOML"
                        },
                        error.lines().next().unwrap_or("")
                    );
                }
            }
            Ok(Some(text))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn parse_json(text: Option<&str>) -> Json {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        Some(text) => Json::parse(text).unwrap_or_else(|_| Json::object()),
        None => Json::object(),
    }
}

/// After an uninstall, a JSON file left with nothing in it is removed (the backup keeps it).
fn json_after(json: &Json, uninstall: bool) -> Option<String> {
    let only_version =
        matches!(json, Json::Object(entries) if entries.iter().all(|(k, _)| k == "version"));
    if uninstall && (json.is_empty_container() || only_version) {
        return None;
    }
    Some(json.to_pretty())
}

fn set_mcp_server(config: &mut Json, command: &str, with_type: bool, uninstall: bool) {
    if uninstall {
        if let Some(servers) = config.get_mut("mcpServers") {
            servers.remove("cairn");
            if servers.is_empty_container() {
                config.remove("mcpServers");
            }
        }
        return;
    }
    let mut server = Json::object();
    if with_type {
        server.set("type", Json::str("stdio"));
    }
    server.set("command", Json::str(command));
    server.set("args", Json::Array(vec![Json::str("mcp")]));
    server.set("env", Json::object());
    if let Some(servers) = config.entry("mcpServers", Json::object()) {
        servers.set("cairn", server);
    }
}

/// Claude Code and Gemini CLI: `hooks.<Event>` is a list of matcher groups, each with a list
/// of command handlers.
fn set_grouped_hooks(
    config: &mut Json,
    specs: &[HookSpec],
    command_for: impl Fn(&HookSpec) -> String,
    gemini: bool,
    uninstall: bool,
) {
    let hooks = match config.entry("hooks", Json::object()) {
        Some(hooks) if matches!(hooks, Json::Object(_)) => hooks,
        _ => return,
    };
    for spec in specs {
        let groups = hooks.entry(spec.event, Json::Array(Vec::new()));
        let Some(groups) = groups.and_then(Json::as_array_mut) else {
            continue;
        };
        // drop cairn's handlers (and groups left empty by that) before adding ours again
        for group in groups.iter_mut() {
            if let Some(handlers) = group.get_mut("hooks").and_then(Json::as_array_mut) {
                handlers.retain(|h| {
                    !h.get("command")
                        .and_then(Json::as_str)
                        .is_some_and(is_cairn_command)
                });
            }
        }
        groups.retain(|group| {
            group
                .get("hooks")
                .is_none_or(|handlers| !handlers.is_empty_container())
        });
        if !uninstall {
            let mut handler = Json::object();
            if gemini {
                handler.set("name", Json::str(&format!("cairn-{}", spec.cairn_event)));
            }
            handler.set("type", Json::str("command"));
            handler.set("command", Json::str(&command_for(spec)));
            handler.set("timeout", Json::int(spec.timeout));
            let mut group = Json::object();
            if let Some(matcher) = spec.matcher {
                group.set("matcher", Json::str(matcher));
            }
            group.set("hooks", Json::Array(vec![handler]));
            groups.push(group);
        }
    }
    let Json::Object(entries) = hooks else { return };
    entries.retain(|(_, groups)| !groups.is_empty_container());
    if hooks.is_empty_container() {
        config.remove("hooks");
    }
}

/// Cursor: `{"version": 1, "hooks": {"event": [{"command": …}]}}`.
fn set_cursor_hooks(config: &mut Json, command_for: impl Fn(&HookSpec) -> String, uninstall: bool) {
    if config.get("version").is_none() && !uninstall {
        config.set("version", Json::int(1));
    }
    let Some(hooks) = config.entry("hooks", Json::object()) else {
        return;
    };
    for spec in CURSOR_HOOKS {
        let Some(handlers) = hooks
            .entry(spec.event, Json::Array(Vec::new()))
            .and_then(Json::as_array_mut)
        else {
            continue;
        };
        handlers.retain(|h| {
            !h.get("command")
                .and_then(Json::as_str)
                .is_some_and(is_cairn_command)
        });
        if !uninstall {
            let mut handler = Json::object();
            handler.set("command", Json::str(&command_for(spec)));
            handler.set("timeout", Json::int(spec.timeout));
            handlers.push(handler);
        }
    }
    if let Json::Object(entries) = hooks {
        entries.retain(|(_, handlers)| !handlers.is_empty_container());
    }
    if config.get("hooks").is_some_and(Json::is_empty_container) {
        config.remove("hooks");
    }
}

fn codex_toml(before: Option<&str>, command: &str, uninstall: bool) -> Result<Option<String>> {
    let mut doc: toml_edit::DocumentMut = before
        .unwrap_or("")
        .parse()
        .context("the Codex configuration is not valid TOML")?;
    if uninstall {
        let mut now_empty = false;
        if let Some(servers) = doc
            .get_mut("mcp_servers")
            .and_then(|item| item.as_table_like_mut())
        {
            servers.remove("cairn");
            now_empty = servers.is_empty();
        }
        if now_empty {
            doc.remove("mcp_servers");
        }
        let text = doc.to_string();
        return Ok((!text.trim().is_empty()).then_some(text));
    }
    if doc.get("mcp_servers").is_none() {
        let mut servers = toml_edit::Table::new();
        servers.set_implicit(true);
        doc.insert("mcp_servers", toml_edit::Item::Table(servers));
    }
    let servers = doc["mcp_servers"]
        .as_table_mut()
        .context("`mcp_servers` in the Codex configuration is not a table; nothing was changed")?;
    let mut server = toml_edit::Table::new();
    server.insert("command", toml_edit::value(command));
    let mut args = toml_edit::Array::new();
    args.push("mcp");
    server.insert("args", toml_edit::value(args));
    servers.insert("cairn", toml_edit::Item::Table(server));
    Ok(Some(doc.to_string()))
}

fn plan(client: &str, command: &str, uninstall: bool) -> Result<(Vec<Change>, Vec<String>)> {
    let home = home()?;
    let quoted = shell_quote(command);
    let mut changes = Vec::new();
    let mut notes = Vec::new();
    match client {
        "claude-code" | "claude" => {
            let config_dir = std::env::var_os("CLAUDE_CONFIG_DIR")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(".claude"));
            let settings = config_dir.join("settings.json");
            let state = home.join(".claude.json");
            let settings_before = read_existing(&settings, Format::Json)?;
            let state_before = read_existing(&state, Format::Json)?;
            let mut settings_json = parse_json(settings_before.as_deref());
            set_grouped_hooks(
                &mut settings_json,
                CLAUDE_HOOKS,
                |spec| format!("{quoted} hook {}", spec.cairn_event),
                false,
                uninstall,
            );
            let mut state_json = parse_json(state_before.as_deref());
            set_mcp_server(&mut state_json, command, true, uninstall);
            changes.push(Change {
                after: json_after(&settings_json, uninstall),
                path: settings,
                before: settings_before,
            });
            changes.push(Change {
                after: json_after(&state_json, uninstall),
                path: state,
                before: state_before,
            });
        }
        "gemini" | "gemini-cli" => {
            let settings = home.join(".gemini").join("settings.json");
            let before = read_existing(&settings, Format::Json)?;
            let mut json = parse_json(before.as_deref());
            set_mcp_server(&mut json, command, false, uninstall);
            set_grouped_hooks(
                &mut json,
                GEMINI_HOOKS,
                |spec| format!("{quoted} hook {} --client gemini", spec.cairn_event),
                true,
                uninstall,
            );
            changes.push(Change {
                after: json_after(&json, uninstall),
                path: settings,
                before,
            });
            notes.push("Gemini CLI runs hooks only where hooks are enabled in its settings (see docs/agents.md)".into());
        }
        "cursor" => {
            let mcp = home.join(".cursor").join("mcp.json");
            let hooks = home.join(".cursor").join("hooks.json");
            let mcp_before = read_existing(&mcp, Format::Json)?;
            let hooks_before = read_existing(&hooks, Format::Json)?;
            let mut mcp_json = parse_json(mcp_before.as_deref());
            set_mcp_server(&mut mcp_json, command, false, uninstall);
            let mut hooks_json = parse_json(hooks_before.as_deref());
            set_cursor_hooks(
                &mut hooks_json,
                |spec| format!("{quoted} hook {} --client cursor", spec.cairn_event),
                uninstall,
            );
            changes.push(Change {
                after: json_after(&mcp_json, uninstall),
                path: mcp,
                before: mcp_before,
            });
            changes.push(Change {
                after: json_after(&hooks_json, uninstall),
                path: hooks,
                before: hooks_before,
            });
            notes.push("Cursor cannot add context to a prompt from a hook: its agent recalls through the MCP `recall` tool".into());
        }
        "codex" => {
            let codex_home = std::env::var_os("CODEX_HOME")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(".codex"));
            let config = codex_home.join("config.toml");
            let before = read_existing(&config, Format::Toml)?;
            let after = codex_toml(before.as_deref(), command, uninstall)?;
            changes.push(Change {
                path: config,
                before,
                after,
            });
            notes.push("Codex has no session hooks: its agent gets the brief and recalls through the MCP `brief` and `recall` tools".into());
        }
        other => bail!("unknown client {other:?}: expected claude-code, codex, cursor or gemini"),
    }
    Ok((changes, notes))
}

/// A unified-style line diff (small files: a plain LCS table is enough).
pub fn diff(path: &Path, before: &str, after: &str) -> String {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = format!(
        "--- {}\n+++ {} (after cairn install)\n",
        path.display(),
        path.display()
    );
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!(" {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("-{}\n", a[i]));
            i += 1;
        }
    }
    out
}

fn write_atomically(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let temporary = path.with_extension("cairn-tmp");
    std::fs::write(&temporary, text)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

pub fn run(settings: &Settings, install: &InstallArgs) -> Result<ExitCode> {
    let command = match &install.command {
        Some(command) => command.clone(),
        None => std::env::current_exe()
            .context("cannot find this binary's path: pass --command PATH")?
            .display()
            .to_string(),
    };
    let (changes, notes) = plan(&install.client, &command, install.uninstall)?;
    let stamp = chrono::Utc::now().format("%Y%m%d%H%M%S").to_string();
    let mut report = Vec::new();
    for change in &changes {
        let unchanged = change.before.as_deref().map(str::trim)
            == change.after.as_deref().map(str::trim)
            || (change.before.is_none() && change.after.is_none());
        let path = change.path.display().to_string();
        if unchanged {
            report.push(serde_json::json!({"path": path, "status": "unchanged"}));
            continue;
        }
        let before = change.before.as_deref().unwrap_or("");
        let after = change.after.as_deref().unwrap_or("");
        if install.dry_run {
            if !settings.json {
                out!("{}", diff(&change.path, before, after));
            }
            report.push(serde_json::json!({"path": path, "status": "would change", "diff": diff(&change.path, before, after)}));
            continue;
        }
        let backup = match &change.before {
            Some(text) => {
                let backup = PathBuf::from(format!("{path}.cairn-backup-{stamp}"));
                std::fs::write(&backup, text)
                    .with_context(|| format!("cannot write the backup {}", backup.display()))?;
                Some(backup.display().to_string())
            }
            None => None,
        };
        match &change.after {
            Some(text) => write_atomically(&change.path, text)?,
            None => std::fs::remove_file(&change.path)
                .with_context(|| format!("cannot remove {path}"))?,
        }
        report.push(serde_json::json!({
            "path": path,
            "status": if change.after.is_none() { "removed" } else if change.before.is_none() { "created" } else { "updated" },
            "backup": backup,
        }));
    }
    if settings.json {
        crate::output::print_json(&serde_json::json!({
            "client": install.client, "command": command, "uninstall": install.uninstall,
            "dry_run": install.dry_run, "files": report, "notes": notes,
        }));
        return Ok(ExitCode::SUCCESS);
    }
    for entry in &report {
        let status = entry["status"].as_str().unwrap_or("");
        if install.dry_run && status == "would change" {
            continue;
        }
        match entry["backup"].as_str() {
            Some(backup) => outln!(
                "{status} {} (backup: {backup})",
                entry["path"].as_str().unwrap_or("")
            ),
            None => outln!("{status} {}", entry["path"].as_str().unwrap_or("")),
        }
    }
    if install.dry_run {
        outln!("(dry run: nothing was changed)");
    }
    for note in &notes {
        outln!("note: {note}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_only_when_needed() {
        assert_eq!(shell_quote("/usr/local/bin/cairn"), "/usr/local/bin/cairn");
        assert_eq!(shell_quote("/home/a b/cairn"), "'/home/a b/cairn'");
        assert_eq!(shell_quote("/x/it's"), "'/x/it'\\''s'");
    }

    #[test]
    fn a_diff_marks_added_and_removed_lines() {
        let out = diff(Path::new("f"), "a\nb\nc\n", "a\nc\nd\n");
        assert!(out.contains(" a\n-b\n c\n+d\n"), "{out}");
    }
}
