//! `cargo xtask bench step|claim [SECONDS]`: the step or claim-check benchmark natively and in
//! wasm under Node, side by side, one JSON object per case and target with the TypeScript
//! design's figure and the ratio to it.
//! `cargo xtask bench retrieve FILE [--corpus CORPUS]`: retrieval (our BM25 and keyword
//! heuristic, natively and in wasm, against MiniSearch in Node), one JSON object.
//! `cargo xtask bench in-tab [ROUNDS] [--model NAME]`: the model in the tab (SmolLM2's GGUF by
//! default, through the app's `verity-in-tab.js` in headless Chromium over the built `dist/`)
//! on the app's thread count, in turn with the native llama.cpp server with the same file on two
//! threads.
//! `cargo xtask bench ready [ROUNDS]`: the app's cold load to "Engine ready" over a 10 Mbit/s
//! link with 40 ms of latency (files gzipped as a host serves them), then on loopback.
//! `cargo xtask bench wasm-kernels [ROUNDS]`: llama.cpp built for wasm32 with its own kernels
//! and with ours (`bench/wasm-kernels`), the model of the tab on two threads, in turn.

use crate::{Result, cargo, output, root, run, setup, target_dir};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const USAGE: &str = "usage: cargo xtask bench step [SECONDS] | cargo xtask bench claim [SECONDS] \
                     | cargo xtask bench retrieve FILE [--corpus CORPUS] | cargo xtask bench batch [--scale-only] \
                     | cargo xtask bench in-tab [ROUNDS] [--model smollm2|qwen0.5|qwen1.5] \
                     | cargo xtask bench ready [ROUNDS] | cargo xtask bench wasm-kernels [ROUNDS]";

pub fn bench(args: &[String]) -> Result {
    match args.first().map(String::as_str) {
        Some(suite @ ("step" | "claim")) => cases(suite, args.get(1).map_or("2", String::as_str)),
        Some("retrieve") => retrieve(&args[1..]),
        Some("batch") => crate::batch::bench(&args[1..]),
        Some("in-tab") => in_tab(&args[1..]),
        Some("ready") => ready(args.get(1).map_or("5", String::as_str)),
        Some("wasm-kernels") => crate::kernels::bench(args.get(1).map_or("3", String::as_str)),
        _ => Err(USAGE.to_owned()),
    }
}

/// The model in the tab on the app's thread count (`bench/in-tab.mjs`), beside the
/// native server of the same GGUF on two threads, `ROUNDS` times in turn, over the `dist/` that
/// `cargo xtask dist` built.
fn in_tab(args: &[String]) -> Result {
    if !crate::web::dist_dir().join("verity-in-tab.js").is_file() {
        return Err("dist/ has no app: run cargo xtask dist first".to_owned());
    }
    let (mut rounds, mut model) = ("3".to_owned(), crate::llama::Model::SmolLm2);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model" => model = crate::llama::Model::parse(args.next().ok_or(USAGE)?)?,
            value if value.parse::<u32>().is_ok_and(|n| n > 0) => value.clone_into(&mut rounds),
            _ => return Err(USAGE.to_owned()),
        }
    }
    setup::npm_packages()?;
    setup::chromium()?;
    let server = crate::llama::start_with(model, None)?;
    run(Command::new("node")
        .current_dir(root())
        .env("VERITY_GGUF", model.gguf()?)
        .env("VERITY_LLAMA_URL", &server.base_url)
        .arg(root().join("bench/in-tab.mjs"))
        .arg(rounds))
}

/// The app's time to a ready engine on a slow link and on loopback (`bench/ready.mjs`),
/// `rounds` cold loads each, over the `dist/` that `cargo xtask dist` built.
fn ready(rounds: &str) -> Result {
    if !crate::web::dist_dir().join("index.html").is_file() {
        return Err("dist/ has no app: run cargo xtask dist first".to_owned());
    }
    setup::npm_packages()?;
    setup::chromium()?;
    run(Command::new("node").current_dir(root()).arg(root().join("bench/ready.mjs")).arg(rounds))
}

/// A suite of cases (`step` or `claim`, see `verity_bench::suite`), natively then in wasm.
fn cases(suite: &str, seconds: &str) -> Result {
    run(cargo().args([
        "run",
        "--quiet",
        "--release",
        "-p",
        "verity-bench",
        "--bin",
        "bench-cases",
        "--",
        suite,
        seconds,
    ]))?;

    let module = wasm_bench_module()?;
    run(Command::new("node")
        .arg(root().join("bench/cases.mjs"))
        .arg(module)
        .arg(suite)
        .arg(seconds))
}

/// Builds verity-bench for wasm32 (the shipped `wasm-release` profile) and binds it for Node;
/// the path of the JS module to `require`.
fn wasm_bench_module() -> Result<PathBuf> {
    setup::node()?;
    setup::wasm_bindgen_cli()?;
    let target = target_dir();
    let wasm_dir = target.join("bench-wasm");
    run(cargo().args([
        "build",
        "--quiet",
        "-p",
        "verity-bench",
        "--lib",
        "--target",
        "wasm32-unknown-unknown",
        "--profile",
        "wasm-release",
    ]))?;
    let module = target.join("wasm32-unknown-unknown/wasm-release/verity_bench.wasm");
    run(Command::new("wasm-bindgen")
        .args(["--target", "nodejs", "--out-dir"])
        .arg(&wasm_dir)
        .arg(&module))?;
    Ok(wasm_dir.join("verity_bench.js"))
}

fn retrieve(args: &[String]) -> Result {
    let usage = || "usage: cargo xtask bench retrieve FILE [--corpus CORPUS]".to_owned();
    let (file, corpus) = match args {
        [file] => (absolute(file)?, None),
        [file, flag, corpus] | [flag, corpus, file] if flag == "--corpus" => {
            (absolute(file)?, Some(absolute(corpus)?))
        }
        _ => return Err(usage()),
    };
    let corpus = corpus.unwrap_or_else(|| file.with_file_name("corpus.jsonl"));
    for path in [&file, &corpus] {
        if !path.is_file() {
            return Err(format!("{} is not a file", path.display()));
        }
    }

    // Native first: figures, and a corpus the core can read, before the slower wasm build.
    let native = output(
        cargo()
            .args(["run", "--quiet", "--release", "-p", "verity-bench", "--bin", "bench-retrieve"])
            .arg("--")
            .arg(&file)
            .arg(&corpus)
            .stderr(Stdio::inherit()),
    )?;
    let module = wasm_bench_module()?;
    npm_packages()?;
    run(Command::new("node")
        .arg(root().join("bench/retrieve.mjs"))
        .arg(module)
        .arg(&file)
        .arg(&corpus)
        .arg(native.trim()))
}

/// A path as given on the command line, taken from where the user stands.
fn absolute(path: &str) -> Result<PathBuf> {
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    Ok(cwd.join(Path::new(path)))
}

/// The npm packages of package-lock.json (MiniSearch), installed when missing.
fn npm_packages() -> Result {
    if root().join("node_modules/minisearch/package.json").is_file() {
        return Ok(());
    }
    run(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(root()))
}
