//! Plain HTTP data: what a codec asks the host to send, and what the host got back.
//!
//! No client lives here. A host turns an [`HttpRequest`] into a real request with whatever it
//! has (the browser's `fetch`, a component host's `http` import, a blocking client in tests) and
//! hands the answer back as an [`HttpResponse`] (or, streaming, as a head and body chunks; see
//! [`super::StreamDecoder`]).

use serde::{Deserialize, Serialize};

/// A request a codec built. The body is always JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRequest {
    /// `POST` for every provider call.
    pub method: String,
    /// The full URL.
    pub url: String,
    /// Header names and values, in the order to send them. Contains the API key: never log
    /// it as is.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
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
