//! What the engine's tests share: a host in memory ([`TestHost`]: a store whose writes a test
//! can hold back, canned network answers, and the storage it writes, kept in [`Recorded`]), the
//! readers of what the engine posted, and builders of the setup the tests repeat: a page's
//! `check` message ([`check`]), the tests' provider on a mock network ([`mock`]), and an engine
//! started again over what a reload left in storage ([`reload`]).

// Each test file compiles this module for itself and uses only part of it.
#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use futures_executor::LocalPool;
use futures_util::task::LocalSpawnExt;
use serde_json::{Value, json};
use verity_core::corpus::Passage;
use verity_core::indexed::IndexedCorpus;
use verity_core::{Append, DurableLog, Lease};
use verity_core::{
    HttpBody, HttpClient, HttpFailure, HttpRequest, MemoryStore, ResponseHead, SessionError, Store,
};
use verity_messages::{
    CheckRequest, CheckResult, FromWorker, NamedText, Outcome, ProviderChoice, ToWorker,
};
use verity_worker::records::Unreadable;
use verity_worker::{Engine, Host, Restored, SessionMeta, StoredSession, Unfinished};

/// A store in memory whose writes take one turn of the executor, so checks interleave, and
/// wait while the test's [`Gate`] is closed.
#[derive(Clone, Default)]
pub struct Shared(pub Rc<MemoryStore>, pub Rc<Gate>);

/// How many more writes may land before the stores stall (`None`: no limit).
#[derive(Default)]
pub struct Gate {
    budget: Cell<Option<usize>>,
    wakers: RefCell<Vec<std::task::Waker>>,
}

impl Gate {
    pub fn close_after(&self, writes: usize) {
        self.budget.set(Some(writes));
    }
    /// Lets `writes` more writes land, waking the stalled ones.
    pub fn allow(&self, writes: usize) {
        self.budget.set(Some(writes));
        self.wakers.borrow_mut().drain(..).for_each(std::task::Waker::wake);
    }
    pub fn open(&self) {
        self.budget.set(None);
        self.wakers.borrow_mut().drain(..).for_each(std::task::Waker::wake);
    }
    pub async fn pass(&self) {
        std::future::poll_fn(|cx| match self.budget.get() {
            Some(0) => {
                self.wakers.borrow_mut().push(cx.waker().clone());
                std::task::Poll::Pending
            }
            Some(n) => {
                self.budget.set(Some(n - 1));
                std::task::Poll::Ready(())
            }
            None => std::task::Poll::Ready(()),
        })
        .await;
    }
}

async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}

impl Store for Shared {
    async fn append(&self, append: Append<'_>) -> Result<(), SessionError> {
        yield_once().await;
        self.1.pass().await;
        self.0.append(append).await
    }
    async fn load(&self) -> Result<DurableLog, SessionError> {
        self.0.load().await
    }
    async fn take_lease(&self, holder: &str) -> Result<Lease, SessionError> {
        self.0.take_lease(holder).await
    }
    async fn check_lease(&self, lease: Option<&Lease>) -> Result<(), SessionError> {
        self.0.check_lease(lease).await
    }
}

/// The network of the tests: the canned response bodies of `Recorded::replies` in order
/// (JSON, status 200), then a network failure.
pub struct Canned(Rc<Recorded>);

pub struct CannedBody(Option<Vec<u8>>);

impl HttpBody for CannedBody {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpFailure> {
        Ok(self.0.take())
    }
}

impl HttpClient for Canned {
    type Body = CannedBody;
    async fn send(&self, request: &HttpRequest) -> Result<(ResponseHead, CannedBody), HttpFailure> {
        self.0.requests.borrow_mut().push(request.body.clone());
        self.0.sent.borrow_mut().push(request.clone());
        if self.0.answer_later.get() {
            // The answer comes a turn of the executor later: requests of checks running at once
            // are in flight together.
            yield_once().await;
        }
        let Some(reply) = self.0.replies.borrow_mut().pop_front() else {
            return Err(HttpFailure::Network("no network in tests".into()));
        };
        let head = ResponseHead {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
        };
        Ok((head, CannedBody(Some(reply.into_bytes()))))
    }
    async fn wait(&self, _: u64) {}
}

