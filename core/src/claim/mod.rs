//! The claim checker: retrieve → assess → check citations → (only if `insufficient`) research
//! → reassess → check citations → summary, as one machine composed of the agent and step
//! machines.
//!
//! The host gives the claim, the corpus and the retrieved evidence (retrieval is a plain
//! function, see [`crate::retrieve`]), makes the model calls, and runs `lookup_evidence` for
//! the research agent ([`lookup_evidence`] answers it from the corpus).

pub mod prompt;

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::agent::{Agent, End, Tool};
use crate::machine::{CallId, Input, Machine, Misuse, MisuseKind, ModelCall, Output};
use crate::message::{
    AssistantMessage, Message, ModelRequest, StopReason, ToolOutput, ToolSpec, Usage,
};
use crate::retrieve::{Corpus, keyword_search};
use crate::retry::{RetryPolicy, retry_delay};
use crate::schema::Schema;
use crate::step::{FailureKind, Step, step};
use prompt::Shown;

/// The research agent's turn bound.
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

/// A check that ended without a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimFailed {
    kind: ClaimFailureKind,
    message: String,
    requests: u32,
    usage: Usage,
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
        self.requests
    }

    /// Tokens and cost before the failure.
    #[must_use]
    pub fn usage(&self) -> Usage {
        self.usage
    }
}

impl fmt::Display for ClaimFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "claim check failed ({}): {}", self.kind, self.message)
    }
}

impl std::error::Error for ClaimFailed {}

/// Which assessment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Round {
    First,
    Second,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "camelCase")]
enum Stage {
    Assess {
        round: Round,
        call: CallId,
        messages: Vec<Message>,
        #[serde(default)]
        delay_ms: u64,
        #[serde(default)]
        retry: u32,
    },
    Research {
        agent: Box<Agent<()>>,
    },
    Summary {
        step: Box<Step<Summary>>,
        assessment: Assessment,
        route: Route,
    },
    Finished {
        outcome: Result<Report, ClaimFailed>,
    },
}

/// The claim-check machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimCheck {
    claim: String,
    corpus: Arc<Corpus>,
    /// The evidence the current (or last) assessment was given.
    evidence: Vec<String>,
    assess_system: String,
    assess_tools: Vec<ToolSpec>,
    assess_schema: Schema,
    requests: u32,
    usage: Usage,
    #[serde(default)]
    retry: RetryPolicy,
    #[serde(default)]
    retries: u32,
    next_id: u64,
    stage: Stage,
}

impl ClaimCheck {
    /// A check of `claim` given retrieved `evidence` (texts, in the order to number them) and
    /// the `corpus` the research agent searches.
    #[must_use]
    pub fn new(claim: impl Into<String>, corpus: Arc<Corpus>, evidence: Vec<String>) -> Self {
        let claim = claim.into();
        let messages = vec![Message::User { text: prompt::assessment_prompt(&claim, &evidence) }];
        let assess_schema =
            Schema::compile(assessment_schema()).expect("the assessment schema is valid");
        Self {
            claim,
            corpus,
            evidence,
            assess_system: format!("{}{}", prompt::ASSESS_SYSTEM, prompt::DATA_NOTICE),
            assess_tools: vec![ToolSpec {
                name: RECORD_ASSESSMENT.to_owned(),
                description: "Record your assessment of the claim.".to_owned(),
                parameters: assessment_schema(),
            }],
            assess_schema,
            requests: 0,
            usage: Usage::default(),
            next_id: 1,
            retry: RetryPolicy::default(),
            retries: 0,
            stage: Stage::Assess {
                round: Round::First,
                call: CallId(0),
                messages,
                delay_ms: 0,
                retry: 0,
            },
        }
    }

    /// A check whose evidence is the design's keyword retrieval over `corpus` (the conformance
    /// suite's contract; hosts should prefer BM25 on large corpora).
    #[must_use]
    pub fn with_keyword_retrieval(claim: impl Into<String>, corpus: Arc<Corpus>) -> Self {
        let claim = claim.into();
        let evidence = keyword_search(&corpus, &claim)
            .into_iter()
            .map(|index| corpus.passages()[index].text.clone())
            .collect();
        Self::new(claim, corpus, evidence)
    }

