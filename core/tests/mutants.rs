//! Tests written against the survivors of `cargo mutants` on the policy modules (issue 8):
//! each pins a behaviour that no other test checked. Grouped by the module they guard.

mod common;

use common::*;
use serde_json::json;
use verity_core::Tool;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

// ---- agent.rs ----

#[test]
fn a_tool_reports_its_flags_and_keeps_them_through_serde() {
    let plain = lookup();
    assert_eq!(plain.name(), "lookup");
    assert!(!plain.is_replay_safe());
    assert!(!plain.is_sequential());
    let flagged = lookup().replay_safe().sequential();
    assert!(flagged.is_replay_safe());
    assert!(flagged.is_sequential());

    let json = serde_json::to_value(&flagged).unwrap();
    assert_eq!(json["name"], "lookup");
    assert_eq!(
        (json["replaySafe"].clone(), json["sequential"].clone()),
        (json!(true), json!(true))
    );
    let back: Tool = serde_json::from_value(json).unwrap();
    assert_eq!(back, flagged);
    // Deserializing compiles the schema: an invalid one is refused.
    let good = json!({"name": "x", "description": "", "parameters": {"type": "object"}});
    let good: Tool = serde_json::from_value(good).unwrap();
    assert!(!good.is_replay_safe() && !good.is_sequential(), "the flags default to false");
    let bad = json!({"name": "x", "description": "", "parameters": {"type": 5}});
    assert!(serde_json::from_value::<Tool>(bad).is_err());
}

// ---- step.rs ----

#[test]
fn a_failure_kind_displays_its_stable_name() {
    use verity_core::FailureKind;
    for kind in [FailureKind::Provider, FailureKind::InvalidSubmissions, FailureKind::TurnLimit] {
        assert_eq!(kind.to_string(), kind.as_str());
    }
    assert_eq!(FailureKind::NoSubmit.to_string(), "no-submit");
}

// ---- claim/ ----

fn one_passage() -> std::sync::Arc<verity_core::IndexedCorpus> {
    let corpus = verity_core::Corpus::from_pairs([("e1", "The migration lost no data.")]);
    verity_core::IndexedCorpus::new(corpus.unwrap())
}

fn costly(mut response: verity_core::AssistantMessage) -> verity_core::AssistantMessage {
    response.usage = verity_core::Usage { input: 7, output: 3, ..Default::default() };
    response
}

#[test]
fn a_failed_assessment_request_fails_the_check_as_a_request_failure() {
    use verity_core::claim::{ClaimCheck, ClaimOptions};
    use verity_core::{AssistantMessage, ClaimFailureKind, Machine, ScriptedModel};
    let check = ClaimCheck::with_evidence(
        "No data was lost.",
        one_passage(),
        vec!["The migration lost no data.".into()],
        ClaimOptions::default(),
    );
    assert_eq!(check.claim(), "No data was lost.");
    let model = ScriptedModel::new([costly(AssistantMessage::failed("503 overloaded"))]);
    let (_, check) = run_sync(check, &model, run_lookup);
    assert_eq!(check.spent().requests, 1);
    assert_eq!(check.spent().usage.input, 7);
    let failed = check.finish().unwrap_err();
    assert_eq!(failed.kind(), ClaimFailureKind::AssessRequest);
    assert_eq!(failed.message(), "assessment request failed: 503 overloaded");
    assert_eq!((failed.requests(), failed.usage().input, failed.usage().output), (1, 7, 3));
    assert_eq!(failed.spent().usage, failed.usage());
}

#[test]
fn a_route_has_its_wire_name() {
    use verity_core::claim::Route;
    for route in [Route::SingleCall, Route::AgentEscalation] {
        assert_eq!(serde_json::to_value(route).unwrap(), json!(route.as_str()));
    }
    assert_eq!(Route::SingleCall.as_str(), "single call");
}

fn retryable(mut failed: verity_core::AssistantMessage) -> verity_core::AssistantMessage {
    failed.error = Some(verity_core::ProviderError {
        class: verity_core::FailureClass::Retryable,
        status: Some(503),
        retry_after_ms: Some(10),
        raw_body: None,
    });
    failed
}

#[test]
fn a_retried_assessment_request_is_asked_again_not_judged() {
    use verity_core::claim::{ClaimCheck, ClaimOptions, Route};
    use verity_core::{AssistantMessage, Machine, RetryPolicy, ScriptedModel};
    let options = ClaimOptions { retry: RetryPolicy::with_retries(1), ..ClaimOptions::default() };
    let check = ClaimCheck::with_evidence(
        "No data was lost.",
        one_passage(),
        vec!["The migration lost no data.".into()],
        options,
    );
    let model = ScriptedModel::new([
        retryable(AssistantMessage::failed("503 overloaded")),
        response(vec![call(
            "a1",
            "record_assessment",
            json!({"verdict": "supported", "confidence": 0.9, "citations": ["The migration lost no data."]}),
        )]),
        response(vec![call("s1", "submit", json!({"text": "Nothing was lost."}))]),
    ]);
    let (kinds, check) = run_sync(check, &model, run_lookup);
    assert_eq!(kinds, ["call-model", "call-model", "call-model", "done"]);
    assert_eq!(check.retries(), 1);
    let report = check.finish().unwrap();
    assert_eq!((report.route, report.requests), (Route::SingleCall, 3));
}

