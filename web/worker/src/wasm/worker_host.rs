//! The engine's host in a browser worker: [`WorkerHost`], what the engine asks of the browser.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use idb::Database;
use verity_core::indexed::IndexedCorpus;
use verity_messages::{CheckResult, CorpusStorage, FromWorker, text};

use super::database::{
    CLOSED, KV, RESULTS, RESULTS_BLOB, SESSIONS, Write, put_later, storage_full, tell_full,
    write_later,
};
use super::fetch::FetchClient;
use super::saver::CorpusSaver;
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
}

impl WorkerHost {
    /// IndexedDB, unless there is none or it was closed for a newer version.
    pub(super) fn db(&self) -> Option<&Rc<Database>> {
        self.db.as_ref().filter(|_| !CLOSED.with(Cell::get))
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
        if let Some(db) = self.db() {
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
            let text = serde_json::to_string(unfinished).expect("serializes");
            writes.push(Write::Put { store: KV, key: "unfinished".to_owned(), text });
            write_later(db, writes, if_full);
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
        if let Some(db) = self.db() {
            let text = serde_json::to_string(unfinished).expect("serializes");
            let full = storage_full(
                None,
                "The list of checks still to run is",
                "They run now; a reload would not queue them again.",
            );
            put_later(db, KV, "unfinished", Some(text), Some(full));
        }
    }
}
