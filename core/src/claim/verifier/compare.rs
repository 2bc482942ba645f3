//! The `comparedNumbers` feature: a claim's bound on a number ("more than 1,500 cases")
//! checked against the number the passage gives for it ("1,159 cases").
//!
//! A model this small reads "more than 1,500" and "1,159" as the same kind of statement: on
//! the dev claims it gave the supported and the contradicted claims with such a bound about
//! the same low `S`. The comparison itself is arithmetic, so it is done here, and only where
//! it is unambiguous:
//!
//! - the claim's bound is a comparison word or phrase (`more than`, `over`, `above`, `at
//!   least`, `less than`, `fewer than`, `under`, `below`, `at most`, and their `no`/`not`
//!   forms) right before a number (a currency sign between them is allowed), with its scale
//!   word (`thousand`, `million`, `billion`, `trillion`) and the word after it (the unit:
//!   `cases`, `%`, ...);
//! - the passage's numbers are its numbers with their scale and unit; a year (a whole number
//!   from 1500 to 2100 written without separators) is not one, unless the bound is a year too;
//! - the numbers the bound is compared with are the passage's numbers with the bound's unit,
//!   or, when none has it, those within a factor of 1.5 of the bound;
//! - the feature is `1` when the bound holds for every one of them, `-1` when it fails for
//!   every one, and `0` otherwise: no bound, no number to compare with, or numbers that
//!   disagree (a passage with 99 and 120 says nothing about "more than 100").
//!
//! A claim with several bounds is `-1` when one fails, else `1` when one holds.

use std::ops::Range;

/// How a claim bounds a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    Above,
    AtLeast,
    Below,
    AtMost,
}

impl Bound {
    fn name(self) -> &'static str {
        match self {
            Bound::Above => "more than",
            Bound::AtLeast => "at least",
            Bound::Below => "less than",
            Bound::AtMost => "at most",
        }
    }

    fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Bound::Above => value > bound,
            Bound::AtLeast => value >= bound,
            Bound::Below => value < bound,
            Bound::AtMost => value <= bound,
        }
    }
}

/// The comparison phrases, as lowercase words, longest first where one begins another.
const PHRASES: [(&[&str], Bound); 19] = [
    (&["no", "more", "than"], Bound::AtMost),
    (&["not", "more", "than"], Bound::AtMost),
    (&["no", "less", "than"], Bound::AtLeast),
    (&["not", "less", "than"], Bound::AtLeast),
    (&["no", "fewer", "than"], Bound::AtLeast),
    (&["not", "fewer", "than"], Bound::AtLeast),
    (&["in", "excess", "of"], Bound::Above),
    (&["more", "than"], Bound::Above),
    (&["greater", "than"], Bound::Above),
    (&["higher", "than"], Bound::Above),
    (&["over"], Bound::Above),
    (&["above"], Bound::Above),
    (&["exceeding"], Bound::Above),
    (&["at", "least"], Bound::AtLeast),
    (&["less", "than"], Bound::Below),
    (&["fewer", "than"], Bound::Below),
    (&["under"], Bound::Below),
    (&["below"], Bound::Below),
    (&["at", "most"], Bound::AtMost),
];

/// The longest number this reads, in characters: a longer run of digits is not a quantity
/// anyone compares, and parsing it would cost for nothing.
const LONGEST_NUMBER: usize = 32;

/// How many numbers of one text are read: a passage is a paragraph or a chunk, and a text
/// with more is read no further (bounded work on any input).
const MOST_NUMBERS: usize = 256;

#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    /// A word, as written (compared without regard to ASCII case), and where it ends in the
    /// text (a byte offset).
    Word(&'a str, usize),
    /// A number: its value, whether it is written as a year, and its bytes in the text.
    Number(f64, bool, Range<usize>),
    /// Any other character that is not whitespace.
    Mark(char),
}

/// A number with its unit, as the text gives them.
#[derive(Debug, Clone, PartialEq)]
struct Quantity<'a> {
    value: f64,
    year: bool,
    /// The number as written, with its scale word (`1,500`, `6.4 million`).
    written: &'a str,
    /// The word after the number (after its scale word), or `%` (for `%` and `percent`);
    /// empty if none.
    unit: &'a str,
}

