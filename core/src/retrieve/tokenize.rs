//! The BM25 analysis of a text ([`bm25_terms`]): split on non-alphanumeric characters,
//! lower-case, drop the stop words, fold plurals. Passages and queries go through the same
//! analysis.

use std::cmp::Ordering;

/// Words that carry no evidence: Lucene's classic English stop set, sorted (binary search).
const STOPWORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// [`STOPWORDS`] packed by [`pack`], in the same (sorted) order.
const STOP_KEYS: [u64; STOPWORDS.len()] = {
    let mut keys = [0; STOPWORDS.len()];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = pack(STOPWORDS[i].as_bytes());
        i += 1;
    }
    keys
};

/// Up to 8 bytes as a big-endian number, zero-padded: numeric order is the strings' order.
#[inline(always)]
const fn pack(word: &[u8]) -> u64 {
    let mut key = 0u64;
    let mut i = 0;
    while i < 8 {
        key <<= 8;
        if i < word.len() {
            key |= word[i] as u64;
        }
        i += 1;
    }
    key
}

/// How many stop words there are.
pub(super) const STOP_WORDS: usize = STOPWORDS.len();

/// Which stop word `word` (lower-cased) is, if it is one. Runs for every word of every
/// passage, hence integer keys instead of string comparisons.
#[inline(always)]
fn stop_word(word: &str) -> Option<usize> {
    // The longest stop word has 5 bytes.
    if word.len() > 5 {
        return None;
    }
    let key = pack(word.as_bytes());
    // A binary search written out: `slice::binary_search` is not inlined at `opt-level = "z"`.
    let (mut low, mut high) = (0, STOP_KEYS.len());
    while low < high {
        let middle = (low + high) / 2;
        match STOP_KEYS[middle].cmp(&key) {
            Ordering::Less => low = middle + 1,
            Ordering::Greater => high = middle,
            Ordering::Equal => return Some(middle),
        }
    }
    None
}

/// The BM25 analysis of `text`: its terms, in order (duplicates kept).
///
/// 1. Split on every character that is not alphanumeric (Unicode `Alphabetic` or `Numeric`):
///    `"Assassin's Creed (2007)"` gives `Assassin`, `s`, `Creed`, `2007`.
/// 2. Lower-case each word (Unicode lower-casing, so `ÜBER` gives `über`).
/// 3. Drop the stop words (Lucene's classic English set: `the`, `of`, `and`, ...).
/// 4. Fold plurals with Harman's S-stemmer on words of four or more bytes: `-ies` becomes `-y`
///    (not after `e` or `a`), `-es` becomes `-e` (not after `a`, `e` or `o`), a final `s` is
///    dropped (not after `u` or `s`): `studies` → `study`, `albums` → `album`, `1990s` → `1990`,
///    `status` and `glass` are kept.
///
/// The same analysis is applied to passages and queries; it is deterministic and depends on
/// nothing but the text.
#[must_use]
pub fn bm25_terms(text: &str) -> Vec<String> {
    let mut terms = Vec::new();
    for_each_term(text, &mut String::new(), |term| terms.push(term.to_owned()));
    terms
}

/// The words of `text`, lower-cased, in order (duplicates and stop words kept): steps 1 and 2 of
/// [`bm25_terms`]. What the checks that compare texts by their words use (an answer's
/// checkable sentences and its claims, the offline baseline), where a term's stemming would
/// blur what they compare.
pub(crate) fn lower_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
}

/// Calls `emit` with each term of `text` (see [`bm25_terms`]), `word` being the buffer for the
/// words that need lower-casing.
///
/// This runs over every byte of the corpus, in the size-optimised wasm build too, where the
/// standard library's small functions (`Chars::next`, `String::push`) are not inlined: hence a
/// byte loop with an ASCII fast path, and words that are already lower-case ASCII (most words)
/// passed as slices of `text` without a copy.
pub(super) fn for_each_term(text: &str, word: &mut String, emit: impl FnMut(&str)) {
    for_each_word(text, word, emit, |_| {});
}

/// [`for_each_term`], also calling `stop` with each stop word's number (below
/// [`STOP_WORDS`]) where it is dropped.
#[inline(always)]
pub(super) fn for_each_word(
    text: &str,
    word: &mut String,
    mut emit: impl FnMut(&str),
    mut stop: impl FnMut(usize),
) {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let start = at;
        // Whether the word is lower-case ASCII letters and digits, needing no lower-casing.
        let mut plain = true;
        while let Some(&byte) = bytes.get(at) {
            if byte.is_ascii_lowercase() || byte.is_ascii_digit() {
                at += 1;
            } else if byte.is_ascii_uppercase() {
                plain = false;
                at += 1;
            } else if byte.is_ascii() {
                break;
            } else {
                let c = text[at..].chars().next().expect("at is a char boundary");
                if !c.is_alphanumeric() {
                    break;
                }
                plain = false;
                at += c.len_utf8();
            }
        }
        if at > start {
            finish_term(&text[start..at], plain, word, &mut emit, &mut stop);
        } else if bytes[at].is_ascii() {
            at += 1;
        } else {
            at += text[at..].chars().next().map_or(1, char::len_utf8);
        }
    }
}

