//! The Restate workflows: `ClaimCheck` drives one job durably, `Batch` fans claim checks (its
//! parts' private `BatchCheck`s, the same job) out over a corpus with a bounded concurrency and answers a progress query.
//!
//! How the job protocol maps onto Restate's journal (see docs/design/restate.md): the core's [`Session`](verity_core::Session) tracks the machine; every answer it is given comes out
//! of a journaled side effect (`ctx.run`), so a replay after a crash feeds the machine the
//! same answers without doing the work again:
//!
//! - a model call is one side effect whose value is the response; a retry's delay is a
//!   durable timer (`ctx.sleep`) before it; model calls pending together (an answer's
//!   sentences) are invocations of the private `ModelCall` service, awaited together;
//! - a tool call is two: *started* (empty, journaled before the tool runs) and *settled* (the
//!   tool's output). A replay that finds *started* in the journal but not *settled* knows the
//!   call may have taken effect: the settled side effect then asks the core what to do
//!   ([`verity_core::session::PendingCall::interrupted_outcome`], the rule `Session` applies when it resumes a
//!   log): a replay-safe tool runs again, any other is settled as an unknown outcome;
//! - the workflow's result is the value or the typed failure, with what was spent.

use std::collections::BTreeMap;
use std::sync::Arc;

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::claims::ClaimRow;
use crate::corpus::{CorpusFile, CorpusSource};
use crate::host::Host;
use crate::limiter::{RateRef, Window};

mod check;

pub use check::{
    BatchCheck, BatchCheckClient, BatchCheckIngressClient, CheckInput, CheckResult, ClaimCheck,
    ClaimCheckClient, ClaimCheckIngressClient, ModelCall, ModelCallClient, build_job,
};

/// A terminal error (Restate does not retry it) saying `message`.
fn terminal(message: impl std::fmt::Display) -> HandlerError {
    TerminalError::new(message.to_string()).into()
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
    /// The counts of one finished check.
    fn finished(result: &CheckResult) -> Self {
        Progress {
            done: 1,
            failed: u64::from(result.has_no_verdict()),
            requests: u64::from(result.spent.requests),
            tokens: result.spent.usage.input.saturating_add(result.spent.usage.output),
            cost: result.spent.usage.cost,
            ..Progress::default()
        }
    }

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
        let from_file = check_sources(&ctx, &self.host, &input).await?;
        let inline = input.claims.len() as u64;
        let plan = PartPlan {
            inline,
            from_file,
            part_size: input.part_size.unwrap_or(DEFAULT_PART_SIZE).max(1),
        };
        let key = ctx.key().to_owned();
        let rate = input.limits.window().map(|window| RateRef { key: key.clone(), window });
        let concurrency = input.limits.concurrency.max(1);
        let mut state = BatchState {
            progress: Progress { total: inline + from_file, ..Progress::default() },
            parts: plan.parts(),
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
                let (claims, offset) = plan.claims(n, &input);
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

/// Checks what a batch's claims need before any part starts, each a side effect run by a
/// worker once: the shared corpus loads, the claim file's rows (counted, the count returned)
/// and the inline rows each have a corpus. A terminal error otherwise.
async fn check_sources(
    ctx: &WorkflowContext<'_>,
    host: &Arc<Host>,
    input: &BatchInput,
) -> Result<u64, HandlerError> {
    if let Some(file) = &input.corpus {
        let host = Arc::clone(host);
        let source = CorpusSource::File(file.clone());
        ctx.run(|| async move { host.corpus(&source).await.map(drop).map_err(terminal) })
            .name("corpus")
            .await?;
    }
    // The claim file's rows, counted (and checked to have a corpus) by a worker once.
    let from_file: u64 = match &input.claims_file {
        Some(file) => {
            let (host, file, shared) = (Arc::clone(host), file.clone(), input.corpus.is_some());
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
    Ok(from_file)
}

/// How a batch's claims are cut into parts of `part_size`: the inline rows' parts, then the
/// claim file's.
struct PartPlan {
    /// Inline rows.
    inline: u64,
    /// Rows of the claim file.
    from_file: u64,
    /// Claims per part (at least 1).
    part_size: u64,
}

impl PartPlan {
    fn inline_parts(&self) -> u64 {
        self.inline.div_ceil(self.part_size)
    }

    /// Parts in the batch.
    fn parts(&self) -> u64 {
        self.inline_parts() + self.from_file.div_ceil(self.part_size)
    }

    /// Part `n`'s claims and the batch index of its first.
    fn claims(&self, n: u64, input: &BatchInput) -> (PartClaims, u64) {
        let inline_parts = self.inline_parts();
        if n < inline_parts {
            let start = n.saturating_mul(self.part_size);
            let end = (n + 1).saturating_mul(self.part_size).min(self.inline);
            (PartClaims::Rows(input.claims[start as usize..end as usize].to_vec()), start)
        } else {
            let m = n - inline_parts;
            let start = m.saturating_mul(self.part_size);
            let end = (m + 1).saturating_mul(self.part_size).min(self.from_file);
            let file = input.claims_file.clone().expect("file parts come from a file");
            (PartClaims::File { file, start, end }, self.inline.saturating_add(start))
        }
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
        let rows = part_rows(&ctx, &self.host, &input.claims).await?;
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
                let check = row_check(&input, &rows[next], next)?;
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
            progress.add(&Progress::finished(&result));
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

/// A part's rows: its own, or its range of the claim file, read by a worker once.
async fn part_rows(
    ctx: &WorkflowContext<'_>,
    host: &Arc<Host>,
    claims: &PartClaims,
) -> Result<Vec<ClaimRow>, HandlerError> {
    Ok(match claims {
        PartClaims::Rows(rows) => rows.clone(),
        PartClaims::File { file, start, end } => {
            let (host, file, range) = (Arc::clone(host), file.clone(), (*start, *end));
            ctx.run(|| async move {
                let rows = host.claims(&file).await.map_err(terminal)?;
                let (start, end) = (range.0 as usize, (range.1 as usize).min(rows.len()));
                Ok(Json(rows.get(start..end).map(<[ClaimRow]>::to_vec).unwrap_or_default()))
            })
            .name("claims")
            .await?
            .into_inner()
        }
    })
}

/// The check of `row`, the part's `local`-th: a claim (or answer) job with the batch's other fields, over
/// the row's corpus or else the batch's. A terminal error for a row with neither.
fn row_check(input: &PartInput, row: &ClaimRow, local: usize) -> Result<CheckInput, HandlerError> {
    let mut job = input.job.clone();
    crate::claims::set_work(&mut job, row);
    let corpus = match &row.corpus {
        Some(passages) => CorpusSource::Passages(passages.clone()),
        None => match &input.corpus {
            Some(file) => CorpusSource::File(file.clone()),
            None => {
                return Err(terminal(format!(
                    "claim {} has no corpus of its own and the batch names none",
                    input.offset.saturating_add(local as u64 + 1)
                )));
            }
        },
    };
    Ok(CheckInput { job: Value::Object(job), corpus: Some(corpus), rate: input.rate.clone() })
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
