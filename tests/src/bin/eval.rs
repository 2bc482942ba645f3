//! `eval FILE.jsonl [--retriever bm25|keyword] [--k N] [--provider CONFIG.json] [--retries N]`:
//! runs the claim checker over a labelled claim file (the format of `shared/data/vitaminc/claims-dev.jsonl`:
//! one `{id, claim, corpus: {id: text}, label, meta: {gold}}` per line, each row its own corpus)
//! and prints one JSON object: counts, accuracy, balanced accuracy, the confusion matrix, the
//! rate of conclusive verdicts that cite the gold item, requests per claim and routes.
//! Progress goes to stderr.
//!
//! The model is the offline baseline unless `--provider` names a provider configuration (the
//! JSON of `verity_core::provider::Provider`, e.g. `{"api": "openai", "baseUrl":
//! "http://127.0.0.1:8080/v1", "model": "qwen2.5-7b-instruct"}`); its key, if the file has
//! none, comes from `VERITY_API_KEY`. The HTTP client is the durable worker's
//! (`verity_restate::http::ReqwestClient`, rustls): it reaches hosted providers over HTTPS and
//! local servers (llama-server, Ollama, vLLM) over plain HTTP, and refuses (before any request)
//! to send a key over plain HTTP to a host that is not loopback.
//!
//! A check that fails with `no-new-evidence` or `research-turn-limit` counts as predicting
//! `insufficient` (its first assessment was `insufficient` and research found nothing to change
//! it); every other failure is its own column, `failed`, and always wrong.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use verity_core::corpus::{Corpus, IndexedCorpus};
use verity_core::provider::offline::{OFFLINE_MODEL_NAME, OfflineModel};
use verity_core::provider::{Provider, ProviderTransport};
use verity_core::retrieve::Retriever;
use verity_core::{Job, JobFailureKind, NoTools, Report, Transport, drive};
/// The transport to a real provider: the codecs over reqwest with rustls (native only; the
/// crate is also built for wasm, where its suite runs, but this command is not).
/// Refuses, before any request, to send a key over plain HTTP to a host that is not loopback.
#[cfg(not(target_arch = "wasm32"))]
fn transport(
    provider: Provider,
) -> Result<ProviderTransport<verity_restate::http::ReqwestClient>, String> {
    verity_tests::http::refuse_key_in_the_clear(&provider)?;
    Ok(ProviderTransport::new(provider, verity_restate::http::ReqwestClient::new()))
}

/// Runs a future to completion on a tokio runtime (the HTTP client needs one).
#[cfg(not(target_arch = "wasm32"))]
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
        })
        .block_on(future)
}

#[cfg(target_arch = "wasm32")]
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    pollster::block_on(future)
}

#[cfg(target_arch = "wasm32")]
fn transport(_: Provider) -> Result<OfflineModel, String> {
    unreachable!("eval runs natively")
}

const LABELS: [&str; 3] = ["supported", "contradicted", "insufficient"];

#[derive(Deserialize)]
struct Row {
    #[serde(default)]
    id: Option<String>,
    claim: String,
    corpus: Map<String, Value>,
    label: String,
    #[serde(default)]
    meta: Value,
}

struct Options {
    file: String,
    retriever: Retriever,
    provider: Option<Provider>,
    retries: u32,
}

fn parse_args() -> Result<Options, String> {
    let mut file = None;
    let mut kind = "bm25".to_owned();
    let mut k = 4;
    let mut provider = None;
    let mut retries = 0;
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
                provider = Some(read_provider(&path)?);
            }
            "--retries" => {
                retries =
                    args.next().and_then(|v| v.parse().ok()).ok_or("--retries needs a number")?;
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
    let usage = "usage: eval FILE.jsonl [--retriever bm25|keyword] [--k N] [--provider CONFIG.json] [--retries N]";
    Ok(Options { file: file.ok_or(usage)?, retriever, provider, retries })
}

fn read_provider(path: &str) -> Result<Provider, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut config: Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    if config.get("apiKey").is_none_or(Value::is_null)
        && let Ok(key) = std::env::var("VERITY_API_KEY")
    {
        config["apiKey"] = json!(key);
    }
    serde_json::from_value(config)
        .map_err(|e| format!("{path} is not a provider configuration: {e}"))
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
            let name = match &provider {
                Provider::OpenAi(config) => {
                    format!("openai-compatible {} at {}", config.model, config.base_url)
                }
                Provider::Anthropic(config) => format!("anthropic {}", config.model),
                _ => "a provider".to_owned(),
            };
            evaluate(&options, &transport(provider)?, &name)
        }
    }
}

