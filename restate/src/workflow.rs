//! The two Restate workflows: `ClaimCheck` drives one job durably, `Batch` fans claim checks
//! out over a corpus with a bounded concurrency and answers a progress query.
//!
//! How the job protocol maps onto Restate's journal (see docs/design/restate.md): the core's [`Session`] tracks the machine; every answer it is given comes out
//! of a journaled side effect (`ctx.run`), so a replay after a crash feeds the machine the
//! same answers without doing the work again:
//!
//! - a model call is one side effect whose value is the response; a retry's delay is a
//!   durable timer (`ctx.sleep`) before it;
//! - a tool call is two: *started* (empty, journaled before the tool runs) and *settled* (the
//!   tool's output). A replay that finds *started* in the journal but not *settled* knows the
//!   call may have taken effect: the settled side effect then asks the core what to do
//!   ([`verity_core::session::PendingCall::interrupted_outcome`], the rule [`Session`] applies when it resumes a
//!   log): a replay-safe tool runs again, any other is settled as an unknown outcome;
//! - the workflow's result is the value or the typed failure, with what was spent.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use verity_core::retry::RetryPolicy;
use verity_core::{
    AssistantMessage, Job, JobFailed, Session, SessionOutput, Spent, ToolCall, ToolOutput, Tools,
};

use crate::corpus::{CorpusFile, CorpusSource};
use crate::host::Host;
use crate::limiter::{self, RateRef, Window};

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
}

/// Builds the job of `input` on `host`: `Err(Ok(failure))` for a configuration the core
/// refuses (a typed failure, the check's result), `Err(Err(message))` for a corpus the worker
/// refuses (a terminal error). A corpus file is loaded inside a tokio runtime (see
/// [`crate::corpus::Corpora::get`]); inline passages need none.
///
/// # Errors
/// As above.
pub async fn build_job(host: &Host, input: &CheckInput) -> Result<Job, Result<JobFailed, String>> {
    let mut config = input.job.clone();
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind != "claim" && !host.allow_steps {
        return Err(Err(format!(
            "this worker runs only claim jobs, not {kind:?} (its operator starts it with \
             --allow-steps to run steps on its model)"
        )));
    }
    let mut corpora = Vec::new();
    if let Some(source) = &input.corpus {
        let corpus = host.corpus(source).await.map_err(Err)?;
        if let Value::Object(fields) = &mut config
            && fields.get("kind").and_then(Value::as_str) == Some("claim")
        {
            fields.insert("corpus".to_owned(), Value::String(corpus.id().as_str().to_owned()));
        }
        corpora.push(corpus);
    }
    Job::from_json(&config.to_string(), &corpora).map_err(Ok)
}

fn terminal(message: impl std::fmt::Display) -> HandlerError {
    TerminalError::new(message.to_string()).into()
}

/// Drives `job` to its end in the workflow `ctx`: see the module documentation.
async fn drive_durably(
    ctx: &WorkflowContext<'_>,
    host: &Arc<Host>,
    job: Job,
    rate: Option<(&RateRef, u64)>,
) -> Result<CheckResult, HandlerError> {
    let check = ctx.key().to_owned();
    let mut session = Session::start(job).map_err(terminal)?;
    loop {
        match session.poll() {
            SessionOutput::CallModel(call) => {
                let (id, delay_ms) = (call.id, call.delay_ms);
                let request = call.request.to_owned_request();
                if delay_ms > 0 {
                    ctx.sleep(Duration::from_millis(delay_ms)).await?;
                }
                let slot = match rate {
                    Some((rate, _)) => {
                        Some(limiter::wait_for_slot(ctx, rate, &check, id.0, &request).await?)
                    }
                    None => None,
                };
                let host = Arc::clone(host);
                let response: AssistantMessage = ctx
                    .run(|| async move {
                        Ok::<_, HandlerError>(Json(host.model.complete(request).await))
                    })
                    .name(format!("model {}", id.0))
                    .await?
                    .into_inner();
                if let (Some((rate, cap)), Some(slot)) = (rate, slot) {
                    limiter::report(ctx, rate, slot, id.0, &response, cap).await?;
                }
                session.record_response(id, response).map_err(terminal)?;
            }
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
        let input = input.into_inner();
        let job = match build_job(&self.host, &input).await {
            Ok(job) => job,
            Err(Ok(failure)) => return Ok(Json(CheckResult::of(Err(failure), Spent::default()))),
            Err(Err(refused)) => return Err(terminal(refused)),
        };
        // The job's own cap on a `Retry-After` (the config was just read, so it parses).
        let retry_after_cap_ms = input
            .job
            .get("retry")
            .and_then(|retry| serde_json::from_value::<RetryPolicy>(retry.clone()).ok())
            .unwrap_or_default()
            .retry_after_cap_ms;
        let rate = input.rate.as_ref().map(|rate| (rate, retry_after_cap_ms));
        drive_durably(&ctx, &self.host, job, rate).await.map(Json)
    }
}

/// A row of a batch: a claim, with its own small corpus or against the batch's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRow {
    /// The row's id (its position when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The claim.
    pub claim: String,
    /// The row's own corpus (passage id → text), else the batch's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<BTreeMap<String, String>>,
}

