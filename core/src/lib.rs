//! Verity's engine: typed LLM agent steps and claim checking, as sans-IO state machines.
//!
//! This crate contains no networking code, reads no clock, draws no randomness, starts no
//! thread and needs no async runtime. It decides what should happen next; its host (a browser,
//! a WebAssembly component host, a native test) makes the HTTP requests, runs the tools and
//! feeds the answers back. That is why it builds for `wasm32-unknown-unknown` unchanged, and
//! why its state can be serialized after any input and resumed later.
//!
//! # Example
//!
//! A scripted model drives a typed step: the first `submit` is invalid, the model repairs it.
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//! use verity_core::{drive, step, AssistantMessage, NoTools, ScriptedModel};
//!
//! #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
//! struct Answer {
//!     answer: String,
//! }
//!
//! let model = ScriptedModel::new([
//!     AssistantMessage::tool_call("c1", "submit", json!({ "answer": 42 })), // not a string
//!     AssistantMessage::tool_call("c2", "submit", json!({ "answer": "42" })),
//! ]);
//! let machine = step::<Answer>("You answer by calling submit.", "What is the answer?")
//!     .build()
//!     .expect("a valid configuration");
//! let value = pollster::block_on(drive(machine, &model, &NoTools)).expect("a valid submission");
//! assert_eq!(value, Answer { answer: "42".into() });
//! assert_eq!(model.requests(), 2);
//! ```
//!
//! # Brief overview
//!
//! - [`Machine`] is the protocol: [`Machine::poll_output`] says what to do next
//!   ([`Output::CallModel`], [`Output::RunTools`] or [`Output::Done`]), and
//!   [`Machine::handle_input`] takes the answer ([`Input::ModelResponse`], [`Input::Seal`],
//!   [`Input::Cancel`]). A wrong answer is a [`Misuse`] value; the state is unchanged.
//! - [`Agent`] is the bounded loop (model call, tool calls, seal) that every engine is built
//!   on; [`Hooks`] lets an engine settle some calls in the core, as the step does with `submit`.
//! - [`Step`] is the typed step, built with [`step()`] (schema derived from a Rust type) or
//!   [`value_step`] (a [`Schema`] that arrives at run time). It fails with [`StepFailed`],
//!   which carries a [`FailureKind`] and what was [`Spent`].
//! - [`Schema`] is a compiled JSON Schema: strict (no coercion), compiled once and shared.
//! - Messages are provider-neutral: [`AssistantMessage`] with [`ContentBlock`]s,
//!   [`ToolCall`], [`ToolResult`], [`StopReason`], [`Usage`].
//! - [`drive()`] runs any machine over a [`Transport`] and [`Tools`]; [`ScriptedModel`] is a
//!   transport that answers from a script.
//!
//! # The driver loop
//!
//! A host that does not use [`drive()`] writes the same loop:
//!
//! 1. Call `poll_output()`.
//! 2. On `CallModel(call)`: send `call.request` to the model, then
//!    `handle_input(Input::ModelResponse { call: call.id, response })`. A failed request is a
//!    response with stop reason `error`.
//! 3. On `RunTools(batch)`: run every call of `batch.calls` (in order, one at a time, if
//!    `batch.sequential`; otherwise in any order), retrying, timing out or asking for approval
//!    as the host sees fit, then `handle_input(Input::Seal { batch: batch.id, results })` with
//!    one result per call.
//! 4. Repeat until `Done`, then call `finish()` for the value or the typed failure.
//!
//! The same loop written out, for a job from its JSON configuration (as a host in another
//! language writes it against the component): a step whose model answers in two turns.
//!
//! ```
//! use serde_json::json;
//! use verity_core::{AssistantMessage, Input, Job, JobConfig, Machine, Output, ScriptedModel};
//!
//! let config = JobConfig::from_value(json!({
//!     "kind": "step",
//!     "prompt": "Name the tower's city.",
//!     "schema": {"type": "object", "properties": {"city": {"type": "string"}},
//!                "required": ["city"]},
//! }))
//! .expect("a valid configuration");
//! let mut job = Job::new(config, &[]).expect("a job");
//! let model = ScriptedModel::new([
//!     AssistantMessage::tool_call("c1", "submit", json!({"city": 75})), // told why, again
//!     AssistantMessage::tool_call("c2", "submit", json!({"city": "Paris"})),
//! ]);
//! loop {
//!     let input = match job.poll_output() {
//!         Output::CallModel(call) => {
//!             // A real host sends `call.request` through a provider codec here.
//!             Input::ModelResponse { call: call.id, response: model.answer(call.request) }
//!         }
//!         Output::Done => break,
//!         // `RunTools` for a job with host tools: run them, then `Input::Seal` the results.
//!         other => unreachable!("this step has no host tools: {other:?}"),
//!     };
//!     job.handle_input(input).expect("an answer to what was asked");
//! }
//! assert_eq!(job.finish().expect("a valid submission"), json!({"city": "Paris"}));
//! assert_eq!(model.requests(), 2);
//! ```
//!
//! At any point the host may serialize the machine (serde) and resume later, or send
//! `Input::Cancel` to stop it: no further model call is made and every open call is recorded as
//! aborted.
//!
//! The surface: the items above are at the crate's root; modules are public only where a host
//! reaches a family of items by path (`claim`, `corpus`, `indexed`, `provider`, `retrieve`,
//! `session`, `log`, `files`, `agent`, `retry`). The machines' plumbing (`drive`, `event`,
//! `job`, `machine`, `message`, `step`, `schema`, the failure kinds, the scripted model) lives
//! in private modules whose public items are re-exported here, so a module can be split or
//! renamed without breaking a host.
#![deny(missing_docs)]

