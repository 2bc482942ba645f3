//! The job protocol every host speaks: a [`JobConfig`] (JSON) makes a [`Job`], one machine for
//! every kind of work, whose value is JSON and whose failure is one type, [`JobFailed`].
//!
//! A host (a browser worker, a WebAssembly component, a Restate service, a test) needs nothing
//! else from the core: it builds a job from a configuration and the corpora it holds, polls its
//! outputs ([`Machine::poll_output`], or [`Output::to_owned_output`] to send them elsewhere),
//! does the I/O, feeds the inputs, drains the events, and saves the job whenever it likes
//! ([`Job::save`], [`Job::restore`]).
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use verity_core::corpus::Corpus;
//! use verity_core::indexed::IndexedCorpus;
//! use verity_core::{AssistantMessage, Job, Machine, NoTools, ScriptedModel, drive};
//!
//! let corpus = IndexedCorpus::new(
//!     Corpus::from_pairs([("e1", "The bridge opened in 1932."), ("e2", "It is 503 m long.")])
//!         .unwrap(),
//! );
//! let config = json!({
//!     "kind": "claim",
//!     "claim": "The bridge opened in 1932.",
//!     "corpus": corpus.id(),
//!     "retriever": {"bm25": {"k": 4}},
//! });
//! let job = Job::from_json(&config.to_string(), &[Arc::clone(&corpus)]).unwrap();
//! let model = ScriptedModel::new([
//!     AssistantMessage::tool_call("a1", "record_assessment", json!({
//!         "verdict": "supported", "confidence": 0.9,
//!         "citations": ["The bridge opened in 1932."],
//!     })),
//!     AssistantMessage::tool_call("s1", "submit", json!({"text": "The evidence says so."})),
//! ]);
//! // A claim check needs no host tools: its lookups are answered from the corpus.
//! let report = pollster::block_on(drive(job, &model, &NoTools)).unwrap();
//! assert_eq!(report["assessment"]["verdict"], "supported");
//! assert_eq!(report["route"], "single call");
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use verity_derive::TaggedDeserialize;

use crate::agent::{Compaction, Spent, Tool};
use crate::answer::{AnswerCheck, AnswerReport};
use crate::claim::{
    AssessMode, ClaimCheck, ClaimFailed, ClaimFailureKind, ClaimOptions, LookupMode,
};
use crate::corpus::CorpusId;
use crate::event::Event;
use crate::indexed::{IndexedCorpus, with_corpora};
use crate::machine::{CallId, Input, Machine, Misuse, MisuseKind, Output};
use crate::message::Delta;
use crate::retrieve::Retriever;
use crate::retry::RetryPolicy;
use crate::run_failure::{Failed, FailureKindOf};
use crate::schema::Schema;
use crate::step::{FailureKind, Step, StepFailed, StepOptions, value_step};

/// The system prompt of a step job whose configuration gives none.
pub const DEFAULT_STEP_SYSTEM: &str = "You answer by calling submit.";
/// The largest integer JSON numbers carry exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// What a job does. JSON with `"kind": "step"`, `"claim"` or `"answer"`, camelCase fields; unknown
/// fields are refused. See DESIGN.md (The job protocol) for an example of each.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum JobConfig {
    /// A typed step.
    Step(StepConfig),
    /// A claim check.
    Claim(ClaimConfig),
    /// A check of a whole answer, sentence by sentence.
    Answer(AnswerConfig),
}

/// A typed step: the model answers by calling `submit` with arguments valid against `schema`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepConfig {
    /// The system prompt (default: [`DEFAULT_STEP_SYSTEM`]).
    #[serde(default = "default_system")]
    pub system: String,
    /// The task.
    pub prompt: String,
    /// The JSON Schema (2020-12) a submission must satisfy.
    pub schema: Value,
    /// Host tools beside `submit`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolConfig>,
    /// Failed submissions allowed (a positive integer; default 3).
    #[serde(default, deserialize_with = "bound", skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Turns allowed (a positive integer; default 10).
    #[serde(default, deserialize_with = "bound", skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Retries of failed requests (default: none).
    #[serde(default)]
    pub retry: RetryPolicy,
    /// Transcript compaction (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Compaction>,
}

