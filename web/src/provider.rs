//! The Provider section: the offline baseline (the default), an OpenAI-compatible endpoint with
//! presets, or Anthropic. API keys belong to an endpoint (the kind and its base URL): the key
//! field shows, and a check sends, only the key typed for the endpoint in use. Keys stay in
//! memory unless "Remember on this device" is ticked. What the settings mean (presets, keys,
//! limits, the core's provider JSON) is `verity_messages::provider`; the worker reads them.

use leptos::prelude::*;
use verity_messages::ProviderChoice;
pub use verity_messages::provider::{
    ANTHROPIC_BASE_URL, IN_TAB, LIMITS, PRESETS, ProviderKind, ProviderSettings,
};

/// The localStorage key of the provider settings.
const STORAGE_KEY: &str = "verity.provider";

/// The settings kept in this browser, or the defaults.
pub fn load() -> ProviderSettings {
    storage()
        .and_then(|storage| storage.get_item(STORAGE_KEY).ok().flatten())
        .and_then(|text| crate::js::parse(&text).ok())
        .map(|stored| ProviderSettings::read(&stored))
        .unwrap_or_default()
}

fn save(settings: &ProviderSettings) {
    // A browser without storage (private mode, quota) keeps the settings for this visit.
    let text = serde_json::to_value(settings.stored())
        .map_err(|error| error.to_string())
        .and_then(|stored| crate::js::stringify(&stored));
    if let (Some(storage), Ok(text)) = (storage(), text) {
        let _ = storage.set_item(STORAGE_KEY, &text);
    }
}

/// The provider a check runs with: the settings as they are now, with only the key of the
/// endpoint in use (the worker makes them the core's provider, or fails the check saying what
/// is missing).
pub fn for_check(settings: &ProviderSettings) -> ProviderChoice {
    let mut settings = settings.clone();
    let endpoint = settings.endpoint();
    settings.api_keys.retain(|(at, _)| *at == endpoint);
    ProviderChoice::Settings { settings: serde_json::to_value(&settings).unwrap_or_default() }
}

/// What keeps the settings from making a provider (a field left empty, a limit that is not a
/// number), in the words the worker would fail the checks with: shown on the form and under
/// the run button, which waits until it is fixed, instead of sending checks that would fail.
pub fn problem(settings: &ProviderSettings) -> Option<String> {
    settings.choice().err().or_else(|| settings.budget().err())
}

/// This browser's `localStorage`, when it has one (small settings only; the corpus and the
/// results are the worker's, in IndexedDB).
fn storage() -> Option<web_sys::Storage> {
    web_sys::window().and_then(|window| window.local_storage().ok().flatten())
}

/// The Provider section: the kind of model, then the fields of the kind chosen.
#[component]
pub fn ProviderSection(settings: RwSignal<ProviderSettings>) -> impl IntoView {
    Effect::new(move |_| settings.with(save));
    let kind = move || settings.with(|s| s.kind);
    view! {
        <section class="panel" aria-labelledby="provider-title">
            <h2 id="provider-title">"Provider"</h2>
            <KindField settings />
            <div class="provider-grid">
                <Show when=move || kind() == ProviderKind::OpenAi>
                    <OpenAiFields settings />
                </Show>
                <Show when=move || kind() == ProviderKind::Anthropic>
                    <AnthropicFields settings />
                </Show>
                <Show when=move || kind() != ProviderKind::Offline>
                    <ModelAndKeyFields settings />
                    <LimitFields settings />
                    <p class="field-error" role="status" data-testid="provider-problem">
                        {move || settings.with(problem).unwrap_or_default()}
                    </p>
                    <RememberField settings />
                </Show>
            </div>
        </section>
    }
}

/// The kind of model (offline, OpenAI-compatible, Anthropic) and a note on what it means.
#[component]
fn KindField(settings: RwSignal<ProviderSettings>) -> impl IntoView {
    let kind = move || settings.with(|s| s.kind);
    let note = move || match kind() {
        ProviderKind::Offline => {
            "No key, no network: the engine scores word overlap between \
            the claim and the corpus. Good for trying the page; its verdicts are not a model's judgement."
        }
        ProviderKind::OpenAi => {
            "Any server speaking OpenAI's chat completions API. A local \
            server must allow this page's origin (for Ollama, set OLLAMA_ORIGINS)."
        }
        ProviderKind::Anthropic => {
            "Claude through Anthropic's API, called directly from this \
            browser."
        }
    };
    view! {
        <div class="field">
            <label for="provider-kind">"Model"</label>
            <select
                id="provider-kind"
                data-testid="provider-kind"
                aria-describedby="provider-note"
                prop:value=move || kind().value()
                on:change=move |ev| {
                    let value = event_target_value(&ev);
                    settings.update(|s| s.kind = ProviderKind::from_value(&value));
                }
            >
                <option value="offline">"Offline baseline"</option>
                <option value="openai">"OpenAI-compatible endpoint"</option>
                <option value="anthropic">"Anthropic"</option>
            </select>
            <Show when=move || kind() == ProviderKind::Offline>
                <p class="provider-label" data-testid="provider-offline-label">
                    "Offline baseline — a lexical heuristic, not a language model"
                </p>
            </Show>
            <p class="hint" id="provider-note">{note}</p>
        </div>
    }
}

