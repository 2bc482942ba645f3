//! Checking a whole answer rather than one claim.
//!
//! The answer is split into sentences at Unicode's sentence boundaries (UAX #29, through the
//! `unicode-segmentation` crate, so abbreviations, decimals, lists and line breaks are cut as
//! that standard cuts them, but for a title or an initial before a name: "Dr. Harry Dalton" is
//! not cut after "Dr."), each sentence with its offsets into the answer in UTF-8 bytes and
//! in UTF-16 code units (what JavaScript's strings index), and whether it has anything to
//! check ([`sentences`]). [`AnswerCheck`] (the job kind `"answer"`) checks each such sentence
//! through the claim checker, the answer's own citation marks (`[e1]`, `[1]`) included, and
//! reports per sentence ([`report`]). With `decompose`, a typed step first splits each sentence
//! into at most [`MAX_CLAIMS`] atomic claims, each checked on its own and mapped back to its
//! sentence's span (or its own, where the claim is the answer's text verbatim).
//!
//! The answer is text: markup is not interpreted (an HTML tag is characters like any other).
//! Emoji, combining marks, zero-width joiners and direction marks keep their exact offsets;
//! characters that make text show otherwise than it reads (bidi embeddings and overrides,
//! invisible spaces, control characters) are refused, as in claims read from files.

mod check;
mod decompose;
mod marks;
pub mod report;

pub use crate::segment::{
    AnswerError, MAX_ANSWER_CHARS, MAX_SENTENCE_CHARS, MAX_SENTENCES, Sentence, Span, quote_span,
    sentences,
};
pub use check::{AnswerCheck, MAX_CONCURRENCY};
pub use decompose::{Decomposition, MAX_CLAIMS};
pub use marks::MAX_MARKS;
pub use report::{
    AnswerReport, ClaimReport, Counts, Decomposed, MarkHolds, MarkReport, SentenceFailure,
    SentenceReport, SentenceStatus,
};
