//! The durable log of a session: an append-only tree of entries ([`Log`]), each recording one
//! answer a machine was given ([`Record`]), serialized as JSONL. Appends can be guarded by a
//! [`Lease`]: after another driver takes the session over, a write with the old lease is
//! refused.
//!
//! Entries form a tree (each names its parent), so a host can branch from an earlier entry
//! ([`Log::checkout`]); a machine is rebuilt from the path between the root and the head (see
//! [`crate::session`]).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use verity_derive::TaggedDeserialize;

use crate::machine::{CallId, Misuse};
use crate::message::{AssistantMessage, ToolOutput};

/// The right to append, held by one driver at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Who holds it.
    pub holder: String,
    /// Increases with each takeover.
    pub epoch: u64,
}

/// What an entry records.
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
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
    /// The host's [`Store`](crate::session::Store) could not read or write (its own words).
    /// What was not written is lost: resume from what the store holds.
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

/// An append-only tree of entries.
///
/// Entry ids increase in the order entries were appended (each driver appends the next id, and
/// a log that breaks this is refused as corrupt), so an entry is found by binary search and
/// nothing a log does is quadratic in its length.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "LogRepr")]
pub struct Log {
    entries: Vec<Entry>,
    head: Option<u64>,
    /// Where the current lease is in `entries`, kept as entries are appended.
    #[serde(skip_serializing)]
    lease_at: Option<usize>,
}

/// A log as serialized: its entries and head (the lease's place is found again).
#[derive(Deserialize)]
struct LogRepr {
    entries: Vec<Entry>,
    head: Option<u64>,
}

impl From<LogRepr> for Log {
    fn from(repr: LogRepr) -> Self {
        let lease_at =
            repr.entries.iter().rposition(|entry| matches!(entry.record, Record::Lease(_)));
        Self { entries: repr.entries, head: repr.head, lease_at }
    }
}

impl Log {
    /// Where entry `id` is, if the log has it.
    fn position(&self, id: u64) -> Option<usize> {
        self.entries.binary_search_by_key(&id, |entry| entry.id).ok()
    }

    /// Appends `entry` (its id already checked to follow on), keeping the lease's place.
    fn append_entry(&mut self, entry: Entry) {
        if matches!(entry.record, Record::Lease(_)) {
            self.lease_at = Some(self.entries.len());
        }
        self.head = Some(entry.id);
        self.entries.push(entry);
    }

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
        match &self.entries.get(self.lease_at?)?.record {
            Record::Lease(lease) => Some(lease),
            _ => None,
        }
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

    pub(crate) fn push(&mut self, record: Record) -> u64 {
        let id = self.entries.last().map_or(0, |entry| entry.id.saturating_add(1));
        self.append_entry(Entry { id, parent: self.head, record });
        id
    }

    /// Takes the session over for `holder`: a new lease whose epoch is one more than the
    /// current one. Writes with any older lease are refused from now on.
    pub fn take_lease(&mut self, holder: impl Into<String>) -> Lease {
        let epoch = self.lease().map_or(1, |lease| lease.epoch.saturating_add(1));
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
        if self.position(id).is_none() {
            return Err(SessionError::Corrupt(format!("no entry {id}")));
        }
        self.head = Some(id);
        Ok(())
    }

    /// The store side of a guarded write: appends `entries` (written by a driver since it last
    /// synced) if `lease` is still the current lease of this log and the entries follow on.
    ///
    /// A takeover written by the driver itself
    /// ([`Session::take_lease`](crate::session::Session::take_lease)) is accepted too: when
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
                taken == held
                    && held.epoch
                        == self.lease().map_or(1, |current| current.epoch.saturating_add(1))
            }
            _ => false,
        };
        if !takeover {
            self.check_lease(lease)?;
        }
        // Checked whole before anything is appended: ids follow on (each above the last),
        // and each parent is an entry of this log or of `entries` before it.
        let mut last = self.entries.last().map(|entry| entry.id);
        for (n, entry) in entries.iter().enumerate() {
            if last.is_some_and(|last| entry.id <= last) {
                return Err(SessionError::Corrupt(format!(
                    "entry {} was written by another driver",
                    entry.id
                )));
            }
            if let Some(parent) = entry.parent
                && self.position(parent).is_none()
                && entries[..n].binary_search_by_key(&parent, |entry| entry.id).is_err()
            {
                return Err(SessionError::Corrupt(format!(
                    "entry {} follows unknown entry {parent}",
                    entry.id
                )));
            }
            last = Some(entry.id);
        }
        for entry in entries {
            self.append_entry(entry.clone());
        }
        Ok(())
    }

    /// The entries from the root to the head.
    #[must_use]
    pub fn path(&self) -> Vec<&Entry> {
        let mut path = Vec::new();
        let mut next = self.head;
        while let Some(id) = next {
            let Some(entry) = self.position(id).map(|at| &self.entries[at]) else { break };
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
            if log.entries.last().is_some_and(|last| entry.id <= last.id) {
                return Err(corrupt(if log.position(entry.id).is_some() {
                    format!("repeated id {}", entry.id)
                } else {
                    format!("entry {} comes after a higher id", entry.id)
                }));
            }
            if let Some(parent) = entry.parent
                && log.position(parent).is_none()
            {
                return Err(corrupt(format!(
                    "parent {parent} does not come before entry {}",
                    entry.id
                )));
            }
            log.append_entry(entry);
        }
        Ok(log)
    }
}
