//! Resume after a reload: a running check goes on from its durable session, queued ones are
//! queued again, keyed ones wait for the page's key, and none is paid for twice, lost, or
//! started over a record it cannot read.

use std::rc::Rc;
use std::sync::Arc;

use serde_json::json;
use verity_core::Store;
use verity_messages::{FailureView, FromWorker, Item, Outcome, ProviderChoice, ToWorker};
use verity_worker::records::Unreadable;
use verity_worker::{SessionMeta, Unfinished};

mod common;

use common::{
    BRIDGE_OPENED, Gate, Shared, check, demo_answers, failed_result, finished, max_in_flight, mock,
    reload, request, stop_after_first_response, take, with_demo,
};

#[test]
fn a_reload_mid_check_resumes_from_the_stored_session() {
    let claim = "The main span of the Golden Gate Bridge is 3,000 feet long.";
    // The uninterrupted run, for comparison.
    let (engine, mut pool, recorded) = with_demo();
    engine.handle(check([request("c1", claim)]).into());
    pool.run_until_stalled();
    let whole = finished(&take(&recorded)).remove(0);

    // Interrupted after a few steps: the page went away.
    let (engine, mut pool, recorded) = with_demo();
    engine.handle(check([request("c1", claim)]).into());
    recorded.gate.close_after(2);
    pool.run_until_stalled();
    assert!(finished(&recorded.posted.borrow()).is_empty(), "still running");
    let (meta, store) = recorded.sessions.borrow().get("c1").cloned().unwrap();
    let stored_log = store.0.log();
    assert!(stored_log.entries().len() >= 2, "{}", stored_log.to_jsonl());
    let responses_before = stored_log.to_jsonl().matches("\"type\":\"response\"").count();
    drop((engine, pool));

    let store = Shared::from_log(stored_log);
    let (_engine, mut pool, recorded_after) =
        reload().items(recorded.corpus.borrow().clone()).session(meta, store.clone()).start();
    pool.run_until_stalled();
    let posted = take(&recorded_after);
    assert!(matches!(&posted[0], FromWorker::Ready { resumed, .. } if resumed.len() == 1
        && resumed[0].id == "c1"));
    let resumed = finished(&posted).remove(0);
    assert_eq!(resumed.outcome, whole.outcome, "the same report as without the reload");
    assert_eq!(resumed.cited, whole.cited);
    let Outcome::Report { report } = &resumed.outcome else { panic!() };
    let requests = report["requests"].as_u64().unwrap() as usize;
    // The store holds each response once: the resumed run asked only for the missing ones.
    let log = store.0.log().to_jsonl();
    assert_eq!(log.matches("\"type\":\"response\"").count(), requests, "{log}");
    assert!(responses_before >= 1);
}

fn ids(checks: &[SessionMeta]) -> Vec<&str> {
    checks.iter().map(|meta| meta.check.id.as_str()).collect()
}

/// Checks queued behind a running one outlive a reload: the running one resumes from its
/// session, the others are queued again (reported in `Ready`, in order), and every check ends
/// with a report, still one at a time.
#[test]
fn a_reload_loses_no_queued_check() {
    let claims = [
        "The Golden Gate Bridge opened to pedestrians in 1937.",
        "The main span of the Golden Gate Bridge is 3,000 feet long.",
        "Construction of the Golden Gate Bridge began in 1933.",
        "The Golden Gate Bridge is painted international orange.",
    ];
    let (engine, mut pool, recorded) = with_demo();
    let checks = claims.iter().enumerate().map(|(i, c)| request(&format!("q{}", i + 1), c));
    engine.handle(check(checks).into());
    recorded.gate.close_after(2);
    pool.run_until_stalled();
    assert_eq!(engine.load(), (1, 3), "one runs, three wait");
    let unfinished = recorded.unfinished.borrow().clone();
    assert_eq!(unfinished.concurrency, 1);
    assert_eq!(ids(&unfinished.checks), ["q1", "q2", "q3", "q4"]);
    let sessions: Vec<_> = recorded.sessions.borrow().values().cloned().collect();
    assert_eq!(sessions.len(), 1, "only the running check has a session");
    let (meta, store) = sessions.into_iter().next().unwrap();
    assert_eq!(meta.check.id, "q1");
    let log = store.0.log();
    drop((engine, pool));

    let (_engine, mut pool, after) = reload()
        .items(recorded.corpus.borrow().clone())
        .results(recorded.results.borrow().clone())
        .session(meta, Shared::from_log(log))
        .unfinished(unfinished)
        .start();
    pool.run_until_stalled();
    let posted = take(&after);
    let FromWorker::Ready { resumed, queued, .. } = &posted[0] else { panic!("{posted:?}") };
    assert_eq!(resumed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["q1"]);
    assert_eq!(queued.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["q2", "q3", "q4"]);
    assert_eq!(queued[2].claim, claims[3]);
    let done = finished(&posted);
    assert_eq!(done.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["q1", "q2", "q3", "q4"]);
    assert!(done.iter().all(|r| matches!(r.outcome, Outcome::Report { .. })), "{done:?}");
    assert_eq!(max_in_flight(&posted), 1, "still one at a time");
    assert!(after.unfinished.borrow().checks.is_empty(), "none left unfinished");
    assert_eq!(after.results.borrow().len(), 4, "every result saved");
    assert!(after.sessions.borrow().is_empty());
}

