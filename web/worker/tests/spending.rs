//! A run's spending limit: checked before each request, refused when no price can enforce it,
//! overshot by at most the requests in flight, and kept, with what was spent, over a reload.

use std::sync::Arc;

use serde_json::json;
use verity_core::indexed::IndexedCorpus;
use verity_messages::{CheckRequest, FromWorker, Outcome, ProviderChoice, ToWorker};
use verity_worker::{SessionMeta, Unfinished};

mod common;

use common::{
    BRIDGE_OPENED, Shared, check, completion, demo_answers, finished, max_in_flight, mock, reload,
    request, stop_after_first_response, take, with_demo,
};

/// A run's spending limit: before each request the engine adds up what the run has spent
/// (at the model's price, typed in the app's settings), and once the limit is reached the check
/// that would request ends `budget`, saying what was spent, and so does each check still queued,
/// with nothing sent.
#[test]
fn a_run_stops_at_its_spending_limit_before_the_next_request() {
    let (engine, mut pool, recorded) = with_demo();
    let corpus = engine.corpus();
    let claim = BRIDGE_OPENED;
    // Each response reads 10 tokens: at $100,000 a million input tokens, $1.00 a response.
    let settings = ProviderChoice::Settings {
        settings: json!({"kind": "openAi", "preset": "custom", "baseUrl": "https://mock.test/v1",
                         "openaiModel": "m", "apiKey": "k",
                         "prices": [["input m", "100000"]], "budget": "1.50"}),
    };
    let (assessment, summary) = demo_answers(&corpus);
    recorded.replies.borrow_mut().extend([assessment.clone(), summary, assessment]);
    take(&recorded);
    engine.handle(
        check([request("b1", claim), request("b2", claim), request("b3", claim)])
            .provider(settings)
            .into(),
    );
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let kinds: Vec<(&str, &serde_json::Value)> = done
        .iter()
        .map(|result| match &result.outcome {
            Outcome::Report { .. } => (result.id.as_str(), &serde_json::Value::Null),
            Outcome::Failed { failure } => (result.id.as_str(), &failure["kind"]),
        })
        .collect();
    // b1's summary is sent: the run had spent $1.00 of $1.50. Then $2.00: b2 and b3 end.
    assert_eq!(
        kinds,
        [("b1", &serde_json::Value::Null), ("b2", &json!("budget")), ("b3", &json!("budget"))]
    );
    assert_eq!(recorded.sent.borrow().len(), 2, "b2 and b3 sent nothing");
    let Outcome::Failed { failure } = &done[1].outcome else { panic!() };
    assert_eq!(
        failure["message"],
        "the run's spending limit of $1.50 was reached before this check's next request: the \
         run has spent $2.0000, this check $0.0000"
    );
    assert!(failure["advice"].as_str().unwrap().contains("Stop the run at $"), "{failure}");
    assert!(recorded.unfinished.borrow().budgets.is_empty(), "the run is over: its limit too");

    // Mid-check: a limit of $0.50 lets the assessment go ($0 spent), then stops the summary.
    recorded.replies.borrow_mut().clear();
    let assessment = completion(
        "a2",
        "record_assessment",
        &json!({"verdict": "supported", "confidence": 0.9,
                "citations": [corpus.corpus().passages()[0].text.clone()]}),
    );
    recorded.replies.borrow_mut().push_back(assessment);
    engine.handle(check([request("m1", claim)]).provider(mock().priced()).budget(0.5).into());
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(failure["kind"], "budget", "{failure}");
    assert_eq!(failure["spent"]["requests"], 1, "{failure}");
    assert!(failure["message"].as_str().unwrap().ends_with("this check $1.0000"), "{failure}");
    assert_eq!(recorded.sent.borrow().len(), 3, "only the assessment was sent");
    // A limit that is no amount refuses the run.
    engine.handle(check([request("z1", claim)]).budget(0.0).into());
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(failure["kind"], "config", "{failure}");
}

