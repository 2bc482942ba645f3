//! The summary of a labelled claim run, one for `eval` (in one process) and `batch` (through
//! Restate): counts, accuracy, balanced accuracy, the confusion matrix, the rate of conclusive
//! verdicts that cite the gold passage, requests per claim and routes.
//!
//! A check that fails with `no-new-evidence` or `research-turn-limit` counts as predicting
//! `insufficient` (its first assessment was `insufficient` and research found nothing to change
//! it); every other failure (and a check refused outright) is its own column, `failed`, and
//! always wrong.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use verity_core::answer::AnswerReport;
use verity_core::corpus::Corpus;
use verity_core::indexed::IndexedCorpus;
use verity_core::{Job, NoTools, Report, Transport, drive};

pub use crate::claims::{LABELS, Row};
use crate::workflow::CheckResult;

/// The running tally of a claim run.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    confusion: BTreeMap<String, BTreeMap<String, u32>>,
    failures: BTreeMap<String, u32>,
    routes: BTreeMap<String, u32>,
    total: u32,
    labelled: u32,
    correct: u32,
    requests: u64,
    conclusive: u32,
    cites_gold: u32,
    input_tokens: u64,
    output_tokens: u64,
}

impl Tally {
    /// An empty tally.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one claim: its label (if any), the text of its gold passage (if known) and its
    /// result.
    pub fn add(&mut self, label: Option<&str>, gold: Option<&str>, result: &CheckResult) {
        self.total += 1;
        let predicted = match (&result.value, &result.failure) {
            (Some(value), _) if value.get("sentences").is_some() => {
                // An answer's report: faithful or hallucinated, as its label says.
                let report: Option<AnswerReport> = serde_json::from_value(value.clone()).ok();
                self.requests += report.as_ref().map_or(0, |report| u64::from(report.requests));
                if let Some(report) = &report {
                    self.input_tokens += report.usage.input + report.usage.cache_read;
                    self.output_tokens += report.usage.output;
                }
                match report.and_then(|report| report.faithful) {
                    Some(true) => "faithful".to_owned(),
                    Some(false) => "hallucinated".to_owned(),
                    None => String::new(),
                }
            }
            (Some(value), _) => {
                // The core's typed report; a value that is not one counts as no verdict.
                let report = Report::from_job_value(value);
                self.requests += report.as_ref().map_or(0, |report| u64::from(report.requests));
                if let Some(report) = &report {
                    self.input_tokens += report.usage.input + report.usage.cache_read;
                    self.output_tokens += report.usage.output;
                }
                let route = report.as_ref().map_or("", |report| report.route.as_str());
                *self.routes.entry(route.to_owned()).or_default() += 1;
                match report {
                    None => String::new(),
                    Some(report) => {
                        let verdict = report.assessment.verdict;
                        if verdict.is_conclusive() {
                            self.conclusive += 1;
                            if gold.is_some_and(|text| {
                                report.assessment.citations.iter().any(|cited| cited == text)
                            }) {
                                self.cites_gold += 1;
                            }
                        }
                        serde_json::to_value(verdict)
                            .ok()
                            .and_then(|name| name.as_str().map(str::to_owned))
                            .unwrap_or_default()
                    }
                }
            }
            (None, Some(failure)) => {
                self.requests += u64::from(failure.spent().requests);
                let usage = failure.spent().usage;
                self.input_tokens += usage.input + usage.cache_read;
                self.output_tokens += usage.output;
                let kind = failure.kind().as_str();
                *self.failures.entry(kind.to_owned()).or_default() += 1;
                if failure.kind().is_insufficient() {
                    "insufficient".to_owned()
                } else {
                    "failed".to_owned()
                }
            }
            (None, None) => {
                *self.failures.entry("refused".to_owned()).or_default() += 1;
                "failed".to_owned()
            }
        };
        if let Some(label) = label {
            self.labelled += 1;
            if predicted == label {
                self.correct += 1;
            }
            *self.confusion.entry(label.to_owned()).or_default().entry(predicted).or_default() += 1;
        }
    }

