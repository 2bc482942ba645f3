//! Constrained output ([`OutputMode::JsonSchema`](super::OutputMode::JsonSchema)): the
//! turn's tools become one JSON Schema the answer must follow, the conversation is told how to
//! answer, and the answer is read back as the call it names.

use serde_json::{Value, json};

use crate::message::{AssistantMessage, ContentBlock, ModelRequest, ToolCall, ToolSpec};

/// The schema a constrained turn's answer must follow: one object naming the tool it calls
/// and that tool's arguments, `{"tool": name, "arguments": {...}}`, as a `oneOf` when the turn
/// has several tools. With one tool the object is that tool's parameter schema under a fixed
/// name (a `const` the grammar writes for the model). The answer names its tool in every case
/// so that a response decodes without its request: the component's codec and a durable log
/// replay decode a body alone.
#[must_use]
pub fn answer_schema(tools: &[ToolSpec]) -> Value {
    let mut choices: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({
                "type": "object",
                "properties": {
                    "tool": {"const": tool.name},
                    "arguments": tool.constrained.as_ref().unwrap_or(&tool.parameters),
                },
                "required": ["tool", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    if choices.len() == 1 { choices.remove(0) } else { json!({"oneOf": choices}) }
}

/// The system prompt of a constrained turn: the server is sent no tools, so it says how to
/// answer and describes each tool.
pub(super) fn constrained_system(request: &ModelRequest<'_>) -> String {
    let mut system = request.system.to_owned();
    if !system.is_empty() {
        system.push_str("\n\n");
    }
    system.push_str(
        "Answer with one JSON object {\"tool\": <name>, \"arguments\": {...}} that calls one of \
         these tools:",
    );
    for tool in request.tools {
        system.push_str(&format!("\n- {}: {}", tool.name, tool.description));
    }
    system
}

/// An earlier response of a constrained conversation: its text and its calls as the JSON
/// answers the model gave.
pub(super) fn constrained_answer(response: &AssistantMessage) -> Value {
    let mut content = response.text_content();
    for call in response.tool_calls() {
        if !content.is_empty() {
            content.push('\n');
        }
        let arguments = match &call.arguments {
            // Arguments that were not JSON are kept as the text the model wrote.
            Value::String(text) => serde_json::from_str(text).unwrap_or(json!(text)),
            other => other.clone(),
        };
        content.push_str(&json!({"tool": call.name, "arguments": arguments}).to_string());
    }
    json!({"role": "assistant", "content": content})
}

/// The id given to the call read from a constrained answer (the wire has none).
pub const CONSTRAINED_CALL_ID: &str = "answer";

/// Reads a constrained answer: text that is exactly one `{"tool", "arguments"}` object becomes
/// that tool call; anything else (prose, a cut-off object) stays text, for the loop to judge
/// like any reply that made no call. The arguments are not checked here: the loop validates
/// them like any other call's.
pub(super) fn read_answer(content: Vec<ContentBlock>) -> Vec<ContentBlock> {
    if content.iter().any(|block| matches!(block, ContentBlock::ToolCall(_))) {
        return content;
    }
    let text: String = content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let Ok(Value::Object(mut answer)) = serde_json::from_str::<Value>(text.trim()) else {
        return content;
    };
    let (Some(Value::String(name)), Some(arguments)) =
        (answer.remove("tool"), answer.remove("arguments"))
    else {
        return content;
    };
    if !answer.is_empty() {
        return content;
    }
    let mut out: Vec<ContentBlock> =
        content.into_iter().filter(|block| !matches!(block, ContentBlock::Text { .. })).collect();
    out.push(ContentBlock::ToolCall(ToolCall {
        id: CONSTRAINED_CALL_ID.to_owned(),
        name,
        arguments,
    }));
    out
}
