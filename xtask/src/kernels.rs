//! `cargo xtask bench wasm-kernels [ROUNDS]`: llama.cpp's WebAssembly CPU kernels against ours
//! (`web/llama/patches/*.patch`, which the app's build of llama.cpp carries), on the model the
//! app runs in the tab, side by side.
//!
//! Not part of `cargo xtask test`: it measures what our kernels gain over llama.cpp's own, on
//! llama.cpp's C API alone (issue "the tab: small to load, fast to think"; docs/BENCHMARKS.md).
//! Everything comes from the package registries:
//! - llama.cpp's source from PyPI, the sdist of `llama-cpp-python` (which vendors it), pinned
//!   by its sha256;
//! - Debian's `emscripten` (3.1.6 with its clang 14), `cmake`, and `node-acorn` (emscripten's
//!   JS optimizer needs it; Debian recommends rather than requires it).
//!
//! It builds llama.cpp's libraries for wasm32 (SIMD128, pthreads) twice, as released and with
//! the patches applied, links `bench/wasm-kernels/harness.cpp` against each, for Node and for a
//! page, and runs the two builds in turn under Node, `ROUNDS` times, on two threads: the same
//! tokens, prompt then generation. The first repetition of each run prints the last token's
//! logits, which must agree across every run of a build. The two builds' differ in the last
//! digits (our kernels add the same integer products in another order); that each of our
//! kernels computes what ggml's reference C kernel does is checked by
//! `web/llama/kernel-check.c`, which `cargo xtask test` runs. It ends with the commands that
//! run each page build in headless Chromium (`bench/wasm-kernels/chromium.mjs`).

use crate::{Result, files_with_extension, output, root, run, setup, target_dir};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The PyPI sdist that carries llama.cpp's source (`vendor/llama.cpp`), and its sha256.
const SDIST: &str = "llama_cpp_python-0.3.36.tar.gz";
const SDIST_URL: &str = "https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-0.3.36.tar.gz";
const SDIST_SHA256: &str = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e";

/// Threads, prompt tokens, generated tokens and repetitions of each harness run (the app's
/// thread count on this machine; about the length of the verifier route's questions).
const THREADS: &str = "2";
const PROMPT: &str = "64";
const GENERATED: &str = "16";
const REPS: &str = "3";

pub fn bench(rounds: &str) -> Result {
    let rounds: u32 = rounds
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or("usage: cargo xtask bench wasm-kernels [ROUNDS]")?;
    setup::emscripten()?;
    let model = crate::llama::Model::Qwen05.gguf()?;
    let dir = target_dir().join("wasm-kernels");
    let patches = patches()?;
    // llama.cpp's libraries as released, then ggml's with the patches (which touch only
    // ggml's CPU backend), linked with the same libllama: each library is built once.
    let upstream = unpack(&dir, "upstream", &[])?;
    let (upstream_harness, libllama) = build(&upstream, None)?;
    let ours = unpack(&dir, "ours", &patches)?;
    let (our_harness, _) = build(&ours, Some(&libllama))?;
    let harnesses = [("llama.cpp's kernels", upstream_harness), ("our kernels", our_harness)];
    // Under Node only: run from here, the Chromium harness waited on a browser that had gone
    // (not understood yet); by hand it runs (the commands printed at the end).
    // figures[build]: (prompt, generation) tokens a second, one pair per repetition.
    let mut figures = vec![Vec::<(f64, f64)>::new(); harnesses.len()];
    let mut logits: Vec<Option<String>> = vec![None; harnesses.len()];
    for round in 1..=rounds {
        for (((name, harness), runs), logits) in harnesses.iter().zip(&mut figures).zip(&mut logits)
        {
            let said = output(
                Command::new("node")
                    .arg("--no-experimental-fetch")
                    .arg(&harness.node)
                    .arg(&model)
                    .args([THREADS, PROMPT, GENERATED, REPS]),
            )?;
            for line in said.lines() {
                println!("round {round}, {name}, Node: {line}");
                if let Some(text) = line.strip_prefix("logits: ") {
                    match logits {
                        Some(first) if first != text => {
                            return Err(format!(
                                "{name} gives other logits: {text}, where its first run gave {first}"
                            ));
                        }
                        _ => *logits = Some(text.to_owned()),
                    }
                } else if let Some(pair) = speeds(line) {
                    runs.push(pair);
                }
            }
        }
    }
    let median_of = |runs: &[(f64, f64)]| {
        (
            median(runs.iter().map(|run| run.0).collect()),
            median(runs.iter().map(|run| run.1).collect()),
        )
    };
    for ((name, _), runs) in harnesses.iter().zip(&figures) {
        let (prompt, generation) = median_of(runs);
        println!(
            "median, {name}, Node, {THREADS} threads: prompt {prompt:.2}, generation {generation:.2} tokens a second ({} runs)",
            runs.len()
        );
    }
    let (ours, theirs) = (median_of(&figures[1]), median_of(&figures[0]));
    println!(
        "Node, ours / llama.cpp's: prompt {:.3}, generation {:.3}",
        ours.0 / theirs.0,
        ours.1 / theirs.1
    );
    for ((name, _), logits) in harnesses.iter().zip(&logits) {
        println!(
            "every run of {name} gave the same logits: {}",
            logits.as_deref().unwrap_or("none printed")
        );
    }
    for (name, harness) in &harnesses {
        println!(
            "in Chromium, {name}: node bench/wasm-kernels/chromium.mjs {} harness {} {THREADS} {PROMPT} {GENERATED} {REPS}",
            harness.web.display(),
            model.display()
        );
    }
    Ok(())
}

