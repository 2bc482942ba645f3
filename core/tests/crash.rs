//! Property: crash the store under `drive_session` at random appends of a random scripted run
//! (before the write lands, or after it landed and before the driver heard back), rebuild the
//! session from what the store holds, continue. The outcome and the request count equal the
//! uninterrupted run's, plus one request per response the crash lost, when no tool was cut
//! off; no tool that is not replay-safe runs twice; the store alone rebuilds the final state.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use common::*;
use proptest::prelude::*;
use serde_json::{Value, json};
use verity_core::log::Record;
use verity_core::session::UNKNOWN_OUTCOME;
use verity_core::{
    Append, AssistantMessage, DurableLog, Lease, Log, MemoryStore, Message, ModelRequest, Schema,
    Session, SessionError, Step, Store, Tool, ToolCall, ToolOutput, Tools, Transport,
    drive_session, value_step,
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

/// A model that answers by turn (the number of responses already in the request), so a
/// request made again after a lost response gets the same answer.
struct ByTurn {
    script: Vec<AssistantMessage>,
    requests: Cell<u32>,
}

impl Transport for ByTurn {
    async fn complete(&self, request: ModelRequest<'_>) -> AssistantMessage {
        self.requests.set(self.requests.get() + 1);
        let turn = request.messages.iter().filter(|m| matches!(m, Message::Assistant(_))).count();
        self.script.get(turn).cloned().unwrap_or_else(|| AssistantMessage::failed("no more"))
    }
}

#[derive(Default)]
struct Counting {
    runs: RefCell<HashMap<String, u32>>,
}

impl Tools for Counting {
    async fn run(&self, call: &ToolCall) -> ToolOutput {
        *self.runs.borrow_mut().entry(call.id.clone()).or_default() += 1;
        ToolOutput::ok(format!("{} result", call.id), json!({}))
    }
}

/// A store that crashes at its `n`th append from now: before the write lands, or after it
/// landed and before the driver heard back.
#[derive(Default)]
struct Crashing {
    inner: MemoryStore,
    crash_at: Cell<Option<(usize, bool)>>,
    /// Responses that were never stored (the crash hit their append before it landed).
    lost_responses: Cell<u32>,
}

impl Crashing {
    fn arm(&self, appends: usize, after_write: bool) {
        self.crash_at.set(Some((appends, after_write)));
    }
}

impl Store for Crashing {
    async fn append(&self, append: Append<'_>) -> Result<(), SessionError> {
        match self.crash_at.get() {
            Some((0, after_write)) => {
                self.crash_at.set(None);
                if after_write {
                    self.inner.append(append).await?;
                } else if append
                    .entries()
                    .iter()
                    .any(|e| matches!(e.record, Record::Response { .. }))
                {
                    self.lost_responses.set(self.lost_responses.get() + 1);
                }
                Err(SessionError::Store("crashed".to_owned()))
            }
            Some((n, after_write)) => {
                self.crash_at.set(Some((n - 1, after_write)));
                self.inner.append(append).await
            }
            None => self.inner.append(append).await,
        }
    }
    async fn load(&self) -> Result<DurableLog, SessionError> {
        self.inner.load().await
    }
    async fn take_lease(&self, holder: &str) -> Result<Lease, SessionError> {
        self.inner.take_lease(holder).await
    }
    async fn check_lease(&self, lease: Option<&Lease>) -> Result<(), SessionError> {
        self.inner.check_lease(lease).await
    }
}

fn outcome(session: Session<ValueStep>) -> Result<Value, String> {
    session.finish().map_err(|failed| failed.kind().as_str().to_owned())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn a_crashed_store_resumes_without_paying_twice_or_running_a_tool_twice(
        script in script_strategy(),
        crashes in prop::collection::vec((0usize..12, any::<bool>()), 1..4),
        max_turns in 1u32..6,
        max_attempts in 1u32..3,
    ) {
        let model = || ByTurn { script: to_script(&script), requests: Cell::new(0) };
        // Uninterrupted.
        let whole_model = model();
        let mut whole = Session::start(machine(max_turns, max_attempts)).unwrap();
        let store = MemoryStore::new();
        pollster::block_on(drive_session(&mut whole, &store, &whole_model, &Counting::default()))
            .unwrap();
        let whole_outcome = outcome(whole);

        // Crashed at each point in turn; only the store survives a crash.
        let model = model();
        let tools = Counting::default();
        let store = Crashing::default();
        let mut session = Session::start(machine(max_turns, max_attempts)).unwrap();
        for &(appends, after_write) in &crashes {
            store.arm(appends, after_write);
            match pollster::block_on(drive_session(&mut session, &store, &model, &tools)) {
                Ok(()) => break,
                Err(error) => {
                    prop_assert_eq!(error, SessionError::Store("crashed".to_owned()));
                    // Through the store's serialized form, as a host would read it back.
                    let saved = store.inner.log().to_jsonl();
                    session = if saved.is_empty() {
                        // Not even the start was stored: the run never began.
                        Session::start(machine(max_turns, max_attempts)).unwrap()
                    } else {
                        Session::resume(Log::from_jsonl(&saved).unwrap(), None).unwrap()
                    };
                }
            }
        }
        store.crash_at.set(None);
        pollster::block_on(drive_session(&mut session, &store, &model, &tools)).unwrap();
        let messages = session.machine().messages().to_vec();
        assert_one_result_per_call(&messages);
        let cut_off = messages.iter().any(|m| {
            matches!(m, Message::ToolResult(r) if r.output.content == UNKNOWN_OUTCOME)
        });

        // The store alone holds the run.
        let rebuilt: Session<ValueStep> = Session::resume(store.inner.log(), None).unwrap();
        prop_assert_eq!(rebuilt.machine().messages(), &messages[..]);

        let lost = store.lost_responses.get();
        prop_assert!(model.requests.get() <= whole_model.requests.get() + lost,
            "{} requests after crashes that lost {lost} response(s), {} uninterrupted",
            model.requests.get(), whole_model.requests.get());
        for (id, runs) in tools.runs.borrow().iter() {
            // Call ids are `c{response}-{call}`.
            let (i, j) = id[1..].split_once('-').unwrap();
            let replay_safe = matches!(script[i.parse::<usize>().unwrap()][j.parse::<usize>().unwrap()], Call::Peek);
            prop_assert!(*runs == 1 || replay_safe, "{id} ran {runs} times");
        }
        if !cut_off {
            prop_assert_eq!(outcome(session), whole_outcome);
            prop_assert_eq!(model.requests.get(), whole_model.requests.get() + lost);
        }
    }
}
