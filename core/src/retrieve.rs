//! Retrieval: candidate evidence for a claim, from a corpus the user uploaded.
//!
//! Two retrievers sit behind [`Retriever`]: the design's keyword heuristic (every passage that
//! shares one long word with the query, in corpus order; the conformance suite's contract) and
//! BM25 ranking with a top-k bound (the product default).

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// One passage of a corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passage {
    /// Its id, unique in the corpus.
    pub id: String,
    /// Its text.
    pub text: String,
}

/// A corpus that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusError(String);

impl fmt::Display for CorpusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CorpusError {}

/// Passages in the order they were given, with a lookup by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<Passage>", into = "Vec<Passage>")]
pub struct Corpus {
    passages: Vec<Passage>,
    by_id: HashMap<String, usize>,
}

impl Corpus {
    /// A corpus of `passages`, in order.
    ///
    /// # Errors
    /// When two passages share an id.
    pub fn new(passages: Vec<Passage>) -> Result<Self, CorpusError> {
        let mut by_id = HashMap::with_capacity(passages.len());
        for (index, passage) in passages.iter().enumerate() {
            if by_id.insert(passage.id.clone(), index).is_some() {
                return Err(CorpusError(format!("two passages have the id {:?}", passage.id)));
            }
        }
        Ok(Self { passages, by_id })
    }

    /// A corpus from `(id, text)` pairs, in order.
    ///
    /// # Errors
    /// When two passages share an id.
    pub fn from_pairs<I, S, T>(pairs: I) -> Result<Self, CorpusError>
    where
        I: IntoIterator<Item = (S, T)>,
        S: Into<String>,
        T: Into<String>,
    {
        Self::new(
            pairs
                .into_iter()
                .map(|(id, text)| Passage { id: id.into(), text: text.into() })
                .collect(),
        )
    }

    /// The passages, in corpus order.
    #[must_use]
    pub fn passages(&self) -> &[Passage] {
        &self.passages
    }

    /// The passage with `id`.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<&Passage> {
        self.by_id.get(id).map(|&index| &self.passages[index])
    }

    /// The number of passages.
    #[must_use]
    pub fn len(&self) -> usize {
        self.passages.len()
    }

    /// Whether the corpus has no passage.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.passages.is_empty()
    }
}

impl TryFrom<Vec<Passage>> for Corpus {
    type Error = CorpusError;
    fn try_from(passages: Vec<Passage>) -> Result<Self, CorpusError> {
        Self::new(passages)
    }
}

impl From<Corpus> for Vec<Passage> {
    fn from(corpus: Corpus) -> Self {
        corpus.passages
    }
}

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
        .passages
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

    #[test]
    fn duplicate_ids_are_refused() {
        assert!(Corpus::from_pairs([("a", "x"), ("a", "y")]).is_err());
    }
}
