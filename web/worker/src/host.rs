//! What the engine needs from where it runs ([`Host`]: the page, HTTP, storage, a spawner and a
//! clock), and what storage gave back at start ([`Restored`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use verity_core::corpus::Passage;
use verity_core::indexed::IndexedCorpus;
use verity_core::{HttpClient, Store};
use verity_messages::{CheckResult, CorpusStorage, FromWorker};

use crate::records::Unreadable;
use crate::saved::{SessionMeta, Unfinished};

/// What the engine needs from where it runs. Every method is called on the worker's one
/// thread; none may call back into the engine synchronously.
pub trait Host: 'static {
    /// The HTTP client for network providers (`fetch` in a browser).
    type Client: HttpClient + 'static;
    /// A check's durable session store (IndexedDB in a browser).
    type Store: Store + 'static;

    /// Sends a message to every page (one engine may serve every tab of the app).
    fn post(&self, message: &FromWorker);
    /// Sends a message to the page whose message is being handled (an answer only it asked
    /// for: a page of items, an export), or to every page outside of one.
    fn reply(&self, message: &FromWorker) {
        self.post(message);
    }
    /// Runs `task` to completion in the background.
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()>>>);
    /// Milliseconds on a monotonic clock (for timing the index).
    fn now_ms(&self) -> f64;
    /// The date and time now by the wall clock, ISO 8601 in UTC (a result's provenance).
    fn date(&self) -> String;
    /// A client for one check's requests.
    fn client(&self) -> Self::Client;
    /// The scheme and host of `url` as [`Host::client`] reads it when it connects (the
    /// browser's WHATWG parser in a worker), or `None` when it cannot: what
    /// `refuse_key_in_the_clear` judges a provider's URL by before a check starts.
    fn url_parts(&self, url: &str) -> Option<(String, String)>;
    /// A new, empty session store for the check `meta` describes (its record is written with
    /// the session's first entries).
    fn new_session(&self, meta: &SessionMeta) -> Self::Store;
    /// Deletes a check's session (it finished and its result is saved).
    fn end_session(&self, id: &str);
    /// Saves the corpus (replacing what was saved) in the background, and posts
    /// [`FromWorker::CorpusStored`] once the latest version asked for is written (or could not
    /// be).
    fn save_corpus(&self, corpus: &Arc<IndexedCorpus>);
    /// Where the version `id` of the main corpus (`None`: the empty corpus) stands with
    /// storage now.
    fn corpus_storage(&self, id: Option<&str>) -> CorpusStorage;
    /// Records finished checks in one write: saves each of `results` (its own record,
    /// replacing an earlier result of the same check), deletes each one's session (keyed by
    /// the check's id) and saves the checks still unfinished with what their runs have spent
    /// (`unfinished`, these checks' spending in it), together, so that a reload finds all done
    /// or none (never a deleted session without its result, nor a saved result whose session
    /// runs again, nor a result whose spending its run forgot).
    fn record_results(&self, results: &[CheckResult], unfinished: &Unfinished);
    /// Deletes the saved result of the check `id`.
    fn forget_result(&self, id: &str);
    /// Deletes every saved result (also ones that could not be read).
    fn clear_results(&self);
    /// Saves the checks asked for and not finished yet (replacing what was saved), so a
    /// reload re-queues the ones that had not started.
    fn save_unfinished(&self, unfinished: &Unfinished);
}

/// A session found in storage at start, with its store.
#[derive(Debug)]
pub struct StoredSession<S> {
    /// What it is.
    pub meta: SessionMeta,
    /// Where its log is.
    pub store: S,
}

/// What the host restored from storage at start.
#[derive(Debug)]
pub struct Restored<S> {
    /// The corpus items, in order.
    pub items: Vec<Passage>,
    /// Finished results.
    pub results: Vec<CheckResult>,
    /// Sessions of checks that were running.
    pub sessions: Vec<StoredSession<S>>,
    /// The checks asked for and not finished ([`Host::save_unfinished`]).
    pub unfinished: Unfinished,
    /// Records that could not be read and were skipped: named to the page after `Ready`.
    pub unreadable: Vec<Unreadable>,
}

impl<S> Default for Restored<S> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            results: Vec::new(),
            sessions: Vec::new(),
            unfinished: Unfinished::default(),
            unreadable: Vec::new(),
        }
    }
}
