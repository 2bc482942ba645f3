//! The bounded agent loop: model call, tool calls, seal, repeated until the run ends.
//!
//! A response's tool calls are judged together: calls the core settles itself (through
//! [`Hooks`], e.g. `submit`) are settled at once, unknown tools and invalid arguments get
//! error results, and the remaining calls go to the host as one [`ToolBatch`]. The seal records
//! every result in the order the model asked, then the run ends when every result of the batch
//! terminates, when the turn bound is reached, or goes on.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};
use verity_derive::TaggedDeserialize;

use crate::machine::{CallId, Input, Misuse, MisuseKind, ModelCall, Output, Settled, ToolBatch};
use crate::message::{
    AssistantMessage, Message, ModelRequest, StopReason, ToolCall, ToolOutput, ToolResult,
    ToolSpec, Usage,
};
use crate::request_failure::FailureClass;
use crate::retry::{RetryPolicy, retry_delay};

mod compaction;
mod tool;

pub use compaction::{Compaction, DROPPED, compact_oldest_tool_results};
pub use tool::Tool;

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TaggedDeserialize)]
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

impl Spent {
    /// Adds what another run spent (a machine composed of others sums theirs).
    pub(crate) fn add(&mut self, other: Spent) {
        self.turns = self.turns.saturating_add(other.turns);
        self.requests = self.requests.saturating_add(other.requests);
        self.failed_attempts = self.failed_attempts.saturating_add(other.failed_attempts);
        self.retries = self.retries.saturating_add(other.retries);
        self.usage.add(&other.usage);
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
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
        specs.extend(tools.iter().map(|tool| tool.spec().clone()));
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
        let stop = response.stop_reason();
        let Some(calls) = self.record_turn(response) else { return };
        let mut judged = self.judge_calls(calls, stop);
        let halt = self.hooks.halt();
        if halt == Halt::BeforeTools {
            judged.refuse_host_calls();
        }
        let halted = halt != Halt::No;
        self.announce_calls(&judged);
        let JudgedCalls { slots, host_calls, host_slots, host_replay_safe, sequential } = judged;
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

    /// Counts a response that was not retried as a turn and adds it to the transcript.
    /// Returns its tool calls, or `None` when it has none to judge: a failure (asked again
    /// when the server could not read the model's output and the hooks allow it, else the
    /// run ends) or a reply without calls (the run stops).
    fn record_turn(&mut self, response: AssistantMessage) -> Option<Vec<ToolCall>> {
        self.spent.requests = self.spent.requests.saturating_add(1);
        self.spent.turns = self.spent.turns.saturating_add(1);
        self.spent.usage.add(&response.usage);
        let failure = response.stop_reason().is_failure().then(|| response.failure_message());
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
            return None;
        }
        if calls.is_empty() {
            self.phase = Phase::Ended(End::Stopped);
            return None;
        }
        Some(calls)
    }

    /// Judges a response's calls in the model's order (see [`Agent::route_call`]): a slot
    /// for each, settled by the core or left open for the host call that fills it.
    fn judge_calls(&mut self, calls: Vec<ToolCall>, stop: StopReason) -> JudgedCalls {
        let mut judged = JudgedCalls {
            slots: Vec::with_capacity(calls.len()),
            host_calls: Vec::new(),
            host_slots: Vec::new(),
            host_replay_safe: Vec::new(),
            sequential: false,
        };
        for (position, call) in calls.into_iter().enumerate() {
            match self.route_call(position, &call, stop) {
                Route::Core(output) => judged.slots.push(Some(result_for(&call, output))),
                Route::Host { sequential, replay_safe } => {
                    judged.sequential |= sequential;
                    judged.host_replay_safe.push(replay_safe);
                    judged.host_slots.push(judged.slots.len());
                    judged.slots.push(None);
                    judged.host_calls.push(call);
                }
            }
        }
        judged
    }

    /// Who settles the call at `position` of a response that stopped for `stop`: the core,
    /// for a call beyond [`MAX_TOOL_CALLS`], in a cut-off response, settled by the hooks, of
    /// an unknown tool or with invalid arguments; else the host.
    fn route_call(&mut self, position: usize, call: &ToolCall, stop: StopReason) -> Route {
        if position >= MAX_TOOL_CALLS {
            return Route::Core(ToolOutput::error(TOO_MANY_CALLS));
        }
        if stop == StopReason::Length {
            self.hooks.refused(call);
            return Route::Core(ToolOutput::error(REFUSED_LENGTH));
        }
        if let Some(output) = self.hooks.settle(call) {
            return Route::Core(output);
        }
        let Some(tool) = self.tools.iter().find(|tool| tool.name() == call.name) else {
            return Route::Core(ToolOutput::error(format!(
                "unknown tool \"{}\": the available tools are {}",
                call.name,
                self.specs.iter().map(|s| format!("\"{}\"", s.name)).collect::<Vec<_>>().join(", ")
            )));
        };
        match tool.schema().check_arguments(&call.name, &call.arguments) {
            Ok(()) => {
                Route::Host { sequential: tool.is_sequential(), replay_safe: tool.is_replay_safe() }
            }
            Err(text) => Route::Core(ToolOutput::error(text)),
        }
    }

    /// The events of a judged response, in the model's order: each call, and the result of
    /// each the core settled.
    fn announce_calls(&mut self, judged: &JudgedCalls) {
        let mut host = judged.host_calls.iter();
        for slot in &judged.slots {
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

/// Who settles a call of a response, as [`Agent::route_call`] judges it.
enum Route {
    /// The core, with this result.
    Core(ToolOutput),
    /// The host, with how its tool may be scheduled.
    Host { sequential: bool, replay_safe: bool },
}

/// A response's calls once judged: one slot per call, in the model's order, settled by the
/// core or open until the host call that fills it is sealed.
struct JudgedCalls {
    slots: Vec<Option<ToolResult>>,
    /// The calls the host runs.
    host_calls: Vec<ToolCall>,
    /// For each host call, its slot.
    host_slots: Vec<usize>,
    /// For each host call, whether its tool is safe to run again.
    host_replay_safe: Vec<bool>,
    /// Whether a host call's tool must run sequentially.
    sequential: bool,
}

impl JudgedCalls {
    /// The run ends before the host calls run ([`Halt::BeforeTools`]): each is settled as not
    /// run.
    fn refuse_host_calls(&mut self) {
        for (call, slot) in self.host_calls.iter().zip(&self.host_slots) {
            self.slots[*slot] = Some(result_for(call, ToolOutput::error(NOT_RUN_ENDING)));
        }
        self.host_calls.clear();
        self.host_replay_safe.clear();
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
