//! Where a result came from ([`Provenance`]), filled by the worker when a check ends and
//! carried by the exports.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ProviderChoice;
use crate::provider::{ANTHROPIC_BASE_URL, ProviderKind, ProviderSettings};

/// Where a result came from: the provider (its kind and base URL, never a key), the model, the
/// corpus, the app's version and the date.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// `offline`, `openai` or `anthropic`.
    pub provider: String,
    /// The provider's base URL, without user info, query or fragment (where a key could hide);
    /// `None` for the offline baseline.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The model; `None` for the offline baseline.
    #[serde(default)]
    pub model: Option<String>,
    /// The corpus's content id (`sha256:...`), `None` when it was empty.
    #[serde(default)]
    pub corpus: Option<String>,
    /// How many items the corpus had.
    #[serde(default)]
    pub items: usize,
    /// The version of the app (its engine) that checked the claim.
    pub app_version: String,
    /// When the check ended, as the engine's clock gave it (ISO 8601, UTC).
    pub date: String,
}

impl Provenance {
    /// The provenance of a check run with `provider` (in any of its forms) over a corpus
    /// `corpus` of `items` items, ended at `date` by the app `app_version`.
    #[must_use]
    pub fn new(
        provider: &ProviderChoice,
        corpus: Option<String>,
        items: usize,
        app_version: &str,
        date: String,
    ) -> Self {
        let (kind, base_url, model) = described(provider);
        Self {
            provider: kind,
            base_url: base_url.map(|url| public_url(&url)),
            model,
            corpus,
            items,
            app_version: app_version.to_owned(),
            date,
        }
    }
}

/// The provider's kind, base URL and model, read from the JSON (no key is read).
fn described(provider: &ProviderChoice) -> (String, Option<String>, Option<String>) {
    let text =
        |config: &Value, name: &str| config.get(name).and_then(Value::as_str).map(str::to_owned);
    match provider {
        ProviderChoice::Offline => ("offline".to_owned(), None, None),
        ProviderChoice::Network { config } => {
            let kind = text(config, "api").unwrap_or_default();
            let default = (kind == "anthropic").then(|| ANTHROPIC_BASE_URL.to_owned());
            (kind, text(config, "baseUrl").or(default), text(config, "model"))
        }
        ProviderChoice::Settings { settings } => {
            let settings = ProviderSettings::read(settings);
            let kind = settings.kind.value().to_owned();
            match settings.kind {
                ProviderKind::Offline => (kind, None, None),
                ProviderKind::OpenAi => {
                    (kind, Some(settings.base_url.trim().to_owned()), Some(settings.openai_model))
                }
                ProviderKind::Anthropic => {
                    let base_url = match settings.anthropic_base_url.trim() {
                        "" => ANTHROPIC_BASE_URL.to_owned(),
                        url => url.to_owned(),
                    };
                    (kind, Some(base_url), Some(settings.anthropic_model))
                }
            }
        }
    }
}

/// `url` without user info (`https://user:key@host`), query or fragment: the parts a key
/// could be written into.
#[must_use]
pub fn public_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '\\']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host = authority.rsplit('@').next().unwrap_or_default();
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_url_has_no_user_info_query_or_fragment() {
        assert_eq!(public_url("https://me:pw@api.example/v1?key=k#f"), "https://api.example/v1");
        assert_eq!(public_url("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080/v1");
        assert_eq!(public_url("in-tab:"), "in-tab:");
        assert_eq!(public_url("https://a@b@host"), "https://host");
    }
}
