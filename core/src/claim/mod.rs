//! The claim checker: retrieve → assess → check citations → (only if `insufficient`) research
//! → reassess → check citations → summary, as one machine composed of agent and step machines.
//!
//! The check retrieves its evidence itself from an [`IndexedCorpus`] the host shares (a plain
//! function, see [`crate::retrieve`]), and settles the research agent's `lookup_evidence` calls
//! itself from the same corpus, as a step settles `submit`: the host makes the model calls and
//! nothing else. A host that answers lookups itself (a remote search service, a scripted test)
//! chooses [`LookupMode::Host`] and receives them as ordinary tool batches.
//!
//! The corpus is referred to by its content hash in the check's serialized state, never copied
//! into it (see [`crate::corpus`]).
//!
//! Each part has a file: [`report`] (verdicts, assessments, the report), [`failure`] (why a check
//! failed), [`mod@cite`] (the citation check), [`lookup`] (the research agent's tool) and
//! [`prompt`] (the prompts, with untrusted text delimited) and [`verifier`] (the verifier route
//! of the assess position: Yes/No questions scored from token probabilities, chosen with
//! [`ClaimOptions::assess`]). This file holds the machine.

pub mod cite;
pub mod failure;
pub mod lookup;
pub mod prompt;
pub mod report;
pub mod verdict;
pub mod verifier;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use verity_derive::TaggedDeserialize;

use crate::agent::{Agent, End, Hooks, Spent};
use crate::event::{ClaimStage, Event};
use crate::indexed::{CorpusRef, IndexedCorpus};
use crate::machine::{Input, Machine, Misuse, MisuseKind, Output};
use crate::message::{Message, Probe, StopReason, ToolCall, ToolOutput, ToolSpec};
use crate::retrieve::Retriever;
use crate::retry::RetryPolicy;
use crate::step::{FailureKind, Step, step};

pub use cite::{cite, locate, new_evidence};
pub use failure::{ClaimFailed, ClaimFailureKind};
pub use lookup::{
    LOOKUP_EVIDENCE, LOOKUP_EXCERPT_CHARS, Lookup, LookupMode, lookup_evidence, lookup_schema,
    search,
};
pub use report::{Assessment, Citation, Report, Route, Summary, Verdict, assessment_schema};
pub use verifier::{
    AssessMode, Decision, Rule, ScoredPassage, VerifierOptions, VerifierRecord, VerifierWeights,
    decide_by,
};

/// The research agent's turn bound when the caller does not say.
pub const ESCALATION_TURNS: u32 = 6;
/// The assessment tool.
pub const RECORD_ASSESSMENT: &str = "record_assessment";

/// The output limit of a research turn when the provider's configuration sets none: a turn is
/// one `lookup_evidence` call (a query of at most 200 characters), with room for a few words
/// beside it. A model that writes on and on is stopped here, not at the provider's 4,096.
pub const RESEARCH_OUTPUT_LIMIT: u32 = 512;

/// The output limit of the summary when the provider's configuration sets none: one sentence
/// (at most 300 characters in constrained output) in a `submit` call.
pub const SUMMARY_OUTPUT_LIMIT: u32 = 512;

/// The output limit of an assessment of `evidence` when the provider's configuration sets
/// none: the verdict, confidence and a rationale (512 tokens), plus room to cite every item
/// verbatim (a citation is an item's text; a token per 3 characters), at most 4,096 (the
/// providers' default).
#[must_use]
pub fn assessment_output_limit(evidence: &[String]) -> u32 {
    let chars: usize = evidence.iter().map(|item| item.chars().count()).sum();
    let tokens = 512usize.saturating_add(chars / 3);
    u32::try_from(tokens).unwrap_or(u32::MAX).min(4096)
}

/// How a check runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ClaimOptions {
    /// How evidence is chosen, for the first assessment and for lookups.
    pub retriever: Retriever,
    /// The research agent's turn bound (at least 1).
    pub research_turns: u32,
    /// Who answers `lookup_evidence`.
    pub lookup: LookupMode,
    /// One retry budget for the whole check (assessments, research and summary).
    pub retry: RetryPolicy,
    /// Which route the assess position takes (default: [`AssessMode::Agent`]).
    pub assess: AssessMode,
    /// Whether the check ends with the summary step (default: it does). An answer's sentences
    /// do not: the answer's report says what holds sentence by sentence, and a model's summary
    /// of each would cost a request a sentence; theirs is written by the check
    /// ([`written_summary`]).
    pub summary: bool,
    /// Whether the claim is a sentence of an answer (or one of its claims): the verifier
    /// route then decides `supported` by the answer's threshold ([`Rule::AnswerSentence`]).
    pub within_answer: bool,
}

