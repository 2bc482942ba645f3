//! Decoding a response body: [`StreamDecoder`] for any body (streamed or whole), and what the
//! codecs share to decode one: the stream state, the content blocks as they arrive, and the
//! final message.

use std::collections::HashMap;

use serde_json::Value;

use super::failure::{RAW_BODY_LIMIT, RawBody, Secrets, failure, interrupted, malformed, redact};
use super::http::{self, HttpResponse};
use super::price::Price;
use super::sse::{SseDecoder, SseEvent};
use super::{AnthropicStream, OpenAiStream, Provider};
use crate::message::{AssistantMessage, ContentBlock, Delta, StopReason, ToolCall, Usage};
use crate::request_failure::{FailureClass, ProviderError};

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
    /// A decoder for `provider`'s response with this head; see [`Provider::decoder`].
    pub(super) fn new(provider: &Provider, status: u16, headers: &[(String, String)]) -> Self {
        let is_event_stream = http::find_header(headers, "content-type")
            .is_some_and(|value| value.to_ascii_lowercase().contains("text/event-stream"));
        let inner = if !(200..300).contains(&status) || !is_event_stream {
            Inner::Whole {
                provider: Box::new(provider.clone()),
                response: HttpResponse { status, headers: headers.to_vec(), body: Vec::new() },
            }
        } else {
            match provider {
                Provider::OpenAi(config) => Inner::OpenAi(OpenAiStream::new(config, status)),
                Provider::Anthropic(config) => {
                    Inner::Anthropic(AnthropicStream::new(config, status))
                }
            }
        };
        StreamDecoder { inner, received: 0, secrets: provider.secrets() }
    }

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

    pub(super) fn head_and_raw(&self) -> (u16, &[u8]) {
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

/// Parses a whole JSON body, or says why it is not one. Bytes that are not UTF-8 become
/// U+FFFD first, as a browser's `response.json()` and the event stream's reader take them
/// (and one JSON parser serves text and bodies alike).
pub(crate) fn parse_body(response: &HttpResponse) -> Result<Value, Box<AssistantMessage>> {
    serde_json::from_str(&String::from_utf8_lossy(&response.body)).map_err(|error| {
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
    /// Where the latest reasoning block is: a signature piece finds it in constant time.
    thinking_at: Option<usize>,
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
            self.thinking_at = Some(self.blocks.len());
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
            self.thinking_at.and_then(|at| self.blocks.get_mut(at))
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
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::provider::OpenAiConfig;
    use serde_json::json;

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

    /// A body that is not valid UTF-8 is read as a browser's `response.json()` reads it and as
    /// an event stream is read: each bad byte becomes U+FFFD, the rest stays.
    #[test]
    fn a_body_with_a_byte_that_is_not_utf8_is_read_with_a_replacement_character() {
        let provider = Provider::OpenAi(OpenAiConfig::default());
        let ok = b"{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"Paris \xff\"},\
                   \"finish_reason\":\"stop\"}]}";
        let mut decoder = provider.decoder(200, &[]);
        decoder.feed(ok);
        let message = decoder.finish();
        assert_eq!(message.text_content(), "Paris \u{fffd}", "{message:?}");
        let error =
            b"{\"error\":{\"message\":\"bad \xff key\",\"type\":\"invalid_request_error\"}}";
        let mut decoder = provider.decoder(401, &[]);
        decoder.feed(error);
        let failed = decoder.finish().failure_message();
        assert!(failed.starts_with("HTTP 401: bad \u{fffd} key"), "{failed}");
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
