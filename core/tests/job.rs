//! The job protocol: configurations (and their errors), one failure type with what was spent,
//! the owned outputs' JSON, the event stream, and saving a job without its corpus.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{Value, json};
use verity_core::corpus::Corpus;
use verity_core::indexed::IndexedCorpus;
use verity_core::{
    AssistantMessage, CallId, ClaimStage, Delta, Event, Input, Job, JobConfig, JobFailureKind,
    Machine, NoTools, Output, OwnedOutput, ScriptedModel, Settled, ToolOutput, Usage, drive,
};

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn corpus() -> Arc<IndexedCorpus> {
    IndexedCorpus::new(
        Corpus::from_pairs([
            ("e1", "The storage migration finished in March without data loss."),
            ("e2", "Two earlier attempts at the migration were rolled back."),
            ("e3", "An April audit found every account record intact."),
            ("e4", "Quarterly revenue grew four percent."),
        ])
        .unwrap(),
    )
}

const CLAIM: &str = "The storage migration lost no customer data.";

fn claim_config(corpus: &IndexedCorpus, extra: Value) -> String {
    let mut config =
        json!({"kind": "claim", "claim": CLAIM, "corpus": corpus.id(), "retriever": "keyword"});
    config.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    config.to_string()
}

fn assessment(id: &str, verdict: &str, citations: &[&str]) -> AssistantMessage {
    AssistantMessage::tool_call(
        id,
        "record_assessment",
        json!({"verdict": verdict, "confidence": 0.7, "citations": citations}),
    )
}

fn priced(mut response: AssistantMessage, cost: f64) -> AssistantMessage {
    response.usage = Usage { input: 100, output: 10, cost, ..Usage::default() };
    response
}

/// The escalation route: insufficient, one lookup, a note, a second assessment, the summary.
fn escalation_script() -> Vec<AssistantMessage> {
    vec![
        assessment("a1", "insufficient", &[]),
        AssistantMessage::tool_call("r1", "lookup_evidence", json!({"query": "audit"})),
        AssistantMessage::text("Found an audit."),
        assessment("a2", "supported", &["An April audit found every account record intact."]),
        AssistantMessage::tool_call("s1", "submit", json!({"text": "The audit found it intact."})),
    ]
}

fn config_error(config: Value, corpora: &[Arc<IndexedCorpus>]) -> String {
    let failed = Job::from_json(&config.to_string(), corpora).unwrap_err();
    assert_eq!(failed.kind(), JobFailureKind::Config, "{failed}");
    assert_eq!(failed.spent().requests, 0);
    failed.message().to_owned()
}

