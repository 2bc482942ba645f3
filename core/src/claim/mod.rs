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

pub mod prompt;

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::agent::{Agent, End, Hooks, Spent, Tool};
use crate::corpus::{Corpus, CorpusRef, IndexedCorpus};
use crate::event::{ClaimStage, Event};
use crate::machine::{Input, Machine, Misuse, MisuseKind, Output};
use crate::message::{Message, StopReason, ToolCall, ToolOutput, ToolSpec, Usage};
use crate::retrieve::{Retriever, retrieve};
use crate::retry::RetryPolicy;
use crate::schema::Schema;
use crate::step::{FailureKind, Step, step};
use prompt::Shown;

/// The research agent's turn bound when the caller does not say.
pub const ESCALATION_TURNS: u32 = 6;
/// The assessment tool.
pub const RECORD_ASSESSMENT: &str = "record_assessment";
/// The research agent's tool.
pub const LOOKUP_EVIDENCE: &str = "lookup_evidence";

/// A verdict on a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The evidence supports the claim.
    Supported,
    /// The evidence contradicts the claim.
    Contradicted,
    /// The evidence does not decide.
    Insufficient,
}

impl Verdict {
    /// Whether the verdict decides the claim.
    #[must_use]
    pub fn is_conclusive(self) -> bool {
        self != Verdict::Insufficient
    }
}

/// An assessment: exactly the arguments of the `record_assessment` call that validated,
/// undeclared properties kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    /// The verdict.
    pub verdict: Verdict,
    /// How sure, from 0 to 1.
    pub confidence: f64,
    /// Evidence items quoted whole.
    pub citations: Vec<String>,
    /// Why, if the model said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// Anything else the model put in its arguments.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The schema of `record_assessment`'s arguments.
#[must_use]
pub fn assessment_schema() -> Value {
    let verdicts: Vec<Value> = ["supported", "contradicted", "insufficient"]
        .iter()
        .map(|v| json!({"type": "string", "const": v}))
        .collect();
    json!({
        "type": "object",
        "required": ["verdict", "confidence", "citations"],
        "properties": {
            "verdict": {"anyOf": verdicts},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "citations": {"type": "array", "items": {"type": "string"}},
            "rationale": {"type": "string"}
        }
    })
}

/// The schema of `lookup_evidence`'s arguments.
#[must_use]
pub fn lookup_schema() -> Value {
    json!({
        "type": "object",
        "required": ["query"],
        "properties": {"query": {"type": "string", "minLength": 1}}
    })
}

/// Which way a check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Route {
    /// One assessment was enough.
    #[serde(rename = "single call")]
    SingleCall,
    /// The first assessment was `insufficient`; research found more evidence and a second
    /// assessment decided.
    #[serde(rename = "agent escalation")]
    AgentEscalation,
}

impl Route {
    /// `"single call"` or `"agent escalation"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Route::SingleCall => "single call",
            Route::AgentEscalation => "agent escalation",
        }
    }
}

/// The one-sentence summary the summary step submits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// One sentence for a reader who has not seen the evidence.
    pub text: String,
}

/// What a check produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The claim checked.
    pub claim: String,
    /// The final assessment (its citations checked against the evidence it was given).
    pub assessment: Assessment,
    /// Which way the check went.
    pub route: Route,
    /// The summary sentence.
    pub summary: String,
    /// Requests that reached the model.
    pub requests: u32,
    /// Tokens and cost over every request.
    pub usage: Usage,
}

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimFailed {
    kind: ClaimFailureKind,
    message: String,
    spent: Spent,
}

impl ClaimFailed {
    /// Why.
    #[must_use]
    pub fn kind(&self) -> ClaimFailureKind {
        self.kind
    }

    /// What happened, in words.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Requests that reached the model before the failure.
    #[must_use]
    pub fn requests(&self) -> u32 {
        self.spent.requests
    }

