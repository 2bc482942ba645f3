//! An answer cut into sentences at Unicode's sentence boundaries (UAX #29, through the
//! `unicode-segmentation` crate; a cut after a title or an initial that begins a name, "Dr.
//! Harry", "S. McCain", undone), each with its span in UTF-8 bytes and UTF-16 code units and
//! whether it has anything to check; quotes found verbatim with their spans. A leaf of the
//! core: the claim checker's citations and the answer job both use it (see [`crate::answer`]).
use std::fmt;

use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

/// The most characters an answer may have.
pub const MAX_ANSWER_CHARS: usize = 50_000;
/// The most sentences an answer may have.
pub const MAX_SENTENCES: usize = 200;
/// The most characters a sentence may have: past this, the text has no sentence boundary a
/// check could use.
pub const MAX_SENTENCE_CHARS: usize = 2_000;
/// The fewest words a sentence needs to be checked (a greeting, "Sure.", "Thanks!" have
/// fewer).
const MIN_WORDS: usize = 3;

/// Where a piece of text sits in the text it was cut from: `start..end` in UTF-8 bytes (Rust's
/// `str` indices) and `start_utf16..end_utf16` in UTF-16 code units (JavaScript's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// First UTF-16 code unit.
    pub start_utf16: usize,
    /// One past the last UTF-16 code unit.
    pub end_utf16: usize,
}

/// One sentence of an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sentence {
    /// Its text, without the whitespace around it.
    pub text: String,
    /// Where it is in the answer.
    pub span: Span,
    /// Whether it states something to check: not a question, not a lead-in that ends with a
    /// colon ("In summary:"), at least three words (not "Sure." or "Thanks!"), and not made of
    /// pleasantries alone ("Thanks for asking!", "I hope this helps!").
    pub checkable: bool,
}

/// Why an answer cannot be split into sentences to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerError {
    /// Nothing but whitespace.
    Empty,
    /// More characters than [`MAX_ANSWER_CHARS`].
    TooLong {
        /// How many it has.
        chars: usize,
    },
    /// More sentences than [`MAX_SENTENCES`].
    TooManySentences {
        /// How many it has.
        count: usize,
    },
    /// A character that would make the answer show otherwise than it reads (see
    /// [`crate::corpus::deceptive_character`]): a page could show one sentence and have another
    /// checked.
    Hidden {
        /// Its UTF-8 offset in the answer.
        at: usize,
        /// The character.
        character: char,
        /// Why it is refused.
        why: &'static str,
    },
    /// A sentence longer than [`MAX_SENTENCE_CHARS`]: no sentence boundary where one was due.
    NoBoundary {
        /// Where that sentence starts.
        span: Span,
        /// How many characters it has.
        chars: usize,
    },
}

impl fmt::Display for AnswerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "the answer is empty"),
            Self::TooLong { chars } => write!(
                f,
                "the answer has {chars} characters, more than the {MAX_ANSWER_CHARS} an answer \
                 may have"
            ),
            Self::TooManySentences { count } => write!(
                f,
                "the answer has {count} sentences, more than the {MAX_SENTENCES} an answer may have"
            ),
            Self::Hidden { at, character, why } => write!(
                f,
                "the answer has U+{:04X} at byte {at}, {why}: it could show one sentence and \
                 check another",
                u32::from(*character)
            ),
            Self::NoBoundary { span, chars } => write!(
                f,
                "the text from byte {} has no sentence boundary within {MAX_SENTENCE_CHARS} \
                 characters ({chars} in one sentence)",
                span.start
            ),
        }
    }
}

impl std::error::Error for AnswerError {}

