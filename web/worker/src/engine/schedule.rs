//! The scheduler: queued checks start while fewer than the concurrency bound run, and the
//! unfinished ones are saved so a reload re-queues them.

use std::rc::Rc;

use std::sync::Arc;

use verity_core::indexed::IndexedCorpus;
use verity_core::{Cancel, JobFailed, Spent};
use verity_messages::{CheckRequest, CheckResult, FromWorker, Outcome, ProviderChoice};

use super::budget::{self, RunBudget};
use super::check::{CheckRun, refused, to_value};
use super::model::Model;
use super::state::{Check, Pending, Phase};
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
        let (provider, limit) = match resolve_run(provider, budget) {
            Ok(resolved) => resolved,
            Err(message) => {
                let corpus = self.corpus();
                return self.refuse_checks(checks, &message, provider, Some(&corpus));
            }
        };
        // Read once for all of them.
        let model = self.model(&provider);
        if let Model::Refused(why) = &model {
            let corpus = self.corpus();
            return self.refuse_checks(checks, why, &provider, Some(&corpus));
        }
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
            (Some(limit), Some(first)) => Some(RunBudget::new(first.id.clone(), limit)),
            _ => None,
        };
        {
            let mut state = self.inner.state.borrow_mut();
            state.concurrency = concurrency.clamp(1, MAX_CONCURRENCY);
            state.budgets.extend(budget.clone());
            for check in &checks {
                // The named corpora live in memory: only the main corpus's checks outlive a
                // reload.
                let saved = named.is_none().then(|| {
                    let mut meta = SessionMeta::new(check, &provider);
                    meta.run = budget.as_ref().map(|budget| budget.run().to_owned());
                    meta
                });
                let pending = Pending {
                    provider: provider.clone(),
                    model: model.clone(),
                    corpus: named.clone(),
                    budget: budget.clone(),
                };
                state.checks.push(Check {
                    request: check.clone(),
                    saved,
                    phase: Phase::Queued(pending),
                });
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
        let over: Vec<(Check<H::Store>, Pending)> = {
            let mut state = self.inner.state.borrow_mut();
            if state.waits_for_key() {
                return;
            }
            let reached = |check: &Check<H::Store>| match &check.phase {
                Phase::Queued(pending) => {
                    pending.budget.as_ref().is_some_and(|budget| budget.reached())
                }
                _ => false,
            };
            let (over, kept) = std::mem::take(&mut state.checks).into_iter().partition(reached);
            state.checks = kept;
            over.into_iter()
                .map(|mut check| match std::mem::replace(&mut check.phase, Phase::Held) {
                    Phase::Queued(pending) => (check, pending),
                    _ => unreachable!("only queued checks reach their limit here"),
                })
                .collect()
        };
        self.start_queued();
        if over.is_empty() {
            return;
        }
        // Saved together; the pump that follows finds none of them queued any more.
        let results = over
            .into_iter()
            .map(|(check, pending)| {
                let message = pending.budget.as_ref().map(|budget| budget.message(0.0));
                let failed = JobFailed::budget(message.unwrap_or_default(), Spent::default());
                let corpus = pending.corpus.clone().unwrap_or_else(|| self.corpus());
                CheckResult {
                    id: check.request.id,
                    claim: check.request.claim,
                    outcome: Outcome::Failed { failure: to_value(&failed) },
                    cited: Vec::new(),
                    provenance: self.provenance(&pending.provider, Some(&corpus)),
                }
            })
            .collect();
        self.all_finished(results);
    }

    /// Starts queued checks, in the order they were asked for, while fewer than the
    /// concurrency bound run.
    fn start_queued(&self) {
        loop {
            let (check, pending, corpus, cancel) = {
                let mut state = self.inner.state.borrow_mut();
                if state.running() >= state.concurrency {
                    return;
                }
                let current = state.corpus.current().clone();
                let Some(check) =
                    state.checks.iter_mut().find(|check| matches!(check.phase, Phase::Queued(_)))
                else {
                    return;
                };
                let cancel = Cancel::new();
                let running = Phase::Running { cancel: cancel.clone(), events: Vec::new() };
                let Phase::Queued(pending) = std::mem::replace(&mut check.phase, running) else {
                    unreachable!("found queued")
                };
                let corpus = pending.corpus.clone().unwrap_or(current);
                (check.request.clone(), pending, corpus, cancel)
            };
            let mut meta = SessionMeta::new(&check, &pending.provider);
            meta.run = pending.budget.as_ref().map(|budget| budget.run().to_owned());
            meta.corpus = Some(corpus.id().to_string());
            let store = self.inner.host.new_session(&meta);
            let engine = self.clone();
            let Pending { provider, model, budget, .. } = pending;
            let run =
                CheckRun { check, provider, model, corpus, cancel, store, resumed: None, budget };
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
        let mut state = self.inner.state.borrow_mut();
        let state = &mut *state;
        let checks = &state.checks;
        state.budgets.retain(|budget| {
            let run = Some(budget.run());
            checks.iter().any(|check| {
                check.saved.as_ref().is_some_and(|meta| meta.run.as_deref() == run)
                    || matches!(&check.phase, Phase::Queued(pending)
                        if pending.budget.as_ref().is_some_and(|queued| Rc::ptr_eq(queued, budget)))
            })
        });
        Unfinished {
            concurrency: state.concurrency,
            checks: state.saved(),
            budgets: state.budgets.iter().map(|budget| budget.saved()).collect(),
        }
    }

    /// The spending limit of `meta`'s run, if it has one and it is still known.
    pub(super) fn budget_of(&self, meta: &SessionMeta) -> Option<Rc<RunBudget>> {
        let run = meta.run.as_deref()?;
        self.inner.state.borrow().budgets.iter().find(|budget| budget.run() == run).cloned()
    }
}

/// The provider a run's checks use and its spending limit, if any. The app's settings carry
/// the run's limit (`budget` is a page's that sends its provider as JSON); the app sends its
/// Provider section as it is, so what it lacks is refused here, and so is a limit the engine
/// could not enforce (no price, no cost reported).
fn resolve_run(
    provider: &ProviderChoice,
    budget: Option<f64>,
) -> Result<(ProviderChoice, Option<f64>), String> {
    let limit = match budget {
        Some(limit) if !(limit.is_finite() && limit > 0.0) => {
            return Err(format!("budget: an amount in dollars above 0, not {limit}"));
        }
        Some(limit) => Some(limit),
        None => provider.budget()?,
    };
    let provider = provider.clone().resolved()?;
    if limit.is_some() {
        budget::enforceable(&provider)?;
    }
    Ok((provider, limit))
}
