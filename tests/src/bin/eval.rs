//! `eval FILE.jsonl [--retriever bm25|keyword] [--k N] [--provider CONFIG.json] [--retries N]
//! [--sample N] [--assess agent|verifier] [--reports FILE] [--decompose] [--concurrency N]`:
//! runs the claim checker over a labelled claim file (the format of `shared/data/vitaminc/claims-dev.jsonl`:
//! one `{id, claim, corpus: {id: text}, label, meta: {gold}}` per line, each row its own corpus)
//! and prints one JSON object: counts, accuracy, balanced accuracy, the confusion matrix, the
//! rate of conclusive verdicts that cite the gold item, requests per claim and routes, the
//! recall of each label, the binary balanced accuracy (supported against the rest), and tokens
//! and seconds per claim. `--sample N` checks N rows balanced by label: the first N/3 of each
//! label in file order (the same rows every run). Progress goes to stderr.
//!
//! A file of answers (`{"id", "answer", "corpus" or "document", "label": "faithful" |
//! "hallucinated"}`, see `verity_tests::answers`) is checked answer by answer instead;
//! `--reports FILE` writes each answer's report (for a claim file: each claim's result, its
//! report or failure, with its id and label), `--decompose` splits each sentence into atomic
//! claims before checking them, `--concurrency N` checks N sentences of an answer at once.
//!
//! The model is the offline baseline unless `--provider` names a provider configuration (the
//! JSON of `verity_core::provider::Provider`, e.g. `{"api": "openai", "baseUrl":
//! "http://127.0.0.1:8080/v1", "model": "qwen2.5-7b-instruct"}`); its key, if the file has
//! none, comes from `VERITY_API_KEY`; its `"assess"` (`"verifier"`, or `{"verifier": {..}}`)
//! chooses the assess route unless `--assess` does (see `verity_tests::cli`).
//!
//! The summary is `verity_restate::summary`'s, the one `cargo xtask batch` writes too: a check
//! that fails with `no-new-evidence` or `research-turn-limit` counts as predicting
//! `insufficient` (its first assessment was `insufficient` and research found nothing to change
//! it); every other failure is its own column, `failed`, and always wrong.

use std::process::ExitCode;

use serde_json::{Value, json};
use verity_core::Transport;
use verity_core::claim::AssessMode;
use verity_core::provider::Provider;
use verity_core::provider::offline::{OFFLINE_MODEL_NAME, OfflineModel};
use verity_core::retrieve::Retriever;

#[cfg(not(target_arch = "wasm32"))]
use verity_tests::cli::{block_on, transport};
use verity_tests::cli::{provider_name, read_provider};

#[cfg(target_arch = "wasm32")]
fn transport(_: Provider) -> Result<OfflineModel, String> {
    unreachable!("eval runs natively")
}

// Read by the native evaluation only.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
struct Options {
    file: String,
    retriever: Retriever,
    provider: Option<Provider>,
    /// The assess route: `--assess`, else the provider file's `"assess"`, else the agent.
    assess: Option<AssessMode>,
    retries: u32,
    sample: Option<usize>,
    /// `--reports FILE`: each answer's (or claim's) report or failure as a JSON line, with its id
    /// and label.
    reports: Option<String>,
    /// `--decompose`: each answer's sentences split into atomic claims before they are checked.
    decompose: bool,
    /// `--concurrency N`: an answer's sentences checked N at once (the job refuses N out of
    /// range, naming it).
    concurrency: Option<u32>,
}

