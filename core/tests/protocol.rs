//! The machine protocol, tested by its transcript: outputs, misuse, ordering, cancel, resume.
//! These run natively and, through wasm-bindgen-test, in wasm under Node.

mod common;

use common::*;
use serde_json::json;
use verity_core::{
    AssistantMessage, FailureKind, Input, Machine, Message, MisuseKind, NoTools, Output,
    ScriptedModel, Settled, Step, StepOptions, StopReason, Tool, ToolOutput, drive, step,
    value_step,
};

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn answer_step() -> verity_core::StepBuilder<serde_json::Value> {
    value_step(
        verity_core::Schema::compile(answer_schema()).unwrap(),
        "You answer by calling submit.",
        "What is the answer?",
    )
}

#[test]
fn transcript_of_a_step_with_a_lookup() {
    let model = ScriptedModel::new([
        response(vec![call("l1", "lookup", json!({"query": "x"}))]),
        response(vec![call("s1", "submit", json!({"answer": "42"}))]),
    ]);
    let machine = answer_step().tool(lookup()).build().unwrap();
    let (kinds, machine) = run_sync(machine, &model, run_lookup);
    assert_eq!(kinds, ["call-model", "run-tools", "call-model", "done"]);
    assert_one_result_per_call(machine.messages());
    assert_eq!(machine.finish().unwrap(), json!({"answer": "42"}));
}

#[test]
fn a_sequential_tool_flags_its_batch() {
    let model = ScriptedModel::new([
        response(vec![
            call("l1", "lookup", json!({"query": "x"})),
            call("q1", "lookup_seq", json!({"query": "y"})),
        ]),
        response(vec![call("s1", "submit", json!({"answer": "42"}))]),
    ]);
    let sequential =
        Tool::new("lookup_seq", "In order.", json!({"type": "object"})).unwrap().sequential();
    let machine = answer_step().tool(lookup()).tool(sequential).build().unwrap();
    let (kinds, _) = run_sync(machine, &model, run_lookup);
    assert_eq!(kinds, ["call-model", "run-tools-sequential", "call-model", "done"]);
}

#[test]
fn outputs_are_level_triggered() {
    let mut machine = answer_step().build().unwrap();
    let first = match machine.poll_output() {
        Output::CallModel(call) => call.id,
        other => panic!("expected a model call, got {other:?}"),
    };
    let again = match machine.poll_output() {
        Output::CallModel(call) => call.id,
        other => panic!("expected a model call, got {other:?}"),
    };
    assert_eq!(first, again);
}