fn default_system() -> String {
    DEFAULT_STEP_SYSTEM.to_owned()
}

/// A host tool of a step job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolConfig {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of its arguments (default: any object).
    #[serde(default = "any_object")]
    pub parameters: Value,
    /// Calls of it run one at a time, in order, with the rest of their batch.
    #[serde(default)]
    pub sequential: bool,
    /// Running a call twice is harmless (it only reads): a durable host may run again a call
    /// whose result was lost.
    #[serde(default)]
    pub replay_safe: bool,
}

fn any_object() -> Value {
    serde_json::json!({"type": "object"})
}

/// A claim check over a corpus the host holds, named by its content hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimConfig {
    /// The claim.
    pub claim: String,
    /// The corpus's id ([`IndexedCorpus::id`]).
    pub corpus: CorpusId,
    /// `{"bm25": {"k": 8}}` (the default) or `"keyword"`.
    #[serde(default)]
    pub retriever: Retriever,
    /// The research agent's turn bound (a positive integer; default 6).
    #[serde(default, deserialize_with = "bound", skip_serializing_if = "Option::is_none")]
    pub research_turns: Option<u32>,
    /// `"core"` (the default: lookups answered from the corpus) or `"host"`.
    #[serde(default)]
    pub lookup: LookupMode,
    /// Retries of failed requests, one budget for the whole check (default: none).
    #[serde(default)]
    pub retry: RetryPolicy,
    /// The assess position's route: `"agent"` (the default), `"verifier"` or
    /// `{"verifier": {"k": 3, "topLogprobs": 10, "chunkChars": 600, "calibrate": true,
    /// "weights": "qwen2.5-coder-0.5b-instruct"}}` (see [`crate::claim::AssessMode`]).
    #[serde(default, skip_serializing_if = "AssessMode::is_agent")]
    pub assess: AssessMode,
}

impl ClaimConfig {
    /// A check of `claim` over the corpus `corpus`, every other field its default (as the JSON
    /// `{"kind": "claim", "claim": ..., "corpus": ...}` reads): a host that builds its job in
    /// code sets the fields it needs on this, and hands the job [`JobConfig::Claim`] of it,
    /// with no JSON between them.
    #[must_use]
    pub fn new(claim: impl Into<String>, corpus: CorpusId) -> Self {
        Self {
            claim: claim.into(),
            corpus,
            retriever: Retriever::default(),
            research_turns: None,
            lookup: LookupMode::default(),
            retry: RetryPolicy::default(),
            assess: AssessMode::default(),
        }
    }
}

/// A check of a whole answer over a corpus the host holds: each sentence with something to
/// check goes through the claim checker (the same fields as a claim job), and the answer's
/// own citation marks are checked against the passages they name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerConfig {
    /// The answer (at most 50,000 characters and 200 sentences).
    pub answer: String,
    /// The corpus's id ([`IndexedCorpus::id`]).
    pub corpus: CorpusId,
    /// As a claim job's, for each sentence.
    #[serde(default)]
    pub retriever: Retriever,
    /// As a claim job's, for each sentence.
    #[serde(default, deserialize_with = "bound", skip_serializing_if = "Option::is_none")]
    pub research_turns: Option<u32>,
    /// As a claim job's.
    #[serde(default)]
    pub lookup: LookupMode,
    /// Retries of failed requests, a budget for each sentence (default: none).
    #[serde(default)]
    pub retry: RetryPolicy,
    /// As a claim job's.
    #[serde(default, skip_serializing_if = "AssessMode::is_agent")]
    pub assess: AssessMode,
    /// Which passage each citation mark names: `{"1": "e1"}` for an answer that cites `[1]`.
    /// A mark not in it names the passage whose id it is (`[e1]`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub marks: BTreeMap<String, String>,
    /// Split each sentence into atomic claims with a typed step before checking them (one more
    /// request a sentence; default: each sentence is checked whole).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub decompose: bool,
    /// How many sentences (or atomic claims) are checked at once: a positive integer, at most
    /// 16 (default 1, one after another). Their model calls are pending together
    /// ([`Machine::poll_outputs`]); a host that answers one at a time still gets every one.
    #[serde(default, deserialize_with = "concurrency", skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
}

