//! What happens inside a machine, as typed, serializable events the host drains
//! ([`crate::Machine::drain_events`]) after each input: the one place progress comes from.
//!
//! A machine composed of others (a claim check holds an assessment loop, a research agent and
//! a summary step) passes its inner machines' events on, in order. Streamed text arrives at the
//! host, not the machine: a host that wants it in the same stream hands each piece to the job
//! ([`crate::Job::record_delta`]), which queues it as an [`Event::Delta`].

use serde::Serialize;
use verity_derive::TaggedDeserialize;

use crate::answer::report::SentenceReport;
use crate::message::{CallId, Delta, StopReason, Usage};

/// Something a host may want to show or log.
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
#[non_exhaustive]
pub enum Event {
    /// A claim check entered a stage.
    Stage {
        /// Which one.
        #[serde(flatten)]
        stage: ClaimStage,
    },
    /// The machine asks for a model call (the host's next output is this `CallModel`).
    ModelCall {
        /// The call's id.
        call: CallId,
        /// 0 for a first try, else which retry.
        retry: u32,
        /// How long the host waits before making it.
        delay_ms: u64,
    },
    /// A model call was answered.
    ModelAnswered {
        /// The call's id.
        call: CallId,
        /// Why the response ended (`error` or `aborted` for a failed request).
        stop_reason: StopReason,
        /// How many tool calls it asked for.
        tool_calls: usize,
        /// What it cost (tokens, and dollars when priced).
        usage: Usage,
        /// The failure, for a failed request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A tool call the model asked for: `host` says whether the host runs it (it is in the
    /// next `RunTools` batch) or the core settles it (`submit`, `lookup_evidence`, refusals).
    ToolCall {
        /// The model's id for the call.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// Whether the host runs it.
        host: bool,
    },
    /// A tool call was settled (by the core, or by the host's seal).
    ToolSettled {
        /// The model's id for the call.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// Whether its result is an error.
        is_error: bool,
        /// Whether the host ran it.
        host: bool,
    },
    /// A failed request will be retried (it counts as a request, not as a turn).
    Retry {
        /// Which retry (1 for the first).
        attempt: u32,
        /// How long the host should wait first.
        delay_ms: u64,
        /// The failure being retried.
        message: String,
    },
    /// Tool results were dropped from the transcript to fit the context window.
    Compacted {
        /// How many results were dropped.
        dropped: usize,
    },
    /// An answer check started checking a sentence: the events up to its
    /// [`Event::SentenceChecked`] are that sentence's.
    SentenceStarted {
        /// The sentence's place in the answer, from 0.
        index: usize,
    },
    /// An answer check ended a sentence's check (the answer's report has it too).
    SentenceChecked {
        /// The sentence, with its status, citations and marks.
        sentence: Box<SentenceReport>,
    },
    /// A piece of a streamed response, as the host received it.
    Delta {
        /// The model call it belongs to.
        call: CallId,
        /// The piece.
        delta: Delta,
    },
}

/// The stages of a claim check, in the order they can happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TaggedDeserialize)]
#[serde(tag = "stage", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ClaimStage {
    /// Evidence was retrieved for the claim.
    Retrieve {
        /// How many items the first assessment is given.
        evidence: usize,
    },
    /// The first assessment.
    Assess,
    /// A turn of the research agent (the first assessment was `insufficient`).
    Research {
        /// Which turn, from 1.
        turn: u32,
        /// The research agent's turn bound.
        of: u32,
    },
    /// The second assessment, with the evidence research found.
    Reassess {
        /// How many items it is given.
        evidence: usize,
    },
    /// The summary step.
    Summary,
}
