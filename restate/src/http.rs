//! The native HTTP client the core's provider codecs run over: [`ReqwestClient`], an
//! [`HttpClient`] on `reqwest` with rustls, so providers are reached over HTTPS (and local
//! servers over plain HTTP). The worker's model calls and `cargo xtask eval --provider` use it.
//!
//! Retry waits are `tokio` timers here; the workflow does not use them (its retry delays are
//! Restate's durable timers, see [`crate::workflow`]).

use std::time::Duration;

use verity_core::Provider;
use verity_core::provider::{HttpBody, HttpClient, HttpFailure, HttpRequest, ResponseHead};

/// An [`HttpClient`] over `reqwest` (rustls, HTTP/1.1 and HTTP/2). Requests to other hosts go
/// through the system's proxy (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, minus `NO_PROXY`, as
/// reqwest reads them); requests to loopback always go direct. A request's `timeout_ms` bounds
/// the whole exchange.
#[derive(Debug, Clone)]
pub struct ReqwestClient {
    /// For other hosts: the system's proxy, if any.
    client: reqwest::Client,
    /// For loopback: never a proxy.
    direct: reqwest::Client,
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
        let build = |builder: reqwest::ClientBuilder| {
            builder
                .connect_timeout(Duration::from_secs(30))
                // No redirect is followed: reqwest strips only `Authorization` on a cross-host
                // redirect, so `x-api-key` and `api-key` would follow it, even to plain HTTP. A
                // provider's API does not redirect; a 3xx is a failure the codecs classify.
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("a reqwest client builds")
        };
        Self {
            client: build(reqwest::Client::builder()),
            // No pooled connections to loopback: llama.cpp's server closes a connection after a
            // streamed response without saying so, and the next request on it fails with
            // "connection closed before message completed" (6 of 12 claims here). A new
            // loopback connection costs next to nothing.
            direct: build(reqwest::Client::builder().no_proxy().pool_max_idle_per_host(0)),
            sleeps: true,
        }
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
    idle: Option<Duration>,
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
        verity_core::provider::http::refuse_key_in_the_clear(request, url_parts)
            .map_err(HttpFailure::Refused)?;
        let client = if url_is_loopback(&request.url) { &self.direct } else { &self.client };
        let mut builder = client.request(method, &request.url);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let deadline = request
            .timeout_ms
            .and_then(|ms| tokio::time::Instant::now().checked_add(Duration::from_millis(ms)));
        let idle = request.idle_timeout_ms.map(Duration::from_millis);
        let send = builder.body(request.body.clone()).send();
        let response = bounded(send, deadline, idle).await?.map_err(|e| failure(&e))?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| {
                (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned())
            })
            .collect();
        Ok((ResponseHead { status, headers }, ReqwestBody { response, deadline, idle }))
    }

    async fn wait(&self, delay_ms: u64) {
        if self.sleeps {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        }
    }
}

impl HttpBody for ReqwestBody {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpFailure> {
        let chunk = bounded(self.response.chunk(), self.deadline, self.idle).await?;
        chunk.map(|bytes| bytes.map(|bytes| bytes.to_vec())).map_err(|e| failure(&e))
    }
}

/// Awaits `future` until the request's `deadline` ([`HttpFailure::TimedOut`]) or for at most
/// `idle` ([`HttpFailure::Stalled`]), whichever comes first.
async fn bounded<F: std::future::Future>(
    future: F,
    deadline: Option<tokio::time::Instant>,
    idle: Option<Duration>,
) -> Result<F::Output, HttpFailure> {
    let stall = idle.and_then(|idle| tokio::time::Instant::now().checked_add(idle));
    let (at, failure) = match (deadline, stall) {
        (Some(deadline), Some(stall)) if stall < deadline => (stall, HttpFailure::Stalled),
        (Some(deadline), _) => (deadline, HttpFailure::TimedOut),
        (None, Some(stall)) => (stall, HttpFailure::Stalled),
        (None, None) => return Ok(future.await),
    };
    tokio::time::timeout_at(at, future).await.map_err(|_| failure)
}

/// Refuses to send an API key in the clear: `Err` (saying why) when `provider`'s requests
/// carry a credential header and go over plain `http://` to a host that is not loopback
/// (`127.0.0.0/8`, `::1`, `localhost`), the URL read by the parser reqwest connects with (see
/// [`verity_core::provider::http::refuse_key_in_the_clear`]). `eval --provider` and the worker
/// call it before any request; [`ReqwestClient`] checks every request again.
///
/// # Errors
/// The message for the user, without the key.
pub fn refuse_key_in_the_clear(provider: &Provider) -> Result<(), String> {
    provider.refuse_key_in_the_clear(url_parts)
}