/// An OpenAI-compatible endpoint: a preset, the base URL, and for the model in the tab a
/// `.gguf` file.
#[component]
fn OpenAiFields(settings: RwSignal<ProviderSettings>) -> impl IntoView {
    view! {
        <div class="field">
            <label for="provider-preset">"Preset"</label>
            <select
                id="provider-preset"
                data-testid="provider-preset"
                prop:value=move || settings.with(|s| s.preset.clone())
                on:change=move |ev| {
                    let value = event_target_value(&ev);
                    settings.update(|s| s.apply_preset(&value));
                }
            >
                {PRESETS
                    .iter()
                    .map(|(value, label, _, _)| view! { <option value=*value>{*label}</option> })
                    .collect_view()}
                <option value="custom">"Custom"</option>
            </select>
        </div>
        <div class="field">
            <label for="provider-base-url">"Base URL"</label>
            <input
                id="provider-base-url"
                data-testid="provider-base-url"
                type="url"
                spellcheck="false"
                autocomplete="off"
                prop:value=move || settings.with(|s| s.base_url.clone())
                on:input=move |ev| {
                    let value = event_target_value(&ev);
                    settings.update(|s| {
                        s.base_url = value;
                        s.preset = "custom".into();
                    });
                }
            />
        </div>
        // The file goes to `web/boot.js`, which listens for this input's `change`:
        // it keeps the file for the model in the tab and types its reference
        // (`file:NAME`) into the model field (no handler in the page's wasm).
        <div class="field" hidden=move || settings.with(|s| s.base_url.trim() != IN_TAB)>
            <label for="provider-gguf">"Or a .gguf file"</label>
            <input id="provider-gguf" type="file" accept=".gguf" />
        </div>
    }
}

/// Anthropic's base URL, optional.
#[component]
fn AnthropicFields(settings: RwSignal<ProviderSettings>) -> impl IntoView {
    view! {
        <div class="field">
            <label for="provider-anthropic-base-url">"Base URL (optional)"</label>
            <input
                id="provider-anthropic-base-url"
                data-testid="provider-anthropic-base-url"
                type="url"
                spellcheck="false"
                autocomplete="off"
                placeholder=ANTHROPIC_BASE_URL
                aria-describedby="provider-anthropic-base-url-note"
                prop:value=move || settings.with(|s| s.anthropic_base_url.clone())
                on:input=move |ev| {
                    let value = event_target_value(&ev);
                    settings.update(|s| s.anthropic_base_url = value);
                }
            />
            <p class="hint" id="provider-anthropic-base-url-note">
                "Empty means " {ANTHROPIC_BASE_URL} "; requests go to its /v1/messages."
            </p>
        </div>
    }
}

/// The model name and the API key of the endpoint in use.
#[component]
fn ModelAndKeyFields(settings: RwSignal<ProviderSettings>) -> impl IntoView {
    view! {
        <div class="field">
            <label for="provider-model">"Model name"</label>
            <input
                id="provider-model"
                data-testid="provider-model"
                type="text"
                spellcheck="false"
                autocomplete="off"
                prop:value=move || {
                    settings.with(|s| match s.kind {
                        ProviderKind::Anthropic => s.anthropic_model.clone(),
                        _ => s.openai_model.clone(),
                    })
                }
                on:input=move |ev| {
                    let value = event_target_value(&ev);
                    settings.update(|s| match s.kind {
                        ProviderKind::Anthropic => s.anthropic_model = value,
                        _ => s.openai_model = value,
                    });
                }
            />
        </div>
        <div class="field">
            <label for="provider-key">"API key"</label>
            <input
                id="provider-key"
                data-testid="provider-key"
                type="password"
                autocomplete="off"
                spellcheck="false"
                aria-describedby="provider-key-note"
                prop:value=move || settings.with(|s| s.api_key().to_owned())
                on:input=move |ev| {
                    let value = event_target_value(&ev);
                    settings.update(|s| s.set_api_key(value));
                }
            />
            <p class="hint" id="provider-key-note">
                "Sent only to the endpoint above, and kept for it alone: another endpoint has its own key. In this tab's memory unless you tick the box."
            </p>
        </div>
    }
}

/// One field per limit of [`LIMITS`] (output tokens, timeouts, prices, the spending limit).
#[component]
fn LimitFields(settings: RwSignal<ProviderSettings>) -> impl IntoView {
    LIMITS
        .iter()
        .enumerate()
        .map(|(n, (_, label, default, _))| {
            view! {
                <label class="field limit">
                    {*label}
                    <input
                        placeholder=*default
                        prop:value=move || settings.with(|s| s.field(n))
                        on:input=move |ev| {
                            let value = event_target_value(&ev);
                            settings.update(|s| s.set_field(n, value));
                        }
                    />
                </label>
            }
        })
        .collect_view()
}

/// "Remember on this device": whether the key is stored with the settings.
#[component]
fn RememberField(settings: RwSignal<ProviderSettings>) -> impl IntoView {
    view! {
        <div class="field check">
            <input
                id="provider-remember"
                data-testid="provider-remember"
                type="checkbox"
                prop:checked=move || settings.with(|s| s.remember)
                on:change=move |ev| {
                    let checked = event_target_checked(&ev);
                    settings.update(|s| s.remember = checked);
                }
            />
            <label for="provider-remember">"Remember on this device"</label>
        </div>
    }
}
