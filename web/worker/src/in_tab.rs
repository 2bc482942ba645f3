//! The model in the tab: requests whose base URL is `in-tab:` go to a page of the app (or of
//! the embedding), which runs llama.cpp compiled to WebAssembly (`web/in-tab.js`, over npm
//! `@wllama/wllama`) and answers as an OpenAI-compatible server would. The engine cannot run
//! it itself: wllama runs in a worker of its own, and a shared worker cannot start one.
//!
//! A page says it can run the model with `{verityModel: "runner"}` when it connects and
//! `{verityModel: "bye"}` when it goes; a request goes to the page that said so last. The
//! exchange itself is the loader's `verityCallInTab` (`web/worker/worker.js`): a port per
//! request, `{progress}` messages that keep the request's idle clock from firing while the
//! model loads or reads a long prompt, and the answer as a response with a readable body, which
//! the engine then reads like any other (the same codec, the same clocks, the same failures).

use std::cell::RefCell;

use js_sys::{Array, Function, Promise, Reflect};
use verity_core::ResponseHead;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortSignal, ReadableStream, ReadableStreamDefaultReader};

/// The base URL that names the model in the tab (`{"api": "openai", "baseUrl": "in-tab:",
/// "model": "<URL of a .gguf file, or file:NAME>"}`).
pub const SCHEME: &str = "in-tab:";

/// Why a request to the model in the tab could not be made: no page runs it.
pub const NO_PAGE: &str = "the model in the tab runs in a page of the app, and no open page has \
     offered to run it: open the app (or the page that embeds it) and check again";

/// Why it could not be made: the loader is older than the engine.
const OLD_LOADER: &str = "this engine's loader (verity-worker_loader.js) cannot reach the model \
     in the tab: it is older than the engine; reload the page";

thread_local! {
    /// The pages that can run the model, the most recent last.
    static RUNNERS: RefCell<Vec<JsValue>> = const { RefCell::new(Vec::new()) };
}

/// Whether `url` is a request for the model in the tab.
pub fn is_in_tab(url: &str) -> bool {
    url.starts_with(SCHEME)
}

/// Takes `page`'s message when it is about the model in the tab (`{verityModel: ...}`);
/// whether it was.
pub fn register(page: &JsValue, data: &JsValue) -> bool {
    if !data.is_object() {
        return false;
    }
    let Some(kind) = Reflect::get(data, &JsValue::from_str("verityModel"))
        .ok()
        .and_then(|kind| kind.as_string())
    else {
        return false;
    };
    RUNNERS.with(|runners| {
        let mut runners = runners.borrow_mut();
        runners.retain(|runner| runner != page);
        if kind == "runner" {
            runners.push(page.clone());
        }
    });
    true
}

/// The page that runs the model now: the last that offered.
pub fn runner() -> Option<JsValue> {
    RUNNERS.with(|runners| runners.borrow().last().cloned())
}

/// Lets `page` go: it never said it was alive before a request's idle clock fired, so it is
/// gone (closed without `bye`, or crashed), and a retry goes to another page.
pub fn let_go(page: &JsValue) {
    RUNNERS.with(|runners| runners.borrow_mut().retain(|runner| runner != page));
}

/// Why [`call`] failed.
pub enum CallError {
    /// No page runs the model, or the loader cannot reach one: nothing was sent.
    Unreachable(&'static str),
    /// The exchange was aborted (`signal`) or the page answered something else.
    Rejected(JsValue),
}

/// Sends the OpenAI-compatible `body` to `page` (see the module's doc), calling `alive` each
/// time the page says it is; the response's head and its body's reader.
///
/// # Errors
/// [`CallError`].
pub async fn call(
    page: &JsValue,
    body: &str,
    signal: &AbortSignal,
    alive: &Function,
) -> Result<(ResponseHead, Option<ReadableStreamDefaultReader>), CallError> {
    let call = Reflect::get(&js_sys::global(), &JsValue::from_str("verityCallInTab"))
        .ok()
        .and_then(|call| call.dyn_into::<Function>().ok())
        .ok_or(CallError::Unreachable(OLD_LOADER))?;
    let promise = call
        .call4(&JsValue::NULL, page, &JsValue::from_str(body), signal, alive)
        .map_err(CallError::Rejected)?;
    let answer = JsFuture::from(Promise::resolve(&promise)).await.map_err(CallError::Rejected)?;
    let field = |name: &str| Reflect::get(&answer, &JsValue::from_str(name)).ok();
    let status = field("status")
        .and_then(|status| status.as_f64())
        .filter(|status| (100.0..=599.0).contains(status))
        .map_or(500, |status| status as u16);
    let headers = field("headers")
        .and_then(|headers| headers.dyn_into::<Array>().ok())
        .map(|headers| {
            headers
                .iter()
                .filter_map(|pair| {
                    let pair = pair.dyn_into::<Array>().ok()?;
                    Some((pair.get(0).as_string()?, pair.get(1).as_string()?))
                })
                .collect()
        })
        .unwrap_or_default();
    let reader = field("body")
        .and_then(|body| body.dyn_into::<ReadableStream>().ok())
        .map(|body| body.get_reader().unchecked_into::<ReadableStreamDefaultReader>());
    Ok((ResponseHead { status, headers }, reader))
}
