//! The bounded agent loop: model call, tool calls, seal, repeated until the run ends.
//!
//! A response's tool calls are judged together: calls the core settles itself (through
//! [`Hooks`], e.g. `submit`) are settled at once, unknown tools and invalid arguments get
//! error results, and the remaining calls go to the host as one [`ToolBatch`]. The seal records
//! every result in the order the model asked, then the run ends when every result of the batch
//! terminates, when the turn bound is reached, or goes on.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::machine::{CallId, Input, Misuse, MisuseKind, ModelCall, Output, Settled, ToolBatch};
use crate::message::{
    AssistantMessage, Message, ModelRequest, StopReason, ToolCall, ToolOutput, ToolResult,
    ToolSpec, Usage,
};
use crate::request_failure::FailureClass;
use crate::retry::{RetryPolicy, retry_delay};
use crate::schema::{Schema, SchemaError};

/// Result text for a call refused because the response hit the output-token limit.
pub const REFUSED_LENGTH: &str =
    "not run: the response was cut off at the output-token limit, so this call may be incomplete";
/// Result text for a call not run because the run is ending (POLICY.md D2).
pub const NOT_RUN_ENDING: &str = "not run: the step is ending";
/// Result text for a call settled by a cancel (POLICY.md D6).
pub const ABORTED: &str = "aborted: the run was cancelled before this call finished";
/// The most tool calls one response may make; the calls after them are answered with
/// [`TOO_MANY_CALLS`] and not run (a model, or a server, could otherwise send millions).
pub const MAX_TOOL_CALLS: usize = 64;
/// Result text for a call beyond [`MAX_TOOL_CALLS`].
pub const TOO_MANY_CALLS: &str = "not run: a response may make at most 64 tool calls";

/// A tool the host runs: what the model sees, the compiled schema its arguments must satisfy,
/// and how it may be scheduled. It serializes as its spec; deserializing compiles the schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ToolRepr", into = "ToolRepr")]
pub struct Tool {
    spec: ToolSpec,
    schema: Schema,
    sequential: bool,
    replay_safe: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolRepr {
    #[serde(flatten)]
    spec: ToolSpec,
    #[serde(default)]
    sequential: bool,
    #[serde(default)]
    replay_safe: bool,
}

impl TryFrom<ToolRepr> for Tool {
    type Error = SchemaError;
    fn try_from(repr: ToolRepr) -> Result<Self, SchemaError> {
        let mut tool = Tool::new(repr.spec.name, repr.spec.description, repr.spec.parameters)?;
        // The narrower schema for constrained decoding survives a save and a restore.
        tool.spec.constrained = repr.spec.constrained;
        Ok(Self { sequential: repr.sequential, replay_safe: repr.replay_safe, ..tool })
    }
}

impl From<Tool> for ToolRepr {
    fn from(tool: Tool) -> Self {
        Self { spec: tool.spec, sequential: tool.sequential, replay_safe: tool.replay_safe }
    }
}

impl Tool {
    /// A tool whose arguments must satisfy `parameters`.
    ///
    /// # Errors
    /// When `parameters` is not a valid JSON Schema.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Result<Self, SchemaError> {
        let schema = Schema::compile(parameters.clone())?;
        Ok(Self {
            spec: ToolSpec {
                name: name.into(),
                description: description.into(),
                parameters,
                constrained: None,
            },
            schema,
            sequential: false,
            replay_safe: false,
        })
    }

    /// A narrower schema of the arguments for constrained decoding only
    /// ([`ToolSpec::constrained`]); calls are still validated against the tool's own schema.
    #[must_use]
    pub fn constrained(mut self, schema: Value) -> Self {
        self.spec.constrained = Some(schema);
        self
    }

    /// Declares that running a call of this tool twice is harmless (it only reads), so a
    /// durable host may run again a call whose result was lost in a crash.
    #[must_use]
    pub fn replay_safe(mut self) -> Self {
        self.replay_safe = true;
        self
    }

