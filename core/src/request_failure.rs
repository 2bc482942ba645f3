//! What a failed request was: its [`FailureClass`] (worth retrying or not, and why), and the
//! [`ProviderError`] a codec fills from what the provider sent ([`classify`],
//! [`parse_retry_after`]). Whether and when to try again is [`crate::retry`]'s concern.

use serde::{Deserialize, Serialize};

/// What kind of failure a failed request was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FailureClass {
    /// Worth retrying: rate limit, overload, 5xx, network failure, timeout.
    Retryable,
    /// Retrying cannot help: quota or billing, authentication, an invalid request.
    NotRetryable,
    /// The request is larger than the model's context window: compact, then retry.
    ContextOverflow,
    /// The output hit its token limit before a usable answer: retry with a larger limit.
    OutputTruncated,
    /// The server could not read its own model's output (llama.cpp answers HTTP 500 "Failed
    /// to parse input at pos N" for a tool call it cannot parse): the model's failure, not the
    /// transport's. A step asks again within its attempt budget (`maxAttempts`, as for an
    /// invalid submission); the retry layer does not retry it.
    ModelOutput,
}

/// What a provider said about a failed request, as the codec read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderError {
    /// The classification.
    pub class: FailureClass,
    /// The HTTP status, when there was a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// How long the provider asked to wait (`Retry-After`), in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// The raw body, kept for the user when it was not what the provider would send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_body: Option<String>,
}

/// Classifies a failure from what the provider sent. `status` is `None` for a failure with no
/// response (network, timeout); `error_type` is the provider's error type or code when its
/// body had one (`rate_limit_error`, `insufficient_quota`, `context_length_exceeded`, ...).
#[must_use]
pub fn classify(status: Option<u16>, error_type: Option<&str>, message: &str) -> FailureClass {
    let text = format!("{} {}", error_type.unwrap_or_default(), message).to_lowercase();
    let mentions = |needles: &[&str]| needles.iter().any(|needle| text.contains(needle));
    // The body's meaning wins over the status: a 429 for an exhausted quota is not a rate
    // limit, and a 400 for a long prompt is a context overflow.
    if mentions(&[
        "context_length",
        "context length",
        "context window",
        "prompt is too long",
        "too many tokens",
        "maximum context",
    ]) {
        return FailureClass::ContextOverflow;
    }
    if mentions(&["max_tokens", "max_output_tokens", "output limit"]) && status != Some(429) {
        return FailureClass::OutputTruncated;
    }
    if status == Some(500) && mentions(&["failed to parse input"]) {
        return FailureClass::ModelOutput;
    }
    if mentions(&["insufficient_quota", "quota", "billing", "credit balance", "payment"]) {
        return FailureClass::NotRetryable;
    }
    match status {
        Some(401 | 403) => FailureClass::NotRetryable,
        Some(408 | 409 | 425 | 429) => FailureClass::Retryable,
        Some(500..=599) => FailureClass::Retryable,
        Some(400..=499) => {
            if mentions(&["overloaded", "rate limit", "rate_limit"]) {
                FailureClass::Retryable
            } else {
                FailureClass::NotRetryable
            }
        }
        Some(_) => FailureClass::NotRetryable,
        // No response at all: the network failed or the request timed out.
        None => FailureClass::Retryable,
    }
}

/// Parses a `Retry-After` value: delay seconds (`"120"`, `"1.5"`). HTTP dates are not parsed
/// (that would need a clock); they give `None`, and the backoff applies.
#[must_use]
pub fn parse_retry_after(value: &str) -> Option<u64> {
    let seconds: f64 = value.trim().parse().ok()?;
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Some((seconds * 1000.0).round().min(u64::MAX as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_reads_status_and_body() {
        use FailureClass::*;
        assert_eq!(classify(Some(429), Some("rate_limit_error"), "slow down"), Retryable);
        assert_eq!(
            classify(Some(429), Some("insufficient_quota"), "You exceeded your current quota"),
            NotRetryable
        );
        assert_eq!(classify(Some(529), Some("overloaded_error"), "Overloaded"), Retryable);
        assert_eq!(classify(Some(503), None, "Service Unavailable"), Retryable);
        assert_eq!(classify(Some(401), None, "invalid x-api-key"), NotRetryable);
        assert_eq!(
            classify(Some(400), Some("invalid_request_error"), "messages: field required"),
            NotRetryable
        );
        assert_eq!(
            classify(
                Some(400),
                Some("context_length_exceeded"),
                "maximum context length is 8192 tokens"
            ),
            ContextOverflow
        );
        assert_eq!(
            classify(Some(400), Some("invalid_request_error"), "prompt is too long: 210000 tokens"),
            ContextOverflow
        );
        assert_eq!(classify(None, None, "connection reset"), Retryable);
        assert_eq!(
            classify(Some(400), None, "max_tokens: the response hit the output limit"),
            OutputTruncated
        );
    }

    #[test]
    fn retry_after_parses_seconds_only() {
        assert_eq!(parse_retry_after("2"), Some(2_000));
        assert_eq!(parse_retry_after(" 1.5 "), Some(1_500));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }
}