#[test]
fn a_bad_configuration_names_the_field_and_why() {
    let corpus = corpus();
    let step = |extra: Value| {
        let mut config = json!({"kind": "step", "prompt": "p", "schema": answer_schema()});
        config.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        config
    };
    let cases = [
        (json!([1]), ".: a job configuration is a JSON object"),
        (json!({"prompt": "p"}), "kind: missing"),
        (json!({"kind": "steps"}), "kind: unknown kind \"steps\""),
        (step(json!({"maxTurns": 0})), "maxTurns: must be a positive integer, not 0"),
        (step(json!({"maxAttempts": "3"})), "maxAttempts: must be a positive integer, not \"3\""),
        (step(json!({"maxTurns": 1.5})), "maxTurns: must be a positive integer"),
        (step(json!({"maxturns": 2})), "maxturns: unknown field `maxturns`"),
        (step(json!({"retry": {"maxRetries": -1}})), "retry.maxRetries: invalid value"),
        (step(json!({"schema": {"type": "object", "minProperties": "x"}})), "schema: "),
        (
            step(json!({"tools": [{"name": "ok"}, {"name": "bad", "parameters": {"type": 5}}]})),
            "tools[1].parameters: ",
        ),
        (step(json!({"tools": [{"name": "submit"}]})), "tools[0].name: \"submit\" is reserved"),
        (
            step(json!({"tools": [{"name": "t", "sequentially": true}]})),
            "tools[0].sequentially: unknown field",
        ),
        (json!({"kind": "step", "schema": {}}), ".: missing field `prompt`"),
        (json!({"kind": "claim", "claim": "c", "corpus": "md5:1"}), "corpus: \"md5:1\" is not"),
        (
            json!({"kind": "claim", "claim": "c", "corpus": corpus.id(), "retriever": "bm26"}),
            "retriever: unknown variant `bm26`",
        ),
        (
            json!({"kind": "claim", "claim": "c", "corpus": corpus.id(),
                   "retriever": {"bm25": {"k": 1_000_000_000u64}}}),
            "retriever.bm25.k: must be 1 to 100, not 1000000000",
        ),
        (
            json!({"kind": "claim", "claim": "c", "corpus": corpus.id(), "retriever": {"bm25": {"k": 0}}}),
            "retriever.bm25.k: must be 1 to 100, not 0",
        ),
        (
            json!({"kind": "claim", "claim": "c", "corpus": corpus.id(), "researchTurns": 0}),
            "researchTurns: must be a positive integer",
        ),
        (
            json!({"kind": "claim", "claim": "c", "corpus": corpus.id(), "lookup": "remote"}),
            "lookup: unknown variant `remote`",
        ),
    ];
    for (config, expected) in cases {
        let message = config_error(config.clone(), &[Arc::clone(&corpus)]);
        assert!(message.starts_with(expected), "{config}\n  gave {message:?}\n  want {expected:?}");
    }
    // A claim job whose corpus the host does not hold.
    let message = config_error(json!({"kind": "claim", "claim": "c", "corpus": corpus.id()}), &[]);
    assert_eq!(message, format!("corpus: no corpus {} was given to the job", corpus.id()));
}

#[test]
fn a_configuration_reads_back_what_it_writes() {
    let text = json!({
        "kind": "step", "system": "s", "prompt": "p", "schema": answer_schema(),
        "tools": [{"name": "lookup", "description": "d", "parameters": {"type": "object"},
                   "sequential": true, "replaySafe": true}],
        "maxAttempts": 2, "maxTurns": 4.0,
        "retry": {"maxRetries": 2, "baseDelayMs": 100},
        "compaction": {"maxChars": 1000}
    });
    let config = JobConfig::from_value(text).unwrap();
    let JobConfig::Step(step) = &config else { panic!("a step") };
    assert_eq!((step.max_attempts, step.max_turns), (Some(2), Some(4)));
    assert_eq!(step.retry.max_retries, 2);
    assert_eq!(step.retry.max_delay_ms, 30_000, "unsaid retry fields keep their defaults");
    let written = serde_json::to_value(&config).unwrap();
    assert_eq!(written["kind"], "step");
    assert_eq!(JobConfig::from_value(written).unwrap(), config);

    let corpus = corpus();
    let claim = JobConfig::from_json(&claim_config(&corpus, json!({"researchTurns": 2}))).unwrap();
    let written = serde_json::to_value(&claim).unwrap();
    assert_eq!(written["retriever"], "keyword");
    assert_eq!(written["lookup"], "core");
    assert_eq!(serde_json::from_value::<JobConfig>(written).unwrap(), claim);
    let bm25 = JobConfig::from_value(json!({"kind": "claim", "claim": "c", "corpus": corpus.id(),
                                             "retriever": {"bm25": {"k": 3}}}));
    assert!(bm25.is_ok());
}

