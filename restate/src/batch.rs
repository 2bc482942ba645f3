//! `verity-restate batch`: a claim file checked as one durable batch on a local Restate
//! server, with worker processes, a progress line, results as JSONL and the `eval` summary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use verity_core::corpus::Corpus;
use verity_core::provider::Provider;

use crate::cluster::{self, Outcome, Ports, Server, Workers};
use crate::corpus::{
    CorpusFile, CorpusPolicy, DEFAULT_MAX_CORPUS_BYTES, is_url, load_bytes, parse, sha256_hex,
};
pub use crate::summary::Row;
use crate::summary::{LABELS, Tally, gold_text, retriever_of};
use crate::workflow::{BatchInput, BatchResult, CheckResult, ClaimResult, ClaimRow, Limits};

/// Reads a claim file. Every line is checked before anything is submitted; an id given twice
/// is refused (the results would not tell the two apart).
///
/// # Errors
/// The first bad line, by number (`FILE:LINE: why`).
pub fn read_claims(path: &Path) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
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
        if let Some(id) = &row.id
            && let Some(first) = seen.insert(id.clone(), n + 1)
        {
            return Err(at(format!("the id {id:?} is given twice (first on line {first})")));
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
    /// The shared corpus: a file path, or an `http(s)://` URL the workers fetch.
    pub corpus: Option<String>,
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
    /// The server's data directory (kept: the same command run again attaches to the batch).
    pub data_dir: PathBuf,
    /// The batch's key; by default derived from its input (see [`batch_key`]).
    pub batch_id: Option<String>,
    /// This crate's binary (the worker).
    pub binary: PathBuf,
    /// Print a progress line to stderr.
    pub progress: bool,
}