/// The value of a run of digits, `,` and `.` (each between digits): `1,117` and `1,117.5` with
/// thousands separators, `3.5` and `3,5` with a decimal mark; anything else (`1,2,3`,
/// `1.234,5`) is not read.
fn value(run: &str) -> Option<f64> {
    let commas = run.matches(',').count();
    let dots = run.matches('.').count();
    let grouped = |s: &str| {
        let mut groups = s.split(',');
        let first = groups.next().unwrap_or_default();
        (1..=3).contains(&first.len()) && groups.all(|g| g.len() == 3)
    };
    let plain = match (commas, dots) {
        (0, 0 | 1) => run.to_owned(),
        (_, 0 | 1) if grouped(run.split('.').next().unwrap_or_default()) => run.replace(',', ""),
        (1, 0) => run.replace(',', "."),
        _ => return None,
    };
    plain.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// The end of the run of digits that starts at byte `start` of `text`: digits, and `,` or
/// `.` each followed by a digit (`1,117.5`). Also how `missingNumbers` reads a number.
pub(super) fn digit_run(text: &[u8], start: usize) -> usize {
    let mut i = start;
    while i < text.len()
        && (text[i].is_ascii_digit()
            || (matches!(text[i], b',' | b'.') && text.get(i + 1).is_some_and(u8::is_ascii_digit)))
    {
        i += 1;
    }
    i
}

fn tokens(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut numbers = 0;
    let mut i = 0;
    while numbers < MOST_NUMBERS {
        let Some(c) = text[i..].chars().next() else { break };
        if c.is_ascii_digit() {
            let start = i;
            i = digit_run(text.as_bytes(), i);
            let run = &text[start..i];
            // A number glued to letters ("3rd", "A320"; not "COVID-19") is a name, and one
            // after a slash a denominator ("7.1/10") or a date's part: not quantities.
            let glued = text[i..].chars().next().is_some_and(char::is_alphabetic)
                || text[..start].chars().next_back().is_some_and(|c| c.is_alphabetic() || c == '/');
            if run.len() <= LONGEST_NUMBER
                && !glued
                && let Some(v) = value(run)
            {
                let year =
                    run.len() == 4 && (1500.0..=2100.0).contains(&v) && !run.contains(['.', ',']);
                out.push(Token::Number(v, year, start..i));
                numbers += 1;
            }
        } else if c.is_alphabetic() {
            let start = i;
            i += text[i..]
                .find(|c: char| !c.is_alphanumeric() && c != '\'')
                .unwrap_or(text.len() - i);
            out.push(Token::Word(&text[start..i], i));
        } else {
            if !c.is_whitespace() {
                out.push(Token::Mark(c));
            }
            i += c.len_utf8();
        }
    }
    out
}

fn scale(word: &str) -> Option<f64> {
    [("thousand", 1e3), ("million", 1e6), ("billion", 1e9), ("trillion", 1e12)]
        .into_iter()
        .find_map(|(name, factor)| word.eq_ignore_ascii_case(name).then_some(factor))
}

/// The quantity whose number is `tokens[at]` in `text`, with its scale and unit.
fn quantity<'a>(text: &'a str, tokens: &[Token<'a>], at: usize) -> Option<Quantity<'a>> {
    let Some(Token::Number(value, year, bytes)) = tokens.get(at) else { return None };
    let (mut value, mut year, mut written) = (*value, *year, &text[bytes.clone()]);
    let mut next = at + 1;
    if let Some(&Token::Word(word, end)) = tokens.get(next)
        && let Some(factor) = scale(word)
    {
        value *= factor;
        year = false;
        // The number and its scale word, with what stands between them.
        written = &text[bytes.start..end];
        next += 1;
    }
    let unit = match tokens.get(next) {
        Some(Token::Word(word, _)) if word.eq_ignore_ascii_case("percent") => "%",
        Some(Token::Word(word, _)) => word,
        Some(Token::Mark('%')) => "%",
        _ => "",
    };
    Some(Quantity { value, year, written, unit })
}

/// The claim's bounds: each comparison phrase followed by a number.
fn bounds<'a>(text: &'a str, tokens: &[Token<'a>]) -> Vec<(Bound, Quantity<'a>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let phrase = PHRASES.iter().find(|(words, _)| {
            words.iter().enumerate().all(
                |(j, w)| matches!(tokens.get(i + j), Some(Token::Word(t, _)) if t.eq_ignore_ascii_case(w)),
            )
        });
        let Some(&(words, bound)) = phrase else {
            i += 1;
            continue;
        };
        let mut at = i + words.len();
        if matches!(tokens.get(at), Some(Token::Mark('$' | '£' | '€' | '¥'))) {
            at += 1;
        }
        if let Some(q) = quantity(text, tokens, at) {
            out.push((bound, q));
        }
        i += words.len();
    }
    out
}

/// Whether one bound holds against the passage's quantities: `Some((true or false, the number
/// nearest the bound))` when every number it is compared with agrees, `None` otherwise.
fn check<'a>(
    bound: Bound,
    claimed: &Quantity<'_>,
    passage: &'a [Quantity<'a>],
) -> Option<(bool, &'a Quantity<'a>)> {
    if claimed.value <= 0.0 {
        return None;
    }
    let candidates: Vec<&Quantity<'_>> =
        passage.iter().filter(|q| q.value > 0.0 && (claimed.year || !q.year)).collect();
    let same_unit: Vec<&Quantity<'_>> = if claimed.unit.is_empty() {
        Vec::new()
    } else {
        candidates.iter().copied().filter(|q| q.unit.eq_ignore_ascii_case(claimed.unit)).collect()
    };
    let compared: Vec<&Quantity<'_>> = if same_unit.is_empty() {
        candidates
            .into_iter()
            .filter(|q| {
                let ratio = q.value / claimed.value;
                (1.0 / 1.5..=1.5).contains(&ratio)
            })
            .collect()
    } else {
        same_unit
    };
    let distance = |q: &&Quantity<'_>| (q.value / claimed.value).ln().abs();
    let nearest = compared.iter().min_by(|a, b| distance(a).total_cmp(&distance(b)))?;
    let holds = bound.holds(nearest.value, claimed.value);
    compared
        .iter()
        .all(|q| bound.holds(q.value, claimed.value) == holds)
        .then_some((holds, *nearest))
}

