//! The OpenAI chat completions codec (`POST {base}/chat/completions`), for OpenAI and the
//! servers that speak its protocol: llama.cpp's llama-server, Ollama, vLLM, OpenRouter.
//!
//! Mapping of the core's messages:
//!
//! | core | wire |
//! |---|---|
//! | system prompt | a first `system` message (none when empty) |
//! | `User { text }` | `{"role": "user", "content": text}` |
//! | `Assistant` | `{"role": "assistant", "content": text or null, "tool_calls": [...]}`; reasoning is not sent back; a failed response is left out |
//! | `ToolResult` | `{"role": "tool", "tool_call_id", "content"}` (the wire has no error flag: the content says it) |
//! | tools | `{"type": "function", "function": {"name", "description", "parameters"}}` |
//!
//! Responses: `message.content` (a string or text parts), `reasoning_content` / `reasoning`
//! (llama-server, vLLM, DeepSeek, OpenRouter) as thinking, `refusal` as text, `tool_calls`.
//! `finish_reason` maps to the stop reason (`stop` → stop, or tool use when the response has
//! calls, since some servers say `stop` there; `tool_calls` → tool use; `length` → length;
//! `content_filter` → a failed, non-retryable response). Usage: `prompt_tokens` minus
//! `prompt_tokens_details.cached_tokens` is the uncached input.
//!
//! A stream is complete only with its `data: [DONE]`; one that ends without it is a failed,
//! retryable response.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::ToolChoice;
use super::decode::{Blocks, Ending, StreamState, arguments_text, assemble, parse_body};
use super::failure::{embedded_error, error_fields, http_error, malformed, redact, secrets};
use super::http::{HttpRequest, HttpResponse};
use super::price::Price;
use super::sse::SseEvent;
use crate::message::{
    AssistantMessage, Delta, FirstToken, Message, ModelRequest, TokenLogprob, ToolSpec, Usage,
};

mod constrained;

pub use constrained::{CONSTRAINED_CALL_ID, answer_schema};
use constrained::{constrained_answer, constrained_system, read_answer};

/// OpenAI's API base URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// OpenRouter's OpenAI-compatible base URL.
pub const OPENROUTER_BASE_URL: &str = "https://openrouter.ai/api/v1";
/// Ollama's OpenAI-compatible base URL on its default port.
pub const OLLAMA_BASE_URL: &str = "http://localhost:11434/v1";
/// llama.cpp's llama-server on its default port.
pub const LLAMA_SERVER_BASE_URL: &str = "http://localhost:8080/v1";

/// Which request field carries the output-token limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MaxTokensField {
    /// `max_tokens`: understood by every compatible server, deprecated by OpenAI and refused by
    /// its reasoning models.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI wants now.
    MaxCompletionTokens,
}

/// How a turn asks the model for its answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum OutputMode {
    /// Native tool calling: `tools` and `tool_choice` (the default).
    #[default]
    Tools,
    /// Constrained output: the turn's tools become one JSON Schema sent as `response_format`
    /// (`{"type": "json_schema"}`), and the answer is read back as the call it names. For
    /// servers whose tool calling a small model cannot use (llama.cpp without a tool-aware
    /// chat template, Ollama's OpenAI endpoint); see [`answer_schema`].
    JsonSchema,
}

/// The output limit sent when the configuration sets none, so a runaway model is bounded.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The most `top_logprobs` OpenAI accepts.
pub const MAX_TOP_LOGPROBS: u8 = 20;

/// The default deadline of a whole request, in milliseconds (5 minutes).
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;

/// The default longest wait for the next bytes of a response, in milliseconds (1 minute).
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 60_000;

/// Where and how to call an OpenAI-compatible server.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OpenAiConfig {
    /// The base URL, up to and including `/v1` (see the `*_BASE_URL` constants).
    pub base_url: String,
    /// The model name, as the server knows it.
    pub model: String,
    /// Sent as `Authorization: Bearer`; local servers need none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Extra headers, sent after the codec's own (OpenRouter's `HTTP-Referer`, `X-Title`).
    pub headers: Vec<(String, String)>,
    /// Ask for a streamed (SSE) response.
    pub stream: bool,
    /// When streaming, ask for the usage chunk (`stream_options.include_usage`).
    pub include_usage: bool,
    /// The output-token limit; [`DEFAULT_MAX_TOKENS`] when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Which field carries `max_tokens`.
    pub max_tokens_field: MaxTokensField,
    /// Which tools the model may or must call (sent only when there are tools).
    pub tool_choice: ToolChoice,
    /// `parallel_tool_calls`, if set (sent only when there are tools).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// The sampling temperature, if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// `reasoning_effort` for reasoning models (`"low"`, `"medium"`, `"high"`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// The model's price, for [`Usage::cost`]; see [`super::Provider::priced`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// The deadline of each request in milliseconds (`"timeoutMs"`), enforced by the host's
    /// client ([`HttpRequest::timeout_ms`]); [`DEFAULT_TIMEOUT_MS`] when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The longest wait for the next bytes of a response (`"idleTimeoutMs"`), enforced by the
    /// host's client ([`HttpRequest::idle_timeout_ms`]); [`DEFAULT_IDLE_TIMEOUT_MS`] when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    /// How a turn asks for its answer (`"output": "tools" | "json-schema"`).
    pub output: OutputMode,
    /// llama.cpp's `cache_prompt` (`"cachePrompt"`): reuse the server's cache of the longest
    /// prefix a request shares with the slot's last one. Sent only when set: OpenAI's schema
    /// has no such field. llama-server caches by default (its `cache_prompt` defaults to true),
    /// so its preset leaves it unset; set it for a server whose default is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_prompt: Option<bool>,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self {
            base_url: OPENAI_BASE_URL.to_owned(),
            model: String::new(),
            api_key: None,
            headers: Vec::new(),
            stream: false,
            include_usage: true,
            max_tokens: None,
            max_tokens_field: MaxTokensField::default(),
            tool_choice: ToolChoice::default(),
            parallel_tool_calls: None,
            temperature: None,
            reasoning_effort: None,
            price: None,
            timeout_ms: None,
            idle_timeout_ms: None,
            output: OutputMode::default(),
            cache_prompt: None,
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("headers", &self.headers.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .field("stream", &self.stream)
            .field("include_usage", &self.include_usage)
            .field("max_tokens", &self.max_tokens)
            .field("max_tokens_field", &self.max_tokens_field)
            .field("tool_choice", &self.tool_choice)
            .field("parallel_tool_calls", &self.parallel_tool_calls)
            .field("temperature", &self.temperature)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("price", &self.price)
            .field("timeout_ms", &self.timeout_ms)
            .field("idle_timeout_ms", &self.idle_timeout_ms)
            .field("output", &self.output)
            .field("cache_prompt", &self.cache_prompt)
            .finish()
    }
}

