//! The Anthropic Messages codec (`POST {base}/v1/messages`).
//!
//! Mapping of the core's messages:
//!
//! | core | wire |
//! |---|---|
//! | system prompt | the top-level `system` (absent when empty) |
//! | `User { text }` | a `text` block in a `user` message |
//! | `Assistant` | `text` and `tool_use` blocks in an `assistant` message; a failed response is left out |
//! | `ToolResult` | a `tool_result` block (`is_error` kept) in a `user` message |
//! | tools | `{"name", "description", "input_schema"}` |
//!
//! Consecutive messages of one role are merged into one wire message, so every result of a
//! batch sits in the one `user` message after the `tool_use` blocks, as the API requires.
//! Tool call ids are sent with characters outside `[A-Za-z0-9_-]` replaced by `_` (the API's
//! pattern; ids from another provider may have others), the same way in calls and results.
//! Arguments that are not a JSON object (a model's invalid output kept as text) are sent as
//! `{"_invalid_arguments": text}`, since `input` must be an object.
//!
//! Reasoning is sent back when it carries Anthropic's signature (kept from `thinking` blocks and
//! `signature_delta`s), as the API requires for extended thinking with tool use; reasoning
//! without a signature (from another provider) is not sent.
//!
//! Streaming events: `message_start` (input and cache usage), `content_block_start`,
//! `content_block_delta` (`text_delta`, `input_json_delta`, `thinking_delta`,
//! `signature_delta`; citations are skipped), `message_delta` (stop reason, output usage), `message_stop`, `ping`,
//! `error`. A stream is complete only with its `message_stop`.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use verity_derive::TaggedDeserialize;

use super::ToolChoice;
use super::decode::{Blocks, Ending, StreamState, assemble, parse_body};
use super::failure::{embedded_error, error_fields, http_error, malformed, redact, secrets};
use super::http::{HttpRequest, HttpResponse};
use super::price::Price;
use super::sse::SseEvent;
use crate::message::{AssistantMessage, ContentBlock, Delta, Message, ModelRequest, Usage};

/// Anthropic's API base URL.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header value the codec speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Extended thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TaggedDeserialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
#[non_exhaustive]
pub enum Thinking {
    /// Thinking with a token budget (at least 1024, and below `max_tokens`).
    Enabled {
        /// The budget.
        budget_tokens: u32,
    },
    /// The model decides how much to think (models that support it).
    Adaptive,
}

/// Where and how to call the Messages API.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AnthropicConfig {
    /// The base URL, without `/v1`.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// Sent as `x-api-key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The `anthropic-version` header.
    pub version: String,
    /// Extra headers, sent after the codec's own (`anthropic-beta`, ...).
    pub headers: Vec<(String, String)>,
    /// Ask for a streamed (SSE) response.
    pub stream: bool,
    /// The output-token limit (the API requires one).
    pub max_tokens: u32,
    /// Which tools the model may or must call (sent only when there are tools).
    pub tool_choice: ToolChoice,
    /// Extended thinking, if wanted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// The sampling temperature, if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Sends `anthropic-dangerous-direct-browser-access: true`, which lets a page call the API
    /// straight from the browser with the user's own key (the point of this app: the key
    /// never leaves the user's machine for ours). On by default.
    pub browser_access: bool,
    /// The model's price, for [`Usage::cost`]; see [`super::Provider::priced`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// The deadline of each request in milliseconds (`"timeoutMs"`), enforced by the host's
    /// client ([`HttpRequest::timeout_ms`]); [`super::openai::DEFAULT_TIMEOUT_MS`] when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The longest wait for the next bytes of a response (`"idleTimeoutMs"`), enforced by the
    /// host's client ([`HttpRequest::idle_timeout_ms`]);
    /// [`super::openai::DEFAULT_IDLE_TIMEOUT_MS`] when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        Self {
            base_url: ANTHROPIC_BASE_URL.to_owned(),
            model: String::new(),
            api_key: None,
            version: ANTHROPIC_VERSION.to_owned(),
            headers: Vec::new(),
            stream: false,
            max_tokens: 4096,
            tool_choice: ToolChoice::default(),
            thinking: None,
            temperature: None,
            browser_access: true,
            price: None,
            timeout_ms: None,
            idle_timeout_ms: None,
        }
    }
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("version", &self.version)
            .field("headers", &self.headers.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .field("stream", &self.stream)
            .field("max_tokens", &self.max_tokens)
            .field("tool_choice", &self.tool_choice)
            .field("thinking", &self.thinking)
            .field("temperature", &self.temperature)
            .field("browser_access", &self.browser_access)
            .field("price", &self.price)
            .field("timeout_ms", &self.timeout_ms)
            .field("idle_timeout_ms", &self.idle_timeout_ms)
            .finish()
    }
}

