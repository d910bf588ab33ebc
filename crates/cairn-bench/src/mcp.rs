//! The one MCP client: a real `cairn mcp` child spoken to in JSON-RPC lines over stdio
//! (initialize, the `initialized` notification, then `tools/call`).

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The protocol version the client asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

#[derive(Debug)]
pub struct McpClient {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: i64,
}

impl McpClient {
    /// Spawns `command` (a `cairn … mcp` invocation; its stderr is left as configured) and
    /// completes the handshake.
    pub fn start(mut command: Command) -> Result<McpClient> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {command:?}"))?;
        let stdin = child.stdin.take().context("the server's stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("the server's stdout")?);
        let mut client = McpClient {
            child,
            stdin: Some(stdin),
            stdout,
            next_id: 0,
        };
        let answer = client.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "cairn-bench", "version": env!("CARGO_PKG_VERSION")},
            }),
        )?;
        if answer.get("error").is_some() {
            bail!("the MCP server refused to initialize: {answer}");
        }
        client.notify("notifications/initialized", json!({}))?;
        Ok(client)
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let stdin = self.stdin.as_mut().context("the client is closed")?;
        let mut line = message.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes())?;
        stdin.flush()?;
        Ok(())
    }

    pub fn notify(&mut self, method: &str, params: Value) -> Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// One request; the whole response (with `result` or `error`). Notifications and other
    /// ids the server sends meanwhile are skipped.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line)? == 0 {
                bail!("the MCP server closed its output while {method} (id {id}) was pending");
            }
            let value: Value = serde_json::from_str(&line).with_context(|| {
                format!("the MCP server wrote a line that is not JSON: {line:?}")
            })?;
            if value["id"] == json!(id) {
                return Ok(value);
            }
        }
    }

    /// Calls a tool; its `structuredContent`. A protocol error or `isError: true` is an error.
    pub fn call(&mut self, tool: &str, arguments: Value) -> Result<Value> {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        if answer.get("error").is_some() || answer["result"]["isError"] != json!(false) {
            bail!("the {tool} tool failed: {answer}");
        }
        Ok(answer["result"]["structuredContent"].clone())
    }

    /// Closes the server's input (it exits at end of input) and waits for it.
    pub fn close(mut self) -> Result<()> {
        drop(self.stdin.take());
        let status = self.child.wait()?;
        if !status.success() {
            bail!("cairn mcp exited with {status}");
        }
        Ok(())
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        // A client dropped on an error path must not leave the server running.
        if self.stdin.take().is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
