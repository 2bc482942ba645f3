//! The finished checks as CSV, written by the worker (`ToWorker::ExportCsv`) so that the
//! page's wasm carries none of it: one row per result, with its provenance.
//!
//! Every cell is quoted (RFC 4180: a `"` is doubled; a line break stays inside the quotes),
//! and a cell that a spreadsheet would read as a formula (starting with `=`, `+`, `-`, `@`, a
//! tab or a carriage return) gets a leading `'`: claims, model text and corpus ids are
//! untrusted, and `=HYPERLINK(...)` in a claim must stay text.

use serde_json::Value;

use crate::text::{failure_verdict, fixed};
use crate::{CheckResult, FailureView, FromJson, Outcome, ReportView};

/// The columns, in order.
const HEADER: [&str; 14] = [
    "id",
    "claim",
    "verdict",
    "failure kind",
    "confidence",
    "summary",
    "cited ids",
    "provider",
    "base URL",
    "model",
    "corpus",
    "corpus items",
    "app version",
    "date",
];

/// One cell: quoted, its quotes doubled, a formula's first character made text.
fn cell(text: &str) -> String {
    let guard = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) { "'" } else { "" };
    format!("\"{guard}{}\"", text.replace('"', "\"\""))
}

/// The results as CSV (CRLF line ends, a header row, one row per result).
pub fn to_csv(results: &[CheckResult]) -> String {
    let mut csv = row(HEADER.iter().map(|name| (*name).to_owned()));
    for result in results {
        let (verdict, kind, confidence, summary) = match &result.outcome {
            Outcome::Report { report } => match ReportView::from_json(report) {
                Ok(report) => (
                    report.assessment.verdict,
                    String::new(),
                    fixed(report.assessment.confidence, 2),
                    report.summary,
                ),
                Err(error) => ("unreadable".to_owned(), String::new(), String::new(), error),
            },
            Outcome::Failed { failure } => match FailureView::from_json(failure) {
                Ok(failure) => (
                    failure_verdict(&failure.kind).unwrap_or("failed").to_owned(),
                    failure.kind,
                    String::new(),
                    failure.message,
                ),
                Err(error) => ("unreadable".to_owned(), String::new(), String::new(), error),
            },
        };
        let cited: Vec<&str> = result.cited.iter().map(|item| item.id.as_str()).collect();
        let provenance = result.provenance.as_ref();
        let field = |name: &str| match provenance.and_then(|p| p.get(name)) {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        csv.push_str(&row([
            result.id.clone(),
            result.claim.clone(),
            verdict,
            kind,
            confidence,
            summary,
            cited.join(" "),
            field("provider"),
            field("baseUrl"),
            field("model"),
            field("corpus"),
            field("items"),
            field("appVersion"),
            field("date"),
        ]));
    }
    csv
}

fn row(cells: impl IntoIterator<Item = String>) -> String {
    let cells: Vec<String> = cells.into_iter().map(|text| cell(&text)).collect();
    cells.join(",") + "\r\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cell_is_quoted_and_a_formula_is_made_text() {
        assert_eq!(cell("plain"), "\"plain\"");
        assert_eq!(cell("say \"hi\"\nthen"), "\"say \"\"hi\"\"\nthen\"");
        for formula in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"] {
            assert!(cell(formula).starts_with("\"'"), "{formula:?}");
        }
        assert_eq!(cell(""), "\"\"");
    }

    #[test]
    fn research_that_found_nothing_new_is_the_verdict_insufficient_in_csv() {
        let results = [CheckResult {
            id: "c1".into(),
            claim: "A.".into(),
            outcome: Outcome::Failed {
                failure: json!({"kind": "no-new-evidence", "message": "nothing new"}),
            },
            cited: Vec::new(),
            provenance: Some(json!({"provider": "openai", "baseUrl": "https://api.example/v1",
                "model": "m", "corpus": "sha256:ab", "items": 12, "appVersion": "0.1.0",
                "date": "2026-01-02T03:04:05.000Z"})),
        }];
        let csv = to_csv(&results);
        let row = csv.split("\r\n").nth(1).unwrap();
        assert_eq!(
            row,
            "\"c1\",\"A.\",\"insufficient\",\"no-new-evidence\",\"\",\"nothing new\",\"\",\
             \"openai\",\"https://api.example/v1\",\"m\",\"sha256:ab\",\"12\",\"0.1.0\",\
             \"2026-01-02T03:04:05.000Z\""
        );
    }
}
