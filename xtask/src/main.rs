//! Project automation. `cargo xtask <command>`:
//!
//! - `test`: every check CI runs (installs what it needs when missing).
//! - `conformance FILE...`: replays scenario files through the real machines.
//! - `eval FILE.jsonl [FLAGS]`: claim-check accuracy on a labelled claim file.
//! - `bench step [SECONDS]`: the step benchmark, natively and in wasm under Node.
//! - `bench claim [SECONDS]`: the claim-check benchmark (cheap and escalation routes), likewise.
//! - `bench retrieve FILE [--corpus CORPUS]`: retrieval figures beside MiniSearch's.
//! - `bench wasm-kernels [ROUNDS]`: llama.cpp's wasm kernels against ours (`bench/wasm-kernels`).
//! - `batch CLAIMS.jsonl [--corpus C.jsonl] [--provider CONFIG.json] [--workers N]`: a durable batch on Restate.
//! - `dist [--dev]`: builds the browser app into `dist/` (a static folder).
//! - `serve [--port N] [--release]`: builds and serves the app on <http://127.0.0.1:8090>,
//!   rebuilding when a source file changes.
//! - `size`: the gzip size of every file the page loads.
//! - `component [--test]`: builds the WebAssembly component, prints its size, transpiles it
//!   with jco; `--test` runs its wasmtime and Node tests.
//! - `llama [--model smollm2|qwen0.5|qwen1.5] [--port N] [--eval]`: installs and starts a real
//!   llama.cpp server with that model (SmolLM2-135M by default) on a free loopback port (or N)
//!   and prints the provider file for it (one JSON line); `--eval` runs the real-model check of
//!   `test` (the verifier route with Qwen-0.5B on the balanced dev sample) and stops.
//! - `fit [--model qwen0.5|qwen1.5] [--claims FILE] [--rescore]`: fits the verifier route's
//!   weights (`core/src/claim/verifier-weights-<model>.json`) on labelled dev claims.
//!
//! Only the standard library is used here, so `cargo xtask` compiles in seconds.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

mod batch;
mod bench;
mod component;
mod kernels;
mod llama;
mod tab_llama;
mod web;

type Result<T = ()> = std::result::Result<T, String>;

const USAGE: &str = "usage: cargo xtask <test | conformance FILE... | eval FILE.jsonl \
     | bench step|claim|retrieve|batch | batch CLAIMS.jsonl [FLAGS] | dist [--dev] | serve [--port N] [--release] \
     | size | component [--test] | llama [--model M] [--port N] [--parallel N] [--eval] | fit [--model M]>";

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
        Some("llama") => llama::command(&args[1..]),
        Some("fit") => llama::fit(&args[1..]),
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

/// Runs `command`, echoing it, and fails when it fails. A cargo command's standard error is
/// read line by line (and echoed): the crates it compiles are counted into the open section's
/// row of the timing table.
fn run(command: &mut Command) -> Result {
    let described = describe(command);
    eprintln!("xtask: $ {described}");
    let cannot_start = |e: std::io::Error| format!("cannot start {described}: {e}");
    let status = if command.get_program() == cargo().get_program() {
        let mut child = command.stderr(Stdio::piped()).spawn().map_err(cannot_start)?;
        let mut compiled = 0;
        for line in BufReader::new(child.stderr.take().expect("piped")).lines() {
            let Ok(line) = line else { break };
            eprintln!("{line}");
            let word = line.trim_start().split(' ').next().unwrap_or("");
            compiled += usize::from(matches!(word, "Compiling" | "Checking" | "Documenting"));
        }
        timing::compiled(compiled);
        child.wait().map_err(|e| format!("{described}: {e}"))?
    } else {
        command.status().map_err(cannot_start)?
    };
    if status.success() { Ok(()) } else { Err(format!("failed ({status}): {described}")) }
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

/// Starts a section of the output (and a row of the timing table).
fn section(title: &str) {
    eprintln!("\nxtask: ==== {title} ====");
    timing::start(title);
}

mod timing {
    //! The wall time of every section of a run, and what each installed or built, printed as
    //! one table at the end (`cargo xtask test` prints it whether the run passed or not).

    use std::sync::Mutex;
    use std::time::Instant;

    struct Row {
        title: String,
        started: Instant,
        seconds: Option<f64>,
        compiled: usize,
        notes: Vec<String>,
    }

    static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());

    fn rows() -> std::sync::MutexGuard<'static, Vec<Row>> {
        ROWS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn close(rows: &mut [Row]) {
        if let Some(row) = rows.last_mut()
            && row.seconds.is_none()
        {
            row.seconds = Some(row.started.elapsed().as_secs_f64());
        }
    }

    /// Closes the open row and opens one named `title`.
    pub fn start(title: &str) {
        let mut rows = rows();
        close(&mut rows);
        rows.push(Row {
            title: title.to_owned(),
            started: Instant::now(),
            seconds: None,
            compiled: 0,
            notes: Vec::new(),
        });
    }

    /// Counts `crates` compiled (or checked, or documented) by a cargo command of the open row.
    pub fn compiled(crates: usize) {
        if let Some(row) = rows().last_mut() {
            row.compiled += crates;
        }
    }

    /// Adds what the open row installed or built (`"installed Debian's chromium"`).
    pub fn note(text: impl Into<String>) {
        if let Some(row) = rows().last_mut() {
            row.notes.push(text.into());
        }
    }

    /// The table of every row so far, the open one closed.
    pub fn table() -> String {
        let mut rows = rows();
        close(&mut rows);
        let width = rows.iter().map(|row| row.title.chars().count()).max().unwrap_or(7).max(7);
        let mut text =
            format!("{:<width$}  {:>8}  what was installed or built\n", "section", "seconds");
        let mut total = 0.0;
        for row in rows.iter() {
            let seconds = row.seconds.unwrap_or_default();
            total += seconds;
            let mut what = row.notes.clone();
            if row.compiled > 0 {
                what.push(format!("{} crates compiled", row.compiled));
            }
            let what = if what.is_empty() { "-".to_owned() } else { what.join("; ") };
            text.push_str(&format!("{:<width$}  {seconds:>8.1}  {what}\n", row.title));
        }
        text.push_str(&format!("{:<width$}  {total:>8.1}\n", "total"));
        text
    }
}

