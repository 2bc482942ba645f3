//! The answer job (`"kind": "answer"`): each sentence checked in turn through the claim
//! checker, spans and located citations in the report, the answer's own marks checked, one
//! machine that saves and resumes mid-answer, and typed errors for answers it cannot check.

use std::sync::Arc;

use serde_json::{Value, json};
use verity_core::corpus::Corpus;
use verity_core::indexed::IndexedCorpus;
use verity_core::{
    AssistantMessage, Event, Input, Job, JobFailureKind, JobValue, Machine, Output, ScriptedModel,
};

const E1: &str = "The Tyne Bridge opened in 1928. It was built by Dorman Long.";
const E2: &str = "The bridge is 161 metres long and carries the A167 road.";
const E3: &str = "Newcastle is a city in the north east of England.";

fn corpus() -> Arc<IndexedCorpus> {
    IndexedCorpus::new(Corpus::from_pairs([("e1", E1), ("e2", E2), ("e3", E3)]).unwrap())
}

fn assess(verdict: &str, citations: &[&str]) -> AssistantMessage {
    AssistantMessage::tool_call(
        "a",
        "record_assessment",
        json!({"verdict": verdict, "confidence": 0.8, "citations": citations}),
    )
}

fn config(answer: &str, extra: Value) -> String {
    let mut config = json!({"kind": "answer", "answer": answer, "corpus": corpus().id(),
        "retriever": {"bm25": {"k": 3}}});
    for (key, value) in extra.as_object().unwrap() {
        config[key] = value.clone();
    }
    config.to_string()
}

/// Drives `job` with `model`, saving and restoring it before every output as a host that may
/// crash would; returns the job's value, the model call ids, and its events.
fn run(
    mut job: Job,
    model: &ScriptedModel,
) -> (Result<JobValue, verity_core::JobFailed>, Vec<u64>, Vec<Event>) {
    let corpora = [corpus()];
    let (mut ids, mut events) = (Vec::new(), Vec::new());
    loop {
        let saved = job.save();
        job = Job::restore(&saved, &corpora).unwrap();
        events.extend(job.drain_events());
        let input = match job.poll_output() {
            Output::CallModel(call) => {
                ids.push(call.id.0);
                Input::ModelResponse { call: call.id, response: model.answer(call.request) }
            }
            Output::RunTools(_) => panic!("an answer job runs no host tools"),
            _ => break,
        };
        job.handle_input(input).unwrap();
    }
    events.extend(job.drain_events());
    (job.finish_typed(), ids, events)
}

fn answer_report(value: JobValue) -> verity_core::answer::AnswerReport {
    match value {
        JobValue::Answer(report) => *report,
        other => panic!("not an answer report: {other:?}"),
    }
}

