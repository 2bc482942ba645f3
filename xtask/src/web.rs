//! The browser app: `dist` (a static folder), `serve` (a static server on loopback that
//! rebuilds on changes), `size` (gzip size of every file the page loads) and the browser tests
//! (Playwright driving Debian's Chromium against the built folder).
//!
//! The app is built without a bundler, in the three steps a bundler would take: a cargo build
//! of the UI and of the worker for wasm32 (each with its own feature set: see [`build`]),
//! `wasm-bindgen --target web` on each, `wasm-opt -Oz` on each (release), and the page's
//! static files copied beside them. docs/design/web.md says why (trunk's
//! install alone cost CI eight minutes for these steps).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use crate::{Result, cargo, root, run, section, setup, target_dir};

/// Where `dist` writes the app.
pub fn dist_dir() -> PathBuf {
    root().join("dist")
}

/// The wasm binaries: (package and binary, the name in the folder, cargo's feature flags).
/// The UI (verity-web); the app's engine worker (verity-worker without `full-json-schema`: it
/// checks claims and answers, whose schemas are the core's own, and is half the size without
/// jsonschema); and the embedding's engine (the same worker with the whole of JSON Schema, for
/// `runStep`'s schemas). Each is its own `NAME.js` and `NAME_bg.wasm` in the folder.
const BINARIES: [(&str, &str, &[&str]); 3] = [
    ("verity-web", "verity-web", &[]),
    ("verity-worker", "verity-worker", &["--no-default-features"]),
    ("verity-worker", "verity-embed-worker", &[]),
];

/// The page's static files: (source in the workspace, name in the folder).
const FILES: [(&str, &str); 9] = [
    ("index.html", "index.html"),
    ("web/style.css", "style.css"),
    // The UI's module loader (the page runs no inline script).
    ("web/boot.js", "boot.js"),
    // The model in the tab (a page runs it for the engine), and the npm package it runs in a
    // page that is not cross-origin isolated (in one that is, the project's own build of
    // llama.cpp: `dist/llama/`, below). Loaded only when that provider is chosen.
    ("web/in-tab.js", "verity-in-tab.js"),
    ("node_modules/@wllama/wllama/esm/index.js", "wllama/index.js"),
    ("node_modules/@wllama/wllama/esm/wasm/wllama.wasm", "wllama/wllama.wasm"),
    // The worker's module entry; the UI and the embedding start it by this name.
    ("web/worker/worker.js", "verity-worker_loader.js"),
    // The embedding module, its types, and (below) the example page that uses it.
    ("web/embed/verity.js", "verity.js"),
    ("web/embed/verity.d.ts", "verity.d.ts"),
];

/// The Content-Security-Policy the page's meta tag states, with `frame-ancestors` (which only a
/// header can carry). As a header it covers the engine worker too, which holds the key and
/// makes the requests: a worker takes its policy from its script's response, never from the
/// page's meta tag. `connect-src *` because the worker must reach whatever provider endpoint
/// the user configures (https, or plain http on loopback or a keyless local network server;
/// the worker itself refuses to send a key over plain http off loopback). `worker-src blob:`
/// for the model in the tab in a page that is not isolated: wllama starts its worker from a
/// blob of its own code (the project's build starts its workers from its own files).
const CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; \
                   connect-src *; img-src 'self' data:; worker-src 'self' blob:; object-src 'none'; \
                   base-uri 'none'; frame-ancestors 'none'";

/// The security headers of every file of the app: sent by `serve` and by the browser tests'
/// server, and written by `dist` in the forms static hosts read ([`HOST_HEADER_FILES`]).
/// `Referrer-Policy: no-referrer`: a provider learns nothing of the page's address.
/// `X-Frame-Options` is `frame-ancestors 'none'` for browsers that predate it.
/// `Cross-Origin-Opener-Policy` and `Cross-Origin-Embedder-Policy` make the page cross-origin
/// isolated, which gives it `SharedArrayBuffer`, so the model in the tab runs on several
/// threads. `require-corp` rather than `credentialless`: the app loads nothing from another
/// origin but CORS requests (providers, a model's URL), which neither value blocks, and
/// Safari isolates a page only with `require-corp` (docs/design/web.md).
const HEADERS: [(&str, &str); 6] = [
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Embedder-Policy", "require-corp"),
];