#[test]
fn a_claim_job_runs_with_no_host_tools_and_reports_its_spend() {
    let corpus = corpus();
    let job = Job::from_json(&claim_config(&corpus, json!({})), &[Arc::clone(&corpus)]).unwrap();
    let model = ScriptedModel::new(escalation_script());
    let report = pollster::block_on(drive(job, &model, &NoTools)).unwrap();
    assert_eq!(report["route"], "agent escalation");
    assert_eq!(report["requests"], 5);
    assert_eq!(
        report["assessment"]["citations"],
        json!(["An April audit found every account record intact."])
    );
    // The same value, typed, for hosts (the core's `Report`); a step's value is not one.
    let typed = verity_core::Report::from_job_value(&report).expect("a claim job's value");
    assert_eq!(typed.route, verity_core::Route::AgentEscalation);
    assert_eq!(typed.requests, 5);
    assert_eq!(typed.assessment.citations, ["An April audit found every account record intact."]);
    assert!(verity_core::Report::from_job_value(&json!({"answer": 42})).is_none());
    // Or typed from the start: a host ends the session's job with `finish_typed`, and the report
    // is the one the JSON says.
    use verity_core::session::{MemoryStore, Session};
    let job = Job::from_json(
        &claim_config(&corpus, json!({"retry": {"maxRetries": 2}})),
        &[Arc::clone(&corpus)],
    )
    .unwrap();
    let mut session = Session::start(job).unwrap();
    let model = ScriptedModel::new(escalation_script());
    pollster::block_on(verity_core::drive_session(
        &mut session,
        &MemoryStore::new(),
        &model,
        &NoTools,
    ))
    .unwrap();
    match session.into_machine().finish_typed().unwrap() {
        verity_core::JobValue::Report(report) => assert_eq!(*report, typed),
        other => panic!("a claim job ends with a report, not {other:?}"),
    }
    let config = JobConfig::from_json(&claim_config(&corpus, json!({"retry": {"maxRetries": 2}})));
    assert_eq!(config.unwrap().retry().max_retries, 2);

    // A failed check says what it cost: research stops without new evidence here.
    let job = Job::from_json(&claim_config(&corpus, json!({})), &[Arc::clone(&corpus)]).unwrap();
    let model = ScriptedModel::new([
        priced(assessment("a1", "insufficient", &[]), 0.25),
        priced(AssistantMessage::tool_call("r1", "lookup_evidence", json!({"query": "zzzz"})), 0.5),
        priced(AssistantMessage::text("Nothing."), 1.0),
    ]);
    let failed = pollster::block_on(drive(job, &model, &NoTools)).unwrap_err();
    assert_eq!(failed.kind(), JobFailureKind::NoNewEvidence);
    let spent = failed.spent();
    assert_eq!((spent.requests, spent.turns, spent.retries), (3, 3, 0));
    assert_eq!((spent.usage.input, spent.usage.output), (300, 30));
    assert!((spent.usage.cost - 1.75).abs() < 1e-9, "{}", spent.usage.cost);
}

#[test]
fn a_failed_step_job_reports_kind_and_spend() {
    let config =
        json!({"kind": "step", "prompt": "p", "schema": answer_schema(), "maxAttempts": 1});
    let job = Job::from_json(&config.to_string(), &[]).unwrap();
    let model = ScriptedModel::new([priced(
        AssistantMessage::tool_call("c1", "submit", json!({"answer": 42})),
        0.5,
    )]);
    let failed = pollster::block_on(drive(job, &model, &NoTools)).unwrap_err();
    assert_eq!(failed.kind(), JobFailureKind::InvalidSubmissions);
    assert_eq!(failed.kind().as_str(), "invalid-submissions");
    assert_eq!((failed.spent().requests, failed.spent().failed_attempts), (1, 1));
    assert_eq!(failed.spent().usage.cost, 0.5);
    let wire = serde_json::to_value(&failed).unwrap();
    assert_eq!(wire["kind"], "invalid-submissions");
    assert_eq!(wire["spent"]["failedAttempts"], 1);
}

/// Failures a host causes outside the machine have the machine's shape and kinds.
#[test]
fn a_host_makes_config_and_cancelled_failures_in_the_core_shape() {
    let refused = verity_core::JobFailed::config("provider: missing field `model`");
    assert_eq!(refused.kind(), JobFailureKind::Config);
    assert_eq!(refused.spent(), verity_core::Spent::default());
    let wire = serde_json::to_value(&refused).unwrap();
    assert_eq!(wire["kind"], "config");
    assert_eq!(wire["message"], "provider: missing field `model`");
    assert_eq!(serde_json::from_value::<verity_core::JobFailed>(wire).unwrap(), refused);

    let job = Job::from_json(
        &json!({"kind": "step", "prompt": "p", "schema": answer_schema(), "maxAttempts": 1})
            .to_string(),
        &[],
    )
    .unwrap();
    let model = ScriptedModel::new([priced(
        AssistantMessage::tool_call("c1", "submit", json!({"answer": 42})),
        0.5,
    )]);
    let spent = pollster::block_on(drive(job, &model, &NoTools)).unwrap_err().spent();
    let cancelled = verity_core::JobFailed::cancelled("taken over by another tab", spent);
    assert_eq!(cancelled.kind(), JobFailureKind::Cancelled);
    assert_eq!(cancelled.spent().requests, 1);
    assert_eq!(serde_json::to_value(&cancelled).unwrap()["kind"], "cancelled");
}

