//! The one shape of every typed failure: a kind to branch on, a message, and what was spent.
//! [`crate::StepFailed`], [`crate::ClaimFailed`] and [`crate::JobFailed`] are this type with
//! their own kind.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::agent::Spent;

/// A kind of failure: how the failure names what failed in its message.
pub trait FailureKindOf: Copy + fmt::Display {
    /// What failed: `"step"`, `"claim check"`, `"job"`.
    const SUBJECT: &'static str;
}

/// A run that ended without a value: its kind, a message, and what it spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failed<K> {
    kind: K,
    message: String,
    spent: Spent,
}

impl<K: FailureKindOf> Failed<K> {
    pub(crate) fn new(kind: K, message: impl Into<String>, spent: Spent) -> Self {
        Self { kind, message: message.into(), spent }
    }

    /// Why: branch on it to decide whether to retry.
    #[must_use]
    pub fn kind(&self) -> K {
        self.kind
    }

    /// What happened, in words.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What was spent before the failure: turns (of every inner loop), requests, failed
    /// attempts, retries, usage and cost.
    #[must_use]
    pub fn spent(&self) -> Spent {
        self.spent
    }

    /// The same failure under another kind (a step's failure as a job's).
    pub(crate) fn map_kind<L: FailureKindOf>(self, kind: impl FnOnce(K) -> L) -> Failed<L> {
        Failed { kind: kind(self.kind), message: self.message, spent: self.spent }
    }
}

impl<K: FailureKindOf> fmt::Display for Failed<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed ({}): {}", K::SUBJECT, self.kind, self.message)
    }
}

impl<K: FailureKindOf + fmt::Debug> std::error::Error for Failed<K> {}
