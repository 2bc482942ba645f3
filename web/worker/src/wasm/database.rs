//! IndexedDB: the database and its stores, reading records, and writes (one transaction each,
//! committed in the background, a full disk told once). What it holds is read at start by
//! `restore`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use idb::{Database, DatabaseEvent, Factory, ObjectStoreParams, TransactionMode};
use serde::{Deserialize, Serialize};
use verity_core::corpus::Chunk;
use verity_messages::{FromWorker, text};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use super::post;
use crate::records::{RawRecord, Unreadable, corpus_part_text};
use crate::saved::SessionMeta;

const DB_NAME: &str = "verity";
/// 1: `kv` and `sessions`, the results one record of `kv`. 2: `results` added, a record per
/// result; the older record is moved there at start (`restore`). 3: `corpus` added, the
/// corpus in parts (a record per chunk); the older record is moved there at start.
const DB_VERSION: u32 = 3;
/// Key-value store: [`CORPUS_ORDER`] and [`UNFINISHED`] (the checks asked for and not
/// finished, [`Unfinished`] as JSON); before version 3 also [`CORPUS_BLOB`], and in version 1
/// `"results"` (every result in one JSON array), both moved at start.
pub(super) const KV: &str = "kv";
/// The key in [`KV`] of the checks asked for and not finished ([`Unfinished`] as JSON).
pub(super) const UNFINISHED: &str = "unfinished";
/// The key in [`KV`] of the order of the corpus's parts ([`CorpusOrder`] as JSON).
pub(super) const CORPUS_ORDER: &str = "corpus-order";
/// The key in [`KV`] of the whole corpus in one record (the passages as JSON), before version
/// 3; moved to [`CORPUS`] at start.
pub(super) const CORPUS_BLOB: &str = "corpus";
/// One record per chunk of the corpus (its passages as JSON), keyed by the chunk's content
/// hash.
pub(super) const CORPUS: &str = "corpus";
/// The layout-1 key of the results in [`KV`].
pub(super) const RESULTS_BLOB: &str = "results";
/// One record per running check: [`SessionRecord`] as JSON, keyed by the check's id.
pub(super) const SESSIONS: &str = "sessions";
/// One record per finished check: [`ResultRecord`] as JSON, keyed by the check's id.
pub(super) const RESULTS: &str = "results";

/// Opens the database at [`DB_VERSION`], creating what is missing. An upgrade waits while an
/// older version of the app holds a connection (its pages are told, and it goes on once that
/// tab closes); and this connection is closed when a newer version asks to upgrade, so that
/// it never waits on this one (the pages are told to reload).
pub(super) async fn open_database() -> Result<Database, String> {
    let factory = Factory::new().map_err(|e| e.to_string())?;
    let mut request = factory.open(DB_NAME, Some(DB_VERSION)).map_err(|e| e.to_string())?;
    request.on_upgrade_needed(|event| {
        let Ok(database) = event.database() else { return };
        for name in [KV, SESSIONS, RESULTS, CORPUS] {
            if !database.store_names().iter().any(|existing| existing == name) {
                let _ = database.create_object_store(name, ObjectStoreParams::new());
            }
        }
    });
    request.on_blocked(|_| {
        post(&FromWorker::Error {
            message: "another tab has an older version of this app open, which holds its \
                      storage: close or reload that tab, and this one restores what was saved"
                .to_owned(),
        });
    });
    let mut database = request.await.map_err(|e| e.to_string())?;
    database.on_version_change(|event| {
        if let Some(database) =
            event.target().and_then(|target| target.dyn_into::<web_sys::IdbDatabase>().ok())
        {
            database.close();
        }
        CLOSED.with(|closed| closed.set(true));
        post(&FromWorker::Error {
            message: "a newer version of this app was opened in another tab: reload this tab \
                      (until then, what it does is kept in memory, not saved)"
                .to_owned(),
        });
    });
    Ok(database)
}

/// The session record: what the check is, and its log as JSONL.
#[derive(Serialize, Deserialize)]
pub(super) struct SessionRecord {
    pub(super) meta: SessionMeta,
    pub(super) log: String,
}

pub(super) async fn get_text(
    db: &Database,
    store: &str,
    key: &str,
) -> Result<Option<String>, String> {
    Ok(get_raw(db, store, key).await?.flatten())
}

/// The value under `key` in `store`: `None` when there is none, `Some(None)` when it is not
/// text.
pub(super) async fn get_raw(
    db: &Database,
    store: &str,
    key: &str,
) -> Result<Option<Option<String>>, String> {
    let tx = db.transaction(&[store], TransactionMode::ReadOnly).map_err(|e| e.to_string())?;
    let object_store = tx.object_store(store).map_err(|e| e.to_string())?;
    let value = object_store
        .get(JsValue::from_str(key))
        .map_err(|e| e.to_string())?
        .await
        .map_err(|e| e.to_string())?;
    Ok(value.map(|value| value.as_string()))
}

