//! Start and resume: what storage held is taken back, the checks that were running resume from
//! their durable sessions (recorded responses are not requested again), keyed ones wait for the
//! page's key, and the ones that had not started are queued again.

use std::collections::HashSet;
use std::sync::Arc;

use verity_core::indexed::{IndexedCorpus, with_corpora};
use verity_core::{Cancel, Job, Session, SessionError, Spent, Store};
use verity_messages::{CheckResult, FromWorker, Outcome, ProviderChoice};

use super::budget::RunBudget;
use super::check::{CheckRun, cancelled};
use super::state::{Awaiting, Pending, Running, Stranded};
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
            state.concurrency = unfinished.concurrency.clamp(1, super::MAX_CONCURRENCY);
            state.budgets = unfinished.budgets.iter().map(RunBudget::restored).collect();
        }
        // A check of a run whose saved limit could not be read would run unlimited: it waits.
        let limited: HashSet<String> =
            unfinished.budgets.iter().map(|budget| budget.run.clone()).collect();
        let limit_lost =
            |meta: &SessionMeta| meta.run.as_deref().is_some_and(|run| !limited.contains(run));
        let mut kept_without_limit: Vec<SessionMeta> = Vec::new();
        let corpus = self.inner.state.borrow().corpus.current().clone();
        let with_session: HashSet<String> =
            sessions.iter().map(|stored| stored.meta.check.id.clone()).collect();
        let session_unreadable: HashSet<&str> =
            unreadable.iter().filter_map(|skipped| skipped.session_of.as_deref()).collect();
        let mut requeued = Vec::new();
        let mut kept_unreadable = Vec::new();
        {
            let mut state = self.inner.state.borrow_mut();
            for meta in unfinished.checks {
                let id = &meta.check.id;
                if state.results.iter().any(|result| result.id == *id)
                    || state.unfinished.iter().any(|kept| kept.check.id == *id)
                {
                    continue;
                }
                if session_unreadable.contains(id.as_str()) {
                    // Started over, it would write over its record and pay again: it waits.
                    kept_unreadable.push(meta.clone());
                } else if limit_lost(&meta) {
                    kept_without_limit.push(meta.clone());
                } else if !with_session.contains(id) {
                    requeued.push(meta.clone());
                }
                state.unfinished.push(meta);
            }
        }
        let mut resumed = Vec::new();
        let mut to_run = Vec::new();
        let mut stranded = Vec::new();
        for StoredSession { meta, store } in sessions {
            let id = meta.check.id.clone();
            if self.inner.state.borrow().results.iter().any(|result| result.id == id) {
                // Finished, and its result saved, before the session was deleted.
                self.inner.host.end_session(&id);
                continue;
            }
            if limit_lost(&meta) {
                if !kept_without_limit.iter().any(|kept| kept.check.id == id) {
                    kept_without_limit.push(meta.clone());
                }
                let mut state = self.inner.state.borrow_mut();
                if !state.unfinished.iter().any(|kept| kept.check.id == id) {
                    state.unfinished.push(meta);
                }
                continue;
            }
            // Over another corpus than its own (a record that does not say which: its log
            // names it, and the core refuses to open it over another), it waits for it.
            let needs_other =
                meta.corpus.as_deref().is_some_and(|needs| needs != corpus.id().as_str());
            let waits = |why: &SessionError| why.to_string().contains("needs its corpus");
            let opened = if needs_other { None } else { Some(open_session(&store, &corpus).await) };
            let opened = match opened {
                Some(Ok(session)) => Ok(session),
                Some(Err(why)) if !waits(&why) => Err(why),
                _ => {
                    let mut state = self.inner.state.borrow_mut();
                    if !state.unfinished.iter().any(|kept| kept.check.id == id) {
                        state.unfinished.push(meta.clone());
                    }
                    stranded.push(Stranded { meta, store });
                    continue;
                }
            };
            match opened {
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
                    self.record_results(vec![result]);
                }
            }
        }
        let summary = self.corpus_summary();
        let results = self.inner.state.borrow().results.clone();
        let queued = requeued
            .iter()
            .chain(stranded.iter().map(|waiting| &waiting.meta))
            .chain(&kept_unreadable)
            .chain(&kept_without_limit)
            .map(|meta| meta.check.clone())
            .collect();
        self.post(&FromWorker::Ready { corpus: summary, results, resumed, queued });
        if let Some(message) = unreadable_notice(&unreadable) {
            self.post(&FromWorker::Error { message });
        }
        if !stranded.is_empty() {
            self.post(&FromWorker::Error { message: stranded_notice(&stranded) });
        }
        if !kept_unreadable.is_empty() {
            self.post(&FromWorker::Error {
                message: format!(
                    "What was saved of these unfinished checks cannot be read by this version of \
                     the page (see the records skipped), so they are kept as they are rather \
                     than started over and paid for again: {}. A newer version of the page may \
                     resume them; cancel them to drop what was saved and re-run them.",
                    quoted_claims(&kept_unreadable)
                ),
            });
        }
        if !kept_without_limit.is_empty() {
            self.post(&FromWorker::Error {
                message: format!(
                    "The spending limit of the run of these unfinished checks could not be read \
                     (see the records skipped), so they wait rather than run without it: {}. \
                     Cancel them to drop what was saved, and re-run them with a limit.",
                    quoted_claims(&kept_without_limit)
                ),
            });
        }
        self.inner.unreadable.borrow_mut().extend(kept_unreadable);
        self.inner.unreadable.borrow_mut().extend(kept_without_limit);
        self.inner.stranded.borrow_mut().extend(stranded);
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
            for meta in requeued {
                let budget = self.budget_of(&meta);
                let pending =
                    Pending { check: meta.check, provider: meta.provider, corpus: None, budget };
                self.inner.state.borrow_mut().queue.push_back(pending);
            }
        }
        self.save_unfinished();
        self.pump();
    }

    /// Resumes the stranded checks whose corpus the current one is again (those whose record
    /// does not say which corpus are tried): each from its session, a keyed one with the key
    /// the page gave (or it ends saying why, as after a reload).
    pub(super) fn resume_stranded(&self) {
        let corpus = self.corpus();
        let ready: Vec<Stranded<H::Store>> = {
            let mut stranded = self.inner.stranded.borrow_mut();
            let (ready, waiting): (Vec<_>, Vec<_>) =
                std::mem::take(&mut *stranded).into_iter().partition(|waiting| {
                    waiting.meta.corpus.as_deref().is_none_or(|needs| needs == corpus.id().as_str())
                });
            *stranded = waiting;
            ready
        };
        for Stranded { meta, store } in ready {
            let engine = self.clone();
            let corpus = Arc::clone(&corpus);
            self.inner.host.spawn(Box::pin(async move {
                match open_session(&store, &corpus).await {
                    Ok(session) if meta.credentials_removed => {
                        engine.inner.awaiting.borrow_mut().push(Awaiting {
                            meta,
                            store,
                            session,
                            corpus,
                        });
                        let given = engine.inner.credentials.borrow().clone();
                        if let Some(given) = given {
                            engine.credentials(given.as_ref());
                        }
                    }
                    Ok(session) => {
                        let provider = meta.provider.clone();
                        engine.resume(meta, provider, Cancel::new(), store, session, corpus);
                    }
                    // Still not its corpus: it waits on.
                    Err(_) => engine.inner.stranded.borrow_mut().push(Stranded { meta, store }),
                }
            }));
        }
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
        let budget = self.budget_of(&meta);
        let run = CheckRun {
            check: meta.check,
            provider,
            corpus,
            cancel,
            store,
            resumed: Some(session),
            budget,
        };
        self.inner.host.spawn(Box::pin(async move {
            let ended = engine.run(run).await;
            engine.ended(ended);
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
            let budget = self.budget_of(&meta);
            if !meta.credentials_removed {
                let pending =
                    Pending { check: meta.check, provider: meta.provider, corpus: None, budget };
                self.inner.state.borrow_mut().queue.push_back(pending);
                continue;
            }
            match matching(&meta) {
                Some(given) => {
                    let pending =
                        Pending { check: meta.check, provider: given, corpus: None, budget };
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

/// What a person is told of checks that wait for their corpus.
/// The claims of `checks`, each between quotation marks, joined by commas (for a notice).
fn quoted_claims<'a>(checks: impl IntoIterator<Item = &'a SessionMeta>) -> String {
    let claims: Vec<String> =
        checks.into_iter().map(|meta| format!("\u{201c}{}\u{201d}", meta.check.claim)).collect();
    claims.join(", ")
}

fn stranded_notice<S>(stranded: &[Stranded<S>]) -> String {
    let (these, they, them) = if stranded.len() == 1 {
        ("This check was", "it", "it")
    } else {
        ("These checks were", "they", "them")
    };
    format!(
        "{these} interrupted by a reload, and the corpus has changed since {they} started, so \
         {they} cannot resume over it: {}. What {they} had received from the model is kept. Put \
         the corpus back as it was (add the removed items again, or remove the added ones) and \
         {they} will resume where {they} stopped; or cancel {them}.",
        quoted_claims(stranded.iter().map(|waiting| &waiting.meta))
    )
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
