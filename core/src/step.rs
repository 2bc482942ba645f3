//! The typed step: an agent loop whose only successful return is a `submit` call that
//! validates against a schema.
//!
//! Policies (POLICY.md): at most `max_attempts` failed `submit` calls (default 3) and
//! `max_turns` turns (default 10); the first valid submission wins and is returned even if a
//! later turn fails or hits a bound; a response's calls are judged together (D2); the cause of
//! an ending wins over the bound (D4).

use std::fmt;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::{Agent, Compaction, End, Event, Halt, Hooks, Spent, Tool};
use crate::machine::{Input, Machine, Misuse, Output};
use crate::message::{Message, ToolCall, ToolOutput, ToolSpec};
use crate::retry::RetryPolicy;
use crate::run_failure::{Failed, FailureKindOf};
use crate::schema::Schema;

/// The reserved name of the tool that ends a step.
pub const SUBMIT: &str = "submit";
/// Failed `submit` calls allowed when the caller does not say.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// Turns allowed when the caller does not say.
pub const DEFAULT_MAX_TURNS: u32 = 10;

/// Why a step failed. Branch on it to decide whether to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FailureKind {
    /// The step was configured wrongly; nothing was requested.
    Config,
    /// A model request failed (network, provider error, aborted stream).
    Provider,
    /// The model used up its failed-attempt budget without a valid submission, or gave up
    /// after a failed one.
    InvalidSubmissions,
    /// The turn bound cut off a run that would have gone on.
    TurnLimit,
    /// The model finished without calling `submit`.
    NoSubmit,
    /// The host cancelled the step.
    Cancelled,
}

impl FailureKind {
    /// The kind's stable name (`"provider"`, `"invalid-submissions"`, ...).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Config => "config",
            FailureKind::Provider => "provider",
            FailureKind::InvalidSubmissions => "invalid-submissions",
            FailureKind::TurnLimit => "turn-limit",
            FailureKind::NoSubmit => "no-submit",
            FailureKind::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A step that ended without a value: its kind, a message, and what it spent.
pub type StepFailed = Failed<FailureKind>;

impl FailureKindOf for FailureKind {
    const SUBJECT: &'static str = "step";
}

impl StepFailed {
    fn config(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Config, message, Spent::default())
    }
}

/// The bounds of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepOptions {
    /// Failed `submit` calls allowed (at least 1).
    pub max_attempts: u32,
    /// Turns allowed (at least 1).
    pub max_turns: u32,
}

impl Default for StepOptions {
    fn default() -> Self {
        Self { max_attempts: DEFAULT_MAX_ATTEMPTS, max_turns: DEFAULT_MAX_TURNS }
    }
}

impl StepOptions {
    fn check(self) -> Result<Self, StepFailed> {
        if self.max_attempts == 0 {
            return Err(StepFailed::config("maxAttempts must be a positive integer"));
        }
        if self.max_turns == 0 {
            return Err(StepFailed::config("maxTurns must be a positive integer"));
        }
        Ok(self)
    }
}

/// The core-side `submit` policy of a step.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Submit<T> {
    schema: Schema,
    max_attempts: u32,
    failed: u32,
    value: Option<Value>,
    #[serde(skip)]
    target: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> Submit<T> {
    fn judge(&self, arguments: &Value) -> Result<(), String> {
        self.schema.check_arguments(SUBMIT, arguments)?;
        // The schema is the contract; a value that passes it but does not fit `T` (a schema
        // looser than the type) is still refused, so `finish` never fails to convert.
        T::deserialize(arguments).map(drop).map_err(|error| {
            format!("Validation failed for tool \"{SUBMIT}\":\n  - (root): {error}")
        })
    }

    /// The stored submission, if any.
    #[must_use]
    pub fn value(&self) -> Option<&Value> {
        self.value.as_ref()
    }

    /// Failed submissions so far.
    #[must_use]
    pub fn failed(&self) -> u32 {
        self.failed
    }
}

impl<T: DeserializeOwned> Hooks for Submit<T> {
    fn settle(&mut self, call: &ToolCall) -> Option<ToolOutput> {
        if call.name != SUBMIT {
            return None;
        }
        Some(match self.judge(&call.arguments) {
            Err(text) => {
                self.failed = self.failed.saturating_add(1);
                ToolOutput::error(text)
            }
            Ok(()) if self.value.is_none() => {
                self.value = Some(call.arguments.clone());
                ToolOutput::ok("Submission accepted.", Value::Null).terminating()
            }
            Ok(()) => ToolOutput::ok(
                "A submission was already accepted; the first valid submission is kept.",
                Value::Null,
            )
            .terminating(),
        })
    }