/// How fast a batch may go.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// Claim checks in flight at once.
    pub concurrency: u32,
    /// Model requests per minute (the provider's rate limit), if bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u64>,
    /// Tokens (input + output) per minute, if bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u64>,
    /// The rate window's length in milliseconds: 60 000 (a minute) unless given. Tests shorten
    /// it so that a limit shows within seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_window_ms: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            concurrency: 8,
            requests_per_minute: None,
            tokens_per_minute: None,
            rate_window_ms: None,
        }
    }
}

impl Limits {
    /// The rate window these limits give, if any rate is bounded.
    #[must_use]
    pub fn window(&self) -> Option<Window> {
        let requests = self.requests_per_minute.filter(|n| *n > 0);
        let tokens = self.tokens_per_minute.filter(|n| *n > 0);
        (requests.is_some() || tokens.is_some()).then(|| Window {
            requests,
            tokens,
            window_ms: self.rate_window_ms.unwrap_or(60_000).max(1),
        })
    }
}

/// What a `Batch` workflow is given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BatchInput {
    /// The shared corpus, for rows without their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<CorpusFile>,
    /// The claims.
    pub claims: Vec<ClaimRow>,
    /// The claim job's other fields (`retriever`, `retry`, `researchTurns`, `lookup`).
    #[serde(default)]
    pub job: serde_json::Map<String, Value>,
    /// Concurrency and rate limits.
    #[serde(default)]
    pub limits: Limits,
}

/// A batch's progress, answered at any time by the `progress` handler.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Claims in the batch.
    pub total: u64,
    /// Checks finished (with a report or a failure).
    pub done: u64,
    /// Of those, failures.
    pub failed: u64,
    /// Checks in flight.
    pub running: u64,
    /// Model requests of the finished checks.
    pub requests: u64,
    /// Tokens (input + output) of the finished checks.
    pub tokens: u64,
    /// Cost in US dollars of the finished checks.
    pub cost: f64,
}

/// One claim's result in a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimResult {
    /// Its position in the batch.
    pub index: usize,
    /// Its row id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The outcome.
    pub result: CheckResult,
}

/// A batch's result: one result per claim, in the batch's order, and the final progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchResult {
    /// One per claim, in order.
    pub results: Vec<ClaimResult>,
    /// The totals.
    pub progress: Progress,
}

/// The `Batch` workflow.
#[derive(Debug, Clone)]
pub struct Batch {
    host: Arc<Host>,
}

impl Batch {
    /// The workflow over `host`.
    #[must_use]
    pub fn new(host: Arc<Host>) -> Self {
        Self { host }
    }
}

const PROGRESS: &str = "progress";

/// The state key of the `n`-th result to finish.
fn finished_key(n: u64) -> String {
    format!("finished.{n}")
}

/// The key of claim `index` of batch `batch`.
#[must_use]
pub fn check_key(batch: &str, index: usize) -> String {
    format!("{batch}.{index}")
}