impl OpenAiConfig {
    /// A server at `base_url` (up to and including `/v1`) serving `model`.
    #[must_use]
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self { base_url: base_url.into(), model: model.into(), ..Self::default() }
    }

    /// OpenAI itself, with the user's key.
    #[must_use]
    pub fn openai(model: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self {
            api_key: Some(api_key.into()),
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            ..Self::new(OPENAI_BASE_URL, model)
        }
    }

    /// OpenRouter, with the user's key (model names like `anthropic/claude-sonnet-4.5`).
    #[must_use]
    pub fn openrouter(model: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self { api_key: Some(api_key.into()), ..Self::new(OPENROUTER_BASE_URL, model) }
    }

    /// A local Ollama (`ollama serve`) on its default port, with constrained output
    /// ([`OutputMode::JsonSchema`]: its OpenAI endpoint maps `response_format` to its own
    /// structured outputs, which every model it serves can follow, where tool calling needs a
    /// model trained for it).
    #[must_use]
    pub fn ollama(model: impl Into<String>) -> Self {
        Self { output: OutputMode::JsonSchema, ..Self::new(OLLAMA_BASE_URL, model) }
    }

    /// A local llama.cpp `llama-server` on its default port (it serves the one model it
    /// loaded, whatever the name). Constrained output ([`OutputMode::JsonSchema`]): llama.cpp
    /// uses `tools` only when the model's chat template renders them, and its grammar holds a
    /// small model to the schema from the first token.
    #[must_use]
    pub fn llama_server(model: impl Into<String>) -> Self {
        Self { output: OutputMode::JsonSchema, ..Self::new(LLAMA_SERVER_BASE_URL, model) }
    }

    /// The same configuration, streaming or not.
    #[must_use]
    pub fn streaming(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    /// The same configuration with one more header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The endpoint: `{base_url}/chat/completions`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// The request for one model call.
#[must_use]
pub fn encode(request: &ModelRequest<'_>, config: &OpenAiConfig) -> HttpRequest {
    let constrained = config.output == OutputMode::JsonSchema && !request.tools.is_empty();
    let mut body = Map::new();
    body.insert("model".into(), json!(config.model));
    body.insert("messages".into(), Value::Array(messages(request, constrained)));
    if constrained {
        body.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {
                "name": "answer",
                "schema": answer_schema(request.tools),
            }}),
        );
    } else if !request.tools.is_empty() {
        insert_tools(&mut body, request.tools, config);
    }
    insert_sampling(&mut body, request, config);
    if let Some(cache) = config.cache_prompt {
        body.insert("cache_prompt".into(), json!(cache));
    }
    // A probe is not streamed (see `insert_sampling`).
    let stream = config.stream && request.probe.is_none();
    if stream {
        body.insert("stream".into(), json!(true));
        if config.include_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    HttpRequest {
        method: "POST".to_owned(),
        url: config.url(),
        headers: headers(config, stream),
        body: Value::Object(body).to_string(),
        timeout_ms: Some(config.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)),
        idle_timeout_ms: Some(config.idle_timeout_ms.unwrap_or(DEFAULT_IDLE_TIMEOUT_MS)),
    }
}

/// The native tool-calling fields of a turn with tools: `tools`, `tool_choice` and, when the
/// configuration sets it, `parallel_tool_calls`.
fn insert_tools(body: &mut Map<String, Value>, tools: &[ToolSpec], config: &OpenAiConfig) {
    let tools = tools
        .iter()
        .map(|tool| {
            json!({"type": "function", "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            }})
        })
        .collect();
    body.insert("tools".into(), Value::Array(tools));
    let choice = match &config.tool_choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::Required => json!("required"),
        ToolChoice::None => json!("none"),
        ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
    };
    body.insert("tool_choice".into(), choice);
    if let Some(parallel) = config.parallel_tool_calls {
        body.insert("parallel_tool_calls".into(), json!(parallel));
    }
}

/// The fields that say how the answer is sampled: the output limit, the temperature, and
/// either the probe's `logprobs` or the configuration's `reasoning_effort`.
fn insert_sampling(
    body: &mut Map<String, Value>,
    request: &ModelRequest<'_>,
    config: &OpenAiConfig,
) {
    let field = match config.max_tokens_field {
        MaxTokensField::MaxTokens => "max_tokens",
        MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
    };
    // A probe (the verifier's Yes/No question) is one token at temperature 0 with its most
    // likely alternatives, whatever the configuration says; not streamed, since one token has
    // no progress to show and a whole body is one shape to decode (a stream's first chunk is
    // read too, for a server that streams anyway); no reasoning, which one token cannot hold.
    let probe = request.probe;
    let limit = if probe.is_some() { 1 } else { output_limit(request, config) };
    body.insert(field.into(), json!(limit));
    let temperature = if probe.is_some() { Some(0.0) } else { config.temperature };
    if let Some(temperature) = temperature.and_then(serde_json::Number::from_f64) {
        body.insert("temperature".into(), Value::Number(temperature));
    }
    if let Some(probe) = probe {
        body.insert("logprobs".into(), json!(true));
        body.insert("top_logprobs".into(), json!(probe.top_logprobs.min(MAX_TOP_LOGPROBS)));
    } else if let Some(effort) = &config.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(effort));
    }
}

