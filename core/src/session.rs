//! Durable sessions: an append-only tree of entries from which a machine is rebuilt exactly.
//!
//! A [`Session`] wraps a machine and records every answer it is given in a [`Log`]: the
//! machine's initial state, each model response, each tool call started and settled, each
//! seal, cancel and abandon. The log serializes to JSONL. Rebuilding replays it:
//!
//! - a model response already recorded is used again, never requested twice;
//! - a tool call that was started but whose result was never recorded is settled as an
//!   **unknown outcome**, with a message that tells the model so, and is never run again,
//!   unless its tool declared itself replay-safe (read-only), in which case it is offered to the
//!   host again;
//! - appends can be guarded by a [`Lease`]: after another driver takes the session over, a
//!   write with the old lease is refused.
//!
//! The log a session holds is its own copy; the durable one is in the host's [`Store`].
//! [`drive_session`](crate::drive_session) writes every entry to the store before the effect
//! that follows it ([`Session::sync`]), and a crashed driver is rebuilt from the store alone
//! ([`Session::open`]). [`MemoryStore`] keeps a log in memory. The log itself, its entries and
//! its leases are in [`crate::log`].

use std::cell::RefCell;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::log::{Entry, Lease, Log, Record, SessionError};
use crate::machine::{CallId, Input, Machine, Misuse, ModelCall, Output, Settled};
use crate::message::{AssistantMessage, ToolCall, ToolOutput};

/// The result text of a call whose outcome is unknown.
pub const UNKNOWN_OUTCOME: &str = "unknown outcome: this call was started but its result was never recorded (the run was interrupted); it was not run again, so whether it took effect is unknown";

/// The core's rule for a tool call found started and never settled after an interruption (the
/// run died between the two): a replay-safe call is run again (`None`); any other is settled
/// with this unknown outcome, never run blindly a second time. [`Session`] applies it when it
/// resumes a log; a host with its own journal (a workflow engine) calls it for the same call.
#[must_use]
pub fn interrupted_outcome(replay_safe: bool) -> Option<ToolOutput> {
    (!replay_safe).then(|| ToolOutput::error(UNKNOWN_OUTCOME))
}

impl PendingCall<'_> {
    /// What to do with this call when the host finds it started by an attempt that died before
    /// settling it: see [`interrupted_outcome`].
    #[must_use]
    pub fn interrupted_outcome(&self) -> Option<ToolOutput> {
        interrupted_outcome(self.replay_safe)
    }
}

fn misuse(message: impl Into<String>) -> SessionError {
    SessionError::Misuse(Misuse::new(crate::machine::MisuseKind::UnexpectedInput, message))
}