#[restate_sdk::workflow(
    name = "Batch",
    invocation_retry_policy(
        initial_interval = "100ms",
        factor = 2.0,
        max_interval = "2s",
        max_attempts = 10000,
        on_max_attempts = "pause",
    )
)]
impl Batch {
    /// Checks every claim, at most `limits.concurrency` at once; with rate limits, every model
    /// request of every check waits for the batch's [`RateLimiter`](crate::limiter) first. The
    /// result holds one result per claim: a check that ends with an error of its own is that
    /// claim's failure (`refused`), not the batch's. A shared corpus whose hash does not match,
    /// or a row with no corpus at all, ends the batch with a terminal error before any check
    /// starts.
    #[handler]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        input: Json<BatchInput>,
    ) -> Result<Json<BatchResult>, HandlerError> {
        let input = input.into_inner();
        if let Some(n) = input.claims.iter().position(|row| row.corpus.is_none())
            && input.corpus.is_none()
        {
            return Err(terminal(format!(
                "claim {} has no corpus of its own and the batch names none",
                n + 1
            )));
        }
        if let Some(file) = &input.corpus {
            let host = Arc::clone(&self.host);
            let source = CorpusSource::File(file.clone());
            ctx.run(|| async move { host.corpus(&source).await.map(drop).map_err(terminal) })
                .name("corpus")
                .await?;
        }
        let key = ctx.key().to_owned();
        let rate = input.limits.window().map(|window| RateRef { key: key.clone(), window });
        let total = input.claims.len();
        let mut progress = Progress { total: total as u64, ..Progress::default() };
        ctx.set(PROGRESS, Json(progress));
        let mut results: Vec<Option<CheckResult>> = vec![None; total];
        let mut in_flight = DurableFuturesUnordered::new();
        let mut claim_of: BTreeMap<usize, usize> = BTreeMap::new();
        let mut next = 0;
        let concurrency = input.limits.concurrency.max(1) as usize;
        while next < total || !in_flight.is_empty() {
            let mut launched = false;
            if next < total && in_flight.len() < concurrency {
                let row = &input.claims[next];
                let mut job = input.job.clone();
                job.insert("kind".to_owned(), Value::from("claim"));
                job.insert("claim".to_owned(), Value::from(row.claim.clone()));
                let corpus = match &row.corpus {
                    Some(passages) => CorpusSource::Passages(passages.clone()),
                    None => CorpusSource::File(input.corpus.clone().expect("checked above")),
                };
                let check = CheckInput {
                    job: Value::Object(job),
                    corpus: Some(corpus),
                    rate: rate.clone(),
                };
                let future = ctx
                    .workflow_client::<ClaimCheckClient>(check_key(&key, next))
                    .run(Json(check))
                    .call();
                claim_of.insert(in_flight.push(future), next);
                next += 1;
                progress.running += 1;
                ctx.set(PROGRESS, Json(progress));
                launched = true;
            }
            if launched && next < total && in_flight.len() < concurrency {
                continue;
            }
            let Some((slot, outcome)) = in_flight.next().await? else { continue };
            let index = claim_of.remove(&slot).expect("every slot names its claim");
            let result = match outcome {
                Ok(result) => result.into_inner(),
                // A check that ended with an error (its corpus refused by its worker, or
                // cancelled): that claim's failure; the others' results stand.
                Err(error) => CheckResult::refused(error),
            };
            progress.running -= 1;
            progress.done += 1;
            progress.failed += u64::from(result.is_failure());
            progress.requests = progress.requests.saturating_add(u64::from(result.spent.requests));
            progress.tokens = progress
                .tokens
                .saturating_add(result.spent.usage.input.saturating_add(result.spent.usage.output));
            progress.cost += result.spent.usage.cost;
            ctx.set(PROGRESS, Json(progress));
            // Kept in the order they finished, for `finished` (results as they arrive).
            let finished =
                ClaimResult { index, id: input.claims[index].id.clone(), result: result.clone() };
            ctx.set(&finished_key(progress.done - 1), Json(finished));
            results[index] = Some(result);
        }
        let results = results
            .into_iter()
            .enumerate()
            .map(|(index, result)| ClaimResult {
                index,
                id: input.claims[index].id.clone(),
                result: result.expect("every claim has a result"),
            })
            .collect();
        Ok(Json(BatchResult { results, progress }))
    }

    /// The results finished so far, in the order they finished, from the `from`-th on.
    #[handler]
    async fn finished(
        &self,
        ctx: SharedWorkflowContext<'_>,
        from: u64,
    ) -> Result<Json<Vec<ClaimResult>>, HandlerError> {
        let done = ctx.get::<Json<Progress>>(PROGRESS).await?.map_or(0, |p| p.into_inner().done);
        let mut results = Vec::new();
        for n in from..done {
            match ctx.get::<Json<ClaimResult>>(&finished_key(n)).await? {
                Some(result) => results.push(result.into_inner()),
                None => break,
            }
        }
        Ok(Json(results))
    }

    /// Done, failed, running, tokens and cost so far.
    #[handler]
    async fn progress(
        &self,
        ctx: SharedWorkflowContext<'_>,
    ) -> Result<Json<Progress>, HandlerError> {
        Ok(ctx
            .get::<Json<Progress>>(PROGRESS)
            .await?
            .map(Json::into_inner)
            .unwrap_or_default()
            .into())
    }
}