/// Lower-cases `raw` (unless `plain`), drops it if it is a stop word, folds its plural and
/// emits it.
#[inline(always)]
fn finish_term(
    raw: &str,
    plain: bool,
    word: &mut String,
    emit: &mut impl FnMut(&str),
    stop: &mut impl FnMut(usize),
) {
    if !plain {
        word.clear();
        if raw.is_ascii() {
            // Capitalised words, most of the rest: a copy and a byte loop.
            word.push_str(raw);
            word.make_ascii_lowercase();
        } else {
            for c in raw.chars() {
                if c.is_ascii() {
                    word.push(c.to_ascii_lowercase());
                } else {
                    word.extend(c.to_lowercase());
                }
            }
        }
    }
    let lower = if plain { raw } else { word.as_str() };
    if let Some(number) = stop_word(lower) {
        stop(number);
        return;
    }
    match fold_plural(lower) {
        (kept, false) => emit(&lower[..kept]),
        (kept, true) => {
            if plain {
                word.clear();
                word.push_str(&raw[..kept]);
            } else {
                word.truncate(kept);
            }
            word.push('y');
            emit(word);
        }
    }
}

/// Harman's S-stemmer, on words of four or more bytes: how many bytes of `word` to keep, and
/// whether to append a `y`.
#[inline(always)]
fn fold_plural(word: &str) -> (usize, bool) {
    let bytes = word.as_bytes();
    let n = bytes.len();
    if n < 4 || bytes[n - 1] != b's' {
        (n, false)
    } else if bytes[n - 3..] == *b"ies" && !matches!(bytes[n - 4], b'e' | b'a') {
        (n - 3, true)
    } else if bytes[n - 2] == b'e' && matches!(bytes[n - 3], b'a' | b'e' | b'o') {
        // "-aes", "-ees", "-oes" are kept.
        (n, false)
    } else if matches!(bytes[n - 2], b'u' | b's') {
        (n, false)
    } else {
        (n - 1, false)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn bm25_terms_split_lowercase_drop_stop_words_and_fold_plurals() {
        assert_eq!(
            bm25_terms(
                "The Studies of Assassin 's Creed (2007): ÜBER-Albums, 1990s status; glass!"
            ),
            ["study", "assassin", "s", "creed", "2007", "über", "album", "1990", "status", "glass"]
        );
        assert_eq!(
            bm25_terms("Heroes goes via canoes; his buses"),
            ["heroes", "goes", "via", "canoes", "his", "buse"]
        );
        assert!(bm25_terms("").is_empty());
        assert!(bm25_terms("the of and -- , .").is_empty());
    }

    /// The analysis, written the obvious way: the fast tokenizer must agree with it.
    fn reference_terms(text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty())
            .map(|word| word.chars().flat_map(char::to_lowercase).collect::<String>())
            .filter(|word| !STOPWORDS.contains(&word.as_str()))
            .map(|word| {
                if word.len() < 4 {
                    word
                } else if let Some(stem) = word.strip_suffix("ies")
                    && !stem.ends_with(['e', 'a'])
                {
                    format!("{stem}y")
                } else if ["aes", "ees", "oes", "us", "ss"].iter().any(|end| word.ends_with(end)) {
                    word
                } else if let Some(stem) = word.strip_suffix('s') {
                    stem.to_owned()
                } else {
                    word
                }
            })
            .collect()
    }

    #[test]
    fn bm25_terms_agree_with_the_reference_analysis() {
        let fixed = [
            "Westlife: 9.8\u{fffd}million singles \u{2013} ΣΊΣΥΦΟΣ, İstanbul, naïve CAFÉS.",
            "x\u{a0}y\u{200b}z 's THE Of ANDs abc1s ﬁles Ⅻ² ٣٤ 日本語のテキスト",
            "Queries QUERIES eies aies buses glass",
        ];
        for text in fixed {
            assert_eq!(bm25_terms(text), reference_terms(text), "{text:?}");
        }
        // Pseudo-random strings over an alphabet of awkward characters (a fixed LCG, so the
        // test is the same everywhere).
        let alphabet: Vec<char> =
            "aAeEiIsSuUyY019 .-'_:\u{a0}\u{2013}éÉßΣσİıﬁ日Ⅻ²\u{301}\u{fffd}".chars().collect();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let text: String = (0..24)
                .map(|_| {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    alphabet[(state >> 33) as usize % alphabet.len()]
                })
                .collect();
            assert_eq!(bm25_terms(&text), reference_terms(&text), "{text:?}");
        }
    }

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(
            STOPWORDS
                .iter()
                .enumerate()
                .all(|(i, word)| word.len() <= 5 && stop_word(word) == Some(i))
        );
        assert!(
            stop_word("tha").is_none()
                && stop_word("thein").is_none()
                && stop_word("theyre").is_none()
        );
    }
}