/// Where a session's entries are kept: the host's durable side of a [`Session`] (a file, a
/// database table, IndexedDB, a workflow journal).
///
/// [`drive_session`](crate::drive_session) writes through it: every entry is appended (and
/// durable once `append` returns) before the effect that follows it, so a tool call is recorded
/// as started in the store before it runs, and a response is in the store before anything is
/// done with it. After a crash, a driver rebuilds the session from [`load`](Self::load).
///
/// The methods are `async` because the stores hosts have are (IndexedDB, a journal over the
/// network); a store in memory or on a local disk returns ready futures. Like the rest of the
/// core, the trait has no `Send` bound.
///
/// The store is where leases are enforced: [`append`](Self::append) must refuse a stale lease
/// and entries that do not follow on, atomically with the write. A store that keeps the log
/// itself holds a [`DurableLog`], whose methods are each operation's whole rule: the store
/// reads it, applies the operation and writes it back in one transaction.
#[allow(async_fn_in_trait)] // not `Send` on purpose, as `Transport`
pub trait Store {
    /// Appends the entries of `append` (written by a driver since its last append) if its
    /// lease is current and the entries follow on ([`DurableLog::append`]). Durable once it
    /// returns `Ok`.
    ///
    /// # Errors
    /// [`SessionError::StaleLease`] after a takeover, [`SessionError::Corrupt`] when the
    /// entries do not follow on, [`SessionError::Store`] when the write failed.
    async fn append(&self, append: Append<'_>) -> Result<(), SessionError>;

    /// Everything stored.
    ///
    /// # Errors
    /// [`SessionError::Store`] or [`SessionError::Corrupt`].
    async fn load(&self) -> Result<DurableLog, SessionError>;

    /// Takes the session over for `holder`: appends a lease one epoch above the current one,
    /// after which appends with any older lease are refused.
    ///
    /// # Errors
    /// [`SessionError::Store`].
    async fn take_lease(&self, holder: &str) -> Result<Lease, SessionError>;

    /// Whether `lease` is the current lease (see [`Log::check_lease`]).
    ///
    /// # Errors
    /// [`SessionError::StaleLease`], [`SessionError::Store`].
    async fn check_lease(&self, lease: Option<&Lease>) -> Result<(), SessionError>;
}

/// One guarded write for [`Store::append`]: a driver's new entries and the lease it writes
/// them with. Opaque to a store that keeps a [`DurableLog`] (it hands the write over whole);
/// a store that keeps entries another way reads them ([`entries`](Self::entries)).
#[derive(Debug, Clone, Copy)]
pub struct Append<'a> {
    entries: &'a [Entry],
    lease: Option<&'a Lease>,
}

impl<'a> Append<'a> {
    /// A write of `entries` with `lease`.
    #[must_use]
    pub fn new(entries: &'a [Entry], lease: Option<&'a Lease>) -> Self {
        Self { entries, lease }
    }

    /// The entries, in order.
    #[must_use]
    pub fn entries(&self) -> &'a [Entry] {
        self.entries
    }

    /// The lease they are written with.
    #[must_use]
    pub fn lease(&self) -> Option<&'a Lease> {
        self.lease
    }
}

/// The store side of a session's log, in the form a store persists (text): what a [`Store`]
/// that keeps its log itself (a database record, a file, IndexedDB) reads, changes with one
/// of the store's operations, and writes back atomically. Each method is the matching
/// [`Store`] method's whole rule (lease checks, entries that must follow on), so a host's store
/// does only the I/O.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DurableLog {
    log: Log,
}

impl DurableLog {
    /// An empty log (a session not written yet).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The log a store wrote with [`to_text`](Self::to_text).
    ///
    /// # Errors
    /// [`SessionError::Corrupt`] when the text is not such a log.
    pub fn from_text(text: &str) -> Result<Self, SessionError> {
        Log::from_jsonl(text).map(|log| Self { log })
    }

    /// The form to store (JSONL, one entry per line).
    #[must_use]
    pub fn to_text(&self) -> String {
        self.log.to_jsonl()
    }

    /// [`Store::append`]: appends the entries if the lease is current and they follow on
    /// ([`Log::extend_guarded`]).
    ///
    /// # Errors
    /// As [`Store::append`].
    pub fn append(&mut self, append: Append<'_>) -> Result<(), SessionError> {
        self.log.extend_guarded(append.entries, append.lease)
    }

    /// [`Store::take_lease`]: a lease one epoch above the current one, for `holder`.
    pub fn take_lease(&mut self, holder: &str) -> Lease {
        self.log.take_lease(holder)
    }

    /// [`Store::check_lease`].
    ///
    /// # Errors
    /// [`SessionError::StaleLease`].
    pub fn check_lease(&self, lease: Option<&Lease>) -> Result<(), SessionError> {
        self.log.check_lease(lease)
    }

    /// The log, for [`Store::load`] (and [`Session::resume`]).
    #[must_use]
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// The log, taken.
    #[must_use]
    pub fn into_log(self) -> Log {
        self.log
    }
}

/// A [`Store`] in memory, for tests and for hosts that persist its log themselves
/// ([`MemoryStore::log`], [`Log::to_jsonl`]).
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    log: RefCell<DurableLog>,
}

