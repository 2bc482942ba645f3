//! The engine's host in a browser worker: [`WorkerHost`], what the engine asks of the browser.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use idb::Database;
use verity_core::indexed::IndexedCorpus;
use verity_messages::{CheckResult, CorpusStorage, FromWorker, text};

use super::database::{
    CLOSED, KV, NotCommitted, RESULTS, RESULTS_BLOB, SESSIONS, UNFINISHED, Write, landed,
    put_later, storage_full, tell_full, tell_outcome, write, write_later,
};
use super::fetch::FetchClient;
use super::saver::{CorpusSaver, run};
use super::store::IdbStore;
use super::{now, post, reply, url_parts};
use crate::host::Host;
use crate::records::ResultRecord;
use crate::saved::{SessionMeta, Unfinished};

/// The engine's host in a browser worker.
#[derive(Debug)]
pub(super) struct WorkerHost {
    /// `None` when IndexedDB is unavailable: everything stays in memory.
    pub(super) db: Option<Rc<Database>>,
    /// The order of the next result recorded ([`ResultRecord::order`]).
    pub(super) next_order: Cell<u64>,
    /// Saves the corpus.
    pub(super) corpus_saver: Rc<CorpusSaver>,
    /// The latest list of unfinished checks given to storage, as JSON: what a check's end
    /// writes when the write it was part of found storage full ([`end_in_full_storage`]).
    pub(super) unfinished: Rc<RefCell<String>>,
    /// The unfinished checks a write of the list has named ([`FromWorker::Stored`] tells the
    /// pages of each once that write is done); a check leaves it when its result is recorded.
    pub(super) listed: RefCell<HashSet<String>>,
}

impl WorkerHost {
    /// IndexedDB, unless there is none or it was closed for a newer version.
    pub(super) fn db(&self) -> Option<&Rc<Database>> {
        self.db.as_ref().filter(|_| !CLOSED.with(Cell::get))
    }

    /// The checks of `unfinished` no write of the list has named yet, now named.
    fn newly_listed(&self, unfinished: &Unfinished) -> Vec<String> {
        let mut listed = self.listed.borrow_mut();
        unfinished
            .checks
            .iter()
            .filter(|meta| listed.insert(meta.check.id.clone()))
            .map(|meta| meta.check.id.clone())
            .collect()
    }

    /// Writes `writes`, of which the list `unfinished` is the last, in one transaction; once it
    /// is done the pages are told of the checks it names first ([`FromWorker::Stored`]). When
    /// it finds storage full, each of `if_full` is posted, and the checks `ended` are ended
    /// without it ([`end_in_full_storage`]).
    fn write_list(
        &self,
        mut writes: Vec<Write>,
        unfinished: &Unfinished,
        if_full: Vec<FromWorker>,
        ended: Vec<String>,
    ) {
        let new = self.newly_listed(unfinished);
        let stored = move || {
            if !new.is_empty() {
                post(&FromWorker::Stored { ids: new });
            }
        };
        let Some(db) = self.db() else { return stored() };
        let text = serde_json::to_string(unfinished).expect("serializes");
        self.unfinished.replace(text.clone());
        writes.push(Write::Put { store: KV, key: UNFINISHED.to_owned(), text });
        let (db, latest) = (Rc::clone(db), Rc::clone(&self.unfinished));
        let written = write(&db, writes);
        wasm_bindgen_futures::spawn_local(async move {
            let outcome = landed(written).await;
            if !ended.is_empty() && matches!(outcome, Err(NotCommitted { full: true, .. })) {
                end_in_full_storage(&db, &ended, &latest).await;
            }
            tell_outcome(outcome, if_full);
            stored();
        });
    }
}

impl Host for WorkerHost {
    type Client = FetchClient;
    type Store = IdbStore;

    fn post(&self, message: &FromWorker) {
        post(message);
    }

