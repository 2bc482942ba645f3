//! The host-independent engine: the corpus, the results, the scheduler of checks with bounded
//! concurrency, durable sessions, and the conversion of the core's values into messages. The
//! wasm glue (or a native test) is its [`Host`].

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use verity_core::corpus::{IndexedCorpus, Passage, with_corpora};
use verity_core::provider::http::is_secret_header;
use verity_core::provider::offline::OfflineModel;
use verity_core::{
    Cancel, DriveOptions, HttpClient, Job, JobConfig, JobFailed, NoTools, Provider,
    ProviderTransport, Session, SessionError, Spent, Store, ToolCall, ToolOutput, Tools, Transport,
    drive_session_with, drive_with,
};
use verity_messages::{
    CheckRequest, CheckResult, FromWorker, Item, NamedText, Outcome, ProviderChoice, StepOutcome,
    ToWorker,
};

use crate::corpus::{CorpusState, Rejected};
use crate::demo::{DEMO_CLAIMS, demo_passages};

/// What the engine needs from where it runs. Every method is called on the worker's one
/// thread; none may call back into the engine synchronously.
pub trait Host: 'static {
    /// The HTTP client for network providers (`fetch` in a browser).
    type Client: HttpClient + 'static;
    /// A check's durable session store (IndexedDB in a browser).
    type Store: Store + 'static;

    /// Sends a message to the page.
    fn post(&self, message: &FromWorker);
    /// Runs `task` to completion in the background.
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()>>>);
    /// Milliseconds on a monotonic clock (for timing the index).
    fn now_ms(&self) -> f64;
    /// A client for one check's requests.
    fn client(&self) -> Self::Client;
    /// A new, empty session store for the check `meta` describes (its record is written with
    /// the session's first entries).
    fn new_session(&self, meta: &SessionMeta) -> Self::Store;
    /// Deletes a check's session (it finished and its result is saved).
    fn end_session(&self, id: &str);
    /// Saves the corpus (replacing what was saved).
    fn save_corpus(&self, corpus: &Arc<IndexedCorpus>);
    /// Saves the finished results (replacing what was saved).
    fn save_results(&self, results: &[CheckResult]);
    /// Saves the checks asked for and not finished yet (replacing what was saved), so a
    /// reload re-queues the ones that had not started.
    fn save_unfinished(&self, unfinished: &Unfinished);
}

/// The checks of the main corpus asked for and not finished yet, queued or running, in the
/// order they were asked for, and the concurrency they run at: what a reload needs to lose
/// none. A check leaves it when its result is recorded. At start, one with a stored session
/// resumes from it; the others are queued again (a check whose session had not been written
/// yet starts over: it had recorded no response).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unfinished {
    /// How many checks run at once.
    pub concurrency: usize,
    /// The checks, credentials removed.
    pub checks: Vec<SessionMeta>,
}

/// What a session record says about its check, beside the log: enough to resume it. The
/// provider's credentials (`apiKey`, credential headers) are never stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// The check.
    pub check: CheckRequest,
    /// The provider, without credentials.
    pub provider: ProviderChoice,
    /// Whether credentials were removed (a resume cannot call the provider without them).
    #[serde(default)]
    pub credentials_removed: bool,
}

impl SessionMeta {
    /// The record of `check` run with `provider`, credentials removed.
    #[must_use]
    pub fn new(check: &CheckRequest, provider: &ProviderChoice) -> Self {
        let (provider, credentials_removed) = without_credentials(provider);
        Self { check: check.clone(), provider, credentials_removed }
    }
}

/// `provider` without its API key and credential headers, and whether it had any.
fn without_credentials(provider: &ProviderChoice) -> (ProviderChoice, bool) {
    let ProviderChoice::Network { config } = provider else { return (provider.clone(), false) };
    let mut config = config.clone();
    let mut removed = false;
    if let Some(object) = config.as_object_mut() {
        removed |= object.remove("apiKey").is_some_and(|key| !key.is_null());
        if let Some(Value::Array(headers)) = object.get_mut("headers") {
            let before = headers.len();
            headers
                .retain(|pair| !pair.get(0).and_then(Value::as_str).is_some_and(is_secret_header));
            removed |= headers.len() != before;
        }
    }
    (ProviderChoice::Network { config }, removed)
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
}