/// A limit the engine cannot enforce is refused before anything is sent: only a typed price
/// or a provider that reports what a response cost (OpenRouter) lets it add up spending; with
/// OpenAI or Anthropic and no price, every response would cost $0 and the limit stop nothing.
#[test]
fn a_spending_limit_without_a_price_is_refused_before_anything_is_sent() {
    let (engine, mut pool, recorded) = with_demo();
    let claim = BRIDGE_OPENED;
    let unpriced = [
        json!({"api": "openai", "baseUrl": "https://api.openai.com/v1", "model": "m", "apiKey": "k"}),
        json!({"api": "anthropic", "model": "claude", "apiKey": "k"}),
    ];
    for config in unpriced {
        take(&recorded);
        engine.handle(
            check([request("u1", claim), request("u2", claim)])
                .provider(ProviderChoice::Network { config: config.clone() })
                .budget(1.0)
                .into(),
        );
        pool.run_until_stalled();
        let done = finished(&take(&recorded));
        assert_eq!(done.len(), 2, "{config}");
        for result in &done {
            let Outcome::Failed { failure } = &result.outcome else { panic!("{result:?}") };
            assert_eq!(failure["kind"], "config", "{failure}");
            let message = failure["message"].as_str().unwrap();
            assert!(message.contains("price"), "names what is missing: {message}");
        }
        assert!(recorded.sent.borrow().is_empty(), "nothing sent for {config}");
    }
    // The app's settings with a limit and no price typed: refused the same way.
    let unpriced_settings = ProviderChoice::Settings {
        settings: json!({"kind": "openAi", "preset": "custom", "baseUrl": "https://mock.test/v1",
                         "openaiModel": "m", "apiKey": "k", "budget": "1.50"}),
    };
    engine.handle(check([request("s1", claim)]).provider(unpriced_settings).into());
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(failure["kind"], "config", "{failure}");
    assert!(recorded.sent.borrow().is_empty());
    // OpenRouter reports each response's cost, and the offline baseline spends nothing: both
    // run under a limit without a price.
    let (assessment, summary) = demo_answers(&engine.corpus());
    recorded.replies.borrow_mut().extend([assessment, summary]);
    for provider in [
        ProviderChoice::Network {
            config: json!({"api": "openai", "baseUrl": "https://openrouter.ai/api/v1",
                           "model": "m", "apiKey": "k", "stream": false}),
        },
        ProviderChoice::Offline,
    ] {
        engine.handle(check([request("r1", claim)]).provider(provider).budget(1.0).into());
        pool.run_until_stalled();
        let done = finished(&take(&recorded));
        assert!(matches!(done[0].outcome, Outcome::Report { .. }), "{done:?}");
    }
}

/// A page's concurrency is capped in the engine (at the app's largest choice), and under a
/// limit at that concurrency the run overshoots by at most one response per running check:
/// a request is sent only while the run has spent less than the limit, and those in flight
/// when it is reached were already paid for.
#[test]
fn concurrency_is_capped_and_a_limit_at_eight_overshoots_by_at_most_the_requests_in_flight() {
    let (engine, mut pool, recorded) = with_demo();
    let claim = BRIDGE_OPENED;
    let checks: Vec<_> = (0..20).map(|i| request(&format!("o{i}"), claim)).collect();
    engine.handle(check(checks).concurrency(1_000_000).into());
    assert_eq!(
        engine.load(),
        (verity_worker::MAX_CONCURRENCY, 20 - verity_worker::MAX_CONCURRENCY)
    );
    pool.run_until_stalled();
    take(&recorded);

    // $1.00 a response (10 tokens at $100,000 a million), a limit of $3.50, 8 at once.
    let (assessment, summary) = demo_answers(&engine.corpus());
    for _ in 0..40 {
        recorded.replies.borrow_mut().extend([assessment.clone(), summary.clone()]);
    }
    recorded.answer_later.set(true);
    let checks: Vec<_> = (0..20).map(|i| request(&format!("p{i}"), claim)).collect();
    engine.handle(check(checks).provider(mock().priced()).concurrency(8).budget(3.5).into());
    pool.run_until_stalled();
    let posted = take(&recorded);
    let done = finished(&posted);
    assert_eq!(done.len(), 20);
    let in_flight = max_in_flight(&posted);
    assert!((2..=8).contains(&in_flight), "{in_flight} ran at once");
    let sent = recorded.sent.borrow().len();
    // At most 3 responses had been paid for when the last request was let go ($3.00 < $3.50),
    // and at most 8 were in flight then.
    assert!((4..=3 + 8).contains(&sent), "{sent} requests");
    let budget_ended = done
        .iter()
        .filter(
            |r| matches!(&r.outcome, Outcome::Failed { failure } if failure["kind"] == "budget"),
        )
        .count();
    assert!(budget_ended >= 20 - sent, "every check past the limit ends budget: {budget_ended}");
}

