//! `drive_session_with`: a durable session driven with the options of `drive_with` (events,
//! cancel), as a browser host needs them.

use std::cell::Cell;
use std::sync::Arc;

use serde_json::json;
use verity_core::indexed::{IndexedCorpus, with_corpora};
use verity_core::log::Record;
use verity_core::provider::offline::OfflineModel;
use verity_core::retrieve::Corpus;
use verity_core::{
    AssistantMessage, Cancel, DriveOptions, Event, Job, JobFailureKind, MemoryStore, ModelRequest,
    NoTools, Session, Transport, drive_session_with, drive_with,
};

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn corpus() -> Arc<IndexedCorpus> {
    IndexedCorpus::new(
        Corpus::from_pairs([
            ("e1", "The bridge opened to traffic in 1932 after six years of work."),
            ("e2", "The bridge is painted grey and spans the harbour."),
            ("e3", "A ferry crossed the harbour before the bridge was built."),
        ])
        .unwrap(),
    )
}

fn job(corpus: &Arc<IndexedCorpus>) -> Job {
    let config = json!({"kind": "claim", "claim": "The bridge opened in 1932.",
                        "corpus": corpus.id().as_str()});
    Job::from_json(&config.to_string(), &[Arc::clone(corpus)]).unwrap()
}

#[test]
fn events_and_outcome_match_drive_with() {
    let corpus = corpus();
    let mut plain = Vec::new();
    let expected = pollster::block_on(drive_with(
        job(&corpus),
        &OfflineModel,
        &NoTools,
        DriveOptions::new().events(|event| plain.push(event)),
    ));
    let store = MemoryStore::new();
    let mut session = Session::start(job(&corpus)).unwrap();
    let mut durable = Vec::new();
    pollster::block_on(drive_session_with(
        &mut session,
        &store,
        &OfflineModel,
        &NoTools,
        DriveOptions::new().events(|event| durable.push(event)),
    ))
    .unwrap();
    assert!(!durable.is_empty());
    assert_eq!(durable, plain);
    assert_eq!(session.finish(), expected);
    // The store alone rebuilds the same outcome.
    let resumed: Session<Job> =
        with_corpora(&[corpus], || pollster::block_on(Session::open(&store, None))).unwrap();
    assert_eq!(resumed.finish(), expected);
}

/// Answers the first request offline; the second never completes, and the test's cancel
/// fires while it is in flight.
struct StallsOnSecond {
    requests: Cell<u32>,
    cancel: Cancel,
}

impl Transport for StallsOnSecond {
    async fn complete(&self, request: ModelRequest<'_>) -> AssistantMessage {
        self.requests.set(self.requests.get() + 1);
        if self.requests.get() == 1 {
            return verity_core::provider::offline::respond(request);
        }
        self.cancel.cancel("the user pressed stop");
        std::future::pending().await
    }
}

#[test]
fn a_cancel_is_recorded_in_the_store_and_ends_the_session_cancelled() {
    let corpus = corpus();
    let cancel = Cancel::new();
    let transport = StallsOnSecond { requests: Cell::new(0), cancel: cancel.clone() };
    let store = MemoryStore::new();
    let mut session = Session::start(job(&corpus)).unwrap();
    let mut events = Vec::new();
    pollster::block_on(drive_session_with(
        &mut session,
        &store,
        &transport,
        &NoTools,
        DriveOptions::new().cancel(cancel).events(|event| events.push(event)),
    ))
    .unwrap();
    assert_eq!(transport.requests.get(), 2);
    let failure = session.finish().unwrap_err();
    assert_eq!(failure.kind(), JobFailureKind::Cancelled);
    assert_eq!(failure.spent().requests, 1, "the stalled request was never answered");
    assert!(events.iter().any(|event| matches!(event, Event::ModelCall { .. })));
    let log = store.log();
    assert!(
        log.entries().iter().any(|entry| matches!(&entry.record, Record::Cancelled { reason }
            if reason == "the user pressed stop")),
        "{}",
        log.to_jsonl()
    );
    let resumed: Session<Job> =
        with_corpora(&[corpus], || pollster::block_on(Session::open(&store, None))).unwrap();
    assert_eq!(resumed.finish().unwrap_err().kind(), JobFailureKind::Cancelled);
}
