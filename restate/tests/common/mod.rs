//! What the Restate tests share: their scratch directories and fixtures, the corpus and the
//! provider file the workers are given, a server with its workers registered ([`restate`]),
//! what they submit ([`batch_of`], [`tower_batch`], [`batch_options`], [`submit_batch`],
//! [`submit_check`], [`eiffel_check`]) and how they wait for a check ([`check_outcome`],
//! [`check_result`]), the mock provider's fixtures ([`claims_fixtures`]) and what it received
//! ([`journal`]).
//!
//! The server binary must be installed (`npm ci`, which `cargo xtask test` runs): these tests
//! fail, never skip, without it.

// Each test file compiles this module for itself and uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use verity_restate::batch;
use verity_restate::cluster::{self, Outcome, Ports, Server, Workers};
use verity_restate::corpus::{CorpusFile, CorpusSource, sha256_hex};
use verity_restate::workflow::{BatchInput, CheckInput, CheckResult, ClaimRow, Limits};
use verity_tests::http::Aimock;

/// One Restate server at a time: they are heavy for a two-core machine.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_verity-restate"))
}

/// A fresh directory under `target/restate-tests/`.
pub fn scratch(name: &str) -> PathBuf {
    let dir = cluster::workspace_root().join("target/restate-tests").join(name);
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

pub const EIFFEL: &str =
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.";

pub fn corpus_file(dir: &Path) -> CorpusFile {
    let passages = [
        ("eiffel", EIFFEL),
        ("louvre", "The Louvre is the world's most-visited art museum."),
        ("tokyo", "Tokyo Tower is a communications and observation tower in Minato."),
        ("height", "Its antenna tops out at three hundred thirty-three metres, finished in 1958."),
    ];
    let text: String = passages
        .iter()
        .map(|(id, text)| json!({"id": id, "text": text}).to_string() + "\n")
        .collect();
    let path = dir.join("corpus.jsonl");
    std::fs::write(&path, &text).unwrap();
    CorpusFile { path: path.display().to_string(), sha256: sha256_hex(text.as_bytes()) }
}

/// An OpenAI-compatible provider at `mock`; streamed (the mock then sends each response in
/// pieces, with its fixture's latency between them).
pub fn provider_file(dir: &Path, mock: &Aimock) -> PathBuf {
    let path = dir.join("provider.json");
    let config = json!({
        "api": "openai", "baseUrl": format!("{}/v1", mock.url()), "model": "gpt-4o-mini",
        "stream": true,
    });
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// The request bodies the mock received.
pub fn journal(mock: &Aimock) -> Vec<String> {
    let (status, body) =
        cluster::blocking_get(&format!("{}/__aimock/journal", mock.url())).unwrap();
    assert_eq!(status, 200, "{body}");
    let value: Value = serde_json::from_str(&body).unwrap();
    let entries = match value {
        Value::Array(entries) => entries,
        other => other["entries"].as_array().cloned().unwrap_or_default(),
    };
    entries.iter().map(|entry| entry["body"].to_string()).collect()
}

/// The mock's journal entries (for their timestamps).
pub fn journal_entries(mock: &Aimock) -> Vec<Value> {
    let (_, body) = cluster::blocking_get(&format!("{}/__aimock/journal", mock.url())).unwrap();
    match serde_json::from_str::<Value>(&body).unwrap() {
        Value::Array(entries) => entries,
        other => other["entries"].as_array().cloned().unwrap_or_default(),
    }
}

/// `claims` rows about the Eiffel Tower, each its own (id `{prefix}{i}`, the claim ending
/// "({word} i).", which the fixtures match), against the batch's corpus.
pub fn tower_rows(claims: usize, prefix: &str, word: &str) -> Vec<ClaimRow> {
    (0..claims)
        .map(|i| ClaimRow {
            id: Some(format!("{prefix}{i}")),
            claim: format!("The Eiffel Tower stands in Paris, France ({word} {i})."),
            ..ClaimRow::default()
        })
        .collect()
}

/// A loopback HTTP server that answers `GET /corpus.jsonl` with `body` the first `serve`
/// times and 404 after; how many requests it answered.
pub fn corpus_server(body: String, serve: usize) -> (String, Arc<Mutex<usize>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/corpus.jsonl", listener.local_addr().unwrap());
    let count = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&count);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buffer = [0; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buffer[..n]),
                }
            }
            let mut served = counted.lock().unwrap();
            *served += 1;
            let reply = if *served <= serve && request.starts_with(b"GET /corpus.jsonl ") {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    .to_owned()
            };
            stream.write_all(reply.as_bytes()).ok();
        }
    });
    (url, count)
}

pub fn epoch_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis(),
    )
    .unwrap()
}

/// A Restate server (its data in `dir/data`) and `workers` workers of this binary, started with
/// `args` and `env` and registered with it.
pub fn restate(
    dir: &Path,
    workers: usize,
    args: &[String],
    env: &[(String, String)],
) -> (Server, Workers) {
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    let workers = Workers::start(&binary(), workers, args, env).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    (server, workers)
}

