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
//! [`Transport`] every host uses: it asks the host's [`HttpClient`] to
//! send the request and decodes the answer, streamed or not. The host writes only the client
//! (`fetch`, a component import, a blocking socket in tests).
//!
//! A response that fails is a failed message (`stopReason: "error"`) whose
//! [`ProviderError`] says whether a retry can help ([`crate::retry::classify`]) and keeps the
//! raw body when it was not what the provider would send (an HTML page, truncated JSON, a
//! stream that ended before its final event). Nothing a server sends makes a codec panic.
//!
//! The offline model lives here beside them so hosts treat it like any other provider.

pub mod anthropic;
pub mod http;
pub mod offline;
pub mod openai;
pub mod price;
pub mod sse;

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::drive::{Cancel, Transport};
use crate::message::{AssistantMessage, ContentBlock, ModelRequest, StopReason, ToolCall, Usage};
use crate::retry::{FailureClass, ProviderError, classify, parse_retry_after};

pub use anthropic::{AnthropicConfig, AnthropicStream, Thinking};
pub use http::{HttpFailure, HttpRequest, HttpResponse};
pub use openai::{MaxTokensField, OpenAiConfig, OpenAiStream};
pub use price::{Price, PriceTable};
pub use sse::{SseDecoder, SseEvent};

/// What a streaming response has produced since the last chunk, for progress display. The
/// machine never sees these: it receives the final message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Delta {
    /// More visible text.
    Text {
        /// The new text.
        text: String,
    },
    /// More reasoning text.
    Thinking {
        /// The new reasoning.
        thinking: String,
    },
    /// A tool call began. `index` is the provider's index for it within the response (OpenAI's
    /// `tool_calls[].index`, Anthropic's content block index).
    ToolCallStart {
        /// The provider's index of the call.
        index: usize,
        /// The call's id (empty if the provider has not said yet).
        id: String,
        /// The tool's name (empty if the provider has not said yet).
        name: String,
    },
    /// A piece of a tool call's JSON arguments, as text.
    ToolCallArguments {
        /// The provider's index of the call.
        index: usize,
        /// The next piece of the arguments' JSON text.
        arguments: String,
    },
}

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        let is_event_stream = http::find_header(headers, "content-type")
            .is_some_and(|value| value.to_ascii_lowercase().contains("text/event-stream"));
        let inner = if !(200..300).contains(&status) || !is_event_stream {
            Inner::Whole {
                provider: Box::new(self.clone()),
                response: HttpResponse { status, headers: headers.to_vec(), body: Vec::new() },
            }
        } else {
            match self {
                Provider::OpenAi(config) => Inner::OpenAi(OpenAiStream::new(config, status)),
                Provider::Anthropic(config) => {
                    Inner::Anthropic(AnthropicStream::new(config, status))
                }
            }
        };
        StreamDecoder { inner, received: 0, secrets: self.secrets() }
    }

    /// The credentials this provider sends, to keep out of error reports.
    fn secrets(&self) -> Secrets {
        match self {
            Provider::OpenAi(config) => secrets(config.api_key.as_deref(), &config.headers),
            Provider::Anthropic(config) => secrets(config.api_key.as_deref(), &config.headers),
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

/// Decodes one response body as it arrives; see [`Provider::decoder`].
#[derive(Debug)]
pub struct StreamDecoder {
    inner: Inner,
    /// Bytes fed so far; past [`MAX_RESPONSE_BYTES`] the rest is dropped and the response
    /// fails.
    received: usize,
    /// Kept out of every failure it reports.
    secrets: Secrets,
}

/// The largest response body a decoder accepts (64 MiB), so a runaway server cannot exhaust
/// the host's memory; a larger one is a failed, non-retryable response.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug)]
enum Inner {
    OpenAi(OpenAiStream),
    Anthropic(AnthropicStream),
    /// Not an event stream (an error, or a server that ignored `stream`): decoded at the end.
    Whole {
        provider: Box<Provider>,
        response: HttpResponse,
    },
}

impl StreamDecoder {
    /// Feeds the next bytes of the body; returns what they added, for progress display.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Delta> {
        self.received = self.received.saturating_add(bytes.len());
        if self.received > MAX_RESPONSE_BYTES {
            return Vec::new();
        }
        match &mut self.inner {
            Inner::OpenAi(stream) => stream.feed(bytes),
            Inner::Anthropic(stream) => stream.feed(bytes),
            Inner::Whole { response, .. } => {
                response.body.extend_from_slice(bytes);
                Vec::new()
            }
        }
    }

    /// Whether the body has passed [`MAX_RESPONSE_BYTES`]: stop reading it, and call
    /// [`finish`](Self::finish), which fails the response.
    #[must_use]
    pub fn is_too_large(&self) -> bool {
        self.received > MAX_RESPONSE_BYTES
    }

    /// The body ended normally: the final message (a failed one if the body was incomplete).
    #[must_use]
    pub fn finish(mut self) -> AssistantMessage {
        let secrets = std::mem::take(&mut self.secrets);
        redact(self.finish_unredacted(), &secrets)
    }

    fn finish_unredacted(self) -> AssistantMessage {
        if self.is_too_large() {
            let (status, raw) = self.head_and_raw();
            return malformed(status, raw, "the response exceeds 64 MiB");
        }
        match self.inner {
            Inner::OpenAi(stream) => stream.finish(),
            Inner::Anthropic(stream) => stream.finish(),
            Inner::Whole { provider, response } => {
                if response.is_success()
                    && provider.is_streaming()
                    && looks_like_events(&response.body)
                {
                    // An event stream under another content type (or none): decode it as one.
                    let mut decoder = provider.decoder(
                        response.status,
                        &[("content-type".to_owned(), "text/event-stream".to_owned())],
                    );
                    decoder.feed(&response.body);
                    return decoder.finish();
                }
                provider.decode(&response)
            }
        }
    }

    /// Reading the body failed (`error` is the host's description, e.g. a reset connection):
    /// a failed, retryable message that keeps what arrived.
    #[must_use]
    pub fn fail(self, error: &str) -> AssistantMessage {
        let (status, raw) = self.head_and_raw();
        let failed = interrupted(status, raw, &format!("reading the response failed: {error}"));
        redact(failed, &self.secrets)
    }

    fn head_and_raw(&self) -> (u16, &[u8]) {
        match &self.inner {
            Inner::OpenAi(stream) => (stream.status(), stream.raw()),
            Inner::Anthropic(stream) => (stream.status(), stream.raw()),
            Inner::Whole { response, .. } => {
                let body = &response.body;
                (response.status, &body[..body.len().min(RAW_BODY_LIMIT)])
            }
        }
    }
}

/// Whether a body starts like an event stream (`data:`, `event:`, `id:` or a `:` comment).
fn looks_like_events(body: &[u8]) -> bool {
    let start = body.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(body.len());
    let body = &body[start..];
    [&b"data:"[..], b"event:", b"id:", b":"].iter().any(|prefix| body.starts_with(prefix))
}

/// The head of a response: status and headers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseHead {
    /// The HTTP status.
    pub status: u16,
    /// The headers as received.
    pub headers: Vec<(String, String)>,
}

