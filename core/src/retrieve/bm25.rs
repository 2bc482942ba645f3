//! BM25 ranking with a top-k bound (the product default): an index of integer term ids and
//! sorted postings, one segment per chunk of the corpus, searched with MaxScore pruning and a
//! bounded heap.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::sync::Arc;

use super::tokenize::{STOP_WORDS, for_each_term, for_each_word};
use crate::corpus::{Chunk, Corpus, Passage};

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalisation.
const B: f32 = 0.75;
/// Scores are fixed-point integers in units of `1 / SCALE`: sums are exact, so a passage's
/// score does not depend on the order its terms are added in, equal scores are really equal
/// (ties go to corpus order) and the pruning in [`Bm25Index::search`] loses nothing.
const SCALE: f32 = 65_536.0;

type Vocabulary = HashMap<Box<str>, u32, BuildFxHasher>;

/// A BM25 index of a corpus: integer term ids, and per chunk of the corpus ([`Chunk`]) a
/// segment with one postings list per term.
///
/// Read-only once built, so one index can serve any number of searches, from several threads.
/// It keeps no text of the passages, only the vocabulary and the postings, and refers to
/// passages by their index in the corpus.
///
/// A segment holds what depends on its chunk alone (each term's passages and frequencies, the
/// passages' lengths); the collection statistics (the number of passages, each term's document
/// frequency, the average length) are summed over the segments, and a posting's weight is
/// computed from them when a query reads it. So the index of the next version of a corpus
/// ([`Bm25Index::build_from`]) reuses every segment whose chunk it kept, and builds only the
/// new chunks' segments: adding a file indexes the file, removing a passage re-indexes its
/// chunk.
///
/// Scoring is Okapi BM25 with `k1 = 1.2`, `b = 0.75` and the non-negative idf
/// `ln(1 + (N - df + 0.5) / (df + 0.5))` over the terms of [`bm25_terms`](super::bm25_terms).
/// Each distinct query term counts once. A term frequency counts up to 65,535 in a passage.
#[derive(Clone, Default)]
pub struct Bm25Index {
    /// Term → term id; only grows (a term no passage has any more has no postings).
    vocabulary: Arc<Vocabulary>,
    /// One per chunk, in corpus order.
    segments: Vec<Arc<Segment>>,
    /// The index of each segment's first passage in the corpus.
    offsets: Vec<u32>,
    /// The passages that have each term.
    document_frequency: Vec<u32>,
    /// The average passage length in terms.
    average_length: f64,
    /// The number of passages indexed.
    len: usize,
}

/// The postings of one chunk.
struct Segment {
    /// The chunk's content hash: a segment is reused for a chunk with the same one.
    digest: [u8; 32],
    /// The term ids the chunk has, ascending.
    terms: Vec<u32>,
    /// The postings of `terms[i]` are `passages[starts[i]..starts[i + 1]]`.
    starts: Vec<u32>,
    /// Passage indices in the chunk, term after term, ascending within a term.
    passages: Vec<u16>,
    /// The term's frequency in the passage, beside `passages`.
    frequencies: Vec<u16>,
    /// Per term: its highest frequency and the shortest length among its passages (the
    /// bound of its weights in this segment, for MaxScore).
    max_frequency: Vec<u16>,
    min_length: Vec<u32>,
    /// Each passage's length in terms.
    lengths: Vec<u32>,
    /// Their sum.
    total_length: u64,
    /// Per stop word (not scored, so not in the postings): the passages that have it,
    /// ascending. For the table's search ([`Bm25Index::containing_all`]).
    stop_words: Vec<Vec<u16>>,
}

/// A chunk's passages, each as the terms it has: the forward index a segment's postings
/// are inverted from.
struct ForwardIndex {
    /// Per passage, its (term, frequency) pairs, sorted by term.
    pairs: Vec<(u32, u16)>,
    /// Where each passage's pairs end in `pairs`.
    pair_ends: Vec<usize>,
    /// Each passage's length in terms.
    lengths: Vec<u32>,
    /// Per stop word: the passages that have it, ascending.
    stop_words: Vec<Vec<u16>>,
}

