//! What an answer check reports: each sentence with its span, the claim checked, its status,
//! confidence and located citations, and the answer's own marks, each checked.

use serde::{Deserialize, Serialize};

use crate::claim::report::{Citation, Report, Verdict};
use crate::message::Usage;
use crate::segment::Span;

/// What became of one sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SentenceStatus {
    /// The evidence supports it.
    Supported,
    /// The evidence contradicts it.
    Contradicted,
    /// The evidence neither supports nor contradicts it (research found nothing either).
    Insufficient,
    /// Its check failed (the model broke the assessment's rules); the failure says why.
    Failed,
    /// It states nothing to check (a question, a lead-in, a greeting, a mark alone).
    NotCheckable,
    /// Not checked yet (only in a saved state or a report of a job that did not end).
    Pending,
}

impl SentenceStatus {
    /// The status of a verdict.
    #[must_use]
    pub fn of(verdict: Verdict) -> Self {
        match verdict {
            Verdict::Supported => Self::Supported,
            Verdict::Contradicted => Self::Contradicted,
            Verdict::Insufficient => Self::Insufficient,
        }
    }
}

/// Whether the passage a mark names supports the sentence it sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MarkHolds {
    /// The sentence is supported and the passage is among those that support it.
    Supports,
    /// The sentence is contradicted, by this passage.
    Contradicts,
    /// The passage was asked about and does not support the sentence.
    DoesNotSupport,
    /// The mark names no passage of the corpus (nor one mapped to it).
    UnknownPassage,
    /// The sentence was not checked, or the mark is past the most a sentence's check takes.
    Unchecked,
}

/// One of the answer's own citation marks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarkReport {
    /// What it says (`e1` for `[e1]`).
    pub label: String,
    /// Where its bracketed group is in the answer.
    pub span: Span,
    /// The passage it names, when the corpus has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passage: Option<String>,
    /// Whether that passage supports the sentence.
    pub holds: MarkHolds,
}

/// Why a sentence's check failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentenceFailure {
    /// The claim checker's kind (`assess-prose`, `citation-not-in-evidence`, ...).
    pub kind: String,
    /// What happened.
    pub message: String,
}

/// One atomic claim of a sentence the job asked to split ([`super::AnswerCheck`] with
/// `decompose`), checked on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimReport {
    /// The claim, as the decomposition wrote it.
    pub text: String,
    /// Where it comes from in the answer: its sentence's span, or its own where the claim is
    /// the answer's text verbatim.
    pub span: Span,
    /// What became of it (`pending` until its check ends).
    pub status: SentenceStatus,
    /// How sure its verdict is, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The passages that decided its verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub citations: Vec<Citation>,
    /// Its check's whole report, when it ended with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Box<Report>>,
    /// Why its check failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<SentenceFailure>,
}

/// How a sentence the job asked to split was split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decomposed {
    /// Claims the model wrote that were dropped: most of their words are not the answer's.
    #[serde(default)]
    pub ungrounded: usize,
    /// Why the sentence was checked whole instead (the step failed, or kept no claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole: Option<SentenceFailure>,
}

/// One sentence of the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SentenceReport {
    /// Its place among the answer's sentences, from 0.
    pub index: usize,
    /// Its text, as in the answer.
    pub text: String,
    /// Where it is in the answer.
    pub span: Span,
    /// The claim checked: the text without its citation marks; absent when not checkable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// What became of it.
    pub status: SentenceStatus,
    /// How sure the verdict is, from 0 to 1, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The passages that decided the verdict, each with the quote and its offsets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub citations: Vec<Citation>,
    /// The answer's own marks in it, each checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<MarkReport>,
    /// The claim check's whole report (summary, route, verifier record), when it ended with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Box<Report>>,
    /// Why its check failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<SentenceFailure>,
    /// Its atomic claims, each checked, when the job asked to split sentences and the split
    /// kept any; the sentence's status is then the worst of theirs (contradicted, insufficient,
    /// failed, supported), and its citations theirs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimReport>,
    /// How it was split, when the job asked for that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decomposed: Option<Decomposed>,
}

/// How many sentences ended each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Supported.
    pub supported: usize,
    /// Contradicted.
    pub contradicted: usize,
    /// Insufficient evidence.
    pub insufficient: usize,
    /// Checks that failed.
    pub failed: usize,
    /// Sentences with nothing to check.
    pub not_checkable: usize,
}

impl Counts {
    /// The counts of `sentences`.
    #[must_use]
    pub fn of(sentences: &[SentenceReport]) -> Self {
        let mut counts = Self::default();
        for sentence in sentences {
            match sentence.status {
                SentenceStatus::Supported => counts.supported += 1,
                SentenceStatus::Contradicted => counts.contradicted += 1,
                SentenceStatus::Insufficient => counts.insufficient += 1,
                SentenceStatus::Failed => counts.failed += 1,
                SentenceStatus::NotCheckable | SentenceStatus::Pending => {
                    counts.not_checkable += 1;
                }
            }
        }
        counts
    }

    /// The sentences that were checked (every status but not checkable).
    #[must_use]
    pub fn checked(&self) -> usize {
        self.supported + self.contradicted + self.insufficient + self.failed
    }
}

/// What an answer check produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerReport {
    /// The answer.
    pub answer: String,
    /// Every sentence, in order (the ones with nothing to check too, so a page can render the
    /// whole answer from them).
    pub sentences: Vec<SentenceReport>,
    /// How many ended each way.
    pub counts: Counts,
    /// The share of checked sentences that are supported (0 when none was checked).
    pub supported_share: f64,
    /// Whether the answer holds: every checked sentence supported. Absent when no sentence had
    /// anything to check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faithful: Option<bool>,
    /// Requests that reached the model, over every sentence.
    pub requests: u32,
    /// Tokens and cost over every request.
    pub usage: Usage,
}
