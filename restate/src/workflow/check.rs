//! One job, run durably: the `ClaimCheck` workflow and a batch's private `BatchCheck`, both
//! driving the core's [`Session`] with every answer a journaled side effect (see the
//! [`workflow`](super) docs).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use restate_sdk::context::DurableFuture;
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use verity_core::indexed::IndexedCorpus;
use verity_core::{
    AssistantMessage, CallId, Job, JobConfig, JobFailed, OwnedModelRequest, Session, SessionOutput,
    Spent, ToolCall, ToolOutput, Tools,
};

use super::terminal;
use crate::corpus::CorpusSource;
use crate::host::Host;
use crate::limiter::{self, RateRef};

/// What a `ClaimCheck` workflow is given: a job configuration (the JSON of
/// [`verity_core::JobConfig`]; a claim job's `corpus` field is filled in from `corpus`) and,
/// for a claim job, where its corpus comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckInput {
    /// The job configuration.
    pub job: Value,
    /// The claim's corpus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<CorpusSource>,
    /// The rate limiter every model request of the check waits for (a batch's), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateRef>,
}

/// A check's outcome: the value (a claim's report, a step's submission) or the typed failure,
/// and what was spent either way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    /// The job's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The job's failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<JobFailed>,
    /// Neither: the check ended with an error of its own (a worker refused its corpus, or it
    /// was cancelled); the error. A batch records it as that claim's failure and goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Requests, turns, tokens and cost.
    pub spent: Spent,
}

impl CheckResult {
    /// The outcome of a finished job.
    #[must_use]
    pub fn of(outcome: Result<Value, JobFailed>, spent: Spent) -> Self {
        match outcome {
            Ok(value) => Self { value: Some(value), failure: None, refused: None, spent },
            Err(failure) => {
                Self { value: None, spent: failure.spent(), failure: Some(failure), refused: None }
            }
        }
    }

    /// A check that ended with `error` instead of an outcome.
    #[must_use]
    pub fn refused(error: impl std::fmt::Display) -> Self {
        Self {
            value: None,
            failure: None,
            refused: Some(error.to_string()),
            spent: Spent::default(),
        }
    }

    /// Whether the check failed (a typed failure or an error).
    #[must_use]
    pub fn is_failure(&self) -> bool {
        self.value.is_none()
    }

    /// Whether the check ended without a verdict: a failure, but not one that leaves the
    /// verdict `insufficient` ([`verity_core::JobFailureKind::is_insufficient`]), which every
    /// host counts as that verdict.
    #[must_use]
    pub fn has_no_verdict(&self) -> bool {
        self.value.is_none()
            && !self.failure.as_ref().is_some_and(|failure| failure.kind().is_insufficient())
    }
}

/// Builds the job of `input` on `host`: `Err(Ok(failure))` for a configuration the core
/// refuses (a typed failure, the check's result), `Err(Err(message))` for a corpus the worker
/// refuses (a terminal error). A corpus file is loaded inside a tokio runtime (see
/// [`crate::corpus::Corpora::get`]); inline passages need none.
///
/// # Errors
/// As above.
pub async fn build_job(host: &Host, input: &CheckInput) -> Result<Job, Result<JobFailed, String>> {
    let (config, corpora) = job_config(host, input).await?;
    Job::new(config, &corpora).map_err(Ok)
}

/// The typed configuration of `input`'s job, read once from its JSON, with the corpora it
/// names loaded; errors as [`build_job`]'s.
async fn job_config(
    host: &Host,
    input: &CheckInput,
) -> Result<(JobConfig, Vec<Arc<IndexedCorpus>>), Result<JobFailed, String>> {
    let mut config = input.job.clone();
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or_default();
    if !["claim", "answer"].contains(&kind) && !host.allow_steps {
        return Err(Err(format!(
            "this worker runs only claim and answer jobs, not {kind:?} (its operator starts it \
             with --allow-steps to run steps on its model)"
        )));
    }
    let mut corpora = Vec::new();
    if let Some(source) = &input.corpus {
        let corpus = host.corpus(source).await.map_err(Err)?;
        if let Value::Object(fields) = &mut config
            && matches!(fields.get("kind").and_then(Value::as_str), Some("claim" | "answer"))
        {
            fields.insert("corpus".to_owned(), Value::String(corpus.id().as_str().to_owned()));
        }
        corpora.push(corpus);
    }
    let config =
        JobConfig::from_value(config).map_err(|error| Ok(JobFailed::config(error.to_string())))?;
    Ok((config, corpora))
}