impl ForwardIndex {
    /// Reads the terms of `passages`, adding the new ones to `vocabulary`.
    fn read(passages: &[Passage], vocabulary: &mut Arc<Vocabulary>) -> Self {
        let mut lengths: Vec<u32> = Vec::with_capacity(passages.len());
        let mut pairs: Vec<(u32, u16)> = Vec::new();
        let mut pair_ends: Vec<usize> = Vec::with_capacity(passages.len());
        let mut term_ids: Vec<u32> = Vec::new();
        let mut word = String::new();
        let mut stop_words: Vec<Vec<u16>> = vec![Vec::new(); STOP_WORDS];
        for (local, passage) in passages.iter().enumerate() {
            term_ids.clear();
            let local = u16::try_from(local).expect("a chunk holds fewer than 2^16 passages");
            let add_stop = |number: usize| {
                let list = &mut stop_words[number];
                if list.last() != Some(&local) {
                    list.push(local);
                }
            };
            for_each_word(
                &passage.text,
                &mut word,
                |term| {
                    let id = if let Some(&id) = vocabulary.get(term) {
                        id
                    } else {
                        let words = Arc::make_mut(vocabulary);
                        let id = u32::try_from(words.len()).expect("fewer than 2^32 terms");
                        words.insert(term.into(), id);
                        id
                    };
                    term_ids.push(id);
                },
                add_stop,
            );
            lengths.push(u32::try_from(term_ids.len()).unwrap_or(u32::MAX));
            term_ids.sort_unstable();
            for run in term_ids.chunk_by(|a, b| a == b) {
                pairs.push((run[0], u16::try_from(run.len()).unwrap_or(u16::MAX)));
            }
            pair_ends.push(pairs.len());
        }
        Self { pairs, pair_ends, lengths, stop_words }
    }
}

impl Segment {
    /// Indexes `chunk`, adding its new terms to `vocabulary`: its forward index
    /// ([`ForwardIndex::read`]) inverted into one postings list per term.
    fn build(chunk: &Chunk, vocabulary: &mut Arc<Vocabulary>) -> Self {
        let ForwardIndex { pairs, pair_ends, lengths, stop_words } =
            ForwardIndex::read(chunk.passages(), vocabulary);
        let mut terms: Vec<u32> = pairs.iter().map(|&(term, _)| term).collect();
        terms.sort_unstable();
        terms.dedup();
        let rank = |term: u32| terms.binary_search(&term).expect("a term of the chunk");
        let mut counts = vec![0u32; terms.len()];
        for &(term, _) in &pairs {
            counts[rank(term)] += 1;
        }
        let mut starts = Vec::with_capacity(terms.len() + 1);
        let mut next = 0u32;
        for &count in &counts {
            starts.push(next);
            next += count;
        }
        starts.push(next);
        let mut cursor = starts.clone();
        let mut local = vec![0u16; pairs.len()];
        let mut frequencies = vec![0u16; pairs.len()];
        let mut max_frequency = vec![0u16; terms.len()];
        let mut min_length = vec![u32::MAX; terms.len()];
        let mut begin = 0;
        for (passage, (&end, &length)) in pair_ends.iter().zip(&lengths).enumerate() {
            for &(term, frequency) in &pairs[begin..end] {
                let slot = rank(term);
                let at = cursor[slot] as usize;
                cursor[slot] += 1;
                local[at] = u16::try_from(passage).expect("a chunk holds fewer than 2^16 passages");
                frequencies[at] = frequency;
                max_frequency[slot] = max_frequency[slot].max(frequency);
                min_length[slot] = min_length[slot].min(length);
            }
            begin = end;
        }
        let total_length = lengths.iter().map(|&l| u64::from(l)).sum();
        Self {
            digest: *chunk.digest(),
            terms,
            starts,
            passages: local,
            frequencies,
            max_frequency,
            min_length,
            lengths,
            total_length,
            stop_words,
        }
    }

    /// The postings of `term` in this segment.
    fn postings(&self, term: u32) -> Option<(&[u16], &[u16], usize)> {
        let rank = self.terms.binary_search(&term).ok()?;
        let range = self.starts[rank] as usize..self.starts[rank + 1] as usize;
        Some((&self.passages[range.clone()], &self.frequencies[range], rank))
    }
}

