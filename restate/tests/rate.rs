//! A batch's model requests on a real Restate server wait for the shared rate limiter: no
//! window holds more than it allows, and a `Retry-After` seen by one check holds the whole batch
//! back, for at most the job's cap; an answer's calls retried together wait out their delays at
//! once.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use verity_core::JobFailureKind;
use verity_restate::batch;
use verity_restate::workflow::{BatchInput, BatchResult, Limits};
use verity_tests::http::Aimock;

mod common;

use common::{
    check_result, claims_fixtures, eiffel_check, fixture, journal_entries, provider_and_root,
    provider_file, restate, scratch, serial, submit_batch, submit_check, tower_batch,
};

/// The mock's request start instants (milliseconds since the Unix epoch), in order.
fn request_instants(mock: &Aimock) -> Vec<u64> {
    let mut at: Vec<u64> = journal_entries(mock)
        .iter()
        .map(|entry| entry["timestamp"].as_u64().expect("a journal entry has a timestamp"))
        .collect();
    at.sort_unstable();
    at
}

#[test]
fn every_model_request_of_a_batch_waits_for_the_shared_rate_limiter() {
    let _serial = serial();
    let dir = scratch("rate");
    let mock = Aimock::start(&fixture("claims.json")).unwrap();
    let provider = provider_file(&dir, &mock);
    // 20 claims of two requests each, 6 requests per 2-second window (the window is a minute
    // outside tests), 8 checks in flight: the limiter, not the fan-out, is the bound.
    const CLAIMS: usize = 20;
    const PER_WINDOW: usize = 6;
    const WINDOW_MS: u64 = 2_000;
    let input = BatchInput {
        limits: Limits {
            concurrency: 8,
            requests_per_minute: Some(PER_WINDOW as u64),
            rate_window_ms: Some(WINDOW_MS),
            ..Limits::default()
        },
        ..tower_batch(&dir, CLAIMS, "r", "rate")
    };
    let (server, workers) = restate(&dir, 2, &provider_and_root(&provider, &dir), &[]);
    submit_batch(&server.ingress_url(), "rate", &input);
    let result: BatchResult = batch::wait(&server.ingress_url(), "rate", false).unwrap();
    assert_eq!(result.results.len(), CLAIMS);
    for claim in &result.results {
        let report = claim.result.value.as_ref().unwrap_or_else(|| panic!("{claim:?}"));
        assert_eq!(report["assessment"]["verdict"], "supported");
    }

    let at = request_instants(&mock);
    assert_eq!(at.len(), 2 * CLAIMS, "one request per model call");
    // No window holds more requests than allowed. The limiter bounds the instants it grants;
    // a check sends its request a little after its instant (a timer wakes it), so the windows
    // measured here from the mock's clock are shorter than the limiter's by that slack.
    const SLACK_MS: u64 = 500;
    let mut fullest = 0;
    for (n, start) in at.iter().enumerate() {
        let inside = at[n..].iter().take_while(|t| **t < start + WINDOW_MS - SLACK_MS).count();
        fullest = fullest.max(inside);
        assert!(
            inside <= PER_WINDOW,
            "{inside} requests within {} ms from {start}: more than {PER_WINDOW}: {at:?}",
            WINDOW_MS - SLACK_MS
        );
    }
    // And the limiter really held requests back: 40 requests at 6 a window need 6 windows
    // after the first (unlimited, 8 checks in flight take well under a second).
    let span = at[at.len() - 1] - at[0];
    let windows = (2 * CLAIMS).div_ceil(PER_WINDOW) as u64 - 1;
    eprintln!("40 requests over {span} ms, at most {fullest} in any window");
    assert!(
        span + SLACK_MS >= windows * WINDOW_MS,
        "the requests took {span} ms: the limiter did not hold them back ({at:?})"
    );
    assert_eq!(fullest, PER_WINDOW, "the limiter let whole windows through");
    drop(workers);
}