/// Every check, in the order that fails fastest, then the time each section took.
fn test() -> Result {
    let result = checks();
    eprintln!("\nxtask: wall time by section\n{}", timing::table());
    result?;
    eprintln!("xtask: all checks passed");
    Ok(())
}

/// The checks. Each artifact is built once (DESIGN.md, "Why each build exists"): host check
/// (clippy for the component's library and the xtask, docs), host dev (every native test,
/// linted by clippy as it compiles, the conformance runner), wasm32 check (clippy for the
/// browser glue), the component
/// (wasm32-wasip2, `wasm-release`, shared by wasmtime and jco), wasm32 dev (the core's tests
/// and the suite under Node) and the app (wasm32, `wasm-release`, the UI and the worker, shared
/// by the size check and the browser tests).
fn checks() -> Result {
    section("tools (each installed only when missing)");
    setup::rust_targets()?;
    setup::npm_packages()?;
    setup::wasm_bindgen_cli()?;
    setup::chromium()?;
    setup::firefox()?;
    llama::install()?;
    section("format");
    run(cargo().args(["fmt", "--all", "--check"]))?;
    // Clippy lints the workspace's crates as the native tests' build compiles them (below;
    // DESIGN.md, "Why each build exists"). Here, in check mode, what that build compiles only
    // with its tests: the component's library (a cdylib, which does not link natively) and the
    // xtask's binary. `cargo doc` below reuses the dependencies it checks.
    section("clippy for what the native tests do not build (the component's library, the xtask)");
    run(cargo().args(["clippy", "-p", "verity-component", "-p", "xtask", "--", "-D", "warnings"]))?;
    section("docs (warnings denied)");
    run(cargo().env("RUSTDOCFLAGS", "-D warnings").args([
        "doc",
        "-p",
        "verity-core",
        "--no-deps",
    ]))?;
    let component = component::build()?;
    section(
        "native tests, linted by clippy as they compile (the component in wasmtime among them)",
    );
    run(linted(&clippy_driver()?)
        .env("VERITY_COMPONENT", &component)
        .args(["test", "--workspace"]))?;
    section("conformance (the runner built by the native tests)");
    let runner = debug_binary("conformance");
    if !runner.is_file() {
        return Err(format!("the native tests did not build {}", runner.display()));
    }
    run(Command::new(&runner).arg(root().join("tests/conformance/scenarios.json")))?;
    run(Command::new(&runner).arg(root().join("tests/conformance/answers.json")))?;
    // The wasm32-only glue (IndexedDB, fetch, the page bridge, the UI) is not built natively.
    // After the native build: the host's proc-macros and build scripts it compiled are reused
    // here (38 crates, about 30 s, compiled again when this came first).
    section("clippy for wasm32 (the worker's and the UI's browser code)");
    run(cargo().args([
        "clippy",
        "--target",
        "wasm32-unknown-unknown",
        "-p",
        "verity-worker",
        "-p",
        "verity-web",
        "--",
        "-D",
        "warnings",
    ]))?;
    section(
        "a real model: the verifier route with Qwen-0.5B on llama.cpp's server (eval, built by the native tests)",
    );
    // The same server for the browser tests (the app's llama.cpp preset against it).
    let llama = llama::start_with(llama::Model::Qwen05, None)?;
    llama::eval(&llama, &debug_binary("eval"))?;
    component::node_tests(&component)?;
    section("no tokio in the core's wasm dependency tree");
    no_tokio()?;
    section("core tests and the conformance suite in wasm (Node)");
    // One build: the core's tests and the suite's (verity-tests' other tests are native).
    let mut wasm_tests = cargo();
    wasm_tests.args(["test", "--target", "wasm32-unknown-unknown", "-p", "verity-core"]);
    wasm_tests.args(["-p", "verity-tests", "--lib", "--test", "conformance"]);
    for name in test_names("core/tests")? {
        wasm_tests.args(["--test", &name]);
    }
    run(&mut wasm_tests)?;
    web::browser_tests(Some(&llama.base_url))?;
    Ok(())
}

