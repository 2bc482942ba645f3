//! The answer-check machine: each sentence with something to check goes through the claim
//! checker (split into atomic claims first when the job asks, each claim then checked on its
//! own), over one corpus, so the whole answer is one machine a host saves and resumes like any
//! other job. Up to the job's concurrency, sentences (or claims) are checked at once: each is
//! its own claim check with its own range of call ids, and the host answers their model calls
//! in whatever order they come back.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use verity_derive::TaggedDeserialize;

use super::decompose::{Decomposition, decompose_step, keep};
use super::marks::{MAX_MARKS, marks, split_after_marks};
use super::report::{
    AnswerReport, ClaimReport, Counts, Decomposed, MarkHolds, MarkReport, SentenceFailure,
    SentenceReport, SentenceStatus,
};
use crate::agent::Spent;
use crate::claim::{
    Citation, ClaimCheck, ClaimFailed, ClaimFailureKind, ClaimOptions, Report, search,
};
use crate::event::Event;
use crate::indexed::{CorpusRef, IndexedCorpus};
use crate::machine::{CallId, Input, Machine, Misuse, MisuseKind, Output};
use crate::segment::{AnswerError, MAX_SENTENCES, Span, checkable, quote_span, sentences};
use crate::step::{FailureKind, Step};

/// What a sentence in flight is doing.
#[derive(Debug, Clone, Serialize, TaggedDeserialize)]
#[serde(rename_all = "camelCase", tag = "work")]
enum Work {
    /// Being split into atomic claims.
    Decompose { step: Box<Step<Decomposition>> },
    /// One claim being checked: the sentence's own (`claim` absent) or its atomic claim.
    Check {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        claim: Option<usize>,
        check: Box<ClaimCheck>,
    },
}

/// A sentence in flight.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Current {
    index: usize,
    work: Work,
}

impl Work {
    fn poll_output(&mut self) -> Output<'_> {
        match self {
            Work::Decompose { step } => step.poll_output(),
            Work::Check { check, .. } => check.poll_output(),
        }
    }

    fn handle_input(&mut self, input: Input) -> Result<(), Misuse> {
        match self {
            Work::Decompose { step } => step.handle_input(input),
            Work::Check { check, .. } => check.handle_input(input),
        }
    }

    fn drain_events(&mut self) -> Vec<Event> {
        match self {
            Work::Decompose { step } => step.drain_events(),
            Work::Check { check, .. } => check.drain_events(),
        }
    }

    fn spent(&self) -> Spent {
        match self {
            Work::Decompose { step } => step.spent(),
            Work::Check { check, .. } => check.spent(),
        }
    }

    /// Whether it has ended (its outcome is then taken by `finish`).
    fn is_done(&mut self) -> bool {
        match self {
            Work::Decompose { step } => step.is_done(),
            Work::Check { check, .. } => matches!(check.poll_output(), Output::Done),
        }
    }

    /// The id of what it waits for: its model call, or its tool batch.
    fn pending_id(&mut self) -> Option<CallId> {
        match self.poll_output() {
            Output::CallModel(call) => Some(call.id),
            Output::RunTools(batch) => Some(batch.id),
            _ => None,
        }
    }
}

/// The call ids each piece of work (a sentence's check, its split, an atomic claim's check)
/// may use when several are in flight: the next starts this far on, so no two ever share an
/// id. A check that made a million requests (turns and retries are the job's to set) would
/// reach the next one's; each id is a request, so that is out of reach of any run.
const IDS_PER_WORK: u64 = 1_000_000;

/// The most sentences (or claims) an answer job checks at once.
pub const MAX_CONCURRENCY: u32 = 16;

/// Reads the work in flight as the list it is, or as the one work (or none) that an answer
/// check saved before several could be in flight (`current`).
fn one_or_many<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Current>, D::Error> {
    use serde::de::Error as _;
    // Through a value rather than an untagged enum, so that a bad saved state says what is
    // wrong with it.
    let value = serde_json::Value::deserialize(deserializer)?;
    let read = if value.is_array() {
        serde_json::from_value(value)
    } else {
        serde_json::from_value::<Option<Current>>(value).map(|one| one.into_iter().collect())
    };
    read.map_err(D::Error::custom)
}

