//! The split step as a durable protocol: a host drives turns from outside, sessions survive a
//! crash without paying twice or running a tool twice blindly, leases fence stale writers, and
//! the one retry layer.

mod common;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use common::*;
use serde_json::{Value, json};
use verity_core::log::{Entry, Record};
use verity_core::session::UNKNOWN_OUTCOME;
use verity_core::{
    Append, AssistantMessage, Cancel, Compaction, DriveOptions, DurableLog, Event, FailureClass,
    FailureKind, Input, Lease, Log, Machine, MemoryStore, Message, Output, ProviderError,
    RetryPolicy, Schema, ScriptedModel, Session, SessionError, SessionOutput, Settled, Step,
    StopReason, Store, Tool, ToolCall, ToolOutput, Tools, drive, drive_session, drive_with,
    value_step,
};

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

type ValueStep = Step<Value>;

fn peek() -> Tool {
    Tool::new("peek", "Reads a value.", json!({"type": "object"})).unwrap().replay_safe()
}

fn machine() -> ValueStep {
    value_step(Schema::compile(answer_schema()).unwrap(), "system", "task")
        .tool(lookup())
        .tool(peek())
        .build()
        .unwrap()
}

fn script() -> Vec<AssistantMessage> {
    vec![
        response(vec![
            call("l1", "lookup", json!({"query": "a"})),
            call("p1", "peek", json!({})),
            call("l2", "lookup", json!({"query": "b"})),
        ]),
        response(vec![call("s0", "submit", json!({}))]),
        response(vec![call("s1", "submit", json!({"answer": "42"}))]),
    ]
}

/// Host tools that count how often each call ran.
#[derive(Default)]
struct Counting {
    runs: RefCell<HashMap<String, u32>>,
}

impl Counting {
    fn output(&self, call: &ToolCall) -> ToolOutput {
        *self.runs.borrow_mut().entry(call.id.clone()).or_default() += 1;
        ToolOutput::ok(format!("{} ran for {}", call.name, call.id), json!({"id": call.id}))
    }
}

impl Tools for Counting {
    async fn run(&self, call: &ToolCall) -> ToolOutput {
        self.output(call)
    }
}

#[test]
fn a_turn_split_by_a_host_records_the_same_transcript_as_drive() {
    let model = ScriptedModel::new(script());
    let tools = Counting::default();
    let (_, driven) = run_sync(machine(), &model, |call| tools.output(call));
    // The same run, answered by `drive` itself.
    let model_b = ScriptedModel::new(script());
    let tools_b = Counting::default();
    let value = pollster::block_on(drive(machine(), &model_b, &tools_b)).unwrap();
    assert_eq!(value, json!({"answer": "42"}));

    // A host that defers, then settles the calls one at a time in reverse order.
    let model_c = ScriptedModel::new(script());
    let tools_c = Counting::default();
    let mut split = machine();
    loop {
        let input = match split.poll_output() {
            Output::CallModel(c) => {
                Input::ModelResponse { call: c.id, response: model_c.answer(c.request) }
            }
            Output::RunTools(b) => {
                let mut results: Vec<Settled> = b
                    .calls
                    .iter()
                    .map(|c| Settled { call_id: c.id.clone(), output: tools_c.output(c) })
                    .collect();
                results.reverse();
                Input::Seal { batch: b.id, results }
            }
            _ => break,
        };
        split.handle_input(input).unwrap();
    }
    assert_eq!(split.messages(), driven.messages(), "message level");
    assert_eq!(
        serde_json::to_value(&split).unwrap(),
        serde_json::to_value(&driven).unwrap(),
        "serialized machine level"
    );
    // Every host tool ran exactly once in each of the three runs.
    let once: HashMap<String, u32> = [("l1", 1), ("p1", 1), ("l2", 1)]
        .into_iter()
        .map(|(id, runs)| (id.to_owned(), runs))
        .collect();
    for (run, tools) in [("by hand", &tools), ("drive", &tools_b), ("split", &tools_c)] {
        assert_eq!(*tools.runs.borrow(), once, "{run}");
    }
}

/// Runs a session by hand the way `drive_session` does (start all, run, settle in order).
fn run_session_by_hand(model: &ScriptedModel, tools: &Counting) -> Session<ValueStep> {
    let mut session = Session::start(machine()).unwrap();
    loop {
        match session.poll() {
            SessionOutput::CallModel(c) => {
                let id = c.id;
                let response = model.answer(c.request);
                session.record_response(id, response).unwrap();
            }
            SessionOutput::RunTools { batch, pending, .. } => {
                let calls: Vec<ToolCall> = pending.iter().map(|p| p.call.clone()).collect();
                for c in &calls {
                    session.start_tool(batch, &c.id).unwrap();
                }
                for c in &calls {
                    session.settle_tool(batch, &c.id, tools.output(c)).unwrap();
                }
            }
            _ => return session,
        }
    }
}

