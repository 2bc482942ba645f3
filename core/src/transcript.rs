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
//! ([`Session::open`]). [`MemoryStore`] keeps a log in memory.
//!
//! Entries form a tree (each names its parent), so a host can branch from an earlier entry
//! ([`Log::checkout`]); the machine is rebuilt from the path between the root and the head.

use std::cell::RefCell;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::machine::{CallId, Input, Machine, Misuse, ModelCall, Output, Settled};
use crate::message::{AssistantMessage, ToolCall, ToolOutput};

/// The result text of a call whose outcome is unknown.
pub const UNKNOWN_OUTCOME: &str = "unknown outcome: this call was started but its result was never recorded (the run was interrupted); it was not run again, so whether it took effect is unknown";

/// The right to append, held by one driver at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Who holds it.
    pub holder: String,
    /// Increases with each takeover.
    pub epoch: u64,
}

/// What an entry records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Record {
    /// The machine's initial state.
    Start {
        /// The machine, serialized.
        machine: Value,
    },
    /// A model response, for the model call `call`.
    Response {
        /// The model call answered.
        call: CallId,
        /// The response.
        response: AssistantMessage,
    },
    /// The host started running a tool call.
    ToolStarted {
        /// The batch.
        batch: CallId,
        /// The call.
        call_id: String,
    },
    /// A tool call's result.
    ToolSettled {
        /// The batch.
        batch: CallId,
        /// The call.
        call_id: String,
        /// Its result.
        output: ToolOutput,
    },
    /// The batch was sealed with its settled results.
    Sealed {
        /// The batch.
        batch: CallId,
    },
    /// The run was cancelled.
    Cancelled {
        /// Why.
        reason: String,
    },
    /// The host gave up on the calls in flight of a batch.
    Abandoned {
        /// The batch.
        batch: CallId,
    },
    /// A driver took the session.
    Lease(Lease),
}

/// One entry of a log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Unique in the log.
    pub id: u64,
    /// The entry this one follows (`None` for the root).
    pub parent: Option<u64>,
    /// What it records.
    #[serde(flatten)]
    pub record: Record,
}

/// Why a session operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionError {
    /// Another driver took the session over: this driver's lease is stale.
    StaleLease {
        /// The lease this driver holds.
        held: Option<u64>,
        /// The session's current lease epoch.
        current: u64,
    },
    /// The operation does not fit the machine's state (wrong id, unknown call, ...).
    Misuse(Misuse),
    /// The log cannot be read or replayed.
    Corrupt(String),
    /// The host's [`Store`] could not read or write (its own words). What was not written is
    /// lost: resume from what the store holds.
    Store(String),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::StaleLease { held, current } => write!(
                f,
                "stale lease: this driver holds epoch {held:?}, the session is at epoch {current}"
            ),
            SessionError::Misuse(misuse) => write!(f, "{misuse}"),
            SessionError::Corrupt(why) => write!(f, "corrupt session log: {why}"),
            SessionError::Store(why) => write!(f, "the session store failed: {why}"),
        }
    }
}

impl std::error::Error for SessionError {}

impl From<Misuse> for SessionError {
    fn from(misuse: Misuse) -> Self {
        SessionError::Misuse(misuse)
    }
}

fn misuse(message: impl Into<String>) -> SessionError {
    SessionError::Misuse(Misuse::new(crate::machine::MisuseKind::UnexpectedInput, message))
}

/// An append-only tree of entries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Log {
    entries: Vec<Entry>,
    head: Option<u64>,
}

impl Log {
    /// Every entry, in the order appended.
    #[must_use]
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entry the next append follows.
    #[must_use]
    pub fn head(&self) -> Option<u64> {
        self.head
    }

    /// The current lease: the most recent one appended, on any branch.
    #[must_use]
    pub fn lease(&self) -> Option<&Lease> {
        self.entries.iter().rev().find_map(|entry| match &entry.record {
            Record::Lease(lease) => Some(lease),
            _ => None,
        })
    }

    /// Checks that `lease` (if any) is the current one. Without a lease, appends are refused
    /// once any driver took a lease.
    ///
    /// # Errors
    /// [`SessionError::StaleLease`].
    pub fn check_lease(&self, lease: Option<&Lease>) -> Result<(), SessionError> {
        match (self.lease(), lease) {
            (None, _) => Ok(()),
            (Some(current), Some(held)) if current == held => Ok(()),
            (Some(current), held) => Err(SessionError::StaleLease {
                held: held.map(|lease| lease.epoch),
                current: current.epoch,
            }),
        }
    }

