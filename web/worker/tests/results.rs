//! Results: saved, forgotten and cleared for every page; each failure with its advice and
//! each result with its provenance (never the key); exported as Markdown and CSV by the worker.

use serde_json::json;
use verity_messages::{CheckResult, FailureView, FromWorker, Outcome, ProviderChoice, ToWorker};

mod common;

use common::{
    BRIDGE_OPENED, check, failed_result, finished, last_corpus, reload, request, started, take,
    with_demo,
};

/// A re-run's old result is forgotten, so it does not come back after a reload.
#[test]
fn a_forgotten_result_is_not_restored() {
    let (engine, mut pool, recorded) = with_demo();
    for id in ["c1", "c2"] {
        engine.handle(check([request(id, BRIDGE_OPENED)]).into());
    }
    pool.run_until_stalled();
    assert_eq!(recorded.results.borrow().len(), 2);
    engine.handle_json(r#"{"type": "forgetResult", "id": "c1"}"#);
    engine.handle(ToWorker::ForgetResult { id: "unknown".into() });
    let kept: Vec<String> = recorded.results.borrow().iter().map(|r| r.id.clone()).collect();
    assert_eq!(kept, ["c2"]);
    let (_engine, _pool, after) = reload().results(recorded.results.borrow().clone()).start();
    let posted = take(&after);
    assert!(matches!(&posted[0], FromWorker::Ready { results, .. }
        if results.len() == 1 && results[0].id == "c2"));
}

/// Clearing the results, from any page, is told to every page, so no tab keeps showing results
/// that are gone.
#[test]
fn clearing_the_results_is_told_to_every_page() {
    let (engine, mut pool, recorded) = with_demo();
    engine.handle(check([request("c1", BRIDGE_OPENED)]).into());
    pool.run_until_stalled();
    assert_eq!(finished(&take(&recorded)).len(), 1);
    engine.handle(ToWorker::ClearResults);
    let posted = take(&recorded);
    assert!(posted.contains(&FromWorker::ResultsCleared), "{posted:?}");
    assert!(recorded.results.borrow().is_empty());
}

/// A failed result carries what to do about it (`advice`, the words for its kind), written by
/// the worker, so the page shows it without carrying the words: in `Finished`, in what is
/// saved, and in the results restored at start (saved before results carried it).
#[test]
fn a_failed_result_carries_its_advice_from_the_worker() {
    let (engine, mut pool, recorded) = with_demo();
    engine.handle(check([request("c1", "A claim."), request("c2", "Another claim.")]).into());
    engine.handle(ToWorker::Cancel { id: "c2".into() });
    pool.run_until_stalled();
    let cancelled = finished(&take(&recorded)).into_iter().find(|r| r.id == "c2").unwrap();
    let Outcome::Failed { failure } = &cancelled.outcome else { panic!("{cancelled:?}") };
    let advice = "The check was cancelled. Re-run it when you like.";
    assert_eq!(failure["advice"], advice);
    let saved = recorded.results.borrow().iter().find(|r| r.id == "c2").cloned().unwrap();
    assert_eq!(saved, cancelled);

    let older = failed_result("c3", "A claim.", "no-new-evidence", "m");
    let (_engine, _pool, after) = reload().results(vec![older]).start();
    let posted = take(&after);
    let FromWorker::Ready { results, .. } = &posted[0] else { panic!("{posted:?}") };
    let Outcome::Failed { failure } = &results[0].outcome else { panic!("{results:?}") };
    assert!(failure["advice"].as_str().unwrap().starts_with("The corpus has nothing more"));
    let view: FailureView = serde_json::from_value(failure.clone()).unwrap();
    assert_eq!(view.advice, failure["advice"].as_str().unwrap());
}

/// Every result says where it came from: the provider's kind and base URL (never its key, nor
/// credentials in the URL), the model, the corpus by content id and size, the app's version
/// and the date by the host's clock; the exports carry it.
#[test]
fn every_result_records_its_provenance_without_the_key() {
    let (engine, mut pool, recorded) = with_demo();
    let corpus = last_corpus(&take(&recorded));
    let claim = BRIDGE_OPENED;
    engine.handle(check([request("offline", claim)]).into());
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let provenance = done[0].provenance().expect("a provenance");
    assert_eq!(provenance.provider, "offline");
    assert_eq!(provenance.base_url, None);
    assert_eq!(provenance.corpus, corpus.id);
    assert_eq!(provenance.items, corpus.items);
    assert_eq!(provenance.app_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(provenance.date, "2026-01-02T03:04:05.000Z", "the host's clock");
    assert_eq!(recorded.results.borrow()[0].provenance(), Some(provenance), "and it is saved");
    // A network check: the base URL without its user info or query, the model, no key.
    let network = ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": "https://me:pw@api.example/v1?key=sk-q",
                       "model": "m-1", "stream": false, "apiKey": "sk-secret"}),
    };
    engine.handle(check([request("network", claim)]).provider(network).into());
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let provenance = done[0].provenance().expect("a provenance");
    assert_eq!(provenance.provider, "openai");
    assert_eq!(provenance.base_url.as_deref(), Some("https://api.example/v1"));
    assert_eq!(provenance.model.as_deref(), Some("m-1"));
    let wire = serde_json::to_string(&done[0]).unwrap();
    for secret in ["sk-secret", "sk-q", "pw"] {
        assert!(!wire.contains(secret), "{secret} in {wire}");
    }
    // A check refused before it ran (settings without a model) says what it was asked with.
    let no_model = ProviderChoice::Settings {
        settings: json!({"kind": "openAi", "preset": "custom",
                         "baseUrl": "http://127.0.0.1:9/v1", "openaiModel": ""}),
    };
    engine.handle(check([request("refused", claim)]).provider(no_model).into());
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let provenance = done[0].provenance().expect("a provenance");
    assert_eq!(provenance.provider, "openai");
    assert_eq!(provenance.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
    // The Markdown export carries it.
    engine.handle(ToWorker::ExportMarkdown { results: done });
    let posted = take(&recorded);
    let [FromWorker::Markdown { text }] = posted.as_slice() else { panic!("{posted:?}") };
    assert!(text.contains("From: openai at http\\://127\\.0\\.0\\.1\\:9/v1"), "{text}");
    assert!(text.contains("2026\\-01\\-02T03\\:04\\:05\\.000Z"), "{text}");
    // A result saved before results had a provenance still reads.
    let old = json!({"id": "c0", "claim": "A.",
                     "outcome": {"status": "failed", "failure": {"kind": "cancelled", "message": "m"}}});
    let old: CheckResult = serde_json::from_value(old).unwrap();
    assert_eq!(old.provenance(), None);
}