impl Default for ClaimOptions {
    fn default() -> Self {
        Self {
            retriever: Retriever::default(),
            research_turns: ESCALATION_TURNS,
            lookup: LookupMode::Core,
            retry: RetryPolicy::default(),
            assess: AssessMode::Agent,
            summary: true,
            within_answer: false,
        }
    }
}

/// Which assessment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Round {
    First,
    Second,
}

/// The assessment's core-side policy: keeps the first `record_assessment` call's arguments.
/// They are judged by the check once the one turn ends.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Recorder {
    arguments: Option<Value>,
}

impl Hooks for Recorder {
    fn settle(&mut self, call: &ToolCall) -> Option<ToolOutput> {
        if call.name != RECORD_ASSESSMENT {
            return None;
        }
        if self.arguments.is_none() {
            self.arguments = Some(call.arguments.clone());
        }
        Some(ToolOutput::ok("Assessment recorded.", Value::Null).terminating())
    }
}

#[derive(Debug, Clone, Serialize, TaggedDeserialize)]
#[serde(tag = "stage", rename_all = "camelCase")]
enum Stage {
    Assess {
        round: Round,
        agent: Box<Agent<Recorder>>,
    },
    /// The verifier route: `queue[0]` is being asked by `agent`, the rest follow.
    Verify {
        round: Round,
        queue: Vec<verifier::Question>,
        agent: Box<Agent<()>>,
    },
    Research {
        agent: Box<Agent<Lookup>>,
    },
    Summary {
        step: Box<Step<Summary>>,
        assessment: Assessment,
        route: Route,
    },
    Finished {
        outcome: Result<Box<Report>, ClaimFailed>,
    },
}

/// The claim-check machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimCheck {
    claim: String,
    corpus: CorpusRef,
    options: ClaimOptions,
    /// The evidence the current (or last) assessment was given.
    evidence: Vec<String>,
    /// What the inner machines that ended spent.
    spent: Spent,
    next_id: u64,
    stage: Stage,
    #[serde(default)]
    events: Vec<Event>,
    /// The verifier route's answered questions, both rounds (empty for the agent route).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    asked: Vec<verifier::AskedQuestion>,
    /// How many items the first assessment was given (research's come after them).
    #[serde(default)]
    first_evidence: usize,
    /// The verifier route's record of its last decision, for the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    verifier: Option<VerifierRecord>,
    /// A first `insufficient`, kept while research looks for more: what a sentence of an
    /// answer reports when nothing new turns up ([`Self::finish_as_sentence`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    first: Option<Assessment>,
}

impl ClaimCheck {
    /// A check of `claim` over `corpus`: evidence retrieved with `options.retriever`.
    #[must_use]
    pub fn new(
        claim: impl Into<String>,
        corpus: Arc<IndexedCorpus>,
        options: ClaimOptions,
    ) -> Self {
        let claim = claim.into();
        let evidence = search(&corpus, &options.retriever, &claim)
            .into_iter()
            .map(|index| corpus.corpus().passages()[index].text.clone())
            .collect();
        Self::with_evidence(claim, corpus, evidence, options)
    }

    /// A check of `claim` given evidence the host retrieved (texts, in the order to number
    /// them); research searches `corpus`.
    #[must_use]
    pub fn with_evidence(
        claim: impl Into<String>,
        corpus: Arc<IndexedCorpus>,
        evidence: Vec<String>,
        options: ClaimOptions,
    ) -> Self {
        Self::starting_at(claim, corpus, evidence, options, 0)
    }

