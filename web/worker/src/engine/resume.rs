//! Start and resume: what storage held is taken back, the checks that were running resume from
//! their durable sessions (recorded responses are not requested again), keyed ones wait for the
//! page's key, and the ones that had not started are queued again.

use std::collections::HashSet;
use std::sync::Arc;

use verity_core::indexed::{IndexedCorpus, with_corpora};
use verity_core::{Cancel, Job, Session, SessionError, Spent, Store};
use verity_messages::{CheckResult, FromWorker, Outcome, ProviderChoice};

use super::check::cancelled;
use super::state::{Awaiting, Pending, Running};
use super::{Engine, Host};
use crate::corpus::CorpusState;
use crate::host::{Restored, StoredSession};
use crate::records::unreadable_notice;
use crate::saved::{SessionMeta, without_credentials};

impl<H: Host> Engine<H> {
    /// Takes what storage held, posts `Ready`, indexes the corpus, resumes the checks that
    /// were running (each from its session: recorded responses are not requested again) and
    /// queues again the ones that had not started.
    pub async fn start(&self, restored: Restored<H::Store>) {
        let Restored { items, results, sessions, unfinished, unreadable } = restored;
        {
            let mut state = self.inner.state.borrow_mut();
            state.corpus = CorpusState::from_passages(items);
            // Saved before results carried their advice: the page shows only what they carry.
            state.results = results.into_iter().map(CheckResult::advised).collect();
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
                            failure: cancelled(
                                format!("the check was interrupted and cannot resume: {why}"),
                                Spent::default(),
                            ),
                        },
                        cited: Vec::new(),
                        provenance: self.provenance(&meta.provider, Some(&corpus)),
                    };
                    self.inner.state.borrow_mut().unfinished.retain(|meta| meta.check.id != id);
                    self.record_result(result);
                }
            }
        }
        let (summary, results) = {
            let state = self.inner.state.borrow();
            (state.corpus.summary(), state.results.clone())
        };
        let queued = requeued.iter().map(|meta| meta.check.clone()).collect();
        self.post(&FromWorker::Ready { corpus: summary, results, resumed, queued });
        if let Some(message) = unreadable_notice(&unreadable) {
            self.post(&FromWorker::Error { message });
        }
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

    pub(super) fn resume(
        &self,
        meta: SessionMeta,
        provider: ProviderChoice,
        cancel: Cancel,
        store: H::Store,
        session: Session<Job>,
        corpus: Arc<IndexedCorpus>,
    ) {
        self.inner.state.borrow_mut().running.push(Running {
            id: meta.check.id.clone(),
            cancel: cancel.clone(),
            check: Some(meta.check.clone()),
        });
        let engine = self.clone();
        self.inner.host.spawn(Box::pin(async move {
            let result = engine.run(&meta.check, &provider, &corpus, cancel, store, Some(session));
            engine.ended(result.await);
        }));
    }

    /// Resumes the keyed checks a reload interrupted with the page's provider, when it is the
    /// one they ran with and has a key; otherwise they end `cancelled`, saying why.
    pub(super) fn credentials(&self, provider: Option<&ProviderChoice>) {
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
                None => {
                    let provenance = self.provenance(&meta.provider, Some(&self.corpus()));
                    self.finished(CheckResult {
                        id: meta.check.id,
                        claim: meta.check.claim,
                        outcome: Outcome::Failed {
                            failure: cancelled(not_resumed(), Spent::default()),
                        },
                        cited: Vec::new(),
                        provenance,
                    })
                }
            }
        }
        self.pump();
    }
}

/// Takes the session over (so a stale tab cannot write), loads and replays it over `corpus`.
async fn open_session<S: Store>(
    store: &S,
    corpus: &Arc<IndexedCorpus>,
) -> Result<Session<Job>, SessionError> {
    let lease = store.take_lease("worker").await?;
    let log = store.load().await?.into_log();
    with_corpora(std::slice::from_ref(corpus), || Session::resume(log, Some(lease)))
}
