//! The WebAssembly component (`core/component`, exporting `wit/`): `cargo xtask component`
//! builds it for wasm32-wasip2 with the small `component` profile, prints its size and
//! transpiles it for JavaScript with jco; [`test`] then runs its checks: the wasmtime tests
//! (`tests/tests/component.rs`) and the Node test (`tests/component/*.test.mjs`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Result, cargo, root, run, section, setup};

/// The npm packages the Node test needs beside the shared ones (see package.json).
const NPM_PACKAGES: [&str; 3] =
    ["@bytecodealliance/jco", "@bytecodealliance/preview2-shim", "@copilotkit/aimock"];

/// `cargo xtask component [--test]`: builds the component, prints its size, transpiles it with
/// jco; with `--test`, runs its checks too ([`test`]).
pub fn component(args: &[String]) -> Result {
    if args.iter().any(|arg| arg == "--test") {
        return test();
    }
    let wasm = build()?;
    size(&wasm)?;
    transpile(&wasm)?;
    Ok(())
}

/// The cargo target directory (`CARGO_TARGET_DIR`, else `target/` of the workspace).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

/// Where jco writes the JavaScript form (`verity.js` and what it loads).
fn js_dir() -> PathBuf {
    target_dir().join("component-js")
}

/// Builds the component in release (profile `component`: `wasm-release`'s `opt-level = "z"`,
/// LTO, one codegen unit and `panic = "abort"`, stripped) and returns its path.
pub fn build() -> Result<PathBuf> {
    setup::rust_targets()?;
    section("the WebAssembly component (wasm32-wasip2, profile component)");
    run(cargo().args([
        "build",
        "-p",
        "verity-component",
        "--target",
        "wasm32-wasip2",
        "--profile",
        "component",
    ]))?;
    let wasm = target_dir().join("wasm32-wasip2/component/verity_component.wasm");
    if !wasm.is_file() {
        return Err(format!("the build did not write {}", wasm.display()));
    }
    Ok(wasm)
}

fn size(wasm: &Path) -> Result {
    let raw = std::fs::metadata(wasm).map_err(|e| e.to_string())?.len();
    let out = Command::new("gzip")
        .args(["-9", "-c"])
        .arg(wasm)
        .output()
        .map_err(|e| format!("cannot run gzip: {e}"))?;
    if !out.status.success() {
        return Err(format!("gzip failed on {}", wasm.display()));
    }
    println!(
        "component: {} bytes ({} KiB), gzip -9 {} bytes ({} KiB): {}",
        raw,
        raw / 1024,
        out.stdout.len(),
        out.stdout.len() / 1024,
        wasm.display()
    );
    Ok(())
}

/// The npm packages of package-lock.json, installed with `npm ci` when one this needs is
/// missing.
fn npm_packages() -> Result {
    if NPM_PACKAGES
        .iter()
        .all(|name| root().join("node_modules").join(name).join("package.json").is_file())
    {
        return Ok(());
    }
    setup::node()?;
    run(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(root()))
}

/// Transpiles the component to JavaScript with jco (`target/component-js/verity.js`); the
/// folder is marked as ES modules for Node.
fn transpile(wasm: &Path) -> Result {
    npm_packages()?;
    let out = js_dir();
    if out.exists() {
        std::fs::remove_dir_all(&out)
            .map_err(|e| format!("cannot clear {}: {e}", out.display()))?;
    }
    run(Command::new(root().join("node_modules/.bin/jco"))
        .current_dir(root())
        .arg("transpile")
        .arg(wasm)
        .arg("-o")
        .arg(&out)
        .args(["--name", "verity", "--quiet"]))?;
    std::fs::write(out.join("package.json"), "{\"type\": \"module\"}\n")
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    eprintln!("xtask: jco wrote {}", out.join("verity.js").display());
    Ok(())
}

/// The component's checks, for `cargo xtask test`: build it, host it in wasmtime (the whole
/// conformance suite through its `job` resource, claim checks through its codecs against
/// aimock, its imports, its WIT), then transpile it and run the Node test.
pub fn test() -> Result {
    let wasm = build()?;
    size(&wasm)?;
    npm_packages()?;
    section("the component in wasmtime");
    run(cargo().env("VERITY_COMPONENT", &wasm).args([
        "test",
        "-p",
        "verity-tests",
        "--test",
        "component",
    ]))?;
    section("the component in Node (jco)");
    transpile(&wasm)?;
    let tests = super::node_test_files("tests/component")?;
    run(Command::new("node")
        .current_dir(root())
        .env("VERITY_COMPONENT_JS", js_dir().join("verity.js"))
        .args(["--test", "--test-reporter=spec"])
        .args(&tests))
}