    fn refused(&mut self, call: &ToolCall) {
        if call.name == SUBMIT {
            self.failed = self.failed.saturating_add(1);
        }
    }

    fn unreadable(&mut self) -> bool {
        // An answer the server could not read is a failed attempt, like an invalid submission.
        self.failed = self.failed.saturating_add(1);
        self.failed < self.max_attempts
    }

    fn halt(&self) -> Halt {
        // The budget is checked once the whole response is judged (D2): a valid submission
        // in the same response still wins, and then the response's other calls still run.
        if self.failed < self.max_attempts {
            Halt::No
        } else if self.value.is_some() {
            Halt::AfterTools
        } else {
            Halt::BeforeTools
        }
    }
}

/// A typed step whose value is a `T` (`serde_json::Value` for schemas known at run time).
///
/// Build one with [`step`] (schema derived from `T`) or [`value_step`] (schema given).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct Step<T> {
    agent: Agent<Submit<T>>,
}

/// Builds a [`Step`].
#[derive(Debug, Clone)]
#[must_use]
pub struct StepBuilder<T> {
    schema: Result<Schema, StepFailed>,
    system: String,
    input: String,
    tools: Vec<Tool>,
    options: StepOptions,
    retry: RetryPolicy,
    compaction: Option<Compaction>,
    constrained: Option<Value>,
    output_limit: Option<u32>,
    target: PhantomData<fn() -> T>,
}

/// A step whose value is a `T`, with the schema schemars derives for `T`.
pub fn step<T>(system: impl Into<String>, input: impl Into<String>) -> StepBuilder<T>
where
    T: schemars::JsonSchema + DeserializeOwned + 'static,
{
    let schema = Schema::of::<T>().map_err(|error| StepFailed::config(error.to_string()));
    StepBuilder::with_schema(schema, system.into(), input.into())
}

/// A step for a schema that arrives at run time; the value is the submission as JSON.
pub fn value_step(
    schema: Schema,
    system: impl Into<String>,
    input: impl Into<String>,
) -> StepBuilder<Value> {
    StepBuilder::with_schema(Ok(schema), system.into(), input.into())
}

impl<T: DeserializeOwned> StepBuilder<T> {
    fn with_schema(schema: Result<Schema, StepFailed>, system: String, input: String) -> Self {
        Self {
            schema,
            system,
            input,
            tools: Vec::new(),
            options: StepOptions::default(),
            retry: RetryPolicy::default(),
            compaction: None,
            constrained: None,
            output_limit: None,
            target: PhantomData,
        }
    }

    /// Retries failed requests the provider marked retryable, within `policy` (the one
    /// retry layer; off by default).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Compacts the transcript after each seal (see [`Compaction`]).
    pub fn compaction(mut self, compaction: Compaction) -> Self {
        self.compaction = Some(compaction);
        self
    }

    /// Adds a tool beside `submit`.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds tools beside `submit`.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Sets both bounds.
    pub fn options(mut self, options: StepOptions) -> Self {
        self.options = options;
        self
    }

    /// A narrower schema of the submission for constrained decoding only (see
    /// [`ToolSpec::constrained`]); submissions are still validated against the step's schema.
    pub fn constrained(mut self, schema: Value) -> Self {
        self.constrained = Some(schema);
        self
    }

    /// The output limit of the step's calls when the provider's configuration sets none
    /// ([`crate::ModelRequest::output_limit`]).
    pub fn output_limit(mut self, limit: u32) -> Self {
        self.output_limit = Some(limit);
        self
    }

