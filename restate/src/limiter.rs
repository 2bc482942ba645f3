//! The shared rate limiter of a batch: a keyed Restate virtual object, `RateLimiter/{batch}`,
//! that every model request of every check in the batch asks for a slot before it is sent.
//!
//! The limiter keeps the requests it granted in a sliding window (60 s, the unit of a
//! provider's "per minute" limits) and grants each new request the first instant at which the
//! window ending there holds fewer than the allowed requests and no more than the allowed
//! tokens, counting the new request. Grants never go back in time (each is at or after the
//! previous one), so the windows that hold a grant are exactly those that end at or after it.
//! A request's tokens are estimated from its size when it asks (about four characters a
//! token) and corrected from the response's usage when it has been answered. A response that
//! says "retry after" (a 429 with `Retry-After`) holds the whole batch back until then, not
//! only the check that saw it.
//!
//! The object's state is Restate's: a worker killed, or the server restarted, in the middle of
//! a batch finds the window as it was. Its handlers run one at a time per key (an exclusive
//! virtual object), so two checks never get the same slot.
//!
//! What the bound is: the instants the limiter grants. A check sends its request at its
//! instant or later (a durable timer wakes it; the request starts a few milliseconds after),
//! never earlier. A request repeated because its worker died before its response was
//! journaled is sent again without a new slot.

use std::time::Duration;

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use verity_core::OwnedModelRequest;

/// The limits of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Window {
    /// Requests per window, if bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Tokens (input + output) per window, if bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// The window's length in milliseconds (60 000: "per minute").
    pub window_ms: u64,
}

/// A request the limiter let through: when, and its tokens (estimated, then as used).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// The request's id (its check's key and its model call's id).
    pub id: String,
    /// When it may be sent, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Its tokens.
    pub tokens: u64,
}

/// The first instant at or after `earliest` (and after the last grant: grants never go back)
/// at which a request of `tokens` fits the window ending there: fewer than `requests` grants
/// in it, and its tokens with theirs at most `tokens`. A request larger than the whole token
/// limit goes alone in its window. `grants` are in the order they were granted.
#[must_use]
pub fn next_slot(grants: &[Grant], window: &Window, earliest: u64, tokens: u64) -> u64 {
    let last = grants.last().map_or(0, |grant| grant.at_ms);
    let mut at = earliest.max(last);
    let length = window.window_ms.max(1);
    // The window ending at `t` holds the grants with `at_ms > t - length`: a grant leaves it
    // at `at_ms + length`.
    if let Some(limit) = window.requests.filter(|limit| *limit > 0)
        && let Some(count) = usize::try_from(limit).ok()
        && grants.len() >= count
    {
        // Enough grants must have left that fewer than `limit` remain: the one `limit` back
        // from the newest.
        at = at.max(grants[grants.len() - count].at_ms.saturating_add(length));
    }
    if let Some(limit) = window.tokens.filter(|limit| *limit > 0) {
        let mut held: u64 = grants
            .iter()
            .filter(|grant| grant.at_ms.saturating_add(length) > at)
            .map(|grant| grant.tokens)
            .fold(tokens, u64::saturating_add);
        for grant in grants {
            if held <= limit {
                break;
            }
            if grant.at_ms.saturating_add(length) > at {
                held = held.saturating_sub(grant.tokens);
                at = at.max(grant.at_ms.saturating_add(length));
            }
        }
    }
    at
}

/// The tokens a request is counted for until its response's usage is known: its JSON's
/// length over four (a common rule of thumb for English text), at least one.
#[must_use]
pub fn estimate_tokens(request: &OwnedModelRequest) -> u64 {
    let length = serde_json::to_string(request).map_or(0, |json| json.len());
    (length as u64 / 4).max(1)
}

/// What a check asks the limiter for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Acquire {
    /// The request's id.
    pub id: String,
    /// Its estimated tokens.
    pub tokens: u64,
    /// The batch's limits.
    pub window: Window,
}

/// What a check tells the limiter once its request was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settle {
    /// The request's id.
    pub id: String,
    /// The tokens the response reports (input + output).
    pub tokens: u64,
}

const GRANTS: &str = "grants";
const HOLD: &str = "hold";

