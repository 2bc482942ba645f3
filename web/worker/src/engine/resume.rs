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
use super::state::{Check, Pending, Phase, Resumed};
use super::{Engine, Host};
use crate::corpus::CorpusState;
use crate::host::{Restored, StoredSession};
use crate::records::{Unreadable, unreadable_notice};
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
        let with_session: HashSet<String> =
            sessions.iter().map(|stored| stored.meta.check.id.clone()).collect();
        let session_unreadable: HashSet<&str> =
            unreadable.iter().filter_map(|skipped| skipped.session_of.as_deref()).collect();
        let mut waiting = Waiting::default();
        {
            let mut state = self.inner.state.borrow_mut();
            for meta in unfinished.checks {
                let id = &meta.check.id;
                if state.results.iter().any(|result| result.id == *id) || state.knows(id) {
                    continue;
                }
                let phase = if session_unreadable.contains(id.as_str()) {
                    // Started over, it would write over its record and pay again: it waits.
                    waiting.unreadable.push(meta.clone());
                    Phase::Held
                } else if limit_lost(&meta) {
                    waiting.without_limit.push(meta.clone());
                    Phase::Held
                } else if !with_session.contains(id) {
                    waiting.requeued.push(meta.clone());
                    Phase::Requeued
                } else {
                    // Its session decides, below.
                    Phase::Held
                };
                state.checks.push(Check { request: meta.check.clone(), saved: Some(meta), phase });
            }
        }
        let resumed = self.open_sessions(sessions, &limit_lost, &mut waiting).await;
        self.post_restored(&resumed, &waiting, &unreadable);
        let requeued = waiting.requeued;
        self.index();
        for (meta, opened) in resumed {
            if meta.credentials_removed {
                // Its key was not stored: wait for the page's `Credentials`.
                self.place(meta, Phase::AwaitingKey(opened));
                continue;
            }
            let provider = meta.provider.clone();
            self.resume(meta, provider, Cancel::new(), opened);
        }
        // When one needs a key, all of them wait (`Requeued`), so they keep their order once
        // the key is there.
        if !requeued.iter().any(|meta| meta.credentials_removed) {
            for meta in requeued {
                let budget = self.budget_of(&meta);
                let model = self.model(&meta.provider);
                let pending = Pending { provider: meta.provider, model, corpus: None, budget };
                self.set_phase(&meta.check.id, Phase::Queued(pending));
            }
        }
        self.save_unfinished();
        self.pump();
    }

    /// Opens the sessions storage held, over the current corpus: the ones that can go on, in
    /// order; the others wait in the table (`waiting` names them) or end, saying why.
    async fn open_sessions(
        &self,
        sessions: Vec<StoredSession<H::Store>>,
        limit_lost: &impl Fn(&SessionMeta) -> bool,
        waiting: &mut Waiting,
    ) -> Vec<(SessionMeta, Resumed<H::Store>)> {
        let corpus = self.corpus();
        let mut resumed = Vec::new();
        for StoredSession { meta, store } in sessions {
            let id = meta.check.id.clone();
            if self.inner.state.borrow().results.iter().any(|result| result.id == id) {
                // Finished, and its result saved, before the session was deleted.
                self.inner.host.end_session(&id);
                continue;
            }
            if limit_lost(&meta) {
                if !waiting.without_limit.iter().any(|kept| kept.check.id == id) {
                    waiting.without_limit.push(meta.clone());
                }
                self.place(meta, Phase::Held);
                continue;
            }
            // Over another corpus than its own (a record that does not say which: its log
            // names it, and the core refuses to open it over another), it waits for it.
            let needs_other =
                meta.corpus.as_deref().is_some_and(|needs| needs != corpus.id().as_str());
            let waits = |why: &SessionError| why.to_string().contains("needs its corpus");
            let opened = if needs_other { None } else { Some(open_session(&store, &corpus).await) };
            match opened {
                Some(Ok(session)) => {
                    self.place(meta.clone(), Phase::Held);
                    let corpus = Arc::clone(&corpus);
                    resumed.push((meta, Resumed { store, session, corpus }));
                }
                Some(Err(why)) if !waits(&why) => {
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
                    self.inner.state.borrow_mut().remove(&id);
                    self.record_results(vec![result]);
                }
                _ => {
                    waiting.stranded.push(meta.clone());
                    self.place(meta, Phase::Stranded(store));
                }
            }
        }
        resumed
    }

    /// Posts `Ready` after a start (the checks that resume as `resumed`, the ones that wait as
    /// `queued`), then a notice for each kind of wait and for the records that could not be
    /// read.
    fn post_restored(
        &self,
        resumed: &[(SessionMeta, Resumed<H::Store>)],
        waiting: &Waiting,
        unreadable: &[Unreadable],
    ) {
        let results = self.inner.state.borrow().results.clone();
        let queued = waiting
            .requeued
            .iter()
            .chain(&waiting.stranded)
            .chain(&waiting.unreadable)
            .chain(&waiting.without_limit)
            .map(|meta| meta.check.clone())
            .collect();
        let resumed = resumed.iter().map(|(meta, _)| meta.check.clone()).collect();
        let corpus = self.corpus_summary();
        self.post(&FromWorker::Ready { corpus, results, resumed, queued });
        if let Some(message) = unreadable_notice(unreadable) {
            self.post(&FromWorker::Error { message });
        }
        if !waiting.stranded.is_empty() {
            self.post(&FromWorker::Error { message: stranded_notice(&waiting.stranded) });
        }
        if !waiting.unreadable.is_empty() {
            self.post(&FromWorker::Error {
                message: format!(
                    "What was saved of these unfinished checks cannot be read by this version of \
                     the page (see the records skipped), so they are kept as they are rather \
                     than started over and paid for again: {}. A newer version of the page may \
                     resume them; cancel them to drop what was saved and re-run them.",
                    quoted_claims(&waiting.unreadable)
                ),
            });
        }
        if !waiting.without_limit.is_empty() {
            self.post(&FromWorker::Error {
                message: format!(
                    "The spending limit of the run of these unfinished checks could not be read \
                     (see the records skipped), so they wait rather than run without it: {}. \
                     Cancel them to drop what was saved, and re-run them with a limit.",
                    quoted_claims(&waiting.without_limit)
                ),
            });
        }
    }

    /// Puts `meta`'s check in `phase`, in the table at its place, or last if it is not there.
    fn place(&self, meta: SessionMeta, phase: Phase<H::Store>) {
        let mut state = self.inner.state.borrow_mut();
        match state.check_mut(&meta.check.id) {
            Some(check) => check.phase = phase,
            None => {
                state.checks.push(Check { request: meta.check.clone(), saved: Some(meta), phase })
            }
        }
    }

    /// Puts the check `id` in `phase` if it is still in the table (a cancel may have ended it
    /// meanwhile); whether it was.
    fn set_phase(&self, id: &str, phase: Phase<H::Store>) -> bool {
        let mut state = self.inner.state.borrow_mut();
        match state.check_mut(id) {
            Some(check) => {
                check.phase = phase;
                true
            }
            None => false,
        }
    }

    /// Resumes the stranded checks whose corpus the current one is again (those whose record
    /// does not say which corpus are tried): each from its session, a keyed one with the key
    /// the page gave (or it ends saying why, as after a reload).
    pub(super) fn resume_stranded(&self) {
        let corpus = self.corpus();
        let ready: Vec<(SessionMeta, H::Store)> = {
            let mut state = self.inner.state.borrow_mut();
            let mut ready = Vec::new();
            for check in &mut state.checks {
                let (Phase::Stranded(_), Some(meta)) = (&check.phase, &check.saved) else {
                    continue;
                };
                if meta.corpus.as_deref().is_some_and(|needs| needs != corpus.id().as_str()) {
                    continue;
                }
                // Held while its session opens: a cancel meanwhile ends it.
                let Phase::Stranded(store) = std::mem::replace(&mut check.phase, Phase::Held)
                else {
                    unreachable!("matched above")
                };
                ready.push((meta.clone(), store));
            }
            ready
        };
        for (meta, store) in ready {
            let engine = self.clone();
            let corpus = Arc::clone(&corpus);
            self.inner.host.spawn(Box::pin(async move {
                let opened = open_session(&store, &corpus).await;
                let id = meta.check.id.clone();
                match opened {
                    Ok(session) if meta.credentials_removed => {
                        let resumed = Resumed { store, session, corpus };
                        if engine.set_phase(&id, Phase::AwaitingKey(resumed)) {
                            let given = engine.inner.credentials.borrow().clone();
                            if let Some(given) = given {
                                engine.credentials(given.as_ref());
                            }
                        }
                    }
                    Ok(session) => {
                        if engine.inner.state.borrow().knows(&id) {
                            let provider = meta.provider.clone();
                            let resumed = Resumed { store, session, corpus };
                            engine.resume(meta, provider, Cancel::new(), resumed);
                        }
                    }
                    // Still not its corpus: it waits on.
                    Err(_) => {
                        engine.set_phase(&id, Phase::Stranded(store));
                    }
                }
            }));
        }
    }

    /// Runs `meta`'s check from its resumed session (`resumed`), with `provider`, until it
    /// ends; `cancel` may already be cancelled (it then ends at once, reporting what its
    /// session had spent).
    pub(super) fn resume(
        &self,
        meta: SessionMeta,
        provider: ProviderChoice,
        cancel: Cancel,
        resumed: Resumed<H::Store>,
    ) {
        self.place(meta.clone(), Phase::Running { cancel: cancel.clone(), events: Vec::new() });
        let engine = self.clone();
        let budget = self.budget_of(&meta);
        let Resumed { store, session, corpus } = resumed;
        let run = CheckRun {
            check: meta.check,
            model: self.model(&provider),
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
        let (awaiting, requeued) = {
            let mut state = self.inner.state.borrow_mut();
            let mut awaiting = Vec::new();
            let mut requeued = Vec::new();
            for check in &mut state.checks {
                let Some(meta) = &check.saved else { continue };
                match &check.phase {
                    Phase::AwaitingKey(_) => {
                        let Phase::AwaitingKey(resumed) =
                            std::mem::replace(&mut check.phase, Phase::Held)
                        else {
                            unreachable!("matched above")
                        };
                        awaiting.push((meta.clone(), resumed));
                    }
                    Phase::Requeued => requeued.push(meta.clone()),
                    _ => {}
                }
            }
            (awaiting, requeued)
        };
        for (meta, resumed) in awaiting {
            let cancel = Cancel::new();
            let provider = matching(&meta).unwrap_or_else(|| {
                cancel.cancel(not_resumed());
                meta.provider.clone()
            });
            self.resume(meta, provider, cancel, resumed);
        }
        for meta in requeued {
            let budget = self.budget_of(&meta);
            let provider = if meta.credentials_removed {
                matching(&meta)
            } else {
                Some(meta.provider.clone())
            };
            match provider {
                Some(provider) => {
                    let model = self.model(&provider);
                    let pending = Pending { provider, model, corpus: None, budget };
                    self.set_phase(&meta.check.id, Phase::Queued(pending));
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
                    });
                }
            }
        }
        self.pump();
    }
}

/// The checks a start found that wait (or are queued again), by why, for `Ready` and the
/// notices.
#[derive(Default)]
struct Waiting {
    /// Not started: queued again.
    requeued: Vec<SessionMeta>,
    /// Their corpus has changed since they started.
    stranded: Vec<SessionMeta>,
    /// Their session record cannot be read.
    unreadable: Vec<SessionMeta>,
    /// Their run's spending limit cannot be read.
    without_limit: Vec<SessionMeta>,
}

/// What a person is told of checks that wait for their corpus.
/// The claims of `checks`, each between quotation marks, joined by commas (for a notice).
fn quoted_claims<'a>(checks: impl IntoIterator<Item = &'a SessionMeta>) -> String {
    let claims: Vec<String> =
        checks.into_iter().map(|meta| format!("\u{201c}{}\u{201d}", meta.check.claim)).collect();
    claims.join(", ")
}

fn stranded_notice(stranded: &[SessionMeta]) -> String {
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
        quoted_claims(stranded)
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