/// A check of a whole answer: a [`SentenceReport`] for each sentence, an [`AnswerReport`] at
/// the end. Sentences are started in order, as many at once as its concurrency allows (one
/// unless [`concurrent`](Self::concurrent) says otherwise); they may end in any order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerCheck {
    answer: String,
    corpus: CorpusRef,
    options: ClaimOptions,
    /// Whether each sentence is split into atomic claims before it is checked.
    #[serde(default)]
    decompose: bool,
    /// Every sentence; a checkable one is `pending` until its check ends.
    sentences: Vec<SentenceReport>,
    /// The work in flight, in the order it started.
    #[serde(default, alias = "current", deserialize_with = "one_or_many")]
    active: Vec<Current>,
    /// How many sentences (or claims) are checked at once.
    #[serde(default = "one")]
    concurrency: u32,
    /// What the checks that ended spent.
    spent: Spent,
    /// The first call id of the next work to start.
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
                    claims: Vec::new(),
                    decomposed: None,
                });
            } else {
                planned.push(not_checkable(index, sentence.text, sentence.span, found));
            }
        }
        let mut check = Self {
            answer,
            corpus: CorpusRef::new(corpus),
            options,
            decompose: false,
            sentences: planned,
            active: Vec::new(),
            concurrency: 1,
            spent: Spent::default(),
            next_id: 0,
            events: Vec::new(),
            failed: None,
        };
        check.settle();
        Ok(check)
    }

    /// The same check, each sentence first split into atomic claims by a typed step (one more
    /// request a sentence), each claim then checked on its own. Call before the first input.
    #[must_use]
    pub fn decomposing(mut self, decompose: bool) -> Self {
        if decompose != self.decompose && self.spent().requests == 0 {
            self.decompose = decompose;
            self.restart();
        }
        self
    }

    /// The same check with up to `concurrency` sentences (or atomic claims) in flight at once
    /// (at least 1, at most [`MAX_CONCURRENCY`]): their model calls are all pending together
    /// ([`Machine::poll_outputs`]) and may be answered in any order. Call before the first
    /// input.
    #[must_use]
    pub fn concurrent(mut self, concurrency: u32) -> Self {
        let concurrency = concurrency.clamp(1, MAX_CONCURRENCY);
        if concurrency != self.concurrency && self.spent().requests == 0 {
            self.concurrency = concurrency;
            self.restart();
        }
        self
    }

    /// Starts over (before any request): nothing in flight, the first works started again.
    fn restart(&mut self) {
        self.active.clear();
        self.events.clear();
        self.next_id = 0;
        self.settle();
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
        for current in &self.active {
            spent.add(current.work.spent());
        }
        spent
    }

    /// Starts the next piece of work not in flight, in the answer's order: a sentence's split
    /// (when the job asks for one), the check of a whole sentence, or of a split sentence's
    /// next claim. Whether there was one to start.
    fn start_one(&mut self) -> bool {
        for position in 0..self.sentences.len() {
            let sentence = &self.sentences[position];
            if sentence.status != SentenceStatus::Pending {
                continue;
            }
            let index = sentence.index;
            let busy = |claim: Option<usize>| {
                self.active.iter().any(|current| {
                    current.index == index
                        && match (&current.work, claim) {
                            (_, None) => true,
                            (Work::Check { claim: Some(n), .. }, Some(m)) => *n == m,
                            _ => false,
                        }
                })
            };
            if self.decompose && sentence.decomposed.is_none() {
                if busy(None) {
                    continue;
                }
                let (start, whole) =
                    (sentence.span.start, sentence.claim.clone().unwrap_or_default());
                let first = self.first_id();
                let earlier = earlier_text(&self.answer, start);
                let step = decompose_step(earlier, &whole, self.options.retry, first);
                self.events.push(Event::SentenceStarted { index });
                self.active.push(Current { index, work: Work::Decompose { step: Box::new(step) } });
                return true;
            }
            let (claim, text) = if sentence.claims.is_empty() {
                if busy(None) {
                    continue;
                }
                (None, sentence.claim.clone().unwrap_or_default())
            } else {
                let next = (0..sentence.claims.len()).find(|&n| {
                    sentence.claims[n].status == SentenceStatus::Pending && !busy(Some(n))
                });
                let Some(n) = next else { continue };
                (Some(n), sentence.claims[n].text.clone())
            };
            let evidence = self.evidence(position, &text);
            if !self.decompose {
                self.events.push(Event::SentenceStarted { index });
            }
            let corpus = Arc::clone(self.corpus.get());
            let first = self.first_id();
            let check = ClaimCheck::starting_at(text, corpus, evidence, self.options, first);
            self.active
                .push(Current { index, work: Work::Check { claim, check: Box::new(check) } });
            return true;
        }
        false
    }

    /// The passages a check of `text`, of the sentence at `position`, asks about: those the
    /// sentence's marks name first, then what the retriever finds, each once.
    fn evidence(&self, position: usize, text: &str) -> Vec<String> {
        let corpus = self.corpus.get();
        let mut evidence: Vec<String> = Vec::new();
        for mark in self.sentences[position].marks.iter().take(MAX_MARKS) {
            let found = mark.passage.as_deref().and_then(|id| corpus.corpus().get(id));
            if let Some(passage) = found
                && !evidence.contains(&passage.text)
            {
                evidence.push(passage.text.clone());
            }
        }
        for found in search(corpus, &self.options.retriever, text) {
            let passage = &corpus.corpus().passages()[found].text;
            if !evidence.contains(passage) {
                evidence.push(passage.clone());
            }
        }
        evidence
    }

    /// The first call id of a work starting now. One at a time, each work's ids follow the
    /// last one's; several at once, each has its own range ([`IDS_PER_WORK`]).
    fn first_id(&mut self) -> u64 {
        let first = self.next_id;
        if self.concurrency > 1 {
            self.next_id = first.saturating_add(IDS_PER_WORK);
        }
        first
    }

    /// Moves the events of the work in flight out, in the order the work started.
    fn pull_events(&mut self) {
        for current in &mut self.active {
            self.events.extend(current.work.drain_events());
        }
    }

    /// Records the work that has ended, and starts what comes next, up to the concurrency:
    /// at the start and after every input.
    fn settle(&mut self) {
        loop {
            self.pull_events();
            if self.failed.is_some() {
                return;
            }
            if let Some(position) = self.active.iter_mut().position(|c| c.work.is_done()) {
                let Current { index, work } = self.active.remove(position);
                let go_on = match work {
                    Work::Decompose { step } => self.on_decomposed(index, *step),
                    Work::Check { claim, check } => self.on_checked(index, claim, *check),
                };
                if !go_on {
                    // What the other work in flight spent is the answer's; nothing more is
                    // asked of it.
                    for current in std::mem::take(&mut self.active) {
                        self.spent.add(current.work.spent());
                    }
                    return;
                }
                continue;
            }
            if self.active.len() >= self.concurrency as usize || !self.start_one() {
                return;
            }
        }
    }

    /// Ends the whole check: a request failed past its retries, or the host cancelled; nothing
    /// more is asked.
    fn end_with(&mut self, kind: ClaimFailureKind, index: usize, message: &str) -> bool {
        let message = format!("sentence {}: {message}", index + 1);
        self.failed = Some(ClaimFailed::new(kind, message, self.spent()));
        false
    }

    /// Keeps the claims a decomposition wrote (or notes why the sentence is checked whole);
    /// whether to go on.
    fn on_decomposed(&mut self, index: usize, step: Step<Decomposition>) -> bool {
        self.next_id = self.next_id.max(step.next_free_id());
        self.spent.add(step.spent());
        let outcome = step.finish();
        if let Err(failed) = &outcome {
            let kind = match failed.kind() {
                FailureKind::Cancelled => Some(ClaimFailureKind::Cancelled),
                FailureKind::Provider => Some(ClaimFailureKind::Provider),
                _ => None,
            };
            if let Some(kind) = kind {
                let message = format!("splitting it into claims: {}", failed.message());
                return self.end_with(kind, index, &message);
            }
        }
        let Some(sentence) = self.sentences.iter_mut().find(|s| s.index == index) else {
            return false;
        };
        let whole =
            |kind: &str, message: String| SentenceFailure { kind: kind.to_owned(), message };
        sentence.decomposed = Some(match outcome {
            Ok(decomposition) => {
                let earlier = earlier_text(&self.answer, sentence.span.start);
                let (kept, ungrounded) = keep(decomposition.claims, earlier, &sentence.text);
                sentence.claims = kept
                    .into_iter()
                    .map(|text| pending_claim(&sentence.text, sentence.span, text))
                    .collect();
                let whole = sentence.claims.is_empty().then(|| {
                    whole(
                        "no-claims-kept",
                        format!(
                            "the split kept no claim ({ungrounded} dropped: most of their words are not the answer's); the sentence was checked whole"
                        ),
                    )
                });
                Decomposed { ungrounded, whole }
            }
            Err(failed) => Decomposed {
                ungrounded: 0,
                whole: Some(whole(
                    &format!("decompose-{}", failed.kind().as_str()),
                    format!("{}; the sentence was checked whole", failed.message()),
                )),
            },
        });
        true
    }

    /// Records a claim check that ended, on its sentence or on the sentence's atomic claim;
    /// whether to go on.
    fn on_checked(&mut self, index: usize, claim: Option<usize>, check: ClaimCheck) -> bool {
        self.next_id = self.next_id.max(check.next_free_id());
        self.spent.add(check.spent());
        let outcome = check.finish_as_sentence();
        if let Err(failed) = &outcome
            && matches!(
                failed.kind(),
                ClaimFailureKind::Cancelled
                    | ClaimFailureKind::Provider
                    | ClaimFailureKind::AssessRequest
            )
        {
            return self.end_with(failed.kind(), index, failed.message());
        }
        let Some(sentence) = self.sentences.iter_mut().find(|s| s.index == index) else {
            return false;
        };
        let ended = Ended::of(outcome);
        match claim.and_then(|n| sentence.claims.get_mut(n)) {
            Some(atomic) => {
                ended.onto_claim(atomic);
                if sentence.claims.iter().any(|c| c.status == SentenceStatus::Pending) {
                    return true;
                }
                settle_claims(sentence);
            }
            None => ended.onto_sentence(sentence),
        }
        settle_marks(sentence);
        self.events.push(Event::SentenceChecked { sentence: Box::new(sentence.clone()) });
        true
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

/// The most of the answer's text before a sentence that its decomposition is shown (what its
/// pronouns may name): the sentence or two before it, not the whole answer again for every
/// sentence.
const EARLIER_CHARS: usize = 600;

/// The answer's text before byte `start`: its last [`EARLIER_CHARS`] characters or fewer,
/// from a word's start.
fn earlier_text(answer: &str, start: usize) -> &str {
    let before = answer.get(..start).unwrap_or_default();
    let Some((cut, _)) = before.char_indices().rev().nth(EARLIER_CHARS - 1) else {
        return before;
    };
    let tail = &before[cut..];
    tail.find(char::is_whitespace).map_or(tail, |space| &tail[space..]).trim_start()
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
        claims: Vec::new(),
        decomposed: None,
    }
}