/// The files `dist` writes so that a static host sends [`HEADERS`] (the README says which host
/// reads which): (name, how it is written).
const HOST_HEADER_FILES: [(&str, HeaderFile); 4] = [
    // Netlify and Cloudflare Pages.
    ("_headers", netlify_headers),
    ("vercel.json", vercel_json),
    // A snippet to include in nginx's `server` or `location` block.
    ("nginx.conf", nginx_snippet),
    // Apache with mod_headers.
    (".htaccess", apache_htaccess),
];

/// Writes one of [`HOST_HEADER_FILES`].
type HeaderFile = fn() -> String;

fn netlify_headers() -> String {
    let mut text = String::from("/*\n");
    for (name, value) in HEADERS {
        text.push_str(&format!("  {name}: {value}\n"));
    }
    text
}

fn vercel_json() -> String {
    let headers: Vec<String> = HEADERS
        .iter()
        .map(|(name, value)| format!("        {{\"key\": \"{name}\", \"value\": \"{value}\"}}"))
        .collect();
    format!(
        "{{\n  \"headers\": [\n    {{\n      \"source\": \"/(.*)\",\n      \"headers\": [\n{}\n      ]\n    }}\n  ]\n}}\n",
        headers.join(",\n")
    )
}

fn nginx_snippet() -> String {
    let mut text = String::from(
        "# Verity's security headers: include this file in the server block serving dist/.\n",
    );
    for (name, value) in HEADERS {
        text.push_str(&format!("add_header {name} \"{value}\" always;\n"));
    }
    text
}

fn apache_htaccess() -> String {
    let mut text = String::from("# Verity's security headers (Apache with mod_headers).\n");
    for (name, value) in HEADERS {
        text.push_str(&format!("Header always set {name} \"{value}\"\n"));
    }
    text
}

/// `cargo xtask dist [--dev]`: builds the app into `dist/` (release, wasm-opt'd, unless
/// `--dev`), installing wasm-bindgen-cli and the npm tools when missing.
pub fn dist(args: &[String]) -> Result {
    let release = match args {
        [] => true,
        [flag] if flag == "--dev" => false,
        _ => return Err("usage: cargo xtask dist [--dev]".to_owned()),
    };
    build(release)?;
    eprintln!("xtask: the app is in {} (any static web server can host it)", dist_dir().display());
    // The size goals are the shipped (release) app's; a dev build's wasm is unoptimised.
    if release { size(&[]) } else { Ok(()) }
}

