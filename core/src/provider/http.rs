//! Plain HTTP data: what a codec asks the host to send, and what the host got back.
//!
//! No client lives here. A host turns an [`HttpRequest`] into a real request with whatever it
//! has (the browser's `fetch`, a component host's `http` import, a blocking client in tests) and
//! hands the answer back as an [`HttpResponse`] (or, streaming, as a head and body chunks; see
//! [`super::StreamDecoder`]).

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

/// What `Debug` and serialization show instead of a credential.
pub const REDACTED: &str = "<redacted>";

/// The headers whose values are public: the protocols' own (content type, versions, Anthropic's
/// browser opt-in) and what OpenRouter asks a page to say about itself. Every other header is
/// taken for a credential ([`is_secret_header`]).
pub const PUBLIC_HEADERS: [&str; 13] = [
    "accept",
    "accept-encoding",
    "accept-language",
    "cache-control",
    "content-type",
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
    "anthropic-dangerous-direct-browser-access",
    "http-referer",
    "referer",
    "x-title",
    "openai-beta",
];

/// Whether a header may carry a credential: every header but the [`PUBLIC_HEADERS`] (any
/// case). Keys travel under many names (`authorization`, `x-api-key`, `api-key`,
/// `x-goog-api-key`, `ocp-apim-subscription-key`, `cookie`, a gateway's own), so a header the
/// person added is a secret unless it is known to be public: its value is never shown or
/// stored, and it goes over plain HTTP only to loopback.
#[must_use]
pub fn is_secret_header(name: &str) -> bool {
    !PUBLIC_HEADERS.iter().any(|public| name.trim().eq_ignore_ascii_case(public))
}

/// Whether a URL query parameter's name looks like a credential (`key`, `api_key`, `apiKey`,
/// `access_token`, `sig`, `signature`, `secret`, `password`, `auth`, `session`, ...): its name,
/// decoded as a query is (`form_urlencoded`) and in lower case, contains `key`, `token`,
/// `secret`, `sig`, `auth`, `pass`, `credential` or `session`.
#[must_use]
pub fn is_credential_parameter(name: &str) -> bool {
    let decoded: String =
        form_urlencoded::parse(name.as_bytes()).map(|(name, _)| name.into_owned()).collect();
    let name = decoded.to_lowercase();
    CREDENTIAL_PARAMETER_WORDS.iter().any(|part| name.contains(part))
}

/// What a query parameter's name holds when it looks like a credential
/// ([`is_credential_parameter`]).
pub const CREDENTIAL_PARAMETER_WORDS: [&str; 8] =
    ["key", "token", "secret", "sig", "auth", "pass", "credential", "session"];

/// The query of `url` (after the first `?`, before the first `#` after it): no host or path
/// can hold a `?`, so this is the query any URL parser reads.
fn query_of(url: &str) -> Option<(usize, &str)> {
    let start = url.find('?')? + 1;
    let end = url[start..].find('#').map_or(url.len(), |at| start + at);
    Some((start, &url[start..end]))
}

/// The byte ranges in `url` of the values of its credential-looking query parameters
/// ([`is_credential_parameter`]) that are not empty, pairs split at `&` and `;`: the one reading
/// [`credential_parameters`] and [`without_credential_parameters`] share.
fn credential_values(url: &str) -> Vec<std::ops::Range<usize>> {
    let Some((start, query)) = query_of(url) else { return Vec::new() };
    let mut ranges = Vec::new();
    let mut at = start;
    for pair in query.split(['&', ';']) {
        if let Some((name, value)) = pair.split_once('=')
            && is_credential_parameter(name)
            && !value.trim().is_empty()
        {
            let value_start = at + name.len() + 1;
            ranges.push(value_start..value_start + value.len());
        }
        at += pair.len() + 1;
    }
    ranges
}

/// The values of `url`'s credential-looking query parameters ([`is_credential_parameter`]),
/// decoded and as written, the empty ones left out.
#[must_use]
pub fn credential_parameters(url: &str) -> Vec<String> {
    let mut values = Vec::new();
    for range in credential_values(url) {
        let value = &url[range];
        let decoded: String = form_urlencoded::parse(format!("v={value}").as_bytes())
            .map(|(_, v)| v.into_owned())
            .collect();
        if decoded != value {
            values.push(decoded);
        }
        values.push(value.to_owned());
    }
    values
}