#[test]
fn drive_session_and_a_host_write_the_same_log() {
    let by_hand = run_session_by_hand(&ScriptedModel::new(script()), &Counting::default());
    let mut driven = Session::start(machine()).unwrap();
    let store = MemoryStore::new();
    pollster::block_on(drive_session(
        &mut driven,
        &store,
        &ScriptedModel::new(script()),
        &Counting::default(),
    ))
    .unwrap();
    assert_eq!(by_hand.log().to_jsonl(), driven.log().to_jsonl());
    assert_eq!(store.log(), *driven.log(), "everything is in the store");
    // And the log rebuilds the machine exactly.
    let rebuilt: Session<ValueStep> =
        Session::resume(Log::from_jsonl(&driven.log().to_jsonl()).unwrap(), None).unwrap();
    assert_eq!(rebuilt.machine().messages(), driven.machine().messages());
    assert_eq!(rebuilt.finish().unwrap(), json!({"answer": "42"}));
}

/// A session whose first response is recorded (its tool batch is open).
fn past_the_first_response(model: &ScriptedModel) -> Session<ValueStep> {
    let mut session = Session::start(machine()).unwrap();
    let SessionOutput::CallModel(c) = session.poll() else {
        panic!("a step starts with a model call")
    };
    let id = c.id;
    let response = model.answer(c.request);
    session.record_response(id, response).unwrap();
    session
}

#[test]
fn a_recorded_response_is_never_requested_again() {
    let model = ScriptedModel::new(script());
    let session = past_the_first_response(&model);
    // Crash: only the log survives.
    let saved = session.log().to_jsonl();
    drop(session);
    let mut resumed: Session<ValueStep> =
        Session::resume(Log::from_jsonl(&saved).unwrap(), None).unwrap();
    assert!(matches!(resumed.poll(), SessionOutput::RunTools { .. }), "the response was replayed");
    let store = MemoryStore::from_log(resumed.log().clone());
    pollster::block_on(drive_session(&mut resumed, &store, &model, &Counting::default())).unwrap();
    assert_eq!(model.requests(), 3, "three responses, three requests: none paid twice");
    assert_eq!(resumed.finish().unwrap(), json!({"answer": "42"}));
}

#[test]
fn a_started_call_without_a_result_is_an_unknown_outcome_unless_replay_safe() {
    let model = ScriptedModel::new(script());
    let tools = Counting::default();
    let mut session = past_the_first_response(&model);
    let SessionOutput::RunTools { batch, pending, .. } = session.poll() else { panic!() };
    let calls: Vec<ToolCall> = pending.iter().map(|p| p.call.clone()).collect();
    // l1 finishes; p1 (replay-safe) and l2 start and run, then the host dies.
    session.start_tool(batch, "l1").unwrap();
    session.settle_tool(batch, "l1", tools.output(&calls[0])).unwrap();
    session.start_tool(batch, "p1").unwrap();
    tools.output(&calls[1]);
    session.start_tool(batch, "l2").unwrap();
    tools.output(&calls[2]);
    let saved = session.log().to_jsonl();
    drop(session);

    let mut resumed: Session<ValueStep> =
        Session::resume(Log::from_jsonl(&saved).unwrap(), None).unwrap();
    let SessionOutput::RunTools { pending, .. } = resumed.poll() else {
        panic!("the batch is still open")
    };
    let ids: Vec<&str> = pending.iter().map(|p| p.call.id.as_str()).collect();
    assert_eq!(ids, ["p1"], "only the replay-safe call is offered again");
    assert!(!pending[0].started);
    let store = MemoryStore::from_log(Log::from_jsonl(&saved).unwrap());
    pollster::block_on(drive_session(&mut resumed, &store, &model, &tools)).unwrap();

    let runs = tools.runs.borrow();
    assert_eq!(
        (runs["l1"], runs["l2"], runs["p1"]),
        (1, 1, 2),
        "l2 never ran twice; p1 was re-run"
    );
    let l2 = resumed
        .machine()
        .messages()
        .iter()
        .find_map(|m| match m {
            Message::ToolResult(r) if r.call_id == "l2" => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert!(l2.output.is_error && l2.output.content == UNKNOWN_OUTCOME, "{l2:?}");
    assert_one_result_per_call(resumed.machine().messages());
    assert_eq!(resumed.finish().unwrap(), json!({"answer": "42"}));
}

/// A cancel in the middle of a batch keeps what finished: a call whose result the host
/// recorded keeps that result in the transcript (it ran, and may have cost something), the
/// others are aborted; a resumed copy of the log reads the same.
#[test]
fn a_cancel_keeps_the_results_of_calls_that_finished() {
    let model = ScriptedModel::new(script());
    let tools = Counting::default();
    let mut session = past_the_first_response(&model);
    let SessionOutput::RunTools { batch, pending, .. } = session.poll() else { panic!() };
    let l1 = pending[0].call.clone();
    session.start_tool(batch, "l1").unwrap();
    session.settle_tool(batch, "l1", tools.output(&l1)).unwrap();
    session.start_tool(batch, "p1").unwrap();
    session.cancel("the user pressed stop").unwrap();
    assert!(matches!(session.poll(), SessionOutput::Done));
    let results = |messages: &[Message]| -> Vec<(String, String)> {
        messages
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult(r) => Some((r.call_id.clone(), r.output.content.clone())),
                _ => None,
            })
            .collect()
    };
    let aborted = verity_core::agent::ABORTED.to_owned();
    let expected = [
        ("l1".to_owned(), "lookup ran for l1".to_owned()),
        ("p1".to_owned(), aborted.clone()),
        ("l2".to_owned(), aborted),
    ];
    assert_eq!(results(session.machine().messages()), expected);
    let resumed: Session<ValueStep> =
        Session::resume(Log::from_jsonl(&session.log().to_jsonl()).unwrap(), None).unwrap();
    assert_eq!(results(resumed.machine().messages()), expected);
    assert_eq!(session.finish().unwrap_err().kind(), FailureKind::Cancelled);
    assert_eq!(resumed.finish().unwrap_err().kind(), FailureKind::Cancelled);
    assert_eq!(model.requests(), 1);
}

