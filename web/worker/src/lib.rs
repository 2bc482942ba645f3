//! Verity's engine in a Web Worker.
//!
//! The page (the Leptos UI, or any JavaScript page) starts the worker as a module worker and
//! talks to it with `postMessage`. With trunk (in `index.html`):
//!
//! ```html
//! <link data-trunk rel="rust" href="web/worker/Cargo.toml" data-type="worker"
//!       data-bindgen-target="web" data-loader-shim data-wasm-opt="z"
//!       data-cargo-profile-release="wasm-release"/>
//! ```
//!
//! which emits `verity_worker.js`, `verity_worker_bg.wasm` and `verity_worker_loader.js`
//! (the lib's name, not hashed). Without trunk, `wasm-bindgen --target web` gives the first two
//! and `web/worker/worker.js` is the loader. Then:
//!
//! ```js
//! const worker = new Worker("./verity_worker_loader.js", { type: "module" });
//! worker.onmessage = (e) => handle(JSON.parse(e.data));      // FromWorker, JSON text
//! worker.postMessage(JSON.stringify({ type: "loadDemo" }));  // ToWorker, JSON text
//! ```
//!
//! The wasm's start function installs the message listener and buffers what arrives until
//! storage is restored and `Ready` is posted, then handles it in order.
//!
//! **Encoding: every message is JSON text** (a JS string), the serde JSON of
//! `verity_messages::ToWorker` and `FromWorker` (camelCase, a `"type"` tag). The worker also
//! accepts a plain object for `ToWorker` (it stringifies it), but always posts strings. JSON
//! text keeps one codec on both sides (serde_json, already in both wasm files), is what a
//! JavaScript page writes with `JSON.stringify`, and copies a 5 MB upload once each way.
//!
//! The worker posts `Ready` once it has restored what IndexedDB holds (corpus, results, and
//! the checks that were running, which resume from their durable sessions). Without
//! IndexedDB it runs in memory and posts one `Error` saying so.
//!
//! Structure: [`engine::Engine`] holds the state and logic and is driven through the
//! [`engine::Host`] trait; the wasm glue (`wasm` module, only on wasm32) is its host in a
//! browser: the message listener, `fetch` with streaming and `AbortController`, IndexedDB,
//! timers. Native tests drive the same engine with a host in memory.
//!
//! After `loadDemo` the worker also posts `Demo { claims }` (claims to try on the demo
//! corpus).
//!
//! Failures produced by the worker itself use the core's `JobFailed` shape: a check cancelled
//! while queued (`cancelled`, nothing spent), a bad provider configuration (`config`), a
//! session that could not be resumed or whose storage failed (`cancelled`, with the reason).
#![deny(missing_docs)]

pub mod corpus;
pub mod demo;
pub mod engine;
#[cfg(target_arch = "wasm32")]
mod wasm;

pub use engine::{Engine, Host, Restored, SessionMeta, StoredSession};