impl<S> Default for Restored<S> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            results: Vec::new(),
            sessions: Vec::new(),
            unfinished: Unfinished::default(),
        }
    }
}

#[derive(Debug)]
struct Pending {
    check: CheckRequest,
    provider: ProviderChoice,
    /// A named corpus (taken when the check was asked for); `None`: the main corpus.
    corpus: Option<Arc<IndexedCorpus>>,
}

#[derive(Debug)]
struct Running {
    id: String,
    cancel: Cancel,
}

#[derive(Debug, Default)]
struct State {
    corpus: CorpusState,
    /// The named corpora ([`ToWorker::AddToCorpus`]), in memory only.
    named: HashMap<String, CorpusState>,
    results: Vec<CheckResult>,
    queue: VecDeque<Pending>,
    running: Vec<Running>,
    concurrency: usize,
    /// The main corpus's checks not finished yet, as saved ([`Unfinished`]).
    unfinished: Vec<SessionMeta>,
    /// Page tool calls of running steps waiting for their [`ToWorker::ToolResult`], by step
    /// id and call id.
    tool_calls: HashMap<(String, String), futures_channel::oneshot::Sender<ToolOutput>>,
}

/// The engine: a cheap handle (clones share one state) driven by [`Engine::handle`].
pub struct Engine<H: Host> {
    inner: Rc<Inner<H>>,
}

impl<H: Host> Clone for Engine<H> {
    fn clone(&self) -> Self {
        Self { inner: Rc::clone(&self.inner) }
    }
}

impl<H: Host> std::fmt::Debug for Engine<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("state", &self.inner.state).finish_non_exhaustive()
    }
}

struct Inner<H: Host> {
    host: H,
    state: RefCell<State>,
    /// Keyed checks resumed after a reload, waiting for [`ToWorker::Credentials`].
    awaiting: RefCell<Vec<Awaiting<H::Store>>>,
    /// Checks queued again after a reload (they had not started), in order, waiting for
    /// [`ToWorker::Credentials`] when any of them needs a key. No queued check starts while any
    /// check waits for them.
    awaiting_queue: RefCell<Vec<SessionMeta>>,
}

/// A resumed session whose provider needs a key the worker did not store.
struct Awaiting<S> {
    meta: SessionMeta,
    store: S,
    session: Session<Job>,
    corpus: Arc<IndexedCorpus>,
}

/// Retries of a check's failed requests (a 429, an overload, a 5xx, no response), over the
/// whole check, each after the core's backoff or the provider's `Retry-After` (when the server
/// exposes it to the page: `Access-Control-Expose-Headers`).
const MAX_RETRIES: u32 = 3;

/// The failure JSON of a check that ended outside the core's machines (cancelled while
/// queued, a bad provider configuration, storage lost): the core's `JobFailed` shape.
fn failure(kind: &str, message: impl Into<String>, spent: Spent) -> Value {
    let value = json!({"kind": kind, "message": message.into(), "spent": spent});
    // Through the core's type, so the shape is the core's.
    serde_json::from_value::<JobFailed>(value.clone())
        .map_or(value, |failed| serde_json::to_value(failed).expect("serializes"))
}

impl<H: Host> Engine<H> {
    /// An engine over `host` with an empty corpus; call [`start`](Self::start) next.
    pub fn new(host: H) -> Self {
        let state = State { concurrency: 1, ..State::default() };
        let inner = Inner {
            host,
            state: RefCell::new(state),
            awaiting: RefCell::default(),
            awaiting_queue: RefCell::default(),
        };
        Self { inner: Rc::new(inner) }
    }

    /// The host.
    pub fn host(&self) -> &H {
        &self.inner.host
    }

    fn post(&self, message: &FromWorker) {
        self.inner.host.post(message);
    }

