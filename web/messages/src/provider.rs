//! The app's Provider section as data: the offline baseline, an OpenAI-compatible endpoint
//! (with presets, the model in the tab among them) or Anthropic, API keys that belong to an
//! endpoint (the kind and its base URL), and the limits a person may set on every request.
//! The page keeps and shows [`ProviderSettings`]; the worker turns them into the core's
//! provider JSON ([`ProviderSettings::choice`]) when a check arrives
//! ([`crate::ProviderChoice::Settings`]), so the rules and their words are in the worker's
//! wasm, not in the page's.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::ProviderChoice;

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
    /// Its value in the page's select and in stored settings.
    #[must_use]
    pub fn value(self) -> &'static str {
        match self {
            ProviderKind::Offline => "offline",
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    /// The kind a select value or stored value names (the offline baseline if none).
    #[must_use]
    pub fn from_value(value: &str) -> Self {
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

/// The limits a person may set on every request, as (provider JSON field, label, the default
/// shown as the placeholder, what one unit of the field is in the JSON). Empty means the core's
/// default (`openai::DEFAULT_MAX_TOKENS`, `DEFAULT_IDLE_TIMEOUT_MS`, `DEFAULT_TIMEOUT_MS`).
pub const LIMITS: [(&str, &str, &str, u64); 3] = [
    ("maxTokens", "Output tokens", "4096", 1),
    ("idleTimeoutMs", "Stalled after (s)", "60", 1000),
    ("timeoutMs", "Give up after (s)", "300", 1000),
];

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
    /// The [`LIMITS`] as typed, in their order (empty: the default).
    pub limits: [String; 3],
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
            limits: Default::default(),
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
        for ((field, label, _, unit), text) in LIMITS.iter().zip(&self.limits) {
            if text.trim().is_empty() {
                continue;
            }
            match text.trim().parse::<u64>() {
                Ok(value) if value > 0 => {
                    config.insert((*field).into(), json!(value.saturating_mul(*unit)));
                }
                _ => {
                    return Err(format!(
                        "{label}: a whole number above 0, or empty for the default."
                    ));
                }
            }
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
        for (limit, stored) in settings
            .limits
            .iter_mut()
            .zip(stored.get("limits").and_then(Value::as_array).into_iter().flatten())
        {
            stored.as_str().unwrap_or_default().clone_into(limit);
        }
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
    fn the_limits_typed_bound_every_request_and_empty_ones_keep_the_defaults() {
        let mut settings = ProviderSettings { kind: ProviderKind::OpenAi, ..Default::default() };
        settings.apply_preset("llamacpp");
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        for (field, ..) in LIMITS {
            assert!(config.get(field).is_none(), "{field}: the core's default when empty");
        }
        settings.limits = [" 256 ".into(), "15".into(), "120".into()];
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert_eq!(
            (&config["maxTokens"], &config["idleTimeoutMs"], &config["timeoutMs"]),
            (&json!(256), &json!(15_000), &json!(120_000)),
            "seconds typed, milliseconds sent"
        );
        settings.kind = ProviderKind::Anthropic;
        settings.set_api_key("k".into());
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert_eq!(config["maxTokens"], 256, "Anthropic's requests too");
        for bad in ["0", "-1", "1.5", "ten"] {
            settings.limits[1] = bad.into();
            assert_eq!(
                settings.choice(),
                Err("Stalled after (s): a whole number above 0, or empty for the default.".into()),
                "{bad}"
            );
        }
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
            limits: ["512".into(), String::new(), "90".into()],
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