impl MemoryStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A store holding `log`.
    #[must_use]
    pub fn from_log(log: Log) -> Self {
        Self { log: RefCell::new(DurableLog { log }) }
    }

    /// A copy of what it holds.
    #[must_use]
    pub fn log(&self) -> Log {
        self.log.borrow().log().clone()
    }
}

impl Store for MemoryStore {
    async fn append(&self, append: Append<'_>) -> Result<(), SessionError> {
        self.log.borrow_mut().append(append)
    }

    async fn load(&self) -> Result<DurableLog, SessionError> {
        Ok(self.log.borrow().clone())
    }

    async fn take_lease(&self, holder: &str) -> Result<Lease, SessionError> {
        Ok(self.log.borrow_mut().take_lease(holder))
    }

    async fn check_lease(&self, lease: Option<&Lease>) -> Result<(), SessionError> {
        self.log.borrow().check_lease(lease)
    }
}

/// The open batch's id and its calls (id, replay-safe), in the model's order.
type OpenCalls = (CallId, Vec<(String, bool)>);

fn open_calls<M: Machine>(machine: &mut M) -> Option<OpenCalls> {
    match machine.poll_output() {
        Output::RunTools(tools) => Some((
            tools.id,
            tools
                .calls
                .iter()
                .map(|c| c.id.clone())
                .zip(tools.replay_safe.iter().copied())
                .collect(),
        )),
        _ => None,
    }
}

/// The calls of the open batch, as the session tracks them: by position in the batch, since
/// a model may give two calls the same id.
#[derive(Debug, Clone, Default)]
struct OpenBatch {
    id: Option<CallId>,
    /// Positions of the calls started and not settled.
    started: Vec<usize>,
    /// Settled calls with their positions.
    settled: Vec<(usize, Settled)>,
}

impl OpenBatch {
    fn for_batch(&mut self, batch: CallId) {
        if self.id != Some(batch) {
            *self = OpenBatch { id: Some(batch), ..OpenBatch::default() };
        }
    }

    fn is_settled(&self, index: usize) -> bool {
        self.settled.iter().any(|(settled, _)| *settled == index)
    }

    /// The call a start of `call_id` means: its first occurrence neither started nor settled.
    fn to_start(&self, calls: &[(String, bool)], call_id: &str) -> Option<usize> {
        (0..calls.len())
            .find(|&i| calls[i].0 == call_id && !self.started.contains(&i) && !self.is_settled(i))
    }

    /// The call a result for `call_id` settles: its first started occurrence, else its first
    /// unsettled one.
    fn to_settle(&self, calls: &[(String, bool)], call_id: &str) -> Option<usize> {
        let open = |i: &usize| calls[*i].0 == call_id && !self.is_settled(*i);
        (0..calls.len())
            .filter(open)
            .find(|i| self.started.contains(i))
            .or_else(|| (0..calls.len()).find(open))
    }

    fn settle(&mut self, index: usize, call_id: &str, output: ToolOutput) {
        self.started.retain(|started| *started != index);
        self.settled.push((index, Settled { call_id: call_id.to_owned(), output }));
    }

    /// The results in the model's order, leaving no batch open.
    fn take_results(&mut self) -> Vec<Settled> {
        let mut settled = std::mem::take(self).settled;
        settled.sort_by_key(|(index, _)| *index);
        settled.into_iter().map(|(_, settled)| settled).collect()
    }
}

/// A call of the open batch that still needs a result.
#[derive(Debug, Clone, Copy)]
pub struct PendingCall<'a> {
    /// The call.
    pub call: &'a ToolCall,
    /// Its position in the batch (ids may repeat; positions do not).
    pub index: usize,
    /// Its tool may be run again.
    pub replay_safe: bool,
    /// The host recorded that it started this call (it is in flight).
    pub started: bool,
}

