//! Project automation. `cargo xtask <command>`:
//!
//! - `test`: every check CI runs (installs what it needs when missing).
//! - `conformance FILE...`: replays scenario files through the real machines.
//! - `eval FILE.jsonl [FLAGS]`: claim-check accuracy on a labelled claim file.
//! - `bench step [SECONDS]`: the step benchmark, natively and in wasm under Node.
//! - `bench claim [SECONDS]`: the claim-check benchmark (cheap and escalation routes), likewise.
//! - `bench retrieve FILE [--corpus CORPUS]`: retrieval figures beside MiniSearch's.
//! - `batch CLAIMS.jsonl [--corpus C.jsonl] [--provider CONFIG.json] [--workers N]`: a durable batch on Restate.
//! - `dist [--dev]`: builds the browser app into `dist/` (a static folder).
//! - `serve [--port N]`: builds and serves the app on <http://127.0.0.1:8090>.
//! - `size`: the gzip size of every file the page loads.
//! - `component [--test]`: builds the WebAssembly component, prints its size, transpiles it
//!   with jco; `--test` runs its wasmtime and Node tests.
//!
//! Only the standard library is used here, so `cargo xtask` compiles in seconds.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod batch;
mod bench;
mod component;
mod web;

type Result<T = ()> = std::result::Result<T, String>;

const USAGE: &str = "usage: cargo xtask <test | conformance FILE... | eval FILE.jsonl \
     | bench step|claim|retrieve|batch | batch CLAIMS.jsonl [FLAGS] | dist [--dev] | serve [--port N] \
     | size | component [--test]>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(),
        Some("conformance") => conformance(&args[1..]),
        Some("eval") => eval(&args[1..]),
        Some("bench") => bench::bench(&args[1..]),
        Some("batch") => batch::batch(&args[1..]),
        Some("serve") => web::serve(&args[1..]),
        Some("dist") => web::dist(&args[1..]),
        Some("size") => web::size(&args[1..]),
        Some("component") => component::component(&args[1..]),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the xtask crate's parent).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_owned()
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    command.current_dir(root());
    command
}

/// The Node test files (`*.test.mjs`) in the workspace folder `dir`, sorted.
fn node_test_files(dir: &str) -> Result<Vec<PathBuf>> {
    let mut tests: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .map_err(|e| format!("{dir}: {e}"))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.to_string_lossy().ends_with(".test.mjs"))
        .collect();
    tests.sort();
    Ok(tests)
}

/// Runs `command`, echoing it, and fails when it fails.
fn run(command: &mut Command) -> Result {
    eprintln!("xtask: $ {}", describe(command));
    let status =
        command.status().map_err(|e| format!("cannot start {}: {e}", describe(command)))?;
    if status.success() { Ok(()) } else { Err(format!("failed ({status}): {}", describe(command))) }
}