impl AnswerConfig {
    /// A check of `answer` over the corpus `corpus`, every other field its default (as the
    /// JSON `{"kind": "answer", "answer": ..., "corpus": ...}` reads).
    #[must_use]
    pub fn new(answer: impl Into<String>, corpus: CorpusId) -> Self {
        Self {
            answer: answer.into(),
            corpus,
            retriever: Retriever::default(),
            research_turns: None,
            lookup: LookupMode::default(),
            retry: RetryPolicy::default(),
            assess: AssessMode::default(),
            marks: BTreeMap::new(),
            decompose: false,
            concurrency: None,
        }
    }
}

/// A bound: a positive integer (as JSON numbers carry them: `3.0` is 3), absent or `null` for
/// the default; one beyond `u32` is unbounded in practice.
fn bound<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    let value = Option::<Value>::deserialize(deserializer)?;
    let Some(value) = value.filter(|value| !value.is_null()) else { return Ok(None) };
    let number = value.as_f64().filter(|n| n.fract() == 0.0 && *n >= 1.0 && *n <= MAX_SAFE_INTEGER);
    match number {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Some(number) => Ok(Some(number.min(f64::from(u32::MAX)) as u32)),
        None => Err(D::Error::custom(format!("must be a positive integer, not {value}"))),
    }
}

/// An answer job's concurrency: a [`bound`] no larger than
/// [`MAX_CONCURRENCY`](crate::answer::MAX_CONCURRENCY).
fn concurrency<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    let most = crate::answer::MAX_CONCURRENCY;
    match bound(deserializer)? {
        Some(n) if n > most => Err(D::Error::custom(format!("must be at most {most}, not {n}"))),
        n => Ok(n),
    }
}

/// A configuration that cannot make a job: where (a JSON path, `$` for the whole) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    path: String,
    message: String,
}

impl ConfigError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into() }
    }

    /// The JSON path of the offending field (`maxTurns`, `tools[1].parameters`; `.` for the
    /// configuration as a whole, and for any field in an engine built without the
    /// `config-paths` feature, the app's).
    #[must_use]
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Why it is refused.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for ConfigError {}

impl JobConfig {
    /// The job's retry policy (a host's own waits, such as a rate limiter's hold after a
    /// `Retry-After`, keep to its cap).
    #[must_use]
    pub fn retry(&self) -> &RetryPolicy {
        match self {
            Self::Step(config) => &config.retry,
            Self::Claim(config) => &config.retry,
            Self::Answer(config) => &config.retry,
        }
    }

    /// Reads a configuration from JSON text.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the field and why.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let value: Value =
            serde_json::from_str(text).map_err(|error| ConfigError::new(".", error.to_string()))?;
        Self::from_value(value)
    }

    /// Reads a configuration from a JSON value.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the field and why.
    pub fn from_value(value: Value) -> Result<Self, ConfigError> {
        let Value::Object(mut fields) = value else {
            return Err(ConfigError::new(".", "a job configuration is a JSON object"));
        };
        let kind = match fields.remove("kind") {
            Some(Value::String(kind)) => kind,
            Some(other) => {
                return Err(ConfigError::new("kind", format!("must be a string, not {other}")));
            }
            None => {
                return Err(ConfigError::new("kind", "missing: \"step\", \"claim\" or \"answer\""));
            }
        };
        match kind.as_str() {
            "step" => fields_of(fields).map(JobConfig::Step),
            "claim" => fields_of(fields).map(JobConfig::Claim),
            "answer" => fields_of(fields).map(JobConfig::Answer),
            other => Err(ConfigError::new(
                "kind",
                format!("unknown kind {other:?}: \"step\", \"claim\" or \"answer\""),
            )),
        }
    }
}