fn evaluate(options: &Options, model: &impl Transport, model_name: &str) -> Result<Value, String> {
    let text =
        std::fs::read_to_string(&options.file).map_err(|e| format!("{}: {e}", options.file))?;
    let rows: Vec<Row> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", options.file, n + 1))
        })
        .collect::<Result<_, _>>()?;
    if rows.is_empty() {
        return Err(format!("{} has no rows", options.file));
    }

    let mut confusion: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
    let mut failures: BTreeMap<String, u32> = BTreeMap::new();
    let mut routes: BTreeMap<String, u32> = BTreeMap::new();
    let (mut correct, mut requests, mut conclusive, mut cites_gold) = (0u32, 0u64, 0u32, 0u32);
    for (n, row) in rows.iter().enumerate() {
        if !LABELS.contains(&row.label.as_str()) {
            return Err(format!(
                "row {} has label {:?}; expected one of {LABELS:?}",
                n + 1,
                row.label
            ));
        }
        let pairs = row
            .corpus
            .iter()
            .map(|(id, text)| (id.clone(), text.as_str().unwrap_or_default().to_owned()));
        let corpus = IndexedCorpus::new(
            Corpus::from_pairs(pairs).map_err(|e| format!("row {}: {e}", n + 1))?,
        );
        // The same job configuration every host sends: the check retrieves its evidence and
        // answers its lookups from the corpus, so no host tool is needed.
        let config = json!({
            "kind": "claim",
            "claim": row.claim,
            "corpus": corpus.id(),
            "retriever": options.retriever,
            "retry": {"maxRetries": options.retries},
        });
        let job = Job::from_json(&config.to_string(), &[Arc::clone(&corpus)])
            .map_err(|failed| format!("row {}: {failed}", n + 1))?;
        let outcome = block_on(drive(job, model, &NoTools)).map(|value| {
            serde_json::from_value::<Report>(value).expect("a claim job's value is a report")
        });
        let corpus = corpus.corpus();
        let predicted = match &outcome {
            Ok(report) => {
                requests += u64::from(report.requests);
                *routes.entry(report.route.as_str().to_owned()).or_default() += 1;
                let verdict = serde_json::to_value(report.assessment.verdict).unwrap();
                let verdict = verdict.as_str().unwrap_or_default().to_owned();
                if report.assessment.verdict.is_conclusive() {
                    conclusive += 1;
                    let gold = row.meta["gold"].as_str().and_then(|id| corpus.get(id));
                    if gold.is_some_and(|p| report.assessment.citations.contains(&p.text)) {
                        cites_gold += 1;
                    }
                }
                verdict
            }
            Err(failed) => {
                requests += u64::from(failed.spent().requests);
                *failures.entry(failed.kind().as_str().to_owned()).or_default() += 1;
                match failed.kind() {
                    // The first assessment was `insufficient` and research found nothing to
                    // change it: the check's answer is "insufficient", with no report.
                    JobFailureKind::NoNewEvidence | JobFailureKind::ResearchTurnLimit => {
                        "insufficient".to_owned()
                    }
                    _ => "failed".to_owned(),
                }
            }
        };
        if predicted == row.label {
            correct += 1;
        }
        *confusion.entry(row.label.clone()).or_default().entry(predicted).or_default() += 1;
        if (n + 1) % 50 == 0 || n + 1 == rows.len() {
            eprintln!(
                "eval: {}/{} claims ({})",
                n + 1,
                rows.len(),
                row.id.as_deref().unwrap_or("")
            );
        }
    }
    let total = u32::try_from(rows.len()).unwrap_or(u32::MAX);
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
    #[allow(clippy::cast_precision_loss)]
    let per_claim = requests as f64 / f64::from(total);
    Ok(json!({
        "file": options.file,
        "model": model_name,
        "retriever": options.retriever,
        "counts": {"claims": total, "reports": total - failures.values().sum::<u32>(), "failures": failures},
        "accuracy": round(f64::from(correct) / f64::from(total)),
        "balanced_accuracy": round(balanced),
        "confusion": confusion,
        "conclusive": conclusive,
        "conclusive_citing_gold_rate": if conclusive == 0 { Value::Null } else { json!(round(f64::from(cites_gold) / f64::from(conclusive))) },
        "requests_per_claim": round(per_claim),
        "routes": routes,
    }))
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}
