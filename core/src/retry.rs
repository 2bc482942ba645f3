//! The one retry layer: which failed requests are worth trying again, and when.
//!
//! Classification reads what the provider sent (status, error type, message, `Retry-After`);
//! the codecs fill a failed response's [`ProviderError`] with it (see [`crate::FailureClass`]).
//! Backoff is a pure function of the attempt, the caller's policy and a seed the caller passes:
//! the core never reads a clock or draws randomness, and the host sleeps.
//!
//! This is the only retry layer. The agent loop consults it for a failed model request (see
//! `Agent`), counts retries in what the run spent, and never retries an aborted request. Hosts
//! and transports must not retry on their own; a transport reports each failure once.

use serde::{Deserialize, Serialize};

use crate::message::{AssistantMessage, StopReason};
pub use crate::request_failure::{FailureClass, ProviderError, classify, parse_retry_after};

/// The caller's retry policy and budget. In JSON every field is optional (the default's value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// Retries allowed over the whole run (not per request). 0 disables retrying.
    pub max_retries: u32,
    /// The first delay, in milliseconds; it doubles with each attempt.
    pub base_delay_ms: u64,
    /// No computed delay exceeds this.
    pub max_delay_ms: u64,
    /// A provider's `Retry-After` is honoured up to this; a longer one is not waited for and
    /// the failure stands.
    pub retry_after_cap_ms: u64,
    /// The seed of the jitter, so a run's delays are reproducible.
    pub seed: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 0,
            base_delay_ms: 500,
            max_delay_ms: 30_000,
            retry_after_cap_ms: 60_000,
            seed: 0,
        }
    }
}

impl RetryPolicy {
    /// The default policy with `max_retries` retries.
    #[must_use]
    pub fn with_retries(max_retries: u32) -> Self {
        Self { max_retries, ..Self::default() }
    }

    /// How long to wait before retry number `attempt` (1 for the first retry) of a failure,
    /// or `None` when it must not be retried: its class is not retryable, the budget is spent,
    /// or the provider asked for a wait longer than the cap.
    ///
    /// Exponential with "equal jitter" (AWS architecture blog: half the delay fixed, half
    /// drawn): a delay in `[d/2, d]` with `d = min(max_delay, base * 2^(attempt-1))`, from a
    /// hash of the seed and the attempt. A `Retry-After` within the cap replaces the computed delay.
    #[must_use]
    pub fn delay(
        &self,
        attempt: u32,
        class: FailureClass,
        retry_after_ms: Option<u64>,
    ) -> Option<u64> {
        if class != FailureClass::Retryable || attempt == 0 || attempt > self.max_retries {
            return None;
        }
        if let Some(wait) = retry_after_ms {
            return (wait <= self.retry_after_cap_ms).then_some(wait);
        }
        let exponent = (attempt - 1).min(32);
        let ceiling = self.base_delay_ms.saturating_mul(1u64 << exponent).min(self.max_delay_ms);
        let half = ceiling / 2;
        let spread = ceiling - half;
        let jitter =
            if spread == 0 { 0 } else { mix(self.seed ^ u64::from(attempt)) % (spread + 1) };
        Some(half + jitter)
    }
}

/// The delay before retrying `response`, a failed request, when `used` retries were made
/// already; `None` when it must not be retried (not a failure, aborted, not marked retryable
/// by its codec, budget spent, or a `Retry-After` beyond the cap).
#[must_use]
pub fn retry_delay(policy: &RetryPolicy, used: u32, response: &AssistantMessage) -> Option<u64> {
    // An aborted request is the host's decision: never retried.
    if response.stop_reason() != StopReason::Error {
        return None;
    }
    let error = response.error.as_ref()?;
    policy.delay(used + 1, error.class, error.retry_after_ms)
}

