//! Checks and their queue: at most `concurrency` at once, cancelled queued or running, offline
//! end to end with the events the page reads, a page connecting mid-run, the page's provider
//! made the core's (or refused, saying why, before anything is sent), and claims read from a
//! file.

use serde_json::{Value, json};
use verity_core::{ClaimStage, Delta, Event, StopReason, Usage};
use verity_messages::{
    AnswerView, CheckRequest, EventView, FailureView, FromJson, FromWorker, Outcome,
    ProviderChoice, ReportView, ToWorker,
};
use verity_worker::Engine;

mod common;

use common::{
    BRIDGE_OPENED, Recorded, TestHost, check, file, finished, last_corpus, max_in_flight, request,
    started, step_config, step_finished, take, with_demo,
};

#[test]
fn the_scheduler_respects_concurrency_and_cancels_queued_checks() {
    let (engine, mut pool, recorded) = with_demo();
    take(&recorded);
    let checks: Vec<_> = (1..=5).map(|i| request(&format!("c{i}"), BRIDGE_OPENED)).collect();
    engine.handle(check(checks).concurrency(2).into());
    assert_eq!(engine.load(), (2, 3));
    engine.handle(ToWorker::Cancel { id: "c4".into() });
    assert_eq!(engine.load(), (2, 2));
    let cancelled = finished(&recorded.posted.borrow());
    assert_eq!(cancelled.len(), 1);
    let Outcome::Failed { failure } = &cancelled[0].outcome else { panic!("a failure") };
    let failure: FailureView = serde_json::from_value(failure.clone()).unwrap();
    assert_eq!(failure.kind, "cancelled");
    assert_eq!(failure.spent.requests, 0);

    pool.run_until_stalled();
    assert_eq!(engine.load(), (0, 0));
    let posted = take(&recorded);
    assert_eq!(posted.iter().filter(|m| matches!(m, FromWorker::Queued { .. })).count(), 5);
    assert_eq!(max_in_flight(&posted), 2, "two ran at once, never more");
    let done = finished(&posted);
    assert_eq!(done.len(), 5);
    assert_eq!(done.iter().filter(|r| matches!(r.outcome, Outcome::Report { .. })).count(), 4);
    assert_eq!(recorded.results.borrow().len(), 5, "results saved");
    assert!(recorded.sessions.borrow().is_empty(), "finished sessions are deleted");
}

#[test]
fn a_running_check_is_cancelled_through_the_core() {
    let (engine, mut pool, recorded) = with_demo();
    // A claim the demo corpus supports: assessed, then summarised, so the check is still
    // running when the gate holds its second write. (An insufficient one ends after its first
    // assessment: the demo corpus is all in its evidence, so there is nothing to research.)
    engine.handle(check([request("c1", BRIDGE_OPENED)]).into());
    recorded.gate.close_after(1);
    pool.run_until_stalled();
    assert_eq!(engine.load(), (1, 0));
    engine.handle(ToWorker::Cancel { id: "c1".into() });
    recorded.gate.open();
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(failure["kind"], "cancelled");
    assert!(failure["message"].as_str().unwrap().contains("cancelled by the user"), "{failure}");
}

#[test]
fn an_offline_check_ends_with_a_report_and_its_cited_items() {
    let (engine, mut pool, recorded) = with_demo();
    take(&recorded);
    engine.handle_json(
        &json!({"type": "check", "checks": [{"id": "c1",
                 "claim": "The Golden Gate Bridge opened to pedestrians in 1937."}],
                "provider": {"kind": "offline"}, "concurrency": 1})
        .to_string(),
    );
    pool.run_until_stalled();
    let posted = take(&recorded);
    let events: Vec<EventView> = posted
        .iter()
        .filter_map(|m| match m {
            FromWorker::Progress { event, .. } => {
                Some(serde_json::from_value(event.clone()).unwrap())
            }
            _ => None,
        })
        .collect();
    assert!(
        events.iter().any(|e| matches!(e, EventView::Stage { stage, .. } if stage == "retrieve"))
    );
    assert!(events.iter().any(|e| matches!(e, EventView::ModelCall { .. })));
    assert!(events.iter().any(|e| matches!(e, EventView::ModelAnswered { .. })));
    assert!(!events.contains(&EventView::Other), "{events:?}");
    let result = &finished(&posted)[0];
    let Outcome::Report { report } = &result.outcome else { panic!("{result:?}") };
    let report: ReportView = serde_json::from_value(report.clone()).unwrap();
    assert_eq!(report.assessment.verdict, "supported");
    assert!(!report.assessment.citations.is_empty());
    assert!(!result.cited.is_empty());
    for item in &result.cited {
        assert!(report.assessment.citations.iter().any(|c| c.trim() == item.text.trim()));
        assert!(item.id.starts_with("demo#"));
    }
    // A malformed message is answered, not dropped.
    engine.handle_json("{\"type\": \"nonsense\"}");
    assert!(matches!(&take(&recorded)[..], [FromWorker::Error { .. }]));
}

