//! A runtime-agnostic async driver: the loop every host would write, written once.
//!
//! The traits have no `Send` bound, so a browser's `fetch` future fits; nothing here names an
//! executor.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use futures_util::future::{AbortHandle, Abortable, Either, join_all, select};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt as _, StreamExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::event::Event;
use crate::log::SessionError;
use crate::machine::{CallId, Input, Machine, ModelCall, Output, OwnedToolBatch, Settled};
use crate::message::{AssistantMessage, Delta, ModelRequest, StopReason, ToolCall, ToolOutput};
use crate::session::{Session, SessionOutput, Store};

/// Makes model calls. A failed request is answered with a response whose stop reason is
/// `error` (see [`AssistantMessage::failed`]), never with a panic.
// The traits are deliberately not `Send`: hosts on one thread (browsers) must fit.
#[allow(async_fn_in_trait)]
pub trait Transport {
    /// Sends `request` to the model and returns its response.
    async fn complete(&self, request: ModelRequest<'_>) -> AssistantMessage;

    /// [`complete`](Self::complete), handing each piece of a streamed response to `on_delta`
    /// as it arrives (the driver reports them as [`Event::Delta`]). The default streams
    /// nothing.
    async fn complete_streaming(
        &self,
        request: ModelRequest<'_>,
        on_delta: &mut dyn FnMut(Delta),
    ) -> AssistantMessage {
        let _ = on_delta;
        self.complete(request).await
    }

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

/// The host's way to cancel a run driven by [`drive_with`] (a Stop button, a closed page, a
/// signal handler): a handle whose clones share one state. Cancelling is sticky and the first
/// reason wins. It needs no runtime: [`drive_with`] checks it between outputs and races the
/// model call or tool batch in flight against it (dropping the loser, which is how an async
/// HTTP client is told to abort), and [`crate::ProviderTransport::with_cancel`] checks it
/// between chunks of a body.
#[derive(Clone, Default)]
pub struct Cancel {
    state: Arc<Mutex<CancelState>>,
}

#[derive(Default)]
struct CancelState {
    reason: Option<String>,
    wakers: Vec<Waker>,
}

impl fmt::Debug for Cancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancel").field("reason", &self.reason()).finish()
    }
}

impl Cancel {
    /// A handle that has not fired.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CancelState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cancels, for `reason` (kept for the record); wakes a driver waiting on it.
    pub fn cancel(&self, reason: impl Into<String>) {
        let mut state = self.state();
        if state.reason.is_none() {
            state.reason = Some(reason.into());
        }
        for waker in state.wakers.drain(..) {
            waker.wake();
        }
    }

    /// Whether it fired.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.state().reason.is_some()
    }

    /// The reason, once it fired.
    #[must_use]
    pub fn reason(&self) -> Option<String> {
        self.state().reason.clone()
    }

    /// Completes with the reason when it fires.
    pub fn cancelled(&self) -> impl Future<Output = String> + '_ {
        std::future::poll_fn(move |cx: &mut Context<'_>| {
            let mut state = self.state();
            match &state.reason {
                Some(reason) => Poll::Ready(reason.clone()),
                None => {
                    if !state.wakers.iter().any(|waker| waker.will_wake(cx.waker())) {
                        state.wakers.push(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        })
    }
}

/// How [`drive_with`] runs a machine.
#[derive(Default)]
#[non_exhaustive]
pub struct DriveOptions<'a> {
    /// Cancels the run when it fires.
    pub cancel: Option<Cancel>,
    /// Receives every event: the machine's ([`Machine::drain_events`], after each input) and
    /// the transport's streamed pieces ([`Event::Delta`]), in the order they happened.
    events: Option<Box<dyn FnMut(Event) + 'a>>,
}

impl fmt::Debug for DriveOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DriveOptions")
            .field("cancel", &self.cancel)
            .field("events", &self.events.is_some())
            .finish()
    }
}

impl<'a> DriveOptions<'a> {
    /// The defaults: not cancellable, events dropped.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels the run when `cancel` fires.
    #[must_use]
    pub fn cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Hands every event of the run to `events` (progress, logs): the one place progress
    /// comes from.
    #[must_use]
    pub fn events(mut self, events: impl FnMut(Event) + 'a) -> Self {
        self.events = Some(Box::new(events));
        self
    }
}