impl fmt::Debug for Bm25Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bm25Index")
            .field("passages", &self.len)
            .field("terms", &self.vocabulary.len())
            .field("segments", &self.segments.len())
            .field("postings", &self.segments.iter().map(|s| s.passages.len()).sum::<usize>())
            .finish()
    }
}

/// A query term's weights: its idf, and the collection's average length.
#[derive(Clone, Copy)]
struct Weigh {
    idf: f32,
    average_length: f64,
}

impl Weigh {
    /// The term's BM25 contribution to a passage of `length` terms where it appears
    /// `frequency` times, in units of `1 / SCALE`.
    #[inline(always)]
    fn weight(self, frequency: u16, length: u32) -> u32 {
        #[allow(clippy::cast_possible_truncation)]
        let norm = K1 * (1.0 - B + B * (f64::from(length) / self.average_length) as f32);
        let tf = f32::from(frequency);
        let score = self.idf * tf * (K1 + 1.0) / (tf + norm);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let weight = (score * SCALE).round() as u32;
        weight
    }
}

impl Bm25Index {
    /// Indexes every passage of `corpus`.
    ///
    /// # Panics
    /// When the corpus has more than `u32::MAX` passages or postings.
    #[must_use]
    pub fn build(corpus: &Corpus) -> Self {
        Self::build_from(corpus, None)
    }

    /// Indexes `corpus`, taking from `previous` (the index of an earlier version of it) the
    /// segments of the chunks both have: only the other chunks are read.
    ///
    /// # Panics
    /// When the corpus has more than `u32::MAX` passages.
    #[must_use]
    pub fn build_from(corpus: &Corpus, previous: Option<&Self>) -> Self {
        // So a passage index is below `u32::MAX`, which `search` uses as "none".
        assert!(u32::try_from(corpus.len()).is_ok(), "fewer than 2^32 passages");
        let mut vocabulary = previous.map(|p| Arc::clone(&p.vocabulary)).unwrap_or_default();
        let kept: HashMap<[u8; 32], &Arc<Segment>> = previous
            .map(|p| p.segments.iter().map(|segment| (segment.digest, segment)).collect())
            .unwrap_or_default();
        let segments: Vec<Arc<Segment>> = corpus
            .chunks()
            .iter()
            .map(|chunk| match kept.get(chunk.digest()) {
                Some(segment) => Arc::clone(segment),
                None => Arc::new(Segment::build(chunk, &mut vocabulary)),
            })
            .collect();
        let mut document_frequency = vec![0u32; vocabulary.len()];
        let mut offsets = Vec::with_capacity(segments.len());
        let mut total_length = 0u64;
        let mut len = 0u32;
        for segment in &segments {
            offsets.push(len);
            len += u32::try_from(segment.lengths.len()).expect("fewer than 2^32 passages");
            total_length += segment.total_length;
            for (rank, &term) in segment.terms.iter().enumerate() {
                document_frequency[term as usize] +=
                    segment.starts[rank + 1] - segment.starts[rank];
            }
        }
        // An integer sum below 2^53 is exact in an f64: the same average as summing the
        // lengths one by one.
        #[allow(clippy::cast_precision_loss)]
        let average_length = total_length as f64 / corpus.len().max(1) as f64;
        Self {
            vocabulary,
            segments,
            offsets,
            document_frequency,
            average_length,
            len: corpus.len(),
        }
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

    /// The distinct indexed terms of `query` that some passage has, ascending.
    fn query_terms(&self, query: &str) -> Vec<u32> {
        let mut terms: Vec<u32> = Vec::new();
        for_each_term(query, &mut String::new(), |term| {
            if let Some(&id) = self.vocabulary.get(term)
                && self.document_frequency[id as usize] > 0
            {
                terms.push(id);
            }
        });
        terms.sort_unstable();
        terms.dedup();
        terms
    }

    /// The passages that have every word of `query`, in corpus order: how many, and the
    /// indices of those from `offset` on, at most `limit`. A word is read as
    /// [`bm25_terms`](super::bm25_terms) reads it, stop words included here (the index keeps
    /// which passages have each). `None` when the query has no word; a word no passage has
    /// gives no passage.
    #[must_use]
    pub fn containing_all(
        &self,
        query: &str,
        offset: usize,
        limit: usize,
    ) -> Option<(usize, Vec<usize>)> {
        let mut terms: Vec<u32> = Vec::new();
        let mut stops: Vec<usize> = Vec::new();
        let mut known = true;
        for_each_word(
            query,
            &mut String::new(),
            |term| match self.vocabulary.get(term) {
                Some(&id) if self.document_frequency[id as usize] > 0 => terms.push(id),
                _ => known = false,
            },
            |number| stops.push(number),
        );
        if terms.is_empty() && stops.is_empty() && known {
            return None;
        }
        if !known {
            return Some((0, Vec::new()));
        }
        terms.sort_unstable();
        terms.dedup();
        stops.sort_unstable();
        stops.dedup();
        let mut total = 0;
        let mut page = Vec::new();
        for (segment, &offset_of) in self.segments.iter().zip(&self.offsets) {
            let mut lists: Vec<&[u16]> =
                stops.iter().map(|&n| segment.stop_words[n].as_slice()).collect();
            for &term in &terms {
                lists.push(segment.postings(term).map_or(&[], |(passages, _, _)| passages));
            }
            lists.sort_by_key(|list| list.len());
            let (shortest, others) = lists.split_first().expect("one list at least");
            if others.is_empty() {
                // One word: the count is the list's length, the page a slice of it.
                let from = offset.saturating_sub(total).min(shortest.len());
                let room = limit - page.len();
                let shown = &shortest[from..from.saturating_add(room).min(shortest.len())];
                page.extend(shown.iter().map(|&passage| offset_of as usize + usize::from(passage)));
                total += shortest.len();
                continue;
            }
            let mut cursors = vec![0usize; others.len()];
            'passages: for &passage in *shortest {
                for (list, at) in others.iter().zip(&mut cursors) {
                    *at += list[*at..].partition_point(|&p| p < passage);
                    if list.get(*at) != Some(&passage) {
                        continue 'passages;
                    }
                }
                if total >= offset && page.len() < limit {
                    page.push(offset_of as usize + usize::from(passage));
                }
                total += 1;
            }
        }
        Some((total, page))
    }