impl AnthropicConfig {
    /// Anthropic's API with the user's key.
    #[must_use]
    pub fn new(model: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self { model: model.into(), api_key: Some(api_key.into()), ..Self::default() }
    }

    /// The same configuration at another base URL (a proxy, a mock).
    #[must_use]
    pub fn at(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// The same configuration, streaming or not.
    #[must_use]
    pub fn streaming(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    /// The endpoint: `{base_url}/v1/messages`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("{}/v1/messages", self.base_url.trim_end_matches('/'))
    }
}

/// The request for one model call.
#[must_use]
pub fn encode(request: &ModelRequest<'_>, config: &AnthropicConfig) -> HttpRequest {
    let mut body = Map::new();
    body.insert("model".into(), json!(config.model));
    // A probe (the verifier's one-token Yes/No question) asks for one token at temperature 0,
    // without reasoning (its budget cannot fit in one token) and not streamed; the Messages
    // API reports no probabilities, so the sampled token is all it answers with.
    let probe = request.probe.is_some();
    body.insert("max_tokens".into(), json!(if probe { 1 } else { config.max_tokens }));
    if !request.system.is_empty() {
        body.insert("system".into(), json!(request.system));
    }
    body.insert("messages".into(), Value::Array(messages(request)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": input_schema(&tool.parameters),
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &config.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        };
        body.insert("tool_choice".into(), choice);
    }
    match config.thinking.filter(|_| !probe) {
        Some(Thinking::Enabled { budget_tokens }) => {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget_tokens}),
            );
        }
        Some(Thinking::Adaptive) => {
            body.insert("thinking".into(), json!({"type": "adaptive"}));
        }
        None => {}
    }
    let temperature = if probe { Some(0.0) } else { config.temperature };
    if let Some(temperature) = temperature.and_then(serde_json::Number::from_f64) {
        body.insert("temperature".into(), Value::Number(temperature));
    }
    if config.stream && !probe {
        body.insert("stream".into(), json!(true));
    }
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("anthropic-version".to_owned(), config.version.clone()),
    ];
    if let Some(key) = config.api_key.as_deref().filter(|key| !key.is_empty()) {
        headers.push(("x-api-key".to_owned(), key.to_owned()));
    }
    if config.browser_access {
        headers.push(("anthropic-dangerous-direct-browser-access".to_owned(), "true".to_owned()));
    }
    headers.extend(config.headers.iter().cloned());
    HttpRequest {
        method: "POST".to_owned(),
        url: config.url(),
        headers,
        body: Value::Object(body).to_string(),
        timeout_ms: Some(config.timeout_ms.unwrap_or(super::openai::DEFAULT_TIMEOUT_MS)),
        idle_timeout_ms: Some(
            config.idle_timeout_ms.unwrap_or(super::openai::DEFAULT_IDLE_TIMEOUT_MS),
        ),
    }
}