/// The rustc cargo compiles with: its `RUSTC`, else `rustc`.
fn rustc() -> std::ffi::OsString {
    std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into())
}

/// Clippy's driver (`clippy-driver` in the `bin` of the toolchain of [`rustc`]), for
/// [`linted`].
fn clippy_driver() -> Result<PathBuf> {
    let sysroot = output(Command::new(rustc()).args(["--print", "sysroot"]))?;
    let driver = Path::new(sysroot.trim()).join("bin").join("clippy-driver");
    if !driver.is_file() {
        return Err(format!(
            "clippy is not installed ({} is missing): rustup component add clippy",
            driver.display()
        ));
    }
    Ok(driver)
}

/// Cargo with clippy's driver in front of rustc for the workspace's own crates (cargo's
/// `RUSTC_WORKSPACE_WRAPPER`, the lint flags in `CLIPPY_ARGS`: how `cargo clippy -- -D
/// warnings` runs it). A build through it lints each of those crates as it compiles it, and
/// the dependencies are compiled once, for the build, not once more in check mode for clippy.
fn linted(driver: &Path) -> Command {
    let mut command = cargo();
    command.env("RUSTC_WORKSPACE_WRAPPER", driver).env("CLIPPY_ARGS", CLIPPY_DENY_WARNINGS);
    command
}

