//! The eval of whole answers (`eval ANSWERS.jsonl`): each line `{"id", "answer", "corpus": {id:
//! text}` or `"document": text, "label": "faithful"|"hallucinated"}` (a document is split into
//! passages as the app splits an uploaded `.txt`). Each answer is one answer job
//! (`"kind": "answer"`, the other fields those of a claim file's rows): the core cuts it into
//! sentences and checks each that states something as a claim over the answer's corpus; the
//! answer is judged hallucinated when any checked sentence is not supported (a sentence whose
//! check found nothing counts as insufficient, one whose check failed as failed: not supported
//! either; an answer whose job failed, hallucinated).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use verity_core::answer::{AnswerReport, SentenceStatus};
use verity_core::corpus::Corpus;
use verity_core::indexed::IndexedCorpus;
use verity_core::{Job, JobConfig, JobFailed, NoTools, Transport, drive};

/// One answer to check.
#[derive(Debug, Clone, Deserialize)]
pub struct AnswerRow {
    /// Its id.
    pub id: String,
    /// The answer.
    pub answer: String,
    /// Its passages by id (or `document`).
    #[serde(default)]
    pub corpus: Option<BTreeMap<String, String>>,
    /// One text, split into passages as an uploaded `.txt` is (or `corpus`).
    #[serde(default)]
    pub document: Option<String>,
    /// `faithful` or `hallucinated`.
    pub label: String,
}

/// Whether `line` (a first line of a file) is an answer row rather than a claim row.
#[must_use]
pub fn is_answer_row(line: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|row| row.get("answer").is_some())
}