/// Drives `machine` to its end: each model call goes to `transport`, each tool batch to
/// `tools` (concurrently, or one at a time in order when the batch is sequential), and each
/// answer back to the machine. Every model call pending at once ([`Machine::poll_outputs`]:
/// an answer check's sentences in flight) is made at once, and each response is given to the
/// machine as it comes back. The convenience for [`drive_with`] without options.
///
/// # Errors
/// The machine's typed failure.
///
/// # Panics
/// Only if the machine refuses an answer to its own output, which would be a bug in the core.
pub async fn drive<M: Machine>(
    machine: M,
    transport: &impl Transport,
    tools: &impl Tools,
) -> Result<M::Value, M::Error> {
    drive_with(machine, transport, tools, DriveOptions::default()).await
}

/// [`drive`] with options. When `options.cancel` fires, no further model call is made: a
/// model call or tool batch in flight is dropped (a transport that aborts on drop aborts its
/// request) and the machine is given [`Input::Cancel`], which records every open call of a
/// batch as aborted (POLICY.md D6); the run ends as cancelled. A response that arrived
/// complete is kept (it was paid for); one the transport aborted because of the cancel is
/// not given to the machine, so the run ends cancelled rather than failed.
///
/// # Errors
/// The machine's typed failure (`cancelled` after a cancel, unless it already had a value).
///
/// # Panics
/// Only if the machine refuses an answer to its own output, which would be a bug in the core.
pub async fn drive_with<M: Machine>(
    mut machine: M,
    transport: &impl Transport,
    tools: &impl Tools,
    options: DriveOptions<'_>,
) -> Result<M::Value, M::Error> {
    let DriveOptions { cancel, events } = options;
    let cancel = cancel.as_ref();
    let events = RefCell::new(events);
    let mut in_flight = InFlight::default();
    loop {
        report(&mut machine, &events);
        if let Some(reason) = cancel.and_then(Cancel::reason) {
            // Responses that arrived complete are kept (they were paid for); dropping a
            // request still in flight aborts it.
            for (call, response) in in_flight.arrived() {
                answer(&mut machine, Input::ModelResponse { call, response });
            }
            if !matches!(machine.poll_output(), Output::Done) {
                answer(&mut machine, Input::Cancel { reason });
                report(&mut machine, &events);
            }
            return machine.finish();
        }
        // Every model call the machine has pending is made at once (an answer check's
        // sentences in flight); a tool batch runs once no call is in flight. A call in flight
        // the machine no longer waits for (its sentence dropped when a failure ended the
        // answer) is dropped, which aborts its request.
        let outputs = machine.poll_outputs();
        in_flight.keep_only(&pending_ids(&outputs));
        let mut batch = None;
        for output in outputs {
            match output {
                Output::CallModel(call) => in_flight.start(call, transport, cancel, &events),
                Output::RunTools(tools) if batch.is_none() => {
                    batch = Some(OwnedToolBatch {
                        id: tools.id,
                        calls: tools.calls.to_vec(),
                        sequential: tools.sequential,
                        replay_safe: Vec::new(),
                    });
                }
                _ => {}
            }
        }
        let input = if let Some((call, response)) = in_flight.next().await {
            match response {
                Some(response) => Input::ModelResponse { call, response },
                None => continue,
            }
        } else if let Some(batch) = batch {
            let run = async {
                if batch.sequential {
                    let mut results = Vec::with_capacity(batch.calls.len());
                    for call in &batch.calls {
                        results.push(settle(tools, call).await);
                    }
                    results
                } else {
                    join_all(batch.calls.iter().map(|call| settle(tools, call))).await
                }
            };
            match until_cancelled(cancel, run).await {
                Some(results) => Input::Seal { batch: batch.id, results },
                None => continue,
            }
        } else {
            return machine.finish();
        };
        answer(&mut machine, input);
    }
}

/// Where a driver's events go, if anywhere: shared by the model calls in flight (their
/// streamed pieces) and the loop (the machine's events), never both at once.
type Events<'a> = RefCell<Option<Box<dyn FnMut(Event) + 'a>>>;