/// `-D warnings` as `cargo clippy` hands it to the driver (`CLIPPY_ARGS`: the arguments after
/// `--`, each followed by this separator). Not a public interface of clippy's: the test below
/// fails if the driver stops reading it, rather than CI passing with lints that only warn.
const CLIPPY_DENY_WARNINGS: &str = "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__";

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// The driver, called as cargo calls a workspace wrapper (`DRIVER RUSTC ARGS…`), on a
    /// library with two clippy lints: with [`super::CLIPPY_DENY_WARNINGS`] it refuses it,
    /// naming them; without, it compiles it (the lints only warn).
    #[test]
    fn clippys_driver_denies_lints_through_the_arguments_the_native_build_gives_it() {
        let driver = super::clippy_driver().unwrap();
        let dir = std::env::temp_dir().join(format!("verity-clippy-canary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let source = dir.join("canary.rs");
        std::fs::write(
            &source,
            "pub fn empty() -> bool {\n    let v = vec![1];\n    v.len() == 0\n}\n",
        )
        .unwrap();
        let compile = |args: Option<&str>| {
            let mut command = Command::new(&driver);
            command.arg(super::rustc());
            command.args(["--crate-type", "lib", "--edition", "2024", "--emit", "metadata"]);
            command.arg("--out-dir").arg(&dir).arg(&source);
            match args {
                Some(args) => command.env("CLIPPY_ARGS", args),
                None => command.env_remove("CLIPPY_ARGS"),
            };
            command.output().unwrap()
        };
        let denied = compile(Some(super::CLIPPY_DENY_WARNINGS));
        let said = String::from_utf8_lossy(&denied.stderr);
        assert!(!denied.status.success(), "the canary compiled: {said}");
        assert!(
            said.contains("clippy::useless_vec") || said.contains("useless use of `vec!`"),
            "{said}"
        );
        assert!(said.contains("len_zero") || said.contains("length comparison to zero"), "{said}");
        let warned = compile(None);
        let said = String::from_utf8_lossy(&warned.stderr);
        assert!(warned.status.success(), "without the arguments the lints only warn: {said}");
        assert!(said.contains("warning"), "{said}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Cargo's target directory: `CARGO_TARGET_DIR` (relative to the workspace root, where cargo
/// runs) when set, else `target/`.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| root().join("target"), |dir| root().join(dir))
}

/// A binary of the workspace's dev build (`cargo test --workspace` builds them all).
fn debug_binary(name: &str) -> PathBuf {
    target_dir().join("debug").join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

/// The integration tests of a package: the `.rs` files of its `tests/` folder, by name.
fn test_names(dir: &str) -> Result<Vec<String>> {
    Ok(files_with_extension(&root().join(dir), "rs")?
        .iter()
        .filter_map(|path| path.file_stem().map(|stem| stem.to_string_lossy().into_owned()))
        .collect())
}

/// The files of `dir` whose extension is `extension`, sorted by path.
fn files_with_extension(dir: &Path, extension: &str) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == extension))
        .collect();
    files.sort();
    Ok(files)
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

    use super::{Result, cargo, output, root, run, timing};
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
        run(Command::new("rustup").args(["target", "add"]).args(&missing))?;
        timing::note(format!("installed the rust targets {}", missing.join(", ")));
        Ok(())
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
    /// (without `--locked`: the CLI's own lockfile pins a crate the registry lacks). Without
    /// default features: they are TLS for the test runner's webdriver client, which only ever
    /// talks to a local driver over plain HTTP; rustls and its C crypto were most of the
    /// install's time (1 m 50 s without them on 2 cores, ~8 min with).
    pub fn wasm_bindgen_cli() -> Result {
        let version = wasm_bindgen_version()?;
        let has = |program: &str| {
            Command::new(program).arg("--version").output().is_ok_and(|out| {
                String::from_utf8_lossy(&out.stdout).split_whitespace().any(|w| w == version)
            })
        };
        if has("wasm-bindgen-test-runner") && has("wasm-bindgen") {
            return Ok(());
        }
        eprintln!("xtask: installing wasm-bindgen-cli {version} (about two minutes, once)");
        run(cargo()
            .env("CARGO_PROFILE_RELEASE_LTO", "false")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
            .args([
                "install",
                "wasm-bindgen-cli",
                "--version",
                &version,
                "--no-default-features",
            ]))?;
        timing::note(format!("installed wasm-bindgen-cli {version}"));
        Ok(())
    }

    /// The npm packages of package-lock.json (the mock provider server, the Restate server,
    /// wasm-opt, oxc-minify, Playwright's driver, axe-core, MiniSearch, jco and its WASI
    /// shim), installed with `npm ci` when one is missing.
    pub fn npm_packages() -> Result {
        let needed = [
            "@bytecodealliance/jco",
            "@bytecodealliance/preview2-shim",
            "@copilotkit/aimock",
            "@restatedev/restate-server",
            "binaryen",
            "playwright-core",
            "axe-core",
            "minisearch",
            "oxc-minify",
            "@wllama/wllama",
        ];
        if needed
            .iter()
            .all(|name| root().join("node_modules").join(name).join("package.json").is_file())
        {
            return Ok(());
        }
        node()?;
        run(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(root()))?;
        timing::note("installed the npm packages (npm ci)");
        Ok(())
    }

    /// Debian's Chromium for the browser tests (never a browser a tool downloads itself).
    pub fn chromium() -> Result {
        debian_package("/usr/bin/chromium", "chromium")
    }

    /// Debian's Firefox ESR for the browser test in Firefox (driven over WebDriver BiDi by the
    /// npm package puppeteer-core, which needs no patched browser).
    pub fn firefox() -> Result {
        debian_package("/usr/bin/firefox-esr", "firefox-esr")
    }

    /// Debian's C/C++-to-WebAssembly toolchain for llama.cpp (the model in the tab's build and
    /// the kernels bench): emscripten, cmake, and node-acorn (emscripten's JS optimizer needs
    /// it; Debian recommends rather than requires it).
    pub fn emscripten() -> Result {
        debian_package("/usr/bin/emcc", "emscripten")?;
        debian_package("/usr/bin/cmake", "cmake")?;
        debian_package("/usr/share/nodejs/acorn/package.json", "node-acorn")
    }

    /// Installs Debian's `package` unless `program` is there already.
    fn debian_package(program: &str, package: &str) -> Result {
        if std::path::Path::new(program).is_file() {
            return Ok(());
        }
        eprintln!("xtask: installing Debian's {package}");
        run(Command::new("apt-get").args(["update", "-qq"]))?;
        run(Command::new("apt-get").args(["install", "-y", "-qq", package]))?;
        timing::note(format!("installed Debian's {package}"));
        Ok(())
    }

    pub fn node() -> Result {
        output(Command::new("node").arg("--version"))
            .map(drop)
            .map_err(|_| "Node.js is needed for the wasm checks; install nodejs".to_owned())
    }
}