/// Deserializes a configuration's fields, naming the path of the first bad one (with the
/// `config-paths` feature; without it, see [`fields_without_path`]).
#[cfg(feature = "config-paths")]
fn fields_of<T: serde::de::DeserializeOwned>(fields: Map<String, Value>) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(Value::Object(fields)).map_err(|error| {
        let path = error.path().to_string();
        ConfigError::new(path, error.into_inner().to_string())
    })
}

/// Deserializes a configuration's fields (without the `config-paths` feature).
#[cfg(not(feature = "config-paths"))]
fn fields_of<T: serde::de::DeserializeOwned>(fields: Map<String, Value>) -> Result<T, ConfigError> {
    fields_without_path(fields)
}

/// Deserializes a configuration's fields with the path `.`: serde's own words say what is
/// wrong (`unknown field `maxturns``, `invalid type: string "3", expected u32`) but not
/// where. The engine built without the `config-paths` feature reads configurations this way:
/// the app's, whose configurations are written by its own page; tracking the path compiles
/// every configuration type a second time (10 KB of its gzip).
#[cfg_attr(feature = "config-paths", allow(dead_code))]
fn fields_without_path<T: serde::de::DeserializeOwned>(
    fields: Map<String, Value>,
) -> Result<T, ConfigError> {
    T::deserialize(Value::Object(fields)).map_err(|error| ConfigError::new(".", error.to_string()))
}

impl<'de> Deserialize<'de> for JobConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::from_value(Value::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

/// Why a job failed. The stable kebab-case names of POLICY.md (`provider`,
/// `invalid-submissions`, `turn-limit`, `no-submit`, and the claim checker's), plus `config`
/// and `cancelled`. Branch on it to decide whether to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum JobFailureKind {
    /// The configuration was refused; nothing was requested.
    Config,
    /// A model request failed (network, provider error).
    Provider,
    /// The step's failed-attempt budget was spent without a valid submission.
    InvalidSubmissions,
    /// The turn bound cut off a run that would have gone on.
    TurnLimit,
    /// The model finished without calling `submit`.
    NoSubmit,
    /// The host cancelled the job (or aborted its request).
    Cancelled,
    /// The claim's assessment request failed or was cut off.
    AssessRequest,
    /// The assessment reply did not call `record_assessment`.
    AssessProse,
    /// The `record_assessment` arguments broke the schema.
    AssessSchema,
    /// A citation is not an entire evidence item, or a conclusive verdict cites nothing.
    CitationNotInEvidence,
    /// Research ended without new evidence.
    NoNewEvidence,
    /// Research hit its turn bound without new evidence.
    ResearchTurnLimit,
    /// The host's spending limit for a run was reached before this job's next request (the
    /// message says what was spent); nothing more was requested.
    Budget,
}

impl JobFailureKind {
    /// Every kind.
    pub const ALL: [JobFailureKind; 13] = [
        JobFailureKind::Config,
        JobFailureKind::Provider,
        JobFailureKind::InvalidSubmissions,
        JobFailureKind::TurnLimit,
        JobFailureKind::NoSubmit,
        JobFailureKind::Cancelled,
        JobFailureKind::AssessRequest,
        JobFailureKind::AssessProse,
        JobFailureKind::AssessSchema,
        JobFailureKind::CitationNotInEvidence,
        JobFailureKind::NoNewEvidence,
        JobFailureKind::ResearchTurnLimit,
        JobFailureKind::Budget,
    ];

    /// Whether a check that ended with this kind has a verdict all the same, `insufficient`:
    /// research looked for more evidence and found none (it ended, or hit its turn bound), so
    /// the first assessment's "insufficient" stands. Every host shows and counts it so (the
    /// app, the exports, the batch's progress, `eval`), not as a failure.
    #[must_use]
    pub fn is_insufficient(self) -> bool {
        matches!(self, JobFailureKind::NoNewEvidence | JobFailureKind::ResearchTurnLimit)
    }