/// Drives `job` by hand, checking at every output that the owned form has the borrowed form's
/// JSON and reads back equal, and that every input reads back equal.
fn drive_checking_json(mut job: Job, model: &ScriptedModel, run: impl Fn(&str) -> ToolOutput) {
    let mut kinds = Vec::new();
    loop {
        let output = job.poll_output();
        let owned = output.to_owned_output();
        let borrowed_json = serde_json::to_value(output).unwrap();
        assert_eq!(serde_json::to_value(&owned).unwrap(), borrowed_json);
        assert_eq!(serde_json::from_value::<OwnedOutput>(borrowed_json).unwrap(), owned);
        let input = match owned {
            OwnedOutput::CallModel(call) => {
                kinds.push("callModel");
                let response = match job.poll_output() {
                    Output::CallModel(c) => model.answer(c.request),
                    _ => unreachable!(),
                };
                Input::ModelResponse { call: call.id, response }
            }
            OwnedOutput::RunTools(batch) => {
                kinds.push("runTools");
                let results = batch
                    .calls
                    .iter()
                    .map(|c| Settled { call_id: c.id.clone(), output: run(&c.name) })
                    .collect();
                Input::Seal { batch: batch.id, results }
            }
            _ => break,
        };
        let wire = serde_json::to_string(&input).unwrap();
        assert_eq!(serde_json::from_str::<Input>(&wire).unwrap(), input);
        job.handle_input(input).unwrap();
    }
    assert_eq!(
        kinds,
        ["callModel", "callModel", "runTools", "callModel", "callModel", "callModel"]
    );
    assert_eq!(job.finish().unwrap()["route"], "agent escalation");
}

#[test]
fn owned_outputs_and_inputs_have_one_json_and_read_back() {
    let corpus = corpus();
    // The host answers lookups here, so a tool batch crosses the boundary too.
    let config = claim_config(&corpus, json!({"lookup": "host"}));
    let job = Job::from_json(&config, &[Arc::clone(&corpus)]).unwrap();
    let model = ScriptedModel::new(escalation_script());
    drive_checking_json(job, &model, |_| {
        verity_core::claim::lookup_evidence(corpus.corpus(), &[2], "query")
    });
    // The JSON a worker posts, as DESIGN.md documents it.
    let mut job = Job::from_json(&config, &[Arc::clone(&corpus)]).unwrap();
    let first = serde_json::to_value(job.poll_output()).unwrap();
    assert_eq!(first["type"], "callModel");
    assert_eq!(first["id"], 0);
    assert_eq!((first["delayMs"].clone(), first["retry"].clone()), (json!(0), json!(0)));
    assert_eq!(first["request"]["tools"][0]["name"], "record_assessment");
    assert_eq!(serde_json::to_value(OwnedOutput::Done).unwrap(), json!({"type": "done"}));
}

fn kind(event: &Event) -> String {
    match event {
        Event::Stage { stage } => match stage {
            ClaimStage::Retrieve { evidence } => format!("stage:retrieve({evidence})"),
            ClaimStage::Assess => "stage:assess".into(),
            ClaimStage::Research { turn, of } => format!("stage:research({turn}/{of})"),
            ClaimStage::Reassess { evidence } => format!("stage:reassess({evidence})"),
            ClaimStage::Summary => "stage:summary".into(),
            _ => "stage:?".into(),
        },
        Event::ModelCall { call, retry, .. } => format!("call({}, retry {retry})", call.0),
        Event::ModelAnswered { call, tool_calls, .. } => {
            format!("answered({}, {tool_calls})", call.0)
        }
        Event::ToolCall { tool, host, .. } => format!("tool({tool}, host {host})"),
        Event::ToolSettled { tool, is_error, host, .. } => {
            format!("settled({tool}, error {is_error}, host {host})")
        }
        Event::Retry { attempt, delay_ms, .. } => format!("retry({attempt}, {delay_ms} ms)"),
        Event::Compacted { dropped } => format!("compacted({dropped})"),
        Event::Delta { call, .. } => format!("delta({})", call.0),
        _ => "?".into(),
    }
}