#[derive(Default)]
pub struct Recorded {
    pub posted: RefCell<Vec<FromWorker>>,
    pub sessions: RefCell<HashMap<String, (SessionMeta, Shared)>>,
    pub corpus: RefCell<Vec<Passage>>,
    pub results: RefCell<Vec<CheckResult>>,
    pub unfinished: RefCell<Unfinished>,
    pub clock: Cell<f64>,
    pub gate: Rc<Gate>,
    pub replies: RefCell<std::collections::VecDeque<String>>,
    /// Whether the network answers a turn later (else at once).
    pub answer_later: Cell<bool>,
    pub requests: RefCell<Vec<String>>,
    pub sent: RefCell<Vec<HttpRequest>>,
    /// The ids of the sessions deleted ([`Host::end_session`], [`Host::record_results`]).
    pub ended: RefCell<Vec<String>>,
    /// Every write to storage of results and sessions, in order, one entry per host call
    /// (each is one transaction in the browser).
    pub writes: RefCell<Vec<String>>,
    /// The tab dies right after the first result is written: no later write lands.
    pub crash_after_first_result: Cell<bool>,
    pub crashed: Cell<bool>,
}

#[derive(Clone)]
pub struct TestHost {
    pub spawner: futures_executor::LocalSpawner,
    pub recorded: Rc<Recorded>,
}

impl Host for TestHost {
    type Client = Canned;
    type Store = Shared;
    fn post(&self, message: &FromWorker) {
        // Every message goes through its JSON, as postMessage carries it.
        let text = serde_json::to_string(message).unwrap();
        self.recorded.posted.borrow_mut().push(serde_json::from_str(&text).unwrap());
    }
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()>>>) {
        self.spawner.spawn_local(task).unwrap();
    }
    fn now_ms(&self) -> f64 {
        self.recorded.clock.set(self.recorded.clock.get() + 1.5);
        self.recorded.clock.get()
    }
    fn date(&self) -> String {
        "2026-01-02T03:04:05.000Z".to_owned()
    }
    fn client(&self) -> Canned {
        Canned(Rc::clone(&self.recorded))
    }
    /// Enough of WHATWG's reading for the tests' URLs (the worker asks the browser's parser):
    /// the scheme, and the host after any user info, up to a port or a path (`\` is one).
    fn url_parts(&self, url: &str) -> Option<(String, String)> {
        let (scheme, rest) = url.split_once("://")?;
        let authority = rest.split(['/', '\\', '?', '#']).next()?;
        let host = authority.rsplit('@').next()?.split(':').next()?;
        Some((format!("{scheme}:"), host.to_owned()))
    }
    fn new_session(&self, meta: &SessionMeta) -> Shared {
        let store = Shared(Rc::default(), Rc::clone(&self.recorded.gate));
        self.recorded
            .sessions
            .borrow_mut()
            .insert(meta.check.id.clone(), (meta.clone(), store.clone()));
        store
    }
    fn end_session(&self, id: &str) {
        self.recorded.writes.borrow_mut().push(format!("end {id}"));
        self.recorded.ended.borrow_mut().push(id.to_owned());
        self.recorded.sessions.borrow_mut().remove(id);
    }
    fn save_corpus(&self, corpus: &Arc<IndexedCorpus>) {
        *self.recorded.corpus.borrow_mut() = corpus.corpus().passages().to_vec();
    }
    /// Saved at once ([`TestHost::save_corpus`] writes before it returns).
    fn corpus_storage(&self, _: Option<&str>) -> verity_messages::CorpusStorage {
        verity_messages::CorpusStorage::Saved
    }
    fn record_results(&self, results: &[CheckResult], unfinished: &Unfinished) {
        if self.recorded.crashed.get() {
            return;
        }
        self.recorded.crashed.set(self.recorded.crash_after_first_result.get());
        *self.recorded.unfinished.borrow_mut() = unfinished.clone();
        for result in results {
            // One entry per result, though they land in one write.
            let write = format!("result {} and end {}", result.id, result.id);
            self.recorded.writes.borrow_mut().push(write);
            let mut stored = self.recorded.results.borrow_mut();
            stored.retain(|kept| kept.id != result.id);
            stored.push(result.clone());
            self.recorded.ended.borrow_mut().push(result.id.clone());
            self.recorded.sessions.borrow_mut().remove(&result.id);
        }
    }
    fn forget_result(&self, id: &str) {
        self.recorded.writes.borrow_mut().push(format!("forget {id}"));
        self.recorded.results.borrow_mut().retain(|kept| kept.id != id);
    }
    fn clear_results(&self) {
        self.recorded.writes.borrow_mut().push("clear results".to_owned());
        self.recorded.results.borrow_mut().clear();
    }
    fn save_unfinished(&self, unfinished: &Unfinished) {
        if self.recorded.crashed.get() {
            return;
        }
        *self.recorded.unfinished.borrow_mut() = unfinished.clone();
    }
}

pub fn new_engine() -> (Engine<TestHost>, LocalPool, Rc<Recorded>) {
    let pool = LocalPool::new();
    let recorded = Rc::new(Recorded::default());
    let host = TestHost { spawner: pool.spawner(), recorded: Rc::clone(&recorded) };
    (Engine::new(host), pool, recorded)
}