/// Builds the app into `dist/`: written beside it first and swapped in whole, so a server
/// reading the folder never sees half a build.
fn build(release: bool) -> Result {
    setup::rust_targets()?;
    setup::wasm_bindgen_cli()?;
    setup::npm_packages()?;
    let profile = if release { "wasm-release" } else { "dev" };
    // One cargo build per binary, not one for both: built together, the UI's dependencies
    // take the worker's features too (serde_json's `float_roundtrip` and `raw_value`, regex's
    // engines, more web-sys), and the UI's wasm grew from 148.4 KB to 171.0 KB gzip, over its
    // 150 KB budget. The crates they share are compiled twice for it.
    let built = target_dir().join("wasm32-unknown-unknown").join(if release {
        "wasm-release"
    } else {
        "debug"
    });
    let staging = root().join("dist.partial");
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    }
    std::fs::create_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    // Each bound as soon as it is built: the two builds of the worker write the same file.
    for (package, name, features) in BINARIES {
        run(cargo()
            .args(["build", "--target", "wasm32-unknown-unknown", "--profile", profile])
            .args(["-p", package, "--bin", package])
            .args(features))?;
        run(Command::new("wasm-bindgen")
            .args(["--target", "web", "--no-typescript", "--out-name", name, "--out-dir"])
            .arg(&staging)
            .arg(built.join(format!("{package}.wasm"))))?;
        if release {
            let wasm = staging.join(format!("{name}_bg.wasm"));
            // -Os, not -Oz: what the browser downloads is the gzip, and -Os's code compresses
            // better (measured on this app: the UI 149,224 -> 148,559 B gzip, the worker
            // 1,042,815 -> 1,041,037 B, though both are larger raw). The page's two are
            // optimised until the passes change nothing more (`--converge`: the engine
            // 535,086 -> 534,296 B gzip, ~20 s more), and their `producers` section dropped;
            // verity.js's engine, not in the page's budget, is not worth the time.
            let page = name != "verity-embed-worker";
            run(Command::new(root().join("node_modules/.bin/wasm-opt"))
                .arg(format!("--output={}", wasm.display()))
                .arg("-Os")
                .args(if page { &["--converge", "--strip-producers"][..] } else { &[] })
                .arg(&wasm)
                .arg("--low-memory-unused"))?;
        }
    }
    for (from, to) in FILES {
        copy(&root().join(from), &staging.join(to))?;
    }
    // The model in the tab's own llama.cpp, and the worker that runs it.
    let llama = crate::tab_llama::build()?;
    for file in crate::tab_llama::OUTPUTS {
        copy(&llama.join(file), &staging.join("llama").join(file))?;
    }
    copy(&root().join("web/llama/worker.js"), &staging.join("llama/worker.js"))?;
    stamp_build(&staging)?;
    if release {
        minify(&staging)?;
    }
    copy_dir(&root().join("examples"), &staging.join("examples"))?;
    for (name, write) in HOST_HEADER_FILES {
        let file = staging.join(name);
        std::fs::write(&file, write()).map_err(|e| format!("{}: {e}", file.display()))?;
    }
    let dist = dist_dir();
    if dist.exists() {
        std::fs::remove_dir_all(&dist).map_err(|e| format!("{}: {e}", dist.display()))?;
    }
    std::fs::rename(&staging, &dist)
        .map_err(|e| format!("{} -> {}: {e}", staging.display(), dist.display()))
}