/// A model call in flight: its id and its response (`None`: dropped by a cancel).
type Flying<'a> = Pin<Box<dyn Future<Output = (CallId, Option<AssistantMessage>)> + 'a>>;

/// The model calls in flight, each answered as it comes back, whatever the order; each with
/// the handle that drops it.
#[derive(Default)]
struct InFlight<'a> {
    ids: Vec<(CallId, AbortHandle)>,
    calls: FuturesUnordered<Flying<'a>>,
}

/// The ids of the model calls among `outputs`.
fn pending_ids(outputs: &[Output<'_>]) -> Vec<CallId> {
    outputs
        .iter()
        .filter_map(|output| match output {
            Output::CallModel(call) => Some(call.id),
            _ => None,
        })
        .collect()
}

impl<'a> InFlight<'a> {
    /// Makes `call` unless it is already in flight (a level-triggered machine offers it
    /// again until it is answered).
    fn start<'e: 'a, T: Transport>(
        &mut self,
        call: ModelCall<'_>,
        transport: &'a T,
        cancel: Option<&'a Cancel>,
        events: &'a Events<'e>,
    ) {
        if self.ids.iter().any(|(id, _)| *id == call.id) {
            return;
        }
        let (handle, registration) = AbortHandle::new_pair();
        self.ids.push((call.id, handle));
        let (id, delay_ms, request) = (call.id, call.delay_ms, call.request.to_owned_request());
        let work = Abortable::new(
            async move {
                call_model(transport, id, delay_ms, request.as_request(), cancel, events).await
            },
            registration,
        );
        self.calls.push(Box::pin(async move { (id, work.await.ok().flatten()) }));
    }

    /// Drops the calls in flight whose ids are not in `pending` (their requests are aborted;
    /// each comes back as `None`).
    fn keep_only(&mut self, pending: &[CallId]) {
        self.ids.retain(|(id, handle)| {
            let keep = pending.contains(id);
            if !keep {
                handle.abort();
            }
            keep
        });
    }

    /// Ends the calls in flight after a cancel: the responses that had arrived complete
    /// (each call's cancel-aware future is ready once the cancel fires, with its response if
    /// one had come), the others dropped, which aborts their requests.
    fn arrived(self) -> Vec<(CallId, AssistantMessage)> {
        let mut calls = self.calls;
        let mut arrived = Vec::new();
        while let Some(Some((call, response))) = calls.next().now_or_never() {
            arrived.extend(response.map(|response| (call, response)));
        }
        arrived
    }

    /// The next call to come back; `None` when none is in flight.
    async fn next(&mut self) -> Option<(CallId, Option<AssistantMessage>)> {
        let (id, response) = self.calls.next().await?;
        self.ids.retain(|(flying, _)| *flying != id);
        Some((id, response))
    }
}

/// Hands the machine's events to the host's callback, if it has one.
fn report<M: Machine>(machine: &mut M, events: &Events<'_>) {
    if let Some(events) = events.borrow_mut().as_mut() {
        machine.drain_events().into_iter().for_each(events);
    }
}

fn answer<M: Machine>(machine: &mut M, input: Input) {
    if let Err(misuse) = machine.handle_input(input) {
        panic!("the driver answered its machine wrongly (a bug in verity-core): {misuse}");
    }
}

/// Makes model call `id` after its delay, handing streamed pieces to `events`. `None` when
/// the run was cancelled meanwhile: the request was dropped (which aborts it), or the
/// transport itself returned `aborted` because of the cancel; such a response is not given to
/// the machine, so the run ends cancelled rather than failed. A response that arrived
/// complete is kept.
async fn call_model(
    transport: &impl Transport,
    id: CallId,
    delay_ms: u64,
    request: ModelRequest<'_>,
    cancel: Option<&Cancel>,
    events: &Events<'_>,
) -> Option<AssistantMessage> {
    let response = until_cancelled(cancel, async {
        if delay_ms > 0 {
            transport.wait(delay_ms).await;
        }
        if events.borrow().is_some() {
            let mut on_delta = |delta| {
                if let Some(events) = events.borrow_mut().as_mut() {
                    events(Event::Delta { call: id, delta });
                }
            };
            transport.complete_streaming(request, &mut on_delta).await
        } else {
            transport.complete(request).await
        }
    })
    .await?;
    let aborted_by_cancel =
        response.stop_reason() == StopReason::Aborted && cancel.is_some_and(Cancel::is_cancelled);
    (!aborted_by_cancel).then_some(response)
}

/// `work`'s value, or `None` if `cancel` fires first (`work` is dropped then).
async fn until_cancelled<T>(cancel: Option<&Cancel>, work: impl Future<Output = T>) -> Option<T> {
    let Some(cancel) = cancel else { return Some(work.await) };
    let work: Pin<&mut _> = pin!(work);
    let cancelled = pin!(cancel.cancelled());
    match select(work, cancelled).await {
        Either::Left((value, _)) => Some(value),
        Either::Right(_) => None,
    }
}

/// Drives a durable [`Session`] until its machine is done, writing through `store`: every
/// entry is in the store before the effect that follows it. The session's start (and a lease
/// it took) is stored before the first request; a response is stored before anything is done
/// with it; a tool call is stored as started before it runs, and the store checks the lease
/// then, so a driver whose lease was taken over never starts a tool (nor pays for a request).
/// Call [`Session::finish`] afterwards. Model calls pending at once are made at once, each
/// response recorded and stored as it comes back (the log keeps that order, and a replay
/// gives them to the machine in it).
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
    drive_session_with(session, store, transport, tools, DriveOptions::default()).await
}

