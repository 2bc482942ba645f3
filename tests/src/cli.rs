//! What the native command-line tools (`eval`, `fit`, the composers of dev data) share: a
//! provider configuration read from a file, the transport to it, a runtime to drive it, and
//! the plumbing of a tool that reads a claim file and prints JSON lines.
//!
//! The HTTP client is the durable worker's (`verity_restate::http::ReqwestClient`, rustls): it
//! reaches hosted providers over HTTPS and local servers (llama-server, Ollama, vLLM) over
//! plain HTTP, and refuses (before any request) to send a key over plain HTTP to a host that
//! is not loopback.

use serde_json::{Value, json};
use verity_core::claim::AssessMode;
use verity_core::provider::Provider;

/// A provider configuration file: the provider (the JSON of
/// [`verity_core::provider::Provider`]) and the assess route it asks for (`"assess"`, beside
/// the provider's fields; `agent` when absent). Its key, if the file has none, comes from
/// `VERITY_API_KEY`.
///
/// # Errors
/// The file cannot be read, or is not such a configuration.
pub fn read_provider(path: &str) -> Result<(Provider, AssessMode), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut config: Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let assess = match config.as_object_mut().and_then(|fields| fields.remove("assess")) {
        None => AssessMode::Agent,
        Some(value) => serde_json::from_value(value)
            .map_err(|e| format!("{path}: \"assess\" is not an assess route: {e}"))?,
    };
    if config.get("apiKey").is_none_or(Value::is_null)
        && let Ok(key) = std::env::var("VERITY_API_KEY")
    {
        config["apiKey"] = json!(key);
    }
    let provider = serde_json::from_value(config)
        .map_err(|e| format!("{path} is not a provider configuration: {e}"))?;
    Ok((provider, assess))
}

/// How a provider is named in summaries.
#[must_use]
pub fn provider_name(provider: &Provider) -> String {
    match provider {
        Provider::OpenAi(config) => {
            format!("openai-compatible {} at {}", config.model, config.base_url)
        }
        Provider::Anthropic(config) => format!("anthropic {}", config.model),
        _ => "a provider".to_owned(),
    }
}

/// The transport to a real provider: the codecs over reqwest with rustls. Refuses, before any
/// request, to send a key over plain HTTP to a host that is not loopback. Native only (the
/// crate's suite also runs in wasm32, where the tools do not).
///
/// # Errors
/// That refusal.
#[cfg(not(target_arch = "wasm32"))]
pub fn transport(
    provider: Provider,
) -> Result<verity_core::provider::ProviderTransport<verity_restate::http::ReqwestClient>, String> {
    verity_restate::http::refuse_key_in_the_clear(&provider)?;
    Ok(verity_core::provider::ProviderTransport::new(
        provider,
        verity_restate::http::ReqwestClient::new(),
    ))
}

/// Runs a future to completion on a tokio runtime (the HTTP client needs one). Native only.
#[cfg(not(target_arch = "wasm32"))]
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
        })
        .block_on(future)
}

/// The JSON value of each non-blank line of the file at `path`.
///
/// # Errors
/// The file cannot be read, or a line is not JSON (named by its number).
pub fn read_json_lines(path: &str) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line).map_err(|e| format!("{path}, line {}: {e}", n + 1))
        })
        .collect()
}

/// The `main` of a tool `name` that takes one file and prints what `compose` makes of it, one
/// JSON value a line: a usage line without the file, `name: the error` on a failure.
pub fn print_composed(
    name: &str,
    compose: impl FnOnce(&str) -> Result<Vec<Value>, String>,
) -> std::process::ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: {name} CLAIMS.jsonl");
        return std::process::ExitCode::FAILURE;
    };
    match compose(&path) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            std::process::ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("{name}: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