#[test]
fn a_page_that_connects_mid_check_is_greeted_with_the_state_and_the_events_so_far() {
    // Another tab connecting to the one engine of the origin: it is shown what every page was.
    let (engine, mut pool, recorded) = with_demo();
    let checks: Vec<_> = (1..=3).map(|i| request(&format!("c{i}"), BRIDGE_OPENED)).collect();
    engine.handle(check(checks).into());
    recorded.gate.close_after(2);
    pool.run_until_stalled();
    assert_eq!(engine.load(), (1, 2));
    let before = take(&recorded);
    let progress = |posted: &[FromWorker]| -> Vec<serde_json::Value> {
        posted
            .iter()
            .filter_map(|m| match m {
                FromWorker::Progress { id, event } if id == "c1" => Some(event.clone()),
                _ => None,
            })
            .collect()
    };
    let so_far = progress(&before);
    assert!(!so_far.is_empty(), "the running check has posted events");

    engine.welcome();
    let greeting = take(&recorded);
    let FromWorker::Ready { corpus, results, resumed, queued } = &greeting[0] else {
        panic!("{greeting:?}")
    };
    assert_eq!(corpus.items, last_corpus(&before).items);
    assert!(results.is_empty());
    assert_eq!(resumed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["c1"]);
    assert_eq!(queued.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["c2", "c3"]);
    assert_eq!(progress(&greeting[1..]), so_far, "then the running check's events so far");
    assert_eq!(greeting.len(), 1 + so_far.len());

    recorded.gate.open();
    pool.run_until_stalled();
    assert_eq!(finished(&take(&recorded)).len(), 3);
    engine.welcome();
    let greeting = take(&recorded);
    assert!(
        matches!(&greeting[..], [FromWorker::Ready { results, resumed, queued, .. }]
        if results.len() == 3 && resumed.is_empty() && queued.is_empty()),
        "once they ended, only their results: {greeting:?}"
    );
}