/// What one of [`drive_durably`]'s durable futures ended with.
enum Awaited {
    /// Call `id`'s retry delay ran out (or the invocation was cancelled): `request` is made
    /// next.
    Delay { id: CallId, request: OwnedModelRequest, done: Result<(), TerminalError> },
    /// Call `id`'s invocation ended (its response, or its error); `slot` is its rate limiter
    /// slot.
    Call {
        id: CallId,
        slot: Option<String>,
        outcome: Result<Json<AssistantMessage>, TerminalError>,
    },
}

/// One of [`drive_durably`]'s durable futures: timers and invocations in one set.
type InFlight<'a> = std::pin::Pin<Box<dyn DurableFuture<Output = Awaited> + Send + 'a>>;

/// Drives `job` to its end in the workflow `ctx`: see the module documentation.
///
/// A job with one model call pending (a claim, a step) makes it as a side effect of its own
/// workflow. A job with several pending at once (an answer's sentences, up to its
/// `concurrency`) makes each as an invocation of the worker's private [`ModelCall`] service and
/// records each response as it comes back: Restate journals which finished first, so a replay
/// records them in the same order and the machine takes the same path. A retried call's delay
/// is then a durable timer beside the calls in flight, so calls retried together wait out
/// their delays at once.
async fn drive_durably(
    ctx: &WorkflowContext<'_>,
    host: &Arc<Host>,
    job: Job,
    rate: Option<(&RateRef, u64)>,
) -> Result<CheckResult, HandlerError> {
    let check = ctx.key().to_owned();
    let mut session = Session::start(job).map_err(terminal)?;
    let mut in_flight: DurableFuturesUnordered<InFlight<'_>> = DurableFuturesUnordered::new();
    // The call each future in `in_flight` is for, by its place there.
    let mut calls: BTreeMap<usize, CallId> = BTreeMap::new();
    loop {
        let pending: Vec<(CallId, u64, OwnedModelRequest)> = session
            .poll_calls()
            .into_iter()
            .filter(|call| !calls.values().any(|id| *id == call.id))
            .map(|call| (call.id, call.delay_ms, call.request.to_owned_request()))
            .collect();
        if in_flight.is_empty() && pending.len() == 1 {
            let (id, delay_ms, request) = pending.into_iter().next().expect("one call");
            if delay_ms > 0 {
                ctx.sleep(Duration::from_millis(delay_ms)).await?;
            }
            let slot = wait_for_slot(ctx, rate, &check, id, &request).await?;
            let host = Arc::clone(host);
            let response: AssistantMessage =
                ctx.run(|| async move {
                    Ok::<_, HandlerError>(Json(host.model.complete(request).await))
                })
                .name(format!("model {}", id.0))
                .await?
                .into_inner();
            settle_call(ctx, &mut session, rate, (id, slot), response, true).await?;
            continue;
        }
        for (id, delay_ms, request) in pending {
            if delay_ms > 0 {
                let delay = ctx
                    .sleep(Duration::from_millis(delay_ms))
                    .map(move |done| Awaited::Delay { id, request, done });
                calls.insert(in_flight.push(Box::pin(delay)), id);
            } else {
                start_call(ctx, rate, &check, (id, request), &mut in_flight, &mut calls).await?;
            }
        }
        // Awaited while one of them is still pending: a failure that ended the job leaves the
        // others' responses nobody to go to.
        let pending: Vec<CallId> = session.poll_calls().iter().map(|call| call.id).collect();
        let awaited = calls.values().any(|id| pending.contains(id));
        if awaited && let Some((place, awaited)) = in_flight.next().await? {
            calls.remove(&place);
            match awaited {
                Awaited::Delay { id, request, done } => {
                    done?;
                    // A call no longer pending (the job ended) is not started.
                    if pending.contains(&id) {
                        let call = (id, request);
                        start_call(ctx, rate, &check, call, &mut in_flight, &mut calls).await?;
                    }
                }
                Awaited::Call { id, slot, outcome } => {
                    let response = match outcome {
                        Ok(response) => response.into_inner(),
                        // The invocation ended with an error of its own: a failed call, which
                        // the core retries or fails by its rules.
                        Err(error) => {
                            AssistantMessage::failed(format!("the model call failed: {error}"))
                        }
                    };
                    let record = pending.contains(&id);
                    settle_call(ctx, &mut session, rate, (id, slot), response, record).await?;
                }
            }
            continue;
        }
        match session.poll() {
            SessionOutput::RunTools { batch, pending, .. } => {
                // One at a time, in the model's order: the journal's order is then the same
                // on every replay.
                // Each call with what the core's rule says of it should the attempt that
                // started it die before its result was journaled.
                let pending: Vec<(ToolCall, Option<ToolOutput>)> =
                    pending.iter().map(|p| (p.call.clone(), p.interrupted_outcome())).collect();
                for (call, interrupted) in pending {
                    let fresh = Arc::new(AtomicBool::new(false));
                    let started = Arc::clone(&fresh);
                    ctx.run(|| async move {
                        started.store(true, Ordering::SeqCst);
                        Ok::<_, HandlerError>(())
                    })
                    .name(format!("tool started {} {}", batch.0, call.id))
                    .await?;
                    session.start_tool(batch, &call.id).map_err(terminal)?;
                    let host = Arc::clone(host);
                    let tool_call = call.clone();
                    let output: ToolOutput = ctx
                        .run(|| async move {
                            // `started` came from the journal, not from this attempt: the
                            // call ran (or began to) in an attempt that died before its
                            // result was journaled. The core decides (`Session`'s rule).
                            if !fresh.load(Ordering::SeqCst)
                                && let Some(unknown) = interrupted
                            {
                                return Ok::<_, HandlerError>(Json(unknown));
                            }
                            Ok(Json(host.tools.run(&tool_call).await))
                        })
                        .name(format!("tool settled {} {}", batch.0, call.id))
                        .await?
                        .into_inner();
                    session.settle_tool(batch, &call.id, output).map_err(terminal)?;
                }
            }
            // Done (the enum is non-exhaustive: anything newer is not ours to drive).
            _ => break,
        }
    }
    let spent = session.machine().spent();
    Ok(CheckResult::of(session.finish(), spent))
}