/// The request's headers: JSON in, JSON or an event stream out, the key as a bearer token
/// when there is one, then the configuration's own.
fn headers(config: &OpenAiConfig, stream: bool) -> Vec<(String, String)> {
    let mut headers = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        (
            "Accept".to_owned(),
            if stream { "text/event-stream" } else { "application/json" }.to_owned(),
        ),
    ];
    if let Some(key) = config.api_key.as_deref().filter(|key| !key.is_empty()) {
        headers.push(("Authorization".to_owned(), format!("Bearer {key}")));
    }
    headers.extend(config.headers.iter().cloned());
    headers
}

/// The output limit a request carries: the configuration's `maxTokens`; else the call kind's
/// own ([`ModelRequest::output_limit`]), unless the configuration asks for reasoning (a
/// reasoning model's hidden reasoning counts against the limit, and a kind's small limit would
/// cut it off); else [`DEFAULT_MAX_TOKENS`].
fn output_limit(request: &ModelRequest<'_>, config: &OpenAiConfig) -> u32 {
    config.max_tokens.unwrap_or_else(|| match request.output_limit {
        Some(limit) if config.reasoning_effort.is_none() => limit,
        _ => DEFAULT_MAX_TOKENS,
    })
}

/// The wire conversation. A `constrained` turn (see [`OutputMode::JsonSchema`]) has its own
/// system prompt, earlier calls as the assistant's JSON answers, and their results as user
/// messages naming the tool (a template without tool support may drop or mangle `tool`
/// messages).
fn messages(request: &ModelRequest<'_>, constrained: bool) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    let system = if constrained { constrained_system(request) } else { request.system.to_owned() };
    if !system.is_empty() {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in request.messages {
        match message {
            Message::User { text } => out.push(json!({"role": "user", "content": text})),
            Message::Assistant(response) if response.stop_reason().is_failure() => {}
            Message::Assistant(response) if constrained => out.push(constrained_answer(response)),
            Message::Assistant(response) => out.push(assistant_entry(response)),
            Message::ToolResult(result) if constrained => out.push(json!({
                "role": "user",
                "content": format!("Result of {}: {}", result.tool_name, result.output.content),
            })),
            Message::ToolResult(result) => out.push(json!({
                "role": "tool",
                "tool_call_id": result.call_id,
                "content": result.output.content,
            })),
        }
    }
    out
}

/// An earlier response with its tool calls, as the wire has them.
fn assistant_entry(response: &AssistantMessage) -> Value {
    let text = response.text_content();
    let calls: Vec<Value> = response
        .tool_calls()
        .map(|call| {
            json!({"id": call.id, "type": "function", "function": {
                "name": call.name,
                "arguments": arguments_text(&call.arguments),
            }})
        })
        .collect();
    let mut entry = Map::new();
    entry.insert("role".into(), json!("assistant"));
    let content = if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) };
    entry.insert("content".into(), content);
    if !calls.is_empty() {
        entry.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(entry)
}

/// Decodes a whole (not streamed) response.
#[must_use]
pub fn decode(response: &HttpResponse, config: &OpenAiConfig) -> AssistantMessage {
    redact(
        decode_unredacted(response, config),
        &secrets(config.api_key.as_deref(), &config.headers, &config.base_url),
    )
}

fn decode_unredacted(response: &HttpResponse, config: &OpenAiConfig) -> AssistantMessage {
    if !response.is_success() {
        return http_error(response);
    }
    let body = match parse_body(response) {
        Ok(body) => body,
        Err(failed) => return *failed,
    };
    let Some(choice) = body.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else {
        if let Some((kind, message, code)) = error_fields(&body) {
            return embedded_error(kind.as_deref(), &message, code);
        }
        return malformed(response.status, &response.body, "the body has no choices");
    };
    let Some(message) = choice.get("message").filter(|m| m.is_object()) else {
        return malformed(response.status, &response.body, "the choice has no message");
    };
    let mut blocks = Blocks::default();
    for key in ["reasoning_content", "reasoning"] {
        if let Some(reasoning) = message.get(key).and_then(Value::as_str) {
            blocks.thinking(reasoning);
            break;
        }
    }
    match message.get("content") {
        Some(Value::String(text)) => blocks.text(text),
        Some(Value::Array(parts)) => {
            for part in parts {
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    blocks.text(text);
                }
            }
        }
        _ => {}
    }
    if let Some(refusal) = message.get("refusal").and_then(Value::as_str) {
        blocks.text(refusal);
    }
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (position, call) in calls.iter().enumerate() {
            let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
            let function = call.get("function");
            let name =
                function.and_then(|f| f.get("name")).and_then(Value::as_str).unwrap_or_default();
            blocks.call(position, id, name);
            match function.and_then(|f| f.get("arguments")) {
                Some(Value::String(text)) => blocks.arguments(position, text),
                Some(Value::Null) | None => {}
                // Some servers send the arguments as an object rather than as JSON text.
                Some(other) => blocks.arguments(position, &other.to_string()),
            }
        }
    }
    let ending = ending(choice.get("finish_reason").and_then(Value::as_str));
    let (usage, reported_cost) = usage(body.get("usage"));
    let mut content = blocks.into_content();
    if config.output == OutputMode::JsonSchema {
        content = read_answer(content);
    }
    let mut message = assemble(content, ending, usage, config.price.as_ref(), reported_cost, 200);
    if !message.stop_reason().is_failure() {
        message.first_token = first_token(choice.get("logprobs"));
    }
    message
}