#[test]
fn each_sentence_is_checked_with_its_span_citations_and_marks() {
    let answer = "Sure! The Tyne Bridge opened in 1928 [e1]. It is 200 metres long. [e2] In short:";
    let job = Job::from_json(&config(answer, json!({})), &[corpus()]).unwrap();
    let model = ScriptedModel::new([assess("supported", &[E1]), assess("contradicted", &[E2])]);
    let (value, ids, events) = run(job, &model);
    let report = answer_report(value.unwrap());
    assert_eq!(model.remaining(), 0, "{report:#?}");
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique.len(), 2, "every call of every sentence has its own id: {ids:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");

    let statuses: Vec<&str> = report
        .sentences
        .iter()
        .map(|s| {
            serde_json::to_value(s.status).unwrap().as_str().unwrap().to_owned().leak() as &str
        })
        .collect();
    assert_eq!(
        statuses,
        ["not-checkable", "supported", "contradicted", "not-checkable"],
        "{report:#?}"
    );
    for sentence in &report.sentences {
        assert_eq!(&answer[sentence.span.start..sentence.span.end], sentence.text);
    }
    let first = &report.sentences[1];
    assert_eq!(
        first.claim.as_deref(),
        Some("The Tyne Bridge opened in 1928."),
        "the mark is not in the claim"
    );
    // The citation names its passage and quotes the sentence of it that holds the claim.
    assert_eq!(first.citations.len(), 1);
    let citation = &first.citations[0];
    assert_eq!(citation.passage.as_deref(), Some("e1"));
    assert_eq!(citation.quote, "The Tyne Bridge opened in 1928.");
    assert_eq!(&E1[citation.span.start..citation.span.end], citation.quote);
    assert_eq!(first.marks.len(), 1);
    assert_eq!(first.marks[0].passage.as_deref(), Some("e1"));
    assert_eq!(serde_json::to_value(first.marks[0].holds).unwrap(), "supports");
    assert_eq!(&answer[first.marks[0].span.start..first.marks[0].span.end], "[e1]");
    // `[e2]` after the full stop belongs to the sentence before it (Unicode's rules would give
    // it to the next), whose check contradicts.
    let second = &report.sentences[2];
    assert_eq!(second.marks.len(), 1, "{report:#?}");
    assert_eq!(serde_json::to_value(second.marks[0].holds).unwrap(), "contradicts");
    assert_eq!(second.citations[0].quote, E2);
    assert!(report.sentences[3].marks.is_empty());

    assert_eq!(report.counts.supported, 1);
    assert_eq!(report.counts.contradicted, 1);
    assert_eq!(report.counts.not_checkable, 2);
    assert_eq!(report.faithful, Some(false));
    assert!((report.supported_share - 0.5).abs() < 1e-9);
    // No summary is asked for a sentence: the answer's report says what holds.
    assert_eq!(report.requests, 2);
    let summary = &report.sentences[1].report.as_ref().unwrap().summary;
    assert_eq!(summary, "The evidence supports it (passage e1).");
    // A host learns of each sentence as it ends, in order, with what the report will say.
    let checked: Vec<usize> = events
        .iter()
        .filter_map(|event| match event {
            Event::SentenceChecked { sentence } => Some(sentence.index),
            _ => None,
        })
        .collect();
    assert_eq!(checked, [1, 2]);
    let started = events.iter().filter(|e| matches!(e, Event::SentenceStarted { .. })).count();
    assert_eq!(started, 2);
}

#[test]
fn a_mark_names_a_passage_through_the_mapping_and_is_asked_about_first() {
    let answer = "Dorman Long built the bridge [1].";
    let job = Job::from_json(&config(answer, json!({"marks": {"1": "e1"}})), &[corpus()]).unwrap();
    let model = ScriptedModel::new([assess("supported", &[E1])]).recording();
    let (value, _, _) = run(job, &model);
    let report = answer_report(value.unwrap());
    let first_request = format!("{:?}", model.recorded()[0]);
    assert!(first_request.contains("Dorman Long"), "the named passage is evidence");
    let mark = &report.sentences[0].marks[0];
    assert_eq!((mark.label.as_str(), mark.passage.as_deref()), ("1", Some("e1")));
    assert_eq!(serde_json::to_value(mark.holds).unwrap(), "supports");
    assert_eq!(report.sentences[0].citations[0].quote, "It was built by Dorman Long.");
    assert_eq!(report.faithful, Some(true));
}

#[test]
fn a_mark_that_names_no_passage_is_reported_so() {
    let answer = "The Tyne Bridge opened in 1928 [7].";
    let job = Job::from_json(&config(answer, json!({})), &[corpus()]).unwrap();
    let model = ScriptedModel::new([assess("supported", &[E1])]);
    let report = answer_report(run(job, &model).0.unwrap());
    let mark = &report.sentences[0].marks[0];
    assert_eq!(mark.passage, None);
    assert_eq!(serde_json::to_value(mark.holds).unwrap(), "unknown-passage");
}

#[test]
fn a_sentence_whose_check_fails_is_reported_and_the_rest_go_on() {
    let answer = "The Tyne Bridge opened in 1928. The bridge is 161 metres long.";
    let job = Job::from_json(&config(answer, json!({})), &[corpus()]).unwrap();
    let model = ScriptedModel::new([
        AssistantMessage::text("I think it is true."),
        assess("supported", &[E2]),
    ]);
    let report = answer_report(run(job, &model).0.unwrap());
    let failure = report.sentences[0].failure.as_ref().unwrap();
    assert_eq!(failure.kind, "assess-prose");
    assert_eq!(report.counts.failed, 1);
    assert_eq!(report.counts.supported, 1);
    assert_eq!(report.faithful, Some(false), "a sentence not shown to hold is not faithful");
}

