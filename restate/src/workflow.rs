//! The Restate workflows: `ClaimCheck` drives one job durably, `Batch` fans claim checks (its
//! parts' private `BatchCheck`s, the same job) out over a corpus with a bounded concurrency and answers a progress query.
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

pub use crate::claims::ClaimRow;
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
        check(&ctx, &self.host, input.into_inner()).await.map(Json)
    }
}

/// One job, run durably: what [`ClaimCheck`] and [`BatchCheck`] do.
async fn check(
    ctx: &WorkflowContext<'_>,
    host: &Arc<Host>,
    input: CheckInput,
) -> Result<CheckResult, HandlerError> {
    let job = match build_job(host, &input).await {
        Ok(job) => job,
        Err(Ok(failure)) => return Ok(CheckResult::of(Err(failure), Spent::default())),
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
    /// The claims, inline (a small batch; the input grows with them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimRow>,
    /// The claims as a file the workers read (a claim file, JSONL, by path or URL and
    /// SHA-256, under the workers' corpus policy like a corpus): a batch of any size in a
    /// message of constant size. Its rows come after the inline ones, if both are given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims_file: Option<CorpusFile>,
    /// The claim job's other fields (`retriever`, `retry`, `researchTurns`, `lookup`).
    #[serde(default)]
    pub job: serde_json::Map<String, Value>,
    /// Concurrency and rate limits.
    #[serde(default)]
    pub limits: Limits,
    /// Claims per part (a `BatchPart` workflow of its own): [`DEFAULT_PART_SIZE`] unless given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_size: Option<u64>,
}

/// Claims per part of a batch unless the batch says otherwise: a part's state (its results)
/// and journal stay bounded however large the batch.
pub const DEFAULT_PART_SIZE: u64 = 1_000;

/// Parts of a batch in flight at once (each with half the batch's concurrency).
pub const PARTS_IN_FLIGHT: usize = 2;

/// Where a part's claims are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum PartClaims {
    /// Given inline.
    Rows(Vec<ClaimRow>),
    /// Rows `start..end` (counted without blank lines) of a claim file.
    File {
        /// The file.
        file: CorpusFile,
        /// The first row.
        start: u64,
        /// One past the last row.
        end: u64,
    },
}

/// What a `BatchPart` workflow is given: a slice of its batch's claims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PartInput {
    /// The batch's shared corpus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<CorpusFile>,
    /// The part's claims.
    pub claims: PartClaims,
    /// The batch index of its first claim.
    pub offset: u64,
    /// The claim job's other fields.
    #[serde(default)]
    pub job: serde_json::Map<String, Value>,
    /// Checks in flight at once in this part.
    pub concurrency: u32,
    /// The batch's rate limiter, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateRef>,
    /// The batch's key (its checks are keyed `{batch}.{index}`).
    pub batch: String,
}

/// The key of part `n` of batch `batch`.
#[must_use]
pub fn part_key(batch: &str, n: u64) -> String {
    format!("{batch}.part{n}")
}

/// A batch's progress as its parent keeps it: the totals of its finished parts, and which
/// parts there are and which run (see [`BatchProgress`] for the live view).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchState {
    /// The totals of the finished parts (`total` is the whole batch's).
    pub progress: Progress,
    /// Parts in the batch.
    pub parts: u64,
    /// Parts started so far (the first `started`).
    pub started: u64,
    /// Of those, the ones still running.
    pub running: Vec<u64>,
}

/// What the `Batch` workflow answers for `progress` and ends with: the totals (its finished
/// parts' and, live, its running parts'), the parts, and which run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchProgress {
    /// Claims in the batch, checks finished, failed and running, requests, tokens and cost.
    #[serde(flatten)]
    pub progress: Progress,
    /// Parts in the batch.
    pub parts: u64,
    /// Parts started so far.
    pub started: u64,
    /// The parts still running.
    pub running_parts: Vec<u64>,
}

