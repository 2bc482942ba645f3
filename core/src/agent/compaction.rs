//! The default compaction of a loop's transcript: the oldest tool results dropped until it
//! fits.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{ContentBlock, Message};

/// The default compaction: after each seal, when the transcript holds more than `max_chars`
/// characters, the oldest tool results are dropped (their text replaced by a notice) until it
/// fits. The system prompt and the task are never touched, and no message is removed, so every
/// call keeps its one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Compaction {
    /// The transcript's budget, in characters of message text.
    pub max_chars: usize,
}

/// The text that replaces a dropped tool result.
pub const DROPPED: &str = "[this tool result was dropped to fit the context window]";

/// Drops the oldest tool results of `messages` until their text fits in `max_chars`; returns
/// how many were dropped. The default compaction hook.
pub fn compact_oldest_tool_results(messages: &mut [Message], max_chars: usize) -> usize {
    let mut size: usize = messages.iter().map(message_chars).sum();
    let mut dropped = 0;
    for message in messages.iter_mut() {
        if size <= max_chars {
            break;
        }
        if let Message::ToolResult(result) = message {
            let output = &mut result.output;
            if output.content == DROPPED {
                continue;
            }
            size -= output.content.chars().count();
            size += DROPPED.chars().count();
            output.content = DROPPED.to_owned();
            output.details = Value::Null;
            dropped += 1;
        }
    }
    dropped
}

fn message_chars(message: &Message) -> usize {
    match message {
        Message::User { text } => text.chars().count(),
        Message::ToolResult(result) => result.output.content.chars().count(),
        Message::Assistant(response) => response
            .content
            .iter()
            .map(|block| match block {
                ContentBlock::Text { text } => text.chars().count(),
                ContentBlock::Thinking { thinking, .. } => thinking.chars().count(),
                ContentBlock::ToolCall(call) => {
                    call.name.len() + call.arguments.to_string().chars().count()
                }
            })
            .sum(),
    }
}
