//! The hook payload reader, the pure part of `cairn hook`: the JSON a client writes on the
//! hook's stdin, reduced to the fields the hooks use. Every client names them its own way
//! (research/agent-integration.md B.1; the Gemini CLI and Cursor docs for theirs), so each field
//! is the first of its spellings that holds a string (absent when that string is blank); anything
//! else in the payload is ignored. What the hooks do with the fields is `cairn-cli/src/hook.rs`.

/// The fields of a hook payload that the hooks read. A field is `None` when the payload has
/// none of its spellings as a string, or the first one it has is blank.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookPayload {
    /// The agent's working directory: `cwd` (Claude Code, Gemini), else the first of
    /// `workspace_roots` (Cursor), as given (the caller checks that it is a directory).
    pub cwd: Option<String>,
    /// `session_id`, `conversation_id` (Cursor) or `sessionId`.
    pub session: Option<String>,
    /// What the user typed (`prompt`).
    pub prompt: Option<String>,
    /// The assistant's answer handed over directly: `prompt_response` (Gemini AfterAgent) or
    /// `text` (Cursor afterAgentResponse).
    pub response: Option<String>,
    /// Claude Code's transcript file (`transcript_path`).
    pub transcript_path: Option<String>,
    /// Why a session started (`source`, or `trigger` for a compaction).
    pub source: Option<String>,
    /// Why a session ended (`reason`).
    pub reason: Option<String>,
}

/// Why a payload could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookPayloadError {
    #[error("no hook JSON on stdin")]
    Empty,
    #[error("the hook JSON does not parse: {0}")]
    NotJson(String),
    #[error("the hook JSON is not an object")]
    NotObject,
}

impl HookPayload {
    /// Reads a payload from the bytes on stdin (invalid UTF-8 is replaced, not refused: a
    /// client's stray byte in a prompt must not cost the hook its session id).
    pub fn parse(raw: &[u8]) -> Result<HookPayload, HookPayloadError> {
        let text = String::from_utf8_lossy(raw);
        if text.trim().is_empty() {
            return Err(HookPayloadError::Empty);
        }
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|error| HookPayloadError::NotJson(error.to_string()))?;
        if !value.is_object() {
            return Err(HookPayloadError::NotObject);
        }
        let field = |names: &[&str]| {
            names
                .iter()
                .find_map(|name| value.get(*name).and_then(serde_json::Value::as_str))
                .filter(|text| !text.trim().is_empty())
                .map(str::to_string)
        };
        let first_root = || {
            value
                .get("workspace_roots")
                .and_then(serde_json::Value::as_array)
                .and_then(|roots| roots.first())
                .and_then(serde_json::Value::as_str)
                .filter(|root| !root.trim().is_empty())
                .map(str::to_string)
        };
        Ok(HookPayload {
            cwd: field(&["cwd"]).or_else(first_root),
            session: field(&["session_id", "conversation_id", "sessionId"]),
            prompt: field(&["prompt"]),
            response: field(&["prompt_response", "text"]),
            transcript_path: field(&["transcript_path"]),
            source: field(&["source", "trigger"]),
            reason: field(&["reason"]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: &str, expect: Result<HookPayload, HookPayloadError>) {
        assert_eq!(HookPayload::parse(raw.as_bytes()), expect, "{raw}");
    }

    #[test]
    fn each_field_takes_the_first_spelling_given() {
        check(
            r#"{"session_id":"s1","conversation_id":"c1","cwd":"/w","prompt":"hi","text":"answer","trigger":"auto","reason":"exit","transcript_path":"/t.jsonl"}"#,
            Ok(HookPayload {
                cwd: Some("/w".into()),
                session: Some("s1".into()),
                prompt: Some("hi".into()),
                response: Some("answer".into()),
                transcript_path: Some("/t.jsonl".into()),
                source: Some("auto".into()),
                reason: Some("exit".into()),
            }),
        );
        check(
            r#"{"workspace_roots":["/a","/b"],"sessionId":7}"#,
            Ok(HookPayload {
                cwd: Some("/a".into()),
                ..HookPayload::default()
            }),
        );
    }

    #[test]
    fn a_blank_field_is_absent() {
        check(
            r#"{"session_id":" ","conversation_id":"c1","prompt":"","cwd":7}"#,
            Ok(HookPayload::default()),
        );
    }

    #[test]
    fn what_is_not_a_payload_is_named() {
        check("  \n", Err(HookPayloadError::Empty));
        check("[1]", Err(HookPayloadError::NotObject));
        assert!(matches!(
            HookPayload::parse(b"{\"a\":"),
            Err(HookPayloadError::NotJson(_))
        ));
        // A stray byte is replaced, the rest still read.
        assert_eq!(
            HookPayload::parse(b"{\"prompt\":\"caf\xff\"}")
                .unwrap()
                .prompt
                .as_deref(),
            Some("caf\u{fffd}")
        );
    }
}