    fn reply(&self, message: &FromWorker) {
        reply(message);
    }

    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()>>>) {
        wasm_bindgen_futures::spawn_local(task);
    }

    fn now_ms(&self) -> f64 {
        now()
    }

    fn date(&self) -> String {
        js_sys::Date::new_0().to_iso_string().into()
    }

    fn client(&self) -> FetchClient {
        FetchClient
    }

    fn url_parts(&self, url: &str) -> Option<(String, String)> {
        url_parts(url)
    }

    fn new_session(&self, meta: &SessionMeta) -> IdbStore {
        IdbStore::new(self.db.clone(), meta.clone())
    }

    fn end_session(&self, id: &str) {
        if let Some(db) = self.db() {
            put_later(db, SESSIONS, id, None, None);
        }
    }

    fn save_corpus(&self, corpus: &Arc<IndexedCorpus>) {
        if let Some(db) = self.db() {
            self.corpus_saver.save(db, corpus);
        }
    }

    fn corpus_storage(&self, id: Option<&str>) -> CorpusStorage {
        let saver = &self.corpus_saver;
        if self.db().is_none() {
            CorpusStorage::NotSaved
        } else if saver.running.get() {
            CorpusStorage::Saving
        } else {
            match &*saver.saved.borrow() {
                Some(saved) if saved != id.unwrap_or_default() => CorpusStorage::NotSaved,
                Some(_) => CorpusStorage::Saved,
                None if saver.failed.get() => CorpusStorage::NotSaved,
                None => CorpusStorage::Saved,
            }
        }
    }

    fn record_results(&self, results: &[CheckResult], unfinished: &Unfinished) {
        {
            let mut listed = self.listed.borrow_mut();
            for result in results {
                listed.remove(&result.id);
            }
        }
        if self.db().is_some() {
            let mut writes = Vec::with_capacity(2 * results.len() + 1);
            let mut if_full = Vec::with_capacity(results.len());
            for result in results {
                let order = self.next_order.get();
                self.next_order.set(order.saturating_add(1));
                let text = ResultRecord::new(order, result.clone()).to_text();
                writes.push(Write::Put { store: RESULTS, key: result.id.clone(), text });
                writes.push(Write::Delete { store: SESSIONS, key: result.id.clone() });
                if_full.push(storage_full(
                    Some(&result.id),
                    &format!("The result of “{}” is", result.claim),
                    "It is shown until the last tab of the app closes.",
                ));
            }
            let ended = results.iter().map(|result| result.id.clone()).collect();
            self.write_list(writes, unfinished, if_full, ended);
        } else if CLOSED.with(Cell::get) {
            // Not silently: the card says "not saved", as for a full disk.
            for result in results {
                tell_full(&FromWorker::NotSaved {
                    id: Some(result.id.clone()),
                    message: text::not_saved_for_newer_version(&result.claim),
                });
            }
        }
    }

    fn forget_result(&self, id: &str) {
        if let Some(db) = self.db() {
            put_later(db, RESULTS, id, None, None);
        }
    }

    fn clear_results(&self) {
        if let Some(db) = self.db() {
            let blob = Write::Delete { store: KV, key: RESULTS_BLOB.to_owned() };
            write_later(db, vec![Write::Clear { store: RESULTS }, blob], Vec::new());
        }
    }

    fn save_unfinished(&self, unfinished: &Unfinished) {
        self.write_list(Vec::new(), unfinished, vec![list_not_saved()], Vec::new());
    }
}

/// The notice that the list of checks still to run was not saved.
fn list_not_saved() -> FromWorker {
    storage_full(
        None,
        "The list of checks still to run is",
        "They run now; a reload would not queue them again.",
    )
}

/// Ends the sessions of the checks `ended` when the write of their results found storage full.
/// That write failed whole, sessions' deletion included, so a reopened app would resume those
/// checks and pay again for every answer they had since the disk filled, though the person saw
/// their verdicts. A deletion needs no room: the sessions are deleted with the latest list of
/// unfinished checks (`latest`); if even that list finds no room, with the list deleted, since
/// a list that still named an ended check would start it again from nothing (its queued checks
/// then run now but are not queued again by a reload, and the pages are told so).
async fn end_in_full_storage(db: &Database, ended: &[String], latest: &RefCell<String>) {
    let sessions = || ended.iter().map(|id| Write::Delete { store: SESSIONS, key: id.clone() });
    let list = Write::Put { store: KV, key: UNFINISHED.to_owned(), text: latest.borrow().clone() };
    if run(db, sessions().chain([list]).collect()).await.is_ok() {
        return;
    }
    let no_list = Write::Delete { store: KV, key: UNFINISHED.to_owned() };
    match run(db, sessions().chain([no_list]).collect()).await {
        Ok(()) => tell_full(&list_not_saved()),
        Err(failed) => tell_outcome(Err(failed), vec![list_not_saved()]),
    }
}
