//! An answer's own citation marks: `[e1]`, `[1]`, `[2, 3]`, `[a][b]`, each naming a passage,
//! directly by its id or through a mapping the job gives.

use crate::segment::{Sentence, Span, checkable};

/// The longest label a mark may have (a corpus id is at most 256 bytes; a mark is shorter).
const MAX_LABEL: usize = 64;
/// The most marks a sentence's check takes into account; further ones are reported unchecked.
pub const MAX_MARKS: usize = 8;

/// A citation mark in an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mark {
    /// What it says, without brackets (`e1`).
    pub label: String,
    /// Where the bracketed group that holds it is in the answer.
    pub span: Span,
}

/// The marks of `text` (a piece of the answer at `at`, whose UTF-16 offset is `at_utf16`), in
/// order, and `text` without them. A mark is a bracketed group of labels (no spaces, brackets
/// or commas in one; commas between them) of which one `names` a passage, or whose labels
/// are all numbers (`[1]`: a mark even when nothing is mapped to it); it goes from the text
/// with the spaces before it. Other brackets (`[sic]`) stay text.
pub(super) fn marks(
    text: &str,
    at: usize,
    at_utf16: usize,
    names: impl Fn(&str) -> bool,
) -> (Vec<Mark>, String) {
    let mut found = Vec::new();
    let mut rest = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let Some(open) = text[i..].find('[').map(|o| i + o) else {
            rest.push_str(&text[i..]);
            break;
        };
        rest.push_str(&text[i..open]);
        let group = group(&text[open..]).filter(|(_, labels)| {
            labels.iter().any(|label| names(label))
                || labels.iter().all(|label| label.chars().all(|c| c.is_ascii_digit()))
        });
        let Some(labels) = group else {
            rest.push('[');
            i = open + 1;
            continue;
        };
        let end = open + labels.0;
        let start_utf16 = at_utf16 + text[..open].encode_utf16().count();
        let span = Span {
            start: at + open,
            end: at + end,
            start_utf16,
            end_utf16: start_utf16 + text[open..end].encode_utf16().count(),
        };
        found.extend(labels.1.into_iter().map(|label| Mark { label, span }));
        let trimmed = rest.trim_end().len();
        rest.truncate(trimmed);
        i = end;
    }
    (found, rest)
}

/// `sentence` cut after each mark that follows a sentence's end or leads it, when more text
/// follows: Unicode's rules keep `long. [e2] It was` in one sentence (a full stop followed,
/// past brackets, by a lower-case letter is an abbreviation's) and start one with `[3] Next`,
/// but such a mark belongs to the sentence before it. A piece of marks alone is given to that
/// sentence by the check.
pub(super) fn split_after_marks(
    sentence: Sentence,
    names: &impl Fn(&str) -> bool,
) -> Vec<Sentence> {
    let mut pieces = Vec::new();
    let mut rest = sentence;
    'cut: loop {
        let text = rest.text.as_str();
        let mut from = 0;
        while let Some(open) = text[from..].find('[').map(|o| from + o) {
            from = open + 1;
            let Some((len, labels)) = group(&text[open..]) else { continue };
            let is_mark = labels.iter().any(|label| names(label))
                || labels.iter().all(|label| label.chars().all(|c| c.is_ascii_digit()));
            let end = open + len;
            // After a sentence's end, or leading the sentence (then it is the last one's).
            let before = text[..open].trim_end();
            let ended = before.is_empty() || before.ends_with(['.', '!', '?']);
            let after = text[end..].trim_start();
            if !is_mark || !ended || !after.chars().any(char::is_alphanumeric) {
                continue;
            }
            let span = rest.span;
            let first_utf16 = text[..end].encode_utf16().count();
            let skip = text.len() - after.len();
            let skip_utf16 = text[..skip].encode_utf16().count();
            let first = &text[..end];
            pieces.push(Sentence {
                text: first.to_owned(),
                span: Span {
                    start: span.start,
                    end: span.start + end,
                    start_utf16: span.start_utf16,
                    end_utf16: span.start_utf16 + first_utf16,
                },
                checkable: checkable(first),
            });
            rest = Sentence {
                text: after.to_owned(),
                span: Span {
                    start: span.start + skip,
                    end: span.end,
                    start_utf16: span.start_utf16 + skip_utf16,
                    end_utf16: span.end_utf16,
                },
                checkable: checkable(after),
            };
            continue 'cut;
        }
        pieces.push(rest);
        return pieces;
    }
}

