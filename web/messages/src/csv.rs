//! The finished checks as CSV, written by the worker (`ToWorker::ExportCsv`) so that the
//! page's wasm carries none of it: one row per result, with its provenance.
//!
//! Every cell is quoted (RFC 4180: a `"` is doubled; a line break stays inside the quotes),
//! and a cell that a spreadsheet would read as a formula (starting with `=`, `+`, `-`, `@`, a
//! tab or a carriage return) gets a leading `'`: claims, model text and corpus ids are
//! untrusted, and `=HYPERLINK(...)` in a claim must stay text.

use serde_json::Value;

use crate::text::{failure_verdict, fixed};
use crate::{
    AnswerView, CheckResult, CitationView, FailureView, FromJson, Outcome, ReportView,
    SentenceFailureView, SpanView,
};

/// The columns, in order. An answer's result is a row per sentence: its id is the check's
/// with `#` and the sentence's number, `span` its place in the answer and `quote spans` each
/// quote's passage and place in it (UTF-16 code units, as a page indexes text).
const HEADER: [&str; 16] = [
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
    "span",
    "quote spans",
];

/// One cell: quoted, its quotes doubled, a formula's first character made text.
fn cell(text: &str) -> String {
    let guard = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) { "'" } else { "" };
    format!("\"{guard}{}\"", text.replace('"', "\"\""))
}