/// The host's HTTP client, as [`ProviderTransport`] needs it. Failures are typed
/// ([`HttpFailure`]): aborted by the host, past the request's deadline, too large, or no
/// response (DNS, refused connection); an HTTP error status is a response, not a failure.
///
/// The client enforces [`HttpRequest::timeout_ms`] over the whole exchange (the head and the
/// body), since the core reads no clock. Dropping a body (or the future of `send`) should
/// abort the request: [`ProviderTransport`] stops reading a body past [`MAX_RESPONSE_BYTES`] or
/// once its [`Cancel`] fires, and `drive_with` drops a model call it cancels.
#[allow(async_fn_in_trait)] // not `Send` on purpose: browsers are single-threaded
pub trait HttpClient {
    /// The body of a response, read in chunks.
    type Body: HttpBody;

    /// Sends `request` and returns the head of the response and its body.
    async fn send(&self, request: &HttpRequest) -> Result<(ResponseHead, Self::Body), HttpFailure>;

    /// Waits `delay_ms` before a retry (the backoff or the provider's `Retry-After`): the
    /// host's timer, since the core reads no clock.
    async fn wait(&self, delay_ms: u64);
}

/// A response body read in chunks as they arrive.
#[allow(async_fn_in_trait)]
pub trait HttpBody {
    /// The next bytes, or `None` at the end of the body.
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpFailure>;
}

/// The transport every host uses for a network provider: encode, send with the host's
/// [`HttpClient`], decode (streamed or whole). A streamed response's pieces go to the driver
/// ([`Transport::complete_streaming`]), which reports them as [`crate::Event::Delta`] beside
/// the machine's own events.
pub struct ProviderTransport<C> {
    provider: Provider,
    client: C,
    cancel: Option<Cancel>,
}

impl<C> fmt::Debug for ProviderTransport<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderTransport")
            .field("provider", &self.provider)
            .field("cancel", &self.cancel)
            .finish_non_exhaustive()
    }
}

impl<C: HttpClient> ProviderTransport<C> {
    /// A transport for `provider` over `client`.
    #[must_use]
    pub fn new(provider: Provider, client: C) -> Self {
        Self { provider, client, cancel: None }
    }

    /// Aborts a request when `cancel` fires: none is sent after it, and a body being read is
    /// dropped at the next chunk (for clients whose futures cannot be interrupted, like a
    /// blocking one). The response is `aborted`; `drive_with` with the same [`Cancel`] then
    /// ends the run as cancelled.
    #[must_use]
    pub fn with_cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// The provider.
    #[must_use]
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    /// The client.
    #[must_use]
    pub fn client(&self) -> &C {
        &self.client
    }
}

impl<C: HttpClient> Transport for ProviderTransport<C> {
    async fn complete(&self, request: ModelRequest<'_>) -> AssistantMessage {
        self.complete_streaming(request, &mut |_| {}).await
    }