/// A batch's progress, answered at any time by the `progress` handler.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Claims in the batch.
    pub total: u64,
    /// Checks finished (with a report or a failure).
    pub done: u64,
    /// Of those, the ones without a verdict (a failure that leaves the verdict `insufficient`
    /// counts as that verdict, not here, as in the app).
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

impl Progress {
    /// Adds `other`'s counts (not its total) to these, saturating.
    fn add(&mut self, other: &Progress) {
        self.done = self.done.saturating_add(other.done);
        self.failed = self.failed.saturating_add(other.failed);
        self.running = self.running.saturating_add(other.running);
        self.requests = self.requests.saturating_add(other.requests);
        self.tokens = self.tokens.saturating_add(other.tokens);
        self.cost += other.cost;
    }
}

const STATE: &str = "batch";

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
    /// Checks every claim: in parts of `partSize` claims (`BatchPart` workflows keyed
    /// `{batch}.part{n}`), [`PARTS_IN_FLIGHT`] at once, each with its share of
    /// `limits.concurrency`; with rate limits, every model request of every check waits for the
    /// batch's [`RateLimiter`](crate::limiter) first. The batch keeps only its finished parts'
    /// totals and which parts run, so neither its state nor its journal grows with its claims;
    /// the results are the parts' (see `batch::results`). A check that ends with an error of
    /// its own is that claim's failure (`refused`), not the batch's. A shared corpus or claim
    /// file the workers refuse, or a row with no corpus at all, ends the batch with a terminal
    /// error before any check starts.
    #[handler]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        input: Json<BatchInput>,
    ) -> Result<Json<BatchProgress>, HandlerError> {
        let input = input.into_inner();
        if let Some(file) = &input.corpus {
            let host = Arc::clone(&self.host);
            let source = CorpusSource::File(file.clone());
            ctx.run(|| async move { host.corpus(&source).await.map(drop).map_err(terminal) })
                .name("corpus")
                .await?;
        }
        // The claim file's rows, counted (and checked to have a corpus) by a worker once.
        let from_file: u64 = match &input.claims_file {
            Some(file) => {
                let (host, file, shared) =
                    (Arc::clone(&self.host), file.clone(), input.corpus.is_some());
                ctx.run(|| async move {
                    let rows = host.claims(&file).await.map_err(terminal)?;
                    if !shared && let Some(n) = rows.iter().position(|row| row.corpus.is_none()) {
                        return Err(terminal(format!(
                            "claim {} of the claim file has no corpus of its own and the batch \
                             names none",
                            n + 1
                        )));
                    }
                    Ok(rows.len() as u64)
                })
                .name("claims")
                .await?
            }
            None => 0,
        };
        if let Some(n) = input.claims.iter().position(|row| row.corpus.is_none())
            && input.corpus.is_none()
        {
            return Err(terminal(format!(
                "claim {} has no corpus of its own and the batch names none",
                n + 1
            )));
        }
        let inline = input.claims.len() as u64;
        let total = inline + from_file;
        let part_size = input.part_size.unwrap_or(DEFAULT_PART_SIZE).max(1);
        // The inline rows' parts, then the claim file's.
        let inline_parts = inline.div_ceil(part_size);
        let key = ctx.key().to_owned();
        let rate = input.limits.window().map(|window| RateRef { key: key.clone(), window });
        let concurrency = input.limits.concurrency.max(1);
        let mut state = BatchState {
            progress: Progress { total, ..Progress::default() },
            parts: inline_parts + from_file.div_ceil(part_size),
            ..BatchState::default()
        };
        ctx.set(STATE, Json(state.clone()));
        // Launch slots: a part takes one, and the slots split the concurrency between them.
        let slots = PARTS_IN_FLIGHT.min(concurrency as usize).max(1);
        let share = |slot: usize| {
            let (slots, slot) = (slots as u32, slot as u32);
            concurrency / slots + u32::from(slot < concurrency % slots)
        };
        let mut free: Vec<usize> = (0..slots).rev().collect();
        let mut in_flight = DurableFuturesUnordered::new();
        let mut part_of: BTreeMap<usize, (u64, usize)> = BTreeMap::new();
        while state.started < state.parts || !in_flight.is_empty() {
            if state.started < state.parts
                && let Some(slot) = free.pop()
            {
                let n = state.started;
                let (claims, offset) = if n < inline_parts {
                    let start = n.saturating_mul(part_size);
                    let end = (n + 1).saturating_mul(part_size).min(inline);
                    (PartClaims::Rows(input.claims[start as usize..end as usize].to_vec()), start)
                } else {
                    let m = n - inline_parts;
                    let start = m.saturating_mul(part_size);
                    let end = (m + 1).saturating_mul(part_size).min(from_file);
                    let file = input.claims_file.clone().expect("file parts come from a file");
                    (PartClaims::File { file, start, end }, inline.saturating_add(start))
                };
                let part = PartInput {
                    corpus: input.corpus.clone(),
                    claims,
                    offset,
                    job: input.job.clone(),
                    concurrency: share(slot),
                    rate: rate.clone(),
                    batch: key.clone(),
                };
                let future = ctx
                    .workflow_client::<BatchPartClient>(part_key(&key, n))
                    .run(Json(part))
                    .call();
                part_of.insert(in_flight.push(future), (n, slot));
                state.started += 1;
                state.running.push(n);
                ctx.set(STATE, Json(state.clone()));
                continue;
            }
            let Some((future, outcome)) = in_flight.next().await? else { continue };
            let (n, slot) = part_of.remove(&future).expect("every future names its part");
            free.push(slot);
            let finished: Progress =
                outcome.map_err(|e| terminal(format!("part {n}: {e}")))?.into_inner();
            state.progress.add(&Progress { running: 0, ..finished });
            state.running.retain(|running| *running != n);
            ctx.set(STATE, Json(state.clone()));
        }
        Ok(Json(BatchProgress {
            progress: state.progress,
            parts: state.parts,
            started: state.started,
            running_parts: Vec::new(),
        }))
    }

    /// Done, failed, running, tokens and cost so far: the finished parts' totals and the
    /// running parts' own progress (at most [`PARTS_IN_FLIGHT`] queries).
    #[handler]
    async fn progress(
        &self,
        ctx: SharedWorkflowContext<'_>,
    ) -> Result<Json<BatchProgress>, HandlerError> {
        let state =
            ctx.get::<Json<BatchState>>(STATE).await?.map(Json::into_inner).unwrap_or_default();
        let mut progress = state.progress;
        let key = ctx.key().to_owned();
        for &n in &state.running {
            let part: Progress = ctx
                .workflow_client::<BatchPartClient>(part_key(&key, n))
                .progress()
                .call()
                .await?
                .into_inner();
            progress.add(&part);
        }
        Ok(Json(BatchProgress {
            progress,
            parts: state.parts,
            started: state.started,
            running_parts: state.running,
        }))
    }
}