    /// The kind's stable name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            JobFailureKind::Config => "config",
            JobFailureKind::Provider => "provider",
            JobFailureKind::InvalidSubmissions => "invalid-submissions",
            JobFailureKind::TurnLimit => "turn-limit",
            JobFailureKind::NoSubmit => "no-submit",
            JobFailureKind::Cancelled => "cancelled",
            JobFailureKind::AssessRequest => "assess-request",
            JobFailureKind::AssessProse => "assess-prose",
            JobFailureKind::AssessSchema => "assess-schema",
            JobFailureKind::CitationNotInEvidence => "citation-not-in-evidence",
            JobFailureKind::NoNewEvidence => "no-new-evidence",
            JobFailureKind::ResearchTurnLimit => "research-turn-limit",
            JobFailureKind::Budget => "budget",
        }
    }
}

impl fmt::Display for JobFailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<FailureKind> for JobFailureKind {
    fn from(kind: FailureKind) -> Self {
        match kind {
            FailureKind::Config => JobFailureKind::Config,
            FailureKind::Provider => JobFailureKind::Provider,
            FailureKind::InvalidSubmissions => JobFailureKind::InvalidSubmissions,
            FailureKind::TurnLimit => JobFailureKind::TurnLimit,
            FailureKind::NoSubmit => JobFailureKind::NoSubmit,
            FailureKind::Cancelled => JobFailureKind::Cancelled,
        }
    }
}

impl From<ClaimFailureKind> for JobFailureKind {
    fn from(kind: ClaimFailureKind) -> Self {
        match kind {
            ClaimFailureKind::AssessRequest => JobFailureKind::AssessRequest,
            ClaimFailureKind::AssessProse => JobFailureKind::AssessProse,
            ClaimFailureKind::AssessSchema => JobFailureKind::AssessSchema,
            ClaimFailureKind::CitationNotInEvidence => JobFailureKind::CitationNotInEvidence,
            ClaimFailureKind::NoNewEvidence => JobFailureKind::NoNewEvidence,
            ClaimFailureKind::ResearchTurnLimit => JobFailureKind::ResearchTurnLimit,
            ClaimFailureKind::Provider => JobFailureKind::Provider,
            ClaimFailureKind::Summary(kind) => kind.into(),
            ClaimFailureKind::Cancelled => JobFailureKind::Cancelled,
        }
    }
}

/// A job that ended without a value: its kind, a message, and what it spent (requests, turns,
/// failed attempts, retries, tokens and cost).
pub type JobFailed = Failed<JobFailureKind>;

impl JobFailed {
    /// A job the host refused before it ran (a bad provider configuration, a corpus it does
    /// not have): kind [`JobFailureKind::Config`], nothing spent. The same shape as the
    /// machine's own failures, so every host reports them alike.
    #[must_use]
    pub fn config(message: impl Into<String>) -> Self {
        Failed::new(JobFailureKind::Config, message, Spent::default())
    }

    /// A job the host ended outside the machine (cancelled before it started, taken over by
    /// another driver, its session lost): kind [`JobFailureKind::Cancelled`], with what it had
    /// spent.
    #[must_use]
    pub fn cancelled(message: impl Into<String>, spent: Spent) -> Self {
        Failed::new(JobFailureKind::Cancelled, message, spent)
    }

    /// A job the host ended because a run's spending limit was reached before its next
    /// request: kind [`JobFailureKind::Budget`], with what the job had spent. The message
    /// should say what the run spent against its limit.
    #[must_use]
    pub fn budget(message: impl Into<String>, spent: Spent) -> Self {
        Failed::new(JobFailureKind::Budget, message, spent)
    }
}

impl FailureKindOf for JobFailureKind {
    const SUBJECT: &'static str = "job";
}

impl From<StepFailed> for JobFailed {
    fn from(failed: StepFailed) -> Self {
        failed.map_kind(JobFailureKind::from)
    }
}

impl From<ClaimFailed> for JobFailed {
    fn from(failed: ClaimFailed) -> Self {
        failed.map_kind(JobFailureKind::from)
    }
}