    /// Appends `record` after the head, if `lease` is current.
    ///
    /// # Errors
    /// [`SessionError::StaleLease`].
    pub fn append(&mut self, record: Record, lease: Option<&Lease>) -> Result<u64, SessionError> {
        self.check_lease(lease)?;
        Ok(self.push(record))
    }

    fn push(&mut self, record: Record) -> u64 {
        let id = self.entries.last().map_or(0, |entry| entry.id + 1);
        self.entries.push(Entry { id, parent: self.head, record });
        self.head = Some(id);
        id
    }

    /// Takes the session over for `holder`: a new lease whose epoch is one more than the
    /// current one. Writes with any older lease are refused from now on.
    pub fn take_lease(&mut self, holder: impl Into<String>) -> Lease {
        let epoch = self.lease().map_or(1, |lease| lease.epoch + 1);
        let lease = Lease { holder: holder.into(), epoch };
        self.push(Record::Lease(lease.clone()));
        lease
    }

    /// Moves the head to entry `id`: the next append starts a branch there, and a machine
    /// rebuilt from this log is rebuilt from the path up to `id`.
    ///
    /// # Errors
    /// [`SessionError::Corrupt`] when no entry has that id.
    pub fn checkout(&mut self, id: u64) -> Result<(), SessionError> {
        if !self.entries.iter().any(|entry| entry.id == id) {
            return Err(SessionError::Corrupt(format!("no entry {id}")));
        }
        self.head = Some(id);
        Ok(())
    }

    /// The store side of a guarded write: appends `entries` (written by a driver since it last
    /// synced) if `lease` is still the current lease of this log and the entries follow on.
    ///
    /// A takeover written by the driver itself ([`Session::take_lease`]) is accepted too: when
    /// `entries` begin with the lease record of `lease` and its epoch is one more than the
    /// current one. Since the entries must follow on (their ids not taken), two drivers taking
    /// over from the same state cannot both succeed.
    ///
    /// # Errors
    /// [`SessionError::StaleLease`] after a takeover; [`SessionError::Corrupt`] if an entry's
    /// id is taken or its parent unknown (another writer got in between).
    pub fn extend_guarded(
        &mut self,
        entries: &[Entry],
        lease: Option<&Lease>,
    ) -> Result<(), SessionError> {
        let takeover = match (entries.first().map(|entry| &entry.record), lease) {
            (Some(Record::Lease(taken)), Some(held)) => {
                taken == held && held.epoch == self.lease().map_or(1, |current| current.epoch + 1)
            }
            _ => false,
        };
        if !takeover {
            self.check_lease(lease)?;
        }
        let mut known: Vec<u64> = self.entries.iter().map(|entry| entry.id).collect();
        for entry in entries {
            if known.contains(&entry.id) {
                return Err(SessionError::Corrupt(format!(
                    "entry {} was written by another driver",
                    entry.id
                )));
            }
            if let Some(parent) = entry.parent
                && !known.contains(&parent)
            {
                return Err(SessionError::Corrupt(format!(
                    "entry {} follows unknown entry {parent}",
                    entry.id
                )));
            }
            known.push(entry.id);
        }
        self.entries.extend_from_slice(entries);
        if let Some(last) = entries.last() {
            self.head = Some(last.id);
        }
        Ok(())
    }

    /// The entries from the root to the head.
    #[must_use]
    pub fn path(&self) -> Vec<&Entry> {
        let mut path = Vec::new();
        let mut next = self.head;
        while let Some(id) = next {
            let Some(entry) = self.entries.iter().rev().find(|entry| entry.id == id) else { break };
            path.push(entry);
            next = entry.parent;
        }
        path.reverse();
        path
    }

