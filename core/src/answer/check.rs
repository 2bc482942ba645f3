//! The answer-check machine: each sentence with something to check goes through the claim
//! checker in turn, over one corpus, its call ids following the previous sentence's, so the
//! whole answer is one machine a host saves and resumes like any other job.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::marks::{MAX_MARKS, marks, split_after_marks};
use super::report::{
    AnswerReport, Counts, MarkHolds, MarkReport, SentenceFailure, SentenceReport, SentenceStatus,
};
use crate::agent::Spent;
use crate::claim::{
    ClaimCheck, ClaimFailed, ClaimFailureKind, ClaimOptions, Report, Verdict, search,
};
use crate::event::Event;
use crate::indexed::{CorpusRef, IndexedCorpus};
use crate::machine::{Input, Machine, Misuse, MisuseKind, Output};
use crate::segment::{AnswerError, MAX_SENTENCES, Span, checkable, sentences};

/// The sentence being checked.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Current {
    index: usize,
    check: Box<ClaimCheck>,
}

/// A check of a whole answer: a [`SentenceReport`] for each sentence, an [`AnswerReport`] at
/// the end. Sentences are checked one at a time, in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerCheck {
    answer: String,
    corpus: CorpusRef,
    options: ClaimOptions,
    /// Every sentence; a checkable one is `pending` until its check ends.
    sentences: Vec<SentenceReport>,
    current: Option<Current>,
    /// What the checks that ended spent.
    spent: Spent,
    next_id: u64,
    #[serde(default)]
    events: Vec<Event>,
    /// The failure that ended the whole check (a cancellation, a provider that kept failing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failed: Option<ClaimFailed>,
}

impl AnswerCheck {
    /// A check of `answer` over `corpus`. `mapping` says which passage a citation mark names
    /// (`"1" → "e1"`); a mark not in it names the passage whose id it is.
    ///
    /// # Errors
    /// An [`AnswerError`] when the answer cannot be cut into sentences to check.
    pub fn new(
        answer: impl Into<String>,
        corpus: Arc<IndexedCorpus>,
        options: ClaimOptions,
        mapping: &BTreeMap<String, String>,
    ) -> Result<Self, AnswerError> {
        let answer = answer.into();
        let passage_of = |label: &str| -> Option<String> {
            let id = mapping.get(label).map_or(label, String::as_str);
            corpus.corpus().get(id).map(|passage| passage.id.clone())
        };
        let names = |label: &str| passage_of(label).is_some();
        let cut: Vec<_> = sentences(&answer)?
            .into_iter()
            .flat_map(|sentence| split_after_marks(sentence, &names))
            .collect();
        // Cutting after marks makes more pieces: the cap holds for them too.
        if cut.len() > MAX_SENTENCES {
            return Err(AnswerError::TooManySentences { count: cut.len() });
        }
        let mut planned: Vec<SentenceReport> = Vec::with_capacity(cut.len());
        for (index, sentence) in cut.into_iter().enumerate() {
            let (found, claim) =
                marks(&sentence.text, sentence.span.start, sentence.span.start_utf16, |label| {
                    passage_of(label).is_some()
                });
            let found: Vec<MarkReport> = found
                .into_iter()
                .map(|mark| {
                    let passage = passage_of(&mark.label);
                    // A mark that names no passage is so whether or not its sentence is checked.
                    let holds = if passage.is_some() {
                        MarkHolds::Unchecked
                    } else {
                        MarkHolds::UnknownPassage
                    };
                    MarkReport { passage, holds, label: mark.label, span: mark.span }
                })
                .collect();
            let claim = claim.trim();
            // A sentence of marks alone (`[e1]` after the full stop) belongs to the one before.
            if claim.chars().all(|c| !c.is_alphanumeric())
                && !found.is_empty()
                && let Some(before) = planned.last_mut()
            {
                before.marks.extend(found);
                planned.push(not_checkable(index, sentence.text, sentence.span, Vec::new()));
                continue;
            }
            if sentence.checkable && checkable(claim) {
                planned.push(SentenceReport {
                    index,
                    text: sentence.text,
                    span: sentence.span,
                    claim: Some(claim.to_owned()),
                    status: SentenceStatus::Pending,
                    confidence: None,
                    citations: Vec::new(),
                    marks: found,
                    report: None,
                    failure: None,
                });
            } else {
                planned.push(not_checkable(index, sentence.text, sentence.span, found));
            }
        }
        let mut check = Self {
            answer,
            corpus: CorpusRef::new(corpus),
            options,
            sentences: planned,
            current: None,
            spent: Spent::default(),
            next_id: 0,
            events: Vec::new(),
            failed: None,
        };
        check.start_next();
        Ok(check)
    }