pub mod agent;
pub mod answer;
pub mod claim;
pub mod corpus;
mod drive;
mod event;
pub mod files;
pub mod indexed;
mod job;
pub mod log;
mod machine;
mod message;
pub mod provider;
mod request_failure;
pub mod retrieve;
pub mod retry;
mod run_failure;
mod schema;
#[cfg(all(test, feature = "full-json-schema", not(target_arch = "wasm32")))]
mod schema_agreement;
mod scripted;
mod segment;
pub mod session;
mod step;

pub use agent::{Agent, Compaction, End, Halt, Hooks, Spent, Tool};
pub use claim::{
    Assessment, ClaimCheck, ClaimFailed, ClaimFailureKind, ClaimOptions, LookupMode, Report, Route,
    Verdict,
};
pub use corpus::{Corpus, CorpusId};
pub use drive::{
    Cancel, DriveOptions, NoTools, Tools, Transport, drive, drive_session, drive_session_with,
    drive_with,
};
pub use event::{ClaimStage, Event};
pub use indexed::IndexedCorpus;
pub use job::{
    AnswerConfig, ClaimConfig, ConfigError, DEFAULT_STEP_SYSTEM, Job, JobConfig, JobFailed,
    JobFailureKind, JobValue, RestoreError, StepConfig,
};
pub use log::{Entry, Lease, Log, SessionError};
pub use machine::{
    CallId, Input, Machine, Misuse, MisuseKind, ModelCall, Output, OwnedModelCall, OwnedOutput,
    OwnedToolBatch, Settled, ToolBatch,
};
pub use message::{
    AssistantMessage, ContentBlock, FirstToken, Message, ModelRequest, OwnedModelRequest, Probe,
    StopReason, TokenLogprob, ToolCall, ToolOutput, ToolResult, ToolSpec, Usage,
};
pub use provider::{
    AnthropicConfig, Delta, HttpBody, HttpClient, HttpFailure, HttpRequest, HttpResponse,
    OpenAiConfig, Price, PriceTable, Provider, ProviderTransport, ResponseHead, StreamDecoder,
    ToolChoice,
};
pub use request_failure::{FailureClass, ProviderError};
pub use retry::RetryPolicy;
pub use run_failure::{Failed, FailureKindOf};
pub use schema::{Schema, SchemaError, Violation};
pub use scripted::{SCRIPT_EXHAUSTED, ScriptedModel};
pub use session::{
    Append, DurableLog, MemoryStore, Session, SessionOutput, Store, UNKNOWN_OUTCOME,
    interrupted_outcome,
};
pub use step::{FailureKind, Step, StepBuilder, StepFailed, StepOptions, step, value_step};
