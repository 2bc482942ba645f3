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

/// What a field of [`LIMITS`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A whole number above 0, sent as this many units of the provider JSON's field.
    Whole(u64),
    /// US dollars per million tokens, for the model in use (0 or more; the provider JSON's
    /// `price` field).
    PerMillion,
    /// US dollars: the run's spending limit, kept by the engine (not the provider's).
    Dollars,
}

/// The fields of the Provider section's limits, as (name, label, what the placeholder shows,
/// unit). Empty means the default: the core's (`openai::DEFAULT_MAX_TOKENS`,
/// `DEFAULT_IDLE_TIMEOUT_MS`, `DEFAULT_TIMEOUT_MS`); no price (the core ships none, so a model
/// costs what its provider reports, else nothing); no spending limit. The prices belong to the
/// model in use: each model keeps its own.
pub const LIMITS: [(&str, &str, &str, Unit); 6] = [
    ("maxTokens", "Output tokens", "4096", Unit::Whole(1)),
    ("idleTimeoutMs", "Stalled after (s)", "60", Unit::Whole(1000)),
    ("timeoutMs", "Give up after (s)", "300", Unit::Whole(1000)),
    ("price.input", "Input $ / M tokens", "not set", Unit::PerMillion),
    ("price.output", "Output $ / M tokens", "not set", Unit::PerMillion),
    ("budget", "Stop the run at $", "no limit", Unit::Dollars),
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
    /// The whole-number [`LIMITS`] as typed, in their order (empty: the default).
    pub limits: [String; 3],
    /// The prices typed, each for a model: (`"input MODEL"` or `"output MODEL"`, US dollars
    /// per million tokens as typed).
    pub prices: Vec<(String, String)>,
    /// The run's spending limit in US dollars, as typed (empty: none).
    pub budget: String,
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
            prices: Vec::new(),
            budget: String::new(),
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
        keyed(&self.api_keys, &self.endpoint())
    }

    /// Keeps `key` for the endpoint in use (an empty key forgets it).
    pub fn set_api_key(&mut self, key: String) {
        let endpoint = self.endpoint();
        set_keyed(&mut self.api_keys, endpoint, key);
    }

    /// Where the price of the `n`th of [`LIMITS`] (3: input, 4: output) for the model in use
    /// is kept in [`prices`](Self::prices).
    fn price_key(&self, n: usize) -> String {
        let side = if n == 3 { "input " } else { "output " };
        side.to_owned() + self.model()
    }

    /// The model in use (what its prices belong to).
    pub fn model(&self) -> &str {
        match self.kind {
            ProviderKind::Anthropic => self.anthropic_model.trim(),
            _ => self.openai_model.trim(),
        }
    }

    /// The text of the `n`th of [`LIMITS`] (a price: the model in use's).
    pub fn field(&self, n: usize) -> String {
        match n {
            3 | 4 => keyed(&self.prices, &self.price_key(n)).to_owned(),
            5 => self.budget.clone(),
            n => self.limits.get(n).cloned().unwrap_or_default(),
        }
    }

    /// Sets the text of the `n`th of [`LIMITS`] (a price: the model in use's).
    pub fn set_field(&mut self, n: usize, text: String) {
        match n {
            3 | 4 => {
                let key = self.price_key(n);
                set_keyed(&mut self.prices, key, text);
            }
            5 => self.budget = text,
            n => {
                if let Some(limit) = self.limits.get_mut(n) {
                    *limit = text;
                }
            }
        }
    }

    /// The run's spending limit in US dollars (`None`: none), or what is wrong with it.
    ///
    /// # Errors
    /// A limit that is not a number above 0, in words for the person.
    pub fn budget(&self) -> Result<Option<f64>, String> {
        let label = LIMITS[5].1;
        match dollars(&self.budget, label)? {
            Some(0.0) => Err(format!("{label}: an amount above 0, or empty for no limit.")),
            budget => Ok(budget),
        }
    }

    /// The engine's provider, or what is missing.
    pub fn choice(&self) -> Result<ProviderChoice, String> {
        let key = self.api_key().trim();
        let mut config = Map::new();
        match self.kind {
            ProviderKind::Offline => return Ok(ProviderChoice::Offline),
            ProviderKind::OpenAi => self.openai_fields(&mut config)?,
            ProviderKind::Anthropic => self.anthropic_fields(key, &mut config)?,
        }
        if !key.is_empty() {
            config.insert("apiKey".into(), json!(key));
        }
        self.limit_fields(&mut config)?;
        self.budget()?;
        config.insert("stream".into(), json!(true));
        Ok(ProviderChoice::Network { config: Value::Object(config) })
    }

    /// The fields of an OpenAI-compatible endpoint (the in-tab model's too), or what is
    /// missing.
    fn openai_fields(&self, config: &mut Map<String, Value>) -> Result<(), String> {
        let base_url = self.base_url.trim();
        if base_url.is_empty() {
            return Err(
                "Enter the endpoint's base URL (for example https://api.openai.com/v1).".into()
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
            // verdict is reproducible; and the verifier route (a Yes/No question per
            // passage, read from the token probabilities): a small local model asked
            // for a 3-way verdict collapses onto one label.
            config.insert("output".into(), json!("json-schema"));
            config.insert("temperature".into(), json!(0));
            config.insert("assess".into(), json!("verifier"));
        }
        Ok(())
    }

    /// The fields of Anthropic's API (`key` is the one typed), or what is missing.
    fn anthropic_fields(&self, key: &str, config: &mut Map<String, Value>) -> Result<(), String> {
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
        Ok(())
    }

    /// The limits typed (whole numbers, scaled by their unit) and the price, or what is
    /// wrong with one.
    fn limit_fields(&self, config: &mut Map<String, Value>) -> Result<(), String> {
        for ((field, label, _, unit), text) in LIMITS.iter().zip(&self.limits) {
            let Unit::Whole(unit) = unit else { continue };
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
        let input = dollars(&self.field(3), LIMITS[3].1)?;
        let output = dollars(&self.field(4), LIMITS[4].1)?;
        if input.is_some() || output.is_some() {
            // One price typed: the other is 0 (a model priced for its output alone).
            let price = json!({"input": input.unwrap_or(0.0), "output": output.unwrap_or(0.0)});
            config.insert("price".into(), price);
        }
        Ok(())
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
        text("budget", &mut settings.budget);
        for (name, into) in [("apiKeys", &mut settings.api_keys), ("prices", &mut settings.prices)]
        {
            for pair in stored.get(name).and_then(Value::as_array).into_iter().flatten() {
                if let (Some(at), Some(text)) =
                    (pair.get(0).and_then(Value::as_str), pair.get(1).and_then(Value::as_str))
                {
                    into.push((at.to_owned(), text.to_owned()));
                }
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

/// The text kept under `key` (empty when none is).
fn keyed<'a>(list: &'a [(String, String)], key: &str) -> &'a str {
    list.iter().find(|(at, _)| at == key).map_or("", |(_, text)| text)
}

/// Keeps `text` under `key` (an empty text forgets the key).
fn set_keyed(list: &mut Vec<(String, String)>, key: String, text: String) {
    list.retain(|(at, _)| *at != key);
    if !text.is_empty() {
        list.push((key, text));
    }
}

/// An amount of US dollars as typed (`$` and spaces allowed): `None` when empty.
fn dollars(text: &str, label: &str) -> Result<Option<f64>, String> {
    let text = text.trim().trim_start_matches('$').trim();
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => Ok(Some(value)),
        _ => Err(format!("{label}: an amount in dollars such as 0.15, or empty.")),
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
                "output": "json-schema", "temperature": 0, "stream": true, "assess": "verifier"})
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
                "output": "json-schema", "temperature": 0, "stream": true, "assess": "verifier"})
        );
        settings.apply_preset("openai");
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert!(config.get("output").is_none(), "hosted models call tools");
        assert!(config.get("assess").is_none(), "hosted models record a 3-way assessment");
        settings.apply_preset("llamacpp");
        let ProviderChoice::Network { config } = settings.choice().unwrap() else { panic!() };
        assert_eq!(config["output"], "json-schema");
        assert_eq!(config["assess"], "verifier", "local models take the verifier route");
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
        for (field, ..) in &LIMITS[..3] {
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
    fn each_model_keeps_its_prices_and_they_become_the_providers_price() {
        let mut settings = ProviderSettings { kind: ProviderKind::OpenAi, ..Default::default() };
        let price = |settings: &ProviderSettings| match settings.choice() {
            Ok(ProviderChoice::Network { config }) => config.get("price").cloned(),
            other => panic!("{other:?}"),
        };
        assert_eq!(price(&settings), None, "no price typed: none sent (the core ships none)");
        settings.set_field(3, "0.15".into());
        settings.set_field(4, "$0.60".into());
        assert_eq!(price(&settings), Some(json!({"input": 0.15, "output": 0.6})));
        assert_eq!((settings.field(3), settings.field(4)), ("0.15".into(), "$0.60".into()));
        // Another model has its own (none yet); back at the first, its prices again.
        settings.openai_model = "gpt-4o".into();
        assert_eq!((settings.field(3), price(&settings)), (String::new(), None));
        settings.set_field(4, "10".into());
        assert_eq!(price(&settings), Some(json!({"input": 0.0, "output": 10.0})));
        settings.openai_model = " gpt-4o-mini ".into();
        assert_eq!(price(&settings), Some(json!({"input": 0.15, "output": 0.6})));
        // Emptying a field forgets that price.
        settings.set_field(3, String::new());
        settings.set_field(4, String::new());
        assert_eq!(settings.prices, [("output gpt-4o".into(), "10".into())]);
        for bad in ["-1", "ten", "NaN", "inf"] {
            settings.set_field(3, bad.into());
            assert_eq!(
                settings.choice(),
                Err("Input $ / M tokens: an amount in dollars such as 0.15, or empty.".into()),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_runs_spending_limit_is_an_amount_above_zero_or_none() {
        let mut settings = ProviderSettings::default();
        assert_eq!(settings.budget(), Ok(None));
        settings.set_field(5, " $2.50 ".into());
        assert_eq!((settings.budget(), settings.field(5)), (Ok(Some(2.5)), " $2.50 ".into()));
        for bad in ["0", "-3", "lots"] {
            settings.set_field(5, bad.into());
            assert!(settings.budget().is_err(), "{bad}");
        }
        settings.kind = ProviderKind::OpenAi;
        assert!(settings.choice().is_err(), "a check with a bad limit does not run");
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
            prices: vec![("input m".into(), "0.15".into()), ("output m".into(), "0.6".into())],
            budget: "2.50".into(),
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
