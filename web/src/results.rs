//! A finished check: the verdict, confidence and summary, each citation linked to its evidence
//! item and highlighted inside it, the route and what was spent; or a typed failure with what to
//! do about it. All of it is text: nothing the corpus or the model wrote becomes markup.

use crate::answer::AnswerBody;
use crate::engine_view::fixed;
use leptos::prelude::*;
use verity_messages::{AnswerView, CheckResult, FailureView, FromJson, Item, Outcome, ReportView};

pub use verity_messages::text::{
    confidence_words, cost_text, count, failure_verdict, spent_text, usage_text, verdict_text,
};

/// Splits `text` into pieces, `true` for the pieces some quote covers.
pub fn highlight(text: &str, quotes: &[String]) -> Vec<(String, bool)> {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for quote in quotes.iter().map(|quote| quote.trim()).filter(|quote| !quote.is_empty()) {
        ranges.extend(text.match_indices(quote).map(|(start, found)| (start, start + found.len())));
    }
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let mut pieces = Vec::new();
    let mut at = 0;
    for (start, end) in merged {
        if start > at {
            pieces.push((text[at..start].to_owned(), false));
        }
        pieces.push((text[start..end].to_owned(), true));
        at = end;
    }
    if at < text.len() || pieces.is_empty() {
        pieces.push((text[at..].to_owned(), false));
    }
    pieces
}

/// The cited item a citation quotes: the first whose text contains it.
pub fn cited_item(citation: &str, items: &[Item]) -> Option<usize> {
    let quote = citation.trim();
    (!quote.is_empty()).then(|| items.iter().position(|item| item.text.contains(quote))).flatten()
}

/// A finished check.
#[component]
pub fn ResultView(n: usize, result: CheckResult) -> impl IntoView {
    match result.outcome {
        Outcome::Report { report } if report.get("sentences").is_some() => {
            match AnswerView::from_json(&report) {
                Ok(report) => view! { <AnswerBody n report /> }.into_any(),
                Err(error) => view! {
                    <p class="notice" role="alert">{format!("The engine's report could not be read: {error}")}</p>
                }
                .into_any(),
            }
        }
        Outcome::Report { report } => match ReportView::from_json(&report) {
            Ok(report) => view! { <ReportBody n report cited=result.cited /> }.into_any(),
            Err(error) => view! {
                <p class="notice" role="alert">{format!("The engine's report could not be read: {error}")}</p>
            }
            .into_any(),
        },
        Outcome::Failed { failure } => match FailureView::from_json(&failure) {
            Ok(failure) => view! { <FailureBody failure /> }.into_any(),
            Err(error) => view! {
                <p class="notice" role="alert">{format!("The engine's failure could not be read: {error}")}</p>
            }
            .into_any(),
        },
    }
}