#[test]
fn the_pages_provider_settings_are_made_the_cores_provider_here_or_fail_the_checks_saying_why() {
    let (engine, mut pool, recorded) = with_demo();
    let claim = BRIDGE_OPENED;
    // The Provider section as the page keeps it: llama.cpp's preset with no model name.
    let settings = |model: &str| ProviderChoice::Settings {
        settings: json!({"kind": "openAi", "preset": "llamacpp", "baseUrl": "http://127.0.0.1:9/v1",
                         "openaiModel": model, "constrained": true, "limits": ["", "", ""]}),
    };
    engine.handle(check([request("no-model", claim)]).provider(settings("")).into());
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(
        (&failure["kind"], &failure["message"]),
        (&json!("config"), &json!("Enter a model name."))
    );
    assert!(recorded.sent.borrow().is_empty(), "nothing was sent");
    // With a model the check runs with the core's provider JSON, sent to the base URL (the
    // tests' network then fails it), through the verifier route the local presets choose: its
    // first request is the Yes/No question about a passage, one token with its probabilities.
    engine.handle(check([request("model", claim)]).provider(settings("local")).into());
    pool.run_until_stalled();
    let sent = recorded.sent.borrow();
    assert!(!sent.is_empty(), "the check made a request");
    assert!(sent[0].url.starts_with("http://127.0.0.1:9/v1/chat/completions"), "{}", sent[0].url);
    let body: Value = serde_json::from_str(&sent[0].body).unwrap();
    assert_eq!((&body["logprobs"], &body["max_tokens"]), (&json!(true), &json!(1)), "{body}");
    assert!(body.to_string().contains("Is the claim supported by the document?"), "{body}");
    assert!(!body.to_string().contains("record_assessment"), "not the 3-way assessment: {body}");
    drop(sent);
    let done = finished(&take(&recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert_ne!(failure["kind"], "config", "it ran: {failure}");
}

/// A key never goes over plain HTTP off loopback: a check or a step whose provider would send
/// it so is refused before it starts (kind `config`, the reason named, nothing sent), judged by
/// the host's reading of the URL; loopback and https go ahead.
#[test]
fn a_key_over_plain_http_off_loopback_is_refused_before_anything_is_sent() {
    let (engine, mut pool, recorded) = with_demo();
    let claim = BRIDGE_OPENED;
    let keyed = |base_url: &str| ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": base_url, "model": "m", "stream": false,
                       "apiKey": "sk-secret"}),
    };
    for (id, base_url) in [("lan", "http://10.1.2.3/v1"), ("evil", "http://evil\\@127.0.0.1:9/v1")]
    {
        engine.handle(check([request(id, claim)]).provider(keyed(base_url)).into());
        pool.run_until_stalled();
        let done = finished(&take(&recorded));
        let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
        assert_eq!(failure["kind"], "config", "{failure}");
        let message = failure["message"].as_str().unwrap();
        assert!(message.contains("plain HTTP") && message.contains("loopback"), "{message}");
        assert!(!message.contains("sk-secret"), "{message}");
    }
    engine.handle(ToWorker::RunStep {
        id: "s1".into(),
        config: step_config(),
        provider: keyed("http://10.1.2.3/v1"),
    });
    pool.run_until_stalled();
    let Some(verity_messages::StepOutcome::Failed { failure }) = step_finished(&take(&recorded))
    else {
        panic!("a failure")
    };
    assert_eq!(failure["kind"], "config", "{failure}");
    assert!(recorded.sent.borrow().is_empty(), "nothing was sent");
    // Loopback over plain HTTP, and https anywhere, are sent (the tests' network then fails).
    for base_url in ["http://127.0.0.1:9/v1", "https://api.example/v1"] {
        engine.handle(ToWorker::RunStep {
            id: base_url.into(),
            config: step_config(),
            provider: keyed(base_url),
        });
        pool.run_until_stalled();
    }
    assert_eq!(recorded.sent.borrow().len(), 2);
}

/// A sentence of an answer whose check failed, as the core reports it.
fn failed_sentence() -> verity_core::answer::SentenceReport {
    serde_json::from_value(json!({"index": 2, "text": "It is tall.", "claim": "It is tall.",
        "span": {"start": 4, "end": 15, "startUtf16": 4, "endUtf16": 15}, "status": "failed",
        "failure": {"kind": "assess-prose", "message": "no call"}}))
    .unwrap()
}