/// SplitMix64's finalizer: a well-spread hash of a 64-bit value.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_exponential_jittered_capped_and_reproducible() {
        let policy = RetryPolicy {
            max_retries: 10,
            base_delay_ms: 100,
            max_delay_ms: 1_000,
            seed: 7,
            ..RetryPolicy::default()
        };
        let delays: Vec<u64> =
            (1..=6).map(|a| policy.delay(a, FailureClass::Retryable, None).unwrap()).collect();
        for (attempt, delay) in (1u32..).zip(&delays) {
            let ceiling = (100u64 << (attempt - 1)).min(1_000);
            assert!((ceiling / 2..=ceiling).contains(delay), "attempt {attempt}: {delay}");
        }
        let again: Vec<u64> =
            (1..=6).map(|a| policy.delay(a, FailureClass::Retryable, None).unwrap()).collect();
        assert_eq!(delays, again, "same seed, same delays");
        let other = RetryPolicy { seed: 8, ..policy };
        let shifted: Vec<u64> =
            (1..=6).map(|a| other.delay(a, FailureClass::Retryable, None).unwrap()).collect();
        assert_ne!(delays, shifted, "another seed, other delays");
    }

    #[test]
    fn budget_class_and_retry_after_decide() {
        let policy =
            RetryPolicy { max_retries: 2, retry_after_cap_ms: 5_000, ..RetryPolicy::default() };
        assert_eq!(policy.delay(3, FailureClass::Retryable, None), None, "budget spent");
        assert_eq!(policy.delay(1, FailureClass::NotRetryable, None), None);
        assert_eq!(policy.delay(1, FailureClass::ContextOverflow, None), None);
        assert_eq!(policy.delay(1, FailureClass::Retryable, Some(2_000)), Some(2_000));
        assert_eq!(policy.delay(1, FailureClass::Retryable, Some(9_000)), None, "beyond the cap");
        assert_eq!(
            RetryPolicy::default().delay(1, FailureClass::Retryable, None),
            None,
            "off by default"
        );
        assert_eq!(policy.delay(0, FailureClass::Retryable, None), None, "attempts count from 1");
    }

    #[test]
    fn the_hash_is_splitmix64() {
        // SplitMix64's first two outputs from state 0 (the reference implementation's values).
        assert_eq!(mix(0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(mix(0x9e37_79b9_7f4a_7c15), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn the_delays_of_a_seed_are_pinned() {
        // A run's delays are part of its reproducible record: they may not change between
        // versions. Computed from the formula in `delay`'s documentation.
        let delays = |seed: u64, base_delay_ms: u64| -> Vec<u64> {
            let policy = RetryPolicy {
                max_retries: 10,
                base_delay_ms,
                max_delay_ms: 1_000,
                seed,
                ..RetryPolicy::default()
            };
            (1..=6).map(|a| policy.delay(a, FailureClass::Retryable, None).unwrap()).collect()
        };
        assert_eq!(delays(7, 100), [82, 171, 303, 432, 765, 781]);
        assert_eq!(delays(8, 100), [60, 132, 203, 763, 930, 955]);
        // An odd ceiling: half rounds down, the spread takes the rest.
        assert_eq!(delays(7, 101)[..3], [94, 145, 222]);
        // A zero delay has no jitter.
        assert_eq!(delays(7, 0), [0; 6]);
    }

    #[test]
    fn retry_delay_asks_for_the_next_attempt() {
        let policy = RetryPolicy { max_retries: 2, seed: 7, ..RetryPolicy::default() };
        let mut failed = AssistantMessage::failed("503");
        failed.error = Some(ProviderError {
            class: FailureClass::Retryable,
            status: Some(503),
            retry_after_ms: None,
            raw_body: None,
        });
        let first = policy.delay(1, FailureClass::Retryable, None);
        let second = policy.delay(2, FailureClass::Retryable, None);
        assert_ne!(first, second);
        assert_eq!(retry_delay(&policy, 0, &failed), first);
        assert_eq!(retry_delay(&policy, 1, &failed), second);
        assert_eq!(retry_delay(&policy, 2, &failed), None, "budget spent");
        let aborted = AssistantMessage { stop_reason: Some(StopReason::Aborted), ..failed.clone() };
        assert_eq!(retry_delay(&policy, 0, &aborted), None, "the host's decision");
        failed.error = None;
        assert_eq!(retry_delay(&policy, 0, &failed), None, "not marked by its codec");
    }
}