/// The `RateLimiter` virtual object: one per batch (its key), see the module documentation.
#[derive(Debug, Clone, Copy, Default)]
pub struct RateLimiter;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The current time in a workflow, journaled (a replay sees the same instant).
async fn clock(ctx: &WorkflowContext<'_>, name: String) -> Result<u64, HandlerError> {
    Ok(ctx.run(|| async { Ok::<_, HandlerError>(now_ms()) }).name(name).await?)
}

#[restate_sdk::object(
    name = "RateLimiter",
    // Only the batch's own workflows call it: from the ingress, anyone could hold a batch back
    // for good (`hold` with `u64::MAX`) or take its window.
    ingress_private,
    invocation_retry_policy(
        initial_interval = "100ms",
        factor = 2.0,
        max_interval = "2s",
        max_attempts = 10000,
        on_max_attempts = "pause",
    )
)]
impl RateLimiter {
    /// Grants request `id` its instant (milliseconds since the Unix epoch): see [`next_slot`].
    /// The same id asked again gets the same instant.
    #[handler]
    async fn acquire(
        &self,
        ctx: ObjectContext<'_>,
        request: Json<Acquire>,
    ) -> Result<Json<u64>, HandlerError> {
        let request = request.into_inner();
        let mut grants: Vec<Grant> =
            ctx.get::<Json<Vec<Grant>>>(GRANTS).await?.map(Json::into_inner).unwrap_or_default();
        if let Some(grant) = grants.iter().find(|grant| grant.id == request.id) {
            return Ok(Json(grant.at_ms));
        }
        let hold: u64 = ctx.get::<u64>(HOLD).await?.unwrap_or(0);
        let now: u64 = ctx.run(|| async { Ok::<_, HandlerError>(now_ms()) }).name("now").await?;
        // Grants that left every window a new grant can be in (it is at `now` or later).
        let length = request.window.window_ms.max(1);
        grants.retain(|grant| grant.at_ms.saturating_add(length) > now);
        let at = next_slot(&grants, &request.window, now.max(hold), request.tokens);
        grants.push(Grant { id: request.id, at_ms: at, tokens: request.tokens });
        ctx.set(GRANTS, Json(grants));
        Ok(Json(at))
    }

    /// Replaces request `id`'s estimated tokens with those its response reports.
    #[handler]
    async fn settle(&self, ctx: ObjectContext<'_>, used: Json<Settle>) -> Result<(), HandlerError> {
        let used = used.into_inner();
        let mut grants: Vec<Grant> =
            ctx.get::<Json<Vec<Grant>>>(GRANTS).await?.map(Json::into_inner).unwrap_or_default();
        if let Some(grant) = grants.iter_mut().find(|grant| grant.id == used.id) {
            grant.tokens = used.tokens;
            ctx.set(GRANTS, Json(grants));
        }
        Ok(())
    }

    /// Grants nothing before `until_ms` (a provider said "retry after").
    #[handler]
    async fn hold(&self, ctx: ObjectContext<'_>, until_ms: u64) -> Result<(), HandlerError> {
        let hold: u64 = ctx.get::<u64>(HOLD).await?.unwrap_or(0);
        ctx.set(HOLD, hold.max(until_ms));
        Ok(())
    }
}

/// Which limiter a check's model requests go through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateRef {
    /// The limiter's key (the batch's).
    pub key: String,
    /// The limits.
    pub window: Window,
}

/// How late after its instant a request may still go out on its slot. A check woken later
/// (a loaded machine, an invocation resumed on another worker) gives the slot up and asks for
/// a new one: the stale slot stays counted, so the window is never overfilled, only underused.
pub const LATE_MS: u64 = 100;

