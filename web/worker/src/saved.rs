//! What is saved of a check beside its durable log, so a reload loses none: its record
//! ([`SessionMeta`], the provider with its credentials removed) and the checks not finished yet
//! ([`Unfinished`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use verity_core::provider::http::{is_secret_header, without_credential_parameters};
use verity_messages::{CheckRequest, ProviderChoice};

/// The checks of the main corpus asked for and not finished yet, queued or running, in the
/// order they were asked for, and the concurrency they run at: what a reload needs to lose
/// none. A check leaves it when its result is recorded. At start, one with a stored session
/// resumes from it; the others are queued again (a check whose session had not been written
/// yet starts over: it had recorded no response).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unfinished {
    /// How many checks run at once.
    pub concurrency: usize,
    /// The checks, credentials removed.
    pub checks: Vec<SessionMeta>,
    /// The spending limits of their runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<SavedBudget>,
}

/// What is saved of a run's limit with its unfinished checks, so a reload keeps counting:
/// the run, its limit and what its ended checks spent (a running check's spending is in its
/// durable session).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedBudget {
    /// The run (the id of its first check).
    pub run: String,
    /// The limit in US dollars.
    pub limit: f64,
    /// What its ended checks spent, in US dollars.
    pub ended: f64,
}

/// What a session record says about its check, beside the log: enough to resume it. The
/// provider's credentials (`apiKey`, credential headers) are never stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// The check.
    pub check: CheckRequest,
    /// The provider, without credentials.
    pub provider: ProviderChoice,
    /// Whether credentials were removed (a resume cannot call the provider without them).
    #[serde(default)]
    pub credentials_removed: bool,
    /// The run whose spending limit the check is under ([`SavedBudget::run`]), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The content id of the corpus the check runs over (records written before it was kept
    /// have none): after a reload, a check whose corpus has changed waits for it, its recorded
    /// responses kept, rather than being thrown away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<String>,
}

impl SessionMeta {
    /// The record of `check` run with `provider`, credentials removed.
    #[must_use]
    pub fn new(check: &CheckRequest, provider: &ProviderChoice) -> Self {
        let (provider, credentials_removed) = without_credentials(provider);
        Self { check: check.clone(), provider, credentials_removed, run: None, corpus: None }
    }
}

/// `provider` without its API key, credential headers ([`is_secret_header`]: every header but
/// the public ones) and credential-looking query parameters of its base URL, and whether it
/// had any.
pub(crate) fn without_credentials(provider: &ProviderChoice) -> (ProviderChoice, bool) {
    let ProviderChoice::Network { config } = provider else { return (provider.clone(), false) };
    let mut config = config.clone();
    let mut removed = false;
    if let Some(object) = config.as_object_mut() {
        removed |= object.remove("apiKey").is_some_and(|key| !key.is_null());
        // A key written into the base URL's query (`?key=...`) is kept out too, by name.
        if let Some(Value::String(url)) = object.get_mut("baseUrl") {
            let (kept, had) = without_credential_parameters(url, "");
            *url = kept;
            removed |= had;
        }
        if let Some(Value::Array(headers)) = object.get_mut("headers") {
            let before = headers.len();
            headers
                .retain(|pair| !pair.get(0).and_then(Value::as_str).is_some_and(is_secret_header));
            removed |= headers.len() != before;
        }
    }
    (ProviderChoice::Network { config }, removed)
}
