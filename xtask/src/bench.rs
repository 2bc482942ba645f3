//! `cargo xtask bench step`: the step benchmark natively and in wasm under Node, side by side.

use crate::{Result, cargo, root, run, setup};
use std::process::Command;

pub fn bench(args: &[String]) -> Result {
    match args.first().map(String::as_str) {
        Some("step") => step(args.get(1).map_or("2", String::as_str)),
        _ => Err("usage: cargo xtask bench step [SECONDS]".to_owned()),
    }
}

fn step(seconds: &str) -> Result {
    run(cargo().args([
        "run",
        "--quiet",
        "--release",
        "-p",
        "verity-bench",
        "--bin",
        "bench-step",
        "--",
        seconds,
    ]))?;

    setup::node()?;
    setup::wasm_bindgen_cli()?;
    let wasm_dir = root().join("target/bench-wasm");
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
    let module = root().join("target/wasm32-unknown-unknown/wasm-release/verity_bench.wasm");
    run(Command::new("wasm-bindgen")
        .args(["--target", "nodejs", "--out-dir"])
        .arg(&wasm_dir)
        .arg(&module))?;
    run(Command::new("node")
        .arg(root().join("bench/step.mjs"))
        .arg(wasm_dir.join("verity_bench.js"))
        .arg(seconds))
}
