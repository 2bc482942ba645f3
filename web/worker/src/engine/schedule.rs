//! The scheduler: queued checks start while fewer than the concurrency bound run, and the
//! unfinished ones are saved so a reload re-queues them.

use std::collections::VecDeque;
use std::rc::Rc;

use std::sync::Arc;

use verity_core::indexed::IndexedCorpus;
use verity_core::{Cancel, JobFailed, Spent};
use verity_messages::{CheckRequest, CheckResult, FromWorker, Outcome, ProviderChoice};

use super::budget::{self, RunBudget};
use super::check::{CheckRun, refused, to_value};
use super::state::{Pending, Running};
use super::{Engine, Host, MAX_CONCURRENCY};
use crate::saved::{SessionMeta, Unfinished};

impl<H: Host> Engine<H> {
    /// Queues checks a page asked for (`ToWorker::Check`), each saved as unfinished (a reload
    /// queues it again), under the run's spending limit if it has one. What cannot run (the
    /// provider's settings lack something, a limit the engine could not enforce, a named corpus
    /// that does not exist) ends every check at once, with why, before anything is sent.
    pub(super) fn queue_checks(
        &self,
        checks: Vec<CheckRequest>,
        provider: &ProviderChoice,
        concurrency: usize,
        corpus: Option<String>,
        budget: Option<f64>,
    ) {
        // The app's settings carry the run's limit; a page that sends its provider as JSON
        // gives it in the message.
        let limit = match budget {
            Some(limit) if !(limit.is_finite() && limit > 0.0) => {
                Err(format!("budget: an amount in dollars above 0, not {limit}"))
            }
            Some(limit) => Ok(Some(limit)),
            None => provider.budget(),
        };
        // The app sends its Provider section as it is: what it lacks fails the checks, and
        // so does a limit the engine could not enforce.
        let resolved = limit.clone().and_then(|limit| {
            let provider = provider.clone().resolved()?;
            if limit.is_some() {
                budget::enforceable(&provider)?;
            }
            Ok(provider)
        });
        let provider = match resolved {
            Ok(provider) => provider,
            Err(message) => {
                let corpus = self.corpus();
                return self.refuse_checks(checks, &message, provider, Some(&corpus));
            }
        };
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
                    let message = format!("no corpus named {name:?}: add items to it first");
                    return self.refuse_checks(checks, &message, &provider, None);
                }
                found
            }
        };
        let budget = match (limit, checks.first()) {
            (Ok(Some(limit)), Some(first)) => Some(RunBudget::new(first.id.clone(), limit)),
            _ => None,
        };
        {
            let mut state = self.inner.state.borrow_mut();
            state.concurrency = concurrency.clamp(1, MAX_CONCURRENCY);
            state.budgets.extend(budget.clone());
            for check in &checks {
                state.queue.push_back(Pending {
                    check: check.clone(),
                    provider: provider.clone(),
                    corpus: named.clone(),
                    budget: budget.clone(),
                });
                // The named corpora live in memory: only the main corpus's checks outlive a
                // reload.
                if named.is_none() {
                    let mut meta = SessionMeta::new(check, &provider);
                    meta.run = budget.as_ref().map(|budget| budget.run().to_owned());
                    state.unfinished.push(meta);
                }
            }
        }
        self.save_unfinished();
        for check in checks {
            self.post(&FromWorker::Queued { check });
        }
        self.pump();
    }

    /// Ends each of `checks` at once, refused with `message` (each shown queued first, so a
    /// page sees it as any other check that ended).
    fn refuse_checks(
        &self,
        checks: Vec<CheckRequest>,
        message: &str,
        provider: &ProviderChoice,
        corpus: Option<&IndexedCorpus>,
    ) {
        for check in checks {
            self.post(&FromWorker::Queued { check: check.clone() });
            self.finished(CheckResult {
                id: check.id,
                claim: check.claim,
                outcome: Outcome::Failed { failure: refused(message) },
                cited: Vec::new(),
                provenance: self.provenance(provider, corpus),
            });
        }
    }

    /// Ends the queued checks whose run's limit was reached (at once, without a request or a
    /// place among the running ones), then starts queued checks while fewer than the
    /// concurrency bound run.
    pub(super) fn pump(&self) {
        if !self.inner.awaiting.borrow().is_empty()
            || !self.inner.awaiting_queue.borrow().is_empty()
        {
            // Checks resumed after a reload wait for the page's credentials: starting others
            // first could exceed the concurrency once they run.
            return;
        }
        let over: VecDeque<Pending> = {
            let mut state = self.inner.state.borrow_mut();
            let (over, queue): (VecDeque<Pending>, VecDeque<Pending>) =
                std::mem::take(&mut state.queue).into_iter().partition(|pending| {
                    pending.budget.as_ref().is_some_and(|budget| budget.reached())
                });
            state.queue = queue;
            over
        };
        self.start_queued();
        if over.is_empty() {
            return;
        }
        // Saved together; the pump that follows finds none of them queued any more.
        let results = over
            .into_iter()
            .map(|pending| {
                let message = pending.budget.as_ref().map(|budget| budget.message(0.0));
                let failed = JobFailed::budget(message.unwrap_or_default(), Spent::default());
                let corpus = pending.corpus.clone().unwrap_or_else(|| self.corpus());
                CheckResult {
                    id: pending.check.id,
                    claim: pending.check.claim,
                    outcome: Outcome::Failed { failure: to_value(&failed) },
                    cited: Vec::new(),
                    provenance: self.provenance(&pending.provider, Some(&corpus)),
                }
            })
            .collect();
        self.all_finished(results);
    }

    /// Starts queued checks while fewer than the concurrency bound run.
    fn start_queued(&self) {
        loop {
            let (pending, corpus, cancel) = {
                let mut state = self.inner.state.borrow_mut();
                if state.running.len() >= state.concurrency {
                    return;
                }
                let Some(pending) = state.queue.pop_front() else { return };
                let cancel = Cancel::new();
                state.running.push(Running {
                    id: pending.check.id.clone(),
                    cancel: cancel.clone(),
                    check: Some(pending.check.clone()),
                });
                let corpus =
                    pending.corpus.clone().unwrap_or_else(|| state.corpus.current().clone());
                (pending, corpus, cancel)
            };
            let mut meta = SessionMeta::new(&pending.check, &pending.provider);
            meta.run = pending.budget.as_ref().map(|budget| budget.run().to_owned());
            meta.corpus = Some(corpus.id().to_string());
            let store = self.inner.host.new_session(&meta);
            let engine = self.clone();
            let Pending { check, provider, budget, .. } = pending;
            let run = CheckRun { check, provider, corpus, cancel, store, resumed: None, budget };
            self.inner.host.spawn(Box::pin(async move {
                let ended = engine.run(run).await;
                engine.ended(ended);
            }));
        }
    }

    /// Saves the unfinished checks and the limits of their runs (a run none of whose checks
    /// is left is forgotten).
    pub(super) fn save_unfinished(&self) {
        let unfinished = self.unfinished();
        self.inner.host.save_unfinished(&unfinished);
    }

    /// The unfinished checks and the limits of their runs, as saved (a run none of whose
    /// checks is left is forgotten).
    pub(super) fn unfinished(&self) -> Unfinished {
        {
            let mut state = self.inner.state.borrow_mut();
            let state = &mut *state;
            let unfinished = &state.unfinished;
            let queued = &state.queue;
            state.budgets.retain(|budget| {
                let run = Some(budget.run());
                unfinished.iter().any(|meta| meta.run.as_deref() == run)
                    || queued.iter().any(|pending| {
                        pending.budget.as_ref().is_some_and(|queued| Rc::ptr_eq(queued, budget))
                    })
            });
            Unfinished {
                concurrency: state.concurrency,
                checks: state.unfinished.clone(),
                budgets: state.budgets.iter().map(|budget| budget.saved()).collect(),
            }
        }
    }

    /// The spending limit of `meta`'s run, if it has one and it is still known.
    pub(super) fn budget_of(&self, meta: &SessionMeta) -> Option<Rc<RunBudget>> {
        let run = meta.run.as_deref()?;
        self.inner.state.borrow().budgets.iter().find(|budget| budget.run() == run).cloned()
    }
}