/// Writes this build's id in place of `__VERITY_BUILD__` in the page's loader and the worker's:
/// the engine tells each page its build first, and a page of another build (a tab left open
/// over a deploy keeps the old engine running) says so instead of misreading its messages.
/// The id is a hash (FNV-1a, 64 bits) of the wasm binaries and their glue: any change to
/// any is another build; the same sources built the same way are the same build.
fn stamp_build(staging: &Path) -> Result {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (_, bin, _) in BINARIES {
        for file in [format!("{bin}_bg.wasm"), format!("{bin}.js")] {
            let path = staging.join(file);
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            for byte in bytes {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    let build = format!("{hash:016x}");
    for file in ["boot.js", "verity-worker_loader.js"] {
        let path = staging.join(file);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if !text.contains("\"__VERITY_BUILD__\"") {
            return Err(format!(
                "{}: no \"__VERITY_BUILD__\" to write the build's id in",
                path.display()
            ));
        }
        let text = text.replace("\"__VERITY_BUILD__\"", &format!("\"{build}\""));
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Minifies the folder's own JavaScript modules in place (`web/minify.mjs`, with the npm
/// package `oxc-minify`): the page's loader and the wasm-bindgen glue it loads are 23 KB gzip
/// as written and 15 KB minified. After [`stamp_build`], whose id is a string literal the
/// minifier keeps. wllama's files are shipped as its package builds them.
fn minify(staging: &Path) -> Result {
    let mut files = Vec::new();
    collect(staging, &mut files)?;
    // The folder's own modules: not wllama's, one folder down.
    files.retain(|path| {
        path.parent() == Some(staging) && path.extension().is_some_and(|ext| ext == "js")
    });
    files.sort();
    run(Command::new("node").current_dir(root()).arg("web/minify.mjs").args(files))
}

fn copy(from: &Path, to: &Path) -> Result {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    std::fs::copy(from, to)
        .map(drop)
        .map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()))
}

fn copy_dir(from: &Path, to: &Path) -> Result {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let target = to.join(path.file_name().unwrap_or_default());
        if path.is_dir() { copy_dir(&path, &target)? } else { copy(&path, &target)? }
    }
    Ok(())
}

/// `cargo xtask serve [--port N] [--release]`: builds the app and serves `dist/` on 127.0.0.1
/// (port 8090 by default: 8080 is llama.cpp's), with the page's security headers, rebuilding
/// when a source file changes (checked every second; a failed rebuild keeps the last app).
pub fn serve(args: &[String]) -> Result {
    let usage = || "usage: cargo xtask serve [--port N] [--release]".to_owned();
    let (mut port, mut release) = (8090_u16, false);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--release" => release = true,
            "--port" => {
                let value = args.next().ok_or_else(usage)?;
                port = value.parse().map_err(|_| format!("bad port {value:?}"))?;
            }
            _ => return Err(usage()),
        }
    }
    let listener = TcpListener::bind(("127.0.0.1", port))
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))?;
    let mut stamp = newest_source();
    build(release)?;
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let now = newest_source();
            if now > stamp {
                stamp = now;
                eprintln!("xtask: a source file changed; rebuilding");
                match build(release) {
                    Ok(()) => eprintln!("xtask: rebuilt; reload the page"),
                    Err(error) => {
                        eprintln!("xtask: the rebuild failed (still serving the last app): {error}")
                    }
                }
            }
        }
    });
    eprintln!("xtask: serving http://127.0.0.1:{port}/ (Ctrl-C stops)");
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || {
            if let Err(error) = answer(stream) {
                eprintln!("xtask: serve: {error}");
            }
        });
    }
    Ok(())
}

/// The newest modification time under the folders and files the app is built from.
fn newest_source() -> SystemTime {
    fn walk(path: &Path, newest: &mut SystemTime) {
        let Ok(meta) = std::fs::metadata(path) else { return };
        if meta.is_dir() {
            for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
                walk(&entry.path(), newest);
            }
        } else if let Ok(modified) = meta.modified() {
            *newest = (*newest).max(modified);
        }
    }
    let mut newest = SystemTime::UNIX_EPOCH;
    for source in
        ["index.html", "examples", "core/src", "core/Cargo.toml", "web", "Cargo.toml", "Cargo.lock"]
    {
        walk(&root().join(source), &mut newest);
    }
    newest
}