/// The whole event transcript of a claim check that escalates, with a retried request.
const ESCALATION_EVENTS: &[&str] = &[
    "stage:retrieve(2)",
    "stage:assess",
    "call(0, retry 0)",
    "answered(0, 1)",
    "tool(record_assessment, host false)",
    "settled(record_assessment, error false, host false)",
    "stage:research(1/3)",
    "call(1, retry 0)",
    "answered(1, 0)",
    "retry(1, 700 ms)",
    "call(2, retry 1)",
    "delta(2)",
    "answered(2, 1)",
    "tool(lookup_evidence, host false)",
    "settled(lookup_evidence, error false, host false)",
    "stage:research(2/3)",
    "call(3, retry 0)",
    "answered(3, 0)",
    "stage:reassess(3)",
    "call(4, retry 0)",
    "answered(4, 1)",
    "tool(record_assessment, host false)",
    "settled(record_assessment, error false, host false)",
    "stage:summary",
    "call(5, retry 0)",
    "answered(5, 1)",
    "tool(submit, host false)",
    "settled(submit, error false, host false)",
];

#[test]
fn a_claim_job_reports_every_stage_call_and_retry_as_events() {
    let corpus = corpus();
    let config = claim_config(&corpus, json!({"researchTurns": 3, "retry": {"maxRetries": 1}}));
    let mut job = Job::from_json(&config, &[Arc::clone(&corpus)]).unwrap();
    let mut script = escalation_script();
    let mut busy = AssistantMessage::failed("busy");
    busy.error = Some(verity_core::ProviderError {
        class: verity_core::FailureClass::Retryable,
        status: Some(503),
        retry_after_ms: Some(700),
        raw_body: None,
    });
    script.insert(1, busy);
    let model = ScriptedModel::new(script);
    let mut events = Vec::new();
    loop {
        events.extend(job.drain_events());
        let input = match job.poll_output() {
            Output::CallModel(call) => {
                let id = call.id;
                let response = model.answer(call.request);
                if id == CallId(2) {
                    job.record_delta(id, Delta::Text { text: "look".into() }).unwrap();
                }
                Input::ModelResponse { call: id, response }
            }
            Output::RunTools(_) => panic!("the job settles its own lookups"),
            _ => break,
        };
        job.handle_input(input).unwrap();
    }
    events.extend(job.drain_events());
    let kinds: Vec<String> = events.iter().map(kind).collect();
    assert_eq!(kinds, ESCALATION_EVENTS);
    // A delta for a call that is not pending is refused.
    assert!(job.record_delta(CallId(0), Delta::Text { text: "late".into() }).is_err());
    // Events are data: they cross a postMessage as JSON.
    for event in &events {
        let wire = serde_json::to_value(event).unwrap();
        assert_eq!(&serde_json::from_value::<Event>(wire).unwrap(), event);
    }
    assert_eq!(
        serde_json::to_value(&events[6]).unwrap(),
        json!({"type": "stage", "stage": "research", "turn": 1, "of": 3})
    );
    assert_eq!(job.finish().unwrap()["route"], "agent escalation");
}