/// `url` with the values of its credential-looking query parameters replaced by `replacement`
/// (`""` to drop them, the parameter kept by name), and whether any was.
#[must_use]
pub fn without_credential_parameters(url: &str, replacement: &str) -> (String, bool) {
    let ranges = credential_values(url);
    let mut shown = String::with_capacity(url.len());
    let mut from = 0;
    for range in &ranges {
        shown.push_str(&url[from..range.start]);
        shown.push_str(replacement);
        from = range.end;
    }
    shown.push_str(&url[from..]);
    (shown, !ranges.is_empty())
}

/// A request a codec built. The body is always JSON text.
///
/// Its headers carry the API key. `Debug` and `Serialize` show the value of every credential
/// header ([`is_secret_header`]) as `<redacted>`, so a request can be logged or stored; a host
/// sends the request from its fields, never from its serialization (which has no key).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRequest {
    /// `POST` for every provider call.
    pub method: String,
    /// The full URL.
    pub url: String,
    /// Header names and values, in the order to send them. Contains the API key.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
    /// The deadline for the whole exchange (sending, the head and the whole body), in
    /// milliseconds, if the provider configuration sets one (`"timeoutMs"`). The core reads no
    /// clock: the host enforces it and reports [`HttpFailure::TimedOut`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The longest wait for the next bytes (the head, then each chunk of the body), in
    /// milliseconds (`"idleTimeoutMs"`): a stalled server ends the request sooner than the
    /// whole deadline. The host enforces it and reports [`HttpFailure::Stalled`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
}

impl HttpRequest {
    /// The headers with credential values replaced by `<redacted>`.
    fn shown_headers(&self) -> Vec<(&str, &str)> {
        self.headers
            .iter()
            .map(|(name, value)| {
                (name.as_str(), if is_secret_header(name) { REDACTED } else { value.as_str() })
            })
            .collect()
    }
}

impl fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &without_credential_parameters(&self.url, REDACTED).0)
            .field("headers", &self.shown_headers())
            .field("body", &self.body)
            .field("timeout_ms", &self.timeout_ms)
            .field("idle_timeout_ms", &self.idle_timeout_ms)
            .finish()
    }
}

impl Serialize for HttpRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Shown<'a> {
            method: &'a str,
            url: &'a str,
            headers: Vec<(&'a str, &'a str)>,
            body: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            timeout_ms: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            idle_timeout_ms: Option<u64>,
        }
        let url = without_credential_parameters(&self.url, REDACTED).0;
        Shown {
            method: &self.method,
            url: &url,
            headers: self.shown_headers(),
            body: &self.body,
            timeout_ms: self.timeout_ms,
            idle_timeout_ms: self.idle_timeout_ms,
        }
        .serialize(serializer)
    }
}

impl HttpRequest {
    /// The first header called `name` (case-insensitive).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The body parsed as JSON (`Null` if it is not JSON, which a codec never builds).
    #[must_use]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// Why the host's client has no (complete) response: what [`super::HttpClient::send`] and
/// [`super::HttpBody::next_chunk`] report. An HTTP error status is a response, not a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "message", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum HttpFailure {
    /// The host aborted the request (the user cancelled the run): the response has stop
    /// reason `aborted` and is never retried.
    Aborted,
    /// The request's deadline ([`HttpRequest::timeout_ms`]) passed: retryable.
    TimedOut,
    /// No bytes arrived for [`HttpRequest::idle_timeout_ms`]: retryable.
    Stalled,
    /// The body grew past what the host accepts: not retryable.
    TooLarge,
    /// No connection, a failed lookup, a reset: the host's words. Retryable.
    Network(String),
    /// The host's client refused: to send the request (a key in the clear, see
    /// [`refuse_key_in_the_clear`]) or to follow its answer (a redirect). Its words; not
    /// retryable (the same request would be refused again).
    Refused(String),
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpFailure::Aborted => write!(f, "the request was aborted"),
            HttpFailure::TimedOut => write!(f, "the request timed out"),
            HttpFailure::Stalled => {
                write!(f, "the server stalled (no bytes within the idle timeout)")
            }
            HttpFailure::TooLarge => write!(f, "the response is too large"),
            HttpFailure::Network(why) | HttpFailure::Refused(why) => write!(f, "{why}"),
        }
    }
}

