//! The worker's engine on the host: corpus, scheduler, offline checks end to end, resume from
//! durable sessions, and the core's JSON read by the message crate's views.

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
    ClaimStage, Delta, Event, HttpBody, HttpClient, HttpFailure, HttpRequest, MemoryStore,
    ResponseHead, SessionError, StopReason, Store, Usage,
};
use verity_messages::{
    CheckRequest, CheckResult, EventView, FailureView, FromWorker, Item, NamedText, Outcome,
    ProviderChoice, ReportView, ToWorker,
};
use verity_worker::records::Unreadable;
use verity_worker::{Engine, Host, Restored, SessionMeta, StoredSession, Unfinished};

/// A store in memory whose writes take one turn of the executor, so checks interleave, and
/// wait while the test's [`Gate`] is closed.
#[derive(Clone, Default)]
struct Shared(Rc<MemoryStore>, Rc<Gate>);

/// How many more writes may land before the stores stall (`None`: no limit).
#[derive(Default)]
struct Gate {
    budget: Cell<Option<usize>>,
    wakers: RefCell<Vec<std::task::Waker>>,
}

impl Gate {
    fn close_after(&self, writes: usize) {
        self.budget.set(Some(writes));
    }
    /// Lets `writes` more writes land, waking the stalled ones.
    fn allow(&self, writes: usize) {
        self.budget.set(Some(writes));
        self.wakers.borrow_mut().drain(..).for_each(std::task::Waker::wake);
    }
    fn open(&self) {
        self.budget.set(None);
        self.wakers.borrow_mut().drain(..).for_each(std::task::Waker::wake);
    }
    async fn pass(&self) {
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
struct Canned(Rc<Recorded>);
struct CannedBody(Option<Vec<u8>>);
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
struct Recorded {
    posted: RefCell<Vec<FromWorker>>,
    sessions: RefCell<HashMap<String, (SessionMeta, Shared)>>,
    corpus: RefCell<Vec<Passage>>,
    results: RefCell<Vec<CheckResult>>,
    unfinished: RefCell<Unfinished>,
    clock: Cell<f64>,
    gate: Rc<Gate>,
    replies: RefCell<std::collections::VecDeque<String>>,
    /// Whether the network answers a turn later (else at once).
    answer_later: Cell<bool>,
    requests: RefCell<Vec<String>>,
    sent: RefCell<Vec<HttpRequest>>,
    /// The ids of the sessions deleted ([`Host::end_session`], [`Host::record_results`]).
    ended: RefCell<Vec<String>>,
    /// Every write to storage of results and sessions, in order, one entry per host call
    /// (each is one transaction in the browser).
    writes: RefCell<Vec<String>>,
    /// The tab dies right after the first result is written: no later write lands.
    crash_after_first_result: Cell<bool>,
    crashed: Cell<bool>,
}

#[derive(Clone)]
struct TestHost {
    spawner: futures_executor::LocalSpawner,
    recorded: Rc<Recorded>,
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

fn new_engine() -> (Engine<TestHost>, LocalPool, Rc<Recorded>) {
    let pool = LocalPool::new();
    let recorded = Rc::new(Recorded::default());
    let host = TestHost { spawner: pool.spawner(), recorded: Rc::clone(&recorded) };
    (Engine::new(host), pool, recorded)
}

fn started() -> (Engine<TestHost>, LocalPool, Rc<Recorded>) {
    let (engine, mut pool, recorded) = new_engine();
    pool.run_until(engine.start(Restored::default()));
    (engine, pool, recorded)
}

fn take(recorded: &Recorded) -> Vec<FromWorker> {
    std::mem::take(&mut *recorded.posted.borrow_mut())
}

fn file(name: &str, text: &str) -> NamedText {
    NamedText { name: name.into(), text: text.into() }
}

fn last_corpus(posted: &[FromWorker]) -> verity_messages::CorpusSummary {
    posted
        .iter()
        .rev()
        .find_map(|m| match m {
            FromWorker::Corpus { corpus } => Some(corpus.clone()),
            _ => None,
        })
        .expect("a corpus message")
}

fn check(id: &str, claim: &str) -> CheckRequest {
    CheckRequest { id: id.into(), claim: claim.into() }
}

fn finished(posted: &[FromWorker]) -> Vec<CheckResult> {
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
fn stop_after_first_response(
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

#[test]
fn ready_is_posted_with_an_empty_corpus() {
    let (_engine, _pool, recorded) = started();
    let posted = take(&recorded);
    assert!(matches!(&posted[..], [FromWorker::Ready { corpus, results, resumed, queued }]
        if corpus.items == 0 && corpus.id.is_none() && results.is_empty() && resumed.is_empty()
            && queued.is_empty()));
}

#[test]
fn files_are_added_whole_or_refused_naming_file_and_line() {
    let (engine, _pool, recorded) = started();
    take(&recorded);
    engine.handle(ToWorker::AddFiles {
        files: vec![
            file("notes.txt", "First paragraph.\n\nSecond paragraph."),
            file("bad.jsonl", "{\"id\": \"a\", \"text\": \"fine\"}\n{\"id\": \"b\"}\n"),
            file("more.jsonl", "{\"id\": \"x1\", \"text\": \"An item.\"}\n"),
        ],
    });
    let posted = take(&recorded);
    let rejected: Vec<_> = posted
        .iter()
        .filter_map(|m| match m {
            FromWorker::FileRejected { file, line, message } => Some((file, line, message)),
            _ => None,
        })
        .collect();
    assert_eq!(rejected.len(), 1, "{posted:?}");
    assert_eq!(rejected[0].0, "bad.jsonl");
    assert_eq!(*rejected[0].1, Some(2));
    let summary = last_corpus(&posted);
    assert_eq!(summary.items, 3);
    assert!(summary.indexed && summary.index_ms.is_some(), "indexed right away: {summary:?}");
    assert!(summary.id.as_deref().is_some_and(|id| id.starts_with("sha256:")));
    assert_eq!(recorded.corpus.borrow().len(), 3, "saved");

    // An id another file already gave: the whole file is refused, the corpus unchanged.
    engine.handle(ToWorker::AddFiles {
        files: vec![file(
            "again.json",
            r#"[{"id": "new", "text": "n"}, {"id": "x1", "text": "dup"}]"#,
        )],
    });
    let posted = take(&recorded);
    assert!(
        matches!(&posted[..], [FromWorker::FileRejected { file, message, .. }]
        if file == "again.json" && message.contains("\"x1\"") && message.contains("already")),
        "{posted:?}"
    );
    assert_eq!(engine.corpus().corpus().len(), 3);
    // Items as data, the same rule.
    engine.handle(ToWorker::AddItems { items: vec![Item { id: "x1".into(), text: "t".into() }] });
    assert!(matches!(&take(&recorded)[..], [FromWorker::FileRejected { .. }]));
}

#[test]
fn items_are_removed_cleared_and_listed_in_pages() {
    let (engine, _pool, recorded) = started();
    let items = (0..25)
        .map(|i| Item {
            id: format!("item-{i:02}"),
            text: if i % 5 == 0 { format!("The Zebra number {i}") } else { format!("plain {i}") },
        })
        .collect();
    engine.handle(ToWorker::AddItems { items });
    take(&recorded);
    engine.handle(ToWorker::ListItems { query: String::new(), offset: 20, limit: 10 });
    engine.handle(ToWorker::ListItems { query: "zEBRA".into(), offset: 1, limit: 2 });
    engine.handle(ToWorker::ListItems { query: "ITEM-07".into(), offset: 0, limit: 10 });
    let posted = take(&recorded);
    let pages: Vec<(usize, Vec<String>)> = posted
        .iter()
        .filter_map(|m| match m {
            FromWorker::Items { total, items, .. } => {
                Some((*total, items.iter().map(|i| i.id.clone()).collect()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(pages[0].0, 25);
    assert_eq!(pages[0].1, ["item-20", "item-21", "item-22", "item-23", "item-24"]);
    assert_eq!(pages[1], (5, vec!["item-05".to_owned(), "item-10".to_owned()]));
    assert_eq!(pages[2], (1, vec!["item-07".to_owned()]));

    engine.handle(ToWorker::RemoveItems { ids: vec!["item-00".into(), "nope".into()] });
    assert_eq!(last_corpus(&take(&recorded)).items, 24);
    engine.handle(ToWorker::ClearCorpus);
    let summary = last_corpus(&take(&recorded));
    assert_eq!((summary.items, summary.bytes, summary.id), (0, 0, None));
    assert!(recorded.corpus.borrow().is_empty());
}

/// A page message with the largest numbers a page can send (`u32::MAX`, which is `usize::MAX`
/// on wasm32) is answered, never a trap: one such `listItems` once stopped the engine of every
/// tab (an overflow in the index's one-word page).
#[test]
fn a_page_of_any_size_from_any_offset_is_answered() {
    let (engine, _pool, recorded) = started();
    let items = (0..30)
        .map(|i| Item { id: format!("item-{i:02}"), text: format!("zebra number {i}") })
        .collect();
    engine.handle(ToWorker::AddItems { items });
    take(&recorded);
    for (query, offset) in
        [("zebra", 1), ("zebra number", 1), ("item", 5), ("", 7), ("zebra", usize::MAX)]
    {
        engine.handle(ToWorker::ListItems { query: query.into(), offset, limit: usize::MAX });
        let posted = take(&recorded);
        let Some(FromWorker::Items { total, items, .. }) = posted.last() else {
            panic!("{query:?} from {offset}: no page in {posted:?}")
        };
        assert_eq!(*total, 30, "{query:?}");
        assert_eq!(items.len(), 30usize.saturating_sub(offset), "{query:?} from {offset}");
    }
}

/// One page message of the corpus kind, with any text and any numbers.
fn page_message() -> impl proptest::strategy::Strategy<Value = ToWorker> {
    use proptest::prelude::*;
    // Words from a small vocabulary (so that searches find items), or any short text.
    let words = proptest::collection::vec(
        proptest::sample::select(vec!["zebra", "Zebras", "tower", "the", "a", "1", "-", ","]),
        0..5,
    )
    .prop_map(|words| words.join(" "));
    let text = prop_oneof![words, "[a-zA-Z0-9 ,.;:'\\-]{0,24}"].boxed();
    let number = prop_oneof![0usize..40, Just(usize::MAX), Just(usize::MAX - 1), any::<usize>()];
    let item = (text.clone(), text.clone()).prop_map(|(id, text)| Item { id, text });
    prop_oneof![
        proptest::collection::vec(item.clone(), 0..12)
            .prop_map(|items| ToWorker::AddItems { items }),
        proptest::collection::vec(text.clone(), 0..4).prop_map(|ids| ToWorker::RemoveItems { ids }),
        Just(ToWorker::ClearCorpus),
        (text.clone(), number.clone(), number)
            .prop_map(|(query, offset, limit)| ToWorker::ListItems { query, offset, limit }),
        (text.clone(), proptest::collection::vec(item, 0..6))
            .prop_map(|(name, items)| { ToWorker::AddToCorpus { name, items, files: Vec::new() } }),
        text.clone().prop_map(|name| ToWorker::DropCorpus { name }),
        text.clone().prop_map(|id| ToWorker::Cancel { id }),
        text.prop_map(|id| ToWorker::ForgetResult { id }),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
    /// Any sequence of corpus messages from a page leaves the engine answering: every
    /// `listItems` gets its page (no more items than asked for or than match), and the engine
    /// still lists after them.
    #[test]
    fn page_messages_never_trap_the_engine(messages in proptest::collection::vec(page_message(), 1..24)) {
        let (engine, mut pool, recorded) = started();
        for message in messages {
            let limit = match &message {
                ToWorker::ListItems { limit, .. } => Some(*limit),
                _ => None,
            };
            engine.handle(message);
            pool.run_until_stalled();
            let posted = take(&recorded);
            if let Some(limit) = limit {
                let page = posted.iter().rev().find_map(|m| match m {
                    FromWorker::Items { total, items, .. } => Some((*total, items.len())),
                    _ => None,
                });
                let (total, shown) = page.expect("every listItems is answered");
                proptest::prop_assert!(shown <= limit && shown <= total);
            }
        }
        engine.handle(ToWorker::ListItems { query: String::new(), offset: 0, limit: 1 });
        let answered = take(&recorded).iter().any(|m| matches!(m, FromWorker::Items { .. }));
        proptest::prop_assert!(answered, "the engine still lists");
    }
}

/// A re-run's old result is forgotten, so it does not come back after a reload.
#[test]
fn a_forgotten_result_is_not_restored() {
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    for id in ["c1", "c2"] {
        engine.handle(ToWorker::Check {
            checks: vec![check(id, "The Golden Gate Bridge opened to pedestrians in 1937.")],
            provider: ProviderChoice::Offline,
            concurrency: 1,
            corpus: None,
            budget: None,
        });
    }
    pool.run_until_stalled();
    assert_eq!(recorded.results.borrow().len(), 2);
    engine.handle_json(r#"{"type": "forgetResult", "id": "c1"}"#);
    engine.handle(ToWorker::ForgetResult { id: "unknown".into() });
    let kept: Vec<String> = recorded.results.borrow().iter().map(|r| r.id.clone()).collect();
    assert_eq!(kept, ["c2"]);
    let (engine, mut pool, after) = new_engine();
    pool.run_until(
        engine
            .start(Restored { results: recorded.results.borrow().clone(), ..Restored::default() }),
    );
    let posted = take(&after);
    assert!(matches!(&posted[0], FromWorker::Ready { results, .. }
        if results.len() == 1 && results[0].id == "c2"));
}

#[test]
fn the_demo_loads_with_claims_to_try() {
    let (engine, _pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let posted = take(&recorded);
    assert!((6..=10).contains(&last_corpus(&posted).items));
    assert!(posted.iter().any(|m| matches!(m, FromWorker::Demo { claims } if claims.len() == 3)));
    // Loading it again adds nothing twice.
    engine.handle(ToWorker::LoadDemo);
    assert!(!take(&recorded).iter().any(|m| matches!(m, FromWorker::FileRejected { .. })));
}

/// How many checks were in flight at most: started at their first progress, ended at
/// `Finished`.
fn max_in_flight(posted: &[FromWorker]) -> usize {
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

#[test]
fn the_scheduler_respects_concurrency_and_cancels_queued_checks() {
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    take(&recorded);
    let checks: Vec<_> = (1..=5)
        .map(|i| check(&format!("c{i}"), "The Golden Gate Bridge opened to pedestrians in 1937."))
        .collect();
    engine.handle(ToWorker::Check {
        checks,
        provider: ProviderChoice::Offline,
        concurrency: 2,
        corpus: None,
        budget: None,
    });
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
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    engine.handle(ToWorker::Check {
        checks: vec![check("c1", "The Golden Gate Bridge was designed to carry trains.")],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
    recorded.gate.close_after(2);
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
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
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
fn a_reload_mid_check_resumes_from_the_stored_session() {
    let claim = "The main span of the Golden Gate Bridge is 3,000 feet long.";
    // The uninterrupted run, for comparison.
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    engine.handle(ToWorker::Check {
        checks: vec![check("c1", claim)],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
    pool.run_until_stalled();
    let whole = finished(&take(&recorded)).remove(0);

    // Interrupted after a few steps: the page went away.
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    engine.handle(ToWorker::Check {
        checks: vec![check("c1", claim)],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
    recorded.gate.close_after(2);
    pool.run_until_stalled();
    assert!(finished(&recorded.posted.borrow()).is_empty(), "still running");
    let (meta, store) = recorded.sessions.borrow().get("c1").cloned().unwrap();
    let stored_log = store.0.log();
    assert!(stored_log.entries().len() >= 2, "{}", stored_log.to_jsonl());
    let responses_before = stored_log.to_jsonl().matches("\"type\":\"response\"").count();
    drop((engine, pool));

    let (engine, mut pool, recorded_after) = new_engine();
    let store = Shared(Rc::new(MemoryStore::from_log(stored_log)), Rc::default());
    pool.run_until(engine.start(Restored {
        items: recorded.corpus.borrow().clone(),
        results: Vec::new(),
        sessions: vec![StoredSession { meta, store: store.clone() }],
        unfinished: Unfinished::default(),
        unreadable: Vec::new(),
    }));
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
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let checks = claims.iter().enumerate().map(|(i, c)| check(&format!("q{}", i + 1), c)).collect();
    engine.handle(ToWorker::Check {
        checks,
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
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

    let (engine, mut pool, after) = new_engine();
    let store = Shared(Rc::new(MemoryStore::from_log(log)), Rc::default());
    pool.run_until(engine.start(Restored {
        items: recorded.corpus.borrow().clone(),
        results: recorded.results.borrow().clone(),
        sessions: vec![StoredSession { meta, store }],
        unfinished,
        unreadable: Vec::new(),
    }));
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
    let provider = |key: &str| ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": "https://mock.test/v1", "model": "m",
                       "stream": false, "apiKey": key}),
    };
    let claim = "The Golden Gate Bridge opened to pedestrians in 1937.";
    let (engine, _pool, _recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let corpus = engine.corpus();
    let unfinished = Unfinished {
        concurrency: 1,
        checks: vec![
            SessionMeta::new(&check("k1", claim), &provider("sk-remembered")),
            SessionMeta::new(&check("o1", claim), &ProviderChoice::Offline),
            SessionMeta::new(&check("k2", claim), &provider("sk-remembered")),
        ],
        budgets: Vec::new(),
    };
    assert!(!serde_json::to_string(&unfinished).unwrap().contains("sk-remembered"));

    let (engine, mut pool, recorded) = new_engine();
    let (assessment, summary) = demo_answers(&corpus);
    recorded.replies.borrow_mut().extend([assessment, summary]);
    pool.run_until(engine.start(Restored {
        items: corpus.corpus().passages().to_vec(),
        unfinished,
        ..Restored::default()
    }));
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
    let meta = SessionMeta::new(&check("c9", "A claim."), &provider);
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
    assert!(SessionMeta::new(&check("c8", "A claim."), &query_only).credentials_removed);

    // A session of a network check, interrupted before its first request.
    let (engine, mut pool, _recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let corpus = engine.corpus();
    let config = json!({"kind": "claim", "claim": "A claim.", "corpus": corpus.id().as_str()});
    let job = verity_core::Job::from_json(&config.to_string(), &[Arc::clone(&corpus)]).unwrap();
    let store = Shared::default();
    let mut session = verity_core::Session::start(job).unwrap();
    pool.run_until(session.sync(&store)).unwrap();
    drop((engine, pool));

    let (engine, mut pool, recorded) = new_engine();
    pool.run_until(engine.start(Restored {
        items: corpus.corpus().passages().to_vec(),
        results: Vec::new(),
        sessions: vec![StoredSession { meta, store }],
        unfinished: Unfinished::default(),
        unreadable: Vec::new(),
    }));
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
    let provider = |key: Option<&str>| {
        let mut config = json!({"api": "openai", "baseUrl": "https://mock.test/v1", "model": "m",
                                "stream": false});
        if let Some(key) = key {
            config["apiKey"] = json!(key);
        }
        ProviderChoice::Network { config }
    };
    let claim = "The Golden Gate Bridge opened to pedestrians in 1937.";
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let corpus = engine.corpus();
    let (assessment, summary) = demo_answers(&corpus);
    recorded.replies.borrow_mut().extend([assessment, summary.clone()]);
    engine.handle(ToWorker::Check {
        checks: vec![check("k1", claim)],
        provider: provider(Some("sk-remembered")),
        concurrency: 1,
        corpus: None,
        budget: None,
    });
    // The page goes away once the assessment's response is stored.
    let (meta, store) = stop_after_first_response(&recorded, &mut pool, "k1");
    assert!(!serde_json::to_string(&meta).unwrap().contains("sk-remembered"));
    let log = store.0.log();
    drop((engine, pool));

    let (engine, mut pool, recorded_after) = new_engine();
    recorded_after.replies.borrow_mut().push_back(summary);
    let store = Shared(Rc::new(MemoryStore::from_log(log)), Rc::default());
    pool.run_until(engine.start(Restored {
        items: corpus.corpus().passages().to_vec(),
        results: Vec::new(),
        sessions: vec![StoredSession { meta, store }],
        unfinished: Unfinished::default(),
        unreadable: Vec::new(),
    }));
    engine.handle(ToWorker::Credentials { provider: Some(provider(Some("sk-remembered"))) });
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
            _ => {}
        }
    }
    let compacted = serde_json::to_value(Event::Compacted { dropped: 2 }).unwrap();
    assert_eq!(serde_json::from_value::<EventView>(compacted).unwrap(), EventView::Other);
}

/// The 26,259-passage VitaminC corpus loads and indexes through the engine (when present).
#[test]
fn the_vitaminc_corpus_loads_and_indexes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/vitaminc/corpus.jsonl");
    let Ok(text) = std::fs::read_to_string(path) else { return };
    let (engine, _pool, recorded) = started();
    take(&recorded);
    engine.handle(ToWorker::AddFiles { files: vec![file("corpus.jsonl", &text)] });
    let posted = take(&recorded);
    assert!(!posted.iter().any(|m| matches!(m, FromWorker::FileRejected { .. })), "{posted:?}");
    let summary = last_corpus(&posted);
    assert_eq!(summary.items, 26_259);
    assert!(summary.indexed);
    engine.handle(ToWorker::ListItems { query: " THE ".into(), offset: 0, limit: 20 });
    assert!(matches!(&take(&recorded)[..], [FromWorker::Items { items, .. }] if !items.is_empty()));
}

fn named(posted: &[FromWorker], wanted: &str) -> verity_messages::CorpusSummary {
    posted
        .iter()
        .find_map(|m| match m {
            FromWorker::NamedCorpus { name, corpus } if name == wanted => Some(corpus.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no NamedCorpus {wanted:?} in {posted:?}"))
}

/// The embedding's corpora: named, in memory, all or nothing, never the main corpus.
#[test]
fn named_corpora_are_separate_and_checked_against() {
    let (engine, mut pool, recorded) = started();
    take(&recorded);
    engine.handle_json(
        &json!({"type": "addToCorpus", "name": "element-1",
                "items": [{"id": "t1", "text": "The Eiffel Tower is 330 metres tall and stands in Paris."}]})
        .to_string(),
    );
    let summary = named(&take(&recorded), "element-1");
    assert_eq!((summary.items, summary.indexed), (1, true));
    // A bad file is refused naming its line; the corpus keeps what it had.
    engine.handle(ToWorker::AddToCorpus {
        name: "element-1".into(),
        items: vec![Item { id: "t2".into(), text: "More text.".into() }],
        files: vec![file("more.jsonl", "{\"id\": \"t3\", \"text\": \"ok\"}\nnot json\n")],
    });
    let posted = take(&recorded);
    let [FromWorker::NamedCorpusRejected { name, file: bad, line, .. }] = &posted[..] else {
        panic!("{posted:?}")
    };
    assert_eq!((name.as_str(), bad.as_str(), *line), ("element-1", "more.jsonl", Some(2)));
    engine.handle(ToWorker::AddToCorpus {
        name: "element-1".into(),
        items: Vec::new(),
        files: vec![file("more.txt", "Paris is the capital of France.\n\nIt has many bridges.")],
    });
    assert_eq!(named(&take(&recorded), "element-1").items, 3, "t2 and t3 were not kept");
    assert!(recorded.corpus.borrow().is_empty(), "the main corpus is neither changed nor saved");

    engine.handle(ToWorker::Check {
        checks: vec![check("e1", "The Eiffel Tower stands in Paris.")],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: Some("element-1".into()),
        budget: None,
    });
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let Outcome::Report { report } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(report["assessment"]["verdict"], "supported", "{report}");
    assert_eq!(done[0].cited[0].id, "t1");

    engine.handle(ToWorker::DropCorpus { name: "element-1".into() });
    engine.handle(ToWorker::Check {
        checks: vec![check("e2", "The Eiffel Tower stands in Paris.")],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: Some("element-1".into()),
        budget: None,
    });
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(failure["kind"], "config");
    assert!(failure["message"].as_str().unwrap().contains("element-1"), "{failure}");
}

/// An OpenAI chat completion (not streamed) whose message calls `name` with `arguments`.
fn completion(id: &str, name: &str, arguments: &serde_json::Value) -> String {
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
fn demo_answers(corpus: &IndexedCorpus) -> (String, String) {
    let cited = corpus.corpus().passages()[0].text.clone();
    let assessment = completion(
        "a1",
        "record_assessment",
        &json!({"verdict": "supported", "confidence": 0.9, "citations": [cited]}),
    );
    (assessment, completion("s1", "submit", &json!({"text": "The bridge opened in 1937."})))
}

fn step_config() -> serde_json::Value {
    json!({"kind": "step", "prompt": "Convert 3 km to miles.",
           "schema": {"type": "object", "required": ["miles"],
                      "properties": {"miles": {"type": "number"}}},
           "tools": [{"name": "convert", "description": "Converts kilometres to miles.",
                      "parameters": {"type": "object", "required": ["km"],
                                     "properties": {"km": {"type": "number"}}}}]})
}

fn mock_provider() -> ProviderChoice {
    ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": "http://mock.test/v1", "model": "m",
                       "stream": false}),
    }
}

fn step_finished(posted: &[FromWorker]) -> Option<verity_messages::StepOutcome> {
    posted.iter().find_map(|m| match m {
        FromWorker::StepFinished { outcome, .. } => Some(outcome.clone()),
        _ => None,
    })
}

/// A step's tools run in the page: the call is posted with validated arguments, the page's
/// answer reaches the model, and the submitted value ends the step.
#[test]
fn a_step_calls_the_pages_tools_with_validated_arguments() {
    let (engine, mut pool, recorded) = started();
    recorded.replies.borrow_mut().extend([
        completion("c0", "convert", &json!({"km": "three"})), // invalid: never reaches the page
        completion("c1", "convert", &json!({"km": 3})),
        completion("c2", "submit", &json!({"miles": 1.864})),
    ]);
    take(&recorded);
    engine.handle(ToWorker::RunStep {
        id: "s1".into(),
        config: step_config(),
        provider: mock_provider(),
    });
    pool.run_until_stalled();
    let posted = take(&recorded);
    let calls: Vec<_> = posted
        .iter()
        .filter_map(|m| match m {
            FromWorker::ToolCall { id, call, tool, arguments } => {
                Some((id.clone(), call.clone(), tool.clone(), arguments.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(calls, [("s1".into(), "c1".into(), "convert".into(), json!({"km": 3}))]);
    assert!(step_finished(&posted).is_none(), "the step waits for the page");
    assert!(posted.iter().any(|m| matches!(m, FromWorker::Progress { id, .. } if id == "s1")));

    engine.handle_json(
        &json!({"type": "toolResult", "id": "s1", "call": "c1", "content": "1.864 miles"})
            .to_string(),
    );
    pool.run_until_stalled();
    let posted = take(&recorded);
    assert_eq!(
        step_finished(&posted),
        Some(verity_messages::StepOutcome::Value { value: json!({"miles": 1.864}) })
    );
    let requests = recorded.requests.borrow();
    assert_eq!(requests.len(), 3);
    assert!(requests[2].contains("1.864 miles"), "the page's answer reached the model");
    assert_eq!(engine.load(), (0, 0));
}

#[test]
fn a_step_waiting_for_a_page_tool_is_cancelled_and_bad_configs_fail_typed() {
    let (engine, mut pool, recorded) = started();
    recorded.replies.borrow_mut().push_back(completion("c1", "convert", &json!({"km": 3})));
    engine.handle(ToWorker::RunStep {
        id: "s1".into(),
        config: step_config(),
        provider: mock_provider(),
    });
    pool.run_until_stalled();
    assert!(take(&recorded).iter().any(|m| matches!(m, FromWorker::ToolCall { .. })));
    engine.handle(ToWorker::Cancel { id: "s1".into() });
    pool.run_until_stalled();
    let Some(verity_messages::StepOutcome::Failed { failure }) = step_finished(&take(&recorded))
    else {
        panic!("a failure")
    };
    assert_eq!(failure["kind"], "cancelled");
    assert_eq!(failure["spent"]["requests"], 1);
    // A late answer is ignored.
    engine.handle(ToWorker::ToolResult {
        id: "s1".into(),
        call: "c1".into(),
        content: "late".into(),
        is_error: false,
    });
    assert!(take(&recorded).is_empty());

    let mut config = step_config();
    config["maxTurns"] = json!(0);
    engine.handle(ToWorker::RunStep { id: "s2".into(), config, provider: mock_provider() });
    let Some(verity_messages::StepOutcome::Failed { failure }) = step_finished(&take(&recorded))
    else {
        panic!("a failure")
    };
    assert_eq!(failure["kind"], "config");
    assert!(failure["message"].as_str().unwrap().starts_with("maxTurns"), "{failure}");
}

/// A key never goes over plain HTTP off loopback: a check or a step whose provider would send
/// it so is refused before it starts (kind `config`, the reason named, nothing sent), judged by
/// the host's reading of the URL; loopback and https go ahead.
#[test]
fn a_key_over_plain_http_off_loopback_is_refused_before_anything_is_sent() {
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let claim = "The Golden Gate Bridge opened to pedestrians in 1937.";
    let keyed = |base_url: &str| ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": base_url, "model": "m", "stream": false,
                       "apiKey": "sk-secret"}),
    };
    for (id, base_url) in [("lan", "http://10.1.2.3/v1"), ("evil", "http://evil\\@127.0.0.1:9/v1")]
    {
        engine.handle(ToWorker::Check {
            checks: vec![check(id, claim)],
            provider: keyed(base_url),
            concurrency: 1,
            corpus: None,
            budget: None,
        });
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

/// The Markdown export is the worker's: the page sends its results and gets the document.
#[test]
fn results_are_exported_as_markdown_by_the_worker() {
    let (engine, _pool, recorded) = started();
    take(&recorded);
    let result = CheckResult {
        id: "c1".into(),
        claim: "See https://evil.example.".into(),
        outcome: Outcome::Failed { failure: json!({"kind": "cancelled", "message": "stopped"}) },
        cited: Vec::new(),
        provenance: None,
    };
    engine.handle_json(&json!({"type": "exportMarkdown", "results": [result]}).to_string());
    let posted = take(&recorded);
    let [FromWorker::Markdown { text }] = posted.as_slice() else { panic!("{posted:?}") };
    assert!(text.starts_with("# Verity results\n"), "{text}");
    assert!(text.contains("## See https\\://evil\\.example\\."), "{text}");
    assert!(text.contains("**Failed** (`cancelled`): stopped"), "{text}");
}

#[test]
fn a_page_that_connects_mid_check_is_greeted_with_the_state_and_the_events_so_far() {
    // Another tab connecting to the one engine of the origin: it is shown what every page was.
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let checks: Vec<_> = (1..=3)
        .map(|i| check(&format!("c{i}"), "The Golden Gate Bridge opened to pedestrians in 1937."))
        .collect();
    engine.handle(ToWorker::Check {
        checks,
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
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
fn a_check_taken_over_by_another_engine_saves_nothing_and_keeps_its_session() {
    // Two engines over one storage (tabs that do not share one): the second resumes the
    // check and takes its lease; the first, fenced, must not delete the new owner's session
    // nor save a result over the new owner's.
    let claim = "The main span of the Golden Gate Bridge is 3,000 feet long.";
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    engine.handle(ToWorker::Check {
        checks: vec![check("c1", claim)],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
    recorded.gate.close_after(1);
    pool.run_until_stalled();
    let (meta, store) = recorded.sessions.borrow().get("c1").cloned().unwrap();
    drop((engine, pool));

    // The first engine resumes it (taking the lease), and is paused mid-check.
    let (first, mut first_pool, first_recorded) = new_engine();
    let gate = Rc::new(Gate::default());
    let shared = Shared(Rc::clone(&store.0), Rc::clone(&gate));
    gate.close_after(0);
    first_pool.run_until(first.start(Restored {
        items: recorded.corpus.borrow().clone(),
        results: Vec::new(),
        sessions: vec![StoredSession { meta: meta.clone(), store: shared }],
        unfinished: Unfinished::default(),
        unreadable: Vec::new(),
    }));
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
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    engine.handle(ToWorker::Check {
        checks: vec![check("c1", claim)],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
    pool.run_until_stalled();
    assert_eq!(finished(&take(&recorded)).len(), 1);
    assert_eq!(*recorded.writes.borrow(), ["result c1 and end c1"]);

    // A session that cannot resume (its corpus is gone) waits for it; cancelled by the person,
    // it ends with a result, in one write too.
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    engine.handle(ToWorker::Check {
        checks: vec![check("c2", claim)],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
    recorded.gate.close_after(2);
    pool.run_until_stalled();
    let (meta, store) = recorded.sessions.borrow().get("c2").cloned().unwrap();
    drop((engine, pool));
    let (engine, mut pool, after) = new_engine();
    let store = Shared(Rc::new(MemoryStore::from_log(store.0.log())), Rc::default());
    pool.run_until(
        engine.start(Restored {
            sessions: vec![StoredSession { meta, store }],
            ..Restored::default()
        }),
    );
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
    let (engine, mut pool, recorded) = new_engine();
    let kept = CheckResult {
        id: "r1".into(),
        claim: "A claim.".into(),
        outcome: Outcome::Failed { failure: json!({"kind": "cancelled", "message": "m"}) },
        cited: Vec::new(),
        provenance: None,
    };
    pool.run_until(engine.start(Restored {
        results: vec![kept],
        unreadable: vec![
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
        ],
        ..Restored::default()
    }));
    let posted = take(&recorded);
    assert!(matches!(&posted[0], FromWorker::Ready { results, .. } if results.len() == 1));
    let [_, FromWorker::Error { message }] = &posted[..] else { panic!("{posted:?}") };
    assert!(message.contains("result r3 (EOF while parsing)"), "{message}");
    assert!(message.contains("the corpus (it is not text)"), "{message}");
    assert!(message.contains("everything else was restored"), "{message}");
}

/// A failed result carries what to do about it (`advice`, the words for its kind), written by
/// the worker, so the page shows it without carrying the words: in `Finished`, in what is
/// saved, and in the results restored at start (saved before results carried it).
#[test]
fn a_failed_result_carries_its_advice_from_the_worker() {
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    engine.handle(ToWorker::Check {
        checks: vec![check("c1", "A claim."), check("c2", "Another claim.")],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
    engine.handle(ToWorker::Cancel { id: "c2".into() });
    pool.run_until_stalled();
    let cancelled = finished(&take(&recorded)).into_iter().find(|r| r.id == "c2").unwrap();
    let Outcome::Failed { failure } = &cancelled.outcome else { panic!("{cancelled:?}") };
    let advice = "The check was cancelled. Re-run it when you like.";
    assert_eq!(failure["advice"], advice);
    let saved = recorded.results.borrow().iter().find(|r| r.id == "c2").cloned().unwrap();
    assert_eq!(saved, cancelled);

    let (engine, mut pool, after) = new_engine();
    let older = CheckResult {
        id: "c3".into(),
        claim: "A claim.".into(),
        outcome: Outcome::Failed { failure: json!({"kind": "no-new-evidence", "message": "m"}) },
        cited: Vec::new(),
        provenance: None,
    };
    pool.run_until(engine.start(Restored { results: vec![older], ..Restored::default() }));
    let posted = take(&after);
    let FromWorker::Ready { results, .. } = &posted[0] else { panic!("{posted:?}") };
    let Outcome::Failed { failure } = &results[0].outcome else { panic!("{results:?}") };
    assert!(failure["advice"].as_str().unwrap().starts_with("Research found nothing new"));
    let view: FailureView = serde_json::from_value(failure.clone()).unwrap();
    assert_eq!(view.advice, failure["advice"].as_str().unwrap());
}

#[test]
fn the_pages_provider_settings_are_made_the_cores_provider_here_or_fail_the_checks_saying_why() {
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let claim = "The Golden Gate Bridge opened to pedestrians in 1937.";
    // The Provider section as the page keeps it: llama.cpp's preset with no model name.
    let settings = |model: &str| ProviderChoice::Settings {
        settings: json!({"kind": "openAi", "preset": "llamacpp", "baseUrl": "http://127.0.0.1:9/v1",
                         "openaiModel": model, "constrained": true, "limits": ["", "", ""]}),
    };
    engine.handle(ToWorker::Check {
        checks: vec![check("no-model", claim)],
        provider: settings(""),
        concurrency: 1,
        corpus: None,
        budget: None,
    });
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
    engine.handle(ToWorker::Check {
        checks: vec![check("model", claim)],
        provider: settings("local"),
        concurrency: 1,
        corpus: None,
        budget: None,
    });
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

/// Every result says where it came from: the provider's kind and base URL (never its key, nor
/// credentials in the URL), the model, the corpus by content id and size, the app's version
/// and the date by the host's clock; the exports carry it.
#[test]
fn every_result_records_its_provenance_without_the_key() {
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let corpus = last_corpus(&take(&recorded));
    let claim = "The Golden Gate Bridge opened to pedestrians in 1937.";
    engine.handle(ToWorker::Check {
        checks: vec![check("offline", claim)],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
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
    engine.handle(ToWorker::Check {
        checks: vec![check("network", claim)],
        provider: ProviderChoice::Network {
            config: json!({"api": "openai", "baseUrl": "https://me:pw@api.example/v1?key=sk-q",
                           "model": "m-1", "stream": false, "apiKey": "sk-secret"}),
        },
        concurrency: 1,
        corpus: None,
        budget: None,
    });
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
    engine.handle(ToWorker::Check {
        checks: vec![check("refused", claim)],
        provider: ProviderChoice::Settings {
            settings: json!({"kind": "openAi", "preset": "custom",
                             "baseUrl": "http://127.0.0.1:9/v1", "openaiModel": ""}),
        },
        concurrency: 1,
        corpus: None,
        budget: None,
    });
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

/// The CSV export is the worker's too: one row per result with its provenance, every cell
/// quoted, and no cell that a spreadsheet would run as a formula.
#[test]
fn results_are_exported_as_csv_by_the_worker_with_formulas_defused() {
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    engine.handle(ToWorker::Check {
        checks: vec![check(
            "c1",
            "=HYPERLINK(\"http://evil\") The Golden Gate Bridge opened in 1937.",
        )],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
    pool.run_until_stalled();
    let mut results = finished(&take(&recorded));
    results.push(CheckResult {
        id: "c2".into(),
        claim: "@SUM(A1), \"quoted\"\nsecond line".into(),
        outcome: Outcome::Failed { failure: json!({"kind": "cancelled", "message": "-1+1"}) },
        cited: Vec::new(),
        provenance: None,
    });
    engine.handle_json(&json!({"type": "exportCsv", "results": results}).to_string());
    let posted = take(&recorded);
    let [FromWorker::Csv { text }] = posted.as_slice() else { panic!("{posted:?}") };
    let mut lines = text.split("\r\n");
    assert_eq!(
        lines.next(),
        Some(
            "\"id\",\"claim\",\"verdict\",\"failure kind\",\"confidence\",\"summary\",\
             \"cited ids\",\"provider\",\"base URL\",\"model\",\"corpus\",\"corpus items\",\
             \"app version\",\"date\""
        )
    );
    let row = lines.next().unwrap();
    assert!(row.starts_with("\"c1\",\"'=HYPERLINK(\"\"http://evil\"\") The Golden"), "{row}");
    assert!(row.contains(",\"supported\",\"\","), "{row}");
    assert!(row.contains("\"demo#"), "the cited ids: {row}");
    assert!(row.contains(",\"offline\",\"\",\"\",\"sha256:"), "{row}");
    assert!(row.ends_with(",\"2026-01-02T03:04:05.000Z\""), "{row}");
    assert_eq!(
        lines.next(),
        Some(
            "\"c2\",\"'@SUM(A1), \"\"quoted\"\"\nsecond line\",\"failed\",\"cancelled\",\"\",\"'-1+1\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\""
        )
    );
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

/// A run's spending limit: before each request the engine adds up what the run has spent
/// (at the model's price, typed in the app's settings), and once the limit is reached the check
/// that would request ends `budget`, saying what was spent, and so does each check still queued,
/// with nothing sent.
#[test]
fn a_run_stops_at_its_spending_limit_before_the_next_request() {
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let corpus = engine.corpus();
    let claim = "The Golden Gate Bridge opened to pedestrians in 1937.";
    // Each response reads 10 tokens: at $100,000 a million input tokens, $1.00 a response.
    let settings = ProviderChoice::Settings {
        settings: json!({"kind": "openAi", "preset": "custom", "baseUrl": "https://mock.test/v1",
                         "openaiModel": "m", "apiKey": "k",
                         "prices": [["input m", "100000"]], "budget": "1.50"}),
    };
    let (assessment, summary) = demo_answers(&corpus);
    recorded.replies.borrow_mut().extend([assessment.clone(), summary, assessment]);
    take(&recorded);
    engine.handle(ToWorker::Check {
        checks: vec![check("b1", claim), check("b2", claim), check("b3", claim)],
        provider: settings,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
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
    engine.handle(ToWorker::Check {
        checks: vec![check("m1", claim)],
        provider: ProviderChoice::Network {
            config: json!({"api": "openai", "baseUrl": "https://mock.test/v1", "model": "m",
                           "stream": false, "price": {"input": 100_000, "output": 0}}),
        },
        concurrency: 1,
        corpus: None,
        budget: Some(0.5),
    });
    pool.run_until_stalled();
    let done = finished(&take(&recorded));
    let Outcome::Failed { failure } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(failure["kind"], "budget", "{failure}");
    assert_eq!(failure["spent"]["requests"], 1, "{failure}");
    assert!(failure["message"].as_str().unwrap().ends_with("this check $1.0000"), "{failure}");
    assert_eq!(recorded.sent.borrow().len(), 3, "only the assessment was sent");
    // A limit that is no amount refuses the run.
    engine.handle(ToWorker::Check {
        checks: vec![check("z1", claim)],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: Some(0.0),
    });
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
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let claim = "The Golden Gate Bridge opened to pedestrians in 1937.";
    let unpriced = [
        json!({"api": "openai", "baseUrl": "https://api.openai.com/v1", "model": "m", "apiKey": "k"}),
        json!({"api": "anthropic", "model": "claude", "apiKey": "k"}),
    ];
    for config in unpriced {
        take(&recorded);
        engine.handle(ToWorker::Check {
            checks: vec![check("u1", claim), check("u2", claim)],
            provider: ProviderChoice::Network { config: config.clone() },
            concurrency: 1,
            corpus: None,
            budget: Some(1.0),
        });
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
    engine.handle(ToWorker::Check {
        checks: vec![check("s1", claim)],
        provider: ProviderChoice::Settings {
            settings: json!({"kind": "openAi", "preset": "custom", "baseUrl": "https://mock.test/v1",
                             "openaiModel": "m", "apiKey": "k", "budget": "1.50"}),
        },
        concurrency: 1,
        corpus: None,
        budget: None,
    });
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
        engine.handle(ToWorker::Check {
            checks: vec![check("r1", claim)],
            provider,
            concurrency: 1,
            corpus: None,
            budget: Some(1.0),
        });
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
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let claim = "The Golden Gate Bridge opened to pedestrians in 1937.";
    let checks: Vec<_> = (0..20).map(|i| check(&format!("o{i}"), claim)).collect();
    engine.handle(ToWorker::Check {
        checks,
        provider: ProviderChoice::Offline,
        concurrency: 1_000_000,
        corpus: None,
        budget: None,
    });
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
    let checks: Vec<_> = (0..20).map(|i| check(&format!("p{i}"), claim)).collect();
    engine.handle(ToWorker::Check {
        checks,
        provider: ProviderChoice::Network {
            config: json!({"api": "openai", "baseUrl": "https://mock.test/v1", "model": "m",
                           "stream": false, "price": {"input": 100_000, "output": 0}}),
        },
        concurrency: 8,
        corpus: None,
        budget: Some(3.5),
    });
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

/// The claim of [`interrupted_limited_run`]'s checks.
const LIMITED_CLAIM: &str = "The Golden Gate Bridge opened to pedestrians in 1937.";

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
    let provider = ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": "https://mock.test/v1", "model": "m",
                       "stream": false, "price": {"input": 100_000, "output": 0}}),
    };
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let corpus = engine.corpus();
    let (assessment, summary) = demo_answers(&corpus);
    recorded.replies.borrow_mut().extend([assessment.clone(), summary.clone()]);
    engine.handle(ToWorker::Check {
        checks: vec![check("r1", LIMITED_CLAIM), check("r2", LIMITED_CLAIM)],
        provider,
        concurrency: 1,
        corpus: None,
        budget: Some(1.5),
    });
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

    let (engine, mut pool, after) = new_engine();
    after.replies.borrow_mut().extend([summary, assessment]);
    let store = Shared(Rc::new(MemoryStore::from_log(log)), Rc::default());
    pool.run_until(engine.start(Restored {
        items: corpus.corpus().passages().to_vec(),
        results: Vec::new(),
        sessions: vec![StoredSession { meta, store }],
        unfinished,
        unreadable: Vec::new(),
    }));
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
    let provider = ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": "https://mock.test/v1", "model": "m",
                       "stream": false, "price": {"input": 100_000, "output": 0}}),
    };
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let corpus = engine.corpus();
    let (assessment, summary) = demo_answers(&corpus);
    recorded.replies.borrow_mut().extend([assessment.clone(), summary.clone()]);
    recorded.crash_after_first_result.set(true);
    engine.handle(ToWorker::Check {
        checks: vec![check("r1", LIMITED_CLAIM), check("r2", LIMITED_CLAIM)],
        provider,
        concurrency: 1,
        corpus: None,
        budget: Some(1.5),
    });
    pool.run_until_stalled();
    // What storage holds when the tab died: r1's result and whatever was written with it.
    let results = recorded.results.borrow().clone();
    assert_eq!(results.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["r1"]);
    let unfinished = recorded.unfinished.borrow().clone();

    let (engine, mut pool, after) = new_engine();
    after.replies.borrow_mut().extend([assessment, summary]);
    pool.run_until(engine.start(Restored {
        items: corpus.corpus().passages().to_vec(),
        results,
        sessions: Vec::new(),
        unfinished,
        unreadable: Vec::new(),
    }));
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

    let (engine, mut pool, after) = new_engine();
    after.replies.borrow_mut().extend([summary, assessment.clone(), assessment]);
    let store = Shared(Rc::new(MemoryStore::from_log(log)), Rc::default());
    pool.run_until(engine.start(Restored {
        items: corpus.corpus().passages().to_vec(),
        results: Vec::new(),
        sessions: vec![StoredSession { meta, store }],
        unfinished,
        unreadable,
    }));
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
    assert!(notice.contains("r1") || notice.contains(LIMITED_CLAIM), "{notice}");
    assert_eq!(engine.load(), (0, 0), "neither runs nor is queued");
    for id in ["r1", "r2"] {
        engine.handle(ToWorker::Cancel { id: id.into() });
    }
    pool.run_until_stalled();
    let done = finished(&take(&after));
    assert_eq!(done.len(), 2, "a cancel ends each: {done:?}");
    assert!(after.sent.borrow().is_empty());
}

/// A check a reload interrupted, whose corpus changed meanwhile, is not thrown away: its
/// session (what the model answered) is kept, the person is told why it cannot resume, and it
/// resumes where it stopped once the corpus is as it was, paying for nothing twice.
#[test]
fn a_check_whose_corpus_changed_during_a_reload_waits_for_it_and_loses_nothing() {
    let provider = ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": "https://mock.test/v1", "model": "m",
                       "stream": false}),
    };
    let claim = "The Golden Gate Bridge opened to pedestrians in 1937.";
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let corpus = engine.corpus();
    let (assessment, summary) = demo_answers(&corpus);
    recorded.replies.borrow_mut().push_back(assessment);
    engine.handle(ToWorker::Check {
        checks: vec![check("w1", claim)],
        provider,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
    let (meta, store) = stop_after_first_response(&recorded, &mut pool, "w1");
    let unfinished = recorded.unfinished.borrow().clone();
    let log = store.0.log();
    drop((engine, pool));

    // Reloaded with the corpus's last item removed (another tab removed it, say).
    let mut items = corpus.corpus().passages().to_vec();
    let removed = items.pop().unwrap();
    let (engine, mut pool, after) = new_engine();
    let store = Shared(Rc::new(MemoryStore::from_log(log)), Rc::default());
    pool.run_until(engine.start(Restored {
        items,
        results: Vec::new(),
        sessions: vec![StoredSession { meta, store }],
        unfinished,
        unreadable: Vec::new(),
    }));
    pool.run_until_stalled();
    let posted = take(&after);
    assert!(finished(&posted).is_empty(), "not thrown away: {posted:?}");
    let Some(FromWorker::Ready { queued, .. }) = posted.first() else { panic!("{posted:?}") };
    assert_eq!(queued, &[check("w1", claim)], "shown as waiting");
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

/// Clearing the results, from any page, is told to every page, so no tab keeps showing results
/// that are gone.
#[test]
fn clearing_the_results_is_told_to_every_page() {
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    engine.handle(ToWorker::Check {
        checks: vec![check("c1", "The Golden Gate Bridge opened to pedestrians in 1937.")],
        provider: ProviderChoice::Offline,
        concurrency: 1,
        corpus: None,
        budget: None,
    });
    pool.run_until_stalled();
    assert_eq!(finished(&take(&recorded)).len(), 1);
    engine.handle(ToWorker::ClearResults);
    let posted = take(&recorded);
    assert!(posted.contains(&FromWorker::ResultsCleared), "{posted:?}");
    assert!(recorded.results.borrow().is_empty());
}

/// An unfinished check whose session record cannot be read (another version's, or damaged) is
/// not started over, which would write over its record and pay again: it waits, shown, and
/// the person is told; cancelled, it ends and its record goes in one write.
#[test]
fn a_check_whose_session_cannot_be_read_is_kept_not_started_over() {
    let (engine, mut pool, recorded) = new_engine();
    let claim = "The Golden Gate Bridge opened to pedestrians in 1937.";
    let provider = ProviderChoice::Network {
        config: json!({"api": "openai", "baseUrl": "https://mock.test/v1", "model": "m",
                       "stream": false}),
    };
    pool.run_until(engine.start(Restored {
        items: Vec::new(),
        results: Vec::new(),
        sessions: Vec::new(),
        unfinished: Unfinished {
            concurrency: 1,
            checks: vec![SessionMeta::new(&check("u1", claim), &provider)],
            budgets: Vec::new(),
        },
        unreadable: vec![Unreadable {
            record: "the session of check u1".into(),
            why: "unknown variant `v9`".into(),
            session_of: Some("u1".into()),
        }],
    }));
    pool.run_until_stalled();
    let posted = take(&recorded);
    let Some(FromWorker::Ready { queued, .. }) = posted.first() else { panic!("{posted:?}") };
    assert_eq!(queued, &[check("u1", claim)]);
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

/// A run of a thousand claims (the most a claims file gives) whose limit is reached at its
/// first check: the other 999 end `budget` at once, with nothing sent, each saved.
#[test]
fn a_thousand_queued_checks_end_at_the_limit_without_a_request() {
    let (engine, mut pool, recorded) = started();
    engine.handle(ToWorker::LoadDemo);
    let (assessment, _) = demo_answers(&engine.corpus());
    recorded.replies.borrow_mut().push_back(assessment);
    let checks: Vec<CheckRequest> =
        (0..1000).map(|n| check(&format!("t{n}"), "The bridge opened in 1937.")).collect();
    engine.handle(ToWorker::Check {
        checks,
        provider: ProviderChoice::Network {
            config: json!({"api": "openai", "baseUrl": "https://mock.test/v1", "model": "m",
                           "stream": false, "price": {"input": 100_000, "output": 0}}),
        },
        concurrency: 1,
        corpus: None,
        budget: Some(0.5),
    });
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

/// The app and every other host name an outcome alike: the failures the core counts as the
/// verdict `insufficient` are exactly those the page shows as it (the messages crate keeps its
/// own copy of the rule, by name, to stay free of the core).
/// Every kind of failure the core has gets its own advice on the page (what to do next), not
/// the catch-all: a kind added to the core without words on the page fails here.
#[test]
fn the_page_advises_on_every_kind_of_failure_the_core_has() {
    let fallback = verity_messages::text::what_to_do("a kind nobody has");
    for kind in verity_core::JobFailureKind::ALL {
        assert_ne!(verity_messages::text::what_to_do(kind.as_str()), fallback, "{kind}");
    }
}

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