    /// Takes what storage held, posts `Ready`, indexes the corpus, resumes the checks that
    /// were running (each from its session: recorded responses are not requested again) and
    /// queues again the ones that had not started.
    pub async fn start(&self, restored: Restored<H::Store>) {
        let Restored { items, results, sessions, unfinished } = restored;
        {
            let mut state = self.inner.state.borrow_mut();
            state.corpus = CorpusState::from_passages(items);
            state.results = results;
            state.concurrency = unfinished.concurrency.max(1);
        }
        let corpus = self.inner.state.borrow().corpus.current().clone();
        let with_session: HashSet<String> =
            sessions.iter().map(|stored| stored.meta.check.id.clone()).collect();
        let mut requeued = Vec::new();
        {
            let mut state = self.inner.state.borrow_mut();
            for meta in unfinished.checks {
                let id = &meta.check.id;
                if state.results.iter().any(|result| result.id == *id)
                    || state.unfinished.iter().any(|kept| kept.check.id == *id)
                {
                    continue;
                }
                if !with_session.contains(id) {
                    requeued.push(meta.clone());
                }
                state.unfinished.push(meta);
            }
        }
        let mut resumed = Vec::new();
        let mut to_run = Vec::new();
        for StoredSession { meta, store } in sessions {
            let id = meta.check.id.clone();
            if self.inner.state.borrow().results.iter().any(|result| result.id == id) {
                // Finished, and its result saved, before the session was deleted.
                self.inner.host.end_session(&id);
                continue;
            }
            match open_session(&store, &corpus).await {
                Ok(session) => {
                    resumed.push(meta.check.clone());
                    {
                        let mut state = self.inner.state.borrow_mut();
                        if !state.unfinished.iter().any(|kept| kept.check.id == id) {
                            state.unfinished.push(meta.clone());
                        }
                    }
                    to_run.push((meta, store, session));
                }
                Err(why) => {
                    let result = CheckResult {
                        id: id.clone(),
                        claim: meta.check.claim.clone(),
                        outcome: Outcome::Failed {
                            failure: failure(
                                "cancelled",
                                format!("the check was interrupted and cannot resume: {why}"),
                                Spent::default(),
                            ),
                        },
                        cited: Vec::new(),
                    };
                    self.inner.state.borrow_mut().unfinished.retain(|meta| meta.check.id != id);
                    self.record_result(result);
                    self.inner.host.end_session(&id);
                }
            }
        }
        let (summary, results) = {
            let state = self.inner.state.borrow();
            (state.corpus.summary(), state.results.clone())
        };
        let queued = requeued.iter().map(|meta| meta.check.clone()).collect();
        self.post(&FromWorker::Ready { corpus: summary, results, resumed, queued });
        self.index();
        for (meta, store, session) in to_run {
            if meta.credentials_removed {
                // Its key was not stored: wait for the page's `Credentials`.
                let corpus = Arc::clone(&corpus);
                self.inner.awaiting.borrow_mut().push(Awaiting { meta, store, session, corpus });
                continue;
            }
            let provider = meta.provider.clone();
            self.resume(meta, provider, Cancel::new(), store, session, Arc::clone(&corpus));
        }
        if requeued.iter().any(|meta| meta.credentials_removed) {
            // All of them wait, so they keep their order once the key is there.
            self.inner.awaiting_queue.borrow_mut().extend(requeued);
        } else {
            let mut state = self.inner.state.borrow_mut();
            for meta in requeued {
                let pending = Pending { check: meta.check, provider: meta.provider, corpus: None };
                state.queue.push_back(pending);
            }
        }
        self.save_unfinished();
        self.pump();
    }

    fn save_unfinished(&self) {
        let unfinished = {
            let state = self.inner.state.borrow();
            Unfinished { concurrency: state.concurrency, checks: state.unfinished.clone() }
        };
        self.inner.host.save_unfinished(&unfinished);
    }

    fn resume(
        &self,
        meta: SessionMeta,
        provider: ProviderChoice,
        cancel: Cancel,
        store: H::Store,
        session: Session<Job>,
        corpus: Arc<IndexedCorpus>,
    ) {
        self.inner
            .state
            .borrow_mut()
            .running
            .push(Running { id: meta.check.id.clone(), cancel: cancel.clone() });
        let engine = self.clone();
        self.inner.host.spawn(Box::pin(async move {
            let result = engine.run(&meta.check, &provider, &corpus, cancel, store, Some(session));
            let result = result.await;
            engine.finished(result);
        }));
    }