impl HttpFailure {
    /// This failure of `request` in words, naming the bound that ended it where the request
    /// set one (`the server stalled (no bytes within the idle timeout, 20 s)`): a person can
    /// tell their own setting from a default.
    #[must_use]
    pub fn describe(&self, request: &HttpRequest) -> String {
        #[allow(clippy::cast_precision_loss)]
        let seconds = |ms: u64| {
            let s = ms as f64 / 1000.0;
            if s.fract() == 0.0 { format!("{s:.0} s") } else { format!("{s} s") }
        };
        match (self, request.idle_timeout_ms, request.timeout_ms) {
            (HttpFailure::Stalled, Some(idle), _) => {
                format!("the server stalled (no bytes within the idle timeout, {})", seconds(idle))
            }
            (HttpFailure::TimedOut, _, Some(deadline)) => {
                format!("the request timed out (its deadline, {}, passed)", seconds(deadline))
            }
            _ => self.to_string(),
        }
    }
}

impl std::error::Error for HttpFailure {}

/// A complete response, as the host received it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpResponse {
    /// The HTTP status.
    pub status: u16,
    /// Header names and values as received.
    pub headers: Vec<(String, String)>,
    /// The body bytes, not necessarily UTF-8 (an error page may be anything).
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// A response with no headers.
    #[must_use]
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self { status, headers: Vec::new(), body: body.into() }
    }

    /// The same response with one more header.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The first header called `name` (case-insensitive).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// Whether the status is 2xx.
    #[must_use]
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// The first header called `name` (case-insensitive) in `headers`.
#[must_use]
pub fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(candidate, _)| candidate.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// Whether `host` (a URL's host as a URL parser reads it, with or without IPv6 brackets) is this
/// machine: `localhost`, an IPv4 address in `127.0.0.0/8`, or `::1` (also IPv4-mapped).
#[must_use]
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if host.eq_ignore_ascii_case("localhost") || host.eq_ignore_ascii_case("localhost.") {
        return true;
    }
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