#[test]
fn abandon_leaves_a_session_that_can_be_stepped_again_or_cancelled() {
    for then_cancel in [false, true] {
        let model = ScriptedModel::new(script());
        let tools = Counting::default();
        let mut session = past_the_first_response(&model);
        let SessionOutput::RunTools { batch, .. } = session.poll() else { panic!() };
        session.start_tool(batch, "l1").unwrap();
        session.start_tool(batch, "p1").unwrap();
        session.abandon().unwrap();
        let SessionOutput::RunTools { pending, .. } = session.poll() else { panic!("still open") };
        let ids: Vec<(&str, bool)> =
            pending.iter().map(|p| (p.call.id.as_str(), p.started)).collect();
        assert_eq!(ids, [("p1", false), ("l2", false)], "l1 is an unknown outcome now");
        if then_cancel {
            session.cancel("user gave up").unwrap();
            assert!(matches!(session.poll(), SessionOutput::Done), "no model call after a cancel");
            assert_one_result_per_call(session.machine().messages());
            assert_eq!(model.requests(), 1);
            assert_eq!(session.finish().unwrap_err().kind(), FailureKind::Cancelled);
        } else {
            // Saved and resumed after the abandon, then stepped again.
            let mut resumed: Session<ValueStep> =
                Session::resume(Log::from_jsonl(&session.log().to_jsonl()).unwrap(), None).unwrap();
            let store = MemoryStore::from_log(resumed.log().clone());
            resumed.mark_synced();
            pollster::block_on(drive_session(&mut resumed, &store, &model, &tools)).unwrap();
            assert_eq!(tools.runs.borrow().get("l1"), None, "l1 never ran after it was abandoned");
            assert_eq!(resumed.finish().unwrap(), json!({"answer": "42"}));
        }
    }
}