/// Splits `answer` into its sentences, in order, each trimmed of the whitespace around it;
/// text that is only whitespace is no sentence.
///
/// # Errors
/// An [`AnswerError`] for an empty answer, one over a cap, or a run of text with no sentence
/// boundary.
pub fn sentences(answer: &str) -> Result<Vec<Sentence>, AnswerError> {
    let chars = answer.chars().count();
    if chars > MAX_ANSWER_CHARS {
        return Err(AnswerError::TooLong { chars });
    }
    if let Some((character, why)) = crate::corpus::deceptive_character(answer) {
        let at = answer.find(character).unwrap_or(0);
        return Err(AnswerError::Hidden { at, character, why });
    }
    // Each sentence's `start..end`: UAX #29's cuts, but for those after a title or an initial.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut continued = false;
    for (at, piece) in answer.split_sentence_bound_indices() {
        let trimmed = piece.trim();
        if trimmed.is_empty() {
            continue;
        }
        let start = at + (piece.len() - piece.trim_start().len());
        let end = start + trimmed.len();
        match spans.last_mut() {
            Some(last) if continued => last.1 = end,
            _ => spans.push((start, end)),
        }
        let line_break = piece[end - at..].contains(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}']);
        continued = !line_break && ends_in_a_name_prefix(trimmed);
    }
    let mut offsets = Utf16Offsets::new(answer);
    let mut found = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        let text = &answer[start..end];
        let span = Span { start, end, start_utf16: offsets.at(start), end_utf16: offsets.at(end) };
        let chars = text.chars().count();
        if chars > MAX_SENTENCE_CHARS {
            return Err(AnswerError::NoBoundary { span, chars });
        }
        found.push(Sentence { text: text.to_owned(), span, checkable: checkable(text) });
    }
    if found.is_empty() {
        return Err(AnswerError::Empty);
    }
    if found.len() > MAX_SENTENCES {
        return Err(AnswerError::TooManySentences { count: found.len() });
    }
    Ok(found)
}

/// Titles written before a name, which UAX #29 takes for a sentence's end when the name follows
/// ("Dr. Harry Dalton"). Not those that also end sentences (Inc., Jr., etc.).
const NAME_TITLES: [&str; 18] = [
    "Mr", "Mrs", "Ms", "Dr", "Prof", "St", "Mt", "Gen", "Col", "Lt", "Capt", "Sgt", "Rev", "Hon",
    "Gov", "Sen", "Rep", "Pres",
];

/// Whether `sentence`, as UAX #29 cut it, ends in a title or an initial that begins a name
/// rather than a full stop that ends a sentence: "Dr.", "S.", "U.S.", and, in text tokenised
/// with its full stops apart, "U.S ." (but not "C ." alone, a word of its own there).
fn ends_in_a_name_prefix(sentence: &str) -> bool {
    let mut words = sentence.split_whitespace().rev();
    let (word, apart) = match words.next() {
        Some(".") => (words.next().unwrap_or_default(), true),
        Some(last) => match last.strip_suffix('.') {
            Some(word) => (word, false),
            None => return false,
        },
        None => return false,
    };
    let word = word.trim_start_matches(|c: char| !c.is_alphanumeric());
    let letters = word.split('.').count();
    // "I." ends sentences ("So did I.") far more often than it is an initial.
    let initials = word != "I"
        && word.split('.').all(|part| {
            let mut chars = part.chars();
            chars.next().is_some_and(char::is_uppercase) && chars.next().is_none()
        });
    if apart { initials && letters > 1 } else { initials || NAME_TITLES.contains(&word) }
}

/// Where `quote` first occurs verbatim in `passage`, or `None` (a quote not found verbatim is
/// not a citation).
#[must_use]
pub fn quote_span(passage: &str, quote: &str) -> Option<Span> {
    if quote.is_empty() {
        return None;
    }
    let start = passage.find(quote)?;
    let end = start + quote.len();
    let mut offsets = Utf16Offsets::new(passage);
    Some(Span { start, end, start_utf16: offsets.at(start), end_utf16: offsets.at(end) })
}

/// Words of an answer's pleasantries ("Thanks for asking!", "Happy to help.", "I hope this
/// helps!"): a sentence made of these alone states nothing to check. English only; a sentence
/// in another language is checked unless a rule above says otherwise.
const PLEASANTRIES: [&str; 31] = [
    "a",
    "asking",
    "certainly",
    "course",
    "for",
    "glad",
    "good",
    "great",
    "happy",
    "hello",
    "help",
    "helps",
    "hi",
    "hope",
    "i",
    "is",
    "it",
    "me",
    "of",
    "question",
    "sure",
    "thank",
    "thanks",
    "that",
    "the",
    "this",
    "to",
    "what",
    "you",
    "let",
    "know",
];

/// Whether a sentence states something to check (see [`Sentence::checkable`]).
pub(crate) fn checkable(sentence: &str) -> bool {
    let last = sentence.trim_end_matches(|c: char| c.is_whitespace() || c == '"' || c == ')');
    if last.ends_with(['?', ':']) {
        return false;
    }
    let words: Vec<String> = crate::retrieve::tokenize::lower_words(sentence).collect();
    words.len() >= MIN_WORDS && !words.iter().all(|word| PLEASANTRIES.contains(&word.as_str()))
}