    async fn complete_streaming(
        &self,
        request: ModelRequest<'_>,
        on_delta: &mut dyn FnMut(Delta),
    ) -> AssistantMessage {
        let cancelled = || self.cancel.as_ref().is_some_and(Cancel::is_cancelled);
        if cancelled() {
            return aborted();
        }
        let http = self.provider.encode(&request);
        let (head, mut body) = match self.client.send(&http).await {
            Ok(sent) => sent,
            Err(failure) => return redact(no_response(&failure), &self.provider.secrets()),
        };
        let mut decoder = self.provider.decoder(head.status, &head.headers);
        loop {
            if cancelled() {
                return aborted();
            }
            match body.next_chunk().await {
                Ok(Some(bytes)) => {
                    for delta in decoder.feed(&bytes) {
                        on_delta(delta);
                    }
                    // Past the cap, stop at once (dropping the body ends the request) rather
                    // than read a runaway server to its end.
                    if decoder.is_too_large() {
                        return decoder.finish();
                    }
                }
                Ok(None) => return decoder.finish(),
                Err(HttpFailure::Aborted) => return aborted(),
                Err(HttpFailure::TooLarge) => {
                    let (status, raw) = decoder.head_and_raw();
                    return malformed(status, raw, "the response is larger than the host accepts");
                }
                Err(failure) => return decoder.fail(&failure.to_string()),
            }
        }
    }

    async fn wait(&self, delay_ms: u64) {
        self.client.wait(delay_ms).await;
    }
}

// ---- shared by the codecs ----

/// At most this much of a body is kept in [`ProviderError::raw_body`].
pub const RAW_BODY_LIMIT: usize = 64 * 1024;

/// A body as text for the user, lossily decoded and cut at [`RAW_BODY_LIMIT`].
pub(crate) fn raw_text(bytes: &[u8]) -> String {
    if bytes.len() <= RAW_BODY_LIMIT {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut text = String::from_utf8_lossy(&bytes[..RAW_BODY_LIMIT]).into_owned();
    text.push_str(&format!("… ({} more bytes)", bytes.len() - RAW_BODY_LIMIT));
    text
}

/// A short, one-line description of an unexpected body, for the error message.
fn describe_body(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]);
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() { "an empty body".to_owned() } else { format!("{line:?}") }
}

/// How long the provider asked to wait: `retry-after-ms` (OpenAI), else `retry-after`.
pub(crate) fn retry_after(headers: &[(String, String)]) -> Option<u64> {
    if let Some(ms) = http::find_header(headers, "retry-after-ms")
        .and_then(|value| value.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        return Some(ms.round() as u64);
    }
    http::find_header(headers, "retry-after").and_then(parse_retry_after)
}

/// The credentials among a configuration's key and headers: the key, and the value of each
/// credential header, with its scheme (`Bearer`) and without.
pub(crate) fn secrets(api_key: Option<&str>, headers: &[(String, String)]) -> Secrets {
    let mut secrets: Vec<String> = api_key.into_iter().map(str::to_owned).collect();
    for (name, value) in headers {
        if http::is_secret_header(name) {
            secrets.push(value.clone());
            if let Some((_, credential)) = value.trim().split_once(' ') {
                secrets.push(credential.trim().to_owned());
            }
        }
    }
    secrets.retain(|secret| !secret.trim().is_empty());
    // Longest first, so a value is replaced whole before its credential part is.
    secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    Secrets(secrets)
}

/// Credentials to keep out of error reports; `Debug` shows only how many there are.
#[derive(Clone, Default)]
pub(crate) struct Secrets(Vec<String>);

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} redacted)", self.0.len())
    }
}

/// `message` with every secret replaced by `<redacted>` in its error text and kept raw body:
/// a server (or a host client) may echo the request's credentials back.
pub(crate) fn redact(mut message: AssistantMessage, secrets: &Secrets) -> AssistantMessage {
    let scrub = |text: &mut String| {
        for secret in &secrets.0 {
            if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), http::REDACTED);
            }
        }
    };
    if let Some(text) = &mut message.error_message {
        scrub(text);
    }
    if let Some(raw) = message.error.as_mut().and_then(|error| error.raw_body.as_mut()) {
        scrub(raw);
    }
    message
}

pub(crate) fn failure(message: String, error: ProviderError) -> AssistantMessage {
    let mut response = AssistantMessage::failed(message);
    response.error = Some(error);
    response
}