    /// Whether calls of this tool may be run again.
    #[must_use]
    pub fn is_replay_safe(&self) -> bool {
        self.replay_safe
    }

    /// Declares that calls of this tool must run one at a time, in order, with the rest of
    /// their batch.
    #[must_use]
    pub fn sequential(mut self) -> Self {
        self.sequential = true;
        self
    }

    /// Whether calls of this tool must run sequentially.
    #[must_use]
    pub fn is_sequential(&self) -> bool {
        self.sequential
    }

    /// The tool's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// What the model sees.
    #[must_use]
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The compiled schema its arguments must satisfy.
    #[must_use]
    pub fn schema(&self) -> &Schema {
        &self.schema
    }
}

/// The core-side policy of a loop: which calls the core settles itself and when a response
/// ends the run before its host calls run. `()` settles nothing.
pub trait Hooks {
    /// Settles `call` inside the core, or returns `None` to let the loop route it to the host.
    /// Called for every call of a response, in the model's order, before any host call runs.
    fn settle(&mut self, call: &ToolCall) -> Option<ToolOutput>;

    /// The host's result for `call` (one it ran), as the model will read it: a policy may
    /// rewrite it (a host-answered lookup is delimited as data like the core's own). By
    /// default it is kept as the host gave it.
    fn host_result(&mut self, call: &ToolCall, output: ToolOutput) -> ToolOutput {
        let _ = call;
        output
    }

    /// `call` was refused because the response was cut off (stop reason `length`).
    fn refused(&mut self, call: &ToolCall) {
        let _ = call;
    }

    /// The server could not read the model's output ([`FailureClass::ModelOutput`]): returns
    /// whether the loop asks the model again (the policy counts it against its own budget).
    /// By default it does not, and the run ends as a provider failure.
    fn unreadable(&mut self) -> bool {
        false
    }

    /// Asked once every call of a response is judged: whether the run ends with this
    /// response, and whether its host calls still run.
    fn halt(&self) -> Halt {
        Halt::No
    }
}

/// Whether a response ends the run, asked of [`Hooks::halt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Halt {
    /// The run goes on by the usual rules.
    No,
    /// The host calls run; the run ends when they are sealed.
    AfterTools,
    /// The run ends now; the host calls are recorded as not run.
    BeforeTools,
}

impl Hooks for () {
    fn settle(&mut self, _call: &ToolCall) -> Option<ToolOutput> {
        None
    }
}

/// Why a loop ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "end", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum End {
    /// The model answered without tool calls.
    Stopped,
    /// Every result of the last batch asked the run to end.
    Terminated,
    /// The turn bound cut off a run that would have gone on.
    TurnLimit,
    /// The last request failed.
    ProviderFailed {
        /// The failure as the transport reported it.
        message: String,
    },
    /// The hooks ended the run (e.g. the attempt budget is spent).
    Halted,
    /// The host cancelled the run.
    Cancelled {
        /// The host's reason.
        reason: String,
    },
}

/// What a loop has spent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spent {
    /// Completed turns (a failed request or a prose reply completes a turn too).
    pub turns: u32,
    /// Requests that reached the provider.
    pub requests: u32,
    /// Failed attempts (failed `submit` calls; 0 for loops without one).
    pub failed_attempts: u32,
    /// Tokens and cost, summed over requests.
    pub usage: Usage,
    /// Failed requests that were retried (each is also counted in `requests`).
    #[serde(default)]
    pub retries: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "camelCase")]
enum Phase {
    AwaitModel {
        call: CallId,
        #[serde(default)]
        delay_ms: u64,
        #[serde(default)]
        retry: u32,
    },
    AwaitTools {
        batch: CallId,
        /// One slot per call of the response, in the model's order; `None` until settled.
        slots: Vec<Option<ToolResult>>,
        /// The calls the host runs.
        host_calls: Vec<ToolCall>,
        /// For each host call, its slot.
        host_slots: Vec<usize>,
        /// For each host call, whether its tool is safe to run again.
        host_replay_safe: Vec<bool>,
        sequential: bool,
        /// The run ends when this batch is sealed.
        halted: bool,
    },
    Ended(End),
}