#[test]
fn a_stale_writer_is_refused_after_a_takeover() {
    let model = ScriptedModel::new(script());
    let tools = Counting::default();
    // The host's store.
    let mut store = Session::start(machine()).unwrap().log().clone();
    let lease_a = store.take_lease("driver-a");
    let mut a: Session<ValueStep> = Session::resume(store.clone(), Some(lease_a.clone())).unwrap();
    let SessionOutput::CallModel(c) = a.poll() else { panic!() };
    let id = c.id;
    let response = model.answer(c.request);
    a.record_response(id, response).unwrap();
    store.extend_guarded(a.unsynced(), Some(&lease_a)).unwrap();
    a.mark_synced();

    // Driver B takes over from the store and goes on.
    let lease_b = store.take_lease("driver-b");
    let mut b: Session<ValueStep> = Session::resume(store.clone(), Some(lease_b.clone())).unwrap();
    let SessionOutput::RunTools { batch, .. } = b.poll() else { panic!() };
    b.start_tool(batch, "l1").unwrap();
    store.extend_guarded(b.unsynced(), Some(&lease_b)).unwrap();
    b.mark_synced();

    // A, unaware, writes too: the store refuses it.
    let SessionOutput::RunTools { batch, .. } = a.poll() else { panic!() };
    a.start_tool(batch, "l1").unwrap();
    let refused = store.extend_guarded(a.unsynced(), Some(&lease_a)).unwrap_err();
    assert_eq!(refused, SessionError::StaleLease { held: Some(1), current: 2 });
    // Without any lease, writes are refused too once leases are in use.
    assert!(store.extend_guarded(a.unsynced(), None).is_err());
    // Resuming with the stale lease is refused too: it would settle B's call in flight.
    let resumed = Session::<ValueStep>::resume(store.clone(), Some(lease_a.clone()));
    assert!(matches!(resumed, Err(SessionError::StaleLease { .. })));
    // And a stale session refuses its own writes once it sees the takeover.
    let mut stale: Session<ValueStep> =
        Session::resume(store.clone(), Some(lease_b.clone())).unwrap();
    stale = stale.with_lease(lease_a);
    assert!(matches!(stale.cancel("x"), Err(SessionError::StaleLease { .. })));
    let _ = tools;
}

#[test]
fn the_log_is_a_tree_and_a_branch_rebuilds_its_own_path() {
    let model = ScriptedModel::new(script());
    let mut session = Session::start(machine()).unwrap();
    let store = MemoryStore::new();
    pollster::block_on(drive_session(&mut session, &store, &model, &Counting::default())).unwrap();
    let mut log = session.log().clone();
    // Branch right after the first response: the machine is at the tool batch again.
    let first_response = log
        .entries()
        .iter()
        .find(|e| matches!(e.record, verity_core::log::Record::Response { .. }))
        .unwrap()
        .id;
    log.checkout(first_response).unwrap();
    let text = log.to_jsonl();
    let mut branch: Session<ValueStep> =
        Session::resume(Log::from_jsonl(&text).unwrap(), None).unwrap();
    assert!(matches!(branch.poll(), SessionOutput::RunTools { .. }));
    branch.cancel("explore").unwrap();
    let parents: Vec<Option<u64>> = branch.log().entries().iter().map(|e| e.parent).collect();
    assert_eq!(parents.last().unwrap(), &Some(first_response), "the branch hangs off the checkout");
    assert!(
        Log::from_jsonl("{\"id\": 0, \"parent\": 5, \"type\": \"cancelled\", \"reason\": \"x\"}")
            .is_err()
    );
}

fn failed(class: FailureClass, retry_after_ms: Option<u64>, stop: StopReason) -> AssistantMessage {
    let mut message = AssistantMessage::failed("429 Too Many Requests");
    message.stop_reason = Some(stop);
    message.error =
        Some(ProviderError { class, status: Some(429), retry_after_ms, raw_body: None });
    message
}