/// A harness built two ways: for Node (`node` runs this JS) and for a web page (`web` holds
/// `harness.js`, `harness.wasm` and `harness.worker.js`).
struct Harness {
    node: PathBuf,
    web: PathBuf,
}

/// Our kernels: the patch files of `web/llama/patches`, by name (the app's build of llama.cpp
/// applies them too: [`crate::tab_llama`]).
pub fn patches() -> Result<Vec<PathBuf>> {
    let folder = root().join("web/llama/patches");
    let patches = files_with_extension(&folder, "patch")?;
    if patches.is_empty() {
        return Err(format!("no .patch file in {}", folder.display()));
    }
    Ok(patches)
}

/// llama.cpp's source in `dir/folder`, the sdist downloaded (once for every user of it, into
/// `target/llama-cpp-sdist`, checked) and unpacked, the patches applied; unpacked again when
/// the patches changed since.
pub fn unpack(dir: &Path, folder: &str, patches: &[PathBuf]) -> Result<PathBuf> {
    let downloads = target_dir().join("llama-cpp-sdist");
    let archive = downloads.join(SDIST);
    if !archive.is_file() {
        std::fs::create_dir_all(&downloads).map_err(|e| format!("{}: {e}", downloads.display()))?;
        eprintln!("xtask: downloading llama.cpp's source from PyPI ({SDIST}, 77 MB)");
        // Python's own HTTP client and hash: python3 is there for the real-model tests already.
        run(Command::new("python3")
            .args([
                "-c",
                "import hashlib, sys, urllib.request\n\
                 url, path, want = sys.argv[1:]\n\
                 data = urllib.request.urlopen(url, timeout=300).read()\n\
                 got = hashlib.sha256(data).hexdigest()\n\
                 sys.exit(f'{url}: sha256 {got}, expected {want}') if got != want else None\n\
                 open(path + '.part', 'wb').write(data)",
                SDIST_URL,
            ])
            .arg(&archive)
            .arg(SDIST_SHA256))?;
        std::fs::rename(archive.with_extension("gz.part"), &archive)
            .map_err(|e| format!("{}: {e}", archive.display()))?;
    }
    let mut stamp = String::from(SDIST);
    for patch in patches {
        stamp.push('\n');
        stamp.push_str(
            &std::fs::read_to_string(patch).map_err(|e| format!("{}: {e}", patch.display()))?,
        );
    }
    let source = dir.join(folder);
    let marker = source.join(".verity-unpacked");
    if std::fs::read_to_string(&marker).is_ok_and(|text| text == stamp) {
        return Ok(source.join("llama.cpp"));
    }
    if source.exists() {
        std::fs::remove_dir_all(&source).map_err(|e| format!("{}: {e}", source.display()))?;
    }
    std::fs::create_dir_all(&source).map_err(|e| format!("{}: {e}", source.display()))?;
    let inner = SDIST.trim_end_matches(".tar.gz");
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&source)
        .arg("--strip-components=2")
        .arg(format!("{inner}/vendor/llama.cpp")))?;
    let llama = source.join("llama.cpp");
    for patch in patches {
        run(Command::new("patch").arg("-p1").arg("-d").arg(&llama).arg("-i").arg(patch))?;
    }
    std::fs::write(&marker, stamp).map_err(|e| format!("{}: {e}", marker.display()))?;
    Ok(llama)
}