/// A claim's bound on a number, checked against a passage ([`compare_numbers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// Whether the passage's numbers keep the bound.
    pub holds: bool,
    /// The claim's phrase for the bound, as this module names it (`more than`, `at most`, ...).
    pub bound: &'static str,
    /// The claim's number as the claim writes it, with its scale word (`1,500`).
    pub claimed: String,
    /// The passage's number nearest it among those compared, as the passage writes it.
    pub found: String,
}

impl Comparison {
    /// The feature's value: 1 when the bound holds, -1 when it fails.
    #[must_use]
    pub fn feature(&self) -> f64 {
        if self.holds { 1.0 } else { -1.0 }
    }
}

/// The decisive comparison of `claim`'s bounds against `passage` (see the module's docs): the
/// first bound that fails, else the first that holds; `None` when none can be decided.
#[must_use]
pub fn compare_numbers(claim: &str, passage: &str) -> Option<Comparison> {
    let claim_tokens = tokens(claim);
    let claimed = bounds(claim, &claim_tokens);
    if claimed.is_empty() {
        return None;
    }
    let passage_tokens = tokens(passage);
    let quantities: Vec<Quantity<'_>> =
        (0..passage_tokens.len()).filter_map(|at| quantity(passage, &passage_tokens, at)).collect();
    let mut decided = claimed.iter().filter_map(|(bound, q)| {
        let (holds, found) = check(*bound, q, &quantities)?;
        Some((holds, *bound, q.written, found.written))
    });
    // The first bound that fails, else the first that holds.
    let first = decided.next()?;
    let (holds, bound, claimed, found) =
        if first.0 { decided.find(|d| !d.0).unwrap_or(first) } else { first };
    Some(Comparison {
        holds,
        bound: bound.name(),
        claimed: claimed.to_owned(),
        found: found.to_owned(),
    })
}