    /// The summary: `eval`'s fields when every claim was labelled, else the counts, requests
    /// per claim and routes.
    #[must_use]
    pub fn summary(&self, file: &str, model: &str, retriever: &Value) -> Value {
        let total = self.total;
        let reports = total - self.failures.values().sum::<u32>();
        let counts = json!({
            "claims": total,
            "reports": reports,
            "failures": self.failures,
        });
        let completion = if total == 0 {
            Value::Null
        } else {
            json!(round(f64::from(reports) / f64::from(total)))
        };
        let tokens = json!({"input": self.input_tokens, "output": self.output_tokens});
        #[allow(clippy::cast_precision_loss)]
        let per_claim = self.requests as f64 / f64::from(total.max(1));
        if self.labelled < total || total == 0 {
            return json!({
                "file": file,
                "model": model,
                "retriever": retriever,
                "counts": counts,
                "completion_rate": completion,
                "tokens": tokens,
                "requests_per_claim": round(per_claim),
                "routes": self.routes,
            });
        }
        let recall: BTreeMap<&str, f64> = LABELS
            .iter()
            .filter_map(|label| {
                let row = self.confusion.get(*label)?;
                let all: u32 = row.values().sum();
                Some((*label, f64::from(row.get(*label).copied().unwrap_or(0)) / f64::from(all)))
            })
            .collect();
        #[allow(clippy::cast_precision_loss)]
        let balanced = recall.values().sum::<f64>() / recall.len().max(1) as f64;
        let binary = self.binary_balanced_accuracy();
        let gold_rate = if self.conclusive == 0 {
            Value::Null
        } else {
            json!(round(f64::from(self.cites_gold) / f64::from(self.conclusive)))
        };
        json!({
            "file": file,
            "model": model,
            "retriever": retriever,
            "counts": counts,
            "completion_rate": completion,
            "tokens": tokens,
            "accuracy": round(f64::from(self.correct) / f64::from(total)),
            "balanced_accuracy": round(balanced),
            "recall": recall.iter().map(|(label, r)| (*label, round(*r))).collect::<BTreeMap<_, _>>(),
            "binary_balanced_accuracy": binary.map(round),
            "confusion": self.confusion,
            "conclusive": self.conclusive,
            "conclusive_citing_gold_rate": gold_rate,
            "requests_per_claim": round(per_claim),
            "routes": self.routes,
        })
    }
}

impl Tally {
    /// Supported against the rest: the mean of the recall of `supported` and the recall of
    /// "not supported" (a claim labelled `contradicted` or `insufficient` predicted either of
    /// them). A failed check is wrong on both sides. `None` without claims of both sides.
    fn binary_balanced_accuracy(&self) -> Option<f64> {
        let (mut positive, mut hit, mut negative, mut rejected) = (0u32, 0u32, 0u32, 0u32);
        for (label, row) in &self.confusion {
            for (predicted, count) in row {
                if label == "supported" {
                    positive += count;
                    hit += if predicted == "supported" { *count } else { 0 };
                } else {
                    negative += count;
                    let no = predicted == "contradicted" || predicted == "insufficient";
                    rejected += if no { *count } else { 0 };
                }
            }
        }
        (positive > 0 && negative > 0).then(|| {
            (f64::from(hit) / f64::from(positive) + f64::from(rejected) / f64::from(negative)) / 2.0
        })
    }
}

/// The text of `row`'s gold passage (`meta.gold`): from its own corpus, else from the
/// batch's shared one.
#[must_use]
pub fn gold_text(row: &Row, shared: Option<&Corpus>) -> Option<String> {
    let id = row.meta["gold"].as_str()?;
    match &row.corpus {
        Some(own) => own.get(id).cloned(),
        None => shared.and_then(|corpus| corpus.get(id)).map(|passage| passage.text.clone()),
    }
}

/// Rounds to four decimals, as every summary figure is.
#[must_use]
pub fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// `eval`: checks every row in this process with `model` (no Restate), each against its own
/// corpus, and returns the summary. `job` holds the claim job's other fields (`retriever`,
/// `retry`); `progress` is called after each row with how many are done.
///
/// # Errors
/// A row without a corpus of its own, or a job the core refuses to build.
pub async fn evaluate(
    file: &str,
    rows: &[Row],
    job: &Map<String, Value>,
    model: &impl Transport,
    model_name: &str,
    mut progress: impl FnMut(usize, &CheckResult),
) -> Result<Value, String> {
    let mut tally = Tally::new();
    for (n, row) in rows.iter().enumerate() {
        let own =
            row.corpus.as_ref().ok_or_else(|| format!("row {} has no corpus of its own", n + 1))?;
        let corpus = IndexedCorpus::new(
            Corpus::from_pairs(own.iter()).map_err(|e| format!("row {}: {e}", n + 1))?,
        );
        // The same job configuration every host sends: the check retrieves its evidence and
        // answers its lookups from the corpus, so no host tool is needed.
        let mut config = job.clone();
        let inline = crate::claims::inline_rows(std::slice::from_ref(row));
        crate::claims::set_work(&mut config, &inline[0]);
        config.insert("corpus".to_owned(), json!(corpus.id()));
        let job = Job::from_json(&Value::Object(config).to_string(), &[Arc::clone(&corpus)])
            .map_err(|failed| format!("row {}: {failed}", n + 1))?;
        let outcome = drive(job, model, &NoTools).await;
        let result = CheckResult::of(outcome, verity_core::Spent::default());
        tally.add(row.label.as_deref(), gold_text(row, None).as_deref(), &result);
        progress(n + 1, &result);
    }
    Ok(tally.summary(file, model_name, &retriever_of(job)))
}

