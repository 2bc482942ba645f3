//! The citation check ([`cite`]) and the new evidence research found ([`new_evidence`]): what
//! an assessment may cite is exactly the evidence it was given.

use std::collections::HashSet;

use serde_json::Value;

use super::lookup::LOOKUP_EVIDENCE;
use super::prompt::Shown;
use super::report::{Assessment, Citation};
use crate::corpus::Corpus;
use crate::message::Message;
use crate::retrieve::bm25_terms;
use crate::segment::{quote_span, sentences};

/// The citation check: a conclusive verdict cites at least one item, and every citation is an
/// entire item of `evidence` (quoted raw or as shown to the model, see [`Shown`]). Citations
/// quoted as shown are replaced by the raw item. Returns whether the check passed.
#[must_use]
pub fn cite(assessment: &mut Assessment, evidence: &[String]) -> bool {
    if assessment.verdict.is_conclusive() && assessment.citations.is_empty() {
        return false;
    }
    for citation in &mut assessment.citations {
        if evidence.iter().any(|item| item == citation) {
            continue;
        }
        match evidence.iter().find(|item| Shown::of(item).0 == *citation) {
            Some(item) => citation.clone_from(item),
            None => return false,
        }
    }
    true
}

/// The new evidence a research transcript found: ids from `details.hits` (strings only) of
/// successful `lookup_evidence` results, in order, deduplicated, kept only if the corpus has
/// them, mapped to their texts, minus texts already in `known`.
#[must_use]
pub fn new_evidence(messages: &[Message], corpus: &Corpus, known: &[String]) -> Vec<String> {
    let mut new: Vec<String> = Vec::new();
    for message in messages {
        let Message::ToolResult(result) = message else { continue };
        if result.tool_name != LOOKUP_EVIDENCE || result.output.is_error {
            continue;
        }
        let Some(hits) = result.output.details.get("hits").and_then(Value::as_array) else {
            continue;
        };
        for id in hits.iter().filter_map(Value::as_str) {
            let Some(passage) = corpus.get(id) else { continue };
            if !known.contains(&passage.text) && !new.contains(&passage.text) {
                new.push(passage.text.clone());
            }
        }
    }
    new
}

/// The citations of a checked assessment located: each cited item's passage id (the first
/// passage of `corpus` with exactly that text; none for evidence the host gave that the corpus
/// lacks), the quote that holds the claim (the passage's sentence sharing the most terms with
/// `claim`, the whole passage when it is one sentence or none shares a term) and the quote's
/// offsets in the passage, found verbatim. Each cited item once, in the assessment's order.
#[must_use]
pub fn locate(claim: &str, citations: &[String], corpus: &Corpus) -> Vec<Citation> {
    let terms: HashSet<String> = bm25_terms(claim).into_iter().collect();
    let mut located: Vec<Citation> = Vec::with_capacity(citations.len());
    for text in citations {
        if located.iter().any(|citation| citation.text == *text) {
            continue;
        }
        let passage = corpus.passages().iter().find(|passage| passage.text == *text);
        let quote = best_sentence(text, &terms);
        let Some(span) = quote_span(text, quote) else { continue };
        located.push(Citation {
            passage: passage.map(|passage| passage.id.clone()),
            quote: quote.to_owned(),
            span,
            text: text.clone(),
        });
    }
    located
}

/// The sentence of `text` sharing the most of `terms`; among equals, when the claim holds a
/// number, the first that holds one too (a claim's numbers are its most specific part: the
/// passage's sentence that gives a number is the one that holds it, or contradicts it); else
/// the first of equals. All of `text` when it is one sentence or none shares a term.
fn best_sentence<'a>(text: &'a str, terms: &HashSet<String>) -> &'a str {
    let Ok(cut) = sentences(text) else { return text.trim() };
    if cut.len() < 2 {
        return text.trim();
    }
    let numeric = |term: &String| term.chars().any(|c| c.is_ascii_digit());
    let claim_has_number = terms.iter().any(numeric);
    let mut best: Option<((usize, bool), &str)> = None;
    for sentence in &cut {
        let own = bm25_terms(&sentence.text);
        let shared: HashSet<&String> = own.iter().filter(|term| terms.contains(*term)).collect();
        let score = (shared.len(), claim_has_number && own.iter().any(numeric));
        if shared.is_empty() || best.is_some_and(|(known, _)| score <= known) {
            continue;
        }
        best = Some((score, &text[sentence.span.start..sentence.span.end]));
    }
    best.map_or_else(|| text.trim(), |(_, quote)| quote)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quote(claim: &str, passage: &str) -> String {
        let corpus = Corpus::from_pairs([("p1", passage)]).unwrap();
        let located = locate(claim, &[passage.to_owned()], &corpus);
        let citation = &located[0];
        assert_eq!(citation.passage.as_deref(), Some("p1"));
        assert_eq!(&passage[citation.span.start..citation.span.end], citation.quote);
        citation.quote.clone()
    }

    #[test]
    fn the_quote_is_the_passages_sentence_that_holds_the_claim() {
        let passage =
            "The Louvre is the world's most-visited art museum. It opened as a museum in 1793.";
        assert_eq!(
            quote("The Louvre is an art museum.", passage),
            "The Louvre is the world's most-visited art museum."
        );
        // Equal in shared words: a claim with a number is held by the sentence with one.
        assert_eq!(
            quote("The Louvre opened as a museum in 1801.", passage),
            "It opened as a museum in 1793."
        );
        // No shared word, or one sentence: the whole passage.
        assert_eq!(quote("Cats purr.", passage), passage);
        assert_eq!(quote("It opened.", "It opened in 1793."), "It opened in 1793.");
    }
}