#[test]
fn retryable_failures_are_retried_with_the_callers_budget_and_delay() {
    let submit = response(vec![call("s1", "submit", json!({"answer": "42"}))]);
    let model = ScriptedModel::new([
        failed(FailureClass::Retryable, Some(2_000), StopReason::Error),
        failed(FailureClass::Retryable, None, StopReason::Error),
        submit.clone(),
    ]);
    let policy = RetryPolicy { max_retries: 2, seed: 3, ..RetryPolicy::default() };
    let mut machine = value_step(Schema::compile(answer_schema()).unwrap(), "s", "t")
        .retry(policy)
        .build()
        .unwrap();
    let mut delays = Vec::new();
    while let Output::CallModel(c) = machine.poll_output() {
        delays.push((c.delay_ms, c.retry));
        let input = Input::ModelResponse { call: c.id, response: model.answer(c.request) };
        machine.handle_input(input).unwrap();
    }
    let expected_second = policy.delay(2, FailureClass::Retryable, None).unwrap();
    assert_eq!(delays, [(0, 0), (2_000, 1), (expected_second, 2)]);
    let spent = machine.spent();
    assert_eq!((spent.requests, spent.retries, spent.turns), (3, 2, 1));
    let events: Vec<Event> = machine
        .drain_events()
        .into_iter()
        .filter(|event| matches!(event, Event::Retry { .. }))
        .collect();
    assert!(
        matches!(
            events.as_slice(),
            [Event::Retry { attempt: 1, delay_ms: 2_000, .. }, Event::Retry { attempt: 2, .. }]
        ),
        "{events:?}"
    );
    assert_eq!(machine.finish().unwrap(), json!({"answer": "42"}));

    // The budget is the caller's: one retry allowed, the second failure stands.
    let model = ScriptedModel::new([
        failed(FailureClass::Retryable, None, StopReason::Error),
        failed(FailureClass::Retryable, None, StopReason::Error),
        submit.clone(),
    ]);
    let step = value_step(Schema::compile(answer_schema()).unwrap(), "s", "t")
        .retry(RetryPolicy::with_retries(1))
        .build()
        .unwrap();
    let error = pollster::block_on(drive(step, &model, &verity_core::NoTools)).unwrap_err();
    assert_eq!(
        (error.kind(), error.spent().requests, error.spent().retries),
        (FailureKind::Provider, 2, 1)
    );

    // Never an aborted request, never a non-retryable one, and a Retry-After beyond the cap.
    for response in [
        failed(FailureClass::Retryable, None, StopReason::Aborted),
        failed(FailureClass::NotRetryable, None, StopReason::Error),
        failed(FailureClass::Retryable, Some(10 * 60_000), StopReason::Error),
    ] {
        let model = ScriptedModel::new([response, submit.clone()]);
        let step = value_step(Schema::compile(answer_schema()).unwrap(), "s", "t")
            .retry(RetryPolicy::with_retries(5))
            .build()
            .unwrap();
        let error = pollster::block_on(drive(step, &model, &verity_core::NoTools)).unwrap_err();
        assert_eq!((error.kind(), model.requests()), (FailureKind::Provider, 1));
    }
}

/// A scripted model that records the waits it is asked for.
struct Waiting {
    model: ScriptedModel,
    waits: RefCell<Vec<u64>>,
}

impl verity_core::Transport for Waiting {
    async fn complete(&self, request: verity_core::ModelRequest<'_>) -> AssistantMessage {
        self.model.answer(request)
    }
    async fn wait(&self, delay_ms: u64) {
        self.waits.borrow_mut().push(delay_ms);
    }
}

#[test]
fn drive_and_drive_session_wait_the_delay_the_machine_asks_for() {
    let script = || {
        ScriptedModel::new([
            failed(FailureClass::Retryable, Some(1_500), StopReason::Error),
            response(vec![call("s1", "submit", json!({"answer": "42"}))]),
        ])
    };
    let step = || {
        value_step(Schema::compile(answer_schema()).unwrap(), "s", "t")
            .retry(RetryPolicy::with_retries(1))
            .build()
            .unwrap()
    };
    let transport = Waiting { model: script(), waits: RefCell::default() };
    pollster::block_on(drive(step(), &transport, &verity_core::NoTools)).unwrap();
    assert_eq!(*transport.waits.borrow(), [1_500]);

    let transport = Waiting { model: script(), waits: RefCell::default() };
    let mut session = Session::start(step()).unwrap();
    let store = MemoryStore::new();
    pollster::block_on(drive_session(&mut session, &store, &transport, &verity_core::NoTools))
        .unwrap();
    assert_eq!(*transport.waits.borrow(), [1_500]);
}

#[test]
fn compaction_drops_the_oldest_tool_results_and_keeps_the_task() {
    let big = |id: &str| response(vec![call(id, "lookup", json!({"query": id}))]);
    let model = ScriptedModel::new([
        big("l1"),
        big("l2"),
        big("l3"),
        failed(FailureClass::ContextOverflow, None, StopReason::Error),
        response(vec![call("s1", "submit", json!({"answer": "42"}))]),
    ]);
    let machine =
        value_step(Schema::compile(answer_schema()).unwrap(), "system prompt", "the task")
            .tool(lookup())
            .compaction(Compaction { max_chars: 2_500 })
            .retry(RetryPolicy::with_retries(1))
            .build()
            .unwrap();
    let (_, mut machine) =
        run_sync(machine, &model, |_| ToolOutput::ok("x".repeat(1_000), json!(null)));
    let results: Vec<&str> = machine
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) if r.tool_name == "lookup" => Some(r.output.content.as_str()),
            _ => None,
        })
        .collect();
    let dropped = results.iter().filter(|c| **c == verity_core::agent::DROPPED).count();
    assert_eq!(results.len(), 3);
    assert!(dropped >= 2, "the two oldest were dropped after seals, more on overflow: {results:?}");
    assert_ne!(
        results[2],
        verity_core::agent::DROPPED.to_owned(),
        "the newest is dropped last unless needed"
    );
    assert!(matches!(&machine.messages()[0], Message::User { text } if text == "the task"));
    assert!(machine.drain_events().iter().any(|e| matches!(e, Event::Compacted { .. })));
    assert_eq!(machine.spent().retries, 1);
    assert_one_result_per_call(machine.messages());
    assert_eq!(machine.finish().unwrap(), json!({"answer": "42"}));
}

