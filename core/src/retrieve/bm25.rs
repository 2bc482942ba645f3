//! BM25 ranking with a top-k bound (the product default): an index of integer term ids and
//! sorted postings with fixed-point scores, searched with MaxScore pruning and a bounded heap.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;

use super::tokenize::for_each_term;
use crate::corpus::Corpus;

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalisation.
const B: f32 = 0.75;
/// Scores are fixed-point integers in units of `1 / SCALE`: sums are exact, so a passage's
/// score does not depend on the order its terms are added in, equal scores are really equal
/// (ties go to corpus order) and the pruning bound in [`Bm25Index::search`] is exact.
const SCALE: f32 = 65_536.0;

/// A BM25 index of a corpus: integer term ids and one postings list per term.
///
/// Built once per corpus ([`Bm25Index::build`]) and read-only afterwards, so one index can
/// serve any number of searches, from several threads. It keeps no text of the passages, only
/// the vocabulary and the postings, and refers to passages by their index in the corpus.
///
/// Scoring is Okapi BM25 with `k1 = 1.2`, `b = 0.75` and the non-negative idf
/// `ln(1 + (N - df + 0.5) / (df + 0.5))` over the terms of [`bm25_terms`](super::bm25_terms).
/// Each distinct query term counts once.
#[derive(Clone, Default)]
pub struct Bm25Index {
    /// Term → term id.
    vocabulary: HashMap<Box<str>, u32, BuildFxHasher>,
    /// The postings of term `t` are `passages[starts[t]..starts[t + 1]]`, in corpus order.
    starts: Vec<u32>,
    /// Passage indices, term after term.
    passages: Vec<u32>,
    /// The BM25 score contribution of the term to the passage, beside `passages`.
    weights: Vec<u32>,
    /// The largest weight of each term (MaxScore's bound).
    max_weights: Vec<u32>,
    /// The number of passages indexed.
    len: usize,
}

impl fmt::Debug for Bm25Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bm25Index")
            .field("passages", &self.len)
            .field("terms", &self.vocabulary.len())
            .field("postings", &self.passages.len())
            .finish()
    }
}

