//! The Provider section: the offline baseline (the default), an OpenAI-compatible endpoint with
//! presets, or Anthropic. API keys belong to an endpoint (the kind and its base URL): the key
//! field shows, and a check sends, only the key typed for the endpoint in use. Keys stay in
//! memory unless "Remember on this device" is ticked.

use leptos::prelude::*;
use serde::Serialize;
use serde_json::{Map, Value, json};
use verity_messages::ProviderChoice;

/// The localStorage key of the provider settings.
const STORAGE_KEY: &str = "verity.provider";

/// Which kind of model checks the claims.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProviderKind {
    /// The engine's lexical baseline, no network.
    #[default]
    Offline,
    /// An OpenAI-compatible chat completions endpoint.
    OpenAi,
    /// Anthropic's messages API.
    Anthropic,
}

impl ProviderKind {
    fn value(self) -> &'static str {
        match self {
            ProviderKind::Offline => "offline",
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    fn from_value(value: &str) -> Self {
        match value {
            "openai" => ProviderKind::OpenAi,
            "anthropic" => ProviderKind::Anthropic,
            _ => ProviderKind::Offline,
        }
    }
}

/// An OpenAI-compatible preset: (value, label, base URL, model). The model in the tab's model
/// is the URL of a `.gguf` file, or a file picked from this computer.
pub const PRESETS: [(&str, &str, &str, &str); 5] = [
    ("openai", "OpenAI", "https://api.openai.com/v1", "gpt-4o-mini"),
    ("openrouter", "OpenRouter", "https://openrouter.ai/api/v1", "openai/gpt-4o-mini"),
    ("ollama", "Ollama (local)", "http://localhost:11434/v1", "llama3.1"),
    ("llamacpp", "llama.cpp (local)", "http://localhost:8080/v1", "local"),
    ("intab", "In this tab (llama.cpp in WebAssembly)", IN_TAB, ""),
];

/// The base URL of the model in the tab: a page runs llama.cpp compiled to WebAssembly for the
/// engine (`web/in-tab.js`); no server, no key.
pub const IN_TAB: &str = "in-tab:";

/// The presets of local models, which get constrained output (`"output": "json-schema"`):
/// llama.cpp uses `tools` only when the model's chat template renders them, and a small model
/// follows a grammar where it cannot follow tool calling. Hosted models call tools.
const CONSTRAINED_PRESETS: [&str; 3] = ["ollama", "llamacpp", "intab"];

/// The default Anthropic model.
pub const ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";

/// Anthropic's API, used when the Anthropic base URL is left empty (the core's default).
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// What the Provider section holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSettings {
    /// The kind.
    pub kind: ProviderKind,
    /// The OpenAI-compatible preset last chosen ("custom" once edited by hand).
    pub preset: String,
    /// The OpenAI-compatible base URL (up to and including `/v1`).
    pub base_url: String,
    /// The OpenAI-compatible model.
    pub openai_model: String,
    /// The Anthropic model.
    pub anthropic_model: String,
    /// The Anthropic API's base URL (before `/v1/messages`); empty means [`ANTHROPIC_BASE_URL`].
    pub anthropic_base_url: String,
    /// The API keys, each with the endpoint ([`ProviderSettings::endpoint`]) it was typed for,
    /// so switching preset, base URL or kind never sends a key to another endpoint (stored
    /// only when `remember`).
    pub api_keys: Vec<(String, String)>,
    /// Keep the key in this browser's localStorage.
    pub remember: bool,
    /// Constrained output (`"output": "json-schema"`) for an OpenAI-compatible endpoint: set
    /// by the local presets, kept when the base URL is edited.
    pub constrained: bool,
}

impl Default for ProviderSettings {
    fn default() -> Self {
        let (preset, _, base_url, model) = PRESETS[0];
        Self {
            kind: ProviderKind::Offline,
            preset: preset.to_owned(),
            base_url: base_url.to_owned(),
            openai_model: model.to_owned(),
            anthropic_model: ANTHROPIC_MODEL.to_owned(),
            anthropic_base_url: String::new(),
            api_keys: Vec::new(),
            remember: false,
            constrained: false,
        }
    }
}

impl ProviderSettings {
    /// Fills the base URL and model from a preset.
    pub fn apply_preset(&mut self, value: &str) {
        self.preset = value.to_owned();
        if let Some((_, _, base_url, model)) = PRESETS.iter().find(|preset| preset.0 == value) {
            self.base_url = (*base_url).to_owned();
            self.openai_model = (*model).to_owned();
            self.constrained = CONSTRAINED_PRESETS.contains(&value);
        }
    }

