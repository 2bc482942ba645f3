//! Native test hosts for the provider codecs: a blocking [`HttpClient`] over loopback (ureq,
//! no TLS), a server that answers with canned raw bytes (for replies no real server would
//! send: an HTML error page, a body cut short), and a launcher for the `@copilotkit/aimock`
//! mock server.
//!
//! None of this is in the core: the core stays sans-IO, and these are what a native host
//! would write.

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use verity_core::{HttpBody, HttpClient, HttpFailure, HttpRequest, ResponseHead};

/// A blocking HTTP client. Its futures complete without ever pending, so `pollster` drives
/// them. Retry waits are recorded, not slept, so tests stay fast and can check them. A
/// request's `timeout_ms` bounds the whole exchange (ureq's global timeout, head and body),
/// reported as [`HttpFailure::TimedOut`]; its `idle_timeout_ms` bounds the wait for the head
/// ([`HttpFailure::Stalled`]; ureq keeps no clock between body reads, so a body that stalls
/// ends at the deadline).
#[derive(Debug)]
pub struct BlockingClient {
    agent: ureq::Agent,
    sent: RefCell<Vec<HttpRequest>>,
    waits: RefCell<Vec<u64>>,
    sleeps: bool,
}

impl Default for BlockingClient {
    fn default() -> Self {
        Self::new()
    }
}

impl BlockingClient {
    /// A client that takes HTTP error statuses as responses and never uses a proxy.
    #[must_use]
    pub fn new() -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Self {
            agent,
            sent: RefCell::new(Vec::new()),
            waits: RefCell::new(Vec::new()),
            sleeps: false,
        }
    }

    /// A client that really sleeps the retry waits (for command-line runs against a real
    /// server), and also records them.
    #[must_use]
    pub fn sleeping() -> Self {
        Self { sleeps: true, ..Self::new() }
    }

    /// The requests sent so far.
    #[must_use]
    pub fn sent(&self) -> Vec<HttpRequest> {
        self.sent.borrow().clone()
    }

    /// The waits asked for so far, in milliseconds.
    #[must_use]
    pub fn waits(&self) -> Vec<u64> {
        self.waits.borrow().clone()
    }
}

/// A response body read as it arrives.
pub struct BlockingBody {
    reader: ureq::BodyReader<'static>,
    chunks: usize,
}

impl std::fmt::Debug for BlockingBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingBody").field("chunks", &self.chunks).finish_non_exhaustive()
    }
}

impl HttpClient for BlockingClient {
    type Body = BlockingBody;

    async fn send(
        &self,
        request: &HttpRequest,
    ) -> Result<(ResponseHead, BlockingBody), HttpFailure> {
        self.sent.borrow_mut().push(request.clone());
        if request.method != "POST" {
            return Err(HttpFailure::Network(format!(
                "the test client only sends POST, not {}",
                request.method
            )));
        }
        let mut builder = self.agent.post(&request.url);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        if let Some(ms) = request.timeout_ms {
            builder = builder.config().timeout_global(Some(Duration::from_millis(ms))).build();
        }
        // ureq has no clock between body reads: the idle timeout bounds the wait for the head.
        if let Some(ms) = request.idle_timeout_ms {
            builder =
                builder.config().timeout_recv_response(Some(Duration::from_millis(ms))).build();
        }
        let response = builder.send(request.body.as_bytes()).map_err(failure)?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| {
                (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned())
            })
            .collect();
        let reader = response.into_body().into_reader();
        Ok((ResponseHead { status, headers }, BlockingBody { reader, chunks: 0 }))
    }

    async fn wait(&self, delay_ms: u64) {
        self.waits.borrow_mut().push(delay_ms);
        if self.sleeps {
            std::thread::sleep(Duration::from_millis(delay_ms));
        }
    }
}

/// A ureq error as the core's typed failure.
fn failure(error: ureq::Error) -> HttpFailure {
    match error {
        ureq::Error::Timeout(ureq::Timeout::RecvResponse) => HttpFailure::Stalled,
        ureq::Error::Timeout(_) => HttpFailure::TimedOut,
        ureq::Error::Io(error) if error.kind() == std::io::ErrorKind::TimedOut => {
            HttpFailure::TimedOut
        }
        ureq::Error::BodyExceedsLimit(_) => HttpFailure::TooLarge,
        error => HttpFailure::Network(error.to_string()),
    }
}

impl HttpBody for BlockingBody {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpFailure> {
        let mut buffer = vec![0; 8192];
        match self.reader.read(&mut buffer) {
            Ok(0) => Ok(None),
            Ok(read) => {
                buffer.truncate(read);
                self.chunks += 1;
                Ok(Some(buffer))
            }
            // The reader wraps ureq's own errors (a timeout) in `io::Error`.
            Err(error) => Err(failure(ureq::Error::from(error))),
        }
    }
}

/// A loopback server that answers each connection, in order, with the next canned reply
/// (raw bytes, written as they are, then the connection is closed), and keeps the requests.
#[derive(Debug)]
pub struct CannedServer {
    url: String,
    thread: Option<JoinHandle<Vec<String>>>,
}