/// A worker's flags: the model of `provider` (a [`provider_file`]), and the corpus files
/// under `root`.
pub fn provider_and_root(provider: &Path, root: &Path) -> Vec<String> {
    let (provider, root) = (provider.display().to_string(), root.display().to_string());
    vec!["--provider".to_owned(), provider, "--corpus-root".to_owned(), root]
}

/// A worker's flags: the model of `provider`, and step jobs allowed.
pub fn provider_and_steps(provider: &Path) -> Vec<String> {
    vec!["--provider".to_owned(), provider.display().to_string(), "--allow-steps".to_owned()]
}

/// The claim job's fields most batches give: BM25 retrieval of 4 passages.
pub fn bm25_job() -> Map<String, Value> {
    Map::from_iter([("retriever".to_owned(), json!({"bm25": {"k": 4}}))])
}

/// A claim row without an id, checked against the batch's corpus.
pub fn row(claim: &str) -> ClaimRow {
    ClaimRow { id: None, claim: claim.to_owned(), ..ClaimRow::default() }
}

/// A batch of `claims` with nothing else: no shared corpus, the job's defaults, the default
/// limits, one part.
pub fn batch_of(claims: Vec<ClaimRow>) -> BatchInput {
    BatchInput {
        corpus: None,
        claims,
        claims_file: None,
        job: Map::new(),
        limits: Limits::default(),
        part_size: None,
    }
}

/// A batch of [`tower_rows`] over [`corpus_file`] (written in `dir`) with [`bm25_job`].
pub fn tower_batch(dir: &Path, claims: usize, prefix: &str, word: &str) -> BatchInput {
    BatchInput {
        corpus: Some(corpus_file(dir)),
        job: bm25_job(),
        ..batch_of(tower_rows(claims, prefix, word))
    }
}

/// The batch command's options for the claim file `claims`: offline, one worker of this
/// binary, [`bm25_job`], the default limits, results in `dir/results.jsonl`, the server's data
/// in `dir/data`.
pub fn batch_options(claims: &Path, dir: &Path) -> batch::Options {
    batch::Options {
        claims: claims.to_owned(),
        corpus: None,
        provider: None,
        workers: 1,
        limits: Limits::default(),
        job: bm25_job(),
        out: dir.join("results.jsonl"),
        data_dir: dir.join("data"),
        batch_id: None,
        binary: binary(),
        progress: false,
        part_size: None,
        stall_after: None,
        measure_replay: false,
        ingress: Vec::new(),
    }
}

/// Writes `rows` to `path`, a line of JSON each (a claim file).
pub fn write_jsonl(path: &Path, rows: &[Value]) {
    std::fs::write(path, rows.iter().map(|r| r.to_string() + "\n").collect::<String>()).unwrap();
}

/// Starts the `Batch` workflow `key` through `ingress`.
pub fn submit_batch(ingress: &str, key: &str, input: &BatchInput) {
    cluster::submit(ingress, "Batch", key, &serde_json::to_value(input).unwrap()).unwrap();
}

/// Starts the `ClaimCheck` workflow `key` through `ingress`.
pub fn submit_check(ingress: &str, key: &str, input: &CheckInput) {
    cluster::submit(ingress, "ClaimCheck", key, &serde_json::to_value(input).unwrap()).unwrap();
}

/// What the `ClaimCheck` workflow `key` ended with: its value, or its failure's message. Waits
/// for it a minute at most.
pub fn check_outcome(ingress: &str, key: &str) -> Result<Value, String> {
    let start = Instant::now();
    loop {
        match cluster::output(ingress, "ClaimCheck", key) {
            Outcome::Done(value) => return Ok(value),
            Outcome::Failed(message) => return Err(message),
            Outcome::Pending => {}
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{key} did not finish in a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The check of `job` (a job configuration's JSON) over one passage, [`EIFFEL`], named `id`.
pub fn eiffel_check(job: Value, id: &str) -> CheckInput {
    let passages = std::collections::BTreeMap::from([(id.to_owned(), EIFFEL.to_owned())]);
    CheckInput { job, corpus: Some(CorpusSource::Passages(passages)), rate: None }
}

/// The result of the `ClaimCheck` workflow `key` (waited for as [`check_outcome`] does): the
/// job's value or typed failure. A workflow that failed instead fails the test.
pub fn check_result(ingress: &str, key: &str) -> CheckResult {
    let outcome = check_outcome(ingress, key)
        .unwrap_or_else(|message| panic!("the workflow {key} failed: {message}"));
    serde_json::from_value(outcome).unwrap()
}

/// The mock provider's fixtures of `claims.json`, to change before a mock starts with them.
pub fn claims_fixtures() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("claims.json")).unwrap()).unwrap()
}
