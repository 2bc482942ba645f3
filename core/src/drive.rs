//! A runtime-agnostic async driver: the loop every host would write, written once.
//!
//! The traits have no `Send` bound, so a browser's `fetch` future fits; nothing here names an
//! executor.

use futures_util::future::join_all;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::machine::{Input, Machine, Output, Settled};
use crate::message::{AssistantMessage, ModelRequest, ToolCall, ToolOutput};
use crate::transcript::{Session, SessionError, SessionOutput, Store};

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

/// Drives a durable [`Session`] until its machine is done, writing through `store`: every
/// entry is in the store before the effect that follows it. The session's start (and a lease
/// it took) is stored before the first request; a response is stored before anything is done
/// with it; a tool call is stored as started before it runs, and the store checks the lease
/// then, so a driver whose lease was taken over never starts a tool (nor pays for a request).
/// Call [`Session::finish`] afterwards.
///
/// After an error the session in memory may be ahead of the store (a response it holds was
/// not stored): drop it and rebuild from the store ([`Session::open`]). A response lost that
/// way is requested again; a call stored as started and never settled is an unknown outcome.
///
/// # Errors
/// What the store refused or failed to do (a stale lease, a write error), or a batch whose
/// calls are all in flight elsewhere.
pub async fn drive_session<M>(
    session: &mut Session<M>,
    store: &impl Store,
    transport: &impl Transport,
    tools: &impl Tools,
) -> Result<(), SessionError>
where
    M: Machine + Serialize + DeserializeOwned,
{
    loop {
        // What was recorded last (the start, a lease, a response, results) is stored before
        // the next effect; with nothing to write, the store still checks the lease.
        session.sync(store).await?;
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
                        session.sync(store).await?;
                        let output = tools.run(call).await;
                        session.settle_tool(batch, &call.id, output)?;
                    }
                } else {
                    for call in &calls {
                        session.start_tool(batch, &call.id)?;
                    }
                    session.sync(store).await?;
                    let outputs = join_all(calls.iter().map(|call| tools.run(call))).await;
                    for (call, output) in calls.iter().zip(outputs) {
                        session.settle_tool(batch, &call.id, output)?;
                    }
                }
            }
            _ => return session.sync(store).await,
        }
    }
}

async fn settle(tools: &impl Tools, call: &ToolCall) -> Settled {
    Settled { call_id: call.id.clone(), output: tools.run(call).await }
}