/// The value `read`, or `None` with why it could not be read added to `unreadable`.
pub(super) fn skip<T>(
    read: Result<Option<T>, Unreadable>,
    unreadable: &mut Vec<Unreadable>,
) -> Option<T> {
    read.unwrap_or_else(|skipped| {
        unreadable.push(skipped);
        None
    })
}

/// Every record of `store`, in key order.
pub(super) async fn get_all(db: &Database, store: &str) -> Result<Vec<RawRecord>, String> {
    let tx = db.transaction(&[store], TransactionMode::ReadOnly).map_err(|e| e.to_string())?;
    let object_store = tx.object_store(store).map_err(|e| e.to_string())?;
    // Both asked before either is awaited: one snapshot, in the same (key) order.
    let keys = object_store.get_all_keys(None, None).map_err(|e| e.to_string())?;
    let values = object_store.get_all(None, None).map_err(|e| e.to_string())?;
    let keys = keys.await.map_err(|e| e.to_string())?;
    let values = values.await.map_err(|e| e.to_string())?;
    Ok(keys
        .iter()
        .zip(values)
        .map(|(key, value)| RawRecord {
            key: key.as_string().unwrap_or_else(|| {
                js_sys::JSON::stringify(key).map(String::from).unwrap_or_default()
            }),
            text: value.as_string(),
        })
        .collect())
}