/// The error type and message of a provider error body, in any of the shapes providers use:
/// `{"error": {"type", "code", "message"}}` (OpenAI, Anthropic, vLLM, llama-server,
/// OpenRouter), `{"error": "text"}` (Ollama), `{"message", "type"}` and `{"detail"}`.
/// Also returns a numeric `code` when the body has one (OpenRouter puts the status there).
pub(crate) fn error_fields(body: &Value) -> Option<(Option<String>, String, Option<u16>)> {
    let object = body.as_object()?;
    let (inner, message) = match object.get("error") {
        Some(Value::String(text)) => return Some((None, text.clone(), None)),
        Some(error @ Value::Object(fields)) => (error, fields.get("message")),
        _ if object.contains_key("detail") => {
            let detail = &object["detail"];
            let text = detail.as_str().map_or_else(|| detail.to_string(), str::to_owned);
            return Some((None, text, None));
        }
        _ if object.get("object").and_then(Value::as_str) == Some("error")
            || (object.contains_key("message") && object.contains_key("type")) =>
        {
            (body, object.get("message"))
        }
        _ => return None,
    };
    let text = |key: &str| inner.get(key).and_then(Value::as_str).map(str::to_owned);
    let kind = match (text("type"), text("code")) {
        (Some(kind), Some(code)) if kind != code => Some(format!("{kind} {code}")),
        (Some(kind), _) => Some(kind),
        (None, code) => code,
    };
    let code = inner.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
    let message = match message {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => kind.clone().unwrap_or_else(|| "unknown error".to_owned()),
    };
    Some((kind, message, code))
}

/// A non-2xx response: the provider's error if the body is one, else a typed failure that
/// keeps the body.
pub(crate) fn http_error(response: &HttpResponse) -> AssistantMessage {
    let status = response.status;
    let retry_after_ms = retry_after(&response.headers);
    let parsed = serde_json::from_slice::<Value>(&response.body).ok();
    match parsed.as_ref().and_then(error_fields) {
        Some((kind, message, _)) => failure(
            format!("HTTP {status}: {message}"),
            ProviderError {
                class: classify(Some(status), kind.as_deref(), &message),
                status: Some(status),
                retry_after_ms,
                raw_body: None,
            },
        ),
        None => failure(
            format!(
                "HTTP {status}: the body is not a provider error ({})",
                describe_body(&response.body)
            ),
            ProviderError {
                class: classify(Some(status), None, ""),
                status: Some(status),
                retry_after_ms,
                raw_body: Some(raw_text(&response.body)),
            },
        ),
    }
}

/// An error object inside a successful response or a stream (OpenRouter and Anthropic send
/// these mid-stream). The status, when the body names none, is unknown: classified like a
/// failure with no response unless the type says otherwise.
pub(crate) fn embedded_error(
    kind: Option<&str>,
    message: &str,
    code: Option<u16>,
) -> AssistantMessage {
    failure(
        format!("the provider reported an error: {message}"),
        ProviderError {
            class: classify(code, kind, message),
            status: code,
            retry_after_ms: None,
            raw_body: None,
        },
    )
}

/// A 2xx body that is not what the provider sends. Truncated JSON (the body ended early) is
/// retryable like a dropped connection; anything else (an HTML page, another shape) is not.
pub(crate) fn malformed(status: u16, body: &[u8], reason: &str) -> AssistantMessage {
    failure(
        format!("HTTP {status}: {reason} ({})", describe_body(body)),
        ProviderError {
            class: classify(Some(status), None, reason),
            status: Some(status),
            retry_after_ms: None,
            raw_body: Some(raw_text(body)),
        },
    )
}

/// A body that ended (or broke) before it was complete: a failure with no complete response,
/// retryable, keeping what arrived.
pub(crate) fn interrupted(status: u16, body: &[u8], reason: &str) -> AssistantMessage {
    failure(
        format!("HTTP {status}: {reason}"),
        ProviderError {
            class: classify(None, None, reason),
            status: Some(status),
            retry_after_ms: None,
            raw_body: Some(raw_text(body)),
        },
    )
}

/// A request the host aborted: stop reason `aborted`, never retried.
fn aborted() -> AssistantMessage {
    AssistantMessage::aborted(HttpFailure::Aborted.to_string())
}

/// The host's client got no response.
fn no_response(what: &HttpFailure) -> AssistantMessage {
    match what {
        HttpFailure::Aborted => aborted(),
        HttpFailure::TooLarge => failure(
            format!("the request failed: {what}"),
            ProviderError {
                class: FailureClass::NotRetryable,
                status: None,
                retry_after_ms: None,
                raw_body: None,
            },
        ),
        // Timed out or no connection: retryable.
        _ => unreachable_provider(&what.to_string()),
    }
}

/// No response at all (the host's client failed).
fn unreachable_provider(error: &str) -> AssistantMessage {
    failure(
        format!("the request failed: {error}"),
        ProviderError {
            class: classify(None, None, error),
            status: None,
            retry_after_ms: None,
            raw_body: None,
        },
    )
}

/// Parses a whole JSON body, or says why it is not one.
pub(crate) fn parse_body(response: &HttpResponse) -> Result<Value, Box<AssistantMessage>> {
    serde_json::from_slice(&response.body).map_err(|error| {
        Box::new(if error.is_eof() {
            interrupted(response.status, &response.body, "the JSON body is truncated")
        } else {
            malformed(response.status, &response.body, "the body is not JSON")
        })
    })
}