#[test]
fn a_failing_provider_ends_the_answer_with_what_it_spent() {
    let answer = "The Tyne Bridge opened in 1928. The bridge is 161 metres long.";
    let job = Job::from_json(&config(answer, json!({})), &[corpus()]).unwrap();
    let model =
        ScriptedModel::new([assess("supported", &[E1]), AssistantMessage::failed("HTTP 500")]);
    let failed = run(job, &model).0.unwrap_err();
    assert_eq!(failed.kind(), JobFailureKind::AssessRequest);
    assert!(failed.message().starts_with("sentence 2: "), "{}", failed.message());
    assert_eq!(failed.spent().requests, 2);
}

#[test]
fn answers_it_cannot_check_are_refused_with_a_typed_error_naming_why() {
    let refused = |answer: &str| {
        let failed = Job::from_json(&config(answer, json!({})), &[corpus()]).unwrap_err();
        assert_eq!(failed.kind(), JobFailureKind::Config);
        failed.message().to_owned()
    };
    assert!(refused("   \n ").contains("answer: the answer is empty"));
    assert!(refused(&"word ".repeat(10_001)).contains("50000"));
    assert!(refused("It opened in 1928.\u{202e} It is long.").contains("U+202E"));
    assert!(refused(&format!("{}.", "a ".repeat(1_500))).contains("no sentence boundary"));
    // Marks after full stops cut a sentence Unicode keeps whole: the cap counts the pieces.
    let chunk = "a b c. [e1] ".repeat(120);
    let glued = format!("{chunk}\n\n{chunk}");
    assert_eq!(verity_core::answer::sentences(&glued).unwrap().len(), 2, "Unicode's cut");
    assert!(refused(&glued).contains("240 sentences"), "{}", refused(&glued));
    let unknown = Job::from_json(r#"{"kind":"answers"}"#, &[corpus()]).unwrap_err();
    assert!(unknown.message().contains("\"answer\""), "{}", unknown.message());
    let extra =
        Job::from_json(&config("It opened.", json!({"claim": "x"})), &[corpus()]).unwrap_err();
    assert!(extra.message().contains("claim"), "{}", extra.message());
}

#[test]
fn html_in_an_answer_is_text() {
    let answer = "<b>The Tyne Bridge</b> opened in 1928.";
    let job = Job::from_json(&config(answer, json!({})), &[corpus()]).unwrap();
    let model = ScriptedModel::new([assess("supported", &[E1])]).recording();
    let report = answer_report(run(job, &model).0.unwrap());
    assert_eq!(report.sentences[0].claim.as_deref(), Some(answer));
    let request = format!("{:?}", model.recorded()[0]);
    assert!(request.contains("<b>The Tyne Bridge</b>"), "the markup is the claim's text");
}

fn split(claims: &[&str]) -> AssistantMessage {
    AssistantMessage::tool_call("d", "submit", json!({ "claims": claims }))
}

fn status(value: impl serde::Serialize) -> String {
    serde_json::to_value(value).unwrap().as_str().unwrap().to_owned()
}

#[test]
fn a_split_sentence_is_checked_claim_by_claim_and_holds_only_if_every_claim_does() {
    let answer = "Sure! The Tyne Bridge opened in 1928 and it is 200 metres long [e1].";
    let job = Job::from_json(&config(answer, json!({"decompose": true})), &[corpus()]).unwrap();
    let model = ScriptedModel::new([
        split(&["The Tyne Bridge opened in 1928", "The Tyne Bridge is 200 metres long."]),
        assess("supported", &[E1]),
        assess("contradicted", &[E2]),
    ])
    .recording();
    let (value, ids, events) = run(job, &model);
    let report = answer_report(value.unwrap());
    assert_eq!(model.remaining(), 0, "{report:#?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "one id each, in order: {ids:?}");
    // The decomposition asks about the sentence (without its mark), with the text before it.
    let asked = format!("{:?}", model.recorded()[0]);
    assert!(asked.contains("atomic claims"), "{asked}");
    assert!(asked.contains("opened in 1928 and it is 200 metres long."), "{asked}");
    // The second check asks about its own claim, not the sentence.
    let second = format!("{:?}", model.recorded()[2]);
    assert!(second.contains("The Tyne Bridge is 200 metres long."), "{second}");

    let sentence = &report.sentences[1];
    assert_eq!(sentence.claims.len(), 2, "{sentence:#?}");
    assert_eq!(status(sentence.claims[0].status), "supported");
    assert_eq!(status(sentence.claims[1].status), "contradicted");
    // The worst claim decides: the sentence is contradicted, cited as its claim is.
    assert_eq!(status(sentence.status), "contradicted");
    assert_eq!(sentence.citations.len(), 1);
    assert_eq!(sentence.citations[0].passage.as_deref(), Some("e2"));
    assert!(sentence.report.is_none(), "the reports are the claims'");
    // A claim the sentence holds verbatim has its own span; another has the sentence's.
    let first = &sentence.claims[0];
    assert_eq!(&answer[first.span.start..first.span.end], "The Tyne Bridge opened in 1928");
    assert_eq!(
        (first.span.start_utf16, first.span.end_utf16),
        (first.span.start, first.span.end),
        "ASCII: UTF-16 offsets are the byte offsets"
    );
    assert_eq!(sentence.claims[1].span, sentence.span);
    // The mark names e1, which supports a claim but is not what decided the sentence.
    assert_eq!(status(sentence.marks[0].holds), "does-not-support");
    let decomposed = sentence.decomposed.as_ref().unwrap();
    assert_eq!((decomposed.ungrounded, decomposed.whole.is_none()), (0, true));
    assert_eq!(report.requests, 3);
    assert_eq!(report.faithful, Some(false));
    // One start and one end for the sentence, whatever it was split into.
    let count = |f: fn(&Event) -> bool| events.iter().filter(|e| f(e)).count();
    assert_eq!(count(|e| matches!(e, Event::SentenceStarted { .. })), 1);
    assert_eq!(count(|e| matches!(e, Event::SentenceChecked { .. })), 1);
}

#[test]
fn a_split_that_invents_or_fails_leaves_the_sentence_checked_whole() {
    let answer = "The Tyne Bridge opened in 1928. The bridge is 161 metres long.";
    let job = Job::from_json(&config(answer, json!({"decompose": true})), &[corpus()]).unwrap();
    let model = ScriptedModel::new([
        // Words the answer does not have: dropped, and with nothing left, the sentence whole.
        split(&["Queen Victoria attended a royal ceremony there."]),
        assess("supported", &[E1]),
        // Two submissions that break the schema (five claims; none): the step fails.
        split(&["a", "b", "c", "d", "e"]),
        split(&[]),
        assess("supported", &[E2]),
    ]);
    let report = answer_report(run(job, &model).0.unwrap());
    assert_eq!(model.remaining(), 0, "{report:#?}");
    let [first, second] = &report.sentences[..] else { panic!("{report:#?}") };
    let decomposed = first.decomposed.as_ref().unwrap();
    assert_eq!(decomposed.ungrounded, 1);
    assert_eq!(decomposed.whole.as_ref().unwrap().kind, "no-claims-kept");
    let whole = second.decomposed.as_ref().unwrap().whole.as_ref().unwrap();
    assert_eq!(whole.kind, "decompose-invalid-submissions", "{whole:?}");
    for sentence in [first, second] {
        assert!(sentence.claims.is_empty());
        assert_eq!(status(sentence.status), "supported");
        assert!(sentence.report.is_some());
    }
    assert_eq!(report.faithful, Some(true));
}

#[test]
fn a_provider_failing_while_splitting_ends_the_answer() {
    let answer = "The Tyne Bridge opened in 1928.";
    let job = Job::from_json(&config(answer, json!({"decompose": true})), &[corpus()]).unwrap();
    let model = ScriptedModel::new([AssistantMessage::failed("HTTP 500")]);
    let failed = run(job, &model).0.unwrap_err();
    assert_eq!(failed.kind(), JobFailureKind::Provider);
    assert!(failed.message().starts_with("sentence 1: splitting it into claims"), "{failed:?}");
    assert_eq!(failed.spent().requests, 1);
}

#[test]
fn the_offline_baseline_splits_nothing() {
    let answer = "The Tyne Bridge opened in 1928. The bridge is 161 metres long.";
    let mut job = Job::from_json(&config(answer, json!({"decompose": true})), &[corpus()]).unwrap();
    while let Output::CallModel(call) = job.poll_output() {
        let response = verity_core::provider::offline::respond(call.request);
        let input = Input::ModelResponse { call: call.id, response };
        job.handle_input(input).unwrap();
    }
    let report = answer_report(job.finish_typed().unwrap());
    for sentence in &report.sentences {
        assert_eq!(sentence.claims.len(), 1, "{sentence:#?}");
        assert_eq!(Some(&sentence.claims[0].text), sentence.claim.as_ref());
        assert_eq!(sentence.claims[0].span, sentence.span);
        assert_eq!(status(sentence.status), "supported", "{sentence:#?}");
    }
}

/// A model that answers each request by what it asks, whatever order the calls come in: an
/// assessment by its claim (the text before its evidence), a research turn with a note.
fn by_claim(request: verity_core::ModelRequest<'_>) -> AssistantMessage {
    let text = serde_json::to_string(&request.messages).unwrap();
    if text.contains("Find more evidence") {
        return AssistantMessage::text("Nothing more to find.");
    }
    let claim = text.split("Evidence (").next().unwrap();
    if claim.contains("1928") {
        assess("supported", &[E1])
    } else if claim.contains("161 metres") {
        assess("supported", &[E2])
    } else if claim.contains("300 metres") {
        assess("contradicted", &[E2])
    } else {
        assess("insufficient", &[])
    }
}

const FOUR: &str = "The Tyne Bridge opened in 1928. The bridge is 161 metres long. \
    The bridge is 300 metres long. Newcastle has a famous football club.";

/// Drives `job` answering the last of its pending outputs first (saving and restoring it
/// before each), as a host whose calls come back out of order would; returns its value, the
/// most outputs pending at once, and its events.
fn run_out_of_order(
    mut job: Job,
    respond: impl Fn(verity_core::ModelRequest<'_>) -> AssistantMessage,
) -> (Result<JobValue, verity_core::JobFailed>, usize, Vec<Event>) {
    let corpora = [corpus()];
    let (mut most, mut events) = (0, Vec::new());
    loop {
        job = Job::restore(&job.save(), &corpora).unwrap();
        events.extend(job.drain_events());
        let outputs = job.poll_outputs();
        most = most.max(outputs.len());
        let mut ids: Vec<u64> = outputs
            .iter()
            .map(|output| match output {
                Output::CallModel(call) => call.id.0,
                other => panic!("an answer job asks only for model calls: {other:?}"),
            })
            .collect();
        ids.dedup();
        assert_eq!(ids.len(), outputs.len(), "two pending outputs share an id: {ids:?}");
        let Some(Output::CallModel(call)) = outputs.last() else { break };
        let input = Input::ModelResponse { call: call.id, response: respond(call.request) };
        job.handle_input(input).unwrap();
    }
    events.extend(job.drain_events());
    (job.finish_typed(), most, events)
}

fn answer_job(answer: &str, extra: Value) -> Job {
    Job::from_json(&config(answer, extra), &[corpus()]).unwrap()
}

#[test]
fn sentences_are_checked_concurrently_up_to_the_bound_and_end_as_one_at_a_time_does() {
    let (alone, most, _) = run_out_of_order(answer_job(FOUR, json!({})), by_claim);
    assert_eq!(most, 1, "one at a time unless the job asks for more");
    let alone = answer_report(alone.unwrap());
    for concurrency in [2, 3, 16] {
        let job = answer_job(FOUR, json!({"concurrency": concurrency}));
        let (value, most, events) = run_out_of_order(job, by_claim);
        assert_eq!(most, concurrency.min(4), "sentences in flight at once");
        let report = answer_report(value.unwrap());
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            serde_json::to_value(&alone).unwrap(),
            "concurrency {concurrency}: the same report as one at a time"
        );
        for index in 0..4 {
            let started = events
                .iter()
                .filter(|e| matches!(e, Event::SentenceStarted { index: i } if *i == index))
                .count();
            let checked = events
                .iter()
                .filter(
                    |e| matches!(e, Event::SentenceChecked { sentence } if sentence.index == index),
                )
                .count();
            assert_eq!((started, checked), (1, 1), "sentence {index}'s events");
        }
    }
    assert_eq!(status(alone.sentences[0].status), "supported");
    assert_eq!(status(alone.sentences[2].status), "contradicted");
    assert_eq!(status(alone.sentences[3].status), "insufficient");
}

/// A sentence nothing settles keeps its assessment: its confidence, the verifier's or the
/// model's figures, and what was spent, whether research ran and found nothing new or the
/// corpus held nothing beyond the evidence (a claim job fails `no-new-evidence` there). An
/// answer's sentence that does not hold is the one a reader opens.
#[test]
fn a_sentence_nothing_settles_keeps_its_assessment_whether_or_not_research_ran() {
    // The first retrieves all three passages, the whole corpus, so no research; the second
    // one passage, so research runs (the model looks nothing up) and finds nothing new.
    for (answer, requests) in [
        ("The Tyne Bridge in Newcastle is painted green.", 1),
        ("Newcastle has a famous football club.", 2),
    ] {
        let (value, _, _) = run_out_of_order(answer_job(answer, json!({})), by_claim);
        let report = answer_report(value.unwrap());
        let sentence = &report.sentences[0];
        assert_eq!(status(sentence.status), "insufficient", "{answer}: {sentence:#?}");
        assert_eq!(sentence.confidence, Some(0.8), "{answer}: {sentence:#?}");
        let claim = sentence.report.as_ref().expect("the sentence's report");
        assert_eq!(status(claim.assessment.verdict), "insufficient");
        assert_eq!(claim.requests, requests, "{answer}: research's requests counted");
        assert_eq!(claim.route.as_str(), "single call", "the first assessment decided");
        assert!(sentence.citations.is_empty());
        assert_eq!(report.requests, requests, "{answer}");
    }
}

#[test]
fn split_sentences_have_their_claims_checked_concurrently_too() {
    let offline =
        |request: verity_core::ModelRequest<'_>| verity_core::provider::offline::respond(request);
    let answer = "The Tyne Bridge opened in 1928 and was built by Dorman Long. \
        The bridge is 161 metres long. Newcastle is in England.";
    let extra = |concurrency: u32| json!({"decompose": true, "concurrency": concurrency});
    let (alone, _, _) = run_out_of_order(answer_job(answer, extra(1)), offline);
    let (together, most, _) = run_out_of_order(answer_job(answer, extra(4)), offline);
    assert!(most > 1, "{most}");
    assert_eq!(together.unwrap().into_value(), alone.unwrap().into_value());
}

#[test]
fn a_cancel_ends_every_sentence_in_flight_with_what_was_spent() {
    let mut job = answer_job(FOUR, json!({"concurrency": 3}));
    let Output::CallModel(call) = job.poll_outputs()[1] else { panic!() };
    let input = Input::ModelResponse { call: call.id, response: by_claim(call.request) };
    job.handle_input(input).unwrap();
    assert_eq!(job.poll_outputs().len(), 3, "the next sentence started in its place");
    job.handle_input(Input::Cancel { reason: "stop".into() }).unwrap();
    assert!(job.poll_outputs().is_empty());
    let failed = job.finish_typed().unwrap_err();
    assert_eq!(failed.kind(), JobFailureKind::Cancelled);
    assert_eq!(failed.spent().requests, 1, "{failed:?}");
}

#[test]
fn a_provider_failing_in_one_sentence_ends_the_answer_counting_every_sentences_requests() {
    let mut job = answer_job(FOUR, json!({"concurrency": 2}));
    let Output::CallModel(call) = job.poll_outputs()[0] else { panic!() };
    let input = Input::ModelResponse { call: call.id, response: by_claim(call.request) };
    job.handle_input(input).unwrap();
    let Output::CallModel(call) = job.poll_outputs()[1] else { panic!() };
    let input = Input::ModelResponse { call: call.id, response: AssistantMessage::failed("500") };
    job.handle_input(input).unwrap();
    assert!(job.poll_outputs().is_empty(), "nothing more is asked");
    let failed = job.finish_typed().unwrap_err();
    assert_eq!(failed.kind(), JobFailureKind::AssessRequest);
    assert!(failed.message().starts_with("sentence 3: "), "{}", failed.message());
    assert_eq!(failed.spent().requests, 2);
}

#[test]
fn an_input_or_a_streamed_piece_for_no_pending_call_is_refused_and_changes_nothing() {
    let mut job = answer_job(FOUR, json!({"concurrency": 2}));
    let ids: Vec<_> = job
        .poll_outputs()
        .iter()
        .map(|o| match o {
            Output::CallModel(call) => call.id,
            _ => panic!(),
        })
        .collect();
    let delta = verity_core::Delta::Text { text: "Yes".into() };
    job.record_delta(ids[1], delta.clone()).unwrap();
    let saved = job.save();
    let stranger = verity_core::CallId(ids[1].0 + 1);
    let input = Input::ModelResponse { call: stranger, response: assess("supported", &[E1]) };
    let misuse = job.handle_input(input).unwrap_err();
    assert_eq!(misuse.kind, verity_core::MisuseKind::UnexpectedInput);
    assert!(job.record_delta(stranger, delta).is_err());
    assert_eq!(job.save(), saved);
}

#[test]
fn an_answer_job_saved_with_one_sentence_in_flight_still_restores() {
    let mut job = answer_job(FOUR, json!({}));
    let Output::CallModel(call) = job.poll_output() else { panic!() };
    let first = call.id;
    let mut saved: Value = serde_json::from_str(&job.save()).unwrap();
    // The form a job saved before answers could be checked concurrently has.
    let check = saved["check"].as_object_mut().unwrap();
    let active = check.remove("active").unwrap();
    assert_eq!(active.as_array().unwrap().len(), 1, "{active}");
    check.insert("current".into(), active[0].clone());
    check.remove("concurrency");
    let mut job = Job::restore(&saved.to_string(), &[corpus()]).unwrap();
    let Output::CallModel(call) = job.poll_output() else { panic!() };
    assert_eq!(call.id, first);
    let (value, most, _) = run_out_of_order(job, by_claim);
    assert_eq!(most, 1);
    assert_eq!(answer_report(value.unwrap()).counts.supported, 2);
}

#[test]
fn concurrency_is_a_positive_integer_up_to_16() {
    for bad in [json!(0), json!(17), json!("2"), json!(1.5)] {
        let failed =
            Job::from_json(&config(FOUR, json!({"concurrency": bad})), &[corpus()]).unwrap_err();
        assert_eq!(failed.kind(), JobFailureKind::Config);
        assert!(failed.message().contains("concurrency"), "{bad}: {}", failed.message());
    }
}

/// A transport that answers as `by_claim` does after yielding to the executor (longer for
/// the first sentence's claim, so calls come back out of the order they went out), and counts
/// how many requests were in flight at once.
#[derive(Default)]
struct Slow {
    in_flight: std::cell::Cell<usize>,
    most: std::cell::Cell<usize>,
}

impl verity_core::Transport for Slow {
    async fn complete(&self, request: verity_core::ModelRequest<'_>) -> AssistantMessage {
        self.in_flight.set(self.in_flight.get() + 1);
        self.most.set(self.most.get().max(self.in_flight.get()));
        let slow = serde_json::to_string(&request.messages).unwrap().contains("1928");
        let response = by_claim(request);
        for _ in 0..if slow { 8 } else { 1 } {
            yield_now().await;
        }
        self.in_flight.set(self.in_flight.get() - 1);
        response
    }
}

/// Pending once, then ready: lets the executor poll the other requests in flight.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|context| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            context.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}

#[test]
fn the_driver_makes_every_pending_call_at_once_and_answers_each_as_it_comes_back() {
    let alone = Slow::default();
    let one = pollster::block_on(verity_core::drive(
        answer_job(FOUR, json!({})),
        &alone,
        &verity_core::NoTools,
    ))
    .unwrap();
    assert_eq!(alone.most.get(), 1);
    let together = Slow::default();
    let three = pollster::block_on(verity_core::drive(
        answer_job(FOUR, json!({"concurrency": 3})),
        &together,
        &verity_core::NoTools,
    ))
    .unwrap();
    assert_eq!(together.most.get(), 3, "three sentences' requests in flight at once");
    assert_eq!(three, one, "the same report");
}

#[test]
fn a_durable_session_records_concurrent_responses_as_they_come_and_replays_them() {
    let store = verity_core::MemoryStore::new();
    let transport = Slow::default();
    let mut session =
        verity_core::Session::start(answer_job(FOUR, json!({"concurrency": 4}))).unwrap();
    let mut events = Vec::new();
    let options = verity_core::DriveOptions::new().events(|event| events.push(event));
    pollster::block_on(verity_core::drive_session_with(
        &mut session,
        &store,
        &transport,
        &verity_core::NoTools,
        options,
    ))
    .unwrap();
    assert_eq!(transport.most.get(), 4);
    let checked: Vec<usize> = events
        .iter()
        .filter_map(|e| match e {
            Event::SentenceChecked { sentence } => Some(sentence.index),
            _ => None,
        })
        .collect();
    assert_eq!(checked.len(), 4);
    assert_ne!(checked[0], 0, "the first sentence's slow request came back last: {checked:?}");
    let report = session.into_machine().finish_typed().unwrap().into_value();
    // The log holds the responses in the order they came; replayed, they end the same.
    let replayed = verity_core::indexed::with_corpora(&[corpus()], || {
        verity_core::Session::<Job>::resume(store.log(), None)
    })
    .unwrap();
    assert!(matches!(replayed.clone().poll(), verity_core::SessionOutput::Done));
    assert_eq!(replayed.into_machine().finish_typed().unwrap().into_value(), report);
}

/// A transport that fires `cancel` as the second sentence's response arrives, while the first
/// sentence's response, a step slower, arrives just after: both were paid for.
struct CancelOnSecond {
    cancel: verity_core::Cancel,
}

impl verity_core::Transport for CancelOnSecond {
    async fn complete(&self, request: verity_core::ModelRequest<'_>) -> AssistantMessage {
        let second = serde_json::to_string(&request.messages).unwrap().contains("161 metres");
        let response = by_claim(request);
        for _ in 0..if second { 1 } else { 2 } {
            yield_now().await;
        }
        if second {
            self.cancel.cancel("enough");
        }
        response
    }
}

#[test]
fn a_cancel_keeps_the_responses_that_had_arrived_and_drops_the_requests_still_out() {
    let cancel = verity_core::Cancel::new();
    let transport = CancelOnSecond { cancel: cancel.clone() };
    let options = verity_core::DriveOptions::new().cancel(cancel);
    let job = answer_job(FOUR, json!({"concurrency": 2}));
    let failed = pollster::block_on(verity_core::drive_with(
        job,
        &transport,
        &verity_core::NoTools,
        options,
    ))
    .unwrap_err();
    assert_eq!(failed.kind(), JobFailureKind::Cancelled);
    assert_eq!(failed.spent().requests, 2, "both responses that arrived are counted: {failed:?}");
}

/// A transport whose first sentence's request fails at once (a 500, no retries) while the
/// second's is still out.
struct FailFirst;

impl verity_core::Transport for FailFirst {
    async fn complete(&self, request: verity_core::ModelRequest<'_>) -> AssistantMessage {
        let first = serde_json::to_string(&request.messages).unwrap().contains("1928");
        if first {
            return AssistantMessage::failed("HTTP 500");
        }
        let response = by_claim(request);
        for _ in 0..3 {
            yield_now().await;
        }
        response
    }
}

#[test]
fn a_failure_that_ends_the_answer_drops_the_other_sentences_requests_in_every_driver() {
    let job = || answer_job(FOUR, json!({"concurrency": 2}));
    let failed = pollster::block_on(verity_core::drive(job(), &FailFirst, &verity_core::NoTools))
        .unwrap_err();
    assert_eq!(failed.kind(), JobFailureKind::AssessRequest);
    assert!(failed.message().starts_with("sentence 1: "), "{}", failed.message());
    let store = verity_core::MemoryStore::new();
    let mut session = verity_core::Session::start(job()).unwrap();
    pollster::block_on(verity_core::drive_session(
        &mut session,
        &store,
        &FailFirst,
        &verity_core::NoTools,
    ))
    .unwrap();
    let failed = session.into_machine().finish_typed().unwrap_err();
    assert_eq!(failed.kind(), JobFailureKind::AssessRequest);
}
