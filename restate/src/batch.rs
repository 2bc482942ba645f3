//! `verity-restate batch`: a claim file checked as one durable batch on a local Restate
//! server, with worker processes, a progress line, results as JSONL and the `eval` summary.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use verity_core::provider::Provider;

use crate::cluster::{self, Outcome, Ports, Server, Workers};
use crate::corpus::{CorpusFile, sha256_hex};
use crate::workflow::{BatchInput, BatchResult, ClaimRow, Limits};

/// One row of a claim file: the format of `shared/data/vitaminc/claims-dev.jsonl` (a row
/// may carry its own small corpus, a label and `meta.gold`), or plain `{id, claim}`.
#[derive(Debug, Clone, Deserialize)]
pub struct Row {
    /// The row's id.
    #[serde(default)]
    pub id: Option<String>,
    /// The claim.
    pub claim: String,
    /// Its own corpus: passage id → text.
    #[serde(default)]
    pub corpus: Option<BTreeMap<String, String>>,
    /// `supported`, `contradicted` or `insufficient`, when labelled.
    #[serde(default)]
    pub label: Option<String>,
    /// Anything else (`gold`: the id of the passage that decides it).
    #[serde(default)]
    pub meta: Value,
}

const LABELS: [&str; 3] = ["supported", "contradicted", "insufficient"];

/// Reads a claim file. Every line is checked before anything is submitted.
///
/// # Errors
/// The first bad line, by number (`FILE:LINE: why`).
pub fn read_claims(path: &Path) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |why: String| format!("{}:{}: {why}", path.display(), n + 1);
        let row: Row = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        if row.claim.trim().is_empty() {
            return Err(at("the claim is empty".to_owned()));
        }
        if let Some(label) = &row.label
            && !LABELS.contains(&label.as_str())
        {
            return Err(at(format!("label {label:?}; expected one of {LABELS:?}")));
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(format!("{} has no claims", path.display()));
    }
    Ok(rows)
}

/// A provider configuration file (the JSON of [`Provider`]); its key, if the file has none,
/// from `VERITY_API_KEY`.
///
/// # Errors
/// Unreadable or not a provider configuration (the key is never in the message).
pub fn read_provider(path: &Path) -> Result<Provider, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    let mut config: Value = serde_json::from_str(&text).map_err(|e| format!("{shown}: {e}"))?;
    if config.get("apiKey").is_none_or(Value::is_null)
        && let Ok(key) = std::env::var("VERITY_API_KEY")
    {
        config["apiKey"] = json!(key);
    }
    serde_json::from_value(config)
        .map_err(|e| format!("{shown} is not a provider configuration: {e}"))
}

/// How to run a batch.
#[derive(Debug, Clone)]
pub struct Options {
    /// The claim file.
    pub claims: PathBuf,
    /// The shared corpus file.
    pub corpus: Option<PathBuf>,
    /// A provider configuration (else the offline model).
    pub provider: Option<PathBuf>,
    /// Worker processes.
    pub workers: usize,
    /// Checks in flight and rate limits.
    pub limits: Limits,
    /// The claim job's other fields (`retriever`, `retry`).
    pub job: Map<String, Value>,
    /// Where the results go (JSONL); the summary goes beside it (`.summary.json`).
    pub out: PathBuf,
    /// The server's data directory.
    pub data_dir: PathBuf,
    /// This crate's binary (the worker).
    pub binary: PathBuf,
    /// Print a progress line to stderr.
    pub progress: bool,
}

/// The batch's input: the rows and the corpus reference (with its hash, computed here).
///
/// # Errors
/// An unreadable corpus, or a row without a corpus when there is no shared one.
pub fn batch_input(options: &Options, rows: &[Row]) -> Result<BatchInput, String> {
    let corpus = match &options.corpus {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let path =
                std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Some(CorpusFile { path: path.display().to_string(), sha256: sha256_hex(&bytes) })
        }
        None => None,
    };
    if corpus.is_none()
        && let Some(n) = rows.iter().position(|row| row.corpus.is_none())
    {
        return Err(format!(
            "claim {} (id {:?}) has no corpus of its own: give --corpus",
            n + 1,
            rows[n].id
        ));
    }
    let claims = rows
        .iter()
        .map(|row| ClaimRow {
            id: row.id.clone(),
            claim: row.claim.clone(),
            corpus: row.corpus.clone(),
        })
        .collect();
    Ok(BatchInput { corpus, claims, job: options.job.clone(), limits: options.limits })
}

