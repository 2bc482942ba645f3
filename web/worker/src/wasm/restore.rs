//! What storage holds, read at start: the corpus (its parts in order, or the first layout's
//! record moved to parts), the results (older shapes moved to the current one), the sessions
//! of the checks that were running, and the checks still to run.

use std::collections::HashSet;
use std::rc::Rc;

use idb::{Database, TransactionMode};
use verity_core::corpus::Passage;
use verity_messages::FromWorker;

use super::database::{
    CORPUS, CORPUS_BLOB, CORPUS_ORDER, KV, RESULTS, RESULTS_BLOB, SESSIONS, SessionRecord,
    UNFINISHED, Write, get_all, get_raw, landed, skip, write, write_later,
};
use super::store::IdbStore;
use super::worker_host::WorkerHost;
use crate::host::{Host, Restored, StoredSession};
use crate::records::{
    CorpusOrder, RawRecord, Unreadable, corpus_parts, read_corpus_order, read_corpus_part,
    read_json, read_results, read_unfinished,
};

/// Reads the corpus: its parts in their order (a part that cannot be read is skipped and
/// named, and stays in storage), or the first layout's one record, which is moved to parts
/// first (in one transaction, awaited: if it fails, the record stays and is read again at the
/// next start). Records that are in neither are deleted. When the order cannot be read, every
/// stored part is read (in storage order) and kept, and the notice says so.
async fn restore_corpus(
    db: &Rc<Database>,
    host: &WorkerHost,
    unreadable: &mut Vec<Unreadable>,
) -> Result<Vec<Passage>, String> {
    let order = get_raw(db, KV, CORPUS_ORDER).await?;
    let keys = get_keys(db, CORPUS).await?;
    let mut recovered = false;
    let order = match read_corpus_order(order.as_ref().map(Option::as_deref)) {
        Ok(order) => order,
        // Without its order the corpus is still in its parts: each is restored (in storage
        // order) and kept, never deleted for want of an order naming it. The next change
        // writes a readable order.
        Err(mut skipped) if !keys.is_empty() => {
            skipped.why = format!(
                "{}; the corpus was restored from its {} stored parts, in storage order (an \
                 item removed just before may be back), and nothing was deleted",
                skipped.why,
                keys.len()
            );
            unreadable.push(skipped);
            recovered = true;
            Some(CorpusOrder::from_parts(keys.clone()))
        }
        Err(skipped) => {
            unreadable.push(skipped);
            None
        }
    };
    match order {
        Some(order) => read_parts(db, host, &order, keys, recovered, unreadable).await,
        None => move_first_layout(db, host, keys, unreadable).await,
    }
}

/// Reads the corpus's parts in `order` (a part that cannot be read is skipped, named in
/// `unreadable`, and kept in storage until the corpus next changes), deletes the stored parts
/// it does not name (`keys` are all of them) and the first layout's record (unless the order
/// was `recovered` from the parts themselves).
async fn read_parts(
    db: &Rc<Database>,
    host: &WorkerHost,
    order: &CorpusOrder,
    keys: Vec<String>,
    recovered: bool,
    unreadable: &mut Vec<Unreadable>,
) -> Result<Vec<Passage>, String> {
    let mut items = Vec::new();
    let mut stored = HashSet::new();
    for key in &order.parts {
        let text = get_raw(db, CORPUS, key).await?;
        stored.insert(key.clone());
        if let Some(passages) =
            skip(read_corpus_part(key, text.as_ref().map(Option::as_deref)).map(Some), unreadable)
        {
            items.extend(passages);
        }
    }
    let stale: Vec<Write> = keys
        .into_iter()
        .filter(|key| !stored.contains(key))
        .map(|key| Write::Delete { store: CORPUS, key })
        .collect();
    let blob = (!recovered).then(|| Write::Delete { store: KV, key: CORPUS_BLOB.to_owned() });
    write_later(db, stale.into_iter().chain(blob).collect(), Vec::new());
    *host.corpus_saver.stored.borrow_mut() = stored;
    Ok(items)
}

