//! One check through the core: a claim job (or an answer job, for a whole answer) in a durable
//! session, driven over the provider's transport, to its result; and the failures the worker
//! itself reports, in the core's shape.

use std::rc::Rc;
use std::sync::Arc;

use serde::Deserialize as _;
use serde_json::Value;
use verity_core::answer::AnswerReport;
use verity_core::claim::AssessMode;
use verity_core::indexed::IndexedCorpus;
use verity_core::provider::offline::OfflineModel;
use verity_core::{
    AnswerConfig, Cancel, ClaimConfig, DriveOptions, Job, JobConfig, JobFailed, JobValue, NoTools,
    Provider, ProviderTransport, Report, RetryPolicy, Session, SessionError, Spent, Store,
    Transport, drive_session_with,
};
use verity_messages::{CheckKind, CheckRequest, CheckResult, FromWorker, Outcome, ProviderChoice};

use super::budget::{BUDGET_REACHED, Budgeted, RunBudget};
use super::model::Model;
use super::state::Phase;
use super::{Engine, Host};
use crate::corpus::CorpusState;

/// Retries of a check's failed requests (a 429, an overload, a 5xx, no response), over the
/// whole check, each after the core's backoff or the provider's `Retry-After` (when the server
/// exposes it to the page: `Access-Control-Expose-Headers`).
const MAX_RETRIES: u32 = 3;

/// A check the worker refused before it ran (a bad provider configuration, no such corpus),
/// as the core's typed failure.
pub(super) fn refused(message: impl Into<String>) -> Value {
    to_value(&JobFailed::config(message))
}

/// A check the worker ended outside the core's machines (cancelled while queued, taken over,
/// storage lost), as the core's typed failure, with what it had spent.
pub(super) fn cancelled(message: impl Into<String>, spent: Spent) -> Value {
    to_value(&JobFailed::cancelled(message, spent))
}

/// How a check ended: its result, and whether another engine took its session over (its lease:
/// another tab's engine, where tabs do not share one), which then owns the session and its
/// result, so this one must neither save the result nor delete the session.
pub(super) struct Ended {
    pub(super) result: CheckResult,
    pub(super) taken_over: bool,
}

/// One check to run: what it is, with which model, over which corpus, how it is cancelled,
/// where its session is kept, and under which run's spending limit.
pub(super) struct CheckRun<S> {
    pub(super) check: CheckRequest,
    /// The provider as the page gave it (what the result's provenance names).
    pub(super) provider: ProviderChoice,
    pub(super) model: Model,
    pub(super) corpus: Arc<IndexedCorpus>,
    pub(super) cancel: Cancel,
    pub(super) store: S,
    /// The session a reload interrupted, resumed (else a new one is started).
    pub(super) resumed: Option<Session<Job>>,
    pub(super) budget: Option<Rc<RunBudget>>,
}

impl<H: Host> Engine<H> {
    /// Runs one check to its result (a new session, or a resumed one), under its run's
    /// spending limit if it has one.
    pub(super) async fn run(&self, mut run: CheckRun<H::Store>) -> Ended {
        let resumed = run.resumed.take();
        let (outcome, taken_over) = self.drive(&run, resumed).await;
        let CheckRun { check, provider, corpus, budget, .. } = &run;
        if let Some(budget) = budget {
            budget.ended(&check.id);
        }
        // The report is typed until the message is made.
        let (outcome, cited) = match outcome {
            Driven::Report(report) => {
                let cited = CorpusState::cited(corpus, &report.assessment.citations);
                let report = serde_json::to_value(&report).expect("a report serializes");
                (Outcome::Report { report }, cited)
            }
            Driven::Answer(report) => {
                // Every sentence's cited passages, each once.
                let texts: Vec<String> = report
                    .sentences
                    .iter()
                    .flat_map(|sentence| sentence.citations.iter().map(|c| c.text.clone()))
                    .collect();
                let cited = CorpusState::cited(corpus, &texts);
                let report = serde_json::to_value(&report).expect("a report serializes");
                (Outcome::Report { report }, cited)
            }
            Driven::Failed(failure) => (Outcome::Failed { failure }, Vec::new()),
        };
        let result = CheckResult {
            id: check.id.clone(),
            claim: check.claim.clone(),
            outcome,
            cited,
            provenance: self.provenance(provider, Some(corpus)),
        };
        Ended { result, taken_over }
    }