    /// The answer.
    #[must_use]
    pub fn answer(&self) -> &str {
        &self.answer
    }

    /// Every sentence as far as the check has gone (`pending` where it has not).
    #[must_use]
    pub fn sentences(&self) -> &[SentenceReport] {
        &self.sentences
    }

    /// What the check has spent so far.
    #[must_use]
    pub fn spent(&self) -> Spent {
        let mut spent = self.spent;
        if let Some(current) = &self.current {
            spent.add(current.check.spent());
        }
        spent
    }

    /// Starts the next pending sentence's check, or ends when none is left.
    fn start_next(&mut self) {
        let Some(sentence) = self.sentences.iter().find(|s| s.status == SentenceStatus::Pending)
        else {
            return;
        };
        let index = sentence.index;
        let claim = sentence.claim.clone().unwrap_or_default();
        let corpus = Arc::clone(self.corpus.get());
        // The passages the sentence's marks name are asked about first, then what the
        // retriever finds, each once.
        let mut evidence: Vec<String> = Vec::new();
        for mark in sentence.marks.iter().take(MAX_MARKS) {
            let text = mark.passage.as_deref().and_then(|id| corpus.corpus().get(id));
            if let Some(passage) = text
                && !evidence.contains(&passage.text)
            {
                evidence.push(passage.text.clone());
            }
        }
        for found in search(&corpus, &self.options.retriever, &claim) {
            let text = &corpus.corpus().passages()[found].text;
            if !evidence.contains(text) {
                evidence.push(text.clone());
            }
        }
        self.events.push(Event::SentenceStarted { index });
        let check = ClaimCheck::starting_at(claim, corpus, evidence, self.options, self.next_id);
        self.current = Some(Current { index, check: Box::new(check) });
    }

    /// Moves the current check's events out.
    fn pull_events(&mut self) {
        if let Some(current) = &mut self.current {
            self.events.extend(current.check.drain_events());
        }
    }

    /// Records the current check once it has ended, and starts the next.
    fn advance(&mut self) {
        let ended =
            self.current.as_mut().is_some_and(|c| matches!(c.check.poll_output(), Output::Done));
        if !ended {
            return;
        }
        let Some(Current { index, check }) = self.current.take() else { return };
        self.next_id = check.next_free_id();
        self.spent.add(check.spent());
        let outcome = check.finish();
        let Some(sentence) = self.sentences.iter_mut().find(|s| s.index == index) else { return };
        match outcome {
            Ok(report) => record(sentence, report),
            Err(failed)
                if matches!(
                    failed.kind(),
                    ClaimFailureKind::NoNewEvidence | ClaimFailureKind::ResearchTurnLimit
                ) =>
            {
                sentence.status = SentenceStatus::Insufficient;
                settle_marks(sentence, None);
            }
            Err(failed) => {
                if matches!(
                    failed.kind(),
                    ClaimFailureKind::Cancelled
                        | ClaimFailureKind::Provider
                        | ClaimFailureKind::AssessRequest
                ) {
                    // A request failed past its retries, or the host cancelled: the answer
                    // ends there, nothing more is asked.
                    self.failed = Some(ClaimFailed::new(
                        failed.kind(),
                        format!("sentence {}: {}", index + 1, failed.message()),
                        self.spent,
                    ));
                    return;
                }
                sentence.status = SentenceStatus::Failed;
                sentence.failure = Some(SentenceFailure {
                    kind: failed.kind().as_str().to_owned(),
                    message: failed.message().to_owned(),
                });
                settle_marks(sentence, None);
            }
        }
        self.events.push(Event::SentenceChecked { sentence: Box::new(sentence.clone()) });
        self.start_next();
    }