pub fn started() -> (Engine<TestHost>, LocalPool, Rc<Recorded>) {
    let (engine, mut pool, recorded) = new_engine();
    pool.run_until(engine.start(Restored::default()));
    (engine, pool, recorded)
}

pub fn take(recorded: &Recorded) -> Vec<FromWorker> {
    std::mem::take(&mut *recorded.posted.borrow_mut())
}

pub fn file(name: &str, text: &str) -> NamedText {
    NamedText { name: name.into(), text: text.into() }
}

pub fn last_corpus(posted: &[FromWorker]) -> verity_messages::CorpusSummary {
    posted
        .iter()
        .rev()
        .find_map(|m| match m {
            FromWorker::Corpus { corpus } => Some(corpus.clone()),
            _ => None,
        })
        .expect("a corpus message")
}

pub fn request(id: &str, claim: &str) -> CheckRequest {
    CheckRequest::claim(id, claim)
}

pub fn finished(posted: &[FromWorker]) -> Vec<CheckResult> {
    posted
        .iter()
        .filter_map(|m| match m {
            FromWorker::Finished { result } => Some(result.clone()),
            _ => None,
        })
        .collect()
}

/// The page goes away once check `id`'s session has stored its first response: runs the
/// tasks until then (the store's writes let through one at a time), and returns the session's
/// record and store as they are.
pub fn stop_after_first_response(
    recorded: &Recorded,
    pool: &mut LocalPool,
    id: &str,
) -> (SessionMeta, Shared) {
    let responses =
        |store: &Shared| store.0.log().to_jsonl().matches("\"type\":\"response\"").count();
    recorded.gate.close_after(0);
    for _ in 0..20 {
        recorded.gate.allow(1);
        pool.run_until_stalled();
        let stored = recorded.sessions.borrow().get(id).map(|(_, store)| responses(store));
        if stored == Some(1) {
            break;
        }
    }
    let (meta, store) = recorded.sessions.borrow().get(id).cloned().unwrap();
    assert_eq!(responses(&store), 1, "{}", store.0.log().to_jsonl());
    (meta, store)
}

/// How many checks were in flight at most: started at their first progress, ended at
/// `Finished`.
pub fn max_in_flight(posted: &[FromWorker]) -> usize {
    let (mut open, mut max) = (Vec::<String>::new(), 0);
    for message in posted {
        match message {
            FromWorker::Progress { id, .. } if !open.contains(id) => {
                open.push(id.clone());
                max = max.max(open.len());
            }
            FromWorker::Finished { result } => open.retain(|id| *id != result.id),
            _ => {}
        }
    }
    max
}