impl Phase {
    /// A phase read from saved state, refused (not trusted to index with) unless its tool
    /// batch is consistent: one slot per call, each host call's slot in range, distinct and
    /// open, every other slot settled.
    fn checked<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let phase = Self::deserialize(deserializer)?;
        if let Phase::AwaitTools { slots, host_calls, host_slots, host_replay_safe, .. } = &phase {
            let refuse =
                |why: &str| Err(serde::de::Error::custom(format!("a saved tool batch {why}")));
            if host_slots.len() != host_calls.len() || host_replay_safe.len() != host_calls.len() {
                return refuse("has a different number of host calls, slots and flags");
            }
            let mut open = vec![false; slots.len()];
            for &slot in host_slots {
                match slots.get(slot) {
                    Some(None) if !open[slot] => open[slot] = true,
                    Some(None) => return refuse("gives two host calls one slot"),
                    Some(Some(_)) => return refuse("has a host call in a settled slot"),
                    None => return refuse("has a host call's slot out of range"),
                }
            }
            if slots.iter().zip(&open).any(|(slot, open)| slot.is_none() && !open) {
                return refuse("has an open slot no host call fills");
            }
        }
        Ok(phase)
    }
}

/// The bounded agent loop, generic over its core-side policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Agent<H> {
    system: String,
    messages: Vec<Message>,
    /// Advertised to the model: the hooks' tools, then the host tools.
    specs: Vec<ToolSpec>,
    tools: Vec<Tool>,
    max_turns: u32,
    spent: Spent,
    next_id: u64,
    /// Checked when restored: a saved state is untrusted input.
    #[serde(deserialize_with = "Phase::checked")]
    phase: Phase,
    hooks: H,
    #[serde(default)]
    retry: RetryPolicy,
    #[serde(default)]
    compaction: Option<Compaction>,
    #[serde(default)]
    events: Vec<Event>,
    /// The last model call announced with [`Event::ModelCall`].
    #[serde(default)]
    announced: Option<CallId>,
    /// The output limit of this loop's calls ([`ModelRequest::output_limit`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output_limit: Option<u32>,
    /// Whether this loop's calls ask for the first token's probabilities
    /// ([`ModelRequest::probe`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    probe: Option<crate::message::Probe>,
}

pub use crate::event::Event;

/// The default compaction: after each seal, when the transcript holds more than `max_chars`
/// characters, the oldest tool results are dropped (their text replaced by a notice) until it
/// fits. The system prompt and the task are never touched, and no message is removed, so every
/// call keeps its one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Compaction {
    /// The transcript's budget, in characters of message text.
    pub max_chars: usize,
}

/// The text that replaces a dropped tool result.
pub const DROPPED: &str = "[this tool result was dropped to fit the context window]";

/// Drops the oldest tool results of `messages` until their text fits in `max_chars`; returns
/// how many were dropped. The default compaction hook.
pub fn compact_oldest_tool_results(messages: &mut [Message], max_chars: usize) -> usize {
    let mut size: usize = messages.iter().map(message_chars).sum();
    let mut dropped = 0;
    for message in messages.iter_mut() {
        if size <= max_chars {
            break;
        }
        if let Message::ToolResult(result) = message {
            let output = &mut result.output;
            if output.content == DROPPED {
                continue;
            }
            size -= output.content.chars().count();
            size += DROPPED.chars().count();
            output.content = DROPPED.to_owned();
            output.details = Value::Null;
            dropped += 1;
        }
    }
    dropped
}

fn message_chars(message: &Message) -> usize {
    match message {
        Message::User { text } => text.chars().count(),
        Message::ToolResult(result) => result.output.content.chars().count(),
        Message::Assistant(response) => response
            .content
            .iter()
            .map(|block| match block {
                crate::message::ContentBlock::Text { text } => text.chars().count(),
                crate::message::ContentBlock::Thinking { thinking, .. } => thinking.chars().count(),
                crate::message::ContentBlock::ToolCall(call) => {
                    call.name.len() + call.arguments.to_string().chars().count()
                }
            })
            .sum(),
    }
}

