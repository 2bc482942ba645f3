//! The retrieval benchmark's shared parts: reading the data files and scoring a ranking, used
//! by the native binary (`bench-retrieve`) and, through [`RetrieveBench`], by the wasm build
//! that `bench/retrieve.mjs` drives under Node.
//!
//! Data: a claims file with one `{"claim", "gold": [passage ids]}` per line and a corpus with
//! one `{"id", "text"}` per line. A claim is found at `k` when any gold id is among the first
//! `k` passages retrieved.

use std::collections::HashMap;

use serde::Deserialize;
use verity_core::retrieve::{Bm25Index, Corpus, Passage, Retriever, retrieve};

/// The cut-offs recall is reported at.
pub const RECALL_AT: [usize; 3] = [1, 5, 10];

/// One claim of the claims file.
#[derive(Debug, Clone, Deserialize)]
pub struct Claim {
    /// The claim's text, the query.
    pub claim: String,
    /// The ids of the passages that are its evidence.
    pub gold: Vec<String>,
}

/// Parses a JSON-lines file (blank lines skipped).
///
/// # Errors
/// The first line that is not a `T`, with its line number.
pub fn parse_lines<T: for<'de> Deserialize<'de>>(text: &str) -> Result<Vec<T>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1)))
        .collect()
}

/// A corpus from its JSON-lines text.
///
/// # Errors
/// A malformed line or a repeated id.
pub fn parse_corpus(text: &str) -> Result<Corpus, String> {
    Corpus::new(parse_lines::<Passage>(text)?).map_err(|e| e.to_string())
}

/// Whether each claim is found at each cut-off of [`RECALL_AT`]: `ranked[i]` holds the
/// passage indices retrieved for claim `i`, best first.
#[must_use]
pub fn recall(corpus: &Corpus, claims: &[Claim], ranked: &[Vec<usize>]) -> [f64; 3] {
    let index_of: HashMap<&str, usize> =
        corpus.passages().iter().enumerate().map(|(i, p)| (p.id.as_str(), i)).collect();
    let mut found = [0usize; 3];
    for (claim, ranked) in claims.iter().zip(ranked) {
        let gold: Vec<usize> =
            claim.gold.iter().filter_map(|id| index_of.get(id.as_str()).copied()).collect();
        let first = ranked.iter().position(|passage| gold.contains(passage));
        for (count, k) in found.iter_mut().zip(RECALL_AT) {
            if first.is_some_and(|rank| rank < k) {
                *count += 1;
            }
        }
    }
    #[allow(clippy::cast_precision_loss)]
    found.map(|count| count as f64 / claims.len().max(1) as f64)
}

/// The BM25 ranking, as the product retrieves it: the first `k` passages.
#[must_use]
pub fn bm25(corpus: &Corpus, index: &Bm25Index, query: &str, k: usize) -> Vec<usize> {
    retrieve(corpus, Some(index), &Retriever::Bm25 { k }, query)
}

/// The keyword heuristic: every passage it selects, in corpus order (its only order), cut to
/// the first `k`.
#[must_use]
pub fn keyword(corpus: &Corpus, query: &str, k: usize) -> Vec<usize> {
    let mut passages = retrieve(corpus, None, &Retriever::Keyword, query);
    passages.truncate(k);
    passages
}

/// The wasm side of the benchmark: Node loads the corpus once, then times
/// [`RetrieveBench::build_index`] and each query call.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
#[derive(Debug)]
pub struct RetrieveBench {
    corpus: Corpus,
    index: Bm25Index,
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
impl RetrieveBench {
    /// Parses the corpus (JSON lines); not part of any timing.
    ///
    /// # Errors
    /// A malformed corpus, as a message.
    #[wasm_bindgen::prelude::wasm_bindgen(constructor)]
    pub fn new(corpus_jsonl: &str) -> Result<RetrieveBench, String> {
        Ok(Self { corpus: parse_corpus(corpus_jsonl)?, index: Bm25Index::default() })
    }

    /// Builds the BM25 index of the corpus (what the build time measures).
    pub fn build_index(&mut self) {
        self.index = Bm25Index::build(&self.corpus);
    }

    /// The first `k` passage indices BM25 retrieves for `query`.
    #[must_use]
    pub fn bm25(&self, query: &str, k: usize) -> Vec<u32> {
        to_u32(bm25(&self.corpus, &self.index, query, k))
    }

    /// The first `k` passage indices the keyword heuristic selects for `query`.
    #[must_use]
    pub fn keyword(&self, query: &str, k: usize) -> Vec<u32> {
        to_u32(keyword(&self.corpus, query, k))
    }
}

#[cfg(target_arch = "wasm32")]
fn to_u32(passages: Vec<usize>) -> Vec<u32> {
    passages.into_iter().map(|p| u32::try_from(p).expect("wasm32 indices fit")).collect()
}