/// A run of two checks (`r1`, `r2`) under a $1.50 limit at $1.00 a response, stopped after
/// `r1`'s first response, as a reload leaves it.
struct Interrupted {
    corpus: Arc<IndexedCorpus>,
    meta: SessionMeta,
    /// `r1`'s session log.
    log: verity_core::Log,
    unfinished: Unfinished,
    assessment: String,
    summary: String,
}

fn interrupted_limited_run() -> Interrupted {
    let provider = mock().priced();
    let (engine, mut pool, recorded) = with_demo();
    let corpus = engine.corpus();
    let (assessment, summary) = demo_answers(&corpus);
    recorded.replies.borrow_mut().extend([assessment.clone(), summary.clone()]);
    engine.handle(
        check([request("r1", BRIDGE_OPENED), request("r2", BRIDGE_OPENED)])
            .provider(provider)
            .budget(1.5)
            .into(),
    );
    let (meta, store) = stop_after_first_response(&recorded, &mut pool, "r1");
    let unfinished = recorded.unfinished.borrow().clone();
    Interrupted { corpus, meta, log: store.0.log(), unfinished, assessment, summary }
}

/// A run's limit outlives a reload: it is saved with the unfinished checks, and what a resumed
/// check had spent (its recorded responses) still counts.
#[test]
fn a_runs_spending_limit_and_what_it_spent_survive_a_reload() {
    let Interrupted { corpus, meta, log, unfinished, assessment, summary } =
        interrupted_limited_run();
    assert_eq!(unfinished.budgets.len(), 1, "{unfinished:?}");
    assert_eq!((unfinished.budgets[0].limit, unfinished.budgets[0].ended), (1.5, 0.0));
    assert!(unfinished.checks.iter().all(|meta| meta.run.as_deref() == Some("r1")));

    let (_engine, mut pool, after) = reload()
        .items(corpus.corpus().passages().to_vec())
        .session(meta, Shared::from_log(log))
        .unfinished(unfinished)
        .replies([summary, assessment])
        .start();
    pool.run_until_stalled();
    let done = finished(&take(&after));
    let kinds: Vec<_> = done
        .iter()
        .map(|result| match &result.outcome {
            Outcome::Report { .. } => (result.id.as_str(), "report".to_owned()),
            Outcome::Failed { failure } => (result.id.as_str(), failure["kind"].to_string()),
        })
        .collect();
    // r1 had spent $1.00 of $1.50: its summary goes ($2.00); r2 then ends without a request.
    assert_eq!(kinds, [("r1", "report".to_owned()), ("r2", "\"budget\"".to_owned())]);
    assert_eq!(after.sent.borrow().len(), 1, "only r1's summary was sent after the reload");
}

