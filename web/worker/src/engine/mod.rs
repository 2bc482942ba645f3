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
mod model;
mod page_tools;
mod results;
mod resume;
mod schedule;
mod state;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;
use verity_core::indexed::IndexedCorpus;
use verity_core::{Cancel, Spent, ToolOutput};
use verity_messages::{CheckResult, FromWorker, Outcome, ProviderChoice, StepOutcome, ToWorker};

use crate::host::Host;

use check::{cancelled, refused};
use state::{Check, Pending, Phase, State};

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
    state: RefCell<State<H::Store>>,
    /// The page's provider with its key, once [`ToWorker::Credentials`] came (`Some(None)`: the
    /// page has none), for stranded checks that resume later.
    credentials: RefCell<Option<Option<ProviderChoice>>>,
}

impl<H: Host> Engine<H> {
    /// An engine over `host` with an empty corpus; call [`start`](Self::start) next.
    pub fn new(host: H) -> Self {
        let inner =
            Inner { host, state: RefCell::new(State::default()), credentials: RefCell::default() };
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
        let (ready, live) = {
            let state = self.inner.state.borrow();
            let (resumed, queued) =
                state.checks.iter().partition::<Vec<_>, _>(|check| check.phase.shown_running());
            let requests = |checks: Vec<&Check<H::Store>>| {
                checks.into_iter().map(|check| check.request.clone()).collect()
            };
            let live: Vec<(String, Vec<Value>)> = state
                .checks
                .iter()
                .filter_map(|check| match &check.phase {
                    Phase::Running { events, .. } => {
                        Some((check.request.id.clone(), events.clone()))
                    }
                    _ => None,
                })
                .collect();
            let ready = FromWorker::Ready {
                corpus: self.corpus_summary(),
                results: state.results.clone(),
                resumed: requests(resumed),
                queued: requests(queued),
            };
            (ready, live)
        };
        self.reply(&ready);
        for (id, events) in live {
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
    /// with `Error`. Read through a `Value`, whose parser the engine has anyway: `ToWorker`'s
    /// derived reader over the text parser was the engine's second-largest function (709 B
    /// gzip more; strings move out of the `Value`, not copied).
    pub fn handle_json(&self, text: &str) {
        match serde_json::from_str(text).and_then(serde_json::from_value::<ToWorker>) {
            Ok(message) => self.handle(message),
            Err(error) => self.reply(&FromWorker::Error {
                message: format!("the worker cannot read the page's message: {error}"),
            }),
        }
    }

    /// Cancels the check or step `id`: a running one through the core (what it spent is
    /// reported), any other ends at once.
    fn cancel(&self, id: &str) {
        let taken = {
            let mut state = self.inner.state.borrow_mut();
            if let Some((_, cancel)) = state.steps.iter().find(|(step, _)| step == id) {
                cancel.cancel("cancelled by the user");
                return;
            }
            let Some(check) = state.check_mut(id) else { return };
            match &mut check.phase {
                Phase::Running { cancel, .. } => {
                    cancel.cancel("cancelled by the user");
                    return;
                }
                Phase::AwaitingKey(_) => {
                    // Ended through the core, so what its session had spent is reported.
                    let Phase::AwaitingKey(resumed) =
                        std::mem::replace(&mut check.phase, Phase::Held)
                    else {
                        unreachable!("matched above")
                    };
                    let meta = check.saved.clone().expect("a resumed check is saved");
                    drop(state);
                    let cancel = Cancel::new();
                    cancel.cancel("cancelled by the user");
                    let provider = meta.provider.clone();
                    self.resume(meta, provider, cancel, resumed);
                    return;
                }
                _ => {}
            }
            state.remove(id).expect("found above")
        };
        let Check { request, saved, phase } = taken;
        let (message, provider, corpus) = match phase {
            Phase::Queued(Pending { provider, corpus, .. }) => {
                let corpus = corpus.unwrap_or_else(|| self.corpus());
                ("cancelled by the user before it started", provider, Some(corpus))
            }
            Phase::Requeued => {
                let provider = saved.map(|meta| meta.provider).unwrap_or(ProviderChoice::Offline);
                ("cancelled by the user before it started", provider, Some(self.corpus()))
            }
            // Its session cannot be opened (over this corpus, or by this version): what it spent
            // is in its log.
            _ => {
                let provider = saved.map(|meta| meta.provider).unwrap_or(ProviderChoice::Offline);
                let message = "cancelled by the user while it waited to resume (what it had \
                               spent is not counted here)";
                (message, provider, None)
            }
        };
        self.finished(CheckResult {
            id: request.id,
            claim: request.claim,
            outcome: Outcome::Failed { failure: cancelled(message, Spent::default()) },
            cited: Vec::new(),
            provenance: self.provenance(&provider, corpus.as_deref()),
        });
    }

    /// How many checks run and wait (for tests and diagnostics).
    #[must_use]
    pub fn load(&self) -> (usize, usize) {
        let state = self.inner.state.borrow();
        (state.running(), state.queued())
    }

    /// The current corpus.
    #[must_use]
    pub fn corpus(&self) -> Arc<IndexedCorpus> {
        self.inner.state.borrow().corpus.current().clone()
    }
}