/// A tool call's arguments from their JSON text: empty text is `{}` (servers send that for a
/// call without arguments); text that is not JSON is kept as a string, so the schema check
/// reports it to the model instead of the codec hiding it.
pub(crate) fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// A tool call's arguments as JSON text (a string is taken as the text the model produced).
pub(crate) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// How a response ended, in the provider's words mapped to the core's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ending {
    /// A normal end; `ToolUse` if the response holds tool calls.
    Stop,
    /// The model asked for tools.
    ToolUse,
    /// The output-token limit cut it off.
    Length,
    /// The provider withheld the answer (content filter, refusal).
    Refused(String),
    /// No reason given.
    Unknown,
}

/// The final message from decoded parts. `reported_cost` is a cost the provider stated
/// (OpenRouter); the configured price wins over it.
pub(crate) fn assemble(
    content: Vec<ContentBlock>,
    ending: Ending,
    mut usage: Usage,
    price: Option<&Price>,
    reported_cost: Option<f64>,
    status: u16,
) -> AssistantMessage {
    usage.cost = match price {
        Some(price) => price.cost(&usage),
        None => reported_cost.filter(|cost| cost.is_finite() && *cost >= 0.0).unwrap_or(0.0),
    };
    let has_calls = content.iter().any(|block| matches!(block, ContentBlock::ToolCall(_)));
    let stop_reason = match ending {
        Ending::Refused(reason) => {
            let mut failed = failure(
                format!("the provider withheld the response ({reason})"),
                ProviderError {
                    class: FailureClass::NotRetryable,
                    status: Some(status),
                    retry_after_ms: None,
                    raw_body: None,
                },
            );
            failed.usage = usage;
            return failed;
        }
        Ending::Length => StopReason::Length,
        Ending::Stop | Ending::ToolUse | Ending::Unknown if has_calls => StopReason::ToolUse,
        Ending::Stop | Ending::ToolUse | Ending::Unknown => StopReason::Stop,
    };
    let mut response = AssistantMessage::from_content(content);
    response.stop_reason = Some(stop_reason);
    response.usage = usage;
    response
}

/// Text pieces, reasoning pieces and tool calls in the order they arrived, merged as they go.
#[derive(Debug, Clone, Default)]
pub(crate) struct Blocks {
    blocks: Vec<Partial>,
    /// Where each call's block is, by its key: a piece finds its call in constant time, so a
    /// stream of many calls is not quadratic. Blocks are only ever appended.
    calls: HashMap<usize, usize>,
}

#[derive(Debug, Clone)]
enum Partial {
    Text(String),
    Thinking(String, Option<String>),
    Call { key: usize, id: String, name: String, arguments: String },
}

impl Blocks {
    pub(crate) fn text(&mut self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        if let Some(Partial::Text(text)) = self.blocks.last_mut() {
            text.push_str(piece);
        } else {
            self.blocks.push(Partial::Text(piece.to_owned()));
        }
    }

    pub(crate) fn thinking(&mut self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        if let Some(Partial::Thinking(text, None)) = self.blocks.last_mut() {
            text.push_str(piece);
        } else {
            self.blocks.push(Partial::Thinking(piece.to_owned(), None));
        }
    }

    /// Adds `piece` to the signature of the latest reasoning block (Anthropic sends it whole
    /// or in `signature_delta`s after the text).
    pub(crate) fn signature(&mut self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        if let Some(Partial::Thinking(_, signature)) =
            self.blocks.iter_mut().rev().find(|block| matches!(block, Partial::Thinking(..)))
        {
            signature.get_or_insert_with(String::new).push_str(piece);
        }
    }

    /// Starts the call with `key` if new (returns true), or fills in an id or name that was
    /// missing.
    pub(crate) fn call(&mut self, key: usize, id: &str, name: &str) -> bool {
        if let Some(&at) = self.calls.get(&key) {
            if let Partial::Call { id: i, name: n, .. } = &mut self.blocks[at] {
                if i.is_empty() {
                    id.clone_into(i);
                }
                if n.is_empty() {
                    name.clone_into(n);
                }
            }
            return false;
        }
        self.calls.insert(key, self.blocks.len());
        self.blocks.push(Partial::Call {
            key,
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: String::new(),
        });
        true
    }

    /// Appends a piece of the arguments of the call with `key` (started if new).
    pub(crate) fn arguments(&mut self, key: usize, piece: &str) {
        self.call(key, "", "");
        if let Some(Partial::Call { arguments, .. }) =
            self.calls.get(&key).and_then(|&at| self.blocks.get_mut(at))
        {
            arguments.push_str(piece);
        }
    }

    /// The blocks, tool calls parsed; a call without an id gets `call_{key}`.
    pub(crate) fn into_content(self) -> Vec<ContentBlock> {
        self.blocks
            .into_iter()
            .map(|block| match block {
                Partial::Text(text) => ContentBlock::Text { text },
                Partial::Thinking(thinking, signature) => {
                    ContentBlock::Thinking { thinking, signature }
                }
                Partial::Call { key, id, name, arguments } => ContentBlock::ToolCall(ToolCall {
                    id: if id.is_empty() { format!("call_{key}") } else { id },
                    name,
                    arguments: parse_arguments(&arguments),
                }),
            })
            .collect()
    }
}