/// A tool's parameters as an `input_schema`, which must be an object schema.
fn input_schema(parameters: &Value) -> Value {
    match parameters {
        Value::Object(schema) if schema.contains_key("type") => parameters.clone(),
        Value::Object(schema) => {
            let mut schema = schema.clone();
            schema.insert("type".into(), json!("object"));
            Value::Object(schema)
        }
        _ => json!({"type": "object"}),
    }
}

/// An id the API accepts (`^[a-zA-Z0-9_-]+$`).
fn wire_id(id: &str) -> String {
    if id.is_empty() {
        return "_".to_owned();
    }
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

fn messages(request: &ModelRequest<'_>) -> Vec<Value> {
    let mut out: Vec<(&str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, block: Value| match out.last_mut() {
        Some((last, blocks)) if *last == role => blocks.push(block),
        _ => out.push((role, vec![block])),
    };
    for message in request.messages {
        match message {
            Message::User { text } => {
                if !text.is_empty() {
                    push("user", json!({"type": "text", "text": text}));
                }
            }
            Message::Assistant(response) => {
                if response.stop_reason().is_failure() {
                    continue;
                }
                for block in &response.content {
                    match block {
                        ContentBlock::Text { text } if !text.is_empty() => {
                            push("assistant", json!({"type": "text", "text": text}));
                        }
                        ContentBlock::Thinking { thinking, signature: Some(signature) } => {
                            push(
                                "assistant",
                                json!({"type": "thinking", "thinking": thinking,
                                    "signature": signature}),
                            );
                        }
                        ContentBlock::ToolCall(call) => {
                            let input = match &call.arguments {
                                Value::Object(_) => call.arguments.clone(),
                                Value::String(text) => json!({"_invalid_arguments": text}),
                                other => json!({"_invalid_arguments": other.to_string()}),
                            };
                            push(
                                "assistant",
                                json!({"type": "tool_use", "id": wire_id(&call.id),
                                    "name": call.name, "input": input}),
                            );
                        }
                        _ => {}
                    }
                }
            }
            Message::ToolResult(result) => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": wire_id(&result.call_id),
                    "content": result.output.content,
                });
                if result.output.is_error {
                    block["is_error"] = json!(true);
                }
                push("user", block);
            }
        }
    }
    out.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect()
}

/// Decodes a whole (not streamed) response.
#[must_use]
pub fn decode(response: &HttpResponse, config: &AnthropicConfig) -> AssistantMessage {
    redact(
        decode_unredacted(response, config),
        &secrets(config.api_key.as_deref(), &config.headers, &config.base_url),
    )
}

fn decode_unredacted(response: &HttpResponse, config: &AnthropicConfig) -> AssistantMessage {
    if !response.is_success() {
        return http_error(response);
    }
    let body = match parse_body(response) {
        Ok(body) => body,
        Err(failed) => return *failed,
    };
    if body.get("type").and_then(Value::as_str) == Some("error")
        && let Some((kind, message, code)) = error_fields(&body)
    {
        return embedded_error(kind.as_deref(), &message, code);
    }
    let Some(content) = body.get("content").and_then(Value::as_array) else {
        return malformed(response.status, &response.body, "the body is not a message");
    };
    let mut blocks = Blocks::default();
    for (index, block) in content.iter().enumerate() {
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("type") {
            "text" => blocks.text(text("text")),
            "thinking" => {
                blocks.thinking(text("thinking"));
                blocks.signature(text("signature"));
            }
            "tool_use" => {
                blocks.call(index, text("id"), text("name"));
                let input = block.get("input").cloned().unwrap_or(Value::Null);
                if !input.is_null() {
                    blocks.arguments(index, &input.to_string());
                }
            }
            _ => {}
        }
    }
    let mut usage = Usage::default();
    if let Some(reported) = body.get("usage") {
        read_usage(&mut usage, reported);
    }
    let ending = ending(body.get("stop_reason").and_then(Value::as_str));
    assemble(blocks.into_content(), ending, usage, config.price.as_ref(), None, response.status)
}