    /// The endpoint requests go to, which the key field belongs to: the kind and base URL.
    pub fn endpoint(&self) -> String {
        let (kind, base_url) = match self.kind {
            ProviderKind::Anthropic => match self.anthropic_base_url.trim() {
                "" => ("anthropic ", ANTHROPIC_BASE_URL),
                base_url => ("anthropic ", base_url),
            },
            _ => ("openai ", self.base_url.trim()),
        };
        kind.to_owned() + base_url
    }

    /// The key typed for the endpoint in use (empty when none was).
    pub fn api_key(&self) -> &str {
        let endpoint = self.endpoint();
        self.api_keys.iter().find(|(at, _)| *at == endpoint).map_or("", |(_, key)| key)
    }

    /// Keeps `key` for the endpoint in use (an empty key forgets it).
    pub fn set_api_key(&mut self, key: String) {
        let endpoint = self.endpoint();
        self.api_keys.retain(|(at, _)| *at != endpoint);
        if !key.is_empty() {
            self.api_keys.push((endpoint, key));
        }
    }

    /// The engine's provider, or what is missing.
    pub fn choice(&self) -> Result<ProviderChoice, String> {
        let key = self.api_key().trim();
        let mut config = Map::new();
        match self.kind {
            ProviderKind::Offline => return Ok(ProviderChoice::Offline),
            ProviderKind::OpenAi => {
                let base_url = self.base_url.trim();
                if base_url.is_empty() {
                    return Err(
                        "Enter the endpoint's base URL (for example https://api.openai.com/v1)."
                            .into(),
                    );
                }
                let web = base_url.starts_with("https://") || base_url.starts_with("http://");
                if !(web || base_url == IN_TAB) {
                    return Err("The base URL must start with https:// or http://.".into());
                }
                if self.openai_model.trim().is_empty() {
                    return Err(if web {
                        "Enter a model name."
                    } else {
                        "Give the model: the URL of a .gguf file, or pick one."
                    }
                    .into());
                }
                config.insert("api".into(), json!("openai"));
                config.insert("baseUrl".into(), json!(base_url));
                config.insert("model".into(), json!(self.openai_model.trim()));
                if self.constrained {
                    // Local presets: constrained output, and greedy sampling so a check's
                    // verdict is reproducible.
                    config.insert("output".into(), json!("json-schema"));
                    config.insert("temperature".into(), json!(0));
                }
            }
            ProviderKind::Anthropic => {
                if self.anthropic_model.trim().is_empty() {
                    return Err("Enter an Anthropic model name.".into());
                }
                if key.is_empty() {
                    return Err("Anthropic needs an API key.".into());
                }
                let base_url = self.anthropic_base_url.trim();
                let web = base_url.starts_with("https://") || base_url.starts_with("http://");
                if !(base_url.is_empty() || web) {
                    return Err("The base URL must start with https:// or http://.".into());
                }
                config.insert("api".into(), json!("anthropic"));
                if !base_url.is_empty() {
                    config.insert("baseUrl".into(), json!(base_url));
                }
                config.insert("model".into(), json!(self.anthropic_model.trim()));
            }
        }
        if !key.is_empty() {
            config.insert("apiKey".into(), json!(key));
        }
        config.insert("stream".into(), json!(true));
        Ok(ProviderChoice::Network { config: Value::Object(config) })
    }

    /// What may be stored: the key only when remembered.
    pub fn stored(&self) -> Self {
        let mut stored = self.clone();
        if !stored.remember {
            stored.api_keys.clear();
        }
        stored
    }

    /// The settings kept in this browser, or the defaults.
    pub fn load() -> Self {
        storage()
            .and_then(|storage| storage.get_item(STORAGE_KEY).ok().flatten())
            .and_then(|text| crate::js::parse(&text).ok())
            .map(|stored| Self::read(&stored))
            .unwrap_or_default()
    }

    /// Stored settings (their serde JSON); a field that is missing or not of its type keeps its
    /// default, so settings stored by an older page still load. Read from a `Value` rather than
    /// with a derived `Deserialize`: the page's wasm is smaller without one (`verity_messages`'s
    /// `read` module says why).
    pub fn read(stored: &Value) -> Self {
        let mut settings = Self::default();
        let text = |name: &str, into: &mut String| {
            if let Some(value) = stored.get(name).and_then(Value::as_str) {
                value.clone_into(into);
            }
        };
        if let Some(kind) = stored.get("kind").and_then(Value::as_str) {
            settings.kind = ProviderKind::from_value(&kind.to_ascii_lowercase());
        }
        text("preset", &mut settings.preset);
        text("baseUrl", &mut settings.base_url);
        text("openaiModel", &mut settings.openai_model);
        text("anthropicModel", &mut settings.anthropic_model);
        text("anthropicBaseUrl", &mut settings.anthropic_base_url);
        settings.constrained = stored.get("constrained").and_then(Value::as_bool).unwrap_or(false);
        settings.remember = stored.get("remember").and_then(Value::as_bool).unwrap_or(false);
        for pair in stored.get("apiKeys").and_then(Value::as_array).into_iter().flatten() {
            if let (Some(endpoint), Some(key)) =
                (pair.get(0).and_then(Value::as_str), pair.get(1).and_then(Value::as_str))
            {
                settings.api_keys.push((endpoint.to_owned(), key.to_owned()));
            }
        }
        // An older page kept one key for every endpoint: it belongs to the one it was saved with.
        if let Some(key) = stored.get("apiKey").and_then(Value::as_str)
            && settings.api_key().is_empty()
        {
            settings.set_api_key(key.to_owned());
        }
        settings
    }