/// What comes before model call `id` is made, after its retry delay: a slot of the batch's rate
/// limiter, if it has one (the slot's name, for [`settle_call`]).
async fn wait_for_slot(
    ctx: &WorkflowContext<'_>,
    rate: Option<(&RateRef, u64)>,
    check: &str,
    id: CallId,
    request: &OwnedModelRequest,
) -> Result<Option<String>, HandlerError> {
    match rate {
        Some((rate, _)) => Ok(Some(limiter::wait_for_slot(ctx, rate, check, id.0, request).await?)),
        None => Ok(None),
    }
}

/// Starts call `id` (its delay, if any, waited out) as an invocation of the worker's
/// [`ModelCall`] service in `in_flight`, once it has its rate limiter slot.
async fn start_call<'a>(
    ctx: &'a WorkflowContext<'_>,
    rate: Option<(&RateRef, u64)>,
    check: &str,
    (id, request): (CallId, OwnedModelRequest),
    in_flight: &mut DurableFuturesUnordered<InFlight<'a>>,
    calls: &mut BTreeMap<usize, CallId>,
) -> Result<(), HandlerError> {
    let slot = wait_for_slot(ctx, rate, check, id, &request).await?;
    let call = ctx.service_client::<ModelCallClient>().complete(Json(request)).call();
    let call = call.map(move |outcome| Awaited::Call { id, slot, outcome });
    calls.insert(in_flight.push(Box::pin(call)), id);
    Ok(())
}

/// What comes after model call `call` (its id and rate limiter slot) has its response: the
/// limiter told what it used, and the response recorded when `record` (the call is still
/// pending).
async fn settle_call(
    ctx: &WorkflowContext<'_>,
    session: &mut Session<Job>,
    rate: Option<(&RateRef, u64)>,
    (id, slot): (CallId, Option<String>),
    response: AssistantMessage,
    record: bool,
) -> Result<(), HandlerError> {
    if let (Some((rate, cap)), Some(slot)) = (rate, slot) {
        limiter::report(ctx, rate, slot, id.0, &response, cap).await?;
    }
    if record {
        session.record_response(id, response).map_err(terminal)?;
    }
    Ok(())
}