/// The retriever a claim job's fields name (the core's default when none).
#[must_use]
pub fn retriever_of(job: &Map<String, Value>) -> Value {
    job.get("retriever").cloned().unwrap_or_else(|| {
        serde_json::to_value(verity_core::retrieve::Retriever::default()).unwrap_or(Value::Null)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use verity_core::corpus::Corpus;

    use super::{Tally, gold_text};
    use crate::workflow::CheckResult;

    fn row(value: Value) -> super::Row {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_gold_passage_is_found_in_the_rows_corpus_or_else_the_shared_one() {
        let shared = Corpus::from_pairs([("g", "Shared gold."), ("h", "Other.")]).unwrap();
        let own = row(json!({"claim": "C.", "corpus": {"g": "Own gold."}, "meta": {"gold": "g"}}));
        assert_eq!(gold_text(&own, Some(&shared)).as_deref(), Some("Own gold."));
        let plain = row(json!({"claim": "C.", "meta": {"gold": "g"}}));
        assert_eq!(gold_text(&plain, Some(&shared)).as_deref(), Some("Shared gold."));
        assert_eq!(gold_text(&plain, None), None);
        assert_eq!(gold_text(&row(json!({"claim": "C."})), Some(&shared)), None);
    }

    #[test]
    fn a_refused_check_is_a_failed_prediction_and_counted_as_refused() {
        let mut tally = Tally::new();
        let report = json!({
            "claim": "C.", "requests": 2, "route": "single call", "summary": "S.", "usage": {},
            "assessment": {"verdict": "supported", "confidence": 0.9, "citations": ["Gold."]},
        });
        let ok = CheckResult::of(Ok(report), verity_core::Spent::default());
        tally.add(Some("supported"), Some("Gold."), &ok);
        tally.add(Some("contradicted"), None, &CheckResult::refused("corpus refused"));
        let summary = tally.summary("f.jsonl", "m", &json!("keyword"));
        assert_eq!(summary["counts"]["failures"]["refused"], 1, "{summary}");
        assert_eq!(summary["confusion"]["contradicted"]["failed"], 1, "{summary}");
        assert_eq!(summary["accuracy"], 0.5, "{summary}");
        assert_eq!(summary["conclusive_citing_gold_rate"], 1.0, "{summary}");
        assert_eq!(summary["requests_per_claim"], 1.0, "{summary}");
    }

    #[test]
    fn binary_balanced_accuracy_is_supported_against_the_rest_and_a_failure_is_wrong_on_both_sides()
    {
        let verdict = |verdict: &str| {
            let report = json!({
                "claim": "C.", "requests": 1, "route": "single call", "summary": "S.",
                "usage": {}, "assessment": {"verdict": verdict, "confidence": 0.9,
                "citations": []},
            });
            CheckResult::of(Ok(report), verity_core::Spent::default())
        };
        let mut tally = Tally::new();
        // Supported: 1 of 2 found. Not supported: contradicted called insufficient (right on
        // the binary side, wrong 3-way), insufficient called supported, one refused.
        tally.add(Some("supported"), None, &verdict("supported"));
        tally.add(Some("supported"), None, &verdict("contradicted"));
        tally.add(Some("contradicted"), None, &verdict("insufficient"));
        tally.add(Some("insufficient"), None, &verdict("supported"));
        tally.add(Some("insufficient"), None, &CheckResult::refused("corpus refused"));
        let summary = tally.summary("f.jsonl", "m", &json!("keyword"));
        // (1/2 + 1/3) / 2
        assert_eq!(summary["binary_balanced_accuracy"], 0.4167, "{summary}");
        assert_eq!(summary["recall"]["supported"], 0.5, "{summary}");
        assert_eq!(summary["recall"]["contradicted"], 0.0, "{summary}");
        assert_eq!(summary["recall"]["insufficient"], 0.0, "{summary}");
        assert_eq!(summary["accuracy"], 0.2, "{summary}");
    }
}