    /// Drives `run`'s job to its outcome, and whether another engine took its session over.
    async fn drive(
        &self,
        run: &CheckRun<H::Store>,
        resumed: Option<Session<Job>>,
    ) -> (Driven, bool) {
        let CheckRun { check, model, corpus, cancel, store, budget, .. } = run;
        let budget = budget.as_deref();
        let failed = |failure: Value| (Driven::Failed(failure), false);
        if let Model::Refused(why) = model {
            return failed(refused(why.clone()));
        }
        let mut session = match resumed {
            Some(session) => session,
            None => match new_session(check, model, corpus, self.concurrency()) {
                Ok(session) => session,
                Err(failure) => return failed(failure),
            },
        };
        if let Some(budget) = budget {
            budget.started(&check.id, &session.machine().spent());
        }
        let id = check.id.clone();
        let host = &self.inner.host;
        let state = &self.inner.state;
        let options = DriveOptions::new().cancel(cancel.clone()).events(move |event| {
            let event = serde_json::to_value(&event).expect("events serialize");
            // Kept until the check ends, so that a page connecting meanwhile sees its progress.
            if let Some(check) = state.borrow_mut().check_mut(&id)
                && let Phase::Running { events, .. } = &mut check.phase
            {
                events.push(event.clone());
            }
            host.post(&FromWorker::Progress { id: id.clone(), event });
        });
        let driven = match model {
            Model::Offline => drive_on(&mut session, store, &OfflineModel, options).await,
            Model::Network { provider, .. } => {
                let transport = ProviderTransport::new(Provider::clone(provider), host.client())
                    .with_cancel(cancel.clone());
                match budget {
                    Some(budget) => {
                        let check = check.id.as_str();
                        let cancel = &cancel;
                        let transport = Budgeted { inner: transport, budget, check, cancel };
                        drive_on(&mut session, store, &transport, options).await
                    }
                    None => drive_on(&mut session, store, &transport, options).await,
                }
            }
            Model::Refused(why) => return failed(refused(why.clone())),
        };
        if let Err(error) = driven {
            let spent = session.machine().spent();
            return match error {
                SessionError::StaleLease { .. } => {
                    let message = "the check was taken over by another tab of this page";
                    (Driven::Failed(cancelled(message, spent)), true)
                }
                other => {
                    failed(cancelled(format!("the check's durable session failed: {other}"), spent))
                }
            };
        }
        (finished(session, budget, cancel), false)
    }
}

/// A new session of `check`'s claim (or answer) job over `corpus`, with the assess route `model` chooses
/// and, for an answer, `concurrency` sentences checked at once; a job the core refuses is the
/// check's failure.
fn new_session(
    check: &CheckRequest,
    model: &Model,
    corpus: &Arc<IndexedCorpus>,
    concurrency: u32,
) -> Result<Session<Job>, Value> {
    let assess = match model {
        Model::Network { assess, .. } => *assess,
        _ => AssessMode::default(),
    };
    let retry = RetryPolicy::with_retries(MAX_RETRIES);
    let config = match check.kind {
        CheckKind::Claim => JobConfig::Claim(ClaimConfig {
            retry,
            assess,
            ..ClaimConfig::new(check.claim.clone(), corpus.id().clone())
        }),
        CheckKind::Answer => JobConfig::Answer(AnswerConfig {
            retry,
            assess,
            marks: check.marks.clone(),
            decompose: check.decompose,
            concurrency: Some(concurrency),
            ..AnswerConfig::new(check.claim.clone(), corpus.id().clone())
        }),
    };
    let job = Job::new(config, std::slice::from_ref(corpus))
        .map_err(|failed_job| to_value(&failed_job))?;
    Session::start(job).map_err(|error| refused(error.to_string()))
}