/// An atomic claim to check, its span its own where the sentence holds it verbatim, else the
/// sentence's.
fn pending_claim(sentence: &str, sentence_span: Span, text: String) -> ClaimReport {
    let span = quote_span(sentence, &text).map_or(sentence_span, |inner| Span {
        start: sentence_span.start + inner.start,
        end: sentence_span.start + inner.end,
        start_utf16: sentence_span.start_utf16 + inner.start_utf16,
        end_utf16: sentence_span.start_utf16 + inner.end_utf16,
    });
    ClaimReport {
        text,
        span,
        status: SentenceStatus::Pending,
        confidence: None,
        citations: Vec::new(),
        report: None,
        failure: None,
    }
}

/// What a claim check that ended gives its sentence or atomic claim.
struct Ended {
    status: SentenceStatus,
    confidence: Option<f64>,
    citations: Vec<Citation>,
    report: Option<Box<Report>>,
    failure: Option<SentenceFailure>,
}

impl Ended {
    fn of(outcome: Result<Report, ClaimFailed>) -> Self {
        let none = |status, failure| Self {
            status,
            confidence: None,
            citations: Vec::new(),
            report: None,
            failure,
        };
        match outcome {
            Ok(report) => Self {
                status: SentenceStatus::of(report.assessment.verdict),
                confidence: Some(report.assessment.confidence),
                citations: report.citations.clone(),
                report: Some(Box::new(report)),
                failure: None,
            },
            Err(failed)
                if matches!(
                    failed.kind(),
                    ClaimFailureKind::NoNewEvidence | ClaimFailureKind::ResearchTurnLimit
                ) =>
            {
                none(SentenceStatus::Insufficient, None)
            }
            Err(failed) => none(
                SentenceStatus::Failed,
                Some(SentenceFailure {
                    kind: failed.kind().as_str().to_owned(),
                    message: failed.message().to_owned(),
                }),
            ),
        }
    }

