//! The browser glue: the worker's message listener, `fetch` (through `gloo-net`) with a
//! streamed body and an `AbortController`, IndexedDB (corpus, results, sessions), timers. Only
//! built for wasm32.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use gloo_net::http::{Method, RequestBuilder};
use idb::{Database, DatabaseEvent, Factory, ObjectStoreParams, TransactionMode};
use js_sys::{Promise, Reflect, Uint8Array};
use serde::{Deserialize, Serialize};
use verity_core::corpus::{Chunk, Passage};
use verity_core::files::passages_from_file;
use verity_core::indexed::IndexedCorpus;
use verity_core::provider::http::refuse_key_in_the_clear;
use verity_core::{Append, DurableLog, Lease};
use verity_core::{
    HttpBody, HttpClient, HttpFailure, HttpRequest, ResponseHead, SessionError, Store,
};
use verity_messages::{CheckResult, CorpusStorage, FromWorker, text};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    AbortController, DedicatedWorkerGlobalScope, Headers, MessageEvent, MessagePort,
    ReadableStreamDefaultReader, RequestRedirect, ResponseType, Url,
};

use crate::corpus::{JsonlBlocks, Rejected};
use crate::engine::Engine;
use crate::host::{Host, Restored, StoredSession};
use crate::records::{
    CorpusOrder, RawRecord, ResultRecord, Unreadable, corpus_part_text, corpus_parts,
    read_corpus_order, read_corpus_part, read_json, read_results, read_unfinished,
};
use crate::saved::{SessionMeta, Unfinished};

const DB_NAME: &str = "verity";
/// 1: `kv` and `sessions`, the results one record of `kv`. 2: `results` added, a record per
/// result; the older record is moved there at start ([`restore`]). 3: `corpus` added, the
/// corpus in parts (a record per chunk); the older record is moved there at start.
const DB_VERSION: u32 = 3;
/// Key-value store: [`CORPUS_ORDER`] and `"unfinished"` (the checks asked for and not
/// finished, [`Unfinished`] as JSON); before version 3 also [`CORPUS_BLOB`], and in version 1
/// `"results"` (every result in one JSON array), both moved at start.
const KV: &str = "kv";
/// The key in [`KV`] of the order of the corpus's parts ([`CorpusOrder`] as JSON).
const CORPUS_ORDER: &str = "corpus-order";
/// The key in [`KV`] of the whole corpus in one record (the passages as JSON), before version
/// 3; moved to [`CORPUS`] at start.
const CORPUS_BLOB: &str = "corpus";
/// One record per chunk of the corpus (its passages as JSON), keyed by the chunk's content
/// hash.
const CORPUS: &str = "corpus";
/// The layout-1 key of the results in [`KV`].
const RESULTS_BLOB: &str = "results";
/// One record per running check: [`SessionRecord`] as JSON, keyed by the check's id.
const SESSIONS: &str = "sessions";
/// One record per finished check: [`ResultRecord`] as JSON, keyed by the check's id.
const RESULTS: &str = "results";

/// What happens when a fetch is refused by the browser (a `TypeError`).
const BLOCKED: &str = "the browser blocked the request or could not connect: check the base URL, \
     that the server is running, and that it allows this page's origin (CORS; for Ollama set \
     OLLAMA_ORIGINS). A page served over https cannot call a plain http:// server other than \
     localhost (mixed content), and one on the public internet reaches a server on the local \
     network only if it allows that (Private Network Access)";

/// Why a model request that the server answered with a redirect failed.
const REDIRECTED: &str = "the server redirected the request; redirects are not followed (a \
     model request carries the API key, which goes only to the base URL you set): set the base \
     URL to the address the server redirects to";

/// The scheme and host of `url` as this worker's `fetch` reads it (WHATWG's parser: it reads
/// `http://evil\@127.0.0.1/` as host `evil`, where a hand-written split would see loopback).
fn url_parts(url: &str) -> Option<(String, String)> {
    let url = Url::new(url).ok()?;
    Some((url.protocol(), url.hostname()))
}

fn scope() -> DedicatedWorkerGlobalScope {
    js_sys::global().unchecked_into()
}

fn describe(error: &JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|error| String::from(error.message()))
        .or_else(|| error.as_string())
        .unwrap_or_else(|| format!("{error:?}"))
}

thread_local! {
    /// The pages this worker serves: the dedicated worker's own scope, or in a shared worker
    /// (every tab of the app) one `MessagePort` per tab that connected. Each has `postMessage`.
    static PAGES: RefCell<Vec<JsValue>> = const { RefCell::new(Vec::new()) };
    /// The page whose message is being handled: where [`Host::reply`] goes.
    static ASKING: RefCell<Option<JsValue>> = const { RefCell::new(None) };
}