#[test]
fn every_core_event_is_read_by_the_page_view() {
    let usage = Usage { input: 3, output: 4, cache_read: 1, cache_write: 0, cost: 0.5 };
    let cases = [
        Event::Stage { stage: ClaimStage::Retrieve { evidence: 5 } },
        Event::Stage { stage: ClaimStage::Research { turn: 2, of: 6 } },
        Event::Stage { stage: ClaimStage::Summary },
        Event::ModelCall { call: verity_core::CallId(3), retry: 1, delay_ms: 500 },
        Event::ModelAnswered {
            call: verity_core::CallId(3),
            stop_reason: StopReason::ToolUse,
            tool_calls: 1,
            usage,
            error: Some("HTTP 503".into()),
        },
        Event::ToolCall { call_id: "c".into(), tool: "lookup_evidence".into(), host: false },
        Event::ToolSettled {
            call_id: "c".into(),
            tool: "lookup_evidence".into(),
            is_error: true,
            host: false,
        },
        Event::Retry { attempt: 1, delay_ms: 700, message: "overloaded".into() },
        Event::Delta { call: verity_core::CallId(3), delta: Delta::Text { text: "hi".into() } },
        Event::SentenceStarted { index: 2 },
        Event::SentenceChecked { sentence: Box::new(failed_sentence()) },
    ];
    for event in cases {
        let json = serde_json::to_value(&event).unwrap();
        let view: EventView = serde_json::from_value(json.clone()).unwrap();
        assert_ne!(view, EventView::Other, "{json}");
        match (&event, &view) {
            (
                Event::Stage { stage: ClaimStage::Research { .. } },
                EventView::Stage { turn, of, .. },
            ) => {
                assert_eq!((*turn, *of), (Some(2), Some(6)));
            }
            (
                Event::ModelAnswered { .. },
                EventView::ModelAnswered { usage, error, stop_reason, .. },
            ) => {
                assert_eq!((usage.input, usage.cost, error.as_deref()), (3, 0.5, Some("HTTP 503")));
                assert_eq!(stop_reason, "toolUse");
            }
            (Event::Retry { .. }, EventView::Retry { delay_ms, .. }) => assert_eq!(*delay_ms, 700),
            (Event::SentenceChecked { .. }, EventView::SentenceChecked { sentence }) => {
                let failure = sentence.failure.as_ref().unwrap();
                assert_eq!((sentence.span.end_utf16, failure.kind.as_str()), (15, "assess-prose"));
                // The page's own reader reads it alike.
                assert_eq!(EventView::from_json(&json).unwrap(), view);
            }
            _ => {}
        }
    }
    let compacted = serde_json::to_value(Event::Compacted { dropped: 2 }).unwrap();
    assert_eq!(serde_json::from_value::<EventView>(compacted).unwrap(), EventView::Other);
}

fn claims_read(
    engine: &Engine<TestHost>,
    recorded: &Recorded,
    name: &str,
    text: &str,
) -> (Vec<String>, Vec<(usize, String)>, String) {
    engine.handle(ToWorker::ReadClaims { file: file(name, text) });
    let posted = take(recorded);
    let [FromWorker::Claims { file, claims, bad, message }] = posted.as_slice() else {
        panic!("{posted:?}")
    };
    assert_eq!(file, name);
    let bad = bad.iter().map(|bad| (bad.line, bad.message.clone())).collect();
    (claims.clone(), bad, message.clone())
}

