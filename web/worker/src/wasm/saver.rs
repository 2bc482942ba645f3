//! Saving the corpus in parts, in the background, yielding to a person typing a search.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;

use idb::Database;
use verity_core::corpus::Chunk;
use verity_core::indexed::IndexedCorpus;
use verity_messages::{CorpusStorage, FromWorker};

use super::database::{
    CLOSED, CORPUS, CORPUS_ORDER, KV, LAST_SEARCH, NotCommitted, Write, landed, storage_full,
    tell_outcome, write,
};
use super::{now, post, sleep};
use crate::records::CorpusOrder;

/// How long the corpus's save waits after the last table search before it writes its next
/// large part: making a part's text holds the worker ~20 ms, which a person typing a search
/// would feel, so the save yields to them.
pub(super) const SEARCH_QUIET_MS: f64 = 300.0;

/// The parts whose writing waits for a quiet search ([`SEARCH_QUIET_MS`]): from this size, making
/// the part's text takes a few milliseconds. A smaller part is written at once, so an edit of a
/// small corpus is saved within a transaction's time, not after the searches stop.
const QUIET_PART_BYTES: usize = 256 * 1024;

/// At most how long one save yields to searches in all: someone who keeps typing postpones
/// the save by this much, no more, so the window in which closing the last tab loses an edit is
/// bounded.
const MAX_POSTPONE_MS: f64 = 2000.0;

/// How many corpus parts one transaction writes (about 2 MB each): the text of the parts
/// being written is held until their transaction commits, so a million passages are written
/// in steps, not at once; and the worker answers the pages between two steps (making one
/// part's text takes ~20 ms, eight held a search of the table up to 300 ms).
const PARTS_PER_WRITE: usize = 1;

/// Saves the corpus in the background, one version at a time: the latest asked for while a
/// save runs is the next saved (the ones between are skipped).
#[derive(Debug, Default)]
pub(super) struct CorpusSaver {
    /// The keys of the corpus parts in storage: a save writes the others, and deletes these
    /// when no longer in the corpus.
    pub(super) stored: RefCell<HashSet<String>>,
    /// The version to save next.
    pub(super) pending: RefCell<Option<Arc<IndexedCorpus>>>,
    /// Whether a save runs.
    pub(super) running: Cell<bool>,
    /// The content id of the version storage holds (`""` for the empty corpus), once a save
    /// landed; `None` before, when storage holds what the engine restored at start.
    pub(super) saved: RefCell<Option<String>>,
    /// Whether the last save failed.
    pub(super) failed: Cell<bool>,
}

/// The content id of `corpus` as the pages know it (`None`: empty).
fn corpus_id(corpus: &IndexedCorpus) -> Option<String> {
    (!corpus.corpus().is_empty()).then(|| corpus.id().to_string())
}

impl CorpusSaver {
    /// Saves `corpus` (after the save that runs, if one does).
    pub(super) fn save(self: &Rc<Self>, db: &Rc<Database>, corpus: &Arc<IndexedCorpus>) {
        *self.pending.borrow_mut() = Some(Arc::clone(corpus));
        if self.running.replace(true) {
            return;
        }
        let (saver, db) = (Rc::clone(self), Rc::clone(db));
        wasm_bindgen_futures::spawn_local(async move {
            loop {
                let next = saver.pending.borrow_mut().take();
                let Some(corpus) = next else { break };
                if CLOSED.with(Cell::get) {
                    // A newer version took the database: this version is not saved, and the
                    // pages say so (not "saving…" until the reload the notice asks for).
                    post(&FromWorker::CorpusStored {
                        id: corpus_id(&corpus),
                        storage: CorpusStorage::NotSaved,
                    });
                    break;
                }
                let outcome = saver.write(&db, &corpus).await;
                let id = corpus_id(&corpus);
                if outcome.is_err() {
                    // Which parts landed is unknown: the next save writes them all again (a
                    // part is written whole or not at all, under its content hash), and the
                    // next start deletes the parts no order names.
                    saver.stored.borrow_mut().clear();
                } else {
                    *saver.saved.borrow_mut() = Some(id.clone().unwrap_or_default());
                }
                saver.failed.set(outcome.is_err());
                if saver.pending.borrow().is_none() {
                    let storage = if outcome.is_ok() {
                        CorpusStorage::Saved
                    } else {
                        CorpusStorage::NotSaved
                    };
                    post(&FromWorker::CorpusStored { id, storage });
                }
                let full = storage_full(
                    None,
                    "The corpus is",
                    "It is kept in memory, and lost when the last tab of the app closes.",
                );
                tell_outcome(outcome, vec![full]);
            }
            saver.running.set(false);
        });
    }

    /// Writes the parts of `corpus` that storage lacks, [`PARTS_PER_WRITE`] per transaction,
    /// then the order and the deletion of the parts no longer in it, in one last transaction:
    /// until that one commits, storage holds the previous version (and parts of this one that
    /// nothing names yet).
    pub(super) async fn write(
        &self,
        db: &Database,
        corpus: &Arc<IndexedCorpus>,
    ) -> Result<(), NotCommitted> {
        let order = CorpusOrder::of(corpus.corpus());
        let missing: Vec<(String, Arc<Chunk>)> = {
            let stored = self.stored.borrow();
            corpus
                .corpus()
                .chunks()
                .iter()
                .zip(&order.parts)
                .filter(|(_, key)| !stored.contains(*key))
                .map(|(chunk, key)| (key.clone(), Arc::clone(chunk)))
                .collect()
        };
        let mut postponed = 0.0;
        for batch in missing.chunks(PARTS_PER_WRITE) {
            let bytes: usize = batch.iter().map(|(_, chunk)| chunk.bytes()).sum();
            while bytes >= QUIET_PART_BYTES && postponed < MAX_POSTPONE_MS {
                let quiet = now() - LAST_SEARCH.with(Cell::get);
                if quiet >= SEARCH_QUIET_MS {
                    break;
                }
                let wait = (SEARCH_QUIET_MS - quiet).min(MAX_POSTPONE_MS - postponed).ceil();
                postponed += wait;
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                sleep(wait as u64).await;
            }
            let writes = batch
                .iter()
                .map(|(key, chunk)| Write::PutPart { key: key.clone(), chunk: Arc::clone(chunk) })
                .collect();
            run(db, writes).await?;
            self.stored.borrow_mut().extend(batch.iter().map(|(key, _)| key.clone()));
        }
        let wanted: HashSet<&str> = order.parts.iter().map(String::as_str).collect();
        let gone: Vec<String> = self
            .stored
            .borrow()
            .iter()
            .filter(|key| !wanted.contains(key.as_str()))
            .cloned()
            .collect();
        let mut writes: Vec<Write> =
            gone.iter().map(|key| Write::Delete { store: CORPUS, key: key.clone() }).collect();
        writes.push(Write::Put { store: KV, key: CORPUS_ORDER.to_owned(), text: order.to_text() });
        run(db, writes).await?;
        let mut stored = self.stored.borrow_mut();
        for key in &gone {
            stored.remove(key);
        }
        Ok(())
    }
}

/// Makes `writes` in one transaction and awaits it.
pub(super) async fn run(db: &Database, writes: Vec<Write>) -> Result<(), NotCommitted> {
    landed(write(db, writes)).await
}