/// Messages that arrived before `Ready`, with the page each came from; `None` once started.
type Pending = Rc<RefCell<Option<Vec<(JsValue, String)>>>>;
type Shared = Rc<RefCell<Option<Engine<WorkerHost>>>>;

/// Hands one page's message to the engine (or keeps it until the engine has started), with
/// the page as the one [`Host::reply`] answers.
fn receive(page: &JsValue, data: &JsValue, pending: &Pending, engine: &Shared) {
    if crate::in_tab::register(page, data) {
        return;
    }
    if let Some(files) = handed_files(data) {
        let (page, engine) = (page.clone(), Rc::clone(engine));
        wasm_bindgen_futures::spawn_local(async move {
            for file in files {
                let read = read_passages(&file).await;
                let engine = loop {
                    if let Some(engine) = engine.borrow().clone() {
                        break engine;
                    }
                    sleep(50).await;
                };
                asking(&page, || engine.add_read_file(&file.name(), read));
            }
        });
        return;
    }
    // A search someone types (a page of the whole corpus, which every page asks for after each
    // change, is not one: counting it postponed the save of every edit).
    let field = |name: &str| Reflect::get(data, &JsValue::from_str(name)).ok();
    if field("type").and_then(|kind| kind.as_string()).is_some_and(|kind| kind == "listItems")
        && field("query").and_then(|query| query.as_string()).is_some_and(|q| !q.is_empty())
    {
        LAST_SEARCH.with(|last| last.set(now()));
    }
    let text = data
        .as_string()
        .unwrap_or_else(|| js_sys::JSON::stringify(data).map(String::from).unwrap_or_default());
    if let Some(queue) = pending.borrow_mut().as_mut() {
        queue.push((page.clone(), text));
        return;
    }
    let engine = engine.borrow().clone();
    if let Some(engine) = engine {
        asking(page, || engine.handle_json(&text));
    }
}

/// The files of a message that hands corpus files over whole, `{verityFiles: [File, ...]}`
/// (`web/boot.js` sends large ones so, instead of reading them into the page and sending
/// their text), or `None` for any other message.
fn handed_files(data: &JsValue) -> Option<Vec<web_sys::File>> {
    if !data.is_object() {
        return None;
    }
    let files = Reflect::get(data, &JsValue::from_str("verityFiles")).ok()?;
    let files = files.dyn_into::<js_sys::Array>().ok()?;
    Some(files.iter().filter_map(|file| file.dyn_into::<web_sys::File>().ok()).collect())
}

/// How much of a handed-over file is read at a time.
const BLOCK_BYTES: f64 = 8.0 * 1024.0 * 1024.0;

/// Reads a corpus file handed over whole: a `.jsonl` file a block at a time
/// ([`JsonlBlocks`]), so its whole text is never held; any other kind as text.
async fn read_passages(file: &web_sys::File) -> Result<Vec<Passage>, Rejected> {
    let name = file.name();
    let failed = |error: JsValue| Rejected {
        file: name.clone(),
        line: None,
        message: format!("the browser could not read it: {}", describe(&error)),
    };
    if !JsonlBlocks::reads(&name) {
        let text = JsFuture::from(file.text()).await.map_err(failed)?;
        return passages_from_file(&name, &text.as_string().unwrap_or_default())
            .map_err(Rejected::from);
    }
    let mut blocks = JsonlBlocks::new(&name);
    let size = file.size();
    let mut start = 0.0;
    while start < size {
        let end = (start + BLOCK_BYTES).min(size);
        let blob = file.slice_with_f64_and_f64(start, end).map_err(failed)?;
        let buffer = JsFuture::from(blob.array_buffer()).await.map_err(failed)?;
        blocks.push(&Uint8Array::new(&buffer).to_vec())?;
        start = end;
    }
    blocks.finish()
}

/// Runs `handle` with `page` as the page that asked.
fn asking(page: &JsValue, handle: impl FnOnce()) {
    ASKING.with(|asking| *asking.borrow_mut() = Some(page.clone()));
    handle();
    ASKING.with(|asking| *asking.borrow_mut() = None);
}