/// UTF-16 offsets of byte offsets taken in increasing order (one pass over the text).
struct Utf16Offsets<'a> {
    text: &'a str,
    byte: usize,
    utf16: usize,
}

impl<'a> Utf16Offsets<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, byte: 0, utf16: 0 }
    }

    /// The UTF-16 offset of `byte` (a char boundary, at or after the last one asked for).
    fn at(&mut self, byte: usize) -> usize {
        if byte < self.byte {
            // Asked out of order: count again from the start.
            self.byte = 0;
            self.utf16 = 0;
        }
        self.utf16 += self.text[self.byte..byte].chars().map(char::len_utf16).sum::<usize>();
        self.byte = byte;
        self.utf16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(answer: &str) -> Vec<String> {
        sentences(answer).unwrap().into_iter().map(|sentence| sentence.text).collect()
    }

    /// Each span's UTF-8 offsets cut the sentence's text out of the answer, and its UTF-16
    /// offsets cut the same text out of the answer's UTF-16 code units.
    fn assert_spans_exact(answer: &str) {
        let units: Vec<u16> = answer.encode_utf16().collect();
        for sentence in sentences(answer).unwrap() {
            let Span { start, end, start_utf16, end_utf16 } = sentence.span;
            assert_eq!(&answer[start..end], sentence.text);
            assert_eq!(String::from_utf16(&units[start_utf16..end_utf16]).unwrap(), sentence.text);
        }
    }

    #[test]
    fn an_answer_is_cut_at_unicode_sentence_boundaries() {
        assert_eq!(
            texts("The tower is 330 m tall. It opened in 1889! Is it in Paris? Yes."),
            ["The tower is 330 m tall.", "It opened in 1889!", "Is it in Paris?", "Yes."]
        );
        // A decimal is no boundary; line breaks and list items are.
        assert_eq!(
            texts("Revenue grew 3.5 percent.\n- Paris has the tower\n- Rome has the Colosseum"),
            ["Revenue grew 3.5 percent.", "- Paris has the tower", "- Rome has the Colosseum"]
        );
        // CR LF and blank lines leave no empty sentence.
        assert_eq!(
            texts("One two three.\r\n\r\nFour five six."),
            ["One two three.", "Four five six."]
        );
    }

    #[test]
    fn a_title_or_an_initial_before_a_name_ends_no_sentence() {
        // UAX #29 cuts after any full stop followed by a space and a capital: "Dr." and "S."
        // would be sentences of their own, and what follows them a claim cut from its subject.
        assert_eq!(
            texts("In the film Dante's Peak, Dr. Harry Dalton was a geologist. Morocco has cases."),
            ["In the film Dante's Peak, Dr. Harry Dalton was a geologist.", "Morocco has cases."]
        );
        assert_eq!(
            texts("John S. McCain Jr. left the U.S. Naval Academy. F. W. Woolworth sold shoes."),
            ["John S. McCain Jr. left the U.S. Naval Academy.", "F. W. Woolworth sold shoes."]
        );
        // Text tokenised with its full stops apart ("the U.S ."), as some corpora are.
        assert_eq!(
            texts("He left the U.S . Naval Academy . Japan is in Asia ."),
            ["He left the U.S . Naval Academy .", "Japan is in Asia ."]
        );
        // A word that is no title, a line break, or the answer's end still ends a sentence.
        assert_eq!(
            texts("It was made by Apple Inc. So did I. Ask Dr.\nSmith came. Call Dr."),
            ["It was made by Apple Inc.", "So did I.", "Ask Dr.", "Smith came.", "Call Dr."]
        );
        let answer = "Mrs. Ünal met Prof. Šmid 😀 in St. Louis. Done now.";
        assert_eq!(texts(answer), ["Mrs. Ünal met Prof. Šmid 😀 in St. Louis.", "Done now."]);
        assert_spans_exact(answer);
    }

    #[test]
    fn offsets_are_exact_in_utf8_and_utf16_whatever_the_characters() {
        // Multi-byte letters, an emoji outside the BMP (a surrogate pair in UTF-16), a
        // combining mark, a zero-width joiner, a direction mark, CR LF, markup.
        let answer = "Zürich liegt am See. The 🗼 is in Paris, café au lait.\r\n\
                      Pa\u{200d}ris is \u{200e}marked\u{200f} text.\n<b>Bold</b> claims stay text.";
        assert_spans_exact(answer);
        let found = sentences(answer).unwrap();
        assert_eq!(found.len(), 4);
        let emoji = &found[1];
        assert_eq!(emoji.text, "The 🗼 is in Paris, café au lait.");
        // The emoji is 4 bytes and 2 UTF-16 units, "ü" 2 bytes and 1 unit.
        assert_eq!(emoji.span.start - emoji.span.start_utf16, 1);
        assert_eq!(emoji.span.end - emoji.span.end_utf16, 1 + 2 + 1);
        assert_eq!(found[3].text, "<b>Bold</b> claims stay text.");
        let combining = "Cafe\u{301} prices rose. They fell.";
        assert_spans_exact(combining);
        // What would show one sentence and check another is refused, named and placed.
        for (answer, at, character) in [
            ("Paris is \u{202e}reversed\u{202c} text.", 9, '\u{202e}'),
            ("Pa\u{200b}ris is a city.", 2, '\u{200b}'),
            ("A bell\u{7} rang twice.", 6, '\u{7}'),
        ] {
            match sentences(answer) {
                Err(AnswerError::Hidden { at: found, character: c, .. }) => {
                    assert_eq!((found, c), (at, character));
                }
                other => panic!("{answer:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn questions_lead_ins_and_greetings_are_not_checked() {
        let answer =
            "Hello! In summary: The tower is in Paris. Is it tall? Sure. It has three levels.";
        let marks: Vec<(String, bool)> = sentences(answer)
            .unwrap()
            .into_iter()
            .map(|sentence| (sentence.text, sentence.checkable))
            .collect();
        assert_eq!(
            marks,
            [
                ("Hello!".to_owned(), false),
                ("In summary: The tower is in Paris.".to_owned(), true),
                ("Is it tall?".to_owned(), false),
                ("Sure.".to_owned(), false),
                ("It has three levels.".to_owned(), true),
            ]
        );
        let lead_in = sentences("In summary:\nThe tower is in Paris.").unwrap();
        assert!(!lead_in[0].checkable && lead_in[1].checkable);
        let polite = sentences("Thanks for asking! It is tall. I hope this helps! Happy to help.")
            .unwrap()
            .into_iter()
            .map(|sentence| sentence.checkable)
            .collect::<Vec<_>>();
        assert_eq!(polite, [false, true, false, false]);
    }

    #[test]
    fn bad_answers_get_typed_errors_that_name_the_cap() {
        assert_eq!(sentences(""), Err(AnswerError::Empty));
        assert_eq!(sentences(" \n\t "), Err(AnswerError::Empty));
        let long = "a".repeat(MAX_ANSWER_CHARS + 1);
        let error = sentences(&long).unwrap_err();
        assert_eq!(error, AnswerError::TooLong { chars: MAX_ANSWER_CHARS + 1 });
        assert!(error.to_string().contains("50000"));
        let many = "It is so. ".repeat(MAX_SENTENCES + 1);
        assert_eq!(
            sentences(&many),
            Err(AnswerError::TooManySentences { count: MAX_SENTENCES + 1 })
        );
        let run_on = "word ".repeat(MAX_SENTENCE_CHARS);
        match sentences(&run_on) {
            Err(AnswerError::NoBoundary { span, chars }) => {
                assert_eq!(span.start, 0);
                assert!(chars > MAX_SENTENCE_CHARS);
            }
            other => panic!("a run-on answer is refused, not {other:?}"),
        }
        // At the caps exactly, accepted.
        assert_eq!(sentences(&"It is so. ".repeat(MAX_SENTENCES)).unwrap().len(), MAX_SENTENCES);
    }

    #[test]
    fn a_quote_is_found_verbatim_with_its_offsets_or_not_at_all() {
        let passage = "Le café 🗼 ferme à 18 h. The tower closes at 6 pm.";
        let span = quote_span(passage, "The tower closes at 6 pm.").unwrap();
        assert_eq!(&passage[span.start..span.end], "The tower closes at 6 pm.");
        let units: Vec<u16> = passage.encode_utf16().collect();
        assert_eq!(
            String::from_utf16(&units[span.start_utf16..span.end_utf16]).unwrap(),
            "The tower closes at 6 pm."
        );
        assert_eq!(quote_span(passage, "the tower closes"), None, "case differs: not verbatim");
        assert_eq!(quote_span(passage, ""), None);
    }
}