#[test]
fn a_retry_after_seen_by_one_check_holds_the_whole_batch_back() {
    let _serial = serial();
    let dir = scratch("hold");
    // Claim 0's first assessment is answered 429 with Retry-After: 3 s.
    let mock = mock_with_a_429(&dir, "hold", 3);
    let provider = provider_file(&dir, &mock);
    let mut input = BatchInput {
        // A limit far above what two claims use: only the hold can slow them.
        limits: Limits { concurrency: 2, requests_per_minute: Some(1_000), ..Limits::default() },
        ..tower_batch(&dir, 2, "h", "hold")
    };
    input.job.insert("retry".to_owned(), json!({"maxRetries": 1}));
    let (server, workers) = restate(&dir, 1, &provider_and_root(&provider, &dir), &[]);
    submit_batch(&server.ingress_url(), "hold", &input);
    let result: BatchResult = batch::wait(&server.ingress_url(), "hold", false).unwrap();
    for claim in &result.results {
        assert!(claim.result.value.is_some(), "{claim:?}");
    }
    // Five requests: both assessments at once (claim 0's answered 429), then, after the hold,
    // claim 1's summary and claim 0's retried assessment and its summary. Claim 1 saw no 429
    // itself: without the shared hold its summary would follow its assessment at once.
    let entries = journal_entries(&mock);
    assert_eq!(entries.len(), 5, "{entries:?}");
    let at = |entry: &Value| entry["timestamp"].as_u64().unwrap();
    let limited = entries
        .iter()
        .find(|entry| entry["body"].to_string().contains("(hold 0)."))
        .map(at)
        .unwrap();
    let mut after = Vec::new();
    for entry in &entries {
        let body = entry["body"].to_string();
        if at(entry) < limited || body.contains("(hold 1).") || at(entry) == limited {
            continue;
        }
        let waited = at(entry) - limited;
        assert!(waited >= 2_900, "a request came {waited} ms after the 429, inside the hold");
        after.push(waited);
    }
    eprintln!("after the 429: {after:?} ms");
    assert_eq!(after.len(), 3, "{entries:?}");
    drop(workers);
}

/// A provider that answers a batch's request 429 with `Retry-After: 31536000` (a year, in
/// seconds) does not stop the batch: the check that saw it fails at once (a wait beyond its
/// job's `retryAfterCapMs`, 2 s here, is not waited for), and the whole batch is held back by
/// the rate limiter for the cap, not the year: the next check's first request goes out at
/// least 2 s and at most 8 s after the 429, and the batch ends. Its watch gives up after 20 s
/// without progress, so a hold of the year (or of the default cap, 60 s) fails the test
/// instead of hanging it.
#[test]
fn a_retry_after_of_a_year_holds_a_batch_on_restate_at_most_the_cap() {
    const CAP_MS: u64 = 2_000;
    let _serial = serial();
    let dir = scratch("year");
    // Claim 0's first assessment is answered 429 with a year's Retry-After.
    let mock = mock_with_a_429(&dir, "year", 31_536_000);
    let provider = provider_file(&dir, &mock);
    let mut input = BatchInput {
        // One check at a time, claim 0 first, so claim 1 starts after the 429; a limit far
        // above what two claims use: only the hold can slow it.
        limits: Limits { concurrency: 1, requests_per_minute: Some(1_000), ..Limits::default() },
        ..tower_batch(&dir, 2, "y", "year")
    };
    input.job.insert("retry".to_owned(), json!({"maxRetries": 1, "retryAfterCapMs": CAP_MS}));
    let (server, workers) = restate(&dir, 1, &provider_and_root(&provider, &dir), &[]);
    submit_batch(&server.ingress_url(), "year", &input);
    let watch = batch::Watch {
        stall_after: Some(Duration::from_secs(20)),
        ..batch::Watch::of(&[server.ingress_url()], false)
    };
    let result = watch.wait("year", &mut |_| Ok(())).unwrap();
    let [limited, other] = &result.results[..] else { panic!("{result:?}") };
    let failure = limited.result.failure.as_ref().unwrap_or_else(|| panic!("{limited:?}"));
    assert_eq!(failure.kind(), JobFailureKind::AssessRequest, "{failure:?}");
    assert!(failure.to_string().contains("HTTP 429"), "{failure:?}");
    assert_eq!((limited.result.spent.requests, limited.result.spent.retries), (1, 0));
    assert_eq!(
        other.result.value.as_ref().map(|report| &report["assessment"]["verdict"]),
        Some(&json!("supported")),
        "{other:?}"
    );
    // Three requests: claim 0's assessment, answered 429, then claim 1's assessment, which
    // waited for the hold (claim 1 saw no 429 itself), and its summary.
    let entries = journal_entries(&mock);
    assert_eq!(entries.len(), 3, "{entries:?}");
    let at = |entry: &Value| entry["timestamp"].as_u64().unwrap();
    assert!(entries[0]["body"].to_string().contains("(year 0)."), "{entries:?}");
    assert!(entries[1]["body"].to_string().contains("(year 1)."), "{entries:?}");
    let held = at(&entries[1]).saturating_sub(at(&entries[0]));
    eprintln!("claim 1's first request went out {held} ms after the 429");
    assert!(held >= CAP_MS - 100, "claim 1's first request came {held} ms after the 429: no hold");
    assert!(held <= CAP_MS + 6_000, "the batch was held {held} ms, past the {CAP_MS} ms cap");
    drop(workers);
}