impl Bm25Index {
    /// Indexes every passage of `corpus`.
    ///
    /// # Panics
    /// When the corpus has more than `u32::MAX` passages or postings.
    #[must_use]
    pub fn build(corpus: &Corpus) -> Self {
        // So a passage index is below `u32::MAX`, which `search` uses as "none".
        assert!(u32::try_from(corpus.len()).is_ok(), "fewer than 2^32 passages");
        let mut vocabulary: HashMap<Box<str>, u32, BuildFxHasher> = HashMap::default();
        let mut document_frequency: Vec<u32> = Vec::new();
        // Per passage: its length in terms and its (term, frequency) pairs, sorted by term.
        let mut lengths: Vec<u32> = Vec::with_capacity(corpus.len());
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        let mut pair_ends: Vec<usize> = Vec::with_capacity(corpus.len());
        let mut term_ids: Vec<u32> = Vec::new();
        let mut word = String::new();
        for passage in corpus.passages() {
            term_ids.clear();
            for_each_term(&passage.text, &mut word, |term| {
                let id = if let Some(&id) = vocabulary.get(term) {
                    id
                } else {
                    let id = u32::try_from(vocabulary.len()).expect("fewer than 2^32 terms");
                    vocabulary.insert(term.into(), id);
                    document_frequency.push(0);
                    id
                };
                term_ids.push(id);
            });
            lengths.push(u32::try_from(term_ids.len()).expect("fewer than 2^32 terms"));
            term_ids.sort_unstable();
            for run in term_ids.chunk_by(|a, b| a == b) {
                pairs.push((run[0], u32::try_from(run.len()).expect("fewer than 2^32 terms")));
                document_frequency[run[0] as usize] += 1;
            }
            pair_ends.push(pairs.len());
        }

        let total = u32::try_from(pairs.len()).expect("fewer than 2^32 postings");
        let mut starts = Vec::with_capacity(document_frequency.len() + 1);
        let mut next = 0u32;
        for &df in &document_frequency {
            starts.push(next);
            next += df;
        }
        starts.push(total);

        #[allow(clippy::cast_precision_loss)]
        let n = corpus.len() as f32;
        #[allow(clippy::cast_precision_loss)]
        let average_length =
            lengths.iter().map(|&l| f64::from(l)).sum::<f64>() / corpus.len().max(1) as f64;
        let idf: Vec<f32> = document_frequency
            .iter()
            .map(|&df| {
                #[allow(clippy::cast_precision_loss)]
                let df = df as f32;
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();

        let mut cursor = starts.clone();
        let mut passages = vec![0u32; pairs.len()];
        let mut weights = vec![0u32; pairs.len()];
        let mut max_weights = vec![0u32; document_frequency.len()];
        let mut begin = 0;
        for (passage, (&end, &length)) in pair_ends.iter().zip(&lengths).enumerate() {
            #[allow(clippy::cast_possible_truncation)]
            let norm = K1 * (1.0 - B + B * (f64::from(length) / average_length) as f32);
            for &(term, frequency) in &pairs[begin..end] {
                let slot = &mut cursor[term as usize];
                let at = *slot as usize;
                *slot += 1;
                passages[at] = u32::try_from(passage).expect("fewer than 2^32 passages");
                #[allow(clippy::cast_precision_loss)]
                let tf = frequency as f32;
                let score = idf[term as usize] * tf * (K1 + 1.0) / (tf + norm);
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let weight = (score * SCALE).round() as u32;
                weights[at] = weight;
                let max = &mut max_weights[term as usize];
                *max = (*max).max(weight);
            }
            begin = end;
        }
        Self { vocabulary, starts, passages, weights, max_weights, len: corpus.len() }
    }

    /// The number of passages indexed.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no passage is indexed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The at most `k` best passages for `query`, as `(passage index, score)`, best first;
    /// equal scores in corpus order. Only passages with a positive score are returned: an
    /// empty query (or one of stop words only) gives an empty list.
    ///
    /// Document-at-a-time over the query terms' postings with MaxScore pruning: once `k`
    /// passages are held, the low-weight terms whose best weights together cannot beat the
    /// `k`-th score stop proposing passages; they are only looked up in the passages the other
    /// terms propose. Memory is proportional to the query and `k`, never to the corpus.
    #[must_use]
    pub fn search(&self, query: &str, k: usize) -> Vec<(usize, f32)> {
        if k == 0 {
            return Vec::new();
        }
        let mut terms: Vec<u32> = Vec::new();
        for_each_term(query, &mut String::new(), |term| {
            if let Some(&id) = self.vocabulary.get(term) {
                terms.push(id);
            }
        });
        terms.sort_unstable();
        terms.dedup();
        // Lists by their best weight, ascending: the prefix that cannot reach the threshold on
        // its own is the "non-essential" part.
        terms.sort_by_key(|&t| (self.max_weights[t as usize], t));
        let mut lists: Vec<Postings<'_>> = terms
            .iter()
            .map(|&t| {
                let range = self.starts[t as usize] as usize..self.starts[t as usize + 1] as usize;
                Postings {
                    passages: &self.passages[range.clone()],
                    weights: &self.weights[range],
                    at: 0,
                }
            })
            .collect();
        // bound[i]: the most lists[..=i] can add to a score.
        let bound: Vec<u64> = terms
            .iter()
            .scan(0u64, |sum, &t| {
                *sum += u64::from(self.max_weights[t as usize]);
                Some(*sum)
            })
            .collect();

        let mut top = TopK::new(k);
        // lists[..essential] are non-essential: they only score passages the others found.
        let mut essential = bound.iter().take_while(|&&b| b <= top.threshold()).count();
        while essential < lists.len() {
            // The next passage of the essential lists. Written as a loop: a closure here is not
            // inlined in the size-optimised wasm build, which made this a fifth of a query.
            // `u32::MAX` is never a passage ([`Bm25Index::build`]).
            let mut passage = u32::MAX;
            for list in &lists[essential..] {
                if let Some(&next) = list.passages.get(list.at) {
                    passage = passage.min(next);
                }
            }
            if passage == u32::MAX {
                break;
            }
            let mut score = 0u64;
            for list in &mut lists[essential..] {
                if list.current() == Some(passage) {
                    score += u64::from(list.weights[list.at]);
                    list.at += 1;
                }
            }
            for i in (0..essential).rev() {
                if score + bound[i] <= top.threshold() {
                    break;
                }
                score += u64::from(lists[i].seek(passage));
            }
            if score > top.threshold() {
                top.push(score, passage);
                while essential < lists.len() && bound[essential] <= top.threshold() {
                    essential += 1;
                }
            }
        }
        top.into_sorted()
    }
}

/// One term's postings and a cursor into them.
struct Postings<'a> {
    passages: &'a [u32],
    weights: &'a [u32],
    at: usize,
}

impl Postings<'_> {
    #[inline(always)]
    fn current(&self) -> Option<u32> {
        self.passages.get(self.at).copied()
    }