/// A URL's scheme and host as reqwest reads it (the `url` crate, WHATWG's rules).
fn url_parts(url: &str) -> Option<(String, String)> {
    let parsed = reqwest::Url::parse(url.trim()).ok()?;
    Some((parsed.scheme().to_owned(), parsed.host_str()?.to_owned()))
}

/// Whether `url`'s host is loopback, as reqwest reads the URL.
#[must_use]
pub fn url_is_loopback(url: &str) -> bool {
    url_parts(url).is_some_and(|(_, host)| is_loopback(&host))
}

/// Whether a URL's host is this machine: `localhost`, or an IPv4 address in 127.0.0.0/8, or
/// `::1` (also IPv4-mapped; with or without brackets).
#[must_use]
pub fn is_loopback(host: &str) -> bool {
    verity_core::provider::http::is_loopback_host(host)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use verity_core::provider::{HttpBody, HttpClient, HttpFailure, HttpRequest};

    use super::ReqwestClient;

    fn post(url: String, timeout_ms: Option<u64>) -> HttpRequest {
        HttpRequest {
            method: "POST".to_owned(),
            url,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: "{}".to_owned(),
            timeout_ms,
            idle_timeout_ms: None,
        }
    }

    /// A loopback server that answers one connection with `reply` after reading the request.
    fn serve_once(reply: &'static [u8]) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut buffer = [0; 4096];
                let _ = stream.read(&mut buffer);
                let _ = stream.write_all(reply);
            }
        });
        port
    }

    #[tokio::test]
    async fn a_response_arrives_with_its_status_headers_and_body() {
        let port = serve_once(
            b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 2\r\ncontent-length: 5\r\nconnection: close\r\n\r\nslow!",
        );
        let client = ReqwestClient::without_waits();
        let (head, mut body) =
            client.send(&post(format!("http://127.0.0.1:{port}/v1"), None)).await.unwrap();
        assert_eq!(head.status, 429);
        assert!(head.headers.iter().any(|(name, value)| name == "retry-after" && value == "2"));
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next_chunk().await.unwrap() {
            bytes.extend(chunk);
        }
        assert_eq!(bytes, b"slow!");
    }

    /// A loopback server that counts the connections it accepts and answers each with a 200.
    fn counting_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = std::sync::Arc::clone(&count);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut buffer = [0; 4096];
                let _ = stream.read(&mut buffer);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}");
            }
        });
        (port, count)
    }

    /// A request carrying `x-api-key` answered with a 307 to another port: the redirect is not
    /// followed (the other server sees no connection, so no key), and the 307 is the answer.
    #[tokio::test]
    async fn a_redirect_is_not_followed_so_a_key_goes_nowhere_else() {
        let (target, reached) = counting_server();
        let reply = format!(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:{target}/v1\r\n\
             content-length: 0\r\nconnection: close\r\n\r\n"
        );
        let port = serve_once(Box::leak(reply.into_bytes().into_boxed_slice()));
        let mut request = post(format!("http://127.0.0.1:{port}/v1"), Some(5_000));
        request.headers.push(("x-api-key".to_owned(), "sk-ant-secret".to_owned()));
        let (head, _) = ReqwestClient::without_waits().send(&request).await.unwrap();
        assert_eq!(head.status, 307);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(
            reached.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "the redirect was followed"
        );
    }

    /// The client itself refuses a credential over plain HTTP off loopback, reading the URL as
    /// it connects: `http://evil\@127.0.0.1/` is host `evil` to reqwest.
    #[tokio::test]
    async fn the_client_refuses_a_key_in_the_clear_before_connecting() {
        let client = ReqwestClient::without_waits();
        for url in ["http://10.1.2.3:9/v1", "http://evil\\@127.0.0.1:9/v1"] {
            let mut request = post(url.to_owned(), Some(1_000));
            request.headers.push(("authorization".to_owned(), "Bearer sk-secret".to_owned()));
            let Err(HttpFailure::Refused(message)) = client.send(&request).await else {
                panic!("{url}: a key in the clear was not refused");
            };
            assert!(message.contains("refusing") && !message.contains("sk-secret"), "{message}");
        }
    }

    #[tokio::test]
    async fn a_silent_server_times_out_and_a_refused_connection_is_a_network_failure() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = ReqwestClient::without_waits();
        let failure =
            client.send(&post(format!("http://127.0.0.1:{port}/"), Some(200))).await.unwrap_err();
        assert_eq!(failure, HttpFailure::TimedOut);
        drop(listener);
        let failure =
            client.send(&post(format!("http://127.0.0.1:{port}/"), None)).await.unwrap_err();
        assert!(matches!(failure, HttpFailure::Network(_)), "{failure:?}");
    }

    #[tokio::test]
    async fn a_server_that_stops_sending_stalls_and_a_huge_deadline_does_not_panic() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut buffer = [0u8; 4096];
                let _ = std::io::Read::read(&mut stream, &mut buffer);
                let head =
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {}\n\n";
                let _ = std::io::Write::write_all(&mut stream, head);
                std::thread::sleep(std::time::Duration::from_secs(3));
            }
        });
        let client = ReqwestClient::without_waits();
        let request = HttpRequest {
            timeout_ms: Some(u64::MAX),
            idle_timeout_ms: Some(300),
            ..post(format!("http://127.0.0.1:{port}/"), None)
        };
        let (_, mut body) = client.send(&request).await.unwrap();
        assert_eq!(body.next_chunk().await.unwrap().unwrap(), b"data: {}\n\n");
        let started = std::time::Instant::now();
        assert_eq!(body.next_chunk().await.unwrap_err(), HttpFailure::Stalled);
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "the idle clock");
    }

    /// The client speaks TLS: an `https://` URL starts a TLS handshake (which a server that
    /// answers in plain HTTP breaks), where a client without TLS would refuse the scheme.
    #[tokio::test]
    async fn an_https_url_is_spoken_to_over_tls() {
        let port = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        let client = ReqwestClient::without_waits();
        let failure =
            client.send(&post(format!("https://127.0.0.1:{port}/"), Some(5000))).await.unwrap_err();
        let HttpFailure::Network(message) = failure else { panic!("{failure:?}") };
        let lower = message.to_lowercase();
        assert!(!lower.contains("scheme"), "{message}");
        assert!(
            // rustls's words for a plain-HTTP answer to its ClientHello.
            lower.contains("received corrupt message") || lower.contains("tls"),
            "{message}"
        );
    }
}

