//! Which questions the verifier route asks: the chunks of the best passages, and the
//! calibration question before them ([`super`] step 1).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::VerifierOptions;
use crate::retrieve::bm25_terms;

/// One question of the route: a chunk of an evidence item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    /// The evidence item (its index in the evidence the assessment is given).
    pub evidence: usize,
    /// Which chunk of it, from 0.
    pub chunk: usize,
    /// How many chunks the item has (asked or not).
    pub chunks: usize,
    /// The chunk's byte range in the item's text.
    pub start: usize,
    /// The end of that range (exclusive).
    pub end: usize,
    /// The calibration question: the claim against an empty document (the model's prior);
    /// the other fields are 0 and name no passage.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prior: bool,
}

impl Question {
    /// The calibration question (see [`Question::prior`]).
    #[must_use]
    pub fn prior() -> Self {
        Self { evidence: 0, chunk: 0, chunks: 0, start: 0, end: 0, prior: true }
    }
}

/// The chunks of `text`, as byte ranges, each at most `chunk_chars` characters: a chunk ends
/// at the last sentence end (`.`, `!`, `?` followed by whitespace, or a line break) in the
/// second half of its window, else at the last whitespace there, else at the window's end;
/// the whitespace between chunks and at the end belongs to none. A text that fits is one
/// chunk; an empty text is one empty chunk.
#[must_use]
pub fn chunk_bounds(text: &str, chunk_chars: usize) -> Vec<(usize, usize)> {
    let chunk_chars = chunk_chars.max(1);
    let mut chunks = Vec::new();
    let mut start = 0;
    loop {
        let rest = &text[start..];
        let Some((window_end, _)) = rest.char_indices().nth(chunk_chars) else {
            chunks.push((start, start + rest.trim_end().len()));
            return chunks;
        };
        let window = &rest[..window_end];
        let half = window.char_indices().nth(chunk_chars / 2).map_or(0, |(at, _)| at);
        let sentence = window
            .char_indices()
            .filter(|&(at, c)| {
                at >= half
                    && (c == '\n'
                        || (matches!(c, '.' | '!' | '?')
                            && rest[at + 1..].starts_with(char::is_whitespace)))
            })
            .map(|(at, c)| at + c.len_utf8())
            .next_back();
        let space = || {
            window
                .char_indices()
                .filter(|&(at, c)| at >= half && at > 0 && c.is_whitespace())
                .map(|(at, _)| at)
                .next_back()
        };
        let cut = sentence.or_else(space).unwrap_or(window_end);
        chunks.push((start, start + cut));
        let next = &rest[cut..];
        let skipped = next.len() - next.trim_start().len();
        start += cut + skipped;
        if start >= text.len() {
            return chunks;
        }
    }
}

/// The questions about `items` (indices into `evidence`, best first), at most `k` of them
/// and, before them, when `prior` (the first round) and `options.calibrate` and there is a
/// passage to ask about, the calibration question ([`Question::prior`]): at most `k + 1`, in
/// the order they are asked.
///
/// Each of the first `k` items is cut by [`chunk_bounds`] and its chunks ranked by the claim's
/// content words ([`bm25_terms`]) each holds, weighted by how few of the chunks hold them
/// ([`chunk_relevance`]), the earlier first among equals: a long passage is asked about where
/// it speaks of the claim, not only where it starts (MiniCheck reads every chunk and keeps the
/// best; this route has a budget of `k`).
/// Every item's best chunk is asked; when fewer than `k` items were, the places left go to
/// their other chunks, the most relevant first (then the better-ranked item, then the earlier
/// chunk), so a document given as one long passage is asked about at `k` places.
#[must_use]
pub fn plan(
    claim: &str,
    evidence: &[String],
    items: &[usize],
    options: &VerifierOptions,
    prior: bool,
) -> Vec<Question> {
    let terms: HashSet<String> = bm25_terms(claim).into_iter().collect();
    let mut questions = Vec::new();
    // (relevance, the question) of the chunks not asked yet, item by item in their rank, each
    // item's by relevance and then place.
    let mut spare: Vec<(f64, Question)> = Vec::new();
    for &index in items.iter().take(options.k) {
        let Some(text) = evidence.get(index) else { continue };
        let bounds = chunk_bounds(text, options.chunk_chars);
        let relevance = chunk_relevance(text, &bounds, &terms);
        let mut ranked: Vec<(f64, Question)> = bounds
            .iter()
            .zip(relevance)
            .enumerate()
            .map(|(chunk, (&(start, end), relevance))| {
                let question = Question {
                    evidence: index,
                    chunk,
                    chunks: bounds.len(),
                    start,
                    end,
                    prior: false,
                };
                (relevance, question)
            })
            .collect();
        // Stable: among equals, the earlier chunk stays first.
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut ranked = ranked.into_iter();
        if let Some((_, best)) = ranked.next() {
            questions.push(best);
        }
        spare.extend(ranked);
    }
    if questions.len() < options.k {
        // Stable: among equals, the better-ranked item's, then the earlier chunk, as pushed.
        spare.sort_by(|a, b| b.0.total_cmp(&a.0));
        let room = options.k - questions.len();
        questions.extend(spare.into_iter().take(room).map(|(_, question)| question));
    }
    if prior && options.calibrate && !questions.is_empty() {
        questions.insert(0, Question::prior());
    }
    questions
}

/// How much each chunk of `text` (its `bounds`) speaks of `terms`: the sum, over the terms it
/// holds, of each term's inverse chunk frequency `ln(1 + (N - n + 0.5) / (n + 0.5))` (BM25's,
/// with the passage's `N` chunks as the documents and `n` the chunks holding the term), so a
/// word every chunk has counts for little and a rare one for much. All 0 for one chunk; a bound
/// outside `text` (or off a character boundary) holds no term.
#[must_use]
pub fn chunk_relevance(text: &str, bounds: &[(usize, usize)], terms: &HashSet<String>) -> Vec<f64> {
    if bounds.len() < 2 {
        return vec![0.0; bounds.len()];
    }
    let held: Vec<HashSet<&String>> = bounds
        .iter()
        .map(|&(start, end)| {
            let chunk = text.get(start..end).unwrap_or_default();
            let own: HashSet<String> = bm25_terms(chunk).into_iter().collect();
            terms.iter().filter(|term| own.contains(*term)).collect()
        })
        .collect();
    #[allow(clippy::cast_precision_loss)]
    let chunks = bounds.len() as f64;
    let weight = |term: &String| {
        #[allow(clippy::cast_precision_loss)]
        let n = held.iter().filter(|chunk| chunk.contains(term)).count() as f64;
        (1.0 + (chunks - n + 0.5) / (n + 0.5)).ln()
    };
    held.iter().map(|chunk| chunk.iter().map(|term| weight(term)).sum()).collect()
}