impl<H: Hooks> Agent<H> {
    /// A loop with `system`, a first user message `task`, `core_tools` settled by `hooks`,
    /// host `tools` and a turn bound (at least 1).
    #[must_use]
    pub fn new(
        system: impl Into<String>,
        task: impl Into<String>,
        core_tools: Vec<ToolSpec>,
        tools: Vec<Tool>,
        max_turns: u32,
        hooks: H,
    ) -> Self {
        let mut specs = core_tools;
        specs.extend(tools.iter().map(|tool| tool.spec.clone()));
        Self {
            system: system.into(),
            messages: vec![Message::User { text: task.into() }],
            specs,
            tools,
            max_turns: max_turns.max(1),
            spent: Spent::default(),
            next_id: 1,
            phase: Phase::AwaitModel { call: CallId(0), delay_ms: 0, retry: 0 },
            hooks,
            retry: RetryPolicy::default(),
            compaction: None,
            events: Vec::new(),
            announced: None,
            output_limit: None,
            probe: None,
        }
    }

    /// Asks for the first token's probabilities in this loop's calls (a one-token answer,
    /// see [`ModelRequest::probe`]).
    #[must_use]
    pub fn with_probe(mut self, probe: crate::message::Probe) -> Self {
        self.probe = Some(probe);
        self
    }

    /// The output limit of this loop's calls when the provider's configuration sets none
    /// ([`ModelRequest::output_limit`]).
    #[must_use]
    pub fn with_output_limit(mut self, limit: u32) -> Self {
        self.output_limit = Some(limit);
        self
    }

    /// Retries failed requests the provider marked retryable, within `policy`'s budget.
    #[must_use]
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Compacts the transcript after each seal (see [`Compaction`]); a request refused for
    /// context overflow is then compacted harder and retried, within the retry budget.
    #[must_use]
    pub fn with_compaction(mut self, compaction: Compaction) -> Self {
        self.compaction = Some(compaction);
        self
    }

    /// The events since the last drain; the pending model call is announced
    /// ([`Event::ModelCall`]) once.
    pub fn drain_events(&mut self) -> Vec<Event> {
        if let Phase::AwaitModel { call, delay_ms, retry } = self.phase
            && self.announced != Some(call)
        {
            self.announced = Some(call);
            self.events.push(Event::ModelCall { call, retry, delay_ms });
        }
        std::mem::take(&mut self.events)
    }

    /// The host's compaction hook: edit the transcript's messages in place (their number and
    /// order cannot change, so every call keeps its one result). Call it between outputs,
    /// typically after a seal.
    pub fn compact_with(&mut self, edit: impl FnOnce(&mut [Message])) {
        edit(&mut self.messages);
    }

    /// The transcript so far.
    #[must_use]
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The core-side policy.
    #[must_use]
    pub fn hooks(&self) -> &H {
        &self.hooks
    }

    /// What the loop has spent.
    #[must_use]
    pub fn spent(&self) -> Spent {
        self.spent
    }

    /// Why the loop ended, once it has.
    #[must_use]
    pub fn end(&self) -> Option<&End> {
        match &self.phase {
            Phase::Ended(end) => Some(end),
            _ => None,
        }
    }

    /// Consumes the loop into its hooks, transcript and end.
    #[must_use]
    pub fn into_parts(self) -> (H, Vec<Message>, Option<End>, Spent) {
        let end = match self.phase {
            Phase::Ended(end) => Some(end),
            _ => None,
        };
        (self.hooks, self.messages, end, self.spent)
    }

