//! The finished checks as Markdown, written by the worker (`ToWorker::ExportMarkdown`) so
//! that the page's wasm carries none of it. Everything that came from a claim, a model or the
//! corpus is escaped (`inline`): it renders as the text it was, never as a link or markup.

use crate::text::{
    advice, failure_verdict, fixed, provenance_text, spent_text, usage_text, verdict_text,
};
use crate::{AnswerView, CheckResult, FailureView, FromJson, Outcome, ReportView};

/// Text on one Markdown line, with nothing that Markdown would read as markup or HTML. Beyond
/// CommonMark's markup (emphasis, code, links, images, HTML, entities, headings, list and quote
/// markers at the line's start), what its extensions and linkifying renderers read: GFM's
/// tables, strikethrough and autolinks (a bare `https:` URL, `www.`, an e-mail address), bare
/// domains (`example.com`), math (`$`) and emoji (`:smile:`). Each such character is
/// backslash-escaped, which renders as the character itself.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.split_whitespace().collect::<Vec<_>>().join(" ").chars() {
        if "\\`*_[]<>#|~&$:@.!-+=)".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The results as Markdown: a heading per claim, then its verdict, summary, how it was decided
/// and citations, or its failure and what to do about it.
pub fn to_markdown(results: &[CheckResult]) -> String {
    let mut md = String::from("# Verity results\n");
    for result in results {
        if let Outcome::Report { report } = &result.outcome
            && report.get("sentences").is_some()
        {
            answer_markdown(&mut md, result, report);
            continue;
        }
        md.push_str(&format!("\n## {}\n\n", inline(&result.claim)));
        match &result.outcome {
            Outcome::Report { report } => match ReportView::from_json(report) {
                Ok(report) => {
                    md.push_str(&format!(
                        "**{}** ({}% confidence)\n\n{}\n\n",
                        verdict_text(&report.assessment.verdict),
                        fixed(report.assessment.confidence * 100.0, 0),
                        inline(&report.summary)
                    ));
                    if let Some(rationale) = &report.assessment.rationale {
                        md.push_str(&format!("How it was decided: {}\n\n", inline(rationale)));
                    }
                    for citation in &report.assessment.citations {
                        md.push_str(&format!("> {}\n\n", inline(citation)));
                    }
                    md.push_str(&format!(
                        "Route: {} · {} requests · {}\n",
                        report.route,
                        report.requests,
                        usage_text(&report.usage)
                    ));
                }
                Err(error) => md.push_str(&format!("The report could not be read: {error}\n")),
            },
            Outcome::Failed { failure } => match FailureView::from_json(failure) {
                Ok(failure) => md.push_str(&format!(
                    "{}: {}\n\nWhat to do: {}\n\nSpent: {}\n",
                    match failure_verdict(&failure.kind) {
                        Some(verdict) =>
                            format!("**{}** (`{}`)", verdict_text(verdict), failure.kind),
                        None => format!("**Failed** (`{}`)", failure.kind),
                    },
                    inline(&failure.message),
                    advice(&failure.kind, &failure.message),
                    spent_text(&failure.spent)
                )),
                Err(error) => md.push_str(&format!("The failure could not be read: {error}\n")),
            },
        }
        if let Some(provenance) = result.provenance() {
            md.push_str(&format!("\nFrom: {}\n", inline(&provenance_text(&provenance))));
        }
    }
    md
}