/// A group `[a, b]` at the start of `text`: its length in bytes and its labels, or `None`.
fn group(text: &str) -> Option<(usize, Vec<String>)> {
    let close = text.find(']')?;
    let inner = &text[1..close];
    let labels: Vec<String> = inner.split(',').map(|label| label.trim().to_owned()).collect();
    let good = |label: &String| {
        !label.is_empty()
            && label.len() <= MAX_LABEL
            && label.chars().all(|c| !c.is_whitespace() && !c.is_control() && !"[](),".contains(c))
    };
    labels.iter().all(good).then_some((close + 1, labels))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(text: &str) -> (Vec<String>, String) {
        let (found, rest) = marks(text, 0, 0, |label| label.starts_with('e'));
        (found.into_iter().map(|mark| mark.label).collect(), rest)
    }

    #[test]
    fn marks_are_read_and_taken_out_of_the_claim() {
        assert_eq!(
            labels("The bridge opened in 1932 [e1]."),
            (vec!["e1".to_owned()], "The bridge opened in 1932.".to_owned())
        );
        assert_eq!(
            labels("It is long [1][2, 3]."),
            (vec!["1".to_owned(), "2".to_owned(), "3".to_owned()], "It is long.".to_owned())
        );
        // Brackets that are not marks stay text: no label names a passage.
        assert_eq!(labels("A [sic] note [ and x[]"), (vec![], "A [sic] note [ and x[]".to_owned()));
        // A number is a mark whatever it names (the check reports what it finds).
        assert_eq!(labels("Cited [7]."), (vec!["7".to_owned()], "Cited.".to_owned()));
        assert_eq!(labels("f(x) [a b] [e1"), (vec![], "f(x) [a b] [e1".to_owned()));
        // A corpus id may hold `#` or `/`.
        assert_eq!(labels("Opened [e#2]."), (vec!["e#2".to_owned()], "Opened.".to_owned()));
    }

    #[test]
    fn a_mark_after_a_full_stop_ends_its_sentence() {
        let answer = "It is long. [e2] It was built in 1928. [3] Done, said the report.";
        let cut: Vec<Sentence> = crate::answer::sentences(answer)
            .unwrap()
            .into_iter()
            .flat_map(|sentence| split_after_marks(sentence, &|label: &str| label == "e2"))
            .collect();
        let texts: Vec<&str> = cut.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(
            texts,
            ["It is long. [e2]", "It was built in 1928.", "[3]", "Done, said the report."]
        );
        let units: Vec<u16> = answer.encode_utf16().collect();
        for sentence in &cut {
            assert_eq!(&answer[sentence.span.start..sentence.span.end], sentence.text);
            let utf16 = &units[sentence.span.start_utf16..sentence.span.end_utf16];
            assert_eq!(String::from_utf16(utf16).unwrap(), sentence.text);
        }
    }

    #[test]
    fn a_mark_span_is_exact_in_utf8_and_utf16() {
        let answer = "Émile 😀 wrote it [doc-2].";
        let (found, _) = marks(answer, 0, 0, |label| label == "doc-2");
        let span = found[0].span;
        assert_eq!(&answer[span.start..span.end], "[doc-2]");
        let units: Vec<u16> = answer.encode_utf16().collect();
        assert_eq!(
            String::from_utf16(&units[span.start_utf16..span.end_utf16]).unwrap(),
            "[doc-2]"
        );
        // A piece of an answer keeps the answer's offsets.
        let (found, _) = marks("x [9]", 10, 7, |_| false);
        assert_eq!((found[0].span.start, found[0].span.start_utf16), (12, 9));
    }
}
