//! Property tests against random scripts: bounds hold, only valid values return, the first
//! valid submission wins, and every tool call gets exactly one result.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::*;
use proptest::prelude::*;
use serde_json::{Value, json};
use verity_core::{
    AssistantMessage, ContentBlock, Machine, Schema, ScriptedModel, StopReason, Tool, ToolOutput,
    value_step,
};

#[derive(Debug, Clone)]
enum Call {
    ValidSubmit(u8),
    InvalidSubmit,
    Lookup,
    Finish,
    Unknown,
}

#[derive(Debug, Clone)]
enum Response {
    Prose,
    Failed,
    Calls { calls: Vec<Call>, truncated: bool },
}

fn call_strategy() -> impl Strategy<Value = Call> {
    prop_oneof![
        3 => any::<u8>().prop_map(Call::ValidSubmit),
        3 => Just(Call::InvalidSubmit),
        3 => Just(Call::Lookup),
        1 => Just(Call::Finish),
        1 => Just(Call::Unknown),
    ]
}

fn response_strategy() -> impl Strategy<Value = Response> {
    prop_oneof![
        1 => Just(Response::Prose),
        1 => Just(Response::Failed),
        8 => (prop::collection::vec(call_strategy(), 1..4), prop::bool::weighted(0.1))
            .prop_map(|(calls, truncated)| Response::Calls { calls, truncated }),
    ]
}

fn to_message(index: usize, response: &Response) -> AssistantMessage {
    match response {
        Response::Prose => AssistantMessage::text("prose"),
        Response::Failed => AssistantMessage::failed("503 Service Unavailable"),
        Response::Calls { calls, truncated } => {
            let blocks: Vec<ContentBlock> = calls
                .iter()
                .enumerate()
                .map(|(j, c)| {
                    let id = format!("c{index}-{j}");
                    match c {
                        Call::ValidSubmit(n) => {
                            call(&id, "submit", json!({"answer": n.to_string()}))
                        }
                        Call::InvalidSubmit => call(&id, "submit", json!({"answer": 1})),
                        Call::Lookup => call(&id, "lookup", json!({"query": "q"})),
                        Call::Finish => call(&id, "finish", json!({})),
                        Call::Unknown => call(&id, "nope", json!({})),
                    }
                })
                .collect();
            let mut message = AssistantMessage::from_content(blocks);
            if *truncated {
                message.stop_reason = Some(StopReason::Length);
            }
            message
        }
    }
}

/// The first valid submission the model made in the responses it was able to make.
fn first_valid(script: &[Response], consumed: usize) -> Option<Value> {
    script.iter().take(consumed).find_map(|response| match response {
        Response::Calls { calls, truncated: false } => calls.iter().find_map(|c| match c {
            Call::ValidSubmit(n) => Some(json!({"answer": n.to_string()})),
            _ => None,
        }),
        _ => None,
    })
}

/// A small reference model of the step's policy (POLICY.md), written from the policy text
/// without the machine: what a script must produce, as (value or failure kind, requests).
fn reference(
    script: &[Response],
    max_turns: u32,
    max_attempts: u32,
) -> (Result<Value, &'static str>, u32) {
    let (mut requests, mut failed, mut value) = (0u32, 0u32, None::<Value>);
    let end = loop {
        requests += 1;
        let Some(response) = script.get(requests as usize - 1) else { break "provider" };
        let calls = match response {
            Response::Failed => break "provider",
            Response::Prose => break "stopped",
            Response::Calls { calls, truncated: true } => {
                failed += calls
                    .iter()
                    .filter(|c| matches!(c, Call::ValidSubmit(_) | Call::InvalidSubmit))
                    .count() as u32;
                if failed >= max_attempts {
                    break "halted";
                }
                if requests >= max_turns {
                    break "turn-limit";
                }
                continue;
            }
            Response::Calls { calls, .. } => calls,
        };
        let mut all_terminate = true;
        for call in calls {
            match call {
                Call::ValidSubmit(n) => {
                    value.get_or_insert_with(|| json!({"answer": n.to_string()}));
                }
                Call::InvalidSubmit => {
                    failed += 1;
                    all_terminate = false;
                }
                Call::Finish => {}
                Call::Lookup | Call::Unknown => all_terminate = false,
            }
        }
        if failed >= max_attempts {
            break "halted";
        }
        if all_terminate {
            break "stopped";
        }
        if requests >= max_turns {
            break "turn-limit";
        }
    };
    let outcome = match (value, end) {
        (Some(value), _) => Ok(value),
        (None, "halted") => Err("invalid-submissions"),
        (None, "stopped") if failed > 0 => Err("invalid-submissions"),
        (None, "stopped") => Err("no-submit"),
        (None, other) => Err(other),
    };
    (outcome, requests)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_step_keeps_its_bounds_and_its_word(
        script in prop::collection::vec(response_strategy(), 0..12),
        max_turns in 1u32..7,
        max_attempts in 1u32..4,
    ) {
        let schema = Schema::compile(answer_schema()).unwrap();
        let finish = Tool::new("finish", "Ends the run.", json!({"type": "object"})).unwrap();
        let machine = value_step(schema.clone(), "system", "task")
            .tool(lookup())
            .tool(finish)
            .max_turns(max_turns)
            .max_attempts(max_attempts)
            .build()
            .unwrap();
        let model = ScriptedModel::new(script.iter().enumerate().map(|(i, r)| to_message(i, r)));
        let (_, machine) = run_sync(machine, &model, |call| match call.name.as_str() {
            "finish" => ToolOutput::ok("finished", json!({})).terminating(),
            _ => run_lookup(call),
        });

        prop_assert!(model.requests() <= max_turns, "{} requests, max_turns {}", model.requests(), max_turns);
        assert_one_result_per_call(machine.messages());
        let consumed = script.len() - model.remaining();
        let expected = first_valid(&script, consumed);
        let spent = machine.spent();
        prop_assert_eq!(spent.requests, model.requests());
        let (reference_outcome, reference_requests) = reference(&script, max_turns, max_attempts);
        prop_assert_eq!(model.requests(), reference_requests, "requests differ from the reference model");
        let outcome = machine.clone().finish().map_err(|failed| failed.kind().as_str());
        prop_assert_eq!(outcome, reference_outcome, "outcome differs from the reference model");
        match machine.finish() {
            Ok(value) => {
                prop_assert!(schema.is_valid(&value));
                prop_assert_eq!(Some(value), expected);
            }
            Err(failed) => {
                prop_assert_eq!(expected, None, "failed with {} although a valid submission was made", failed);
                prop_assert_eq!(failed.spent().requests, model.requests());
            }
        }
    }
}