/// The outcome of a session driven to its end: its report, or its typed failure (a cancel by
/// its run's limit, not by a person, is the `budget` failure).
fn finished(session: Session<Job>, budget: Option<&RunBudget>, cancel: &Cancel) -> Driven {
    let failure = match session.into_machine().finish_typed() {
        Ok(JobValue::Report(report)) => return Driven::Report(report),
        Ok(JobValue::Answer(report)) => return Driven::Answer(report),
        // Only a forged saved record resumes another kind of job as a check.
        Ok(JobValue::Step(_)) => refused("the saved check is not a claim check"),
        Err(failed_job) => match budget {
            Some(budget)
                if failed_job.kind() == verity_core::JobFailureKind::Cancelled
                    && cancel.reason().as_deref() == Some(BUDGET_REACHED) =>
            {
                let spent = failed_job.spent();
                let message = budget.message(spent.usage.cost);
                to_value(&JobFailed::budget(message, spent))
            }
            _ => to_value(&failed_job),
        },
    };
    Driven::Failed(failure)
}

/// How a driven check ended: its report, typed until the message is made, or its failure in
/// the core's shape.
enum Driven {
    Report(Box<Report>),
    Answer(Box<AnswerReport>),
    Failed(Value),
}

impl<H: Host> Engine<H> {
    /// How many checks run at once, the page's last word (its `check` message's
    /// `concurrency`): also how many of an answer's sentences are checked at once, since a page
    /// checks one answer at a time.
    fn concurrency(&self) -> u32 {
        u32::try_from(self.inner.state.borrow().concurrency).unwrap_or(1)
    }

    /// `choice` read once into what runs its checks ([`Model`]).
    pub(super) fn model(&self, choice: &ProviderChoice) -> Model {
        match choice {
            ProviderChoice::Offline => Model::Offline,
            ProviderChoice::Network { config } => {
                let assess = match config.get("assess").map(AssessMode::deserialize) {
                    None => AssessMode::default(),
                    Some(Ok(assess)) => assess,
                    Some(Err(error)) => return Model::Refused(format!("assess: {error}")),
                };
                match self.network_provider(config) {
                    Ok(provider) => Model::Network { provider: Rc::new(provider), assess },
                    Err(why) => Model::Refused(why),
                }
            }
            // Settings are resolved when a message arrives; only a forged saved record holds
            // them.
            ProviderChoice::Settings { .. } => {
                Model::Refused("the saved check names no provider the engine can run".to_owned())
            }
        }
    }

    /// A network provider from its JSON, refused before anything is sent when it would send
    /// its key over plain HTTP to a host that is not loopback (the URL read as the host's
    /// client reads it; the client refuses such a request again, each time).
    pub(super) fn network_provider(&self, config: &Value) -> Result<Provider, String> {
        // `assess` is the claim job's (see `drive`), not the provider's.
        let mut config = config.clone();
        if let Some(fields) = config.as_object_mut() {
            fields.remove("assess");
        }
        let provider: Provider =
            serde_json::from_value(config).map_err(|error| format!("provider: {error}"))?;
        provider.refuse_key_in_the_clear(|url| self.inner.host.url_parts(url))?;
        Ok(provider)
    }
}

pub(super) fn to_value(failed: &JobFailed) -> Value {
    serde_json::to_value(failed).expect("a failure serializes")
}

async fn drive_on<S: Store>(
    session: &mut Session<Job>,
    store: &S,
    transport: &impl Transport,
    options: DriveOptions<'_>,
) -> Result<(), SessionError> {
    drive_session_with(session, store, transport, &NoTools, options).await
}