    /// [`with_evidence`](Self::with_evidence) whose calls are numbered from `first`: a
    /// machine that runs several checks in turn (an answer's sentences) keeps their ids apart.
    pub(crate) fn starting_at(
        claim: impl Into<String>,
        corpus: Arc<IndexedCorpus>,
        evidence: Vec<String>,
        options: ClaimOptions,
        first: u64,
    ) -> Self {
        let mut check = Self {
            claim: claim.into(),
            corpus: CorpusRef::new(corpus),
            options: ClaimOptions { research_turns: options.research_turns.max(1), ..options },
            evidence: Vec::new(),
            spent: Spent::default(),
            next_id: first,
            stage: Stage::Finished { outcome: Err(placeholder()) },
            events: vec![Event::Stage { stage: ClaimStage::Retrieve { evidence: evidence.len() } }],
            asked: Vec::new(),
            first_evidence: 0,
            verifier: None,
            first: None,
        };
        check.start_assessment(Round::First, evidence);
        check
    }

    /// The claim.
    #[must_use]
    pub fn claim(&self) -> &str {
        &self.claim
    }

    /// The evidence the current (or last) assessment was given.
    #[must_use]
    pub fn evidence(&self) -> &[String] {
        &self.evidence
    }

    /// The corpus.
    #[must_use]
    pub fn corpus(&self) -> &Arc<IndexedCorpus> {
        self.corpus.get()
    }

    /// What the check has spent so far, over every inner machine.
    #[must_use]
    pub fn spent(&self) -> Spent {
        let mut spent = self.spent;
        match &self.stage {
            Stage::Assess { agent, .. } => spent.add(agent.spent()),
            Stage::Verify { agent, .. } => spent.add(agent.spent()),
            Stage::Research { agent } => spent.add(agent.spent()),
            Stage::Summary { step, .. } => spent.add(step.spent()),
            Stage::Finished { .. } => {}
        }
        spent
    }

    /// The first call id the check has not used.
    pub(crate) fn next_free_id(&self) -> u64 {
        match &self.stage {
            Stage::Assess { agent, .. } => agent.next_free_id(),
            Stage::Verify { agent, .. } => agent.next_free_id(),
            Stage::Research { agent } => agent.next_free_id(),
            Stage::Summary { step, .. } => step.next_free_id(),
            Stage::Finished { .. } => self.next_id,
        }
    }

    /// Failed requests retried so far.
    #[must_use]
    pub fn retries(&self) -> u32 {
        self.spent().retries
    }

    /// The retry policy for an inner machine: what is left of the check's budget.
    fn remaining_retry(&self) -> RetryPolicy {
        let retry = self.options.retry;
        RetryPolicy { max_retries: retry.max_retries.saturating_sub(self.spent.retries), ..retry }
    }

    fn fail(&mut self, kind: ClaimFailureKind, message: impl Into<String>) {
        self.stage = Stage::Finished { outcome: Err(ClaimFailed::new(kind, message, self.spent)) };
    }

    fn start_assessment(&mut self, round: Round, evidence: Vec<String>) {
        self.evidence = evidence;
        self.events.push(Event::Stage {
            stage: match round {
                Round::First => ClaimStage::Assess,
                Round::Second => ClaimStage::Reassess { evidence: self.evidence.len() },
            },
        });
        if let AssessMode::Verifier(options) = self.options.assess {
            return self.start_verification(round, &options);
        }
        let record = ToolSpec {
            name: RECORD_ASSESSMENT.to_owned(),
            description: "Record your assessment of the claim.".to_owned(),
            parameters: report::assessment_compiled().document().clone(),
            constrained: Some(report::constrained_assessment_schema(&self.evidence)),
        };
        let agent = Agent::new(
            format!("{}{}", prompt::ASSESS_SYSTEM, prompt::DATA_NOTICE),
            prompt::assessment_prompt(&self.claim, &self.evidence),
            vec![record],
            Vec::new(),
            1,
            Recorder::default(),
        )
        .with_output_limit(assessment_output_limit(&self.evidence))
        .with_retry(self.remaining_retry())
        .starting_at(self.next_id);
        self.stage = Stage::Assess { round, agent: Box::new(agent) };
    }