/// The first output token and its alternatives from a choice's (or a chunk's) `logprobs`:
/// `{"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
/// "bytes"}]}]}`, OpenAI's shape, which llama.cpp's server follows. A token without text is
/// read from its `bytes`; a log probability that is not a finite number is kept as `None`, for
/// the reader to judge. `None` when there is no first token.
fn first_token(logprobs: Option<&Value>) -> Option<FirstToken> {
    let entry = logprobs?.get("content")?.as_array()?.first()?;
    let read = |value: &Value| -> Option<TokenLogprob> {
        let token = match value.get("token").and_then(Value::as_str) {
            Some(token) => token.to_owned(),
            None => {
                let bytes: Vec<u8> = value
                    .get("bytes")?
                    .as_array()?
                    .iter()
                    .map(|byte| byte.as_u64().and_then(|b| u8::try_from(b).ok()))
                    .collect::<Option<_>>()?;
                String::from_utf8_lossy(&bytes).into_owned()
            }
        };
        let logprob = value.get("logprob").and_then(Value::as_f64).filter(|l| l.is_finite());
        Some(TokenLogprob { token, logprob })
    };
    let sampled = read(entry)?;
    let top = entry
        .get("top_logprobs")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(read).collect())
        .unwrap_or_default();
    Some(FirstToken { sampled, top })
}

fn ending(reason: Option<&str>) -> Ending {
    match reason {
        Some("stop" | "eos" | "end_turn") => Ending::Stop,
        Some("tool_calls" | "function_call") => Ending::ToolUse,
        Some("length" | "max_tokens") => Ending::Length,
        Some(reason @ "content_filter") => Ending::Refused(reason.to_owned()),
        _ => Ending::Unknown,
    }
}

/// The usage object, and the cost if the provider stated one (OpenRouter's `usage.cost`).
fn usage(value: Option<&Value>) -> (Usage, Option<f64>) {
    let Some(value) = value.filter(|v| v.is_object()) else {
        return (Usage::default(), None);
    };
    let count = |pointer: &str| value.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    let prompt = count("/prompt_tokens");
    let cache_read = count("/prompt_tokens_details/cached_tokens");
    let cache_write = count("/prompt_tokens_details/cache_write_tokens");
    let usage = Usage {
        input: prompt.saturating_sub(cache_read.saturating_add(cache_write)),
        output: count("/completion_tokens"),
        cache_read,
        cache_write,
        cost: 0.0,
    };
    (usage, value.get("cost").and_then(Value::as_f64))
}

/// Decodes a streamed response as its bytes arrive.
#[derive(Debug)]
pub struct OpenAiStream {
    state: StreamState,
    finish_reason: Option<String>,
    usage: Option<Value>,
    output: OutputMode,
    /// The first token's probabilities, from the first chunk that carries them.
    first_token: Option<FirstToken>,
}

impl OpenAiStream {
    /// A decoder for a stream whose response head had `status` (2xx).
    #[must_use]
    pub fn new(config: &OpenAiConfig, status: u16) -> Self {
        Self {
            state: StreamState::new(
                status,
                config.price,
                secrets(config.api_key.as_deref(), &config.headers, &config.base_url),
            ),
            finish_reason: None,
            usage: None,
            output: config.output,
            first_token: None,
        }
    }