/// The `comparedNumbers` feature of `claim` against `passage`: 1, -1, or 0 when
/// [`compare_numbers`] decides nothing.
#[must_use]
pub fn compared_numbers(claim: &str, passage: &str) -> f64 {
    compare_numbers(claim, passage).map_or(0.0, |c| c.feature())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::{Comparison, compare_numbers, compared_numbers};

    #[test]
    fn the_comparison_names_the_bound_and_both_numbers() {
        let passage = "There were 1,159 confirmed cases and 94 deaths.";
        let expected = Comparison {
            holds: false,
            bound: "more than",
            claimed: "1,500".to_owned(),
            found: "1,159".to_owned(),
        };
        let over = compare_numbers("Over 1,500 confirmed cases.", passage);
        assert_eq!(over, Some(expected.clone()));
        // The failed bound decides, wherever it stands.
        let both = "Fewer than 100 deaths and more than 1,500 confirmed cases.";
        assert_eq!(compare_numbers(both, passage), Some(expected));
        let scaled = compare_numbers("It earned over $6.4 million.", "It earned $6.5 million.")
            .map(|c| (c.holds, c.claimed, c.found));
        assert_eq!(scaled, Some((true, "6.4 million".to_owned(), "6.5 million".to_owned())));
        assert_eq!(compare_numbers("There were 1,500 confirmed cases.", passage), None);
    }

    #[test]
    fn a_bound_the_passages_number_breaks_is_minus_one_and_one_it_keeps_is_one() {
        let passage = "As of 1 June 2020, there were 1,159 confirmed cases and 94 deaths.";
        assert_eq!(compared_numbers("There were more than 1,500 confirmed cases.", passage), -1.0);
        assert_eq!(compared_numbers("There were more than 1,100 confirmed cases.", passage), 1.0);
        assert_eq!(compared_numbers("There were fewer than 1,200 confirmed cases.", passage), 1.0);
        assert_eq!(compared_numbers("There were under 1,000 confirmed cases.", passage), -1.0);
        assert_eq!(compared_numbers("There were at least 1,159 confirmed cases.", passage), 1.0);
        assert_eq!(compared_numbers("There were over 1,159 confirmed cases.", passage), -1.0);
        assert_eq!(
            compared_numbers("There were no more than 1,159 confirmed cases.", passage),
            1.0
        );
        assert_eq!(
            compared_numbers("There were not less than 1,200 confirmed cases.", passage),
            -1.0
        );
    }

    #[test]
    fn a_claim_without_a_bound_or_a_passage_without_its_number_says_nothing() {
        let passage = "As of 1 June 2020, there were 1,159 confirmed cases.";
        assert_eq!(compared_numbers("There were 1,500 confirmed cases.", passage), 0.0);
        assert_eq!(compared_numbers("The town is over the river.", passage), 0.0);
        assert_eq!(compared_numbers("More than 40 people came.", "Nobody counted them."), 0.0);
        // No number with the bound's unit, and none within a factor of 1.5 of it.
        assert_eq!(compared_numbers("It has more than 40 stations.", passage), 0.0);
    }

    #[test]
    fn numbers_that_disagree_about_the_bound_say_nothing() {
        let passage = "At least 120 people were hurt, and 99 buildings were damaged.";
        // The unit is "people": 120 holds.
        assert_eq!(compared_numbers("More than 100 people were hurt.", passage), 1.0);
        // "injured" is no unit the passage has: 120 and 99 are both near 100, and disagree.
        assert_eq!(compared_numbers("More than 100 injured.", passage), 0.0);
    }

    #[test]
    fn the_unit_chooses_the_number_compared_whatever_its_size() {
        let passage = "The film earned $210 million worldwide and 85 reviews, 39 of them positive.";
        assert_eq!(compared_numbers("It has more than 40 reviews.", passage), 1.0);
        assert_eq!(compared_numbers("It has more than 90 reviews.", passage), -1.0);
        // No unit: the numbers within a factor of 1.5 (210 million alone).
        assert_eq!(compared_numbers("It earned more than $200 million.", passage), 1.0);
        assert_eq!(compared_numbers("It earned over $200 million worldwide.", passage), 1.0);
        assert_eq!(compared_numbers("It earned under $0.2 billion worldwide.", passage), -1.0);
    }

    #[test]
    fn percentages_decimals_and_decimal_commas_are_read() {
        let passage = "It holds a 74% approval rating with an average score of 7.1/10.";
        assert_eq!(compared_numbers("Its approval rating is below 74%.", passage), -1.0);
        assert_eq!(compared_numbers("Its approval rating is above 70 percent.", passage), 1.0);
        assert_eq!(compared_numbers("Its average score is less than 7.2.", passage), 1.0);
        assert_eq!(
            compared_numbers("The wall is less than 168,5 m long.", "The wall is 168 m long."),
            1.0
        );
    }

    #[test]
    fn years_are_not_quantities_unless_the_bound_is_one() {
        let passage = "In 2019 the club had 1,900 members.";
        assert_eq!(compared_numbers("The club had over 1,800 members.", passage), 1.0);
        assert_eq!(compared_numbers("The club had over 2,000 members.", passage), -1.0);
        // Only a year near the bound, and the bound is no year: nothing to compare.
        assert_eq!(compared_numbers("It has over 2,000 trees.", "Planted in 2019."), 0.0);
    }

    #[test]
    fn names_with_digits_are_not_numbers() {
        let passage = "The A320 fleet grew to 300 aircraft during COVID-19.";
        assert_eq!(compared_numbers("The fleet has more than 250 aircraft.", passage), 1.0);
        assert_eq!(compared_numbers("The fleet has more than 310 aircraft.", passage), -1.0);
    }

    #[test]
    fn one_failed_bound_of_several_is_enough() {
        let passage = "It has 85 reviews and a 74% approval rating.";
        let claim = "It has more than 80 reviews and an approval rating over 80%.";
        assert_eq!(compared_numbers(claim, passage), -1.0);
    }

    #[test]
    fn any_text_is_read_without_a_panic_and_in_bounded_time() {
        let digits = "9".repeat(100_000);
        assert_eq!(compared_numbers(&format!("more than {digits} cases"), &digits), 0.0);
        let many = "1 ".repeat(100_000);
        assert_eq!(compared_numbers("more than 1 case", &many), -1.0);
        for text in
            ["", "more than", "more than $", "over 1,2,3", "under 0 cases", "over 1.", "1..2"]
        {
            let _ = compared_numbers(text, text);
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod properties {
    use proptest::prelude::*;

    use super::compared_numbers;

    /// Text made of what the reader looks for (phrases, numbers with separators and scales,
    /// units, currency, slashes) and anything else.
    fn text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("more than ".to_owned()),
            Just("no fewer than ".to_owned()),
            Just("under $".to_owned()),
            Just(" million ".to_owned()),
            Just("% ".to_owned()),
            Just("/".to_owned()),
            "[0-9]{1,5}([.,][0-9]{1,4}){0,3}",
            "[a-z]{1,8} ",
            any::<char>().prop_map(String::from),
        ];
        proptest::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn any_text_gives_one_of_three_values(claim in text(), passage in text()) {
            let value = compared_numbers(&claim, &passage);
            prop_assert!(value == 1.0 || value == -1.0 || value == 0.0);
        }

        #[test]
        fn a_bound_against_one_number_with_its_unit_is_the_comparison(
            bound in 1u32..1_000_000,
            found in 1u32..1_000_000,
            phrase in 0usize..4,
        ) {
            // Written with thousands separators ("1,500"), so no number is read as a year.
            let written = |n: u32| {
                let digits = n.to_string();
                let mut out = String::new();
                for (i, c) in digits.chars().enumerate() {
                    if i > 0 && (digits.len() - i).is_multiple_of(3) {
                        out.push(',');
                    }
                    out.push(c);
                }
                out
            };
            let (words, holds) = [
                ("more than", found > bound),
                ("at least", found >= bound),
                ("fewer than", found < bound),
                ("no more than", found <= bound),
            ][phrase];
            let claim = format!("The archive holds {words} {} letters.", written(bound));
            let passage = format!("In 1990 the archive held {} letters.", written(found));
            let expected = if holds { 1.0 } else { -1.0 };
            let got = compared_numbers(&claim, &passage);
            prop_assert_eq!(got, expected, "{} | {}", claim, passage);
        }
    }
}