/// Waits (a durable timer) until the limiter of `rate` lets model call `call` of check
/// `check` through, and no later than [`LATE_MS`] after its slot; the slot's id.
///
/// # Errors
/// Restate's.
pub async fn wait_for_slot(
    ctx: &WorkflowContext<'_>,
    rate: &RateRef,
    check: &str,
    call: u64,
    request: &OwnedModelRequest,
) -> Result<String, HandlerError> {
    let tokens = estimate_tokens(request);
    for attempt in 0u32.. {
        let id = if attempt == 0 {
            format!("{check}/{call}")
        } else {
            format!("{check}/{call}/{attempt}")
        };
        let asked = Acquire { id: id.clone(), tokens, window: rate.window };
        let at = ctx
            .object_client::<RateLimiterClient>(rate.key.clone())
            .acquire(Json(asked))
            .call()
            .await?
            .into_inner();
        let mut now = clock(ctx, format!("slot {call} {attempt}")).await?;
        if at > now {
            ctx.sleep(Duration::from_millis(at - now)).await?;
            now = clock(ctx, format!("woke {call} {attempt}")).await?;
        }
        if now <= at.saturating_add(LATE_MS) {
            return Ok(id);
        }
    }
    Err(terminal_error("the rate limiter never granted a slot"))
}

fn terminal_error(message: &str) -> HandlerError {
    TerminalError::new(message).into()
}

/// Until when a provider's "retry after `wait` ms", seen at `now`, holds a batch back: at most
/// `cap` ms (the job's `retry.retryAfterCapMs`, which also bounds the check's own wait), so a
/// server (or a proxy in front of it) cannot stop a batch for days with one header.
#[must_use]
pub fn hold_until(now: u64, wait: u64, cap: u64) -> u64 {
    now.saturating_add(wait.min(cap))
}

