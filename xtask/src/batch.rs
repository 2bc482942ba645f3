//! `cargo xtask batch CLAIMS.jsonl [--corpus C.jsonl|URL] [--provider CONFIG.json] [--workers N]
//! [FLAGS]`: a claim file checked as one durable batch on a local Restate server (installed
//! from npm when missing) with N worker processes (see `verity-restate batch`).
//! `cargo xtask bench batch [--scale-only]`: the batch benchmark (offline model, 1 and 2
//! workers, against the same claims run in one process without Restate; and 100,000 claims,
//! straight through and with every worker killed and replaced halfway).

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

/// How many claims the scale case checks: `retrieval-dev.jsonl`'s 500 repeated with distinct ids.
const SCALE_CLAIMS: usize = 100_000;

/// The scale case's claim file: the claims of `retrieval-dev` (`{claim, gold}` rows) repeated
/// up to [`SCALE_CLAIMS`], each with an id of its own (`s0`, `s1`, ...), written under
/// `target/restate/`.
fn scale_claims(retrieval: &std::path::Path) -> Result<PathBuf> {
    let text =
        std::fs::read_to_string(retrieval).map_err(|e| format!("{}: {e}", retrieval.display()))?;
    let rows: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    if rows.is_empty() {
        return Err(format!("{} has no claims", retrieval.display()));
    }
    let mut out = String::new();
    for i in 0..SCALE_CLAIMS {
        let row = rows[i % rows.len()].trim();
        let rest = row.strip_prefix('{').ok_or_else(|| {
            format!("{}:{}: not a JSON object", retrieval.display(), i % rows.len() + 1)
        })?;
        out.push_str(&format!("{{\"id\": \"s{i}\", {rest}\n"));
    }
    let path = root().join(format!("target/restate/bench-scale-{SCALE_CLAIMS}.jsonl"));
    std::fs::create_dir_all(root().join("target/restate")).map_err(|e| e.to_string())?;
    std::fs::write(&path, out).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// `cargo xtask bench batch [--scale-only]`: the 300 claims of `claims-dev.jsonl` (each with
/// its own corpus) and the 500 of `retrieval-dev.jsonl` against the 26,259-passage
/// `corpus.jsonl`, offline model, in one process and through Restate with 1 and 2 workers;
/// then the scale case, 100,000 claims (`retrieval-dev`'s, repeated with distinct ids) against
/// the same corpus through 2 workers, straight through and with the workers killed and
/// replaced halfway (the replay time). One JSON object. `--scale-only` runs the scale case alone.
pub fn bench(args: &[String]) -> Result {
    let scale_only = match args {
        [] => false,
        [flag] if flag == "--scale-only" => true,
        _ => return Err("usage: cargo xtask bench batch [--scale-only]".to_owned()),
    };
    let binary = worker_binary()?;
    let data = root().join("../shared/data/vitaminc");
    let corpus = data.join("corpus.jsonl").display().to_string();
    let retrieval = data.join("retrieval-dev.jsonl");
    let scale = scale_claims(&retrieval)?;
    // (label, claim file, shared corpus, (workers, checks in flight, kill the workers halfway)
    // of each Restate run)
    type Case<'a> = (String, PathBuf, Option<&'a str>, Vec<(usize, usize, bool)>);
    let mut plan: Vec<Case> = Vec::new();
    if !scale_only {
        // Throughput with 32 checks in flight through 1 and 2 workers, and the latency a
        // check pays one at a time.
        let runs = vec![(1, 32, false), (2, 32, false), (1, 1, false)];
        plan.push((
            "claims-dev.jsonl".to_owned(),
            data.join("claims-dev.jsonl"),
            None,
            runs.clone(),
        ));
        plan.push((
            "retrieval-dev.jsonl".to_owned(),
            retrieval.clone(),
            Some(corpus.as_str()),
            runs,
        ));
    }
    plan.push((
        format!("retrieval-dev.jsonl x{}", SCALE_CLAIMS / 500),
        scale,
        Some(corpus.as_str()),
        // Once straight through, once with every worker killed and replaced halfway: the
        // replay of the largest journals a batch makes (its running parts').
        vec![(2, 32, false), (2, 32, true)],
    ));
    let mut cases = Vec::new();
    for (label, claims, corpus, restate_runs) in plan {
        let claims = claims.display().to_string();
        let corpus_args: Vec<&str> = corpus.map_or_else(Vec::new, |c| vec!["--corpus", c]);
        let local = output(Command::new(&binary).args(["inprocess", &claims]).args(&corpus_args))?;
        let claims_count = number(&local, "claims")?;
        let local = number(&local, "seconds")?;
        let mut runs = Vec::new();
        for (workers, concurrency, replay) in restate_runs {
            let name = label.replace(' ', "-");
            let out =
                root().join(format!("target/restate/bench-{name}-{workers}-{concurrency}.jsonl"));
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
                    .args(replay.then_some("--measure-replay"))
                    .args(&corpus_args),
            )?;
            let seconds = number(&summary, "seconds")?;
            let overhead_ms = (seconds - local) * 1000.0 / claims_count;
            // Every claim has its one result line.
            let results = std::fs::read_to_string(&out)
                .map_err(|e| format!("{}: {e}", out.display()))?
                .lines()
                .filter(|line| !line.trim().is_empty())
                .count();
            if results as f64 != claims_count {
                return Err(format!(
                    "{label}: {results} results in {} for {claims_count} claims",
                    out.display()
                ));
            }
            let data_bytes = dir_size(&data_dir);
            let batch = summary.rfind("\"batch\"").map_or("", |at| &summary[at..]);
            let figure = |key: &str| field(batch, key);
            runs.push(format!(
                "{{\"workers\": {workers}, \"concurrency\": {concurrency}, \"killed_halfway\": {replay}, \"seconds\": {seconds:.3}, \"claims_per_second\": {:.1}, \"overhead_ms_per_claim\": {overhead_ms:.2}, \"data_dir_mb\": {:.1}, \"parts\": {}, \"workers_peak_rss_mb\": {}, \"server_peak_rss_mb\": {}, \"replay_seconds\": {}}}",
                claims_count / seconds,
                data_bytes as f64 / 1e6,
                figure("parts"),
                figure("workers_peak_rss_mb"),
                figure("server_peak_rss_mb"),
                figure("replay_seconds"),
            ));
        }
        cases.push(format!(
            "{{\"file\": \"{label}\", \"claims\": {claims_count}, \"in_process\": {{\"seconds\": {local:.3}, \"claims_per_second\": {:.1}}}, \"restate\": [{}]}}",
            claims_count / local,
            runs.join(", ")
        ));
    }
    println!("{{\"model\": \"offline\", \"cases\": [{}]}}", cases.join(", "));
    Ok(())
}

/// The bytes of the files under `dir` (0 when it cannot be read).
fn dir_size(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => dir_size(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The JSON value after `"key":` in `json` (a number, `null`, or a flat array), as text;
/// `null` when there is none.
fn field(json: &str, key: &str) -> String {
    let pattern = format!("\"{key}\":");
    let Some(at) = json.find(&pattern) else { return "null".to_owned() };
    let rest = json[at + pattern.len()..].trim_start();
    let end = if rest.starts_with('[') {
        rest.find(']').map_or(rest.len(), |i| i + 1)
    } else {
        rest.find([',', '}', '\n']).unwrap_or(rest.len())
    };
    rest[..end].split_whitespace().collect::<Vec<_>>().join(" ")
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