#[test]
fn a_saved_claim_job_names_its_corpus_and_refuses_another() {
    let corpus = corpus();
    let config = claim_config(&corpus, json!({}));
    let mut job = Job::from_json(&config, &[Arc::clone(&corpus)]).unwrap();
    let model = ScriptedModel::new(escalation_script());
    // One answer, then save: the first assessment was insufficient, research is next.
    let Output::CallModel(call) = job.poll_output() else { panic!() };
    let input = Input::ModelResponse { call: call.id, response: model.answer(call.request) };
    job.handle_input(input).unwrap();
    let saved = job.save();
    assert!(saved.contains(corpus.id().as_str()));
    assert!(!saved.contains("Quarterly revenue"), "an unretrieved passage is not in the state");

    let other = IndexedCorpus::new(Corpus::from_pairs([("e1", "Another corpus.")]).unwrap());
    let refused = Job::restore(&saved, &[other]).unwrap_err().to_string();
    assert!(refused.contains("differs"), "{refused}");
    assert!(Job::restore(&saved, &[]).unwrap_err().to_string().contains("no corpus was given"));

    let restored = Job::restore(&saved, &[Arc::clone(&corpus)]).unwrap();
    assert_eq!(restored.save(), saved);
    let report = pollster::block_on(drive(restored, &model, &NoTools)).unwrap();
    assert_eq!(report["route"], "agent escalation");
    assert_eq!(report["requests"], 5);
}

#[test]
fn jobs_over_one_corpus_share_its_index() {
    let corpus = corpus();
    assert!(!corpus.is_indexed());
    let config = json!({"kind": "claim", "claim": CLAIM, "corpus": corpus.id()}).to_string();
    let first = Job::from_json(&config, &[Arc::clone(&corpus)]).unwrap();
    assert!(corpus.is_indexed(), "BM25 (the default) indexed the corpus for retrieval");
    let index: *const _ = corpus.bm25();
    let second = Job::from_json(&config, &[Arc::clone(&corpus)]).unwrap();
    assert_eq!(index, corpus.bm25() as *const _, "the second job did not rebuild it");
    for job in [&first, &second] {
        assert!(Arc::ptr_eq(job.claim_check().unwrap().corpus(), &corpus));
    }
}

#[test]
fn the_input_json_documented_in_design_md_reads() {
    let documented = [
        r#"{"type": "modelResponse", "call": 3,
            "response": {"content": [{"type": "toolCall", "id": "call_1", "name": "lookup_evidence",
                                      "arguments": {"query": "audit"}}],
                         "stopReason": "toolUse", "usage": {"input": 120, "output": 15, "cost": 0.0}}}"#,
        r#"{"type": "modelResponse", "call": 5,
            "response": {"stopReason": "error", "errorMessage": "HTTP 503",
                         "error": {"class": "retryable", "status": 503, "retryAfterMs": 2000}}}"#,
        r#"{"type": "seal", "batch": 4,
            "results": [{"callId": "call_1", "content": "…", "details": {"hits": ["e3"]},
                         "isError": false, "terminate": false}]}"#,
        r#"{"type": "cancel", "reason": "the user pressed stop"}"#,
    ];
    for text in documented {
        let input: Input = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let again: Input = serde_json::from_value(serde_json::to_value(&input).unwrap()).unwrap();
        assert_eq!(again, input);
    }
    let batch = json!({"type": "runTools", "id": 4, "sequential": false, "replaySafe": [true],
                       "calls": [{"id": "call_1", "name": "lookup_evidence", "arguments": {"query": "audit"}}]});
    assert!(matches!(serde_json::from_value(batch).unwrap(), OwnedOutput::RunTools(_)));
}

