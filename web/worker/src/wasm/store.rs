//! A check's durable session in IndexedDB ([`IdbStore`]), or in memory without it.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use idb::{Database, TransactionMode};
use verity_core::{Append, DurableLog, Lease};
use verity_core::{SessionError, Store};
use wasm_bindgen::prelude::*;

use super::database::{
    CLOSED, NotCommitted, SESSIONS, SessionRecord, commit, get_text, storage_full, tell_full,
    tell_saved,
};
use crate::saved::SessionMeta;

/// A check's session in IndexedDB: one record (the check and its log as JSONL) under the
/// check's id. Every write reads the record and writes it back in one read-write
/// transaction, so the lease check and the append are atomic across tabs. Without IndexedDB
/// the log lives in memory.
#[derive(Debug)]
pub struct IdbStore {
    pub(super) db: Option<Rc<Database>>,
    pub(super) meta: SessionMeta,
    /// The log: all of it without IndexedDB, else a copy of it as last stored (what the
    /// session goes on from when storage becomes full or is closed for a newer version).
    pub(super) memory: RefCell<DurableLog>,
    /// A write failed because storage was full: `memory` holds what the record lacks, so the
    /// check goes on rather than ending. Every later write tries IndexedDB again, with the whole
    /// log from `memory`, so once there is room the record holds all of it again.
    pub(super) stale: Cell<bool>,
}

impl IdbStore {
    pub(super) fn new(db: Option<Rc<Database>>, meta: SessionMeta) -> Self {
        Self { db, meta, memory: RefCell::new(DurableLog::new()), stale: Cell::new(false) }
    }

    /// IndexedDB, unless there is none or it was closed for a newer version.
    pub(super) fn db(&self) -> Option<&Rc<Database>> {
        self.db.as_ref().filter(|_| !CLOSED.with(Cell::get))
    }

    /// Reads the log, lets `change` edit it, writes it back, in one transaction (the log in
    /// memory instead of the record's while the record is stale). When the write fails because
    /// storage is full, the log is kept in memory, and the pages are told (a check whose
    /// responses were paid for is not ended by a full disk; a reload would resume it from the
    /// last write that landed); when a later write lands, they are told it is saved again.
    async fn update<T>(
        &self,
        change: impl FnOnce(&mut DurableLog) -> Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        let Some(db) = self.db() else { return change(&mut self.memory.borrow_mut()) };
        let failed = |e: idb::Error| SessionError::Store(e.to_string());
        let tx = db.transaction(&[SESSIONS], TransactionMode::ReadWrite).map_err(failed)?;
        let object_store = tx.object_store(SESSIONS).map_err(failed)?;
        let key = JsValue::from_str(&self.meta.check.id);
        let current = object_store.get(key.clone()).map_err(failed)?.await.map_err(failed)?;
        let stored = parse_record(current)?;
        let mut log = if self.stale.get() { self.memory.borrow().clone() } else { stored };
        let value = match change(&mut log) {
            Ok(value) => value,
            Err(error) => {
                let _ = tx.abort();
                return Err(error);
            }
        };
        let record = SessionRecord { meta: self.meta.clone(), log: log.to_text() };
        let text =
            serde_json::to_string(&record).map_err(|e| SessionError::Store(e.to_string()))?;
        object_store.put(&JsValue::from_str(&text), Some(&key)).map_err(failed)?;
        match commit(tx).await {
            Ok(()) => {
                // The log as stored, also in memory: what the session goes on from if
                // IndexedDB becomes unusable (full, or closed for a newer version).
                *self.memory.borrow_mut() = log;
                if self.stale.replace(false) {
                    tell_saved(&self.meta.check.id);
                }
                Ok(value)
            }
            Err(NotCommitted { full: true, .. }) => {
                *self.memory.borrow_mut() = log;
                self.stale.set(true);
                tell_full(&storage_full(
                    Some(&self.meta.check.id),
                    "The check's progress is",
                    "It goes on in memory; a reload or a crash before it ends would resume it \
                     from its last saved step and ask the model again, and pay again, for what \
                     came after. Let it finish before closing the tab.",
                ));
                Ok(value)
            }
            Err(NotCommitted { why, .. }) => Err(SessionError::Store(why)),
        }
    }

    pub(super) async fn read(&self) -> Result<DurableLog, SessionError> {
        let Some(db) = self.db().filter(|_| !self.stale.get()) else {
            return Ok(self.memory.borrow().clone());
        };
        let text =
            get_text(db, SESSIONS, &self.meta.check.id).await.map_err(SessionError::Store)?;
        parse_record(text.map(JsValue::from))
    }
}

fn parse_record(value: Option<JsValue>) -> Result<DurableLog, SessionError> {
    match value.and_then(|value| value.as_string()) {
        None => Ok(DurableLog::new()),
        Some(text) => {
            let record: SessionRecord = serde_json::from_str(&text)
                .map_err(|e| SessionError::Corrupt(format!("session record: {e}")))?;
            DurableLog::from_text(&record.log)
        }
    }
}

impl Store for IdbStore {
    async fn append(&self, append: Append<'_>) -> Result<(), SessionError> {
        self.update(|log| log.append(append)).await
    }

    async fn load(&self) -> Result<DurableLog, SessionError> {
        self.read().await
    }

    async fn take_lease(&self, holder: &str) -> Result<Lease, SessionError> {
        self.update(|log| Ok(log.take_lease(holder))).await
    }

    async fn check_lease(&self, lease: Option<&Lease>) -> Result<(), SessionError> {
        self.read().await?.check_lease(lease)
    }
}