/// Refuses a request that would send a credential in the clear: `Err` (saying why, without
/// the key) when `request` carries a credential header ([`is_secret_header`]) with a value,
/// or its URL a credential-looking query parameter ([`credential_parameters`]), and its URL
/// is not `https` to a host that is not loopback ([`is_loopback_host`]).
///
/// The URL is read by `parse` (its scheme, with or without the trailing `:`, and its host),
/// which must be the parser of the client that connects (WHATWG's in a browser, the `url`
/// crate under reqwest): a hand-written reading disagrees with it on URLs such as
/// `http://evil\@127.0.0.1/`, which connect to `evil`. A URL `parse` cannot read is refused
/// when a credential would go with it.
///
/// # Errors
/// The message for the user.
pub fn refuse_key_in_the_clear(
    request: &HttpRequest,
    parse: impl FnOnce(&str) -> Option<(String, String)>,
) -> Result<(), String> {
    let has_key = request
        .headers
        .iter()
        .any(|(name, value)| is_secret_header(name) && !value.trim().is_empty())
        || !credential_parameters(&request.url).is_empty();
    if !has_key {
        return Ok(());
    }
    let Some((scheme, host)) = parse(&request.url) else {
        return Err(format!(
            "refusing to send the API key: {:?} is not a URL",
            request.url.chars().take(200).collect::<String>()
        ));
    };
    let scheme = scheme.trim_end_matches(':');
    if scheme.eq_ignore_ascii_case("https") || is_loopback_host(&host) {
        return Ok(());
    }
    Err(format!(
        "refusing to send the API key over plain HTTP ({scheme}:) to {host:?}, which is not \
         loopback: use the provider's https:// URL (a key goes over plain HTTP only to 127.0.0.0/8, ::1 or \
         localhost)"
    ))
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn a_stall_or_a_timeout_names_the_bound_the_request_set() {
        let request = HttpRequest {
            method: "POST".into(),
            url: "http://localhost/v1/chat/completions".into(),
            headers: Vec::new(),
            body: "{}".into(),
            timeout_ms: Some(90_000),
            idle_timeout_ms: Some(20_000),
        };
        assert_eq!(
            HttpFailure::Stalled.describe(&request),
            "the server stalled (no bytes within the idle timeout, 20 s)"
        );
        assert_eq!(
            HttpFailure::TimedOut.describe(&request),
            "the request timed out (its deadline, 90 s, passed)"
        );
        let unbounded = HttpRequest { timeout_ms: None, idle_timeout_ms: Some(1_500), ..request };
        assert_eq!(
            HttpFailure::Stalled.describe(&unbounded),
            "the server stalled (no bytes within the idle timeout, 1.5 s)"
        );
        assert_eq!(HttpFailure::TimedOut.describe(&unbounded), "the request timed out");
        let reset = HttpFailure::Network("connection reset".into());
        assert_eq!(reset.describe(&unbounded), "connection reset");
    }

    #[test]
    fn a_deadline_is_optional_on_the_wire() {
        let request = HttpRequest {
            method: "POST".into(),
            url: "http://localhost/v1/chat/completions".into(),
            headers: Vec::new(),
            body: "{}".into(),
            timeout_ms: None,
            idle_timeout_ms: None,
        };
        let json = serde_json::to_value(&request).unwrap();
        assert!(json.get("timeoutMs").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<HttpRequest>(json).unwrap(), request);
        let with = HttpRequest { timeout_ms: Some(5_000), ..request };
        assert_eq!(serde_json::to_value(&with).unwrap()["timeoutMs"], 5_000);
        assert_eq!(
            serde_json::to_value(HttpFailure::Network("refused".into())).unwrap(),
            serde_json::json!({"kind": "network", "message": "refused"})
        );
    }

    #[test]
    fn every_header_but_the_public_ones_is_a_credential() {
        for secret in [
            "Authorization",
            "x-api-key",
            "api-key",
            "X-Goog-Api-Key",
            "ocp-apim-subscription-key",
            "Cookie",
            "x-my-gateway",
        ] {
            assert!(is_secret_header(secret), "{secret}");
        }
        for public in ["Content-Type", "anthropic-version", "HTTP-Referer", "X-Title", " accept "] {
            assert!(!is_secret_header(public), "{public}");
        }
    }

    #[test]
    fn credential_looking_query_parameters_are_found_shown_redacted_and_refused_in_the_clear() {
        let url = "http://10.1.2.3/v1?api-version=2024-02-01&key=AIza%2Fsecret&%61pi_Key=two#key=x";
        assert_eq!(credential_parameters(url), ["AIza/secret", "AIza%2Fsecret", "two"]);
        assert_eq!(
            without_credential_parameters(url, "").0,
            "http://10.1.2.3/v1?api-version=2024-02-01&key=&%61pi_Key=#key=x"
        );
        for name in ["access_token", "sig", "Signature", "client_secret", "password", "session"] {
            assert!(is_credential_parameter(name), "{name}");
        }
        assert!(!is_credential_parameter("api-version") && !is_credential_parameter("model"));
        assert!(credential_parameters("https://api.example/v1").is_empty());
        assert!(credential_parameters("https://api.example/v1?key=").is_empty());
        assert_eq!(
            without_credential_parameters("https://h/v1", "x"),
            ("https://h/v1".into(), false)
        );

        let request = HttpRequest {
            method: "POST".into(),
            url: url.into(),
            headers: vec![("x-goog-api-key".into(), "goog-secret".into())],
            body: "{}".into(),
            timeout_ms: None,
            idle_timeout_ms: None,
        };
        let shown = format!("{request:?} {}", serde_json::to_string(&request).unwrap());
        for secret in ["goog-secret", "AIza", "two"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("api-version=2024-02-01"), "{shown}");
        let parse = |url: &str| {
            let rest = url.split_once("://")?.1;
            Some(("http".to_owned(), rest.split(['/', '?', ':']).next()?.to_owned()))
        };
        // A key in the query alone is refused over plain HTTP off loopback, like one in a header.
        let query_only = HttpRequest { headers: Vec::new(), ..request.clone() };
        assert!(refuse_key_in_the_clear(&query_only, parse).is_err());
        let harmless =
            HttpRequest { url: "http://10.1.2.3/v1?api-version=1".into(), ..query_only.clone() };
        assert!(refuse_key_in_the_clear(&harmless, parse).is_ok());
        let loopback = HttpRequest { url: "http://127.0.0.1:8080/v1?key=k".into(), ..query_only };
        assert!(refuse_key_in_the_clear(&loopback, parse).is_ok());
    }

    #[test]
    fn headers_are_found_case_insensitively() {
        let response = HttpResponse::new(429, "{}").with_header("Retry-After", "2");
        assert_eq!(response.header("retry-after"), Some("2"));
        assert_eq!(response.header("x-missing"), None);
        assert!(!response.is_success());
        assert!(HttpResponse::new(204, "").is_success());
    }
}