    /// Tokens and cost before the failure.
    #[must_use]
    pub fn usage(&self) -> Usage {
        self.spent.usage
    }

    /// Everything spent before the failure: turns (of every inner loop), requests, failed
    /// summary submissions, retries, usage and cost.
    #[must_use]
    pub fn spent(&self) -> Spent {
        self.spent
    }
}

impl fmt::Display for ClaimFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "claim check failed ({}): {}", self.kind, self.message)
    }
}

impl std::error::Error for ClaimFailed {}

/// Who answers the research agent's `lookup_evidence` calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum LookupMode {
    /// The check itself, from its corpus with its retriever (the default): the host runs no
    /// tool at all.
    #[default]
    Core,
    /// The host, as an ordinary tool batch (the call is replay-safe).
    Host,
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
}

impl Default for ClaimOptions {
    fn default() -> Self {
        Self {
            retriever: Retriever::default(),
            research_turns: ESCALATION_TURNS,
            lookup: LookupMode::Core,
            retry: RetryPolicy::default(),
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

/// The research agent's core-side policy: answers `lookup_evidence` from the corpus
/// ([`LookupMode::Core`]), or leaves it to the host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Lookup {
    corpus: CorpusRef,
    retriever: Retriever,
    mode: LookupMode,
    schema: Schema,
}

impl Hooks for Lookup {
    fn settle(&mut self, call: &ToolCall) -> Option<ToolOutput> {
        if call.name != LOOKUP_EVIDENCE || self.mode == LookupMode::Host {
            return None;
        }
        if let Err(text) = self.schema.check_arguments(LOOKUP_EVIDENCE, &call.arguments) {
            return Some(ToolOutput::error(text));
        }
        let query = call.arguments.get("query").and_then(Value::as_str).unwrap_or_default();
        Some(lookup_evidence(self.corpus.corpus(), &search(&self.corpus, &self.retriever, query)))
    }
}

/// The passages `retriever` chooses for `query` in `corpus`, using (and building once) the
/// corpus's shared BM25 index when the retriever ranks.
#[must_use]
pub fn search(corpus: &IndexedCorpus, retriever: &Retriever, query: &str) -> Vec<usize> {
    let index = matches!(retriever, Retriever::Bm25 { .. }).then(|| corpus.bm25());
    retrieve(corpus.corpus(), index, retriever, query)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "camelCase")]
enum Stage {
    Assess { round: Round, agent: Box<Agent<Recorder>> },
    Research { agent: Box<Agent<Lookup>> },
    Summary { step: Box<Step<Summary>>, assessment: Assessment, route: Route },
    Finished { outcome: Result<Report, ClaimFailed> },
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
        let mut check = Self {
            claim: claim.into(),
            corpus: CorpusRef::new(corpus),
            options: ClaimOptions { research_turns: options.research_turns.max(1), ..options },
            evidence: Vec::new(),
            spent: Spent::default(),
            next_id: 0,
            stage: Stage::Finished { outcome: Err(placeholder()) },
            events: vec![Event::Stage { stage: ClaimStage::Retrieve { evidence: evidence.len() } }],
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
            Stage::Assess { agent, .. } => add_spent(&mut spent, agent.spent()),
            Stage::Research { agent } => add_spent(&mut spent, agent.spent()),
            Stage::Summary { step, .. } => add_spent(&mut spent, step.spent()),
            Stage::Finished { .. } => {}
        }
        spent
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
        self.stage = Stage::Finished {
            outcome: Err(ClaimFailed { kind, message: message.into(), spent: self.spent }),
        };
    }