#[test]
fn a_durable_claim_job_reports_its_events_and_can_be_cancelled() {
    use verity_core::session::{MemoryStore, Session};
    use verity_core::{Cancel, DriveOptions, drive_session_with};
    let corpus = corpus();
    let config = claim_config(&corpus, json!({}));
    let job = Job::from_json(&config, &[Arc::clone(&corpus)]).unwrap();
    let store = MemoryStore::new();
    let mut session = Session::start(job).unwrap();
    let model = ScriptedModel::new(escalation_script());
    let mut events = Vec::new();
    let options = DriveOptions::new().events(|event| events.push(kind(&event)));
    pollster::block_on(drive_session_with(&mut session, &store, &model, &NoTools, options))
        .unwrap();
    assert_eq!(session.finish().unwrap()["route"], "agent escalation");
    assert!(events.starts_with(&["stage:retrieve(2)".into(), "stage:assess".into()]), "{events:?}");
    assert!(events.contains(&"stage:research(2/6)".to_owned()), "{events:?}");
    assert_eq!(events.last().unwrap(), "settled(submit, error false, host false)");

    // Cancelled before it starts: nothing is requested, the cancel is stored, the job ends
    // `cancelled`, and a session rebuilt from the store says the same.
    let job = Job::from_json(&config, &[Arc::clone(&corpus)]).unwrap();
    let store = MemoryStore::new();
    let mut session = Session::start(job).unwrap();
    let cancel = Cancel::new();
    cancel.cancel("the user pressed stop");
    let model = ScriptedModel::new(escalation_script());
    let options = DriveOptions::new().cancel(cancel);
    pollster::block_on(drive_session_with(&mut session, &store, &model, &NoTools, options))
        .unwrap();
    assert_eq!(model.requests(), 0);
    assert_eq!(session.finish().unwrap_err().kind(), JobFailureKind::Cancelled);
    let reopened: Session<Job> = verity_core::indexed::with_corpora(&[Arc::clone(&corpus)], || {
        pollster::block_on(Session::open(&store, None))
    })
    .unwrap();
    assert_eq!(reopened.finish().unwrap_err().kind(), JobFailureKind::Cancelled);
}

#[test]
fn events_are_camel_case_json() {
    let event = Event::ModelAnswered {
        call: CallId(2),
        stop_reason: verity_core::StopReason::ToolUse,
        tool_calls: 1,
        usage: Usage::default(),
        error: None,
    };
    let wire = serde_json::to_value(&event).unwrap();
    assert_eq!(wire["type"], "modelAnswered");
    assert_eq!(wire["stopReason"], "toolUse");
    assert_eq!(wire["toolCalls"], 1);
    let settled =
        Event::ToolSettled { call_id: "c".into(), tool: "t".into(), is_error: true, host: true };
    let wire = serde_json::to_value(&settled).unwrap();
    assert_eq!((wire["callId"].clone(), wire["isError"].clone()), (json!("c"), json!(true)));
}

/// Every object in `value` that has `key`, each replaced by `edit`.
fn edit_all(value: &mut Value, key: &str, edit: &dyn Fn(&mut Value)) -> usize {
    let mut found = 0;
    match value {
        Value::Object(fields) => {
            if let Some(field) = fields.get_mut(key) {
                edit(field);
                found += 1;
            }
            for field in fields.values_mut() {
                found += edit_all(field, key, edit);
            }
        }
        Value::Array(items) => {
            for item in items {
                found += edit_all(item, key, edit);
            }
        }
        _ => {}
    }
    found
}

/// A step job waiting for two host calls, saved: the state a tampered store would hand back.
fn saved_with_open_tools() -> String {
    let config = json!({"kind": "step", "prompt": "p", "schema": answer_schema(),
        "tools": [{"name": "probe", "parameters": {"type": "object"}}]});
    let mut job = Job::from_json(&config.to_string(), &[]).unwrap();
    let Output::CallModel(call) = job.poll_output() else { panic!("a model call first") };
    let id = call.id;
    let response = AssistantMessage::from_content(vec![
        verity_core::ContentBlock::ToolCall(verity_core::ToolCall {
            id: "p1".into(),
            name: "probe".into(),
            arguments: json!({}),
        }),
        verity_core::ContentBlock::ToolCall(verity_core::ToolCall {
            id: "p2".into(),
            name: "probe".into(),
            arguments: json!({}),
        }),
    ]);
    job.handle_input(Input::ModelResponse { call: id, response }).unwrap();
    assert!(matches!(job.poll_output(), Output::RunTools(_)));
    job.save()
}