/// Runs `command` and returns its standard output.
fn output(command: &mut Command) -> Result<String> {
    let out = command.output().map_err(|e| format!("cannot start {}: {e}", describe(command)))?;
    if !out.status.success() {
        return Err(format!(
            "failed ({}): {}\n{}",
            out.status,
            describe(command),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

fn section(title: &str) {
    eprintln!("\nxtask: ==== {title} ====");
}

/// Every check, in the order that fails fastest.
fn test() -> Result {
    setup::rust_targets()?;
    section("format");
    run(cargo().args(["fmt", "--all", "--check"]))?;
    section("clippy");
    run(cargo().args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    section("docs (warnings denied)");
    run(cargo().env("RUSTDOCFLAGS", "-D warnings").args([
        "doc",
        "-p",
        "verity-core",
        "--no-deps",
    ]))?;
    component::test()?; // before the native tests, which include the component's (built here)
    section("native tests");
    setup::npm_packages()?;
    run(cargo().args(["test", "--workspace"]))?;
    section("conformance");
    let suite = root().join("tests/conformance/scenarios.json");
    conformance_with(&[suite.display().to_string()])?;
    section("no tokio in the core's wasm dependency tree");
    no_tokio()?;
    section("core tests and the conformance suite in wasm (Node)");
    setup::wasm_bindgen_cli()?;
    run(cargo().args(["test", "-p", "verity-core", "--target", "wasm32-unknown-unknown"]))?;
    // Only the suite: the crate's binaries and HTTP tests are native.
    run(cargo().args([
        "test",
        "-p",
        "verity-tests",
        "--test",
        "conformance",
        "--target",
        "wasm32-unknown-unknown",
    ]))?;
    web::browser_tests()?;
    eprintln!("\nxtask: all checks passed");
    Ok(())
}

fn conformance(args: &[String]) -> Result {
    if args.iter().all(|arg| arg.starts_with('-')) {
        return Err("usage: cargo xtask conformance [--kind step|claim] FILE...".to_owned());
    }
    conformance_with(args)
}

fn conformance_with(args: &[String]) -> Result {
    let args = user_paths(args)?;
    run(cargo()
        .args(["run", "--quiet", "-p", "verity-tests", "--bin", "conformance", "--"])
        .args(&args))
}

/// `cargo xtask eval FILE.jsonl [--retriever bm25|keyword] [--k N] [--provider CONFIG.json] [--retries N]`.
fn eval(args: &[String]) -> Result {
    if args.is_empty() {
        return Err("usage: cargo xtask eval FILE.jsonl [--retriever bm25|keyword] [--k N] [--provider CONFIG.json] [--retries N]".to_owned());
    }
    let args = user_paths(args)?;
    run(cargo()
        .args(["run", "--quiet", "--release", "-p", "verity-tests", "--bin", "eval", "--"])
        .args(&args))
}

/// Arguments naming existing files, made absolute: commands run from the workspace root, but
/// paths are the user's, relative to where they stand.
fn user_paths(args: &[String]) -> Result<Vec<String>> {
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    Ok(args
        .iter()
        .map(|arg| {
            let path = cwd.join(arg);
            if arg.starts_with('-') || Path::new(arg).is_absolute() || !path.exists() {
                arg.clone()
            } else {
                path.display().to_string()
            }
        })
        .collect())
}

fn no_tokio() -> Result {
    let tree = output(cargo().args([
        "tree",
        "-p",
        "verity-core",
        "--target",
        "wasm32-unknown-unknown",
        "-e",
        "normal",
        "--prefix",
        "none",
    ]))?;
    let crates = tree.lines().count();
    if let Some(line) = tree.lines().find(|line| line.starts_with("tokio")) {
        return Err(format!("verity-core depends on {line} for wasm32-unknown-unknown"));
    }
    eprintln!("xtask: {crates} crates in verity-core's normal wasm tree, no tokio");
    Ok(())
}

mod setup {
    //! Installs what the checks need when it is missing.

    use super::{Result, cargo, output, root, run};
    use std::process::Command;

    pub fn rust_targets() -> Result {
        let installed = output(Command::new("rustup").args(["target", "list", "--installed"]))?;
        let missing: Vec<&str> = ["wasm32-unknown-unknown", "wasm32-wasip2"]
            .into_iter()
            .filter(|target| !installed.lines().any(|line| line.trim() == *target))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        run(Command::new("rustup").args(["target", "add"]).args(&missing))
    }

    /// The wasm-bindgen version in Cargo.lock; the CLI must match it exactly.
    pub fn wasm_bindgen_version() -> Result<String> {
        let lock = std::fs::read_to_string(root().join("Cargo.lock")).map_err(|e| e.to_string())?;
        let mut lines = lock.lines();
        while let Some(line) = lines.next() {
            if line == "name = \"wasm-bindgen\""
                && let Some(version) = lines.next().and_then(|l| l.strip_prefix("version = \""))
            {
                return Ok(version.trim_end_matches('"').to_owned());
            }
        }
        Err("wasm-bindgen is not in Cargo.lock".to_owned())
    }

    /// wasm-bindgen and wasm-bindgen-test-runner at the locked version, installed with cargo
    /// (without `--locked`: the CLI's own lockfile pins a crate the registry lacks).
    pub fn wasm_bindgen_cli() -> Result {
        let version = wasm_bindgen_version()?;
        let installed = Command::new("wasm-bindgen-test-runner")
            .arg("--version")
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default();
        if installed.split_whitespace().any(|word| word == version) {
            return Ok(());
        }
        eprintln!("xtask: installing wasm-bindgen-cli {version} (several minutes, once)");
        run(cargo()
            .env("CARGO_PROFILE_RELEASE_LTO", "false")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
            .args(["install", "wasm-bindgen-cli", "--version", &version]))
    }

    /// The npm packages of package-lock.json (the mock provider server, wasm-opt, Playwright's
    /// driver, axe-core), installed with `npm ci` when one is missing.
    pub fn npm_packages() -> Result {
        let needed = [
            "@copilotkit/aimock",
            "@restatedev/restate-server",
            "binaryen",
            "playwright-core",
            "axe-core",
            "minisearch",
        ];
        if needed
            .iter()
            .all(|name| root().join("node_modules").join(name).join("package.json").is_file())
        {
            return Ok(());
        }
        node()?;
        run(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(root()))
    }

    /// trunk 0.21.14 (newer ones need a newer rustc), built without LTO so the install takes
    /// about ten minutes instead of thirty.
    pub fn trunk() -> Result {
        let installed = Command::new("trunk")
            .arg("--version")
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default();
        if installed.split_whitespace().any(|word| word == TRUNK_VERSION) {
            return Ok(());
        }
        eprintln!("xtask: installing trunk {TRUNK_VERSION} (about ten minutes, once)");
        run(cargo()
            .env("CARGO_PROFILE_RELEASE_LTO", "false")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
            .args(["install", "trunk", "--version", TRUNK_VERSION, "--locked"]))
    }

    const TRUNK_VERSION: &str = "0.21.14";

    /// Debian's Chromium for the browser tests (never a browser a tool downloads itself).
    pub fn chromium() -> Result {
        if std::path::Path::new("/usr/bin/chromium").is_file() {
            return Ok(());
        }
        eprintln!("xtask: installing Debian's chromium");
        run(Command::new("apt-get").args(["update", "-qq"]))?;
        run(Command::new("apt-get").args(["install", "-y", "-qq", "chromium"]))
    }

    pub fn node() -> Result {
        output(Command::new("node").arg("--version"))
            .map(drop)
            .map_err(|_| "Node.js is needed for the wasm checks; install nodejs".to_owned())
    }
}
