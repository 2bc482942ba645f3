//! The benchmark cases, shared by the native bench binary and the wasm build that Node runs,
//! so both measure the same code.
//!
//! Each case drives the real machine through [`drive`] with a scripted model that answers at
//! once and a host tool that answers at once, so what is measured is the engine itself: the
//! loop, schema validation, the transcript and the typed conversion. Every run checks its
//! outcome and panics if it is wrong.

use futures_util::FutureExt;
use serde::Deserialize;
use serde_json::json;
use verity_core::{
    AssistantMessage, NoTools, ScriptedModel, Tool, ToolCall, ToolOutput, Tools, drive, step,
};

pub mod claim;
pub mod retrieve;

/// A benchmark case and the TypeScript design's figure for it.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// The case's name.
    pub name: &'static str,
    /// CPU µs per run of the same case in the TypeScript design (pi-agent-core 1.0.3, Node 20,
    /// this project's CI machine).
    pub ts_cpu_us_per_op: f64,
}

/// How many times less CPU than the TypeScript design the native build aims for.
pub const NATIVE_GOAL: f64 = 20.0;
/// How many times less CPU than the TypeScript design the wasm build (in Node) aims for.
pub const WASM_GOAL: f64 = 8.0;

/// `bench step`: a scripted model that answers at once, 1 and 5 turns.
pub const STEP: [Case; 2] = [
    Case { name: "step-1-turn", ts_cpu_us_per_op: 162.0 },
    Case { name: "step-5-turns", ts_cpu_us_per_op: 585.0 },
];

/// `bench claim`: the cheap route (2 requests) and the escalation route (5 requests).
pub const CLAIM: [Case; 2] = [
    Case { name: "claim-cheap", ts_cpu_us_per_op: 450.0 },
    Case { name: "claim-escalation", ts_cpu_us_per_op: 680.0 },
];

/// The cases of a suite (`step` or `claim`), in the order they are reported.
#[must_use]
pub fn suite(name: &str) -> Option<&'static [Case]> {
    match name {
        "step" => Some(&STEP),
        "claim" => Some(&CLAIM),
        _ => None,
    }
}

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

/// Runs a step case once; panics if the engine does not produce the expected value.
///
/// # Panics
/// On an unknown case or a wrong result (a benchmark of a broken engine is worthless).
fn run_step_once(case: &str, lookup: &Tool) {
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
///
/// # Panics
/// On an unknown case or a wrong result (a benchmark of a broken engine is worthless).
pub fn run(case: &str, iterations: u32) {
    if case.starts_with("claim-") {
        for _ in 0..iterations {
            claim::run_once(case).unwrap_or_else(|| panic!("unknown case {case:?}"));
        }
        return;
    }
    let lookup = lookup_tool();
    for _ in 0..iterations {
        run_step_once(case, &lookup);
    }
}

/// The wasm entry point Node calls.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn bench_run(case: &str, iterations: u32) {
    run(case, iterations);
}

/// The cases of `suite` for Node, as JSON: `[{"name","ts_cpu_us_per_op","goal"}]`, the goal
/// being the wasm one.
///
/// # Panics
/// On an unknown suite.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn bench_cases(suite: &str) -> String {
    let cases = self::suite(suite).unwrap_or_else(|| panic!("unknown suite {suite:?}"));
    let cases: Vec<serde_json::Value> = cases
        .iter()
        .map(|case| json!({"name": case.name, "ts_cpu_us_per_op": case.ts_cpu_us_per_op, "goal": WASM_GOAL}))
        .collect();
    serde_json::Value::from(cases).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_case_runs_and_checks_its_outcome() {
        for suite in ["step", "claim"] {
            for case in super::suite(suite).unwrap() {
                super::run(case.name, 2);
            }
        }
    }

    #[test]
    #[should_panic(expected = "unknown case")]
    fn an_unknown_claim_case_is_refused() {
        super::run("claim-nothing", 1);
    }
}