fn parse_args() -> Result<Options, String> {
    let mut file = None;
    let mut kind = "bm25".to_owned();
    let mut k = 4;
    let mut provider = None;
    let mut assess = None;
    let mut retries = 0;
    let mut sample = None;
    let mut reports = None;
    let mut decompose = false;
    let mut concurrency = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--retriever" => kind = args.next().ok_or("--retriever needs a value")?,
            "--k" => {
                k = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--k needs a positive number")?;
            }
            "--provider" => {
                let path = args.next().ok_or("--provider needs a configuration file")?;
                let (read, route) = read_provider(&path)?;
                provider = Some(read);
                assess = assess.or(Some(route).filter(|route| !route.is_agent()));
            }
            "--assess" => {
                let route = args.next().ok_or("--assess needs agent or verifier")?;
                assess = Some(
                    serde_json::from_value(json!(route)).map_err(|e| format!("--assess: {e}"))?,
                );
            }
            "--retries" => {
                retries =
                    args.next().and_then(|v| v.parse().ok()).ok_or("--retries needs a number")?;
            }
            "--reports" => {
                reports = Some(args.next().ok_or("--reports needs a file to write")?);
            }
            "--decompose" => decompose = true,
            "--concurrency" => {
                concurrency = Some(
                    args.next()
                        .and_then(|v| v.parse().ok())
                        .ok_or("--concurrency needs a number")?,
                );
            }
            "--sample" => {
                sample = Some(
                    args.next()
                        .and_then(|v| v.parse().ok())
                        .filter(|n| *n >= 3)
                        .ok_or("--sample needs a number of rows, at least 3")?,
                );
            }
            other if other.starts_with('-') => return Err(format!("unknown flag {other}")),
            other => file = Some(other.to_owned()),
        }
    }
    let retriever = match kind.as_str() {
        "bm25" => Retriever::Bm25 { k },
        "keyword" => Retriever::Keyword,
        other => return Err(format!("unknown retriever {other:?} (bm25 or keyword)")),
    };
    let usage = "usage: eval FILE.jsonl [--retriever bm25|keyword] [--k N] [--provider CONFIG.json] [--retries N] [--sample N] [--assess agent|verifier] [--reports FILE] [--decompose] [--concurrency N]";
    Ok(Options {
        file: file.ok_or(usage)?,
        retriever,
        provider,
        assess,
        retries,
        sample,
        reports,
        decompose,
        concurrency,
    })
}