    /// The at most `k` best passages for `query`, as `(passage index, score)`, best first;
    /// equal scores in corpus order. Only passages with a positive score are returned: an
    /// empty query (or one of stop words only) gives an empty list.
    ///
    /// Segment after segment (in corpus order, into one top `k`), document-at-a-time over the
    /// query terms' postings with MaxScore pruning: once `k` passages are held, the terms whose
    /// weights together cannot beat the `k`-th score stop proposing passages; they are only
    /// looked up in the passages the other terms propose. A term's bound in a segment is the
    /// weight of its highest frequency at its shortest length there. Memory is proportional to
    /// the query and `k`, never to the corpus.
    #[must_use]
    pub fn search(&self, query: &str, k: usize) -> Vec<(usize, f32)> {
        if k == 0 {
            return Vec::new();
        }
        let terms = self.query_terms(query);
        #[allow(clippy::cast_precision_loss)]
        let n = self.len as f32;
        let weighs: Vec<Weigh> = terms
            .iter()
            .map(|&t| {
                #[allow(clippy::cast_precision_loss)]
                let df = self.document_frequency[t as usize] as f32;
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                Weigh { idf, average_length: self.average_length }
            })
            .collect();
        let mut top = TopK::new(k);
        let mut lists: Vec<Postings<'_>> = Vec::with_capacity(terms.len());
        for (segment, &offset) in self.segments.iter().zip(&self.offsets) {
            lists.clear();
            for (&term, &weigh) in terms.iter().zip(&weighs) {
                if let Some((passages, frequencies, rank)) = segment.postings(term) {
                    let bound = weigh
                        .weight(segment.max_frequency[rank], segment.min_length[rank])
                        .saturating_add(1);
                    lists.push(Postings {
                        passages,
                        frequencies,
                        lengths: &segment.lengths,
                        weigh,
                        bound,
                        at: 0,
                    });
                }
            }
            search_segment(&mut lists, offset, &mut top);
        }
        top.into_sorted()
    }
}

