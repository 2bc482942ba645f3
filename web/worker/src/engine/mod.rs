//! The host-independent engine: the corpus, the results, the scheduler of checks with bounded
//! concurrency, durable sessions, and the conversion of the core's values into messages. The
//! wasm glue (or a native test) is its [`Host`].
//!
//! One module per concept: `state` (what the engine holds), `corpora` (the main corpus and
//! the named ones: adding, removing, indexing), `resume` (start, and sessions resumed after a
//! reload), `schedule` (the queue and its concurrency), `check` (one check through the core,
//! and the failures the worker reports), `results` (a finished check recorded and saved),
//! `page_tools` (steps whose tools the page runs). The host side is [`crate::host`]; what is saved of a check is [`crate::saved`].

mod budget;
mod check;
mod corpora;
mod page_tools;
mod results;
mod resume;
mod schedule;
mod state;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;
use verity_core::indexed::IndexedCorpus;
use verity_core::{Cancel, Spent, ToolOutput};
use verity_messages::{CheckResult, FromWorker, Outcome, ProviderChoice, StepOutcome, ToWorker};

use crate::host::Host;
use crate::saved::SessionMeta;

use check::{cancelled, refused};
use state::{Awaiting, Pending, State, Stranded};

/// The most checks that run at once, whatever a page asks for (the app's largest choice): each
/// holds a model request and a session open, and a run's spending limit can be overshot by one
/// response per running check.
pub const MAX_CONCURRENCY: usize = 8;

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
    /// The events of each running check so far, by id: replayed to a page that connects while
    /// it runs ([`Engine::welcome`]).
    live: RefCell<HashMap<String, Vec<Value>>>,
    /// Checks a reload interrupted whose corpus has changed since: they wait for it.
    stranded: RefCell<Vec<Stranded<H::Store>>>,
    /// Checks whose session record could not be read (another version's, or damaged): kept
    /// as they are, never started over; they end when the person cancels them.
    unreadable: RefCell<Vec<SessionMeta>>,
    /// The page's provider with its key, once [`ToWorker::Credentials`] came (`Some(None)`: the
    /// page has none), for stranded checks that resume later.
    credentials: RefCell<Option<Option<ProviderChoice>>>,
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
            live: RefCell::default(),
            stranded: RefCell::default(),
            unreadable: RefCell::default(),
            credentials: RefCell::default(),
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

    fn reply(&self, message: &FromWorker) {
        self.inner.host.reply(message);
    }

    /// Greets a page that connected after [`start`](Self::start) (another tab of the app,
    /// when one engine serves them all): `Ready` with the engine's state now (the corpus, the
    /// results, the running checks as `resumed`, the queued ones as `queued`), then the events
    /// of the running checks so far, each through [`Host::reply`]. Later news reaches it with
    /// every other page's.
    pub fn welcome(&self) {
        let ready = {
            let state = self.inner.state.borrow();
            let awaiting = self.inner.awaiting.borrow();
            let resumed = state
                .running
                .iter()
                .filter_map(|running| running.check.clone())
                .chain(awaiting.iter().map(|waiting| waiting.meta.check.clone()))
                .collect();
            let queued = state
                .queue
                .iter()
                .map(|pending| pending.check.clone())
                .chain(self.inner.awaiting_queue.borrow().iter().map(|meta| meta.check.clone()))
                .chain(
                    self.inner.stranded.borrow().iter().map(|waiting| waiting.meta.check.clone()),
                )
                .chain(self.inner.unreadable.borrow().iter().map(|meta| meta.check.clone()))
                .collect();
            FromWorker::Ready {
                corpus: self.corpus_summary(),
                results: state.results.clone(),
                resumed,
                queued,
            }
        };
        self.reply(&ready);
        let running: Vec<String> =
            self.inner.state.borrow().running.iter().map(|running| running.id.clone()).collect();
        for id in running {
            let events = self.inner.live.borrow().get(&id).cloned().unwrap_or_default();
            for event in events {
                self.reply(&FromWorker::Progress { id: id.clone(), event });
            }
        }
    }

    /// Handles one message from the page.
    pub fn handle(&self, message: ToWorker) {
        match message {
            ToWorker::AddFiles { files } => self.add_files(files),
            ToWorker::AddItems { items } => self.add_items(items),
            ToWorker::LoadDemo => self.load_demo(),
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
                self.reply(&FromWorker::Items { query, offset, total, items });
            }
            ToWorker::Check { checks, provider, concurrency, corpus, budget } => {
                self.queue_checks(checks, &provider, concurrency, corpus, budget);
            }
            ToWorker::Credentials { provider } => {
                // Settings that are not a provider (no model, no key) resume nothing.
                let provider = provider.and_then(|provider| provider.resolved().ok());
                *self.inner.credentials.borrow_mut() = Some(provider.clone());
                self.credentials(provider.as_ref());
            }
            ToWorker::AddToCorpus { name, items, files } => self.add_to_corpus(name, items, files),
            ToWorker::DropCorpus { name } => {
                self.inner.state.borrow_mut().named.remove(&name);
            }
            ToWorker::RunStep { id, config, provider } => match provider.resolved() {
                Ok(provider) => self.run_step(id, config, provider),
                Err(message) => self.post(&FromWorker::StepFinished {
                    id,
                    outcome: StepOutcome::Failed { failure: refused(message) },
                }),
            },
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
                self.inner.state.borrow_mut().results.clear();
                self.inner.host.clear_results();
                self.post(&FromWorker::ResultsCleared);
            }
            ToWorker::ExportMarkdown { results } => {
                self.reply(&FromWorker::Markdown {
                    text: verity_messages::markdown::to_markdown(&results),
                });
            }
            ToWorker::ExportCsv { results } => {
                self.reply(&FromWorker::Csv { text: verity_messages::csv::to_csv(&results) });
            }
            ToWorker::ReadClaims { file } => {
                self.reply(&crate::claims_file::read_claims(&file.name, &file.text));
            }
            ToWorker::ForgetResult { id } => {
                let mut state = self.inner.state.borrow_mut();
                let before = state.results.len();
                state.results.retain(|result| result.id != id);
                if state.results.len() != before {
                    self.inner.host.forget_result(&id);
                }
            }
            _ => self.reply(&FromWorker::Error { message: "unknown message".to_owned() }),
        }
    }

    /// Handles a message as JSON text (what the page posts); a malformed one is answered
    /// with `Error`.
    pub fn handle_json(&self, text: &str) {
        match serde_json::from_str::<ToWorker>(text) {
            Ok(message) => self.handle(message),
            Err(error) => self.reply(&FromWorker::Error {
                message: format!("the worker cannot read the page's message: {error}"),
            }),
        }
    }

    fn cancel(&self, id: &str) {
        let queued = {
            let mut state = self.inner.state.borrow_mut();
            if let Some(running) = state.running.iter().find(|running| running.id == id) {
                running.cancel.cancel("cancelled by the user");
                return;
            }
            let position = state.queue.iter().position(|pending| pending.check.id == id);
            position.and_then(|position| state.queue.remove(position))
        };
        let queued = queued.or_else(|| {
            // Waiting for the page's credentials after a reload.
            let mut awaiting = self.inner.awaiting_queue.borrow_mut();
            let position = awaiting.iter().position(|meta| meta.check.id == id)?;
            let meta = awaiting.remove(position);
            Some(Pending { check: meta.check, provider: meta.provider, corpus: None, budget: None })
        });
        if queued.is_none() {
            let stranded = {
                let mut stranded = self.inner.stranded.borrow_mut();
                let position = stranded.iter().position(|waiting| waiting.meta.check.id == id);
                position.map(|position| stranded.remove(position))
            };
            let stranded = stranded.map(|Stranded { meta, .. }| meta).or_else(|| {
                let mut unreadable = self.inner.unreadable.borrow_mut();
                let position = unreadable.iter().position(|meta| meta.check.id == id)?;
                Some(unreadable.remove(position))
            });
            if let Some(meta) = stranded {
                // Its session cannot be opened (over this corpus, or by this version): what it
                // spent is in its log.
                let message = "cancelled by the user while it waited to resume (what it had \
                               spent is not counted here)";
                self.finished(CheckResult {
                    id: meta.check.id,
                    claim: meta.check.claim,
                    outcome: Outcome::Failed { failure: cancelled(message, Spent::default()) },
                    cited: Vec::new(),
                    provenance: self.provenance(&meta.provider, None),
                });
                return;
            }
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
        if let Some(Pending { check, provider, corpus, .. }) = queued {
            let corpus = corpus.unwrap_or_else(|| self.corpus());
            self.finished(CheckResult {
                id: check.id,
                claim: check.claim,
                outcome: Outcome::Failed {
                    failure: cancelled("cancelled by the user before it started", Spent::default()),
                },
                cited: Vec::new(),
                provenance: self.provenance(&provider, Some(&corpus)),
            });
        }
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