/// Answers one request for a file of `dist/` (GET or HEAD; no path leaves the folder).
fn answer(mut stream: TcpStream) -> Result {
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let mut head = String::new();
    let mut reader = BufReader::new((&stream).take(16 * 1024));
    reader.read_line(&mut head).map_err(|e| e.to_string())?;
    // The rest of the request's head is read too (and ignored): closing a socket with unread
    // bytes resets the connection, which can cut off the response on its way.
    let mut line = String::new();
    while reader.read_line(&mut line).map_err(|e| e.to_string())? > 0 && !line.trim_end().is_empty()
    {
        line.clear();
    }
    let mut words = head.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split(['?', '#']).next().unwrap_or("");
    let file = resolve(path);
    let (status, kind, body) = match (method, file) {
        ("GET" | "HEAD", Some(file)) => match std::fs::read(&file) {
            Ok(body) => ("200 OK", content_type(&file), body),
            Err(_) => ("404 Not Found", "text/plain; charset=utf-8", b"not found\n".to_vec()),
        },
        ("GET" | "HEAD", None) => {
            ("404 Not Found", "text/plain; charset=utf-8", b"not found\n".to_vec())
        }
        _ => {
            ("405 Method Not Allowed", "text/plain; charset=utf-8", b"GET or HEAD only\n".to_vec())
        }
    };
    let mut header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in HEADERS {
        header.push_str(&format!("{name}: {value}\r\n"));
    }
    header.push_str("\r\n");
    stream.write_all(header.as_bytes()).map_err(|e| e.to_string())?;
    if method != "HEAD" {
        stream.write_all(&body).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The file of `dist/` a request path names: `/` and folders mean their `index.html`; a
/// path with `..`, a backslash or a percent sign names nothing (the app's files need none).
fn resolve(path: &str) -> Option<PathBuf> {
    let relative = path.strip_prefix('/')?;
    if relative.contains(['\\', '%']) {
        return None;
    }
    let relative = Path::new(relative);
    if !relative.components().all(|part| matches!(part, Component::Normal(_))) {
        return None;
    }
    let mut file = dist_dir().join(relative);
    if file.is_dir() {
        file = file.join("index.html");
    }
    file.is_file().then_some(file)
}

fn content_type(file: &Path) -> &'static str {
    match file.extension().and_then(|ext| ext.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "wasm" => "application/wasm",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "jsonl" => "application/jsonl",
        "ts" | "txt" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        _ => "application/octet-stream",
    }
}

/// `cargo xtask size`: the gzip size of every file in `dist/`, and the total.
pub fn size(_args: &[String]) -> Result {
    let dir = dist_dir();
    let mut files = Vec::new();
    collect(&dir, &mut files)?;
    files.sort();
    if files.is_empty() {
        return Err(format!("{} is empty: run cargo xtask dist first", dir.display()));
    }
    let (mut page, mut embedding, mut in_tab) = ((0, 0), (0, 0), (0, 0));
    let (mut ui, mut worker) = (None, None);
    println!("{:>10} {:>10}  file", "bytes", "gzip -9");
    for file in &files {
        let raw = std::fs::metadata(file).map_err(|e| e.to_string())?.len();
        let gzip = gzip_size(file)?;
        let name = file.strip_prefix(&dir).unwrap_or(file).to_string_lossy().into_owned();
        // The headers for static hosts are read by the server, never by a browser.
        if HOST_HEADER_FILES.iter().any(|(file, _)| *file == name) {
            println!("{raw:>10} {:>10}  {name}  (headers for static hosts, not loaded)", "-");
            continue;
        }
        // The embedding module, its engine (with the whole of JSON Schema) and the example page
        // are in the folder for other pages to use; the app's page does not load them.
        let embedded = name.starts_with("examples")
            || name.starts_with("verity.")
            || name.starts_with("verity-embed-worker");
        // The model in the tab (its page module, llama.cpp's build and wllama's) loads only
        // when it is chosen.
        let model =
            name.starts_with("wllama") || name.starts_with("llama/") || name == "verity-in-tab.js";
        let total = if embedded {
            &mut embedding
        } else if model {
            &mut in_tab
        } else {
            &mut page
        };
        total.0 += raw;
        total.1 += gzip;
        match name.as_str() {
            "verity-web_bg.wasm" => ui = Some(gzip),
            "verity-worker_bg.wasm" => worker = Some(gzip),
            _ => {}
        }
        let note = if embedded {
            "  (embedding, not loaded by the app)"
        } else if model {
            "  (the model in the tab, loaded only when chosen)"
        } else {
            ""
        };
        println!("{raw:>10} {gzip:>10}  {name}{note}");
    }
    println!("{:>10} {:>10}  what the app's page loads", page.0, page.1);
    println!("{:>10} {:>10}  the embedding's extra files", embedding.0, embedding.1);
    println!("{:>10} {:>10}  the model in the tab's files", in_tab.0, in_tab.1);
    let (Some(ui), Some(worker)) = (ui, worker) else {
        return Err(format!("{}: the UI's or the worker's wasm is missing", dir.display()));
    };
    within(
        "the app's engine worker's wasm",
        worker,
        WORKER_GOAL,
        " (docs/BENCHMARKS.md says where its bytes go: it is built without jsonschema)",
    )?;
    within(
        "what the app's page loads",
        page.1,
        PAGE_GOAL,
        ": the engine is ready only when all of it is in (docs/BENCHMARKS.md says where the bytes \
         go)",
    )?;
    within(
        "the UI's wasm",
        ui,
        UI_GOAL,
        ": the page paints from it (docs/BENCHMARKS.md says where its bytes go and what keeps it \
         small)",
    )
}

/// Fails when `what` (`bytes` gzip) is over its `goal`, saying `why` it matters; else says it
/// is met.
fn within(what: &str, bytes: u64, goal: u64, why: &str) -> Result {
    if bytes > goal {
        return Err(format!("{what} is {bytes} B gzip, over its {goal} B goal{why}"));
    }
    println!("{what}: {bytes} B gzip, goal {goal} B: met");
    Ok(())
}

/// The goal for the UI's wasm, gzip -9 bytes: enforced (`size` fails over it, and with it
/// `cargo xtask dist` and the browser tests). 150,000 B until the tab issue withdrew that cap for
/// 200,000 B: a feature goes where it belongs, not where it costs fewest bytes.
const UI_GOAL: u64 = 200_000;
/// The goal for the app's engine worker's wasm, gzip -9 bytes: enforced like the UI's since the
/// app's engine is built without jsonschema (1.21 MB before; docs/BENCHMARKS.md).
const WORKER_GOAL: u64 = 600_000;
/// The goal for all the app's page loads, gzip -9 bytes: enforced like the two wasm files' since
/// it was met (2026-12-06: the engine's tagged enums read through a `Value`, and its
/// configurations without paths; docs/BENCHMARKS.md).
const PAGE_GOAL: u64 = 750_000;

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> Result {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            collect(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

/// The size of `file` compressed with `gzip -9`.
pub fn gzip_size(file: &Path) -> Result<u64> {
    let out = Command::new("gzip")
        .args(["-9", "-c"])
        .arg(file)
        .output()
        .map_err(|e| format!("cannot run gzip: {e}"))?;
    if !out.status.success() {
        return Err(format!("gzip failed on {}", file.display()));
    }
    Ok(out.stdout.len() as u64)
}

/// Builds the release app and runs the browser tests (`tests/browser/*.test.mjs`, Node's test
/// runner, Playwright over Debian's Chromium), screenshots in `target/browser-screenshots/`.
/// The browser tests; `llama` is the base URL of a real llama.cpp server for the tests that
/// use one (`VERITY_LLAMA_URL`; they are skipped, saying so, without it).
pub fn browser_tests(llama: Option<&str>) -> Result {
    section("the app (release build of the UI and the worker)");
    build(true)?;
    size(&[])?;
    section("the model in the tab's kernels against ggml's reference kernels (Node)");
    crate::tab_llama::check_kernels()?;
    section("browser tests (Chromium, and one in Firefox)");
    setup::chromium()?;
    setup::firefox()?;
    let tests = super::node_test_files("tests/browser")?;
    let mut node = Command::new("node");
    if let Some(url) = llama {
        node.env("VERITY_LLAMA_URL", url);
        // SmolLM2's GGUF (98 MB) for most tests of the model in the tab
        // (tests/browser/in-tab.test.mjs): the tab loads it in seconds; Qwen-0.5B's (491 MB,
        // already installed for the server above) for the one that checks a claim through the
        // verifier route whose weights were fitted on it.
        node.env("VERITY_GGUF", super::llama::gguf()?);
        node.env("VERITY_QWEN_GGUF", super::llama::Model::Qwen05.gguf()?);
    }
    run(node
        .current_dir(root())
        .args(["--test", "--test-concurrency=1", "--test-reporter=spec"])
        .args(&tests))
}
