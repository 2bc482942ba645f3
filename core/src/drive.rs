//! A runtime-agnostic async driver: the loop every host would write, written once.
//!
//! The traits have no `Send` bound, so a browser's `fetch` future fits; nothing here names an
//! executor.

use futures_util::future::join_all;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::machine::{Input, Machine, Output, Settled};
use crate::message::{AssistantMessage, ModelRequest, ToolCall, ToolOutput};
use crate::transcript::{Session, SessionError, SessionOutput};

/// Makes model calls. A failed request is answered with a response whose stop reason is
/// `error` (see [`AssistantMessage::failed`]), never with a panic.
// The traits are deliberately not `Send`: hosts on one thread (browsers) must fit.
#[allow(async_fn_in_trait)]
pub trait Transport {
    /// Sends `request` to the model and returns its response.
    async fn complete(&self, request: ModelRequest<'_>) -> AssistantMessage;

    /// Waits `delay_ms` before a retry ([`crate::ModelCall::delay_ms`]). The core reads no
    /// clock, so the host sleeps here; the default returns at once, which suits scripted
    /// models and tests. A real transport must override it (a timer of its runtime).
    async fn wait(&self, delay_ms: u64) {
        let _ = delay_ms;
    }
}

/// Runs the host's tools. A failing tool returns an error output ([`ToolOutput::error`]).
#[allow(async_fn_in_trait)]
pub trait Tools {
    /// Runs one call (its arguments are already validated against the tool's schema).
    async fn run(&self, call: &ToolCall) -> ToolOutput;
}

/// No host tools: every call is answered with an error (the core only routes calls of tools
/// that were declared, so this is reached only by a misconfigured host).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTools;

impl Tools for NoTools {
    async fn run(&self, call: &ToolCall) -> ToolOutput {
        ToolOutput::error(format!("no host tool \"{}\" is available", call.name))
    }
}

/// Drives `machine` to its end: each model call goes to `transport`, each tool batch to
/// `tools` (concurrently, or one at a time in order when the batch is sequential), and each
/// answer back to the machine.
///
/// # Errors
/// The machine's typed failure.
///
/// # Panics
/// Only if the machine refuses an answer to its own output, which would be a bug in the core.
pub async fn drive<M: Machine>(
    mut machine: M,
    transport: &impl Transport,
    tools: &impl Tools,
) -> Result<M::Value, M::Error> {
    loop {
        let input = match machine.poll_output() {
            Output::CallModel(call) => {
                if call.delay_ms > 0 {
                    transport.wait(call.delay_ms).await;
                }
                Input::ModelResponse {
                    call: call.id,
                    response: transport.complete(call.request).await,
                }
            }
            Output::RunTools(batch) => {
                let results = if batch.sequential {
                    let mut results = Vec::with_capacity(batch.calls.len());
                    for call in batch.calls {
                        results.push(settle(tools, call).await);
                    }
                    results
                } else {
                    join_all(batch.calls.iter().map(|call| settle(tools, call))).await
                };
                Input::Seal { batch: batch.id, results }
            }
            Output::Done => return machine.finish(),
        };
        if let Err(misuse) = machine.handle_input(input) {
            panic!("the driver answered its machine wrongly (a bug in verity-core): {misuse}");
        }
    }
}

/// Drives a durable [`Session`] until its machine is done, recording every response and every
/// tool call (started before it runs, settled after) so the run can be resumed after a crash
/// without paying for a response twice or running a tool twice blindly. Call
/// [`Session::finish`] afterwards.
///
/// # Errors
/// A stale lease (another driver took the session over) or a batch whose calls are all in
/// flight elsewhere.
pub async fn drive_session<M>(
    session: &mut Session<M>,
    transport: &impl Transport,
    tools: &impl Tools,
) -> Result<(), SessionError>
where
    M: Machine + Serialize + DeserializeOwned,
{
    loop {
        match session.poll() {
            SessionOutput::CallModel(call) => {
                let id = call.id;
                if call.delay_ms > 0 {
                    transport.wait(call.delay_ms).await;
                }
                let response = transport.complete(call.request).await;
                session.record_response(id, response)?;
            }
            SessionOutput::RunTools { batch, pending, sequential } => {
                let calls: Vec<ToolCall> =
                    pending.iter().filter(|p| !p.started).map(|p| p.call.clone()).collect();
                if calls.is_empty() {
                    return Err(SessionError::Misuse(crate::machine::Misuse::new(
                        crate::machine::MisuseKind::UnexpectedInput,
                        "every open call is in flight with another driver",
                    )));
                }
                if sequential {
                    for call in &calls {
                        session.start_tool(batch, &call.id)?;
                        let output = tools.run(call).await;
                        session.settle_tool(batch, &call.id, output)?;
                    }
                } else {
                    for call in &calls {
                        session.start_tool(batch, &call.id)?;
                    }
                    let outputs = join_all(calls.iter().map(|call| tools.run(call))).await;
                    for (call, output) in calls.iter().zip(outputs) {
                        session.settle_tool(batch, &call.id, output)?;
                    }
                }
            }
            _ => return Ok(()),
        }
    }
}

async fn settle(tools: &impl Tools, call: &ToolCall) -> Settled {
    Settled { call_id: call.id.clone(), output: tools.run(call).await }
}