    /// Resumes the keyed checks a reload interrupted with the page's provider, when it is the
    /// one they ran with and has a key; otherwise they end `cancelled`, saying why.
    fn credentials(&self, provider: Option<&ProviderChoice>) {
        let matching = |meta: &SessionMeta| {
            provider
                .filter(|given| {
                    let (stripped, had_credentials) = without_credentials(given);
                    had_credentials && stripped == meta.provider
                })
                .cloned()
        };
        let not_resumed = || {
            if provider.is_some_and(|given| without_credentials(given).1) {
                "the page was reloaded during the check and the provider has changed since: \
                 run the check again"
            } else {
                "the page was reloaded during the check and its API key is not stored on this \
                 device (tick \"Remember on this device\" to resume such checks): run the check \
                 again"
            }
        };
        let awaiting = std::mem::take(&mut *self.inner.awaiting.borrow_mut());
        for Awaiting { meta, store, session, corpus } in awaiting {
            let cancel = Cancel::new();
            let provider = matching(&meta).unwrap_or_else(|| {
                cancel.cancel(not_resumed());
                meta.provider.clone()
            });
            self.resume(meta, provider, cancel, store, session, corpus);
        }
        let awaiting_queue = std::mem::take(&mut *self.inner.awaiting_queue.borrow_mut());
        for meta in awaiting_queue {
            if !meta.credentials_removed {
                let pending = Pending { check: meta.check, provider: meta.provider, corpus: None };
                self.inner.state.borrow_mut().queue.push_back(pending);
                continue;
            }
            match matching(&meta) {
                Some(given) => {
                    let pending = Pending { check: meta.check, provider: given, corpus: None };
                    self.inner.state.borrow_mut().queue.push_back(pending);
                }
                None => self.finished(CheckResult {
                    id: meta.check.id,
                    claim: meta.check.claim,
                    outcome: Outcome::Failed {
                        failure: failure("cancelled", not_resumed(), Spent::default()),
                    },
                    cited: Vec::new(),
                }),
            }
        }
        self.pump();
    }