/// What both streaming decoders share: the SSE framing, the raw body kept for error reports,
/// the content assembled so far, and whether the stream completed or failed. Each decoder adds
/// its protocol's events on top.
#[derive(Debug)]
pub(crate) struct StreamState {
    sse: SseDecoder,
    raw: RawBody,
    pub(crate) status: u16,
    pub(crate) price: Option<Price>,
    pub(crate) blocks: Blocks,
    /// The protocol's final event arrived.
    pub(crate) done: bool,
    pub(crate) failure: Option<AssistantMessage>,
    /// The credentials of the request, kept out of the final message.
    pub(crate) secrets: Secrets,
}

impl StreamState {
    pub(crate) fn new(status: u16, price: Option<Price>, secrets: Secrets) -> Self {
        Self {
            secrets,
            sse: SseDecoder::new(),
            raw: RawBody::default(),
            status,
            price,
            blocks: Blocks::default(),
            done: false,
            failure: None,
        }
    }

    /// Keeps `bytes` for the raw body and returns the events they complete.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.raw.push(bytes);
        self.sse.feed(bytes)
    }

    /// The events the end of the body completes.
    pub(crate) fn end(&mut self) -> Vec<SseEvent> {
        self.sse.finish()
    }

    /// The body so far (up to [`RAW_BODY_LIMIT`]).
    pub(crate) fn raw(&self) -> &[u8] {
        self.raw.bytes()
    }

    /// No more events are read once the stream completed or failed.
    pub(crate) fn stopped(&self) -> bool {
        self.done || self.failure.is_some()
    }

    /// An event's JSON data, or `None` after recording the failure: a stream that ended inside
    /// an event was interrupted, any other bad data is malformed.
    pub(crate) fn parse(&mut self, data: &str, at_end: bool) -> Option<Value> {
        match serde_json::from_str(data) {
            Ok(value) => Some(value),
            Err(error) => {
                self.failure = Some(if at_end && error.is_eof() {
                    interrupted(self.status, self.raw.bytes(), "the stream ended mid-event")
                } else {
                    malformed(self.status, self.raw.bytes(), "a stream event is not JSON")
                });
                None
            }
        }
    }

    /// After the last event: the recorded failure, or an interruption named `missing` if the
    /// final event never came; `None` for a complete stream.
    pub(crate) fn failure_at_end(&mut self, missing: &str) -> Option<AssistantMessage> {
        if self.failure.is_none() && !self.done {
            return Some(interrupted(self.status, self.raw.bytes(), missing));
        }
        self.failure.take()
    }
}

/// The bytes of a streamed body, kept (up to [`RAW_BODY_LIMIT`]) for a failure report.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawBody {
    bytes: Vec<u8>,
}

