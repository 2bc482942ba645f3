//! Durable claim checking on [Restate](https://restate.dev): the job protocol of
//! `verity-core` driven by a durable execution engine.
//!
//! - [`workflow`]: the `ClaimCheck` workflow (one job, every model call and tool call a
//!   journaled side effect, retry delays durable timers) and the `Batch` workflow (claims fanned
//!   out with bounded concurrency, a progress query); [`limiter`]: the `RateLimiter` virtual
//!   object every model request of a batch waits for (requests and tokens per window).
//! - [`host`]: what a worker holds (the model, host tools, corpora); [`corpus`]: corpora by
//!   path and SHA-256, loaded and indexed once per process; [`http`]: the reqwest client the
//!   provider codecs run over (HTTPS).
//! - [`cluster`], [`balance`], [`batch`]: the processes around a batch on one machine (the
//!   Restate server from npm, workers behind a small HTTP/2 balancer) and the `batch` command;
//!   [`summary`]: the summary of a labelled run, one for `batch` and `eval`.
//!
//! Native only: the core stays free of tokio.
#![cfg(not(target_arch = "wasm32"))]

pub mod balance;
pub mod batch;
pub mod claims;
pub mod cluster;
pub mod corpus;
pub mod host;
pub mod http;
pub mod limiter;
pub mod summary;
pub mod workflow;

use std::net::SocketAddr;
use std::sync::Arc;

use restate_sdk::prelude::Endpoint;

/// The Restate endpoint of a worker: the `ClaimCheck` and `Batch` workflows, the private
/// `BatchPart` and `BatchCheck` a batch runs through, the private `ModelCall` (the model calls
/// a check has in flight together), and the `RateLimiter` over `host`. With `identity_keys` (Restate's `publickeyv1_...` public keys),
/// it answers only requests signed by a server holding one of their private keys (Restate's
/// request identity); any other request gets 401.
///
/// # Errors
/// A key that is not a Restate identity public key, named.
pub fn endpoint(host: Arc<host::Host>, identity_keys: &[String]) -> Result<Endpoint, String> {
    let mut builder = Endpoint::builder()
        .bind(workflow::ClaimCheck::new(Arc::clone(&host)))
        .bind(workflow::BatchCheck::new(Arc::clone(&host)))
        .bind(workflow::Batch::new(Arc::clone(&host)))
        .bind(workflow::BatchPart::new(Arc::clone(&host)))
        .bind(workflow::ModelCall::new(host))
        .bind(limiter::RateLimiter);
    for key in identity_keys {
        builder = builder.identity_key(key.trim()).map_err(|e| {
            format!(
                "identity key {key:?} is not a Restate request-identity public key \
                 (publickeyv1_...): {e}"
            )
        })?;
    }
    Ok(builder.build())
}

/// Serves `endpoint` (see [`endpoint`]) on `address` (HTTP/2, as Restate speaks to
/// deployments) until the process ends. Like the SDK's own server, but with `TCP_NODELAY`: a
/// journal round trip is a few small frames, which Nagle's algorithm would hold back for a
/// delayed ACK (tens of milliseconds per side effect).
///
/// # Errors
/// When the address cannot be bound or accepting fails.
pub async fn serve_worker(endpoint: Endpoint, address: SocketAddr) -> std::io::Result<()> {
    let endpoint = restate_sdk::hyper::HyperEndpoint::new(endpoint);
    let listener = tokio::net::TcpListener::bind(address).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true).ok();
        let endpoint = endpoint.clone();
        tokio::spawn(async move {
            hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                .serve_connection(hyper_util::rt::TokioIo::new(stream), endpoint)
                .await
                .ok();
        });
    }
}
