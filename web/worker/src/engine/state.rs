//! The engine's state: the corpora, the results, the queue and the running checks.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use verity_core::indexed::IndexedCorpus;
use verity_core::{Cancel, Job, Session, ToolOutput};
use verity_messages::{CheckRequest, CheckResult, ProviderChoice};

use super::budget::RunBudget;
use crate::corpus::CorpusState;
use crate::saved::SessionMeta;

#[derive(Debug)]
pub(super) struct Pending {
    pub(super) check: CheckRequest,
    pub(super) provider: ProviderChoice,
    /// A named corpus (taken when the check was asked for); `None`: the main corpus.
    pub(super) corpus: Option<Arc<IndexedCorpus>>,
    /// Its run's spending limit, if the run has one.
    pub(super) budget: Option<Rc<RunBudget>>,
}

#[derive(Debug)]
pub(super) struct Running {
    pub(super) id: String,
    pub(super) cancel: Cancel,
    /// The check (`None` for a step): what a page that connects later is shown as running.
    pub(super) check: Option<CheckRequest>,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) corpus: CorpusState,
    /// The named corpora ([`ToWorker::AddToCorpus`]), in memory only.
    pub(super) named: HashMap<String, CorpusState>,
    pub(super) results: Vec<CheckResult>,
    pub(super) queue: VecDeque<Pending>,
    pub(super) running: Vec<Running>,
    pub(super) concurrency: usize,
    /// The main corpus's checks not finished yet, as saved ([`Unfinished`]).
    pub(super) unfinished: Vec<SessionMeta>,
    /// The spending limits of runs with checks not finished yet.
    pub(super) budgets: Vec<Rc<RunBudget>>,
    /// Page tool calls of running steps waiting for their [`ToWorker::ToolResult`], by step
    /// id and call id.
    pub(super) tool_calls: HashMap<(String, String), futures_channel::oneshot::Sender<ToolOutput>>,
}

/// A check interrupted by a reload whose corpus has changed since it started: its session is
/// kept (nothing it received is lost) until the corpus is as it was again, when it resumes, or
/// until the person cancels it.
pub(super) struct Stranded<S> {
    pub(super) meta: SessionMeta,
    pub(super) store: S,
}

/// A resumed session whose provider needs a key the worker did not store.
pub(super) struct Awaiting<S> {
    pub(super) meta: SessionMeta,
    pub(super) store: S,
    pub(super) session: Session<Job>,
    pub(super) corpus: Arc<IndexedCorpus>,
}
