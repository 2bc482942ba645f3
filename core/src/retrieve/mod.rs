//! Retrieval: candidate evidence for a claim, from a corpus the user uploaded.
//!
//! Two retrievers sit behind [`Retriever`]: the design's keyword heuristic (every passage that
//! shares one long word with the query, in corpus order; the conformance suite's contract) and
//! BM25 ranking with a top-k bound (the product default).
//!
//! The retriever's parts each have a file: [`tokenize`] (the BM25 analysis: words, stop words,
//! plurals), [`keyword`] (the keyword heuristic) and [`bm25`] (the index and its search).

pub mod bm25;
pub mod keyword;
pub mod tokenize;

use serde::{Deserialize, Serialize};

pub use crate::corpus::{Corpus, CorpusError, Passage};
pub use bm25::Bm25Index;
pub use keyword::{keyword_search, keyword_words};
pub use tokenize::bm25_terms;

/// How passages are chosen for a claim: a serializable configuration.
///
/// The default is BM25 with the 8 best passages. JSON: `"keyword"` or `{"bm25": {"k": 8}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub enum Retriever {
    /// The design's keyword heuristic ([`keyword_search`]): every passage sharing a word of
    /// more than three characters with the query, in corpus order, the first
    /// [`MAX_RETRIEVED`] of them.
    Keyword,
    /// BM25 ranking ([`Bm25Index::search`]): at most `k` passages, best first.
    Bm25 {
        /// The most passages returned: 1 to [`MAX_RETRIEVED`].
        #[serde(deserialize_with = "bounded_k")]
        k: usize,
    },
}

/// The most passages one retrieval returns (a config's `k`, and the keyword heuristic's
/// matches, which are cut there): every one of them goes into a prompt, paid for.
pub const MAX_RETRIEVED: usize = 100;

fn bounded_k<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<usize, D::Error> {
    let k = usize::deserialize(deserializer)?;
    if (1..=MAX_RETRIEVED).contains(&k) {
        Ok(k)
    } else {
        Err(serde::de::Error::custom(format!("must be 1 to {MAX_RETRIEVED}, not {k}")))
    }
}

impl Default for Retriever {
    fn default() -> Self {
        Self::Bm25 { k: 8 }
    }
}

/// The passages `retriever` chooses for `query`, as indices into `corpus`, best first (corpus
/// order for [`Retriever::Keyword`]).
///
/// `index` must have been built from `corpus` ([`Bm25Index::build`]); build it once per corpus
/// and pass it to every call. With `None`, BM25 builds a throw-away index for this call, which
/// costs as much as indexing the whole corpus. The keyword heuristic ignores `index`.
#[must_use]
pub fn retrieve(
    corpus: &Corpus,
    index: Option<&Bm25Index>,
    retriever: &Retriever,
    query: &str,
) -> Vec<usize> {
    match *retriever {
        Retriever::Keyword => {
            let mut hits = keyword_search(corpus, query);
            hits.truncate(MAX_RETRIEVED);
            hits
        }
        Retriever::Bm25 { k } => {
            let k = k.min(MAX_RETRIEVED);
            let ranked = match index {
                Some(index) => {
                    debug_assert_eq!(index.len(), corpus.len(), "an index of another corpus");
                    index.search(query, k)
                }
                None => Bm25Index::build(corpus).search(query, k),
            };
            ranked.into_iter().map(|(passage, _)| passage).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    /// A small corpus: two identical passages, a rare term, and a passage without matches.
    pub(super) fn sample() -> Corpus {
        Corpus::from_pairs([
            ("common", "The city has a river and a bridge."),
            ("rare", "The zeppelin flew over the city."),
            ("both", "A city bridge, a river bridge: bridges everywhere."),
            ("none", "Nothing to see here."),
            ("common-again", "The city has a river and a bridge."),
        ])
        .unwrap()
    }

    #[test]
    fn retrieve_dispatches_on_the_retriever() {
        let corpus = sample();
        let index = Bm25Index::build(&corpus);
        assert_eq!(retrieve(&corpus, None, &Retriever::Keyword, "zeppelin river"), [0, 1, 2, 4]);
        assert_eq!(
            retrieve(&corpus, Some(&index), &Retriever::Bm25 { k: 1 }, "zeppelin river"),
            [1]
        );
        assert_eq!(retrieve(&corpus, None, &Retriever::Bm25 { k: 1 }, "zeppelin river"), [1]);
        assert_eq!(Retriever::default(), Retriever::Bm25 { k: 8 });
        assert_eq!(
            serde_json::to_value(Retriever::default()).unwrap(),
            serde_json::json!({"bm25": {"k": 8}})
        );
        assert_eq!(
            serde_json::from_value::<Retriever>(serde_json::json!("keyword")).unwrap(),
            Retriever::Keyword
        );
    }
}