/// Runs a batch end to end: server, workers, registration, submission, progress, results.
/// Returns the summary (`eval`'s when the rows are labelled, else the counts).
///
/// # Errors
/// Bad input (nothing is submitted then), a process that does not start, or a batch that
/// ends with a terminal error (a corpus the workers refuse).
pub fn run(options: &Options) -> Result<Value, String> {
    let rows = read_claims(&options.claims)?;
    let input = batch_input(options, &rows)?;
    if let Some(path) = &options.provider {
        read_provider(path)?;
    }
    let mut server = Server::start(&options.data_dir, Ports::free())?;
    let mut worker_args = Vec::new();
    if let Some(path) = &options.provider {
        worker_args.push("--provider".to_owned());
        worker_args.push(path.display().to_string());
    }
    let workers = Workers::start(&options.binary, options.workers, &worker_args, &[])?;
    cluster::register(&server.admin_url(), &workers.url())?;
    let key = format!("batch-{}", std::process::id());
    let started = Instant::now();
    let input = serde_json::to_value(&input).map_err(|e| e.to_string())?;
    cluster::submit(&server.ingress_url(), "Batch", &key, &input)?;
    let result = wait(&server.ingress_url(), &key, options.progress)?;
    let elapsed = started.elapsed();
    drop(workers);
    server.stop();
    write_results(&options.out, &rows, &result)?;
    let model = match &options.provider {
        Some(path) => model_name(&read_provider(path)?),
        None => verity_core::provider::offline::OFFLINE_MODEL_NAME.to_owned(),
    };
    let mut summary = summarize(&options.claims, &rows, &result, &model, &options.job);
    summary["batch"] = json!({
        "workers": options.workers,
        "seconds": round(elapsed.as_secs_f64()),
        "claims_per_second": round(rows.len() as f64 / elapsed.as_secs_f64().max(1e-9)),
        "tokens": result.progress.tokens,
        "cost": result.progress.cost,
        "results": options.out.display().to_string(),
    });
    let summary_path = options.out.with_extension("summary.json");
    std::fs::write(&summary_path, format!("{summary:#}\n"))
        .map_err(|e| format!("{}: {e}", summary_path.display()))?;
    Ok(summary)
}