/// The results as CSV (CRLF line ends, a header row, one row per result; a row per sentence
/// for an answer's).
pub fn to_csv(results: &[CheckResult]) -> String {
    let mut csv = row(HEADER.iter().map(|name| (*name).to_owned()));
    for result in results {
        let provenance = result.provenance.as_ref();
        let field = |name: &str| match provenance.and_then(|p| p.get(name)) {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        let origin =
            ["provider", "baseUrl", "model", "corpus", "items", "appVersion", "date"].map(field);
        if let Outcome::Report { report } = &result.outcome
            && report.get("sentences").is_some()
        {
            answer_rows(&mut csv, result, report, &origin);
            continue;
        }
        let mut quotes = String::new();
        let (verdict, kind, confidence, summary) = match &result.outcome {
            Outcome::Report { report } => match ReportView::from_json(report) {
                Ok(view) => {
                    quotes = located(report).iter().map(quote_span).collect::<Vec<_>>().join(" ");
                    (
                        view.assessment.verdict,
                        String::new(),
                        fixed(view.assessment.confidence, 2),
                        view.summary,
                    )
                }
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
        let mut cells =
            vec![result.id.clone(), result.claim.clone(), verdict, kind, confidence, summary];
        cells.push(cited.join(" "));
        cells.extend(origin);
        cells.extend([String::new(), quotes]);
        csv.push_str(&row(cells));
    }
    csv
}

/// A claim report's located citations (none in a report from before they were).
fn located(report: &Value) -> Vec<CitationView> {
    let all = report.get("citations").and_then(Value::as_array);
    all.map(|all| all.iter().filter_map(|c| CitationView::from_json(c).ok()).collect())
        .unwrap_or_default()
}

/// `passage:start-end`: where a quote sits in its passage, in UTF-16 code units.
fn quote_span(citation: &CitationView) -> String {
    let passage = citation.passage.as_deref().unwrap_or("?");
    format!("{passage}:{}-{}", citation.span.start_utf16, citation.span.end_utf16)
}

/// An answer's rows: one per sentence, and one per claim of a split sentence after it.
fn answer_rows(csv: &mut String, result: &CheckResult, report: &Value, origin: &[String; 7]) {
    let view = match AnswerView::from_json(report) {
        Ok(view) => view,
        Err(error) => {
            let mut cells = vec![result.id.clone(), result.claim.clone(), "unreadable".to_owned()];
            cells.extend([String::new(), String::new(), error, String::new()]);
            cells.extend(origin.iter().cloned());
            cells.extend([String::new(), String::new()]);
            csv.push_str(&row(cells));
            return;
        }
    };
    for sentence in &view.sentences {
        let id = format!("{}#{}", result.id, sentence.index + 1);
        csv.push_str(&checked_row(
            id,
            &sentence.text,
            &sentence.status,
            sentence.confidence,
            sentence.failure.as_ref(),
            &sentence.citations,
            sentence.span,
            origin,
        ));
        // A split sentence's claims follow it, a row each (`a1#2.1`), with their own spans.
        for (n, claim) in sentence.claims.iter().enumerate() {
            let id = format!("{}#{}.{}", result.id, sentence.index + 1, n + 1);
            csv.push_str(&checked_row(
                id,
                &claim.text,
                &claim.status,
                claim.confidence,
                claim.failure.as_ref(),
                &claim.citations,
                claim.span,
                origin,
            ));
        }
    }
}

/// The row of one checked piece of an answer (a sentence, or a split sentence's claim): its
/// status, failure, confidence, cited passages, place in the answer and its quotes' places.
#[allow(clippy::too_many_arguments)]
fn checked_row(
    id: String,
    text: &str,
    status: &str,
    confidence: Option<f64>,
    failure: Option<&SentenceFailureView>,
    citations: &[CitationView],
    span: SpanView,
    origin: &[String; 7],
) -> String {
    let cited: Vec<&str> = citations.iter().filter_map(|c| c.passage.as_deref()).collect();
    let quotes: Vec<String> = citations.iter().map(quote_span).collect();
    let mut cells = vec![
        id,
        text.to_owned(),
        status.to_owned(),
        failure.map(|f| f.kind.clone()).unwrap_or_default(),
        confidence.map(|c| fixed(c, 2)).unwrap_or_default(),
        failure.map(|f| f.message.clone()).unwrap_or_default(),
        cited.join(" "),
    ];
    cells.extend(origin.iter().cloned());
    cells.push(format!("{}-{}", span.start_utf16, span.end_utf16));
    cells.push(quotes.join(" "));
    row(cells)
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
             \"2026-01-02T03:04:05.000Z\",\"\",\"\""
        );
    }

    /// An answer exports a row per sentence, with its place in the answer and each quote's in
    /// its passage; a claim's row carries its quote's place too.
    #[test]
    fn an_answer_exports_a_row_per_sentence_with_its_spans() {
        let span =
            |a: usize, b: usize| json!({"start": a, "end": b, "startUtf16": a, "endUtf16": b});
        let report = json!({"answer": "Hi! It opened in 1937 [d2].", "supportedShare": 1.0,
        "faithful": true, "requests": 2, "usage": {"input": 1, "output": 1},
        "sentences": [
            {"index": 0, "text": "Hi!", "span": span(0, 3), "status": "not-checkable"},
            {"index": 1, "text": "It opened in 1937 [d2].", "span": span(4, 27),
             "status": "supported", "confidence": 0.8,
             "citations": [{"passage": "d2", "quote": "It opened in 1937.", "span": span(10, 28),
                            "text": "Built 1933. It opened in 1937."}],
             "marks": [{"label": "d2", "span": span(22, 26), "passage": "d2", "holds": "supports"}]}
        ]});
        let results = [CheckResult {
            id: "a1".into(),
            claim: "Hi! It opened in 1937 [d2].".into(),
            outcome: Outcome::Report { report },
            cited: Vec::new(),
            provenance: None,
        }];
        let csv = to_csv(&results);
        let rows: Vec<&str> = csv.split("\r\n").collect();
        assert!(rows[0].ends_with("\"span\",\"quote spans\""), "{csv}");
        assert!(rows[1].starts_with("\"a1#1\",\"Hi!\",\"not-checkable\""), "{csv}");
        assert!(
            rows[2].starts_with("\"a1#2\",\"It opened in 1937 [d2].\",\"supported\",\"\",\"0.80\""),
            "{csv}"
        );
        assert!(rows[2].ends_with("\"4-27\",\"d2:10-28\""), "{csv}");
        let md = crate::markdown::to_markdown(&results);
        assert!(
            md.contains("**Every checked sentence holds**: 1 of 1 checked sentences supported"),
            "{md}"
        );
        assert!(md.contains("2. **Supported** (80% confidence), characters 4–27:"), "{md}");
        assert!(md.contains("(passage d2, characters 10–28)"), "{md}");
        assert!(md.contains("Mark \\[d2\\]: supports"), "{md}");
    }

    /// A split sentence's claims follow its row, a row each with the claim's own span.
    #[test]
    fn a_split_sentence_exports_a_row_per_claim() {
        let span =
            |a: usize, b: usize| json!({"start": a, "end": b, "startUtf16": a, "endUtf16": b});
        let report = json!({"answer": "It opened in 1937 and is red.", "supportedShare": 0.0,
        "faithful": false, "requests": 3, "usage": {"input": 1, "output": 1},
        "sentences": [
            {"index": 0, "text": "It opened in 1937 and is red.", "span": span(0, 29),
             "status": "contradicted", "confidence": 0.7, "decomposed": {"ungrounded": 1},
             "claims": [
                {"text": "It opened in 1937", "span": span(0, 17), "status": "supported",
                 "confidence": 0.9},
                {"text": "It is red.", "span": span(0, 29), "status": "contradicted",
                 "confidence": 0.7,
                 "citations": [{"passage": "d3", "quote": "It is orange.", "span": span(0, 13),
                                "text": "It is orange."}]}
             ]}
        ]});
        let results = [CheckResult {
            id: "a1".into(),
            claim: "It opened in 1937 and is red.".into(),
            outcome: Outcome::Report { report },
            cited: Vec::new(),
            provenance: None,
        }];
        let csv = to_csv(&results);
        let rows: Vec<&str> = csv.split("\r\n").collect();
        assert!(rows[1].starts_with("\"a1#1\",\"It opened in 1937 and is red.\",\"contradicted\""));
        assert!(
            rows[2].starts_with("\"a1#1.1\",\"It opened in 1937\",\"supported\",\"\",\"0.90\"")
        );
        assert!(rows[2].ends_with("\"0-17\",\"\""), "{csv}");
        assert!(rows[3].starts_with("\"a1#1.2\",\"It is red.\",\"contradicted\""), "{csv}");
        assert!(rows[3].ends_with("\"0-29\",\"d3:0-13\""), "{csv}");
        let md = crate::markdown::to_markdown(&results);
        assert!(md.contains("   - Claim, **Supported**: It opened in 1937\n"), "{md}");
        assert!(md.contains("   - Claim, **Contradicted**: It is red\\.\n"), "{md}");
    }
}