/// An answer's result: the answer, whether it holds, then each sentence with its status, its
/// place in the answer (UTF-16 code units, as a page indexes it), its quotes with their place
/// in their passage, and the answer's own marks, each checked.
fn answer_markdown(md: &mut String, result: &CheckResult, report: &serde_json::Value) {
    md.push_str(&format!("\n## Answer: {}\n\n", inline(&result.claim)));
    let view = match AnswerView::from_json(report) {
        Ok(view) => view,
        Err(error) => {
            md.push_str(&format!("The report could not be read: {error}\n"));
            return;
        }
    };
    let checked = view.sentences.iter().filter(|s| s.status != "not-checkable").count();
    let supported = view.sentences.iter().filter(|s| s.status == "supported").count();
    md.push_str(&format!(
        "**{}**: {supported} of {checked} checked sentences supported · {} requests · {}\n\n",
        match view.faithful {
            Some(true) => "Every checked sentence holds",
            Some(false) => "Not every sentence holds",
            None => "Nothing to check",
        },
        view.requests,
        usage_text(&view.usage)
    ));
    for sentence in &view.sentences {
        let span = sentence.span;
        let status = match sentence.status.as_str() {
            "not-checkable" => "Not checked (nothing to check)".to_owned(),
            "failed" => "Check failed".to_owned(),
            verdict => verdict_text(verdict),
        };
        let confidence = sentence
            .confidence
            .map(|c| format!(" ({}% confidence)", fixed(c * 100.0, 0)))
            .unwrap_or_default();
        md.push_str(&format!(
            "{}. **{status}**{confidence}, characters {}–{}: {}\n",
            sentence.index + 1,
            span.start_utf16,
            span.end_utf16,
            inline(&sentence.text)
        ));
        if let Some(failure) = &sentence.failure {
            md.push_str(&format!("   - `{}`: {}\n", failure.kind, inline(&failure.message)));
        }
        for claim in &sentence.claims {
            let status = match claim.status.as_str() {
                "failed" => "Check failed".to_owned(),
                verdict => verdict_text(verdict),
            };
            md.push_str(&format!("   - Claim, **{status}**: {}\n", inline(&claim.text)));
        }
        if let Some(whole) = sentence.decomposed.as_ref().and_then(|d| d.whole.as_ref()) {
            md.push_str(&format!("   - Checked whole: {}\n", inline(&whole.message)));
        }
        for citation in &sentence.citations {
            md.push_str(&format!(
                "   - {} (passage {}, characters {}–{})\n",
                inline(&citation.quote),
                inline(citation.passage.as_deref().unwrap_or("not in the corpus")),
                citation.span.start_utf16,
                citation.span.end_utf16
            ));
        }
        for mark in &sentence.marks {
            md.push_str(&format!(
                "   - Mark \\[{}\\]: {}\n",
                inline(&mark.label),
                mark.holds.replace('-', " ")
            ));
        }
    }
    if let Some(provenance) = result.provenance() {
        md.push_str(&format!("\nFrom: {}\n", inline(&provenance_text(&provenance))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn markdown_names_verdicts_and_failures_and_escapes_markup() {
        let results = vec![
            CheckResult {
                id: "c1".into(),
                claim: "The bridge <b>opened</b> in 1932.".into(),
                outcome: Outcome::Report {
                    report: json!({"claim": "x", "assessment": {"verdict": "supported", "confidence": 0.9,
                        "citations": ["The bridge opened in 1932."],
                        "rationale": "The passage says *1932*."}, "route": "single call",
                        "summary": "Yes.", "requests": 2, "usage": {"input": 10, "output": 5, "cost": 0.0}}),
                },
                cited: Vec::new(),
                provenance: None,
            },
            CheckResult {
                id: "c2".into(),
                claim: "Other.".into(),
                outcome: Outcome::Failed {
                    failure: json!({"kind": "cancelled", "message": "stopped"}),
                },
                cited: Vec::new(),
                provenance: None,
            },
        ];
        let md = to_markdown(&results);
        assert!(md.contains("## The bridge \\<b\\>opened\\</b\\> in 1932\\."), "{md}");
        assert!(md.contains("**Supported** (90% confidence)"), "{md}");
        assert!(md.contains("> The bridge opened in 1932\\."), "{md}");
        assert!(md.contains("How it was decided: The passage says \\*1932\\*\\."), "{md}");
        assert_eq!(md.matches("How it was decided").count(), 1, "only where a report has one");
        assert!(md.contains("**Failed** (`cancelled`): stopped"), "{md}");
    }

    /// Each result says where it came from, escaped like the rest (a base URL is no link).
    #[test]
    fn markdown_carries_the_provenance() {
        let results = [CheckResult {
            id: "c1".into(),
            claim: "A.".into(),
            outcome: Outcome::Failed { failure: json!({"kind": "cancelled", "message": "m"}) },
            cited: Vec::new(),
            provenance: Some(json!({"provider": "openai", "baseUrl": "https://api.example/v1",
                "model": "m-1", "corpus": "sha256:ab", "items": 12, "appVersion": "0.1.0",
                "date": "2026-01-02T03:04:05.000Z"})),
        }];
        let md = to_markdown(&results);
        assert!(
            md.contains(
                "From: openai at https\\://api\\.example/v1, model m\\-1 · corpus sha256\\:ab \
                 (12 items\\) · Verity 0\\.1\\.0 · 2026\\-01\\-02T03\\:04\\:05\\.000Z"
            ),
            "{md}"
        );
    }

    /// Nothing from a claim, a model or a corpus becomes a link, an image, a list, a heading,
    /// an entity or emphasis in the Markdown: bare URLs, `www.` and bare domains (which GFM and
    /// linkifying renderers turn into links), e-mail addresses, line-start markers.
    #[test]
    fn research_that_found_nothing_new_is_exported_as_insufficient_evidence() {
        let results = [CheckResult {
            id: "c1".into(),
            claim: "The bridge opened in 1932.".into(),
            outcome: Outcome::Failed {
                failure: json!({"kind": "no-new-evidence",
                    "message": "escalation found no additional evidence",
                    "spent": {"turns": 2, "requests": 3, "retries": 0,
                        "usage": {"input": 10, "output": 5, "cache_read": 0, "cost": 0.0}}}),
            },
            cited: Vec::new(),
            provenance: None,
        }];
        let md = to_markdown(&results);
        assert!(
            md.contains("**Insufficient evidence** (`no-new-evidence`): escalation found no"),
            "{md}"
        );
        assert!(!md.contains("**Failed**"), "{md}");
        assert!(
            md.contains("What to do: The corpus has nothing more that speaks to the claim"),
            "{md}"
        );
    }

    #[test]
    fn markdown_makes_no_link_or_markup_from_the_text() {
        let hostile = "See https://evil.example/x?a=1 or www.evil.example, mail me@evil.example, \
                       evil.example &amp; ![i](http://x/i.png) ~~gone~~ $x$ :smile:";
        let results = vec![
            CheckResult {
                id: "c1".into(),
                claim: format!("1. {hostile}"),
                outcome: Outcome::Report {
                    report: json!({"claim": "x", "assessment": {"verdict": "supported", "confidence": 0.9,
                        "citations": [format!("- {hostile}")]}, "route": "single call",
                        "summary": format!("+ {hostile}"), "requests": 2,
                        "usage": {"input": 10, "output": 5, "cost": 0.0}}),
                },
                cited: Vec::new(),
                provenance: None,
            },
            CheckResult {
                id: "c2".into(),
                claim: "2) Other.".into(),
                outcome: Outcome::Failed {
                    failure: json!({"kind": "provider", "message": hostile}),
                },
                cited: Vec::new(),
                provenance: None,
            },
        ];
        let md = to_markdown(&results);
        for bare in ["https:", "www.", "evil.example", "me@", "![", "~~", ":smile:"] {
            assert!(!md.contains(bare), "{bare:?} left unescaped in:\n{md}");
        }
        for escaped in ["me\\@evil", "\\&amp;", "\\!\\[i\\]", "\\~\\~gone", "\\$x\\$"] {
            assert!(md.contains(escaped), "{escaped:?} in:\n{md}");
        }
        assert!(md.contains("https\\://evil\\.example/x?a\\=1"), "{md}");
        assert!(md.contains("www\\.evil\\.example"), "{md}");
        for line_start in ["## 1\\. See", "> \\- See", "\n\\+ See", "## 2\\) Other"] {
            assert!(md.contains(line_start), "{line_start:?} in:\n{md}");
        }
    }
}