    /// Moves to the first passage at or after `passage`; its weight if it is `passage`.
    fn seek(&mut self, passage: u32) -> u32 {
        // Galloping: the target is usually near.
        let rest = &self.passages[self.at..];
        let mut step = 1;
        while step < rest.len() && rest[step] < passage {
            step *= 2;
        }
        let low = step / 2;
        let high = step.min(rest.len());
        self.at += low + rest[low..high].partition_point(|&p| p < passage);
        if self.current() == Some(passage) { self.weights[self.at] } else { 0 }
    }
}

/// The `k` best `(score, passage)` seen, where a higher score wins and then a lower passage.
struct TopK {
    k: usize,
    /// A min-heap on the ranking: its top is the worst held.
    heap: BinaryHeap<Reverse<(u64, Reverse<u32>)>>,
}

impl TopK {
    fn new(k: usize) -> Self {
        Self { k, heap: BinaryHeap::with_capacity(k.min(1024) + 1) }
    }

    /// The score a new passage must exceed to be held: passages come in corpus order, so a
    /// new passage loses a tie with every passage held.
    #[inline(always)]
    fn threshold(&self) -> u64 {
        if self.heap.len() < self.k { 0 } else { self.heap.peek().map_or(0, |Reverse((s, _))| *s) }
    }

    fn push(&mut self, score: u64, passage: u32) {
        self.heap.push(Reverse((score, Reverse(passage))));
        if self.heap.len() > self.k {
            self.heap.pop();
        }
    }

    fn into_sorted(self) -> Vec<(usize, f32)> {
        // Ascending `Reverse(..)` is the ranking, best first.
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse((score, Reverse(passage)))| {
                #[allow(clippy::cast_precision_loss)]
                (passage as usize, score as f32 / SCALE)
            })
            .collect()
    }
}

/// The Fx hash (rustc's): a multiply and a rotate per 8 bytes. Term lookup is most of index
/// building, and terms are short; the keys come from the user's own corpus, so the flooding
/// resistance of the default hasher buys nothing here.
#[derive(Clone, Copy, Default)]
struct BuildFxHasher;

