//! The worker's HTTP client honours the system proxy for other hosts and goes direct to
//! loopback. Its own process (no test harness): it sets `HTTP_PROXY` and `NO_PROXY` before any
//! thread starts, which a shared test process could not do safely.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A loopback HTTP/1.1 server on a thread of its own that answers every request with `body`;
/// returns its port and the request lines it has seen.
fn server(body: &'static str) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut head = [0u8; 4096];
            let n = stream.read(&mut head).unwrap_or(0);
            let text = String::from_utf8_lossy(&head[..n]);
            log.lock().unwrap().push(text.lines().next().unwrap_or_default().to_owned());
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, seen)
}

fn main() {
    let (proxy_port, through_proxy) = server("from the proxy\n");
    let (direct_port, direct) = server("direct\n");
    #[allow(unsafe_code)]
    // SAFETY: no other thread reads the environment: the two servers only accept and write.
    unsafe {
        std::env::set_var("HTTP_PROXY", format!("http://127.0.0.1:{proxy_port}"));
        std::env::set_var("http_proxy", format!("http://127.0.0.1:{proxy_port}"));
        std::env::remove_var("NO_PROXY");
        std::env::remove_var("no_proxy");
    }

    // Another host: through the proxy, which sees the absolute URL.
    let bytes =
        verity_restate::corpus::load_bytes("http://corpus.example/c.txt", u64::MAX).unwrap();
    assert_eq!(bytes, b"from the proxy\n");
    let proxied = through_proxy.lock().unwrap().clone();
    assert_eq!(proxied, ["GET http://corpus.example/c.txt HTTP/1.1"], "{proxied:?}");

    // Loopback: direct, the proxy sees nothing more.
    let url = format!("http://127.0.0.1:{direct_port}/c.txt");
    assert_eq!(verity_restate::corpus::load_bytes(&url, u64::MAX).unwrap(), b"direct\n");
    assert_eq!(direct.lock().unwrap().as_slice(), ["GET /c.txt HTTP/1.1"]);
    assert_eq!(through_proxy.lock().unwrap().len(), 1);
    let url = format!("http://localhost:{direct_port}/c.txt");
    assert_eq!(verity_restate::corpus::load_bytes(&url, u64::MAX).unwrap(), b"direct\n");
    assert_eq!(through_proxy.lock().unwrap().len(), 1);
    println!("proxy: other hosts through HTTP_PROXY, loopback direct: ok");
}