/// A page that connected through `port` (a tab of the app, to the shared worker; or a page a
/// dedicated worker's page passed on): served from now on, greeted with the engine's state
/// when it has started (otherwise the start's `Ready` reaches it).
fn connect(port: MessagePort, pending: &Pending, engine: &Shared) {
    let page = JsValue::from(port.clone());
    PAGES.with(|pages| pages.borrow_mut().push(page.clone()));
    let (pending, shared) = (Rc::clone(pending), Rc::clone(engine));
    let listening = page.clone();
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        receive(&listening, &event.data(), &pending, &shared);
    });
    // Setting `onmessage` also starts the port.
    port.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    let started = engine.borrow().clone();
    if let Some(engine) = started {
        asking(&page, || engine.welcome());
        NOT_SAVED
            .with(|kept| kept.borrow().iter().for_each(|notice| post_to(&page, &to_js(notice))));
    }
}

/// The worker's entry point (the binary's `main`): listens for messages at once (buffering
/// them), opens storage, restores, posts `Ready`, then hands the buffered messages over.
///
/// As a shared worker (`new SharedWorker`, what `web/boot.js` starts for the app: one engine
/// for every tab of the origin) each tab connects with a `connect` event and talks through its
/// port; the ports that connected before the wasm ran wait in `self.verityConnected`
/// (`web/worker/worker.js`). As a dedicated worker (the embedding, or a browser without
/// shared workers) the page is the worker's own scope, and a message carrying ports connects
/// each of them as a page.
pub fn start() {
    let pending: Pending = Rc::new(RefCell::new(Some(Vec::new())));
    let engine: Shared = Rc::new(RefCell::new(None));
    let global = js_sys::global();
    if Reflect::has(&global, &JsValue::from_str("onconnect")).unwrap_or(false) {
        let early = Reflect::get(&global, &JsValue::from_str("verityConnected"))
            .ok()
            .filter(|early| early.is_instance_of::<js_sys::Array>())
            .map(|early| early.unchecked_into::<js_sys::Array>());
        for port in early.iter().flat_map(|early| early.iter()) {
            if let Ok(port) = port.dyn_into::<MessagePort>() {
                connect(port, &pending, &engine);
            }
        }
        let (pending, engine) = (Rc::clone(&pending), Rc::clone(&engine));
        let on_connect = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            for port in event.ports().iter() {
                if let Ok(port) = port.dyn_into::<MessagePort>() {
                    connect(port, &pending, &engine);
                }
            }
        });
        let _ = Reflect::set(&global, &JsValue::from_str("onconnect"), on_connect.as_ref());
        on_connect.forget();
    } else {
        let page = JsValue::from(scope());
        PAGES.with(|pages| pages.borrow_mut().push(page.clone()));
        let (pending, engine) = (Rc::clone(&pending), Rc::clone(&engine));
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            // Ports passed on by the page (`web/boot.js`'s leader tab: one per other tab of
            // the app, when the browser has no shared workers) connect pages; the message
            // that carries them is nothing else.
            let ports = event.ports();
            if ports.length() > 0 {
                for port in ports.iter() {
                    if let Ok(port) = port.dyn_into::<MessagePort>() {
                        connect(port, &pending, &engine);
                    }
                }
                return;
            }
            receive(&page, &event.data(), &pending, &engine);
        });
        scope().set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        on_message.forget();
    }
    wasm_bindgen_futures::spawn_local(async move {
        // `verity-worker_loader.js?storage=memory` (the embedding module): nothing is read
        // from or written to the page origin's IndexedDB, so an embedded check never touches
        // the app's corpus, results or sessions.
        let memory = scope().location().search().contains("storage=memory");
        let (db, storage_error) = if memory {
            (None, None)
        } else {
            match open_database().await {
                Ok(db) => (Some(Rc::new(db)), None),
                Err(why) => (None, Some(why)),
            }
        };
        let host =
            WorkerHost { db: db.clone(), next_order: Cell::new(0), corpus_saver: Rc::default() };
        let restored = match &db {
            Some(db) => restore(db, &host).await.unwrap_or_else(|why| {
                host.post(&FromWorker::Error {
                    message: format!("the saved corpus and results could not be read: {why}"),
                });
                Restored::default()
            }),
            None => Restored::default(),
        };
        let new_engine = Engine::new(host);
        *engine.borrow_mut() = Some(new_engine.clone());
        new_engine.start(restored).await;
        if let Some(why) = storage_error {
            new_engine.host().post(&FromWorker::Error {
                message: format!(
                    "this browser's storage (IndexedDB) is unavailable, so nothing is kept after \
                     a reload: {why}"
                ),
            });
        }
        let queued = pending.borrow_mut().take().unwrap_or_default();
        for (page, text) in queued {
            asking(&page, || new_engine.handle_json(&text));
        }
    });
}