    /// What the host must do next.
    pub fn poll_output(&mut self) -> Output<'_> {
        match &self.phase {
            Phase::AwaitModel { call, delay_ms, retry } => Output::CallModel(ModelCall {
                id: *call,
                delay_ms: *delay_ms,
                retry: *retry,
                request: ModelRequest {
                    system: &self.system,
                    messages: &self.messages,
                    tools: &self.specs,
                    output_limit: self.output_limit,
                    probe: self.probe,
                },
            }),
            Phase::AwaitTools { batch, host_calls, sequential, host_replay_safe, .. } => {
                Output::RunTools(ToolBatch {
                    id: *batch,
                    calls: host_calls,
                    sequential: *sequential,
                    replay_safe: host_replay_safe,
                })
            }
            Phase::Ended(_) => Output::Done,
        }
    }

    /// An answer to the current output.
    ///
    /// # Errors
    /// [`Misuse`] when the input does not answer the current output; nothing changes then.
    pub fn handle_input(&mut self, input: Input) -> Result<(), Misuse> {
        match input {
            Input::ModelResponse { call, response } => match &self.phase {
                Phase::AwaitModel { call: expected, .. } if *expected == call => {
                    self.on_response(call, response);
                    Ok(())
                }
                phase => Err(unexpected(phase, &format!("a model response for {call}"))),
            },
            Input::Seal { batch, results } => self.on_seal(batch, results),
            Input::Cancel { reason } => self.cancel(reason),
        }
    }

    /// Numbers this loop's outputs from `first` on, so a machine composed of several loops
    /// never reuses an id. Only meaningful before the first input.
    pub(crate) fn starting_at(mut self, first: u64) -> Self {
        self.phase = Phase::AwaitModel { call: CallId(first), delay_ms: 0, retry: 0 };
        self.next_id = first.saturating_add(1);
        self
    }

    /// The first id this loop has not used.
    pub(crate) fn next_free_id(&self) -> u64 {
        self.next_id
    }

    fn fresh_id(&mut self) -> CallId {
        let id = CallId(self.next_id);
        self.next_id = self.next_id.saturating_add(1);
        id
    }

    /// A failed request the retry layer takes: counted as a request, not a turn, and asked
    /// again after the policy's delay. Returns whether it was taken.
    fn retry_failure(&mut self, response: &AssistantMessage) -> bool {
        let attempt = self.spent.retries + 1;
        let overflow = response.stop_reason() == StopReason::Error
            && response.error.as_ref().is_some_and(|e| e.class == FailureClass::ContextOverflow);
        let delay = if overflow && attempt <= self.retry.max_retries {
            let Some(compaction) = self.compaction else { return false };
            // Compact harder than the budget that overflowed: to half of it.
            let dropped = compact_oldest_tool_results(&mut self.messages, compaction.max_chars / 2);
            if dropped == 0 {
                return false;
            }
            self.events.push(Event::Compacted { dropped });
            0
        } else {
            match retry_delay(&self.retry, self.spent.retries, response) {
                Some(delay) => delay,
                None => return false,
            }
        };
        self.spent.requests = self.spent.requests.saturating_add(1);
        self.spent.retries = attempt;
        self.spent.usage.add(&response.usage);
        self.events.push(Event::Retry {
            attempt,
            delay_ms: delay,
            message: response.failure_message(),
        });
        let call = self.fresh_id();
        self.phase = Phase::AwaitModel { call, delay_ms: delay, retry: attempt };
        true
    }

    fn on_response(&mut self, call: CallId, response: AssistantMessage) {
        self.events.push(Event::ModelAnswered {
            call,
            stop_reason: response.stop_reason(),
            tool_calls: response.tool_calls().count(),
            usage: response.usage,
            error: response.stop_reason().is_failure().then(|| response.failure_message()),
        });
        if self.retry_failure(&response) {
            return;
        }
        self.spent.requests = self.spent.requests.saturating_add(1);
        self.spent.turns = self.spent.turns.saturating_add(1);
        self.spent.usage.add(&response.usage);
        let stop = response.stop_reason();
        let failure = stop.is_failure().then(|| response.failure_message());
        let calls: Vec<ToolCall> =
            if failure.is_some() { Vec::new() } else { response.tool_calls().cloned().collect() };
        let unreadable = failure.is_some()
            && response.error.as_ref().is_some_and(|e| e.class == FailureClass::ModelOutput);
        self.messages.push(Message::Assistant(response));
        if let Some(message) = failure {
            // The wire leaves a failed response out, so asking again re-samples the same turn.
            self.phase =
                if unreadable && self.spent.turns < self.max_turns && self.hooks.unreadable() {
                    Phase::AwaitModel { call: self.fresh_id(), delay_ms: 0, retry: 0 }
                } else {
                    Phase::Ended(End::ProviderFailed { message })
                };
            return;
        }
        if calls.is_empty() {
            self.phase = Phase::Ended(End::Stopped);
            return;
        }

        let mut slots = Vec::with_capacity(calls.len());
        let mut host_calls = Vec::new();
        let mut host_slots = Vec::new();
        let mut host_replay_safe = Vec::new();
        let mut sequential = false;
        for (position, call) in calls.into_iter().enumerate() {
            let settled = if position >= MAX_TOOL_CALLS {
                Some(ToolOutput::error(TOO_MANY_CALLS))
            } else if stop == StopReason::Length {
                self.hooks.refused(&call);
                Some(ToolOutput::error(REFUSED_LENGTH))
            } else if let Some(output) = self.hooks.settle(&call) {
                Some(output)
            } else if let Some(tool) = self.tools.iter().find(|tool| tool.spec.name == call.name) {
                match tool.schema.check_arguments(&call.name, &call.arguments) {
                    Ok(()) => {
                        sequential |= tool.sequential;
                        host_replay_safe.push(tool.replay_safe);
                        None
                    }
                    Err(text) => Some(ToolOutput::error(text)),
                }
            } else {
                Some(ToolOutput::error(format!(
                    "unknown tool \"{}\": the available tools are {}",
                    call.name,
                    self.specs
                        .iter()
                        .map(|s| format!("\"{}\"", s.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            };
            match settled {
                Some(output) => slots.push(Some(result_for(&call, output))),
                None => {
                    host_slots.push(slots.len());
                    slots.push(None);
                    host_calls.push(call);
                }
            }
        }

        let halt = self.hooks.halt();
        if halt == Halt::BeforeTools {
            for (call, slot) in host_calls.iter().zip(&host_slots) {
                slots[*slot] = Some(result_for(call, ToolOutput::error(NOT_RUN_ENDING)));
            }
            host_calls.clear();
            host_replay_safe.clear();
        }
        let halted = halt != Halt::No;
        let mut host = host_calls.iter();
        for slot in &slots {
            match slot {
                Some(result) => {
                    self.events.push(Event::ToolCall {
                        call_id: result.call_id.clone(),
                        tool: result.tool_name.clone(),
                        host: false,
                    });
                    self.events.push(settled_event(result, false));
                }
                None => {
                    let call = host.next().expect("one host call per open slot");
                    self.events.push(Event::ToolCall {
                        call_id: call.id.clone(),
                        tool: call.name.clone(),
                        host: true,
                    });
                }
            }
        }
        if host_calls.is_empty() {
            self.seal(slots.into_iter().flatten().collect(), halted);
        } else {
            let batch = self.fresh_id();
            self.phase = Phase::AwaitTools {
                batch,
                slots,
                host_calls,
                host_slots,
                host_replay_safe,
                sequential,
                halted,
            };
        }
    }

    fn on_seal(&mut self, batch: CallId, results: Vec<Settled>) -> Result<(), Misuse> {
        let Phase::AwaitTools { batch: expected, slots, host_calls, host_slots, halted, .. } =
            &self.phase
        else {
            return Err(unexpected(&self.phase, &format!("a seal for {batch}")));
        };
        if *expected != batch {
            return Err(unexpected(&self.phase, &format!("a seal for {batch}")));
        }
        // Match results to calls by id (a multiset: a model may repeat an id): each id's
        // positions in order, taken one per result.
        let mut filled: Vec<Option<ToolResult>> = vec![None; host_calls.len()];
        let mut by_id: HashMap<&str, VecDeque<usize>> = HashMap::new();
        for (i, call) in host_calls.iter().enumerate() {
            by_id.entry(call.id.as_str()).or_default().push_back(i);
        }
        for settled in results {
            let position = by_id.get_mut(settled.call_id.as_str()).and_then(VecDeque::pop_front);
            match position {
                Some(i) => {
                    let output = self.hooks.host_result(&host_calls[i], settled.output);
                    filled[i] = Some(result_for(&host_calls[i], output));
                }
                None => {
                    return Err(Misuse::new(
                        MisuseKind::WrongCalls,
                        format!(
                            "the seal of {batch} has a result for call \"{}\", which is not an open call of that batch",
                            settled.call_id
                        ),
                    ));
                }
            }
        }
        if let Some(missing) = filled.iter().position(Option::is_none) {
            return Err(Misuse::new(
                MisuseKind::WrongCalls,
                format!(
                    "the seal of {batch} has no result for call \"{}\"",
                    host_calls[missing].id
                ),
            ));
        }
        let halted = *halted;
        let mut slots = slots.clone();
        for (result, slot) in filled.into_iter().zip(host_slots) {
            if let Some(result) = &result {
                self.events.push(settled_event(result, true));
            }
            slots[*slot] = result;
        }
        self.seal(slots.into_iter().flatten().collect(), halted);
        Ok(())
    }

    fn seal(&mut self, results: Vec<ToolResult>, halted: bool) {
        let all_terminate = results.iter().all(|result| result.output.terminate);
        self.messages.extend(results.into_iter().map(Message::ToolResult));
        if let Some(compaction) = self.compaction {
            let dropped = compact_oldest_tool_results(&mut self.messages, compaction.max_chars);
            if dropped > 0 {
                self.events.push(Event::Compacted { dropped });
            }
        }
        self.phase = if halted {
            Phase::Ended(End::Halted)
        } else if all_terminate {
            Phase::Ended(End::Terminated)
        } else if self.spent.turns >= self.max_turns {
            Phase::Ended(End::TurnLimit)
        } else {
            Phase::AwaitModel { call: self.fresh_id(), delay_ms: 0, retry: 0 }
        };
    }

    fn cancel(&mut self, reason: String) -> Result<(), Misuse> {
        match std::mem::replace(&mut self.phase, Phase::Ended(End::Stopped)) {
            Phase::Ended(end) => {
                self.phase = Phase::Ended(end);
                Err(Misuse::new(MisuseKind::Finished, "cancel after the run ended"))
            }
            Phase::AwaitModel { .. } => {
                self.phase = Phase::Ended(End::Cancelled { reason });
                Ok(())
            }
            Phase::AwaitTools { slots, host_calls, host_slots, .. } => {
                let mut slots = slots;
                for (call, slot) in host_calls.iter().zip(host_slots) {
                    let result = result_for(call, ToolOutput::error(ABORTED));
                    self.events.push(settled_event(&result, true));
                    slots[slot] = Some(result);
                }
                self.messages.extend(slots.into_iter().flatten().map(Message::ToolResult));
                self.phase = Phase::Ended(End::Cancelled { reason });
                Ok(())
            }
        }
    }
}

fn settled_event(result: &ToolResult, host: bool) -> Event {
    Event::ToolSettled {
        call_id: result.call_id.clone(),
        tool: result.tool_name.clone(),
        is_error: result.output.is_error,
        host,
    }
}

fn result_for(call: &ToolCall, output: ToolOutput) -> ToolResult {
    ToolResult { call_id: call.id.clone(), tool_name: call.name.clone(), output }
}

fn unexpected(phase: &Phase, got: &str) -> Misuse {
    let (kind, expected) = match phase {
        Phase::AwaitModel { call, .. } => {
            (MisuseKind::UnexpectedInput, format!("a model response for {call}"))
        }
        Phase::AwaitTools { batch, .. } => {
            (MisuseKind::UnexpectedInput, format!("a seal for {batch}"))
        }
        Phase::Ended(_) => (MisuseKind::Finished, "nothing: the run has ended".to_owned()),
    };
    Misuse::new(kind, format!("expected {expected}, got {got}"))
}