/// Reads an answers file: every line checked first, a bad one named by number.
///
/// # Errors
/// The file cannot be read, or a line is not an answer row with a known label.
pub fn read(path: &str) -> Result<Vec<AnswerRow>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        let row: AnswerRow =
            serde_json::from_str(line).map_err(|e| format!("{path}, line {}: {e}", n + 1))?;
        if !["faithful", "hallucinated"].contains(&row.label.as_str()) {
            return Err(format!(
                "{path}, line {}: the label is faithful or hallucinated, not {:?}",
                n + 1,
                row.label
            ));
        }
        if row.corpus.is_none() == row.document.is_none() {
            return Err(format!(
                "{path}, line {}: give a corpus or a document, one of them",
                n + 1
            ));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// What one answer came to.
struct Judged {
    hallucinated: bool,
    verdicts: Vec<String>,
    requests: u64,
    tokens: u64,
    /// The answer's report, or its failure, as JSON.
    value: Value,
}

/// Checks every answer of `rows` with `model`; `job` holds the claim jobs' other fields
/// (retriever, retry, assess). Returns the summary: `answers`, `balanced_accuracy` (faithful
/// against hallucinated), `accuracy`, the confusion, `sentence_verdicts`, `sentences` and
/// `checked`, `requests_per_answer`, `tokens` and `tokens_per_answer`.
///
/// # Errors
/// An answer that cannot be cut into sentences or whose corpus is refused, named by its id.
pub async fn evaluate(
    rows: &[AnswerRow],
    job: &Map<String, Value>,
    model: &impl Transport,
    mut progress: impl FnMut(usize, &AnswerRow, &Value),
) -> Result<Value, String> {
    let mut confusion: BTreeMap<&str, BTreeMap<&str, u64>> = BTreeMap::new();
    let mut verdicts: BTreeMap<String, u64> = BTreeMap::new();
    let (mut sentences, mut checked, mut requests, mut tokens) = (0, 0, 0, 0);
    for (n, row) in rows.iter().enumerate() {
        let cut = verity_core::answer::sentences(&row.answer)
            .map_err(|error| format!("{}: {error}", row.id))?;
        sentences += cut.len();
        let corpus = corpus_of(row)?;
        let judged = judge(&row.answer, &corpus, job, model)
            .await
            .map_err(|e| format!("{}: {e}", row.id))?;
        checked += judged.verdicts.len();
        let predicted = if judged.hallucinated { "hallucinated" } else { "faithful" };
        let truth = if row.label == "faithful" { "faithful" } else { "hallucinated" };
        *confusion.entry(truth).or_default().entry(predicted).or_default() += 1;
        for verdict in judged.verdicts {
            *verdicts.entry(verdict).or_default() += 1;
        }
        requests += judged.requests;
        tokens += judged.tokens;
        progress(n + 1, row, &judged.value);
    }
    let recall = |label: &str| {
        let row = confusion.get(label);
        let total: u64 = row.map_or(0, |row| row.values().sum());
        let right = row.and_then(|row| row.get(label)).copied().unwrap_or(0);
        #[allow(clippy::cast_precision_loss)]
        (total > 0).then(|| right as f64 / total as f64)
    };
    let right: u64 = ["faithful", "hallucinated"]
        .iter()
        .map(|label| confusion.get(label).and_then(|row| row.get(label)).copied().unwrap_or(0))
        .sum();
    let recalls: Vec<f64> = ["faithful", "hallucinated"].iter().filter_map(|l| recall(l)).collect();
    #[allow(clippy::cast_precision_loss)]
    let (answers, per) = (rows.len(), |x: u64| round(x as f64 / rows.len().max(1) as f64));
    #[allow(clippy::cast_precision_loss)]
    Ok(json!({
        "answers": answers,
        "accuracy": round(right as f64 / answers.max(1) as f64),
        "balanced_accuracy": round(recalls.iter().sum::<f64>() / recalls.len().max(1) as f64),
        "recall": {"faithful": recall("faithful").map(round), "hallucinated": recall("hallucinated").map(round)},
        "confusion": confusion,
        "sentences": sentences,
        "checked": checked,
        "sentence_verdicts": verdicts,
        "requests_per_answer": per(requests),
        "tokens": tokens,
        "tokens_per_answer": per(tokens),
    }))
}

/// The answer's corpus: its passages, or its document split as an uploaded `.txt` is.
fn corpus_of(row: &AnswerRow) -> Result<Arc<IndexedCorpus>, String> {
    let corpus = match (&row.corpus, &row.document) {
        (Some(passages), _) => Corpus::from_pairs(passages.iter()).map_err(|e| e.to_string()),
        (None, Some(document)) => verity_core::files::passages_from_file("document.txt", document)
            .map_err(|e| e.to_string())
            .and_then(|passages| Corpus::new(passages).map_err(|e| e.to_string())),
        (None, None) => Err("no corpus and no document".to_owned()),
    };
    corpus.map(IndexedCorpus::new).map_err(|e| format!("{}: {e}", row.id))
}

/// Checks `answer` over `corpus` as one answer job (`"kind": "answer"`, the other fields from
/// `job`): hallucinated when any checked sentence is not supported.
async fn judge(
    answer: &str,
    corpus: &Arc<IndexedCorpus>,
    job: &Map<String, Value>,
    model: &impl Transport,
) -> Result<Judged, String> {
    let mut config = job.clone();
    config.insert("kind".to_owned(), json!("answer"));
    config.insert("answer".to_owned(), json!(answer));
    config.insert("corpus".to_owned(), json!(corpus.id()));
    let config = JobConfig::from_value(Value::Object(config)).map_err(|e| e.to_string())?;
    let job = Job::new(config, std::slice::from_ref(corpus)).map_err(|e| e.to_string())?;
    let report = match job_value(drive(job, model, &NoTools).await) {
        Ok(report) => report,
        Err(failed) => {
            // The answer ended before its last sentence (a request failed past its retries):
            // no sentence is shown to hold.
            let spent = failed.spent();
            return Ok(Judged {
                hallucinated: true,
                verdicts: vec!["failed".to_owned()],
                requests: u64::from(spent.requests),
                tokens: spent.usage.input + spent.usage.output,
                value: json!({"failure": failed}),
            });
        }
    };
    let verdicts = report
        .sentences
        .iter()
        .filter(|sentence| sentence.status != SentenceStatus::NotCheckable)
        .map(|sentence| {
            serde_json::to_value(sentence.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        })
        .collect();
    Ok(Judged {
        hallucinated: report.faithful == Some(false),
        verdicts,
        requests: u64::from(report.requests),
        tokens: report.usage.input + report.usage.output,
        value: serde_json::to_value(&report).unwrap_or(Value::Null),
    })
}

/// The answer's report from a finished job's value.
fn job_value(outcome: Result<Value, JobFailed>) -> Result<AnswerReport, JobFailed> {
    let value = outcome?;
    serde_json::from_value(value)
        .map_err(|error| JobFailed::config(format!("not an answer's report: {error}")))
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
