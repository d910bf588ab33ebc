//! Transcript capture, the pure part: Claude Code's transcript JSONL (one object a line) read
//! from a byte offset, cairn's own injected blocks stripped, messages grouped into turns, and
//! how many bytes were consumed — only whole lines and whole turns, so a capture that stops
//! early resumes exactly where it left off.
//!
//! The format is undocumented (research/agent-integration.md B.1): unknown line types, unknown
//! fields, tool results, thinking blocks, meta and sidechain lines are skipped, never an error.

use crate::brief::{CONTEXT_CLOSE, CONTEXT_OPEN};
use serde_json::Value;

/// Longest text kept per side of a captured turn, in characters.
pub const MAX_USER_CHARS: usize = 2_000;
pub const MAX_ASSISTANT_CHARS: usize = 3_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub text: String,
}

/// One exchange: what the user said and what the assistant answered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Turn {
    pub user: String,
    pub assistant: String,
}

impl Turn {
    /// The episode body: both sides, each cut to its limit.
    pub fn episode_body(&self) -> String {
        let mut parts = Vec::new();
        if !self.user.is_empty() {
            parts.push(format!("User: {}", clip(&self.user, MAX_USER_CHARS)));
        }
        if !self.assistant.is_empty() {
            parts.push(format!(
                "Assistant: {}",
                clip(&self.assistant, MAX_ASSISTANT_CHARS)
            ));
        }
        parts.join("\n")
    }
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

/// Removes every `<cairn-context …>…</cairn-context>` block (an unterminated one to the end).
/// No opening tag is left in the result, including one that removing a block would form from the
/// text on its two sides (`<cairn-` + block + `context>`: fuzz/regressions/transcript/). Linear
/// in the text.
pub fn strip_injected(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(CONTEXT_OPEN) {
        out.push_str(&rest[..start]);
        // Where the block's tag ends in `rest`, then where the block does.
        let mut tag_end = start + CONTEXT_OPEN.len();
        loop {
            rest = match rest[tag_end..].find(CONTEXT_CLOSE) {
                Some(end) => &rest[tag_end + end + CONTEXT_CLOSE.len()..],
                None => "",
            };
            // The end of what is kept and the start of what follows may now spell an opening
            // tag: its head is taken back out of `out`, its tail is skipped in `rest`.
            match tag_across(&out, rest) {
                Some((head_start, tail_len)) => {
                    out.truncate(head_start);
                    tag_end = tail_len;
                }
                None => break,
            }
        }
    }
    out.push_str(rest);
    out
}

/// An opening tag that starts in the last bytes of `kept` and ends in `next`: where it starts in
/// `kept` and how many bytes of `next` it takes.
fn tag_across(kept: &str, next: &str) -> Option<(usize, usize)> {
    (1..CONTEXT_OPEN.len()).rev().find_map(|head_len| {
        let head_start = kept.len().checked_sub(head_len)?;
        let (head, tail) = CONTEXT_OPEN.split_at(head_len);
        (kept.is_char_boundary(head_start) && kept[head_start..] == *head && next.starts_with(tail))
            .then_some((head_start, tail.len()))
    })
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Claude Code wraps hook output and command echoes in tags; none of it is the user talking.
fn is_harness_text(text: &str) -> bool {
    let trimmed = text.trim_start();
    [
        "<system-reminder>",
        "<command-name>",
        "<command-message>",
        "<local-command-stdout>",
        "<user-prompt-submit-hook>",
        "Caveat: The messages below were generated",
    ]
    .iter()
    .any(|prefix| trimmed.starts_with(prefix))
}

/// The message on one transcript line, or `None` for anything that is not a user or assistant
/// saying something (tool results, thinking, meta, sidechains, summaries, unknown types).
pub fn parse_line(line: &str) -> Option<Message> {
    let value: Value = serde_json::from_str(line).ok()?;
    let role = match value.get("type").and_then(Value::as_str)? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        _ => return None,
    };
    if value.get("isMeta").and_then(Value::as_bool) == Some(true)
        || value.get("isSidechain").and_then(Value::as_bool) == Some(true)
    {
        return None;
    }
    let content = value.get("message")?.get("content")?;
    let text = strip_injected(&text_of(content));
    let text = text.trim();
    if text.is_empty() || (role == Role::User && is_harness_text(text)) {
        return None;
    }
    Some(Message {
        role,
        text: text.to_string(),
    })
}

/// What one capture takes from the bytes after the stored offset.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapturePlan {
    /// Complete turns, oldest first.
    pub turns: Vec<Turn>,
    /// Bytes of the chunk consumed (the new offset is the old one plus this).
    pub consumed: u64,
}