    /// Sets the failed-attempt bound.
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.options.max_attempts = max_attempts;
        self
    }

    /// Sets the turn bound.
    pub fn max_turns(mut self, max_turns: u32) -> Self {
        self.options.max_turns = max_turns;
        self
    }

    /// Checks the configuration and makes the machine.
    ///
    /// # Errors
    /// A [`FailureKind::Config`] failure: a bound below 1 (`maxAttempts` first, then
    /// `maxTurns`), an extra tool named `submit`, or an unusable schema.
    pub fn build(self) -> Result<Step<T>, StepFailed> {
        let options = self.options.check()?;
        if self.tools.iter().any(|tool| tool.name() == SUBMIT) {
            return Err(StepFailed::config(format!(
                "extraTools must not define the reserved tool name \"{SUBMIT}\""
            )));
        }
        let schema = self.schema?;
        let submit_spec = ToolSpec {
            name: SUBMIT.to_owned(),
            description: "Submit your final answer. Its arguments are the answer; they must \
                          validate against this schema. The first valid submission is kept."
                .to_owned(),
            parameters: schema.document().clone(),
            constrained: self.constrained,
        };
        let hooks = Submit {
            schema,
            max_attempts: options.max_attempts,
            failed: 0,
            value: None,
            target: PhantomData,
        };
        let mut agent = Agent::new(
            self.system,
            self.input,
            vec![submit_spec],
            self.tools,
            options.max_turns,
            hooks,
        )
        .with_retry(self.retry);
        if let Some(compaction) = self.compaction {
            agent = agent.with_compaction(compaction);
        }
        if let Some(limit) = self.output_limit {
            agent = agent.with_output_limit(limit);
        }
        Ok(Step { agent })
    }
}

impl<T: DeserializeOwned> Step<T> {
    /// The transcript so far.
    #[must_use]
    pub fn messages(&self) -> &[Message] {
        self.agent.messages()
    }

    /// What the step has spent so far.
    #[must_use]
    pub fn spent(&self) -> Spent {
        let mut spent = self.agent.spent();
        spent.failed_attempts = self.agent.hooks().failed();
        spent
    }

    pub(crate) fn starting_at(self, first: u64) -> Self {
        Self { agent: self.agent.starting_at(first) }
    }

    /// The first call id this step has not used.
    pub(crate) fn next_free_id(&self) -> u64 {
        self.agent.next_free_id()
    }

    /// The host's compaction hook (see [`Agent::compact_with`]).
    pub fn compact_with(&mut self, edit: impl FnOnce(&mut [Message])) {
        self.agent.compact_with(edit);
    }

    /// Whether the step has ended (its next output is `Done`).
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.agent.end().is_some()
    }

    /// The submission stored so far, if any.
    #[must_use]
    pub fn submission(&self) -> Option<&Value> {
        self.agent.hooks().value()
    }
}

impl<T: DeserializeOwned> Machine for Step<T> {
    type Value = T;
    type Error = StepFailed;

    fn poll_output(&mut self) -> Output<'_> {
        self.agent.poll_output()
    }

    fn handle_input(&mut self, input: Input) -> Result<(), Misuse> {
        self.agent.handle_input(input)
    }

    fn drain_events(&mut self) -> Vec<Event> {
        self.agent.drain_events()
    }

    fn finish(self) -> Result<T, StepFailed> {
        let spent = self.spent();
        let (hooks, _, end, _) = self.agent.into_parts();
        if let Some(value) = hooks.value {
            // `judge` deserialized this value before storing it.
            return T::deserialize(value).map_err(|error| {
                StepFailed::new(FailureKind::InvalidSubmissions, error.to_string(), spent)
            });
        }
        let failed = hooks.failed;
        let (kind, message) = match end {
            Some(End::ProviderFailed { message }) => {
                (FailureKind::Provider, format!("model call failed: {message}"))
            }
            Some(End::TurnLimit) => {
                (FailureKind::TurnLimit, format!("no submission after {} turn(s)", spent.turns))
            }
            Some(End::Halted) => invalid_submissions(failed),
            Some(End::Stopped | End::Terminated) if failed > 0 => invalid_submissions(failed),
            Some(End::Stopped | End::Terminated) => {
                (FailureKind::NoSubmit, "the model finished without calling submit".to_owned())
            }
            Some(End::Cancelled { reason }) => {
                (FailureKind::Cancelled, format!("cancelled: {reason}"))
            }
            None => {
                (FailureKind::Cancelled, "cancelled: finished before the step ended".to_owned())
            }
        };
        Err(StepFailed::new(kind, message, spent))
    }
}

fn invalid_submissions(failed: u32) -> (FailureKind, String) {
    (FailureKind::InvalidSubmissions, format!("no valid submission after {failed} attempt(s)"))
}
