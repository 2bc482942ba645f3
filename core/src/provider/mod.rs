//! Model providers. Each answers a [`crate::ModelRequest`] with a [`crate::AssistantMessage`].
//!
//! The network providers are pure codecs, with no HTTP client: [`openai`] (chat completions, for
//! OpenAI and the servers that speak its protocol: llama.cpp's llama-server, Ollama, vLLM,
//! OpenRouter) and [`anthropic`] (Messages). Each has
//!
//! - `encode(&ModelRequest, &Config) -> HttpRequest`,
//! - `decode(&HttpResponse, &Config) -> AssistantMessage` for a whole response, and
//! - a streaming decoder fed the body's bytes as they arrive, which returns [`Delta`]s for
//!   progress display and the final message at the end.
//!
//! [`Provider`] picks one of them from configuration, and [`ProviderTransport`] is the one
//! [`Transport`](crate::Transport) every host uses: it asks the host's [`HttpClient`] to
//! send the request and decodes the answer, streamed or not. The host writes only the client
//! (`fetch`, a component import, a blocking socket in tests).
//!
//! A response that fails is a failed message (`stopReason: "error"`) whose
//! [`ProviderError`](crate::ProviderError) says whether a retry can help
//! ([`crate::request_failure::classify`]) and keeps the raw body when it was not what the provider
//! would send (an HTML page, truncated JSON, a stream that ended before its final event).
//! Nothing a server sends makes a codec panic.
//!
//! The offline model lives here beside them so hosts treat it like any other provider.
//!
//! Where things are: [`transport`] (the host's client and the one transport), [`decode`] (a
//! response body's decoder and what the codecs share to decode), [`failure`] (failed responses
//! and the redaction of credentials), [`http`] (requests and responses as data), [`sse`] (the
//! event-stream framing), [`price`] (costs), [`offline`] (the offline model).

pub mod anthropic;
pub mod decode;
pub mod failure;
pub mod http;
pub mod offline;
pub mod openai;
pub mod price;
pub mod sse;
pub mod transport;

use serde::{Deserialize, Serialize};
use verity_derive::TaggedDeserialize;

use crate::message::{AssistantMessage, ModelRequest};

pub use crate::message::Delta;
pub use anthropic::{AnthropicConfig, AnthropicStream, Thinking};
pub use decode::{MAX_RESPONSE_BYTES, StreamDecoder};
pub use failure::RAW_BODY_LIMIT;
pub use http::{HttpFailure, HttpRequest, HttpResponse};
pub use openai::{MaxTokensField, OpenAiConfig, OpenAiStream};
pub use price::{Price, PriceTable};
pub use sse::{SseDecoder, SseEvent};
pub use transport::{HttpBody, HttpClient, ProviderTransport, ResponseHead};

use failure::{Secrets, secrets};

/// Which tools the model may or must call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// The model must call some tool (OpenAI `"required"`, Anthropic `{"type": "any"}`).
    Required,
    /// The model must not call tools.
    None,
    /// The model must call this tool.
    Tool(String),
}

/// A configured provider: which protocol, where, which model.
#[derive(Debug, Clone, PartialEq, Serialize, TaggedDeserialize)]
#[serde(tag = "api", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI chat completions and compatible servers.
    #[serde(rename = "openai")]
    OpenAi(OpenAiConfig),
    /// Anthropic Messages.
    Anthropic(AnthropicConfig),
}

impl Provider {
    /// Refuses a configuration that would send its key in the clear (see
    /// [`http::refuse_key_in_the_clear`]; `parse` is the connecting client's URL parser). A
    /// host calls it before a job's first request, and its client again for every request.
    ///
    /// # Errors
    /// The message for the user, without the key.
    pub fn refuse_key_in_the_clear(
        &self,
        parse: impl FnOnce(&str) -> Option<(String, String)>,
    ) -> Result<(), String> {
        http::refuse_key_in_the_clear(
            &self.encode(&ModelRequest {
                system: "",
                messages: &[],
                tools: &[],
                output_limit: None,
                probe: None,
            }),
            parse,
        )
    }

    /// The request for one model call.
    #[must_use]
    pub fn encode(&self, request: &ModelRequest<'_>) -> HttpRequest {
        match self {
            Provider::OpenAi(config) => openai::encode(request, config),
            Provider::Anthropic(config) => anthropic::encode(request, config),
        }
    }