impl CannedServer {
    /// Starts serving `replies` on a free loopback port.
    ///
    /// # Panics
    /// If no loopback port can be bound.
    #[must_use]
    pub fn start(replies: Vec<Vec<u8>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut requests = Vec::new();
            for reply in replies {
                let stream = loop {
                    match listener.accept() {
                        Ok((stream, _)) => break Some(stream),
                        Err(_) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        Err(_) => break None,
                    }
                };
                let Some(mut stream) = stream else { break };
                stream.set_nonblocking(false).ok();
                stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
                requests.push(read_request(&mut stream));
                stream.write_all(&reply).ok();
                stream.flush().ok();
            }
            requests
        });
        Self { url, thread: Some(thread) }
    }

    /// `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The requests received (head and body, as text), once every reply was served.
    ///
    /// # Panics
    /// If the server thread panicked.
    #[must_use]
    pub fn requests(mut self) -> Vec<String> {
        self.thread.take().map(|t| t.join().expect("the server thread")).unwrap_or_default()
    }
}

fn read_request(stream: &mut TcpStream) -> String {
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok();
    head + &String::from_utf8_lossy(&body)
}

/// A loopback server for one connection: it reads the request, then hands the connection to
/// a behaviour ([`silent`], [`endless`]) that reports whether the client went away before the
/// behaviour's own time limit.
#[derive(Debug)]
pub struct RawServer {
    url: String,
    thread: Option<JoinHandle<bool>>,
}

impl RawServer {
    /// Serves one connection on a free loopback port with `behaviour`.
    ///
    /// # Panics
    /// If no loopback port can be bound.
    #[must_use]
    pub fn start(behaviour: impl FnOnce(&mut TcpStream) -> bool + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let thread = std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else { return false };
            stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
            read_request(&mut stream);
            behaviour(&mut stream)
        });
        Self { url, thread: Some(thread) }
    }

    /// `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Waits for the behaviour to end: `true` if the client went away first.
    ///
    /// # Panics
    /// If the server thread panicked.
    #[must_use]
    pub fn client_left(mut self) -> bool {
        self.thread.take().is_some_and(|t| t.join().expect("the server thread"))
    }
}

/// Never answers: holds the connection until the client closes it or `limit` passes.
pub fn silent(limit: Duration) -> impl FnOnce(&mut TcpStream) -> bool + Send + 'static {
    move |stream| {
        let deadline = Instant::now() + limit;
        stream.set_read_timeout(Some(Duration::from_millis(20))).ok();
        let mut buffer = [0; 256];
        while Instant::now() < deadline {
            match stream.read(&mut buffer) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return true,
            }
        }
        false
    }
}

/// Answers `head` (a status line and headers, no length: the body runs to the close), then
/// writes `chunk` again and again until the client closes the connection or `limit` passes.
pub fn endless(
    head: String,
    chunk: Vec<u8>,
    limit: Duration,
) -> impl FnOnce(&mut TcpStream) -> bool + Send + 'static {
    move |stream| {
        let deadline = Instant::now() + limit;
        if stream.write_all(head.as_bytes()).is_err() {
            return true;
        }
        while Instant::now() < deadline {
            if stream.write_all(&chunk).is_err() {
                return true;
            }
        }
        false
    }
}

/// A raw HTTP/1.1 response with a `Content-Length` body.
#[must_use]
pub fn reply(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

/// A raw chunked HTTP/1.1 response; without `complete`, the connection closes before the last
/// (zero-length) chunk, as a server that died mid-stream would leave it.
#[must_use]
pub fn chunked(
    status: &str,
    headers: &[(&str, &str)],
    chunks: &[&[u8]],
    complete: bool,
) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\nTransfer-Encoding: chunked\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut out = out.into_bytes();
    for chunk in chunks {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    if complete {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    out
}

/// The workspace root.
#[must_use]
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the workspace").to_owned()
}

/// A running `@copilotkit/aimock` (its `llmock` server) on a free loopback port, stopped on
/// drop.
#[derive(Debug)]
pub struct Aimock {
    child: Child,
    url: String,
}

impl Aimock {
    /// Starts the mock with `fixtures` (a file or directory).
    ///
    /// # Errors
    /// When the npm package is not installed (run `npm ci`, which `cargo xtask test` does),
    /// Node is missing, or the server does not say where it listens within 30 seconds.
    pub fn start(fixtures: &Path) -> Result<Self, String> {
        let bin = workspace_root().join("node_modules/.bin/llmock");
        if !bin.exists() {
            return Err(format!(
                "{} is missing: run `npm ci` at the workspace root (`cargo xtask test` does)",
                bin.display()
            ));
        }
        let mut child = Command::new("node")
            .arg(&bin)
            .args(["--port", "0", "--host", "127.0.0.1", "--log-level", "info", "--fixtures"])
            .arg(fixtures)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start node (is Node.js installed?): {e}"))?;
        let stdout = child.stdout.take().expect("a piped stdout");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            // Reads every line, so the pipe never fills; the first URL is the address.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(at) = line.find("listening on http://") {
                    sender.send(line[at + "listening on ".len()..].trim().to_owned()).ok();
                }
            }
        });
        match receiver.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => Ok(Self { child, url }),
            Err(_) => {
                child.kill().ok();
                child.wait().ok();
                Err("aimock did not report its address within 30 s".to_owned())
            }
        }
    }

    /// `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Aimock {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}