/// What a run spent is saved with the result of the check that spent it, in one write: a tab
/// that dies right after a check's result is saved does not lose that check's spending, so
/// after a reload the run's next check does not spend past the limit. (The spending was saved
/// by a second write, after the result: lost with the tab, the run restarted at $0.)
#[test]
fn a_checks_spending_is_saved_with_its_result() {
    let provider = mock().priced();
    let (engine, mut pool, recorded) = with_demo();
    let corpus = engine.corpus();
    let (assessment, summary) = demo_answers(&corpus);
    recorded.replies.borrow_mut().extend([assessment.clone(), summary.clone()]);
    recorded.crash_after_first_result.set(true);
    engine.handle(
        check([request("r1", BRIDGE_OPENED), request("r2", BRIDGE_OPENED)])
            .provider(provider)
            .budget(1.5)
            .into(),
    );
    pool.run_until_stalled();
    // What storage holds when the tab died: r1's result and whatever was written with it.
    let results = recorded.results.borrow().clone();
    assert_eq!(results.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["r1"]);
    let unfinished = recorded.unfinished.borrow().clone();

    let (_engine, mut pool, after) = reload()
        .items(corpus.corpus().passages().to_vec())
        .results(results)
        .unfinished(unfinished)
        .replies([assessment, summary])
        .start();
    pool.run_until_stalled();
    assert_eq!(after.sent.borrow().len(), 0, "r1 spent $2.00 of $1.50: r2 sends nothing");
    let done = finished(&take(&after));
    assert!(
        done.iter().any(|result| result.id == "r2"
            && matches!(&result.outcome, Outcome::Failed { failure } if failure["kind"] == "budget")),
        "{done:?}"
    );
}

/// A run whose saved spending limit cannot be read does not run unlimited after a reload:
/// its checks (the one with a session and the queued one) wait, shown, like checks whose
/// session cannot be read, and nothing is sent; a cancel ends them.
#[test]
fn checks_whose_saved_limit_cannot_be_read_wait_and_send_nothing() {
    let Interrupted { corpus, meta, log, unfinished, assessment, summary } =
        interrupted_limited_run();

    // The saved limit is damaged: the record reader skips it and names it.
    let mut saved = serde_json::to_value(&unfinished).unwrap();
    saved["budgets"][0]["limit"] = json!("a lot");
    let (unfinished, unreadable) =
        verity_worker::records::read_unfinished(Some(Some(&saved.to_string())));
    assert!(unfinished.budgets.is_empty() && unreadable.len() == 1, "{unreadable:?}");

    let (engine, mut pool, after) = reload()
        .items(corpus.corpus().passages().to_vec())
        .session(meta, Shared::from_log(log))
        .unfinished(unfinished)
        .unreadable(unreadable)
        .replies([summary, assessment.clone(), assessment])
        .start();
    pool.run_until_stalled();
    let posted = take(&after);
    assert!(finished(&posted).is_empty(), "nothing ends: {posted:?}");
    assert!(after.sent.borrow().is_empty(), "nothing is sent without the run's limit");
    let notice = posted
        .iter()
        .filter_map(|m| match m {
            FromWorker::Error { message } => Some(message.as_str()),
            _ => None,
        })
        .find(|message| message.contains("rather than run without it"))
        .expect("the person is told");
    assert!(notice.contains("r1") || notice.contains(BRIDGE_OPENED), "{notice}");
    assert_eq!(engine.load(), (0, 0), "neither runs nor is queued");
    for id in ["r1", "r2"] {
        engine.handle(ToWorker::Cancel { id: id.into() });
    }
    pool.run_until_stalled();
    let done = finished(&take(&after));
    assert_eq!(done.len(), 2, "a cancel ends each: {done:?}");
    assert!(after.sent.borrow().is_empty());
}

/// A run of a thousand claims (the most a claims file gives) whose limit is reached at its
/// first check: the other 999 end `budget` at once, with nothing sent, each saved.
#[test]
fn a_thousand_queued_checks_end_at_the_limit_without_a_request() {
    let (engine, mut pool, recorded) = with_demo();
    let (assessment, _) = demo_answers(&engine.corpus());
    recorded.replies.borrow_mut().push_back(assessment);
    let checks: Vec<CheckRequest> =
        (0..1000).map(|n| request(&format!("t{n}"), "The bridge opened in 1937.")).collect();
    engine.handle(check(checks).provider(mock().priced()).budget(0.5).into());
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    assert_eq!(done.len(), 1000);
    assert!(done.iter().all(|result| matches!(&result.outcome,
        Outcome::Failed { failure } if failure["kind"] == "budget")));
    assert_eq!(recorded.sent.borrow().len(), 1, "only the first check's assessment");
    assert_eq!(recorded.results.borrow().len(), 1000);
    assert!(recorded.unfinished.borrow().checks.is_empty());
    assert!(recorded.unfinished.borrow().budgets.is_empty());
}