/// Waits for batch `key`, printing its progress; the result.
///
/// # Errors
/// The batch's terminal error.
pub fn wait(ingress: &str, key: &str, show: bool) -> Result<BatchResult, String> {
    let mut last = String::new();
    loop {
        match cluster::output(ingress, "Batch", key) {
            Outcome::Done(value) => {
                if show {
                    eprintln!();
                }
                return serde_json::from_value(value)
                    .map_err(|e| format!("the batch's result: {e}"));
            }
            Outcome::Failed(message) => {
                if show {
                    eprintln!();
                }
                return Err(format!("the batch failed: {message}"));
            }
            Outcome::Pending => {}
        }
        if show && let Ok(progress) = cluster::query(ingress, "Batch", key, "progress") {
            let line = progress_line(&progress);
            if line != last {
                eprint!("\r{line}");
                std::io::stderr().flush().ok();
                last = line;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn progress_line(progress: &Value) -> String {
    let n = |field: &str| progress[field].as_u64().unwrap_or(0);
    let total = n("total").max(1);
    let done = n("done");
    let width = 30;
    let filled = usize::try_from(done * width / total).unwrap_or(0);
    format!(
        "batch [{}{}] {done}/{total} done, {} failed, {} running, {} tokens, ${:.4}",
        "#".repeat(filled),
        ".".repeat(usize::try_from(width).unwrap_or(30) - filled.min(30)),
        n("failed"),
        n("running"),
        n("tokens"),
        progress["cost"].as_f64().unwrap_or(0.0)
    )
}

/// One JSON line per claim: its id, claim, label (if any) and result.
///
/// # Errors
/// When the file cannot be written.
pub fn write_results(path: &Path, rows: &[Row], result: &BatchResult) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut text = String::new();
    for (row, claim) in rows.iter().zip(&result.results) {
        let line = json!({
            "id": row.id,
            "claim": row.claim,
            "label": row.label,
            "result": claim.result,
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn model_name(provider: &Provider) -> String {
    match provider {
        Provider::OpenAi(config) => {
            format!("openai-compatible {} at {}", config.model, config.base_url)
        }
        Provider::Anthropic(config) => format!("anthropic {}", config.model),
        _ => "a provider".to_owned(),
    }
}

/// `eval`'s summary of labelled rows (the same fields, computed the same way); for unlabelled
/// rows, the counts only.
#[must_use]
pub fn summarize(
    file: &Path,
    rows: &[Row],
    result: &BatchResult,
    model: &str,
    job: &Map<String, Value>,
) -> Value {
    let mut confusion: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
    let mut failures: BTreeMap<String, u32> = BTreeMap::new();
    let mut routes: BTreeMap<String, u32> = BTreeMap::new();
    let (mut correct, mut requests, mut conclusive, mut cites_gold) = (0u32, 0u64, 0u32, 0u32);
    let labelled = rows.iter().all(|row| row.label.is_some());
    for (row, claim) in rows.iter().zip(&result.results) {
        let outcome = &claim.result;
        requests += u64::from(outcome.spent.requests);
        let predicted = match (&outcome.value, &outcome.failure) {
            (Some(report), _) => {
                let route = report["route"].as_str().unwrap_or_default().to_owned();
                *routes.entry(route).or_default() += 1;
                let verdict =
                    report["assessment"]["verdict"].as_str().unwrap_or_default().to_owned();
                if verdict == "supported" || verdict == "contradicted" {
                    conclusive += 1;
                    let gold = row.meta["gold"]
                        .as_str()
                        .and_then(|id| row.corpus.as_ref().and_then(|corpus| corpus.get(id)));
                    let citations = report["assessment"]["citations"].as_array();
                    if gold.is_some_and(|text| {
                        citations
                            .is_some_and(|c| c.iter().any(|cited| cited.as_str() == Some(text)))
                    }) {
                        cites_gold += 1;
                    }
                }
                verdict
            }
            (None, Some(failure)) => {
                let kind = failure.kind().as_str().to_owned();
                *failures.entry(kind.clone()).or_default() += 1;
                if kind == "no-new-evidence" || kind == "research-turn-limit" {
                    "insufficient".to_owned()
                } else {
                    "failed".to_owned()
                }
            }
            (None, None) => "failed".to_owned(),
        };
        if let Some(label) = &row.label {
            if predicted == *label {
                correct += 1;
            }
            *confusion.entry(label.clone()).or_default().entry(predicted).or_default() += 1;
        }
    }
    let total = u32::try_from(rows.len()).unwrap_or(u32::MAX);
    let retriever = job.get("retriever").cloned().unwrap_or(json!({"bm25": {"k": 8}}));
    let counts = json!({"claims": total, "reports": total - failures.values().sum::<u32>(), "failures": failures});
    #[allow(clippy::cast_precision_loss)]
    let per_claim = requests as f64 / f64::from(total.max(1));
    if !labelled {
        return json!({
            "file": file.display().to_string(),
            "model": model,
            "retriever": retriever,
            "counts": counts,
            "requests_per_claim": round(per_claim),
            "routes": routes,
        });
    }
    let recall: Vec<f64> = LABELS
        .iter()
        .filter_map(|label| {
            let row = confusion.get(*label)?;
            let all: u32 = row.values().sum();
            Some(f64::from(row.get(*label).copied().unwrap_or(0)) / f64::from(all))
        })
        .collect();
    #[allow(clippy::cast_precision_loss)]
    let balanced = recall.iter().sum::<f64>() / recall.len().max(1) as f64;
    json!({
        "file": file.display().to_string(),
        "model": model,
        "retriever": retriever,
        "counts": counts,
        "accuracy": round(f64::from(correct) / f64::from(total.max(1))),
        "balanced_accuracy": round(balanced),
        "confusion": confusion,
        "conclusive": conclusive,
        "conclusive_citing_gold_rate": if conclusive == 0 { Value::Null } else { json!(round(f64::from(cites_gold) / f64::from(conclusive))) },
        "requests_per_claim": round(per_claim),
        "routes": routes,
    })
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}