    /// One JSON entry per line; the head is the last line's id unless a `checkout` moved it,
    /// in which case a final `{"head": id}` line records it.
    #[must_use]
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for entry in &self.entries {
            out.push_str(&serde_json::to_string(entry).expect("entries serialize"));
            out.push('\n');
        }
        if self.head != self.entries.last().map(|entry| entry.id) {
            out.push_str(&serde_json::json!({ "head": self.head }).to_string());
            out.push('\n');
        }
        out
    }

    /// Reads a log written by [`to_jsonl`](Self::to_jsonl).
    ///
    /// # Errors
    /// [`SessionError::Corrupt`] for a line that is not an entry, a repeated id, or a parent
    /// that does not come before its child.
    pub fn from_jsonl(text: &str) -> Result<Self, SessionError> {
        let mut log = Log::default();
        for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
            let corrupt =
                |why: String| SessionError::Corrupt(format!("line {}: {why}", number + 1));
            let value: Value = serde_json::from_str(line).map_err(|e| corrupt(e.to_string()))?;
            if let Some(head) = value.get("head").filter(|_| value.get("type").is_none()) {
                log.head = head.as_u64();
                continue;
            }
            let entry: Entry = serde_json::from_value(value).map_err(|e| corrupt(e.to_string()))?;
            if log.entries.iter().any(|e| e.id == entry.id) {
                return Err(corrupt(format!("repeated id {}", entry.id)));
            }
            if let Some(parent) = entry.parent
                && !log.entries.iter().any(|e| e.id == parent)
            {
                return Err(corrupt(format!(
                    "parent {parent} does not come before entry {}",
                    entry.id
                )));
            }
            log.head = Some(entry.id);
            log.entries.push(entry);
        }
        Ok(log)
    }
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
/// and entries that do not follow on, atomically with the write ([`Log::extend_guarded`] does
/// both for a store that keeps a [`Log`]).
#[allow(async_fn_in_trait)] // not `Send` on purpose, as `Transport`
pub trait Store {
    /// Appends `entries` (written by a driver holding `lease` since its last append) if
    /// `lease` is current and the entries follow on; see [`Log::extend_guarded`]. Durable once
    /// it returns `Ok`.
    ///
    /// # Errors
    /// [`SessionError::StaleLease`] after a takeover, [`SessionError::Corrupt`] when the
    /// entries do not follow on, [`SessionError::Store`] when the write failed.
    async fn append(&self, entries: &[Entry], lease: Option<&Lease>) -> Result<(), SessionError>;

    /// Everything stored, as a log.
    ///
    /// # Errors
    /// [`SessionError::Store`] or [`SessionError::Corrupt`].
    async fn load(&self) -> Result<Log, SessionError>;

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

/// A [`Store`] in memory, for tests and for hosts that persist its log themselves
/// ([`MemoryStore::log`], [`Log::to_jsonl`]).
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    log: RefCell<Log>,
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
        Self { log: RefCell::new(log) }
    }

    /// A copy of what it holds.
    #[must_use]
    pub fn log(&self) -> Log {
        self.log.borrow().clone()
    }
}

impl Store for MemoryStore {
    async fn append(&self, entries: &[Entry], lease: Option<&Lease>) -> Result<(), SessionError> {
        self.log.borrow_mut().extend_guarded(entries, lease)
    }

    async fn load(&self) -> Result<Log, SessionError> {
        Ok(self.log())
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
        let synced = log.entries.len();
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
        Self::resume(store.load().await?, lease)
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
        &self.log.entries[self.synced..]
    }

    /// Records that every entry so far is in the host's store.
    pub fn mark_synced(&mut self) {
        self.synced = self.log.entries.len();
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
            store.append(unsynced, self.lease.as_ref()).await?;
            self.mark_synced();
            Ok(())
        }
    }

    /// The machine.
    #[must_use]
    pub fn machine(&self) -> &M {
        &self.machine
    }

    /// The machine's events since the last call ([`Machine::drain_events`]): what
    /// [`drive_session_with`](crate::drive::drive_session_with) reports. A resumed session's
    /// first drain holds the events of the replayed entries too.
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

    /// Records the response to model call `call` and gives it to the machine.
    ///
    /// # Errors
    /// A stale lease, or a call that is not the open one (nothing is recorded then).
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

    /// Cancels the run: no further model call; open calls are recorded as aborted.
    ///
    /// # Errors
    /// A stale lease, or a machine that has already finished.
    pub fn cancel(&mut self, reason: impl Into<String>) -> Result<(), SessionError> {
        self.log.check_lease(self.lease.as_ref())?;
        let reason = reason.into();
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
            if !replay_safe {
                self.settle_at(
                    batch,
                    index,
                    call_id,
                    ToolOutput::error(UNKNOWN_OUTCOME),
                    calls.len(),
                )?;
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
}