    fn start_assessment(&mut self, round: Round, evidence: Vec<String>) {
        self.evidence = evidence;
        self.events.push(Event::Stage {
            stage: match round {
                Round::First => ClaimStage::Assess,
                Round::Second => ClaimStage::Reassess { evidence: self.evidence.len() },
            },
        });
        let record = ToolSpec {
            name: RECORD_ASSESSMENT.to_owned(),
            description: "Record your assessment of the claim.".to_owned(),
            parameters: assessment_schema(),
        };
        let agent = Agent::new(
            format!("{}{}", prompt::ASSESS_SYSTEM, prompt::DATA_NOTICE),
            prompt::assessment_prompt(&self.claim, &self.evidence),
            vec![record],
            Vec::new(),
            1,
            Recorder::default(),
        )
        .with_retry(self.remaining_retry())
        .starting_at(self.next_id);
        self.stage = Stage::Assess { round, agent: Box::new(agent) };
    }

    fn on_assessment_end(&mut self, round: Round, agent: Agent<Recorder>) {
        self.next_id = agent.next_free_id();
        add_spent(&mut self.spent, agent.spent());
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
        let schema = Schema::compile(assessment_schema()).expect("the assessment schema is valid");
        if let Err(text) = schema.check_arguments(RECORD_ASSESSMENT, &arguments) {
            return self.fail(ClaimFailureKind::AssessSchema, text);
        }
        let mut assessment = match Assessment::deserialize(&arguments) {
            Ok(assessment) => assessment,
            Err(error) => return self.fail(ClaimFailureKind::AssessSchema, error.to_string()),
        };
        if !cite(&mut assessment, &self.evidence) {
            return self.fail(
                ClaimFailureKind::CitationNotInEvidence,
                "assessment cites evidence that was not provided",
            );
        }
        match (round, assessment.verdict) {
            (Round::First, Verdict::Insufficient) => self.start_research(),
            (Round::First, _) => self.start_summary(assessment, Route::SingleCall),
            (Round::Second, _) => self.start_summary(assessment, Route::AgentEscalation),
        }
    }

    fn start_research(&mut self) {
        let lookup = Tool::new(
            LOOKUP_EVIDENCE,
            "Search the evidence corpus. Returns matching passages with their ids.",
            lookup_schema(),
        )
        .expect("the lookup schema is valid")
        // It only reads the corpus: a durable host may run it again after a crash.
        .replay_safe();
        let hooks = Lookup {
            corpus: self.corpus.clone(),
            retriever: self.options.retriever,
            mode: self.options.lookup,
            schema: Schema::compile(lookup_schema()).expect("the lookup schema is valid"),
        };
        let agent = Agent::new(
            format!("{}{}", prompt::RESEARCH_SYSTEM, prompt::DATA_NOTICE),
            prompt::research_prompt(&self.claim),
            Vec::new(),
            vec![lookup],
            self.options.research_turns,
            hooks,
        )
        .with_retry(self.remaining_retry())
        .starting_at(self.next_id);
        self.stage = Stage::Research { agent: Box::new(agent) };
    }

    fn on_research_end(&mut self, agent: Agent<Lookup>) {
        self.next_id = agent.next_free_id();
        add_spent(&mut self.spent, agent.spent());
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
        evidence.extend(new);
        self.start_assessment(Round::Second, evidence);
    }

    fn start_summary(&mut self, assessment: Assessment, route: Route) {
        self.events.push(Event::Stage { stage: ClaimStage::Summary });
        let input = serde_json::to_string(&assessment).expect("an assessment serializes");
        let system = format!("{}{}", prompt::SUMMARY_SYSTEM, prompt::DATA_NOTICE);
        let summary = step::<Summary>(system, prompt::summary_prompt(&input))
            .retry(self.remaining_retry())
            .build()
            .expect("the summary step's configuration is valid")
            .starting_at(self.next_id);
        self.stage = Stage::Summary { step: Box::new(summary), assessment, route };
    }

