//! The design's keyword heuristic, the conformance suite's contract: every passage sharing a
//! word of more than three characters with the query, in corpus order, unbounded.

use crate::corpus::Corpus;

/// The design's keyword split: lower-cased, split on ASCII non-word characters (`\W`), words
/// longer than 3 characters, in order (duplicates kept).
#[must_use]
pub fn keyword_words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.chars().count() > 3)
        .map(str::to_owned)
        .collect()
}

/// The design's keyword heuristic: the indices of the passages whose lower-cased text contains
/// any keyword of `query` as a substring, in corpus order.
#[must_use]
pub fn keyword_search(corpus: &Corpus, query: &str) -> Vec<usize> {
    let words = keyword_words(query);
    if words.is_empty() {
        return Vec::new();
    }
    corpus
        .passages()
        .iter()
        .enumerate()
        .filter(|(_, passage)| {
            let text = passage.text.to_lowercase();
            words.iter().any(|word| text.contains(word.as_str()))
        })
        .map(|(index, _)| index)
        .collect()
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn keyword_words_follow_the_design() {
        assert_eq!(
            keyword_words("The storage-migration lost NO customer_data; über 2024."),
            ["storage", "migration", "lost", "customer_data", "2024"]
        );
    }

    #[test]
    fn keyword_search_keeps_corpus_order() {
        let corpus = Corpus::from_pairs([
            ("e1", "An April audit found every record intact."),
            ("e2", "Revenue grew."),
            ("e3", "The audit was late."),
        ])
        .unwrap();
        assert_eq!(keyword_search(&corpus, "audit records"), [0, 2]);
        assert!(keyword_search(&corpus, "a an the").is_empty());
    }
}