    /// Handles one message from the page.
    pub fn handle(&self, message: ToWorker) {
        match message {
            ToWorker::AddFiles { files } => {
                let mut changed = false;
                for file in files {
                    let added =
                        self.inner.state.borrow_mut().corpus.add_file(&file.name, &file.text);
                    match added {
                        Ok(_) => changed = true,
                        Err(rejected) => self.reject(rejected),
                    }
                }
                if changed {
                    self.corpus_changed();
                }
            }
            ToWorker::AddItems { items } => {
                let passages =
                    items.into_iter().map(|Item { id, text }| Passage { id, text }).collect();
                let added = self.inner.state.borrow_mut().corpus.add(passages, "items");
                match added {
                    Ok(_) => self.corpus_changed(),
                    Err(rejected) => self.reject(rejected),
                }
            }
            ToWorker::LoadDemo => {
                let passages: Vec<Passage> = {
                    let state = self.inner.state.borrow();
                    let corpus = state.corpus.current().corpus();
                    demo_passages().into_iter().filter(|p| corpus.get(&p.id).is_none()).collect()
                };
                if !passages.is_empty() {
                    let added = self.inner.state.borrow_mut().corpus.add(passages, "demo");
                    if let Err(rejected) = added {
                        self.reject(rejected);
                    } else {
                        self.corpus_changed();
                    }
                }
                self.post(&FromWorker::Demo {
                    claims: DEMO_CLAIMS.iter().map(|claim| (*claim).to_owned()).collect(),
                });
            }
            ToWorker::RemoveItems { ids } => {
                if self.inner.state.borrow_mut().corpus.remove(&ids) > 0 {
                    self.corpus_changed();
                }
            }
            ToWorker::ClearCorpus => {
                self.inner.state.borrow_mut().corpus.clear();
                self.corpus_changed();
            }
            ToWorker::ListItems { query, offset, limit } => {
                let (total, items) = self.inner.state.borrow().corpus.list(&query, offset, limit);
                self.post(&FromWorker::Items { query, offset, total, items });
            }
            ToWorker::Check { checks, provider, concurrency, corpus } => {
                let named = match corpus {
                    None => None,
                    Some(name) => {
                        let found = self
                            .inner
                            .state
                            .borrow()
                            .named
                            .get(&name)
                            .map(|named| Arc::clone(named.current()));
                        if found.is_none() {
                            for check in checks {
                                self.post(&FromWorker::Queued { check: check.clone() });
                                let message =
                                    format!("no corpus named {name:?}: add items to it first");
                                self.finished(CheckResult {
                                    id: check.id,
                                    claim: check.claim,
                                    outcome: Outcome::Failed {
                                        failure: failure("config", message, Spent::default()),
                                    },
                                    cited: Vec::new(),
                                });
                            }
                            return;
                        }
                        found
                    }
                };
                {
                    let mut state = self.inner.state.borrow_mut();
                    state.concurrency = concurrency.max(1);
                    for check in &checks {
                        state.queue.push_back(Pending {
                            check: check.clone(),
                            provider: provider.clone(),
                            corpus: named.clone(),
                        });
                        // The named corpora live in memory: only the main corpus's checks
                        // outlive a reload.
                        if named.is_none() {
                            state.unfinished.push(SessionMeta::new(check, &provider));
                        }
                    }
                }
                self.save_unfinished();
                for check in checks {
                    self.post(&FromWorker::Queued { check });
                }
                self.pump();
            }
            ToWorker::Credentials { provider } => self.credentials(provider.as_ref()),
            ToWorker::AddToCorpus { name, items, files } => self.add_to_corpus(name, items, files),
            ToWorker::DropCorpus { name } => {
                self.inner.state.borrow_mut().named.remove(&name);
            }
            ToWorker::RunStep { id, config, provider } => self.run_step(id, config, provider),
            ToWorker::ToolResult { id, call, content, is_error } => {
                let waiting = self.inner.state.borrow_mut().tool_calls.remove(&(id, call));
                if let Some(sender) = waiting {
                    let output = if is_error {
                        ToolOutput::error(content)
                    } else {
                        ToolOutput::ok(content, Value::Null)
                    };
                    // The step may have been cancelled meanwhile: then nobody waits.
                    let _ = sender.send(output);
                }
            }
            ToWorker::Cancel { id } => self.cancel(&id),
            ToWorker::ClearResults => {
                let mut state = self.inner.state.borrow_mut();
                state.results.clear();
                self.inner.host.save_results(&state.results);
            }
            ToWorker::ForgetResult { id } => {
                let mut state = self.inner.state.borrow_mut();
                let before = state.results.len();
                state.results.retain(|result| result.id != id);
                if state.results.len() != before {
                    self.inner.host.save_results(&state.results);
                }
            }
            _ => self.post(&FromWorker::Error { message: "unknown message".to_owned() }),
        }
    }

    /// Handles a message as JSON text (what the page posts); a malformed one is answered
    /// with `Error`.
    pub fn handle_json(&self, text: &str) {
        match serde_json::from_str::<ToWorker>(text) {
            Ok(message) => self.handle(message),
            Err(error) => self.post(&FromWorker::Error {
                message: format!("the worker cannot read the page's message: {error}"),
            }),
        }
    }

    fn reject(&self, rejected: Rejected) {
        self.post(&FromWorker::FileRejected {
            file: rejected.file,
            line: rejected.line,
            message: rejected.message,
        });
    }

    /// Posts the new corpus (not indexed yet), saves it, then indexes it and posts again.
    fn corpus_changed(&self) {
        let (summary, current) = {
            let state = self.inner.state.borrow();
            (state.corpus.summary(), state.corpus.current().clone())
        };
        self.post(&FromWorker::Corpus { corpus: summary });
        self.inner.host.save_corpus(&current);
        self.index();
    }

    fn index(&self) {
        let summary = {
            let mut state = self.inner.state.borrow_mut();
            if state.corpus.current().corpus().is_empty() || state.corpus.current().is_indexed() {
                return;
            }
            let host = &self.inner.host;
            state.corpus.index(|| host.now_ms());
            state.corpus.summary()
        };
        self.post(&FromWorker::Corpus { corpus: summary });
    }

