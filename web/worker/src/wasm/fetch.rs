//! `fetch` for the provider codecs: a streamed body, an `AbortController` with the request's
//! two clocks (its deadline and its idle timeout), no redirect followed, and the in-tab model.

use std::cell::Cell;
use std::rc::Rc;

use gloo_net::http::{Method, RequestBuilder};
use js_sys::{Reflect, Uint8Array};
use verity_core::provider::http::refuse_key_in_the_clear;
use verity_core::{HttpBody, HttpClient, HttpFailure, HttpRequest, ResponseHead};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    AbortController, Headers, ReadableStreamDefaultReader, RequestRedirect, ResponseType,
};

use super::{describe, scope, sleep, url_parts};

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

/// Aborts its request when dropped (a cancelled check drops the request's future or body),
/// and enforces the request's two clocks: the deadline of the whole exchange (`timeout_ms`)
/// and the longest wait for the next bytes (`idle_timeout_ms`, re-armed by [`Abort::progress`]).
struct Abort {
    controller: AbortController,
    pub(super) timer: Option<(i32, Closure<dyn FnMut()>)>,
    idle: Option<Rc<IdleTimer>>,
    timed_out: Rc<Cell<bool>>,
    stalled: Rc<Cell<bool>>,
    pub(super) done: bool,
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
    pub(super) fn new(
        timeout_ms: Option<u64>,
        idle_timeout_ms: Option<u64>,
    ) -> Result<Self, HttpFailure> {
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
    pub(super) fn progress(&self) {
        if let Some(idle) = &self.idle {
            rearm(idle);
        }
    }

    /// The failure for a rejected `read`.
    pub(super) fn failure(&self, error: &JsValue) -> HttpFailure {
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
