//! Splitting a sentence into atomic claims, when the job asks for it (`decompose: true`): a
//! typed step whose submission is `{"claims": [...]}`, each claim then checked on its own.
//!
//! A model that splits may also invent, or copy: a claim none of whose words the answer has,
//! or an earlier sentence's, would be checked as if this sentence said it, and a faithful
//! sentence could fail for it. So a claim is kept only when at least half its words are the
//! sentence's, at most four come from the answer's text before it (a resolved "it"), and three
//! quarters are one or the other ([`grounded`]); a step that fails, or whose claims are all
//! dropped, leaves the sentence checked whole, and the report says why.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::claim::prompt::{DATA_NOTICE, DECOMPOSE_SYSTEM, decompose_prompt};
use crate::retrieve::tokenize::lower_words;
use crate::retry::RetryPolicy;
use crate::segment::{MAX_SENTENCE_CHARS, checkable};
use crate::step::{Step, step};

/// The most claims a sentence is split into.
pub const MAX_CLAIMS: usize = 4;

/// The output limit of the step: four short sentences and the call around them.
const OUTPUT_LIMIT: u32 = 512;

/// What the step submits: one to [`MAX_CLAIMS`] claims of 1 to 2,000 characters (its derived
/// schema, which the step validates against and asks constrained providers for).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Decomposition {
    /// The atomic claims, in the sentence's order.
    #[schemars(length(min = 1, max = 4), inner(length(min = 1, max = 2000)))]
    pub claims: Vec<String>,
}

/// The schema of a submission: one to [`MAX_CLAIMS`] non-empty claims, none longer than a
/// sentence may be.
#[must_use]
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "claims": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_CLAIMS,
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_SENTENCE_CHARS}
            }
        },
        "required": ["claims"],
        "additionalProperties": false
    })
}

/// The step that splits `sentence`, `earlier` being the answer's text before it, its call ids
/// from `first`.
pub(super) fn decompose_step(
    earlier: &str,
    sentence: &str,
    retry: RetryPolicy,
    first: u64,
) -> Step<Decomposition> {
    step::<Decomposition>(
        format!("{DECOMPOSE_SYSTEM}{DATA_NOTICE}"),
        decompose_prompt(earlier, sentence),
    )
    .constrained(schema())
    .output_limit(OUTPUT_LIMIT)
    .max_attempts(2)
    .max_turns(3)
    .retry(retry)
    .build()
    .expect("the decomposition step's configuration is valid")
    .starting_at(first)
}

/// The claims worth checking of a submission for `sentence` (`earlier` being the answer's text
/// before it): trimmed, each once, with something to check, and grounded ([`grounded`]); how
/// many were dropped as not grounded.
pub(super) fn keep(claims: Vec<String>, earlier: &str, sentence: &str) -> (Vec<String>, usize) {
    let own = words(sentence);
    let context = words(earlier);
    let mut kept: Vec<String> = Vec::new();
    let mut ungrounded = 0;
    for claim in claims {
        let claim = claim.trim().to_owned();
        if !checkable(&claim) || kept.contains(&claim) {
            continue;
        }
        if grounded(&claim, &own, &context) {
            kept.push(claim);
        } else {
            ungrounded += 1;
        }
    }
    (kept, ungrounded)
}

/// The most words a claim may take from the answer's earlier text: what a resolved reference
/// needs ("it" → "the Eiffel Tower"), not a sentence's worth.
const MAX_BORROWED: usize = 4;

/// Whether `claim` is the sentence's: at least half of its words are the sentence's own
/// (`own`), at most [`MAX_BORROWED`] come from the earlier text (`context`: what a pronoun may
/// name), and at least three quarters are one or the other. A claim of an earlier sentence, one
/// that adds an earlier sentence to this one, or an invented one, is not.
fn grounded(claim: &str, own: &[String], context: &[String]) -> bool {
    let claim_words = words(claim);
    if claim_words.is_empty() {
        return false;
    }
    let in_own = claim_words.iter().filter(|word| own.contains(word)).count();
    let borrowed =
        claim_words.iter().filter(|word| !own.contains(word) && context.contains(word)).count();
    let total = claim_words.len();
    2 * in_own >= total && borrowed <= MAX_BORROWED && 4 * (in_own + borrowed) >= 3 * total
}

/// The distinct lower-cased words of `text`, sorted.
fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = lower_words(text).collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_of_the_answers_words_are_kept_and_invented_ones_dropped() {
        let earlier = "The Eiffel Tower is in Paris. ";
        let sentence = "It was finished in 1889 and is 330 m tall.";
        let (kept, dropped) = keep(
            vec![
                " The Eiffel Tower was finished in 1889. ".to_owned(),
                "The Eiffel Tower is 330 m tall.".to_owned(),
                "The Eiffel Tower was finished in 1889.".to_owned(),
                "Gustave Eiffel designed the tower for the 1889 World Fair.".to_owned(),
                "Thanks!".to_owned(),
            ],
            earlier,
            sentence,
        );
        assert_eq!(
            kept,
            ["The Eiffel Tower was finished in 1889.", "The Eiffel Tower is 330 m tall."]
        );
        assert_eq!(dropped, 1);
    }

    /// Seen with Qwen2.5-Coder-0.5B on the composed dev answers: asked to split the third
    /// sentence, it also wrote the earlier sentences' claims, which the answer's words ground
    /// but which are not this sentence's.
    #[test]
    fn claims_of_earlier_sentences_are_not_this_sentences() {
        let earlier = "Charlotte is the largest city of North Carolina. Elizabeth of York's uncle was Richard III. ";
        let sentence = "The movie Kick-Ass 2 had negative reviews.";
        let (kept, dropped) = keep(
            vec![
                "The movie Kick-Ass 2 had negative reviews.".to_owned(),
                "Elizabeth of York's uncle was Richard III.".to_owned(),
                "Charlotte is the largest city of North Carolina. The movie Kick-Ass 2 had negative reviews.".to_owned(),
            ],
            earlier,
            sentence,
        );
        assert_eq!(kept, [sentence]);
        assert_eq!(dropped, 2);
        // A pronoun resolved from the earlier text keeps its claim.
        let (kept, _) = keep(
            vec!["The Eiffel Tower was finished in 1889.".to_owned()],
            "The Eiffel Tower is in Paris. ",
            "It was finished in 1889.",
        );
        assert_eq!(kept.len(), 1);
    }

    #[test]
    fn the_schema_bounds_the_claims() {
        let schema = schema();
        assert_eq!(schema["properties"]["claims"]["maxItems"], MAX_CLAIMS);
        assert_eq!(schema["properties"]["claims"]["minItems"], 1);
        assert_eq!(
            schema["properties"]["claims"]["items"]["maxLength"],
            crate::segment::MAX_SENTENCE_CHARS
        );
    }

    /// The schema a submission is validated against (derived) bounds it as the one constrained
    /// providers are asked for does.
    #[test]
    fn the_derived_schema_is_the_constrained_one() {
        let derived = serde_json::to_value(schemars::schema_for!(Decomposition)).unwrap();
        let claims = &derived["properties"]["claims"];
        assert_eq!(claims["minItems"], 1);
        assert_eq!(claims["maxItems"], MAX_CLAIMS);
        assert_eq!(claims["items"]["minLength"], 1);
        assert_eq!(claims["items"]["maxLength"], crate::segment::MAX_SENTENCE_CHARS);
        assert_eq!(derived["additionalProperties"], false);
    }
}