    /// Retries failed requests the provider marked retryable, with one budget for the whole
    /// check (assessments, research and summary).
    #[must_use]
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The retry policy for an inner machine: what is left of the check's budget.
    fn remaining_retry(&self) -> RetryPolicy {
        RetryPolicy {
            max_retries: self.retry.max_retries.saturating_sub(self.retries),
            ..self.retry
        }
    }

    /// Failed requests retried so far.
    #[must_use]
    pub fn retries(&self) -> u32 {
        self.retries
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

    /// Which part of the pipeline the next output belongs to: `assess`, `research`,
    /// `summary-step` or `done`.
    #[must_use]
    pub fn component(&self) -> &'static str {
        match self.stage {
            Stage::Assess { .. } => "assess",
            Stage::Research { .. } => "research",
            Stage::Summary { .. } => "summary-step",
            Stage::Finished { .. } => "done",
        }
    }

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn fail(&mut self, kind: ClaimFailureKind, message: impl Into<String>) {
        self.stage = Stage::Finished {
            outcome: Err(ClaimFailed {
                kind,
                message: message.into(),
                requests: self.requests,
                usage: self.usage,
            }),
        };
    }

    fn count(&mut self, response: &AssistantMessage) {
        self.requests += 1;
        self.usage.add(&response.usage);
    }