/// MaxScore over one segment's `lists`, into `top`.
fn search_segment(lists: &mut [Postings<'_>], offset: u32, top: &mut TopK) {
    // Lists by their bound, ascending: the prefix that cannot reach the threshold on its own
    // is the "non-essential" part.
    lists.sort_by_key(|list| list.bound);
    // bound[i]: the most lists[..=i] can add to a score.
    let bound: Vec<u64> = lists
        .iter()
        .scan(0u64, |sum, list| {
            *sum += u64::from(list.bound);
            Some(*sum)
        })
        .collect();
    // lists[..essential] are non-essential: they only score passages the others found.
    let mut essential = bound.iter().take_while(|&&b| b <= top.threshold()).count();
    while essential < lists.len() {
        // The next passage of the essential lists. Written as a loop: a closure here is not
        // inlined in the size-optimised wasm build. `u32::MAX` is never a passage here.
        let mut passage = u32::MAX;
        for list in &lists[essential..] {
            if let Some(&next) = list.passages.get(list.at) {
                passage = passage.min(u32::from(next));
            }
        }
        if passage == u32::MAX {
            break;
        }
        let mut score = 0u64;
        for list in &mut lists[essential..] {
            if list.current() == Some(passage) {
                score += u64::from(list.weight());
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
            top.push(score, offset + passage);
            while essential < lists.len() && bound[essential] <= top.threshold() {
                essential += 1;
            }
        }
    }
}

/// One term's postings in a segment and a cursor into them.
struct Postings<'a> {
    passages: &'a [u16],
    frequencies: &'a [u16],
    lengths: &'a [u32],
    weigh: Weigh,
    /// At least every weight of the list.
    bound: u32,
    at: usize,
}

impl Postings<'_> {
    #[inline(always)]
    fn current(&self) -> Option<u32> {
        self.passages.get(self.at).map(|&p| u32::from(p))
    }

    /// The weight at the cursor.
    #[inline(always)]
    fn weight(&self) -> u32 {
        let passage = usize::from(self.passages[self.at]);
        self.weigh.weight(self.frequencies[self.at], self.lengths[passage])
    }

    /// Moves to the first passage at or after `passage`; its weight if it is `passage`.
    fn seek(&mut self, passage: u32) -> u32 {
        // Galloping: the target is usually near.
        let rest = &self.passages[self.at..];
        let mut step = 1;
        while step < rest.len() && u32::from(rest[step]) < passage {
            step *= 2;
        }
        let low = step / 2;
        let high = step.min(rest.len());
        self.at += low + rest[low..high].partition_point(|&p| u32::from(p) < passage);
        if self.current() == Some(passage) { self.weight() } else { 0 }
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
        pruned_equals_exhaustive(300);
    }

    /// The same over several segments, with the bounds of each.
    #[test]
    fn pruned_search_over_segments_equals_exhaustive_scoring() {
        pruned_equals_exhaustive(4_000);
    }

    fn pruned_equals_exhaustive(passages: usize) {
        let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"];
        let texts: Vec<String> = (0..passages)
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
                let alone: Vec<std::collections::HashMap<usize, f32>> = bm25_terms(query)
                    .into_iter()
                    .collect::<std::collections::BTreeSet<_>>()
                    .iter()
                    .map(|t| index.search(t, usize::MAX).into_iter().collect())
                    .collect();
                let mut exhaustive: Vec<(usize, f32)> = (0..corpus.len())
                    .filter_map(|p| {
                        let alone: f32 = alone.iter().filter_map(|scores| scores.get(&p)).sum();
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

    fn numbered(range: std::ops::Range<usize>) -> Vec<crate::corpus::Passage> {
        let words = ["river", "city", "zeppelin", "tower", "album", "million", "song", "film"];
        range
            .map(|i| crate::corpus::Passage {
                id: format!("p{i}"),
                text: (0..(i % 9 + 1))
                    .map(|j| words[(i * 7 + j * j * 3 + i / 11) % 8])
                    .collect::<Vec<_>>()
                    .join(" "),
            })
            .collect()
    }

    /// An index built from an earlier version's (after an append, after a remove) searches
    /// exactly as one built from scratch, and reads only the changed chunks.
    #[test]
    fn an_index_built_from_the_previous_version_equals_a_fresh_one() {
        let first = Corpus::new(numbered(0..20_000)).unwrap();
        let first_index = Bm25Index::build(&first);
        let appended = first.appended(numbered(20_000..26_000)).unwrap();
        let gone: std::collections::HashSet<&str> = ["p3", "p15000"].into();
        let (removed, _) = appended.without(&gone);
        let appended_index = Bm25Index::build_from(&appended, Some(&first_index));
        for (corpus, index, previous, previous_corpus) in [
            (&appended, appended_index.clone(), &first_index, &first),
            (
                &removed,
                Bm25Index::build_from(&removed, Some(&appended_index)),
                &appended_index,
                &appended,
            ),
        ] {
            let fresh = Bm25Index::build(corpus);
            assert_eq!(index.len(), corpus.len());
            for query in ["river", "zeppelin tower", "album million song film", "city city", "x"] {
                for k in [1, 8, 100] {
                    assert_eq!(index.search(query, k), fresh.search(query, k), "{query:?} {k}");
                }
                assert_eq!(index.containing_all(query, 3, 10), fresh.containing_all(query, 3, 10));
            }
            // Every chunk the two versions share keeps its segment; only the others are new.
            let shared = corpus
                .chunks()
                .iter()
                .filter(|c| previous_corpus.chunks().iter().any(|p| Arc::ptr_eq(c, p)))
                .count();
            let reused = index
                .segments
                .iter()
                .filter(|s| previous.segments.iter().any(|p| Arc::ptr_eq(s, p)))
                .count();
            assert!(shared >= 1 && shared < corpus.chunks().len());
            assert_eq!(reused, shared);
        }
    }

    #[test]
    fn the_passages_with_every_word_of_a_query_in_corpus_order() {
        let corpus = Corpus::new(numbered(0..5_000)).unwrap();
        let index = Bm25Index::build(&corpus);
        let expected: Vec<usize> = (0..corpus.len())
            .filter(|&p| {
                let terms = bm25_terms(&corpus.passages()[p].text);
                terms.iter().any(|t| t == "zeppelin") && terms.iter().any(|t| t == "tower")
            })
            .collect();
        assert!(expected.len() > 100);
        let (total, page) = index.containing_all("Zeppelins, TOWER", 5, 20).unwrap();
        assert_eq!(total, expected.len());
        assert_eq!(page, expected[5..25]);
        // One word: pages straddling segments, the count without reading the postings.
        let one: Vec<usize> = (0..corpus.len())
            .filter(|&p| bm25_terms(&corpus.passages()[p].text).iter().any(|t| t == "zeppelin"))
            .collect();
        for (offset, limit) in [(0, 7), (100, 1_000), (one.len() - 3, 10), (one.len() + 5, 10)] {
            let (total, page) = index.containing_all("zeppelins", offset, limit).unwrap();
            assert_eq!(total, one.len());
            assert_eq!(page, one[offset.min(one.len())..(offset + limit).min(one.len())]);
        }
        assert_eq!(index.containing_all("zeppelin unheard", 0, 10), Some((0, Vec::new())));
        // A page asked for with the largest limit (a page message's `u32::MAX` on wasm32) past
        // the first item: the rest, never an overflow.
        for query in ["zeppelins", "Zeppelins, TOWER"] {
            let (total, page) = index.containing_all(query, 1, usize::MAX).unwrap();
            assert_eq!(page.len(), total - 1, "{query}");
        }
        assert_eq!(index.containing_all("", 0, 10), None);
        assert_eq!(index.containing_all(" ,; ", 0, 10), None);
        // Stop words too: every passage whose text has "over" and "the".
        let stopped = Corpus::from_pairs([
            ("a", "Zeppelin over the city"),
            ("b", "a zeppelin"),
            ("c", "THE end"),
            ("d", "the zeppelin"),
        ])
        .unwrap();
        let stopped_index = Bm25Index::build(&stopped);
        assert_eq!(stopped_index.containing_all("The", 0, 10), Some((3, vec![0, 2, 3])));
        assert_eq!(stopped_index.containing_all("the zeppelins", 1, 10), Some((2, vec![3])));
        assert_eq!(stopped_index.containing_all("into", 0, 10), Some((0, vec![])));
        // The stop words leave the ranking as it was: "the" adds nothing.
        assert_eq!(stopped_index.search("the zeppelin", 10), stopped_index.search("zeppelin", 10));
    }
}