    /// Decodes a whole (not streamed) response.
    #[must_use]
    pub fn decode(&self, response: &HttpResponse) -> AssistantMessage {
        match self {
            Provider::OpenAi(config) => openai::decode(response, config),
            Provider::Anthropic(config) => anthropic::decode(response, config),
        }
    }

    /// A decoder for a response whose head (`status`, `headers`) has arrived; feed it the
    /// body as it comes. It handles a streamed (SSE) body and a whole JSON body alike, so a
    /// host can use it whether or not the request asked for streaming.
    #[must_use]
    pub fn decoder(&self, status: u16, headers: &[(String, String)]) -> StreamDecoder {
        StreamDecoder::new(self, status, headers)
    }

    /// The credentials this provider sends, to keep out of error reports.
    pub(crate) fn secrets(&self) -> Secrets {
        match self {
            Provider::OpenAi(config) => {
                secrets(config.api_key.as_deref(), &config.headers, &config.base_url)
            }
            Provider::Anthropic(config) => {
                secrets(config.api_key.as_deref(), &config.headers, &config.base_url)
            }
        }
    }

    /// The model asked for.
    #[must_use]
    pub fn model(&self) -> &str {
        match self {
            Provider::OpenAi(config) => &config.model,
            Provider::Anthropic(config) => &config.model,
        }
    }

    /// Whether requests ask for a streamed response.
    #[must_use]
    pub fn is_streaming(&self) -> bool {
        match self {
            Provider::OpenAi(config) => config.stream,
            Provider::Anthropic(config) => config.stream,
        }
    }