/// Reads the first layout's one record of the corpus, if there is one, and moves it to parts
/// (in one transaction, awaited: if it fails, the record stays and is read again at the next
/// start, and the pages are told).
async fn move_first_layout(
    db: &Rc<Database>,
    host: &WorkerHost,
    keys: Vec<String>,
    unreadable: &mut Vec<Unreadable>,
) -> Result<Vec<Passage>, String> {
    let mut items = Vec::new();
    let blob = get_raw(db, KV, CORPUS_BLOB).await?;
    let Some(passages) = skip(
        read_json::<Vec<Passage>>("the corpus", blob.as_ref().map(Option::as_deref)),
        unreadable,
    ) else {
        return Ok(items);
    };
    let (parts, order) = corpus_parts(passages);
    let mut writes: Vec<Write> =
        keys.into_iter().map(|key| Write::Delete { store: CORPUS, key }).collect();
    for (key, text) in parts {
        let read = read_corpus_part(&key, Some(Some(&text))).unwrap_or_default();
        items.extend(read);
        writes.push(Write::Put { store: CORPUS, key, text });
    }
    writes.push(Write::Put { store: KV, key: CORPUS_ORDER.to_owned(), text: order });
    writes.push(Write::Delete { store: KV, key: CORPUS_BLOB.to_owned() });
    let keys: Vec<String> = writes
        .iter()
        .filter_map(|write| match write {
            Write::Put { store: CORPUS, key, .. } => Some(key.clone()),
            _ => None,
        })
        .collect();
    let moved = landed(write(db, writes)).await.map_err(|failed| failed.why);
    match moved {
        Ok(()) => host.corpus_saver.stored.borrow_mut().extend(keys),
        Err(error) => host.post(&FromWorker::Error {
            message: format!(
                "the saved corpus could not be moved to this version's layout (it is shown, \
                 and kept as it was): {error}"
            ),
        }),
    }
    Ok(items)
}

/// The keys of `store`.
async fn get_keys(db: &Database, store: &str) -> Result<Vec<String>, String> {
    let tx = db.transaction(&[store], TransactionMode::ReadOnly).map_err(|e| e.to_string())?;
    let object_store = tx.object_store(store).map_err(|e| e.to_string())?;
    let keys = object_store.get_all_keys(None, None).map_err(|e| e.to_string())?;
    let keys = keys.await.map_err(|e| e.to_string())?;
    Ok(keys.iter().filter_map(|key| key.as_string()).collect())
}

/// Reads what storage holds. A record that cannot be read is skipped and named in
/// `Restored::unreadable` (left in storage as it is); results of the first layout or of an
/// older shape are rewritten in the current one first, in one transaction. Fails only when
/// IndexedDB itself does.
pub(super) async fn restore(
    db: &Rc<Database>,
    host: &WorkerHost,
) -> Result<Restored<IdbStore>, String> {
    let mut unreadable = Vec::new();
    let items = restore_corpus(db, host, &mut unreadable).await?;
    let unfinished = get_raw(db, KV, UNFINISHED).await?;
    let (unfinished, skipped) = read_unfinished(unfinished.as_ref().map(Option::as_deref));
    unreadable.extend(skipped);
    let mut sessions = Vec::new();
    for RawRecord { key, text } in get_all(db, SESSIONS).await? {
        let read = read_json::<SessionRecord>(
            &format!("the session of check {key}"),
            Some(text.as_deref()),
        )
        .map_err(|mut skipped| {
            skipped.session_of = Some(key.clone());
            skipped
        });
        if let Some(record) = skip(read, &mut unreadable) {
            sessions.push(StoredSession {
                store: IdbStore::new(Some(Rc::clone(db)), record.meta.clone()),
                meta: record.meta,
            });
        }
    }
    let blob = get_raw(db, KV, RESULTS_BLOB).await?;
    let records = get_all(db, RESULTS).await?;
    let stored = read_results(blob.as_ref().map(Option::as_deref), &records);
    unreadable.extend(stored.unreadable);
    host.next_order.set(stored.next_order);
    if !stored.rewrite.is_empty() || stored.blob_moved {
        let mut writes: Vec<Write> = stored
            .rewrite
            .into_iter()
            .map(|(key, text)| Write::Put { store: RESULTS, key, text })
            .collect();
        if stored.blob_moved {
            writes.push(Write::Delete { store: KV, key: RESULTS_BLOB.to_owned() });
        }
        // Awaited, so the results are where the engine writes before it writes; if it fails,
        // the older records stay and are read (and moved) again at the next start.
        let moved = landed(write(db, writes)).await.map_err(|failed| failed.why);
        if let Err(error) = moved {
            host.post(&FromWorker::Error {
                message: format!(
                    "the saved results could not be moved to this version's layout (they are \
                     shown, and kept as they were): {error}"
                ),
            });
        }
    }
    Ok(Restored { items, results: stored.results, sessions, unfinished, unreadable })
}