/// Opens the database at [`DB_VERSION`], creating what is missing. An upgrade waits while an
/// older version of the app holds a connection (its pages are told, and it goes on once that
/// tab closes); and this connection is closed when a newer version asks to upgrade, so that
/// it never waits on this one (the pages are told to reload).
async fn open_database() -> Result<Database, String> {
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
struct SessionRecord {
    meta: SessionMeta,
    log: String,
}

async fn get_text(db: &Database, store: &str, key: &str) -> Result<Option<String>, String> {
    let tx = db.transaction(&[store], TransactionMode::ReadOnly).map_err(|e| e.to_string())?;
    let object_store = tx.object_store(store).map_err(|e| e.to_string())?;
    let value = object_store
        .get(JsValue::from_str(key))
        .map_err(|e| e.to_string())?
        .await
        .map_err(|e| e.to_string())?;
    Ok(value.and_then(|value| value.as_string()))
}

/// The value under `key` in `store`: `None` when there is none, `Some(None)` when it is not
/// text.
async fn get_raw(db: &Database, store: &str, key: &str) -> Result<Option<Option<String>>, String> {
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
fn skip<T>(read: Result<Option<T>, Unreadable>, unreadable: &mut Vec<Unreadable>) -> Option<T> {
    read.unwrap_or_else(|skipped| {
        unreadable.push(skipped);
        None
    })
}

/// Every record of `store`, in key order.
async fn get_all(db: &Database, store: &str) -> Result<Vec<RawRecord>, String> {
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
    let mut items = Vec::new();
    let mut stored = HashSet::new();
    if let Some(order) = order {
        for key in &order.parts {
            let text = get_raw(db, CORPUS, key).await?;
            // A part that cannot be read stays until the corpus next changes.
            stored.insert(key.clone());
            if let Some(passages) = skip(
                read_corpus_part(key, text.as_ref().map(Option::as_deref)).map(Some),
                unreadable,
            ) {
                items.extend(passages);
            }
        }
        let stale: Vec<Write> = keys
            .into_iter()
            .filter(|key| !stored.contains(key))
            .map(|key| Write::Delete { store: CORPUS, key })
            .collect();
        // The first layout's record is gone once an order names the parts (recovered: no
        // order does, so it is left as it is).
        let blob = (!recovered).then(|| Write::Delete { store: KV, key: CORPUS_BLOB.to_owned() });
        write_later(db, stale.into_iter().chain(blob).collect(), None);
        *host.corpus_saver.stored.borrow_mut() = stored;
        return Ok(items);
    }
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
    let moved = match write(db, writes) {
        Ok(tx) => commit(tx).await.map_err(|failed| failed.why),
        Err(error) => Err(error.to_string()),
    };
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
async fn restore(db: &Rc<Database>, host: &WorkerHost) -> Result<Restored<IdbStore>, String> {
    let mut unreadable = Vec::new();
    let items = restore_corpus(db, host, &mut unreadable).await?;
    let unfinished = get_raw(db, KV, "unfinished").await?;
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
        let moved = match write(db, writes) {
            Ok(tx) => commit(tx).await.map_err(|failed| failed.why),
            Err(error) => Err(error.to_string()),
        };
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

/// One change to an object store.
enum Write {
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
    fn store(&self) -> &'static str {
        match self {
            Self::Put { store, .. } | Self::Delete { store, .. } | Self::Clear { store } => store,
            Self::PutPart { .. } => CORPUS,
        }
    }
}

/// Puts `value` under `key` in `store`, or with `None` deletes it ([`write_later`] with one
/// write).
fn put_later(
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
        if_full,
    );
}

/// Why a read-write transaction did not commit, and whether it was because the browser's
/// storage for the page is full (`QuotaExceededError`: the transaction is aborted with it).
struct NotCommitted {
    why: String,
    full: bool,
}

/// Awaits `tx`: committed, or why not.
async fn commit(tx: idb::Transaction) -> Result<(), NotCommitted> {
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
    static LAST_SEARCH: Cell<f64> = const { Cell::new(f64::NEG_INFINITY) };
    /// The database was closed for a newer version's upgrade: from then on nothing is read
    /// from or written to it (sessions go on from the logs they hold in memory).
    static CLOSED: Cell<bool> = const { Cell::new(false) };
    /// The storage-full notices posted since a write last landed: each is posted once, not
    /// at every write of the same record while the disk stays full.
    static TOLD_FULL: RefCell<Vec<FromWorker>> = const { RefCell::new(Vec::new()) };
    /// The storage-full notices of checks (a result, a session's progress) posted so far: a
    /// page that connects later is told them too, so its cards say "Not saved" as well.
    static NOT_SAVED: RefCell<Vec<FromWorker>> = const { RefCell::new(Vec::new()) };
}

/// Posts `notice` (a [`FromWorker::NotSaved`]) unless it was posted since a write last landed.
fn tell_full(notice: &FromWorker) {
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

/// The notice that `what` (with the check `id`, if it is one's) was not saved because the
/// browser's storage is full, and what became of it (`then`).
fn storage_full(id: Option<&str>, what: &str, then: &str) -> FromWorker {
    FromWorker::NotSaved { id: id.map(str::to_owned), message: text::not_saved(what, then) }
}

/// Starts `writes` in one read-write transaction over their object stores, so they land
/// together or not at all; the transaction, to be awaited.
fn write(db: &Database, writes: Vec<Write>) -> Result<idb::Transaction, idb::Error> {
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
/// it fails because storage is full, `if_full` is posted (what is kept in memory instead);
/// any other failure is an `Error`.
fn write_later(db: &Rc<Database>, writes: Vec<Write>, if_full: Option<FromWorker>) {
    // Nothing to write is no transaction (IndexedDB refuses one over no store).
    if writes.is_empty() {
        return;
    }
    let written = write(db, writes);
    wasm_bindgen_futures::spawn_local(async move {
        let outcome = match written {
            Ok(tx) => commit(tx).await,
            Err(error) => Err(NotCommitted { why: error.to_string(), full: false }),
        };
        tell_outcome(outcome, if_full);
    });
}

/// Tells the pages what became of a write: nothing when it landed; `if_full` when storage was
/// full; an `Error` otherwise.
fn tell_outcome(outcome: Result<(), NotCommitted>, if_full: Option<FromWorker>) {
    match (outcome, if_full) {
        (Ok(()), _) => TOLD_FULL.with(|told| told.borrow_mut().clear()),
        (Err(NotCommitted { full: true, .. }), Some(notice)) => tell_full(&notice),
        (Err(NotCommitted { why, .. }), _) => {
            post(&FromWorker::Error { message: format!("saving to IndexedDB failed: {why}") });
        }
    }
}

/// Milliseconds on the worker's monotonic clock.
fn now() -> f64 {
    scope().performance().map_or_else(js_sys::Date::now, |performance| performance.now())
}

/// How long the corpus's save waits after the last table search before it writes its next
/// large part: making a part's text holds the worker ~20 ms, which a person typing a search
/// would feel, so the save yields to them.
const SEARCH_QUIET_MS: f64 = 300.0;

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
struct CorpusSaver {
    /// The keys of the corpus parts in storage: a save writes the others, and deletes these
    /// when no longer in the corpus.
    stored: RefCell<HashSet<String>>,
    /// The version to save next.
    pending: RefCell<Option<Arc<IndexedCorpus>>>,
    /// Whether a save runs.
    running: Cell<bool>,
    /// The content id of the version storage holds (`""` for the empty corpus), once a save
    /// landed; `None` before, when storage holds what the engine restored at start.
    saved: RefCell<Option<String>>,
    /// Whether the last save failed.
    failed: Cell<bool>,
}

/// The content id of `corpus` as the pages know it (`None`: empty).
fn corpus_id(corpus: &IndexedCorpus) -> Option<String> {
    (!corpus.corpus().is_empty()).then(|| corpus.id().to_string())
}

impl CorpusSaver {
    /// Saves `corpus` (after the save that runs, if one does).
    fn save(self: &Rc<Self>, db: &Rc<Database>, corpus: &Arc<IndexedCorpus>) {
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
                tell_outcome(outcome, Some(full));
            }
            saver.running.set(false);
        });
    }

    /// Writes the parts of `corpus` that storage lacks, [`PARTS_PER_WRITE`] per transaction,
    /// then the order and the deletion of the parts no longer in it, in one last transaction:
    /// until that one commits, storage holds the previous version (and parts of this one that
    /// nothing names yet).
    async fn write(&self, db: &Database, corpus: &Arc<IndexedCorpus>) -> Result<(), NotCommitted> {
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
async fn run(db: &Database, writes: Vec<Write>) -> Result<(), NotCommitted> {
    match write(db, writes) {
        Ok(tx) => commit(tx).await,
        Err(error) => Err(NotCommitted { why: error.to_string(), full: false }),
    }
}

/// `message` as a plain, JSON-compatible JavaScript object (what
/// `serde_wasm_bindgen::Serializer::json_compatible()` makes and reads).
fn to_js(message: &FromWorker) -> JsValue {
    let text = serde_json::to_string(message).expect("messages serialize");
    js_sys::JSON::parse(&text).unwrap_or_else(|_| JsValue::from_str(&text))
}

/// Posts to one page (a `MessagePort` or the dedicated worker's scope: both have
/// `postMessage`; a port whose tab has closed drops it).
fn post_to(page: &JsValue, value: &JsValue) {
    let _ = page.unchecked_ref::<MessagePort>().post_message(value);
}

/// Posts `message` to every page.
fn post(message: &FromWorker) {
    let value = to_js(message);
    PAGES.with(|pages| pages.borrow().iter().for_each(|page| post_to(page, &value)));
}

/// Posts `message` to the page that asked, or to every page outside of a page's message.
fn reply(message: &FromWorker) {
    match ASKING.with(|asking| asking.borrow().clone()) {
        Some(page) => post_to(&page, &to_js(message)),
        None => post(message),
    }
}

/// The engine's host in a browser worker.
#[derive(Debug)]
struct WorkerHost {
    /// `None` when IndexedDB is unavailable: everything stays in memory.
    db: Option<Rc<Database>>,
    /// The order of the next result recorded ([`ResultRecord::order`]).
    next_order: Cell<u64>,
    /// Saves the corpus.
    corpus_saver: Rc<CorpusSaver>,
}

impl WorkerHost {
    /// IndexedDB, unless there is none or it was closed for a newer version.
    fn db(&self) -> Option<&Rc<Database>> {
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

    fn record_result(&self, result: &CheckResult, ended_session: &str) {
        if let Some(db) = self.db() {
            let order = self.next_order.get();
            self.next_order.set(order.saturating_add(1));
            let text = ResultRecord::new(order, result.clone()).to_text();
            let full = storage_full(
                Some(&result.id),
                &format!("The result of “{}” is", result.claim),
                "It is shown until the last tab of the app closes.",
            );
            write_later(
                db,
                vec![
                    Write::Put { store: RESULTS, key: result.id.clone(), text },
                    Write::Delete { store: SESSIONS, key: ended_session.to_owned() },
                ],
                Some(full),
            );
        } else if CLOSED.with(Cell::get) {
            // Not silently: the card says "not saved", as for a full disk.
            tell_full(&FromWorker::NotSaved {
                id: Some(result.id.clone()),
                message: text::not_saved_for_newer_version(&result.claim),
            });
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
            write_later(db, vec![Write::Clear { store: RESULTS }, blob], None);
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

/// A check's session in IndexedDB: one record (the check and its log as JSONL) under the
/// check's id. Every write reads the record and writes it back in one read-write
/// transaction, so the lease check and the append are atomic across tabs. Without IndexedDB
/// the log lives in memory.
#[derive(Debug)]
pub struct IdbStore {
    db: Option<Rc<Database>>,
    meta: SessionMeta,
    /// The log: all of it without IndexedDB, else a copy of it as last stored (what the
    /// session goes on from when storage becomes full or is closed for a newer version).
    memory: RefCell<DurableLog>,
    /// Storage was full when the log was written: from then on it lives in `memory` (the
    /// record keeps what was written before), so the check goes on rather than ending.
    full: Cell<bool>,
}

impl IdbStore {
    fn new(db: Option<Rc<Database>>, meta: SessionMeta) -> Self {
        Self { db, meta, memory: RefCell::new(DurableLog::new()), full: Cell::new(false) }
    }

    /// IndexedDB, unless there is none, it was full, or it was closed for a newer version.
    fn db(&self) -> Option<&Rc<Database>> {
        self.db.as_ref().filter(|_| !self.full.get() && !CLOSED.with(Cell::get))
    }

    /// Reads the log, lets `change` edit it, writes it back, in one transaction. When the
    /// write fails because storage is full, the log is kept in memory from then on, and the
    /// pages are told (a check whose responses were paid for is not ended by a full disk; a
    /// reload would resume it from the last write that landed).
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
        let mut log = parse_record(current)?;
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
                Ok(value)
            }
            Err(NotCommitted { full: true, .. }) => {
                *self.memory.borrow_mut() = log;
                self.full.set(true);
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

    async fn read(&self) -> Result<DurableLog, SessionError> {
        let Some(db) = self.db() else { return Ok(self.memory.borrow().clone()) };
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

/// A timer as a future: resolves after `ms` milliseconds (`setTimeout`).
async fn sleep(ms: u64) {
    let ms = i32::try_from(ms).unwrap_or(i32::MAX);
    let promise = Promise::new(&mut |resolve, _| {
        let _ = scope().set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
    });
    let _ = JsFuture::from(promise).await;
}

/// Aborts its request when dropped (a cancelled check drops the request's future or body),
/// and enforces the request's two clocks: the deadline of the whole exchange (`timeout_ms`)
/// and the longest wait for the next bytes (`idle_timeout_ms`, re-armed by [`Abort::progress`]).
struct Abort {
    controller: AbortController,
    timer: Option<(i32, Closure<dyn FnMut()>)>,
    idle: Option<Rc<IdleTimer>>,
    timed_out: Rc<Cell<bool>>,
    stalled: Rc<Cell<bool>>,
    done: bool,
}

/// The idle clock: the running timer's id, its length in ms, and what it calls.
type IdleTimer = (Cell<i32>, i32, Closure<dyn FnMut()>);

/// Calls `callback` after `ms` milliseconds; the timer's id.
fn set_timer(callback: &Closure<dyn FnMut()>, ms: i32) -> i32 {
    scope()
        .set_timeout_with_callback_and_timeout_and_arguments_0(
            callback.as_ref().unchecked_ref(),
            ms,
        )
        .unwrap_or(0)
}

impl Abort {
    fn new(timeout_ms: Option<u64>, idle_timeout_ms: Option<u64>) -> Result<Self, HttpFailure> {
        let controller = AbortController::new()
            .map_err(|e| HttpFailure::Network(format!("no AbortController: {}", describe(&e))))?;
        let timed_out = Rc::new(Cell::new(false));
        let stalled = Rc::new(Cell::new(false));
        let on_fire = |flag: &Rc<Cell<bool>>| {
            let (controller, flag) = (controller.clone(), Rc::clone(flag));
            Closure::<dyn FnMut()>::new(move || {
                flag.set(true);
                controller.abort();
            })
        };
        let timer = timeout_ms.map(|ms| {
            let on_deadline = on_fire(&timed_out);
            let id = set_timer(&on_deadline, i32::try_from(ms).unwrap_or(i32::MAX));
            (id, on_deadline)
        });
        let idle = idle_timeout_ms.map(|ms| {
            let ms = i32::try_from(ms).unwrap_or(i32::MAX);
            let on_stall = on_fire(&stalled);
            Rc::new((Cell::new(set_timer(&on_stall, ms)), ms, on_stall))
        });
        Ok(Self { controller, timer, idle, timed_out, stalled, done: false })
    }

    /// Bytes arrived: the idle clock starts again.
    fn progress(&self) {
        if let Some(idle) = &self.idle {
            rearm(idle);
        }
    }

    /// The failure for a rejected `read`.
    fn failure(&self, error: &JsValue) -> HttpFailure {
        self.classify(error.is_instance_of::<js_sys::TypeError>(), describe(error))
    }

    /// The failure for a rejected `fetch` (gloo-net keeps the JavaScript error's name).
    fn fetch_failure(&self, error: &gloo_net::Error) -> HttpFailure {
        match error {
            gloo_net::Error::JsError(error) => {
                self.classify(error.name == "TypeError", error.message.clone())
            }
            other => self.classify(false, other.to_string()),
        }
    }

    /// A deadline, a cancel, the browser's refusal (a `TypeError`: CORS, no connection) or
    /// something else.
    fn classify(&self, type_error: bool, message: String) -> HttpFailure {
        if self.stalled.get() {
            HttpFailure::Stalled
        } else if self.timed_out.get() {
            HttpFailure::TimedOut
        } else if self.controller.signal().aborted() {
            HttpFailure::Aborted
        } else if type_error {
            HttpFailure::Network(format!("{BLOCKED} ({message})"))
        } else {
            HttpFailure::Network(message)
        }
    }
}

/// Starts the idle clock again.
fn rearm((id, ms, on_stall): &IdleTimer) {
    scope().clear_timeout_with_handle(id.get());
    id.set(set_timer(on_stall, *ms));
}

impl Drop for Abort {
    fn drop(&mut self) {
        if let Some((id, _)) = self.timer.take() {
            scope().clear_timeout_with_handle(id);
        }
        if let Some(idle) = self.idle.take() {
            scope().clear_timeout_with_handle(idle.0.get());
        }
        if !self.done {
            self.controller.abort();
        }
    }
}

/// [`HttpClient`] over the worker's global `fetch`, through `gloo-net`'s `RequestBuilder`.
#[derive(Debug, Clone, Copy)]
pub struct FetchClient;

/// A response body read through its `ReadableStream`, chunk by chunk.
pub struct FetchBody {
    reader: Option<ReadableStreamDefaultReader>,
    abort: Abort,
}

impl std::fmt::Debug for FetchBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchBody").finish_non_exhaustive()
    }
}

impl HttpClient for FetchClient {
    type Body = FetchBody;

    async fn send(&self, request: &HttpRequest) -> Result<(ResponseHead, FetchBody), HttpFailure> {
        // Nothing is sent when the key would go in the clear (the engine refused the provider
        // before the check started; this holds for every request, whoever made it).
        refuse_key_in_the_clear(request, url_parts).map_err(HttpFailure::Refused)?;
        let abort = Abort::new(request.timeout_ms, request.idle_timeout_ms)?;
        if crate::in_tab::is_in_tab(&request.url) {
            return send_in_tab(request, abort).await;
        }
        let headers = Headers::new()
            .map_err(|e| HttpFailure::Network(format!("headers: {}", describe(&e))))?;
        for (name, value) in &request.headers {
            headers.append(name, value).map_err(|e| {
                HttpFailure::Network(format!("the header {name:?} is refused: {}", describe(&e)))
            })?;
        }
        let method = Method::from_bytes(request.method.as_bytes()).map_err(|_| {
            HttpFailure::Network(format!("{:?} is not an HTTP method", request.method))
        })?;
        let signal = abort.controller.signal();
        let built = RequestBuilder::new(&request.url)
            .method(method)
            .headers(gloo_net::http::Headers::from_raw(headers))
            .abort_signal(Some(&signal))
            // A redirect is not followed: the key would go with it to wherever it points.
            .redirect(RequestRedirect::Manual)
            .body(request.body.as_str())
            .map_err(|e| {
                HttpFailure::Network(format!("the request to {} cannot be made: {e}", request.url))
            })?;
        let response = match built.send().await {
            Ok(response) => response,
            Err(error) => return Err(abort.fetch_failure(&error)),
        };
        if response.type_() == ResponseType::Opaqueredirect {
            return Err(HttpFailure::Refused(REDIRECTED.to_owned()));
        }
        abort.progress();
        let head = ResponseHead {
            status: response.status(),
            headers: response.headers().entries().collect(),
        };
        let reader = response
            .body()
            .map(|stream| stream.get_reader().unchecked_into::<ReadableStreamDefaultReader>());
        Ok((head, FetchBody { reader, abort }))
    }

    async fn wait(&self, delay_ms: u64) {
        sleep(delay_ms).await;
    }
}

/// Sends `request` to the page that runs the model in the tab (`crate::in_tab`), under
/// `abort`'s clocks: each time the page says it is alive the idle clock starts again, and a page
/// that never said so before it fired is let go.
async fn send_in_tab(
    request: &HttpRequest,
    abort: Abort,
) -> Result<(ResponseHead, FetchBody), HttpFailure> {
    let page = crate::in_tab::runner()
        .ok_or_else(|| HttpFailure::Network(crate::in_tab::NO_PAGE.to_owned()))?;
    let heard = Rc::new(Cell::new(false));
    let alive = {
        let (heard, idle) = (Rc::clone(&heard), abort.idle.clone());
        Closure::<dyn FnMut()>::new(move || {
            heard.set(true);
            if let Some(idle) = &idle {
                rearm(idle);
            }
        })
    };
    let signal = abort.controller.signal();
    let answered =
        crate::in_tab::call(&page, &request.body, &signal, alive.as_ref().unchecked_ref()).await;
    // The port is closed once the answer (or the abort) came: nothing calls `alive` again.
    drop(alive);
    match answered {
        Ok((head, reader)) => {
            abort.progress();
            Ok((head, FetchBody { reader, abort }))
        }
        Err(crate::in_tab::CallError::Unreachable(why)) => {
            Err(HttpFailure::Network(why.to_owned()))
        }
        Err(crate::in_tab::CallError::Rejected(error)) => {
            let failure = abort.failure(&error);
            if failure == HttpFailure::Stalled && !heard.get() {
                crate::in_tab::let_go(&page);
            }
            Err(failure)
        }
    }
}

impl HttpBody for FetchBody {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpFailure> {
        let Some(reader) = &self.reader else {
            self.abort.done = true;
            return Ok(None);
        };
        let chunk = match JsFuture::from(reader.read()).await {
            Ok(chunk) => chunk,
            Err(error) => return Err(self.abort.failure(&error)),
        };
        self.abort.progress();
        let done = Reflect::get(&chunk, &JsValue::from_str("done"))
            .ok()
            .and_then(|done| done.as_bool())
            .unwrap_or(true);
        if done {
            self.abort.done = true;
            self.reader = None;
            return Ok(None);
        }
        let value = Reflect::get(&chunk, &JsValue::from_str("value")).unwrap_or(JsValue::UNDEFINED);
        Ok(Some(value.dyn_into::<Uint8Array>().map(|bytes| bytes.to_vec()).unwrap_or_default()))
    }
}