    fn save(&self) {
        // A browser without storage (private mode, quota) keeps the settings for this visit.
        let text = serde_json::to_value(self.stored())
            .map_err(|error| error.to_string())
            .and_then(|stored| crate::js::stringify(&stored));
        if let (Some(storage), Ok(text)) = (storage(), text) {
            let _ = storage.set_item(STORAGE_KEY, &text);
        }
    }
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// `web/boot.js`'s `verityKeepModelFile(input)`: keeps the `.gguf` file picked in `input`
    /// in this browser for the model in the tab, then writes its model reference (`file:NAME`),
    /// or why it could not be kept, into the model field as if typed (all in JavaScript: the
    /// page's wasm only hands the input over).
    #[wasm_bindgen(js_name = verityKeepModelFile)]
    fn verity_keep_model_file(input: &web_sys::EventTarget);
}

/// This browser's `localStorage`, when it has one (small settings only; the corpus and the
/// results are the worker's, in IndexedDB).
fn storage() -> Option<web_sys::Storage> {
    web_sys::window().and_then(|window| window.local_storage().ok().flatten())
}

/// The Provider section.
#[component]
pub fn ProviderSection(settings: RwSignal<ProviderSettings>) -> impl IntoView {
    Effect::new(move |_| settings.with(ProviderSettings::save));
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
        <section class="panel" aria-labelledby="provider-title">
            <h2 id="provider-title">"Provider"</h2>
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
            <div class="provider-grid">
                <Show when=move || kind() == ProviderKind::OpenAi>
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
                    <Show when=move || settings.with(|s| s.base_url.trim() == IN_TAB)>
                        <div class="field">
                            <label for="provider-gguf">"Or a .gguf file"</label>
                            <input
                                id="provider-gguf"
                                data-testid="provider-gguf"
                                type="file"
                                accept=".gguf"
                                on:change=move |ev| {
                                    if let Some(input) = ev.target() {
                                        verity_keep_model_file(&input);
                                    }
                                }
                            />
                        </div>
                    </Show>
                </Show>
                <Show when=move || kind() == ProviderKind::Anthropic>
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
                </Show>
                <Show when=move || kind() != ProviderKind::Offline>
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
                </Show>
            </div>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_in_the_tab_is_the_in_tab_base_url_with_constrained_output() {
        let mut settings = ProviderSettings { kind: ProviderKind::OpenAi, ..Default::default() };
        settings.apply_preset("intab");
        assert_eq!(
            settings.choice(),
            Err("Give the model: the URL of a .gguf file, or pick one.".into()),
            "no model yet"
        );
        settings.openai_model = "https://models.example/smol.gguf".into();
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert_eq!(
            config,
            json!({"api": "openai", "baseUrl": "in-tab:", "model": "https://models.example/smol.gguf",
                "output": "json-schema", "temperature": 0, "stream": true})
        );
        settings.base_url = "in-tab:/elsewhere".into();
        assert!(settings.choice().is_err(), "only the in-tab base URL itself is not http(s)");
    }

    #[test]
    fn providers_become_the_cores_json() {
        let mut settings = ProviderSettings::default();
        assert_eq!(settings.choice(), Ok(ProviderChoice::Offline));
        settings.kind = ProviderKind::OpenAi;
        settings.apply_preset("ollama");
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert_eq!(
            config,
            json!({"api": "openai", "baseUrl": "http://localhost:11434/v1", "model": "llama3.1",
                "output": "json-schema", "temperature": 0, "stream": true})
        );
        settings.apply_preset("openai");
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert!(config.get("output").is_none(), "hosted models call tools");
        settings.apply_preset("llamacpp");
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert_eq!(config["output"], "json-schema");
        settings.apply_preset("ollama");
        settings.set_api_key(" sk-1 ".into());
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert_eq!(config["apiKey"], "sk-1");
        settings.kind = ProviderKind::Anthropic;
        assert!(settings.choice().is_err(), "Anthropic needs a key (Ollama's is not Anthropic's)");
        settings.set_api_key("k".into());
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert_eq!(
            config,
            json!({"api": "anthropic", "model": ANTHROPIC_MODEL, "apiKey": "k", "stream": true})
        );
        settings.kind = ProviderKind::OpenAi;
        settings.base_url = "localhost:8080".into();
        assert!(settings.choice().is_err());
    }

    #[test]
    fn an_anthropic_base_url_is_passed_only_when_given() {
        let mut settings = ProviderSettings {
            kind: ProviderKind::Anthropic,
            anthropic_base_url: "  ".into(),
            ..Default::default()
        };
        settings.set_api_key("k".into());
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert!(config.get("baseUrl").is_none(), "empty means the core's default");
        settings.anthropic_base_url = " http://127.0.0.1:4010 ".into();
        settings.set_api_key("k".into());
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert_eq!(
            config,
            json!({"api": "anthropic", "baseUrl": "http://127.0.0.1:4010", "model": ANTHROPIC_MODEL,
                "apiKey": "k", "stream": true})
        );
        settings.anthropic_base_url = "api.anthropic.com".into();
        assert!(settings.choice().is_err());
        // Settings stored before the field existed still load.
        let old = ProviderSettings::read(&json!({"kind": "anthropic"}));
        assert_eq!(old.anthropic_base_url, "");
        assert_eq!(old.kind, ProviderKind::Anthropic);
    }

    #[test]
    fn stored_settings_read_back_as_they_were() {
        let settings = ProviderSettings {
            kind: ProviderKind::OpenAi,
            preset: "custom".into(),
            base_url: "http://127.0.0.1:9/v1".into(),
            openai_model: "m".into(),
            anthropic_model: "a".into(),
            anthropic_base_url: "http://127.0.0.1:8/".into(),
            api_keys: vec![
                ("openai http://127.0.0.1:9/v1".into(), "k".into()),
                ("anthropic https://api.anthropic.com".into(), "k2".into()),
            ],
            remember: true,
            constrained: true,
        };
        let stored = serde_json::to_value(&settings).unwrap();
        assert_eq!(ProviderSettings::read(&stored), settings);
        assert_eq!(
            ProviderSettings::read(&json!({"kind": 3, "remember": "yes"})),
            Default::default()
        );
    }

    #[test]
    fn the_key_is_stored_only_when_remembered() {
        let mut settings = ProviderSettings { kind: ProviderKind::OpenAi, ..Default::default() };
        settings.set_api_key("secret".into());
        assert_eq!(settings.stored().api_key(), "");
        settings.remember = true;
        assert_eq!(settings.stored().api_key(), "secret");
    }

    #[test]
    fn a_key_belongs_to_its_endpoint() {
        let mut settings = ProviderSettings { kind: ProviderKind::OpenAi, ..Default::default() };
        settings.set_api_key("sk-openai".into());
        let sent = |settings: &ProviderSettings| match settings.choice() {
            Ok(ProviderChoice::Network { config }) => config.get("apiKey").cloned(),
            other => panic!("{other:?}"),
        };
        assert_eq!(sent(&settings), Some(json!("sk-openai")));
        // Another preset, another base URL, another kind: none sends OpenAI's key.
        settings.apply_preset("ollama");
        assert_eq!((settings.api_key(), sent(&settings)), ("", None));
        settings.base_url = "http://127.0.0.1:4010/v1".into();
        assert_eq!(sent(&settings), None);
        settings.kind = ProviderKind::Anthropic;
        assert!(settings.choice().is_err(), "no key for Anthropic");
        settings.set_api_key("sk-ant".into());
        settings.kind = ProviderKind::OpenAi;
        assert_eq!(sent(&settings), None);
        // Back at each endpoint, its own key.
        settings.apply_preset("openai");
        assert_eq!(sent(&settings), Some(json!("sk-openai")));
        settings.kind = ProviderKind::Anthropic;
        assert_eq!(settings.api_key(), "sk-ant");
        // An empty key forgets the endpoint's key.
        settings.set_api_key(String::new());
        assert_eq!(settings.api_keys.len(), 1);
        // A key an older page stored (one for all) belongs to the endpoint stored with it.
        let old = ProviderSettings::read(&json!({"kind": "openai", "preset": "ollama",
            "baseUrl": "http://localhost:11434/v1", "apiKey": "sk-old", "remember": true}));
        assert_eq!(old.api_key(), "sk-old");
        let mut elsewhere = old.clone();
        elsewhere.apply_preset("openai");
        assert_eq!(elsewhere.api_key(), "");
    }
}
