//! Why a claim check failed: [`ClaimFailed`], with a [`ClaimFailureKind`] to branch on and
//! what the check spent.

use std::fmt;

use crate::run_failure::{Failed, FailureKindOf};
use serde::{Deserialize, Serialize};

use crate::message::Usage;
use crate::step::FailureKind;

/// Why a check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ClaimFailureKind {
    /// The assessment request failed or was cut off.
    AssessRequest,
    /// The assessment reply did not call `record_assessment`.
    AssessProse,
    /// The `record_assessment` arguments broke the schema.
    AssessSchema,
    /// A citation is not an entire evidence item the assessment was given, or a conclusive
    /// verdict cites nothing.
    CitationNotInEvidence,
    /// Research ended without new evidence.
    NoNewEvidence,
    /// Research hit its turn bound without new evidence.
    ResearchTurnLimit,
    /// Research's last request failed and it found no new evidence (POLICY.md D5).
    Provider,
    /// The summary step failed with this kind.
    Summary(FailureKind),
    /// The host cancelled the check.
    Cancelled,
}

impl ClaimFailureKind {
    /// The kind's stable name; a summary failure is named by the step's kind.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimFailureKind::AssessRequest => "assess-request",
            ClaimFailureKind::AssessProse => "assess-prose",
            ClaimFailureKind::AssessSchema => "assess-schema",
            ClaimFailureKind::CitationNotInEvidence => "citation-not-in-evidence",
            ClaimFailureKind::NoNewEvidence => "no-new-evidence",
            ClaimFailureKind::ResearchTurnLimit => "research-turn-limit",
            ClaimFailureKind::Provider => "provider",
            ClaimFailureKind::Summary(kind) => kind.as_str(),
            ClaimFailureKind::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for ClaimFailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A check that ended without a report: its kind, a message, and what it spent.
pub type ClaimFailed = Failed<ClaimFailureKind>;

impl FailureKindOf for ClaimFailureKind {
    const SUBJECT: &'static str = "claim check";
}

impl ClaimFailed {
    /// Requests that reached the model before the failure.
    #[must_use]
    pub fn requests(&self) -> u32 {
        self.spent().requests
    }

    /// Tokens and cost before the failure.
    #[must_use]
    pub fn usage(&self) -> Usage {
        self.spent().usage
    }
}