    fn onto_sentence(self, sentence: &mut SentenceReport) {
        sentence.status = self.status;
        sentence.confidence = self.confidence;
        sentence.citations = self.citations;
        sentence.report = self.report;
        sentence.failure = self.failure;
    }

    fn onto_claim(self, claim: &mut ClaimReport) {
        claim.status = self.status;
        claim.confidence = self.confidence;
        claim.citations = self.citations;
        claim.report = self.report;
        claim.failure = self.failure;
    }
}

/// A split sentence's status from its claims': the worst (contradicted, then insufficient,
/// then failed, then supported), with the confidence and citations of the claims that have it.
fn settle_claims(sentence: &mut SentenceReport) {
    let rank = |status: SentenceStatus| match status {
        SentenceStatus::Contradicted => 0,
        SentenceStatus::Insufficient => 1,
        SentenceStatus::Failed => 2,
        SentenceStatus::Supported => 3,
        SentenceStatus::NotCheckable | SentenceStatus::Pending => 4,
    };
    let worst = sentence
        .claims
        .iter()
        .map(|c| c.status)
        .min_by_key(|status| rank(*status))
        .unwrap_or(SentenceStatus::Insufficient);
    let deciding: Vec<&ClaimReport> =
        sentence.claims.iter().filter(|c| c.status == worst).collect();
    let confidences = deciding.iter().filter_map(|c| c.confidence);
    // A supported sentence is as sure as its least sure claim; a contradicted one as its
    // surest contradiction.
    sentence.confidence = match worst {
        SentenceStatus::Contradicted => confidences.reduce(f64::max),
        _ => confidences.reduce(f64::min),
    };
    let mut citations: Vec<Citation> = Vec::new();
    for citation in deciding.iter().flat_map(|c| &c.citations) {
        if !citations.contains(citation) {
            citations.push(citation.clone());
        }
    }
    sentence.failure = deciding.iter().find_map(|c| c.failure.clone());
    sentence.citations = citations;
    sentence.status = worst;
    sentence.report = None;
}