fn ending(reason: Option<&str>) -> Ending {
    match reason {
        Some("end_turn" | "stop_sequence" | "pause_turn") => Ending::Stop,
        Some("tool_use") => Ending::ToolUse,
        Some("max_tokens" | "model_context_window_exceeded") => Ending::Length,
        Some(reason @ "refusal") => Ending::Refused(reason.to_owned()),
        _ => Ending::Unknown,
    }
}

/// Sets the counts `reported` has (a `message_delta` repeats only some of them).
fn read_usage(usage: &mut Usage, reported: &Value) {
    let set = |key: &str, field: &mut u64| {
        if let Some(count) = reported.get(key).and_then(Value::as_u64) {
            *field = count;
        }
    };
    set("input_tokens", &mut usage.input);
    set("output_tokens", &mut usage.output);
    set("cache_read_input_tokens", &mut usage.cache_read);
    set("cache_creation_input_tokens", &mut usage.cache_write);
}

/// Decodes a streamed response as its bytes arrive.
#[derive(Debug)]
pub struct AnthropicStream {
    state: StreamState,
    stop_reason: Option<String>,
    usage: Usage,
}

impl AnthropicStream {
    /// A decoder for a stream whose response head had `status` (2xx).
    #[must_use]
    pub fn new(config: &AnthropicConfig, status: u16) -> Self {
        Self {
            state: StreamState::new(
                status,
                config.price,
                secrets(config.api_key.as_deref(), &config.headers, &config.base_url),
            ),
            stop_reason: None,
            usage: Usage::default(),
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
        if let Some(failed) = self.state.failure_at_end("the stream ended before message_stop") {
            return failed;
        }
        let ending = ending(self.stop_reason.as_deref());
        assemble(
            self.state.blocks.into_content(),
            ending,
            self.usage,
            self.state.price.as_ref(),
            None,
            self.state.status,
        )
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
            let Some(value) = self.state.parse(&event.data, at_end) else { break };
            let kind = value.get("type").and_then(Value::as_str).unwrap_or(&event.event);
            match kind {
                "message_start" => {
                    if let Some(usage) = value.pointer("/message/usage") {
                        read_usage(&mut self.usage, usage);
                    }
                }
                "content_block_start" => self.block_start(&value, &mut deltas),
                "content_block_delta" => self.block_delta(&value, &mut deltas),
                "message_delta" => {
                    if let Some(reason) =
                        value.pointer("/delta/stop_reason").and_then(Value::as_str)
                    {
                        self.stop_reason = Some(reason.to_owned());
                    }
                    if let Some(usage) = value.get("usage") {
                        read_usage(&mut self.usage, usage);
                    }
                }
                "message_stop" => self.state.done = true,
                "error" => {
                    let (kind, message, code) = error_fields(&value).unwrap_or((
                        None,
                        "an error event without details".to_owned(),
                        None,
                    ));
                    self.state.failure = Some(embedded_error(kind.as_deref(), &message, code));
                }
                // `ping`, `content_block_stop` and events added later.
                _ => {}
            }
        }
        deltas
    }

    fn block_start(&mut self, value: &Value, deltas: &mut Vec<Delta>) {
        let index = block_index(value);
        let Some(block) = value.get("content_block") else { return };
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("type") {
            "text" => self.text(text("text"), deltas),
            "thinking" => self.thinking(text("thinking"), deltas),
            "tool_use" => {
                let (id, name) = (text("id"), text("name"));
                if self.state.blocks.call(index, id, name) {
                    deltas.push(Delta::ToolCallStart {
                        index,
                        id: id.to_owned(),
                        name: name.to_owned(),
                    });
                }
                // The input normally arrives as `input_json_delta`s after an empty `{}`.
                if let Some(input) = block
                    .get("input")
                    .filter(|input| input.as_object().is_some_and(|fields| !fields.is_empty()))
                {
                    let piece = input.to_string();
                    self.state.blocks.arguments(index, &piece);
                    deltas.push(Delta::ToolCallArguments { index, arguments: piece });
                }
            }
            _ => {}
        }
    }