/// llama.cpp's libraries for wasm32 (SIMD128, pthreads, 32-bit memory) and the harness linked
/// against them: the harness's JS, which Node runs, and the libllama it was linked with. With
/// `libllama` given, only ggml's libraries are built here and that libllama is linked.
fn build(source: &Path, libllama: Option<&Path>) -> Result<(Harness, PathBuf)> {
    let build = source.join("build-wasm");
    let flags = "-msimd128 -pthread";
    run(Command::new("emcmake")
        .env("NODE_PATH", "/usr/share/nodejs")
        .args(["cmake", "-S"])
        .arg(source)
        .arg("-B")
        .arg(&build)
        .args([
            "-DCMAKE_BUILD_TYPE=Release",
            "-DGGML_NATIVE=OFF",
            "-DGGML_OPENMP=OFF",
            "-DLLAMA_CURL=OFF",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_TOOLS=OFF",
            "-DLLAMA_BUILD_SERVER=OFF",
            "-DLLAMA_WASM_MEM64=OFF",
            // llama.cpp picks its wasm kernels by this name (emscripten's toolchain file says x86).
            "-DEMSCRIPTEN_SYSTEM_PROCESSOR=wasm",
            &format!("-DCMAKE_C_FLAGS={flags}"),
            &format!("-DCMAKE_CXX_FLAGS={flags}"),
        ]))?;
    run(Command::new("cmake")
        .env("NODE_PATH", "/usr/share/nodejs")
        .arg("--build")
        .arg(&build)
        .args(["--target"])
        .args(if libllama.is_some() {
            &["ggml", "ggml-cpu", "ggml-base"][..]
        } else {
            &["llama"][..]
        })
        .arg("-j2"))?;
    let libllama = libllama.map_or_else(|| build.join("src/libllama.a"), Path::to_path_buf);
    let harness = build.join("harness.js");
    let object = build.join("harness.o");
    run(Command::new("em++")
        .env("NODE_PATH", "/usr/share/nodejs")
        .args(["-O3", "-msimd128", "-pthread", "-c"])
        .arg(root().join("bench/wasm-kernels/harness.cpp"))
        .arg("-I")
        .arg(source.join("include"))
        .arg("-I")
        .arg(source.join("ggml/include"))
        .arg("-o")
        .arg(&object))?;
    let lib = |path: &str| build.join(path);
    let web = build.join("web");
    std::fs::create_dir_all(&web).map_err(|e| format!("{}: {e}", web.display()))?;
    // The same objects linked twice: for Node (its file system is the machine's) and for a
    // page (the model written into memory first; main on a thread of its own, since a page's
    // main thread must not block).
    for (output, flags) in [
        (harness.clone(), &["-sNODERAWFS=1", "-sEXIT_RUNTIME=1"][..]),
        (
            web.join("harness.js"),
            &[
                "-sENVIRONMENT=web,worker",
                "-sPROXY_TO_PTHREAD=1",
                "-sFORCE_FILESYSTEM=1",
                "-sEXPORTED_RUNTIME_METHODS=FS",
            ][..],
        ),
    ] {
        run(Command::new("em++")
            .env("NODE_PATH", "/usr/share/nodejs")
            .arg("-pthread")
            .arg(&object)
            .arg(&libllama)
            .arg(lib("ggml/src/libggml.a"))
            .arg(lib("ggml/src/libggml-cpu.a"))
            .arg(lib("ggml/src/libggml-base.a"))
            .args([
                "-O3",
                "-sALLOW_MEMORY_GROWTH=1",
                "-sMAXIMUM_MEMORY=4GB",
                "-sPTHREAD_POOL_SIZE=4",
                "-sTOTAL_STACK=5MB",
                "-Wno-pthreads-mem-growth",
            ])
            .args(flags)
            .arg("-o")
            .arg(&output))?;
    }
    Ok((Harness { node: harness, web }, libllama))
}

/// The prompt and generation speeds of a harness line
/// (`threads 2: prompt 11.00 tokens/s (64), generation 4.60 tokens/s (16)`).
fn speeds(line: &str) -> Option<(f64, f64)> {
    let number = |after: &str| -> Option<f64> {
        let rest = &line[line.find(after)? + after.len()..];
        rest.split_whitespace().next()?.parse().ok()
    };
    Some((number("prompt ")?, number("generation ")?))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[middle],
        _ => (values[middle - 1] + values[middle]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_harness_line_gives_its_two_speeds_and_other_lines_none() {
        let line = "threads 2: prompt 11.00 tokens/s (64), generation 4.60 tokens/s (16)";
        assert_eq!(super::speeds(line), Some((11.0, 4.6)));
        assert_eq!(super::speeds("logits: argmax 291 (12.5174), sum 347775.534"), None);
        assert_eq!(super::median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