/// An answer's sentences whose first calls are all answered 429 with `Retry-After: 2` wait out
/// their delays at once, as in every other host: each retried call's delay is a durable timer
/// beside the calls in flight, not a sleep before the next call is started (which retried them
/// 2, 4 and 6 s after their 429s).
#[test]
fn an_answers_sentences_wait_out_their_retry_delays_at_once() {
    let _serial = serial();
    let dir = scratch("answer-retries");
    let mut fixtures = claims_fixtures();
    // Each sentence whole: the evidence ("... lattice tower on the Champ de Mars in Paris") is
    // in every request too.
    let sentences = ["Tower is in Paris.", "Tower is a lattice tower.", "Tower is wrought iron."];
    for words in sentences {
        fixtures["fixtures"].as_array_mut().unwrap().insert(
            0,
            json!({
                "match": {"userMessage": words, "sequenceIndex": 0},
                "response": {
                    "error": {"message": "Rate limit reached.", "type": "rate_limit_error"},
                    "status": 429,
                    "retryAfter": 2,
                },
            }),
        );
    }
    let path = dir.join("fixtures.json");
    std::fs::write(&path, fixtures.to_string()).unwrap();
    let mock = Aimock::start(&path).unwrap();
    let provider = provider_file(&dir, &mock);
    let (server, workers) = restate(&dir, 1, &provider_and_root(&provider, &dir), &[]);
    let answer = "The Eiffel Tower is in Paris. The Eiffel Tower is a lattice tower. \
                  The Eiffel Tower is wrought iron.";
    let job = json!({"kind": "answer", "answer": answer, "concurrency": 3,
                     "retry": {"maxRetries": 1}});
    submit_check(&server.ingress_url(), "answer-retries", &eiffel_check(job, "e1"));
    let result = check_result(&server.ingress_url(), "answer-retries");
    let report = result.value.as_ref().unwrap_or_else(|| panic!("{result:?}"));
    for sentence in report["sentences"].as_array().unwrap() {
        assert_eq!(sentence["status"], "supported", "{sentence}");
    }

    // Each sentence's two requests: the 429, and the retry at least its delay later.
    let entries = journal_entries(&mock);
    assert_eq!(entries.len(), 6, "{entries:?}");
    let mut retries = Vec::new();
    for words in sentences {
        let at: Vec<u64> = entries
            .iter()
            .filter(|entry| entry["body"].to_string().contains(words))
            .map(|entry| entry["timestamp"].as_u64().unwrap())
            .collect();
        assert_eq!(at.len(), 2, "{words}: {entries:?}");
        assert!(at[1] - at[0] >= 1_900, "{words}: retried {} ms after its 429", at[1] - at[0]);
        retries.push(at[1]);
    }
    let spread = retries.iter().max().unwrap() - retries.iter().min().unwrap();
    eprintln!("the three retries went out within {spread} ms");
    assert!(spread < 1_000, "the retries went out {spread} ms apart: one delay after another");
    drop(workers);
}

/// The mock of `claims.json` (its fixtures written in `dir`), but for the first assessment of
/// claim "({word} 0).", answered 429 with a `Retry-After` of `retry_after_s` seconds.
fn mock_with_a_429(dir: &Path, word: &str, retry_after_s: u64) -> Aimock {
    let mut fixtures = claims_fixtures();
    let limited = json!({
        "match": {"toolName": "record_assessment", "userMessage": format!("({word} 0)."),
                  "sequenceIndex": 0},
        "response": {
            "error": {"message": "Rate limit reached for requests.", "type": "rate_limit_error"},
            "status": 429,
            "retryAfter": retry_after_s,
        },
    });
    fixtures["fixtures"].as_array_mut().unwrap().insert(0, limited);
    let path = dir.join("fixtures.json");
    std::fs::write(&path, fixtures.to_string()).unwrap();
    Aimock::start(&path).unwrap()
}
