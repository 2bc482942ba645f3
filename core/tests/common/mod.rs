//! Helpers shared by the core's integration tests.
#![allow(dead_code)]

use serde_json::{Value, json};
use verity_core::{
    AssistantMessage, ContentBlock, Input, Machine, Message, Output, ScriptedModel, Settled, Tool,
    ToolCall, ToolOutput,
};

pub fn answer_schema() -> Value {
    json!({"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}})
}

pub fn lookup() -> Tool {
    Tool::new(
        "lookup",
        "Looks something up.",
        json!({"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}),
    )
    .unwrap()
}

pub fn call(id: &str, name: &str, arguments: Value) -> ContentBlock {
    ContentBlock::ToolCall(ToolCall { id: id.into(), name: name.into(), arguments })
}

pub fn response(blocks: Vec<ContentBlock>) -> AssistantMessage {
    AssistantMessage::from_content(blocks)
}

/// The host side of the suite's `lookup`.
pub fn run_lookup(call: &ToolCall) -> ToolOutput {
    ToolOutput::ok(format!("results for {}: none", call.arguments["query"]), json!({}))
}

/// Drives `machine` synchronously with `model`, answering tool batches with `run`, and
/// returns the kinds of outputs seen (the protocol's transcript) and the machine at Done.
pub fn run_sync<M: Machine>(
    mut machine: M,
    model: &ScriptedModel,
    run: impl Fn(&ToolCall) -> ToolOutput,
) -> (Vec<&'static str>, M) {
    let mut kinds = Vec::new();
    loop {
        let input = match machine.poll_output() {
            Output::CallModel(call) => {
                kinds.push("call-model");
                Input::ModelResponse { call: call.id, response: model.answer(call.request) }
            }
            Output::RunTools(batch) => {
                kinds.push(if batch.sequential { "run-tools-sequential" } else { "run-tools" });
                let results = batch
                    .calls
                    .iter()
                    .map(|call| Settled { call_id: call.id.clone(), output: run(call) })
                    .collect();
                Input::Seal { batch: batch.id, results }
            }
            Output::Done => {
                kinds.push("done");
                return (kinds, machine);
            }
            _ => unreachable!("no other outputs exist"),
        };
        machine.handle_input(input).expect("the host answers correctly");
    }
}

/// Every tool call of the transcript has exactly one result, and every result answers a call.
pub fn assert_one_result_per_call(messages: &[Message]) {
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        match message {
            Message::Assistant(response) => {
                assert!(open.is_empty(), "a response arrived while calls were open: {open:?}");
                if !response.stop_reason().is_failure() {
                    open.extend(response.tool_calls().map(|call| call.id.clone()));
                }
            }
            Message::ToolResult(result) => {
                let position = open.iter().position(|id| *id == result.call_id);
                let position = position.unwrap_or_else(|| panic!("orphan result {result:?}"));
                open.remove(position);
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "calls without a result: {open:?}");
}