/// A saved job that cannot be restored: not a saved job, or its corpus was not given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreError(String);

impl fmt::Display for RestoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot restore the job: {}", self.0)
    }
}

impl std::error::Error for RestoreError {}

#[derive(Debug, Clone, Serialize, TaggedDeserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
enum Work {
    Step { step: Box<Step<Value>> },
    Claim { check: Box<ClaimCheck> },
    Answer { check: Box<AnswerCheck> },
}

/// One machine for every kind of work. Its value is JSON: a step's submission, or a claim
/// check's [`crate::Report`]. It serializes without its corpus (see [`Job::save`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    #[serde(flatten)]
    work: Work,
    /// Streamed pieces the host handed in, queued behind the machine's own events.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    deltas: Vec<Event>,
}

impl Job {
    /// Makes a job from `config`; a claim job takes its corpus from `corpora` by id.
    ///
    /// # Errors
    /// A [`JobFailureKind::Config`] failure (nothing requested) naming the field and why: a
    /// bound below 1, an unusable schema, a tool named `submit`, a corpus not given.
    pub fn new(config: JobConfig, corpora: &[Arc<IndexedCorpus>]) -> Result<Self, JobFailed> {
        let work = match config {
            JobConfig::Step(config) => Work::Step { step: Box::new(build_step(config)?) },
            JobConfig::Claim(config) => {
                let corpus = corpus_of(&config.corpus, corpora)?;
                let options = claim_options(
                    config.retriever,
                    config.research_turns,
                    config.lookup,
                    config.retry,
                    config.assess,
                );
                let check = ClaimCheck::new(config.claim, Arc::clone(corpus), options);
                Work::Claim { check: Box::new(check) }
            }
            JobConfig::Answer(config) => {
                let corpus = corpus_of(&config.corpus, corpora)?;
                // The answer's report says what holds per sentence: no summary requests.
                let options = ClaimOptions {
                    summary: false,
                    within_answer: true,
                    ..claim_options(
                        config.retriever,
                        config.research_turns,
                        config.lookup,
                        config.retry,
                        config.assess,
                    )
                };
                let check =
                    AnswerCheck::new(config.answer, Arc::clone(corpus), options, &config.marks)
                        .map_err(|error| {
                            JobFailed::config(
                                ConfigError::new("answer", error.to_string()).to_string(),
                            )
                        })?
                        .decomposing(config.decompose)
                        .concurrent(config.concurrency.unwrap_or(1));
                Work::Answer { check: Box::new(check) }
            }
        };
        Ok(Self { work, deltas: Vec::new() })
    }

    /// Makes a job from JSON text (see [`JobConfig`]).
    ///
    /// # Errors
    /// A [`JobFailureKind::Config`] failure naming the field (its JSON path) and why.
    pub fn from_json(config: &str, corpora: &[Arc<IndexedCorpus>]) -> Result<Self, JobFailed> {
        let config =
            JobConfig::from_json(config).map_err(|error| JobFailed::config(error.to_string()))?;
        Self::new(config, corpora)
    }

    /// The job's state as JSON, to store and [`restore`](Self::restore) later. A claim job's
    /// corpus is not in it, only the corpus's id.
    #[must_use]
    pub fn save(&self) -> String {
        serde_json::to_string(self).expect("a job serializes")
    }

    /// A job saved with [`save`](Self::save) (or serialized with serde), with the corpora it
    /// may need.
    ///
    /// # Errors
    /// When `saved` is not a saved job, or a claim job's corpus is not among `corpora` (a
    /// corpus whose content differs has another id and is refused).
    pub fn restore(saved: &str, corpora: &[Arc<IndexedCorpus>]) -> Result<Self, RestoreError> {
        with_corpora(corpora, || serde_json::from_str(saved))
            .map_err(|error| RestoreError(error.to_string()))
    }