impl std::hash::BuildHasher for BuildFxHasher {
    type Hasher = FxHasher;
    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

struct FxHasher(u64);

impl FxHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    #[inline(always)]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl std::hash::Hasher for FxHasher {
    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let mut tail = [0u8; 8];
        let rest = chunks.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(tail) ^ ((rest.len() as u64) << 56));
    }

    #[inline(always)]
    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    #[inline(always)]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::super::tests::sample;
    use super::*;
    use crate::retrieve::bm25_terms;

    fn ranked(index: &Bm25Index, query: &str, k: usize) -> Vec<usize> {
        index.search(query, k).into_iter().map(|(passage, _)| passage).collect()
    }

    #[test]
    fn a_rare_term_outranks_common_ones() {
        let index = Bm25Index::build(&sample());
        assert_eq!(ranked(&index, "zeppelin city", 1), [1]);
        assert_eq!(ranked(&index, "Zeppelins over the city", 5)[0], 1);
    }

    #[test]
    fn equal_scores_keep_corpus_order() {
        let index = Bm25Index::build(&sample());
        let hits = index.search("river", 10);
        let passages: Vec<usize> = hits.iter().map(|&(p, _)| p).collect();
        // 0 and 4 are the same text: same score, corpus order; 2 is longer.
        assert_eq!(passages[..2], [0, 4]);
        assert_eq!(hits[0].1, hits[1].1);
        assert!(hits.windows(2).all(|pair| pair[0].1 >= pair[1].1));
    }

    #[test]
    fn k_bounds_the_results_and_unmatched_passages_are_left_out() {
        let index = Bm25Index::build(&sample());
        assert_eq!(index.search("city", 2).len(), 2);
        assert_eq!(index.search("city", 100).len(), 4);
        assert!(index.search("city", 0).is_empty());
        assert!(index.search("", 5).is_empty());
        assert!(index.search("the and of", 5).is_empty());
        assert!(index.search("unknown words only", 5).is_empty());
    }

    #[test]
    fn scores_are_okapi_bm25() {
        let corpus =
            Corpus::from_pairs([("a", "cat cat dog"), ("b", "dog"), ("c", "bird")]).unwrap();
        let index = Bm25Index::build(&corpus);
        let (n, average) = (3.0f32, 5.0f32 / 3.0);
        let idf = |df: f32| (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        let part = |tf: f32, len: f32| tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / average));
        let expected = idf(1.0) * part(2.0, 3.0) + idf(2.0) * part(1.0, 3.0);
        let hits = index.search("cats and dogs", 3);
        assert_eq!(hits[0].0, 0);
        assert!((hits[0].1 - expected).abs() < 1e-3, "{} vs {expected}", hits[0].1);
        assert_eq!(hits[1].0, 1);
        assert!((hits[1].1 - idf(2.0) * part(1.0, 1.0)).abs() < 1e-3);
        assert_eq!(hits.len(), 2);
    }

    /// MaxScore pruning must not change the ranking: compare with scoring every passage.
    #[test]
    fn pruned_search_equals_exhaustive_scoring() {
        let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"];
        let texts: Vec<String> = (0..300usize)
            .map(|i| {
                (0..(i % 7 + 1))
                    .map(|j| words[(i * 31 + j * j * 17 + i / 5) % words.len()])
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let corpus =
            Corpus::from_pairs(texts.iter().enumerate().map(|(i, t)| (i.to_string(), t.clone())))
                .unwrap();
        let index = Bm25Index::build(&corpus);
        for query in [
            "alpha",
            "alpha beta",
            "zeta theta eta",
            "alpha beta gamma delta epsilon",
            "eta eta beta",
        ] {
            for k in [1, 3, 10, 50, 1000] {
                let everything = index.search(query, usize::MAX);
                let expected: Vec<(usize, f32)> = everything.iter().copied().take(k).collect();
                assert_eq!(index.search(query, k), expected, "{query:?} k={k}");
                // Exhaustive: a passage's score is the sum of its matching terms' weights.
                let mut exhaustive: Vec<(usize, f32)> = (0..corpus.len())
                    .filter_map(|p| {
                        let alone: f32 = bm25_terms(query)
                            .iter()
                            .collect::<std::collections::BTreeSet<_>>()
                            .iter()
                            .filter_map(|t| {
                                index.search(t, usize::MAX).into_iter().find(|&(q, _)| q == p)
                            })
                            .map(|(_, s)| s)
                            .sum();
                        (alone > 0.0).then_some((p, alone))
                    })
                    .collect();
                exhaustive.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                let got: Vec<usize> = everything.iter().map(|&(p, _)| p).collect();
                let want: Vec<usize> = exhaustive.iter().map(|&(p, _)| p).collect();
                assert_eq!(got.len(), want.len(), "{query:?}");
                for ((p, s), (q, t)) in everything.iter().zip(&exhaustive) {
                    assert!((s - t).abs() < 1e-3, "{query:?}: {p}:{s} vs {q}:{t}");
                }
            }
        }
    }
}