/// Whether each mark's passage holds the sentence: it does when the verdict is supported and
/// the passage is cited for it (a contradicted verdict's cited passage contradicts).
fn settle_marks(sentence: &mut SentenceReport) {
    let status = sentence.status;
    let citations = &sentence.citations;
    for (n, mark) in sentence.marks.iter_mut().enumerate() {
        let Some(passage) = &mark.passage else {
            mark.holds = MarkHolds::UnknownPassage;
            continue;
        };
        let cited = citations.iter().any(|c| c.passage.as_deref() == Some(passage.as_str()));
        mark.holds = match (status, cited) {
            _ if n >= MAX_MARKS => MarkHolds::Unchecked,
            (SentenceStatus::Supported, true) => MarkHolds::Supports,
            (SentenceStatus::Contradicted, true) => MarkHolds::Contradicts,
            (
                SentenceStatus::Supported
                | SentenceStatus::Contradicted
                | SentenceStatus::Insufficient,
                _,
            ) => MarkHolds::DoesNotSupport,
            _ => MarkHolds::Unchecked,
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
        match self.active.first_mut() {
            Some(current) => current.work.poll_output(),
            None => Output::Done,
        }
    }

    fn poll_outputs(&mut self) -> Vec<Output<'_>> {
        if self.failed.is_some() {
            return Vec::new();
        }
        self.active
            .iter_mut()
            .map(|current| current.work.poll_output())
            .filter(|output| !matches!(output, Output::Done))
            .collect()
    }

    fn handle_input(&mut self, input: Input) -> Result<(), Misuse> {
        if self.failed.is_some() || self.active.is_empty() {
            return Err(Misuse::new(MisuseKind::Finished, "input after the check ended"));
        }
        let id = match &input {
            Input::ModelResponse { call, .. } => Some(*call),
            Input::Seal { batch, .. } => Some(*batch),
            Input::Cancel { .. } => None,
        };
        match id {
            Some(id) => {
                let position =
                    (0..self.active.len()).find(|&i| self.active[i].work.pending_id() == Some(id));
                let Some(position) = position else {
                    return Err(Misuse::new(
                        MisuseKind::UnexpectedInput,
                        format!("{id} is not a pending output of the answer check"),
                    ));
                };
                self.active[position].work.handle_input(input)?;
            }
            // A cancel ends every work in flight.
            None => {
                for current in &mut self.active {
                    current.work.handle_input(input.clone())?;
                }
            }
        }
        self.settle();
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
        if !self.active.is_empty() {
            return Err(ClaimFailed::new(
                ClaimFailureKind::Cancelled,
                "cancelled: finished before the check ended",
                self.spent(),
            ));
        }
        Ok(self.report())
    }
}

fn one() -> u32 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decomposition_is_shown_the_text_just_before_its_sentence() {
        assert_eq!(earlier_text("It opened. It is tall.", 11), "It opened. ");
        let long = format!("{} The tower opened in 1889. ", "word ".repeat(1_000));
        let start = long.len();
        let earlier = earlier_text(&long, start);
        assert!(earlier.chars().count() <= EARLIER_CHARS, "{}", earlier.len());
        assert!(
            earlier.starts_with("word") && earlier.ends_with("opened in 1889. "),
            "{earlier:?}"
        );
        // Multi-byte characters are cut at their boundaries.
        let accents = "é".repeat(2_000);
        assert_eq!(earlier_text(&accents, accents.len()).chars().count(), EARLIER_CHARS);
    }
}
