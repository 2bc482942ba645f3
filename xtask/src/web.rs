//! The browser app: `dist` (a static folder), `serve` (trunk's dev server on loopback), `size`
//! (gzip size of every file the page loads) and the browser tests (Playwright driving Debian's
//! Chromium against the built folder).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, root, run, section, setup};

/// Where `dist` writes the app.
pub fn dist_dir() -> PathBuf {
    root().join("dist")
}

/// trunk with the npm `.bin` folder first on PATH, so the pinned `wasm-opt` (binaryen 130) is
/// the one it finds (Debian's is too old for rustc 1.95's wasm).
fn trunk() -> Command {
    let mut command = Command::new("trunk");
    command.current_dir(root());
    let bin = root().join("node_modules/.bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin];
    paths.extend(std::env::split_paths(&path));
    command.env("PATH", std::env::join_paths(paths).expect("PATH entries"));
    command
}

/// `cargo xtask dist [--dev]`: builds the app into `dist/` (release, wasm-opt'd, unless
/// `--dev`), installing trunk, wasm-bindgen-cli and the npm tools when missing.
pub fn dist(args: &[String]) -> Result {
    let release = match args {
        [] => true,
        [flag] if flag == "--dev" => false,
        _ => return Err("usage: cargo xtask dist [--dev]".to_owned()),
    };
    build(release)?;
    eprintln!("xtask: the app is in {} (any static web server can host it)", dist_dir().display());
    size(&[])
}

fn build(release: bool) -> Result {
    setup::rust_targets()?;
    setup::wasm_bindgen_cli()?;
    setup::npm_packages()?;
    setup::trunk()?;
    // trunk reads no network (`offline = true`): the crates must be fetched already.
    run(crate::cargo().args(["fetch", "--target", "wasm32-unknown-unknown"]))?;
    let mut command = trunk();
    command.arg("build");
    if release {
        command.arg("--release");
    }
    run(&mut command)
}

/// `cargo xtask serve [--port N]`: builds and serves the app on 127.0.0.1 (port 8090 by
/// default: 8080 is llama.cpp's), rebuilding on changes.
pub fn serve(args: &[String]) -> Result {
    let port = match args {
        [] => 8090,
        [flag, port] if flag == "--port" => {
            port.parse().map_err(|_| format!("bad port {port:?}"))?
        }
        _ => return Err("usage: cargo xtask serve [--port N]".to_owned()),
    };
    setup::rust_targets()?;
    setup::wasm_bindgen_cli()?;
    setup::npm_packages()?;
    setup::trunk()?;
    run(crate::cargo().args(["fetch", "--target", "wasm32-unknown-unknown"]))?;
    eprintln!("xtask: serving http://127.0.0.1:{port}/ (Ctrl-C stops)");
    run(trunk().args(["serve", "--address", "127.0.0.1", "--port", &port.to_string()]))
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
    let (mut page, mut embedding) = ((0, 0), (0, 0));
    let (mut ui, mut worker) = (None, None);
    println!("{:>10} {:>10}  file", "bytes", "gzip -9");
    for file in &files {
        let raw = std::fs::metadata(file).map_err(|e| e.to_string())?.len();
        let gzip = gzip_size(file)?;
        let name = file.strip_prefix(&dir).unwrap_or(file).to_string_lossy().into_owned();
        // The embedding module and the example page are in the folder for other pages to use;
        // the app's page does not load them.
        let embedded = name.starts_with("examples") || name.starts_with("verity.");
        let total = if embedded { &mut embedding } else { &mut page };
        total.0 += raw;
        total.1 += gzip;
        match name.as_str() {
            "verity-web_bg.wasm" => ui = Some(gzip),
            "verity-worker_bg.wasm" => worker = Some(gzip),
            _ => {}
        }
        let note = if embedded { "  (embedding, not loaded by the app)" } else { "" };
        println!("{raw:>10} {gzip:>10}  {name}{note}");
    }
    println!("{:>10} {:>10}  what the app's page loads", page.0, page.1);
    println!("{:>10} {:>10}  the embedding's extra files", embedding.0, embedding.1);
    let (Some(ui), Some(worker)) = (ui, worker) else {
        return Err(format!("{}: the UI's or the worker's wasm is missing", dir.display()));
    };
    let worker_state =
        if worker <= WORKER_GOAL { "met" } else { "missed (README: where the bytes go)" };
    println!("the engine worker's wasm: {worker} B gzip, goal {WORKER_GOAL} B: {worker_state}");
    if ui > UI_GOAL {
        return Err(format!(
            "the UI's wasm is {ui} B gzip, over its {UI_GOAL} B goal: the page paints from it \
             (README's size section says where its bytes go and what keeps it small)"
        ));
    }
    println!("the UI's wasm: {ui} B gzip, goal {UI_GOAL} B: met");
    Ok(())
}

/// The goal for the UI's wasm, gzip -9 bytes: enforced (`size` fails over it, and with it
/// `cargo xtask dist` and the browser tests).
const UI_GOAL: u64 = 150_000;
/// The goal for the engine worker's wasm, gzip -9 bytes: reported (missed; the README says
/// where the bytes go and why they stay).
const WORKER_GOAL: u64 = 600_000;

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

fn gzip_size(file: &Path) -> Result<u64> {
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
pub fn browser_tests() -> Result {
    section("the app (release build)");
    build(true)?;
    size(&[])?;
    section("browser tests (Chromium)");
    setup::chromium()?;
    let tests = super::node_test_files("tests/browser")?;
    run(Command::new("node")
        .current_dir(root())
        .args(["--test", "--test-concurrency=1", "--test-reporter=spec"])
        .args(&tests))
}
