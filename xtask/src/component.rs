//! The WebAssembly component (`core/component`, exporting `wit/`): `cargo xtask component`
//! builds it for wasm32-wasip2 with the `wasm-release` profile (stripped), prints its size and
//! transpiles it for JavaScript with jco; [`test`] then runs its checks: the wasmtime tests
//! (`tests/tests/component.rs`) and the Node test (`tests/component/*.test.mjs`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Result, cargo, root, run, section, setup, target_dir};

/// `cargo xtask component [--test]`: builds the component, prints its size, transpiles it with
/// jco; with `--test`, runs its checks too ([`test`]).
pub fn component(args: &[String]) -> Result {
    if args.iter().any(|arg| arg == "--test") {
        return test();
    }
    let wasm = build()?;
    transpile(&wasm)?;
    Ok(())
}

/// Where jco writes the JavaScript form (`verity.js` and what it loads).
fn js_dir() -> PathBuf {
    target_dir().join("component-js")
}

/// Builds the component in release (profile `wasm-release`: `opt-level = "z"`, LTO, one codegen
/// unit and `panic = "abort"`; the component alone stripped, see Cargo.toml) and returns its
/// path. The same profile as the app's wasm, so the host's build scripts and proc-macros of
/// the two builds are compiled once.
pub fn build() -> Result<PathBuf> {
    setup::rust_targets()?;
    section("the WebAssembly component (wasm32-wasip2, profile wasm-release)");
    run(cargo().args([
        "build",
        "-p",
        "verity-component",
        "--target",
        "wasm32-wasip2",
        "--profile",
        "wasm-release",
    ]))?;
    let wasm = target_dir().join("wasm32-wasip2/wasm-release/verity_component.wasm");
    if !wasm.is_file() {
        return Err(format!("the build did not write {}", wasm.display()));
    }
    size(&wasm)?;
    Ok(wasm)
}

fn size(wasm: &Path) -> Result {
    let raw = std::fs::metadata(wasm).map_err(|e| e.to_string())?.len();
    let gzip = crate::web::gzip_size(wasm)?;
    println!(
        "component: {raw} bytes ({} KiB), gzip -9 {gzip} bytes ({} KiB): {}",
        raw / 1024,
        gzip / 1024,
        wasm.display()
    );
    Ok(())
}

/// Transpiles the component to JavaScript with jco (`target/component-js/verity.js`); the
/// folder is marked as ES modules for Node.
fn transpile(wasm: &Path) -> Result {
    setup::npm_packages()?;
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

/// `cargo xtask component --test`: builds the component, hosts it in wasmtime (the whole
/// conformance suite through its `job` resource, claim checks through its codecs against
/// aimock, its imports, its WIT), then transpiles it and runs the Node test. `cargo xtask test`
/// runs the wasmtime tests within its one native test build instead.
pub fn test() -> Result {
    let wasm = build()?;
    setup::npm_packages()?;
    section("the component in wasmtime");
    run(cargo().env("VERITY_COMPONENT", &wasm).args([
        "test",
        "-p",
        "verity-tests",
        "--test",
        "component",
    ]))?;
    node_tests(&wasm)
}

/// The component transpiled by jco and driven from Node (`tests/component/*.test.mjs`).
pub fn node_tests(wasm: &Path) -> Result {
    section("the component in Node (jco)");
    transpile(wasm)?;
    let tests = super::node_test_files("tests/component")?;
    run(Command::new("node")
        .current_dir(root())
        .env("VERITY_COMPONENT_JS", js_dir().join("verity.js"))
        .args(["--test", "--test-reporter=spec"])
        .args(&tests))
}