#[cfg(test)]
mod key_tests {
    use verity_core::{AnthropicConfig, OpenAiConfig, Provider};

    use super::refuse_key_in_the_clear;

    const KEY: &str = "sk-test-123456";

    fn openai(base_url: &str, key: bool) -> Provider {
        let mut config = OpenAiConfig::new(base_url, "m");
        config.api_key = key.then(|| KEY.to_owned());
        Provider::OpenAi(config)
    }

    #[test]
    fn a_key_goes_over_plain_http_only_to_loopback() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://127.8.9.10/v1",
            "http://localhost:11434/v1",
            "HTTP://LOCALHOST/v1",
            "http://[::1]:8080/v1",
            "http://[::ffff:127.0.0.1]:8080/v1",
            "https://api.openai.com/v1",
        ] {
            assert_eq!(refuse_key_in_the_clear(&openai(url, true)), Ok(()), "{url}");
        }
        for url in [
            "http://192.168.1.5:8080/v1",
            "http://example.com/v1",
            "http://localhost.example.com/v1",
            "http://127.0.0.1.example.com/v1",
            "http://127.0.0.1@example.com/v1",
            "http://[::ffff:10.0.0.1]/v1",
            "http://[2001:db8::1]:8080/v1",
            "127.0.0.1:8080/v1",
            // WHATWG (and reqwest) read the host as `evil`: a backslash ends the authority.
            "http://evil\\@127.0.0.1/v1",
        ] {
            let refused = refuse_key_in_the_clear(&openai(url, true)).expect_err(url);
            assert!(refused.contains("plain HTTP") || refused.contains("not a URL"), "{refused}");
            assert!(!refused.contains(KEY), "{refused}");
        }
        // Without a key anything goes (a remote Ollama needs none).
        assert_eq!(refuse_key_in_the_clear(&openai("http://192.168.1.5:11434/v1", false)), Ok(()));
    }

    #[test]
    fn every_credential_header_counts_as_a_key() {
        let anthropic = Provider::Anthropic(AnthropicConfig::new("m", KEY).at("http://10.0.0.2"));
        assert!(refuse_key_in_the_clear(&anthropic).is_err_and(|e| e.contains("10.0.0.2")));
        let azure =
            Provider::OpenAi(OpenAiConfig::new("http://10.0.0.2/v1", "m").header("api-key", KEY));
        assert!(refuse_key_in_the_clear(&azure).is_err());
        let local = Provider::Anthropic(AnthropicConfig::new("m", KEY).at("http://127.0.0.1:9"));
        assert_eq!(refuse_key_in_the_clear(&local), Ok(()));
    }
}