    /// The same provider, priced from `table` (by its model; see [`PriceTable::get`]).
    #[must_use]
    pub fn priced(mut self, table: &PriceTable) -> Self {
        let price = table.get(self.model()).copied();
        match &mut self {
            Provider::OpenAi(config) => config.price = price,
            Provider::Anthropic(config) => config.price = price,
        }
        self
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers shared by the codecs' tests.

    use super::{AnthropicConfig, OpenAiConfig, Provider};
    use crate::message::{Message, ModelRequest, ToolResult, ToolSpec};
    use crate::{AssistantMessage, ContentBlock, ToolCall};
    use serde_json::json;

    /// A conversation with every kind of message: a task, a response with text and two tool
    /// calls, their results (one an error), and a follow-up.
    pub(crate) fn conversation() -> (Vec<Message>, Vec<ToolSpec>) {
        let mut response = AssistantMessage::from_content(vec![
            ContentBlock::Thinking { thinking: "Let me look.".into(), signature: None },
            ContentBlock::Text { text: "Looking it up.".into() },
            ContentBlock::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "lookup".into(),
                arguments: json!({"query": "tides"}),
            }),
            ContentBlock::ToolCall(ToolCall {
                id: "call_2".into(),
                name: "submit".into(),
                arguments: json!("{not json"),
            }),
        ]);
        response.stop_reason = Some(crate::StopReason::ToolUse);
        let messages = vec![
            Message::User { text: "What causes tides?".into() },
            Message::Assistant(response),
            Message::ToolResult(ToolResult {
                call_id: "call_1".into(),
                tool_name: "lookup".into(),
                output: crate::ToolOutput::ok("The moon's gravity.", json!(null)),
            }),
            Message::ToolResult(ToolResult {
                call_id: "call_2".into(),
                tool_name: "submit".into(),
                output: crate::ToolOutput::error("submit: the arguments are not JSON"),
            }),
            Message::Assistant(AssistantMessage::failed("HTTP 500")),
            Message::User { text: "Please submit.".into() },
        ];
        let tools = vec![
            ToolSpec {
                name: "lookup".into(),
                description: "Look something up.".into(),
                parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
                constrained: None,
            },
            ToolSpec {
                name: "submit".into(),
                description: "Submit the answer.".into(),
                parameters: json!({"type": "object", "required": ["text"],
                    "properties": {"text": {"type": "string"}}}),
                constrained: None,
            },
        ];
        (messages, tools)
    }

    pub(crate) fn request<'a>(
        system: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolSpec],
    ) -> ModelRequest<'a> {
        ModelRequest { system, messages, tools, output_limit: None, probe: None }
    }

    pub(crate) const KEY: &str = "sk-live-0123456789abcdef";

    /// Both providers holding [`KEY`], streaming or not.
    pub(crate) fn keyed(stream: bool) -> [Provider; 2] {
        [
            Provider::OpenAi(OpenAiConfig::openai("gpt-test", KEY).streaming(stream)),
            Provider::Anthropic(AnthropicConfig::new("claude-test", KEY).streaming(stream)),
        ]
    }

    pub(crate) fn assert_no_key(what: &str, text: &str) {
        assert!(!text.contains(KEY), "{what} shows the key: {text}");
        assert!(!text.contains("0123456789abcdef"), "{what} shows part of the key: {text}");
    }

    pub(crate) fn assert_failed_without_key(what: &str, failed: &AssistantMessage) {
        assert_eq!(failed.stop_reason(), crate::StopReason::Error, "{what}");
        // The serialized message is what a session log records.
        assert_no_key(what, &serde_json::to_string(failed).unwrap());
        assert_no_key(what, &format!("{failed:?}"));
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::testing::{self, KEY, assert_no_key, keyed};
    use super::*;
    use serde_json::json;

    #[test]
    fn a_provider_is_configured_from_json() {
        let provider: Provider = serde_json::from_value(json!({
            "api": "openai",
            "baseUrl": "http://localhost:11434/v1",
            "model": "llama3.1",
            "stream": true,
            "toolChoice": "required",
            "headers": [["X-Title", "Verity"]]
        }))
        .unwrap();
        let Provider::OpenAi(config) = &provider else { panic!("an OpenAI provider") };
        assert_eq!(config.tool_choice, ToolChoice::Required);
        assert!(config.include_usage, "unset fields keep their defaults");
        assert!(provider.is_streaming());
        let anthropic: Provider = serde_json::from_value(json!({
            "api": "anthropic", "model": "claude-sonnet-4-5", "apiKey": "k",
            "toolChoice": {"tool": "submit"}, "thinking": {"type": "enabled", "budgetTokens": 2048},
            "timeoutMs": 30000
        }))
        .unwrap();
        let Provider::Anthropic(config) = &anthropic else { panic!("an Anthropic provider") };
        let (messages, tools) = testing::conversation();
        let request = testing::request("system", &messages, &tools);
        assert_eq!(anthropic.encode(&request).timeout_ms, Some(30_000), "the host enforces it");
        let defaults = provider.encode(&request);
        assert_eq!(defaults.timeout_ms, Some(openai::DEFAULT_TIMEOUT_MS), "a deadline by default");
        assert_eq!(defaults.idle_timeout_ms, Some(openai::DEFAULT_IDLE_TIMEOUT_MS));
        assert_eq!(config.base_url, anthropic::ANTHROPIC_BASE_URL);
        assert_eq!(config.tool_choice, ToolChoice::Tool("submit".into()));
        assert_eq!(config.thinking, Some(Thinking::Enabled { budget_tokens: 2048 }));
        assert!(config.browser_access);
        let round: Provider =
            serde_json::from_value(serde_json::to_value(&anthropic).unwrap()).unwrap();
        assert_eq!(round, anthropic);
    }

    #[test]
    fn the_key_is_never_shown_by_debug_or_serialization_of_a_request() {
        let (messages, tools) = testing::conversation();
        for provider in keyed(false) {
            let request = provider.encode(&testing::request("system", &messages, &tools));
            assert!(request.headers.iter().any(|(_, value)| value.contains(KEY)), "it is sent");
            assert_no_key("Debug of the provider", &format!("{provider:?}"));
            assert_no_key("Debug of the request", &format!("{request:?}"));
            assert_no_key("Debug of the request", &format!("{request:#?}"));
            let serialized = serde_json::to_string(&request).unwrap();
            assert_no_key("the serialized request", &serialized);
            assert!(serialized.contains("<redacted>"), "{serialized}");
            assert!(serialized.contains(&request.url), "the rest is kept: {serialized}");
        }
        let azure = HttpRequest {
            method: "POST".into(),
            url: "http://127.0.0.1:9/".into(),
            headers: vec![
                ("api-key".into(), KEY.into()),
                ("Proxy-Authorization".into(), format!("Basic {KEY}")),
                ("X-Title".into(), "verity".into()),
            ],
            body: "{}".into(),
            timeout_ms: None,
            idle_timeout_ms: None,
        };
        assert_no_key("Debug", &format!("{azure:?}"));
        let serialized = serde_json::to_string(&azure).unwrap();
        assert_no_key("serialization", &serialized);
        assert!(serialized.contains("verity"), "other headers are kept: {serialized}");
    }
}
