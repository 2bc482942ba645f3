//! Verity's browser page: a Leptos (client-side rendered) UI over the engine worker.
//!
//! The page never links the engine (`verity-core`): it starts the worker ([`bridge`]), speaks
//! [`verity_messages`] to it, and paints before the engine has loaded, with its actions
//! disabled until the worker says it is ready.
//!
//! - [`engine_view::Engine`]: the signals the worker's messages feed ([`engine_view::Engine::apply`]) and
//!   the actions that become messages to it.
//! - [`bridge::WorkerBridge`]: the worker and its message encoding.
//! - Sections, one module each: [`corpus`], [`provider`], [`claims`] (with the check cards),
//!   [`progress`] and [`results`]; [`export`] writes JSON and Markdown.
//!
//! Everything the corpus or a model wrote is rendered as text nodes, never as HTML.
//!
//! To look at the page without the engine, the `preview` example feeds the same components
//! canned worker messages (`?state=loading|empty|corpus|running|results|failure|all`):
//! `cargo build -p verity-web --example preview --target wasm32-unknown-unknown`, then
//! `wasm-bindgen --target web` on `examples/preview.wasm`, beside `style.css` and an
//! `index.html` whose module script imports `preview.js` and awaits its `init()`.

pub mod answer;
pub mod bridge;
pub mod claims;
pub mod corpus;
pub mod engine_view;
pub mod export;
pub mod js;
pub mod progress;
pub mod provider;
pub mod results;
pub mod storage;

use leptos::prelude::*;

use crate::claims::ClaimsSection;
use crate::corpus::CorpusSection;
use crate::engine_view::{Engine, EngineStatus};
use crate::provider::ProviderSection;

/// The whole page for an engine state (the real worker's, or a preview's).
#[component]
pub fn App(engine: Engine) -> impl IntoView {
    let settings = RwSignal::new(crate::provider::load());
    let status = move || match engine.status.get() {
        EngineStatus::Loading => ("loading", "Engine loading…".to_owned()),
        EngineStatus::Ready => ("ready", "Engine ready".to_owned()),
        EngineStatus::Failed(message) => ("failed", format!("Engine unavailable: {message}")),
    };
    view! {
        <header class="top">
            <div class="brand">
                <h1>"Verity"</h1>
                <p class="tagline">"Check claims against your own documents. Everything runs in this browser."</p>
            </div>
            <p class=move || format!("engine-status engine-{}", status().0) data-testid="engine-status" role="status">
                {move || status().1}
            </p>
        </header>
        <main class="layout">
            <div class="column">
                <CorpusSection engine />
            </div>
            <div class="column wide">
                <ProviderSection settings />
                <ClaimsSection engine settings />
            </div>
        </main>
        <crate::storage::StorageView line=engine.storage />
    }
}

/// Starts the engine worker and mounts the page (the binary's `main`).
pub fn start() {
    // Unique across visits and across tabs of one worker loaded in the same millisecond: the
    // time, then 32 random bits (a tab's checks share the worker's sessions and results).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let prefix = format!(
        "c{}{:08x}",
        js_sys::Date::now() as u64,
        (js_sys::Math::random() * f64::from(u32::MAX)) as u32
    );
    let engine = Engine::new(prefix, |_| Err("the engine worker is not running".to_owned()));
    match bridge::WorkerBridge::start(
        move |message| {
            engine.storage.news(&message);
            engine.apply(message);
        },
        move |error| engine.failed(error),
    ) {
        Ok(worker) => {
            let worker = std::rc::Rc::new(worker);
            engine.set_sender(move |message| worker.post(message));
        }
        Err(error) => engine.failed(error),
    }
    engine.storage.read_soon();
    leptos::mount::mount_to_body(move || view! { <App engine /> });
}