    fn block_delta(&mut self, value: &Value, deltas: &mut Vec<Delta>) {
        let index = block_index(value);
        let Some(delta) = value.get("delta") else { return };
        let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("type") {
            "text_delta" => self.text(text("text"), deltas),
            "thinking_delta" => self.thinking(text("thinking"), deltas),
            "signature_delta" => self.state.blocks.signature(text("signature")),
            "input_json_delta" => {
                let piece = text("partial_json");
                if self.state.blocks.call(index, "", "") {
                    deltas.push(Delta::ToolCallStart {
                        index,
                        id: String::new(),
                        name: String::new(),
                    });
                }
                if !piece.is_empty() {
                    self.state.blocks.arguments(index, piece);
                    deltas.push(Delta::ToolCallArguments { index, arguments: piece.to_owned() });
                }
            }
            _ => {}
        }
    }

    fn text(&mut self, piece: &str, deltas: &mut Vec<Delta>) {
        if !piece.is_empty() {
            self.state.blocks.text(piece);
            deltas.push(Delta::Text { text: piece.to_owned() });
        }
    }

    fn thinking(&mut self, piece: &str, deltas: &mut Vec<Delta>) {
        if !piece.is_empty() {
            self.state.blocks.thinking(piece);
            deltas.push(Delta::Thinking { thinking: piece.to_owned() });
        }
    }
}