/// An OpenAI chat completion (not streamed) whose message calls `name` with `arguments`.
pub fn completion(id: &str, name: &str, arguments: &serde_json::Value) -> String {
    json!({"id": "x", "object": "chat.completion", "model": "m",
           "choices": [{"index": 0, "finish_reason": "tool_calls",
                        "message": {"role": "assistant", "content": null,
                                    "tool_calls": [{"id": id, "type": "function",
                                                    "function": {"name": name,
                                                                 "arguments": arguments.to_string()}}]}}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    .to_string()
}

/// A model's answers to a check over the demo corpus: the assessment (call `a1`: supported,
/// citing the corpus's first passage) and the summary (call `s1`).
pub fn demo_answers(corpus: &IndexedCorpus) -> (String, String) {
    let cited = corpus.corpus().passages()[0].text.clone();
    let assessment = completion(
        "a1",
        "record_assessment",
        &json!({"verdict": "supported", "confidence": 0.9, "citations": [cited]}),
    );
    (assessment, completion("s1", "submit", &json!({"text": "The bridge opened in 1937."})))
}

pub fn step_config() -> serde_json::Value {
    json!({"kind": "step", "prompt": "Convert 3 km to miles.",
           "schema": {"type": "object", "required": ["miles"],
                      "properties": {"miles": {"type": "number"}}},
           "tools": [{"name": "convert", "description": "Converts kilometres to miles.",
                      "parameters": {"type": "object", "required": ["km"],
                                     "properties": {"km": {"type": "number"}}}}]})
}

pub fn step_finished(posted: &[FromWorker]) -> Option<verity_messages::StepOutcome> {
    posted.iter().find_map(|m| match m {
        FromWorker::StepFinished { outcome, .. } => Some(outcome.clone()),
        _ => None,
    })
}

/// A failed result as the page or storage may hold it: no citations, no provenance, and only
/// the failure's `kind` and `message`.
pub fn failed_result(id: &str, claim: &str, kind: &str, message: &str) -> CheckResult {
    CheckResult {
        id: id.into(),
        claim: claim.into(),
        outcome: Outcome::Failed { failure: json!({"kind": kind, "message": message}) },
        cited: Vec::new(),
        provenance: None,
    }
}

/// The claim most checks make: the demo corpus supports it.
pub const BRIDGE_OPENED: &str = "The Golden Gate Bridge opened to pedestrians in 1937.";

/// A started engine with the demo corpus loaded (what that posted is left to [`take`]).
pub fn with_demo() -> (Engine<TestHost>, LocalPool, Rc<Recorded>) {
    let (engine, pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    (engine, pool, recorded)
}

/// A page's `check` message ([`ToWorker::Check`], by `.into()`), as most tests send it: offline,
/// one check at a time, over the main corpus, with no spending limit. Each setter changes one
/// of those.
#[derive(Debug)]
#[must_use]
pub struct Check {
    checks: Vec<CheckRequest>,
    provider: ProviderChoice,
    concurrency: usize,
    corpus: Option<String>,
    budget: Option<f64>,
}

/// The `check` message of `checks` (made by [`request`]); see [`Check`].
pub fn check(checks: impl IntoIterator<Item = CheckRequest>) -> Check {
    Check {
        checks: checks.into_iter().collect(),
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    }
}

impl Check {
    pub fn provider(mut self, provider: impl Into<ProviderChoice>) -> Self {
        self.provider = provider.into();
        self
    }
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }
    /// Checks against the named corpus ([`ToWorker::AddToCorpus`]).
    pub fn corpus(mut self, name: &str) -> Self {
        self.corpus = Some(name.to_owned());
        self
    }
    /// The run's spending limit, in US dollars.
    pub fn budget(mut self, dollars: f64) -> Self {
        self.budget = Some(dollars);
        self
    }
}

impl From<Check> for ToWorker {
    fn from(check: Check) -> Self {
        let Check { checks, provider, concurrency, corpus, budget } = check;
        ToWorker::Check { checks, provider, concurrency, corpus, budget }
    }
}

/// The tests' provider ([`ProviderChoice`], by `.into()`): OpenAI's API at
/// `https://mock.test/v1` (what it is sent is answered by `Recorded::replies`), not streamed,
/// with no key and no price unless set.
#[derive(Debug)]
#[must_use]
pub struct Mock {
    config: Value,
}

pub fn mock() -> Mock {
    Mock {
        config: json!({"api": "openai", "baseUrl": "https://mock.test/v1", "model": "m",
                       "stream": false}),
    }
}

impl Mock {
    pub fn key(mut self, key: &str) -> Self {
        self.config["apiKey"] = json!(key);
        self
    }
    /// $100,000 a million input tokens: each canned response (10 input tokens) costs $1.00.
    pub fn priced(mut self) -> Self {
        self.config["price"] = json!({"input": 100_000, "output": 0});
        self
    }
}

impl From<Mock> for ProviderChoice {
    fn from(mock: Mock) -> Self {
        ProviderChoice::Network { config: mock.config }
    }
}

impl Shared {
    /// A store holding `log` (a session as storage kept it), with writes never held back.
    pub fn from_log(log: verity_core::Log) -> Self {
        Shared(Rc::new(MemoryStore::from_log(log)), Rc::default())
    }
}

/// A new engine started over what storage kept ([`Restored`]), as after a reload: nothing
/// unless the setters add it. The canned replies are in place before it starts, since a
/// resumed check may send its request at once.
#[must_use]
pub struct Reload {
    restored: Restored<Shared>,
    replies: Vec<String>,
}

pub fn reload() -> Reload {
    Reload { restored: Restored::default(), replies: Vec::new() }
}

impl Reload {
    pub fn items(mut self, items: Vec<Passage>) -> Self {
        self.restored.items = items;
        self
    }
    pub fn results(mut self, results: Vec<CheckResult>) -> Self {
        self.restored.results = results;
        self
    }
    /// A session of a check that was running.
    pub fn session(mut self, meta: SessionMeta, store: Shared) -> Self {
        self.restored.sessions.push(StoredSession { meta, store });
        self
    }
    pub fn unfinished(mut self, unfinished: Unfinished) -> Self {
        self.restored.unfinished = unfinished;
        self
    }
    pub fn unreadable(mut self, unreadable: Vec<Unreadable>) -> Self {
        self.restored.unreadable = unreadable;
        self
    }
    /// The network's answers, in order ([`Recorded::replies`]).
    pub fn replies(mut self, replies: impl IntoIterator<Item = String>) -> Self {
        self.replies.extend(replies);
        self
    }
    /// The new engine, once [`Engine::start`] has returned (its tasks may still have work).
    pub fn start(self) -> (Engine<TestHost>, LocalPool, Rc<Recorded>) {
        let (engine, mut pool, recorded) = new_engine();
        recorded.replies.borrow_mut().extend(self.replies);
        pool.run_until(engine.start(self.restored));
        (engine, pool, recorded)
    }
}
