//! The optional LLM consolidation calls (summaries, reflections): a shell command that gets the
//! prompt on stdin and replies on stdout (`llm.command`, e.g. `claude -p`), or an
//! OpenAI-compatible chat endpoint (`llm.url` + `llm.model`, key from the environment). Both
//! are bounded by one timeout; a failure, a hang or a reply that is not usable text is an
//! error the dream reports — it never changes anything.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest reply accepted, in bytes; a longer one is treated as garbage.
pub const MAX_REPLY_BYTES: usize = 4_000;

/// The marker every process cairn spawns for an LLM carries (with `CAIRN_READ_ONLY=1`): a
/// `cairn` started inside it — the CLI, a hook, `cairn mcp` — refuses every write, even if the
/// LLM's tools unset `CAIRN_READ_ONLY`, and a hook does no capture and starts no maintenance
/// (a `claude -p` run fires the client's hooks too). An LLM reads untrusted stored text; it
/// must not hold a write channel into the brain (the lethal trifecta, docs/lifecycle.md).
pub const NESTED_RUN_ENV: &str = "CAIRN_NESTED_RUN";

/// Whether this process runs inside an LLM call cairn started ([`NESTED_RUN_ENV`] set to
/// anything but empty or `0`).
pub fn in_nested_run() -> bool {
    std::env::var_os(NESTED_RUN_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Where LLM calls go.
#[derive(Clone)]
pub enum LlmConfig {
    Command {
        command: String,
        timeout: Duration,
    },
    Http {
        url: String,
        model: String,
        api_key: Option<String>,
        timeout: Duration,
    },
}

impl std::fmt::Debug for LlmConfig {
    // The key never reaches Debug output or logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LlmConfig::Command { command, timeout } => f
                .debug_struct("Command")
                .field("command", command)
                .field("timeout", timeout)
                .finish(),
            LlmConfig::Http {
                url,
                model,
                api_key,
                timeout,
            } => f
                .debug_struct("Http")
                .field("url", url)
                .field("model", model)
                .field("api_key", &api_key.as_ref().map(|_| "<set>"))
                .field("timeout", timeout)
                .finish(),
        }
    }
}

impl LlmConfig {
    /// A short description for reports (never the key).
    pub fn describe(&self) -> String {
        match self {
            LlmConfig::Command { command, .. } => format!("command `{command}`"),
            LlmConfig::Http { url, model, .. } => format!("{model} at {url}"),
        }
    }

    /// Sends `prompt`, returns the reply checked to be usable text. An `https://` URL trusts
    /// the built-in roots plus the CA file of `CAIRN_CA_FILE` / `SSL_CERT_FILE`.
    pub fn complete(&self, prompt: &str) -> Result<String, String> {
        self.complete_trusting(prompt, cairn_embed::tls::ca_file_from_env().as_deref())
    }

    /// [`LlmConfig::complete`] with the extra CA file given rather than read from the
    /// environment (`None`: the built-in roots only).
    pub fn complete_trusting(
        &self,
        prompt: &str,
        ca_file: Option<&std::path::Path>,
    ) -> Result<String, String> {
        check_reply(&self.raw_reply(prompt, ca_file, MAX_REPLY_BYTES * 4)?)
    }

    /// Sends `prompt` and returns the reply as sanitized text of at most `max_bytes`, without
    /// the prose check: for replies that are data (extraction's JSON), validated by the caller.
    pub fn complete_data(&self, prompt: &str, max_bytes: usize) -> Result<String, String> {
        let raw = self.raw_reply(
            prompt,
            cairn_embed::tls::ca_file_from_env().as_deref(),
            max_bytes,
        )?;
        if raw.len() > max_bytes {
            return Err(format!(
                "the reply is over the limit of {max_bytes} bytes; it was discarded"
            ));
        }
        let text = std::str::from_utf8(&raw)
            .map_err(|e| format!("the reply is not UTF-8 text ({e}); it was discarded"))?;
        let cleaned = cairn_core::text::sanitize(text)
            .map_err(|e| format!("the reply is not usable text ({e}); it was discarded"))?
            .text;
        if cleaned.trim().is_empty() {
            return Err("the reply is empty; nothing was extracted".into());
        }
        Ok(cleaned)
    }

