//! How a provider's failures become failed messages: error bodies of every shape, statuses,
//! broken or truncated bodies, no response at all, each classified for the retry layer
//! ([`classify`]) and keeping the raw body when it was not what the provider sends; and the
//! redaction that keeps the request's credentials out of every one of them.

use std::fmt;

use serde_json::Value;

use super::http::{self, HttpFailure, HttpResponse};
use crate::message::AssistantMessage;
use crate::request_failure::{FailureClass, ProviderError, classify, parse_retry_after};

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

/// The credentials among a configuration's key, headers and base URL: the key, the value of
/// each credential header ([`http::is_secret_header`]) with its scheme (`Bearer`) and without,
/// and the values of the URL's credential-looking query parameters
/// ([`http::credential_parameters`]).
pub(crate) fn secrets(
    api_key: Option<&str>,
    headers: &[(String, String)],
    base_url: &str,
) -> Secrets {
    let mut secrets: Vec<String> = api_key.into_iter().map(str::to_owned).collect();
    secrets.extend(http::credential_parameters(base_url));
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

/// The shortest cut-off part of a secret that redaction finds: a run of at least this many
/// bytes that begins the secret (text cut after it) or ends it (text cut before it).
const MIN_SECRET_PART: usize = 8;

/// `message` with every secret replaced by `<redacted>` in its error text and kept raw body:
/// a server (or a host client) may echo the request's credentials back.
///
/// The texts were cut before they reach here (a body's description at 120 bytes, a raw body at
/// [`RAW_BODY_LIMIT`], a stream's kept bytes), and a cut may fall inside a secret: so a run of
/// [`MIN_SECRET_PART`] bytes or more that begins a secret and ends where a cut would (the
/// text's end, or a character no key word goes on with), or ends a secret at the text's very
/// start, is redacted too. This is the same as redacting before cutting, for every cut that
/// keeps a text's beginning or its end, including cuts a host made.
pub(crate) fn redact(mut message: AssistantMessage, secrets: &Secrets) -> AssistantMessage {
    let scrub = |text: &mut String| {
        for secret in &secrets.0 {
            if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), http::REDACTED);
            }
        }
        for secret in &secrets.0 {
            if let Some(scrubbed) = without_secret_parts(text, secret) {
                *text = scrubbed;
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

/// `text` with every part of `secret` a cut could have left (at least [`MIN_SECRET_PART`]
/// bytes, or the whole secret when it is shorter) replaced by `<redacted>`; `None` when there
/// is none.
fn without_secret_parts(text: &str, secret: &str) -> Option<String> {
    let (bytes, key) = (text.as_bytes(), secret.as_bytes());
    let least = MIN_SECRET_PART.min(key.len());
    if least == 0 || bytes.len() < least {
        return None;
    }
    // Where a cut could have left part of a secret: the secret's beginning, running up to the
    // text's end or a character that is not part of a word (a cut after it); or its end at the
    // very start of the text (a cut before it). Not inside a longer word: a key that ends in
    // "directed" says nothing of "redirected" further on.
    let word = |b: &u8| b.is_ascii_alphanumeric() || b"-_".contains(b);
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let head = &key[..least];
    for start in 0..=bytes.len() - least {
        if bytes[start..].starts_with(head) {
            let length = bytes[start..].iter().zip(key).take_while(|(a, b)| a == b).count();
            if !bytes.get(start + length).is_some_and(word) {
                runs.push((start, start + length));
            }
        }
    }
    let from_start = (0..=key.len().min(bytes.len()))
        .rev()
        .find(|&n| n >= least && key.ends_with(&bytes[..n]))
        .filter(|&n| !bytes.get(n).is_some_and(word));
    if let Some(n) = from_start {
        runs.push((0, n));
    }
    if runs.is_empty() {
        return None;
    }
    runs.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut written = 0;
    for (mut start, mut end) in runs {
        // A run may stop inside a character of a non-ASCII secret: widen it to whole ones.
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        while !text.is_char_boundary(end) {
            end += 1;
        }
        if end <= written {
            continue;
        }
        if start > written {
            out.push_str(&text[written..start]);
        }
        if start >= written {
            out.push_str(http::REDACTED);
        }
        written = end;
    }
    out.push_str(&text[written..]);
    Some(out)
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
    let parsed = serde_json::from_str::<Value>(&String::from_utf8_lossy(&response.body)).ok();
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
pub(super) fn aborted() -> AssistantMessage {
    AssistantMessage::aborted(HttpFailure::Aborted.to_string())
}

/// No response: the host's client failed with `what`, described as `described` (see
/// [`HttpFailure::describe`]).
pub(super) fn no_response(what: &HttpFailure, described: &str) -> AssistantMessage {
    match what {
        HttpFailure::Aborted => aborted(),
        HttpFailure::TooLarge | HttpFailure::Refused(_) => failure(
            format!("the request failed: {described}"),
            ProviderError {
                class: FailureClass::NotRetryable,
                status: None,
                retry_after_ms: None,
                raw_body: None,
            },
        ),
        // Timed out or no connection: retryable.
        _ => unreachable_provider(described),
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

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::message::StopReason;
    use crate::provider::testing::{KEY, assert_failed_without_key, keyed};
    use serde_json::json;

    /// A server that echoes a 160-character key in a body that is not a provider error: the
    /// message's description of the body is cut at 120 bytes, inside the key. No part of the
    /// key of 8 or more characters survives in the message, the raw body or a stream's kept
    /// bytes, whichever provider and wherever the cut falls.
    #[test]
    fn a_key_cut_by_a_truncation_leaves_no_part_of_itself() {
        let key: String = ('a'..='z').chain('A'..='Z').cycle().take(160).collect();
        let secrets = secrets(Some(&key), &[], "");
        for before in [0, 40, 80, 113, 119] {
            let body = format!("{}{key} and the rest", "x".repeat(before));
            let response =
                HttpResponse { status: 502, headers: Vec::new(), body: body.clone().into_bytes() };
            let failed = redact(http_error(&response), &secrets);
            let shown = format!("{failed:?} {}", serde_json::to_string(&failed).unwrap());
            for start in 0..key.len() - 8 {
                let part = &key[start..start + 8];
                assert!(!shown.contains(part), "{before}: {part:?} of the key shows: {shown}");
            }
            // A kept prefix of the body (a stream's raw bytes are cut at a limit) too.
            for cut in [before + 8, before + 100] {
                let failed =
                    redact(interrupted(200, &body.as_bytes()[..cut], "the body ended"), &secrets);
                let raw = failed.error.unwrap().raw_body.unwrap();
                assert!(!raw.contains(&key[..8]), "{cut}: {raw}");
            }
        }
    }

    /// A request the host's client refused (a key in the clear, a redirect) would be refused
    /// again: not retried, unlike a network failure.
    #[test]
    fn a_refused_request_is_not_retried() {
        let refused = no_response(
            &HttpFailure::Refused("redirects are not followed".into()),
            "redirects are not followed",
        );
        assert_eq!(refused.error.unwrap().class, FailureClass::NotRetryable);
        let network =
            no_response(&HttpFailure::Network("connection reset".into()), "connection reset");
        assert_eq!(network.error.unwrap().class, FailureClass::Retryable);
    }

    /// A key whose ends are words: the words elsewhere in a message are not parts of the key.
    #[test]
    fn a_word_that_ends_a_key_is_not_redacted_inside_other_words() {
        let secrets = secrets(Some("sk-test-redirected"), &[], "");
        let message = AssistantMessage::failed("the server redirected the request: sk-test-redi");
        let shown = redact(message, &secrets).error_message.unwrap();
        assert_eq!(shown, "the server redirected the request: <redacted>");
    }

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
}