fn main() -> ExitCode {
    match run() {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("eval: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<Value, String> {
    let options = parse_args()?;
    match options.provider.clone() {
        None => evaluate(&options, &OfflineModel, OFFLINE_MODEL_NAME),
        Some(provider) => {
            let name = provider_name(&provider);
            evaluate(&options, &transport(provider)?, &name)
        }
    }
}

#[cfg(target_arch = "wasm32")]
fn evaluate(_: &Options, _: &impl Transport, _: &str) -> Result<Value, String> {
    unreachable!("eval runs natively")
}

/// Reads the labelled rows (every line checked first, named by number) and checks them with
/// `model`; the summary is `verity_restate::summary`'s, the same as `batch`'s.
#[cfg(not(target_arch = "wasm32"))]
fn evaluate(options: &Options, model: &impl Transport, model_name: &str) -> Result<Value, String> {
    let first = std::fs::read_to_string(&options.file)
        .map_err(|e| format!("{}: {e}", options.file))?
        .lines()
        .find(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .unwrap_or_default();
    if verity_tests::answers::is_answer_row(&first) {
        return evaluate_answers(options, model, model_name);
    }
    let mut rows = verity_restate::batch::read_claims(std::path::Path::new(&options.file))?;
    if let Some(n) = rows.iter().position(|row| row.label.is_none()) {
        return Err(format!("{}: row {} has no label", options.file, n + 1));
    }
    if let Some(n) = options.sample {
        rows = balanced_sample(rows, n);
    }
    if options.decompose || options.concurrency.is_some() {
        return Err(format!(
            "{}: --decompose and --concurrency are about an answer's sentences, and this file holds claims",
            options.file
        ));
    }
    let started = std::time::Instant::now();
    let job = job_fields(options);
    let total = rows.len();
    let mut reports = Reports::create(options.reports.as_deref())?;
    let mut summary = block_on(verity_restate::summary::evaluate(
        &options.file,
        &rows,
        &job,
        model,
        model_name,
        |done, result| {
            if let Some(failure) = &result.failure {
                eprintln!("eval: claim {done} failed: {failure}");
            }
            if let Some(row) = rows.get(done - 1) {
                reports.write(&json!({"id": row.id, "label": row.label, "result": result}));
            }
            if done % 50 == 0 || done == total {
                eprintln!("eval: {done}/{total} claims");
            }
        },
    ))?;
    #[allow(clippy::cast_precision_loss)]
    let per_claim = |x: f64| verity_restate::summary::round(x / total.max(1) as f64);
    let tokens = &summary["tokens"];
    let tokens = tokens["input"].as_f64().unwrap_or(0.0) + tokens["output"].as_f64().unwrap_or(0.0);
    summary["tokens_per_claim"] = json!(per_claim(tokens));
    summary["seconds_per_claim"] = json!(per_claim(started.elapsed().as_secs_f64()));
    if let Some(n) = options.sample {
        summary["sample"] = json!(n);
    }
    Ok(summary)
}

/// [`evaluate`] for a file of answers ([`verity_tests::answers`]); `--sample N` takes the first
/// N/2 of each label.
#[cfg(not(target_arch = "wasm32"))]
fn evaluate_answers(
    options: &Options,
    model: &impl Transport,
    model_name: &str,
) -> Result<Value, String> {
    let mut rows = verity_tests::answers::read(&options.file)?;
    if let Some(n) = options.sample {
        let mut taken = std::collections::BTreeMap::<String, usize>::new();
        rows.retain(|row| {
            let count = taken.entry(row.label.clone()).or_default();
            *count += 1;
            *count <= n / 2
        });
    }
    let started = std::time::Instant::now();
    let mut job = job_fields(options);
    if options.decompose {
        job.insert("decompose".to_owned(), json!(true));
    }
    if let Some(concurrency) = options.concurrency {
        job.insert("concurrency".to_owned(), json!(concurrency));
    }
    let total = rows.len();
    let mut reports = Reports::create(options.reports.as_deref())?;
    let mut summary =
        block_on(verity_tests::answers::evaluate(&rows, &job, model, |done, row, value| {
            if done % 10 == 0 || done == total {
                eprintln!("eval: {done}/{total} answers");
            }
            reports.write(&json!({"id": row.id, "label": row.label, "value": value}));
        }))?;
    #[allow(clippy::cast_precision_loss)]
    let seconds = started.elapsed().as_secs_f64() / total.max(1) as f64;
    summary["seconds_per_answer"] = json!((seconds * 1000.0).round() / 1000.0);
    summary["file"] = json!(options.file);
    summary["model"] = json!(model_name);
    summary["retriever"] = json!(options.retriever);
    summary["decompose"] = json!(options.decompose);
    if let Some(n) = options.sample {
        summary["sample"] = json!(n);
    }
    Ok(summary)
}

/// `--reports FILE`: one JSON line per claim or answer, when asked for.
#[cfg(not(target_arch = "wasm32"))]
struct Reports(Option<std::fs::File>);

#[cfg(not(target_arch = "wasm32"))]
impl Reports {
    fn create(path: Option<&str>) -> Result<Self, String> {
        path.map(|path| std::fs::File::create(path).map_err(|e| format!("{path}: {e}")))
            .transpose()
            .map(Self)
    }

    /// Writes `line`; a report that cannot be written is said, and the eval goes on.
    fn write(&mut self, line: &Value) {
        use std::io::Write as _;
        if let Some(file) = &mut self.0
            && let Err(error) = writeln!(file, "{line}")
        {
            eprintln!("eval: --reports: {error}");
        }
    }
}

/// The claim jobs' fields the options set (retriever, retries, assess route).
#[cfg(not(target_arch = "wasm32"))]
fn job_fields(options: &Options) -> serde_json::Map<String, Value> {
    let mut job = serde_json::Map::from_iter([
        ("retriever".to_owned(), json!(options.retriever)),
        ("retry".to_owned(), json!({"maxRetries": options.retries})),
    ]);
    if let Some(assess) = options.assess {
        job.insert("assess".to_owned(), json!(assess));
    }
    job
}

/// The first `n / 3` rows of each label, in file order (fewer where a label has fewer).
#[cfg(not(target_arch = "wasm32"))]
fn balanced_sample(
    rows: Vec<verity_restate::summary::Row>,
    n: usize,
) -> Vec<verity_restate::summary::Row> {
    let each = n / verity_restate::summary::LABELS.len();
    let mut taken = std::collections::BTreeMap::<String, usize>::new();
    rows.into_iter()
        .filter(|row| {
            let count = taken.entry(row.label.clone().unwrap_or_default()).or_default();
            *count += 1;
            *count <= each
        })
        .collect()
}