    fn raw_reply(
        &self,
        prompt: &str,
        ca_file: Option<&std::path::Path>,
        max_bytes: usize,
    ) -> Result<Vec<u8>, String> {
        match self {
            LlmConfig::Command { command, timeout } => {
                run_command(command, prompt, *timeout, max_bytes)
            }
            LlmConfig::Http {
                url,
                model,
                api_key,
                timeout,
            } => run_http(url, model, api_key.as_deref(), prompt, *timeout, ca_file),
        }
    }

    /// The timeout of one call.
    pub fn timeout(&self) -> Duration {
        match self {
            LlmConfig::Command { timeout, .. } | LlmConfig::Http { timeout, .. } => *timeout,
        }
    }
}

/// A reply is usable when it is UTF-8 text (after the write path's sanitizing), not empty and
/// not over [`MAX_REPLY_BYTES`].
pub fn check_reply(raw: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(raw)
        .map_err(|e| format!("the reply is not UTF-8 text ({e}); it was discarded"))?;
    let cleaned = cairn_core::text::sanitize(text)
        .map_err(|e| format!("the reply is not usable text ({e}); it was discarded"))?
        .text;
    let trimmed = cleaned.trim();
    if trimmed.is_empty() {
        return Err("the reply is empty; nothing was generated".into());
    }
    if trimmed.len() > MAX_REPLY_BYTES {
        return Err(format!(
            "the reply is {} bytes, over the limit of {MAX_REPLY_BYTES}; it was discarded",
            trimmed.len()
        ));
    }
    let letters = trimmed.chars().filter(|c| c.is_alphabetic()).count();
    if letters * 2 < trimmed.chars().filter(|c| !c.is_whitespace()).count() {
        return Err(format!(
            "the reply does not look like prose (starts {:?}); it was discarded",
            trimmed.chars().take(40).collect::<String>()
        ));
    }
    Ok(trimmed.to_string())
}

/// Runs `sh -c command` in its own process group with `prompt` on stdin; the whole group is
/// killed when it outlives `timeout`.
fn run_command(
    command: &str,
    prompt: &str,
    timeout: Duration,
    max_bytes: usize,
) -> Result<Vec<u8>, String> {
    let mut builder = Command::new("sh");
    builder
        .arg("-c")
        .arg(command)
        // The nested run cannot write: whatever cairn it starts is read-only.
        .env("CAIRN_READ_ONLY", "1")
        .env(NESTED_RUN_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        builder.process_group(0);
    }
    let mut child = builder
        .spawn()
        .map_err(|e| format!("cannot start the LLM command `{command}`: {e}"))?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let prompt_bytes = prompt.as_bytes().to_vec();
    // A command that never reads stdin must not block us: write from a thread.
    std::thread::spawn(move || {
        let _ = stdin.write_all(&prompt_bytes);
    });
    let (stdout_tx, stdout_rx) = mpsc::channel();
    let mut stdout = child.stdout.take().expect("stdout is piped");
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout
            .by_ref()
            .take(max_bytes as u64 + 1)
            .read_to_end(&mut bytes);
        let _ = stdout_tx.send(bytes);
    });
    let (stderr_tx, stderr_rx) = mpsc::channel();
    let mut stderr = child.stderr.take().expect("stderr is piped");
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.by_ref().take(4_096).read_to_end(&mut bytes);
        let _ = stderr_tx.send(bytes);
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= timeout => {
                kill_group(&mut child);
                return Err(format!(
                    "the LLM command `{command}` did not answer within {} s and was stopped; nothing was generated",
                    timeout.as_secs_f64()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for the LLM command: {e}")),
        }
    };
    let grace = Duration::from_secs(2);
    let output = stdout_rx.recv_timeout(grace).unwrap_or_default();
    if !status.success() {
        let stderr = stderr_rx.recv_timeout(grace).unwrap_or_default();
        return Err(format!(
            "the LLM command `{command}` failed ({status}): {}; nothing was generated",
            String::from_utf8_lossy(&stderr).trim()
        ));
    }
    Ok(output)
}

fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    {
        // The command runs in its own process group (its pid): stop the shell and whatever it
        // started, by that id only.
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg("--")
            .arg(format!("-{}", child.id()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: [ChatMessage<'a>; 1],
    temperature: f32,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct ChatMessage<'a> {
    role: &'a str,
    content: &'a str,
}

/// The chat completions URL for a configured base (`…/v1`) or full endpoint.
pub fn chat_endpoint(url: &str) -> String {
    let trimmed = url.trim().trim_end_matches('/');
    if trimmed.ends_with("/chat/completions") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/chat/completions")
    }
}

fn run_http(
    url: &str,
    model: &str,
    api_key: Option<&str>,
    prompt: &str,
    timeout: Duration,
    ca_file: Option<&std::path::Path>,
) -> Result<Vec<u8>, String> {
    let endpoint = chat_endpoint(url);
    let agent = cairn_embed::tls::http_agent(
        timeout,
        ca_file,
        concat!("cairn/", env!("CARGO_PKG_VERSION")),
    )?;
    let body = serde_json::to_vec(&ChatRequest {
        model,
        messages: [ChatMessage {
            role: "user",
            content: prompt,
        }],
        temperature: 0.0,
    })
    .expect("a request always serializes");
    let mut request = agent
        .post(&endpoint)
        .header("Content-Type", "application/json");
    if let Some(key) = api_key {
        request = request.header("Authorization", &format!("Bearer {key}"));
    }
    let mut response = request.send(&body[..]).map_err(|e| match e {
        ureq::Error::Timeout(_) => format!(
            "the LLM endpoint {endpoint} did not answer within {} s; nothing was generated",
            timeout.as_secs_f64()
        ),
        other => {
            format!("cannot reach the LLM endpoint {endpoint}: {other}; nothing was generated")
        }
    })?;
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_string()
        .map_err(|e| format!("cannot read the answer of {endpoint}: {e}"))?;
    if !(200..300).contains(&status) {
        return Err(format!(
            "the LLM endpoint {endpoint} answered HTTP {status}: {}; nothing was generated",
            text.chars().take(200).collect::<String>()
        ));
    }
    let parsed: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!("the LLM endpoint {endpoint} did not answer JSON ({e}); nothing was generated")
    })?;
    parsed["choices"][0]["message"]["content"]
        .as_str()
        .map(|s| s.as_bytes().to_vec())
        .ok_or_else(|| {
            format!(
                "the LLM endpoint {endpoint} answered without choices[0].message.content; nothing was generated"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(script: &str, timeout_ms: u64) -> LlmConfig {
        LlmConfig::Command {
            command: script.to_string(),
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    #[test]
    fn a_command_reply_is_read_from_stdout_with_the_prompt_on_stdin() {
        let reply = command("read -r first; echo \"summary of: $first\"", 5_000)
            .complete("deploy notes\nmore")
            .unwrap();
        assert_eq!(reply, "summary of: deploy notes");
    }

    #[test]
    fn failures_hangs_and_garbage_are_errors_that_say_so() {
        let failed = command("echo boom >&2; exit 3", 5_000)
            .complete("x")
            .unwrap_err();
        assert!(
            failed.contains("failed") && failed.contains("boom"),
            "{failed}"
        );
        let started = Instant::now();
        let hung = command("sleep 30", 300).complete("x").unwrap_err();
        assert!(hung.contains("did not answer"), "{hung}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let empty = command("true", 5_000).complete("x").unwrap_err();
        assert!(empty.contains("empty"), "{empty}");
        let binary = command("printf '\\377\\376'", 5_000)
            .complete("x")
            .unwrap_err();
        assert!(binary.contains("not UTF-8"), "{binary}");
        let noise = command("echo '{{{{ ]]]] 1234 ////'", 5_000)
            .complete("x")
            .unwrap_err();
        assert!(noise.contains("prose"), "{noise}");
    }

    #[test]
    fn the_command_runs_read_only_and_marked_as_a_nested_run() {
        let reply = command(
            "echo \"read-only is $CAIRN_READ_ONLY and nested is $CAIRN_NESTED_RUN\"",
            5_000,
        )
        .complete("x")
        .unwrap();
        assert_eq!(reply, "read-only is 1 and nested is 1");
    }

    #[test]
    fn endpoints_get_their_chat_path_once() {
        assert_eq!(
            chat_endpoint("http://localhost:11434/v1/"),
            "http://localhost:11434/v1/chat/completions"
        );
        assert_eq!(
            chat_endpoint("http://h/v1/chat/completions"),
            "http://h/v1/chat/completions"
        );
    }

    #[test]
    fn the_key_never_reaches_debug_output() {
        let config = LlmConfig::Http {
            url: "http://h".into(),
            model: "m".into(),
            api_key: Some("sk-very-secret".into()),
            timeout: Duration::from_secs(1),
        };
        assert!(!format!("{config:?}").contains("very-secret"));
    }
}