impl RawBody {
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        let room = RAW_BODY_LIMIT.saturating_sub(self.bytes.len());
        let kept = room.min(bytes.len());
        self.bytes.extend_from_slice(&bytes[..kept]);
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// The stream properties both codecs must have, as proptests in the invoking module, which
/// provides `STREAM` (a valid streamed response ending in a tool call), `split` and `decode`:
/// any chunking decodes the same, a stream cut before `$final_event` fails typed, and
/// arbitrary bytes never panic.
#[cfg(all(test, not(target_arch = "wasm32")))]
macro_rules! stream_properties {
    ($stream:ty, $config:ty, $final_event:expr) => {
        fn decode_chunks(chunks: &[&[u8]]) -> AssistantMessage {
            let mut stream = <$stream>::new(&<$config>::default(), 200);
            for chunk in chunks {
                let _ = stream.feed(chunk);
            }
            stream.finish()
        }

        proptest! {
            #[test]
            fn any_chunking_of_a_valid_stream_decodes_the_same(
                cuts in proptest::collection::vec(any::<usize>(), 0..24),
                crlf in any::<bool>(),
            ) {
                let stream = if crlf { STREAM.replace('\n', "\r\n") } else { STREAM.to_owned() };
                let whole = decode_chunks(&[stream.as_bytes()]);
                prop_assert_eq!(whole.stop_reason(), crate::StopReason::ToolUse);
                prop_assert_eq!(decode_chunks(&split(stream.as_bytes(), &cuts)), whole);
            }

            #[test]
            fn a_cut_stream_fails_typed_unless_its_final_event_arrived(cut in 0usize..STREAM.len()) {
                let response = decode_chunks(&[&STREAM.as_bytes()[..cut]]);
                let final_at = STREAM.find($final_event).unwrap() + $final_event.len();
                if cut >= final_at {
                    prop_assert_eq!(response.stop_reason(), crate::StopReason::ToolUse);
                } else {
                    prop_assert_eq!(response.stop_reason(), crate::StopReason::Error);
                    prop_assert!(response.error.is_some());
                }
            }

            #[test]
            fn arbitrary_bytes_never_panic(
                bytes in proptest::collection::vec(any::<u8>(), 0..600),
                cuts in proptest::collection::vec(any::<usize>(), 0..8),
                status in 100u16..600,
            ) {
                let _ = decode_chunks(&split(&bytes, &cuts));
                let _ = decode(&HttpResponse::new(status, bytes.clone()), &<$config>::default());
            }
        }
    };
}

#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) use stream_properties;

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers shared by the codecs' tests.

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
            },
            ToolSpec {
                name: "submit".into(),
                description: "Submit the answer.".into(),
                parameters: json!({"type": "object", "required": ["text"],
                    "properties": {"text": {"type": "string"}}}),
            },
        ];
        (messages, tools)
    }

    pub(crate) fn request<'a>(
        system: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolSpec],
    ) -> ModelRequest<'a> {
        ModelRequest { system, messages, tools }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use serde_json::json;

    #[test]
    fn error_bodies_of_every_shape_are_read() {
        let openai = json!({"error": {"message": "Rate limit reached", "type": "requests",
            "code": "rate_limit_exceeded", "param": null}});
        assert_eq!(
            error_fields(&openai),
            Some((Some("requests rate_limit_exceeded".into()), "Rate limit reached".into(), None))
        );
        let anthropic = json!({"type": "error", "error": {"type": "overloaded_error",
            "message": "Overloaded"}});
        assert_eq!(
            error_fields(&anthropic),
            Some((Some("overloaded_error".into()), "Overloaded".into(), None))
        );
        let ollama = json!({"error": "model \"x\" not found, try pulling it first"});
        assert_eq!(error_fields(&ollama).unwrap().1, "model \"x\" not found, try pulling it first");
        let openrouter = json!({"error": {"code": 502, "message": "Provider returned error"}});
        assert_eq!(error_fields(&openrouter).unwrap().2, Some(502));
        let vllm = json!({"object": "error", "message": "bad", "type": "BadRequestError",
            "code": 400});
        assert_eq!(error_fields(&vllm).unwrap().0.as_deref(), Some("BadRequestError"));
        assert_eq!(error_fields(&json!({"detail": "Not Found"})).unwrap().1, "Not Found");
        assert_eq!(error_fields(&json!({"choices": []})), None);
        assert_eq!(error_fields(&json!([1, 2])), None);
    }

    #[test]
    fn http_errors_are_classified_and_keep_odd_bodies() {
        let limited = HttpResponse::new(
            429,
            r#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#,
        )
        .with_header("Retry-After", "2");
        let failed = http_error(&limited);
        assert_eq!(failed.stop_reason(), StopReason::Error);
        let error = failed.error.unwrap();
        assert_eq!(error.class, FailureClass::Retryable);
        assert_eq!(error.retry_after_ms, Some(2_000));
        assert_eq!(error.raw_body, None);

        let quota = HttpResponse::new(
            429,
            r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
        );
        assert_eq!(http_error(&quota).error.unwrap().class, FailureClass::NotRetryable);

        let html = HttpResponse::new(502, "<html><body>Bad Gateway</body></html>")
            .with_header("retry-after-ms", "1500");
        let failed = http_error(&html);
        let error = failed.error.clone().unwrap();
        assert_eq!(error.class, FailureClass::Retryable);
        assert_eq!(error.retry_after_ms, Some(1_500));
        assert_eq!(error.raw_body.as_deref(), Some("<html><body>Bad Gateway</body></html>"));
        assert!(failed.failure_message().contains("Bad Gateway"), "{}", failed.failure_message());

        let auth = HttpResponse::new(401, "Unauthorized");
        assert_eq!(http_error(&auth).error.unwrap().class, FailureClass::NotRetryable);
    }

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
        assert_eq!(provider.encode(&request).timeout_ms, None, "no deadline unless configured");
        assert_eq!(config.base_url, anthropic::ANTHROPIC_BASE_URL);
        assert_eq!(config.tool_choice, ToolChoice::Tool("submit".into()));
        assert_eq!(config.thinking, Some(Thinking::Enabled { budget_tokens: 2048 }));
        assert!(config.browser_access);
        let round: Provider =
            serde_json::from_value(serde_json::to_value(&anthropic).unwrap()).unwrap();
        assert_eq!(round, anthropic);
    }

    #[test]
    fn a_runaway_body_fails_instead_of_filling_memory() {
        let provider = Provider::OpenAi(OpenAiConfig::default());
        let mut decoder = provider.decoder(200, &[]);
        let block = vec![b' '; 1024 * 1024];
        for _ in 0..=MAX_RESPONSE_BYTES / block.len() {
            decoder.feed(&block);
        }
        let failed = decoder.finish();
        assert!(failed.failure_message().contains("exceeds"), "{}", failed.failure_message());
        assert_eq!(failed.error.unwrap().class, FailureClass::NotRetryable);
    }

    const KEY: &str = "sk-live-0123456789abcdef";

    /// Both providers holding [`KEY`], streaming or not.
    fn keyed(stream: bool) -> [Provider; 2] {
        [
            Provider::OpenAi(OpenAiConfig::openai("gpt-test", KEY).streaming(stream)),
            Provider::Anthropic(AnthropicConfig::new("claude-test", KEY).streaming(stream)),
        ]
    }

    fn assert_no_key(what: &str, text: &str) {
        assert!(!text.contains(KEY), "{what} shows the key: {text}");
        assert!(!text.contains("0123456789abcdef"), "{what} shows part of the key: {text}");
    }

    fn assert_failed_without_key(what: &str, failed: &AssistantMessage) {
        assert_eq!(failed.stop_reason(), StopReason::Error, "{what}");
        // The serialized message is what a session log records.
        assert_no_key(what, &serde_json::to_string(failed).unwrap());
        assert_no_key(what, &format!("{failed:?}"));
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
        };
        assert_no_key("Debug", &format!("{azure:?}"));
        let serialized = serde_json::to_string(&azure).unwrap();
        assert_no_key("serialization", &serialized);
        assert!(serialized.contains("verity"), "other headers are kept: {serialized}");
    }

    #[test]
    fn a_server_that_echoes_the_key_does_not_get_it_into_an_error() {
        let echoes = [
            (
                401,
                format!(
                    r#"{{"error":{{"message":"Invalid header Authorization: Bearer {KEY}","type":"invalid_request_error"}}}}"#
                ),
            ),
            (
                401,
                format!(
                    r#"{{"type":"error","error":{{"type":"authentication_error","message":"bad x-api-key {KEY}"}}}}"#
                ),
            ),
            (403, format!("<html>Forbidden. Your request: Authorization: Bearer {KEY}</html>")),
            (200, format!("<html>captive portal for {KEY}</html>")),
            (200, format!(r#"{{"error":{{"message":"key {KEY} revoked","type":"auth"}}}}"#)),
            (200, format!(r#"{{"truncated": "{KEY}"#)),
        ];
        for provider in keyed(false) {
            for (status, body) in &echoes {
                let failed = provider.decode(&HttpResponse::new(*status, body.clone()));
                assert_failed_without_key(&format!("{status} {body}"), &failed);
                // Streamed or not, the same through the decoder.
                let mut decoder = provider.decoder(*status, &[]);
                decoder.feed(body.as_bytes());
                assert_failed_without_key(body, &decoder.finish());
            }
        }
        for provider in keyed(true) {
            let event_stream = [("content-type".to_owned(), "text/event-stream".to_owned())];
            for stream in [
                format!("data: {{\"error\":{{\"message\":\"bad key {KEY}\",\"type\":\"x\"}}}}\n\n"),
                format!(
                    "event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"x\",\"message\":\"bad key {KEY}\"}}}}\n\n"
                ),
                format!("data: {{\"echo\": \"{KEY}\"}}\n\n"),
                format!("data: not json {KEY}\n\n"),
            ] {
                let mut decoder = provider.decoder(200, &event_stream);
                decoder.feed(stream.as_bytes());
                assert_failed_without_key(&stream, &decoder.finish());
                let mut decoder = provider.decoder(200, &event_stream);
                decoder.feed(stream.as_bytes());
                let reset =
                    decoder.fail(&format!("reset while sending Authorization: Bearer {KEY}"));
                assert_failed_without_key(&stream, &reset);
            }
        }
    }

    /// A client that fails with the key in its error, as a careless host client might.
    struct Echoing;

    struct NoBody;

    impl HttpBody for NoBody {
        async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpFailure> {
            Ok(None)
        }
    }

    impl HttpClient for Echoing {
        type Body = NoBody;

        async fn send(&self, request: &HttpRequest) -> Result<(ResponseHead, NoBody), HttpFailure> {
            let headers: Vec<String> =
                request.headers.iter().map(|(name, value)| format!("{name}: {value}")).collect();
            Err(HttpFailure::Network(format!(
                "proxy refused the request with headers {}",
                headers.join(", ")
            )))
        }

        async fn wait(&self, _: u64) {}
    }

    #[test]
    fn a_host_client_error_that_echoes_the_key_does_not_show_it() {
        let (messages, tools) = testing::conversation();
        for provider in keyed(false) {
            let transport = ProviderTransport::new(provider, Echoing);
            let failed = futures_util::FutureExt::now_or_never(
                transport.complete(testing::request("system", &messages, &tools)),
            )
            .unwrap();
            assert!(failed.failure_message().contains("proxy refused"), "{failed:?}");
            assert_failed_without_key("the client's error", &failed);
        }
    }

    #[test]
    fn raw_bodies_are_bounded() {
        let big = vec![b'x'; RAW_BODY_LIMIT + 10];
        let text = raw_text(&big);
        assert!(text.ends_with("(10 more bytes)"));
        let mut raw = RawBody::default();
        raw.push(&big);
        raw.push(b"more");
        assert_eq!(raw.bytes().len(), RAW_BODY_LIMIT);
    }

    #[test]
    fn arguments_round_trip_and_bad_json_is_kept() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments(" {\"a\": 1} "), json!({"a": 1}));
        assert_eq!(parse_arguments("{\"a\": "), json!("{\"a\": "));
        assert_eq!(arguments_text(&json!({"a": 1})), "{\"a\":1}");
        assert_eq!(arguments_text(&json!("{\"a\": ")), "{\"a\": ");
    }
}
