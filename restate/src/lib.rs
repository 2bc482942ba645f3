//! Durable claim checking on [Restate](https://restate.dev): the job protocol of
//! `verity-core` driven by a durable execution engine.
//!
//! - [`workflow`]: the `ClaimCheck` workflow (one job, every model call and tool call a
//!   journaled side effect, retry delays durable timers) and the `Batch` workflow (claims fanned
//!   out with bounded concurrency and rate limits, a progress query).
//! - [`host`]: what a worker holds (the model, host tools, corpora); [`corpus`]: corpora by
//!   path and SHA-256, loaded and indexed once per process; [`http`]: the reqwest client the
//!   provider codecs run over (HTTPS).
//! - [`cluster`], [`balance`], [`batch`]: the processes around a batch on one machine (the
//!   Restate server from npm, workers behind a small HTTP/2 balancer) and the `batch` command.
//!
//! Native only: the core stays free of tokio.
#![cfg(not(target_arch = "wasm32"))]

pub mod balance;
pub mod batch;
pub mod cluster;
pub mod corpus;
pub mod host;
pub mod http;
pub mod workflow;

use std::net::SocketAddr;
use std::sync::Arc;

use restate_sdk::prelude::{Endpoint, HttpServer};

/// Serves the `ClaimCheck` and `Batch` workflows over `host` on `address` until the process
/// ends.
pub async fn serve_worker(host: Arc<host::Host>, address: SocketAddr) {
    let endpoint = Endpoint::builder()
        .bind(workflow::ClaimCheck::new(Arc::clone(&host)))
        .bind(workflow::Batch::new(host))
        .build();
    HttpServer::new(endpoint).listen_and_serve(address).await;
}
