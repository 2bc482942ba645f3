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

/// Whether a header carries a credential (`authorization`, `proxy-authorization`,
/// `x-api-key`, `api-key`; any case): its value is never shown.
#[must_use]
pub fn is_secret_header(name: &str) -> bool {
    ["authorization", "proxy-authorization", "x-api-key", "api-key"]
        .iter()
        .any(|secret| name.eq_ignore_ascii_case(secret))
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
            .field("url", &self.url)
            .field("headers", &self.shown_headers())
            .field("body", &self.body)
            .finish()
    }
}

impl Serialize for HttpRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown<'a> {
            method: &'a str,
            url: &'a str,
            headers: Vec<(&'a str, &'a str)>,
            body: &'a str,
        }
        Shown {
            method: &self.method,
            url: &self.url,
            headers: self.shown_headers(),
            body: &self.body,
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

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn headers_are_found_case_insensitively() {
        let response = HttpResponse::new(429, "{}").with_header("Retry-After", "2");
        assert_eq!(response.header("retry-after"), Some("2"));
        assert_eq!(response.header("x-missing"), None);
        assert!(!response.is_success());
        assert!(HttpResponse::new(204, "").is_success());
    }
}