#[component]
fn ReportBody(n: usize, report: ReportView, cited: Vec<Item>) -> impl IntoView {
    let verdict = report.assessment.verdict.clone();
    let citations = report.assessment.citations.clone();
    let anchor = move |i: usize| format!("ev-{n}-{i}");
    let citation_list = citations
        .iter()
        .map(|citation| {
            let text = format!("“{}”", citation.trim());
            match cited_item(citation, &cited) {
                Some(i) => view! {
                    <li>
                        <a data-testid="citation" href=format!("#{}", anchor(i))>{text}</a>
                        <span class="hint">{format!(" — {}", cited[i].id)}</span>
                    </li>
                }
                .into_any(),
                None => view! {
                    <li>
                        <span data-testid="citation">{text}</span>
                        <span class="hint">" — not found among the cited items"</span>
                    </li>
                }
                .into_any(),
            }
        })
        .collect_view();
    let evidence = cited
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let pieces = highlight(&item.text, &citations)
                .into_iter()
                .map(|(piece, marked)| {
                    if marked {
                        view! { <mark>{piece}</mark> }.into_any()
                    } else {
                        piece.into_any()
                    }
                })
                .collect_view();
            view! {
                <li id=anchor(i) data-testid="evidence" tabindex="-1">
                    <span class="item-id">{item.id.clone()}</span>
                    <p>{pieces}</p>
                </li>
            }
        })
        .collect_view();
    let has_evidence = !cited.is_empty();
    let has_citations = !citations.is_empty();
    view! {
        <div class="result">
            <p class="verdict-line">
                <span class=format!("verdict verdict-{verdict}") data-testid="verdict">{verdict_text(&verdict)}</span>
                <span data-testid="confidence" class="confidence">
                    {format!(
                        "{}% · {}",
                        fixed(report.assessment.confidence * 100.0, 0),
                        confidence_words(&verdict, report.assessment.confidence)
                    )}
                </span>
            </p>
            <p data-testid="summary" class="summary">{report.summary}</p>
            {report.assessment.rationale.map(|rationale| view! {
                <details class="rationale">
                    <summary>"How it was decided"</summary>
                    <p data-testid="rationale">{rationale}</p>
                </details>
            })}
            <Show when=move || has_citations>
                <h4>"Citations"</h4>
            </Show>
            <ol class="citations">{citation_list}</ol>
            <Show when=move || has_evidence>
                <h4>"Evidence"</h4>
            </Show>
            <ul class="evidence">{evidence}</ul>
            <dl class="meta">
                <div><dt>"Route"</dt><dd>{report.route}</dd></div>
                <div><dt>"Requests"</dt><dd>{report.requests}</dd></div>
                <div><dt>"Tokens"</dt><dd>{format!("{} in / {} out", report.usage.input, report.usage.output)}</dd></div>
                <div><dt>"Cost"</dt><dd>{cost_text(&report.usage)}</dd></div>
            </dl>
        </div>
    }
}

#[component]
fn FailureBody(failure: FailureView) -> impl IntoView {
    // A failure that amounts to a verdict (research found nothing new) shows it.
    let verdict = failure_verdict(&failure.kind);
    view! {
        <div class="result failure">
            <p class="verdict-line">
                <span class=format!("verdict verdict-{}", verdict.unwrap_or("failed"))>
                    {verdict.map_or_else(|| "No verdict".to_owned(), verdict_text)}
                </span>
                <span class="hint">"failure kind"</span>
                <code data-testid="failure-kind" class="failure-kind">{failure.kind.clone()}</code>
            </p>
            <p class="failure-message" data-testid="failure-message">{failure.message}</p>
            <p class="advice" data-testid="failure-advice"><strong>"What to do: "</strong>{failure.advice}</p>
            <p class="hint">{format!("Spent: {}", spent_text(&failure.spent))}</p>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_highlighted_where_they_occur() {
        let quotes = vec!["opened in 1932".to_owned(), "1932. It".to_owned()];
        let pieces = highlight("The bridge opened in 1932. It is long.", &quotes);
        assert_eq!(
            pieces,
            vec![
                ("The bridge ".to_owned(), false),
                ("opened in 1932. It".to_owned(), true),
                (" is long.".to_owned(), false),
            ]
        );
        assert_eq!(highlight("abc", &[]), vec![("abc".to_owned(), false)]);
        assert_eq!(highlight("abc", &["abc".to_owned()]), vec![("abc".to_owned(), true)]);
    }

    #[test]
    fn a_citation_links_to_the_item_that_contains_it() {
        let items = vec![
            Item { id: "e1".into(), text: "First.".into() },
            Item { id: "e2".into(), text: "The bridge opened in 1932.".into() },
        ];
        assert_eq!(cited_item(" The bridge opened in 1932. ", &items), Some(1));
        assert_eq!(cited_item("Elsewhere.", &items), None);
        assert_eq!(count(2, "retry"), "2 retries");
        assert_eq!(count(1, "request"), "1 request");
        let mut usage = verity_messages::UsageView::default();
        assert_eq!(cost_text(&usage), "$0.0000", "nothing spent costs nothing");
        usage.input = 120;
        assert_eq!(cost_text(&usage), "cost not reported");
        usage.cost = 0.00125;
        assert_eq!(usage_text(&usage), "120 in / 0 out tokens · $0.0013");
    }
}