    fn on_assessment(&mut self, round: Round, response: AssistantMessage) {
        self.count(&response);
        let stop = response.stop_reason();
        if stop.is_failure() || stop == StopReason::Length {
            let why = if stop == StopReason::Length {
                "the response was cut off at the output-token limit".to_owned()
            } else {
                response.failure_message()
            };
            return self.fail(
                ClaimFailureKind::AssessRequest,
                format!("assessment request failed: {why}"),
            );
        }
        let Some(call) = response.tool_calls().find(|call| call.name == RECORD_ASSESSMENT) else {
            return self.fail(
                ClaimFailureKind::AssessProse,
                "assessment reply did not call record_assessment",
            );
        };
        if let Err(text) = self.assess_schema.check_arguments(RECORD_ASSESSMENT, &call.arguments) {
            return self.fail(ClaimFailureKind::AssessSchema, text);
        }
        let mut assessment = match Assessment::deserialize(&call.arguments) {
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
        let first = self.fresh_id();
        let agent = Agent::new(
            format!("{}{}", prompt::RESEARCH_SYSTEM, prompt::DATA_NOTICE),
            prompt::research_prompt(&self.claim),
            Vec::new(),
            vec![lookup],
            ESCALATION_TURNS,
            (),
        )
        .with_retry(self.remaining_retry())
        .starting_at(first);
        self.stage = Stage::Research { agent: Box::new(agent) };
    }

    fn on_research_end(&mut self, agent: Agent<()>) {
        self.next_id = agent.next_free_id();
        let spent = agent.spent();
        self.retries += spent.retries;
        self.requests += spent.requests;
        self.usage.add(&spent.usage);
        let (_, messages, end, _) = agent.into_parts();
        let new = new_evidence(&messages, &self.corpus, &self.evidence);
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
                Some(End::Cancelled { reason }) => {
                    self.fail(ClaimFailureKind::Cancelled, format!("cancelled: {reason}"))
                }
                _ => self.fail(
                    ClaimFailureKind::NoNewEvidence,
                    "escalation found no additional evidence",
                ),
            };
        }
        if let Some(End::Cancelled { reason }) = end {
            return self.fail(ClaimFailureKind::Cancelled, format!("cancelled: {reason}"));
        }
        self.evidence.extend(new);
        let messages =
            vec![Message::User { text: prompt::assessment_prompt(&self.claim, &self.evidence) }];
        let call = CallId(self.fresh_id());
        self.stage = Stage::Assess { round: Round::Second, call, messages, delay_ms: 0, retry: 0 };
    }

    fn start_summary(&mut self, assessment: Assessment, route: Route) {
        let input = serde_json::to_string(&assessment).expect("an assessment serializes");
        let first = self.fresh_id();
        let system = format!("{}{}", prompt::SUMMARY_SYSTEM, prompt::DATA_NOTICE);
        let summary = step::<Summary>(system, prompt::summary_prompt(&input))
            .retry(self.remaining_retry())
            .build()
            .expect("the summary step's configuration is valid")
            .starting_at(first);
        self.stage = Stage::Summary { step: Box::new(summary), assessment, route };
    }

    fn on_summary_end(&mut self, summary: Step<Summary>, assessment: Assessment, route: Route) {
        self.next_id = summary.next_free_id();
        let spent = summary.spent();
        self.retries += spent.retries;
        self.requests += spent.requests;
        self.usage.add(&spent.usage);
        match summary.finish() {
            Ok(summary) => {
                self.stage = Stage::Finished {
                    outcome: Ok(Report {
                        claim: self.claim.clone(),
                        assessment,
                        route,
                        summary: summary.text,
                        requests: self.requests,
                        usage: self.usage,
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

    /// Moves on when the current inner machine has ended.
    fn advance(&mut self) {
        let stage =
            std::mem::replace(&mut self.stage, Stage::Finished { outcome: Err(placeholder()) });
        match stage {
            Stage::Research { agent } if agent.end().is_some() => self.on_research_end(*agent),
            Stage::Summary { step, assessment, route } if step.is_done() => {
                self.on_summary_end(*step, assessment, route);
            }
            stage => self.stage = stage,
        }
    }
}

fn placeholder() -> ClaimFailed {
    ClaimFailed {
        kind: ClaimFailureKind::Cancelled,
        message: String::new(),
        requests: 0,
        usage: Usage::default(),
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
            Stage::Assess { call, messages, delay_ms, retry, .. } => Output::CallModel(ModelCall {
                id: *call,
                delay_ms: *delay_ms,
                retry: *retry,
                request: ModelRequest {
                    system: &self.assess_system,
                    messages,
                    tools: &self.assess_tools,
                },
            }),
            Stage::Research { agent } => agent.poll_output(),
            Stage::Summary { step, .. } => step.poll_output(),
            Stage::Finished { .. } => Output::Done,
        }
    }

    fn handle_input(&mut self, input: Input) -> Result<(), Misuse> {
        match (&mut self.stage, input) {
            (Stage::Finished { .. }, _) => {
                return Err(Misuse::new(MisuseKind::Finished, "input after the check ended"));
            }
            (Stage::Assess { .. }, Input::Cancel { reason }) => {
                self.fail(ClaimFailureKind::Cancelled, format!("cancelled: {reason}"));
            }
            (Stage::Assess { round, call, .. }, Input::ModelResponse { call: id, response })
                if *call == id =>
            {
                let round = *round;
                if let Some(delay) = retry_delay(&self.retry, self.retries, &response) {
                    self.count(&response);
                    self.retries += 1;
                    let retry = self.retries;
                    let next = CallId(self.fresh_id());
                    if let Stage::Assess { call, delay_ms, retry: attempt, .. } = &mut self.stage {
                        *call = next;
                        *delay_ms = delay;
                        *attempt = retry;
                    }
                } else {
                    self.on_assessment(round, response);
                }
            }
            (Stage::Assess { call, .. }, _) => {
                return Err(Misuse::new(
                    MisuseKind::UnexpectedInput,
                    format!("expected a model response for {call}"),
                ));
            }
            (Stage::Research { agent }, input) => agent.handle_input(input)?,
            (Stage::Summary { step, .. }, input) => step.handle_input(input)?,
        }
        self.advance();
        Ok(())
    }

    fn finish(self) -> Result<Report, ClaimFailed> {
        match self.stage {
            Stage::Finished { outcome } => outcome,
            _ => Err(ClaimFailed {
                kind: ClaimFailureKind::Cancelled,
                message: "cancelled: finished before the check ended".to_owned(),
                requests: self.requests,
                usage: self.usage,
            }),
        }
    }
}