/// Plans a capture over `chunk` (the transcript from the stored offset on): only complete
/// lines count, and a final turn whose assistant has not answered yet is left for next time.
pub fn plan_capture(chunk: &str) -> CapturePlan {
    plan_capture_at_most(chunk, usize::MAX)
}

/// [`plan_capture`] that stops after `max_turns` turns, consuming up to where the next one
/// starts: the rest is the next capture's.
pub fn plan_capture_at_most(chunk: &str, max_turns: usize) -> CapturePlan {
    let mut turns: Vec<Turn> = Vec::new();
    // The turn being read, and the offset of its first line.
    let mut current: Option<(Turn, u64)> = None;
    // Everything before this offset is settled: captured, or nothing to capture.
    let mut consumed: u64 = 0;
    let mut position: u64 = 0;
    for line in chunk.split_inclusive('\n') {
        let start = position;
        position += line.len() as u64;
        if !line.ends_with('\n') {
            break; // a line still being written
        }
        let Some(message) = parse_line(line) else {
            if current.is_none() {
                consumed = position;
            }
            continue;
        };
        match (message.role, current.take()) {
            (Role::User, Some((turn, _))) if !turn.assistant.is_empty() => {
                turns.push(turn);
                consumed = start;
                if turns.len() >= max_turns {
                    return CapturePlan { turns, consumed };
                }
                current = Some((
                    Turn {
                        user: message.text,
                        assistant: String::new(),
                    },
                    start,
                ));
            }
            (Role::User, Some((turn, turn_start))) => {
                // consecutive user messages belong to one turn
                current = Some((
                    Turn {
                        user: join(&turn.user, &message.text),
                        assistant: String::new(),
                    },
                    turn_start,
                ));
            }
            (Role::User, None) => {
                current = Some((
                    Turn {
                        user: message.text,
                        assistant: String::new(),
                    },
                    start,
                ));
            }
            (Role::Assistant, Some((mut turn, turn_start))) => {
                turn.assistant = join(&turn.assistant, &message.text);
                current = Some((turn, turn_start));
            }
            (Role::Assistant, None) => {
                current = Some((
                    Turn {
                        user: String::new(),
                        assistant: message.text,
                    },
                    start,
                ));
            }
        }
    }
    if let Some((turn, turn_start)) = current {
        if turn.assistant.is_empty() {
            // the user spoke and the assistant has not answered yet: next time
            consumed = turn_start;
        } else {
            turns.push(turn);
            consumed = chunk.rfind('\n').map(|i| i as u64 + 1).unwrap_or(0);
        }
    }
    CapturePlan { turns, consumed }
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}\n{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> String {
        serde_json::json!({"type": "user", "uuid": "u", "sessionId": "s", "timestamp": "2026-11-30T10:00:00Z",
            "message": {"role": "user", "content": text}})
        .to_string()
            + "\n"
    }

    fn assistant(text: &str) -> String {
        serde_json::json!({"type": "assistant", "uuid": "a", "requestId": "r",
            "message": {"role": "assistant", "model": "claude", "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": text},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}})
        .to_string()
            + "\n"
    }

    fn tool_result() -> String {
        serde_json::json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "file.txt"}]}})
        .to_string()
            + "\n"
    }

    #[test]
    fn turns_pair_user_and_assistant_and_skip_tool_traffic() {
        let chunk = [
            r#"{"type":"summary","summary":"old","leafUuid":"x"}"#.to_string() + "\n",
            user("why does CI fail?"),
            assistant("the lockfile is stale"),
            tool_result(),
            assistant("fixed it"),
            r#"{"type":"file-history-snapshot","snapshot":{}}"#.to_string() + "\n",
            user("thanks, commit it"),
            assistant("committed"),
        ]
        .concat();
        let plan = plan_capture(&chunk);
        assert_eq!(
            plan.turns,
            vec![
                Turn {
                    user: "why does CI fail?".into(),
                    assistant: "the lockfile is stale\nfixed it".into()
                },
                Turn {
                    user: "thanks, commit it".into(),
                    assistant: "committed".into()
                },
            ]
        );
        assert_eq!(plan.consumed, chunk.len() as u64);
    }

    #[test]
    fn a_capped_plan_stops_where_the_next_turn_starts_and_the_rest_follows() {
        let chunk: String = (0..5)
            .flat_map(|i| {
                [
                    user(&format!("q{i}")),
                    tool_result(),
                    assistant(&format!("a{i}")),
                ]
            })
            .collect();
        let whole = plan_capture(&chunk);
        assert_eq!(whole.turns.len(), 5);
        for cap in 1..=6 {
            let mut turns = Vec::new();
            let mut offset = 0usize;
            while offset < chunk.len() {
                let plan = plan_capture_at_most(&chunk[offset..], cap);
                assert!(
                    plan.turns.len() <= cap && !plan.turns.is_empty(),
                    "cap {cap}"
                );
                turns.extend(plan.turns);
                offset += plan.consumed as usize;
            }
            assert_eq!(turns, whole.turns, "cap {cap}");
        }
    }

    #[test]
    fn an_unanswered_prompt_and_a_partial_line_wait_for_the_next_capture() {
        let done = [user("one"), assistant("answer one")].concat();
        let pending = user("two");
        let chunk = format!("{done}{pending}{{\"type\":\"assis");
        let plan = plan_capture(&chunk);
        assert_eq!(plan.turns.len(), 1);
        assert_eq!(plan.consumed, done.len() as u64);
        // resuming from there captures the rest once answered
        let later = format!("{pending}{}", assistant("answer two"));
        let plan = plan_capture(&later);
        assert_eq!(plan.turns[0].user, "two");
        assert_eq!(plan.consumed, later.len() as u64);
    }

    #[test]
    fn a_tag_formed_by_removing_a_block_is_removed_too() {
        let block = format!("{CONTEXT_OPEN}>x{CONTEXT_CLOSE}");
        let once = format!("a <cairn-{block}context>y{CONTEXT_CLOSE} b");
        assert_eq!(strip_injected(&once), "a  b");
        let twice = format!("<cairn-<cairn-{block}context>{CONTEXT_CLOSE}context>z");
        assert_eq!(strip_injected(&twice), "");
        let not_a_tag = format!("<cairn-{block}conte xt");
        assert_eq!(strip_injected(&not_a_tag), "<cairn-conte xt");
    }

    #[test]
    fn cairn_injections_and_harness_text_are_never_captured() {
        let injected = format!(
            "before {CONTEXT_OPEN} kind=\"recall\">\n- #1 memory text\n{CONTEXT_CLOSE}\n after"
        );
        assert_eq!(strip_injected(&injected), "before \n after");
        assert_eq!(
            strip_injected(&format!("x {CONTEXT_OPEN} never closed")),
            "x "
        );
        let chunk = [
            user(&format!(
                "{CONTEXT_OPEN} kind=\"brief\">stuff{CONTEXT_CLOSE}"
            )),
            user("<system-reminder>hook said</system-reminder>"),
            serde_json::json!({"type": "user", "isMeta": true, "message": {"content": "meta"}})
                .to_string()
                + "\n",
            user("real question"),
            assistant("real answer"),
        ]
        .concat();
        let plan = plan_capture(&chunk);
        assert_eq!(plan.turns.len(), 1);
        assert_eq!(plan.turns[0].user, "real question");
    }

    #[test]
    fn garbage_and_unknown_lines_are_skipped_not_errors() {
        let chunk = format!(
            "not json\n{{}}\n{{\"type\":\"user\"}}\n{}{}",
            user("q"),
            assistant("a")
        );
        let plan = plan_capture(&chunk);
        assert_eq!(plan.turns.len(), 1);
        assert_eq!(plan.consumed, chunk.len() as u64);
        assert_eq!(plan_capture(""), CapturePlan::default());
        assert_eq!(plan_capture("junk\n").consumed, 5);
    }

    #[test]
    fn episode_bodies_are_clipped() {
        let turn = Turn {
            user: "u".repeat(5000),
            assistant: "a".repeat(5000),
        };
        let body = turn.episode_body();
        assert!(body.starts_with("User: u"));
        assert!(body.chars().count() < MAX_USER_CHARS + MAX_ASSISTANT_CHARS + 40);
    }
}
