//! `cargo xtask batch CLAIMS.jsonl [--corpus C.jsonl|URL] [--provider CONFIG.json] [--workers N]
//! [FLAGS]`: a claim file checked as one durable batch on a local Restate server (installed
//! from npm when missing) with N worker processes (see `verity-restate batch`).
//! `cargo xtask bench batch`: the batch benchmark (offline model, 1 and 2 workers, against the
//! same claims run in one process without Restate).

use crate::{Result, cargo, output, root, run, setup, user_paths};
use std::path::PathBuf;
use std::process::Command;

const USAGE: &str = "usage: cargo xtask batch CLAIMS.jsonl [--corpus CORPUS.jsonl|URL] \
     [--provider CONFIG.json] [--workers N] [--concurrency N] [--rpm N] [--tpm N] \
     [--retriever bm25|keyword] [--k N] [--retries N] [--out FILE] [--data-dir DIR] [--batch-id KEY]";

/// The worker binary, built in release mode, with the Restate server installed.
fn worker_binary() -> Result<PathBuf> {
    setup::npm_packages()?;
    run(cargo().args(["build", "--quiet", "--release", "-p", "verity-restate"]))?;
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from);
    Ok(target.join("release/verity-restate"))
}

pub fn batch(args: &[String]) -> Result {
    if args.iter().all(|arg| arg.starts_with('-')) {
        return Err(USAGE.to_owned());
    }
    let args = user_paths(args)?;
    run(Command::new(worker_binary()?).arg("batch").args(&args))
}

/// `cargo xtask bench batch`: the 300 claims of `claims-dev.jsonl` (each with its own corpus)
/// and the 500 of `retrieval-dev.jsonl` against the 26,259-passage `corpus.jsonl`, offline
/// model, in one process and through Restate with 1 and 2 workers; one JSON object.
pub fn bench() -> Result {
    let binary = worker_binary()?;
    let data = root().join("../shared/data/vitaminc");
    let corpus = data.join("corpus.jsonl").display().to_string();
    let mut cases = Vec::new();
    for (file, corpus) in
        [("claims-dev.jsonl", None), ("retrieval-dev.jsonl", Some(corpus.as_str()))]
    {
        let claims = data.join(file).display().to_string();
        let corpus_args: Vec<&str> = corpus.map_or_else(Vec::new, |c| vec!["--corpus", c]);
        let local = output(Command::new(&binary).args(["inprocess", &claims]).args(&corpus_args))?;
        let claims_count = number(&local, "claims")?;
        let local = number(&local, "seconds")?;
        let mut runs = Vec::new();
        // Throughput with 32 checks in flight through 1 and 2 workers, and the latency a
        // check pays one at a time.
        for (workers, concurrency) in [(1, 32), (2, 32), (1, 1)] {
            let out =
                root().join(format!("target/restate/bench-{file}-{workers}-{concurrency}.jsonl"));
            // A fresh server each run: with the kept default data directory, a second run of
            // the same batch would attach to the first's results instead of checking again.
            let data_dir = root().join("target/restate/bench-data");
            std::fs::remove_dir_all(&data_dir).ok();
            let summary = output(
                Command::new(&binary)
                    .args(["batch", &claims, "--workers", &workers.to_string()])
                    .args(["--concurrency", &concurrency.to_string(), "--out"])
                    .arg(&out)
                    .arg("--data-dir")
                    .arg(&data_dir)
                    .args(&corpus_args),
            )?;
            let seconds = number(&summary, "seconds")?;
            let overhead_ms = (seconds - local) * 1000.0 / claims_count;
            runs.push(format!(
                "{{\"workers\": {workers}, \"concurrency\": {concurrency}, \"seconds\": {seconds:.3}, \"claims_per_second\": {:.1}, \"overhead_ms_per_claim\": {overhead_ms:.2}}}",
                claims_count / seconds
            ));
        }
        cases.push(format!(
            "{{\"file\": \"{file}\", \"claims\": {claims_count}, \"in_process\": {{\"seconds\": {local:.3}, \"claims_per_second\": {:.1}}}, \"restate\": [{}]}}",
            claims_count / local,
            runs.join(", ")
        ));
    }
    println!("{{\"model\": \"offline\", \"cases\": [{}]}}", cases.join(", "));
    Ok(())
}

/// The first number after `"key":` in `json`.
fn number(json: &str, key: &str) -> Result<f64> {
    let pattern = format!("\"{key}\":");
    let at = json.rfind(&pattern).ok_or_else(|| format!("no {key} in {json}"))? + pattern.len();
    let text: String = json[at..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-' || *c == 'e')
        .collect();
    text.parse().map_err(|_| format!("{key} is not a number in {json}"))
}