/// Claims come from a file (`.txt` a claim per line, `.csv` with a `claim` column, `.jsonl`
/// with a `claim` field), read by the worker: the claims, and each bad line named by number.
#[test]
fn claims_are_read_from_a_file_with_the_bad_lines_named() {
    let (engine, _pool, recorded) = started();
    take(&recorded);
    let (claims, bad, message) =
        claims_read(&engine, &recorded, "claims.txt", "\u{feff} A.\r\n\n  B. \n");
    assert_eq!((claims, bad), (vec!["A.".to_owned(), "B.".to_owned()], vec![]));
    assert_eq!(message, "2 claims read from claims.txt.");
    let csv = "id,Claim\n1,The bridge is orange.\n2,\n3,\"A claim, with a comma\nand a line\"\n4\n";
    let (claims, bad, message) = claims_read(&engine, &recorded, "claims.CSV", csv);
    assert_eq!(claims, ["The bridge is orange.", "A claim, with a comma\nand a line"]);
    assert_eq!(
        bad,
        [(3, "the claim is empty".to_owned()), (6, "no claim column in this row".to_owned())]
    );
    assert_eq!(
        message,
        "2 claims read from claims.CSV; line 3: the claim is empty; line 6: no claim column in \
         this row."
    );
    let jsonl =
        "{\"claim\": \"A.\"}\nnot json\n{\"text\": \"B.\"}\n\n{\"claim\": 3}\n{\"claim\": \"C.\"}";
    let (claims, bad, _) = claims_read(&engine, &recorded, "c.jsonl", jsonl);
    assert_eq!(claims, ["A.", "C."]);
    let lines: Vec<usize> = bad.iter().map(|(line, _)| *line).collect();
    assert_eq!(lines, [2, 3, 5]);
    assert!(bad[0].1.starts_with("not JSON"), "{bad:?}");
    assert_eq!(bad[1].1, "no \"claim\" field");
    assert_eq!(bad[2].1, "\"claim\" is not text");
    // A CSV file without a claim column, and a file of another kind, read nothing, saying why.
    let (claims, bad, message) = claims_read(&engine, &recorded, "c.csv", "id,text\n1,A.\n");
    assert!(claims.is_empty());
    assert_eq!(bad, [(1, "no column named \"claim\" (the columns: id, text)".to_owned())]);
    assert!(message.starts_with("0 claims read from c.csv; line 1: no column"), "{message}");
    let (claims, _, message) = claims_read(&engine, &recorded, "c.pdf", "%PDF");
    assert!(claims.is_empty());
    assert!(message.contains(".txt, .csv or .jsonl"), "{message}");
    // A file of a million lines is read up to the cap, and the rest is named, not read.
    let (claims, _, message) =
        claims_read(&engine, &recorded, "big.txt", &"A claim.\n".repeat(1_000_000));
    assert_eq!(claims.len(), 1_000);
    assert!(message.contains("only the first 1,000 claims are read"), "{message}");
    assert!(message.contains("from line 1,001"), "{message}");
    // A claim that would show one thing and check another (a bidirectional override, an
    // invisible space or joiner, a control character) is refused, naming the character; the
    // joiners and marks that scripts need are kept.
    let text = "Paris is in France.\nThe tower is \u{202e}llat m 033\u{202c}.\nPa\u{200b}ris.\n\
                Tab\there.\nBell\u{7}.\nمی\u{200c}خواهم.\n";
    let (claims, bad, _) = claims_read(&engine, &recorded, "tricky.txt", text);
    assert_eq!(claims, ["Paris is in France.", "Tab\there.", "می\u{200c}خواهم."]);
    let lines: Vec<usize> = bad.iter().map(|(line, _)| *line).collect();
    assert_eq!(lines, [2, 3, 5], "{bad:?}");
    assert!(bad[0].1.contains("U+202E"), "{bad:?}");
    assert!(bad[1].1.contains("U+200B"), "{bad:?}");
    // Ten bad lines are named; the others are counted.
    let (_, bad, message) = claims_read(&engine, &recorded, "bad.jsonl", &"x\n".repeat(500));
    assert_eq!(bad.len(), 10);
    assert!(
        message.ends_with(
            "line 10: not JSON (expected value at line 1 column 1); and 490 more bad lines."
        ),
        "{message}"
    );
}