    fn on_assessment_end(&mut self, round: Round, agent: Agent<Recorder>) {
        self.next_id = agent.next_free_id();
        self.spent.add(agent.spent());
        let (recorder, messages, end, _) = agent.into_parts();
        let stop = messages
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::Assistant(response) => Some(response.stop_reason()),
                _ => None,
            })
            .unwrap_or(StopReason::Stop);
        match end {
            Some(End::Cancelled { reason }) => {
                return self.fail(ClaimFailureKind::Cancelled, format!("cancelled: {reason}"));
            }
            Some(End::ProviderFailed { message }) => {
                return self.fail(
                    ClaimFailureKind::AssessRequest,
                    format!("assessment request failed: {message}"),
                );
            }
            _ if stop == StopReason::Length => {
                return self.fail(
                    ClaimFailureKind::AssessRequest,
                    "assessment request failed: the response was cut off at the output-token limit",
                );
            }
            _ => {}
        }
        let Some(arguments) = recorder.arguments else {
            return self.fail(
                ClaimFailureKind::AssessProse,
                "assessment reply did not call record_assessment",
            );
        };
        let schema = report::assessment_compiled();
        if let Err(text) = schema.check_arguments(RECORD_ASSESSMENT, &arguments) {
            return self.fail(ClaimFailureKind::AssessSchema, text);
        }
        let assessment = match Assessment::deserialize(&arguments) {
            Ok(assessment) => assessment,
            Err(error) => return self.fail(ClaimFailureKind::AssessSchema, error.to_string()),
        };
        self.assessed(round, assessment, "assessment cites evidence that was not provided");
    }

    /// An assessment of either route: its citations checked (`refused` is the failure's
    /// message when one is not in the evidence), then research after a first `insufficient`,
    /// else the summary.
    fn assessed(&mut self, round: Round, mut assessment: Assessment, refused: &str) {
        if !cite(&mut assessment, &self.evidence) {
            return self.fail(ClaimFailureKind::CitationNotInEvidence, refused);
        }
        match (round, assessment.verdict) {
            (Round::First, Verdict::Insufficient) => {
                self.first = Some(assessment);
                if self.corpus_is_evidence() {
                    self.fail(
                        ClaimFailureKind::NoNewEvidence,
                        "no research: the corpus holds nothing beyond the evidence already \
                         assessed",
                    );
                } else {
                    self.start_research();
                }
            }
            (Round::First, _) => self.start_summary(assessment, Route::SingleCall),
            (Round::Second, _) => self.start_summary(assessment, Route::AgentEscalation),
        }
    }

    /// The verifier route: plans its questions about the evidence not asked about yet (all of
    /// it in the first round, what research added in the second) and asks the first.
    fn start_verification(&mut self, round: Round, options: &VerifierOptions) {
        // What research added comes first (it was looked for), then what the first round
        // left unasked, in the retriever's order.
        let unasked = |i: &usize| {
            !self.asked.iter().any(|asked| !asked.question.prior && asked.question.evidence == *i)
        };
        let found = self.first_evidence.min(self.evidence.len());
        let items: Vec<usize> = match round {
            Round::First => (0..self.evidence.len()).collect(),
            Round::Second => (found..self.evidence.len()).chain(0..found).filter(unasked).collect(),
        };
        // The prior is asked once per check (in the first round).
        let queue =
            verifier::plan(&self.claim, &self.evidence, &items, options, round == Round::First);
        self.ask_next(round, queue);
    }

    fn ask_next(&mut self, round: Round, queue: Vec<verifier::Question>) {
        let Some(question) = queue.first() else { return self.on_verification_end(round) };
        // A restored state is untrusted: its options or its questions may not fit.
        let options = match self.options.assess {
            AssessMode::Verifier(options) => options,
            AssessMode::Agent => VerifierOptions::default(),
        };
        let passage = if question.prior {
            Some("")
        } else {
            self.evidence
                .get(question.evidence)
                .and_then(|text| text.get(question.start..question.end))
        };
        let Some(passage) = passage else {
            return self.fail(
                ClaimFailureKind::AssessRequest,
                "a verifier question is not a part of the evidence (a damaged saved state)",
            );
        };
        let agent = Agent::new(
            // No notice about markers: the question has none (see `verifier_prompt`).
            prompt::VERIFY_SYSTEM.to_owned(),
            prompt::verifier_prompt(&self.claim, passage),
            Vec::new(),
            Vec::new(),
            1,
            (),
        )
        .with_probe(Probe { top_logprobs: options.top_logprobs })
        .with_output_limit(1)
        .with_retry(self.remaining_retry())
        .starting_at(self.next_id);
        self.stage = Stage::Verify { round, queue, agent: Box::new(agent) };
    }

    fn on_question_end(
        &mut self,
        round: Round,
        mut queue: Vec<verifier::Question>,
        agent: Agent<()>,
    ) {
        self.next_id = agent.next_free_id();
        self.spent.add(agent.spent());
        let (_, messages, end, _) = agent.into_parts();
        match end {
            Some(End::Cancelled { reason }) => {
                return self.fail(ClaimFailureKind::Cancelled, format!("cancelled: {reason}"));
            }
            Some(End::ProviderFailed { message }) => {
                return self.fail(
                    ClaimFailureKind::AssessRequest,
                    format!("verifier request failed: {message}"),
                );
            }
            _ => {}
        }
        let reading = messages
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::Assistant(response) => Some(verifier::read_answer(response)),
                _ => None,
            })
            .unwrap_or(verifier::Reading {
                score: None,
                source: verifier::ScoreSource::Unknown,
                issue: Some(verifier::ProbabilityIssue::Missing),
            });
        let question = queue.remove(0);
        self.asked.push(verifier::AskedQuestion { question, reading });
        self.ask_next(round, queue);
    }

    /// Every question of the round is answered: the decision over every passage asked about
    /// (a passage's score is its best chunk's), checked like an assessment the model recorded.
    fn on_verification_end(&mut self, round: Round) {
        let weights = match self.options.assess {
            AssessMode::Verifier(options) => options.weights.weights(),
            AssessMode::Agent => VerifierWeights::builtin(),
        };
        let prior = verifier::prior_score(&self.asked);
        let (indices, passages): (Vec<usize>, Vec<ScoredPassage<'_>>) =
            verifier::best_chunks(&self.evidence, &self.asked).into_iter().unzip();
        // A sentence judged on chunks of a longer passage (a document) has its own threshold.
        let rule = match (self.options.within_answer, verifier::judged_on_chunks(&self.asked)) {
            (false, _) => Rule::Claim,
            (true, false) => Rule::AnswerSentence,
            (true, true) => Rule::AnswerSentenceInChunk,
        };
        let decision = decide_by(&self.claim, &passages, prior, weights, rule);
        let fallback =
            self.asked.iter().any(|a| a.reading.source != verifier::ScoreSource::Probabilities);
        let best = decision.best.and_then(|i| passages[i].score);
        // The feature's comparison, said in words: which numbers decided it.
        let compared = decision.comparison.as_ref().map_or_else(String::new, |c| {
            format!(
                "; the claim's \"{} {}\" {} against the passage's {}",
                c.bound,
                c.claimed,
                if c.holds { "holds" } else { "fails" },
                c.found
            )
        });
        let rationale = format!(
            "Verifier route: P(supported) {:.2}, P(contradicted) {:.2}, P(insufficient) {:.2}{}; \
             best passage S {}{}{}{}.",
            decision.probabilities.supported,
            decision.probabilities.contradicted,
            decision.probabilities.insufficient,
            decision.holds.map_or_else(String::new, |p| format!(", as a sentence P(holds) {p:.2}")),
            best.map_or_else(|| "unknown".to_owned(), |s| format!("{s:.2}")),
            prior.map_or_else(String::new, |s0| format!(", without a document {s0:.2}")),
            compared,
            if fallback {
                " (some answers were read from the sampled token: no usable probabilities)"
            } else {
                ""
            },
        );
        let assessment = Assessment {
            verdict: decision.verdict,
            confidence: decision.confidence,
            citations: decision.cited.iter().map(|&i| self.evidence[indices[i]].clone()).collect(),
            rationale: Some(rationale),
            extra: serde_json::Map::new(),
        };
        self.verifier = Some(VerifierRecord {
            questions: self.asked.clone(),
            features: decision.features,
            probabilities: decision.probabilities,
            holds: decision.holds,
            fallback,
            fitted: weights.fitted,
        });
        self.assessed(round, assessment, "the verifier cited evidence that was not provided");
    }

    /// Whether every passage of the corpus is in the evidence already: research could find
    /// nothing new (a lookup's hits are the corpus's passages, and only new ones count).
    fn corpus_is_evidence(&self) -> bool {
        let passages = self.corpus.corpus().passages();
        passages.len() <= self.evidence.len()
            && passages.iter().all(|passage| self.evidence.contains(&passage.text))
    }

    fn start_research(&mut self) {
        let hooks = Lookup::new(self.corpus.clone(), self.options.retriever, self.options.lookup);
        let agent = Agent::new(
            format!("{}{}", prompt::RESEARCH_SYSTEM, prompt::DATA_NOTICE),
            prompt::research_prompt(&self.claim),
            Vec::new(),
            vec![lookup::lookup_tool()],
            self.options.research_turns,
            hooks,
        )
        .with_output_limit(RESEARCH_OUTPUT_LIMIT)
        .with_retry(self.remaining_retry())
        .starting_at(self.next_id);
        self.stage = Stage::Research { agent: Box::new(agent) };
    }

    fn on_research_end(&mut self, agent: Agent<Lookup>) {
        self.next_id = agent.next_free_id();
        self.spent.add(agent.spent());
        let (_, messages, end, _) = agent.into_parts();
        let new = new_evidence(&messages, self.corpus.corpus(), &self.evidence);
        if let Some(End::Cancelled { reason }) = end {
            return self.fail(ClaimFailureKind::Cancelled, format!("cancelled: {reason}"));
        }
        if new.is_empty() {
            return match end {
                Some(End::ProviderFailed { message }) => self.fail(
                    ClaimFailureKind::Provider,
                    format!("research request failed: {message}"),
                ),
                Some(End::TurnLimit) => self.fail(
                    ClaimFailureKind::ResearchTurnLimit,
                    "escalation reached its turn limit without new evidence",
                ),
                _ => self.fail(
                    ClaimFailureKind::NoNewEvidence,
                    "escalation found no additional evidence",
                ),
            };
        }
        let mut evidence = std::mem::take(&mut self.evidence);
        self.first_evidence = evidence.len();
        evidence.extend(new);
        self.start_assessment(Round::Second, evidence);
    }

    fn start_summary(&mut self, assessment: Assessment, route: Route) {
        if !self.options.summary {
            return self.finish_with(assessment, route, None);
        }
        self.events.push(Event::Stage { stage: ClaimStage::Summary });
        let input = serde_json::to_string(&assessment).expect("an assessment serializes");
        let system = format!("{}{}", prompt::SUMMARY_SYSTEM, prompt::DATA_NOTICE);
        let summary = step::<Summary>(system, prompt::summary_prompt(&input))
            .constrained(report::constrained_summary_schema())
            .output_limit(SUMMARY_OUTPUT_LIMIT)
            .retry(self.remaining_retry())
            .build()
            .expect("the summary step's configuration is valid")
            .starting_at(self.next_id);
        self.stage = Stage::Summary { step: Box::new(summary), assessment, route };
    }

    /// Ends the check as a sentence of an answer: a first `insufficient` that nothing changed
    /// (no research, or research found nothing new) is the sentence's report, with what was
    /// spent, where a claim job fails `no-new-evidence` or `research-turn-limit` (POLICY.md).
    pub(crate) fn finish_as_sentence(mut self) -> Result<Report, ClaimFailed> {
        let unsettled = match &self.stage {
            Stage::Finished { outcome: Err(failed) } => matches!(
                failed.kind(),
                ClaimFailureKind::NoNewEvidence | ClaimFailureKind::ResearchTurnLimit
            ),
            _ => false,
        };
        if unsettled && let Some(assessment) = self.first.take() {
            self.finish_with(assessment, Route::SingleCall, None);
        }
        self.finish()
    }

    /// Ends the check with its report: the citations located, and `summary` (the model's), or
    /// the one the check writes ([`written_summary`]) when none was asked for.
    fn finish_with(&mut self, assessment: Assessment, route: Route, summary: Option<String>) {
        let citations = locate(&self.claim, &assessment.citations, self.corpus.corpus());
        let summary = summary.unwrap_or_else(|| written_summary(assessment.verdict, &citations));
        self.stage = Stage::Finished {
            outcome: Ok(Box::new(Report {
                citations,
                claim: self.claim.clone(),
                assessment,
                route,
                summary,
                requests: self.spent.requests,
                usage: self.spent.usage,
                verifier: self.verifier.clone(),
            })),
        };
    }

    fn on_summary_end(&mut self, summary: Step<Summary>, assessment: Assessment, route: Route) {
        self.next_id = summary.next_free_id();
        self.spent.add(summary.spent());
        match summary.finish() {
            Ok(summary) => self.finish_with(assessment, route, Some(summary.text)),
            Err(failed) => {
                let kind = match failed.kind() {
                    FailureKind::Cancelled => ClaimFailureKind::Cancelled,
                    kind => ClaimFailureKind::Summary(kind),
                };
                self.fail(kind, failed.message().to_owned());
            }
        }
    }

    /// Moves the current inner machine's events out, announcing research turns.
    fn pull_events(&mut self) {
        let (events, research_turn) = match &mut self.stage {
            Stage::Assess { agent, .. } => (agent.drain_events(), None),
            Stage::Verify { agent, .. } => (agent.drain_events(), None),
            Stage::Research { agent } => {
                let turn = agent.spent().turns + 1;
                (agent.drain_events(), Some(turn))
            }
            Stage::Summary { step, .. } => (step.drain_events(), None),
            Stage::Finished { .. } => return,
        };
        for event in events {
            if let (Some(turn), Event::ModelCall { retry: 0, .. }) = (research_turn, &event) {
                let of = self.options.research_turns;
                self.events.push(Event::Stage { stage: ClaimStage::Research { turn, of } });
            }
            self.events.push(event);
        }
    }

    /// Moves on when the current inner machine has ended.
    fn advance(&mut self) {
        let stage =
            std::mem::replace(&mut self.stage, Stage::Finished { outcome: Err(placeholder()) });
        match stage {
            Stage::Assess { round, agent } if agent.end().is_some() => {
                self.on_assessment_end(round, *agent);
            }
            Stage::Verify { round, queue, agent } if agent.end().is_some() => {
                self.on_question_end(round, queue, *agent);
            }
            Stage::Research { agent } if agent.end().is_some() => self.on_research_end(*agent),
            Stage::Summary { step, assessment, route } if step.is_done() => {
                self.on_summary_end(*step, assessment, route);
            }
            stage => self.stage = stage,
        }
    }
}

