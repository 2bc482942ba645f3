//! The native HTTP client the core's provider codecs run over: [`ReqwestClient`], an
//! [`HttpClient`] on `reqwest` with rustls, so providers are reached over HTTPS (and local
//! servers over plain HTTP). The worker's model calls and `cargo xtask eval --provider` use it.
//!
//! Retry waits are `tokio` timers here; the workflow does not use them (its retry delays are
//! Restate's durable timers, see [`crate::workflow`]).

use std::time::Duration;

use verity_core::provider::{HttpBody, HttpClient, HttpFailure, HttpRequest, ResponseHead};

/// An [`HttpClient`] over `reqwest` (rustls, HTTP/1.1 and HTTP/2, no proxy from the
/// environment). A request's `timeout_ms` bounds the whole exchange.
#[derive(Debug, Clone)]
pub struct ReqwestClient {
    client: reqwest::Client,
    sleeps: bool,
}

impl Default for ReqwestClient {
    fn default() -> Self {
        Self::new()
    }
}

impl ReqwestClient {
    /// A client whose retry waits really sleep.
    ///
    /// # Panics
    /// When the TLS backend cannot be set up (reqwest's own panic).
    #[must_use]
    pub fn new() -> Self {
        let client = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(30))
            .build()
            .expect("a reqwest client builds");
        Self { client, sleeps: true }
    }

    /// A client whose retry waits return at once (a host with its own timer, such as a
    /// workflow's durable sleep, waits before it calls again).
    #[must_use]
    pub fn without_waits() -> Self {
        Self { sleeps: false, ..Self::new() }
    }
}

/// A response body read as it arrives.
#[derive(Debug)]
pub struct ReqwestBody {
    response: reqwest::Response,
    deadline: Option<tokio::time::Instant>,
}

fn failure(error: &reqwest::Error) -> HttpFailure {
    if error.is_timeout() {
        HttpFailure::TimedOut
    } else {
        // Without the URL: it may carry a key in its query.
        HttpFailure::Network(error.without_url_ref().to_string())
    }
}

trait WithoutUrl {
    fn without_url_ref(&self) -> String;
}

impl WithoutUrl for reqwest::Error {
    fn without_url_ref(&self) -> String {
        let mut text = self.to_string();
        if let Some(url) = self.url() {
            text = text.replace(url.as_str(), "<url>");
        }
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }
}

impl HttpClient for ReqwestClient {
    type Body = ReqwestBody;

    async fn send(
        &self,
        request: &HttpRequest,
    ) -> Result<(ResponseHead, ReqwestBody), HttpFailure> {
        let method = reqwest::Method::from_bytes(request.method.as_bytes())
            .map_err(|_| HttpFailure::Network(format!("bad method {:?}", request.method)))?;
        let mut builder = self.client.request(method, &request.url);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let deadline =
            request.timeout_ms.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
        let send = builder.body(request.body.clone()).send();
        let response = match deadline {
            Some(deadline) => {
                tokio::time::timeout_at(deadline, send).await.map_err(|_| HttpFailure::TimedOut)?
            }
            None => send.await,
        }
        .map_err(|e| failure(&e))?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| {
                (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned())
            })
            .collect();
        Ok((ResponseHead { status, headers }, ReqwestBody { response, deadline }))
    }

    async fn wait(&self, delay_ms: u64) {
        if self.sleeps {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        }
    }
}

impl HttpBody for ReqwestBody {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpFailure> {
        let chunk = self.response.chunk();
        let chunk = match self.deadline {
            Some(deadline) => {
                tokio::time::timeout_at(deadline, chunk).await.map_err(|_| HttpFailure::TimedOut)?
            }
            None => chunk.await,
        };
        chunk.map(|bytes| bytes.map(|bytes| bytes.to_vec())).map_err(|e| failure(&e))
    }
}
