//! A claim file's rows: the labelled JSONL the batch command and `eval` read
//! ([`read_claims`]), and the rows a batch carries ([`ClaimRow`]). Below the workflows and the
//! corpus loader, which both read claim files, and needing neither.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One row of a claim file: the format of `shared/data/vitaminc/claims-dev.jsonl` (a row
/// may carry its own small corpus, a label and `meta.gold`), or plain `{id, claim}`; or an
/// answer to check sentence by sentence, `{"kind": "answer", "answer": ..., "marks": {...},
/// "decompose": true}` (`marks` and `decompose` optional)
/// (labelled `faithful` or `hallucinated`).
#[derive(Debug, Clone, Deserialize)]
pub struct Row {
    /// The row's id.
    #[serde(default)]
    pub id: Option<String>,
    /// `"claim"` (the default) or `"answer"`.
    #[serde(default)]
    pub kind: Option<String>,
    /// The claim (empty in an answer's row).
    #[serde(default)]
    pub claim: String,
    /// The answer, in an answer's row.
    #[serde(default)]
    pub answer: Option<String>,
    /// Which passage each of the answer's citation marks names.
    #[serde(default)]
    pub marks: BTreeMap<String, String>,
    /// Split the answer's sentences into atomic claims before checking them.
    #[serde(default)]
    pub decompose: bool,
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

/// The labels a claim's row may carry.
pub const LABELS: [&str; 3] = ["supported", "contradicted", "insufficient"];
/// The labels an answer's row may carry.
pub const ANSWER_LABELS: [&str; 2] = ["faithful", "hallucinated"];

/// A row of a batch: a claim (or an answer), with its own small corpus or against the batch's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRow {
    /// The row's id (its position when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The claim (empty for an answer).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub claim: String,
    /// An answer to check sentence by sentence, instead of a claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Which passage each of the answer's citation marks names.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub marks: BTreeMap<String, String>,
    /// Split the answer's sentences into atomic claims before checking them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub decompose: bool,
    /// The row's own corpus (passage id → text), else the batch's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<BTreeMap<String, String>>,
}

/// Reads a claim file. Every line is checked before anything is submitted; an id given twice
/// is refused (the results would not tell the two apart).
///
/// # Errors
/// The first bad line, by number (`FILE:LINE: why`).
pub fn read_claims(path: &Path) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_claims(&path.display().to_string(), &text)
}

/// Reads the text of a claim file named `name` (see [`read_claims`]).
///
/// # Errors
/// The first bad line, by number (`NAME:LINE: why`).
pub fn parse_claims(name: &str, text: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |why: String| format!("{name}:{}: {why}", n + 1);
        let row: Row = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        let labels: &[&str] = match (row.kind.as_deref(), &row.answer) {
            (None | Some("claim"), None) => {
                if row.claim.trim().is_empty() {
                    return Err(at("the claim is empty".to_owned()));
                }
                verity_core::corpus::check_claim_text(&row.claim).map_err(at)?;
                &LABELS
            }
            (None | Some("answer"), Some(answer)) => {
                if !row.claim.is_empty() {
                    return Err(at("a row is a claim or an answer, not both".to_owned()));
                }
                verity_core::answer::sentences(answer).map_err(|e| at(e.to_string()))?;
                &ANSWER_LABELS
            }
            (Some("answer"), None) => return Err(at("an answer's row has no answer".to_owned())),
            (Some(other), _) => {
                return Err(at(format!("kind {other:?}; expected \"claim\" or \"answer\"")));
            }
        };
        if let Some(label) = &row.label
            && !labels.contains(&label.as_str())
        {
            return Err(at(format!("label {label:?}; expected one of {labels:?}")));
        }
        if let Some(id) = &row.id
            && let Some(first) = seen.insert(id.clone(), n + 1)
        {
            return Err(at(format!("the id {id:?} is given twice (first on line {first})")));
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(format!("{name} has no claims"));
    }
    Ok(rows)
}

/// The rows of `rows` as a batch carries them inline (a small batch submitted by hand).
#[must_use]
pub fn inline_rows(rows: &[Row]) -> Vec<ClaimRow> {
    rows.iter()
        .map(|row| ClaimRow {
            id: row.id.clone(),
            claim: row.claim.clone(),
            answer: row.answer.clone(),
            marks: row.marks.clone(),
            decompose: row.decompose,
            corpus: row.corpus.clone(),
        })
        .collect()
}

/// Makes `job` (a batch's job fields) `row`'s: a claim job, or an answer job with its marks.
/// The batch's `concurrency` (sentences checked at once) is an answer's: a claim's job, which
/// has one thing in flight at a time, does not take it.
pub fn set_work(job: &mut serde_json::Map<String, Value>, row: &ClaimRow) {
    match &row.answer {
        Some(answer) => {
            job.insert("kind".to_owned(), Value::from("answer"));
            job.insert("answer".to_owned(), Value::from(answer.clone()));
            if !row.marks.is_empty() {
                job.insert("marks".to_owned(), serde_json::json!(row.marks));
            }
            if row.decompose {
                job.insert("decompose".to_owned(), Value::from(true));
            }
        }
        None => {
            job.remove("concurrency");
            job.insert("kind".to_owned(), Value::from("claim"));
            job.insert("claim".to_owned(), Value::from(row.claim.clone()));
        }
    }
}