    fn on_summary_end(&mut self, summary: Step<Summary>, assessment: Assessment, route: Route) {
        self.next_id = summary.next_free_id();
        add_spent(&mut self.spent, summary.spent());
        match summary.finish() {
            Ok(summary) => {
                self.stage = Stage::Finished {
                    outcome: Ok(Report {
                        claim: self.claim.clone(),
                        assessment,
                        route,
                        summary: summary.text,
                        requests: self.spent.requests,
                        usage: self.spent.usage,
                    }),
                };
            }
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
            Stage::Research { agent } if agent.end().is_some() => self.on_research_end(*agent),
            Stage::Summary { step, assessment, route } if step.is_done() => {
                self.on_summary_end(*step, assessment, route);
            }
            stage => self.stage = stage,
        }
    }
}

fn add_spent(total: &mut Spent, spent: Spent) {
    total.turns = total.turns.saturating_add(spent.turns);
    total.requests = total.requests.saturating_add(spent.requests);
    total.failed_attempts = total.failed_attempts.saturating_add(spent.failed_attempts);
    total.retries = total.retries.saturating_add(spent.retries);
    total.usage.add(&spent.usage);
}

fn placeholder() -> ClaimFailed {
    ClaimFailed {
        kind: ClaimFailureKind::Cancelled,
        message: String::new(),
        spent: Spent::default(),
    }
}

/// The citation check: a conclusive verdict cites at least one item, and every citation is an
/// entire item of `evidence` (quoted raw or as shown to the model, see [`Shown`]). Citations
/// quoted as shown are replaced by the raw item. Returns whether the check passed.
#[must_use]
pub fn cite(assessment: &mut Assessment, evidence: &[String]) -> bool {
    if assessment.verdict.is_conclusive() && assessment.citations.is_empty() {
        return false;
    }
    for citation in &mut assessment.citations {
        if evidence.iter().any(|item| item == citation) {
            continue;
        }
        match evidence.iter().find(|item| Shown::of(item).0 == *citation) {
            Some(item) => citation.clone_from(item),
            None => return false,
        }
    }
    true
}

/// The new evidence a research transcript found: ids from `details.hits` (strings only) of
/// successful `lookup_evidence` results, in order, deduplicated, kept only if the corpus has
/// them, mapped to their texts, minus texts already in `known`.
#[must_use]
pub fn new_evidence(messages: &[Message], corpus: &Corpus, known: &[String]) -> Vec<String> {
    let mut new: Vec<String> = Vec::new();
    for message in messages {
        let Message::ToolResult(result) = message else { continue };
        if result.tool_name != LOOKUP_EVIDENCE || result.output.is_error {
            continue;
        }
        let Some(hits) = result.output.details.get("hits").and_then(Value::as_array) else {
            continue;
        };
        for id in hits.iter().filter_map(Value::as_str) {
            let Some(passage) = corpus.get(id) else { continue };
            if !known.contains(&passage.text) && !new.contains(&passage.text) {
                new.push(passage.text.clone());
            }
        }
    }
    new
}

/// Answers a `lookup_evidence` call with the passages at `hits` (indices into `corpus`):
/// delimited text for the model, `details.hits` with their ids for the machine.
#[must_use]
pub fn lookup_evidence(corpus: &Corpus, hits: &[usize]) -> ToolOutput {
    let passages: Vec<(&str, &str)> = hits
        .iter()
        .filter_map(|&index| corpus.passages().get(index))
        .map(|passage| (passage.id.as_str(), passage.text.as_str()))
        .collect();
    let ids: Vec<&str> = passages.iter().map(|(id, _)| *id).collect();
    ToolOutput::ok(prompt::lookup_text(&passages), json!({ "hits": ids }))
}

impl Machine for ClaimCheck {
    type Value = Report;
    type Error = ClaimFailed;

    fn poll_output(&mut self) -> Output<'_> {
        match &mut self.stage {
            Stage::Assess { agent, .. } => agent.poll_output(),
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
            Stage::Finished { outcome } => outcome,
            _ => Err(ClaimFailed {
                kind: ClaimFailureKind::Cancelled,
                message: "cancelled: finished before the check ended".to_owned(),
                spent,
            }),
        }
    }
}
