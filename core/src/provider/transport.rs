//! The one [`Transport`] for every network provider: [`ProviderTransport`] encodes a request,
//! sends it with the host's [`HttpClient`] and decodes the answer, streamed or whole.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Provider;
use super::failure::{aborted, malformed, no_response, redact};
use super::http::{HttpFailure, HttpRequest};
use crate::drive::{Cancel, Transport};
use crate::message::{AssistantMessage, Delta, ModelRequest};

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
/// abort the request: [`ProviderTransport`] stops reading a body past
/// [`MAX_RESPONSE_BYTES`](super::MAX_RESPONSE_BYTES) or once its [`Cancel`] fires, and
/// `drive_with` drops a model call it cancels.
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
            Err(failure) => {
                let described = failure.describe(&http);
                return redact(no_response(&failure, &described), &self.provider.secrets());
            }
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
                Err(failure) => return decoder.fail(&failure.describe(&http)),
            }
        }
    }

    async fn wait(&self, delay_ms: u64) {
        self.client.wait(delay_ms).await;
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::provider::testing::{self, assert_failed_without_key, keyed};

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
}