    /// Queues a piece of the streamed response to model call `call` as an [`Event::Delta`],
    /// so the host's progress comes out of [`Machine::drain_events`] with everything else.
    ///
    /// # Errors
    /// [`Misuse`] when `call` is not the model call the job is waiting for.
    pub fn record_delta(&mut self, call: CallId, delta: Delta) -> Result<(), Misuse> {
        let pending = self
            .poll_outputs()
            .iter()
            .any(|output| matches!(output, Output::CallModel(pending) if pending.id == call));
        if !pending {
            return Err(Misuse::new(
                MisuseKind::UnexpectedInput,
                format!("a streamed piece for {call}, which is not a pending model call"),
            ));
        }
        self.deltas.push(Event::Delta { call, delta });
        Ok(())
    }

    /// What the job has spent so far.
    #[must_use]
    pub fn spent(&self) -> Spent {
        match &self.work {
            Work::Step { step } => step.spent(),
            Work::Claim { check } => check.spent(),
            Work::Answer { check } => check.spent(),
        }
    }

    /// The claim check, for a claim job.
    #[must_use]
    pub fn claim_check(&self) -> Option<&ClaimCheck> {
        match &self.work {
            Work::Claim { check } => Some(check),
            _ => None,
        }
    }

    /// The answer check, for an answer job (its sentences as far as it has gone).
    #[must_use]
    pub fn answer_check(&self) -> Option<&AnswerCheck> {
        match &self.work {
            Work::Answer { check } => Some(check),
            _ => None,
        }
    }
}

/// The claim checker's options of a claim or answer job's fields (their defaults applied).
fn claim_options(
    retriever: Retriever,
    research_turns: Option<u32>,
    lookup: LookupMode,
    retry: RetryPolicy,
    assess: AssessMode,
) -> ClaimOptions {
    ClaimOptions {
        retriever,
        research_turns: research_turns.unwrap_or(crate::claim::ESCALATION_TURNS),
        lookup,
        retry,
        assess,
        summary: true,
        within_answer: false,
    }
}

/// The corpus a configuration names, among those given.
fn corpus_of<'a>(
    id: &CorpusId,
    corpora: &'a [Arc<IndexedCorpus>],
) -> Result<&'a Arc<IndexedCorpus>, JobFailed> {
    corpora.iter().find(|corpus| corpus.id() == id).ok_or_else(|| {
        JobFailed::config(
            ConfigError::new("corpus", format!("no corpus {id} was given to the job")).to_string(),
        )
    })
}

fn build_step(config: StepConfig) -> Result<Step<Value>, JobFailed> {
    let fail = |path: String, message: String| {
        JobFailed::config(ConfigError::new(path, message).to_string())
    };
    let options = StepOptions {
        max_attempts: config.max_attempts.unwrap_or(crate::step::DEFAULT_MAX_ATTEMPTS),
        max_turns: config.max_turns.unwrap_or(crate::step::DEFAULT_MAX_TURNS),
    };
    let mut tools = Vec::with_capacity(config.tools.len());
    for (i, tool) in config.tools.into_iter().enumerate() {
        if tool.name == crate::step::SUBMIT {
            return Err(fail(
                format!("tools[{i}].name"),
                format!("\"{}\" is reserved for the step's answer", crate::step::SUBMIT),
            ));
        }
        let built = Tool::new(tool.name, tool.description, tool.parameters)
            .map_err(|error| fail(format!("tools[{i}].parameters"), error.to_string()))?;
        let built = if tool.sequential { built.sequential() } else { built };
        tools.push(if tool.replay_safe { built.replay_safe() } else { built });
    }
    let schema = Schema::compile(config.schema)
        .map_err(|error| fail("schema".to_owned(), error.to_string()))?;
    let mut builder = value_step(schema, config.system, config.prompt)
        .options(options)
        .tools(tools)
        .retry(config.retry);
    if let Some(compaction) = config.compaction {
        builder = builder.compaction(compaction);
    }
    builder.build().map_err(JobFailed::from)
}

impl Machine for Job {
    type Value = Value;
    type Error = JobFailed;

