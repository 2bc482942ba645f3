//! The model in the tab's own build of llama.cpp (`web/llama/`): llama.cpp's libraries and its
//! server's logic, with `web/llama/verity-llama.cpp`, compiled to wasm32 with SIMD128 and
//! pthreads, for `dist/llama/`.
//!
//! Everything comes from the package registries, as for `cargo xtask bench wasm-kernels`
//! (whose download and unpacking this shares): llama.cpp's source from PyPI's
//! `llama-cpp-python` sdist (pinned by its sha256), Debian's `emscripten`, `cmake` and
//! `node-acorn`. cmake's build is kept in `target/tab-llama/build` and is incremental: the
//! first build takes minutes on two cores, a build with nothing changed seconds.

use crate::{Result, root, run, setup, target_dir};
use std::path::PathBuf;
use std::process::Command;

/// The files of the build that `dist/llama/` ships, beside `web/llama/worker.js`.
pub const OUTPUTS: [&str; 3] = ["verity-llama.js", "verity-llama.wasm", "verity-llama.worker.js"];

/// Builds the model in the tab's llama.cpp; answers the folder that holds [`OUTPUTS`].
pub fn build() -> Result<PathBuf> {
    setup::emscripten()?;
    let started = std::time::Instant::now();
    let dir = folder();
    // With our kernels (web/llama/patches): `cargo xtask bench wasm-kernels` measures them
    // against llama.cpp's own, kernel-check.c (built here, [`check_kernels`]) checks them
    // against ggml's reference C kernels.
    let source = crate::kernels::unpack(&dir, "source", &crate::kernels::patches()?)?;
    let build = build_folder();
    // `-fexceptions`: the server's code throws and catches (a request it refuses, a file that is not
    // a model). Not `-fwasm-exceptions`: with pthreads, this emscripten's build of it catches
    // nothing (a throw in a thread reached the worker uncaught).
    let flags = "-msimd128 -pthread -fexceptions";
    run(Command::new("emcmake")
        .env("NODE_PATH", "/usr/share/nodejs")
        .args(["cmake", "-S"])
        .arg(root().join("web/llama"))
        .arg("-B")
        .arg(&build)
        .arg("-DCMAKE_BUILD_TYPE=Release")
        .arg(format!("-DLLAMA_SOURCE={}", source.display()))
        // llama.cpp picks its wasm kernels by this name (emscripten's toolchain file says x86,
        // and then ggml's CPU backend is built without them: what npm's wllama ships).
        .arg("-DEMSCRIPTEN_SYSTEM_PROCESSOR=wasm")
        .arg(format!("-DCMAKE_C_FLAGS={flags}"))
        .arg(format!("-DCMAKE_CXX_FLAGS={flags}")))?;
    run(Command::new("cmake")
        .env("NODE_PATH", "/usr/share/nodejs")
        .arg("--build")
        .arg(&build)
        .args(["--target", "verity-llama", "kernel-check", "-j2"]))?;
    for file in OUTPUTS {
        if !build.join(file).is_file() {
            return Err(format!("the build of web/llama made no {file} in {}", build.display()));
        }
    }
    crate::timing::note(format!(
        "built the model in the tab's llama.cpp (web/llama) in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(build)
}

/// Where the build is kept: the unpacked source in `source/`, cmake's build in
/// [`build_folder`].
fn folder() -> PathBuf {
    target_dir().join("tab-llama")
}

/// cmake's build: [`OUTPUTS`] and `kernel-check.js`.
fn build_folder() -> PathBuf {
    folder().join("build")
}

/// Runs `web/llama/kernel-check.c`, built by [`build`] with the same ggml as the tab's: our
/// kernels (`web/llama/patches`) against ggml's reference C kernels, and ggml's matrix product
/// (whose tiling the patch changes) on odd shapes, on one thread and two, under Node.
pub fn check_kernels() -> Result {
    let check = build_folder().join("kernel-check.js");
    if !check.is_file() {
        return Err(format!("{} is missing: `cargo xtask dist` builds it", check.display()));
    }
    // Node's fetch would take the wasm's path for a URL (this emscripten's loader prefers it).
    run(Command::new("node").arg("--no-experimental-fetch").arg(&check))
}