    /// Feeds the next bytes; returns what they added.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Delta> {
        let events = self.state.feed(bytes);
        self.handle(&events, false)
    }

    /// The stream ended: the final message.
    #[must_use]
    pub fn finish(mut self) -> AssistantMessage {
        let secrets = std::mem::take(&mut self.state.secrets);
        redact(self.finish_unredacted(), &secrets)
    }

    fn finish_unredacted(mut self) -> AssistantMessage {
        let events = self.state.end();
        self.handle(&events, true);
        if let Some(failed) = self.state.failure_at_end("the stream ended before [DONE]") {
            return failed;
        }
        let ending = ending(self.finish_reason.as_deref());
        let (usage, reported_cost) = usage(self.usage.as_ref());
        let mut content = self.state.blocks.into_content();
        if self.output == OutputMode::JsonSchema {
            content = read_answer(content);
        }
        let mut message = assemble(
            content,
            ending,
            usage,
            self.state.price.as_ref(),
            reported_cost,
            self.state.status,
        );
        if !message.stop_reason().is_failure() {
            message.first_token = self.first_token;
        }
        message
    }

    /// The status of the response head.
    #[must_use]
    pub fn status(&self) -> u16 {
        self.state.status
    }

    /// The body so far (up to [`super::RAW_BODY_LIMIT`]).
    #[must_use]
    pub fn raw(&self) -> &[u8] {
        self.state.raw()
    }

    fn handle(&mut self, events: &[SseEvent], at_end: bool) -> Vec<Delta> {
        let mut deltas = Vec::new();
        for event in events {
            if self.state.stopped() {
                break;
            }
            let data = event.data.trim();
            if data == "[DONE]" {
                self.state.done = true;
                continue;
            }
            let Some(chunk) = self.state.parse(data, at_end) else { break };
            if chunk.get("error").is_some()
                && let Some((kind, message, code)) = error_fields(&chunk)
            {
                self.state.failure = Some(embedded_error(kind.as_deref(), &message, code));
                break;
            }
            self.chunk(&chunk, &mut deltas);
        }
        deltas
    }

    fn chunk(&mut self, chunk: &Value, deltas: &mut Vec<Delta>) {
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first())
        else {
            return;
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        if self.first_token.is_none() {
            self.first_token = first_token(choice.get("logprobs"));
        }
        let Some(delta) = choice.get("delta") else { return };
        for key in ["reasoning_content", "reasoning"] {
            if let Some(piece) = delta.get(key).and_then(Value::as_str).filter(|p| !p.is_empty()) {
                self.state.blocks.thinking(piece);
                deltas.push(Delta::Thinking { thinking: piece.to_owned() });
                break;
            }
        }
        if let Some(piece) = delta.get("content").and_then(Value::as_str).filter(|p| !p.is_empty())
        {
            self.state.blocks.text(piece);
            deltas.push(Delta::Text { text: piece.to_owned() });
        }
        if let Some(piece) = delta.get("refusal").and_then(Value::as_str).filter(|p| !p.is_empty())
        {
            self.state.blocks.text(piece);
            deltas.push(Delta::Text { text: piece.to_owned() });
        }
        let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) else { return };
        for (position, call) in calls.iter().enumerate() {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|i| usize::try_from(i).ok())
                .unwrap_or(position);
            let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
            let function = call.get("function");
            let name =
                function.and_then(|f| f.get("name")).and_then(Value::as_str).unwrap_or_default();
            if self.state.blocks.call(index, id, name) {
                deltas.push(Delta::ToolCallStart {
                    index,
                    id: id.to_owned(),
                    name: name.to_owned(),
                });
            }
            let piece = match function.and_then(|f| f.get("arguments")) {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            if !piece.is_empty() {
                self.state.blocks.arguments(index, &piece);
                deltas.push(Delta::ToolCallArguments { index, arguments: piece });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::super::testing::{conversation, request};
    use super::*;
    use crate::StopReason;
    use crate::message::{ContentBlock, ToolCall};
    use crate::request_failure::FailureClass;

    fn config() -> OpenAiConfig {
        OpenAiConfig::new("http://127.0.0.1:9/v1/", "gpt-test").header("X-Title", "verity")
    }

    fn constrained() -> OpenAiConfig {
        OpenAiConfig { output: OutputMode::JsonSchema, ..config() }
    }

    #[test]
    fn a_constrained_turn_sends_one_schema_and_no_tools() {
        let (messages, tools) = conversation();
        let http = encode(&request("Be brief.", &messages, &tools), &constrained());
        let body = http.json();
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none(), "{body}");
        let format = &body["response_format"];
        assert_eq!(format["type"], "json_schema");
        let choices = format["json_schema"]["schema"]["oneOf"].as_array().unwrap();
        assert_eq!(choices.len(), 2, "one choice per tool");
        assert_eq!(choices[1]["properties"]["tool"], json!({"const": "submit"}));
        assert_eq!(choices[1]["properties"]["arguments"], tools[1].parameters);
        let system = body["messages"][0]["content"].as_str().unwrap();
        assert!(system.starts_with("Be brief.\n\n"), "{system}");
        assert!(system.contains("- submit: Submit the answer."), "each tool is described");
        // Earlier calls are the assistant's answers; results are user messages.
        assert_eq!(body["messages"][2]["role"], "assistant");
        let content = body["messages"][2]["content"].as_str().unwrap();
        let lines: Vec<&str> = content.lines().collect();
        assert_eq!(lines[0], "Looking it up.");
        let answers: Vec<Value> =
            lines[1..].iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(
            answers,
            [
                json!({"tool": "lookup", "arguments": {"query": "tides"}}),
                json!({"tool": "submit", "arguments": "{not json"}),
            ]
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "user", "content": "Result of lookup: The moon's gravity."})
        );
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS, "an output limit by default");
        // One tool: its parameter schema under the tool's fixed name, no oneOf.
        let one = encode(&request("", &messages, &tools[1..]), &constrained()).json();
        let schema = &one["response_format"]["json_schema"]["schema"];
        assert_eq!(schema["properties"]["tool"]["const"], "submit");
        assert_eq!(schema["required"], json!(["tool", "arguments"]));
        // A narrower schema is what constrained output sends; tool calling sends the tool's own.
        let mut narrowed = tools[1].clone();
        narrowed.constrained =
            Some(json!({"type": "object", "properties": {"text": {"enum": ["a"]}}}));
        let narrowed = [narrowed];
        let sent = encode(&request("", &messages, &narrowed), &constrained()).json();
        let arguments =
            &sent["response_format"]["json_schema"]["schema"]["properties"]["arguments"];
        assert_eq!(arguments["properties"]["text"]["enum"], json!(["a"]));
        let native = encode(&request("", &messages, &narrowed), &config()).json();
        assert_eq!(native["tools"][0]["function"]["parameters"], tools[1].parameters);
        // No tools: nothing to constrain.
        let free = encode(&request("", &messages, &[]), &constrained()).json();
        assert!(free.get("response_format").is_none());
    }

    #[test]
    fn a_constrained_answer_is_read_as_the_call_it_names() {
        let answer = |content: &str| {
            let body = json!({"choices": [{"message": {"content": content},
                "finish_reason": "stop"}]});
            decode(&HttpResponse::new(200, body.to_string()), &constrained())
        };
        let read = answer("{\"tool\": \"submit\", \"arguments\": {\"text\": \"hi\"}}");
        assert_eq!(read.stop_reason(), StopReason::ToolUse);
        let calls: Vec<&ToolCall> = read.tool_calls().collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (calls[0].name.as_str(), &calls[0].arguments),
            ("submit", &json!({"text": "hi"}))
        );
        assert_eq!(read.text_content(), "", "the JSON is the call, not text");
        // Out of range values are the loop's to refuse, not the codec's.
        let bounds = answer("{\"tool\": \"submit\", \"arguments\": {\"confidence\": 7}}");
        assert_eq!(bounds.tool_calls().next().unwrap().arguments["confidence"], 7);
        for prose in [
            "I think so.",
            "{\"tool\": \"submit\"}",
            "{\"tool\": \"submit\", \"arguments\": {}, \"x\": 1}",
            "{\"tool\": \"sub",
        ] {
            let kept = answer(prose);
            assert_eq!(kept.tool_calls().count(), 0, "{prose}");
            assert_eq!(kept.text_content(), prose);
            assert_eq!(kept.stop_reason(), StopReason::Stop);
        }
        // In tools mode the same JSON is only text.
        let body = json!({"choices": [{"message": {"content": "{\"tool\": \"submit\", \"arguments\": {}}"}}]});
        assert_eq!(
            decode(&HttpResponse::new(200, body.to_string()), &config()).tool_calls().count(),
            0
        );
        // Streamed, the answer arrives as text deltas and ends as the call.
        let mut stream = OpenAiStream::new(&constrained(), 200);
        let mut deltas = Vec::new();
        for piece in ["{\"tool\": \"sub", "mit\", \"arguments\": {\"text\": \"yes\"}}"] {
            let chunk = json!({"choices": [{"delta": {"content": piece}}]});
            deltas.extend(stream.feed(format!("data: {chunk}\n\n").as_bytes()));
        }
        deltas.extend(stream.feed(b"data: [DONE]\n\n"));
        assert_eq!(deltas.len(), 2, "progress is shown while it streams");
        let done = stream.finish();
        assert_eq!(done.tool_calls().next().unwrap().arguments, json!({"text": "yes"}));
    }

    #[test]
    fn a_call_kinds_output_limit_is_sent_unless_the_configuration_sets_one_or_asks_for_reasoning() {
        let (messages, tools) = conversation();
        let kind = ModelRequest { output_limit: Some(512), ..request("", &messages, &tools) };
        let sent = |config: &OpenAiConfig, request: &ModelRequest<'_>| {
            encode(request, config).json()["max_tokens"].clone()
        };
        assert_eq!(sent(&config(), &kind), 512, "the kind's own limit");
        assert_eq!(sent(&config(), &request("", &messages, &tools)), DEFAULT_MAX_TOKENS);
        let set = OpenAiConfig { max_tokens: Some(100), ..config() };
        assert_eq!(sent(&set, &kind), 100, "the person's maxTokens wins");
        let reasoning = OpenAiConfig { reasoning_effort: Some("high".into()), ..config() };
        assert_eq!(sent(&reasoning, &kind), DEFAULT_MAX_TOKENS, "hidden reasoning needs room");
    }

    #[test]
    fn encodes_messages_tools_and_options() {
        let (messages, tools) = conversation();
        let mut config = config();
        config.api_key = Some("sk-secret".into());
        config.max_tokens = Some(256);
        config.tool_choice = ToolChoice::Tool("submit".into());
        config.temperature = Some(0.5);
        let http = encode(&request("Be brief.", &messages, &tools), &config);
        assert_eq!(http.method, "POST");
        assert_eq!(http.url, "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(http.header("authorization"), Some("Bearer sk-secret"));
        assert_eq!(http.header("x-title"), Some("verity"));
        let body = http.json();
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What causes tides?"},
                {"role": "assistant", "content": "Looking it up.", "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "lookup", "arguments": "{\"query\":\"tides\"}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "submit", "arguments": "{not json"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "The moon's gravity."},
                {"role": "tool", "tool_call_id": "call_2",
                 "content": "submit: the arguments are not JSON"},
                {"role": "user", "content": "Please submit."}
            ])
        );
        assert_eq!(body["tools"][1]["function"]["name"], "submit");
        assert_eq!(
            body["tool_choice"],
            json!({"type": "function", "function": {"name": "submit"}})
        );
        assert_eq!(body["max_tokens"], 256);
        assert_eq!(body["temperature"], 0.5);
        assert!(body.get("stream").is_none());
        assert!(!format!("{config:?}").contains("sk-secret"), "the key is redacted in Debug");
    }

    #[test]
    fn streaming_asks_for_usage_and_no_tools_means_no_tool_choice() {
        let messages = vec![Message::User { text: "hi".into() }];
        let mut config = OpenAiConfig::openai("gpt-test", "").streaming(true);
        config.max_tokens = Some(5);
        let http = encode(&request("", &messages, &[]), &config);
        let body = http.json();
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["max_completion_tokens"], 5);
        assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
        assert_eq!(http.header("authorization"), None, "an empty key is not sent");
        assert_eq!(http.header("accept"), Some("text/event-stream"));
    }

    fn ok(body: &str) -> HttpResponse {
        HttpResponse::new(200, body).with_header("content-type", "application/json")
    }

    #[test]
    fn decodes_text_tool_calls_and_usage() {
        let body = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test",
            "choices":[{"index":0,"finish_reason":"tool_calls","logprobs":null,
              "message":{"role":"assistant","content":"Sure.","refusal":null,
                "reasoning_content":"thinking...",
                "tool_calls":[{"id":"call_a","type":"function",
                  "function":{"name":"submit","arguments":"{\"text\":\"hi\"}"}}]}}],
            "usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,
              "prompt_tokens_details":{"cached_tokens":60}}}"#;
        let mut config = config();
        config.price =
            Some(Price { input: 1.0, output: 2.0, cache_read: Some(0.5), cache_write: None });
        let response = decode(&ok(body), &config);
        assert_eq!(response.stop_reason(), StopReason::ToolUse);
        assert_eq!(
            response.content,
            vec![
                ContentBlock::Thinking { thinking: "thinking...".into(), signature: None },
                ContentBlock::Text { text: "Sure.".into() },
                ContentBlock::ToolCall(ToolCall {
                    id: "call_a".into(),
                    name: "submit".into(),
                    arguments: json!({"text": "hi"})
                }),
            ]
        );
        assert_eq!((response.usage.input, response.usage.cache_read), (40, 60));
        assert_eq!(response.usage.output, 20);
        let expected = (40.0 * 1.0 + 20.0 * 2.0 + 60.0 * 0.5) / 1e6;
        assert!((response.usage.cost - expected).abs() < 1e-12);
    }

    #[test]
    fn finish_reasons_map_to_stop_reasons() {
        let with = |reason: &str, calls: bool| {
            let calls = if calls {
                r#","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":""}}]"#
            } else {
                ""
            };
            let body = format!(
                r#"{{"choices":[{{"finish_reason":{reason},"message":{{"role":"assistant","content":"x"{calls}}}}}]}}"#
            );
            decode(&ok(&body), &config())
        };
        assert_eq!(with("\"stop\"", false).stop_reason(), StopReason::Stop);
        assert_eq!(with("\"stop\"", true).stop_reason(), StopReason::ToolUse, "Ollama says stop");
        assert_eq!(with("\"tool_calls\"", true).stop_reason(), StopReason::ToolUse);
        assert_eq!(with("\"length\"", true).stop_reason(), StopReason::Length);
        assert_eq!(with("null", false).stop_reason(), StopReason::Stop);
        let filtered = with("\"content_filter\"", false);
        assert_eq!(filtered.stop_reason(), StopReason::Error);
        assert_eq!(filtered.error.unwrap().class, FailureClass::NotRetryable);
        assert_eq!(
            with("\"stop\"", true).tool_calls().next().unwrap().arguments,
            json!({}),
            "empty arguments are an empty object"
        );
    }

    #[test]
    fn openrouter_costs_are_kept_when_no_price_is_set() {
        let body = r#"{"choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"x"}}],
            "usage":{"prompt_tokens":10,"completion_tokens":2,"cost":0.0042}}"#;
        assert_eq!(decode(&ok(body), &config()).usage.cost, 0.0042);
    }

    #[test]
    fn bodies_that_are_not_responses_fail_typed() {
        let html = decode(&ok("<html>captive portal</html>"), &config());
        let error = html.error.clone().unwrap();
        assert_eq!(html.stop_reason(), StopReason::Error);
        assert_eq!(error.class, FailureClass::NotRetryable);
        assert_eq!(error.raw_body.as_deref(), Some("<html>captive portal</html>"));

        let truncated = decode(&ok(r#"{"choices":[{"message":{"content":"hel"#), &config());
        let error = truncated.error.unwrap();
        assert_eq!(error.class, FailureClass::Retryable, "a cut body is like a dropped line");
        assert!(error.raw_body.unwrap().starts_with("{\"choices\""));

        let shapeless = decode(&ok(r#"{"object":"list","data":[]}"#), &config());
        assert!(shapeless.failure_message().contains("no choices"));

        let embedded =
            decode(&ok(r#"{"error":{"code":502,"message":"Provider returned error"}}"#), &config());
        let error = embedded.error.unwrap();
        assert_eq!((error.class, error.status), (FailureClass::Retryable, Some(502)));

        let limited = decode(
            &HttpResponse::new(
                429,
                r#"{"error":{"message":"Rate limit","type":"rate_limit_error"}}"#,
            )
            .with_header("retry-after", "3"),
            &config(),
        );
        let error = limited.error.unwrap();
        assert_eq!(error.retry_after_ms, Some(3_000));
        assert_eq!(error.class, FailureClass::Retryable);
    }

    /// A stream as OpenAI sends it: role chunk, text, a tool call whose arguments arrive in
    /// pieces, finish reason, usage chunk, `[DONE]`.
    pub(crate) const STREAM: &str = concat!(
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Let me \"},\"finish_reason\":null}]}\n\n",
        ": keep-alive\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"check ✓.\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_x\",\"type\":\"function\",\"function\":{\"name\":\"submit\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"te\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"xt\\\": \\\"é\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_y\",\"type\":\"function\",\"function\":{\"name\":\"lookup\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":9,\"total_tokens\":59}}\n\n",
        "data: [DONE]\n\n",
    );

    fn decode_stream(chunks: &[&[u8]]) -> (Vec<Delta>, AssistantMessage) {
        let mut stream = OpenAiStream::new(&config(), 200);
        let mut deltas = Vec::new();
        for chunk in chunks {
            deltas.extend(stream.feed(chunk));
        }
        (deltas, stream.finish())
    }

    #[test]
    fn a_stream_assembles_text_and_tool_calls_by_index() {
        let (deltas, response) = decode_stream(&[STREAM.as_bytes()]);
        assert_eq!(response.stop_reason(), StopReason::ToolUse);
        assert_eq!(response.text_content(), "Let me check ✓.");
        let calls: Vec<&ToolCall> = response.tool_calls().collect();
        assert_eq!(calls.len(), 2);
        assert_eq!((calls[0].id.as_str(), calls[0].name.as_str()), ("call_x", "submit"));
        assert_eq!(calls[0].arguments, json!({"text": "é"}));
        assert_eq!((calls[1].id.as_str(), calls[1].arguments.clone()), ("call_y", json!({})));
        assert_eq!((response.usage.input, response.usage.output), (50, 9));
        let pieces: Vec<&str> = deltas
            .iter()
            .filter_map(|d| match d {
                Delta::ToolCallArguments { index: 0, arguments } => Some(arguments.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(pieces, ["{\"te", "xt\": \"é", "\"}"]);
        assert_eq!(deltas.iter().filter(|d| matches!(d, Delta::ToolCallStart { .. })).count(), 2);
        assert_eq!(deltas[0], Delta::Text { text: "Let me ".into() });
    }

    #[test]
    fn a_stream_with_many_interleaved_tool_calls_assembles_each_by_its_index() {
        const CALLS: usize = 20_000;
        let piece = |index: usize, start: bool, arguments: &str| {
            let call = if start {
                json!({"index": index, "id": format!("id{index}"), "type": "function",
                       "function": {"name": "t", "arguments": arguments}})
            } else {
                json!({"index": index, "function": {"arguments": arguments}})
            };
            let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]});
            format!("data: {chunk}\n\n")
        };
        // Calls start in a scrambled order (7919 is prime to 20000, so this is a permutation);
        // their pieces then arrive interleaved: 5, 3, 5, then every call backwards, then forwards.
        let order: Vec<usize> = (0..CALLS).map(|i| i * 7919 % CALLS).collect();
        let mut body: String = order.iter().map(|&i| piece(i, true, "{\"n\":")).collect();
        body.push_str(&piece(5, false, "[\"a\""));
        body.push_str(&piece(3, false, "[\"b\""));
        body.push_str(&piece(5, false, ",\"c\""));
        for i in (0..CALLS).rev() {
            let text = if i == 3 || i == 5 { "]".to_owned() } else { i.to_string() };
            body.push_str(&piece(i, false, &text));
        }
        for i in 0..CALLS {
            body.push_str(&piece(i, false, "}"));
        }
        body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n");
        let (deltas, response) = decode_stream(&[body.as_bytes()]);
        assert_eq!(response.stop_reason(), StopReason::ToolUse);
        let calls: Vec<&ToolCall> = response.tool_calls().collect();
        assert_eq!(calls.len(), CALLS);
        for (call, &index) in calls.iter().zip(&order) {
            assert_eq!(call.id, format!("id{index}"));
            let expected = match index {
                3 => json!({"n": ["b"]}),
                5 => json!({"n": ["a", "c"]}),
                other => json!({"n": other}),
            };
            assert_eq!(call.arguments, expected, "call {index}");
        }
        let starts = deltas.iter().filter(|d| matches!(d, Delta::ToolCallStart { .. })).count();
        assert_eq!(starts, CALLS, "each index starts one call");
    }

    #[test]
    fn a_stream_without_done_fails_and_keeps_what_came() {
        let cut = STREAM.find("data: [DONE]").unwrap();
        let (_, response) = decode_stream(&[&STREAM.as_bytes()[..cut]]);
        let error = response.error.clone().unwrap();
        assert_eq!(response.stop_reason(), StopReason::Error);
        assert_eq!(error.class, FailureClass::Retryable);
        assert_eq!(error.status, Some(200));
        assert!(error.raw_body.unwrap().contains("call_x"));
        assert!(response.content.is_empty(), "a failed response carries no partial answer");
        // Cut inside an event: a truncated event, also retryable.
        let (_, response) = decode_stream(&[&STREAM.as_bytes()[..300]]);
        assert_eq!(response.error.unwrap().class, FailureClass::Retryable);
    }

    #[test]
    fn errors_inside_a_stream_are_provider_failures() {
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n\
            data: {\"error\":{\"message\":\"Overloaded\",\"type\":\"overloaded_error\"}}\n\n";
        let (_, response) = decode_stream(&[stream.as_bytes()]);
        assert_eq!(response.error.unwrap().class, FailureClass::Retryable);
        assert!(response.error_message.unwrap().contains("Overloaded"));
        let (_, garbage) = decode_stream(&[b"data: {nope}\n\ndata: [DONE]\n\n"]);
        assert_eq!(garbage.error.unwrap().class, FailureClass::NotRetryable);
    }

    #[test]
    fn a_stream_that_got_json_instead_is_decoded_whole() {
        // A server that ignores `stream: true` (or an error) answers with plain JSON; the
        // provider's decoder notices from the content type.
        let provider = super::super::Provider::OpenAi(config().streaming(true));
        let headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
        let mut decoder = provider.decoder(200, &headers);
        let body = br#"{"choices":[{"finish_reason":"stop","message":{"content":"whole"}}]}"#;
        assert!(decoder.feed(&body[..10]).is_empty());
        decoder.feed(&body[10..]);
        assert_eq!(decoder.finish().text_content(), "whole");
        let mut decoder = provider.decoder(503, &headers);
        decoder.feed(br#"{"error":{"message":"busy"}}"#);
        assert_eq!(decoder.finish().error.unwrap().status, Some(503));
        // An event stream without its content type is still read as one.
        let mut decoder = provider.decoder(200, &[]);
        decoder.feed(STREAM.as_bytes());
        assert_eq!(decoder.finish().stop_reason(), StopReason::ToolUse);
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) mod fuzz {
    use super::tests::STREAM;
    use super::*;
    use crate::provider::sse::fuzz::split;
    use proptest::prelude::*;

    crate::provider::decode::stream_properties!(OpenAiStream, OpenAiConfig, "data: [DONE]");

    proptest! {
        #[test]
        fn arbitrary_json_events_never_panic(
            events in proptest::collection::vec(arbitrary_json(), 0..12),
        ) {
            let mut stream = String::new();
            for event in &events {
                stream.push_str(&format!("data: {event}\n\n"));
            }
            stream.push_str("data: [DONE]\n\n");
            let _ = decode_chunks(&[stream.as_bytes()]);
            for event in &events {
                let _ = decode(&HttpResponse::new(200, event.to_string()), &OpenAiConfig::default());
            }
        }
    }

    /// JSON values shaped like chunks (so the decoder's paths are reached), with wrong types
    /// mixed in.
    pub(crate) fn arbitrary_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            "[a-z_ {}\"]{0,8}".prop_map(Value::from),
        ];
        let keys = prop_oneof![
            Just("choices"),
            Just("delta"),
            Just("message"),
            Just("content"),
            Just("tool_calls"),
            Just("index"),
            Just("id"),
            Just("function"),
            Just("name"),
            Just("arguments"),
            Just("finish_reason"),
            Just("usage"),
            Just("prompt_tokens"),
            Just("error"),
            Just("type"),
            Just("text"),
            Just("input"),
            Just("partial_json"),
            Just("stop_reason"),
            Just("content_block"),
            Just("reasoning_content"),
            Just("message"),
            Just("code"),
            Just("logprobs"),
            Just("top_logprobs"),
            Just("token"),
            Just("logprob"),
            Just("bytes"),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((keys.clone(), inner), 0..6).prop_map(|pairs| {
                    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                }),
            ]
        })
    }
}
