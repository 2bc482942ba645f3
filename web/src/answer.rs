//! A checked answer: its text with each sentence marked (a colour, an underline style and
//! words, so it reads without colour), as its check ends; a sentence selected shows its
//! evidence, each cited passage with the quote that holds it highlighted where it sits, and
//! what the answer's own marks' passages say. All of it is text.

use leptos::prelude::*;
use verity_messages::{AnswerView, SentenceView, SpanView};

use crate::engine_view::fixed;
use verity_messages::text::{cost_text, count};

/// A status's icon and words.
pub fn status_words(status: &str) -> (&'static str, &'static str) {
    match status {
        "supported" => ("✓", "supported"),
        "contradicted" => ("✗", "contradicted"),
        "insufficient" => ("?", "not enough evidence"),
        "failed" => ("!", "check failed"),
        "pending" => ("…", "being checked"),
        _ => ("", "nothing to check"),
    }
}

/// `text` cut at the spans of `marked` (UTF-8 offsets into it, in order, each on character
/// boundaries): the plain pieces and, for each span, its index in `marked`. Spans that do not
/// fit (out of order, out of range) are left plain.
pub fn cut(text: &str, marked: &[SpanView]) -> Vec<(String, Option<usize>)> {
    let mut pieces = Vec::new();
    let mut at = 0;
    for (i, span) in marked.iter().enumerate() {
        let fits = span.start >= at
            && span.end <= text.len()
            && span.start <= span.end
            && text.is_char_boundary(span.start)
            && text.is_char_boundary(span.end);
        if !fits {
            continue;
        }
        if span.start > at {
            pieces.push((text[at..span.start].to_owned(), None));
        }
        pieces.push((text[span.start..span.end].to_owned(), Some(i)));
        at = span.end;
    }
    if at < text.len() {
        pieces.push((text[at..].to_owned(), None));
    }
    pieces
}

/// The answer with the sentences checked so far marked; selecting one shows its evidence.
#[component]
pub fn AnswerText(n: usize, answer: String, sentences: Vec<SentenceView>) -> impl IntoView {
    let mut checked: Vec<SentenceView> =
        sentences.into_iter().filter(|s| s.status != "not-checkable").collect();
    checked.sort_by_key(|s| s.span.start);
    let spans: Vec<SpanView> = checked.iter().map(|s| s.span).collect();
    let open = RwSignal::new(None::<usize>);
    let pieces = cut(&answer, &spans)
        .into_iter()
        .map(|(piece, which)| match which {
            None => piece.into_any(),
            Some(i) => {
                let status = checked[i].status.clone();
                let (icon, words) = status_words(&status);
                let toggle = move || open.update(|o| *o = if *o == Some(i) { None } else { Some(i) });
                // A span, not a button: a sentence wraps with the text around it.
                view! {
                    <span
                        role="button"
                        tabindex="0"
                        class=format!("sentence sentence-{status}")
                        data-testid="sentence"
                        data-status=status.clone()
                        aria-expanded=move || (open.get() == Some(i)).to_string()
                        aria-controls=format!("answer-{n}-evidence")
                        on:click=move |_| toggle()
                        on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                            if ev.key() == "Enter" || ev.key() == " " {
                                ev.prevent_default();
                                toggle();
                            }
                        }
                    >
                        {piece}
                    </span>
                    <span class=format!("sentence-tag sentence-tag-{status}") aria-hidden="true">{format!("{icon} {words}")}</span>
                }
                .into_any()
            }
        })
        .collect_view();
    view! {
        <p class="answer-text" data-testid="answer-text">{pieces}</p>
        <div id=format!("answer-{n}-evidence") role="region" aria-live="polite" aria-label="Evidence of the selected sentence">
            {move || open.get().and_then(|i| checked.get(i).cloned()).map(|sentence| view! { <SentenceEvidence sentence /> })}
        </div>
    }
}