/// The batch's input: the rows and the corpus reference (with its hash, computed here from
/// the file, or from the URL fetched once), and the shared corpus itself. The corpus is
/// parsed here, so a broken one is named before anything starts.
///
/// # Errors
/// An unreadable, unreachable or unparsable corpus, or a row without a corpus when there is
/// no shared one.
pub fn batch_input(
    options: &Options,
    rows: &[Row],
) -> Result<(BatchInput, Option<Corpus>), String> {
    let mut shared = None;
    let corpus = match &options.corpus {
        Some(location) => {
            let location = if is_url(location) {
                location.trim().to_owned()
            } else {
                std::fs::canonicalize(location)
                    .map_err(|e| format!("corpus {location}: {e}"))?
                    .display()
                    .to_string()
            };
            // The operator's own file: no policy, no cap (the workers get one that fits it).
            let bytes = load_bytes(&location, u64::MAX)?;
            let sha256 = sha256_hex(&bytes);
            shared = Some(parse(&location, bytes)?);
            Some(CorpusFile { path: location, sha256 })
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
    Ok((BatchInput { corpus, claims, job: options.job.clone(), limits: options.limits }, shared))
}

/// The workers' corpus arguments for `input`: the shared corpus's directory as their
/// `--corpus-root` (a URL as their one `--corpus-url`), and a cap that fits it; none without
/// a shared corpus (inline passages need no file).
#[must_use]
pub fn corpus_worker_args(input: &BatchInput) -> Vec<String> {
    let Some(file) = &input.corpus else { return Vec::new() };
    if is_url(&file.path) {
        return vec!["--corpus-url".to_owned(), file.path.clone()];
    }
    let path = Path::new(&file.path);
    let size = std::fs::metadata(path).map_or(0, |meta| meta.len());
    let root = path.parent().map_or_else(|| ".".to_owned(), |dir| dir.display().to_string());
    vec![
        "--corpus-root".to_owned(),
        root,
        "--corpus-max-bytes".to_owned(),
        size.max(DEFAULT_MAX_CORPUS_BYTES).to_string(),
    ]
}

/// The corpus policy of a worker started with [`corpus_worker_args`] (for a host in this
/// process).
///
/// # Errors
/// The corpus's directory is gone.
pub fn corpus_policy(input: &BatchInput) -> Result<CorpusPolicy, String> {
    let mut policy = CorpusPolicy::none();
    let mut args = corpus_worker_args(input).into_iter();
    while let (Some(flag), Some(value)) = (args.next(), args.next()) {
        policy = match flag.as_str() {
            "--corpus-url" => policy.with_url_prefix(&value)?,
            "--corpus-root" => policy.with_root(Path::new(&value))?,
            _ => policy.with_max_bytes(value.parse().unwrap_or(DEFAULT_MAX_CORPUS_BYTES)),
        };
    }
    Ok(policy)
}

/// The key of a batch: `batch-` and the first 16 hex digits of the SHA-256 of its input (the
/// claims, the corpus's location and hash, the job and the limits). The same command run
/// again has the same key, and attaches to the batch instead of checking the claims again.
#[must_use]
pub fn batch_key(input: &BatchInput) -> String {
    let json = serde_json::to_string(input).unwrap_or_default();
    format!("batch-{}", &sha256_hex(json.as_bytes())[..16])
}

/// Runs a batch end to end: server, workers, registration, submission, progress, results.
/// Returns the summary (`eval`'s when the rows are labelled, else the counts).
///
/// # Errors
/// Bad input (nothing is submitted then), a process that does not start, or a batch that
/// ends with a terminal error (a corpus the workers refuse).
pub fn run(options: &Options) -> Result<Value, String> {
    let rows = read_claims(&options.claims)?;
    let (input, shared) = batch_input(options, &rows)?;
    if let Some(path) = &options.provider {
        read_provider(path)?;
    }
    let key = options.batch_id.clone().unwrap_or_else(|| batch_key(&input));
    let (ports, deployment) = Ports::kept(&options.data_dir);
    let mut server = Server::start(&options.data_dir, ports)?;
    let mut worker_args = corpus_worker_args(&input);
    if let Some(path) = &options.provider {
        worker_args.push("--provider".to_owned());
        worker_args.push(path.display().to_string());
    }
    let workers =
        Workers::start_at(&options.binary, options.workers, &worker_args, &[], deployment)?;
    cluster::register(&server.admin_url(), &workers.url())?;
    let started = Instant::now();
    let input = serde_json::to_value(&input).map_err(|e| e.to_string())?;
    if cluster::submit_or_attach(&server.ingress_url(), "Batch", &key, &input)? && options.progress
    {
        eprintln!("batch {key} was submitted before: attached to it (nothing is checked twice)");
    }
    // Results go out as they finish (in that order); the file is rewritten in the batch's
    // order at the end.
    let mut arrived = ResultsFile::create(&options.out, &rows)?;
    let result = wait_streaming(&server.ingress_url(), &key, options.progress, &mut |finished| {
        arrived.append(finished)
    })?;
    let elapsed = started.elapsed();
    drop(workers);
    server.stop();
    write_results(&options.out, &rows, &result)?;
    let model = match &options.provider {
        Some(path) => model_name(&read_provider(path)?),
        None => verity_core::provider::offline::OFFLINE_MODEL_NAME.to_owned(),
    };
    let mut summary =
        summarize(&options.claims, &rows, &result, &model, &options.job, shared.as_ref());
    summary["batch"] = json!({
        "key": key,
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
    wait_streaming(ingress, key, show, &mut |_| Ok(()))
}

/// Waits for batch `key`, printing its progress and handing `sink` the results as they finish
/// (each once, in the order they finished); the result.
///
/// # Errors
/// The batch's terminal error, or the sink's.
pub fn wait_streaming(
    ingress: &str,
    key: &str,
    show: bool,
    sink: &mut dyn FnMut(&[ClaimResult]) -> Result<(), String>,
) -> Result<BatchResult, String> {
    let mut last = String::new();
    let mut received: u64 = 0;
    loop {
        if let Ok(value) =
            cluster::query_with(ingress, "Batch", key, "finished", Some(&json!(received)))
            && let Ok(finished) = serde_json::from_value::<Vec<ClaimResult>>(value)
            && !finished.is_empty()
        {
            sink(&finished)?;
            received += finished.len() as u64;
        }
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

/// The results file while a batch runs: one line per result as it finishes.
struct ResultsFile<'a> {
    file: std::fs::File,
    rows: &'a [Row],
}

impl<'a> ResultsFile<'a> {
    fn create(path: &Path, rows: &'a [Row]) -> Result<Self, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self { file, rows })
    }

    fn append(&mut self, finished: &[ClaimResult]) -> Result<(), String> {
        let mut text = String::new();
        for claim in finished {
            if let Some(row) = self.rows.get(claim.index) {
                text.push_str(&result_line(row, &claim.result).to_string());
                text.push('\n');
            }
        }
        self.file.write_all(text.as_bytes()).map_err(|e| format!("the results file: {e}"))
    }
}

fn result_line(row: &Row, result: &CheckResult) -> Value {
    json!({"id": row.id, "claim": row.claim, "label": row.label, "result": result})
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
        text.push_str(&result_line(row, &claim.result).to_string());
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

/// `eval`'s summary of labelled rows (the same function, [`Tally`]); for unlabelled rows, the
/// counts only. A row's gold passage is looked up in its own corpus, else in `shared`.
#[must_use]
pub fn summarize(
    file: &Path,
    rows: &[Row],
    result: &BatchResult,
    model: &str,
    job: &Map<String, Value>,
    shared: Option<&Corpus>,
) -> Value {
    let mut tally = Tally::new();
    for (row, claim) in rows.iter().zip(&result.results) {
        tally.add(row.label.as_deref(), gold_text(row, shared).as_deref(), &claim.result);
    }
    tally.summary(&file.display().to_string(), model, &retriever_of(job))
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}