/// A store that fails one append: the first whose entries `fails` picks, before it lands.
struct FailOnce<F: Fn(&[Entry]) -> bool> {
    inner: MemoryStore,
    fails: F,
    failed: Cell<bool>,
}

impl<F: Fn(&[Entry]) -> bool> Store for FailOnce<F> {
    async fn append(&self, append: Append<'_>) -> Result<(), SessionError> {
        if !self.failed.get() && (self.fails)(append.entries()) {
            self.failed.set(true);
            return Err(SessionError::Store("disk full".to_owned()));
        }
        self.inner.append(append).await
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

fn has(entries: &[Entry], what: impl Fn(&Record) -> bool) -> bool {
    entries.iter().any(|entry| what(&entry.record))
}

#[test]
fn a_response_lost_before_it_was_stored_is_requested_exactly_once_more() {
    // The model answered the first request, and the store failed to record the answer.
    let first = script()[0].clone();
    let model = ScriptedModel::new([first].into_iter().chain(script())).recording();
    let tools = Counting::default();
    let store = FailOnce {
        inner: MemoryStore::new(),
        fails: |entries: &[Entry]| has(entries, |r| matches!(r, Record::Response { .. })),
        failed: Cell::new(false),
    };
    let mut session = Session::start(machine()).unwrap();
    let error = pollster::block_on(drive_session(&mut session, &store, &model, &tools));
    assert_eq!(error, Err(SessionError::Store("disk full".to_owned())));
    assert_eq!(model.requests(), 1);
    assert!(tools.runs.borrow().is_empty(), "nothing ran on an unrecorded response");
    drop(session);

    // Resume from what the store holds (only the start): the request is made again, once.
    let mut resumed: Session<ValueStep> = pollster::block_on(Session::open(&store, None)).unwrap();
    pollster::block_on(drive_session(&mut resumed, &store, &model, &tools)).unwrap();
    assert_eq!(model.requests(), 4, "three responses used, one request made twice");
    let recorded = model.recorded();
    assert_eq!(recorded[0], recorded[1], "the lost request, made again");
    assert_ne!(recorded[1], recorded[2]);
    assert_eq!(
        *tools.runs.borrow(),
        HashMap::from([("l1".into(), 1), ("p1".into(), 1), ("l2".into(), 1)]),
        "no tool ran twice"
    );
    let responses = store
        .inner
        .log()
        .entries()
        .iter()
        .filter(|e| matches!(e.record, Record::Response { .. }))
        .count();
    assert_eq!(responses, 3);
    assert_eq!(resumed.finish().unwrap(), json!({"answer": "42"}));
}

/// A store in which driver B takes the session over right before driver A's first tool
/// start reaches it.
struct TakenOverBeforeATool {
    inner: MemoryStore,
}

impl Store for TakenOverBeforeATool {
    async fn append(&self, append: Append<'_>) -> Result<(), SessionError> {
        if has(append.entries(), |r| matches!(r, Record::ToolStarted { .. }))
            && self.inner.log().lease().is_some_and(|l| l.holder == "driver-a")
        {
            self.inner.take_lease("driver-b").await?;
        }
        self.inner.append(append).await
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

#[test]
fn a_driver_whose_lease_was_taken_over_never_starts_a_tool() {
    let model = ScriptedModel::new(script());
    let tools = Counting::default();
    let store = TakenOverBeforeATool { inner: MemoryStore::new() };
    let mut a = Session::start(machine()).unwrap();
    let lease_a = a.take_lease("driver-a");
    let error = pollster::block_on(drive_session(&mut a, &store, &model, &tools)).unwrap_err();
    assert_eq!(error, SessionError::StaleLease { held: Some(lease_a.epoch), current: 2 });
    assert_eq!(model.requests(), 1);
    assert!(tools.runs.borrow().is_empty(), "the stale driver ran {:?}", tools.runs.borrow());
    assert!(!has(store.inner.log().entries(), |r| matches!(r, Record::ToolStarted { .. })));
}

#[test]
fn a_lease_taken_by_a_session_is_accepted_by_the_store() {
    let model = ScriptedModel::new(script());
    let tools = Counting::default();
    let store = MemoryStore::new();
    // Driver A starts the session under its lease and records the first response.
    let mut a = Session::start(machine()).unwrap();
    let lease_a = a.take_lease("driver-a");
    let SessionOutput::CallModel(c) = a.poll() else { panic!() };
    let (id, response) = (c.id, model.answer(c.request));
    a.record_response(id, response).unwrap();
    pollster::block_on(a.sync(&store)).unwrap();

    // B and C both take over from what the store holds; the first to write wins.
    let mut b: Session<ValueStep> = pollster::block_on(Session::open(&store, None)).unwrap();
    let mut c: Session<ValueStep> = pollster::block_on(Session::open(&store, None)).unwrap();
    let lease_b = b.take_lease("driver-b");
    let lease_c = c.take_lease("driver-c");
    assert_eq!((lease_b.epoch, lease_c.epoch), (2, 2));
    pollster::block_on(drive_session(&mut b, &store, &model, &tools)).unwrap();
    assert_eq!(store.log().lease(), Some(&lease_b));
    assert!(pollster::block_on(c.sync(&store)).is_err(), "a second takeover from a stale view");
    assert_eq!(b.finish().unwrap(), json!({"answer": "42"}));

    // A is fenced off, including from paying for a request.
    let mut a: Session<ValueStep> =
        pollster::block_on(Session::open(&store, None)).unwrap().with_lease(lease_a);
    let refused = pollster::block_on(a.sync(&store)).unwrap_err();
    assert_eq!(refused, SessionError::StaleLease { held: Some(1), current: 2 });
}

#[test]
fn a_batch_with_a_repeated_call_id_runs_in_a_session_as_in_the_machine() {
    let script = || {
        ScriptedModel::new([
            response(vec![
                call("c1", "lookup", json!({"query": "first"})),
                call("c1", "lookup", json!({"query": "second"})),
                call("c1", "peek", json!({})),
            ]),
            response(vec![call("s1", "submit", json!({"answer": "42"}))]),
        ])
    };
    struct ByQuery;
    impl Tools for ByQuery {
        async fn run(&self, call: &ToolCall) -> ToolOutput {
            ToolOutput::ok(format!("{} {}", call.name, call.arguments["query"]), json!({}))
        }
    }
    let value = pollster::block_on(drive(machine(), &script(), &ByQuery)).unwrap();
    let (_, plain) = run_sync(machine(), &script(), |call| pollster::block_on(ByQuery.run(call)));

    let store = MemoryStore::new();
    let mut session = Session::start(machine()).unwrap();
    pollster::block_on(drive_session(&mut session, &store, &script(), &ByQuery)).unwrap();
    assert_eq!(session.machine().messages(), plain.messages(), "each result on its own call");
    let rebuilt: Session<ValueStep> = Session::resume(store.log(), None).unwrap();
    assert_eq!(rebuilt.machine().messages(), plain.messages());
    assert_eq!(session.finish().unwrap(), value);

    // Started one at a time and interrupted: the second "c1" is the unknown outcome.
    let mut session = Session::start(machine()).unwrap();
    let SessionOutput::CallModel(c) = session.poll() else { panic!() };
    let (id, response) = (c.id, script().answer(c.request));
    session.record_response(id, response).unwrap();
    let SessionOutput::RunTools { batch, .. } = session.poll() else { panic!() };
    session.start_tool(batch, "c1").unwrap();
    session.settle_tool(batch, "c1", ToolOutput::ok("done", json!({}))).unwrap();
    session.start_tool(batch, "c1").unwrap();
    let mut resumed: Session<ValueStep> = Session::resume(session.log().clone(), None).unwrap();
    let SessionOutput::RunTools { pending, .. } = resumed.poll() else { panic!() };
    let left: Vec<(usize, &str)> =
        pending.iter().map(|p| (p.index, p.call.name.as_str())).collect();
    assert_eq!(left, [(2, "peek")]);
}

/// A step that hands its transcript out when it finishes, so a test can read what `drive_with`
/// left in it.
struct Observed {
    step: ValueStep,
    transcript: std::rc::Rc<RefCell<Vec<Message>>>,
}

impl Machine for Observed {
    type Value = Value;
    type Error = verity_core::StepFailed;
    fn poll_output(&mut self) -> Output<'_> {
        self.step.poll_output()
    }
    fn handle_input(&mut self, input: Input) -> Result<(), verity_core::Misuse> {
        self.step.handle_input(input)
    }
    fn finish(self) -> Result<Value, verity_core::StepFailed> {
        *self.transcript.borrow_mut() = self.step.messages().to_vec();
        self.step.finish()
    }
}

/// Tools that press Stop while running `l1`; `l1` then never finishes on its own.
struct StopDuring {
    cancel: Cancel,
    hang: bool,
}

impl Tools for StopDuring {
    async fn run(&self, call: &ToolCall) -> ToolOutput {
        if call.id == "l1" {
            self.cancel.cancel("the user pressed stop");
            if self.hang {
                std::future::pending::<()>().await;
            }
        }
        ToolOutput::ok("ran", json!({}))
    }
}

#[test]
fn a_cancelled_drive_makes_no_further_request() {
    // Cancelled before it starts: no request at all.
    let cancel = Cancel::new();
    cancel.cancel("not wanted");
    let model = ScriptedModel::new(script());
    let options = DriveOptions::new().cancel(cancel);
    let error = pollster::block_on(drive_with(machine(), &model, &Counting::default(), options))
        .unwrap_err();
    assert_eq!((error.kind(), model.requests()), (FailureKind::Cancelled, 0));
    assert!(error.message().contains("not wanted"), "{}", error.message());

    // Cancelled by a tool that finished: the batch is sealed, the next model call is not made.
    let cancel = Cancel::new();
    let model = ScriptedModel::new(script());
    let tools = StopDuring { cancel: cancel.clone(), hang: false };
    let error = pollster::block_on(drive_with(
        machine(),
        &model,
        &tools,
        DriveOptions::new().cancel(cancel),
    ))
    .unwrap_err();
    assert_eq!((error.kind(), model.requests()), (FailureKind::Cancelled, 1));
}

#[test]
fn a_drive_cancelled_during_a_batch_records_every_open_call_as_aborted() {
    let cancel = Cancel::new();
    let model = ScriptedModel::new(script());
    let transcript = std::rc::Rc::default();
    let machine = Observed { step: machine(), transcript: std::rc::Rc::clone(&transcript) };
    let tools = StopDuring { cancel: cancel.clone(), hang: true };
    let error =
        pollster::block_on(drive_with(machine, &model, &tools, DriveOptions::new().cancel(cancel)))
            .unwrap_err();
    assert_eq!((error.kind(), model.requests()), (FailureKind::Cancelled, 1));
    let transcript = transcript.borrow();
    let results: Vec<(&str, &str)> = transcript
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((r.call_id.as_str(), r.output.content.as_str())),
            _ => None,
        })
        .collect();
    let aborted = verity_core::agent::ABORTED;
    assert_eq!(results, [("l1", aborted), ("p1", aborted), ("l2", aborted)]);
    assert_one_result_per_call(&transcript);
}

/// The store side of a log (`DurableLog`), which a host's store persists as text: a round trip
/// through the text keeps every entry, a takeover fences the old lease, and entries that do not
/// follow on are refused, as `MemoryStore` (which keeps one) refuses them.
#[test]
fn a_durable_log_is_the_store_side_of_every_store_operation() {
    let mut session = Session::start(machine()).unwrap();
    let mut stored = DurableLog::new();
    let first = stored.take_lease("first");
    let _ = session.take_lease("first");
    let written: Vec<Entry> = session.log().entries().to_vec();
    stored.append(Append::new(&written[1..], Some(&first))).unwrap();
    let text = stored.to_text();
    let read = DurableLog::from_text(&text).unwrap();
    assert_eq!(read, stored, "{text}");
    assert_eq!(read.log().entries().len(), written.len());
    assert!(DurableLog::from_text("{not a log").is_err());

    let mut taken = read.clone();
    let second = taken.take_lease("second");
    assert_eq!(second.epoch, first.epoch + 1);
    assert!(matches!(taken.check_lease(Some(&first)), Err(SessionError::StaleLease { .. })));
    taken.check_lease(Some(&second)).unwrap();
    // The same entries again: their ids are taken.
    assert!(matches!(
        taken.append(Append::new(&written[1..], Some(&second))),
        Err(SessionError::Corrupt(_))
    ));
}

/// The unknown-outcome rule, one function for every host: a started, unsettled call is run
/// again only when its tool is replay-safe, and is otherwise settled as an unknown outcome,
/// the result `Session` records when it resumes such a log.
#[test]
fn an_interrupted_call_is_run_again_only_when_replay_safe() {
    assert_eq!(verity_core::interrupted_outcome(true), None);
    let unknown = verity_core::interrupted_outcome(false).expect("settled, not run");
    assert!(unknown.is_error);
    assert_eq!(unknown.content, UNKNOWN_OUTCOME);
}
