//! The hooks' calls to a server (`/v1/hooks/…`, crates/cairn-http/src/hooks.rs): every hook to
//! `CAIRN_URL`, the prompt hook to the live local daemon (hybrid recall: the model is resident
//! there). Each call is bounded by what is left of the hook's deadline — connect and read
//! timeouts and an overall bound — so a server that is down or slow costs the agent nothing
//! beyond it: the hook logs and exits 0 (fail open).
//!
//! With `CAIRN_URL` the transcript is on this machine and the brain on the server: a capture
//! asks the server where the session's capture stands, reads the transcript from there, and
//! sends whole lines with their start offset; the server captures them in one transaction and
//! answers 409 when another hook got there first (then this one asks again).

use crate::remote::{Client, ClientOptions, Target};
use crate::settings::Settings;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// Most transcript bytes one capture request carries (the server's default body limit is
/// 1 MiB; JSON escaping of a transcript's quotes grows it by about a third).
pub const CAPTURE_CHUNK: u64 = 640 * 1024;

/// A server the hook talks to, and the time it has.
pub struct HookServer {
    client: Client,
    /// The hook's working directory (its git working tree goes with the session-start brief).
    cwd: std::path::PathBuf,
}

/// Bounds every call by `left`, what remains of the hook's deadline.
fn bounded(mut options: ClientOptions, left: Duration) -> ClientOptions {
    options.connect_timeout = (left / 4).min(Duration::from_millis(500));
    options.read_timeout = left;
    options.deadline = Some(left);
    options
}

fn remote_options(settings: &Settings, cwd: &Path, left: Duration) -> ClientOptions {
    let mut options = ClientOptions::new(
        settings
            .remote
            .as_ref()
            .and_then(|remote| remote.token.clone()),
    );
    // A token for every project needs the project named; the remote server never runs git in
    // its own directory, so the hook asks git here (an explicit project skips it).
    options.project = Some(settings.context("hook", cwd).project);
    bounded(options, left)
}

impl HookServer {
    /// The server `CAIRN_URL` names, if it is set.
    pub fn remote(
        settings: &Settings,
        cwd: &Path,
        left: Duration,
    ) -> Option<Result<HookServer, String>> {
        let remote = settings.remote.as_ref()?;
        Some(
            Target::parse(&remote.url)
                .and_then(|target| Client::new(target, remote_options(settings, cwd, left)))
                .map(|client| HookServer {
                    client,
                    cwd: cwd.to_path_buf(),
                })
                .map_err(|e| e.to_string()),
        )
    }

    /// The live local daemon at `socket`.
    pub fn daemon(
        settings: &Settings,
        socket: &Path,
        cwd: &Path,
        left: Duration,
    ) -> Result<HookServer, String> {
        Client::new(
            Target::Unix(socket.to_path_buf()),
            bounded(crate::daemon::local_options(settings, cwd, "hook"), left),
        )
        .map(|client| HookServer {
            client,
            cwd: cwd.to_path_buf(),
        })
        .map_err(|e| e.to_string())
    }

    fn post(&self, path: &str, body: &Value) -> Result<Value, String> {
        self.client.post(path, body).map_err(|e| e.to_string())
    }

    /// The prompt hook's injected text (`None`: nothing qualifies).
    pub fn prompt(&self, prompt: &str, budget: usize) -> Result<Option<String>, String> {
        let answer = self.post(
            "/v1/hooks/user-prompt-submit",
            &json!({"prompt": prompt, "budget": budget}),
        )?;
        Ok(answer["text"].as_str().map(str::to_string))
    }

    /// The session-start brief's text.
    pub fn session_start(
        &self,
        budget: usize,
        session: &str,
        source: Option<&str>,
        client: &str,
    ) -> Result<String, String> {
        let answer = self.post(
            "/v1/hooks/session-start",
            &json!({
                "budget": budget,
                "session": session,
                "source": source,
                "client": client,
                // the server never runs git in its own directory
                "working_tree": cairn_engine::git::working_tree(&self.cwd),
            }),
        )?;
        answer["text"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("the server's brief has no text: {answer}"))
    }

    /// One turn handed over by the client.
    pub fn turn(&self, session: &str, prompt: &str, response: &str) -> Result<(), String> {
        self.post(
            "/v1/hooks/turn",
            &json!({"session": session, "prompt": prompt, "response": response}),
        )
        .map(|_| ())
    }

    /// Sends what the transcript gained since the server's stored offset, a chunk at a time,
    /// while `budget` lasts (the first chunk always goes). Returns the bytes still unsent.
    pub fn capture(
        &self,
        session: &str,
        transcript: &Path,
        budget: Duration,
    ) -> Result<u64, String> {
        let started = Instant::now();
        let name = transcript.display().to_string();
        let query = format!(
            "/v1/hooks/capture?session={}&transcript={}",
            encode_component(session),
            encode_component(&name)
        );
        let mut conflicts = 0;
        loop {
            let size = std::fs::metadata(transcript)
                .map_err(|e| format!("cannot read the transcript {name}: {e}"))?
                .len();
            let answer = self.client.get(&query).map_err(|e| e.to_string())?;
            let offset = answer["offset"]
                .as_u64()
                .ok_or_else(|| format!("the server answered no capture offset: {answer}"))?;
            if offset >= size {
                return Ok(0);
            }
            let text = read_chunk(transcript, offset, CAPTURE_CHUNK.min(size - offset))
                .map_err(|e| format!("cannot read the transcript {name}: {e}"))?;
            if text.is_empty() {
                if size - offset >= CAPTURE_CHUNK {
                    return Err(format!(
                        "a line of the transcript {name} at byte {offset} is longer than {CAPTURE_CHUNK} bytes, more than one request carries; the session's capture stops there (captured up to byte {offset})"
                    ));
                }
                // Only an unfinished last line: the next hook takes it.
                return Ok(size - offset);
            }
            let sent = self.client.post(
                "/v1/hooks/capture",
                &json!({"session": session, "transcript": name, "offset": offset, "text": text}),
            );
            match sent {
                Ok(report) => {
                    let after = report["offset_after"].as_u64().unwrap_or(offset);
                    if after >= size {
                        return Ok(0);
                    }
                    if after == offset || started.elapsed() >= budget {
                        return Ok(size - after);
                    }
                }
                // Another hook captured the same stretch first: ask where it stands now.
                Err(error) if error.status == Some(409) && conflicts < 3 => conflicts += 1,
                Err(error) => return Err(error.to_string()),
            }
        }
    }

    /// Notes the session's end; the server starts the maintenance it makes due in the
    /// background. Answers what the server said of it (`started`, `not_due`, `read_only`;
    /// `None` from a server that starts none).
    pub fn session_end(&self, detail: &Value) -> Result<Option<String>, String> {
        let answer = self.post("/v1/hooks/session-end", detail)?;
        Ok(answer
            .get("maintenance")
            .and_then(Value::as_str)
            .map(str::to_string))
    }
}

/// `[offset, offset + length)` of the file as whole lines (`cairn_engine::whole_lines`).
fn read_chunk(path: &Path, offset: u64, length: u64) -> std::io::Result<String> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::with_capacity(length as usize);
    file.take(length).read_to_end(&mut bytes)?;
    Ok(cairn_engine::whole_lines(&bytes))
}

/// A query-string component: bytes outside `A-Z a-z 0-9 - . _ ~` as `%XX`.
fn encode_component(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