    fn cancel(&self, id: &str) {
        let queued = {
            let mut state = self.inner.state.borrow_mut();
            if let Some(running) = state.running.iter().find(|running| running.id == id) {
                running.cancel.cancel("cancelled by the user");
                return;
            }
            let position = state.queue.iter().position(|pending| pending.check.id == id);
            position.and_then(|position| state.queue.remove(position)).map(|pending| pending.check)
        };
        let queued = queued.or_else(|| {
            // Waiting for the page's credentials after a reload.
            let mut awaiting = self.inner.awaiting_queue.borrow_mut();
            let position = awaiting.iter().position(|meta| meta.check.id == id)?;
            Some(awaiting.remove(position).check)
        });
        if queued.is_none() {
            let resumed = {
                let mut awaiting = self.inner.awaiting.borrow_mut();
                let position = awaiting.iter().position(|waiting| waiting.meta.check.id == id);
                position.map(|position| awaiting.remove(position))
            };
            if let Some(Awaiting { meta, store, session, corpus }) = resumed {
                // Ended through the core, so what its session had spent is reported.
                let cancel = Cancel::new();
                cancel.cancel("cancelled by the user");
                let provider = meta.provider.clone();
                self.resume(meta, provider, cancel, store, session, corpus);
            }
        }
        if let Some(check) = queued {
            self.finished(CheckResult {
                id: check.id,
                claim: check.claim,
                outcome: Outcome::Failed {
                    failure: failure(
                        "cancelled",
                        "cancelled by the user before it started",
                        Spent::default(),
                    ),
                },
                cited: Vec::new(),
            });
        }
    }

    /// Starts queued checks while fewer than the concurrency bound run.
    fn pump(&self) {
        if !self.inner.awaiting.borrow().is_empty()
            || !self.inner.awaiting_queue.borrow().is_empty()
        {
            // Checks resumed after a reload wait for the page's credentials: starting others
            // first could exceed the concurrency once they run.
            return;
        }
        loop {
            let (pending, corpus, cancel) = {
                let mut state = self.inner.state.borrow_mut();
                if state.running.len() >= state.concurrency {
                    return;
                }
                let Some(pending) = state.queue.pop_front() else { return };
                let cancel = Cancel::new();
                state
                    .running
                    .push(Running { id: pending.check.id.clone(), cancel: cancel.clone() });
                let corpus =
                    pending.corpus.clone().unwrap_or_else(|| state.corpus.current().clone());
                (pending, corpus, cancel)
            };
            let store =
                self.inner.host.new_session(&SessionMeta::new(&pending.check, &pending.provider));
            let engine = self.clone();
            self.inner.host.spawn(Box::pin(async move {
                let result =
                    engine.run(&pending.check, &pending.provider, &corpus, cancel, store, None);
                let result = result.await;
                engine.finished(result);
            }));
        }
    }