/// A whole answer (`kind: "answer"`): checked sentence by sentence offline over the demo
/// corpus, each sentence's end a progress event the page reads, the result the answer's
/// report with spans, statuses, located citations and the answer's own mark checked.
#[test]
fn an_answer_is_checked_sentence_by_sentence_with_its_spans_and_marks() {
    let (engine, mut pool, recorded) = with_demo();
    take(&recorded);
    let answer = "Sure! The Golden Gate Bridge opened to pedestrians in 1937 [demo#2]. \
                  Its towers rise 746 feet above the water.";
    engine.handle_json(
        &json!({"type": "check", "checks": [{"id": "a1", "claim": answer, "kind": "answer"}],
                "provider": {"kind": "offline"}, "concurrency": 1})
        .to_string(),
    );
    pool.run_until_stalled();
    let posted = take(&recorded);
    let checked: Vec<verity_messages::SentenceView> = posted
        .iter()
        .filter_map(|m| match m {
            FromWorker::Progress { event, .. } => match EventView::from_json(event).unwrap() {
                EventView::SentenceChecked { sentence } => Some(*sentence),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(checked.iter().map(|s| s.index).collect::<Vec<_>>(), [1, 2], "{posted:?}");
    let result = &finished(&posted)[0];
    assert_eq!(result.claim, answer, "the card keeps the answer");
    let Outcome::Report { report } = &result.outcome else { panic!("{result:?}") };
    let view = AnswerView::from_json(report).unwrap();
    let statuses: Vec<&str> = view.sentences.iter().map(|s| s.status.as_str()).collect();
    assert_eq!(statuses, ["not-checkable", "supported", "supported"], "{report}");
    for sentence in &view.sentences {
        let units: Vec<u16> = answer.encode_utf16().collect();
        let text = String::from_utf16(&units[sentence.span.start_utf16..sentence.span.end_utf16]);
        assert_eq!(text.unwrap(), sentence.text);
    }
    let mark = &view.sentences[1].marks[0];
    assert_eq!((mark.passage.as_deref(), mark.holds.as_str()), (Some("demo#2"), "supports"));
    let citation = &view.sentences[2].citations[0];
    assert_eq!(citation.passage.as_deref(), Some("demo#7"));
    assert_eq!(&citation.text[citation.span.start..citation.span.end], citation.quote);
    assert_eq!(view.faithful, Some(true));
    let cited: Vec<&str> = result.cited.iter().map(|item| item.id.as_str()).collect();
    assert!(cited.contains(&"demo#2") && cited.contains(&"demo#7"), "{cited:?}");
    assert!(recorded.sessions.borrow().is_empty(), "the answer's session is deleted at its end");

    // An answer the core cannot cut is the check's typed failure, said before anything is sent.
    engine.handle(check([CheckRequest::answer("a2", "   ")]).into());
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(failure["kind"], "config");
    assert!(failure["message"].as_str().unwrap().contains("the answer is empty"), "{failure}");
}

/// An answer checked with `decompose`: the request carries it to the core's answer job, and the
/// page reads each sentence's atomic claims (the offline baseline splits nothing: one claim, the
/// sentence) from the report, as serde reads them.
#[test]
fn an_answer_split_into_claims_reports_each_claim() {
    let (engine, mut pool, recorded) = with_demo();
    take(&recorded);
    let answer = "The Golden Gate Bridge opened to pedestrians in 1937. \
                  Its towers rise 746 feet above the water.";
    engine.handle_json(
        &json!({"type": "check", "checks": [{"id": "a1", "claim": answer, "kind": "answer",
                "decompose": true}], "provider": {"kind": "offline"}, "concurrency": 1})
        .to_string(),
    );
    pool.run_until_stalled();
    let result = &finished(&take(&recorded))[0];
    let Outcome::Report { report } = &result.outcome else { panic!("{result:?}") };
    let view = AnswerView::from_json(report).unwrap();
    assert_eq!(view, serde_json::from_value::<AnswerView>(report.clone()).unwrap());
    for sentence in &view.sentences {
        assert_eq!(sentence.claims.len(), 1, "{report}");
        assert_eq!(sentence.claims[0].text, sentence.text);
        assert_eq!(sentence.claims[0].status, sentence.status);
        assert!(sentence.decomposed.as_ref().is_some_and(|d| d.whole.is_none()), "{report}");
    }
    // A request a sentence to split it, and one to assess its one claim.
    assert_eq!(view.requests, 4, "{report}");
}

/// The `check` message's `concurrency` is also how many of an answer's sentences are asked
/// about at once: with 3, the first requests of all three sentences go out together (the
/// tests' network then fails them); with 1, one sentence at a time (its failure ends the
/// answer before the others are asked).
#[test]
fn an_answers_sentences_are_asked_about_as_many_at_once_as_the_run_allows() {
    // Words the demo corpus lacks, so that a request names only its own sentence.
    let answer = "The Quuxbridge opened in 2091. The Flimflam tower rises 900 feet. \
                  The Snorkelwater river is painted orange.";
    let provider = ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": "http://127.0.0.1:9/v1", "model": "m",
                       "stream": false}),
    };
    let sentences_asked = |concurrency: usize| {
        let (engine, mut pool, recorded) = with_demo();
        let checks = [CheckRequest::answer("a1", answer)];
        engine.handle(check(checks).provider(provider.clone()).concurrency(concurrency).into());
        pool.run_until_stalled();
        let sent = recorded.sent.borrow();
        ["Quuxbridge", "Flimflam", "Snorkelwater"]
            .into_iter()
            .filter(|words| sent.iter().any(|request| request.body.contains(words)))
            .count()
    };
    assert_eq!(sentences_asked(1), 1, "one sentence at a time");
    assert_eq!(sentences_asked(3), 3, "three sentences at once");
}