fn block_index(value: &Value) -> usize {
    value
        .get("index")
        .and_then(Value::as_u64)
        .and_then(|index| usize::try_from(index).ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::super::testing::{conversation, request};
    use super::messages as messages_of;
    use super::*;
    use crate::StopReason;
    use crate::message::ToolCall;
    use crate::request_failure::FailureClass;

    fn config() -> AnthropicConfig {
        AnthropicConfig::new("claude-test", "sk-ant-secret").at("http://127.0.0.1:9/")
    }

    #[test]
    fn encodes_blocks_system_tools_and_headers() {
        let (messages, tools) = conversation();
        let mut config = config();
        config.tool_choice = ToolChoice::Required;
        config.thinking = Some(Thinking::Enabled { budget_tokens: 2048 });
        let http = encode(&request("Be brief.", &messages, &tools), &config);
        assert_eq!(http.url, "http://127.0.0.1:9/v1/messages");
        assert_eq!(http.header("x-api-key"), Some("sk-ant-secret"));
        assert_eq!(http.header("anthropic-version"), Some(ANTHROPIC_VERSION));
        assert_eq!(http.header("anthropic-dangerous-direct-browser-access"), Some("true"));
        let body = http.json();
        assert_eq!(body["system"], "Be brief.");
        assert_eq!(body["max_tokens"], 4096);
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "What causes tides?"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Looking it up."},
                    {"type": "tool_use", "id": "call_1", "name": "lookup",
                     "input": {"query": "tides"}},
                    {"type": "tool_use", "id": "call_2", "name": "submit",
                     "input": {"_invalid_arguments": "{not json"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1",
                     "content": "The moon's gravity."},
                    {"type": "tool_result", "tool_use_id": "call_2",
                     "content": "submit: the arguments are not JSON", "is_error": true},
                    {"type": "text", "text": "Please submit."}
                ]}
            ])
        );
        assert!(!format!("{config:?}").contains("sk-ant-secret"));
    }

    #[test]
    fn ids_and_schemas_are_made_acceptable() {
        assert_eq!(wire_id("call:1/x"), "call_1_x");
        assert_eq!(wire_id(""), "_");
        assert_eq!(
            input_schema(&json!({"properties": {}})),
            json!({"properties": {}, "type": "object"})
        );
        assert_eq!(input_schema(&json!(true)), json!({"type": "object"}));
    }

    #[test]
    fn signed_reasoning_is_sent_back_and_unsigned_is_not() {
        use crate::message::{AssistantMessage, Message};
        let turn = AssistantMessage::from_content(vec![
            ContentBlock::Thinking { thinking: "signed".into(), signature: Some("sig".into()) },
            ContentBlock::Thinking { thinking: "unsigned".into(), signature: None },
            ContentBlock::ToolCall(ToolCall {
                id: "t1".into(),
                name: "submit".into(),
                arguments: json!({}),
            }),
        ]);
        let messages = vec![Message::User { text: "task".into() }, Message::Assistant(turn)];
        let request = crate::ModelRequest {
            system: "s",
            messages: &messages,
            tools: &[],
            output_limit: None,
            probe: None,
        };
        let wire = messages_of(&request);
        assert_eq!(
            wire[1]["content"],
            json!([
                {"type": "thinking", "thinking": "signed", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "submit", "input": {}}
            ])
        );
    }

    fn ok(body: &str) -> HttpResponse {
        HttpResponse::new(200, body).with_header("content-type", "application/json")
    }

    #[test]
    fn decodes_a_message_with_usage_and_cache() {
        let body = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
            "content":[{"type":"thinking","thinking":"hmm","signature":"sig"},
              {"type":"text","text":"Calling."},
              {"type":"tool_use","id":"toolu_1","name":"submit","input":{"text":"hi"}}],
            "stop_reason":"tool_use","stop_sequence":null,
            "usage":{"input_tokens":12,"output_tokens":30,"cache_creation_input_tokens":100,
              "cache_read_input_tokens":2000}}"#;
        let mut config = config();
        config.price = Some(Price {
            input: 3.0,
            output: 15.0,
            cache_read: Some(0.3),
            cache_write: Some(3.75),
        });
        let response = decode(&ok(body), &config);
        assert_eq!(response.stop_reason(), StopReason::ToolUse);
        assert_eq!(
            response.content,
            vec![
                ContentBlock::Thinking { thinking: "hmm".into(), signature: Some("sig".into()) },
                ContentBlock::Text { text: "Calling.".into() },
                ContentBlock::ToolCall(ToolCall {
                    id: "toolu_1".into(),
                    name: "submit".into(),
                    arguments: json!({"text": "hi"})
                }),
            ]
        );
        let usage = response.usage;
        assert_eq!(
            (usage.input, usage.output, usage.cache_write, usage.cache_read),
            (12, 30, 100, 2000)
        );
        let expected = (12.0 * 3.0 + 30.0 * 15.0 + 100.0 * 3.75 + 2000.0 * 0.3) / 1e6;
        assert!((usage.cost - expected).abs() < 1e-12);
    }

    #[test]
    fn stop_reasons_and_errors() {
        let with = |reason: &str| {
            decode(
                &ok(&format!(
                    r#"{{"type":"message","content":[{{"type":"text","text":"x"}}],"stop_reason":"{reason}"}}"#
                )),
                &config(),
            )
        };
        assert_eq!(with("end_turn").stop_reason(), StopReason::Stop);
        assert_eq!(with("max_tokens").stop_reason(), StopReason::Length);
        assert_eq!(with("refusal").error.unwrap().class, FailureClass::NotRetryable);

        let overloaded = decode(
            &HttpResponse::new(
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ),
            &config(),
        );
        assert_eq!(overloaded.error.unwrap().class, FailureClass::Retryable);
        let too_long = decode(
            &HttpResponse::new(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
            ),
            &config(),
        );
        assert_eq!(too_long.error.unwrap().class, FailureClass::ContextOverflow);
        let html = decode(&ok("<!doctype html><title>oops</title>"), &config());
        assert_eq!(
            html.error.unwrap().raw_body.as_deref(),
            Some("<!doctype html><title>oops</title>")
        );
    }

    /// A stream as the Messages API sends it (shape from the API reference).
    pub(crate) const STREAM: &str = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-test\",\"stop_reason\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":400,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Weigh it.\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"abc\"}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: ping\n",
        "data: {\"type\": \"ping\"}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Okay — \"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"submitting.\"}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"submit\",\"input\":{}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"text\\\": \\\"ti\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"des\\\"}\"}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":42}}\n\n",
        "event: message_stop\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    );

    fn decode_stream(chunks: &[&[u8]]) -> (Vec<Delta>, AssistantMessage) {
        let mut stream = AnthropicStream::new(&config(), 200);
        let mut deltas = Vec::new();
        for chunk in chunks {
            deltas.extend(stream.feed(chunk));
        }
        (deltas, stream.finish())
    }

    #[test]
    fn a_stream_assembles_thinking_text_and_tool_input() {
        let (deltas, response) = decode_stream(&[STREAM.as_bytes()]);
        assert_eq!(response.stop_reason(), StopReason::ToolUse);
        assert_eq!(
            response.content,
            vec![
                ContentBlock::Thinking {
                    thinking: "Weigh it.".into(),
                    signature: Some("abc".into())
                },
                ContentBlock::Text { text: "Okay — submitting.".into() },
                ContentBlock::ToolCall(ToolCall {
                    id: "toolu_9".into(),
                    name: "submit".into(),
                    arguments: json!({"text": "tides"})
                }),
            ]
        );
        let usage = response.usage;
        assert_eq!((usage.input, usage.cache_read, usage.output), (25, 400, 42));
        assert_eq!(
            deltas,
            vec![
                Delta::Thinking { thinking: "Weigh it.".into() },
                Delta::Text { text: "Okay — ".into() },
                Delta::Text { text: "submitting.".into() },
                Delta::ToolCallStart { index: 2, id: "toolu_9".into(), name: "submit".into() },
                Delta::ToolCallArguments { index: 2, arguments: "{\"text\": \"ti".into() },
                Delta::ToolCallArguments { index: 2, arguments: "des\"}".into() },
            ]
        );
    }

    #[test]
    fn a_stream_without_message_stop_or_with_an_error_fails() {
        let cut = STREAM.find("event: message_stop").unwrap();
        let (_, response) = decode_stream(&[&STREAM.as_bytes()[..cut]]);
        let error = response.error.unwrap();
        assert_eq!(error.class, FailureClass::Retryable);
        assert!(error.raw_body.unwrap().contains("toolu_9"));

        let overloaded = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n\
            event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let (_, response) = decode_stream(&[overloaded.as_bytes()]);
        assert_eq!(response.error.unwrap().class, FailureClass::Retryable);
        assert!(response.error_message.unwrap().contains("Overloaded"));
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod fuzz {
    use super::tests::STREAM;
    use super::*;
    use crate::provider::openai::fuzz::arbitrary_json;
    use crate::provider::sse::fuzz::split;
    use proptest::prelude::*;

    crate::provider::decode::stream_properties!(
        AnthropicStream,
        AnthropicConfig,
        "{\"type\":\"message_stop\"}"
    );

    proptest! {
        #[test]
        fn arbitrary_json_events_never_panic(
            events in proptest::collection::vec(
                (prop_oneof![
                    Just("message_start"), Just("content_block_start"),
                    Just("content_block_delta"), Just("message_delta"), Just("error"),
                    Just("ping"),
                ], arbitrary_json()),
                0..12,
            ),
        ) {
            let mut stream = String::new();
            for (name, event) in &events {
                let mut event = event.clone();
                if let Some(fields) = event.as_object_mut() {
                    fields.insert("type".into(), json!(name));
                }
                stream.push_str(&format!("event: {name}\ndata: {event}\n\n"));
            }
            stream.push_str("data: {\"type\":\"message_stop\"}\n\n");
            let _ = decode_chunks(&[stream.as_bytes()]);
            for (_, event) in &events {
                let _ = decode(&HttpResponse::new(200, event.to_string()), &AnthropicConfig::default());
            }
        }
    }
}