// ---- log.rs ----

#[test]
fn the_head_follows_appends_and_checkouts() {
    use verity_core::Log;
    use verity_core::log::Record;
    let mut log = Log::default();
    assert_eq!(log.head(), None);
    let cancelled = || Record::Cancelled { reason: "x".into() };
    let first = log.append(cancelled(), None).unwrap();
    assert_eq!((first, log.head()), (0, Some(0)));
    let second = log.append(cancelled(), None).unwrap();
    let third = log.append(cancelled(), None).unwrap();
    assert_eq!((second, third, log.head()), (1, 2, Some(2)));
    log.checkout(first).unwrap();
    assert_eq!(log.head(), Some(0));
    assert!(log.checkout(9).is_err());
    assert_eq!(log.head(), Some(0), "a failed checkout moves nothing");
}

/// A log is untrusted when read back: ids that do not increase (a repeated id, one that goes
/// back) are refused as corrupt.
///
/// And nothing the log does scans it once per entry, which a forged or merely long log would
/// turn into hours: a log of 200,000 entries with its lease at the start (as a driver's is) is
/// appended under that lease, walked from its head, written, read back, and given whole to a
/// store as a driver's unsynced entries. The bound is the test's size, not a clock: the code
/// this guards looked entries up by scanning (the lease on each append, each entry of a path,
/// each parent read back or written), 2 x 10^10 entry visits for each of those four at this
/// size, about two minutes each in this unoptimised build (each scan put back alone ran for
/// 113 s or more), where the code now takes about two seconds for all of them. A time limit
/// would fail on a loaded machine and pass a scan that was only somewhat slower; a test that
/// runs for minutes (`cargo test` names it after 60 seconds) is a failure nobody misses. A
/// count of the lookups would need a hook in the core's public API for this test alone.
#[test]
fn a_log_whose_ids_do_not_increase_is_corrupt() {
    use verity_core::Log;
    use verity_core::log::Record;
    const ENTRIES: usize = 200_000;
    let mut log = Log::default();
    let lease = log.take_lease("driver");
    for _ in 0..ENTRIES {
        log.append(Record::Cancelled { reason: "x".into() }, Some(&lease)).unwrap();
    }
    assert_eq!(log.lease(), Some(&lease));
    assert_eq!(log.path().len(), ENTRIES + 1);
    let text = log.to_jsonl();
    let read = Log::from_jsonl(&text).unwrap();
    assert_eq!((read.lease(), read.path().len()), (Some(&lease), ENTRIES + 1));
    // A store that has seen nothing of the session takes all of it in one guarded write (the
    // driver's lease record first: a takeover), each entry's parent checked.
    let mut store = Log::default();
    store.extend_guarded(log.entries(), Some(&lease)).unwrap();
    assert_eq!(store, log);
    let lines: Vec<&str> = text.lines().collect();
    // Ids that go back, every parent known: was read as a log.
    let back = [
        lines[0].to_owned(),
        r#"{"id": 5, "parent": 0, "type": "cancelled", "reason": "x"}"#.to_owned(),
        r#"{"id": 3, "parent": 0, "type": "cancelled", "reason": "x"}"#.to_owned(),
    ]
    .join("\n");
    assert!(Log::from_jsonl(&back).unwrap_err().to_string().contains("after a higher id"));
    let repeated = [lines[0], lines[1], lines[1]].join("\n");
    assert!(Log::from_jsonl(&repeated).unwrap_err().to_string().contains("repeated id"));
}

// ---- session.rs ----

fn lookup_step() -> verity_core::Step<serde_json::Value> {
    let schema = verity_core::Schema::compile(answer_schema()).unwrap();
    verity_core::value_step(schema, "system", "task").tool(lookup()).build().unwrap()
}