/// [`drive_session`] with options: `options.events` receives the machine's events and the
/// transport's streamed pieces as [`drive_with`] gives them; when `options.cancel` fires, the
/// request or batch in flight is dropped, the cancel is recorded ([`Session::cancel`]: every
/// open call is settled as aborted) and stored, and the session is done.
///
/// # Errors
/// As [`drive_session`].
pub async fn drive_session_with<M>(
    session: &mut Session<M>,
    store: &impl Store,
    transport: &impl Transport,
    tools: &impl Tools,
    options: DriveOptions<'_>,
) -> Result<(), SessionError>
where
    M: Machine + Serialize + DeserializeOwned,
{
    let DriveOptions { cancel, events } = options;
    let cancel = cancel.as_ref();
    let events = RefCell::new(events);
    let drain = |session: &mut Session<M>| {
        if let Some(events) = events.borrow_mut().as_mut() {
            session.drain_events().into_iter().for_each(&mut *events);
        }
    };
    let mut in_flight = InFlight::default();
    loop {
        drain(session);
        // What was recorded last (the start, a lease, a response, results) is stored before
        // the next effect; with nothing to write, the store still checks the lease.
        session.sync(store).await?;
        if let Some(reason) = cancel.and_then(Cancel::reason) {
            for (call, response) in in_flight.arrived() {
                session.record_response(call, response)?;
            }
            if !matches!(session.poll(), SessionOutput::Done) {
                session.cancel(reason)?;
                drain(session);
            }
            return session.sync(store).await;
        }
        // Every model call pending is made at once (an answer check's sentences in flight),
        // each response recorded and stored as it comes back; one no longer pending is
        // dropped, which aborts its request.
        let calls = session.poll_calls();
        in_flight.keep_only(&calls.iter().map(|call| call.id).collect::<Vec<_>>());
        for call in calls {
            in_flight.start(call, transport, cancel, &events);
        }
        if let Some((id, response)) = in_flight.next().await {
            if let Some(response) = response {
                session.record_response(id, response)?;
            }
            continue;
        }
        match session.poll() {
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
                        let Some(output) = until_cancelled(cancel, tools.run(call)).await else {
                            break;
                        };
                        session.settle_tool(batch, &call.id, output)?;
                    }
                } else {
                    for call in &calls {
                        session.start_tool(batch, &call.id)?;
                    }
                    session.sync(store).await?;
                    let run = join_all(calls.iter().map(|call| tools.run(call)));
                    if let Some(outputs) = until_cancelled(cancel, run).await {
                        for (call, output) in calls.iter().zip(outputs) {
                            session.settle_tool(batch, &call.id, output)?;
                        }
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
