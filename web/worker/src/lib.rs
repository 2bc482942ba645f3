//! Verity's engine in a Web Worker.
//!
//! The page (the Leptos UI, or any JavaScript page) starts the worker as a module worker and
//! talks to it with `postMessage`. `cargo xtask dist` builds this crate's binary for wasm32,
//! binds it with `wasm-bindgen --target web` (`verity-worker.js`, `verity-worker_bg.wasm`) and
//! copies `web/worker/worker.js` beside them as the loader, `verity-worker_loader.js`. Then:
//!
//! ```js
//! const worker = new Worker("./verity-worker_loader.js", { type: "module" });
//! worker.onmessage = (e) => handle(e.data);            // FromWorker, a plain object
//! worker.postMessage({ type: "loadDemo" });            // ToWorker, a plain object or JSON text
//! ```
//!
//! The binary's `main` installs the message listener and buffers what arrives until storage
//! is restored and `Ready` is posted, then handles it in order.
//!
//! The app starts it as a `SharedWorker` instead (`web/boot.js`): one engine for every tab
//! of the origin, each tab a page on its own port, greeted with the engine's state when it
//! connects ([`Engine::welcome`]); news goes to every page, answers to the page that asked
//! ([`Host::reply`]). A dedicated worker also serves the ports a page passes on (`boot.js`'s
//! Web Locks leader, for browsers without shared workers).
//!
//! **Encoding: plain JSON-compatible JavaScript objects**, the serde JSON of
//! `verity_messages::ToWorker` and `FromWorker` (camelCase, a `"type"` tag): exactly what
//! `serde_wasm_bindgen::Serializer::json_compatible()` writes and `serde_wasm_bindgen::from_value`
//! reads on the page. The worker reads an incoming object through `JSON.stringify` and
//! serde_json, and posts `JSON.parse` of serde_json's text, so it links no
//! serde-wasm-bindgen; it also accepts JSON text (a string) from a page that prefers it.

//! The worker posts `Ready` once it has restored what IndexedDB holds (corpus, results, and
//! the checks that were running, which resume from their durable sessions). Without
//! IndexedDB it runs in memory and posts one `Error` saying so.
//!
//! Structure: [`engine::Engine`] holds the state and logic (one module per concept inside it)
//! and is driven through the [`host::Host`] trait; the wasm glue (`wasm` module, only on wasm32) is its host in a
//! browser: the message listener, `fetch` with streaming and `AbortController`, IndexedDB,
//! timers. Native tests drive the same engine with a host in memory.
//!
//! After `loadDemo` the worker also posts `Demo { claims }` (claims to try on the demo
//! corpus).
//!
//! For the embedding module (`verity.js`): named corpora in memory (`addToCorpus`,
//! `dropCorpus`, `check` with a `corpus` name), typed steps whose tools the page runs
//! (`runStep`, `toolCall`/`toolResult`, `stepFinished`), and `?storage=memory` on the worker's
//! URL, which keeps it away from IndexedDB altogether.
//!
//! Failures produced by the worker itself use the core's `JobFailed` shape: a check cancelled
//! while queued (`cancelled`, nothing spent), a bad provider configuration (`config`), a
//! session that could not be resumed or whose storage failed (`cancelled`, with the reason).
#![deny(missing_docs)]

pub mod claims_file;
pub mod corpus;
pub mod demo;
pub mod engine;
pub mod host;
#[cfg(target_arch = "wasm32")]
mod in_tab;
pub mod records;
pub mod saved;
#[cfg(target_arch = "wasm32")]
mod wasm;

/// Starts the worker in a browser (the binary's `main`).
#[cfg(target_arch = "wasm32")]
pub use wasm::start;

pub use engine::{Engine, MAX_CONCURRENCY};
pub use host::{Host, Restored, StoredSession};
pub use saved::{SessionMeta, Unfinished};
