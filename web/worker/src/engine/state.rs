//! The engine's state: the corpora, the results, and one table of the checks not finished
//! ([`Check`]), each in one [`Phase`] with what that phase needs.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;
use verity_core::indexed::IndexedCorpus;
use verity_core::{Cancel, Job, Session, ToolOutput};
use verity_messages::{CheckRequest, CheckResult, ProviderChoice};

use super::budget::RunBudget;
use super::model::Model;
use crate::corpus::CorpusState;
use crate::saved::SessionMeta;

/// A check not finished: what was asked, what is saved of it, and where it is.
pub(super) struct Check<S> {
    pub(super) request: CheckRequest,
    /// What is saved of it with the unfinished checks ([`crate::saved::Unfinished`]), so a
    /// reload finds it; `None` for a check over a named corpus, which lives in memory only.
    pub(super) saved: Option<SessionMeta>,
    pub(super) phase: Phase<S>,
}

/// Where a check is, from its asking to its end (then it leaves the table for the results).
/// The transitions: `Queued` → `Running` ([`Engine::pump`](super::Engine)); after a reload,
/// `Requeued` → `Queued` once the page's credentials came, `AwaitingKey` → `Running` likewise,
/// `Stranded` → `Running` once its corpus is back; `Held` only ends, when cancelled. Every
/// phase can end: by a cancel, or (`Running`) with the check's result.
pub(super) enum Phase<S> {
    /// Waiting for a free slot.
    Queued(Pending),
    /// Queued again after a reload (it had not started) while another check queued again
    /// needs the page's key: all of them wait for [`ToWorker::Credentials`], in order.
    ///
    /// [`ToWorker::Credentials`]: verity_messages::ToWorker::Credentials
    Requeued,
    /// Running, with its events so far (replayed to a page that connects meanwhile).
    Running { cancel: Cancel, events: Vec<Value> },
    /// Resumed from its session after a reload; its key was not stored, so it waits for the
    /// page's credentials.
    AwaitingKey(Resumed<S>),
    /// Interrupted by a reload, and the corpus has changed since it started: its session is
    /// kept (nothing it received is lost) until the corpus is as it was again, or a cancel.
    Stranded(S),
    /// Its session record, or its run's spending limit, could not be read: kept as it is,
    /// never started over (that would pay again) nor run without its limit, until cancelled.
    Held,
}

/// What a queued check runs with.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) provider: ProviderChoice,
    /// `provider` read once (for all the checks of a message).
    pub(super) model: Model,
    /// A named corpus (taken when the check was asked for); `None`: the main corpus.
    pub(super) corpus: Option<Arc<IndexedCorpus>>,
    /// Its run's spending limit, if the run has one.
    pub(super) budget: Option<Rc<RunBudget>>,
}

/// A session opened from storage, with where it goes on.
pub(super) struct Resumed<S> {
    pub(super) store: S,
    pub(super) session: Session<Job>,
    pub(super) corpus: Arc<IndexedCorpus>,
}

pub(super) struct State<S> {
    pub(super) corpus: CorpusState,
    /// The named corpora ([`ToWorker::AddToCorpus`]), in memory only.
    ///
    /// [`ToWorker::AddToCorpus`]: verity_messages::ToWorker::AddToCorpus
    pub(super) named: HashMap<String, CorpusState>,
    pub(super) results: Vec<CheckResult>,
    /// The checks not finished, in the order they were asked for (the queue's order).
    pub(super) checks: Vec<Check<S>>,
    /// The page's steps running, with their cancels: they count against the concurrency.
    pub(super) steps: Vec<(String, Cancel)>,
    pub(super) concurrency: usize,
    /// The spending limits of runs with checks not finished yet.
    pub(super) budgets: Vec<Rc<RunBudget>>,
    /// Page tool calls of running steps waiting for their [`ToWorker::ToolResult`], by step
    /// id and call id.
    ///
    /// [`ToWorker::ToolResult`]: verity_messages::ToWorker::ToolResult
    pub(super) tool_calls: HashMap<(String, String), futures_channel::oneshot::Sender<ToolOutput>>,
}

impl<S> Default for State<S> {
    fn default() -> Self {
        Self {
            corpus: CorpusState::default(),
            named: HashMap::new(),
            results: Vec::new(),
            checks: Vec::new(),
            steps: Vec::new(),
            concurrency: 1,
            budgets: Vec::new(),
            tool_calls: HashMap::new(),
        }
    }
}

impl<S> std::fmt::Debug for State<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let phases: Vec<(&str, &'static str)> = self
            .checks
            .iter()
            .map(|check| (check.request.id.as_str(), check.phase.name()))
            .collect();
        f.debug_struct("State")
            .field("corpus", &self.corpus.current().corpus().len())
            .field("results", &self.results.len())
            .field("checks", &phases)
            .field("steps", &self.steps.len())
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl<S> Phase<S> {
    fn name(&self) -> &'static str {
        match self {
            Self::Queued(_) => "queued",
            Self::Requeued => "requeued",
            Self::Running { .. } => "running",
            Self::AwaitingKey(_) => "awaiting a key",
            Self::Stranded(_) => "stranded",
            Self::Held => "held",
        }
    }

    /// Whether a page is shown it as running (else as queued).
    pub(super) fn shown_running(&self) -> bool {
        matches!(self, Self::Running { .. } | Self::AwaitingKey(_))
    }
}

impl<S> State<S> {
    /// The check `id` not finished, if there is one.
    pub(super) fn check_mut(&mut self, id: &str) -> Option<&mut Check<S>> {
        self.checks.iter_mut().find(|check| check.request.id == id)
    }

    /// Whether `id` is a check not finished.
    pub(super) fn knows(&self, id: &str) -> bool {
        self.checks.iter().any(|check| check.request.id == id)
    }

    /// Takes the check `id` out of the table (it ended).
    pub(super) fn remove(&mut self, id: &str) -> Option<Check<S>> {
        let at = self.checks.iter().position(|check| check.request.id == id)?;
        Some(self.checks.remove(at))
    }

    /// How many checks and steps run.
    pub(super) fn running(&self) -> usize {
        let checks =
            self.checks.iter().filter(|check| matches!(check.phase, Phase::Running { .. })).count();
        checks + self.steps.len()
    }

    /// How many checks wait for a free slot.
    pub(super) fn queued(&self) -> usize {
        self.checks.iter().filter(|check| matches!(check.phase, Phase::Queued(_))).count()
    }

    /// Whether checks resumed or queued again after a reload wait for the page's credentials:
    /// no queued check starts meanwhile (starting others first could exceed the concurrency
    /// once they run, and would change their order).
    pub(super) fn waits_for_key(&self) -> bool {
        self.checks
            .iter()
            .any(|check| matches!(check.phase, Phase::Requeued | Phase::AwaitingKey(_)))
    }

    /// What is saved of the checks not finished, in order.
    pub(super) fn saved(&self) -> Vec<SessionMeta> {
        self.checks.iter().filter_map(|check| check.saved.clone()).collect()
    }
}