/// The Markdown export is the worker's: the page sends its results and gets the document.
#[test]
fn results_are_exported_as_markdown_by_the_worker() {
    let (engine, _pool, recorded) = started();
    take(&recorded);
    let result = failed_result("c1", "See https://evil.example.", "cancelled", "stopped");
    engine.handle_json(&json!({"type": "exportMarkdown", "results": [result]}).to_string());
    let posted = take(&recorded);
    let [FromWorker::Markdown { text }] = posted.as_slice() else { panic!("{posted:?}") };
    assert!(text.starts_with("# Verity results\n"), "{text}");
    assert!(text.contains("## See https\\://evil\\.example\\."), "{text}");
    assert!(text.contains("**Failed** (`cancelled`): stopped"), "{text}");
}

/// The CSV export is the worker's too: one row per result with its provenance, every cell
/// quoted, and no cell that a spreadsheet would run as a formula.
#[test]
fn results_are_exported_as_csv_by_the_worker_with_formulas_defused() {
    let (engine, mut pool, recorded) = with_demo();
    engine.handle(
        check([request(
            "c1",
            "=HYPERLINK(\"http://evil\") The Golden Gate Bridge opened in 1937.",
        )])
        .into(),
    );
    pool.run_until_stalled();
    let mut results = finished(&take(&recorded));
    let claim = "@SUM(A1), \"quoted\"\nsecond line";
    results.push(failed_result("c2", claim, "cancelled", "-1+1"));
    engine.handle_json(&json!({"type": "exportCsv", "results": results}).to_string());
    let posted = take(&recorded);
    let [FromWorker::Csv { text }] = posted.as_slice() else { panic!("{posted:?}") };
    let mut lines = text.split("\r\n");
    assert_eq!(
        lines.next(),
        Some(
            "\"id\",\"claim\",\"verdict\",\"failure kind\",\"confidence\",\"summary\",\
             \"cited ids\",\"provider\",\"base URL\",\"model\",\"corpus\",\"corpus items\",\
             \"app version\",\"date\",\"span\",\"quote spans\""
        )
    );
    let row = lines.next().unwrap();
    assert!(row.starts_with("\"c1\",\"'=HYPERLINK(\"\"http://evil\"\") The Golden"), "{row}");
    assert!(row.contains(",\"supported\",\"\","), "{row}");
    assert!(row.contains("\"demo#"), "the cited ids: {row}");
    assert!(row.contains(",\"offline\",\"\",\"\",\"sha256:"), "{row}");
    // Then no span (a claim is not cut), and where its quote sits in the cited passage.
    assert!(row.ends_with(",\"2026-01-02T03:04:05.000Z\",\"\",\"demo#2:0-118\""), "{row}");
    assert_eq!(
        lines.next(),
        Some(
            "\"c2\",\"'@SUM(A1), \"\"quoted\"\"\nsecond line\",\"failed\",\"cancelled\",\"\",\"'-1+1\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\""
        )
    );
}

/// Every kind of failure the core has gets its own advice on the page (what to do next), not
/// the catch-all: a kind added to the core without words on the page fails here.
#[test]
fn the_page_advises_on_every_kind_of_failure_the_core_has() {
    let fallback = verity_messages::text::what_to_do("a kind nobody has");
    for kind in verity_core::JobFailureKind::ALL {
        assert_ne!(verity_messages::text::what_to_do(kind.as_str()), fallback, "{kind}");
    }
}

/// The app and every other host name an outcome alike: the failures the core counts as the
/// verdict `insufficient` are exactly those the page shows as it (the messages crate keeps its
/// own copy of the rule, by name, to stay free of the core).
#[test]
fn the_page_and_the_core_agree_on_which_failures_are_insufficient() {
    for kind in verity_core::JobFailureKind::ALL {
        assert_eq!(
            verity_messages::text::failure_verdict(kind.as_str()).is_some(),
            kind.is_insufficient(),
            "{kind}"
        );
    }
}