/// One change to an object store.
pub(super) enum Write {
    /// `text` under `key`.
    Put { store: &'static str, key: String, text: String },
    /// `key` deleted.
    Delete { store: &'static str, key: String },
    /// A part of the corpus: `chunk`'s passages under `key` in [`CORPUS`] (made into text
    /// as it is written, so only one part's text is held at a time).
    PutPart { key: String, chunk: Arc<Chunk> },
    /// Every record deleted.
    Clear { store: &'static str },
}

impl Write {
    pub(super) fn store(&self) -> &'static str {
        match self {
            Self::Put { store, .. } | Self::Delete { store, .. } | Self::Clear { store } => store,
            Self::PutPart { .. } => CORPUS,
        }
    }
}

/// Puts `value` under `key` in `store`, or with `None` deletes it ([`write_later`] with one
/// write).
pub(super) fn put_later(
    db: &Rc<Database>,
    store: &'static str,
    key: &str,
    value: Option<String>,
    if_full: Option<FromWorker>,
) {
    let key = key.to_owned();
    write_later(
        db,
        vec![match value {
            Some(text) => Write::Put { store, key, text },
            None => Write::Delete { store, key },
        }],
        if_full.into_iter().collect(),
    );
}

/// Why a read-write transaction did not commit, and whether it was because the browser's
/// storage for the page is full (`QuotaExceededError`: the transaction is aborted with it).
pub(super) struct NotCommitted {
    pub(super) why: String,
    pub(super) full: bool,
}

/// Awaits a transaction [`write`] started: committed, or why not (also when it could not
/// start).
pub(super) async fn landed(
    written: Result<idb::Transaction, idb::Error>,
) -> Result<(), NotCommitted> {
    match written {
        Ok(tx) => commit(tx).await,
        Err(error) => Err(NotCommitted { why: error.to_string(), full: false }),
    }
}

/// Awaits `tx`: committed, or why not.
pub(super) async fn commit(tx: idb::Transaction) -> Result<(), NotCommitted> {
    // A second handle, to read the transaction's error once it has ended (awaiting consumes
    // `tx`, and an abort resolves without the error).
    let raw = web_sys::IdbTransaction::from(tx);
    let watch = raw.clone();
    let outcome = idb::Transaction::from(raw).await;
    let error = watch.error();
    let full = error.as_ref().is_some_and(|error| error.name() == "QuotaExceededError");
    let why = |fallback: String| match &error {
        Some(error) => format!("{}: {}", error.name(), error.message()),
        None => fallback,
    };
    match outcome {
        Ok(done) if done.is_committed() => Ok(()),
        Ok(_) => {
            Err(NotCommitted { why: why("the IndexedDB transaction was aborted".into()), full })
        }
        Err(error) => Err(NotCommitted { why: why(error.to_string()), full }),
    }
}

thread_local! {
    /// When a page last asked for a page of the table's items ([`SEARCH_QUIET_MS`]).
    pub(super) static LAST_SEARCH: Cell<f64> = const { Cell::new(f64::NEG_INFINITY) };
    /// The database was closed for a newer version's upgrade: from then on nothing is read
    /// from or written to it (sessions go on from the logs they hold in memory).
    pub(super) static CLOSED: Cell<bool> = const { Cell::new(false) };
    /// The storage-full notices posted since a write last landed: each is posted once, not
    /// at every write of the same record while the disk stays full.
    static TOLD_FULL: RefCell<Vec<FromWorker>> = const { RefCell::new(Vec::new()) };
    /// The storage-full notices of checks (a result, a session's progress) posted so far: a
    /// page that connects later is told them too, so its cards say "Not saved" as well.
    pub(super) static NOT_SAVED: RefCell<Vec<FromWorker>> = const { RefCell::new(Vec::new()) };
}

/// Posts `notice` (a [`FromWorker::NotSaved`]) unless it was posted since a write last landed.
pub(super) fn tell_full(notice: &FromWorker) {
    let new = TOLD_FULL.with(|told| {
        let mut told = told.borrow_mut();
        let new = !told.contains(notice);
        if new {
            told.push(notice.clone());
        }
        new
    });
    if new {
        post(notice);
    }
    if matches!(notice, FromWorker::NotSaved { id: Some(_), .. }) {
        NOT_SAVED.with(|kept| {
            let mut kept = kept.borrow_mut();
            if !kept.contains(notice) {
                kept.push(notice.clone());
            }
        });
    }
}

/// Tells the pages that the check `id` is saved again (its session's write landed after one
/// failed for a full disk): its "not saved" notices are withdrawn, so a page that connects later
/// is not told them, and a disk that fills again is told again.
pub(super) fn tell_saved(id: &str) {
    let of_check = |notice: &FromWorker| matches!(notice, FromWorker::NotSaved { id: Some(of), .. } if of == id);
    TOLD_FULL.with(|told| told.borrow_mut().retain(|notice| !of_check(notice)));
    NOT_SAVED.with(|kept| kept.borrow_mut().retain(|notice| !of_check(notice)));
    post(&FromWorker::Saved { id: id.to_owned() });
}

/// The notice that `what` (with the check `id`, if it is one's) was not saved because the
/// browser's storage is full, and what became of it (`then`).
pub(super) fn storage_full(id: Option<&str>, what: &str, then: &str) -> FromWorker {
    FromWorker::NotSaved { id: id.map(str::to_owned), message: text::not_saved(what, then) }
}

/// Starts `writes` in one read-write transaction over their object stores, so they land
/// together or not at all; the transaction, to be awaited.
pub(super) fn write(db: &Database, writes: Vec<Write>) -> Result<idb::Transaction, idb::Error> {
    let mut stores: Vec<&str> = writes.iter().map(Write::store).collect();
    stores.sort_unstable();
    stores.dedup();
    let tx = db.transaction(&stores, TransactionMode::ReadWrite)?;
    for change in writes {
        let object_store = tx.object_store(change.store())?;
        match change {
            Write::Put { key, text, .. } => {
                drop(object_store.put(&JsValue::from_str(&text), Some(&JsValue::from_str(&key)))?);
            }
            Write::Delete { key, .. } => drop(object_store.delete(JsValue::from_str(&key))?),
            Write::PutPart { key, chunk } => {
                let text = corpus_part_text(chunk.passages());
                drop(object_store.put(&JsValue::from_str(&text), Some(&JsValue::from_str(&key)))?);
            }
            Write::Clear { .. } => drop(object_store.clear()?),
        }
    }
    Ok(tx)
}

/// Makes `writes` in one read-write transaction ([`write`]). The transaction is created now
/// (so writes land in the order they were asked for) and committed in the background. When
/// it fails because storage is full, each of `if_full` is posted (what is kept in memory
/// instead); any other failure is an `Error`.
pub(super) fn write_later(db: &Rc<Database>, writes: Vec<Write>, if_full: Vec<FromWorker>) {
    // Nothing to write is no transaction (IndexedDB refuses one over no store).
    if writes.is_empty() {
        return;
    }
    let written = write(db, writes);
    wasm_bindgen_futures::spawn_local(async move {
        let outcome = landed(written).await;
        tell_outcome(outcome, if_full);
    });
}

/// Tells the pages what became of a write: nothing when it landed; each of `if_full` when
/// storage was full (an `Error` when there are none); an `Error` otherwise.
pub(super) fn tell_outcome(outcome: Result<(), NotCommitted>, if_full: Vec<FromWorker>) {
    match outcome {
        Ok(()) => TOLD_FULL.with(|told| told.borrow_mut().clear()),
        Err(NotCommitted { full: true, .. }) if !if_full.is_empty() => {
            for notice in &if_full {
                tell_full(notice);
            }
        }
        Err(NotCommitted { why, .. }) => {
            post(&FromWorker::Error { message: format!("saving to IndexedDB failed: {why}") });
        }
    }
}