    fn poll_output(&mut self) -> Output<'_> {
        match &mut self.work {
            Work::Step { step } => step.poll_output(),
            Work::Claim { check } => check.poll_output(),
            Work::Answer { check } => check.poll_output(),
        }
    }

    fn poll_outputs(&mut self) -> Vec<Output<'_>> {
        match &mut self.work {
            Work::Step { step } => step.poll_outputs(),
            Work::Claim { check } => check.poll_outputs(),
            Work::Answer { check } => check.poll_outputs(),
        }
    }

    fn handle_input(&mut self, input: Input) -> Result<(), Misuse> {
        match &mut self.work {
            Work::Step { step } => step.handle_input(input),
            Work::Claim { check } => check.handle_input(input),
            Work::Answer { check } => check.handle_input(input),
        }
    }

    fn drain_events(&mut self) -> Vec<Event> {
        let mut events = match &mut self.work {
            Work::Step { step } => step.drain_events(),
            Work::Claim { check } => check.drain_events(),
            Work::Answer { check } => check.drain_events(),
        };
        if !self.deltas.is_empty() {
            // Pieces arrive while the call is pending, so before its answer's events.
            let mut deltas = std::mem::take(&mut self.deltas);
            let answered = events
                .iter()
                .position(|event| matches!(event, Event::ModelAnswered { .. }))
                .unwrap_or(events.len());
            let tail = events.split_off(answered);
            events.append(&mut deltas);
            events.extend(tail);
        }
        events
    }

    fn finish(self) -> Result<Value, JobFailed> {
        self.finish_typed().map(JobValue::into_value)
    }
}

/// What a finished [`Job`] gives, typed: a step's value, or a claim check's report.
#[derive(Debug, Clone, PartialEq)]
pub enum JobValue {
    /// A step's value (valid against its schema).
    Step(Value),
    /// A claim check's report.
    Report(Box<crate::Report>),
    /// An answer check's report.
    Answer(Box<AnswerReport>),
}

impl JobValue {
    /// As JSON (what [`Machine::finish`] gives for a job).
    #[must_use]
    pub fn into_value(self) -> Value {
        match self {
            Self::Step(value) => value,
            Self::Report(report) => serde_json::to_value(report).expect("a report serializes"),
            Self::Answer(report) => serde_json::to_value(report).expect("a report serializes"),
        }
    }
}

impl Job {
    /// Ends the job: its value typed (a host that reads the report, as the browser's engine
    /// does for its citations, need not parse JSON the job made), or its failure.
    ///
    /// # Errors
    /// The job's typed failure.
    pub fn finish_typed(self) -> Result<JobValue, JobFailed> {
        match self.work {
            Work::Step { step } => step.finish().map(JobValue::Step).map_err(JobFailed::from),
            Work::Claim { check } => check
                .finish()
                .map(|report| JobValue::Report(Box::new(report)))
                .map_err(JobFailed::from),
            Work::Answer { check } => check
                .finish()
                .map(|report| JobValue::Answer(Box::new(report)))
                .map_err(JobFailed::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{ClaimConfig, ConfigError, fields_without_path};

    fn claim_fields(extra: (&str, serde_json::Value)) -> Result<ClaimConfig, ConfigError> {
        let corpus = format!("sha256:{}", "0".repeat(64));
        let mut fields = json!({"claim": "The sky is blue.", "corpus": corpus});
        fields[extra.0] = extra.1;
        let serde_json::Value::Object(fields) = fields else { unreachable!() };
        fields_without_path(fields)
    }

    /// The app's engine (built without `config-paths`) still refuses a bad field and says
    /// what is wrong with it, at the path `.`.
    #[test]
    fn without_paths_a_bad_field_is_refused_with_serdes_words() {
        let unknown = claim_fields(("maxturns", json!(3))).unwrap_err();
        assert_eq!(unknown.path(), ".");
        assert!(unknown.message().contains("unknown field `maxturns`"), "{unknown}");
        let wrong = claim_fields(("claim", json!(3))).unwrap_err();
        assert_eq!(wrong.path(), ".");
        assert!(wrong.message().starts_with("invalid type: integer `3`"), "{wrong}");
    }
}
