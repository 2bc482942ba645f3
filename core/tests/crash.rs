//! Property: crash the driver at random points of a random scripted run, rebuild from the
//! serialized session, continue. The outcome equals the uninterrupted run's when no tool was
//! cut off, the model is never asked more often than in the uninterrupted run, and no tool
//! that is not replay-safe runs twice.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::cell::RefCell;
use std::collections::HashMap;

use common::*;
use proptest::prelude::*;
use serde_json::{Value, json};
use verity_core::{
    AssistantMessage, Log, Schema, ScriptedModel, Session, SessionOutput, Step, Tool, ToolCall,
    ToolOutput, value_step,
};

type ValueStep = Step<Value>;

fn machine(max_turns: u32, max_attempts: u32) -> ValueStep {
    value_step(Schema::compile(answer_schema()).unwrap(), "system", "task")
        .tool(lookup())
        .tool(Tool::new("peek", "Reads.", json!({"type": "object"})).unwrap().replay_safe())
        .max_turns(max_turns)
        .max_attempts(max_attempts)
        .build()
        .unwrap()
}

#[derive(Debug, Clone)]
enum Call {
    Valid(u8),
    Invalid,
    Lookup,
    Peek,
}

fn script_strategy() -> impl Strategy<Value = Vec<Vec<Call>>> {
    let call = prop_oneof![
        any::<u8>().prop_map(Call::Valid),
        Just(Call::Invalid),
        Just(Call::Lookup),
        Just(Call::Peek),
    ];
    prop::collection::vec(prop::collection::vec(call, 0..4), 1..8)
}

fn to_script(script: &[Vec<Call>]) -> Vec<AssistantMessage> {
    script
        .iter()
        .enumerate()
        .map(|(i, calls)| {
            if calls.is_empty() {
                return AssistantMessage::text("prose");
            }
            response(
                calls
                    .iter()
                    .enumerate()
                    .map(|(j, c)| {
                        let id = format!("c{i}-{j}");
                        match c {
                            Call::Valid(n) => call(&id, "submit", json!({"answer": n.to_string()})),
                            Call::Invalid => call(&id, "submit", json!({})),
                            Call::Lookup => call(&id, "lookup", json!({"query": id})),
                            Call::Peek => call(&id, "peek", json!({})),
                        }
                    })
                    .collect(),
            )
        })
        .collect()
}

#[derive(Default)]
struct Counting {
    runs: RefCell<HashMap<String, u32>>,
}

impl Counting {
    fn run(&self, call: &ToolCall) -> ToolOutput {
        *self.runs.borrow_mut().entry(call.id.clone()).or_default() += 1;
        ToolOutput::ok(format!("{} result", call.id), json!({}))
    }
}

enum Stop {
    Done,
    /// The driver died; the log survived. `cut_off`: a call that is not replay-safe was
    /// started and its result not recorded.
    Crashed {
        log: String,
        cut_off: bool,
    },
}

/// Drives until done or until `actions` actions have been taken (each model call, tool start,
/// tool run and tool settle is one), then crashes.
fn run(
    session: &mut Session<ValueStep>,
    model: &ScriptedModel,
    tools: &Counting,
    actions: &mut usize,
) -> Stop {
    let mut in_flight_unsafe = false;
    loop {
        let crash = |in_flight_unsafe: bool, session: &Session<ValueStep>| Stop::Crashed {
            log: session.log().to_jsonl(),
            cut_off: in_flight_unsafe,
        };
        let take = |actions: &mut usize| {
            let done = *actions == 0;
            *actions = actions.saturating_sub(1);
            done
        };
        match session.poll() {
            SessionOutput::CallModel(c) => {
                if take(actions) {
                    return crash(in_flight_unsafe, session);
                }
                let id = c.id;
                let response = model.answer(c.request);
                session.record_response(id, response).unwrap();
            }
            SessionOutput::RunTools { batch, pending, .. } => {
                let next = pending.iter().find(|p| !p.started).expect("a call to run");
                let (call, replay_safe) = (next.call.clone(), next.replay_safe);
                if take(actions) {
                    return crash(in_flight_unsafe, session);
                }
                session.start_tool(batch, &call.id).unwrap();
                in_flight_unsafe = !replay_safe;
                if take(actions) {
                    return crash(in_flight_unsafe, session);
                }
                let output = tools.run(&call);
                if take(actions) {
                    return crash(in_flight_unsafe, session);
                }
                session.settle_tool(batch, &call.id, output).unwrap();
                in_flight_unsafe = false;
            }
            _ => return Stop::Done,
        }
    }
}

fn outcome(session: Session<ValueStep>) -> Result<Value, String> {
    session.finish().map_err(|failed| failed.kind().as_str().to_owned())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn a_crashed_run_resumes_without_paying_twice_or_running_a_tool_twice(
        script in script_strategy(),
        crashes in prop::collection::vec(0usize..30, 1..4),
        max_turns in 1u32..6,
        max_attempts in 1u32..3,
    ) {
        // Uninterrupted.
        let whole_model = ScriptedModel::new(to_script(&script));
        let whole_tools = Counting::default();
        let mut whole = Session::start(machine(max_turns, max_attempts)).unwrap();
        let mut unlimited = usize::MAX;
        prop_assert!(matches!(run(&mut whole, &whole_model, &whole_tools, &mut unlimited), Stop::Done));
        let whole_outcome = outcome(whole);

        // Interrupted at each crash point in turn.
        let model = ScriptedModel::new(to_script(&script));
        let tools = Counting::default();
        let mut session = Session::start(machine(max_turns, max_attempts)).unwrap();
        let mut cut_off = false;
        for &after in &crashes {
            let mut actions = after;
            match run(&mut session, &model, &tools, &mut actions) {
                Stop::Done => break,
                Stop::Crashed { log, cut_off: cut } => {
                    cut_off |= cut;
                    drop(session);
                    session = Session::resume(Log::from_jsonl(&log).unwrap(), None).unwrap();
                }
            }
        }
        let mut unlimited = usize::MAX;
        prop_assert!(matches!(run(&mut session, &model, &tools, &mut unlimited), Stop::Done));
        assert_one_result_per_call(session.machine().messages());

        prop_assert!(model.requests() <= whole_model.requests(),
            "{} requests after crashes, {} uninterrupted", model.requests(), whole_model.requests());
        for (id, runs) in tools.runs.borrow().iter() {
            // Call ids are `c{response}-{call}`.
            let (i, j) = id[1..].split_once('-').unwrap();
            let replay_safe = matches!(script[i.parse::<usize>().unwrap()][j.parse::<usize>().unwrap()], Call::Peek);
            prop_assert!(*runs == 1 || replay_safe, "{id} ran {runs} times");
        }
        if !cut_off {
            prop_assert_eq!(outcome(session), whole_outcome);
            prop_assert_eq!(model.requests(), whole_model.requests());
        }
    }
}
