//! The sans-IO protocol every engine speaks: the host polls for what to do, does it, and
//! answers with an input.

use std::fmt;

use serde::{Deserialize, Serialize};
use verity_derive::TaggedDeserialize;

pub use crate::message::CallId;
use crate::message::{AssistantMessage, ModelRequest, OwnedModelRequest, ToolCall, ToolOutput};

/// A model call the host must make.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
#[must_use]
pub struct ModelCall<'a> {
    /// Answer with [`Input::ModelResponse`] carrying this id.
    pub id: CallId,
    /// Wait this long before making the call: non-zero for a retry (the retry layer's backoff
    /// or the provider's `Retry-After`). The host sleeps; the core reads no clock.
    pub delay_ms: u64,
    /// 0 for a first try, else which retry this is.
    pub retry: u32,
    /// What to send to the model.
    pub request: ModelRequest<'a>,
}

/// Tool calls the host must settle, then answer all at once with [`Input::Seal`].
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
#[must_use]
pub struct ToolBatch<'a> {
    /// Answer with [`Input::Seal`] carrying this id.
    pub id: CallId,
    /// The calls to run, in the order the model made them. Their arguments are already
    /// validated against the tool's schema.
    pub calls: &'a [ToolCall],
    /// A tool in the batch declared sequential execution: run the calls one at a time, in
    /// order. Otherwise they may run concurrently.
    pub sequential: bool,
    /// For each call, whether its tool declared itself safe to run again (read-only): a
    /// durable host may re-run such a call whose result was lost, and must not re-run others.
    pub replay_safe: &'a [bool],
}

/// What the host must do next. Level-triggered: until it is answered, polling again returns
/// the same output with the same id, so a host that lost track (or resumed) can replay it.
/// A machine may have several pending at once ([`Machine::poll_outputs`]).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[must_use]
#[non_exhaustive]
pub enum Output<'a> {
    /// Make this model call.
    CallModel(ModelCall<'a>),
    /// Run these tool calls.
    RunTools(ToolBatch<'a>),
    /// The machine has finished: call [`Machine::finish`].
    Done,
}

impl Output<'_> {
    /// Copies the output out of the machine: the form a host sends to another thread, a
    /// worker or a component, and reads back (it serializes to the same JSON as `self`).
    pub fn to_owned_output(&self) -> OwnedOutput {
        match self {
            Output::CallModel(call) => OwnedOutput::CallModel(OwnedModelCall {
                id: call.id,
                delay_ms: call.delay_ms,
                retry: call.retry,
                request: call.request.to_owned_request(),
            }),
            Output::RunTools(batch) => OwnedOutput::RunTools(OwnedToolBatch {
                id: batch.id,
                calls: batch.calls.to_vec(),
                sequential: batch.sequential,
                replay_safe: batch.replay_safe.to_vec(),
            }),
            Output::Done => OwnedOutput::Done,
        }
    }
}

/// An owned [`ModelCall`]; same JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnedModelCall {
    /// Answer with [`Input::ModelResponse`] carrying this id.
    pub id: CallId,
    /// Wait this long before making the call.
    pub delay_ms: u64,
    /// 0 for a first try, else which retry this is.
    pub retry: u32,
    /// What to send to the model.
    pub request: OwnedModelRequest,
}

/// An owned [`ToolBatch`]; same JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnedToolBatch {
    /// Answer with [`Input::Seal`] carrying this id.
    pub id: CallId,
    /// The calls to run, in the model's order, arguments validated.
    pub calls: Vec<ToolCall>,
    /// Run the calls one at a time, in order.
    pub sequential: bool,
    /// For each call, whether its tool is safe to run again.
    pub replay_safe: Vec<bool>,
}

/// An owned [`Output`], which also deserializes: what crosses a `postMessage` or a component
/// boundary. Same JSON as [`Output`].
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum OwnedOutput {
    /// Make this model call.
    CallModel(OwnedModelCall),
    /// Run these tool calls.
    RunTools(OwnedToolBatch),
    /// The machine has finished.
    Done,
}

impl From<Output<'_>> for OwnedOutput {
    fn from(output: Output<'_>) -> Self {
        output.to_owned_output()
    }
}

/// One settled tool call of a seal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settled {
    /// The id of the call (as the model gave it).
    pub call_id: String,
    /// Its result.
    #[serde(flatten)]
    pub output: ToolOutput,
}

/// An answer from the host.
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Input {
    /// The response to a [`ModelCall`]; a failed request is a response whose stop reason is
    /// `error` or `aborted`.
    ModelResponse {
        /// The id of the model call this answers.
        call: CallId,
        /// The model's response.
        response: AssistantMessage,
    },
    /// The results of every call of a [`ToolBatch`], in any order.
    Seal {
        /// The id of the batch this closes.
        batch: CallId,
        /// One result per call of the batch.
        results: Vec<Settled>,
    },
    /// Stop: no further model call is made; every open tool call is recorded as aborted.
    Cancel {
        /// Why, for the record.
        reason: String,
    },
}

/// What kind of misuse a [`Misuse`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum MisuseKind {
    /// The input answers an output that is not the current one (wrong id or wrong kind).
    UnexpectedInput,
    /// A seal whose call ids are not exactly the batch's.
    WrongCalls,
    /// The machine has already finished.
    Finished,
}

/// An input the machine refused: a bug in the host, reported as a value. The machine's state
/// is unchanged by a refused input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Misuse {
    /// What kind of mistake.
    pub kind: MisuseKind,
    /// What was expected and what arrived.
    pub message: String,
}

impl Misuse {
    pub(crate) fn new(kind: MisuseKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

impl fmt::Display for Misuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "machine misuse: {}", self.message)
    }
}

impl std::error::Error for Misuse {}

/// A sans-IO engine: a typed step, an agent loop, a claim check.
pub trait Machine {
    /// What a successful run returns.
    type Value;
    /// What a failed run returns.
    type Error: std::error::Error;

    /// What the host must do next (level-triggered, see [`Output`]).
    fn poll_output(&mut self) -> Output<'_>;

    /// Every output pending at once, which the host may carry out concurrently and answer in
    /// any order (each answer names its output's id). Empty once the machine is done. The
    /// first is what [`poll_output`](Self::poll_output) returns, so a host that answers one
    /// output at a time needs nothing else. A machine that does one thing at a time (a step,
    /// a claim check) returns its one output; an answer check returns one for each sentence in
    /// flight, up to its configured concurrency.
    fn poll_outputs(&mut self) -> Vec<Output<'_>> {
        match self.poll_output() {
            Output::Done => Vec::new(),
            output => vec![output],
        }
    }

    /// An answer to a pending output (the current one, or any of [`poll_outputs`](Self::poll_outputs)).
    ///
    /// # Errors
    /// [`Misuse`] for an input that does not answer a pending output; the state is unchanged.
    fn handle_input(&mut self, input: Input) -> Result<(), Misuse>;

    /// The events since the last drain (see [`crate::Event`]); machines without any return
    /// none.
    fn drain_events(&mut self) -> Vec<crate::event::Event> {
        Vec::new()
    }

    /// The value or the typed failure. Meaningful once `poll_output` returned
    /// [`Output::Done`]; before that, the run is treated as cancelled.
    ///
    /// # Errors
    /// The machine's typed failure.
    fn finish(self) -> Result<Self::Value, Self::Error>;
}