/// Tells the limiter of `rate` what the request of slot `slot` (model call `call`) used, and,
/// when its response asks to retry after a while, to hold the batch back until then (see
/// [`hold_until`]).
///
/// # Errors
/// Restate's.
pub async fn report(
    ctx: &WorkflowContext<'_>,
    rate: &RateRef,
    slot: String,
    call: u64,
    response: &verity_core::AssistantMessage,
    retry_after_cap_ms: u64,
) -> Result<(), HandlerError> {
    let client = ctx.object_client::<RateLimiterClient>(rate.key.clone());
    let tokens = response.usage.input.saturating_add(response.usage.output);
    if tokens > 0 {
        client.settle(Json(Settle { id: slot, tokens })).send();
    }
    if let Some(wait) = response.error.as_ref().and_then(|error| error.retry_after_ms) {
        let now = clock(ctx, format!("retry after {call}")).await?;
        client.hold(hold_until(now, wait, retry_after_cap_ms)).send();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Grant, Window, next_slot};

    fn grants(at: &[(u64, u64)]) -> Vec<Grant> {
        at.iter()
            .enumerate()
            .map(|(n, (at_ms, tokens))| Grant { id: n.to_string(), at_ms: *at_ms, tokens: *tokens })
            .collect()
    }

    const RPM: Window = Window { requests: Some(3), tokens: None, window_ms: 60_000 };

    #[test]
    fn requests_fill_the_window_then_wait_for_the_oldest_to_leave_it() {
        // No burst: three at once, then the fourth when the first leaves the window.
        assert_eq!(next_slot(&[], &RPM, 1_000, 10), 1_000);
        assert_eq!(next_slot(&grants(&[(1_000, 1)]), &RPM, 1_000, 10), 1_000);
        assert_eq!(next_slot(&grants(&[(1_000, 1), (1_000, 1)]), &RPM, 1_000, 10), 1_000);
        let full = grants(&[(1_000, 1), (1_000, 1), (1_000, 1)]);
        assert_eq!(next_slot(&full, &RPM, 1_000, 10), 61_000);
        // Asked later, still the same instant: the window is sliding.
        assert_eq!(next_slot(&full, &RPM, 30_000, 10), 61_000);
        assert_eq!(next_slot(&full, &RPM, 70_000, 10), 70_000);
        // Spread grants: the one three back decides.
        let spread = grants(&[(0, 1), (20_000, 1), (40_000, 1)]);
        assert_eq!(next_slot(&spread, &RPM, 41_000, 10), 60_000);
        let more = grants(&[(0, 1), (20_000, 1), (40_000, 1), (60_000, 1)]);
        assert_eq!(next_slot(&more, &RPM, 60_000, 10), 80_000);
        // Never before the last grant, nor before `earliest` (a hold).
        assert_eq!(next_slot(&grants(&[(5_000, 1)]), &RPM, 1_000, 10), 5_000);
        assert_eq!(next_slot(&grants(&[(5_000, 1)]), &RPM, 9_000, 10), 9_000);
        // No limit: now.
        let free = Window { requests: None, tokens: None, window_ms: 60_000 };
        assert_eq!(next_slot(&full, &free, 2_000, 10), 2_000);
    }

    #[test]
    fn tokens_wait_until_enough_have_left_the_window() {
        let tpm = Window { requests: None, tokens: Some(1_000), window_ms: 60_000 };
        let used = grants(&[(0, 400), (10_000, 400)]);
        // 800 + 200 fits; 800 + 300 needs the first to leave.
        assert_eq!(next_slot(&used, &tpm, 10_000, 200), 10_000);
        assert_eq!(next_slot(&used, &tpm, 10_000, 300), 60_000);
        // 800 + 700 needs both to leave.
        assert_eq!(next_slot(&used, &tpm, 10_000, 700), 70_000);
        // A request larger than the limit goes alone.
        assert_eq!(next_slot(&used, &tpm, 10_000, 5_000), 70_000);
        assert_eq!(next_slot(&[], &tpm, 10_000, 5_000), 10_000);
        // Both limits: the later instant.
        let both = Window { requests: Some(2), tokens: Some(1_000), window_ms: 60_000 };
        assert_eq!(next_slot(&used, &both, 10_000, 100), 60_000);
        assert_eq!(next_slot(&used, &both, 10_000, 700), 70_000);
        // Grants that already left the window do not count.
        assert_eq!(next_slot(&used, &tpm, 65_000, 600), 65_000);
    }

    /// However requests arrive, no window of the limiter's length holds more than allowed.
    #[test]
    fn no_window_ever_holds_more_than_the_limits() {
        let window = Window { requests: Some(4), tokens: Some(900), window_ms: 1_000 };
        let mut granted: Vec<Grant> = Vec::new();
        let mut now = 0;
        for n in 0..200u64 {
            now += (n * 37) % 300;
            let tokens = 50 + (n * 91) % 400;
            let at = next_slot(&granted, &window, now, tokens);
            assert!(at >= now);
            granted.push(Grant { id: n.to_string(), at_ms: at, tokens });
        }
        for grant in &granted {
            let inside: Vec<&Grant> = granted
                .iter()
                .filter(|other| other.at_ms <= grant.at_ms && other.at_ms + 1_000 > grant.at_ms)
                .collect();
            assert!(
                inside.len() <= 4,
                "{} requests in the window ending {}",
                inside.len(),
                grant.at_ms
            );
            let tokens: u64 = inside.iter().map(|g| g.tokens).sum();
            assert!(tokens <= 900, "{tokens} tokens in the window ending {}", grant.at_ms);
        }
    }

    /// Instants and token counts at the ends of `u64` (a clock, a usage or a window from a job
    /// config) saturate instead of overflowing (a panic in debug builds, a grant in the past in
    /// release ones).
    #[test]
    fn limits_near_u64_max_saturate() {
        let both = Window { requests: Some(1), tokens: Some(10), window_ms: u64::MAX };
        let late = grants(&[(u64::MAX - 5, u64::MAX)]);
        assert_eq!(next_slot(&late, &both, u64::MAX - 5, u64::MAX), u64::MAX);
        assert_eq!(next_slot(&late, &both, 0, 1), u64::MAX);
        let tokens = Window { requests: None, tokens: Some(u64::MAX), window_ms: u64::MAX };
        assert_eq!(next_slot(&grants(&[(7, u64::MAX), (8, 3)]), &tokens, 9, u64::MAX), 9);
        assert_eq!(super::hold_until(u64::MAX - 1, u64::MAX, u64::MAX), u64::MAX);
    }

    /// A `Retry-After` of a year holds the batch back no longer than the job's cap.
    #[test]
    fn a_retry_after_holds_the_batch_at_most_the_cap() {
        let year = 365 * 24 * 3_600_000;
        assert_eq!(super::hold_until(1_000, year, 60_000), 61_000);
        assert_eq!(super::hold_until(1_000, 2_000, 60_000), 3_000);
    }
}
