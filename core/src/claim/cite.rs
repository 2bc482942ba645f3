//! The citation check ([`cite`]) and the new evidence research found ([`new_evidence`]): what
//! an assessment may cite is exactly the evidence it was given.

use serde_json::Value;

use super::lookup::LOOKUP_EVIDENCE;
use super::prompt::Shown;
use super::report::Assessment;
use crate::corpus::Corpus;
use crate::message::Message;

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