/// What the host must do next in a session.
#[derive(Debug, Clone)]
#[must_use]
#[non_exhaustive]
pub enum SessionOutput<'a> {
    /// Make this model call, then [`Session::record_response`].
    CallModel(ModelCall<'a>),
    /// Run these calls ([`Session::start_tool`] before, [`Session::settle_tool`] after each);
    /// the batch is sealed when the last one settles.
    RunTools {
        /// The batch.
        batch: CallId,
        /// The calls without a result yet, in the model's order.
        pending: Vec<PendingCall<'a>>,
        /// Run them one at a time, in order.
        sequential: bool,
    },
    /// Finished: call [`Session::finish`].
    Done,
}

/// A machine with its durable log.
#[derive(Debug, Clone)]
pub struct Session<M> {
    log: Log,
    machine: M,
    lease: Option<Lease>,
    batch: OpenBatch,
    /// Entries before this index are in the host's store.
    synced: usize,
}

impl<M> Session<M>
where
    M: Machine + Serialize + DeserializeOwned,
{
    /// A new session of `machine`.
    ///
    /// # Errors
    /// [`SessionError::Corrupt`] if the machine does not serialize.
    pub fn start(machine: M) -> Result<Self, SessionError> {
        let state =
            serde_json::to_value(&machine).map_err(|e| SessionError::Corrupt(e.to_string()))?;
        let mut log = Log::default();
        log.push(Record::Start { machine: state });
        Ok(Self { log, machine, lease: None, batch: OpenBatch::default(), synced: 0 })
    }

    /// Rebuilds the machine from `log` (the path to its head), appending with `lease`.
    /// Calls that were started and never settled are settled as unknown outcomes, or offered
    /// again if replay-safe; a batch whose every call was settled is sealed.
    ///
    /// # Errors
    /// [`SessionError::Corrupt`] if the log does not replay; [`SessionError::StaleLease`] if
    /// settling the interrupted calls needs an append and `lease` is not current.
    pub fn resume(log: Log, lease: Option<Lease>) -> Result<Self, SessionError> {
        let path = log.path();
        let corrupt = |why: String| SessionError::Corrupt(why);
        let Some(Entry { record: Record::Start { machine }, .. }) = path.first() else {
            return Err(corrupt("the log does not begin with a start entry".to_owned()));
        };
        let machine: M =
            serde_json::from_value(machine.clone()).map_err(|e| corrupt(e.to_string()))?;
        let mut batch = OpenBatch::default();
        let mut replayed = machine;
        for entry in &path[1..] {
            let not_open = || corrupt(format!("entry {}: no such call is open", entry.id));
            let input = match &entry.record {
                Record::Response { call, response } => {
                    Some(Input::ModelResponse { call: *call, response: response.clone() })
                }
                Record::ToolStarted { batch: id, call_id } => {
                    let calls = open_calls(&mut replayed)
                        .filter(|(open, _)| open == id)
                        .ok_or_else(not_open)?
                        .1;
                    batch.for_batch(*id);
                    let index = batch.to_start(&calls, call_id).ok_or_else(not_open)?;
                    batch.started.push(index);
                    None
                }
                Record::ToolSettled { batch: id, call_id, output } => {
                    let calls = open_calls(&mut replayed)
                        .filter(|(open, _)| open == id)
                        .ok_or_else(not_open)?
                        .1;
                    batch.for_batch(*id);
                    let index = batch.to_settle(&calls, call_id).ok_or_else(not_open)?;
                    batch.settle(index, call_id, output.clone());
                    None
                }
                Record::Sealed { batch: id } => {
                    batch.for_batch(*id);
                    Some(Input::Seal { batch: *id, results: batch.take_results() })
                }
                Record::Cancelled { reason } => Some(Input::Cancel { reason: reason.clone() }),
                Record::Abandoned { batch: id } => {
                    batch.for_batch(*id);
                    batch.started.clear();
                    None
                }
                Record::Start { .. } => {
                    return Err(corrupt(format!("entry {} starts again", entry.id)));
                }
                Record::Lease(_) => None,
            };
            if let Some(input) = input {
                replayed.handle_input(input).map_err(|misuse| {
                    corrupt(format!("entry {} does not replay: {misuse}", entry.id))
                })?;
            }
        }
        let synced = log.entries().len();
        let mut session = Self { log, machine: replayed, lease, batch, synced };
        session.settle_interrupted(false)?;
        Ok(session)
    }

    /// Rebuilds the session from what `store` holds (see [`resume`](Self::resume)). Entries
    /// the resume appends (interrupted calls settled) are written by the next
    /// [`sync`](Self::sync).
    ///
    /// # Errors
    /// As [`Store::load`] and [`resume`](Self::resume).
    pub async fn open(store: &impl Store, lease: Option<Lease>) -> Result<Self, SessionError> {
        Self::resume(store.load().await?.into_log(), lease)
    }

    /// Appends with this lease from now on.
    #[must_use]
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Takes the session over (see [`Log::take_lease`]); this session appends with the new
    /// lease. The lease entry is written by the next [`sync`](Self::sync), which a store
    /// accepts as a takeover (see [`Log::extend_guarded`]) when the session had synced
    /// everything before it and nobody appended since. [`Store::take_lease`] takes a lease in
    /// the store directly.
    pub fn take_lease(&mut self, holder: impl Into<String>) -> Lease {
        let lease = self.log.take_lease(holder);
        self.lease = Some(lease.clone());
        lease
    }

    /// The log.
    #[must_use]
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// The entries appended since the last [`mark_synced`](Self::mark_synced) (or since the
    /// session was started or resumed): what the host must write to its store, e.g. with
    /// [`Log::extend_guarded`].
    #[must_use]
    pub fn unsynced(&self) -> &[Entry] {
        &self.log.entries()[self.synced..]
    }

    /// Records that every entry so far is in the host's store.
    pub fn mark_synced(&mut self) {
        self.synced = self.log.entries().len();
    }

    /// Writes the unsynced entries to `store` with this session's lease, or, when there are
    /// none, checks the lease against the store. Either way a stale lease is refused by the
    /// store itself, not by this session's copy of the log.
    ///
    /// # Errors
    /// What the store refused; the entries stay unsynced then.
    pub async fn sync(&mut self, store: &impl Store) -> Result<(), SessionError> {
        let unsynced = self.unsynced();
        if unsynced.is_empty() {
            store.check_lease(self.lease.as_ref()).await
        } else {
            store.append(Append::new(unsynced, self.lease.as_ref())).await?;
            self.mark_synced();
            Ok(())
        }
    }

    /// The machine.
    #[must_use]
    pub fn machine(&self) -> &M {
        &self.machine
    }

    /// The machine's events since the last drain ([`Machine::drain_events`]). After
    /// [`Session::open`] these include what the replayed inputs reported, so a host can rebuild
    /// its progress view from them.
    pub fn drain_events(&mut self) -> Vec<crate::event::Event> {
        self.machine.drain_events()
    }

    /// What the host must do next.
    pub fn poll(&mut self) -> SessionOutput<'_> {
        let batch = &self.batch;
        match self.machine.poll_output() {
            Output::CallModel(call) => SessionOutput::CallModel(call),
            Output::RunTools(tools) => {
                let mine = batch.id == Some(tools.id);
                let pending = tools
                    .calls
                    .iter()
                    .zip(tools.replay_safe)
                    .enumerate()
                    .filter(|(index, _)| !mine || !batch.is_settled(*index))
                    .map(|(index, (call, &replay_safe))| PendingCall {
                        call,
                        index,
                        replay_safe,
                        started: mine && batch.started.contains(&index),
                    })
                    .collect();
                SessionOutput::RunTools { batch: tools.id, pending, sequential: tools.sequential }
            }
            _ => SessionOutput::Done,
        }
    }

    /// Every model call pending at once ([`Machine::poll_outputs`]): an answer check's
    /// sentences in flight. A host may make them together and record each response as it
    /// comes back; the first is the one [`poll`](Self::poll) gives.
    pub fn poll_calls(&mut self) -> Vec<ModelCall<'_>> {
        self.machine
            .poll_outputs()
            .into_iter()
            .filter_map(|output| match output {
                Output::CallModel(call) => Some(call),
                _ => None,
            })
            .collect()
    }

    /// Records the response to model call `call` (any pending one) and gives it to the
    /// machine.
    ///
    /// # Errors
    /// A stale lease, or a call that is not pending (nothing is recorded then).
    pub fn record_response(
        &mut self,
        call: CallId,
        response: AssistantMessage,
    ) -> Result<(), SessionError> {
        self.log.check_lease(self.lease.as_ref())?;
        self.machine.handle_input(Input::ModelResponse { call, response: response.clone() })?;
        self.log.push(Record::Response { call, response });
        Ok(())
    }

    /// The open batch's calls, if `batch` is the open batch.
    fn calls_of(&mut self, batch: CallId) -> Result<Vec<(String, bool)>, SessionError> {
        let (open, calls) =
            open_calls(&mut self.machine).ok_or_else(|| misuse("no tool batch is open"))?;
        if open != batch {
            return Err(misuse(format!("{batch} is not the open batch {open}")));
        }
        self.batch.for_batch(batch);
        Ok(calls)
    }

    /// Records that the host is starting `call_id` of `batch`. Record it before the tool runs
    /// (and write it to the store: [`sync`](Self::sync)): that is what lets a resumed session
    /// know the call may have taken effect. When the model gave several calls this id, this
    /// starts the first of them not yet started.
    ///
    /// # Errors
    /// A stale lease, or a call that is not an unsettled, unstarted call of the open batch.
    pub fn start_tool(&mut self, batch: CallId, call_id: &str) -> Result<(), SessionError> {
        self.log.check_lease(self.lease.as_ref())?;
        let calls = self.calls_of(batch)?;
        let Some(index) = self.batch.to_start(&calls, call_id) else {
            return Err(if calls.iter().any(|(id, _)| id == call_id) {
                misuse(format!("{call_id:?} was already started"))
            } else {
                misuse(format!("{call_id:?} is not a call of the open batch {batch}"))
            });
        };
        self.batch.started.push(index);
        self.log.push(Record::ToolStarted { batch, call_id: call_id.to_owned() });
        Ok(())
    }

    /// Records the result of `call_id`; when it is the batch's last, seals the batch. When the
    /// model gave several calls this id, this settles the first of them started and not
    /// settled (else the first not settled), so results given in the order the calls were
    /// started go to the right calls.
    ///
    /// # Errors
    /// A stale lease, or a call that is not an unsettled call of the open batch.
    pub fn settle_tool(
        &mut self,
        batch: CallId,
        call_id: &str,
        output: ToolOutput,
    ) -> Result<(), SessionError> {
        self.log.check_lease(self.lease.as_ref())?;
        let calls = self.calls_of(batch)?;
        let Some(index) = self.batch.to_settle(&calls, call_id) else {
            return Err(if calls.iter().any(|(id, _)| id == call_id) {
                misuse(format!("{call_id:?} already has a result"))
            } else {
                misuse(format!("{call_id:?} is not a call of the open batch {batch}"))
            });
        };
        self.settle_at(batch, index, call_id, output, calls.len())
    }

    fn settle_at(
        &mut self,
        batch: CallId,
        index: usize,
        call_id: &str,
        output: ToolOutput,
        calls: usize,
    ) -> Result<(), SessionError> {
        self.batch.settle(index, call_id, output.clone());
        self.log.push(Record::ToolSettled { batch, call_id: call_id.to_owned(), output });
        if self.batch.settled.len() == calls {
            self.seal(batch)?;
        }
        Ok(())
    }

    fn seal(&mut self, batch: CallId) -> Result<(), SessionError> {
        let results = self.batch.take_results();
        self.machine.handle_input(Input::Seal { batch, results })?;
        self.log.push(Record::Sealed { batch });
        Ok(())
    }

    /// Cancels the run: no further model call; open calls are recorded as aborted, except
    /// those of the open batch whose results the host already recorded, which keep them (the
    /// batch is sealed with them first; should that seal end the run by its own rules, the run
    /// ends so and nothing is cancelled).
    ///
    /// # Errors
    /// A stale lease, or a machine that has already finished.
    pub fn cancel(&mut self, reason: impl Into<String>) -> Result<(), SessionError> {
        self.log.check_lease(self.lease.as_ref())?;
        let reason = reason.into();
        if let Some((batch, calls)) = open_calls(&mut self.machine) {
            self.batch.for_batch(batch);
            if !self.batch.settled.is_empty() {
                for (index, (call_id, _)) in calls.iter().enumerate() {
                    if !self.batch.is_settled(index) {
                        let aborted = ToolOutput::error(crate::agent::ABORTED);
                        self.settle_at(batch, index, call_id, aborted, calls.len())?;
                    }
                }
                if matches!(self.machine.poll_output(), Output::Done) {
                    return Ok(());
                }
            }
        }
        self.machine.handle_input(Input::Cancel { reason: reason.clone() })?;
        self.log.push(Record::Cancelled { reason });
        self.batch = OpenBatch::default();
        Ok(())
    }

    /// Gives up on the calls in flight of the open batch: those whose tool is replay-safe are
    /// offered again, the others are settled as unknown outcomes. The session can then be
    /// stepped again, cancelled, or saved and resumed.
    ///
    /// # Errors
    /// A stale lease, or no open batch.
    pub fn abandon(&mut self) -> Result<(), SessionError> {
        self.log.check_lease(self.lease.as_ref())?;
        if open_calls(&mut self.machine).is_none() {
            return Err(misuse("no tool batch is open"));
        }
        self.settle_interrupted(true)
    }

    /// Settles the calls of the open batch that were started and never settled: unknown
    /// outcomes first (so replaying the log finds them still started, which tells repeated
    /// ids apart), then an `Abandoned` entry that offers the replay-safe ones again.
    fn settle_interrupted(&mut self, always_record: bool) -> Result<(), SessionError> {
        let Some((batch, calls)) = open_calls(&mut self.machine) else { return Ok(()) };
        self.batch.for_batch(batch);
        let started = self.batch.started.clone();
        if always_record || !started.is_empty() {
            self.log.check_lease(self.lease.as_ref())?;
        }
        for &index in &started {
            let (call_id, replay_safe) = &calls[index];
            if let Some(unknown) = interrupted_outcome(*replay_safe) {
                self.settle_at(batch, index, call_id, unknown, calls.len())?;
            }
        }
        if self.batch.id == Some(batch) && (always_record || !self.batch.started.is_empty()) {
            self.batch.started.clear();
            self.log.push(Record::Abandoned { batch });
        }
        // A batch whose results were all recorded but whose seal was not.
        if self.batch.id == Some(batch)
            && !self.batch.settled.is_empty()
            && self.batch.settled.len() == calls.len()
        {
            self.seal(batch)?;
        }
        Ok(())
    }

    /// The machine's value or typed failure.
    ///
    /// # Errors
    /// The machine's failure.
    pub fn finish(self) -> Result<M::Value, M::Error> {
        self.machine.finish()
    }

    /// The machine, to end it another way than [`finish`](Self::finish) (a [`crate::Job`]'s
    /// typed value: [`crate::Job::finish_typed`]).
    #[must_use]
    pub fn into_machine(self) -> M {
        self.machine
    }
}