/// A keyed check queued again after a reload waits, with every other queued check, for the
/// page's key; one cancelled meanwhile ends at once, having spent nothing.
#[test]
fn a_keyed_queued_check_waits_for_the_pages_key_after_a_reload() {
    let provider = |key: &str| ProviderChoice::from(mock().key(key));
    let claim = BRIDGE_OPENED;
    let (engine, _pool, _recorded) = with_demo();
    let corpus = engine.corpus();
    let unfinished = Unfinished {
        concurrency: 1,
        checks: vec![
            SessionMeta::new(&request("k1", claim), &provider("sk-remembered")),
            SessionMeta::new(&request("o1", claim), &ProviderChoice::Offline),
            SessionMeta::new(&request("k2", claim), &provider("sk-remembered")),
        ],
        budgets: Vec::new(),
    };
    assert!(!serde_json::to_string(&unfinished).unwrap().contains("sk-remembered"));

    let (assessment, summary) = demo_answers(&corpus);
    let (engine, mut pool, recorded) = reload()
        .items(corpus.corpus().passages().to_vec())
        .unfinished(unfinished)
        .replies([assessment, summary])
        .start();
    pool.run_until_stalled();
    let posted = take(&recorded);
    assert!(
        matches!(&posted[0], FromWorker::Ready { queued, .. } if queued.len() == 3),
        "{posted:?}"
    );
    assert!(finished(&posted).is_empty(), "nothing starts before the page's key");
    assert_eq!(engine.load(), (0, 0), "the offline check waits too, to keep its place");
    engine.handle(ToWorker::Cancel { id: "k2".into() });
    let done = finished(&take(&recorded));
    assert_eq!(done.len(), 1);
    assert_eq!(
        done[0].outcome,
        Outcome::Failed {
            failure: json!({"kind": "cancelled", "message": "cancelled by the user before it started",
                        "spent": serde_json::to_value(verity_core::Spent::default()).unwrap(),
                        "advice": "The check was cancelled. Re-run it when you like."}),
        }
    );
    engine.handle(ToWorker::Credentials { provider: Some(provider("sk-remembered")) });
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    assert_eq!(done.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["k1", "o1"]);
    assert!(done.iter().all(|r| matches!(r.outcome, Outcome::Report { .. })), "{done:?}");
    let sent = recorded.sent.borrow();
    assert_eq!(sent.len(), 2, "k1's assessment and summary");
    assert!(sent.iter().all(|request| request.headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case("authorization") && value == "Bearer sk-remembered"
    })));
    assert!(recorded.unfinished.borrow().checks.is_empty());
}