    /// The report, once every sentence is checked.
    fn report(&self) -> AnswerReport {
        let counts = Counts::of(&self.sentences);
        let checked = counts.checked();
        #[allow(clippy::cast_precision_loss)]
        let supported_share =
            if checked == 0 { 0.0 } else { counts.supported as f64 / checked as f64 };
        AnswerReport {
            answer: self.answer.clone(),
            sentences: self.sentences.clone(),
            counts,
            supported_share,
            faithful: (checked > 0).then_some(counts.supported == checked),
            requests: self.spent.requests,
            usage: self.spent.usage,
        }
    }
}

fn not_checkable(index: usize, text: String, span: Span, marks: Vec<MarkReport>) -> SentenceReport {
    SentenceReport {
        index,
        text,
        span,
        claim: None,
        status: SentenceStatus::NotCheckable,
        confidence: None,
        citations: Vec::new(),
        marks,
        report: None,
        failure: None,
    }
}

/// A sentence's check ended with a report.
fn record(sentence: &mut SentenceReport, report: Report) {
    sentence.status = SentenceStatus::of(report.assessment.verdict);
    sentence.confidence = Some(report.assessment.confidence);
    sentence.citations.clone_from(&report.citations);
    settle_marks(sentence, Some(&report));
    sentence.report = Some(Box::new(report));
}

/// Whether each mark's passage holds the sentence: it does when the verdict is supported and
/// the passage is cited for it (a contradicted verdict's cited passage contradicts).
fn settle_marks(sentence: &mut SentenceReport, report: Option<&Report>) {
    for (n, mark) in sentence.marks.iter_mut().enumerate() {
        let Some(passage) = &mark.passage else {
            mark.holds = MarkHolds::UnknownPassage;
            continue;
        };
        let Some(report) = report.filter(|_| n < MAX_MARKS) else {
            mark.holds = if sentence.status == SentenceStatus::Insufficient && n < MAX_MARKS {
                MarkHolds::DoesNotSupport
            } else {
                MarkHolds::Unchecked
            };
            continue;
        };
        let cited = report.citations.iter().any(|c| c.passage.as_deref() == Some(passage.as_str()));
        mark.holds = match (report.assessment.verdict, cited) {
            (Verdict::Supported, true) => MarkHolds::Supports,
            (Verdict::Contradicted, true) => MarkHolds::Contradicts,
            _ => MarkHolds::DoesNotSupport,
        };
    }
}

impl Machine for AnswerCheck {
    type Value = AnswerReport;
    type Error = ClaimFailed;

    fn poll_output(&mut self) -> Output<'_> {
        if self.failed.is_some() {
            return Output::Done;
        }
        match &mut self.current {
            Some(current) => current.check.poll_output(),
            None => Output::Done,
        }
    }

    fn handle_input(&mut self, input: Input) -> Result<(), Misuse> {
        let Some(current) = self.current.as_mut().filter(|_| self.failed.is_none()) else {
            return Err(Misuse::new(MisuseKind::Finished, "input after the check ended"));
        };
        current.check.handle_input(input)?;
        self.pull_events();
        self.advance();
        Ok(())
    }

    fn drain_events(&mut self) -> Vec<Event> {
        self.pull_events();
        std::mem::take(&mut self.events)
    }

    fn finish(self) -> Result<AnswerReport, ClaimFailed> {
        if let Some(failed) = self.failed {
            return Err(failed);
        }
        if self.current.is_some() {
            return Err(ClaimFailed::new(
                ClaimFailureKind::Cancelled,
                "cancelled: finished before the check ended",
                self.spent(),
            ));
        }
        Ok(self.report())
    }
}