    /// Runs one check to its result (a new session, or a resumed one).
    async fn run(
        &self,
        check: &CheckRequest,
        provider: &ProviderChoice,
        corpus: &Arc<IndexedCorpus>,
        cancel: Cancel,
        store: H::Store,
        resumed: Option<Session<Job>>,
    ) -> CheckResult {
        let outcome = self.drive(check, provider, corpus, cancel, &store, resumed).await;
        let cited = match &outcome {
            Outcome::Report { report } => {
                let citations: Vec<String> = report["assessment"]["citations"]
                    .as_array()
                    .map(|all| all.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                    .unwrap_or_default();
                CorpusState::cited(corpus, &citations)
            }
            Outcome::Failed { .. } => Vec::new(),
        };
        CheckResult { id: check.id.clone(), claim: check.claim.clone(), outcome, cited }
    }

    async fn drive(
        &self,
        check: &CheckRequest,
        provider: &ProviderChoice,
        corpus: &Arc<IndexedCorpus>,
        cancel: Cancel,
        store: &H::Store,
        resumed: Option<Session<Job>>,
    ) -> Outcome {
        let failed = |failure: Value| Outcome::Failed { failure };
        let mut session = match resumed {
            Some(session) => session,
            None => {
                let config = json!({"kind": "claim", "claim": check.claim,
                                    "corpus": corpus.id().as_str(),
                                    "retry": {"maxRetries": MAX_RETRIES}});
                let job = match Job::new(
                    match verity_core::JobConfig::from_value(config) {
                        Ok(config) => config,
                        Err(error) => {
                            return failed(failure("config", error.to_string(), Spent::default()));
                        }
                    },
                    std::slice::from_ref(corpus),
                ) {
                    Ok(job) => job,
                    Err(failed_job) => return failed(to_value(&failed_job)),
                };
                match Session::start(job) {
                    Ok(session) => session,
                    Err(error) => {
                        return failed(failure("config", error.to_string(), Spent::default()));
                    }
                }
            }
        };
        let id = check.id.clone();
        let host = &self.inner.host;
        let options = DriveOptions::new().cancel(cancel.clone()).events(move |event| {
            let event = serde_json::to_value(&event).expect("events serialize");
            host.post(&FromWorker::Progress { id: id.clone(), event });
        });
        let driven = match provider {
            ProviderChoice::Offline => drive_on(&mut session, store, &OfflineModel, options).await,
            ProviderChoice::Network { config } => {
                let provider: Provider = match serde_json::from_value(config.clone()) {
                    Ok(provider) => provider,
                    Err(error) => {
                        return failed(failure(
                            "config",
                            format!("provider: {error}"),
                            Spent::default(),
                        ));
                    }
                };
                let transport = ProviderTransport::new(provider, host.client()).with_cancel(cancel);
                drive_on(&mut session, store, &transport, options).await
            }
        };
        if let Err(error) = driven {
            let spent = session.machine().spent();
            let message = match error {
                SessionError::StaleLease { .. } => {
                    "the check was taken over by another tab of this page".to_owned()
                }
                other => format!("the check's durable session failed: {other}"),
            };
            return failed(failure("cancelled", message, spent));
        }
        match session.finish() {
            Ok(report) => Outcome::Report { report },
            Err(failed_job) => failed(to_value(&failed_job)),
        }
    }

    /// Adds items and files to the named corpus `name` (created when missing), all or
    /// nothing, indexes it, and answers with one message.
    fn add_to_corpus(&self, name: String, items: Vec<Item>, files: Vec<NamedText>) {
        let mut next = self.inner.state.borrow().named.get(&name).cloned().unwrap_or_default();
        let mut added = Ok(0);
        if !items.is_empty() {
            let passages =
                items.into_iter().map(|Item { id, text }| Passage { id, text }).collect();
            added = next.add(passages, "items");
        }
        for file in &files {
            if added.is_err() {
                break;
            }
            added = next.add_file(&file.name, &file.text);
        }
        match added {
            Err(rejected) => self.post(&FromWorker::NamedCorpusRejected {
                name,
                file: rejected.file,
                line: rejected.line,
                message: rejected.message,
            }),
            Ok(_) => {
                let host = &self.inner.host;
                if !next.current().corpus().is_empty() {
                    next.index(|| host.now_ms());
                }
                let corpus = next.summary();
                self.inner.state.borrow_mut().named.insert(name.clone(), next);
                self.post(&FromWorker::NamedCorpus { name, corpus });
            }
        }
    }

    /// Starts a typed step whose tools the page runs; posts `StepFinished` when it ends.
    fn run_step(&self, id: String, config: Value, provider: ProviderChoice) {
        let finish = |outcome: StepOutcome| FromWorker::StepFinished { id: id.clone(), outcome };
        if config.get("kind").and_then(Value::as_str) != Some("step") {
            let message = "kind: a page runs steps here (`\"kind\": \"step\"`); claim checks \
                           go through `check`";
            let failure = failure("config", message, Spent::default());
            self.post(&finish(StepOutcome::Failed { failure }));
            return;
        }
        let job = JobConfig::from_value(config)
            .map_err(|error| failure("config", error.to_string(), Spent::default()))
            .and_then(|config| Job::new(config, &[]).map_err(|failed| to_value(&failed)));
        let job = match job {
            Ok(job) => job,
            Err(failure) => {
                self.post(&finish(StepOutcome::Failed { failure }));
                return;
            }
        };
        let cancel = Cancel::new();
        self.inner
            .state
            .borrow_mut()
            .running
            .push(Running { id: id.clone(), cancel: cancel.clone() });
        let engine = self.clone();
        self.inner.host.spawn(Box::pin(async move {
            let outcome = engine.drive_step(&id, job, &provider, cancel).await;
            {
                let mut state = engine.inner.state.borrow_mut();
                state.running.retain(|running| running.id != id);
                state.tool_calls.retain(|(step, _), _| *step != id);
            }
            engine.post(&FromWorker::StepFinished { id, outcome });
        }));
    }

    async fn drive_step(
        &self,
        id: &str,
        job: Job,
        provider: &ProviderChoice,
        cancel: Cancel,
    ) -> StepOutcome {
        let host = &self.inner.host;
        let step = id.to_owned();
        let options = DriveOptions::new().cancel(cancel.clone()).events(move |event| {
            let event = serde_json::to_value(&event).expect("events serialize");
            host.post(&FromWorker::Progress { id: step.clone(), event });
        });
        let tools = PageTools { engine: self.clone(), step: id.to_owned() };
        let outcome = match provider {
            ProviderChoice::Offline => drive_with(job, &OfflineModel, &tools, options).await,
            ProviderChoice::Network { config } => {
                let provider: Provider = match serde_json::from_value(config.clone()) {
                    Ok(provider) => provider,
                    Err(error) => {
                        let message = format!("provider: {error}");
                        let failure = failure("config", message, Spent::default());
                        return StepOutcome::Failed { failure };
                    }
                };
                let transport = ProviderTransport::new(provider, host.client()).with_cancel(cancel);
                drive_with(job, &transport, &tools, options).await
            }
        };
        match outcome {
            Ok(value) => StepOutcome::Value { value },
            Err(failed) => StepOutcome::Failed { failure: to_value(&failed) },
        }
    }

    /// Records a finished check: posts it, saves the results, deletes its session, starts the
    /// next queued check.
    fn finished(&self, result: CheckResult) {
        let id = result.id.clone();
        let was_unfinished = {
            let mut state = self.inner.state.borrow_mut();
            state.running.retain(|running| running.id != id);
            let before = state.unfinished.len();
            state.unfinished.retain(|meta| meta.check.id != id);
            state.unfinished.len() != before
        };
        self.post(&FromWorker::Finished { result: result.clone() });
        // The result is saved before the check leaves the saved unfinished ones, so a reload
        // between the two writes finds it finished.
        self.record_result(result);
        self.inner.host.end_session(&id);
        if was_unfinished {
            self.save_unfinished();
        }
        self.pump();
    }

    fn record_result(&self, result: CheckResult) {
        let mut state = self.inner.state.borrow_mut();
        state.results.retain(|kept| kept.id != result.id);
        state.results.push(result);
        self.inner.host.save_results(&state.results);
    }

    /// How many checks run and wait (for tests and diagnostics).
    #[must_use]
    pub fn load(&self) -> (usize, usize) {
        let state = self.inner.state.borrow();
        (state.running.len(), state.queue.len())
    }

    /// The current corpus.
    #[must_use]
    pub fn corpus(&self) -> Arc<IndexedCorpus> {
        self.inner.state.borrow().corpus.current().clone()
    }
}

/// A step's tools, run by the page: each call is posted as `ToolCall` and waits for the
/// page's `ToolResult`.
struct PageTools<H: Host> {
    engine: Engine<H>,
    step: String,
}

impl<H: Host> Tools for PageTools<H> {
    async fn run(&self, call: &ToolCall) -> ToolOutput {
        let (sender, receiver) = futures_channel::oneshot::channel();
        self.engine
            .inner
            .state
            .borrow_mut()
            .tool_calls
            .insert((self.step.clone(), call.id.clone()), sender);
        self.engine.post(&FromWorker::ToolCall {
            id: self.step.clone(),
            call: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        receiver.await.unwrap_or_else(|_| {
            ToolOutput::error(format!("the page did not answer the call of {:?}", call.name))
        })
    }
}

fn to_value(failed: &JobFailed) -> Value {
    serde_json::to_value(failed).expect("a failure serializes")
}

async fn drive_on<S: Store>(
    session: &mut Session<Job>,
    store: &S,
    transport: &impl Transport,
    options: DriveOptions<'_>,
) -> Result<(), SessionError> {
    drive_session_with(session, store, transport, &NoTools, options).await
}

/// Takes the session over (so a stale tab cannot write), loads and replays it over `corpus`.
async fn open_session<S: Store>(
    store: &S,
    corpus: &Arc<IndexedCorpus>,
) -> Result<Session<Job>, SessionError> {
    let lease = store.take_lease("worker").await?;
    let log = store.load().await?;
    with_corpora(std::slice::from_ref(corpus), || Session::resume(log, Some(lease)))
}