/// The worker's model as a Restate service, so that a check can have several model calls in
/// flight at once (Restate awaits invocations together, not side effects). Private: only the
/// workflows call it (a public one would spend the worker's model and its key on any
/// request). Its result is journaled by the workflow that called it: a replay does not call
/// the model again, and a worker that dies during the call has it made again, as a side
/// effect would be.
#[derive(Debug, Clone)]
pub struct ModelCall {
    host: Arc<Host>,
}

impl ModelCall {
    /// The service over `host`'s model.
    #[must_use]
    pub fn new(host: Arc<Host>) -> Self {
        Self { host }
    }
}

#[restate_sdk::service(
    name = "ModelCall",
    invocation_retry_policy(
        initial_interval = "100ms",
        factor = 2.0,
        max_interval = "2s",
        max_attempts = 10000,
        on_max_attempts = "pause",
    )
)]
impl ModelCall {
    /// Makes one model call; a failed request is a response whose stop reason is `error`.
    #[handler(ingress_private)]
    async fn complete(
        &self,
        _ctx: Context<'_>,
        request: Json<OwnedModelRequest>,
    ) -> Result<Json<AssistantMessage>, HandlerError> {
        Ok(Json(self.host.model.complete(request.into_inner()).await))
    }
}

/// The `ClaimCheck` workflow: one job (a claim check, or a step with host tools), keyed by
/// its check id.
#[derive(Debug, Clone)]
pub struct ClaimCheck {
    host: Arc<Host>,
}

impl ClaimCheck {
    /// The workflow over `host`.
    #[must_use]
    pub fn new(host: Arc<Host>) -> Self {
        Self { host }
    }
}

#[restate_sdk::workflow(
    name = "ClaimCheck",
    invocation_retry_policy(
        initial_interval = "100ms",
        factor = 2.0,
        max_interval = "2s",
        max_attempts = 10000,
        on_max_attempts = "pause",
    )
)]
impl ClaimCheck {
    /// Runs the job; the result is its value or typed failure with what was spent. A corpus
    /// the worker refuses (its hash does not match) ends the workflow with a terminal error.
    #[handler]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        input: Json<CheckInput>,
    ) -> Result<Json<CheckResult>, HandlerError> {
        check(&ctx, &self.host, input.into_inner()).await.map(Json)
    }
}

/// One job, run durably: what [`ClaimCheck`] and [`BatchCheck`] do.
async fn check(
    ctx: &WorkflowContext<'_>,
    host: &Arc<Host>,
    input: CheckInput,
) -> Result<CheckResult, HandlerError> {
    let refused = |failure| Ok(CheckResult::of(Err(failure), Spent::default()));
    let (config, corpora) = match job_config(host, &input).await {
        Ok(read) => read,
        Err(Ok(failure)) => return refused(failure),
        Err(Err(message)) => return Err(terminal(message)),
    };
    // The job's own cap on a `Retry-After`.
    let retry_after_cap_ms = config.retry().retry_after_cap_ms;
    let job = match Job::new(config, &corpora) {
        Ok(job) => job,
        Err(failure) => return refused(failure),
    };
    let rate = input.rate.as_ref().map(|rate| (rate, retry_after_cap_ms));
    drive_durably(ctx, host, job, rate).await
}

/// A batch's claim check: the job [`ClaimCheck`] runs, keyed `{batch}.{index}`, but private
/// (Restate's `ingress_private`): only a batch part starts one. A public `ClaimCheck` with
/// those keys would let a caller who knows a batch's id start `{batch}.{i}` first, with a job
/// of their own, and have the batch take that result as its row.
#[derive(Debug, Clone)]
pub struct BatchCheck {
    host: Arc<Host>,
}

impl BatchCheck {
    /// The workflow over `host`.
    #[must_use]
    pub fn new(host: Arc<Host>) -> Self {
        Self { host }
    }
}

#[restate_sdk::workflow(
    name = "BatchCheck",
    invocation_retry_policy(
        initial_interval = "100ms",
        factor = 2.0,
        max_interval = "2s",
        max_attempts = 10000,
        on_max_attempts = "pause",
    )
)]
impl BatchCheck {
    /// Runs the row's job (see [`ClaimCheck`]'s `run`).
    #[handler(ingress_private)]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        input: Json<CheckInput>,
    ) -> Result<Json<CheckResult>, HandlerError> {
        check(&ctx, &self.host, input.into_inner()).await.map(Json)
    }
}
