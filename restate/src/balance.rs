//! A small HTTP/2 (h2c) load balancer in front of worker processes.
//!
//! Restate sends every invocation of a deployment to the deployment's one URL, over HTTP/2
//! streams it multiplexes on a connection; a TCP proxy would pin them all to one worker. This
//! balancer forwards each request (each invocation attempt, a bidirectional stream) to the
//! next live worker in turn. A worker that dies breaks its streams; Restate retries those
//! invocations, and their next attempts go to the workers still alive. In production a real
//! load balancer (or a platform's) takes this role: see docs/restate.md.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};

type Body = BoxBody<Bytes, hyper::Error>;

struct Backends {
    addresses: Vec<SocketAddr>,
    next: AtomicUsize,
    client: Client<HttpConnector, Incoming>,
}

impl Backends {
    /// The next worker that accepts a connection, in turn.
    async fn pick(&self) -> Option<SocketAddr> {
        for _ in 0..self.addresses.len() {
            let at = self.next.fetch_add(1, Ordering::Relaxed) % self.addresses.len();
            let address = self.addresses[at];
            let probe = tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(address));
            if matches!(probe.await, Ok(Ok(_))) {
                return Some(address);
            }
        }
        None
    }

    async fn forward(&self, request: Request<Incoming>) -> Response<Body> {
        let Some(backend) = self.pick().await else {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "no worker is alive");
        };
        let (mut parts, body) = request.into_parts();
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        parts.uri = match format!("http://{backend}{path}").parse::<Uri>() {
            Ok(uri) => uri,
            Err(error) => return plain(StatusCode::BAD_REQUEST, &error.to_string()),
        };
        match self.client.request(Request::from_parts(parts, body)).await {
            Ok(response) => response.map(BodyExt::boxed),
            Err(error) => plain(StatusCode::BAD_GATEWAY, &format!("worker {backend}: {error}")),
        }
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let body = Full::new(Bytes::from(text.to_owned())).map_err(|never| match never {}).boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
}

/// Serves the balancer on `listener`, forwarding to `workers`, until the process ends.
///
/// # Errors
/// When accepting a connection fails.
pub async fn serve(listener: TcpListener, workers: Vec<SocketAddr>) -> std::io::Result<()> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client = Client::builder(TokioExecutor::new()).http2_only(true).build(connector);
    let backends = Arc::new(Backends { addresses: workers, next: AtomicUsize::new(0), client });
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true).ok();
        let backends = Arc::clone(&backends);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let backends = Arc::clone(&backends);
                async move { Ok::<_, Infallible>(backends.forward(request).await) }
            });
            hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
                .ok();
        });
    }
}