#[test]
fn a_stored_provider_has_no_credentials_and_a_resume_without_them_is_cancelled() {
    let provider = ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": "https://api.example/v1?api-version=2&key=q-secret",
                       "model": "m", "apiKey": "sk-secret",
                       "headers": [["Authorization", "Bearer x"], ["X-Goog-Api-Key", "g-secret"],
                                   ["Cookie", "c-secret"], ["X-Title", "My page"]]}),
    };
    let meta = SessionMeta::new(&request("c9", "A claim."), &provider);
    let stored = serde_json::to_string(&meta).unwrap();
    // Keys travel under many header names and in the query: only what is known to be public
    // is kept.
    for secret in ["sk-secret", "Bearer", "g-secret", "c-secret", "q-secret"] {
        assert!(!stored.contains(secret), "{secret} in {stored}");
    }
    assert!(stored.contains("X-Title") && stored.contains("api-version=2"), "{stored}");
    assert!(meta.credentials_removed);
    let query_only = ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": "https://api.example/v1?key=q", "model": "m"}),
    };
    assert!(SessionMeta::new(&request("c8", "A claim."), &query_only).credentials_removed);

    // A session of a network check, interrupted before its first request.
    let (engine, mut pool, _recorded) = with_demo();
    let corpus = engine.corpus();
    let config = json!({"kind": "claim", "claim": "A claim.", "corpus": corpus.id().as_str()});
    let job = verity_core::Job::from_json(&config.to_string(), &[Arc::clone(&corpus)]).unwrap();
    let store = Shared::default();
    let mut session = verity_core::Session::start(job).unwrap();
    pool.run_until(session.sync(&store)).unwrap();
    drop((engine, pool));

    let (engine, mut pool, recorded) =
        reload().items(corpus.corpus().passages().to_vec()).session(meta, store).start();
    pool.run_until_stalled();
    let posted = take(&recorded);
    assert!(
        posted.iter().any(|m| matches!(m, FromWorker::Ready { resumed, .. } if resumed.len() == 1)),
        "{posted:?}"
    );
    assert!(finished(&posted).is_empty(), "it waits for the page's credentials");
    // The page has no key (not remembered): the check ends, saying why.
    engine.handle_json(r#"{"type": "credentials"}"#);
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let failure: FailureView = match &done[0].outcome {
        Outcome::Failed { failure } => serde_json::from_value(failure.clone()).unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!(failure.kind, "cancelled");
    assert!(failure.message.contains("API key"), "{}", failure.message);
    assert!(recorded.requests.borrow().is_empty());
}

/// A keyed check interrupted by a reload resumes with the key the page remembered: the
/// response recorded before the reload is not requested again.
#[test]
fn a_keyed_check_resumes_with_the_remembered_key_without_paying_twice() {
    let provider = || ProviderChoice::from(mock().key("sk-remembered"));
    let claim = BRIDGE_OPENED;
    let (engine, mut pool, recorded) = with_demo();
    let corpus = engine.corpus();
    let (assessment, summary) = demo_answers(&corpus);
    recorded.replies.borrow_mut().extend([assessment, summary.clone()]);
    engine.handle(check([request("k1", claim)]).provider(provider()).into());
    // The page goes away once the assessment's response is stored.
    let (meta, store) = stop_after_first_response(&recorded, &mut pool, "k1");
    assert!(!serde_json::to_string(&meta).unwrap().contains("sk-remembered"));
    let log = store.0.log();
    drop((engine, pool));

    let (engine, mut pool, recorded_after) = reload()
        .items(corpus.corpus().passages().to_vec())
        .session(meta, Shared::from_log(log))
        .replies([summary])
        .start();
    engine.handle(ToWorker::Credentials { provider: Some(provider()) });
    pool.run_until_stalled();
    let done = finished(&take(&recorded_after));
    let Outcome::Report { report } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(report["assessment"]["verdict"], "supported");
    assert_eq!(report["summary"], "The bridge opened in 1937.");
    let sent = recorded_after.sent.borrow();
    assert_eq!(sent.len(), 1, "only the summary was requested after the reload");
    assert!(
        sent[0].headers.iter().any(|(name, value)| name.eq_ignore_ascii_case("authorization")
            && value == "Bearer sk-remembered"),
        "{:?}",
        sent[0].headers
    );
}

#[test]
fn a_check_taken_over_by_another_engine_saves_nothing_and_keeps_its_session() {
    // Two engines over one storage (tabs that do not share one): the second resumes the
    // check and takes its lease; the first, fenced, must not delete the new owner's session
    // nor save a result over the new owner's.
    let claim = "The main span of the Golden Gate Bridge is 3,000 feet long.";
    let (engine, mut pool, recorded) = with_demo();
    engine.handle(check([request("c1", claim)]).into());
    recorded.gate.close_after(1);
    pool.run_until_stalled();
    let (meta, store) = recorded.sessions.borrow().get("c1").cloned().unwrap();
    drop((engine, pool));

    // The first engine resumes it (taking the lease), and is paused mid-check.
    let gate = Rc::new(Gate::default());
    let shared = Shared(Rc::clone(&store.0), Rc::clone(&gate));
    gate.close_after(0);
    let (first, mut first_pool, first_recorded) =
        reload().items(recorded.corpus.borrow().clone()).session(meta.clone(), shared).start();
    first_pool.run_until_stalled();
    assert_eq!(first.load(), (1, 0));
    // Another engine takes the session over.
    pollster::block_on(store.0.take_lease("worker")).unwrap();
    gate.open();
    first_pool.run_until_stalled();
    let done = finished(&take(&first_recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert!(failure["message"].as_str().unwrap().contains("taken over"), "{failure}");
    assert_eq!(first.load(), (0, 0));
    assert!(first_recorded.ended.borrow().is_empty(), "the new owner's session is kept");
    assert!(first_recorded.results.borrow().is_empty(), "no result saved over the owner's");
    assert!(!store.0.log().entries().is_empty(), "the session's log is intact");
}

/// A finished check's result is saved and its session deleted in one write (one IndexedDB
/// transaction in the browser): a tab closed between two writes would either lose the result
/// with its session gone, or find the session of a finished check and run it again, paying
/// twice. Both for a check that ran to its end and for one whose stored session cannot resume.
#[test]
fn a_result_is_saved_and_its_session_deleted_in_one_write() {
    let claim = "The main span of the Golden Gate Bridge is 3,000 feet long.";
    let (engine, mut pool, recorded) = with_demo();
    engine.handle(check([request("c1", claim)]).into());
    pool.run_until_stalled();
    assert_eq!(finished(&take(&recorded)).len(), 1);
    assert_eq!(*recorded.writes.borrow(), ["result c1 and end c1"]);

    // A session that cannot resume (its corpus is gone) waits for it; cancelled by the person,
    // it ends with a result, in one write too.
    let (engine, mut pool, recorded) = with_demo();
    engine.handle(check([request("c2", claim)]).into());
    recorded.gate.close_after(2);
    pool.run_until_stalled();
    let (meta, store) = recorded.sessions.borrow().get("c2").cloned().unwrap();
    drop((engine, pool));
    let (engine, mut pool, after) = reload().session(meta, Shared::from_log(store.0.log())).start();
    pool.run_until_stalled();
    let posted = take(&after);
    assert!(finished(&posted).is_empty(), "{posted:?}");
    assert!(after.writes.borrow().is_empty());
    engine.handle(ToWorker::Cancel { id: "c2".into() });
    let done = finished(&take(&after));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert!(failure["message"].as_str().unwrap().contains("waited to resume"), "{failure}");
    assert_eq!(*after.writes.borrow(), ["result c2 and end c2"]);
}

/// Records that could not be read at start are named to the page in one notice after `Ready`;
/// what could be read is restored.
#[test]
fn unreadable_records_are_named_after_ready_and_the_rest_restored() {
    let kept = failed_result("r1", "A claim.", "cancelled", "m");
    let (_engine, _pool, recorded) = reload()
        .results(vec![kept])
        .unreadable(vec![
            Unreadable {
                record: "result r3".into(),
                why: "EOF while parsing".into(),
                session_of: None,
            },
            Unreadable {
                record: "the corpus".into(),
                why: "it is not text".into(),
                session_of: None,
            },
        ])
        .start();
    let posted = take(&recorded);
    assert!(matches!(&posted[0], FromWorker::Ready { results, .. } if results.len() == 1));
    let [_, FromWorker::Error { message }] = &posted[..] else { panic!("{posted:?}") };
    assert!(message.contains("result r3 (EOF while parsing)"), "{message}");
    assert!(message.contains("the corpus (it is not text)"), "{message}");
    assert!(message.contains("everything else was restored"), "{message}");
}

/// A check a reload interrupted, whose corpus changed meanwhile, is not thrown away: its
/// session (what the model answered) is kept, the person is told why it cannot resume, and it
/// resumes where it stopped once the corpus is as it was, paying for nothing twice.
#[test]
fn a_check_whose_corpus_changed_during_a_reload_waits_for_it_and_loses_nothing() {
    let claim = BRIDGE_OPENED;
    let (engine, mut pool, recorded) = with_demo();
    let corpus = engine.corpus();
    let (assessment, summary) = demo_answers(&corpus);
    recorded.replies.borrow_mut().push_back(assessment);
    engine.handle(check([request("w1", claim)]).provider(mock()).into());
    let (meta, store) = stop_after_first_response(&recorded, &mut pool, "w1");
    let unfinished = recorded.unfinished.borrow().clone();
    let log = store.0.log();
    drop((engine, pool));

    // Reloaded with the corpus's last item removed (another tab removed it, say).
    let mut items = corpus.corpus().passages().to_vec();
    let removed = items.pop().unwrap();
    let (engine, mut pool, after) =
        reload().items(items).session(meta, Shared::from_log(log)).unfinished(unfinished).start();
    pool.run_until_stalled();
    let posted = take(&after);
    assert!(finished(&posted).is_empty(), "not thrown away: {posted:?}");
    let Some(FromWorker::Ready { queued, .. }) = posted.first() else { panic!("{posted:?}") };
    assert_eq!(queued, &[request("w1", claim)], "shown as waiting");
    let told = posted.iter().find_map(|message| match message {
        FromWorker::Error { message } => Some(message.clone()),
        _ => None,
    });
    assert_eq!(
        told.as_deref(),
        Some(
            "This check was interrupted by a reload, and the corpus has changed since it \
             started, so it cannot resume over it: \u{201c}The Golden Gate Bridge opened to \
             pedestrians in 1937.\u{201d}. What it had received from the model is kept. Put the \
             corpus back as it was (add the removed items again, or remove the added ones) and \
             it will resume where it stopped; or cancel it."
        )
    );
    assert!(after.ended.borrow().is_empty(), "its session is kept");
    assert_eq!(after.unfinished.borrow().checks.len(), 1, "and it stays unfinished");
    // A page that connects now sees it too.
    engine.welcome();
    let greeted = take(&after);
    assert!(matches!(&greeted[0], FromWorker::Ready { queued, .. } if queued.len() == 1));

    // The item is back: the check resumes and only its summary is requested.
    after.replies.borrow_mut().push_back(summary);
    engine.handle(ToWorker::AddItems {
        items: vec![Item { id: removed.id.clone(), text: removed.text.clone() }],
    });
    pool.run_until_stalled();
    let done = finished(&take(&after));
    let Outcome::Report { report } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(report["summary"], "The bridge opened in 1937.");
    assert_eq!(after.sent.borrow().len(), 1, "the assessment was not paid for twice");
}

/// An unfinished check whose session record cannot be read (another version's, or damaged) is
/// not started over, which would write over its record and pay again: it waits, shown, and
/// the person is told; cancelled, it ends and its record goes in one write.
#[test]
fn a_check_whose_session_cannot_be_read_is_kept_not_started_over() {
    let claim = BRIDGE_OPENED;
    let (engine, mut pool, recorded) = reload()
        .unfinished(Unfinished {
            concurrency: 1,
            checks: vec![SessionMeta::new(&request("u1", claim), &mock().into())],
            budgets: Vec::new(),
        })
        .unreadable(vec![Unreadable {
            record: "the session of check u1".into(),
            why: "unknown variant `v9`".into(),
            session_of: Some("u1".into()),
        }])
        .start();
    pool.run_until_stalled();
    let posted = take(&recorded);
    let Some(FromWorker::Ready { queued, .. }) = posted.first() else { panic!("{posted:?}") };
    assert_eq!(queued, &[request("u1", claim)]);
    assert!(
        posted.iter().any(|message| matches!(message, FromWorker::Error { message }
            if message.contains("kept as they are rather than started over"))),
        "{posted:?}"
    );
    assert!(recorded.sessions.borrow().is_empty(), "no new session over its record");
    assert!(recorded.sent.borrow().is_empty(), "nothing paid again");
    assert_eq!(recorded.unfinished.borrow().checks.len(), 1, "still unfinished");
    engine.handle(ToWorker::Cancel { id: "u1".into() });
    let done = finished(&take(&recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(failure["kind"], "cancelled");
    assert_eq!(*recorded.writes.borrow(), ["result u1 and end u1"]);
}