#[test]
fn a_batch_whose_results_were_stored_but_not_its_seal_is_sealed_on_resume() {
    use verity_core::log::Record;
    use verity_core::{Log, ScriptedModel, Session, SessionOutput};
    let model = ScriptedModel::new([
        response(vec![call("l1", "lookup", json!({"query": "a"}))]),
        response(vec![call("s1", "submit", json!({"answer": "42"}))]),
    ]);
    let mut session = Session::start(lookup_step()).unwrap();
    let SessionOutput::CallModel(c) = session.poll() else { panic!("a step starts with a call") };
    let (id, answer) = (c.id, model.answer(c.request));
    session.record_response(id, answer).unwrap();
    let SessionOutput::RunTools { batch, pending, .. } = session.poll() else { panic!() };
    let l1 = pending[0].call.clone();
    session.start_tool(batch, "l1").unwrap();
    session.settle_tool(batch, "l1", run_lookup(&l1)).unwrap();
    assert!(matches!(session.log().entries().last().unwrap().record, Record::Sealed { .. }));
    assert!(matches!(session.poll(), SessionOutput::CallModel(_)));

    // The store lost the seal (a torn write): every result is there, the seal is not.
    let text = session.log().to_jsonl();
    let torn: Vec<&str> = text.lines().filter(|line| !line.contains("\"sealed\"")).collect();
    let mut resumed: Session<verity_core::Step<serde_json::Value>> =
        Session::resume(Log::from_jsonl(&torn.join("\n")).unwrap(), None).unwrap();
    assert!(
        matches!(resumed.log().entries().last().unwrap().record, Record::Sealed { .. }),
        "the resume records the seal"
    );
    let SessionOutput::CallModel(c) = resumed.poll() else { panic!("the batch is sealed") };
    let (id, answer) = (c.id, model.answer(c.request));
    resumed.record_response(id, answer).unwrap();
    assert_eq!(resumed.finish().unwrap(), json!({"answer": "42"}));
}

// ---- step.rs, accessors ----

#[test]
fn a_step_shows_its_first_valid_submission() {
    use verity_core::{Machine, ScriptedModel};
    let model = ScriptedModel::new([
        response(vec![call("s0", "submit", json!({}))]),
        response(vec![call("s1", "submit", json!({"answer": "42"}))]),
    ]);
    let mut step = lookup_step();
    assert_eq!(step.submission(), None);
    let verity_core::Output::CallModel(c) = step.poll_output() else { panic!() };
    let input = verity_core::Input::ModelResponse { call: c.id, response: model.answer(c.request) };
    step.handle_input(input).unwrap();
    assert_eq!(step.submission(), None, "an invalid submission is not stored");
    let (_, step) = run_sync(step, &model, run_lookup);
    assert_eq!(step.submission(), Some(&json!({"answer": "42"})));
}

#[test]
fn the_retry_budget_is_shared_by_the_whole_check() {
    use verity_core::claim::{ClaimCheck, ClaimOptions};
    use verity_core::{
        AssistantMessage, ClaimFailureKind, FailureKind, RetryPolicy, ScriptedModel,
    };
    let options = ClaimOptions { retry: RetryPolicy::with_retries(1), ..ClaimOptions::default() };
    let check = ClaimCheck::with_evidence(
        "No data was lost.",
        one_passage(),
        vec!["The migration lost no data.".into()],
        options,
    );
    let model = ScriptedModel::new([
        retryable(AssistantMessage::failed("503 overloaded")),
        response(vec![call(
            "a1",
            "record_assessment",
            json!({"verdict": "supported", "confidence": 0.9, "citations": ["The migration lost no data."]}),
        )]),
        // The one retry is spent: the summary's failure stands.
        retryable(AssistantMessage::failed("503 again")),
        response(vec![call("s1", "submit", json!({"text": "Nothing was lost."}))]),
    ]);
    let (_, check) = run_sync(check, &model, run_lookup);
    use verity_core::Machine;
    let failed = check.finish().unwrap_err();
    assert_eq!(failed.kind(), ClaimFailureKind::Summary(FailureKind::Provider));
    assert_eq!((model.requests(), failed.spent().retries), (3, 1));
}

#[test]
fn research_turns_below_one_count_as_one() {
    use verity_core::claim::{ClaimCheck, ClaimOptions};
    use verity_core::{ClaimStage, Event, Machine, ScriptedModel};
    let options = ClaimOptions { research_turns: 0, ..ClaimOptions::default() };
    // A passage beyond the evidence, so that research is asked for.
    let corpus = verity_core::Corpus::from_pairs([
        ("e1", "The migration lost no data."),
        ("e2", "An audit followed in April."),
    ]);
    let check = ClaimCheck::with_evidence(
        "No data was lost.",
        verity_core::IndexedCorpus::new(corpus.unwrap()),
        vec!["The migration lost no data.".into()],
        options,
    );
    let model = ScriptedModel::new([
        response(vec![call(
            "a1",
            "record_assessment",
            json!({"verdict": "insufficient", "confidence": 0.2, "citations": []}),
        )]),
        response(vec![]),
    ]);
    let mut check = check;
    let mut research = Vec::new();
    loop {
        research.extend(check.drain_events().into_iter().filter_map(|event| match event {
            Event::Stage { stage: stage @ ClaimStage::Research { .. } } => Some(stage),
            _ => None,
        }));
        let verity_core::Output::CallModel(c) = check.poll_output() else { break };
        let input =
            verity_core::Input::ModelResponse { call: c.id, response: model.answer(c.request) };
        check.handle_input(input).unwrap();
    }
    assert_eq!(research, [ClaimStage::Research { turn: 1, of: 1 }]);
}