/// The summary of a check that asks the model for none ([`ClaimOptions::summary`]): the
/// verdict in words and the passages cited, written by the check.
#[must_use]
pub fn written_summary(verdict: Verdict, citations: &[Citation]) -> String {
    let ids: Vec<&str> = citations.iter().filter_map(|c| c.passage.as_deref()).collect();
    let cited = match ids.as_slice() {
        [] => String::new(),
        [one] => format!(" (passage {one})"),
        many => format!(" (passages {})", many.join(", ")),
    };
    match verdict {
        Verdict::Supported => format!("The evidence supports it{cited}."),
        Verdict::Contradicted => format!("The evidence contradicts it{cited}."),
        Verdict::Insufficient => "The evidence neither supports nor contradicts it.".to_owned(),
    }
}

fn placeholder() -> ClaimFailed {
    ClaimFailed::new(ClaimFailureKind::Cancelled, String::new(), Spent::default())
}

impl Machine for ClaimCheck {
    type Value = Report;
    type Error = ClaimFailed;

    fn poll_output(&mut self) -> Output<'_> {
        match &mut self.stage {
            Stage::Assess { agent, .. } => agent.poll_output(),
            Stage::Verify { agent, .. } => agent.poll_output(),
            Stage::Research { agent } => agent.poll_output(),
            Stage::Summary { step, .. } => step.poll_output(),
            Stage::Finished { .. } => Output::Done,
        }
    }

    fn handle_input(&mut self, input: Input) -> Result<(), Misuse> {
        match &mut self.stage {
            Stage::Finished { .. } => {
                return Err(Misuse::new(MisuseKind::Finished, "input after the check ended"));
            }
            Stage::Assess { agent, .. } => agent.handle_input(input)?,
            Stage::Verify { agent, .. } => agent.handle_input(input)?,
            Stage::Research { agent } => agent.handle_input(input)?,
            Stage::Summary { step, .. } => step.handle_input(input)?,
        }
        self.pull_events();
        self.advance();
        Ok(())
    }

    fn drain_events(&mut self) -> Vec<Event> {
        self.pull_events();
        std::mem::take(&mut self.events)
    }

    fn finish(self) -> Result<Report, ClaimFailed> {
        let spent = self.spent();
        match self.stage {
            Stage::Finished { outcome } => outcome.map(|report| *report),
            _ => Err(ClaimFailed::new(
                ClaimFailureKind::Cancelled,
                "cancelled: finished before the check ended",
                spent,
            )),
        }
    }
}
