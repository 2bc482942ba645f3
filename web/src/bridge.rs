//! The bridge to the engine worker: starts it, posts [`ToWorker`] messages and hands every
//! [`FromWorker`] message to a callback.
//!
//! Messages travel as plain JavaScript objects (the messages' serde JSON: camelCase, a `"type"`
//! tag), which is what the worker reads and posts. The page converts them between
//! `serde_json::Value` and JavaScript objects with [`crate::js`] (no JSON text, so serde_json's
//! parser and writer stay out of the page's wasm), and reads the worker's messages with
//! [`FromJson`] rather than serde's derived deserializer, which was the largest code in the
//! page's wasm (see `verity_messages`'s `read` module). [`encode`] and [`decode`] are the only
//! places that know it.

use verity_messages::{FromJson, FromWorker, ToWorker};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{ErrorEvent, MessageEvent, Worker};

use crate::js::describe;

/// Where the worker's loader is, relative to the page (`web/worker/worker.js`, copied there by `cargo xtask dist`).
pub const WORKER_URL: &str = "./verity-worker_loader.js";

#[wasm_bindgen]
extern "C" {
    /// `web/boot.js`'s `verityEngine(url)`: the engine shared by every tab of the origin (a
    /// `SharedWorker`'s port, or the Web Locks leader tab's worker where there is none), as an
    /// object with a dedicated `Worker`'s members (`postMessage`, `onmessage`,
    /// `onmessageerror`, `onerror`, `terminate`).
    #[wasm_bindgen(catch, js_name = verityEngine)]
    fn verity_engine(url: &str) -> Result<Worker, JsValue>;

    /// `navigator.storage.persist()`: asks the browser to keep the origin's storage (the
    /// corpus, results and sessions in IndexedDB) under storage pressure rather than evict it.
    /// Only a page can ask (not a worker); it throws where there is no `navigator.storage`
    /// (a page that is not a secure context).
    #[wasm_bindgen(catch, js_namespace = ["navigator", "storage"], js_name = persist)]
    fn persist_storage() -> Result<JsValue, JsValue>;
}

/// A message for the worker as a JavaScript value (a plain object).
pub fn encode(message: &ToWorker) -> Result<JsValue, String> {
    let value = serde_json::to_value(message)
        .map_err(|error| format!("could not encode a message for the engine: {error}"))?;
    Ok(crate::js::to_js(&value))
}

/// A message from the worker, from a JavaScript value (a plain object).
pub fn decode(value: JsValue) -> Result<FromWorker, String> {
    crate::js::from_js(&value)
        .and_then(|value| FromWorker::from_json(&value))
        .map_err(|error| format!("could not read a message from the engine: {error}"))
}

/// A running worker. Dropping it terminates the worker.
pub struct WorkerBridge {
    worker: Worker,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::Event)>,
}

impl std::fmt::Debug for WorkerBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBridge").finish_non_exhaustive()
    }
}

impl WorkerBridge {
    /// Connects to the engine at [`WORKER_URL`] (through `web/boot.js`). `on_message` gets
    /// each message; `on_error` gets what went wrong when the worker cannot load or a message
    /// cannot be read.
    pub fn start(
        on_message: impl Fn(FromWorker) + 'static,
        on_error: impl Fn(String) + 'static,
    ) -> Result<Self, String> {
        let worker = verity_engine(WORKER_URL).map_err(|error| {
            format!("the engine worker could not be started: {}", describe(&error))
        })?;
        // The browser decides (Chromium by the site's use, Firefox by asking); either way the
        // app works, and the answer is not needed.
        let _ = persist_storage();
        let on_error = std::rc::Rc::new(on_error);
        let message_error = std::rc::Rc::clone(&on_error);
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            match decode(event.data()) {
                Ok(message) => on_message(message),
                Err(error) => message_error(error),
            }
        });
        let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(move |event: web_sys::Event| {
            let detail = event
                .dyn_ref::<ErrorEvent>()
                .map(|error| error.message())
                .filter(|message| !message.is_empty())
                .unwrap_or_else(|| format!("{WORKER_URL} did not load"));
            on_error(format!("the engine could not be loaded: {detail}"));
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        worker.set_onmessageerror(Some(on_error.as_ref().unchecked_ref()));
        Ok(Self { worker, _on_message: on_message, _on_error: on_error })
    }

    /// Posts one message.
    pub fn post(&self, message: &ToWorker) -> Result<(), String> {
        let value = encode(message)?;
        self.worker.post_message(&value).map_err(|error| describe(&error))
    }
}

impl Drop for WorkerBridge {
    fn drop(&mut self) {
        self.worker.terminate();
    }
}