#[test]
fn misuse_is_an_error_value_and_changes_nothing() {
    let mut machine = answer_step().tool(lookup()).build().unwrap();
    let Output::CallModel(model_call) = machine.poll_output() else {
        panic!("expected a model call")
    };
    let id = model_call.id;
    let state = |machine: &Step<serde_json::Value>| serde_json::to_value(machine).unwrap();
    let before = state(&machine);

    // A seal while a model call is open.
    let misuse = machine
        .handle_input(Input::Seal { batch: id, results: vec![] })
        .expect_err("a seal answers no model call");
    assert_eq!(misuse.kind, MisuseKind::UnexpectedInput);
    assert_eq!(state(&machine), before, "a refused seal changes nothing");

    // A response with the wrong id.
    let wrong = verity_core::CallId(id.0 + 7);
    let misuse = machine
        .handle_input(Input::ModelResponse { call: wrong, response: AssistantMessage::text("hi") })
        .expect_err("wrong id");
    assert_eq!(misuse.kind, MisuseKind::UnexpectedInput);
    assert!(matches!(machine.poll_output(), Output::CallModel(c) if c.id == id));
    assert_eq!(state(&machine), before, "a refused response changes nothing");

    let two_lookups = response(vec![
        call("a", "lookup", json!({"query": "1"})),
        call("b", "lookup", json!({"query": "2"})),
    ]);
    machine.handle_input(Input::ModelResponse { call: id, response: two_lookups }).unwrap();
    let Output::RunTools(batch) = machine.poll_output() else { panic!("expected tools") };
    let batch_id = batch.id;
    let ok = |id: &str| Settled { call_id: id.into(), output: ToolOutput::ok("r", json!(null)) };
    let before = state(&machine);

    // A seal missing a call, one with a stranger, one with a duplicate.
    for results in [vec![ok("a")], vec![ok("a"), ok("z")], vec![ok("a"), ok("a")]] {
        let misuse = machine
            .handle_input(Input::Seal { batch: batch_id, results })
            .expect_err("a different set of calls");
        assert_eq!(misuse.kind, MisuseKind::WrongCalls);
        assert!(matches!(machine.poll_output(), Output::RunTools(b) if b.id == batch_id));
        assert_eq!(state(&machine), before, "a refused seal changes nothing");
    }

    // The right set, in the wrong order: recorded in the model's order.
    let results = vec![
        Settled { call_id: "b".into(), output: ToolOutput::ok("second", json!(null)) },
        Settled { call_id: "a".into(), output: ToolOutput::ok("first", json!(null)) },
    ];
    machine.handle_input(Input::Seal { batch: batch_id, results }).unwrap();
    let recorded: Vec<&str> = machine
        .messages()
        .iter()
        .filter_map(|message| match message {
            Message::ToolResult(result) => Some(result.output.content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(recorded, ["first", "second"]);

    // Input after Done.
    let Output::CallModel(model_call) = machine.poll_output() else {
        panic!("expected a model call")
    };
    let id = model_call.id;
    let submit = response(vec![call_block_submit()]);
    machine.handle_input(Input::ModelResponse { call: id, response: submit }).unwrap();
    assert!(matches!(machine.poll_output(), Output::Done));
    let before = state(&machine);
    let misuse = machine
        .handle_input(Input::Cancel { reason: "late".into() })
        .expect_err("input after done");
    assert_eq!(misuse.kind, MisuseKind::Finished);
    assert_eq!(state(&machine), before, "input after the end changes nothing");
    assert_eq!(machine.finish().unwrap(), json!({"answer": "42"}));
}

fn call_block_submit() -> verity_core::ContentBlock {
    call("s1", "submit", json!({"answer": "42"}))
}

#[test]
fn cancel_settles_every_open_call_as_aborted() {
    let mut machine = answer_step().tool(lookup()).build().unwrap();
    let Output::CallModel(model_call) = machine.poll_output() else { panic!() };
    let id = model_call.id;
    let batch = response(vec![
        call_block_submit(),
        call("l1", "lookup", json!({"query": "1"})),
        call("l2", "lookup", json!({"query": "2"})),
    ]);
    machine.handle_input(Input::ModelResponse { call: id, response: batch }).unwrap();
    assert!(matches!(machine.poll_output(), Output::RunTools(_)));
    machine.handle_input(Input::Cancel { reason: "user pressed stop".into() }).unwrap();
    assert!(matches!(machine.poll_output(), Output::Done));
    assert_one_result_per_call(machine.messages());
    let aborted = machine
        .messages()
        .iter()
        .filter(|m| matches!(m, Message::ToolResult(r) if r.output.is_error && r.output.content.starts_with("aborted")))
        .count();
    assert_eq!(aborted, 2);
    // The submission made before the cancel is kept.
    assert_eq!(machine.finish().unwrap(), json!({"answer": "42"}));
}

#[test]
fn cancel_before_any_submission_fails_as_cancelled() {
    let mut machine = answer_step().build().unwrap();
    machine.handle_input(Input::Cancel { reason: "stop".into() }).unwrap();
    let failed = machine.finish().unwrap_err();
    assert_eq!(failed.kind(), FailureKind::Cancelled);
    assert_eq!(failed.spent().requests, 0);
}

#[test]
fn a_serialized_machine_resumes_to_the_same_result() {
    let script = [
        response(vec![call("s0", "submit", json!({}))]),
        response(vec![call("l1", "lookup", json!({"query": "x"}))]),
        response(vec![call("s1", "submit", json!({"answer": "42"}))]),
    ];
    // Uninterrupted.
    let model = ScriptedModel::new(script.clone());
    let (_, whole) = run_sync(answer_step().tool(lookup()).build().unwrap(), &model, run_lookup);
    let whole_messages = whole.messages().to_vec();
    // Interrupted at every point: serialize, rebuild, continue.
    for cut in 0..5 {
        let model = ScriptedModel::new(script.clone());
        let mut machine = answer_step().tool(lookup()).build().unwrap();
        for _ in 0..cut {
            let input = match machine.poll_output() {
                Output::CallModel(call) => {
                    Input::ModelResponse { call: call.id, response: model.answer(call.request) }
                }
                Output::RunTools(batch) => Input::Seal {
                    batch: batch.id,
                    results: batch
                        .calls
                        .iter()
                        .map(|c| Settled { call_id: c.id.clone(), output: run_lookup(c) })
                        .collect(),
                },
                _ => break,
            };
            machine.handle_input(input).unwrap();
        }
        let saved = serde_json::to_string(&machine).unwrap();
        let resumed: Step<serde_json::Value> = serde_json::from_str(&saved).unwrap();
        let (_, resumed) = run_sync(resumed, &model, run_lookup);
        assert_eq!(resumed.messages(), whole_messages.as_slice(), "cut at {cut}");
        assert_eq!(resumed.spent(), whole.spent(), "cut at {cut}");
        assert_eq!(resumed.finish().unwrap(), json!({"answer": "42"}));
    }
}

#[test]
fn the_model_reads_every_violation_of_a_failed_submit() {
    let model = ScriptedModel::new([
        response(vec![call("s1", "submit", json!({"answer": 7, "extra": true}))]),
        response(vec![call("s2", "submit", json!({"answer": "7"}))]),
    ])
    .recording();
    let machine = value_step(
        verity_core::Schema::compile(json!({
            "type": "object", "required": ["answer"], "additionalProperties": false,
            "properties": {"answer": {"type": "string"}}
        }))
        .unwrap(),
        "system",
        "input",
    )
    .build()
    .unwrap();
    pollster::block_on(drive(machine, &model, &NoTools)).unwrap();
    let second = &model.recorded()[1];
    let Some(Message::ToolResult(result)) = second.messages.last() else { panic!() };
    assert!(result.output.is_error);
    assert!(
        result.output.content.starts_with("Validation failed for tool \"submit\":"),
        "{}",
        result.output.content
    );
    assert!(result.output.content.contains("\n  - answer: "), "{}", result.output.content);
    assert!(result.output.content.contains("\n  - (root): "), "{}", result.output.content);
    // The system prompt, the task and both tools reach the model.
    assert_eq!(second.system, "system");
    assert_eq!(second.tools[0].name, "submit");
}

#[test]
fn a_truncated_response_has_every_call_refused() {
    let mut truncated = response(vec![
        call("s1", "submit", json!({"answer": "42"})),
        call("l1", "lookup", json!({"query": "x"})),
    ]);
    truncated.stop_reason = Some(StopReason::Length);
    let model = ScriptedModel::new([
        truncated,
        response(vec![call("s2", "submit", json!({"answer": "42"}))]),
    ]);
    let (kinds, machine) = run_sync(answer_step().tool(lookup()).build().unwrap(), &model, |_| {
        panic!("a refused call must not reach the host")
    });
    assert_eq!(kinds, ["call-model", "call-model", "done"]);
    assert_eq!(machine.spent().failed_attempts, 1);
    assert_one_result_per_call(machine.messages());
    assert_eq!(machine.finish().unwrap(), json!({"answer": "42"}));
}

#[test]
fn invalid_arguments_of_a_host_tool_never_reach_the_host() {
    let model = ScriptedModel::new([
        response(vec![call("l1", "lookup", json!({"q": "wrong field"}))]),
        response(vec![call("s1", "submit", json!({"answer": "42"}))]),
    ]);
    let (kinds, machine) = run_sync(answer_step().tool(lookup()).build().unwrap(), &model, |_| {
        panic!("invalid arguments must not reach the host")
    });
    assert_eq!(kinds, ["call-model", "call-model", "done"]);
    // Not a failed attempt: only submit calls count.
    assert_eq!(machine.spent().failed_attempts, 0);
}

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Triage {
    severity: Severity,
    score: u8,
}

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Severity {
    Low,
    High,
}

#[test]
fn a_typed_step_returns_its_type_and_reports_what_it_spent() {
    let model = ScriptedModel::new([
        response(vec![call("s1", "submit", json!({"severity": "urgent", "score": 3}))]),
        response(vec![call("s2", "submit", json!({"severity": "high", "score": 300}))]),
        response(vec![call("s3", "submit", json!({"severity": "high", "score": 3}))]),
    ]);
    let machine = step::<Triage>("s", "i").build().unwrap();
    let value = pollster::block_on(drive(machine, &model, &NoTools)).unwrap();
    assert_eq!(value, Triage { severity: Severity::High, score: 3 });

    let model =
        ScriptedModel::new([response(vec![call("s1", "submit", json!({"severity": "urgent"}))])]);
    let machine = step::<Triage>("s", "i").max_attempts(2).build().unwrap();
    let failed = pollster::block_on(drive(machine, &model, &NoTools)).unwrap_err();
    // The second request finds the script used up.
    assert_eq!(failed.kind(), FailureKind::Provider);
    assert_eq!(failed.spent().requests, 2);
    assert_eq!(failed.spent().turns, 2);
    assert_eq!(failed.spent().failed_attempts, 1);
}

#[test]
fn configuration_guards() {
    let zero = answer_step().max_attempts(0).build().unwrap_err();
    assert_eq!(
        (zero.kind(), zero.message()),
        (FailureKind::Config, "maxAttempts must be a positive integer")
    );
    let zero = answer_step().max_turns(0).build().unwrap_err();
    assert_eq!(zero.message(), "maxTurns must be a positive integer");
    let reserved = Tool::new("submit", "", json!({})).unwrap();
    assert_eq!(answer_step().tool(reserved).build().unwrap_err().kind(), FailureKind::Config);
    // Bounds as JSON carries them, through the job configuration every host sends.
    let step = |bound: serde_json::Value| {
        let config = json!({"kind": "step", "prompt": "p", "schema": answer_schema(),
                            "maxAttempts": bound});
        verity_core::JobConfig::from_value(config)
    };
    for bad in
        [json!(0), json!(1.5), json!("3"), json!(-1), json!(9007199254740992_u64), json!(true)]
    {
        let error = step(bad.clone()).unwrap_err();
        assert_eq!(error.path(), "maxAttempts", "{bad}");
        assert!(error.message().starts_with("must be a positive integer"), "{bad}: {error}");
    }
    let verity_core::JobConfig::Step(defaults) = step(json!(null)).unwrap() else { panic!() };
    assert_eq!(defaults.max_attempts, None, "null means the default");
    let verity_core::JobConfig::Step(two) = step(json!(2.0)).unwrap() else { panic!() };
    assert_eq!(two.max_attempts, Some(2));
    assert_eq!(StepOptions::default().max_attempts, 3);
}

/// llama.cpp's answer when it cannot parse the tool call its own model wrote.
fn unparsable_tool_call() -> AssistantMessage {
    let body = r#"{"error":{"code":500,"message":"Failed to parse input at pos 12: </tool_call>","type":"server_error"}}"#;
    let config = verity_core::provider::OpenAiConfig::llama_server("smollm2");
    verity_core::provider::openai::decode(&verity_core::HttpResponse::new(500, body), &config)
}

#[test]
fn an_answer_the_server_could_not_parse_is_a_failed_attempt_not_a_transport_error() {
    let unreadable = unparsable_tool_call();
    assert_eq!(unreadable.error.as_ref().unwrap().class, verity_core::FailureClass::ModelOutput);
    // Asked again within the attempt budget: the second answer is used.
    let model = ScriptedModel::new([
        unreadable.clone(),
        response(vec![call("s1", "submit", json!({"answer": "42"}))]),
    ]);
    let machine = answer_step().max_attempts(2).build().unwrap();
    let value = pollster::block_on(drive(machine, &model, &NoTools)).unwrap();
    assert_eq!(value, json!({"answer": "42"}));
    assert_eq!(model.requests(), 2);
    // Every unreadable answer counts: the budget of one ends the step at the first.
    let model = ScriptedModel::new([
        unreadable,
        response(vec![call("s1", "submit", json!({"answer": "42"}))]),
    ]);
    let machine = answer_step().max_attempts(1).build().unwrap();
    let failed = pollster::block_on(drive(machine, &model, &NoTools)).unwrap_err();
    assert_eq!(failed.kind(), FailureKind::Provider);
    assert_eq!(failed.spent().failed_attempts, 1);
    assert_eq!(model.requests(), 1);
}
