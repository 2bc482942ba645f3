//! The browser glue, only built for wasm32: the engine's [`Host`] in a worker. This module
//! starts the worker ([`start`]): the message listener (one page, or a port per tab in a
//! shared worker), files handed over by a page, posting to pages, timers. Inside it:
//!
//! - `worker_host`: `WorkerHost`, what the engine asks of the browser (it names the rest);
//! - `database`: IndexedDB, its stores and versions, restoring what it holds at start, and
//!   writes (one transaction each, committed in the background, a full disk told once);
//! - `saver`: the corpus saved in parts in the background, yielding to a person's search;
//! - `store`: a check's durable session record (`IdbStore`, the core's `Store`);
//! - `fetch`: `FetchClient`, the codecs' `HttpClient` over `fetch` (a streamed body, an
//!   `AbortController` with the request's deadline and idle timeout, no redirect followed,
//!   the in-tab model's requests).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::{Promise, Reflect, Uint8Array};
use verity_core::corpus::Passage;
use verity_core::files::passages_from_file;
use verity_messages::FromWorker;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent, MessagePort, Url};

use self::database::{LAST_SEARCH, NOT_SAVED, open_database};
use self::restore::restore;
use self::worker_host::WorkerHost;
use crate::corpus::{JsonlBlocks, Rejected};
use crate::engine::Engine;
use crate::host::{Host, Restored};

mod database;
mod fetch;
mod restore;
mod saver;
mod store;
mod worker_host;

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
        listen_as_shared(&global, &pending, &engine);
    } else {
        listen_as_dedicated(&pending, &engine);
    }
    wasm_bindgen_futures::spawn_local(run_engine(pending, engine));
}

/// As a shared worker: connects the ports of the pages that connected before the wasm ran, and
/// every page that connects later.
fn listen_as_shared(global: &JsValue, pending: &Pending, engine: &Shared) {
    let early = Reflect::get(global, &JsValue::from_str("verityConnected"))
        .ok()
        .filter(|early| early.is_instance_of::<js_sys::Array>())
        .map(|early| early.unchecked_into::<js_sys::Array>());
    for port in early.iter().flat_map(|early| early.iter()) {
        if let Ok(port) = port.dyn_into::<MessagePort>() {
            connect(port, pending, engine);
        }
    }
    let (pending, engine) = (Rc::clone(pending), Rc::clone(engine));
    let on_connect = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        for port in event.ports().iter() {
            if let Ok(port) = port.dyn_into::<MessagePort>() {
                connect(port, &pending, &engine);
            }
        }
    });
    let _ = Reflect::set(global, &JsValue::from_str("onconnect"), on_connect.as_ref());
    on_connect.forget();
}

/// As a dedicated worker: the page is the worker's own scope, and a message carrying ports
/// connects each of them as a page.
fn listen_as_dedicated(pending: &Pending, engine: &Shared) {
    let page = JsValue::from(scope());
    PAGES.with(|pages| pages.borrow_mut().push(page.clone()));
    let (pending, engine) = (Rc::clone(pending), Rc::clone(engine));
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        // Ports passed on by the page (`web/boot.js`'s leader tab: one per other tab of the
        // app, when the browser has no shared workers) connect pages; the message that carries
        // them is nothing else.
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

/// Opens storage, restores what it holds, starts the engine (it posts `Ready`), then hands it
/// the messages that came meanwhile.
async fn run_engine(pending: Pending, engine: Shared) {
    // `verity-worker_loader.js?storage=memory` (the embedding module): nothing is read from or
    // written to the page origin's IndexedDB, so an embedded check never touches the app's
    // corpus, results or sessions.
    let memory = scope().location().search().contains("storage=memory");
    let (db, storage_error) = if memory {
        (None, None)
    } else {
        match open_database().await {
            Ok(db) => (Some(Rc::new(db)), None),
            Err(why) => (None, Some(why)),
        }
    };
    let host = WorkerHost {
        db: db.clone(),
        next_order: Cell::new(0),
        corpus_saver: Rc::default(),
        unfinished: Rc::default(),
        listed: RefCell::default(),
    };
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
                "this browser's storage (IndexedDB) is unavailable, so nothing is kept after a \
                 reload: {why}"
            ),
        });
    }
    let queued = pending.borrow_mut().take().unwrap_or_default();
    for (page, text) in queued {
        asking(&page, || new_engine.handle_json(&text));
    }
}

/// Milliseconds on the worker's monotonic clock.
fn now() -> f64 {
    scope().performance().map_or_else(js_sys::Date::now, |performance| performance.now())
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

/// A timer as a future: resolves after `ms` milliseconds (`setTimeout`).
async fn sleep(ms: u64) {
    let ms = i32::try_from(ms).unwrap_or(i32::MAX);
    let promise = Promise::new(&mut |resolve, _| {
        let _ = scope().set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
    });
    let _ = JsFuture::from(promise).await;
}