/// One sentence's evidence.
#[component]
fn SentenceEvidence(sentence: SentenceView) -> impl IntoView {
    let (icon, words) = status_words(&sentence.status);
    let confidence = sentence
        .confidence
        .map(|c| format!(" · {}% confidence", fixed(c * 100.0, 0)))
        .unwrap_or_default();
    let failure = sentence.failure.clone().map(|failure| {
        view! { <p class="failure-message"><code>{failure.kind}</code>": "{failure.message}</p> }
    });
    let none = sentence.citations.is_empty() && sentence.failure.is_none();
    let citations = sentence
        .citations
        .iter()
        .map(|citation| {
            let quote = [citation.span];
            let pieces = cut(&citation.text, &quote)
                .into_iter()
                .map(|(piece, quoted)| match quoted {
                    Some(_) => view! { <mark data-testid="quote">{piece}</mark> }.into_any(),
                    None => piece.into_any(),
                })
                .collect_view();
            let id = citation.passage.clone().unwrap_or_else(|| "evidence".to_owned());
            view! {
                <li data-testid="sentence-evidence">
                    <span class="item-id">{id}</span>
                    <p>{pieces}</p>
                </li>
            }
        })
        .collect_view();
    // A split sentence's claims, each with its verdict in words.
    let claims = sentence
        .claims
        .iter()
        .map(|claim| {
            let (icon, words) = status_words(&claim.status);
            view! {
                <li data-testid="claim" class=format!("claim-{}", claim.status)>
                    <span class=format!("verdict verdict-{}", claim.status)>{format!("{icon} {words}")}</span>
                    " "{claim.text.clone()}
                </li>
            }
        })
        .collect_view();
    let whole = sentence.decomposed.as_ref().and_then(|d| d.whole.clone()).map(|whole| {
        view! { <p class="hint" data-testid="checked-whole">"Checked whole: "{whole.message}</p> }
    });
    let marks = sentence
        .marks
        .iter()
        .map(|mark| {
            let passage = mark.passage.as_ref().map(|p| format!("passage {p} ")).unwrap_or_default();
            view! {
                <li data-testid="mark">{format!("Its mark [{}]: {passage}{}", mark.label, mark.holds.replace('-', " "))}</li>
            }
        })
        .collect_view();
    view! {
        <div class="sentence-evidence" data-testid="selected-sentence">
            <p class="verdict-line">
                <span class=format!("verdict verdict-{}", sentence.status)>{format!("{icon} {words}")}</span>
                <span class="hint">{format!("Sentence {}{confidence}", sentence.index + 1)}</span>
            </p>
            <p class="claim-text">{sentence.text.clone()}</p>
            <ul class="claims" aria-label="Its claims">{claims}</ul>
            {whole}
            {failure}
            <Show when=move || none>
                <p class="hint">"No passage decided it."</p>
            </Show>
            <ul class="evidence">{citations}</ul>
            <ul class="marks">{marks}</ul>
        </div>
    }
}

/// A finished answer: whether it holds, the counts, the marked answer, what it spent.
#[component]
pub fn AnswerBody(n: usize, report: AnswerView) -> impl IntoView {
    let checked = report.sentences.iter().filter(|s| s.status != "not-checkable").count();
    let supported = report.sentences.iter().filter(|s| s.status == "supported").count();
    // The class is the verdict filter's (`answer_verdict`), so the Show filter finds it.
    let contradicted = report.sentences.iter().any(|s| s.status == "contradicted");
    let not_shown = format!("{} of {checked} not shown to hold", checked - supported);
    let (class, headline) = match report.faithful {
        Some(true) => ("supported", "Every sentence holds".to_owned()),
        Some(false) if contradicted => ("contradicted", not_shown),
        Some(false) => ("insufficient", not_shown),
        None => ("insufficient", "Nothing to check".to_owned()),
    };
    let by_status = ["supported", "contradicted", "insufficient", "failed"]
        .iter()
        .filter_map(|status| {
            let k = report.sentences.iter().filter(|s| s.status == *status).count();
            (k > 0).then(|| format!("{k} {}", status_words(status).1))
        })
        .collect::<Vec<_>>()
        .join(", ");
    view! {
        <div class="result answer-result">
            <p class="verdict-line">
                <span class=format!("verdict verdict-{class}") data-testid="verdict">{headline}</span>
                <span class="confidence" data-testid="answer-counts">{by_status}</span>
            </p>
            <p class="hint">"Select a sentence to see its evidence."</p>
            <AnswerText n answer=report.answer sentences=report.sentences />
            <dl class="meta">
                <div><dt>"Requests"</dt><dd>{count(report.requests, "request")}</dd></div>
                <div><dt>"Tokens"</dt><dd>{format!("{} in / {} out", report.usage.input, report.usage.output)}</dd></div>
                <div><dt>"Cost"</dt><dd>{cost_text(&report.usage)}</dd></div>
            </dl>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: usize, end: usize) -> SpanView {
        SpanView { start, end, start_utf16: start, end_utf16: end }
    }

    #[test]
    fn the_text_is_cut_at_the_spans_that_fit() {
        let pieces = cut("Hi! It is. Yes.", &[span(4, 10), span(11, 15)]);
        assert_eq!(
            pieces,
            vec![
                ("Hi! ".to_owned(), None),
                ("It is.".to_owned(), Some(0)),
                (" ".to_owned(), None),
                ("Yes.".to_owned(), Some(1)),
            ]
        );
        // A span out of range, out of order or inside a character is left plain.
        assert_eq!(cut("é", &[span(0, 1)]), vec![("é".to_owned(), None)]);
        assert_eq!(cut("abc", &[span(1, 9)]), vec![("abc".to_owned(), None)]);
    }
}