/// A saved state is untrusted (IndexedDB, the component's `restore`): a tool batch whose slots
/// do not match its calls is refused with an error, never indexed with; counters at their
/// maximum saturate instead of overflowing.
#[test]
fn a_tampered_saved_state_is_refused_or_saturates_never_traps() {
    let saved: Value = serde_json::from_str(&saved_with_open_tools()).unwrap();
    type Edit<'a> = (&'a str, &'a dyn Fn(&mut Value));
    let tampered: [Edit; 5] = [
        ("host_slots", &|slots| *slots = json!([0, 99])),
        ("host_slots", &|slots| *slots = json!([0, 0])),
        ("host_slots", &|slots| *slots = json!([0])),
        ("host_replay_safe", &|flags| *flags = json!([])),
        ("slots", &|slots| *slots = json!([null, null, null])),
    ];
    for (key, edit) in tampered {
        let mut state = saved.clone();
        assert_eq!(edit_all(&mut state, key, edit), 1, "{key}");
        let refused = Job::restore(&state.to_string(), &[]).expect_err(key);
        assert!(refused.to_string().contains("tool batch"), "{key}: {refused}");
    }

    let mut state = saved.clone();
    assert!(edit_all(&mut state, "nextId", &|id| *id = json!(u64::MAX)) > 0);
    assert!(edit_all(&mut state, "requests", &|n| *n = json!(u32::MAX)) > 0);
    assert!(edit_all(&mut state, "turns", &|n| *n = json!(u32::MAX - 1)) > 0);
    let mut job = Job::restore(&state.to_string(), &[]).unwrap();
    let Output::RunTools(batch) = job.poll_output() else { panic!("the batch is open") };
    let (id, calls) = (batch.id, batch.calls);
    let results = calls
        .iter()
        .map(|c| Settled { call_id: c.id.clone(), output: ToolOutput::ok("ok", json!({})) })
        .collect();
    job.handle_input(Input::Seal { batch: id, results }).unwrap();
    while let Output::CallModel(call) = job.poll_output() {
        let id = call.id;
        let response = AssistantMessage::tool_call("s", "submit", json!({"answer": "x"}));
        job.handle_input(Input::ModelResponse { call: id, response }).unwrap();
    }
    let spent = job.spent();
    assert_eq!(spent.requests, u32::MAX);
}

/// A response with a million tool calls: the first 64 are judged, the rest answered "not run"
/// without being looked at, and the whole response is handled in one linear pass.
#[test]
fn a_response_with_a_million_tool_calls_is_capped() {
    let config = json!({"kind": "step", "prompt": "p", "schema": answer_schema(),
        "tools": [{"name": "probe", "parameters": {"type": "object"}}]});
    let mut job = Job::from_json(&config.to_string(), &[]).unwrap();
    let Output::CallModel(call) = job.poll_output() else { panic!("a model call first") };
    let id = call.id;
    let calls = (0..1_000_000)
        .map(|n| {
            verity_core::ContentBlock::ToolCall(verity_core::ToolCall {
                id: format!("c{}", n % 7),
                name: "probe".into(),
                arguments: json!({}),
            })
        })
        .collect();
    job.handle_input(Input::ModelResponse {
        call: id,
        response: AssistantMessage::from_content(calls),
    })
    .unwrap();
    let Output::RunTools(batch) = job.poll_output() else {
        panic!("the host runs the first calls")
    };
    assert_eq!(batch.calls.len(), verity_core::agent::MAX_TOOL_CALLS);
    let (id, calls) = (batch.id, batch.calls);
    let results = calls
        .iter()
        .map(|c| Settled { call_id: c.id.clone(), output: ToolOutput::ok("ok", json!({})) })
        .collect();
    job.handle_input(Input::Seal { batch: id, results }).unwrap();
    assert!(matches!(job.poll_output(), Output::CallModel(_)));
}

/// A claim job built in code is the one its minimal JSON reads as, and runs the same.
#[test]
fn a_claim_config_built_in_code_is_the_one_its_json_reads_as() {
    let corpus = corpus();
    let built = verity_core::ClaimConfig::new(CLAIM, corpus.id().clone());
    let read =
        JobConfig::from_value(json!({"kind": "claim", "claim": CLAIM, "corpus": corpus.id()}))
            .unwrap();
    assert_eq!(JobConfig::Claim(built.clone()), read);
    let tuned =
        verity_core::ClaimConfig { retry: verity_core::RetryPolicy::with_retries(2), ..built };
    let read = JobConfig::from_value(json!({"kind": "claim", "claim": CLAIM,
        "corpus": corpus.id(), "retry": {"maxRetries": 2}}))
    .unwrap();
    assert_eq!(JobConfig::Claim(tuned), read);
}
