//! The benchmark cases, shared by the native bench binary and the wasm build that Node runs,
//! so both measure the same code.
//!
//! Each case drives the real machine through [`drive`] with a scripted model that answers at
//! once and a host tool that answers at once, so what is measured is the engine itself: the
//! loop, schema validation, the transcript and the typed conversion.

use futures_util::FutureExt;
use serde::Deserialize;
use serde_json::json;
use verity_core::{
    AssistantMessage, NoTools, ScriptedModel, Tool, ToolCall, ToolOutput, Tools, drive, step,
};

pub mod retrieve;

/// The case names, in the order they are reported.
pub const CASES: [&str; 2] = ["step-1-turn", "step-5-turns"];

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Answer {
    answer: String,
}

struct Lookup;

impl Tools for Lookup {
    async fn run(&self, call: &ToolCall) -> ToolOutput {
        ToolOutput::ok(format!("results for {}: none", call.arguments["query"]), json!({}))
    }
}

fn lookup_tool() -> Tool {
    Tool::new(
        "lookup",
        "Looks something up.",
        json!({"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}),
    )
    .expect("a valid schema")
}

/// Runs `case` once; panics if the engine does not produce the expected value.
///
/// # Panics
/// On an unknown case or a wrong result (a benchmark of a broken engine is worthless).
pub fn run_once(case: &str, lookup: &Tool) {
    let submit = AssistantMessage::tool_call("s1", "submit", json!({"answer": "42"}));
    let value = match case {
        "step-1-turn" => {
            let model = ScriptedModel::new([submit]);
            let machine = step::<Answer>("You answer by calling submit.", "What is the answer?")
                .build()
                .expect("valid");
            drive(machine, &model, &NoTools).now_or_never()
        }
        "step-5-turns" => {
            let mut script: Vec<AssistantMessage> = (0..4)
                .map(|i| {
                    AssistantMessage::tool_call(format!("l{i}"), "lookup", json!({"query": "q"}))
                })
                .collect();
            script.push(submit);
            let model = ScriptedModel::new(script);
            let machine = step::<Answer>("You answer by calling submit.", "What is the answer?")
                .tool(lookup.clone())
                .build()
                .expect("valid");
            drive(machine, &model, &Lookup).now_or_never()
        }
        other => panic!("unknown case {other:?}"),
    };
    let answer = value.expect("scripted futures never wait").expect("the step must succeed");
    assert_eq!(answer.answer, "42", "the step returns the submitted value");
}

/// Runs `case` `iterations` times.
pub fn run(case: &str, iterations: u32) {
    let lookup = lookup_tool();
    for _ in 0..iterations {
        run_once(case, &lookup);
    }
}

/// The wasm entry point Node calls.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn bench_run(case: &str, iterations: u32) {
    run(case, iterations);
}
