//! `cargo xtask serve`: serves the app. The Leptos app is built by a later issue; until then
//! this serves the repository's `index.html`, which says so, on loopback.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

use crate::{Result, root};

pub fn serve(args: &[String]) -> Result {
    let port = match args {
        [] => 8080,
        [flag, port] if flag == "--port" => {
            port.parse().map_err(|_| format!("bad port {port:?}"))?
        }
        _ => return Err("usage: cargo xtask serve [--port N]".to_owned()),
    };
    let page = std::fs::read(root().join("index.html")).map_err(|e| format!("index.html: {e}"))?;
    let listener = TcpListener::bind(("127.0.0.1", port))
        .map_err(|e| format!("cannot listen on {port}: {e}"))?;
    eprintln!("xtask: serving http://127.0.0.1:{port}/ (Ctrl-C stops)");
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let mut request_line = String::new();
        if BufReader::new(&stream).read_line(&mut request_line).is_err() {
            continue;
        }
        let found =
            request_line.starts_with("GET / ") || request_line.starts_with("GET /index.html ");
        let (status, body): (&str, &[u8]) =
            if found { ("200 OK", &page) } else { ("404 Not Found", b"not found\n") };
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body));
    }
    Ok(())
}