/// The `BatchPart` workflow: a slice of a batch.
#[derive(Debug, Clone)]
pub struct BatchPart {
    host: Arc<Host>,
}

impl BatchPart {
    /// The workflow over `host`.
    #[must_use]
    pub fn new(host: Arc<Host>) -> Self {
        Self { host }
    }
}

#[restate_sdk::workflow(
    name = "BatchPart",
    invocation_retry_policy(
        initial_interval = "100ms",
        factor = 2.0,
        max_interval = "2s",
        max_attempts = 10000,
        on_max_attempts = "pause",
    )
)]
impl BatchPart {
    /// Checks the part's claims, at most `concurrency` at once (each a private `BatchCheck`
    /// workflow keyed `{batch}.{index}`), keeping each result as it finishes; ends with the part's
    /// totals. Private: only its batch starts it (its `finished` and `progress` stay readable).
    #[handler(ingress_private)]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        input: Json<PartInput>,
    ) -> Result<Json<Progress>, HandlerError> {
        let input = input.into_inner();
        let rows: Vec<ClaimRow> = match &input.claims {
            PartClaims::Rows(rows) => rows.clone(),
            PartClaims::File { file, start, end } => {
                let (host, file, range) = (Arc::clone(&self.host), file.clone(), (*start, *end));
                ctx.run(|| async move {
                    let rows = host.claims(&file).await.map_err(terminal)?;
                    let (start, end) = (range.0 as usize, (range.1 as usize).min(rows.len()));
                    Ok(Json(rows.get(start..end).map(<[ClaimRow]>::to_vec).unwrap_or_default()))
                })
                .name("claims")
                .await?
                .into_inner()
            }
        };
        let total = rows.len();
        let mut progress = Progress { total: total as u64, ..Progress::default() };
        ctx.set(PROGRESS, Json(progress));
        let mut in_flight = DurableFuturesUnordered::new();
        let mut claim_of: BTreeMap<usize, usize> = BTreeMap::new();
        let mut next = 0;
        let concurrency = input.concurrency.max(1) as usize;
        while next < total || !in_flight.is_empty() {
            let mut launched = false;
            if next < total && in_flight.len() < concurrency {
                let row = &rows[next];
                let mut job = input.job.clone();
                job.insert("kind".to_owned(), Value::from("claim"));
                job.insert("claim".to_owned(), Value::from(row.claim.clone()));
                let corpus = match &row.corpus {
                    Some(passages) => CorpusSource::Passages(passages.clone()),
                    None => match &input.corpus {
                        Some(file) => CorpusSource::File(file.clone()),
                        None => {
                            return Err(terminal(format!(
                                "claim {} has no corpus of its own and the batch names none",
                                input.offset.saturating_add(next as u64 + 1)
                            )));
                        }
                    },
                };
                let check = CheckInput {
                    job: Value::Object(job),
                    corpus: Some(corpus),
                    rate: input.rate.clone(),
                };
                let index =
                    usize::try_from(input.offset).unwrap_or(usize::MAX).saturating_add(next);
                let future = ctx
                    .workflow_client::<BatchCheckClient>(check_key(&input.batch, index))
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
            let local = claim_of.remove(&slot).expect("every slot names its claim");
            let result = match outcome {
                Ok(result) => result.into_inner(),
                // A check that ended with an error (its corpus refused by its worker, or
                // cancelled): that claim's failure; the others' results stand.
                Err(error) => CheckResult::refused(error),
            };
            progress.running -= 1;
            progress.add(&Progress {
                done: 1,
                failed: u64::from(result.has_no_verdict()),
                requests: u64::from(result.spent.requests),
                tokens: result.spent.usage.input.saturating_add(result.spent.usage.output),
                cost: result.spent.usage.cost,
                ..Progress::default()
            });
            ctx.set(PROGRESS, Json(progress));
            // Kept in the order they finished, for `finished` (results as they arrive).
            let finished = ClaimResult {
                index: usize::try_from(input.offset).unwrap_or(usize::MAX).saturating_add(local),
                id: rows[local].id.clone(),
                result,
            };
            ctx.set(&finished_key(progress.done - 1), Json(finished));
        }
        Ok(Json(progress))
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

#[cfg(test)]
mod tests {
    use serde_json::json;
    use verity_core::{JobFailed, JobFailureKind, Spent};

    use super::CheckResult;

    /// The batch's progress counts as failed only the checks without a verdict: research that
    /// found nothing new leaves the verdict `insufficient`, as the app and `eval` show it.
    #[test]
    fn a_failure_that_leaves_the_verdict_insufficient_is_not_counted_failed() {
        let ended = |kind: JobFailureKind| {
            let spent = serde_json::to_value(Spent::default()).unwrap();
            let failed: JobFailed = serde_json::from_value(
                json!({"kind": kind.as_str(), "message": "why", "spent": spent}),
            )
            .unwrap();
            CheckResult::of(Err(failed), Spent::default())
        };
        for kind in JobFailureKind::ALL {
            assert_eq!(ended(kind).has_no_verdict(), !kind.is_insufficient(), "{kind}");
            assert!(ended(kind).is_failure());
        }
        assert!(!CheckResult::of(Ok(json!({})), Spent::default()).has_no_verdict());
        assert!(CheckResult::refused("a corpus refused").has_no_verdict());
    }
}
